//! Atomics, arg-reductions and data-dependent control flow.

use crate::common::{devices_for, random_f32};
use ndarray::{Array1, Array2, Axis};
use rstest::rstest;
use tritium_kernels::misc::{collatz, histogram, row_stats};

#[rstest]
fn histogram_with_atomic_add(#[values(1, 7, 1024, 1000003)] n: usize) {
    let n_bins = 37;
    let bins = Array1::from_iter((0..n).map(|i| ((i * 7919) % 41) as i32 - 2));
    let mut want = Array1::<i32>::zeros(n_bins);
    for b in &bins {
        if (0..n_bins as i32).contains(b) {
            want[*b as usize] += 1;
        }
    }
    for d in devices_for(n) {
        let mut counts = Array1::<i32>::zeros(n_bins);
        histogram::launch(
            &d,
            n.div_ceil(256),
            &mut counts,
            &bins,
            n as i32,
            n_bins as i32,
            256,
        )
        .unwrap();
        assert_eq!(counts, want, "{d:?}");
    }
}

#[rstest]
fn row_argmax_and_atomic_max_min(#[values((1, 1), (17, 33), (4096, 781))] shape: (usize, usize)) {
    let x = Array2::from_shape_vec(shape, random_f32(shape.0 * shape.1, 21)).unwrap();
    let want_arg: Array1<i32> = x
        .axis_iter(Axis(0))
        .map(|r| {
            r.iter()
                .enumerate()
                .fold((0, f32::NEG_INFINITY), |(bi, bv), (i, v)| {
                    if *v > bv {
                        (i, *v)
                    } else {
                        (bi, bv)
                    }
                })
                .0 as i32
        })
        .collect();
    let want_max = x.fold(f32::NEG_INFINITY, |a, b| a.max(*b));
    let want_min = x.fold(f32::INFINITY, |a, b| a.min(*b));
    let block = tritium::dsl::trace::lang::next_power_of_2(shape.1);
    for d in devices_for(shape.0 * shape.1) {
        let mut arg = Array1::<i32>::zeros(shape.0);
        let mut gmax = Array1::from_elem(1, f32::NEG_INFINITY);
        let mut gmin = Array1::from_elem(1, f32::INFINITY);
        row_stats::launch(
            &d,
            shape.0,
            &mut arg,
            &mut gmax,
            &mut gmin,
            &x,
            shape.1 as i32,
            block,
        )
        .unwrap();
        assert_eq!(arg, want_arg, "{d:?}");
        assert_eq!(gmax[0], want_max, "{d:?}");
        assert_eq!(gmin[0], want_min, "{d:?}");
    }
}

fn collatz_steps(mut v: i64) -> i32 {
    let mut c = 0;
    while v > 1 {
        v = if v % 2 == 0 { v / 2 } else { 3 * v + 1 };
        c += 1;
    }
    c
}

#[rstest]
fn collatz_while_and_if(#[values(1, 7, 1024)] n: usize) {
    let start = Array1::from_iter((1..=n as i64).map(|i| i * 3 + 1));
    let want: Array1<i32> = start.mapv(collatz_steps);
    for d in devices_for(n) {
        let mut steps = Array1::<i32>::zeros(n);
        collatz::launch(&d, n.div_ceil(8), &mut steps, &start, n as i32, 8).unwrap();
        assert_eq!(steps, want, "{d:?}");
    }
}
