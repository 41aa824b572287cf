#!/usr/bin/env python3
"""Where the time of a CPU kernel goes, instruction by instruction, from a `perf` profile.

    TRITIUM_PERF_MAP=1 perf record -e cpu-clock -F 4000 -o perf.data <program>
    scripts/perf-annotate.py perf.data [SYMBOL] [--all]

`TRITIUM_PERF_MAP=1` makes the JIT name kernels in /tmp/perf-<pid>.map, so `perf report`
shows them; `perf annotate` cannot read JIT code, so this script reads the kernel's object
from the disk cache (TRITIUM_CACHE_DIR, else ~/.cache/tritium; the `.tobj` whose header
holds the symbol's hash), disassembles it with llvm-objdump-19 and prints the share of the
kernel's samples per loop (innermost loop around each instruction: micro-kernel loops hold
FMAs, copy loops vector moves) and the hottest instructions. SYMBOL defaults to the kernel
with the most samples. Needs perf and llvm-objdump-19.
"""
import collections
import glob
import os
import re
import subprocess
import sys


def samples(data):
    """Samples per (symbol, offset) in JIT code named by the perf map."""
    out = subprocess.run(
        ["perf", "script", "-i", data, "-F", "ip,sym,symoff,dso"],
        capture_output=True, text=True, check=True).stdout
    hits = collections.Counter()
    for line in out.splitlines():
        m = re.match(r"\s*[0-9a-f]+\s+(tritium_\w+)\+0x([0-9a-f]+)\s+\(/tmp/perf-\d+\.map\)", line)
        if m:
            hits[(m.group(1), int(m.group(2), 16))] += 1
    return hits


def disassembly(symbol):
    """{offset in the symbol: instruction} of the cached object defining `symbol`."""
    root = os.environ.get("TRITIUM_CACHE_DIR") or os.path.expanduser("~/.cache/tritium")
    # `tritium_<name>_<hash>` or its program body, `tritium_<name>_<hash>_body`.
    tag = symbol.removesuffix("_body").rsplit("_", 1)[-1].encode()
    for path in glob.glob(os.path.join(root, "cpu", "*.tobj")):
        data = open(path, "rb").read()
        elf = data.find(b"\x7fELF")
        if elf < 0 or tag not in data[:elf]:
            continue
        obj = "/tmp/perf-annotate.o"
        open(obj, "wb").write(data[elf:])
        text = subprocess.run(
            ["llvm-objdump-19", "-d", "--no-show-raw-insn", f"--disassemble-symbols={symbol}", obj],
            capture_output=True, text=True, check=True).stdout
        ins, start = {}, None
        for line in text.splitlines():
            m = re.match(r"([0-9a-f]+) <", line)
            if m:
                start = int(m.group(1), 16)
            m = re.match(r"\s*([0-9a-f]+):\s*(.*)", line)
            if m and start is not None:
                ins[int(m.group(1), 16) - start] = m.group(2).strip()
        return ins
    sys.exit(f"no cached object for {symbol} under {root}/cpu (same TRITIUM_CACHE_DIR as the run?)")


def loops(ins):
    """(first, last offset, kind) of every loop closed by a backward jump."""
    found = []
    for at, text in ins.items():
        m = re.match(r"j\w+\s+0x([0-9a-f]+)", text)
        if m and int(m.group(1), 16) < at:
            first = int(m.group(1), 16)
            body = [t for o, t in ins.items() if first <= o <= at]
            if sum("vfmadd" in t for t in body) >= 4:
                kind = "micro-kernel loop"
            elif any("prefetch" in t for t in body):
                kind = "prefetch loop"
            elif any(re.match(r"v?mov(ups|aps|dqu|dqa)", t) for t in body):
                kind = "copy loop"
            else:
                kind = "loop"
            found.append((first, at, kind))
    return found


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if not args:
        sys.exit(__doc__)
    hits = samples(args[0])
    if not hits:
        sys.exit("no samples in named JIT code: was TRITIUM_PERF_MAP=1 set for the run?")
    per_symbol = collections.Counter()
    for (sym, _), n in hits.items():
        per_symbol[sym] += n
    total = sum(per_symbol.values())
    for sym, n in per_symbol.most_common(5):
        print(f"{100 * n / total:5.1f}%  {sym}")
    symbol = args[1] if len(args) > 1 else per_symbol.most_common(1)[0][0]
    ins = disassembly(symbol)
    mine = {off: n for (sym, off), n in hits.items() if sym == symbol}
    count = sum(mine.values())
    regions = collections.Counter()
    all_loops = loops(ins)
    for off, n in mine.items():
        around = [l for l in all_loops if l[0] <= off <= l[1]]
        inner = min(around, key=lambda l: l[1] - l[0]) if around else None
        regions[f"{inner[2]} {inner[0]:x}-{inner[1]:x}" if inner else "outside loops"] += n
    print(f"\n{symbol}: {count} samples")
    for name, n in regions.most_common(12):
        print(f"  {100 * n / count:5.1f}%  {name}")
    print("\nhottest instructions:")
    top = sorted(mine.items(), key=lambda x: -x[1])
    for off, n in top if "--all" in sys.argv else top[:15]:
        print(f"  {100 * n / count:5.1f}%  {off:5x}  {ins.get(off, '?')}")


if __name__ == "__main__":
    main()
