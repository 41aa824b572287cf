//! Cross-entropy over logits as a candle custom op on Tritium's kernels
//! ([`tritium_kernels::cross_entropy`], Liger-Kernel's fused version without the linear
//! layer): `logits.apply_op2(targets, CrossEntropy { ignore_index })`, or
//! [`cross_entropy`], is the mean over the rows not ignored of `logsumexp(x) − x[target]`
//! (`candle_nn::loss::cross_entropy`, with PyTorch's `ignore_index`), an f32 scalar;
//! its backward gives `dlogits = (softmax − onehot) / n_valid · g` (0 on ignored rows).

use crate::launches::{forwards, Inputs, LaunchWith, Launches, Read};
use crate::on::{On, Out, Rows};
use crate::op::{op_error, to_i32, KernelFloat};
use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp2, CustomOp3, DType, Layout, Result, Shape, Tensor};
use tritium::dsl::trace::lang::next_power_of_2;
use tritium_kernels::cross_entropy::{cross_entropy_bwd, cross_entropy_fwd, cross_entropy_mean};

/// The op's name, in its errors.
const OP: &str = "tritium-cross-entropy";

/// PyTorch's default `ignore_index`: rows with this target count neither in the loss nor in
/// the number of rows it is averaged over.
pub const IGNORE_INDEX: i64 = -100;

/// Columns per block of the kernels' loops over a row.
const BLOCK: usize = 1024;

/// The mean cross-entropy of `logits` `(n, v)` (f32, f16 or bf16, any layout) against
/// `targets` `(n,)` (u32 or i64) over the rows whose target is not `ignore_index`, as an f32
/// scalar; NaN when every row is ignored (as PyTorch's). Every target not ignored must lie
/// in `0..v`. Differentiable in `logits`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CrossEntropy {
    /// The target of rows to skip (compared as an integer: a u32 target never equals a
    /// negative one); `None` skips none.
    pub ignore_index: Option<i64>,
}

impl Default for CrossEntropy {
    fn default() -> Self {
        CrossEntropy {
            ignore_index: Some(IGNORE_INDEX),
        }
    }
}

/// [`CrossEntropy`]'s gradient of `logits` for `targets` and the upstream gradient `g` (a
/// one-element f32 tensor).
#[derive(Debug, Clone, Copy)]
struct CrossEntropyGrad(CrossEntropy);

/// The mean cross-entropy of `logits` `(n, v)` against `targets` `(n,)` (u32 or i64), rows
/// whose target is [`IGNORE_INDEX`] (−100, an i64 target) skipped: an f32 scalar,
/// differentiable in `logits` (`candle_nn::loss::cross_entropy` where no row is ignored).
pub fn cross_entropy(logits: &Tensor, targets: &Tensor) -> Result<Tensor> {
    logits.apply_op2(targets, CrossEntropy::default())
}

/// [`cross_entropy`] with another `ignore_index`, or none.
pub fn cross_entropy_with(
    logits: &Tensor,
    targets: &Tensor,
    ignore_index: Option<i64>,
) -> Result<Tensor> {
    logits.apply_op2(targets, CrossEntropy { ignore_index })
}

impl CrossEntropy {
    /// What a kernel compares targets with: `ignore_index`, or a value no target may have.
    fn ignored(&self) -> i64 {
        self.ignore_index.unwrap_or(i64::MIN)
    }

    /// `logits`' rows and columns, after checking `targets`' shape.
    fn dims(&self, logits: &[usize], targets: &[usize]) -> Result<(usize, usize)> {
        let &[n, v] = logits else {
            return Err(op_error(
                OP,
                format!("logits must have shape (n, v), got {logits:?}"),
            ));
        };
        if targets != [n] {
            return Err(op_error(
                OP,
                format!("targets must have shape ({n},) (one per row of logits), got {targets:?}"),
            ));
        }
        Ok((n, v))
    }

    /// The targets as i64 storage where they lie, and the number of rows not ignored; an
    /// error for a dtype other than u32 and i64, or a target outside `0..v` that is not
    /// ignored (checked on a host copy: for CUDA targets, a copy of `n` integers).
    fn targets<S: BackendStorage>(&self, s: &S, l: &Layout, v: usize) -> Result<(S, usize)> {
        if !matches!(s.dtype(), DType::U32 | DType::I64) {
            let d = s.dtype();
            return Err(op_error(
                OP,
                format!("targets must be u32 or i64, got {d:?}"),
            ));
        }
        let targets = s.to_dtype(l, DType::I64)?;
        let CpuStorage::I64(host) = targets.to_cpu_storage()? else {
            unreachable!("targets made i64")
        };
        let mut valid = 0;
        for (row, &t) in host.iter().enumerate() {
            if Some(t) == self.ignore_index {
                continue;
            }
            if t < 0 || t as u64 >= v as u64 {
                let ignored = match self.ignore_index {
                    Some(i) => format!(" (nor the ignore_index {i})"),
                    None => String::new(),
                };
                return Err(op_error(
                    OP,
                    format!("target {t} of row {row} is not a class of 0..{v}{ignored}"),
                ));
            }
            valid += 1;
        }
        Ok((targets, valid))
    }
}

/// Columns per block for rows of `v`.
fn block(v: usize) -> usize {
    next_power_of_2(v.max(1)).min(BLOCK)
}

/// What the launches know of the logits.
#[derive(Debug, Clone, Copy)]
struct Logits {
    n: usize,
    /// Classes, as the kernels' `i32`.
    v: i32,
    ignore_index: i64,
}

impl Logits {
    /// Each row's loss and `lse` (`log Σ exp`), from `x` (read through its row stride).
    fn losses<T: KernelFloat>(
        &self,
        on: &On,
        x: &Rows<'_, T>,
        targets: &Rows<'_, i64>,
    ) -> tritium::Result<(crate::Buffer<f32>, crate::Buffer<f32>)> {
        let (mut loss, mut lse) = (on.zeros::<f32>(self.n)?, on.zeros::<f32>(self.n)?);
        if self.n > 0 {
            cross_entropy_fwd::launch_with(
                on.device(),
                self.n,
                on.options(),
                &mut loss,
                &mut lse,
                x,
                x.strides()[0] as i64,
                targets,
                self.v,
                self.ignore_index,
                block(self.v as usize),
            )?;
        }
        Ok((loss, lse))
    }
}

/// The forward launches: each row's loss, then their mean over the rows not ignored.
struct Forward<'t> {
    rows: Logits,
    targets: Rows<'t, i64>,
    valid: usize,
}

impl LaunchWith for Forward<'_> {
    type Output<T: KernelFloat> = f32;

    fn with<T: KernelFloat>(
        &self,
        on: &On,
        r: &[Rows<'_, T>],
        outs: &mut [Out<'_, f32>],
    ) -> tritium::Result<()> {
        let (loss, _) = self.rows.losses(on, &r[0], &self.targets)?;
        let n = self.rows.n as i32;
        let (valid, mean) = (self.valid as f32, &mut outs[0]);
        let (device, options) = (on.device(), on.options());
        cross_entropy_mean::launch_with(device, 1, options, mean, &loss, n, valid, BLOCK)
    }
}

/// The backward launches: `lse` again, then the logits' gradient.
struct Backward<'t> {
    rows: Logits,
    targets: Rows<'t, i64>,
    grad: Rows<'t, f32>,
    valid: usize,
}

impl LaunchWith for Backward<'_> {
    type Output<T: KernelFloat> = T;

    fn with<T: KernelFloat>(
        &self,
        on: &On,
        r: &[Rows<'_, T>],
        outs: &mut [Out<'_, T>],
    ) -> tritium::Result<()> {
        let x = &r[0];
        let (_, lse) = self.rows.losses(on, x, &self.targets)?;
        let inv_valid = match self.valid {
            0 => 0.0,
            valid => 1.0 / valid as f32,
        };
        let Logits { n, v, ignore_index } = self.rows;
        cross_entropy_bwd::launch_with(
            on.device(),
            n,
            on.options(),
            &mut outs[0],
            x,
            x.strides()[0] as i64,
            &self.targets,
            &lse,
            &self.grad,
            inv_valid,
            v,
            ignore_index,
            block(v as usize),
        )
    }
}

impl CrossEntropy {
    fn forward<S: Launches>(&self, xs: &S, xl: &Layout, ts: &S, tl: &Layout) -> Result<(S, Shape)> {
        let (n, v) = self.dims(xl.dims(), tl.dims())?;
        let (targets, valid) = self.targets(ts, tl, v)?;
        let f = Forward {
            rows: self.rows(n, v)?,
            targets: targets.rows(&Layout::contiguous(n), Read::RowMajor)?,
            valid,
        };
        let inputs = Inputs::new(OP, &[("logits", xs, xl)])?.strided(0);
        Ok((S::launch(inputs, &[1], f)?, Shape::from(())))
    }

    /// What the launches know of `n` rows of `v` classes.
    fn rows(&self, n: usize, v: usize) -> Result<Logits> {
        Ok(Logits {
            n,
            v: to_i32(OP, "the number of classes", v)?,
            ignore_index: self.ignored(),
        })
    }
}

impl CustomOp2 for CrossEntropy {
    fn name(&self) -> &'static str {
        OP
    }

    forwards!(forward(xs, xl, ts, tl));

    fn bwd(
        &self,
        logits: &Tensor,
        targets: &Tensor,
        _loss: &Tensor,
        g: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let g = g.to_dtype(DType::F32)?;
        let dx = logits.apply_op3_no_bwd(targets, &g, &CrossEntropyGrad(*self))?;
        Ok((Some(dx), None))
    }
}

impl CrossEntropyGrad {
    #[allow(clippy::too_many_arguments)]
    fn forward<S: Launches>(
        &self,
        xs: &S,
        xl: &Layout,
        ts: &S,
        tl: &Layout,
        gs: &S,
        gl: &Layout,
    ) -> Result<(S, Shape)> {
        let op = self.0;
        let (n, v) = op.dims(xl.dims(), tl.dims())?;
        let (targets, valid) = op.targets(ts, tl, v)?;
        if gs.dtype() != DType::F32 || gl.shape().elem_count() != 1 {
            let (d, dims) = (gs.dtype(), gl.dims());
            let what = format!("the loss's gradient must be one f32, got {d:?} of shape {dims:?}");
            return Err(op_error(OP, what));
        }
        let f = Backward {
            rows: op.rows(n, v)?,
            targets: targets.rows(&Layout::contiguous(n), Read::RowMajor)?,
            grad: gs.rows(gl, Read::RowMajor)?,
            valid,
        };
        let inputs = Inputs::new(OP, &[("logits", xs, xl)])?.strided(0);
        Ok((S::launch(inputs, &[n * v], f)?, xl.shape().clone()))
    }
}

impl CustomOp3 for CrossEntropyGrad {
    fn name(&self) -> &'static str {
        OP
    }

    forwards!(forward(xs, xl, ts, tl, gs, gl));
}
