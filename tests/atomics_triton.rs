//! Triton's `test_atomic_rmw` (`python/test/unit/language/test_core.py`) over its dtypes,
//! int32, uint32, float16, float32, int64, uint64, float64 and bfloat16, with `xchg` and
//! (for integers) `and`/`or`/`xor` beside its `add`/`max`/`min`, on every device; and
//! the same ops with many lanes on few addresses, so that the compare-exchange loops run
//! under contention (the CPU's programs run on several threads). The final memory is
//! checked against a plain Rust reference and the old values by finding an order of the
//! lanes that gives them: each lane saw what the ones before it left.

use crate::common::all_devices;
use half::{bf16, f16};
use ndarray::Array1;
use std::collections::HashMap;
use tritium::backend::cuda::{compile_ptx, CudaCompileOptions};
use tritium::dsl::trace::Specialization;
use tritium::prelude::*;

/// The atomic ops, numbered as the kernels' `OP` constexpr.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Rmw {
    Add = 0,
    Max = 1,
    Min = 2,
    Xchg = 3,
    And = 4,
    Or = 5,
    Xor = 6,
}

const FLOAT_OPS: [Rmw; 4] = [Rmw::Add, Rmw::Max, Rmw::Min, Rmw::Xchg];
const INT_OPS: [Rmw; 7] = [
    Rmw::Add,
    Rmw::Max,
    Rmw::Min,
    Rmw::Xchg,
    Rmw::And,
    Rmw::Or,
    Rmw::Xor,
];

/// Triton's `sem` settings (`None` is the empty string), numbered as `SEM`.
const SEMS: [&str; 5] = ["", "acquire", "release", "acq_rel", "relaxed"];

/// An element type of the tests with its reference arithmetic (floats computed in f64 and
/// rounded once to the type, as a store rounds).
trait Val: Element + PartialEq + std::fmt::Debug + Default {
    const FLOAT: bool;
    /// Largest integer every partial sum of a test may reach and stay exact.
    const EXACT: i64;
    /// `v` in this type (wrapping for the unsigned, as NumPy's negation does).
    fn of(v: i64) -> Self;
    fn lowest() -> Self;
    fn highest() -> Self;
    fn bits(self) -> u64;
    fn apply(op: Rmw, old: Self, v: Self) -> Self;
    fn ops() -> &'static [Rmw] {
        if Self::FLOAT {
            &FLOAT_OPS
        } else {
            &INT_OPS
        }
    }
}

macro_rules! int_val {
    ($($t:ty),*) => {$(
        impl Val for $t {
            const FLOAT: bool = false;
            const EXACT: i64 = i32::MAX as i64;
            fn of(v: i64) -> Self {
                v as $t
            }
            fn lowest() -> Self {
                <$t>::MIN
            }
            fn highest() -> Self {
                <$t>::MAX
            }
            fn bits(self) -> u64 {
                self as u64
            }
            fn apply(op: Rmw, old: Self, v: Self) -> Self {
                match op {
                    Rmw::Add => old.wrapping_add(v),
                    Rmw::Max => old.max(v),
                    Rmw::Min => old.min(v),
                    Rmw::Xchg => v,
                    Rmw::And => old & v,
                    Rmw::Or => old | v,
                    Rmw::Xor => old ^ v,
                }
            }
        }
    )*};
}
int_val!(i32, u32, i64, u64);

macro_rules! float_val {
    ($($t:ty, $exact:expr, $to:expr, $from:expr, $bits:expr;)*) => {$(
        impl Val for $t {
            const FLOAT: bool = true;
            const EXACT: i64 = $exact;
            fn of(v: i64) -> Self {
                $from(v as f64)
            }
            fn lowest() -> Self {
                $from(f64::NEG_INFINITY)
            }
            fn highest() -> Self {
                $from(f64::INFINITY)
            }
            fn bits(self) -> u64 {
                $bits(self)
            }
            fn apply(op: Rmw, old: Self, v: Self) -> Self {
                let (a, b): (f64, f64) = ($to(old), $to(v));
                match op {
                    Rmw::Add => $from(a + b),
                    Rmw::Max => $from(a.max(b)),
                    Rmw::Min => $from(a.min(b)),
                    Rmw::Xchg => v,
                    _ => unreachable!("no bitwise atomics on floats"),
                }
            }
        }
    )*};
}
float_val! {
    f16, 2048, f16::to_f64, f16::from_f64, |x: f16| u64::from(x.to_bits());
    bf16, 256, bf16::to_f64, bf16::from_f64, |x: bf16| u64::from(x.to_bits());
    f32, 1 << 24, |x: f32| x as f64, |x: f64| x as f32, |x: f32| u64::from(x.to_bits());
    f64, 1 << 53, |x: f64| x, |x: f64| x, f64::to_bits;
}

/// Triton's kernel: program `pid` folds `x[pid]` into `z[0]` with `OP` under Triton's
/// `sem` number `SEM`, and writes the old value to `old[pid]`.
#[kernel]
fn rmw<T: Element>(x: Ptr<T>, z: Ptr<T>, old: Ptr<T>, #[constexpr] OP: u32, #[constexpr] SEM: u32) {
    let pid = program_id(0);
    let v = load(x + pid);
    let sem = match SEM {
        0 => "",
        1 => "acquire",
        2 => "release",
        3 => "acq_rel",
        _ => "relaxed",
    };
    let o = match OP {
        0 => atomic_add(z, v, sem = sem),
        1 => atomic_max(z, v, sem = sem),
        2 => atomic_min(z, v, sem = sem),
        3 => atomic_xchg(z, v, sem = sem),
        4 => atomic_and(z, v, sem = sem),
        5 => atomic_or(z, v, sem = sem),
        _ => atomic_xor(z, v, sem = sem),
    };
    store(old + pid, o);
}

/// Lane `i < n` of the grid folds `x[i]` into `z[i % ADDRS]` with `OP`; every lane writes
/// its old value to `old[i]` (zero where masked off).
#[kernel]
fn contended<T: Element>(
    z: Ptr<T>,
    old: Ptr<T>,
    x: Ptr<T>,
    n: i32,
    #[constexpr] ADDRS: i32,
    #[constexpr] OP: u32,
    #[constexpr] BLOCK: usize,
) {
    let offs = program_id(0) * BLOCK as i32 + arange(0, BLOCK);
    let mask = offs < n;
    let v = load(x + offs, mask = mask, other = 0);
    let at = z + offs % ADDRS;
    let o = match OP {
        0 => atomic_add(at, v, mask = mask),
        1 => atomic_max(at, v, mask = mask),
        2 => atomic_min(at, v, mask = mask),
        _ => atomic_xchg(at, v, mask = mask),
    };
    store(old + offs, o);
}

/// True when some order of `lanes` (old value seen, operand) starting from `init` gives
/// each lane the old value it saw and ends at `last`. A lane that leaves the value as it
/// is goes as soon as its value is current (nothing else can see it later); the others
/// are tried in turn.
fn serializable<T: Val>(op: Rmw, init: T, last: T, lanes: &[(T, T)]) -> bool {
    let mut by_old: HashMap<u64, Vec<usize>> = HashMap::new();
    for (i, (o, _)) in lanes.iter().enumerate() {
        by_old.entry(o.bits()).or_default().push(i);
    }
    let mut search = Search {
        op,
        last,
        lanes,
        by_old,
        used: vec![false; lanes.len()],
        budget: 1_000_000,
    };
    search.from(init, lanes.len())
}

/// The state of [`serializable`]'s depth-first search.
struct Search<'a, T> {
    op: Rmw,
    last: T,
    lanes: &'a [(T, T)],
    /// The lanes by the bits of the old value they saw.
    by_old: HashMap<u64, Vec<usize>>,
    used: Vec<bool>,
    /// Steps left before the search gives up (a test bug, not a device's).
    budget: usize,
}

impl<T: Val> Search<'_, T> {
    /// Whether the `left` unused lanes can follow from the value `cur`.
    fn from(&mut self, cur: T, left: usize) -> bool {
        self.budget = self.budget.checked_sub(1).expect("too many orders to try");
        let seen = self.by_old.get(&cur.bits()).cloned().unwrap_or_default();
        let mut placed = Vec::new();
        for &i in &seen {
            if !self.used[i] && T::apply(self.op, cur, self.lanes[i].1).bits() == cur.bits() {
                self.used[i] = true;
                placed.push(i);
            }
        }
        let left = left - placed.len();
        let ok = if left == 0 {
            cur.bits() == self.last.bits()
        } else {
            seen.iter().any(|&i| {
                if self.used[i] {
                    return false;
                }
                self.used[i] = true;
                let ok = self.from(T::apply(self.op, cur, self.lanes[i].1), left - 1);
                self.used[i] = false;
                ok
            })
        };
        for i in placed {
            self.used[i] = false;
        }
        ok
    }
}

/// Triton's four inputs for `n` programs: powers of two, all negative, all positive, one
/// made the least (`-max|x| - 1`) or the greatest (`max|x| + 1`). Triton draws the index
/// of the changed element; here it is program 2.
fn triton_modes(n: usize) -> Vec<(&'static str, Vec<i64>)> {
    let x: Vec<i64> = (0..n).map(|i| 1 << i).collect();
    let top = x.iter().map(|v| v.abs()).max().unwrap();
    let mut min_neg = x.clone();
    min_neg[2] = -top - 1;
    let mut max_pos = x.clone();
    max_pos[2] = top + 1;
    vec![
        ("all_neg", x.iter().map(|v| -v.abs()).collect()),
        ("all_pos", x.iter().map(|v| v.abs()).collect()),
        ("min_neg", min_neg),
        ("max_pos", max_pos),
    ]
}

/// What each op starts from: Triton's neutral elements for add/max/min, and for the
/// others a value every operand changes.
fn neutral<T: Val>(op: Rmw) -> T {
    match op {
        Rmw::Add | Rmw::Or | Rmw::Xor => T::of(0),
        Rmw::Max => T::lowest(),
        Rmw::Min => T::highest(),
        Rmw::Xchg => T::of(-1000),
        Rmw::And => T::of(-1),
    }
}

fn check_triton_rmw<T: Val>() {
    const PROGRAMS: usize = 5;
    for device in all_devices() {
        for &op in T::ops() {
            // Every `sem` is accepted and means the same; each op takes one.
            let sem = op as u32 % SEMS.len() as u32;
            for (mode, x) in triton_modes(PROGRAMS) {
                let what = format!(
                    "{} {op:?} {mode} sem {:?} on {device:?}",
                    T::DTYPE,
                    SEMS[sem as usize]
                );
                let x = Array1::from_iter(x.into_iter().map(T::of));
                let init = neutral::<T>(op);
                let mut z = Array1::from_elem(1, init);
                let mut old = Array1::from_elem(PROGRAMS, T::default());
                rmw::launch(
                    &device,
                    PROGRAMS,
                    x.view(),
                    &mut z,
                    &mut old,
                    op as u32,
                    sem,
                )
                .unwrap_or_else(|e| panic!("{what}: {e}"));
                // The fold in program order; every op but xchg ends the same in any order.
                let want = x.iter().fold(init, |a, &v| T::apply(op, a, v));
                if op != Rmw::Xchg {
                    assert_eq!(z[0].bits(), want.bits(), "{what}: {:?} for {want:?}", z[0]);
                }
                let lanes: Vec<(T, T)> = old.iter().copied().zip(x.iter().copied()).collect();
                assert!(
                    serializable(op, init, z[0], &lanes),
                    "{what}: old values {old:?} and final {:?} fit no order of {x:?}",
                    z[0]
                );
            }
        }
    }
}

#[test]
fn triton_atomic_rmw_int32() {
    check_triton_rmw::<i32>();
}

#[test]
fn triton_atomic_rmw_uint32() {
    check_triton_rmw::<u32>();
}

#[test]
fn triton_atomic_rmw_float16() {
    check_triton_rmw::<f16>();
}

#[test]
fn triton_atomic_rmw_float32() {
    check_triton_rmw::<f32>();
}

#[test]
fn triton_atomic_rmw_int64() {
    check_triton_rmw::<i64>();
}

#[test]
fn triton_atomic_rmw_uint64() {
    check_triton_rmw::<u64>();
}

#[test]
fn triton_atomic_rmw_float64() {
    check_triton_rmw::<f64>();
}

#[test]
fn triton_atomic_rmw_bfloat16() {
    check_triton_rmw::<bf16>();
}

/// Many lanes of many programs on `ADDRS` addresses: adds of 1..=3 (as many as keep
/// every partial sum exact in the type), max/min of small integers, exchanges of values
/// distinct per address; the tail of the last program masked off.
fn check_contended<T: Val>() {
    const ADDRS: usize = 8;
    const BLOCK: usize = 128;
    let per_addr = (T::EXACT.min(2048) / 3) as usize;
    let n = ADDRS * per_addr;
    let programs = n.div_ceil(BLOCK);
    let lanes = programs * BLOCK;
    for &op in &FLOAT_OPS {
        let x: Vec<i64> = (0..n as i64)
            .map(|i| match op {
                Rmw::Add => 1 + (i * 7 / 5) % 3,
                Rmw::Xchg => i / ADDRS as i64 + 1,
                // Small integers, negative and positive (bf16 holds them exactly).
                _ => (i * 7919 + 13) % 255 - 127,
            })
            .collect();
        let x: Vec<T> = x.into_iter().map(T::of).collect();
        let init = match op {
            Rmw::Add => T::of(0),
            Rmw::Xchg => T::of(-1),
            _ => T::of(3),
        };
        for device in all_devices() {
            let what = format!("{} {op:?} on {device:?}", T::DTYPE);
            let mut z = Array1::from_elem(ADDRS, init);
            let mut old = Array1::from_elem(lanes, T::of(77));
            let xa = Array1::from_vec(x.clone());
            contended::launch(
                &device,
                programs,
                &mut z,
                &mut old,
                xa.view(),
                n as i32,
                ADDRS as i32,
                op as u32,
                BLOCK,
            )
            .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert!(
                old.iter().skip(n).all(|o| o.bits() == T::of(0).bits()),
                "{what}: masked-off lanes give 0"
            );
            for a in 0..ADDRS {
                let mine: Vec<(T, T)> = (a..n).step_by(ADDRS).map(|i| (old[i], x[i])).collect();
                if op != Rmw::Xchg {
                    let want = mine.iter().fold(init, |acc, &(_, v)| T::apply(op, acc, v));
                    assert_eq!(
                        z[a].bits(),
                        want.bits(),
                        "{what}: address {a}: {:?} for {want:?}",
                        z[a]
                    );
                }
                assert!(
                    serializable(op, init, z[a], &mine),
                    "{what}: address {a}: old values and final {:?} fit no order",
                    z[a]
                );
            }
        }
    }
}

#[test]
fn contended_atomics_int32() {
    check_contended::<i32>();
}

#[test]
fn contended_atomics_uint64() {
    check_contended::<u64>();
}

#[test]
fn contended_atomics_float16() {
    check_contended::<f16>();
}

#[test]
fn contended_atomics_bfloat16() {
    check_contended::<bf16>();
}

#[test]
fn contended_atomics_float32() {
    check_contended::<f32>();
}

#[test]
fn contended_atomics_float64() {
    check_contended::<f64>();
}

/// One f16 add at `z[at]` under checked mode.
#[kernel]
fn add_one_half(z: Ptr<f16>, at: i32) {
    atomic_add(z + at, 1.0);
}

/// Checked mode checks 2 bytes: the last f16 of a buffer is in bounds, the one after it
/// is not, and the fault leaves what follows the buffer as it was.
#[test]
fn checked_mode_checks_two_byte_atomics() {
    let options = LaunchOptions {
        bounds_check: Some(true),
        ..Default::default()
    };
    for device in all_devices() {
        let mut all = Array1::from_elem(8, f16::from_f32(5.0));
        let mut z = all.slice_mut(ndarray::s![..7]);
        add_one_half::launch_with(&device, 1, &options, &mut z, 6)
            .unwrap_or_else(|e| panic!("{device:?}: {e}"));
        let e = add_one_half::launch_with(&device, 1, &options, &mut z, 7)
            .unwrap_err()
            .to_string();
        let fault = e.contains("out-of-bounds atomic") || e.contains("atomic of f16 (2 bytes)");
        assert!(fault, "{device:?}: {e}");
        let want: Vec<f32> = [5.0; 6].into_iter().chain([6.0, 5.0]).collect();
        assert_eq!(all.mapv(f16::to_f32).to_vec(), want, "{device:?}");
    }
}

/// Triton refuses 8- and 16-bit integer and bool atomics, and bitwise ones on floats.
#[kernel]
fn refused<T: Element>(p: Ptr<T>, #[constexpr] OP: u32) {
    let v = load(p);
    match OP {
        0 => atomic_add(p, v),
        _ => atomic_or(p, v),
    };
}

#[test]
fn narrow_integer_and_bitwise_float_atomics_are_refused() {
    let d = Device::interpreter();
    let error = |e: tritium::Error| e.to_string();
    let mut i16s = Array1::<i16>::zeros(1);
    let e = error(refused::launch(&d, 1, &mut i16s, 0).unwrap_err());
    assert!(
        e.contains("atomics need 32- or 64-bit elements, f16 or bf16, got i16"),
        "{e}"
    );
    let mut u8s = Array1::<u8>::zeros(1);
    let e = error(refused::launch(&d, 1, &mut u8s, 0).unwrap_err());
    assert!(e.contains("got u8"), "{e}");
    let mut fp8s = Array1::from_elem(1, F8E4M3::default());
    let e = error(refused::launch(&d, 1, &mut fp8s, 0).unwrap_err());
    assert!(e.contains("got fp8e4nv"), "{e}");
    let mut halves = Array1::from_elem(1, f16::ZERO);
    let e = error(refused::launch(&d, 1, &mut halves, 1).unwrap_err());
    assert!(e.contains("atomic_or needs integers, got f16"), "{e}");
    let mut bhalves = Array1::from_elem(1, bf16::ZERO);
    let e = error(refused::launch(&d, 1, &mut bhalves, 1).unwrap_err());
    assert!(e.contains("atomic_or needs integers, got bf16"), "{e}");
}

/// The PTX of an f16 and a bf16 atomic: f16 add is PTX's own half add; bf16 add (native
/// on sm_90 only), 16-bit exchanges and float max/min are compare-exchange loops.
#[test]
fn half_atomics_in_ptx() {
    let s = Specialization::default();
    let ptx = |f: &tritium::dsl::ir::Function, sm: u32| {
        let o = CudaCompileOptions {
            sm,
            num_warps: 4,
            ..Default::default()
        };
        compile_ptx(f, "k", &o)
            .unwrap_or_else(|e| panic!("{} on sm_{sm}: {e}", f.name))
            .text
    };
    for sm in [80, 90] {
        let add = ptx(
            &contended::trace::<f16>(&s, 8, Rmw::Add as u32, 128).unwrap(),
            sm,
        );
        assert!(add.contains("atom.global.add.noftz.f16"), "sm_{sm}: {add}");
        for op in [Rmw::Max, Rmw::Xchg] {
            let f = contended::trace::<f16>(&s, 8, op as u32, 128).unwrap();
            assert!(ptx(&f, sm).contains("atom.global.cas"), "sm_{sm} {op:?}");
        }
        let f = contended::trace::<bf16>(&s, 8, Rmw::Add as u32, 128).unwrap();
        assert!(ptx(&f, sm).contains("atom.global.cas"), "sm_{sm} bf16 add");
    }
}
