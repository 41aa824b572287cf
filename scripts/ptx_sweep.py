#!/usr/bin/env python3
"""Every kernel the CUDA emulator ran, through ptxas: the PTX a GPU would load, assembled.

    scripts/dev ptx-sweep [--fuzz-minutes M] [--seed S]   # the tests (and fuzzed programs)
    python3 scripts/ptx_sweep.py DIR [--strict]           # the files already under DIR

The emulator runs the CUDA code generator's output built for the host, which says nothing
of whether ptxas takes the PTX a GPU launch of the same kernel loads: inline PTX operands
and constraints, instructions the target lacks, registers and spills. With
TRITIUM_EMULATOR_PTX=DIR the emulator also writes that PTX, one file per distinct kernel
(`tritium_<kernel>_<hash>.sm_80.ptx`, or `.sm_90.ptx` where it ran Hopper's code; an
`.error` file where the PTX compile failed: a failure, but for the designed refusal of
custom ops with host bitcode only). `scripts/dev ptx-sweep` runs the emulated
tests of both passes of `scripts/dev test` (and a fuzz run) so, then this script
assembles each file with the pinned ptxas of scripts/gpu_report.py (`-arch sm_80` or
`sm_90a`, `-v --warn-on-spills`) and prints one line per kernel that failed or drew a
warning: errors (and `.error` files) fail the sweep; spills, local memory and the wgmma
notes (C75xx: serialized) are listed and fail it only with --strict.
"""
import argparse
import concurrent.futures
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_report  # noqa: E402  (the tools and the ptxas log parser)


# The refusal of a kernel whose custom op has host bitcode only (the emulator runs it; a
# GPU compile needs the op's NVPTX bitcode): by design, not a failure of the sweep.
HOST_ONLY = "CUDA needs bitcode compiled for nvptx64-nvidia-cuda"


def arch_of(path):
    """ptxas's `-arch` for a swept file: `sm_90` files are Hopper's code (`sm_90a`)."""
    sm = Path(path).name.rsplit(".sm_", 1)[-1].split(".")[0]
    return "sm_90a" if sm == "90" else f"sm_{sm}"


def verdict(rc, log, prints=False):
    """(errors, warnings) of one ptxas run: its exit status and `-v` output. A kernel that
    `prints` (calls `vprintf`, `device_print`) has a stack frame for the arguments and its
    `wgmma`s serialized around the call, as any CUDA printf does: not warnings."""
    parsed = gpu_report.parse_ptxas_log(log)
    errors = list(parsed["errors"])
    if rc != 0 and not errors:
        errors.append(f"ptxas exited with {rc}: {log.strip()[-300:]}")
    # Spills are named once, from each entry's numbers below.
    warnings = [w["text"] for w in parsed["warnings"]
                if not gpu_report.is_spill_warning(w["text"])
                and not (prints and "at a function call" in w["text"])]
    for name, f in parsed["functions"].items():
        spilled = f["spill_stores"] or f["spill_loads"]
        if f["entry"] and (spilled or (f["stack_frame"] and not prints)):
            warnings.append(f"{name}: {f['stack_frame']} bytes stack frame, "
                            f"{f['spill_stores']}+{f['spill_loads']} bytes spilled")
    return errors, warnings


def assemble(ptxas, path):
    out = subprocess.run([ptxas, f"-arch={arch_of(path)}", "-v", "--warn-on-spills", str(path),
                          "-o", os.devnull], capture_output=True, text=True)
    prints = "vprintf" in Path(path).read_text()
    return verdict(out.returncode, out.stdout + out.stderr, prints)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir", help="the directory TRITIUM_EMULATOR_PTX named")
    ap.add_argument("--strict", action="store_true",
                    help="fail on spills, local memory and wgmma notes too")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = ap.parse_args(argv)

    if not gpu_report.in_venv():
        if os.environ.get("TRITIUM_GPU_REPORT_REEXEC"):
            sys.exit(f"ptx_sweep: {sys.executable} does not run in {gpu_report.venv_dir()}")
        python = gpu_report.ensure_tools()
        env = dict(os.environ, TRITIUM_GPU_REPORT_REEXEC="1")
        os.execve(str(python), [str(python), str(Path(__file__).resolve()), *argv], env)

    ptxas = gpu_report.nvidia_tool("ptxas")
    files = sorted(Path(args.dir).glob("*.ptx"))
    failed = sorted(Path(args.dir).glob("*.error"))
    if not files and not failed:
        sys.exit(f"ptx_sweep: no PTX under {args.dir} (was TRITIUM_EMULATOR_PTX set?)")
    bad = 0
    refused = 0
    for path in failed:
        message = path.read_text().strip()
        if HOST_ONLY in message:
            refused += 1
            print(f"refused {path.name}: {message[:300]}")
            continue
        bad += 1
        print(f"ERROR {path.name}: the PTX compile failed: {message[:400]}")
    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        results = pool.map(lambda p: (p, assemble(ptxas, p)), files)
        warned = 0
        for path, (errors, warnings) in results:
            for e in errors:
                print(f"ERROR {path.name}: {e}")
            for w in warnings:
                print(f"warning {path.name}: {w}")
            bad += bool(errors) or (args.strict and bool(warnings))
            warned += bool(warnings)
    archs = {}
    for p in files:
        archs[arch_of(p)] = archs.get(arch_of(p), 0) + 1
    counts = ", ".join(f"{n} for {a}" for a, n in sorted(archs.items()))
    print(f"# ptxas {gpu_report.tool_version(ptxas)}: {len(files)} kernels ({counts}), "
          f"{len(failed) - refused} PTX compiles failed ({refused} refused: custom ops with "
          f"host bitcode only), {warned} with warnings, {bad} failing the sweep")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
