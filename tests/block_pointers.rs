//! Triton's block pointers (`make_block_ptr`, `advance`, `load`/`store` with
//! `boundary_check` and `padding_option`) on every device, against ndarray, on shapes
//! that are not multiples of the block; and their errors.

use crate::common::{all_devices, assert_close, random_f32};
use ndarray::{Array1, Array2, ShapeBuilder};
use tritium::prelude::*;

/// Copies `x` (`m × n`, any strides) into the row-major `out` block by block, and writes
/// each whole block, padding included, to `zero_padded` and `nan_padded`.
#[kernel]
fn block_copy(
    out: Ptr<f32>,
    zero_padded: Ptr<f32>,
    nan_padded: Ptr<f32>,
    x: Ptr<f32>,
    m: i32,
    n: i32,
    stride_m: i32,
    stride_n: i32,
    #[constexpr] BM: usize,
    #[constexpr] BN: usize,
) {
    let (pm, pn) = (program_id(0), program_id(1));
    let at = (pm * BM as i32, pn * BN as i32);
    let src = make_block_ptr(
        x,
        shape = (m, n),
        strides = (stride_m, stride_n),
        offsets = at,
        block_shape = (BM, BN),
        order = (1, 0),
    );
    let zero = load(src, boundary_check = (0, 1), padding_option = "zero");
    let nan = load(src, boundary_check = (1, 0), padding_option = "nan");
    let dst = make_block_ptr(out, (m, n), (n, 1), at, (BM, BN), (1, 0));
    store(dst, zero, boundary_check = (0, 1));
    let block = (pm * num_programs(1) + pn) * (BM * BN) as i32;
    let r = arange(0, BM);
    let c = arange(0, BN);
    let offs = block + r[(.., None)] * BN as i32 + c[(None, ..)];
    store(zero_padded + offs, zero);
    store(nan_padded + offs, nan);
}

/// The blocks `block_copy` writes, padding included.
fn padded_blocks(x: &Array2<f32>, bm: usize, bn: usize, pad: f32) -> Vec<f32> {
    let (m, n) = x.dim();
    let mut out = Vec::new();
    for pm in 0..m.div_ceil(bm) {
        for pn in 0..n.div_ceil(bn) {
            for r in 0..bm {
                for c in 0..bn {
                    let (i, j) = (pm * bm + r, pn * bn + c);
                    out.push(if i < m && j < n { x[[i, j]] } else { pad });
                }
            }
        }
    }
    out
}

#[test]
fn block_copy_checks_bounds_and_pads() {
    // (m, n, column-major source)
    let cases = [(5, 7, false), (8, 8, false), (3, 9, true), (9, 4, true)];
    let (bm, bn) = (4, 4);
    for (m, n, column_major) in cases {
        let values = random_f32(m * n, (m * 31 + n) as u64);
        let x = match column_major {
            false => Array2::from_shape_vec((m, n), values).unwrap(),
            true => Array2::from_shape_vec((m, n).f(), values).unwrap(),
        };
        let (sm, sn) = (x.strides()[0] as i32, x.strides()[1] as i32);
        let grid = (m.div_ceil(bm), n.div_ceil(bn));
        let blocks = grid.0 * grid.1 * bm * bn;
        for device in all_devices() {
            let what = format!("{m}x{n} column_major={column_major} on {device:?}");
            let mut out = Array2::<f32>::zeros((m, n));
            let mut zero = Array1::<f32>::from_elem(blocks, 7.0);
            let mut nan = Array1::<f32>::from_elem(blocks, 7.0);
            block_copy::launch(
                &device,
                grid,
                &mut out,
                &mut zero,
                &mut nan,
                x.view(),
                m as i32,
                n as i32,
                sm,
                sn,
                bm,
                bn,
            )
            .unwrap();
            assert_eq!(out, x, "{what}");
            let want = Array1::from(padded_blocks(&x, bm, bn, 0.0));
            assert_eq!(zero, want, "{what}: zero padding");
            let want = Array1::from(padded_blocks(&x, bm, bn, f32::NAN));
            assert_close(&nan, &want, 0.0, 0.0, &format!("{what}: nan padding"));
        }
    }
}

/// Row sums of `x` (`m × n`): one block pointer per program, advanced along the row in a
/// runtime loop (a loop-carried block pointer), stored through a 1-D block pointer.
#[kernel]
fn row_sums(
    out: Ptr<f32>,
    x: Ptr<f32>,
    m: i32,
    n: i32,
    #[constexpr] BM: usize,
    #[constexpr] BN: usize,
) {
    let pm = program_id(0);
    let mut p = make_block_ptr(x, (m, n), (n, 1), (pm * BM as i32, 0), (BM, BN), (1, 0));
    let mut acc = zeros([BM], DType::F32);
    for _ in range(0, cdiv(n, BN as i32)) {
        acc = acc + sum(load(p, boundary_check = (0, 1)), 1);
        p = advance(p, (0, BN as i32));
    }
    let o = make_block_ptr(out, (m,), (1,), (pm * BM as i32,), (BM,), (0,));
    store(o, acc, boundary_check = (0,));
}

#[test]
fn advanced_block_pointer_in_a_loop() {
    let (bm, bn) = (4, 8);
    for (m, n) in [(6, 21), (4, 8), (13, 3)] {
        let x = Array2::from_shape_vec((m, n), random_f32(m * n, m as u64 * 7 + n as u64)).unwrap();
        let want = x.sum_axis(ndarray::Axis(1));
        for device in all_devices() {
            let mut out = Array1::<f32>::from_elem(m, -1.0);
            row_sums::launch(
                &device,
                m.div_ceil(bm),
                &mut out,
                x.view(),
                m as i32,
                n as i32,
                bm,
                bn,
            )
            .unwrap();
            assert_close(&out, &want, 1e-5, 1e-5, &format!("{m}x{n} on {device:?}"));
        }
    }
}

/// Tutorial 03's matmul written with block pointers: `a` and `b` advance along k.
#[kernel]
fn block_matmul(
    c: Ptr<f32>,
    a: Ptr<f32>,
    b: Ptr<f32>,
    m: i32,
    n: i32,
    k: i32,
    #[constexpr] BM: usize,
    #[constexpr] BN: usize,
    #[constexpr] BK: usize,
) {
    let (pm, pn) = (program_id(0) * BM as i32, program_id(1) * BN as i32);
    let mut ap = make_block_ptr(a, (m, k), (k, 1), (pm, 0), (BM, BK), (1, 0));
    let mut bp = make_block_ptr(b, (k, n), (n, 1), (0, pn), (BK, BN), (1, 0));
    let mut acc = zeros([BM, BN], DType::F32);
    for _ in range(0, cdiv(k, BK as i32)) {
        let x = load(ap, boundary_check = (0, 1), padding_option = "zero");
        let y = load(bp, boundary_check = (0, 1), padding_option = "zero");
        acc = dot(x, y, acc);
        ap = advance(ap, (0, BK as i32));
        bp = advance(bp, (BK as i32, 0));
    }
    let cp = make_block_ptr(c, (m, n), (n, 1), (pm, pn), (BM, BN), (1, 0));
    store(cp, acc, boundary_check = (0, 1));
}

#[test]
fn block_pointer_matmul_matches_ndarray() {
    let (bm, bn, bk) = (16, 16, 16);
    for (m, n, k) in [(33, 20, 45), (16, 16, 16), (5, 40, 17)] {
        let a = Array2::from_shape_vec((m, k), random_f32(m * k, 1)).unwrap();
        let b = Array2::from_shape_vec((k, n), random_f32(k * n, 2)).unwrap();
        let want = a.dot(&b);
        for device in all_devices() {
            let mut c = Array2::<f32>::from_elem((m, n), f32::NAN);
            let grid = (m.div_ceil(bm), n.div_ceil(bn));
            block_matmul::launch(
                &device,
                grid,
                &mut c,
                a.view(),
                b.view(),
                m as i32,
                n as i32,
                k as i32,
                bm,
                bn,
                bk,
            )
            .unwrap();
            assert_close(&c, &want, 1e-4, 1e-4, &format!("{m}x{n}x{k} on {device:?}"));
        }
    }
}

/// One misuse of a block pointer per `CASE`.
#[kernel]
fn misuse(out: Ptr<f32>, x: Ptr<f32>, n: i32, #[constexpr] CASE: usize) {
    let p = make_block_ptr(x, (n,), (1,), (0,), (4,), (0,));
    let r = arange(0, 4);
    if CASE == 0 {
        store(out + r, load(p, mask = r < n));
    } else if CASE == 1 {
        store(out + r, load(x + r, boundary_check = (0,)));
    } else if CASE == 2 {
        store(out + r, load(p, padding_option = "inf"));
    } else if CASE == 3 {
        store(out + r, load(advance(p, (1, 1))));
    } else if CASE == 4 {
        store(out + r, load(p, boundary_check = (1,)));
    } else if CASE == 5 {
        let q = make_block_ptr(x, (n, n), (1,), (0,), (4,), (0,));
        store(out + r, load(q));
    } else if CASE == 6 {
        store(out + r, load(p, cache_modifier = ".wb"));
    } else {
        let i = make_block_ptr(out, (n,), (1,), (0,), (4,), (0,));
        store(i, cast(load(p), DType::F32), mask = r < n);
    }
}

#[test]
fn block_pointer_misuse_is_a_trace_error_at_its_line() {
    let cases = [
        "`mask` and `other` cannot be given for a block pointer",
        "boundary_check needs a block pointer",
        "padding_option must be \"zero\" or \"nan\", got \"inf\"",
        "advance: 2 offsets for a block pointer of 1 dims",
        "boundary_check dim 1 is out of range for a block pointer of 1 dims",
        "make_block_ptr: shape has 2 dims, block_shape has 1",
        "load: cache_modifier must be one of",
        "store: `mask` cannot be given for a block pointer",
    ];
    let x = Array1::<f32>::ones(4);
    for (case, want) in cases.iter().enumerate() {
        let mut out = Array1::<f32>::zeros(4);
        let e = misuse::launch(&Device::interpreter(), 1, &mut out, x.view(), 4, case)
            .unwrap_err()
            .to_string();
        assert!(e.contains(want), "case {case}: {e}");
        assert!(
            e.contains("block_pointers.rs:"),
            "case {case} names no line: {e}"
        );
    }
}

/// `out = 3 x` over `m × n` row-major, through block pointers with both dims checked.
#[kernel]
fn block_scale(
    out: Ptr<f32>,
    x: Ptr<f32>,
    m: i32,
    n: i32,
    #[constexpr] BM: usize,
    #[constexpr] BN: usize,
) {
    let at = (program_id(0) * BM as i32, program_id(1) * BN as i32);
    let src = make_block_ptr(x, (m, n), (n, 1), at, (BM, BN), (1, 0));
    let dst = make_block_ptr(out, (m, n), (n, 1), at, (BM, BN), (1, 0));
    store(
        dst,
        load(src, boundary_check = (0, 1)) * 3.0,
        boundary_check = (0, 1),
    );
}

/// Contiguous rows of a block become packed vector loads and stores on the CPU (the
/// unit stride and the boundary masks fold into the same code as a plain pointer tile's).
#[cfg(target_arch = "x86_64")]
#[test]
fn block_pointer_rows_are_vector_loads_on_the_cpu() {
    use crate::common::{dumps_of, packed};
    let (m, n, bm, bn) = (40, 200, 16, 64);
    let x = Array2::from_shape_vec((m, n), random_f32(m * n, 9)).unwrap();
    let mut out = Array2::<f32>::zeros((m, n));
    let grid = (m.div_ceil(bm), n.div_ceil(bn));
    let dumps = dumps_of("block-asm", |options| {
        block_scale::launch_with(
            &Device::cpu(),
            grid,
            options,
            &mut out,
            x.view(),
            m as i32,
            n as i32,
            bm,
            bn,
        )
        .unwrap()
    });
    assert_eq!(out, x.mapv(|v| v * 3.0));
    let asm = dumps.get("s");
    assert!(packed(asm, "vmulps"), "no packed multiply in:\n{asm}");
    assert!(
        packed(asm, "vmovups") || packed(asm, "vmaskmovps"),
        "no packed load or store in:\n{asm}"
    );
}

/// Block-pointer kernels compile to PTX for sm_80 and sm_90.
#[test]
fn block_pointer_kernels_compile_to_ptx() {
    use tritium::backend::cuda::{compile_ptx, CudaCompileOptions};
    use tritium::dsl::trace::Specialization;
    let s = Specialization::default();
    let kernels = [
        block_matmul::trace(&s, 16, 16, 16).unwrap(),
        block_copy::trace(&s, 4, 4).unwrap(),
        row_sums::trace(&s, 4, 8).unwrap(),
    ];
    for sm in [80, 90] {
        for f in &kernels {
            let copts = CudaCompileOptions {
                sm,
                ..Default::default()
            };
            let ptx = compile_ptx(f, "k", &copts).unwrap().text;
            assert!(ptx.contains(&format!(".target sm_{sm}")), "{}", f.name);
            assert!(ptx.contains("ld.global"), "{}: no global load", f.name);
        }
    }
}

/// `out = x + 1` over `m × n`, moved in blocks through two tensor descriptors (Triton's
/// `make_tensor_descriptor`; the last blocks are clipped to the tensor).
#[kernel]
fn descriptor_add_one(
    out: Ptr<f32>,
    x: Ptr<f32>,
    m: i32,
    n: i32,
    #[constexpr] BM: usize,
    #[constexpr] BN: usize,
) {
    let src = make_tensor_descriptor(x, shape = (m, n), strides = (n, 1), block_shape = (BM, BN));
    let dst = make_tensor_descriptor(out, (m, n), (n, 1), (BM, BN));
    let at = (program_id(0) * BM as i32, program_id(1) * BN as i32);
    let v = src.load(at);
    dst.store(at, v + 1.0);
    // The same block again through the free functions, over the stored one.
    store_tensor_descriptor(dst, at, load_tensor_descriptor(src, at) + 1.0);
}

#[test]
fn tensor_descriptors_clip_blocks_to_the_tensor() {
    let (bm, bn) = (8, 16);
    for (m, n) in [(5, 30), (16, 16), (17, 3)] {
        let x = Array2::from_shape_vec((m, n), random_f32(m * n, 5)).unwrap();
        let want = x.mapv(|v| v + 1.0);
        for device in all_devices() {
            let mut out = Array2::<f32>::from_elem((m, n), f32::NAN);
            let grid = (m.div_ceil(bm), n.div_ceil(bn));
            descriptor_add_one::launch(
                &device,
                grid,
                &mut out,
                x.view(),
                m as i32,
                n as i32,
                bm,
                bn,
            )
            .unwrap();
            assert_eq!(out, want, "{m}x{n} on {device:?}");
        }
    }
}
