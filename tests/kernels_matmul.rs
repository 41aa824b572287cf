//! Tutorial 03: matmul with f32 accumulation, f32 and f16 inputs.

use crate::common::{assert_close, random_f32};
use half::f16;
use ndarray::Array2;
use rstest::rstest;
use tritium::Device;
use tritium_kernels::matmul::{matmul_2d, MatmulBlocks};

#[rstest]
fn matmul_f32(
    #[values((1, 1), (17, 33), (4096, 781))] mn: (usize, usize),
    #[values(1, 45)] k: usize,
) {
    let (m, n) = mn;
    let a = Array2::from_shape_vec((m, k), random_f32(m * k, 7)).unwrap();
    let b = Array2::from_shape_vec((k, n), random_f32(k * n, 8)).unwrap();
    let want = a.dot(&b);
    let blocks = MatmulBlocks::default();
    let compiled: Array2<f32> = matmul_2d(&Device::cpu(), a.view(), b.view(), blocks).unwrap();
    assert_close(&compiled, &want, 1e-5, 1e-5, "compiled vs ndarray");
    if m * n <= 17 * 33 {
        let interpreted: Array2<f32> =
            matmul_2d(&Device::interpreter(), a.view(), b.view(), blocks).unwrap();
        assert_close(
            &compiled,
            &interpreted,
            1e-5,
            1e-6,
            "compiled vs interpreter",
        );
    }
}

#[rstest]
fn matmul_f16_inputs_accumulate_in_f32(#[values((1, 1), (17, 33), (128, 96))] mn: (usize, usize)) {
    let (m, n, k) = (mn.0, mn.1, 70);
    let a = Array2::from_shape_vec((m, k), random_f32(m * k, 9))
        .unwrap()
        .mapv(f16::from_f32);
    let b = Array2::from_shape_vec((k, n), random_f32(k * n, 10))
        .unwrap()
        .mapv(f16::from_f32);
    let want = a.mapv(f16::to_f32).dot(&b.mapv(f16::to_f32));
    let blocks = MatmulBlocks {
        m: 32,
        n: 32,
        k: 16,
    };
    let compiled: Array2<f32> = matmul_2d(&Device::cpu(), a.view(), b.view(), blocks).unwrap();
    let interpreted: Array2<f32> =
        matmul_2d(&Device::interpreter(), a.view(), b.view(), blocks).unwrap();
    assert_close(&compiled, &want, 1e-5, 1e-5, "compiled vs ndarray");
    assert_close(
        &compiled,
        &interpreted,
        1e-5,
        1e-6,
        "compiled vs interpreter",
    );
}

/// Tutorial 03's kernel on fp8 inputs (Triton's fp8 matmul path): each fp8 of a pair
/// loads as itself and the products accumulate in f32.
#[rstest]
fn matmul_fp8_inputs_accumulate_in_f32(#[values((17, 33), (64, 64))] mn: (usize, usize)) {
    use tritium::prelude::{F8E4M3, F8E5M2};
    let (m, n, k) = (mn.0, mn.1, 48);
    let a = Array2::from_shape_vec((m, k), random_f32(m * k, 11)).unwrap();
    let b = Array2::from_shape_vec((k, n), random_f32(k * n, 12)).unwrap();
    let blocks = MatmulBlocks {
        m: 32,
        n: 32,
        k: 16,
    };
    let (a4, b4) = (a.mapv(F8E4M3::from_f32), b.mapv(F8E4M3::from_f32));
    let want = a4.mapv(F8E4M3::to_f32).dot(&b4.mapv(F8E4M3::to_f32));
    for device in [Device::cpu(), Device::interpreter()] {
        let got: Array2<f32> = matmul_2d(&device, a4.view(), b4.view(), blocks).unwrap();
        assert_close(&got, &want, 1e-5, 1e-5, "e4m3 vs ndarray");
    }
    let (a5, b5) = (a.mapv(F8E5M2::from_f32), b.mapv(F8E5M2::from_f32));
    let want = a5.mapv(F8E5M2::to_f32).dot(&b5.mapv(F8E5M2::to_f32));
    let got: Array2<f32> = matmul_2d(&Device::cpu(), a5.view(), b5.view(), blocks).unwrap();
    assert_close(&got, &want, 1e-5, 1e-5, "e5m2 vs ndarray");
}

#[test]
fn matmul_of_transposed_views_uses_strides() {
    let a = Array2::from_shape_vec((40, 30), random_f32(1200, 11)).unwrap();
    let b = Array2::from_shape_vec((20, 30), random_f32(600, 12)).unwrap();
    let want = a.dot(&b.t());
    let got: Array2<f32> =
        matmul_2d(&Device::cpu(), a.view(), b.t(), MatmulBlocks::default()).unwrap();
    assert_close(&got, &want, 1e-5, 1e-5, "a @ b.T");
}

/// Batched `dot` of `[B, M, K] @ [B, K, N]` tiles: without an accumulator, with a 3-D one,
/// and with a scalar one broadcast to every batch.
#[tritium::kernel]
fn batched(
    c: tritium::prelude::Ptr<f32>,
    a: tritium::prelude::Ptr<f32>,
    b: tritium::prelude::Ptr<f32>,
    #[constexpr] B: usize,
    #[constexpr] M: usize,
    #[constexpr] N: usize,
    #[constexpr] K: usize,
    #[constexpr] ACC: usize,
) {
    use tritium::prelude::DType;
    let x = reshape(load(a + arange(0, B * M * K)), [B, M, K]);
    let y = reshape(load(b + arange(0, B * K * N)), [B, K, N]);
    let r = if ACC == 0 {
        dot(x, y)
    } else if ACC == 1 {
        let acc = reshape(cast(arange(0, B * M * N), DType::F32), [B, M, N]);
        dot(x, y, acc, input_precision = "tf32")
    } else {
        dot(x, y, 0.5, out_dtype = DType::F32)
    };
    store(c + arange(0, B * M * N), ravel(r));
}

#[test]
fn batched_dot_is_a_dot_per_batch() {
    use ndarray::{s, Array3};
    let (bs, m, n, k) = (4, 16, 8, 32);
    let a = Array3::from_shape_vec((bs, m, k), random_f32(bs * m * k, 3)).unwrap();
    let b = Array3::from_shape_vec((bs, k, n), random_f32(bs * k * n, 4)).unwrap();
    for acc in 0..3 {
        let want = Array3::from_shape_fn((bs, m, n), |(i, r, c)| {
            let base = match acc {
                0 => 0.0,
                1 => ((i * m + r) * n + c) as f32,
                _ => 0.5,
            };
            let row = a.slice(s![i, r, ..]);
            base + row.dot(&b.slice(s![i, .., c]))
        });
        for device in crate::common::all_devices() {
            let mut got = Array3::<f32>::zeros((bs, m, n));
            batched::launch(&device, 1, &mut got, a.view(), b.view(), bs, m, n, k, acc).unwrap();
            assert_close(&got, &want, 1e-5, 1e-5, &format!("acc {acc} on {device:?}"));
        }
    }
}

/// `out_dtype = f16` accumulates f16 inputs into an f16 result (rounded once), the same
/// bits on every device; a bad `input_precision` or an `out_dtype` that contradicts the
/// accumulator is a trace error.
#[tritium::kernel]
fn half_out(
    c: tritium::prelude::Ptr<f16>,
    a: tritium::prelude::Ptr<f16>,
    #[constexpr] CASE: usize,
) {
    use tritium::prelude::DType;
    let r = arange(0, 16);
    let x = load(a + r[(.., None)] * 16 + r[(None, ..)]);
    let y = if CASE == 0 {
        dot(x, x, out_dtype = DType::F16)
    } else if CASE == 1 {
        dot(x, x, input_precision = "fp8")
    } else {
        dot(x, x, zeros([16, 16], DType::F32), out_dtype = DType::F16)
    };
    store(c + r[(.., None)] * 16 + r[(None, ..)], y);
}

#[test]
fn dot_out_dtype_and_precision_keywords() {
    let a = Array2::from_shape_vec((16, 16), random_f32(256, 5))
        .unwrap()
        .mapv(f16::from_f32);
    let wide = a.mapv(f32::from);
    let want = wide.dot(&wide);
    let mut first: Option<Array2<f16>> = None;
    for device in crate::common::all_devices() {
        let mut c = Array2::<f16>::from_elem((16, 16), f16::NAN);
        half_out::launch(&device, 1, &mut c, a.view(), 0).unwrap();
        assert_close(
            &c.mapv(f32::from),
            &want,
            4e-3,
            4e-3,
            &format!("{device:?}"),
        );
        match &first {
            None => first = Some(c),
            Some(f) => assert_eq!(&c, f, "{device:?} differs from the first device"),
        }
    }
    let mut c = Array2::<f16>::from_elem((16, 16), f16::ZERO);
    let errors = [
        (
            1,
            "input_precision must be \"ieee\", \"tf32\" or \"tf32x3\", got \"fp8\"",
        ),
        (2, "out_dtype f16 differs from the accumulator's dtype f32"),
    ];
    for (case, want) in errors {
        let e = half_out::launch(&Device::interpreter(), 1, &mut c, a.view(), case)
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "{e}");
    }
}

/// Tutorial 09's persistent matmul: every tile computed once by the program that owns it,
/// with fewer programs than tiles, f32 and f16 inputs, on every device.
#[test]
fn persistent_matmul_covers_every_tile_once() {
    use tritium_kernels::matmul::matmul_persistent_2d;
    let blocks = MatmulBlocks {
        m: 16,
        n: 16,
        k: 16,
    };
    // (m, n, k, programs): more tiles than programs, fewer, one program.
    for (m, n, k, programs) in [(70, 45, 33, 3), (16, 16, 16, 8), (33, 100, 7, 1)] {
        let a = Array2::from_shape_vec((m, k), random_f32(m * k, 21)).unwrap();
        let b = Array2::from_shape_vec((k, n), random_f32(k * n, 22)).unwrap();
        let want = a.dot(&b);
        let (ah, bh) = (a.mapv(f16::from_f32), b.mapv(f16::from_f32));
        let want_h = ah.mapv(f32::from).dot(&bh.mapv(f32::from));
        for device in crate::common::all_devices() {
            let what = format!("{m}x{n}x{k}, {programs} programs on {device:?}");
            let c: Array2<f32> =
                matmul_persistent_2d(&device, a.view(), b.view(), blocks, programs).unwrap();
            assert_close(&c, &want, 1e-4, 1e-4, &what);
            let c: Array2<f32> =
                matmul_persistent_2d(&device, ah.view(), bh.view(), blocks, programs).unwrap();
            assert_close(&c, &want_h, 1e-4, 1e-4, &format!("{what}, f16 inputs"));
        }
    }
}

/// Tutorial 03's grouped program order (`GROUP_SIZE_M`): every tile computed once whatever
/// the group size (one block row, a last group shorter than the others, more rows than the
/// matrix has), f32 and f16 inputs, on every device.
#[test]
fn grouped_matmul_covers_every_tile_once() {
    use tritium_kernels::matmul::matmul_grouped_2d;
    let blocks = MatmulBlocks {
        m: 16,
        n: 16,
        k: 16,
    };
    for (m, n, k, group) in [(100, 72, 40, 3), (48, 33, 16, 1), (20, 100, 7, 8)] {
        let a = Array2::from_shape_vec((m, k), random_f32(m * k, 23)).unwrap();
        let b = Array2::from_shape_vec((k, n), random_f32(k * n, 24)).unwrap();
        let want = a.dot(&b);
        let (ah, bh) = (a.mapv(f16::from_f32), b.mapv(f16::from_f32));
        let want_h = ah.mapv(f32::from).dot(&bh.mapv(f32::from));
        for device in crate::common::all_devices() {
            let what = format!("{m}x{n}x{k}, groups of {group} on {device:?}");
            let c: Array2<f32> =
                matmul_grouped_2d(&device, a.view(), b.view(), blocks, group).unwrap();
            assert_close(&c, &want, 1e-4, 1e-4, &what);
            let c: Array2<f32> =
                matmul_grouped_2d(&device, ah.view(), bh.view(), blocks, group).unwrap();
            assert_close(&c, &want_h, 1e-4, 1e-4, &format!("{what}, f16 inputs"));
        }
    }
}

/// Tutorial 03 written as Triton writes it (`matmul_carried`: pointers advanced at every
/// iteration) gives ndarray's products on every device, K a multiple of the block and not,
/// edges masked, f32 and f16 inputs (the f16 ones on tensor cores on the emulators).
#[test]
fn carried_pointer_matmul_matches_ndarray() {
    use tritium_kernels::matmul::matmul_carried_2d_into;
    let blocks = MatmulBlocks {
        m: 32,
        n: 32,
        k: 16,
    };
    for (m, n, k) in [(100, 72, 40), (32, 33, 48), (20, 100, 7)] {
        let a = Array2::from_shape_vec((m, k), random_f32(m * k, 25)).unwrap();
        let b = Array2::from_shape_vec((k, n), random_f32(k * n, 26)).unwrap();
        let (ah, bh) = (a.mapv(f16::from_f32), b.mapv(f16::from_f32));
        let want_h = ah.mapv(f32::from).dot(&bh.mapv(f32::from));
        for device in crate::common::all_devices() {
            let what = format!("{m}x{n}x{k} on {device:?}");
            let mut c = Array2::<f32>::zeros((m, n));
            matmul_carried_2d_into(&device, a.view(), b.view(), c.view_mut(), blocks).unwrap();
            assert_close(&c, &a.dot(&b), 1e-4, 1e-4, &what);
            matmul_carried_2d_into(&device, ah.view(), bh.view(), c.view_mut(), blocks).unwrap();
            assert_close(&c, &want_h, 1e-4, 1e-4, &format!("{what}, f16 inputs"));
        }
    }
}

/// The autotuned matmul is right whichever blocks it picks, and keeps its choice per shape.
#[test]
fn autotuned_matmul_matches_ndarray() {
    use tritium_kernels::matmul::matmul_autotuned;
    for (m, n, k) in [(70, 45, 33), (128, 96, 64)] {
        let a = Array2::from_shape_vec((m, k), random_f32(m * k, 31)).unwrap();
        let b = Array2::from_shape_vec((k, n), random_f32(k * n, 32)).unwrap();
        let want = a.dot(&b);
        for _ in 0..2 {
            let c: Array2<f32> = matmul_autotuned(&Device::cpu(), a.view(), b.view()).unwrap();
            assert_close(&c, &want, 1e-4, 1e-4, &format!("{m}x{n}x{k}"));
        }
    }
}

/// `matmul_into` writes `a @ b` into a strided view of a larger array, leaving the rest of
/// it alone, and an output of the wrong shape is an error that names both shapes.
#[test]
fn matmul_into_writes_a_strided_view_and_checks_its_shape() {
    use ndarray::s;
    use tritium_kernels::matmul::matmul_into;
    let (m, n, k) = (37, 21, 19);
    let a = Array2::from_shape_vec((m, k), random_f32(m * k, 41)).unwrap();
    let b = Array2::from_shape_vec((k, n), random_f32(k * n, 42)).unwrap();
    let mut big = Array2::<f32>::from_elem((m + 3, 2 * n), -7.0);
    matmul_into(
        &Device::cpu(),
        a.view(),
        b.view(),
        big.slice_mut(s![1..m + 1, ..;2]),
    )
    .unwrap();
    assert_close(
        &big.slice(s![1..m + 1, ..;2]).to_owned(),
        &a.dot(&b),
        1e-4,
        1e-4,
        "into a strided view",
    );
    let untouched = big.iter().filter(|x| **x == -7.0).count();
    assert_eq!(
        untouched,
        (m + 3) * 2 * n - m * n,
        "elements outside the view"
    );
    let mut wrong = Array2::<f32>::zeros((m, n + 1));
    let err = matmul_into(&Device::cpu(), a.view(), b.view(), wrong.view_mut()).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("37×22") && msg.contains("37×21"),
        "the error names both shapes: {msg}"
    );
}

/// Tutorial 08's grouped GEMM: problems of different, ragged shapes (a transposed and a
/// strided input among them) in one launch, every tile once, f32 and f16, on every device,
/// unchecked and checked, against ndarray.
#[test]
fn grouped_gemm_matches_a_matmul_per_problem() {
    use tritium::LaunchOptions;
    use tritium_kernels::grouped_gemm::{grouped_matmul_2d, grouped_matmul_2d_with};
    let blocks = MatmulBlocks {
        m: 16,
        n: 16,
        k: 16,
    };
    let shapes = [
        (33, 47, 19),
        (16, 16, 16),
        (1, 100, 7),
        (70, 5, 40),
        (0, 3, 4),
    ];
    let inputs: Vec<(Array2<f32>, Array2<f32>)> = (shapes.iter().enumerate())
        .map(|(g, &(m, n, k))| {
            let a = Array2::from_shape_vec((m, k), random_f32(m * k, 30 + g as u64)).unwrap();
            let b = Array2::from_shape_vec((k, n), random_f32(k * n, 40 + g as u64)).unwrap();
            (a, b)
        })
        .collect();
    // Problem 3's `a` is the transpose of a (40, 70) array; problem 0's `b` every other
    // column of a wider one.
    let a3 = inputs[3].0.t().to_owned().reversed_axes();
    let wide = Array2::from_shape_fn((19, 94), |(i, j)| inputs[0].1[(i, j / 2)]);
    let b0 = wide.slice(ndarray::s![.., ..;2]);
    let mut problems: Vec<_> = inputs.iter().map(|(a, b)| (a.view(), b.view())).collect();
    problems[3].0 = a3.view();
    problems[0].1 = b0.view();
    let want: Vec<Array2<f32>> = inputs.iter().map(|(a, b)| a.dot(b)).collect();
    let half: Vec<_> = (inputs.iter())
        .map(|(a, b)| (a.mapv(f16::from_f32), b.mapv(f16::from_f32)))
        .collect();
    let want_h: Vec<Array2<f32>> = (half.iter())
        .map(|(a, b)| a.mapv(f32::from).dot(&b.mapv(f32::from)))
        .collect();
    let checked = LaunchOptions {
        bounds_check: Some(true),
        ..Default::default()
    };
    for device in crate::common::all_devices() {
        for programs in [1, 4, 64] {
            let what = format!("{programs} programs on {device:?}");
            let c = grouped_matmul_2d(&device, &problems, blocks, programs).unwrap();
            for (g, (c, want)) in c.iter().zip(&want).enumerate() {
                assert_close(c, want, 1e-4, 1e-4, &format!("{what}: problem {g}"));
            }
            let c = grouped_matmul_2d_with(&device, &checked, &problems, blocks, programs);
            for (g, (c, want)) in c.unwrap().iter().zip(&want).enumerate() {
                assert_close(
                    c,
                    want,
                    1e-4,
                    1e-4,
                    &format!("{what}, checked: problem {g}"),
                );
            }
            let hp: Vec<_> = half.iter().map(|(a, b)| (a.view(), b.view())).collect();
            let c = grouped_matmul_2d(&device, &hp, blocks, programs).unwrap();
            for (g, (c, want)) in c.iter().zip(&want_h).enumerate() {
                let c = c.mapv(f32::from);
                // f16 outputs: one rounding of the f32 sum.
                assert_close(&c, want, 2e-3, 2e-3, &format!("{what}: f16 problem {g}"));
            }
        }
    }
}

/// A K loop of `dot`s whose `a` tile moves with the loop variable (`MODE` 0), through a
/// loop-carried pointer tile (1), or not at all (2); `b` moves in modes 0 and 1.
#[tritium::kernel]
fn k_loop(
    c: tritium::Ptr<f32>,
    a: tritium::Ptr<f32>,
    b: tritium::Ptr<f32>,
    k: i32,
    #[constexpr] MODE: u32,
) {
    use tritium::prelude::*;
    let rows = arange(0, 16);
    let kk = arange(0, 32);
    let cols = arange(0, 16);
    let mut acc = zeros([16, 16], DType::F32);
    let mut a_ptrs = a + rows[(.., None)] * k + kk[(None, ..)];
    let (a_first, b_first) = (
        a + rows[(.., None)] * k + kk[(None, ..)],
        b + kk[(.., None)] * 16 + cols[(None, ..)],
    );
    for kb in range(0, k / 32) {
        let (ta, tb) = if MODE == 2 {
            (load(a_first), load(b_first))
        } else {
            let ta = if MODE == 1 {
                load(a_ptrs)
            } else {
                load(a_first + kb * 32)
            };
            (ta, load(b_first + kb * 32 * 16))
        };
        acc = dot(ta, tb, acc);
        a_ptrs = a_ptrs + 32;
    }
    store(c + rows[(.., None)] * 16 + cols[(None, ..)], acc);
}

/// `acc = acc + x` over a `for` loop whose accumulator starts as zeros.
#[tritium::kernel]
fn summed_rows(out: tritium::Ptr<f32>, x: tritium::Ptr<f32>, k: i32) {
    use tritium::prelude::*;
    let cols = arange(0, 16);
    let mut acc = zeros([16], DType::F32);
    for kb in range(0, k) {
        acc = acc + load(x + kb * 16 + cols);
    }
    store(out + cols, acc);
}

/// A `for` loop whose carried tile starts as a constant has its first iteration peeled
/// (`for.first`), unless its body has a `dot`: the copy doubled the code of tutorial 03's
/// K loop for LLVM to compile and saved only one fill of the accumulator.
#[test]
fn k_loops_with_a_dot_are_not_peeled() {
    let (a, b) = (Array2::<f32>::ones((16, 64)), Array2::<f32>::ones((64, 16)));
    let mut c = Array2::<f32>::zeros((16, 16));
    let dot_loop = crate::common::dumps_of("peel-dot", |options| {
        k_loop::launch_with(&Device::cpu(), 1, options, &mut c, &a, &b, 64, 0).unwrap()
    });
    assert!(c.iter().all(|x| *x == 64.0), "{c}");
    let (x, mut out) = (vec![1f32; 4 * 16], vec![0f32; 16]);
    let sum_loop = crate::common::dumps_of("peel-sum", |options| {
        summed_rows::launch_with(&Device::cpu(), 1, options, &mut out, &x, 4).unwrap()
    });
    assert_eq!(out, vec![4f32; 16]);
    let peeled = |d: &crate::common::Dumps| d.get("ll").contains("for.first");
    assert!(!peeled(&dot_loop), "the dot's K loop was peeled");
    assert!(peeled(&sum_loop), "the sum loop was not peeled");
}

/// Prefetches of the next iteration's rows go to L2 (`llvm.prefetch` locality 2): the
/// moving tiles get them, an invariant tile and checked mode do not. Results are exact.
#[test]
fn k_loops_prefetch_the_next_iterations_tiles() {
    let k = 128usize;
    let a = Array2::from_shape_vec((16, k), random_f32(16 * k, 3)).unwrap();
    let b = Array2::from_shape_vec((k, 16), random_f32(k * 16, 4)).unwrap();
    // (mode, checked, prefetches expected)
    let cases = [
        (0, false, true),
        (1, false, true),
        (2, false, false),
        (0, true, false),
    ];
    for (mode, checked, expected) in cases {
        let mut c = Array2::<f32>::zeros((16, 16));
        let dumps = crate::common::dumps_of(&format!("kloop-{mode}-{checked}"), |options| {
            let options = tritium::LaunchOptions {
                bounds_check: Some(checked),
                ..options.clone()
            };
            k_loop::launch_with(&Device::cpu(), 1, &options, &mut c, &a, &b, k as i32, mode)
                .unwrap()
        });
        let mut want = Array2::<f32>::zeros((16, 16));
        for s in 0..k / 32 {
            let at = if mode == 2 { 0 } else { 32 * s };
            let pa = a.slice(ndarray::s![.., at..at + 32]);
            let pb = b.slice(ndarray::s![at..at + 32, ..]);
            want = want + pa.dot(&pb);
        }
        assert_close(&c, &want, 1e-5, 1e-5, &format!("mode {mode}"));
        let to_l2 = dumps.get("opt.ll").matches("i32 0, i32 2, i32 1)").count();
        assert_eq!(
            to_l2 > 0,
            expected,
            "mode {mode}, checked {checked}: {to_l2} L2 prefetches"
        );
    }
}

/// On the CPU too a carried pointer tile advanced by a scalar (`a_ptrs`, read in `MODE` 1,
/// carried in 0 too) is carried as one offset (`dsl::ir::carry_pointer_offsets`): the
/// kernel stores no pointers, where its 512 were written back at every iteration (128
/// vector stores).
#[test]
fn carried_pointer_tiles_are_offsets_on_the_cpu() {
    let k = 64usize;
    let (a, b) = (Array2::<f32>::ones((16, k)), Array2::<f32>::ones((k, 16)));
    let pointer_stores = |mode: u32| {
        let mut c = Array2::<f32>::zeros((16, 16));
        let dumps = crate::common::dumps_of(&format!("carried-{mode}"), |options| {
            k_loop::launch_with(&Device::cpu(), 1, options, &mut c, &a, &b, k as i32, mode).unwrap()
        });
        assert!(c.iter().all(|x| *x == k as f32), "mode {mode}: {c}");
        let ll = dumps.get("opt.ll");
        let stores =
            |l: &&str| l.contains("store ptr ") || l.contains(" x ptr> ") && l.contains("store <");
        ll.lines().filter(stores).count()
    };
    for mode in [0, 1] {
        assert_eq!(pointer_stores(mode), 0, "mode {mode}");
    }
}

/// `x wᵀ` with the weight in PyTorch's layout (`tritium_kernels::linear`, `K` a
/// constexpr), K a multiple of the step and not, edges in m and n, against ndarray on
/// every device; and the decode step's `matvec` (rows read one after the other, with and
/// without masks) against the same.
#[test]
fn linear_and_matvec_multiply_by_a_transposed_weight() {
    use tritium_kernels::linear::linear;
    use tritium_kernels::matvec::matvec;
    for (m, n, k) in [
        (1usize, 1usize, 1usize),
        (3, 70, 45),
        (17, 33, 128),
        (40, 130, 96),
    ] {
        let x = Array2::from_shape_vec((m, k), random_f32(m * k, 11)).unwrap();
        let w = Array2::from_shape_vec((n, k), random_f32(n * k, 12)).unwrap();
        let want = x.dot(&w.t());
        for device in crate::common::devices_for(m * n * k) {
            let mut y = Array2::<f32>::zeros((m, n));
            let (mi, ni) = (m as i32, n as i32);
            let grid = |meta: &linear::Meta| [m.div_ceil(meta.BM), n.div_ceil(meta.BN)];
            linear::launch(&device, grid, &mut y, &x, &w, mi, ni, k).unwrap();
            assert_close(
                &y,
                &want,
                1e-5,
                1e-5,
                &format!("linear {m}x{n}x{k} {device:?}"),
            );
            for (bk, even) in [(32usize, false), (k, true)] {
                let mut y = Array2::<f32>::zeros((m, n));
                let (ki, rows) = (k as i32, 8usize);
                matvec::launch::<f32, f32>(
                    &device,
                    [n.div_ceil(rows), m],
                    &mut y,
                    &x,
                    &w,
                    ni,
                    ki,
                    ki,
                    ki,
                    ni,
                    rows,
                    bk.next_power_of_two(),
                    even && bk.is_power_of_two(),
                )
                .unwrap();
                let what = format!("matvec {m}x{n}x{k} BK {bk} {device:?}");
                assert_close(&y, &want, 1e-5, 1e-5, &what);
            }
        }
    }
}
