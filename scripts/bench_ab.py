#!/usr/bin/env python3
"""Two builds of a benchmark, run alternately, compared row by row: the medians of each
row's figures per build over several runs and their ratio (or one build's runs alone).

    scripts/dev bench-ab BASE [--runs N] [--columns N] [-- BENCH_TABLE ARGS]   # BASE against the tree
    scripts/dev bench-runs [--runs N] [--columns N] [-- BENCH_TABLE ARGS]      # the tree alone
    python3 scripts/bench_ab.py --runs N --build A=PATH [--build B=PATH] -- ARGS

A single run on a shared VM swings by ±25% (another tenant, the memory's state), more than
most changes gain, and runs of one build after the other's compare the host's moods, not the
builds. So the builds take turns (A, B, A, B, …, the first of each pair alternating too),
each with its own disk cache of compiled kernels (`TRITIUM_CACHE_DIR` under the report's
directory: the first run of each compiles, later ones load; the cache key does not hold
environment switches, so two builds must not share one), and each row is reported by its
median over the runs, with the range. A row is a line of the benchmark's output with two
or more numbers after a name (the words before the first number); the ratio is B's median
over A's for each numeric column. With one build, its runs alone: each row's medians and
ranges over separate processes (how a figure such as "median (range) of 8 runs" is made).
"""
import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path


def number(word):
    """`word` as a number (a trailing `x` or `×` allowed, as in `1.25x`), else None."""
    try:
        return float(word.rstrip("x×"))
    except ValueError:
        return None


def parse_rows(text):
    """{row name: [numbers]} of a benchmark's output: a row is a line with at least two
    numbers after a name, the name being the words before the first number and the
    numbers every numeric word after it (units such as `ms` between them are skipped). A
    name seen twice keeps its first row."""
    rows = {}
    for line in text.splitlines():
        words = line.split()
        first = next((i for i, w in enumerate(words) if number(w) is not None), None)
        if not first:
            continue
        values = [v for v in map(number, words[first:]) if v is not None]
        if len(values) >= 2:
            rows.setdefault(" ".join(words[:first]), values)
    return rows


def order(runs, builds=2):
    """The build order of each round: A B, then B A, alternating (one build: A alone)."""
    if builds == 1:
        return [(0,)] * runs
    return [(0, 1) if r % 2 == 0 else (1, 0) for r in range(runs)]


def summarize(samples):
    """`samples[b]` is a list (one per run) of parse_rows outputs of build `b`. Gives
    [(row, column, [(median, lo, hi) per build], ratio of the last build's median over the
    first's (1 for one build))] for the rows every run of every build printed."""
    first = samples[0][0] if samples[0] else {}
    out = []
    for row in first:
        if not all(row in run for runs in samples for run in runs):
            continue
        # The columns every run printed.
        columns = min(len(run[row]) for runs in samples for run in runs)
        for col in range(columns):
            per = []
            for runs in samples:
                xs = [run[row][col] for run in runs]
                per.append((statistics.median(xs), min(xs), max(xs)))
            ratio = per[-1][0] / per[0][0] if per[0][0] else float("nan")
            out.append((row, col, per, ratio))
    return out


def report(names, summary, columns=None):
    """The table `summarize` gives: every numeric column of each row, or the first
    `columns`. A column a benchmark computes within one run (a ratio of two timings, as
    `bench_table`'s `fn/base`) is the steadier figure: a process may run all its kernels in
    a slower state (page placement; in cache, one thread: `exp` 0.017 ms in some runs and
    0.021 in others), which such a ratio cancels and a median of timings over a few runs
    does not."""
    ratio_head = f"  {names[-1]}/{names[0]}" if len(names) > 1 else ""
    lines = [f"{'row':<40} col  " + "  ".join(f"{n + ' median (range)':>26}" for n in names)
             + ratio_head]
    for row, col, per, ratio in summary:
        if columns is not None and col >= columns:
            continue
        cells = "  ".join(f"{m:>10.4g} ({lo:.4g}–{hi:.4g})".rjust(26) for m, lo, hi in per)
        tail = f"  {ratio:>6.3f}" if len(names) > 1 else ""
        lines.append(f"{row[:40]:<40} {col:>3}  {cells}{tail}")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=6)
    p.add_argument("--columns", type=int, default=None, help="the first N (default: all)")
    p.add_argument("--build", action="append", required=True, help="NAME=PATH, once or twice")
    p.add_argument("--dir", default="target/bench-ab")
    p.add_argument("args", nargs="*")
    a = p.parse_args()
    builds = [b.split("=", 1) for b in a.build]
    if len(builds) not in (1, 2) or any(len(b) != 2 for b in builds):
        sys.exit("bench_ab: give --build NAME=PATH once or twice")
    names = [n for n, _ in builds]
    samples = [[] for _ in builds]
    for r, pair in enumerate(order(a.runs, len(builds))):
        for b in pair:
            name, path = builds[b]
            env = dict(os.environ, TRITIUM_CACHE_DIR=str(Path(a.dir) / f"cache-{name}"))
            out = subprocess.run([path, *a.args], env=env, capture_output=True, text=True)
            if out.returncode != 0:
                sys.exit(f"bench_ab: {name} failed ({out.returncode}):\n{out.stderr[-2000:]}")
            samples[b].append(parse_rows(out.stdout))
            print(f"bench_ab: round {r + 1}/{a.runs}: {name} done", file=sys.stderr, flush=True)
    print(report(names, summarize(samples), a.columns))


if __name__ == "__main__":
    main()
