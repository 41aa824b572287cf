//! Triton's random numbers (`tl.philox`, `tl.randint`, `tl.randint4x`, `tl.rand`,
//! `tl.rand4x`, `tl.randn`, `tl.randn4x`) and `tl.umulhi`.
//!
//! The Philox-4x32 (and 4x64) counter-based generator of Salmon et al. (Random123), written
//! in tile ops with the constants, key schedule, counter layout and float conversions of
//! Triton's `triton/language/random.py`. Every backend computes integer ops bit for bit,
//! so a seed and an offset give the same `randint` and `rand` bits as Triton does: a
//! dropout mask made with Triton is the one made here. `randn` goes through `log`, `sqrt`,
//! `cos` and `sin`, which agree with Triton's to a few ulps, not bit for bit.
//!
//! Like Triton's, these are library functions, not IR ops: the kernel's IR holds the
//! multiplies, shifts and xors, so every backend and the fuzzer see plain integer code.

use super::lang::{cast, compare, cos, full, log, maximum, sin, sqrt, where_, ConstInt, NoArg};
use super::tile::{IntoOperand, Operand, Tile};
use crate::ir::{CmpPred, DType};

/// Philox rounds when a call does not say (Triton's `N_ROUNDS_DEFAULT`).
pub const N_ROUNDS_DEFAULT: i64 = 10;

/// The optional `n_rounds` argument: [`NoArg`] (10 rounds) or a compile-time integer.
pub trait Rounds {
    /// The number of rounds.
    fn rounds(self) -> i64;
}
impl Rounds for NoArg {
    fn rounds(self) -> i64 {
        N_ROUNDS_DEFAULT
    }
}
impl<T: ConstInt> Rounds for T {
    fn rounds(self) -> i64 {
        self.get()
    }
}

/// The Philox constants for one counter width: round multipliers and key increments.
struct Constants {
    round_a: u64,
    round_b: u64,
    key_a: u64,
    key_b: u64,
}

const PHILOX_32: Constants = Constants {
    round_a: 0xD251_1F53,
    round_b: 0xCD9E_8D57,
    key_a: 0x9E37_79B9,
    key_b: 0xBB67_AE85,
};

const PHILOX_64: Constants = Constants {
    round_a: 0xD2E7_470E_E14C_6C93,
    round_b: 0xCA5A_8263_9512_1157,
    key_a: 0x9E37_79B9_7F4A_7C15,
    key_b: 0xBB67_AE85_84CA_A73B,
};

/// The high half of the double-width product `x * y`, the operands read as unsigned
/// integers of their width (Triton's `umulhi`); the result has the operands' dtype.
#[track_caller]
pub fn umulhi(x: impl IntoOperand, y: impl IntoOperand) -> Tile {
    let (x, y) = (x.into_operand(), y.into_operand());
    // Two literals multiply as i32, as they would in Triton.
    let like = [x, y].iter().find_map(|o| match o {
        Operand::Tile(t) => Some(t.dtype()),
        _ => None,
    });
    let d = like.unwrap_or(DType::I32);
    let (x, y) = (cast(x, d), cast(y, d));
    if !d.is_int() || d.bits() < 8 {
        // `cast` to the same dtype emits nothing; the error names what was passed.
        return super::lang::fail_with(x, format!("umulhi needs integers, got {d}"));
    }
    let u = unsigned(d);
    let (x, y) = (cast(x, u), cast(y, u));
    let hi = if d.bits() <= 32 {
        let p = cast(x, DType::U64) * cast(y, DType::U64);
        cast(p >> d.bits() as i64, u)
    } else {
        // 64 × 64 → 128 from 32-bit limbs: x = xh·2^32 + xl, y = yh·2^32 + yl.
        let mask = 0xFFFF_FFFFu64;
        let (xl, xh, yl, yh) = (x & mask, x >> 32, y & mask, y >> 32);
        let (ll, lh, hl, hh) = (xl * yl, xl * yh, xh * yl, xh * yh);
        let mid = (ll >> 32) + (lh & mask) + (hl & mask);
        hh + (lh >> 32) + (hl >> 32) + (mid >> 32)
    };
    cast(hi, d)
}

/// The unsigned integer dtype of `d`'s width.
fn unsigned(d: DType) -> DType {
    match d.bits() {
        8 => DType::U8,
        16 => DType::U16,
        32 => DType::U32,
        _ => DType::U64,
    }
}

/// `n_rounds` rounds of Philox on the counters `c` with the key `(k0, k1)`, all of one
/// unsigned dtype (u32 or u64): Triton's `philox_impl`.
#[track_caller]
fn philox_rounds(c: [Tile; 4], k: [Tile; 2], n_rounds: i64) -> (Tile, Tile, Tile, Tile) {
    let k_ = if c[0].dtype() == DType::U64 {
        &PHILOX_64
    } else {
        &PHILOX_32
    };
    let [mut c0, mut c1, mut c2, mut c3] = c;
    let [mut k0, mut k1] = k;
    for _ in 0..n_rounds {
        let (p0, p2) = (c0, c2);
        c0 = umulhi(p2, k_.round_b) ^ c1 ^ k0;
        c2 = umulhi(p0, k_.round_a) ^ c3 ^ k1;
        c1 = p2 * k_.round_b;
        c3 = p0 * k_.round_a;
        k0 += k_.key_a;
        k1 += k_.key_b;
    }
    (c0, c1, c2, c3)
}

/// Philox-4x32 (counters of 32 bits) or Philox-4x64 (64 bits) of the counters
/// `(c0, c1, c2, c3)`, keyed by `seed` (an integer scalar): Triton's `philox`. The
/// counters are read as unsigned integers of `c0`'s width and the four results have that
/// unsigned dtype. With 32-bit counters the key is the seed's low and high words; with
/// 64-bit counters it is `(seed, 0)`.
#[track_caller]
pub fn philox(
    seed: impl IntoOperand,
    c0: impl IntoOperand,
    c1: impl IntoOperand,
    c2: impl IntoOperand,
    c3: impl IntoOperand,
    n_rounds: impl Rounds,
) -> (Tile, Tile, Tile, Tile) {
    let seed = integer("philox", "seed", seed);
    let c0 = integer("philox", "counter", c0);
    let wide = c0.dtype().bits() == 64;
    let d = if wide { DType::U64 } else { DType::U32 };
    if !matches!(c0.dtype().bits(), 32 | 64) {
        let d = c0.dtype();
        let bad =
            super::lang::fail_with(c0, format!("philox needs 32- or 64-bit counters, got {d}"));
        return (bad, bad, bad, bad);
    }
    let seed = cast(seed, DType::U64);
    let k = if wide {
        [seed, cast(0, DType::U64)]
    } else {
        [
            cast(seed & 0xFFFF_FFFFu64, d),
            cast((seed >> 32) & 0xFFFF_FFFFu64, d),
        ]
    };
    let c = [cast(c0, d), cast(c1, d), cast(c2, d), cast(c3, d)];
    philox_rounds(c, k, n_rounds.rounds())
}

/// Four blocks of random u32 for `seed` and the integer `offset` block (Philox-4x32 of the
/// counter `(offset mod 2^32, offset >> 32, 0, 0)`): Triton's `randint4x`.
#[track_caller]
pub fn randint4x(
    seed: impl IntoOperand,
    offset: impl IntoOperand,
    n_rounds: impl Rounds,
) -> (Tile, Tile, Tile, Tile) {
    let offset = integer("randint4x", "offset", offset);
    let lo = cast(offset, DType::U32);
    // Triton's `offset_lo * 0`: zeros of the offsets' shape.
    let zero = full(lo.shape(), 0, DType::U32);
    let hi = if offset.dtype().bits() > 32 {
        cast(offset >> 32, DType::U32)
    } else {
        zero
    };
    philox(seed, lo, hi, zero, zero, n_rounds)
}

/// One block of random u32 (the first of [`randint4x`]): Triton's `randint`.
#[track_caller]
pub fn randint(seed: impl IntoOperand, offset: impl IntoOperand, n_rounds: impl Rounds) -> Tile {
    let offset = integer("randint", "offset", offset);
    randint4x(seed, offset, n_rounds).0
}

/// A random unsigned integer to a float in `[0, 1)`: 32-bit inputs give f32 through
/// `i32` (`x < 0` folded onto `-x - 1`, times `4.6566127342e-10`), 64-bit inputs through
/// `i64` times `1.0842020432385337e-19`, as Triton's `uint_to_uniform_float`.
#[track_caller]
pub fn uint_to_uniform_float(x: impl IntoOperand) -> Tile {
    let x = integer("uint_to_uniform_float", "input", x);
    // Triton writes the scales as Python floats, made f32 constants by rounding once.
    let (signed, scale) = if x.dtype().bits() == 64 {
        (DType::I64, 1.084_202_043_238_533_7e-19_f64 as f32)
    } else {
        (DType::I32, 4.656_612_734_2e-10_f64 as f32)
    };
    let x = cast(x, signed);
    let x = where_(compare(x, CmpPred::Lt, 0), -x - 1, x);
    cast(x, DType::F32) * cast(scale, DType::F32)
}

/// One block of f32 uniform in `[0, 1)`: Triton's `rand`.
#[track_caller]
pub fn rand(seed: impl IntoOperand, offset: impl IntoOperand, n_rounds: impl Rounds) -> Tile {
    let offset = integer("rand", "offset", offset);
    uint_to_uniform_float(randint(seed, offset, n_rounds))
}

/// Four blocks of f32 uniform in `[0, 1)`: Triton's `rand4x`.
#[track_caller]
pub fn rand4x(
    seed: impl IntoOperand,
    offset: impl IntoOperand,
    n_rounds: impl Rounds,
) -> (Tile, Tile, Tile, Tile) {
    let offset = integer("rand4x", "offset", offset);
    let (a, b, c, d) = randint4x(seed, offset, n_rounds);
    (
        uint_to_uniform_float(a),
        uint_to_uniform_float(b),
        uint_to_uniform_float(c),
        uint_to_uniform_float(d),
    )
}

/// The Box-Muller transform of two uniform blocks into two standard normal blocks:
/// Triton's `pair_uniform_to_normal`.
#[track_caller]
pub fn pair_uniform_to_normal(u1: impl IntoOperand, u2: impl IntoOperand) -> (Tile, Tile) {
    let u1 = maximum(cast(1.0e-7_f64 as f32, DType::F32), u1);
    let th = cast(std::f64::consts::TAU as f32, DType::F32) * u2;
    let r = sqrt(cast(-2.0f32, DType::F32) * log(u1));
    (r * cos(th), r * sin(th))
}

/// One block of f32 from the standard normal distribution: Triton's `randn`.
#[track_caller]
pub fn randn(seed: impl IntoOperand, offset: impl IntoOperand, n_rounds: impl Rounds) -> Tile {
    let offset = integer("randn", "offset", offset);
    let (a, b, _, _) = randint4x(seed, offset, n_rounds);
    pair_uniform_to_normal(uint_to_uniform_float(a), uint_to_uniform_float(b)).0
}

/// Four blocks of f32 from the standard normal distribution: Triton's `randn4x`.
#[track_caller]
pub fn randn4x(
    seed: impl IntoOperand,
    offset: impl IntoOperand,
    n_rounds: impl Rounds,
) -> (Tile, Tile, Tile, Tile) {
    let offset = integer("randn4x", "offset", offset);
    let (u1, u2, u3, u4) = rand4x(seed, offset, n_rounds);
    let (n1, n2) = pair_uniform_to_normal(u1, u2);
    let (n3, n4) = pair_uniform_to_normal(u3, u4);
    (n1, n2, n3, n4)
}

/// `x` as a tile, which must hold integers (a literal is an i32, or an i64 when it does
/// not fit); otherwise the trace fails with an error naming `what` of `func`.
#[track_caller]
fn integer(func: &str, what: &str, x: impl IntoOperand) -> Tile {
    let x = x.into_operand();
    let t = match x {
        Operand::Tile(t) => t,
        Operand::Int(i) if i32::try_from(i).is_ok() => cast(x, DType::I32),
        Operand::Int(_) => cast(x, DType::I64),
        _ => cast(x, DType::I32),
    };
    match (x, t.ty().dtype()) {
        (Operand::Float(_), _) => {
            super::lang::fail_with(t, format!("{func} needs an integer {what}, got a float"))
        }
        (Operand::Bool(_), _) => {
            super::lang::fail_with(t, format!("{func} needs an integer {what}, got a bool"))
        }
        (_, Some(d)) if d.is_int() => t,
        (_, d) => {
            let shown = d.map_or_else(|| t.ty().to_string(), |d| d.to_string());
            super::lang::fail_with(t, format!("{func} needs an integer {what}, got {shown}"))
        }
    }
}
