#!/usr/bin/env python3
"""Prints the f32 polynomial fits of dsl/src/trace/libm_f32.rs (needs mpmath: `pip install mpmath`).

Each fit is near-minimax in the error that matters to its caller (relative, or absolute in
an exponent), found by Lawson's iteratively reweighted least squares over Chebyshev points
at 40 digits. Coefficients are rounded to f32 one at a time, lowest degree first, and the
higher ones refitted around each rounded one, so that rounding costs little. The worst
error of the rounded polynomial (evaluated exactly) is printed beside each fit.

    python3 scripts/fit_libm_f32.py            # every fit
    python3 scripts/fit_libm_f32.py TANH ATAN  # some of them

The tables in libm_f32.rs are its output, but for LGAMMA_Q, whose three highest
coefficients there came from a run with other settings and differ from this script's in
their last digits (at the same worst error, 2.03e-8; the weighted iteration settles them
differently for other point counts). LGAMMA_Q also prints LGAMMA_Q_AT_C, the Q(0.625) it
leaves out.
"""
import struct
import sys

import mpmath as mp

mp.mp.dps = 40


def f32(v):
    return mp.mpf(struct.unpack("f", struct.pack("f", float(v)))[0])


def rust(v):
    """The shortest decimal that reads back as the f32 `v`, as a Rust literal."""
    x = float(f32(v))
    for digits in range(1, 12):
        text = f"{x:.{digits}g}"
        if float(f32(float(text))) == x:
            break
    if "e" not in text and "." not in text:
        text += ".0"
    return text


def cheb_points(a, b, n):
    return [(a + b) / 2 + (b - a) / 2 * mp.cos(mp.pi * (k + mp.mpf(1) / 2) / n) for k in range(n)]


def fit(name, g, var, lo, hi, degree, wfun, split=False, npts=300, iterations=30):
    """Fits g(v) ~ sum_{k=0}^{degree} c_k v^k on [lo, hi] minimizing max |wfun(v)·err|.
    Rounds c_k to f32 one at a time and refits the rest; with `split`, c_0 is kept as the
    sum of two f32 (its rounding alone would cost up to half an ulp of the result)."""
    xs = cheb_points(mp.mpf(lo), mp.mpf(hi), npts)
    ys = [g(v) for v in xs]
    ws = [wfun(v) for v in xs]
    fixed = []
    for k in range(degree + 1):
        free = list(range(len(fixed), degree + 1))
        resid = [ys[i] - sum(c * xs[i] ** j for j, c in enumerate(fixed)) for i in range(npts)]
        lw = [mp.mpf(1) / npts] * npts
        best = None
        for _ in range(iterations):
            # weighted normal equations for the free coefficients
            m = len(free)
            A = mp.matrix(m, m)
            r = mp.matrix(m, 1)
            for i in range(npts):
                w2 = lw[i] * ws[i] ** 2
                pw = [xs[i] ** j for j in free]
                for a in range(m):
                    r[a] += w2 * pw[a] * resid[i]
                    for b in range(m):
                        A[a, b] += w2 * pw[a] * pw[b]
            c = mp.lu_solve(A, r)
            errs = [abs(ws[i] * (resid[i] - sum(c[a] * xs[i] ** free[a] for a in range(m)))) for i in range(npts)]
            e = max(errs)
            if best is None or e < best[0]:
                best = (e, [c[a] for a in range(m)])
            s = sum(lw[i] * errs[i] for i in range(npts))
            lw = [lw[i] * errs[i] / s for i in range(npts)]
        c0 = best[1][0]
        if split and k == 0:
            c0 = f32(c0) + f32(c0 - f32(c0))
        fixed.append(c0 if split and k == 0 else f32(c0))
    # the rounded polynomial's worst error, on a fine grid
    grid = [mp.mpf(lo) + (mp.mpf(hi) - mp.mpf(lo)) * i / 4000 for i in range(4001)]
    worst = max(abs(wfun(v) * (g(v) - sum(c * v ** j for j, c in enumerate(fixed)))) for v in grid)
    interval = f"[{mp.nstr(mp.mpf(lo), 6)}, {mp.nstr(mp.mpf(hi), 6)}]"
    print(f"/// {name}: {var} on {interval}, worst weighted error {mp.nstr(worst, 3)}")
    print(f"const {name}: [f32; {degree + 1 + split}] = [")
    for c in reversed(fixed[1:]):
        print(f"    {rust(c)},")
    print(f"    {rust(fixed[0])},")
    if split:
        print(f"    {rust(fixed[0] - f32(fixed[0]))}, // the constant's low part")
    print("];")
    return fixed, worst


def tanh_tail(s):
    # (tanh(x) - x) / x^3 in s = x^2
    if s == 0:
        return mp.mpf(-1) / 3
    x = mp.sqrt(s)
    return (mp.tanh(x) - x) / (x * s)


def sinh_tail(s):
    if s == 0:
        return mp.mpf(1) / 6
    x = mp.sqrt(s)
    return (mp.sinh(x) - x) / (x * s)


def exp_tail(r):
    # (e^r - 1 - r) / r^2
    if r == 0:
        return mp.mpf(1) / 2
    return (mp.exp(r) - 1 - r) / (r * r)


def log_tail(s):
    # (2 atanh(f) - 2f) / f^3 in s = f^2
    if s == 0:
        return mp.mpf(2) / 3
    f = mp.sqrt(s)
    return (2 * mp.atanh(f) - 2 * f) / (f * s)


def atan_tail(s):
    # (atan(t) - t) / (t s) in s = t^2
    if s == 0:
        return mp.mpf(-1) / 3
    t = mp.sqrt(s)
    return (mp.atan(t) - t) / (t * s)


def asin_tail(z):
    if z == 0:
        return mp.mpf(1) / 6
    x = mp.sqrt(z)
    return (mp.asin(x) - x) / (x * z)


def erfc_exponent(t):
    # erfc(z) = t * exp(-z^2 + P(t)), t = 1 / (1 + z/2)
    z = 2 * (1 / t - 1)
    return mp.log(mp.erfc(z) / t) + z * z


def erfc_exponent_centered(u):
    # P(t) + 43/64 in u = t - 1/2: within ±0.45, so that its last rounding is small
    return erfc_exponent(u + mp.mpf(1) / 2) + mp.mpf(43) / 64


def erfc_scaled_h(q):
    # (1 + 2z) e^(z^2) erfc(z) - 1 = (1 + q) H(q), q = (z - 2)/(z + 2): H(q)
    if q == -1:
        return 2 - 2 / mp.sqrt(mp.pi)
    z = 2 * (1 + q) / (1 - q)
    return ((1 + 2 * z) * mp.exp(z * z) * mp.erfc(z) - 1) / (1 + q)


def erfc_scaled_weight(q):
    # the error of (1 + q) H relative to 1 + (1 + q) H
    return (1 + q) / (1 + (1 + q) * erfc_scaled_h(q))


# H is expanded about q = 1/4: Horner's partial sums, whose roundings count, stay smaller
# there than about 0 (where erfc's arguments from 4 to 11 lie far out).
ERFC_SCALED_CENTER = mp.mpf(1) / 4


def erf_tail(s):
    # erf(x) = x (c0 + s P(s)), c0 = 2/sqrt(pi): P(s) = (erf(x)/x - c0) / s
    c0 = 2 / mp.sqrt(mp.pi)
    if s == 0:
        return -c0 / 3
    x = mp.sqrt(s)
    return (mp.erf(x) / x - c0) / s


def erfinv_central(u):
    # erfinv(x) / x in u = w - 2.5, w = -log(1 - x^2) (Giles' variable)
    w = u + mp.mpf(5) / 2
    if w == 0:
        return mp.sqrt(mp.pi) / 2
    x = mp.sqrt(-mp.expm1(-w))
    return mp.erfinv(x) / x


def erfinv_tail(v):
    # erfinv(x) / x in v = w - 9 (the tail's variable w itself, no square root)
    w = v + 9
    x = mp.sqrt(-mp.expm1(-w))
    return mp.erfinv(x) / x


# w at the largest f32 below 1, 1 - 2^-24: the tail's end
ERFINV_W_MAX = -mp.log(1 - (1 - mp.mpf(2) ** -24) ** 2)


def binet(t):
    # mu(x)/t, x = 1/t: mu(x) = lgamma(x) - (x - 1/2) ln x + x - ln sqrt(2 pi)
    if t == 0:
        return mp.mpf(1) / 12
    x = 1 / t
    return (mp.loggamma(x) - (x - mp.mpf(1) / 2) * mp.log(x) + x - mp.log(2 * mp.pi) / 2) / t


def sinpi_tail(z):
    # (sin(pi r)/pi - r) / r^3 in z = r^2: tgamma's divisor below 0
    if z == 0:
        return -mp.pi ** 2 / 6
    r = mp.sqrt(z)
    return (mp.sin(mp.pi * r) / mp.pi - r) / (r * z)


def lgamma_q(u):
    # Q(u) = lgamma(1 + u) / (u (u - 1)): lgamma(1 + u) = u (u - 1) Q(u), exact at 1 and 2
    if u == 0:
        return mp.euler
    if u == 1:
        return 1 - mp.euler
    return mp.loggamma(1 + u) / (u * (u - 1))


# Q is expanded about LGAMMA_Q_CENTER: Q(u) = Q(c) + (u - c) P(u - c) on [0, 1.25].
LGAMMA_Q_CENTER = mp.mpf("0.625")


def lgamma_q_slope(v):
    # P(v) = (Q(v + c) - Q(c)) / v
    c = LGAMMA_Q_CENTER
    if v == 0:
        return mp.diff(lgamma_q, c)
    return (lgamma_q(v + c) - lgamma_q(c)) / v


def lgamma_q_at_c():
    # Q(c) in two parts: the constant the polynomial leaves out
    q = lgamma_q(LGAMMA_Q_CENTER)
    print(f"const LGAMMA_Q_AT_C: (f32, f32) = ({rust(q)}, {rust(q - f32(q))});")


def ln_sinc(z):
    # ln(sin(pi r) / (pi r)) / r^2 in z = r^2: lgamma's reflection below 0
    if z == 0:
        return -mp.pi ** 2 / 6
    r = mp.sqrt(z)
    return mp.log(mp.sin(mp.pi * r) / (mp.pi * r)) / z


ONE = lambda v: mp.mpf(1)


# name: (function, variable, interval, degree, weight of the error[, constant in two parts
# [, options of `fit`]])
FITS = {
    # tanh(x) = x + x^3 P(x^2) below 0.75: the error relative to the result is x^2 |err|
    "TANH": (tanh_tail, "x²", 0, mp.mpf("0.5625"), 5, lambda s: s),
    "SINH": (sinh_tail, "x²", 0, 1, 3, lambda s: s),
    "EXP": (exp_tail, "r", -0.35, 0.35, 4, lambda r: r * r),
    # tgamma's exponential, whose reduced argument takes a low part of up to 0.25
    "EXP_WIDE": (exp_tail, "r", -0.6, 0.6, 5, lambda r: r * r),
    "LOG": (log_tail, "f²", 0, mp.mpf("0.02944"), 2, lambda s: s / 2),
    "LOG3": (log_tail, "f²", 0, mp.mpf("0.02944"), 3, lambda s: s / 2),
    "ATAN": (atan_tail, "t²", 0, mp.tan(mp.pi / 8) ** 2, 4, lambda s: s),
    "ASIN": (asin_tail, "x²", 0, mp.mpf("0.25"), 5, lambda z: z),
    "ERFC": (erfc_exponent_centered, "t − ½", mp.mpf(1) / 6 - mp.mpf(1) / 2, mp.mpf("0.3"), 9, ONE),
    # erfc from z = 0 to 11: (1 + 2z) e^(z^2) erfc(z) = 1 + (1 + q) H(q)
    "ERFC_SCALED": (lambda u: erfc_scaled_h(u + ERFC_SCALED_CENTER), "q − ¼", -1 - ERFC_SCALED_CENTER,
                    mp.mpf(9) / 13 - ERFC_SCALED_CENTER, 9, lambda u: erfc_scaled_weight(u + ERFC_SCALED_CENTER),
                    False, {"npts": 200, "iterations": 20}),
    "ERF": (erf_tail, "x²", 0, mp.mpf("0.25"), 4, lambda s: s),
    "ERFINV_CENTRAL": (erfinv_central, "w − 2.5", mp.mpf(-5) / 2, mp.mpf(5) / 2, 9, ONE, True),
    # the tail from w = 5 to ERFINV_W_MAX (x = 1 - 2^-24), its error relative to the result
    "ERFINV_TAIL": (erfinv_tail, "w − 9", -4, ERFINV_W_MAX - 9, 10, lambda v: 1 / erfinv_tail(v), True),
    # Binet's mu(x) = x·BINET(1/x), x ≥ 1: tgamma at 1 + |x|, lgamma at |x| from 2.25 on
    # above 0 and from 1 on below
    "BINET": (binet, "1/x", 0, 1, 6, lambda t: t),
    # tgamma's divisor below 0
    "SINPI": (sinpi_tail, "r²", 0, mp.mpf(1) / 4, 3, lambda z: z),
    # lgamma below 2.25: Q(u) = Q(c) + v·P(v), v = u − c, the error relative to Q
    "LGAMMA_Q": (lgamma_q_slope, "u − 0.625", -LGAMMA_Q_CENTER, mp.mpf("1.25") - LGAMMA_Q_CENTER, 8,
                 lambda v: abs(v / lgamma_q(v + LGAMMA_Q_CENTER))),
    # lgamma below 0: ln|sin πr/π| = ln|r| + r²·P(r²), the error absolute
    "LN_SINC": (ln_sinc, "r²", 0, mp.mpf(1) / 4, 5, lambda z: z, False, {"npts": 200}),
}

# Constants printed after a fit.
AFTER = {"LGAMMA_Q": lgamma_q_at_c}

if __name__ == "__main__":
    # NAME or NAME:DEGREE
    for arg in sys.argv[1:] or list(FITS):
        name, _, deg = arg.partition(":")
        g, var, lo, hi, degree, w, *rest = FITS[name]
        options = rest.pop() if rest and isinstance(rest[-1], dict) else {}
        fit(name, g, var, lo, hi, int(deg) if deg else degree, w, *rest, **options)
        if name in AFTER:
            AFTER[name]()
