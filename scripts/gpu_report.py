#!/usr/bin/env python3
"""Tritium's GPU kernels beside Triton's, without a GPU: registers, spills, stack, shared
memory and the SASS instruction histogram of the K loop.

    python3 scripts/gpu_report.py DIR [--gate]     # DIR/manifest.tsv (examples/ptx_report.rs)
    python3 scripts/gpu_report.py --triton-only    # Triton's rows alone, a self-test
    scripts/dev gpu-report [--gate]                # builds DIR first

DIR/manifest.tsv has a header line and the tab-separated columns
`key sm num_warps num_stages shared_bytes ptx`: `key` names the kernel and config
(`matmul/f16/128x256x64/w8/s3`, `attention/f16/d64/128x64/w4/s3/causal`), `sm` is 80, 90
or 90a, `shared_bytes` the dynamic shared memory a launch provides (ptxas does not see it)
and `ptx` the PTX file, relative to DIR. Each PTX goes through the pinned ptxas
(`-v -warn-spills -warn-lmem-usage`, the cubin in DIR/sass/), its cubin through nvdisasm.
Under each matmul or attention row come Triton's tutorial kernels
(`benches/triton_kernels.py`) for the same key, compiled offline by `triton.compile` for
the same target as Triton's launcher compiles them for M=N=K=4096 / n_ctx=4096 (16-aligned
pointers, integer arguments divisible by 16, strides of 1 as constants): at sm 80 for
sm_80; at sm 90 twice, for sm_90a with DISABLE_MMA_V3=1 (Ampere's mma.sync) and for
sm_90a with wgmma. Triton's rows are assembled by the ptxas that Triton bundles and runs
(`--triton-ptxas pinned` swaps in the pinned one), and cached in
target/gpu-report/triton/. The table goes to stdout and every number to DIR/report.json.

The K loop is the outermost loop (a backward branch's [target, branch] address range) that
holds an HMMA, HGMMA or QGMMA (fp8); its instructions are counted statically, nested loops included
(`nest` says how many backward branches lie inside). NOPs, and instructions guarded by
`@!PT` (which never run: ptxas's padding), are counted apart and left out of `total`.
Where several such loops are outermost (the causal attention's off-band and diagonal
loops) the first in address order is shown and `loops` says how many there are.

`--gate` exits 1, naming the kernel, when a Tritium row spills, has a stack frame (local
memory), drew a ptxas spill or local-memory warning or a wgmma note (C75xx: wgmma
serialized, or a wait or arrive injected), or failed.

The tools install themselves on first use, pinned (PINS below), into a virtual environment
at $TRITIUM_GPU_TOOLS/venv (default target/gpu-tools/venv) that the script then re-runs
itself in; a stamp file of the pins keeps reruns from reinstalling. Triton needs no torch
for `triton.compile`, so none is installed. Only the standard library is imported at the
top, so scripts/test_gpu_report.py runs without the tools.
"""
import argparse
import collections
import contextlib
import functools
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import sysconfig
from pathlib import Path

# Verified with `pip index versions` / `pip download --no-deps` for CPython 3.11 on x86_64
# Linux. ptxas is CUDA 13.0's (driver 580); PyPI has no 13.0 cuobjdump or nvdisasm, so
# those are the oldest 13.x there (the disassembler's version does not change the SASS).
# Installed with --no-deps: nvcc's wheel requires nvvm/crt/runtime wheels that ptxas
# does not need, and Triton 3.9 requires nothing on Python >= 3.10.
PINS = {
    "nvidia-cuda-nvcc": "13.0.88",
    "nvidia-cuda-cuobjdump": "13.2.51",
    "nvidia-cuda-nvdisasm": "13.2.51",
    "triton": "3.9.0",
}
# Where the nvidia-cuda-* wheels put their binaries, under site-packages.
NVIDIA_BIN = Path("nvidia") / "cu13" / "bin"

ROOT = Path(__file__).resolve().parent.parent
KERNELS_PY = ROOT / "benches" / "triton_kernels.py"
TRITON_CACHE = ROOT / "target" / "gpu-report" / "triton"

# The K loop's opcode classes, in the table's order.
# (QGMMA: Hopper's fp8 `wgmma`.)
# (UTMALDG: a TMA load; SYNCS: an mbarrier operation, its phase waits among them.)
CLASSES = ["HMMA", "HGMMA", "QGMMA", "LDSM", "LDGSTS", "UTMALDG", "SYNCS", "LDS", "STS", "LDG",
           "BAR", "SHFL", "MUFU"]
MMA = {"HMMA", "HGMMA", "QGMMA"}
# The guards of instructions that never run (ptxas pads with `@!PT LDS RZ, [RZ]`): counted
# with the NOPs, not by their opcode.
NEVER = {"@!PT", "@!UPT"}

# The configs of Triton's tutorials that --triton-only compiles, and the targets of each.
SM80, SM90_MMA, SM90_WGMMA = "sm_80", "sm_90a:mma.sync", "sm_90a:wgmma"
TRITON_ONLY = (
    [(f"matmul/f16/{c}", [SM80, SM90_MMA, SM90_WGMMA])
     for c in ["128x256x64/w8/s3", "128x128x32/w4/s4"]]
    + [(f"attention/f16/{c}/{mode}", [SM80, SM90_MMA, SM90_WGMMA])
       for c in ["d64/128x64/w4/s3", "d128/128x64/w8/s3"] for mode in ["full", "causal"]]
    + [(f"attention/f16/d128/128x128/w8/s3/{mode}", [SM90_MMA, SM90_WGMMA])
       for mode in ["full", "causal"]]
    + [(f"attention/fp8e5/d64/128x64/w4/s3/{mode}", [SM90_MMA, SM90_WGMMA])
       for mode in ["full", "causal"]]
    + [("attention/fp8e5/d128/128x128/w8/s3/full", [SM90_MMA, SM90_WGMMA])]
    + [("matmul/fp8e5/128x256x128/w8/s3", [SM90_MMA, SM90_WGMMA])]
    + [("matmul_persistent/f16/128x256x64/w8/s3", [SM80, SM90_MMA, SM90_WGMMA])]
    + [("matmul_descriptor/f16/128x256x64/w8/s3", [SM80, SM90_MMA, SM90_WGMMA])]
    + [("matmul_descriptor_persistent/f16/128x256x64/w8/s3", [SM90_MMA, SM90_WGMMA])]
    + [(f"attention_descriptor/f16/{c}/{mode}", [SM90_MMA, SM90_WGMMA])
       for c in ["d64/128x64/w4/s3", "d128/128x128/w8/s3"] for mode in ["full", "causal"]]
)


# --- SASS --------------------------------------------------------------------------------

class Insn:
    """One SASS instruction: its address, guard, full opcode (qualifiers and all), base
    mnemonic (before the first dot), operands, and a branch's target address."""

    def __init__(self, addr, pred, opcode, operands, target=None, target_label=None):
        self.addr = addr
        self.pred = pred
        self.opcode = opcode
        self.base = opcode.split(".")[0]
        self.operands = operands
        self.target = target
        self.target_label = target_label

    def __repr__(self):
        return f"Insn({self.addr:#x} {self.pred or ''}{self.opcode} {self.operands})"


_ADDR = re.compile(r"^\s*/\*([0-9a-fA-F]+)\*/\s*(.*?)\s*;")
_LABEL = re.compile(r"^\s*(\.L\w*|[A-Za-z_$][\w$.]*)\s*:\s*(?://.*)?$")
_NVDISASM_FN = re.compile(r"^\s*\.text\.(\S+?)\s*:\s*$")
_CUOBJDUMP_FN = re.compile(r"^\s*Function\s*:\s*(\S+)")
_PRED = re.compile(r"^@!?U?P(?:T|\d+)\s+")
_LABEL_REF = re.compile(r"`\(([^)]+)\)")
_HEX_TARGET = re.compile(r"(?:^|[\s,])(0x[0-9a-fA-F]+)\s*$")


def parse_sass(text):
    """The functions of an `nvdisasm -c` or `cuobjdump -sass` listing, as an ordered dict
    name -> list of Insn sorted by address, branch targets resolved to addresses."""
    functions = collections.OrderedDict()
    labels = {}
    name, insns, pending = None, None, []
    for line in text.splitlines():
        m = _NVDISASM_FN.match(line) or _CUOBJDUMP_FN.match(line)
        if m:
            if name is not None:
                functions[name] = (insns, labels)
            name, insns, labels, pending = m.group(1), [], {}, []
            continue
        if insns is None:
            continue
        m = _ADDR.match(line)
        if m:
            addr = int(m.group(1), 16)
            for label in pending:
                labels[label] = addr
            pending = []
            body = m.group(2).strip().lstrip("{").rstrip("}").strip()
            pred = None
            pm = _PRED.match(body)
            if pm:
                pred = pm.group(0).strip()
                body = body[pm.end():]
            parts = body.split(None, 1)
            if not parts:
                continue
            opcode = parts[0]
            operands = parts[1].strip() if len(parts) > 1 else ""
            insn = Insn(addr, pred, opcode, operands)
            if insn.base in ("BRA", "JMP", "CALL", "BRX", "JMX", "SSY", "BSSY", "BREAK", "PBK"):
                lm = _LABEL_REF.search(operands)
                if lm:
                    insn.target_label = lm.group(1)
                else:
                    hm = _HEX_TARGET.search(operands)
                    if hm:
                        insn.target = int(hm.group(1), 16)
            insns.append(insn)
            continue
        m = _LABEL.match(line)
        if m:
            pending.append(m.group(1))
    if name is not None:
        functions[name] = (insns, labels)
    out = collections.OrderedDict()
    for fname, (insns, labels) in functions.items():
        for insn in insns:
            if insn.target is None and insn.target_label is not None:
                insn.target = labels.get(insn.target_label)
        insns.sort(key=lambda i: i.addr)
        out[fname] = insns
    return out


class Loop:
    """A backward branch's address range, [start, end], as indices into the function."""

    def __init__(self, i0, i1, insns):
        self.i0, self.i1 = i0, i1
        self.start, self.end = insns[i0].addr, insns[i1].addr

    def contains(self, other):
        return self.i0 <= other.i0 and other.i1 <= self.i1

    def __repr__(self):
        return f"Loop({self.start:#x}..{self.end:#x})"


def find_loops(insns):
    """Every backward `BRA` (any guard, any qualifier) as a Loop, in address order, but
    for a branch from out-of-line code after the last `EXIT` back into the function:
    ptxas places a wait's retry loop there (`L: TRYWAIT; @!P0 BRA L; BRA back`), and its
    jump back is no loop around the code in between."""
    index = {insn.addr: i for i, insn in enumerate(insns)}
    exits = [insn.addr for insn in insns if insn.base == "EXIT"]
    last_exit = exits[-1] if exits else None
    loops = []
    for i, insn in enumerate(insns):
        prev = insns[i - 1] if i else None
        spins = prev is not None and prev.base == "BRA" and prev.target == prev.addr - 16
        stub_return = (last_exit is not None and insn.addr > last_exit and spins
                       and insn.target is not None and insn.target < last_exit)
        if (insn.base == "BRA" and insn.target is not None and insn.target <= insn.addr
                and not stub_return):
            j = index.get(insn.target)
            if j is None:  # a target between instructions: the next one
                j = next((k for k, x in enumerate(insns) if x.addr >= insn.target), i)
            loops.append(Loop(j, i, insns))
    loops.sort(key=lambda l: (l.i0, -l.i1))
    return loops


def mma_loops(insns):
    """The outermost loops that hold an HMMA, HGMMA or QGMMA, in address order."""
    holding = [l for l in find_loops(insns)
               if any(x.base in MMA for x in insns[l.i0:l.i1 + 1])]
    outer = []
    for l in holding:
        if any(o.contains(l) and (o.i0, o.i1) != (l.i0, l.i1) for o in holding):
            continue
        if any((o.i0, o.i1) == (l.i0, l.i1) for o in outer):
            continue
        outer.append(l)
    return outer


def variant(insn):
    """The detail an opcode class keeps: widths of memory ops, LDSM's shape and transpose,
    the rest of the qualifiers for MMA, BAR, SHFL and MUFU."""
    quals = insn.opcode.split(".")[1:]
    base = insn.base
    if base == "LDSM":
        return ".".join([base] + [q for q in quals if q != "16"])
    if base in ("LDGSTS", "LDS", "STS", "LDG"):
        widths = [q for q in quals if q in ("U8", "S8", "U16", "S16", "32", "64", "128")]
        return f"{base}.{widths[-1] if widths else '32'}"
    return insn.opcode


def histogram(insns):
    """The counts of a run of instructions: per class, per variant, every opcode (guards
    ignored), and apart from them the NOPs and never-run (`@!PT`) instructions."""
    classes = collections.Counter()
    variants = collections.Counter()
    opcodes = collections.Counter()
    nops = total = 0
    for insn in insns:
        if insn.base == "NOP" or insn.pred in NEVER:
            nops += 1
            continue
        total += 1
        opcodes[insn.opcode] += 1
        if insn.base in CLASSES:
            classes[insn.base] += 1
            variants[variant(insn)] += 1
    return {
        "total": total,
        "nop": nops,
        "classes": {c: classes.get(c, 0) for c in CLASSES},
        "variants": dict(sorted(variants.items(),
                                key=lambda kv: (CLASSES.index(kv[0].split(".")[0]), kv[0]))),
        "opcodes": dict(opcodes.most_common()),
    }


def loop_stats(insns):
    """The K loop of a function (None when no loop holds an MMA) and its histogram."""
    outer = mma_loops(insns)
    if not outer:
        return None
    all_loops = find_loops(insns)
    result = []
    for l in outer:
        body = insns[l.i0:l.i1 + 1]
        nested = sum(1 for o in all_loops if l.contains(o) and o.i1 != l.i1)
        stats = histogram(body)
        stats.update({"start": l.start, "end": l.end, "nested": nested})
        result.append(stats)
    k = dict(result[0])
    k["loops"] = len(outer)
    k["all"] = result
    return k


def pick_function(functions, entries=(), prefer=None):
    """The function of a listing to report: the preferred name, the PTX's only entry, `k`,
    the only one, else the first that has a K loop."""
    if prefer and prefer in functions:
        return prefer
    entries = [e for e in entries if e in functions]
    if len(entries) == 1:
        return entries[0]
    if len(functions) == 1:
        return next(iter(functions))
    if "k" in functions:
        return "k"
    for name, insns in functions.items():
        if mma_loops(insns):
            return name
    return next(iter(functions), None)


# --- ptxas -------------------------------------------------------------------------------

# `ptxas info    : ...`, `ptxas-blackwell warning : ...`, `ptxas x.ptx, line 5; fatal : ...`
_PTXAS_LINE = re.compile(
    r"^\s*ptxas\S*(?:\s+(\S.*?,\s*line\s+\d+);)?\s+(info|warning|error|fatal)\s*:\s*(.*)$")


def parse_ptxas_log(text):
    """`ptxas -v`'s report: per function its registers, barriers, static shared memory,
    stack frame, spill stores and loads and cumulative stack; and the warnings, each with the
    function it names (or None)."""
    funcs = collections.OrderedDict()
    warnings = []
    errors = []
    current = None

    def fn(name):
        return funcs.setdefault(name, {"regs": 0, "barriers": 0, "smem": 0, "stack_frame": 0,
                                       "spill_stores": 0, "spill_loads": 0,
                                       "cumulative_stack": 0, "entry": False})

    for line in text.splitlines():
        m = _PTXAS_LINE.match(line)
        if m:
            where, kind, msg = m.groups()
            if where and kind != "info":
                msg = f"{msg} ({where})"
            # The wgmma notes (C75xx: serialized, waits or arrives injected) come as info.
            if kind == "warning" or (kind == "info" and re.match(r"\(C75\d\d\)", msg)):
                named = re.search(r"function '([^']+)'", msg)
                warnings.append({"function": named.group(1) if named else None, "text": msg})
                continue
            if kind in ("error", "fatal"):
                errors.append(msg)
                continue
            c = re.match(r"Compiling entry function '([^']+)'", msg)
            if c:
                current = c.group(1)
                fn(current)["entry"] = True
                continue
            c = re.match(r"Function properties for (\S+)", msg)
            if c:
                current = c.group(1)
                fn(current)
                continue
            if msg.startswith("Used ") and current is not None:
                f = fn(current)
                for pattern, field in [(r"Used (\d+) registers", "regs"),
                                       (r"used (\d+) barriers", "barriers"),
                                       (r"(\d+) bytes smem", "smem"),
                                       (r"(\d+) bytes cumulative stack size", "cumulative_stack")]:
                    v = re.search(pattern, msg)
                    if v:
                        f[field] = int(v.group(1))
            continue
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads",
                      line)
        if m and current is not None:
            f = fn(current)
            f["stack_frame"], f["spill_stores"], f["spill_loads"] = map(int, m.groups())
    return {"functions": funcs, "warnings": warnings, "errors": errors}


def is_spill_warning(text):
    return bool(re.search(r"spill|local memory|lmem|stack", text, re.I))


def is_wgmma_note(text):
    """ptxas's wgmma notes: serialized (C7510/C7511/C7515), or a wait or arrive injected."""
    return bool(re.match(r"\(C75\d\d\)", text))


def resources(log, name):
    """One function's numbers from a parsed ptxas log (the only entry when not named)."""
    funcs = log["functions"]
    if name not in funcs:
        entries = [n for n, f in funcs.items() if f["entry"]]
        name = entries[0] if len(entries) == 1 else name
    f = dict(funcs.get(name) or {"regs": None, "barriers": None, "smem": 0, "stack_frame": None,
                                  "spill_stores": None, "spill_loads": None,
                                  "cumulative_stack": None, "entry": False})
    f["warnings"] = [w["text"] for w in log["warnings"] if w["function"] in (None, name)]
    return f


# --- manifest and keys -------------------------------------------------------------------

MANIFEST_COLUMNS = ["key", "sm", "num_warps", "num_stages", "shared_bytes", "ptx"]


def read_manifest(path):
    lines = [l for l in Path(path).read_text().splitlines() if l.strip()]
    if not lines:
        raise ValueError(f"{path}: empty")
    header = lines[0].split("\t")
    if header[:len(MANIFEST_COLUMNS)] != MANIFEST_COLUMNS:
        raise ValueError(f"{path}: header {header}, wanted {MANIFEST_COLUMNS}")
    rows = []
    for n, line in enumerate(lines[1:], 2):
        cells = line.split("\t")
        if len(cells) < len(MANIFEST_COLUMNS):
            raise ValueError(f"{path}:{n}: {len(cells)} columns, wanted {len(MANIFEST_COLUMNS)}")
        row = dict(zip(MANIFEST_COLUMNS, cells))
        row["sm"] = row["sm"].strip().removeprefix("sm_")
        for k in ("num_warps", "num_stages", "shared_bytes"):
            row[k] = int(row[k])
        rows.append(row)
    return rows


_MATMUL_KEY = re.compile(
    r"^(matmul|matmul_persistent|matmul_descriptor|matmul_descriptor_persistent)/(f16|fp8e5)/"
    r"(\d+)x(\d+)x(\d+)/w(\d+)/s(\d+)$")
_ATTN_KEY = re.compile(
    r"^(attention|attention_descriptor)/(f16|fp8e5)/d(\d+)/(\d+)x(\d+)/w(\d+)/s(\d+)/"
    r"(full|causal)$")


def triton_spec(key):
    """The Triton compile of a key: kernel, signature, constexprs, options; None for a key
    with no Triton peer. The arguments are specialized as Triton's launcher does for the
    4096-sized problems: pointers and integers divisible by 16 carry tt.divisibility=16,
    an integer equal to 1 (a unit stride) becomes a constexpr."""
    m = _MATMUL_KEY.match(key)
    if m:
        bm, bn, bk, w, s = map(int, m.groups()[2:])
        size = 4096
        # fp8 as tutorial 03's benchmark runs it: E5M2 inputs, `b` passed as `b.T` (K-major).
        fp8 = m.group(2) == "fp8e5"
        operand = "*fp8e5" if fp8 else "*fp16"
        values = {"a_ptr": operand, "b_ptr": operand, "c_ptr": "*fp16", "M": size, "N": size,
                  "K": size, "stride_am": size, "stride_ak": 1,
                  "stride_bk": 1 if fp8 else size, "stride_bn": size if fp8 else 1,
                  "stride_cm": size, "stride_cn": 1}
        constexprs = {"BM": bm, "BN": bn, "BK": bk, "GROUP_M": 8}
        if m.group(1) == "matmul_descriptor_persistent":
            # Tutorial 09 through in-kernel descriptors on an H100's 132 SMs.
            values = {k: values[k] for k in ["a_ptr", "b_ptr", "c_ptr", "M", "N", "K"]}
            constexprs["NUM_SMS"] = 132
            return _spec("matmul_kernel_descriptor_persistent", values, constexprs, w, s)
        if m.group(1) == "matmul_descriptor":
            # Tutorial 03 through in-kernel tensor descriptors (TMA on Hopper).
            values = {k: values[k] for k in ["a_ptr", "b_ptr", "c_ptr", "M", "N", "K"]}
            constexprs["WARP_SPECIALIZE"] = False
            return _spec("matmul_kernel_descriptor", values, constexprs, w, s)
        if m.group(1) == "matmul_persistent":
            # Tutorial 09 on an H100's 132 SMs.
            constexprs["NUM_SMS"] = 132
            return _spec("matmul_kernel_persistent", values, constexprs, w, s)
        return _spec("matmul_kernel", values, constexprs, w, s)
    m = _ATTN_KEY.match(key)
    if m:
        d, bm, bn, w, s = map(int, m.groups()[2:7])
        stage = 3 if m.group(8) == "causal" else 1
        # fp8 as tutorial 06 runs it: E5M2 throughout, `v` transposed.
        t = "*fp8e5" if m.group(2) == "fp8e5" else "*fp16"
        values = {"q_ptr": t, "k_ptr": t, "v_ptr": t, "sm_scale": "fp32",
                  "lse_ptr": "*fp32", "out_ptr": t, "n_ctx": 4096}
        constexprs = {"D": d, "STAGE": stage, "BM": bm, "BN": bn}
        if m.group(1) == "attention_descriptor":
            # Tutorial 06's Hopper form over 4 x 32 heads (TMA on Hopper).
            values = dict(values, Z_H=128)
            values["n_ctx"] = values.pop("n_ctx")
            return _spec("attn_fwd_descriptor", values, constexprs, w, s)
        return _spec("attn_fwd", values, constexprs, w, s)
    return None


def _spec(fn, values, constexprs, warps, stages):
    signature, attrs, consts = {}, {}, dict(constexprs)
    for name, v in values.items():
        if isinstance(v, str):  # a pointer (16-aligned) or a float (never specialized)
            signature[name] = v
            if v.startswith("*"):
                attrs[name] = True
        elif v == 1:
            signature[name] = "constexpr"
            consts[name] = 1
        else:
            signature[name] = "i32"
            if v % 16 == 0:
                attrs[name] = True
    for name in constexprs:
        signature[name] = "constexpr"
    return {"fn": fn, "signature": signature, "constexprs": consts,
            "divisible_by_16": sorted(attrs), "num_warps": warps, "num_stages": stages}


def triton_targets(sm):
    """The Triton targets beside a manifest row's sm."""
    sm = str(sm).removeprefix("sm_")
    if sm == "80":
        return [SM80]
    if sm in ("90", "90a"):
        return [SM90_MMA, SM90_WGMMA]
    return []


# --- the tools ---------------------------------------------------------------------------

def tools_dir():
    return Path(os.environ.get("TRITIUM_GPU_TOOLS") or ROOT / "target" / "gpu-tools")


def venv_dir():
    return tools_dir() / "venv"


def in_venv():
    try:
        return Path(sys.prefix).resolve() == venv_dir().resolve()
    except OSError:
        return False


def ensure_tools():
    """Creates the venv and installs the pinned tools unless its stamp says they are in."""
    venv = venv_dir()
    python = venv / "bin" / "python"
    stamp = venv / "tritium-gpu-tools.json"
    want = {"pins": PINS}
    if python.exists() and stamp.exists():
        try:
            if json.loads(stamp.read_text()) == want:
                return python
        except ValueError:
            pass
    if sys.version_info < (3, 11):
        sys.exit("gpu_report: Python 3.11 or newer is needed (Triton's wheels)")
    print(f"gpu_report: installing {', '.join(f'{k}=={v}' for k, v in PINS.items())} "
          f"into {venv} (once)", file=sys.stderr, flush=True)
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    # pip's progress goes to stderr, leaving stdout to the table.
    subprocess.run([str(python), "-m", "pip", "install", "--no-deps",
                    "--disable-pip-version-check",
                    *[f"{k}=={v}" for k, v in PINS.items()]], check=True, stdout=sys.stderr)
    stamp.write_text(json.dumps(want) + "\n")
    return python


def nvidia_tool(name):
    for key in ("purelib", "platlib"):
        p = Path(sysconfig.get_paths()[key]) / NVIDIA_BIN / name
        if p.exists():
            return str(p)
    raise FileNotFoundError(f"{name} not under {NVIDIA_BIN} in the venv's site-packages")


@functools.lru_cache(maxsize=None)
def tool_version(path):
    out = subprocess.run([path, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"V(\d+\.\d+\.\d+)", out)
    return m.group(1) if m else "?"


def disassemble(cubin, sass_path=None, reuse=False):
    """nvdisasm -c of a cubin (cuobjdump -sass if nvdisasm fails), written beside it; with
    `reuse`, a listing already there and newer than the cubin is read instead."""
    if reuse and sass_path and Path(sass_path).exists() and (
            Path(sass_path).stat().st_mtime >= Path(cubin).stat().st_mtime):
        return Path(sass_path).read_text()
    r = subprocess.run([nvidia_tool("nvdisasm"), "-c", str(cubin)], capture_output=True,
                       text=True)
    text = r.stdout
    if r.returncode != 0 or not text.strip():
        r = subprocess.run([nvidia_tool("cuobjdump"), "-sass", str(cubin)], capture_output=True,
                           text=True)
        text = r.stdout
        if r.returncode != 0:
            raise RuntimeError(f"nvdisasm and cuobjdump failed on {cubin}: {r.stderr.strip()}")
    if sass_path:
        Path(sass_path).write_text(text)
    return text


def one_line(e):
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0] if text else ''}"


# --- rows --------------------------------------------------------------------------------

def sass_row(row, cubin, name=None, entries=(), reuse=False):
    """Fills a row's loop columns from a cubin."""
    functions = parse_sass(disassemble(cubin, Path(cubin).with_suffix(".sass"), reuse))
    fname = pick_function(functions, entries, prefer=name)
    row["function"] = fname
    row["loop"] = loop_stats(functions[fname]) if fname else None


def resource_row(row, log, name):
    r = resources(log, name)
    row.update({
        "regs": r["regs"], "barriers": r["barriers"], "stack_frame": r["stack_frame"],
        "cumulative_stack": r["cumulative_stack"], "spill_stores": r["spill_stores"],
        "spill_loads": r["spill_loads"], "static_smem": r["smem"],
        "ptxas_warnings": r["warnings"],
    })


def tritium_row(dir_, m, ptxas):
    """Assembles and measures one manifest row."""
    sm = m["sm"]
    row = {"side": "tritium", "key": m["key"], "target": f"sm_{sm}", "num_warps": m["num_warps"],
           "num_stages": m["num_stages"], "ptx": m["ptx"], "error": None, "loop": None}
    ptx = dir_ / m["ptx"]
    out = dir_ / "sass"
    out.mkdir(exist_ok=True)
    cubin = out / (Path(m["ptx"]).stem + ".cubin")
    try:
        text = ptx.read_text()
        entries = re.findall(r"\.entry\s+([\w$]+)", text)
        r = subprocess.run([ptxas, f"-arch=sm_{sm}", "-v", "-warn-spills", "-warn-lmem-usage",
                            "-o", str(cubin), str(ptx)], capture_output=True, text=True)
        log_text = r.stderr + r.stdout
        (out / (Path(m["ptx"]).stem + ".ptxas.log")).write_text(log_text)
        log = parse_ptxas_log(log_text)
        if r.returncode != 0:
            raise RuntimeError("ptxas: " + ("; ".join(log["errors"]) or log_text.strip()[:300]))
        name = entries[0] if len(entries) == 1 else ("k" if "k" in entries else None)
        resource_row(row, log, name)
        row["shared"] = m["shared_bytes"] + (row["static_smem"] or 0)
        row["cubin"] = str(cubin)
        sass_row(row, cubin, name, entries)
    except Exception as e:  # one row failing leaves the others
        row["error"] = one_line(e)
    return row


class TritonSide:
    """Triton's kernels compiled offline, cached by key, target, Triton and ptxas."""

    def __init__(self, ptxas_mode, pinned_ptxas):
        TRITON_CACHE.mkdir(parents=True, exist_ok=True)
        os.environ.setdefault("TRITON_CACHE_DIR", str(TRITON_CACHE / "triton-cache"))
        # Triton 3.9 warns when this is unset; 1 is its default (FP fusion on), which the
        # launcher on the GPU uses too.
        os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
        if ptxas_mode == "pinned":
            os.environ["TRITON_PTXAS_PATH"] = pinned_ptxas
            os.environ["TRITON_PTXAS_BLACKWELL_PATH"] = pinned_ptxas
        import triton
        from triton.backends.nvidia import compiler as nvc
        self.triton = triton
        self.version = triton.__version__
        self.ptxas = {SM80: nvc.get_ptxas(80), SM90_WGMMA: nvc.get_ptxas(90)}
        self.ptxas_versions = {t: tool_version(p.path) for t, p in self.ptxas.items()}
        self.kernels = None
        self.source_hash = hashlib.sha256(KERNELS_PY.read_bytes()).hexdigest()[:16]

    def _kernels(self):
        if self.kernels is None:
            sys.path.insert(0, str(KERNELS_PY.parent))
            import triton_kernels
            self.kernels = triton_kernels
        return self.kernels

    def compile(self, key, target, spec):
        """The cached compile of a key for a target: a dict of cubin path, name, shared
        bytes, ptxas log."""
        ptxas = self.ptxas[SM80 if target == SM80 else SM90_WGMMA]
        ident = json.dumps({"key": key, "target": target, "triton": self.version,
                            "ptxas": [ptxas.path, tool_version(ptxas.path)],
                            "source": self.source_hash,
                            "spec": {k: v for k, v in spec.items()}}, sort_keys=True)
        digest = hashlib.sha256(ident.encode()).hexdigest()[:12]
        where = TRITON_CACHE / self.version / target.replace(":", "-") / (
            key.replace("/", "_") + "-" + digest)
        meta_path = where / "meta.json"
        if meta_path.exists():
            return json.loads(meta_path.read_text()), where
        triton = self.triton
        from triton.compiler import ASTSource
        from triton.backends.compiler import GPUTarget
        fn = getattr(self._kernels(), spec["fn"])
        attrs = {(fn.arg_names.index(n),): [["tt.divisibility", 16]]
                 for n in spec["divisible_by_16"]}
        src = ASTSource(fn=fn, signature=spec["signature"], constexprs=spec["constexprs"],
                        attrs=attrs)
        arch = 80 if target == SM80 else 90
        # DISABLE_MMA_V3 is read by Triton's C++ (getenv on each query, one of its
        # cache-invalidating variables), so it is set around the one compile.
        saved = os.environ.pop("DISABLE_MMA_V3", None)
        if target == SM90_MMA:
            os.environ["DISABLE_MMA_V3"] = "1"
        triton.knobs.nvidia.dump_ptxas_log = True
        triton.knobs.compilation.always_compile = True
        log = io.StringIO()
        try:
            with contextlib.redirect_stdout(log):
                k = triton.compile(src, target=GPUTarget("cuda", arch, 32),
                                   options={"num_warps": spec["num_warps"],
                                            "num_stages": spec["num_stages"]})
        finally:
            os.environ.pop("DISABLE_MMA_V3", None)
            if saved is not None:
                os.environ["DISABLE_MMA_V3"] = saved
        where.mkdir(parents=True, exist_ok=True)
        (where / "kernel.cubin").write_bytes(k.asm["cubin"])
        (where / "kernel.ptx").write_text(k.asm["ptx"])
        meta = {"key": key, "target": target, "name": k.metadata.name,
                "shared": k.metadata.shared, "num_warps": k.metadata.num_warps,
                "num_stages": k.metadata.num_stages, "arch": k.metadata.arch,
                "ptxas": ptxas.path, "ptxas_version": tool_version(ptxas.path),
                "triton": self.version, "ptxas_log": log.getvalue(), "spec": spec}
        meta_path.write_text(json.dumps(meta, indent=1) + "\n")
        return meta, where

    def warp_specialize(self, arch):
        """What `warp_specialize=True` changes in tutorial 03's descriptor matmul at its
        largest config for `sm_{arch}`: warps, `setmaxnreg`s and named barriers of the PTX
        with it and without, and whether the two PTX texts are the same."""
        from triton.compiler import ASTSource
        from triton.backends.compiler import GPUTarget
        spec = triton_spec("matmul_descriptor/f16/128x256x64/w8/s3")
        fn = getattr(self._kernels(), spec["fn"])
        out = {}
        for ws in (False, True):
            src = ASTSource(fn=fn, signature=spec["signature"],
                            constexprs=dict(spec["constexprs"], WARP_SPECIALIZE=ws))
            k = self.triton.compile(src, target=GPUTarget("cuda", arch, 32),
                                    options={"num_warps": spec["num_warps"],
                                             "num_stages": spec["num_stages"]})
            ptx = k.asm["ptx"]
            # The entry's name differs with its constexprs: compare the code without it.
            body = ptx.replace(k.metadata.name, "k")
            named = len(re.findall(r"\bbar\.sync\s+[1-9]", ptx))
            out[ws] = {"warps": k.metadata.num_warps, "setmaxnreg": ptx.count("setmaxnreg"),
                       "named_barriers": named, "body": body}
        out["same_ptx"] = out[False]["body"] == out[True]["body"]
        for ws in (False, True):
            del out[ws]["body"]
        return out

    def row(self, key, target):
        spec = triton_spec(key)
        row = {"side": "triton", "key": key, "target": target, "error": None, "loop": None}
        if spec is None:
            row["error"] = "no Triton peer for this key"
            return row
        row.update({"num_warps": spec["num_warps"], "num_stages": spec["num_stages"]})
        try:
            meta, where = self.compile(key, target, spec)
            resource_row(row, parse_ptxas_log(meta["ptxas_log"]), meta["name"])
            row["shared"] = meta["shared"] + (row["static_smem"] or 0)
            row["ptxas_version"] = meta["ptxas_version"]
            row["cubin"] = str(where / "kernel.cubin")
            sass_row(row, where / "kernel.cubin", meta["name"], reuse=True)
        except Exception as e:
            row["error"] = one_line(e)
        return row


# --- output ------------------------------------------------------------------------------

def kib(n):
    """Bytes as the table shows them: 0, 512B, 96K, 100.5K."""
    if n is None:
        return "?"
    if n == 0 or n % 1024 == 0:
        return f"{n // 1024}K" if n else "0"
    return f"{n}B" if n < 1024 else f"{n / 1024:.1f}K"


def fmt_row(row):
    """A row's cells, in the order of HEAD."""
    cells = [row["key"], row["side"], row["target"]]
    if row.get("error"):
        return cells + ["error: " + row["error"]]
    warn = "!" if any(is_spill_warning(w) for w in row.get("ptxas_warnings", [])) else ""
    spill = f"{row['spill_stores']}+{row['spill_loads']}{warn}"
    stack = max(row["stack_frame"] or 0, row["cumulative_stack"] or 0)
    cells += [str(row["regs"]), spill, str(stack), kib(row.get("shared"))]
    loop = row.get("loop")
    if not loop:
        return cells + ["-"] * (3 + len(CLASSES) + 2)
    cells += [str(loop["loops"]), str(loop["nested"]), str(loop["total"])]
    cells += [str(loop["classes"][c]) for c in CLASSES]
    cells += [str(loop["nop"])]
    cells += [" ".join(f"{v}:{n}" for v, n in loop["variants"].items()
                       if v.split(".")[0] in ("HMMA", "HGMMA", "QGMMA", "LDSM", "LDGSTS", "LDS",
                                              "STS", "LDG"))]
    return cells


HEAD = ["key", "side", "target", "regs", "spill", "stack", "smem", "loops", "nest", "total",
        *CLASSES, "NOP", "detail"]


def table(rows):
    cells = [HEAD] + [fmt_row(r) for r in rows]
    # An error row's last cell runs on, unpadded, as the detail column does.
    widths = [max([len(c[i]) for c in cells if i < len(c) - 1] or [0]) for i in range(len(HEAD))]
    lines = []
    for c in cells:
        parts = []
        for i, v in enumerate(c):
            if i == len(c) - 1:
                parts.append(v)
            elif i < 3:
                parts.append(v.ljust(widths[i]))
            else:
                parts.append(v.rjust(widths[i]))
        lines.append("  ".join(parts).rstrip())
    return "\n".join(lines)


def gate_failures(rows):
    bad = []
    for r in rows:
        if r["side"] != "tritium":
            continue
        why = []
        if r.get("error"):
            why.append(r["error"])
        else:
            if (r["spill_stores"] or 0) + (r["spill_loads"] or 0) > 0:
                why.append(f"spills {r['spill_stores']}+{r['spill_loads']} bytes")
            stack = max(r["stack_frame"] or 0, r["cumulative_stack"] or 0)
            if stack > 0:
                why.append(f"stack {stack} bytes")
            why += [f"ptxas warning: {w}" for w in r["ptxas_warnings"]
                    if is_spill_warning(w) or is_wgmma_note(w)]
        if why:
            bad.append(f"{r['key']} ({r['target']}, {r.get('ptx', '')}): " + "; ".join(why))
    return bad


def header(ptxas_version, triton_side):
    lines = [f"# ptxas {ptxas_version} (pinned, Tritium's rows)"]
    if triton_side:
        v = triton_side.ptxas_versions
        lines.append(f"# Triton {triton_side.version}, its rows assembled by ptxas "
                     f"{v[SM80]} (sm_80) and {v[SM90_WGMMA]} (sm_90a)")
    lines.append("# spill: stores+loads bytes (! a ptxas spill/lmem warning); stack: bytes; "
                 "smem: shared memory, dynamic included")
    lines.append("# loop columns: the K loop (outermost loop holding HMMA/HGMMA/QGMMA), counted "
                 "statically per trip; loops: how many such loops (first shown); nest: backward "
                 "branches inside; total excludes NOPs and @!PT (never-run) instructions, "
                 "counted under NOP; detail: variants (LDGSTS/LDS/STS/LDG by "
                 "width in bits, LDSM.MT88 = transposed)")
    return "\n".join(lines)


# --- main --------------------------------------------------------------------------------

def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", nargs="?", help="the directory of manifest.tsv")
    ap.add_argument("--gate", action="store_true",
                    help="exit 1 when a Tritium kernel spills or uses local memory")
    ap.add_argument("--triton-only", action="store_true",
                    help="Triton's rows for the tutorial configs alone")
    ap.add_argument("--no-triton", action="store_true", help="Tritium's rows alone")
    ap.add_argument("--warp-specialize", action="store_true",
                    help="what Triton's warp_specialize=True changes in the descriptor "
                         "matmul on sm_90a and sm_100a, and nothing else")
    ap.add_argument("--triton-ptxas", choices=["triton", "pinned"], default="triton",
                    help="assemble Triton's kernels with the ptxas Triton bundles (as it runs "
                         "them; default) or the pinned one")
    args = ap.parse_args(argv)
    if not args.dir and not args.triton_only and not args.warp_specialize:
        ap.error("DIR, --triton-only or --warp-specialize")

    if not in_venv():
        if os.environ.get("TRITIUM_GPU_REPORT_REEXEC"):
            sys.exit(f"gpu_report: {sys.executable} does not run in {venv_dir()}")
        python = ensure_tools()
        env = dict(os.environ, TRITIUM_GPU_REPORT_REEXEC="1")
        os.execve(str(python), [str(python), str(Path(__file__).resolve()), *argv], env)

    ptxas = nvidia_tool("ptxas")
    ptxas_version = tool_version(ptxas)
    triton_side = None
    if not args.no_triton:
        triton_side = TritonSide(args.triton_ptxas, ptxas)

    if args.warp_specialize:
        print(f"# Triton {triton_side.version}: tutorial 03 through tensor descriptors, "
              "128x256x64, 8 warps, 3 stages, warp_specialize=False / True")
        for arch in (90, 100):
            w = triton_side.warp_specialize(arch)
            print(f"sm_{arch}a  warps {w[False]['warps']} / {w[True]['warps']}  "
                  f"setmaxnreg {w[False]['setmaxnreg']} / {w[True]['setmaxnreg']}  "
                  f"named barriers {w[False]['named_barriers']} / "
                  f"{w[True]['named_barriers']}  same PTX: {w['same_ptx']}")
        return 0

    rows = []
    if args.triton_only:
        for key, targets in TRITON_ONLY:
            for t in targets:
                rows.append(triton_side.row(key, t))
        out_json = TRITON_CACHE / "report.json"
    else:
        dir_ = Path(args.dir)
        manifest = dir_ / "manifest.tsv"
        try:
            entries = read_manifest(manifest)
        except (OSError, ValueError) as e:
            sys.exit(f"gpu_report: {e}")
        for m in entries:
            rows.append(tritium_row(dir_, m, ptxas))
            if triton_side and triton_spec(m["key"]):
                for t in triton_targets(m["sm"]):
                    rows.append(triton_side.row(m["key"], t))
        out_json = dir_ / "report.json"

    print(header(ptxas_version, triton_side))
    print(table(rows))
    report = {"ptxas": {"path": ptxas, "version": ptxas_version},
              "triton": ({"version": triton_side.version,
                          "ptxas": {t: {"path": p.path, "version": triton_side.ptxas_versions[t]}
                                    for t, p in triton_side.ptxas.items()},
                          "ptxas_mode": args.triton_ptxas} if triton_side else None),
              "pins": PINS, "rows": rows}
    out_json.parent.mkdir(parents=True, exist_ok=True)
    out_json.write_text(json.dumps(report, indent=1) + "\n")
    print(f"# every number in {out_json}")
    if args.gate:
        bad = gate_failures(rows)
        if bad:
            for b in bad:
                print(f"gpu_report: gate: {b}", file=sys.stderr)
            return 1
        print("# gate: no Tritium kernel spills or uses local memory")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
