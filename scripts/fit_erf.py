#!/usr/bin/env python3
"""Prints the Chebyshev fits of dsl/src/trace/erf.rs (needs mpmath: `pip install mpmath`).

g(x) = x * exp(x^2) * erfc(x) is smooth, so erfc(x) = exp(-x^2) * g(x) / x is fitted
piecewise through g; erf(x)/x is a polynomial in x^2 below 1. Each fit's worst relative
error, evaluated in f64 by Horner's rule over random points, is printed as a comment.
"""
import random

import mpmath as mp

mp.mp.dps = 50


def g(x):
    return x * mp.exp(x * x) * mp.erfc(x)


def erf_over_x(z):
    if z == 0:
        return 2 / mp.sqrt(mp.pi)
    x = mp.sqrt(z)
    return mp.erf(x) / x


def erfinv_over_x(s):
    """erfinv(x) / x where s = sqrt(-log(1 - x^2)), as Giles writes erfinv's tail."""
    x = mp.sqrt(1 - mp.exp(-s * s))
    return mp.erfinv(x) / x


# name, function of the variable, the variable's interval, coefficients, f(x) for checking,
# x's interval, and the variable of x.
FITS = [
    ("ERF_SMALL", erf_over_x, (0, 1), 13, (0, 1), lambda x: x * x),
    ("G_HALF_TO_1", lambda u: g(u + mp.mpf(0.75)), (-0.25, 0.25), 15, (0.5, 1), lambda x: x - 0.75),
    ("G_1_TO_2", lambda u: g(u + mp.mpf(1.5)), (-0.5, 0.5), 17, (1, 2), lambda x: x - 1.5),
    ("G_2_TO_5", lambda u: g(1 / u), (mp.mpf(1) / 5, mp.mpf(1) / 2), 17, (2, 5), lambda x: 1 / x),
    ("G_5_TO_28", lambda u: g(1 / mp.sqrt(u)), (mp.mpf(1) / 784, mp.mpf(1) / 25), 13, (5, 28),
     lambda x: 1 / (x * x)),
    # erfinv's first guess where Giles' single-precision tail ends (s from 4 to 6.1: 1 - |x|
    # down to 2^-53).
    ("ERFINV_FAR", lambda u: erfinv_over_x(u + mp.mpf(5.05)), (-1.05, 1.05), 10, (4, 6.1),
     lambda s: s - 5.05),
]


def horner(c, u):
    r = 0.0
    for k in c:
        r = r * u + k
    return r


def main():
    rng = random.Random(1)
    for name, f, (a, b), n, (lo, hi), var in FITS:
        c = [float(v) for v in mp.chebyfit(f, [a, b], n)]
        worst = 0.0
        for _ in range(2000):
            x = lo + (hi - lo) * rng.random()
            want = f(var(mp.mpf(x)))
            worst = max(worst, float(abs((horner(c, var(x)) - want) / want)))
        print(f"/// worst relative error in f64: {worst:.2e}")
        print(f"const {name}: [f64; {len(c)}] = [")
        for v in c:
            print(f"    {v!r},")
        print("];")


if __name__ == "__main__":
    main()
