//! Triton's `dot_scaled`: a `dot` of microscaled operands (OCP MX formats). Each operand is
//! decoded to f32 from its format (`"e4m3"`, `"e5m2"`: fp8 tiles or their bytes; `"e2m1"`:
//! fp4, two per byte along K, the low nibble first; `"bf16"`, `"fp16"`), multiplied by its
//! scales (e8m0 bytes, `2^(s − 127)`, one per 32 elements along K; 255 is NaN; `None` for
//! none), then multiplied with an f32 accumulator. Scaling by a power of two is exact, so the
//! result is the `dot` of the exact products, as on GPUs that compute it natively.

use super::lang::{
    bitcast, broadcast_to, cast, compare, dot, fail_with, join, permute, reshape, trans, where_,
    NoArg, OptDType, OptFlag, OptOperand,
};
use super::tile::{Operand, Tile};
use crate::ir::{CmpPred, DType};

/// Elements of K one scale covers.
const SCALE_BLOCK: usize = 32;

/// `lhs @ rhs (+ acc)` of microscaled operands (see the module docs): `lhs` is `[M, K]`
/// (`[M, K/2]` bytes for `"e2m1"`), `lhs_scale` `[M, K/32]`; `rhs` is `[K, N]` (`[K/2, N]`),
/// `rhs_scale` `[N, K/32]`. `lhs_k_pack`/`rhs_k_pack = false` (fp4 packed along M or N)
/// and `fast_math` are accepted; packing along M/N is an error. The result is f32
/// (`out_dtype` may only be f32).
#[allow(clippy::too_many_arguments)]
#[track_caller]
pub fn dot_scaled(
    lhs: Tile,
    lhs_scale: impl OptOperand,
    lhs_format: &str,
    rhs: Tile,
    rhs_scale: impl OptOperand,
    rhs_format: &str,
    acc: impl OptOperand,
    fast_math: impl OptFlag,
    lhs_k_pack: impl OptFlag,
    rhs_k_pack: impl OptFlag,
    out_dtype: impl OptDType,
) -> Tile {
    let _ = fast_math.flag();
    if out_dtype.dtype().is_some_and(|d| d != DType::F32) {
        return fail_with(lhs, "dot_scaled: out_dtype must be f32".into());
    }
    if !lhs_k_pack.flag_or(true) || !rhs_k_pack.flag_or(true) {
        return fail_with(
            lhs,
            "dot_scaled: fp4 packed along M or N (k_pack = false) is not supported".into(),
        );
    }
    let a = match decode(lhs, lhs_format, Side::Lhs) {
        Ok(a) => a,
        Err(m) => return fail_with(lhs, m),
    };
    let b = match decode(rhs, rhs_format, Side::Rhs) {
        Ok(b) => b,
        Err(m) => return fail_with(rhs, m),
    };
    let a = match scaled(a, lhs_scale.opt(), Side::Lhs) {
        Ok(a) => a,
        Err(m) => return fail_with(lhs, m),
    };
    let b = match scaled(b, rhs_scale.opt(), Side::Rhs) {
        Ok(b) => b,
        Err(m) => return fail_with(rhs, m),
    };
    match acc.opt() {
        Some(c) => dot(a, b, c),
        None => dot(a, b, NoArg),
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Side {
    /// `[M, K]`: K is the last axis.
    Lhs,
    /// `[K, N]`: K is the first axis.
    Rhs,
}

/// The operand as f32, `[M, K]` or `[K, N]`.
fn decode(x: Tile, format: &str, side: Side) -> Result<Tile, String> {
    let d = x.dtype();
    let bytes = matches!(d, DType::U8 | DType::I8);
    let fp8 = |f: DType| -> Result<Tile, String> {
        match d {
            _ if d == f => Ok(cast(x, DType::F32)),
            _ if bytes => Ok(cast(bitcast(x, f), DType::F32)),
            _ => Err(format!(
                "dot_scaled: a {format} operand is {f} or bytes, got {d}"
            )),
        }
    };
    match format {
        "e4m3" => fp8(DType::F8E4M3),
        "e5m2" => fp8(DType::F8E5M2),
        "bf16" | "fp16" => {
            let want = if format == "bf16" {
                DType::BF16
            } else {
                DType::F16
            };
            if d != want {
                return Err(format!("dot_scaled: a {format} operand is {want}, got {d}"));
            }
            Ok(cast(x, DType::F32))
        }
        "e2m1" if bytes => Ok(fp4_pairs(bitcast_u8(x), side)),
        "e2m1" => Err(format!(
            "dot_scaled: an e2m1 operand is bytes (u8), got {d}"
        )),
        other => Err(format!(
            "dot_scaled: unknown format {other:?} (e2m1, e4m3, e5m2, bf16 or fp16)"
        )),
    }
}

fn bitcast_u8(x: Tile) -> Tile {
    if x.dtype() == DType::U8 {
        x
    } else {
        bitcast(x, DType::U8)
    }
}

/// Both nibbles of every byte as f32, the low one first along K.
fn fp4_pairs(x: Tile, side: Side) -> Tile {
    let lo = fp4(x & 15u8);
    let hi = fp4(x >> 4u8);
    let s = x.shape();
    let pairs = join(lo, hi); // [R, C, 2]: the nibbles of byte (r, c)
    match side {
        Side::Lhs => reshape(pairs, [s[0], s[1] * 2]),
        // [K/2, N, 2] → [K/2, 2, N] → [K, N]
        Side::Rhs => reshape(permute(pairs, [0, 2, 1]), [s[0] * 2, s[1]]),
    }
}

/// The value of an e2m1 nibble (sign, 2 exponent bits, 1 mantissa bit; bias 1):
/// ±{0, 0.5, 1, 1.5, 2, 3, 4, 6}.
fn fp4(v: Tile) -> Tile {
    let e = cast((v >> 1u8) & 3u8, DType::F32);
    let m = cast(v & 1u8, DType::F32);
    let sub = m * 0.5;
    // 2^(e − 1) · (1 + m/2) for e ≥ 1, by cases (e ≤ 3).
    let scale = where_(
        compare(e, CmpPred::Eq, 1.0),
        1.0,
        where_(compare(e, CmpPred::Eq, 2.0), 2.0, 4.0),
    );
    let normal = scale * (m * 0.5 + 1.0);
    let mag = where_(compare(e, CmpPred::Eq, 0.0), sub, normal);
    let negative = compare(v & 8u8, CmpPred::Ne, 0u8);
    where_(negative, -mag, mag)
}

/// `x` times its e8m0 scales (`[rows, K/32]` for the lhs, `[N, K/32]` for the rhs).
fn scaled(x: Tile, scale: Option<Operand>, side: Side) -> Result<Tile, String> {
    let Some(scale) = scale else { return Ok(x) };
    let Operand::Tile(s) = scale else {
        return Err("dot_scaled: a scale is a tile of u8 (e8m0) or None".into());
    };
    if !matches!(s.dtype(), DType::U8 | DType::I8) {
        return Err(format!(
            "dot_scaled: scales are e8m0 bytes (u8), got {}",
            s.dtype()
        ));
    }
    let shape = x.shape();
    let (outer, k) = match side {
        Side::Lhs => (shape[0], shape[1]),
        Side::Rhs => (shape[1], shape[0]),
    };
    let ss = s.shape();
    if k % SCALE_BLOCK != 0 || ss != [outer, k / SCALE_BLOCK] {
        return Err(format!(
            "dot_scaled: {} scales must be [{outer}, {}] (one per 32 of K = {k}), got {ss:?}",
            if side == Side::Lhs { "lhs" } else { "rhs" },
            k / SCALE_BLOCK.max(1)
        ));
    }
    let factor = e8m0(bitcast_u8(s));
    // [outer, K/32] → [outer, K/32, 32] → [outer, K]
    let blocks = reshape(factor, [outer, k / SCALE_BLOCK, 1]);
    let wide = reshape(
        broadcast_to(blocks, [outer, k / SCALE_BLOCK, SCALE_BLOCK]),
        [outer, k],
    );
    Ok(match side {
        Side::Lhs => x * wide,
        Side::Rhs => x * trans(wide),
    })
}

/// `2^(s − 127)` as f32 (exact: 2^-127 is a subnormal), NaN for 255.
fn e8m0(s: Tile) -> Tile {
    let bits = cast(s, DType::U32) << 23u32;
    let normal = bitcast(bits, DType::F32);
    let value = where_(
        compare(s, CmpPred::Eq, 0u8),
        f32::from_bits(0x0040_0000),
        normal,
    );
    where_(compare(s, CmpPred::Eq, 255u8), f32::NAN, value)
}
