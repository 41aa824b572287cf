//! Rotary position embeddings as a candle custom op on Tritium's kernel
//! ([`tritium_kernels::rope`]): `x.apply_op3(cos, sin, Rope)`, or [`rope`], rotates the
//! halves of `x`'s last dim as Llama (Hugging Face's "rotate half",
//! `candle_nn::rotary_emb::rope`) does, differentiable in `x` (the backward is the kernel's
//! rotation by `−sin`); `cos` and `sin` get no gradient.

use crate::candle_error;
use crate::op::{
    cpu_array, dispatch, last_dim_contiguous, op_error, same_dtype, to_i32, zeros, KernelFloat,
    PerFloat,
};
use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp3, Layout, Result, Shape, Tensor};
use tritium::dsl::trace::lang::next_power_of_2;
use tritium::Device;

/// The op's name, in its errors.
const OP: &str = "tritium-rope";

/// Llama's rotary embedding of `x` `(b, h, t, d)` by `cos` and `sin` `(t, d/2)` (or
/// `(b, t, d/2)`; more than `t` rows are allowed, the first `t` are used):
/// `out[.., i] = x_i·cos_i − x_{i+d/2}·sin_i`, `out[.., i+d/2] = x_{i+d/2}·cos_i + x_i·sin_i`,
/// computed in f32. `x` may be any strided view whose last dim is contiguous (a
/// `(b, t, h, d)` tensor transposed to `(b, h, t, d)` is read where it lies); the output is
/// contiguous `(b, h, t, d)`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rope;

/// [`Rope`]'s gradient: `dy` rotated by `−sin`.
#[derive(Debug, Clone, Copy)]
struct RopeGrad;

/// `x` `(b, h, t, d)` rotated by `cos` and `sin` `(t, d/2)` as Llama does
/// (`candle_nn::rotary_emb::rope`'s semantics), differentiable in `x`.
pub fn rope(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
    x.apply_op3(cos, sin, Rope)
}

/// What a rotation's launch needs to know of its shapes.
#[derive(Debug, Clone, Copy)]
struct Dims {
    b: usize,
    h: usize,
    t: usize,
    half: usize,
    /// Elements between the batches of `cos` and `sin` (0: one table for every batch).
    cs_b: usize,
}

/// `x` is `(b, h, t, d)` with `d` even, `cos` `(t', d/2)` or `(b, t', d/2)` with `t' >= t`,
/// `sin` the shape of `cos`.
fn dims_of(x: &[usize], cos: &[usize], sin: &[usize]) -> Result<Dims> {
    let &[b, h, t, d] = x else {
        return Err(op_error(
            OP,
            format!("x must have shape (b, h, t, d), got {x:?}"),
        ));
    };
    if d % 2 != 0 {
        return Err(op_error(OP, format!("x's last dim must be even, got {d}")));
    }
    let half = d / 2;
    let bad_tables = || {
        let want = format!("(t, d/2) = ({t}, {half}) or (b, t, d/2) = ({b}, {t}, {half})");
        let why = format!("(at least t rows) for x of shape {x:?}, got {cos:?}");
        op_error(OP, format!("cos must have shape {want} {why}"))
    };
    let cs_b = match *cos {
        [tc, hc] if tc >= t && hc == half => 0,
        [bc, tc, hc] if bc == b && tc >= t && hc == half => tc * half,
        _ => return Err(bad_tables()),
    };
    if sin != cos {
        return Err(op_error(
            OP,
            format!("sin must have cos's shape {cos:?}, got {sin:?}"),
        ));
    }
    Ok(Dims {
        b,
        h,
        t,
        half,
        cs_b,
    })
}

/// Rows of `d/2` pairs per program along `t`, and the pairs per row rounded up to a power
/// of two: about 4096 pairs per program.
fn blocks(d: &Dims) -> (usize, usize) {
    let block_d = next_power_of_2(d.half.max(1));
    let block_t = (4096 / block_d).clamp(1, next_power_of_2(d.t.max(1)));
    (block_t, block_d)
}

struct Rotate<'a> {
    x: (&'a CpuStorage, &'a Layout),
    cos: (&'a CpuStorage, &'a Layout),
    sin: (&'a CpuStorage, &'a Layout),
    dims: Dims,
    backward: bool,
}

impl PerFloat for Rotate<'_> {
    type Output = CpuStorage;

    fn run<T: KernelFloat>(self) -> Result<CpuStorage> {
        let Dims {
            b,
            h,
            t,
            half,
            cs_b,
        } = self.dims;
        let mut out = zeros::<T>(b * h * t * half * 2);
        if out.is_empty() {
            return Ok(T::to_cpu_storage_owned(out));
        }
        let x = last_dim_contiguous::<T>(self.x.0, self.x.1)?;
        let cos = cpu_array::<T>(self.cos.0, self.cos.1)?;
        let sin = cpu_array::<T>(self.sin.0, self.sin.1)?;
        let s = x.strides();
        let (block_t, block_d) = blocks(&self.dims);
        tritium_kernels::rope::rope::launch(
            &Device::cpu(),
            (t.div_ceil(block_t), b * h),
            &mut out,
            &x,
            &cos,
            &sin,
            to_i32(OP, "the number of heads", h)?,
            to_i32(OP, "the sequence length", t)?,
            to_i32(OP, "half the head dim", half)?,
            s[0] as i64,
            s[1] as i64,
            s[2] as i64,
            cs_b as i64,
            half as i64,
            self.backward,
            block_t,
            block_d,
        )
        .map_err(candle_error)?;
        Ok(T::to_cpu_storage_owned(out))
    }
}

/// The rotation of `x` (by `−sin` for `backward`) as candle storage of `x`'s shape.
fn rotate(
    backward: bool,
    x: (&CpuStorage, &Layout),
    cos: (&CpuStorage, &Layout),
    sin: (&CpuStorage, &Layout),
) -> Result<(CpuStorage, Shape)> {
    let dims = dims_of(x.1.dims(), cos.1.dims(), sin.1.dims())?;
    let (x_name, dtype) = (if backward { "dy" } else { "x" }, x.0.dtype());
    same_dtype(
        OP,
        &[
            (x_name, dtype),
            ("cos", cos.0.dtype()),
            ("sin", sin.0.dtype()),
        ],
    )?;
    let f = Rotate {
        x,
        cos,
        sin,
        dims,
        backward,
    };
    Ok((dispatch(OP, dtype, f)?, x.1.shape().clone()))
}

impl CustomOp3 for Rope {
    fn name(&self) -> &'static str {
        OP
    }

    fn cpu_fwd(
        &self,
        xs: &CpuStorage,
        xl: &Layout,
        cs: &CpuStorage,
        cl: &Layout,
        ss: &CpuStorage,
        sl: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        rotate(false, (xs, xl), (cs, cl), (ss, sl))
    }

    fn bwd(
        &self,
        _x: &Tensor,
        cos: &Tensor,
        sin: &Tensor,
        _y: &Tensor,
        dy: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let dx = dy.apply_op3_no_bwd(cos, sin, &RopeGrad)?;
        Ok((Some(dx), None, None))
    }
}

impl CustomOp3 for RopeGrad {
    fn name(&self) -> &'static str {
        OP
    }

    fn cpu_fwd(
        &self,
        ds: &CpuStorage,
        dl: &Layout,
        cs: &CpuStorage,
        cl: &Layout,
        ss: &CpuStorage,
        sl: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        rotate(true, (ds, dl), (cs, cl), (ss, sl))
    }
}
