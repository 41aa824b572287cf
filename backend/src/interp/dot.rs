//! `acc + a @ b`, computed in the accumulator's dtype.
//!
//! `a` and `b` are first converted to the accumulator dtype as a cast would (f16 inputs
//! to an f32 accumulator convert exactly). f64 accumulates in f64; f32, f16 and bf16
//! accumulate in f32, and f16/bf16 round once at the end. Each element starts at its
//! accumulator and adds the products in k order (unfused; the compiled code may fuse them,
//! so tests compare general floats within a tolerance).
//! Integers accumulate with wrapping at the accumulator's width; bools as one-bit integers.

use super::cast::cast;
use super::numeric::{round_from_f32, wrap_signed, wrap_unsigned};
use super::value::Data;
use ndarray::{Array2, ArrayD, Ix2, Zip};
use tritium_dsl::ir::DType;

/// `acc + a @ b` for 2-D `a: [M, K]`, `b: [K, N]`, `acc: [M, N]` of dtype `d`.
pub(crate) fn dot(d: DType, a: &Data, b: &Data, acc: &Data) -> Result<Data, String> {
    let bad = || {
        format!(
            "dot operands do not fit: {:?} @ {:?} + {:?}",
            a.shape(),
            b.shape(),
            acc.shape()
        )
    };
    let (sa, sb, sc) = (a.shape(), b.shape(), acc.shape());
    if sa.len() != 2 || sb.len() != 2 || sc.len() != 2 || sa[1] != sb[0] || sc != [sa[0], sb[1]] {
        return Err(bad());
    }
    // Bools take the unsigned path with a one-bit width.
    let work = if d.is_bool() { DType::U64 } else { d };
    let (a, b) = (
        cast(a, work).ok_or_else(bad)?,
        cast(b, work).ok_or_else(bad)?,
    );
    let acc_w = if d.is_bool() {
        cast(acc, work).ok_or_else(bad)?
    } else {
        acc.clone()
    };
    match (&a, &b, &acc_w) {
        (Data::Float(x), Data::Float(y), Data::Float(c)) => {
            let (x, y) = (two_d(x).ok_or_else(bad)?, two_d(y).ok_or_else(bad)?);
            let c = two_d(c).ok_or_else(bad)?;
            if d == DType::F64 {
                Ok(Data::Float(float_matmul(&x, &y, &c)))
            } else {
                let f32s = |a: &Array2<f64>| a.mapv(|v| v as f32);
                let p = float_matmul(&f32s(&x), &f32s(&y), &f32s(&c));
                Ok(Data::Float(p.mapv(|v| round_from_f32(d, v))))
            }
        }
        (Data::Int(x), Data::Int(y), Data::Int(c)) => {
            let bits = d.bits();
            let p = int_matmul(
                &two_d(x).ok_or_else(bad)?,
                &two_d(y).ok_or_else(bad)?,
                i64::wrapping_mul,
                i64::wrapping_add,
            );
            Ok(Data::Int(Zip::from(&p).and(c).map_collect(|&p, &c| {
                wrap_signed(p.wrapping_add(c), bits)
            })))
        }
        (Data::UInt(x), Data::UInt(y), Data::UInt(c)) => {
            let bits = d.bits();
            let p = int_matmul(
                &two_d(x).ok_or_else(bad)?,
                &two_d(y).ok_or_else(bad)?,
                u64::wrapping_mul,
                u64::wrapping_add,
            );
            let r = Zip::from(&p)
                .and(c)
                .map_collect(|&p, &c| wrap_unsigned(p.wrapping_add(c), bits));
            if d.is_bool() {
                Ok(Data::Bool(r.mapv(|v| v & 1 != 0)))
            } else {
                Ok(Data::UInt(r))
            }
        }
        _ => Err(bad()),
    }
}

fn two_d<T: Clone>(a: &ArrayD<T>) -> Option<Array2<T>> {
    a.clone().into_dimensionality::<Ix2>().ok()
}

/// `acc + x @ y`, each element summed from its `acc` in k order, as the compiled code does.
/// Starting from `acc` (not from a zero) keeps the IEEE sign of a zero sum: `-0` when the
/// accumulator and every product are `-0` (a matrix product starting at `+0` gave `+0`).
fn float_matmul<T>(x: &Array2<T>, y: &Array2<T>, acc: &Array2<T>) -> ArrayD<T>
where
    T: Copy + std::ops::Add<Output = T> + std::ops::Mul<Output = T>,
{
    let (m, k) = x.dim();
    let n = y.dim().1;
    let mut out = acc.clone();
    for i in 0..m {
        for kk in 0..k {
            let xv = x[[i, kk]];
            for j in 0..n {
                out[[i, j]] = out[[i, j]] + xv * y[[kk, j]];
            }
        }
    }
    out.into_dyn()
}

/// `x @ y` with the given (wrapping) multiply and add, in i-k-j order.
fn int_matmul<T: Copy + Default>(
    x: &Array2<T>,
    y: &Array2<T>,
    mul: impl Fn(T, T) -> T,
    add: impl Fn(T, T) -> T,
) -> ArrayD<T> {
    let (m, k) = x.dim();
    let n = y.dim().1;
    let mut out = Array2::<T>::default((m, n));
    for i in 0..m {
        for kk in 0..k {
            let xv = x[[i, kk]];
            for j in 0..n {
                out[[i, j]] = add(out[[i, j]], mul(xv, y[[kk, j]]));
            }
        }
    }
    out.into_dyn()
}
