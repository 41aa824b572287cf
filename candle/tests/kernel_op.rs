//! `kernel_op`: a kernel pair made a candle op by implementing `UnaryKernel` (GELU here,
//! the forward from `tritium_kernels`, the backward a kernel of this test), forward and
//! gradients against candle's own `gelu_erf`, f32 and bf16; an op without a backward.

use super::{max_diff, randn};
use candle_core::{Var, WithDType};
use tritium::dsl::trace::Float;
use tritium::prelude::*;
use tritium_candle::kernel_op::Rows;
use tritium_candle::{KernelOp, UnaryKernel};
use tritium_kernels::activation::gelu_erf;

/// `dx = dy · (Φ(x) + x·φ(x))`, the exact GELU's derivative.
#[kernel]
fn gelu_erf_bwd<T: Float>(dx: Ptr<T>, x: Ptr<T>, dy: Ptr<T>, n: i32, #[constexpr] BLOCK: usize) {
    let offs = program_id(0) * BLOCK as i32 + arange(0, BLOCK);
    let mask = offs < n;
    let v = load(x + offs, mask = mask, other = 0.0).to(DType::F32);
    let d = load(dy + offs, mask = mask, other = 0.0).to(DType::F32);
    let cdf = 0.5 * (erf(v * std::f32::consts::FRAC_1_SQRT_2) + 1.0);
    let pdf = exp(-0.5 * v * v) * 0.398_942_3;
    store(dx + offs, (d * (cdf + v * pdf)).to(T::DTYPE), mask = mask);
}

#[derive(Clone)]
struct Gelu;

impl UnaryKernel for Gelu {
    fn name(&self) -> &'static str {
        "gelu"
    }

    fn forward<T: Float + WithDType>(&self, x: &Rows<T>, y: &mut [T]) -> tritium::Result<()> {
        let n = y.len();
        gelu_erf::launch(&Device::cpu(), n.div_ceil(1024), y, x, n as i32, 1024)
    }

    fn backward<T: Float + WithDType>(
        &self,
        x: &Rows<T>,
        dy: &Rows<T>,
        dx: &mut [T],
    ) -> tritium::Result<()> {
        let n = dx.len();
        gelu_erf_bwd::launch(&Device::cpu(), n.div_ceil(1024), dx, x, dy, n as i32, 1024)
    }
}

/// The same forward, no backward.
#[derive(Clone)]
struct ForwardOnly;

impl UnaryKernel for ForwardOnly {
    fn name(&self) -> &'static str {
        "gelu-forward-only"
    }

    fn forward<T: Float + WithDType>(&self, x: &Rows<T>, y: &mut [T]) -> tritium::Result<()> {
        Gelu.forward(x, y)
    }
}

#[test]
fn a_unary_kernel_is_a_differentiable_candle_op() {
    use candle_core::DType;
    for (dtype, tol) in [(DType::F32, 1e-5), (DType::BF16, 2e-2)] {
        // A transposed view: read through a row-major copy.
        let x0 = randn(&[3, 5, 70], 7).to_dtype(dtype).unwrap();
        let g = randn(&[3, 70, 5], 8).to_dtype(dtype).unwrap();
        let x = Var::from_tensor(&x0).unwrap();
        let xt = x.as_tensor().transpose(1, 2).unwrap();
        let ours = xt.apply_op1(KernelOp(Gelu)).unwrap();
        let theirs = xt.gelu_erf().unwrap();
        assert_eq!((ours.dtype(), ours.dims()), (dtype, theirs.dims()));
        assert!(max_diff(&ours, &theirs) <= tol, "{dtype:?} forward");
        let grad = |y: candle_core::Tensor| {
            let store = (y * &g).unwrap().sum_all().unwrap().backward().unwrap();
            store.get(x.as_tensor()).unwrap().clone()
        };
        let (dx, dx_ref) = (grad(ours), grad(theirs));
        assert!(max_diff(&dx, &dx_ref) <= 4.0 * tol, "{dtype:?} backward");
    }
    // Without a backward: the forward runs, autograd through it names the op.
    let x = Var::from_tensor(&randn(&[8], 1)).unwrap();
    let y = x.as_tensor().apply_op1(KernelOp(ForwardOnly)).unwrap();
    let e = y.sum_all().unwrap().backward().unwrap_err().to_string();
    assert!(
        e.contains("gelu-forward-only") && e.contains("no backward"),
        "{e}"
    );
    let e = randn(&[4], 1)
        .to_dtype(candle_core::DType::F64)
        .unwrap()
        .apply_op1(KernelOp(Gelu))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("gelu: takes f32, f16 or bf16") && e.contains("F64"),
        "{e}"
    );
}
