//! `dot` operands loaded under box masks, as at the edges of tutorial 03's matrices: the CPU
//! copies the box's rows as runs (codegen `edge_copy`) and runs the K loop only over the
//! steps whose operands are not both the masked-off +0 (`dot`'s `k_steps`). A whole box, or
//! no mask, lets the micro-kernels read `a` where it lies (codegen `in_place`).

use crate::common::{all_devices, assert_close, dumps_of, random_f32};
use ndarray::Array2;
use tritium::prelude::*;
use tritium::Device;

/// `out = dot(a', b', -0.0)` over `M × K @ K × N` buffers, where `a'` and `b'` are `a` and `b`
/// masked to the box `rows < m`, `cols < n`, and K index `k + koff < kk` (wrapping i32),
/// everything else +0.
#[kernel]
fn boxed_dot(
    out: Ptr<f32>,
    a: Ptr<f32>,
    b: Ptr<f32>,
    m: i32,
    n: i32,
    kk: i32,
    koff: i32,
    #[constexpr] M: usize,
    #[constexpr] N: usize,
    #[constexpr] K: usize,
) {
    let rm = arange(0, M);
    let rn = arange(0, N);
    let rk = arange(0, K);
    let ta = load(
        a + rm[(.., None)] * K as i32 + rk[(None, ..)],
        mask = (rm[(.., None)] < m) & (rk[(None, ..)] + koff < kk),
        other = 0.0,
    );
    let tb = load(
        b + rk[(.., None)] * N as i32 + rn[(None, ..)],
        mask = (rk[(.., None)] + koff < kk) & (rn[(None, ..)] < n),
        other = 0.0,
    );
    let acc = dot(ta, tb, full([M, N], -0.0, DType::F32));
    store(out + rm[(.., None)] * N as i32 + rn[(None, ..)], acc);
}

const ROWS: usize = 24;
const DEPTH: usize = 64;

/// One launch of [`boxed_dot`] with `N` columns on `device`.
fn run(
    device: &Device,
    n_cols: usize,
    (a, b): (&[f32], &[f32]),
    [m, n, kk, koff]: [i32; 4],
) -> Vec<f32> {
    let mut out = vec![f32::NAN; ROWS * n_cols];
    boxed_dot::launch(
        device, 1, &mut out, a, b, m, n, kk, koff, ROWS, n_cols, DEPTH,
    )
    .unwrap();
    out
}

/// `out[i][j] = Σ_k x(i, k) · y(k, j)` over `ROWS × DEPTH @ DEPTH × n_cols`, in K order with
/// `mul_add` from `start`: the plain Rust the kernels here are checked against.
fn product(
    n_cols: usize,
    start: f32,
    x: impl Fn(usize, usize) -> f32,
    y: impl Fn(usize, usize) -> f32,
) -> Vec<f32> {
    let mut out = vec![0f32; ROWS * n_cols];
    for i in 0..ROWS {
        for j in 0..n_cols {
            let mut c = start;
            for k in 0..DEPTH {
                c = x(i, k).mul_add(y(k, j), c);
            }
            out[i * n_cols + j] = c;
        }
    }
    out
}

/// What [`boxed_dot`] computes, in plain Rust (from -0).
fn reference(n_cols: usize, (a, b): (&[f32], &[f32]), [m, n, kk, koff]: [i32; 4]) -> Vec<f32> {
    let in_k = |k: usize| (k as i32).wrapping_add(koff) < kk;
    let x = |i: usize, k: usize| match (i as i32) < m && in_k(k) {
        true => a[i * DEPTH + k],
        false => 0.0,
    };
    let y = |k: usize, j: usize| match in_k(k) && (j as i32) < n {
        true => b[k * n_cols + j],
        false => 0.0,
    };
    product(n_cols, -0.0, x, y)
}

/// Every kind of box: whole, partial on each axis, empty in DEPTH; 64 columns (`b` packed in
/// rows) and 128 (in panels); and a DEPTH index that wraps, where the mask is no box.
#[test]
fn partial_boxes_match_plain_rust_and_the_interpreter() {
    let boxes = [
        [24, 64, 64, 0],
        [19, 64, 64, 0],
        [24, 37, 64, 0],
        [24, 64, 40, 0],
        [5, 3, 1, 0],
        [24, 64, 0, 0],
        [0, 0, 64, 0],
        [24, 64, 64, 30],
        [24, 64, i32::MAX, i32::MAX - 10],
    ];
    for n_cols in [64, 128] {
        let a = random_f32(ROWS * DEPTH, 31);
        let b = random_f32(DEPTH * n_cols, 32);
        for bounds in boxes {
            let want = reference(n_cols, (&a, &b), bounds);
            let want = Array2::from_shape_vec((ROWS, n_cols), want).unwrap();
            for device in [Device::cpu(), Device::interpreter()] {
                let got = run(&device, n_cols, (&a, &b), bounds);
                let got = Array2::from_shape_vec((ROWS, n_cols), got).unwrap();
                let what = format!("{device:?}, {n_cols} columns, box {bounds:?}");
                assert_close(&got, &want, 1e-5, 1e-6, &what);
            }
        }
    }
}

/// The steps a shortened DEPTH loop skips each add `+0 · +0`, which turns an accumulator of -0
/// into +0: with `a = +0` and `b = -1` every kept step adds -0, so the result is -0 only
/// when no step was masked off.
#[test]
fn skipped_k_steps_still_turn_minus_zero_into_plus_zero() {
    let a = vec![0f32; ROWS * DEPTH];
    let b = vec![-1f32; DEPTH * 64];
    for kk in [0, 1, 40, DEPTH as i32] {
        let want = if kk < DEPTH as i32 { 0f32 } else { -0f32 };
        for device in all_devices() {
            let got = run(&device, 64, (&a, &b), [ROWS as i32, 64, kk, 0]);
            assert!(
                got.iter().all(|x| x.to_bits() == want.to_bits()),
                "{device:?}, {kk} of {DEPTH} steps: got {:?}, want {want:?} everywhere",
                &got[..4]
            );
        }
    }
}

/// The copy by rows is generated for box-masked operands.
#[test]
fn box_masked_operands_are_copied_by_rows() {
    let a = random_f32(ROWS * DEPTH, 33);
    let b = random_f32(DEPTH * 128, 34);
    let mut out = vec![0f32; ROWS * 128];
    let dumps = dumps_of("dot-edges", |options| {
        boxed_dot::launch_with(
            &Device::cpu(),
            1,
            options,
            &mut out,
            &a,
            &b,
            20,
            100,
            50,
            0,
            ROWS,
            128,
            DEPTH,
        )
        .unwrap()
    });
    let ll = dumps.get("ll");
    assert!(ll.contains("edge.rows"), "no copy by rows:\n{ll}");
    let want = reference(128, (&a, &b), [20, 100, 50, 0]);
    let (got, want) = (
        Array2::from_shape_vec((ROWS, 128), out).unwrap(),
        Array2::from_shape_vec((ROWS, 128), want).unwrap(),
    );
    assert_close(&got, &want, 1e-5, 1e-6, "the dumped launch");
}

/// `out = dot(a', b')` with `a`'s rows `lda` elements apart (a window of a wider matrix):
/// `a'` is `a` under the box `rows < m`, `k < ka` (+0 elsewhere), or unmasked when `m` is
/// negative; `b'` is `b` under the box `k < kb`.
#[kernel]
fn strided_dot(
    out: Ptr<f32>,
    a: Ptr<f32>,
    b: Ptr<f32>,
    lda: i32,
    m: i32,
    ka: i32,
    kb: i32,
    #[constexpr] M: usize,
    #[constexpr] N: usize,
    #[constexpr] K: usize,
) {
    let rm = arange(0, M);
    let rn = arange(0, N);
    let rk = arange(0, K);
    let a_ptrs = a + rm[(.., None)] * lda + rk[(None, ..)];
    let b_tile = load(
        b + rk[(.., None)] * N as i32 + rn[(None, ..)],
        mask = (rk[(.., None)] < kb) & (rn[(None, ..)] < N as i32),
        other = 0.0,
    );
    let acc = zeros([M, N], DType::F32);
    let c_ptrs = out + rm[(.., None)] * N as i32 + rn[(None, ..)];
    if m < 0 {
        store(c_ptrs, dot(load(a_ptrs), b_tile, acc));
    } else {
        let a_tile = load(
            a_ptrs,
            mask = (rm[(.., None)] < m) & (rk[(None, ..)] < ka),
            other = 0.0,
        );
        store(c_ptrs, dot(a_tile, b_tile, acc));
    }
}

/// What [`strided_dot`] computes, in plain Rust (from +0).
fn strided_reference(a: &[f32], b: &[f32], lda: usize, [m, ka, kb]: [i32; 3]) -> Vec<f32> {
    let n_cols = b.len() / DEPTH;
    let x = |i: usize, k: usize| match m < 0 || ((i as i32) < m && (k as i32) < ka) {
        true => a[i * lda + k],
        false => 0.0,
    };
    let y = |k: usize, j: usize| match (k as i32) < kb {
        true => b[k * n_cols + j],
        false => 0.0,
    };
    product(n_cols, 0.0, x, y)
}

/// `a` from a window of a wider matrix, read in place (unmasked, or under a box whose
/// columns hold every step the K loop runs, its other rows read as +0) or copied (a K loop
/// longer than `a`'s box, as `b`'s box is deeper), on every device, against plain Rust;
/// the CPU's kernel has the in-place rows.
#[test]
fn a_is_read_in_place_from_a_wider_matrix() {
    let n_cols = 64;
    let b = random_f32(DEPTH * n_cols, 36);
    let d = DEPTH as i32;
    let masks = [
        [-1, d, d],
        [ROWS as i32, d, d],
        [17, d, d],
        [0, d, d],
        [24, 40, 40],
        [17, 50, 40],
        [17, 40, 50],
        [24, 0, 0],
        [24, 0, 10],
    ];
    for lda in [DEPTH, DEPTH + 3, 1000] {
        let a = random_f32(ROWS * lda, 35);
        for mask in masks {
            let want = strided_reference(&a, &b, lda, mask);
            let want = Array2::from_shape_vec((ROWS, n_cols), want).unwrap();
            for device in all_devices() {
                let mut out = vec![f32::NAN; ROWS * n_cols];
                let [m, ka, kb] = mask;
                strided_dot::launch(
                    &device, 1, &mut out, &a, &b, lda as i32, m, ka, kb, ROWS, n_cols, DEPTH,
                )
                .unwrap();
                let got = Array2::from_shape_vec((ROWS, n_cols), out).unwrap();
                let what = format!("{device:?}, lda {lda}, mask {mask:?}");
                assert_close(&got, &want, 1e-5, 1e-6, &what);
            }
        }
    }
    let a = random_f32(ROWS * 100, 37);
    let mut out = vec![0f32; ROWS * n_cols];
    let dumps = dumps_of("dot-in-place", |options| {
        strided_dot::launch_with(
            &Device::cpu(),
            1,
            options,
            &mut out,
            &a,
            &b,
            100,
            ROWS as i32,
            d,
            d,
            ROWS,
            n_cols,
            DEPTH,
        )
        .unwrap()
    });
    let ll = dumps.get("ll");
    let in_place = ll.matches("a.row.in_place").count();
    // Both dots' micro-kernels (each 6 rows).
    assert!(in_place >= 12, "{in_place} in-place rows:\n{ll}");
}
