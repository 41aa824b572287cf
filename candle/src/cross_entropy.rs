//! Cross-entropy over logits as a candle custom op on Tritium's kernels
//! ([`tritium_kernels::cross_entropy`], Liger-Kernel's fused version without the linear
//! layer): `logits.apply_op2(targets, CrossEntropy { ignore_index })`, or
//! [`cross_entropy`], is the mean over the rows not ignored of `logsumexp(x) − x[target]`
//! (`candle_nn::loss::cross_entropy`, with PyTorch's `ignore_index`), an f32 scalar;
//! its backward gives `dlogits = (softmax − onehot) / n_valid · g` (0 on ignored rows).

use crate::candle_error;
use crate::op::{
    cpu_array, dispatch, last_dim_contiguous, op_error, to_i32, zeros, KernelFloat, PerFloat,
};
use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp2, CustomOp3, DType, Layout, Result, Shape, Tensor};
use tritium::dsl::trace::lang::next_power_of_2;
use tritium::Device;
use tritium_kernels::cross_entropy::{cross_entropy_bwd, cross_entropy_fwd};

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

    /// The targets as i64 and the number of rows not ignored; an error for a dtype other
    /// than u32 and i64, or a target outside `0..v` that is not ignored.
    fn targets(&self, s: &CpuStorage, l: &Layout, v: usize) -> Result<(Vec<i64>, usize)> {
        let targets: Vec<i64> = match s.dtype() {
            DType::U32 => cpu_array::<u32>(s, l)?.iter().map(|&t| t as i64).collect(),
            DType::I64 => cpu_array::<i64>(s, l)?.iter().copied().collect(),
            d => {
                return Err(op_error(
                    OP,
                    format!("targets must be u32 or i64, got {d:?}"),
                ))
            }
        };
        let mut valid = 0;
        for (row, &t) in targets.iter().enumerate() {
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

struct Forward<'a> {
    logits: (&'a CpuStorage, &'a Layout),
    targets: &'a [i64],
    n: usize,
    v: usize,
    ignore_index: i64,
    /// With the gradient for this upstream gradient over the rows not ignored.
    grad_scale: Option<f32>,
}

impl PerFloat for Forward<'_> {
    /// The loss of each row, and the gradient of the logits when asked for.
    type Output = (Vec<f32>, Option<CpuStorage>);

    fn run<T: KernelFloat>(self) -> Result<Self::Output> {
        let (n, v) = (self.n, self.v);
        let mut loss = vec![0f32; n];
        let mut lse = vec![0f32; n];
        if n == 0 {
            let dx = self.grad_scale.map(|_| T::to_cpu_storage_owned(Vec::new()));
            return Ok((loss, dx));
        }
        let x = last_dim_contiguous::<T>(self.logits.0, self.logits.1)?;
        let x_stride = x.strides()[0] as i64;
        let cols = to_i32(OP, "the number of classes", v)?;
        cross_entropy_fwd::launch(
            &Device::cpu(),
            n,
            &mut loss,
            &mut lse,
            &x,
            x_stride,
            self.targets,
            cols,
            self.ignore_index,
            block(v),
        )
        .map_err(candle_error)?;
        let Some(scale) = self.grad_scale else {
            return Ok((loss, None));
        };
        let mut dx = zeros::<T>(n * v);
        cross_entropy_bwd::launch(
            &Device::cpu(),
            n,
            &mut dx,
            &x,
            x_stride,
            self.targets,
            &lse,
            scale,
            cols,
            self.ignore_index,
            block(v),
        )
        .map_err(candle_error)?;
        Ok((loss, Some(T::to_cpu_storage_owned(dx))))
    }
}

impl CustomOp2 for CrossEntropy {
    fn name(&self) -> &'static str {
        OP
    }

    fn cpu_fwd(
        &self,
        xs: &CpuStorage,
        xl: &Layout,
        ts: &CpuStorage,
        tl: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let (n, v) = self.dims(xl.dims(), tl.dims())?;
        let (targets, valid) = self.targets(ts, tl, v)?;
        let f = Forward {
            logits: (xs, xl),
            targets: &targets,
            n,
            v,
            ignore_index: self.ignored(),
            grad_scale: None,
        };
        let (loss, _) = dispatch(OP, xs.dtype(), f)?;
        let total: f64 = loss.iter().map(|&l| l as f64).sum();
        let mean = (total / valid as f64) as f32;
        Ok((CpuStorage::F32(vec![mean]), Shape::from(())))
    }

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

impl CustomOp3 for CrossEntropyGrad {
    fn name(&self) -> &'static str {
        OP
    }

    fn cpu_fwd(
        &self,
        xs: &CpuStorage,
        xl: &Layout,
        ts: &CpuStorage,
        tl: &Layout,
        gs: &CpuStorage,
        gl: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        let op = self.0;
        let (n, v) = op.dims(xl.dims(), tl.dims())?;
        let (targets, valid) = op.targets(ts, tl, v)?;
        let g = cpu_array::<f32>(gs, gl)?;
        let &[g] = g.as_slice().unwrap_or(&[]) else {
            return Err(op_error(
                OP,
                format!(
                    "the loss's gradient must be one f32, got shape {:?}",
                    gl.dims()
                ),
            ));
        };
        let scale = match valid {
            0 => 0.0,
            valid => g / valid as f32,
        };
        let f = Forward {
            logits: (xs, xl),
            targets: &targets,
            n,
            v,
            ignore_index: op.ignored(),
            grad_scale: Some(scale),
        };
        let (_, dx) = dispatch(OP, xs.dtype(), f)?;
        let dx = dx.ok_or_else(|| op_error(OP, "no gradient computed"))?;
        Ok((dx, xl.shape().clone()))
    }
}
