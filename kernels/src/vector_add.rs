//! Triton tutorial 01: vector add.

use ndarray::{Array1, ArrayView1};
use tritium::prelude::*;

/// `out[i] = x[i] + y[i]` for `i < n`, `BLOCK` elements per program.
#[kernel]
pub fn add<T: Element>(out: Ptr<T>, x: Ptr<T>, y: Ptr<T>, n: i32, #[constexpr] BLOCK: usize) {
    let offs = program_id(0) * BLOCK as i32 + arange(0, BLOCK);
    let mask = offs < n;
    let a = load(x + offs, mask = mask);
    let b = load(y + offs, mask = mask);
    store(out + offs, a + b, mask = mask);
}

/// Elements per program used by [`vector_add`].
pub const ADD_BLOCK: usize = 1024;

/// `x + y` through the [`add`] kernel.
pub fn vector_add<T: Element + num_zero::Zero>(
    device: &Device,
    x: ArrayView1<T>,
    y: ArrayView1<T>,
) -> tritium::Result<Array1<T>> {
    let n = x.len();
    let mut out = Array1::from_elem(n, T::zero());
    add::launch(
        device,
        cdiv(n.max(1), ADD_BLOCK),
        &mut out,
        x,
        y,
        n as i32,
        ADD_BLOCK,
    )?;
    Ok(out)
}

/// A zero for every element type (ndarray's `Zero` does not cover `bool`).
pub mod num_zero {
    /// The additive identity.
    pub trait Zero {
        /// Zero.
        fn zero() -> Self;
    }
    macro_rules! zero {
        ($($t:ty => $z:expr),*) => {$( impl Zero for $t { fn zero() -> Self { $z } } )*};
    }
    zero!(i8 => 0, i16 => 0, i32 => 0, i64 => 0, u8 => 0, u16 => 0, u32 => 0, u64 => 0,
          f32 => 0.0, f64 => 0.0, half::f16 => half::f16::ZERO, half::bf16 => half::bf16::ZERO, bool => false);
}
