//! Elements in memory: how each dtype is read and written, and the unchecked lane
//! loops that [`Memory`](super::memory::Memory) runs once it has checked every address.

use super::numeric::{wrap_signed, wrap_unsigned};
use super::value::Data;
use crate::float_order::MaxNumber;
use half::{bf16, f16};
use ndarray::{ArrayD, Zip};
use tritium_dsl::ir::{AtomicOp, DType};
use tritium_dsl::trace::{F8E4B15, F8E4M3, F8E5M2};

/// Runs `$go!(T)` with `T` the memory cell type of dtype `$d`.
macro_rules! with_cell {
    ($d:expr, $go:ident) => {
        match $d {
            ::tritium_dsl::ir::DType::Bool => $go!($crate::interp::cell::ByteBool),
            ::tritium_dsl::ir::DType::I8 => $go!(i8),
            ::tritium_dsl::ir::DType::I16 => $go!(i16),
            ::tritium_dsl::ir::DType::I32 => $go!(i32),
            ::tritium_dsl::ir::DType::I64 => $go!(i64),
            ::tritium_dsl::ir::DType::U8 => $go!(u8),
            ::tritium_dsl::ir::DType::U16 => $go!(u16),
            ::tritium_dsl::ir::DType::U32 => $go!(u32),
            ::tritium_dsl::ir::DType::U64 => $go!(u64),
            ::tritium_dsl::ir::DType::F16 => $go!(half::f16),
            ::tritium_dsl::ir::DType::BF16 => $go!(half::bf16),
            ::tritium_dsl::ir::DType::F32 => $go!(f32),
            ::tritium_dsl::ir::DType::F64 => $go!(f64),
            ::tritium_dsl::ir::DType::F8E4M3 => $go!(::tritium_dsl::trace::F8E4M3),
            ::tritium_dsl::ir::DType::F8E5M2 => $go!(::tritium_dsl::trace::F8E5M2),
            ::tritium_dsl::ir::DType::F8E4B15 => $go!(::tritium_dsl::trace::F8E4B15),
        }
    };
}

pub(crate) use with_cell;

/// A wide representation element (`f64`, `i64`, `u64`, `bool`) and its [`Data`] variant.
pub(crate) trait Wide: Copy + Default + PartialEq {
    fn wrap(a: ArrayD<Self>) -> Data;
    fn view(d: &Data) -> Option<&ArrayD<Self>>;
    /// The read-modify-write of an atomic op on values of dtype `d`.
    fn combine(op: AtomicOp, d: DType, bits: u32) -> fn(Self, Self) -> Self;
}

impl Wide for f64 {
    fn wrap(a: ArrayD<f64>) -> Data {
        Data::Float(a)
    }
    fn view(d: &Data) -> Option<&ArrayD<f64>> {
        if let Data::Float(a) = d {
            Some(a)
        } else {
            None
        }
    }
    fn combine(op: AtomicOp, d: DType, _bits: u32) -> fn(f64, f64) -> f64 {
        match (op, d) {
            (AtomicOp::Add, DType::F64) => |o, v| o + v,
            (AtomicOp::Add, DType::F32) => |o, v| (o + v) as f32 as f64,
            (AtomicOp::Add, DType::BF16) => |o, v| bf16::from_f32((o + v) as f32).to_f64(),
            (AtomicOp::Add, DType::F16) => |o, v| f16::from_f32((o + v) as f32).to_f64(),
            // The verifier rejects atomics on fp8s.
            (AtomicOp::Add, _) => |o, _| o,
            (AtomicOp::Max, _) => f64::max_number,
            (AtomicOp::Min, _) => f64::min_number,
            (AtomicOp::Xchg, _) => |_, v| v,
            // The verifier rejects bitwise atomics on floats.
            (AtomicOp::And | AtomicOp::Or | AtomicOp::Xor, _) => |o, _| o,
        }
    }
}

impl Wide for i64 {
    fn wrap(a: ArrayD<i64>) -> Data {
        Data::Int(a)
    }
    fn view(d: &Data) -> Option<&ArrayD<i64>> {
        if let Data::Int(a) = d {
            Some(a)
        } else {
            None
        }
    }
    fn combine(op: AtomicOp, _d: DType, bits: u32) -> fn(i64, i64) -> i64 {
        match (op, bits) {
            (AtomicOp::Add, 8) => |o, v| wrap_signed(o.wrapping_add(v), 8),
            (AtomicOp::Add, 16) => |o, v| wrap_signed(o.wrapping_add(v), 16),
            (AtomicOp::Add, 32) => |o, v| wrap_signed(o.wrapping_add(v), 32),
            (AtomicOp::Add, _) => i64::wrapping_add,
            (AtomicOp::Max, _) => i64::max,
            (AtomicOp::Min, _) => i64::min,
            (AtomicOp::Xchg, _) => |_, v| v,
            (AtomicOp::And, _) => |o, v| o & v,
            (AtomicOp::Or, _) => |o, v| o | v,
            (AtomicOp::Xor, _) => |o, v| o ^ v,
        }
    }
}

impl Wide for u64 {
    fn wrap(a: ArrayD<u64>) -> Data {
        Data::UInt(a)
    }
    fn view(d: &Data) -> Option<&ArrayD<u64>> {
        if let Data::UInt(a) = d {
            Some(a)
        } else {
            None
        }
    }
    fn combine(op: AtomicOp, _d: DType, bits: u32) -> fn(u64, u64) -> u64 {
        match (op, bits) {
            (AtomicOp::Add, 8) => |o, v| wrap_unsigned(o.wrapping_add(v), 8),
            (AtomicOp::Add, 16) => |o, v| wrap_unsigned(o.wrapping_add(v), 16),
            (AtomicOp::Add, 32) => |o, v| wrap_unsigned(o.wrapping_add(v), 32),
            (AtomicOp::Add, _) => u64::wrapping_add,
            (AtomicOp::Max, _) => u64::max,
            (AtomicOp::Min, _) => u64::min,
            (AtomicOp::Xchg, _) => |_, v| v,
            (AtomicOp::And, _) => |o, v| o & v,
            (AtomicOp::Or, _) => |o, v| o | v,
            (AtomicOp::Xor, _) => |o, v| o ^ v,
        }
    }
}

impl Wide for bool {
    fn wrap(a: ArrayD<bool>) -> Data {
        Data::Bool(a)
    }
    fn view(d: &Data) -> Option<&ArrayD<bool>> {
        if let Data::Bool(a) = d {
            Some(a)
        } else {
            None
        }
    }
    fn combine(op: AtomicOp, _d: DType, _bits: u32) -> fn(bool, bool) -> bool {
        match op {
            AtomicOp::Add | AtomicOp::Xor => |o, v| o ^ v,
            AtomicOp::Max | AtomicOp::Or => |o, v| o | v,
            AtomicOp::Min | AtomicOp::And => |o, v| o & v,
            AtomicOp::Xchg => |_, v| v,
        }
    }
}

/// An element as stored in memory, and its conversion to and from the wide value.
pub(crate) trait Cell: Copy {
    type Wide: Wide;
    fn widen(self) -> Self::Wide;
    /// The wide value is already rounded/wrapped to the dtype, so this is exact.
    fn narrow(w: Self::Wide) -> Self;
}

macro_rules! cell {
    ($($t:ty => $w:ty, |$x:ident| $widen:expr, |$y:ident| $narrow:expr;)*) => {$(
        impl Cell for $t {
            type Wide = $w;
            fn widen(self) -> $w { let $x = self; $widen }
            fn narrow($y: $w) -> $t { $narrow }
        }
    )*};
}

cell! {
    i8 => i64, |x| x as i64, |w| w as i8;
    i16 => i64, |x| x as i64, |w| w as i16;
    i32 => i64, |x| x as i64, |w| w as i32;
    i64 => i64, |x| x, |w| w;
    u8 => u64, |x| x as u64, |w| w as u8;
    u16 => u64, |x| x as u64, |w| w as u16;
    u32 => u64, |x| x as u64, |w| w as u32;
    u64 => u64, |x| x, |w| w;
    f16 => f64, |x| x.to_f64(), |w| f16::from_f64(w);
    bf16 => f64, |x| x.to_f64(), |w| bf16::from_f64(w);
    f32 => f64, |x| x as f64, |w| w as f32;
    f64 => f64, |x| x, |w| w;
    ByteBool => bool, |x| x.0 != 0, |w| ByteBool(w as u8);
    F8E4M3 => f64, |x| x.to_f64(), |w| F8E4M3::from_f64(w);
    F8E5M2 => f64, |x| x.to_f64(), |w| F8E5M2::from_f64(w);
    F8E4B15 => f64, |x| x.to_f64(), |w| F8E4B15::from_f64(w);
}

/// A bool in memory: one byte, 0 or 1 (any non-zero byte reads as true).
#[derive(Clone, Copy)]
#[repr(transparent)]
pub(crate) struct ByteBool(u8);

/// Reads the active lanes; the others take `other` or the default (zero/false).
///
/// # Safety
/// Every active lane's address must point to `size_of::<T>()` readable bytes.
pub(crate) unsafe fn load_cells<T: Cell>(
    addrs: &ArrayD<usize>,
    mask: Option<&ArrayD<bool>>,
    other: Option<&ArrayD<T::Wide>>,
) -> Result<ArrayD<T::Wide>, String> {
    // SAFETY (of each read): the caller guarantees the address is readable.
    let read = |a: usize| unsafe { std::ptr::read_unaligned(a as *const T) }.widen();
    Ok(match (mask, other) {
        (None, _) => addrs.mapv(read),
        (Some(m), None) => {
            Zip::from(addrs)
                .and(m)
                .map_collect(|&a, &on| if on { read(a) } else { T::Wide::default() })
        }
        (Some(m), Some(o)) => {
            if o.shape() != addrs.shape() {
                return Err("load `other` and pointers have different shapes".into());
            }
            Zip::from(addrs)
                .and(m)
                .and(o)
                .map_collect(|&a, &on, &o| if on { read(a) } else { o })
        }
    })
}

/// For every active lane in row-major order: reads the old value, writes `f(old, v)` when
/// it is `Some`. Returns the old values (default for masked-off lanes).
///
/// # Safety
/// Every active lane's address must point to `size_of::<T>()` writable bytes.
pub(crate) unsafe fn rmw<T: Cell, V: Copy>(
    addrs: &ArrayD<usize>,
    vals: &ArrayD<V>,
    mask: Option<&ArrayD<bool>>,
    f: impl Fn(T::Wide, V) -> Option<T::Wide>,
) -> ArrayD<T::Wide> {
    let mut old = ArrayD::<T::Wide>::default(addrs.raw_dim());
    // `iter()` visits lanes in logical row-major order whatever the memory layout.
    let active: Box<dyn Iterator<Item = bool>> = match mask {
        Some(m) => Box::new(m.iter().copied()),
        None => Box::new(std::iter::repeat(true)),
    };
    for (((&a, &v), on), o) in addrs
        .iter()
        .zip(vals.iter())
        .zip(active)
        .zip(old.iter_mut())
    {
        if !on {
            continue;
        }
        let p = a as *mut T;
        // SAFETY: the caller guarantees the address is writable (hence readable).
        let cur = unsafe { std::ptr::read_unaligned(p) }.widen();
        if let Some(new) = f(cur, v) {
            // SAFETY: as above.
            unsafe { std::ptr::write_unaligned(p, T::narrow(new)) };
        }
        *o = cur;
    }
    old
}
