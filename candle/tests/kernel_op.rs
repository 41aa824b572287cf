//! `kernel_op`: a kernel pair made a candle op by implementing `UnaryKernel` (GELU here,
//! the forward from `tritium_kernels`, the backward a kernel of this test), forward and
//! gradients against candle's own `gelu_erf`, f32 and bf16; an op without a backward.

use super::{max_diff, randn};
use candle_core::Var;
use tritium::prelude::*;
use tritium_candle::kernel_op::{On, Out, Rows};
use tritium_candle::KernelFloat;
use tritium_candle::{BinaryKernel, KernelOp, UnaryKernel};
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

    fn forward<T: KernelFloat>(&self, on: &On, x: &Rows<T>, y: &mut Out<T>) -> tritium::Result<()> {
        let n = y.len();
        gelu_erf::launch_with(
            on.device(),
            n.div_ceil(1024),
            on.options(),
            y,
            x,
            n as i32,
            1024,
        )
    }

    fn backward<T: KernelFloat>(
        &self,
        on: &On,
        x: &Rows<T>,
        dy: &Rows<T>,
        dx: &mut Out<T>,
    ) -> tritium::Result<()> {
        let n = dx.len();
        gelu_erf_bwd::launch_with(
            on.device(),
            n.div_ceil(1024),
            on.options(),
            dx,
            x,
            dy,
            n as i32,
            1024,
        )
    }
}

/// The same forward, no backward.
#[derive(Clone)]
struct ForwardOnly;

impl UnaryKernel for ForwardOnly {
    fn name(&self) -> &'static str {
        "gelu-forward-only"
    }

    fn forward<T: KernelFloat>(&self, on: &On, x: &Rows<T>, y: &mut Out<T>) -> tritium::Result<()> {
        Gelu.forward(on, x, y)
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

// ---- ops whose shapes differ: a row reduction, a row scaling by a vector ----

/// `y[r] = Σ_j x[r, j]²` over rows of `n` (`BLOCK ≥ n`).
#[kernel]
fn row_sumsq<T: Float>(y: Ptr<T>, x: Ptr<T>, n: i32, #[constexpr] BLOCK: usize) {
    let r = program_id(0);
    let cols = arange(0, BLOCK);
    let v = load(x + r * n + cols, mask = cols < n, other = 0.0).to(DType::F32);
    store(y + r, sum(v * v, 0).to(T::DTYPE));
}

/// `dx[r, j] = 2 · x[r, j] · dy[r]`.
#[kernel]
fn row_sumsq_bwd<T: Float>(dx: Ptr<T>, x: Ptr<T>, dy: Ptr<T>, n: i32, #[constexpr] BLOCK: usize) {
    let r = program_id(0);
    let cols = arange(0, BLOCK);
    let mask = cols < n;
    let v = load(x + r * n + cols, mask = mask, other = 0.0).to(DType::F32);
    let d = load(dy + r).to(DType::F32);
    store(dx + r * n + cols, (2.0 * v * d).to(T::DTYPE), mask = mask);
}

/// `[…, n] → […]`: the sum of squares of each row.
#[derive(Clone)]
struct RowSumSq;

impl RowSumSq {
    fn cols<T>(x: &Rows<T>) -> usize {
        x.shape().last().copied().unwrap_or(1)
    }
}

impl UnaryKernel for RowSumSq {
    fn name(&self) -> &'static str {
        "row_sumsq"
    }

    fn output_shape(&self, x: &[usize]) -> Result<Vec<usize>, String> {
        match x.split_last() {
            Some((&n, rows)) if n > 0 => Ok(rows.to_vec()),
            _ => Err(format!(
                "x must have rows of at least one element, got {x:?}"
            )),
        }
    }

    fn forward<T: KernelFloat>(&self, on: &On, x: &Rows<T>, y: &mut Out<T>) -> tritium::Result<()> {
        let n = Self::cols(x);
        let block = n.next_power_of_two();
        row_sumsq::launch_with(on.device(), y.len(), on.options(), y, x, n as i32, block)
    }

    fn backward<T: KernelFloat>(
        &self,
        on: &On,
        x: &Rows<T>,
        dy: &Rows<T>,
        dx: &mut Out<T>,
    ) -> tritium::Result<()> {
        let n = Self::cols(x);
        let rows = dx.len() / n;
        row_sumsq_bwd::launch_with(
            on.device(),
            rows,
            on.options(),
            dx,
            x,
            dy,
            n as i32,
            n.next_power_of_two(),
        )
    }
}

/// `y[r, j] = a[r, j] · b[r]`.
#[kernel]
fn scale_rows<T: Float>(y: Ptr<T>, a: Ptr<T>, b: Ptr<T>, n: i32, #[constexpr] BLOCK: usize) {
    let r = program_id(0);
    let cols = arange(0, BLOCK);
    let mask = cols < n;
    let v = load(a + r * n + cols, mask = mask, other = 0.0).to(DType::F32);
    let s = load(b + r).to(DType::F32);
    store(y + r * n + cols, (v * s).to(T::DTYPE), mask = mask);
}

/// `da[r, j] = dy[r, j] · b[r]`, `db[r] = Σ_j dy[r, j] · a[r, j]`.
#[kernel]
fn scale_rows_bwd<T: Float>(
    da: Ptr<T>,
    db: Ptr<T>,
    a: Ptr<T>,
    b: Ptr<T>,
    dy: Ptr<T>,
    n: i32,
    #[constexpr] BLOCK: usize,
) {
    let r = program_id(0);
    let cols = arange(0, BLOCK);
    let mask = cols < n;
    let v = load(a + r * n + cols, mask = mask, other = 0.0).to(DType::F32);
    let d = load(dy + r * n + cols, mask = mask, other = 0.0).to(DType::F32);
    let s = load(b + r).to(DType::F32);
    store(da + r * n + cols, (d * s).to(T::DTYPE), mask = mask);
    store(db + r, sum(d * v, 0).to(T::DTYPE));
}

/// `a [m, n]` scaled row by row by `b [m]`.
#[derive(Clone)]
struct ScaleRows;

impl BinaryKernel for ScaleRows {
    fn name(&self) -> &'static str {
        "scale_rows"
    }

    fn output_shape(&self, a: &[usize], b: &[usize]) -> Result<Vec<usize>, String> {
        match (a, b) {
            ([m, _], [k]) if m == k => Ok(a.to_vec()),
            _ => Err(format!("a must be [m, n] and b [m], got {a:?} and {b:?}")),
        }
    }

    fn forward<T: KernelFloat>(
        &self,
        on: &On,
        a: &Rows<T>,
        b: &Rows<T>,
        y: &mut Out<T>,
    ) -> tritium::Result<()> {
        let n = a.shape()[1];
        scale_rows::launch_with(
            on.device(),
            b.len(),
            on.options(),
            y,
            a,
            b,
            n as i32,
            n.next_power_of_two(),
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn backward<T: KernelFloat>(
        &self,
        on: &On,
        a: &Rows<T>,
        b: &Rows<T>,
        dy: &Rows<T>,
        da: &mut Out<T>,
        db: &mut Out<T>,
    ) -> tritium::Result<()> {
        let n = a.shape()[1];
        let (grid, block) = (b.len(), n.next_power_of_two());
        let (device, options) = (on.device(), on.options());
        scale_rows_bwd::launch_with(device, grid, options, da, db, a, b, dy, n as i32, block)
    }
}

#[test]
fn kernels_whose_output_shape_differs_are_differentiable_candle_ops() {
    use candle_core::DType;
    for (dtype, tol) in [(DType::F32, 1e-4), (DType::BF16, 5e-2)] {
        // A reduction: [3, 4, 37] → [3, 4] against candle's sum of squares.
        let x = Var::from_tensor(&randn(&[3, 4, 37], 11).to_dtype(dtype).unwrap()).unwrap();
        let g = randn(&[3, 4], 12).to_dtype(dtype).unwrap();
        let ours = x.as_tensor().apply_op1(KernelOp(RowSumSq)).unwrap();
        let theirs = x.as_tensor().sqr().unwrap().sum(2).unwrap();
        assert_eq!(ours.dims(), [3, 4]);
        let scale = max_diff(&theirs, &theirs.zeros_like().unwrap());
        assert!(
            max_diff(&ours, &theirs) <= tol * scale,
            "{dtype:?} row_sumsq"
        );
        let grad = |y: candle_core::Tensor, v: &Var| {
            let store = (y * &g).unwrap().sum_all().unwrap().backward().unwrap();
            store.get(v.as_tensor()).unwrap().clone()
        };
        let (dx, dx_ref) = (grad(ours, &x), grad(theirs, &x));
        assert_eq!(dx.dims(), [3, 4, 37]);
        assert!(
            max_diff(&dx, &dx_ref) <= 4.0 * tol * scale,
            "{dtype:?} row_sumsq dx"
        );
        // Operands of two shapes: [5, 70] scaled by [5].
        let a = Var::from_tensor(&randn(&[5, 70], 13).to_dtype(dtype).unwrap()).unwrap();
        let b = Var::from_tensor(&randn(&[5], 14).to_dtype(dtype).unwrap()).unwrap();
        let g = randn(&[5, 70], 15).to_dtype(dtype).unwrap();
        let ours = (a.as_tensor())
            .apply_op2(b.as_tensor(), KernelOp(ScaleRows))
            .unwrap();
        let theirs = (a.as_tensor())
            .broadcast_mul(&b.as_tensor().unsqueeze(1).unwrap())
            .unwrap();
        assert!(
            max_diff(&ours, &theirs) <= tol * 4.0,
            "{dtype:?} scale_rows"
        );
        let grads = |y: candle_core::Tensor| {
            let store = (y * &g).unwrap().sum_all().unwrap().backward().unwrap();
            let get = |v: &Var| store.get(v.as_tensor()).unwrap().clone();
            (get(&a), get(&b))
        };
        let ((da, db), (da_ref, db_ref)) = (grads(ours), grads(theirs));
        assert_eq!((da.dims(), db.dims()), ([5, 70].as_slice(), [5].as_slice()));
        assert!(
            max_diff(&da, &da_ref) <= 4.0 * tol * 4.0,
            "{dtype:?} scale_rows da"
        );
        assert!(
            max_diff(&db, &db_ref) <= 30.0 * tol * 4.0,
            "{dtype:?} scale_rows db"
        );
    }
    // Shapes the kernels refuse: errors naming the op and what was wrong.
    let e = randn(&[5, 70], 1)
        .apply_op2(&randn(&[4], 2), KernelOp(ScaleRows))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("scale_rows") && e.contains("b [m], got [5, 70] and [4]"),
        "{e}"
    );
    let e = randn(&[3, 0], 1)
        .apply_op1(KernelOp(RowSumSq))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("row_sumsq") && e.contains("at least one element"),
        "{e}"
    );
}

/// A kernel op's launches take their device from `On`: the same `forward`/`backward` run
/// on the CUDA emulator (the GPU's code, on the host) give the CPU's results.
#[test]
fn kernel_op_launches_run_on_the_device_they_are_given() {
    use ndarray::{ArrayD, CowArray, IxDyn};
    use tritium_candle::SwiGlu;
    let n = 3000;
    let array = |seed: u64| {
        let t = randn(&[n], seed).to_vec1::<f32>().unwrap();
        CowArray::from(ArrayD::from_shape_vec(IxDyn(&[n]), t).unwrap())
    };
    let (gate, up, dy) = (
        Rows::host(array(31)),
        Rows::host(array(32)),
        Rows::host(array(33)),
    );
    let run = |device: Device| {
        let on = On::new(device);
        let (mut y, mut dg, mut du) = (vec![0f32; n], vec![0f32; n], vec![0f32; n]);
        SwiGlu
            .forward(&on, &gate, &up, &mut Out::Host(&mut y))
            .unwrap();
        let (mut dg_out, mut du_out) = (Out::Host(&mut dg), Out::Host(&mut du));
        (SwiGlu.backward(&on, &gate, &up, &dy, &mut dg_out, &mut du_out)).unwrap();
        (y, dg, du)
    };
    let cpu = run(Device::cpu());
    assert!(cpu.0.iter().any(|v| *v != 0.0));
    let emulated = run(Device::cuda_emulator());
    use tritium::backend::pipeline::{stats, TargetKind};
    for kernel in ["swiglu_fwd", "swiglu_bwd"] {
        let on_emulator = stats().kernel_on(TargetKind::Emulator, kernel).compiles;
        assert!(on_emulator > 0, "{kernel} ran on the emulator");
    }
    for (what, a, b) in [
        ("y", &cpu.0, &emulated.0),
        ("dgate", &cpu.1, &emulated.1),
        ("dup", &cpu.2, &emulated.2),
    ] {
        let d = a
            .iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max);
        assert!(d <= 1e-5, "{what}: {d}");
    }
}
