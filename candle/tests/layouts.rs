//! Every fused op on inputs of every layout candle makes, forward and backward, against the
//! same op on the inputs' contiguous copies, bit for bit: a layout changes where a kernel
//! reads its rows (a layout's offset, outer strides, a broadcast's stride 0, or a copy
//! where the last dim is strided), never the arithmetic. The contiguous path itself is
//! checked against candle-nn and candle's autograd in the ops' own modules.

use crate::randn;
use candle_core::{DType, Device, Tensor, Var};
use tritium_candle::{cross_entropy, rms_norm, rope, softmax_last_dim, swiglu};

/// A way to lay out a tensor of a given shape (rank 2 or more): the shape of the base
/// tensor it views, and the view of it.
struct LayoutKind {
    name: &'static str,
    base: fn(&[usize]) -> Vec<usize>,
    view: fn(&Var, &[usize]) -> Tensor,
}

/// The base tensor (a [`Var`], so that gradients flow back to it) a layout views, and the
/// view itself.
struct Laid {
    base: Var,
    view: Tensor,
}

/// Layouts of a shape, each from a base tensor of its own shape: row-major, a window at an
/// offset, columns of wider rows (outer strides, the last dim contiguous), the last two
/// dims transposed (the last strided: copied), the first two transposed (outer dims out of
/// order), and a broadcast (stride 0 in the first dim).
const LAYOUTS: [LayoutKind; 6] = [
    LayoutKind {
        name: "contiguous",
        base: |s| s.to_vec(),
        view: |b, _| b.as_tensor().clone(),
    },
    LayoutKind {
        name: "window",
        base: |s| [&[s[0] + 3], &s[1..]].concat(),
        view: |b, s| b.narrow(0, 2, s[0]).unwrap(),
    },
    LayoutKind {
        name: "columns",
        base: |s| [&s[..s.len() - 1], &[s[s.len() - 1] + 5]].concat(),
        view: |b, s| b.narrow(s.len() - 1, 3, s[s.len() - 1]).unwrap(),
    },
    LayoutKind {
        name: "last two transposed",
        base: |s| {
            let mut t = s.to_vec();
            t.swap(s.len() - 2, s.len() - 1);
            t
        },
        view: |b, s| b.transpose(s.len() - 2, s.len() - 1).unwrap(),
    },
    LayoutKind {
        name: "first two transposed",
        base: |s| [&[s[1], s[0]], &s[2..]].concat(),
        view: |b, _| b.transpose(0, 1).unwrap(),
    },
    LayoutKind {
        name: "broadcast",
        base: |s| [&[1], &s[1..]].concat(),
        view: |b, s| b.broadcast_as(s).unwrap(),
    },
];

/// `shape` laid out as `layout` says, of values from `seed` in `dtype` (scaled by `scale`).
fn laid(layout: &LayoutKind, shape: &[usize], seed: u64, dtype: DType, scale: f64) -> Laid {
    let values = (randn(&(layout.base)(shape), seed) * scale).unwrap();
    let base = Var::from_tensor(&values.to_dtype(dtype).unwrap()).unwrap();
    let view = (layout.view)(&base, shape);
    assert_eq!(view.dims(), shape, "{}", layout.name);
    Laid { base, view }
}

/// An op of the inputs it is given (views or their contiguous copies).
type Op<'a> = &'a dyn Fn(&[Tensor]) -> Tensor;

/// `op`'s value and the gradients of `Σ op · g` with respect to each input's base, with
/// the inputs given as `inputs`' views, or (`copied`) as their contiguous copies.
fn run(op: Op, inputs: &[&Laid], seed: u64, copied: bool) -> (Vec<f32>, Vec<Vec<f32>>) {
    let args: Vec<Tensor> = (inputs.iter())
        .map(|l| match copied {
            true => l.view.contiguous().unwrap(),
            false => l.view.clone(),
        })
        .collect();
    let y = op(&args);
    let g = randn(y.dims(), seed).to_dtype(y.dtype()).unwrap();
    let loss = (&y * &g).unwrap().sum_all().unwrap();
    let grads = loss.backward().unwrap();
    let bits = |t: &Tensor| -> Vec<f32> {
        let t = t.to_dtype(DType::F32).unwrap().flatten_all().unwrap();
        t.to_vec1::<f32>().unwrap()
    };
    let dx = (inputs.iter())
        .map(|l| bits(grads.get(l.base.as_tensor()).expect("a gradient")))
        .collect();
    (bits(&y), dx)
}

/// The same values and gradients, bit for bit (NaN as NaN), laid out or copied.
#[track_caller]
fn assert_same(op: Op, inputs: &[&Laid], seed: u64, what: &str) {
    let (y, dx) = run(op, inputs, seed, false);
    let (y_ref, dx_ref) = run(op, inputs, seed, true);
    let same = |a: &[f32], b: &[f32]| {
        a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
    };
    assert!(same(&y, &y_ref), "{what}: values differ");
    for (k, (d, d_ref)) in dx.iter().zip(&dx_ref).enumerate() {
        assert!(same(d, d_ref), "{what}: the gradient of input {k} differs");
    }
}

/// Row lengths from one element to past a program's block of 1024.
const ROWS: [usize; 5] = [1, 5, 64, 129, 1030];

#[test]
fn row_ops_read_every_layout_as_its_copy() {
    for dtype in [DType::F32, DType::BF16] {
        for n in ROWS {
            let shape = [3usize, 4, n];
            for (k, layout) in LAYOUTS.iter().enumerate() {
                let what = |op: &str| format!("{op} {dtype:?} {shape:?} {}", layout.name);
                let x = laid(layout, &shape, 1, dtype, 1.0);
                // `w` of the norm: the columns layout of a rank-1 tensor is a window.
                let w = Var::from_tensor(&randn(&[n + 2], 2).to_dtype(dtype).unwrap()).unwrap();
                let w = Laid {
                    view: w.narrow(0, 1, n).unwrap(),
                    base: w,
                };
                let norm = |a: &[Tensor]| rms_norm(&a[0], &a[1], 1e-6).unwrap();
                assert_same(&norm, &[&x, &w], 3, &what("rms_norm"));
                let softmax = |a: &[Tensor]| softmax_last_dim(&a[0]).unwrap();
                assert_same(&softmax, &[&x], 4, &what("softmax_last_dim"));
                let up = laid(&LAYOUTS[(k + 1) % LAYOUTS.len()], &shape, 5, dtype, 1.0);
                let glu = |a: &[Tensor]| swiglu(&a[0], &a[1]).unwrap();
                assert_same(&glu, &[&x, &up], 6, &what("swiglu"));
            }
        }
    }
}

#[test]
fn rope_reads_every_layout_as_its_copy() {
    for dtype in [DType::F32, DType::BF16] {
        for (t, d) in [(1usize, 6usize), (9, 64), (5, 128)] {
            let shape = [2usize, 3, t, d];
            let f: Vec<f32> = (0..t * d / 2).map(|i| i as f32 * 0.37).collect();
            let f = Tensor::from_vec(f, (t, d / 2), &Device::Cpu).unwrap();
            let cos = f.cos().unwrap().to_dtype(dtype).unwrap();
            let sin = f.sin().unwrap().to_dtype(dtype).unwrap();
            for layout in &LAYOUTS {
                let what = format!("rope {dtype:?} {shape:?} {}", layout.name);
                let x = laid(layout, &shape, 7, dtype, 1.0);
                let op = |a: &[Tensor]| rope(&a[0], &cos, &sin).unwrap();
                assert_same(&op, &[&x], 8, &what);
            }
        }
    }
}

#[test]
fn cross_entropy_reads_every_layout_as_its_copy() {
    for dtype in [DType::F32, DType::BF16] {
        // Rows of one block, of two, and of three (1024 columns per block).
        for v in [3usize, 1030, 2100] {
            let shape = [6usize, v];
            let targets: Vec<u32> = (0..6).map(|i| (i * 7919 % v) as u32).collect();
            let targets = Tensor::new(targets, &Device::Cpu).unwrap();
            for layout in &LAYOUTS {
                let what = format!("cross_entropy {dtype:?} {shape:?} {}", layout.name);
                let x = laid(layout, &shape, 9, dtype, 4.0);
                let op = |a: &[Tensor]| cross_entropy(&a[0], &targets).unwrap();
                assert_same(&op, &[&x], 10, &what);
            }
            // Targets as a view too (a window of a longer tensor).
            let long: Vec<u32> = (0..9).map(|i| (i * 104_729 % v) as u32).collect();
            let t = Tensor::new(long, &Device::Cpu)
                .unwrap()
                .narrow(0, 2, 6)
                .unwrap();
            let x = laid(&LAYOUTS[0], &shape, 11, dtype, 4.0);
            let on_view = cross_entropy(&x.view, &t).unwrap();
            let on_copy = cross_entropy(&x.view, &t.contiguous().unwrap()).unwrap();
            let (a, b) = (
                on_view.to_scalar::<f32>().unwrap(),
                on_copy.to_scalar::<f32>().unwrap(),
            );
            assert_eq!(
                a.to_bits(),
                b.to_bits(),
                "{dtype:?} {v}: targets as a window"
            );
        }
    }
}
