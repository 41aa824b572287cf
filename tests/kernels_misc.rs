//! Atomics, arg-reductions and data-dependent control flow.

use crate::common::{devices_for, random_f32};
use ndarray::{Array1, Array2, Axis};
use rstest::rstest;
use tritium::prelude::*;
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

/// Every program folds its block of `x` into `acc[0..3]` with atomic and, or and xor (one
/// word per op, all programs on the same words), and records the old values of its own
/// word of `mine` before and after an xor with its program id.
#[kernel]
fn bitwise_atomics<T: Int>(
    acc: Ptr<T>,
    mine: Ptr<T>,
    old: Ptr<T>,
    x: Ptr<T>,
    n: i32,
    #[constexpr] BLOCK: usize,
) {
    let pid = program_id(0);
    let offs = pid * BLOCK as i32 + arange(0, BLOCK);
    let mask = offs < n;
    let v = load(x + offs, mask = mask);
    atomic_and(acc + offs * 0, v, mask = mask);
    atomic_or(acc + 1 + offs * 0, v, mask = mask);
    atomic_xor(acc + 2 + offs * 0, v, mask = mask);
    let before = atomic_xor(mine + pid, pid + 1);
    let after = atomic_or(mine + pid, 0);
    store(old + 2 * pid, before);
    store(old + 2 * pid + 1, after);
}

fn check_bitwise_atomics<T>(x: Vec<T>)
where
    T: Int
        + Copy
        + Default
        + PartialEq
        + std::fmt::Debug
        + From<u8>
        + std::ops::BitAnd<Output = T>
        + std::ops::BitOr<Output = T>
        + std::ops::BitXor<Output = T>
        + std::ops::Not<Output = T>,
{
    const BLOCK: usize = 32;
    let n = x.len();
    let programs = n.div_ceil(BLOCK);
    let x = Array1::from_vec(x);
    let all_ones = !T::default();
    let want_acc = [
        x.iter().fold(all_ones, |a, &b| a & b),
        x.iter().fold(T::default(), |a, &b| a | b),
        x.iter().fold(T::default(), |a, &b| a ^ b),
    ];
    let mine0: Vec<T> = (0..programs)
        .map(|p| T::from((p * 5 % 251) as u8))
        .collect();
    let want_old: Vec<T> = mine0
        .iter()
        .enumerate()
        .flat_map(|(p, &m)| [m, m ^ T::from((p + 1) as u8)])
        .collect();
    for device in devices_for(n) {
        let mut acc = Array1::from_vec(vec![all_ones, T::default(), T::default()]);
        let mut mine = Array1::from_vec(mine0.clone());
        let mut old = Array1::from_elem(2 * programs, T::default());
        bitwise_atomics::launch(
            &device,
            programs,
            &mut acc,
            &mut mine,
            &mut old,
            x.view(),
            n as i32,
            BLOCK,
        )
        .unwrap();
        assert_eq!(
            acc.to_vec(),
            want_acc,
            "{device:?} and/or/xor of every element"
        );
        assert_eq!(old.to_vec(), want_old, "{device:?} old values");
    }
}

#[test]
fn atomic_and_or_xor_fold_every_program() {
    check_bitwise_atomics(
        (0..1000)
            .map(|i: i32| (i.wrapping_mul(0x9E37_79B9u32 as i32)) | 0x0100_0000)
            .collect(),
    );
    check_bitwise_atomics(
        (0..77)
            .map(|i: u64| (i << 40) ^ 0xFFFF_0000_FFFF ^ (i * 0x1234_5678))
            .collect(),
    );
    check_bitwise_atomics((0..64).map(|i: u32| !(1u32 << (i % 32))).collect());
}

/// A bitwise atomic on floats, as a user might write.
#[kernel]
fn float_atomic_or(acc: Ptr<f32>, x: Ptr<f32>) {
    atomic_or(acc, load(x));
}

#[test]
fn bitwise_atomics_on_floats_are_an_error() {
    let x = Array1::<f32>::zeros(1);
    let mut acc = Array1::<f32>::zeros(1);
    let err = float_atomic_or::launch(&Device::interpreter(), 1, &mut acc, x.view())
        .unwrap_err()
        .to_string();
    assert!(err.contains("atomic_or needs integers, got f32"), "{err}");
}

/// A deferred `let m;` given its value in both branches of a runtime `if` (issue 15's
/// E0381), and one assigned before a later `if` that carries it.
#[tritium::kernel]
fn deferred_let(out: tritium::prelude::Ptr<i32>, x: i32) {
    let m;
    if x > 0 {
        m = arange(0, 4) + 1;
    } else {
        m = arange(0, 4) * 2;
    }
    let mut n = m;
    if x > 5 {
        n = n + 100;
    }
    store(out + arange(0, 4), n);
}

#[test]
fn deferred_let_initialised_in_every_branch() {
    for device in crate::common::all_devices() {
        for (x, want) in [
            (1, [1, 2, 3, 4]),
            (-1, [0, 2, 4, 6]),
            (9, [101, 102, 103, 104]),
        ] {
            let mut out = ndarray::Array1::<i32>::zeros(4);
            deferred_let::launch(&device, 1, &mut out, x).unwrap();
            assert_eq!(out.to_vec(), want, "x = {x} on {device:?}");
        }
    }
}

/// Triton's `sem` and `scope` on atomics: every atomic is sequentially consistent and
/// device-wide, which any setting allows; an unknown one is a trace error.
#[tritium::kernel]
fn atomic_options(
    total: tritium::prelude::Ptr<i32>,
    flag: tritium::prelude::Ptr<i32>,
    #[constexpr] BAD: bool,
) {
    let one = arange(0, 8) * 0 + 1;
    atomic_add(
        total + arange(0, 8) * 0,
        one,
        sem = "relaxed",
        scope = "gpu",
    );
    atomic_max(
        total + 1 + arange(0, 8) * 0,
        arange(0, 8),
        sem = "release",
        scope = "cta",
    );
    atomic_cas(flag, 0, 7, sem = "acq_rel", scope = "sys");
    if BAD {
        atomic_or(flag, 1, sem = "seq_cst");
    }
}

#[test]
fn atomic_sem_and_scope_are_accepted_and_checked() {
    for device in crate::common::all_devices() {
        for programs in [1, 3] {
            let mut total = ndarray::Array1::<i32>::zeros(2);
            let mut flag = ndarray::Array1::<i32>::zeros(1);
            atomic_options::launch(&device, programs, &mut total, &mut flag, false).unwrap();
            assert_eq!(total.to_vec(), [8 * programs, 7], "{device:?}");
            assert_eq!(flag[0], 7, "{device:?}");
        }
    }
    let (mut total, mut flag) = (
        ndarray::Array1::<i32>::zeros(2),
        ndarray::Array1::<i32>::zeros(1),
    );
    let e = atomic_options::launch(&Device::interpreter(), 1, &mut total, &mut flag, true)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains(
            "sem must be \"acquire\", \"release\", \"acq_rel\" or \"relaxed\", got \"seq_cst\""
        ),
        "{e}"
    );
}
