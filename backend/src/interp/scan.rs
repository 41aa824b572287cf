//! Inclusive scans along one axis, in index order (from the end when reversed): f64 in
//! f64, f32 in f32, f16/bf16 in f32 with each result rounded, integers wrapping at their
//! width. Every target folds in the same order, so results agree bit for bit.

use super::numeric::{round_from_f32, wrap_signed, wrap_unsigned};
use super::value::Data;
use ndarray::{ArrayD, Axis, Zip};
use tritium_dsl::ir::{DType, ScanOp};

/// Scans `x` (of dtype `d`) along `axis` with `op`.
pub(crate) fn scan(
    op: ScanOp,
    d: DType,
    x: &Data,
    axis: usize,
    reverse: bool,
) -> Result<Data, String> {
    if axis >= x.shape().len() {
        return Err(format!(
            "scan axis {axis} out of range for shape {:?}",
            x.shape()
        ));
    }
    let bits = d.bits();
    Ok(match x {
        Data::Float(a) => Data::Float(match d {
            DType::F64 => lines(a, axis, reverse, |s, v: f64| fold(op, s, v), |s| s),
            DType::F32 => lines(
                a,
                axis,
                reverse,
                |s, v: f64| fold(op, s, v as f32),
                f64::from,
            ),
            _ => lines(
                a,
                axis,
                reverse,
                |s, v: f64| fold(op, s, v as f32),
                |s| round_from_f32(d, s),
            ),
        }),
        Data::Int(a) => Data::Int(lines(
            a,
            axis,
            reverse,
            |s: Option<i64>, v: i64| {
                wrap_signed(int_fold(op, s.map(i128::from), v.into()) as i64, bits)
            },
            |s| s,
        )),
        Data::UInt(a) => Data::UInt(lines(
            a,
            axis,
            reverse,
            |s: Option<u64>, v: u64| {
                wrap_unsigned(int_fold(op, s.map(i128::from), v.into()) as u64, bits)
            },
            |s| s,
        )),
        Data::Bool(_) | Data::Ptr(_) => return Err("scans take numbers".into()),
    })
}

/// `s op v` for floats; the first element starts the fold (`fold` sees `None` first).
fn fold<F: std::ops::Add<Output = F> + std::ops::Mul<Output = F>>(
    op: ScanOp,
    s: Option<F>,
    v: F,
) -> F {
    match (op, s) {
        (_, None) => v,
        (ScanOp::Sum, Some(s)) => s + v,
        (ScanOp::Prod, Some(s)) => s * v,
    }
}

fn int_fold(op: ScanOp, s: Option<i128>, v: i128) -> i128 {
    match (op, s) {
        (_, None) => v,
        (ScanOp::Sum, Some(s)) => s.wrapping_add(v),
        (ScanOp::Prod, Some(s)) => s.wrapping_mul(v),
    }
}

/// Folds each line of `a` along `axis` with `step` (the accumulator is `None` before the
/// first element), writing `out(acc)` at each position.
fn lines<T: Copy, A: Copy, R: Copy + Default>(
    a: &ArrayD<T>,
    axis: usize,
    reverse: bool,
    step: impl Fn(Option<A>, T) -> A,
    out: impl Fn(A) -> R,
) -> ArrayD<R> {
    let mut result = ArrayD::from_elem(a.raw_dim(), R::default());
    Zip::from(a.lanes(Axis(axis)))
        .and(result.lanes_mut(Axis(axis)))
        .for_each(|line, mut res| {
            let n = line.len();
            let mut acc: Option<A> = None;
            for k in 0..n {
                let i = if reverse { n - 1 - k } else { k };
                let next = step(acc, line[i]);
                res[i] = out(next);
                acc = Some(next);
            }
        });
    result
}
