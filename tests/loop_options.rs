//! Triton's `range(…, loop_unroll_factor = N)`: the loop is marked for LLVM's unroller on
//! the CPU and CUDA (the count in the IR, `llvm.loop.unroll.count` in the LLVM IR, the body
//! repeated in the optimized code), and results do not change on any device. `num_stages`
//! sets how deep CUDA pipelines a loop around a tensor-core `dot`.

use crate::common::{all_devices, random_f16, random_f32};
use tritium::prelude::*;

/// `out[i] = Σ_k x[k·n + i]` over `k < rows`, with the row loop unrolled `UNROLL` times
/// (0: no option).
#[kernel]
fn column_sums(
    out: Ptr<f32>,
    x: Ptr<f32>,
    rows: i32,
    n: i32,
    #[constexpr] BLOCK: usize,
    #[constexpr] UNROLL: usize,
) {
    let offs = arange(0, BLOCK);
    let m = offs < n;
    let mut acc = zeros([BLOCK], DType::F32);
    if UNROLL == 0 {
        for k in range(0, rows) {
            acc = acc + load(x + k * n + offs, mask = m, other = 0.0);
        }
    } else {
        for k in range(0, rows, loop_unroll_factor = UNROLL) {
            acc = acc + load(x + k * n + offs, mask = m, other = 0.0);
        }
    }
    store(out + offs, acc, mask = m);
}

#[test]
fn unrolled_loops_compute_the_same_on_every_device() {
    let (rows, n) = (13, 50);
    let x = random_f32(rows * n, 5);
    for device in all_devices() {
        let mut want = vec![0f32; n];
        column_sums::launch(
            &device,
            1,
            &mut want[..],
            &x[..],
            rows as i32,
            n as i32,
            64,
            0,
        )
        .unwrap();
        for unroll in [1, 2, 4, 8] {
            let mut out = vec![0f32; n];
            column_sums::launch(
                &device,
                1,
                &mut out[..],
                &x[..],
                rows as i32,
                n as i32,
                64,
                unroll,
            )
            .unwrap();
            assert_eq!(out, want, "{device:?}, unroll {unroll}");
        }
    }
}

/// The factor is in the IR (printed and parsed back) and reaches LLVM on the CPU, whose
/// unroller runs the loop four iterations at a time.
#[test]
fn the_cpu_unrolls_by_the_factor() {
    use tritium::dsl::trace::Specialization;
    let s = Specialization::default();
    let text = tritium::dsl::ir::print_function(&column_sums::trace(&s, 64, 4).unwrap());
    assert!(text.contains("unroll = 4"), "{text}");
    let back = tritium::dsl::ir::parse_function(&text).unwrap();
    assert_eq!(tritium::dsl::ir::print_function(&back), text);

    let dumps = |unroll: usize| {
        let x = random_f32(64 * 8, 1);
        let mut out = vec![0f32; 64];
        crate::common::dumps_of(&format!("unroll-{unroll}"), |options| {
            column_sums::launch_with(
                &Device::cpu(),
                1,
                options,
                &mut out[..],
                &x[..],
                8,
                64,
                64,
                unroll,
            )
            .unwrap()
        })
    };
    let unrolled_dumps = dumps(4);
    let (ll, unrolled) = (unrolled_dumps.get("ll"), unrolled_dumps.get("opt.ll"));
    assert!(ll.contains("llvm.loop.unroll.count\", i32 4"), "{ll}");
    // Against the same loop kept rolled (`loop_unroll_factor = 1`), so that LLVM's own
    // choice for a loop without the option (which depends on the host) does not matter:
    // the row loop runs four iterations at a time (its trip counter is compared after the
    // fourth copy, `niter.ncmp.3` in LLVM 19's names), and the loops inside are the same
    // in both.
    let rolled_dumps = dumps(1);
    let (ll_rolled, rolled) = (rolled_dumps.get("ll"), rolled_dumps.get("opt.ll"));
    assert!(
        ll_rolled.contains("llvm.loop.unroll.disable"),
        "{ll_rolled}"
    );
    let by_four = |t: &str| t.matches(".ncmp.3").count();
    assert!(
        by_four(unrolled) > by_four(rolled),
        "not unrolled by 4:\n{unrolled}"
    );
}

/// CUDA gets the same hint (LLVM's NVPTX pipeline unrolls by it).
#[test]
fn ptx_loops_carry_the_factor() {
    use tritium::backend::cuda::{compile_ptx, CudaCompileOptions};
    use tritium::dsl::trace::Specialization;
    let s = Specialization::default();
    let ptx = |unroll| {
        let f = column_sums::trace(&s, 64, unroll).unwrap();
        compile_ptx(&f, "k", &CudaCompileOptions::default())
            .unwrap()
            .text
    };
    let (plain, unrolled) = (ptx(0), ptx(4));
    assert!(unrolled.contains("ld.global"), "{unrolled}");
    assert_ne!(plain, unrolled, "the factor changed nothing in the PTX");
}

/// A K loop of `steps` f16 `S × S` products onto `acc`, pipelined in `STAGES` stages (0: the
/// launch's `num_stages`), its counter running up to `top` (`steps` itself: from 0).
#[kernel]
fn staged_products(
    out: Ptr<f32>,
    a: Ptr<half::f16>,
    b: Ptr<half::f16>,
    steps: i32,
    top: i32,
    #[constexpr] S: usize,
    #[constexpr] STAGES: usize,
) {
    let r = arange(0, S);
    let at = r[(.., None)] * S as i32 + r[(None, ..)];
    let mut acc = zeros([S, S], DType::F32);
    let first = top - steps;
    if STAGES == 0 {
        for i in range(first, top) {
            acc = dot(
                load(a + at + (i - first) * (S * S) as i32),
                load(b + at),
                acc,
            );
        }
    } else {
        for i in range(first, top, num_stages = STAGES) {
            acc = dot(
                load(a + at + (i - first) * (S * S) as i32),
                load(b + at),
                acc,
            );
        }
    }
    store(out + at, acc);
}

/// Triton's `num_stages`, from `range(…, num_stages = s)` or the launch's options (an
/// autotuner's config sets it): CUDA keeps `s - 1` buffers, the copies of `s - 2` later
/// iterations in flight (`cp.async.wait_group s - 3`), none below 3 (each copy then waited
/// for at once); the loop's option wins. Results do not change (the emulator
/// against the interpreter).
#[test]
fn num_stages_sets_the_pipeline_depth() {
    use tritium::backend::cuda::{compile_ptx, CudaCompileOptions};
    use tritium::dsl::trace::Specialization;
    let s = Specialization::default();
    let ptx = |stages, launch_stages| {
        let f = staged_products::trace(&s, 32, stages).unwrap();
        let options = CudaCompileOptions {
            num_stages: launch_stages,
            ..Default::default()
        };
        compile_ptx(&f, "k", &options).unwrap().text
    };
    let waits = |t: &str| -> Vec<u32> {
        let mut w: Vec<u32> = (t.lines())
            .filter_map(|l| l.trim().strip_prefix("cp.async.wait_group "))
            .map(|n| n.trim_end_matches(';').parse().unwrap())
            .collect();
        w.sort_unstable();
        w.dedup();
        w
    };
    assert_eq!(waits(&ptx(0, 3)), [0]);
    assert_eq!(waits(&ptx(0, 4)), [0, 1]);
    assert_eq!(waits(&ptx(0, 5)), [0, 2]);
    assert_eq!(waits(&ptx(4, 3)), [0, 1]);
    assert_eq!(waits(&ptx(2, 5)), [0]);
    let n = 32;
    let a = random_f16(3 * n * n, 71);
    let b = random_f16(n * n, 72);
    let run = |d: &Device, stages: usize, launch_stages: u32| {
        let mut out = vec![0f32; n * n];
        let opts = LaunchOptions {
            num_stages: launch_stages,
            ..Default::default()
        };
        staged_products::launch_with(d, 1, &opts, &mut out, &a, &b, 3, 3, n, stages).unwrap();
        out
    };
    let want = run(&Device::interpreter(), 0, 3);
    for (stages, launch_stages) in [(0, 1), (0, 3), (0, 5), (4, 1), (1, 4)] {
        let got = run(&Device::cuda_emulator(), stages, launch_stages);
        let (got, want) = (ndarray::arr1(&got), ndarray::arr1(&want));
        let what = format!("stages {stages}, launch {launch_stages}");
        crate::common::assert_close(&got, &want, 1e-4, 1e-4, &what);
    }
}

/// Unit-step loops at the ends of their dtype's range: up to `i32::MAX` and down to
/// `i32::MIN`, and in i8 up to 127 and down to -128 (counted in the dtype itself, where
/// `iv ± 1` never leaves the range while the loop runs), each iteration storing `iv`
/// relative to its bound.
#[kernel]
fn loops_at_the_ends(out: Ptr<i32>, top: i32, bottom: i32, top8: i8, bottom8: i8) {
    for i in range(top - 3, top) {
        store(out + (i - (top - 3)), i - top);
    }
    for i in range(bottom + 3, bottom, -1) {
        store(out + 3 + (i - bottom - 1), i - bottom);
    }
    for i in range(top8 - 3, top8) {
        store(
            out + 6 + (i - (top8 - 3)).to(DType::I32),
            (i - top8).to(DType::I32),
        );
    }
    for i in range(bottom8 + 3, bottom8, -1) {
        store(
            out + 9 + (i - bottom8 - 1).to(DType::I32),
            (i - bottom8).to(DType::I32),
        );
    }
}

#[test]
fn unit_step_loops_run_to_the_ends_of_their_dtype() {
    let want = [-3, -2, -1, 1, 2, 3, -3, -2, -1, 1, 2, 3];
    for (top, bottom, top8, bottom8) in [(i32::MAX, i32::MIN, i8::MAX, i8::MIN), (7, -7, 7, -7)] {
        for device in all_devices() {
            let mut out = vec![0i32; 12];
            loops_at_the_ends::launch(&device, 1, &mut out[..], top, bottom, top8, bottom8)
                .unwrap();
            assert_eq!(
                out, want,
                "{device:?} at {top}, {bottom}, {top8}, {bottom8}"
            );
        }
    }
}

/// `staged_products` with its loop's counter near `i32::MAX`: the pipeline's copies for
/// later iterations (`iv + 1`, `iv + 2`) saturate at the dtype's end, beyond `hi`, so
/// those past the last iteration are not issued (a wrapped counter would be below `hi`).
#[test]
fn a_pipelined_loop_ends_at_the_top_of_its_dtype() {
    let n = 32;
    let a = random_f16(3 * n * n, 73);
    let b = random_f16(n * n, 74);
    let run = |d: &Device, top: i32, sm: Option<u32>| {
        let mut out = vec![0f32; n * n];
        let opts = LaunchOptions {
            num_stages: 4,
            emulated_sm: sm,
            ..Default::default()
        };
        staged_products::launch_with(d, 1, &opts, &mut out, &a, &b, 3, top, n, 0).unwrap();
        ndarray::arr1(&out)
    };
    let want = run(&Device::interpreter(), i32::MAX, None);
    for top in [i32::MAX, i32::MAX - 1, 10] {
        for sm in [None, Some(90)] {
            let got = run(&Device::cuda_emulator(), top, sm);
            let what = format!("top {top}, sm {sm:?}");
            crate::common::assert_close(&got, &want, 1e-4, 1e-4, &what);
        }
    }
}

/// A unit-step i32 loop counts in 32 bits on CUDA: its compares are `.s32`, no 64-bit
/// counter (a carry and a two-word compare per trip on the GPU).
#[test]
fn unit_step_loops_count_in_their_own_dtype_on_cuda() {
    use tritium::backend::cuda::{compile_ptx, CudaCompileOptions};
    use tritium::dsl::trace::Specialization;
    let s = Specialization::default();
    let f = staged_products::trace(&s, 32, 3).unwrap();
    let ptx = compile_ptx(&f, "k", &CudaCompileOptions::default())
        .unwrap()
        .text;
    assert!(
        !ptx.contains("setp.lt.s64") && !ptx.contains("setp.ge.s64"),
        "{ptx}"
    );
}

/// A K loop whose body also sums a loaded tile to a scalar (a reduction across warps,
/// through shared memory), `out[S·S]` the total.
#[kernel]
fn staged_products_and_a_sum(
    out: Ptr<f32>,
    a: Ptr<half::f16>,
    b: Ptr<half::f16>,
    x: Ptr<f32>,
    steps: i32,
    #[constexpr] S: usize,
) {
    let r = arange(0, S);
    let at = r[(.., None)] * S as i32 + r[(None, ..)];
    let mut acc = zeros([S, S], DType::F32);
    let mut total = sum(zeros([S], DType::F32), 0);
    for i in range(0, steps) {
        acc = dot(load(a + at + i * (S * S) as i32), load(b + at), acc);
        total = total + sum(load(x + i * S as i32 + r), 0);
    }
    store(out + at, acc);
    store(out + (S * S) as i32, total);
}

/// Its partials once landed on a pipeline's stage buffers with their copies in flight (a
/// race on a GPU, which the emulator reports: a store to a `cp.async` destination before
/// the copy lands), and then such a loop was not pipelined. Now they take scratch above
/// the stages (`scratch_floor`): the loop is pipelined (4 stages: `wait_group 1` on
/// sm_80, `2` on sm_90a) and its results the interpreter's.
#[test]
fn a_cross_warp_sum_in_a_k_loop_races_with_no_copy() {
    use tritium::dsl::trace::Specialization;
    let f = staged_products_and_a_sum::trace(&Specialization::default(), 32).unwrap();
    for (sm, in_flight) in [(80, 1), (90, 2)] {
        let text = crate::cuda::ptx_staged(&f, sm, 4, 4);
        let wait = format!("cp.async.wait_group {in_flight};");
        assert!(text.contains(&wait), "sm {sm}: no `{wait}`:\n{text}");
    }
    let n = 32;
    let a = random_f16(4 * n * n, 75);
    let b = random_f16(n * n, 76);
    let x = random_f32(4 * n, 77);
    let run = |d: &Device, sm: Option<u32>| {
        let mut out = vec![0f32; n * n + 1];
        let opts = LaunchOptions {
            num_stages: 4,
            num_warps: 4,
            emulated_sm: sm,
            ..Default::default()
        };
        staged_products_and_a_sum::launch_with(d, 1, &opts, &mut out, &a, &b, &x, 4, n).unwrap();
        ndarray::arr1(&out)
    };
    let want = run(&Device::interpreter(), None);
    for sm in [None, Some(90)] {
        let got = run(&Device::cuda_emulator(), sm);
        crate::common::assert_close(&got, &want, 1e-4, 1e-4, &format!("sm {sm:?}"));
    }
}
