//! Simd custom ops read a tile loaded from one contiguous row-major run of memory in place,
//! and any other tile as a copy (issue 16). The C++ op `where` reports the address it reads
//! each element from; `scale` checks the values where only a run-time check tells the two
//! apart.

use ndarray::{Array1, Array2};
use tritium::prelude::*;
use tritium::{Device, LaunchOptions};

#[kernel]
fn where_1d(
    out: Ptr<i64>,
    x: Ptr<f32>,
    n: i32,
    #[constexpr] BLOCK: usize,
    #[constexpr] STRIDE: i32,
) {
    let offs = program_id(0) * BLOCK as i32 + arange(0, BLOCK);
    let mask = offs < n;
    let a = load(x + offs * STRIDE, mask = mask, other = 0);
    let r = custom("where", a, out = zeros([BLOCK], DType::I64));
    store(out + offs, r, mask = mask);
}

/// An `R x C` block of a row-major matrix with leading dimension `LD`, or of its
/// transpose (`TRANS`: element (i, j) read from (j, i) of a `C x LD` matrix).
#[kernel]
fn where_2d(
    out: Ptr<i64>,
    x: Ptr<f32>,
    #[constexpr] R: usize,
    #[constexpr] C: usize,
    #[constexpr] LD: i32,
    #[constexpr] TRANS: bool,
) {
    let r = arange(0, R);
    let c = arange(0, C);
    let at = if TRANS {
        r[(.., None)] + c[(None, ..)] * LD
    } else {
        r[(.., None)] * LD + c[(None, ..)]
    };
    let a = load(x + at);
    let w = custom("where", a, out = zeros([R, C], DType::I64));
    store(out + r[(.., None)] * C as i32 + c[(None, ..)], w);
}

/// Lanes 0..128 of `i8(i)` widen to 0..127 and the rest to -128..-1: plus 128, a rotation
/// of the 256 elements. Every step is affine modulo 2^8 except the widening, which only
/// the run-time check of the widened first and last lanes catches.
#[kernel]
fn scale_rotated(out: Ptr<f32>, x: Ptr<f32>) {
    let i = arange(0, 256);
    let offs = i.to(DType::I8).to(DType::I64) + 128;
    let a = load(x + offs);
    let r = custom("scale", a, out = zeros([256], DType::F32));
    store(out + i, r);
}

fn options(checked: bool) -> LaunchOptions {
    LaunchOptions {
        bounds_check: Some(checked),
        ..Default::default()
    }
}

/// Whether `addr` lies in `x`'s memory.
fn inside(x: &[f32], addr: i64) -> bool {
    let lo = x.as_ptr() as i64;
    (lo..lo + 4 * x.len() as i64).contains(&addr)
}

#[test]
fn contiguous_full_blocks_are_read_in_place_and_others_copied() {
    struct Case {
        what: &'static str,
        n: usize,
        block: usize,
        stride: i32,
        checked: bool,
    }
    let cases = [
        Case {
            what: "full blocks",
            n: 4096,
            block: 1024,
            stride: 1,
            checked: false,
        },
        Case {
            what: "a partial last block",
            n: 1000,
            block: 256,
            stride: 1,
            checked: false,
        },
        Case {
            what: "every other element",
            n: 512,
            block: 256,
            stride: 2,
            checked: false,
        },
        Case {
            what: "checked mode",
            n: 512,
            block: 256,
            stride: 1,
            checked: true,
        },
    ];
    let device = Device::cpu();
    for c in cases {
        let x = Array1::from_iter((0..c.n * c.stride as usize).map(|i| i as f32));
        let mut out = Array1::<i64>::zeros(c.n);
        let grid = c.n.div_ceil(c.block);
        let (n, block, stride) = (c.n as i32, c.block, c.stride);
        where_1d::launch_with(
            &device,
            grid,
            &options(c.checked),
            &mut out,
            &x,
            n,
            block,
            stride,
        )
        .unwrap();
        let xs = x.as_slice().unwrap();
        for p in 0..grid {
            let lanes = p * c.block..((p + 1) * c.block).min(c.n);
            let in_place = c.stride == 1 && !c.checked && lanes.len() == c.block;
            let first = out[lanes.start];
            for i in lanes.clone() {
                let at = out[i];
                if in_place {
                    assert_eq!(
                        at,
                        xs.as_ptr() as i64 + 4 * i as i64,
                        "{}: lane {i}",
                        c.what
                    );
                } else {
                    assert!(!inside(xs, at), "{}: lane {i} read in place", c.what);
                    // A copy is row-major too.
                    assert_eq!(at, first + 4 * (i - lanes.start) as i64, "{}", c.what);
                }
            }
        }
    }
}

#[test]
fn row_major_blocks_are_read_in_place_and_strided_ones_copied() {
    // (leading dimension, transposed, read in place)
    let cases = [(8, false, true), (12, false, false), (8, true, false)];
    let device = Device::cpu();
    for (ld, trans, in_place) in cases {
        let x = Array1::from_iter((0..4 * 12 + 8 * 8).map(|i| i as f32));
        let mut out = Array2::<i64>::zeros((4, 8));
        where_2d::launch(&device, [1], &mut out, &x, 4, 8, ld, trans).unwrap();
        let xs = x.as_slice().unwrap();
        let base = xs.as_ptr() as i64;
        for ((i, j), at) in out.indexed_iter() {
            let what = format!("ld {ld}, transposed {trans}: element ({i}, {j})");
            if in_place {
                assert_eq!(*at, base + 4 * (i * ld as usize + j) as i64, "{what}");
            } else {
                assert!(!inside(xs, *at), "{what} read in place");
            }
        }
    }
}

#[test]
fn a_widened_offset_that_wraps_is_copied() {
    let x = Array1::from_iter((0..256).map(|i| i as f32));
    let want = Array1::from_iter((0..256).map(|i| 2.0 * ((i + 128) % 256) as f32));
    for device in crate::common::all_devices() {
        let mut out = Array1::<f32>::zeros(256);
        scale_rotated::launch(&device, [1], &mut out, &x).unwrap();
        assert_eq!(out, want, "{device:?}");
    }
}

#[kernel]
fn where_out(out: Ptr<i64>, x: Ptr<i64>, n: i32, #[constexpr] BLOCK: usize) {
    let offs = program_id(0) * BLOCK as i32 + arange(0, BLOCK);
    let mask = offs < n;
    let a = load(x + offs, mask = mask, other = 0);
    let w = custom("where_out", a, out = zeros([BLOCK], DType::I64));
    store(out + offs, w, mask = mask);
}

/// `x[i] += x[i]` through the C++ add: the stored memory is also read in place, so the
/// out (which starts as zeros) must not be written there.
#[kernel]
fn double_in_place(x: Ptr<f32>, #[constexpr] BLOCK: usize) {
    let offs = program_id(0) * BLOCK as i32 + arange(0, BLOCK);
    let a = load(x + offs);
    let r = custom("add", a, a, out = zeros([BLOCK], DType::F32));
    store(x + offs, r);
}

#[test]
fn stored_outs_are_written_in_place_when_the_store_is_one_full_run() {
    // (what, elements, block, checked, written in place)
    let cases = [
        ("full blocks", 4096, 1024, false),
        ("a partial last block", 1000, 256, false),
        ("checked mode", 512, 256, true),
    ];
    let device = Device::cpu();
    for (what, n, block, checked) in cases {
        let x = Array1::<i64>::zeros(n);
        let mut out = Array1::<i64>::zeros(n);
        let grid = n.div_ceil(block);
        where_out::launch_with(
            &device,
            grid,
            &options(checked),
            &mut out,
            &x,
            n as i32,
            block,
        )
        .unwrap();
        let base = out.as_ptr() as i64;
        for p in 0..grid {
            let lanes = p * block..((p + 1) * block).min(n);
            let in_place = !checked && lanes.len() == block;
            for i in lanes {
                let mine = base + 8 * i as i64;
                assert_eq!(out[i] == mine, in_place, "{what}: element {i}");
            }
        }
    }
}

#[test]
fn an_out_is_not_written_over_an_input_read_in_place() {
    for device in crate::common::all_devices() {
        let mut x = Array1::from_iter((0..2048).map(|i| i as f32));
        double_in_place::launch(&device, 2, &mut x, 1024).unwrap();
        let want = Array1::from_iter((0..2048).map(|i| 2.0 * i as f32));
        assert_eq!(x, want, "{device:?}");
    }
}

/// Where a Simd call wrote its out in place, the store's loop (which requests the next
/// program's lines a few per chunk) does not run: that branch requests them at once, for
/// writing, so the next program's zero fill of its out finds them in cache.
#[test]
fn a_store_written_in_place_requests_the_next_programs_lines() {
    let (n, block) = (4096, 1024);
    let x = Array1::<i64>::zeros(n);
    let mut out = Array1::<i64>::zeros(n);
    let dumps = crate::common::dumps_of("in-place-prefetch", |options| {
        where_out::launch_with(
            &Device::cpu(),
            n / block,
            options,
            &mut out,
            &x,
            n as i32,
            block,
        )
        .unwrap();
    });
    let ll = dumps.get("ll");
    assert!(
        ll.contains("\nstore.in_place:"),
        "no branch for outs written in place"
    );
    // The prefetch loop the branch enters: a block it precedes, requesting lines to write.
    let requested = ll.split("\n\n").any(|block| {
        let head = block.lines().next().unwrap_or("");
        head.contains("preds = ")
            && head.contains("%store.in_place")
            && block.contains("@llvm.prefetch.p0(")
            && block.contains(", i32 1, i32 3, i32 1)")
    });
    assert!(
        requested,
        "no write prefetch where the out was written in place"
    );
}
