//! Partial blocks (`offs < n` true on a prefix of the lanes): the CPU's masked copy runs
//! the in-bounds prefix with the mask known true at each lane's own index (codegen
//! `prefix`), and must give what every other device gives for every split point,
//! including lanes of the mask read at other indices (through `flip`).

use crate::common::{all_devices, dumps_of};
use ndarray::Array1;
use tritium::prelude::*;

/// `out[i] = x'[B-1-i]` (within each block) where `x'` is `x` below `n` and -1 past it,
/// stored below `n`: the mask's lanes are read at the flipped index inside the store's
/// lanes. `copy` stores `x` below `n` through the forms `le` and `gt` of the bound.
#[kernel]
fn prefix_forms(out: Ptr<f32>, copy: Ptr<f32>, x: Ptr<f32>, n: i32, #[constexpr] B: usize) {
    let offs = program_id(0) * B as i32 + arange(0, B);
    let lt = offs < n;
    store(
        out + offs,
        flip(load(x + offs, mask = lt, other = -1.0), 0),
        mask = lt,
    );
    let le = offs <= n - 1;
    store(
        copy + offs,
        load(x + offs, mask = n > offs, other = 0.0),
        mask = le,
    );
}

#[test]
fn every_split_point_matches_plain_rust_on_every_device() {
    const B: usize = 64;
    let programs = 3;
    let len = programs * B;
    let x = Array1::from_shape_fn(len, |i| i as f32 * 0.5 - 7.0);
    for n in [0, 1, 17, 63, 64, 65, 100, 191, 192] {
        let xs = |i: usize| if i < n { x[i] } else { -1.0 };
        let want_out: Vec<f32> = (0..len)
            .map(|i| {
                let (block, lane) = (i / B * B, i % B);
                if i < n {
                    xs(block + B - 1 - lane)
                } else {
                    -9.0
                }
            })
            .collect();
        let want_copy: Vec<f32> = (0..len).map(|i| if i < n { x[i] } else { -9.0 }).collect();
        for device in all_devices() {
            let mut out = Array1::from_elem(len, -9.0f32);
            let mut copy = Array1::from_elem(len, -9.0f32);
            prefix_forms::launch(&device, programs, &mut out, &mut copy, &x, n as i32, B).unwrap();
            assert_eq!(out.to_vec(), want_out, "{device:?}, n = {n}");
            assert_eq!(copy.to_vec(), want_copy, "{device:?}, n = {n}");
        }
    }
}

#[test]
fn the_masked_copy_of_partial_rows_splits_off_their_prefix() {
    let x = Array1::from_shape_fn(3 * 64, |i| i as f32);
    let (mut out, mut copy) = (Array1::zeros(3 * 64), Array1::zeros(3 * 64));
    let dumps = dumps_of("partial-prefix", |options| {
        prefix_forms::launch_with(&Device::cpu(), 3, options, &mut out, &mut copy, &x, 100, 64)
            .unwrap()
    });
    let ll = dumps.get("ll");
    assert!(ll.contains("prefix.loop"), "no lane loop was split:\n{ll}");
    assert_eq!(copy[99], 99.0);
    assert_eq!(copy[100], 0.0);
}

/// `out[i] = i` where `i + a + b < n` in wrapping i32 (stored through `arange`, so in
/// bounds whatever the mask says).
#[kernel]
fn wrapped_bound(out: Ptr<i32>, a: i32, b: i32, n: i32, #[constexpr] B: usize) {
    let lanes = arange(0, B);
    store(out + lanes, lanes, mask = lanes + a + b < n);
}

/// Offsets whose exact sum leaves i32 while each lane's wrapped sum does not: the prefix
/// must not be computed from the exact sum alone.
#[test]
fn a_prefix_is_only_taken_where_the_exact_offset_fits_i32() {
    const B: usize = 64;
    let cases = [
        (i32::MIN, i32::MIN, 5),
        (i32::MAX, i32::MAX, -3),
        (i32::MIN, -1, i32::MAX),
        (1000, -990, 20),
        (0, 0, 0),
    ];
    for (a, b, n) in cases {
        let want: Vec<i32> = (0..B as i32)
            .map(|i| {
                if i.wrapping_add(a).wrapping_add(b) < n {
                    i
                } else {
                    -1
                }
            })
            .collect();
        for device in all_devices() {
            let mut out = Array1::from_elem(B, -1i32);
            wrapped_bound::launch(&device, 1, &mut out, a, b, n, B).unwrap();
            assert_eq!(out.to_vec(), want, "{device:?}, a = {a}, b = {b}, n = {n}");
        }
    }
}
