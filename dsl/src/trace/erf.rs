//! `erf`, `erfc` and `erfinv` in f64 (narrower floats have f32 algorithms: `libm_f32.rs`,
//! and `erf` in `math.rs`): Chebyshev fits made with mpmath at 50 digits by
//! `scripts/fit_erf.py`, each within about one ulp of its function on its interval.
//!
//! - `erf(x) = x·P(x²)` for `|x| < 1`, else `±(1 − erfc(|x|))`.
//! - `erfc(x) = e^(−x²)·g(x)/x` for `x ≥ 0.5`, where `g(x) = x·e^(x²)·erfc(x)` is smooth
//!   and fitted on [0.5, 1], [1, 2], [2, 5] (in `1/x`) and [5, 28] (in `1/x²`); `x²` is
//!   split exactly (`fma`) so that `e^(−x²)` keeps its precision up to the underflow at 27.3;
//!   `1 − erf` below 0.5, `2 − erfc(−x)` below −0.5.
//! - `erfinv`: Giles' f32 approximation (a fit of ours beyond its range) as a start, then
//!   two Newton steps on these, with the residual in `erfc` form (`(1 − |x|) − erfc(|y|)`,
//!   an exact subtraction) from |x| = 0.5 on.

use super::lang::{abs, exp, fma, maximum, sqrt, where_};
use super::libm::{copysign, horner, lt};
use super::math::isnan;
use super::tile::Tile;

/// `erf` of an f64 tile.
pub(super) fn erf_f64(x: Tile) -> Tile {
    let ax = abs(x);
    let small = x * horner(x * x, &ERF_SMALL);
    let large: Tile = 1.0 - erfc_from_half(maximum(ax, 1.0));
    let r = where_(lt(ax, 1.0), small, copysign(large, x));
    where_(isnan(x), x, r)
}

/// `erfc` of an f64 tile.
pub(super) fn erfc_f64(x: Tile) -> Tile {
    let ax = abs(x);
    let near: Tile = 1.0 - x * horner(x * x, &ERF_SMALL);
    let tail = erfc_from_half(maximum(ax, 0.5));
    let far = where_(lt(x, 0.0), 2.0 - tail, tail);
    let r = where_(lt(ax, 0.5), near, far);
    where_(isnan(x), x, r)
}

/// `erfinv` of an f64 tile from Giles' single-precision guess `y` and his `w = −log(1 − x²)`:
/// past his range (`w ≥ 16`, `1 − |x|` below 1e-7) a fit of ours replaces the guess, then
/// two Newton steps square its error (below 1e-7) twice.
pub(super) fn erfinv_f64(x: Tile, w: Tile, y: Tile) -> Tile {
    let far = x * horner(sqrt(w) - 5.05, &ERFINV_FAR);
    let mut y = where_(lt(w, 16.0), y, far);
    let ax = abs(x);
    let one_minus = 1.0 - ax; // exact for |x| ≥ 0.5
    for _ in 0..2 {
        // Below |x| = 0.5, |y| < 0.48: `erf_f64`'s series alone, without its tail's fits.
        let central = y * horner(y * y, &ERF_SMALL) - x;
        let tail: Tile = one_minus - erfc_f64(abs(y));
        let tail = where_(lt(x, 0.0), -tail, tail);
        let residual = where_(lt(ax, 0.5), central, tail);
        let slope = exp(-(y * y)) * std::f64::consts::FRAC_2_SQRT_PI;
        y -= residual / slope;
    }
    y
}

/// `erfc(x)` for `x ≥ 0.5` (0 from 28 on, where it underflows; +inf gives 0).
fn erfc_from_half(x: Tile) -> Tile {
    let hi = x * x;
    let lo = fma(x, x, -hi);
    // e^(−x²) = e^(−hi)·e^(−lo), and |lo| < 2^-44 so e^(−lo) = 1 − lo.
    let e = exp(-hi) * (1.0 - lo);
    let g = where_(
        lt(x, 1.0),
        horner(x - 0.75, &G_HALF_TO_1),
        where_(
            lt(x, 2.0),
            horner(x - 1.5, &G_1_TO_2),
            where_(
                lt(x, 5.0),
                horner(1.0 / x, &G_2_TO_5),
                horner(1.0 / (x * x), &G_5_TO_28),
            ),
        ),
    );
    where_(lt(x, 28.0), e * g / x, 0.0)
}

// Coefficients, highest degree first (`scripts/fit_erf.py` prints them).
/// `erf(x)/x` in `x²` on [0, 1] (its constant term is a fit, close to 2/√π).
#[allow(clippy::approx_constant)]
const ERF_SMALL: [f64; 13] = [
    5.957176147748911e-11,
    -1.1372848856791674e-09,
    1.4659775274047436e-08,
    -1.6350312701054695e-07,
    1.6461000484121368e-06,
    -1.4925595266831182e-05,
    0.0001205533111164271,
    -0.000854832698083379,
    0.0052239776248180145,
    -0.026866170645076792,
    0.11283791670954879,
    -0.3761263890318375,
    1.1283791670955126,
];
/// `g` in `x − 0.75` on [0.5, 1].
const G_HALF_TO_1: [f64; 15] = [
    -1.0941427200394069e-05,
    3.263197501019474e-05,
    -9.155046500862675e-05,
    0.00025415711252713493,
    -0.0006784502387662875,
    0.0017337570355632108,
    -0.004223304246576693,
    0.009750549347777606,
    -0.021180363040624837,
    0.04286759599905843,
    -0.07974315509920227,
    0.13358108505513022,
    -0.19475409299232166,
    0.2309581315512983,
    0.3802032377198586,
];
/// `g` in `x − 1.5` on [1, 2].
const G_1_TO_2: [f64; 17] = [
    -2.9681995578627227e-08,
    1.0689441761195654e-07,
    -3.437817184628445e-07,
    1.169165910574441e-06,
    -3.874763541034933e-06,
    1.2402685271063253e-05,
    -3.836242360370396e-05,
    0.0001143214468456848,
    -0.0003269651521577698,
    0.0008932397859991688,
    -0.0023167552323497867,
    0.005658404630747147,
    -0.012864893869964185,
    0.02675468190613955,
    -0.04939635794934395,
    0.07615103985547737,
    0.48237812468147623,
];
/// `g` in `1/x` on [2, 5].
const G_2_TO_5: [f64; 17] = [
    1.038571592052763,
    -10.283709536205455,
    42.509357554304096,
    -102.40215766647981,
    164.05462733605697,
    -186.27122342125526,
    154.01966890648725,
    -92.4630400093135,
    38.540746393203975,
    -9.734388517428338,
    1.0111420951676469,
    -0.33595644334336416,
    0.4643297637161919,
    -0.003702255261442208,
    -0.2818641061051195,
    -8.914254392730383e-06,
    0.5641897445931832,
];
/// `g` in `1/x²` on [5, 28].
const G_5_TO_28: [f64; 13] = [
    3180017.1298172064,
    -1187053.972511735,
    229867.04731915076,
    -33062.01290348606,
    4332.323441294842,
    -592.9475787943976,
    91.59828888651488,
    -16.660838033614443,
    3.7024915096254825,
    -1.0578554575008474,
    0.4231421876298443,
    -0.2820947917738348,
    0.5641895835477563,
];
/// `erfinv(x)/x` in `sqrt(−log(1 − x²)) − 5.05` on [4, 6.1].
const ERFINV_FAR: [f64; 10] = [
    -1.0136628465739612e-07,
    2.9868732594190304e-07,
    -8.571651538602126e-07,
    4.087625702922414e-06,
    -1.8395128432506084e-05,
    7.128448129484869e-05,
    -0.00020030910956922373,
    -0.0001698643273155374,
    1.0102850175336413,
    4.900421051581769,
];
