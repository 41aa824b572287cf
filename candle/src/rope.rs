//! Rotary position embeddings as a candle custom op on Tritium's kernel
//! ([`tritium_kernels::rope`]): `x.apply_op3(cos, sin, Rope)`, or [`rope`], rotates the
//! halves of `x`'s last dim as Llama (Hugging Face's "rotate half",
//! `candle_nn::rotary_emb::rope`) does, differentiable in `x` (the backward is the kernel's
//! rotation by `−sin`); `cos` and `sin` get no gradient.

use crate::launches::{forwards, Inputs, LaunchWith, Launches};
use crate::on::{On, Out, Rows};
use crate::op::{op_error, to_i32, KernelFloat};
use candle_core::{CustomOp3, Layout, Result, Shape, Tensor};
use tritium::dsl::trace::lang::next_power_of_2;

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

/// The launch: the rotation of `x` (by `−sin` for `backward`), one program per `block_t`
/// positions of one head; `x` read through its outer strides.
struct Rotate {
    dims: Dims,
    /// `h`, `t` and `d/2` as the kernel's `i32`s.
    sizes: [i32; 3],
    backward: bool,
}

impl LaunchWith for Rotate {
    type Output<T: KernelFloat> = T;

    fn with<T: KernelFloat>(
        &self,
        on: &On,
        r: &[Rows<'_, T>],
        outs: &mut [Out<'_, T>],
    ) -> tritium::Result<()> {
        let Dims {
            b,
            h,
            t,
            half,
            cs_b,
        } = self.dims;
        let (x, cos, sin) = (&r[0], &r[1], &r[2]);
        let s = x.strides();
        let (block_t, block_d) = blocks(&self.dims);
        let [hs, ts, halves] = self.sizes;
        tritium_kernels::rope::rope::launch_with(
            on.device(),
            (t.div_ceil(block_t), b * h),
            on.options(),
            &mut outs[0],
            x,
            cos,
            sin,
            hs,
            ts,
            halves,
            s[0] as i64,
            s[1] as i64,
            s[2] as i64,
            cs_b as i64,
            half as i64,
            self.backward,
            block_t,
            block_d,
        )
    }
}

/// The rotation of `x` (by `−sin` for `backward`) as storage of `x`'s shape.
fn rotate<S: Launches>(
    backward: bool,
    x: (&S, &Layout),
    cos: (&S, &Layout),
    sin: (&S, &Layout),
) -> Result<(S, Shape)> {
    let dims = dims_of(x.1.dims(), cos.1.dims(), sin.1.dims())?;
    let x_name = if backward { "dy" } else { "x" };
    let named = [
        (x_name, x.0, x.1),
        ("cos", cos.0, cos.1),
        ("sin", sin.0, sin.1),
    ];
    let inputs = Inputs::new(OP, &named)?.strided(0);
    let sizes = [
        to_i32(OP, "the number of heads", dims.h)?,
        to_i32(OP, "the sequence length", dims.t)?,
        to_i32(OP, "half the head dim", dims.half)?,
    ];
    let f = Rotate {
        dims,
        sizes,
        backward,
    };
    let len = x.1.shape().elem_count();
    Ok((S::launch(inputs, &[len], f)?, x.1.shape().clone()))
}

impl Rope {
    fn forward<S: Launches>(
        &self,
        xs: &S,
        xl: &Layout,
        cs: &S,
        cl: &Layout,
        ss: &S,
        sl: &Layout,
    ) -> Result<(S, Shape)> {
        rotate(false, (xs, xl), (cs, cl), (ss, sl))
    }
}

impl CustomOp3 for Rope {
    fn name(&self) -> &'static str {
        OP
    }

    forwards!(forward(xs, xl, cs, cl, ss, sl));

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

impl RopeGrad {
    fn forward<S: Launches>(
        &self,
        ds: &S,
        dl: &Layout,
        cs: &S,
        cl: &Layout,
        ss: &S,
        sl: &Layout,
    ) -> Result<(S, Shape)> {
        rotate(true, (ds, dl), (cs, cl), (ss, sl))
    }
}

impl CustomOp3 for RopeGrad {
    fn name(&self) -> &'static str {
        OP
    }

    forwards!(forward(ds, dl, cs, cl, ss, sl));
}
