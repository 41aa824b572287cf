#!/usr/bin/env python3
"""Writes reference.txt: inputs of the f64 math functions and their exact values, from
mpmath at high precision, as the correctly rounded f64 `hi` and the rest in units of hi's
last place (`lo`, in [-1/2, 1/2]; subnormal steps below 2^-1022; for an inf `hi`, 0).

One line per case: `name x hi lo`, each number as the 16 hex digits of its f64 bits.
Run from this directory: python3 reference.py > reference.txt (deterministic)."""

import math
import random
import struct

from mpmath import mp, mpf, exp, log, sin, cos, pi, floor, nint, frexp, ldexp

def bits(v):
    return struct.unpack("<Q", struct.pack("<d", v))[0]

def f64(b):
    return struct.unpack("<d", struct.pack("<Q", b))[0]

def prec_for(x):
    # Enough bits for x mod π/2 of any f64, with 200 to spare.
    return 200 + max(0, math.frexp(abs(x))[1])

def exact(name, x):
    mp.prec = prec_for(x)
    X = mpf(x)
    if name == "exp":
        return exp(X)
    if name == "exp2":
        return mpf(2) ** X
    if name == "log":
        return log(X)
    if name == "log2":
        return log(X) / log(2)
    if name == "sin":
        return sin(X)
    return cos(X)

def hard_trig(rng, count, e_lo, e_hi):
    """x = m · 2^e with m·2^e close to a multiple of π/2: m a multiple of a continued
    fraction denominator of 2^e · 2/π mod 1, the multiple just above 2^52."""
    out = []
    while len(out) < count:
        e = rng.randint(e_lo, e_hi)
        mp.prec = 1300 + max(0, e)
        a = (mpf(2) ** e) * 2 / pi
        a = a - floor(a)
        # convergents of a
        h0, h1, k0, k1 = 0, 1, 1, 0
        y = a
        best = None
        for _ in range(80):
            if y == 0:
                break
            y = 1 / y
            t = int(floor(y))
            y = y - t
            h0, h1 = h1, t * h1 + h0
            k0, k1 = k1, t * k1 + k0
            if k1 >= 2 ** 53:
                break
            best = k1
        if best is None or best == 0:
            continue
        j = -(-(2 ** 52) // best)
        m = j * best
        if m >= 2 ** 53:
            continue
        x = math.ldexp(m, e)
        if math.isfinite(x):
            out.append(x if rng.random() < 0.5 else -x)
    return out

def inputs(name, rng):
    xs = []
    if name == "exp":
        xs += [0.0, 1.0, -1.0, 709.782712893384, 709.7827128933839, -708.3964185322641,
               -708.3964185322642, -745.1332191019411, -745.1332191019412, -744.44, 1e-300,
               -1e-300, 0.5 * math.log(2), -0.5 * math.log(2), 5e-324]
        xs += [rng.uniform(-745.2, 709.8) for _ in range(300)]
        xs += [rng.uniform(-745.2, -708.3) for _ in range(60)]
        xs += [math.ldexp(rng.uniform(-1, 1), rng.randint(-60, 9)) for _ in range(100)]
    elif name == "exp2":
        xs += [0.0, 0.5, -0.5, 1023.9999999999999, -1022.0, -1022.5, -1074.0, -1074.5,
               -1073.9, 1e-300, 5e-324]
        xs += [rng.uniform(-1075.0, 1024.0) for _ in range(300)]
        xs += [rng.uniform(-1075.0, -1022.0) for _ in range(60)]
        xs += [math.ldexp(rng.uniform(-1, 1), rng.randint(-60, 10)) for _ in range(100)]
    elif name in ("log", "log2"):
        xs += [5e-324, 1e-310, 2.2250738585072014e-308, 1.7976931348623157e308, 0.5, 2.0,
               math.e, 10.0, 0.7071067811865475, 0.7071067811865476, 1.414213562373095,
               1.4142135623730951, 1.0000000000000002, 0.9999999999999999]
        while len(xs) < 300:
            v = f64(rng.getrandbits(63))
            if math.isfinite(v) and v > 0:
                xs.append(v)
        xs += [1.0 + math.ldexp(rng.uniform(-1, 1), -rng.randint(1, 52)) for _ in range(100)]
        xs += [f64(rng.getrandbits(52) | 1) for _ in range(60)]
    else:
        xs += [1.0, -1.0, 1e-8, 0.785, 0.786, 1.5707963267948966, 3.141592653589793,
               6.283185307179586, 1e6, 1e15, 1e22, 1e300, 1.7976931348623157e308,
               6381956970095103 * 2.0 ** 797, 2.0 ** 30, 1073741823.9999999,
               5.319372648326541e255]
        xs += [rng.uniform(-10, 10) for _ in range(100)]
        xs += [math.ldexp(rng.uniform(0.5, 1), rng.randint(-30, 1024)) *
               rng.choice([1, -1]) for _ in range(150)]
        xs += [math.ldexp(rng.uniform(0.5, 1), rng.randint(1, 30)) for _ in range(50)]
        # Near multiples of π/2 in the Cody-Waite range, then in Payne-Hanek's.
        xs += hard_trig(rng, 60, -52, -23)
        xs += hard_trig(rng, 60, -22, 971)
    return xs

def main():
    rng = random.Random(20240611)
    for name in ["exp", "exp2", "log", "log2", "sin", "cos"]:
        for x in inputs(name, rng):
            v = exact(name, x)
            if v == 0:
                hi, lo = 0.0, 0.0
            else:
                e = max(int(frexp(v)[1]) - 1, -1022)  # v's binade, subnormals in one
                ulp = ldexp(mpf(1), e - 52)
                h = nint(v / ulp) * ulp
                if abs(h) == ldexp(mpf(1), e + 1):
                    ulp *= 2  # rounded up to the next binade: lo in hi's own ulps
                hi = float(h)  # exact, or inf past the largest f64
                lo = 0.0 if math.isinf(hi) else float((v - h) / ulp)
            print(f"{name} {bits(x):016x} {bits(hi):016x} {bits(lo):016x}")

main()
