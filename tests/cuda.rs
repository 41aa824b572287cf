//! The CUDA backend. PTX generation runs everywhere (no GPU or CUDA toolkit needed);
//! launches run only where a GPU is present and are reported as skipped otherwise.

use crate::common::{assert_close, cuda_device, emulated_and_interpreted, random_f32};
use ndarray::{Array1, Array2};
use rstest::rstest;
use std::collections::HashSet;
use tritium::backend::cuda::{
    compile_ptx, unavailable_reason, CudaCompileOptions, CudaTensor, Stream,
};
use tritium::dsl::ir::Function;
use tritium::dsl::trace::Specialization;
use tritium::prelude::DType;
use tritium::Device;
use tritium_kernels::custom_add::{self, AddOp};
use tritium_kernels::{layer_norm, matmul, misc, softmax, vector_add};

/// Every kernel of `tritium-kernels`, traced for one specialization.
fn kernels() -> Vec<Function> {
    let s = Specialization::default();
    vec![
        vector_add::add::trace::<f32>(&s, 1024).unwrap(),
        vector_add::add::trace::<half::f16>(&s, 1024).unwrap(),
        vector_add::add::trace::<i32>(&s, 256).unwrap(),
        softmax::softmax::trace::<f32>(&s, 1024).unwrap(),
        softmax::softmax::trace::<half::f16>(&s, 128).unwrap(),
        matmul::matmul::trace::<f32, f32>(&s, 64, 64, 32).unwrap(),
        matmul::matmul::trace::<half::f16, f32>(&s, 64, 64, 32).unwrap(),
        layer_norm::layer_norm_fwd::trace::<f32>(&s, 1024).unwrap(),
        layer_norm::layer_norm_bwd_dx::trace::<f32>(&s, 1024).unwrap(),
        layer_norm::layer_norm_bwd_dwdb::trace::<f32>(&s, 32, 64).unwrap(),
        misc::histogram::trace(&s, 256).unwrap(),
        misc::row_stats::trace(&s, 256).unwrap(),
        misc::collatz::trace(&s, 128).unwrap(),
        custom_add::custom_add::trace::<f32>(&s, 1000, AddOp::Simd).unwrap(),
        custom_add::custom_add::trace::<half::f16>(&s, 1024, AddOp::Simt).unwrap(),
        custom_add::custom_add::trace::<i32>(&s, 32, AddOp::MixSimt).unwrap(),
        custom_add::custom_add::trace::<f32>(&s, 32, AddOp::MixSimd).unwrap(),
        custom_add::custom_divmod::trace(&s, 100, true).unwrap(),
        custom_add::custom_divmod::trace(&s, 100, false).unwrap(),
        custom_add::custom_scale::trace::<f32>(&s, 8, 16, true).unwrap(),
        custom_add::custom_add_blocked::trace::<f32>(&s, 256, AddOp::Simt).unwrap(),
    ]
}

/// `f`'s PTX for `sm` on `num_warps` warps, the other options the defaults (3 stages).
pub(crate) fn ptx(f: &Function, sm: u32, num_warps: u32) -> String {
    ptx_staged(f, sm, num_warps, CudaCompileOptions::default().num_stages)
}

/// [`ptx`] with `num_stages` pipeline stages.
pub(crate) fn ptx_staged(f: &Function, sm: u32, num_warps: u32, num_stages: u32) -> String {
    compile_ptx(
        f,
        "k",
        &CudaCompileOptions {
            sm,
            num_warps,
            num_stages,
            ..Default::default()
        },
    )
    .unwrap_or_else(|e| panic!("{} for sm_{sm}: {e}", f.name))
    .text
}

#[rstest]
fn every_kernel_compiles_to_ptx(#[values(80, 90)] sm: u32) {
    for f in kernels() {
        let text = ptx(&f, sm, 4);
        for want in [
            ".entry k(".to_string(),
            format!(".target sm_{sm}"),
            ".maxntid 128, 1, 1".to_string(),
        ] {
            assert!(text.contains(&want), "{}: no `{want}` in\n{text}", f.name);
        }
        // The driver links nothing: a module with an undefined function fails to load.
        assert!(
            !text.contains(".extern .func"),
            "{}: an external function in\n{text}",
            f.name
        );
    }
}

#[test]
fn num_warps_sets_the_cta_size() {
    let f = vector_add::add::trace::<f32>(&Specialization::default(), 1024).unwrap();
    assert!(ptx(&f, 80, 8).contains(".maxntid 256, 1, 1"));
    let e = compile_ptx(
        &f,
        "k",
        &CudaCompileOptions {
            sm: 80,
            num_warps: 0,
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("num_warps is 0"), "{e}");
}

#[test]
fn unsupported_architecture_is_an_error() {
    let f = vector_add::add::trace::<f32>(&Specialization::default(), 1024).unwrap();
    let e = compile_ptx(
        &f,
        "k",
        &CudaCompileOptions {
            sm: 70,
            num_warps: 4,
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("sm_70 is not supported"), "{e}");
}

#[test]
fn vector_add_loads_and_stores_four_floats_at_a_time() {
    let f = vector_add::add::trace::<f32>(&Specialization::default(), 1024).unwrap();
    let text = ptx(&f, 80, 4);
    assert!(text.contains("ld.global.v4.f32"), "{text}");
    assert!(text.contains("st.global.v4.f32"), "{text}");
}

/// Two bytes a thread (256 over 128 threads) move as one `u16`: LLVM 19's NVPTX backend
/// put a `<2 x i8>` chunk through local memory (`st.v2.u8` then `ld.u16`), as
/// `scripts/dev ptx-sweep` found in fp8 attention. Emulated with a ragged tail (a chunk
/// half masked: the element path) against the interpreter.
#[rstest]
fn byte_pairs_move_as_one_u16_without_local_memory(#[values(80, 90)] sm: u32) {
    let f = vector_add::add::trace::<u8>(&Specialization::default(), 256).unwrap();
    let text = ptx(&f, sm, 4);
    assert!(!text.contains(".local"), "{text}");
    for v in ["ld.global.u16", "st.global.u16"] {
        assert!(text.contains(v), "no {v} in\n{text}");
    }
    let n = 501;
    let x: Array1<u8> = (0..n).map(|i| (i * 37 % 251) as u8).collect();
    let y: Array1<u8> = (0..n).map(|i| (i * 11 % 253) as u8).collect();
    let opts = tritium::LaunchOptions {
        emulated_sm: Some(sm),
        ..Default::default()
    };
    let (got, want, _) = emulated_and_interpreted(|d| {
        let mut out = Array1::<u8>::zeros(n);
        vector_add::add::launch_with(d, 2, &opts, &mut out, &x, &y, n as i32, 256).unwrap();
        out
    });
    assert_eq!(got, want);
    let sums: Array1<u8> = x.iter().zip(&y).map(|(a, b)| a.wrapping_add(*b)).collect();
    assert_eq!(want, sums);
}

/// Copies `x[..N]` reversed into `out`.
#[tritium::kernel]
fn reversed_copy<T: tritium::prelude::Element>(out: Ptr<T>, x: Ptr<T>, #[constexpr] N: usize) {
    let i = arange(0, N);
    store(out + i, load(x + (N as i32 - 1) - i));
}

/// A copied f16 moves as bits: the NaN-keeping conversions (PTX's `cvt` makes every NaN
/// canonical) must not stand between a load and a store, as they did in matmul's staging
/// of its operands (tenfold `cvt`s, more spills).
#[rstest]
fn copied_halves_are_not_converted(#[values(80, 90)] sm: u32) {
    let f = reversed_copy::trace::<half::f16>(&Specialization::default(), 256).unwrap();
    let text = ptx(&f, sm, 4);
    assert!(!text.contains("cvt.f32.f16"), "{text}");
    assert!(!text.contains("cvt.rn.f16.f32"), "{text}");
}

/// Checked mode: the check buffer is one more parameter, every access is compared with
/// the buffers (unsigned 64-bit compares) and the first fault is claimed with a
/// compare-exchange; chunks wholly in bounds are still one vector access.
#[rstest]
fn checked_mode_compares_every_access_with_its_buffers(#[values(80, 90)] sm: u32) {
    let f = vector_add::add::trace::<f32>(&Specialization::default(), 1024).unwrap();
    let compile = |bounds_check| {
        let copts = CudaCompileOptions {
            sm,
            num_warps: 4,
            bounds_check,
            ..Default::default()
        };
        compile_ptx(&f, "k", &copts).unwrap().text
    };
    let (plain, checked) = (compile(false), compile(true));
    let extra = format!("k_param_{}", f.params.len());
    assert!(checked.contains(&extra), "{checked}");
    assert!(!plain.contains(&extra), "{plain}");
    assert!(checked.contains("atom.global.cas.b64"), "{checked}");
    assert!(!plain.contains("atom."), "{plain}");
    let compares = |t: &str| {
        t.lines()
            .filter(|l| l.contains("setp.") && l.contains("u64"))
            .count()
    };
    assert!(compares(&checked) >= compares(&plain) + 3 * 4, "{checked}");
    for v in ["ld.global.v4.f32", "st.global.v4.f32"] {
        assert!(checked.contains(v), "no {v} in\n{checked}");
    }
}

/// f16 and bf16 `dot`s run on `mma.sync` (sm 80), or on Hopper's `wgmma` where the
/// accumulator's rows fill whole warpgroups (64 × 64 on 4 warps), `mma.sync` where they
/// do not (32 × 32 on 4 warps).
#[rstest]
fn f16_and_bf16_dot_use_tensor_cores(#[values(80, 90)] sm: u32) {
    let s = Specialization::default();
    let f16 = matmul::matmul::trace::<half::f16, f32>(&s, 64, 64, 32).unwrap();
    let text = ptx(&f16, sm, 4);
    let want = match sm {
        80 => "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32",
        _ => "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16",
    };
    assert!(text.contains(want), "{text}");
    assert_eq!(text.contains(".target sm_90a"), sm == 90);
    let bf16 = matmul::matmul::trace::<half::bf16, f32>(&s, 32, 32, 16).unwrap();
    let text = ptx(&bf16, sm, 4);
    assert!(
        text.contains("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32"),
        "{text}"
    );
    // f32 inputs take the fallback.
    let f32 = matmul::matmul::trace::<f32, f32>(&s, 64, 64, 32).unwrap();
    assert!(!ptx(&f32, sm, 4).contains("mma.sync"));
}

#[test]
fn loop_carried_mma_accumulator_stays_in_registers() {
    // 64 × 64 f32 accumulator over 4 warps: 32 tiles of 16 × 8, 8 rounds of 4 registers
    // per lane, stored after the loop straight from them (codegen `fragments`): no f32
    // goes to shared memory. An accumulator going through shared memory in the loop would
    // add 32 stores in and 32 out per iteration.
    let f =
        matmul::matmul::trace::<half::f16, f32>(&Specialization::default(), 64, 64, 32).unwrap();
    let text = ptx(&f, 80, 4);
    let stores = text
        .lines()
        .filter(|l| l.contains("st.shared") && l.contains(".f32"))
        .count();
    assert_eq!(stores, 0, "f32 shared stores in\n{text}");
    let global = text.lines().filter(|l| l.contains("st.global")).count();
    assert!(
        (1..=32).contains(&global),
        "{global} global stores in\n{text}"
    );
    // Both operands' fragments are read by `ldmatrix` (`b` transposed), never element
    // by element, and both are staged 4 halves at a time.
    for narrow in [
        "ld.shared.u16",
        "ld.shared.b16",
        "ld.shared.v2.u16",
        "ld.shared.u32",
    ] {
        assert!(!text.contains(narrow), "`{narrow}` in\n{text}");
    }
    // The operands are loads that only the `dot` uses: copied by `cp.async`, 16 bytes at
    // a time, or where a chunk is not aligned or partly masked, stored 16 bytes at a time.
    for wide in [
        "ldmatrix.sync.aligned.m8n8.x4.shared.b16",
        "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16",
        "cp.async.cg.shared.global",
        "cp.async.commit_group",
        "cp.async.wait_group 0",
        "st.shared.v4.b32",
    ] {
        assert!(text.contains(wide), "no `{wide}` in\n{text}");
    }
    assert!(!text.contains("st.shared.u16"), "{text}");
}

/// Tutorial 03's usual launch as the specialization sees it: 16-byte-aligned matrices,
/// sizes and leading dimensions divisible by 16, unit strides (arguments 7, 9, 11).
fn tutorial_03_specialization() -> Specialization {
    crate::common::matmul_specialization(&[7, 9, 11])
}

/// Launched with tutorial 03's usual arguments (16-byte aligned matrices, sizes and
/// leading dimensions divisible by 16, unit strides), the copies need no test: one
/// `cp.async` per chunk whose size is its mask's first lane, and no per-element loads.
#[rstest]
fn specialized_operand_copies_need_no_tests(#[values(80, 90)] sm: u32) {
    let spec = tutorial_03_specialization();
    let f = matmul::matmul::trace::<half::f16, half::f16>(&spec, 128, 128, 32).unwrap();
    let text = ptx(&f, sm, 4);
    assert!(text.contains("cp.async.cg.shared.global"), "{text}");
    for slow in ["ld.global.u16", "ld.global.b16"] {
        assert!(!text.contains(slow), "`{slow}` in\n{text}");
    }
    let plain =
        matmul::matmul::trace::<half::f16, half::f16>(&Specialization::default(), 128, 128, 32)
            .unwrap();
    assert!(ptx(&plain, sm, 4).contains("ld.global.u16"));
    // An f32 result's epilogue stores each fragment register pair (two adjacent columns
    // of a row, proven one aligned pair under one mask value) as one 8-byte store: 64 per
    // thread for 128 × 128 over 4 warps; unspecialized (N may be odd), element by element.
    let stores = |t: &str, what: &str| t.lines().filter(|l| l.contains(what)).count();
    let f32_out = |s: &Specialization| {
        ptx(
            &matmul::matmul::trace::<half::f16, f32>(s, 128, 128, 32).unwrap(),
            sm,
            4,
        )
    };
    let (paired, plain) = (f32_out(&spec), f32_out(&Specialization::default()));
    assert_eq!(stores(&paired, "st.global.v2.f32"), 64, "{paired}");
    assert_eq!(stores(&paired, "st.global.f32"), 0, "{paired}");
    assert_eq!(stores(&plain, "st.global.f32"), 128, "{plain}");
}

/// The K loop's copies cost what their chunks need (the SASS counts are the README's
/// offline table): each chunk's mask is `cp.async`'s `ignore-src` predicate itself (no
/// `src-size` register that ptxas turns back into a predicate), and a thread's chunks of
/// one operand, a whole number of swizzle periods apart, take their shared addresses as
/// constant offsets from the first's (`[r + 0x800]`) instead of each its own swizzle.
#[rstest]
fn operand_copies_take_predicates_and_constant_offsets(#[values(80, 90)] sm: u32) {
    let spec = tutorial_03_specialization();
    let f = matmul::matmul::trace::<half::f16, half::f16>(&spec, 128, 128, 32).unwrap();
    let text = ptx_staged(&f, sm, 4, 4);
    let copies: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| l.starts_with("cp.async.cg.shared.global"))
        .collect();
    assert!(!copies.is_empty(), "{text}");
    for c in &copies {
        let predicate = c.rsplit(", ").next().unwrap();
        assert!(predicate.starts_with("%p"), "`{c}` takes no predicate");
    }
    // `add.s64 %rd9, %rd5, 2048;` defining a copy's destination.
    let offsets: HashSet<&str> = text
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let (op, dst, _, imm) = (w.next()?, w.next()?, w.next()?, w.next()?);
            let constant = imm.trim_end_matches(';').parse::<u64>().is_ok();
            (op == "add.s64" && constant).then(|| dst.trim_end_matches(','))
        })
        .collect();
    let offset = copies
        .iter()
        .filter(|c| {
            let dst = c.split('[').nth(1).unwrap().split(']').next().unwrap();
            offsets.contains(dst)
        })
        .count();
    // 128 × 32 of `a` and 32 × 128 of `b` over 128 threads: 4 chunks each, 3 of them
    // offset from the first (which may be an offset too: `b` lies above `a`).
    assert!(
        offset * 4 >= copies.len() * 3,
        "{offset} of {}:\n{text}",
        copies.len()
    );
}

/// A 16-bit result's epilogue goes through shared memory as Triton's: each fragment pair
/// one word (`cvt.rn.f16x2.f32`), written by one 32-bit shared store each on Ampere and
/// by `stmatrix.x4`, four pairs at a time, on Hopper (Triton's STSM: 16 per thread), then
/// 16-byte chunks of rows read back and stored with one `st.global.v4` each (16 per
/// thread for 128 × 128 over 4 warps, Triton's count), where the specialization proves
/// every 8 columns one aligned run under one mask value; unspecialized, element by
/// element as before.
#[rstest]
fn f16_epilogue_stores_16_byte_chunks(#[values(80, 90)] sm: u32) {
    let spec = tutorial_03_specialization();
    let stores = |t: &str, what: &str| t.lines().filter(|l| l.contains(what)).count();
    let f16_out = |s: &Specialization| {
        let f = matmul::matmul::trace::<half::f16, half::f16>(s, 128, 128, 32).unwrap();
        ptx(&f, sm, 4)
    };
    let (staged, plain) = (f16_out(&spec), f16_out(&Specialization::default()));
    assert_eq!(stores(&staged, "st.global.v4.u32"), 16, "{staged}");
    assert_eq!(stores(&staged, "ld.shared.v4.u32"), 16, "{staged}");
    // One word per pair (a pair holding a NaN is written again as two halves, which
    // LLVM may merge back into words).
    let stmatrix = stores(&staged, "stmatrix.sync.aligned.m8n8.x4.shared.b16");
    match sm {
        80 => assert!(stmatrix == 0 && stores(&staged, "st.shared.u32") >= 64),
        _ => assert_eq!(stmatrix, 16, "{staged}"),
    }
    assert!(stores(&staged, "cvt.rn.f16x2.f32") >= 64, "{staged}");
    assert_eq!(stores(&staged, "st.global.u16"), 0, "{staged}");
    assert_eq!(stores(&plain, "st.global.u16"), 128, "{plain}");
    assert_eq!(stores(&plain, "st.global.v4"), 0, "{plain}");
}

/// The staged epilogue's results on the emulator (Ampere's and Hopper's accumulator
/// layouts, `TRITIUM_EMULATE_SM=90` running it a second time): rows cut by the mask
/// anywhere, columns at a chunk boundary, and tiles of fewer chunks than threads (16 × 16
/// over 4 warps, dealt round-robin); every stored half as the interpreter's.
#[rstest]
fn f16_epilogue_through_shared_memory_emulated(
    #[values((64, 64, 32, 4), (16, 16, 16, 4), (128, 128, 32, 4), (64, 128, 32, 8))] config: (
        usize,
        usize,
        usize,
        u32,
    ),
) {
    use half::f16;
    let (bm, bn, bk, num_warps) = config;
    let (m, n, k) = (2 * bm - 7, 2 * bn - 16, 2 * bk);
    let a = Array2::from_shape_vec((m, k), random_f32(m * k, 41))
        .unwrap()
        .mapv(f16::from_f32);
    let b = Array2::from_shape_vec((k, n), random_f32(k * n, 42))
        .unwrap()
        .mapv(f16::from_f32);
    let opts = tritium::LaunchOptions {
        num_warps,
        ..Default::default()
    };
    let run = |d: &Device| {
        // Past the matrix: a guard the masked-off chunks must not touch.
        let mut out = Array2::from_elem((m, n + 16), f16::from_f32(7.0));
        let (mi, ni, ki, ld) = (m as i32, n as i32, k as i32, n as i32 + 16);
        matmul::matmul::launch_explicit(
            d,
            [2, 2],
            &opts,
            &mut out,
            &a,
            &b,
            mi,
            ni,
            ki,
            ki,
            1,
            ni,
            1,
            ld,
            1,
            bm,
            bn,
            bk,
        )
        .unwrap();
        out.mapv(f16::to_f32)
    };
    let (got, want) = (run(&Device::cuda_emulator()), run(&Device::interpreter()));
    assert_close(&got, &want, 1e-3, 1e-3, &format!("{config:?}"));
    assert!(got.slice(ndarray::s![.., n..]).iter().all(|x| *x == 7.0));
}

/// `dot(a, b, c)` stored to `out` (converted to its dtype), all `S × S`.
#[tritium::kernel]
fn dot_cast_out<O: tritium::prelude::Float>(
    out: Ptr<O>,
    a: Ptr<half::f16>,
    b: Ptr<half::f16>,
    c: Ptr<f32>,
    #[constexpr] S: usize,
) {
    let r = arange(0, S);
    let at = r[(.., None)] * S as i32 + r[(None, ..)];
    let acc = dot(load(a + at), load(b + at), load(c + at));
    store(out + at, acc);
}

/// `out[i] = dot(a, b[i])` for `steps` matrices, each stored (as f16) inside the loop;
/// `a` is loop-invariant, so CUDA stages it once before the loop.
#[tritium::kernel]
fn dots_stored_in_a_loop(
    out: Ptr<half::f16>,
    a: Ptr<half::f16>,
    b: Ptr<half::f16>,
    steps: i32,
    #[constexpr] S: usize,
) {
    let r = arange(0, S);
    let at = r[(.., None)] * S as i32 + r[(None, ..)];
    for i in range(0, steps) {
        let o = i * (S * S) as i32;
        let acc = dot(load(a + at), load(b + o + at), zeros([S, S], DType::F32));
        store(out + o + at, acc);
    }
}

/// A 16-bit `dot` result staged through shared memory at every iteration of a loop (above
/// whatever tiles the loop keeps there, `shared_floor`): every matrix comes out as the
/// interpreter's. (A loop with a store is not pipelined; the epilogue also refuses to
/// stage in one.)
#[test]
fn dot_results_stored_in_a_loop_emulated() {
    use half::f16;
    let (s, steps) = (32, 4);
    let n = steps * s * s;
    let a: Vec<f16> = random_f32(n, 61).into_iter().map(f16::from_f32).collect();
    let b: Vec<f16> = random_f32(n, 62).into_iter().map(f16::from_f32).collect();
    let opts = tritium::LaunchOptions {
        num_warps: 4,
        ..Default::default()
    };
    let run = |d: &Device| {
        let mut out = vec![f16::ZERO; n];
        dots_stored_in_a_loop::launch_with(d, 1, &opts, &mut out, &a, &b, steps as i32, s).unwrap();
        Array1::from_vec(out.into_iter().map(f16::to_f32).collect())
    };
    let (got, want) = (run(&Device::cuda_emulator()), run(&Device::interpreter()));
    assert_close(&got, &want, 1e-3, 1e-3, "dots stored in a loop");
}

/// Carried pointer tiles advanced by a scalar are carried as one offset (`dsl::ir::
/// carry_pointer_offsets`), so tutorial 03 as Triton writes it (`matmul_carried`) gets
/// what the recomputed form gets: operands copied by `cp.async` in a pipelined loop (4
/// stages: 3 buffers and `wait_group 1` on sm_80, 4 buffers, `wait_group 2` and `wgmma`
/// on sm_90), and the interpreter's products on both emulators, edges masked and K not a
/// multiple of `BK`.
#[rstest]
fn carried_pointer_tiles_are_copied_and_pipelined_emulated(
    #[values((64, 48, 40), (40, 136, 96))] (m, n, k): (usize, usize, usize),
) {
    use half::f16;
    let f =
        matmul::matmul_carried::trace::<f16, f32>(&Specialization::default(), 64, 64, 32).unwrap();
    for sm in [80, 90] {
        let options = CudaCompileOptions {
            sm,
            num_warps: 4,
            num_stages: 4,
            ..Default::default()
        };
        let text = compile_ptx(&f, "k", &options).unwrap().text;
        let in_flight = format!("cp.async.wait_group {}", if sm == 90 { 2 } else { 1 });
        for want in ["cp.async.cg.shared.global", &in_flight] {
            assert!(text.contains(want), "sm_{sm}: no `{want}` in\n{text}");
        }
        assert_eq!(text.contains("wgmma.mma_async"), sm == 90, "sm_{sm}");
    }
    let a = Array1::from(random_f32(m * k, 71)).mapv(f16::from_f32);
    let b = Array1::from(random_f32(k * n, 72)).mapv(f16::from_f32);
    let opts = tritium::LaunchOptions {
        num_warps: 4,
        num_stages: 3,
        ..Default::default()
    };
    let grid = [m.div_ceil(64) as u32, n.div_ceil(64) as u32, 1];
    let run = |d: &Device| {
        let mut c = Array1::<f32>::zeros(m * n);
        let (m, n, k) = (m as i32, n as i32, k as i32);
        matmul::matmul_carried::launch_with(
            d, grid, &opts, &mut c, &a, &b, m, n, k, k, 1, n, 1, n, 1, 64, 64, 32,
        )
        .unwrap();
        c
    };
    let want = run(&Device::interpreter());
    assert_close(
        &run(&Device::cuda_emulator()),
        &want,
        1e-4,
        1e-4,
        "carried pointers",
    );
}

/// A carried pointer tile read after its loop: the tile at the final offset (`steps`
/// advances of `step`, either sign), as the interpreter reads it.
#[tritium::kernel]
fn pointer_after_loop(out: Ptr<f32>, x: Ptr<f32>, steps: i32, step: i32, #[constexpr] B: usize) {
    let offs = arange(0, B);
    let mut p = x + 64 + offs;
    let mut total = zeros([B], DType::F32);
    for _ in range(0, steps) {
        total = total + load(p);
        p = p + step;
    }
    store(out + offs, total + load(p));
}

#[rstest]
fn pointer_tiles_read_after_their_loop_emulated(
    #[values((0, 5), (3, 7), (4, -16))] (steps, step): (i32, i32),
) {
    let x = random_f32(256, 73);
    let run = |d: &Device| {
        let mut out = vec![0f32; 32];
        pointer_after_loop::launch(d, 1, &mut out, &x, steps, step, 32).unwrap();
        Array1::from_vec(out)
    };
    let want = run(&Device::interpreter());
    assert_close(
        &run(&Device::cuda_emulator()),
        &want,
        0.0,
        0.0,
        "pointer after a loop",
    );
}

/// The staged epilogue keeps a NaN's sign and top payload bits as every other f16 and
/// bf16 conversion does (the hardware's paired conversion would make it canonical): NaNs
/// in one or both halves of a pair, of either sign, bit for bit as the interpreter's. On
/// Hopper the pairs go to shared memory by `stmatrix` (8 matrices per warp, one wavefront
/// each), the NaN pairs rewritten after it.
#[rstest]
fn staged_epilogue_keeps_nan_payloads_emulated(
    #[values(DType::F16, DType::BF16)] d: DType,
    #[values(80, 90)] sm: u32,
) {
    use half::{bf16, f16};
    let s = 64;
    let a = Array2::from_shape_vec((s, s), random_f32(s * s, 51))
        .unwrap()
        .mapv(f16::from_f32);
    let b = Array2::from_shape_vec((s, s), random_f32(s * s, 52))
        .unwrap()
        .mapv(f16::from_f32);
    let mut c = Array2::from_shape_vec((s, s), random_f32(s * s, 53)).unwrap();
    for (i, bits) in [
        0x7fc0_0000u32,
        0xffd5_5000,
        0x7fa0_2000,
        0xffff_e000,
        0x7fc1_0000,
    ]
    .into_iter()
    .enumerate()
    {
        // A NaN in the low half of a pair, the high half, and both.
        c[(3 * i, 2 * i)] = f32::from_bits(bits);
        c[(3 * i + 1, 2 * i + 1)] = f32::from_bits(bits);
        c[(3 * i + 2, 2 * i)] = f32::from_bits(bits);
        c[(3 * i + 2, 2 * i + 1)] = f32::from_bits(bits ^ 0x8000_0000);
    }
    let opts = tritium::LaunchOptions {
        num_warps: 4,
        emulated_sm: Some(sm),
        ..Default::default()
    };
    let bits = |dev: &Device| -> Vec<u16> {
        match d {
            DType::F16 => {
                let mut out = Array2::from_elem((s, s), f16::ZERO);
                dot_cast_out::launch_with(dev, 1, &opts, &mut out, &a, &b, &c, s).unwrap();
                out.iter().map(|x| x.to_bits()).collect()
            }
            _ => {
                let mut out = Array2::from_elem((s, s), bf16::ZERO);
                dot_cast_out::launch_with(dev, 1, &opts, &mut out, &a, &b, &c, s).unwrap();
                out.iter().map(|x| x.to_bits()).collect()
            }
        }
    };
    let (got, want, stats) = crate::common::emulated_and_interpreted(bits);
    // 64 × 64 halves: 4 warps of 16 rows, 8 matrices of 8 × 8 per row of tiles.
    let matrices = if sm == 90 { 4 * 2 * 8 } else { 0 };
    assert_eq!(
        (stats.stmatrix_matrices, stats.stmatrix_wavefronts),
        (matrices, matrices)
    );
    let nans: Vec<(usize, u16)> = (want.iter().enumerate())
        .filter(|(_, w)| (**w & 0x7fff) > if d == DType::F16 { 0x7c00 } else { 0x7f80 })
        .map(|(i, w)| (i, *w))
        .collect();
    assert_eq!(nans.len(), 20, "{nans:x?}");
    for (i, w) in nans {
        assert_eq!(got[i], w, "{d:?} element {i}: {:#06x} for {w:#06x}", got[i]);
    }
    let f = |bits: &[u16]| -> Vec<f32> {
        bits.iter()
            .map(|b| match d {
                DType::F16 => f16::from_bits(*b).to_f32(),
                _ => bf16::from_bits(*b).to_f32(),
            })
            .collect()
    };
    let (g, w) = (f(&got), f(&want));
    for (i, (x, y)) in g.iter().zip(&w).enumerate() {
        assert!(
            x.is_nan() == y.is_nan() && (x.is_nan() || (x - y).abs() <= 1e-2 * (1.0 + y.abs())),
            "{i}: {x} vs {y}"
        );
    }
}

/// Tutorial 03's K loop is software-pipelined: at 4 stages (3 buffers) the copies of two
/// later iterations are in flight while one computes (`wait_group 1`, one group may still
/// be pending), and the loop drains them on exit (`wait_group 0`). So is attention's key
/// loop, its two `dot`s' `k` and `v` copied in one stage, its block pointers' offsets
/// advanced for the later iterations.
#[test]
fn tutorial_03_k_loop_is_pipelined() {
    let staged = |f: &Function, num_warps| {
        let options = CudaCompileOptions {
            num_warps,
            num_stages: 4,
            ..Default::default()
        };
        compile_ptx(f, "k", &options).unwrap().text
    };
    let f =
        matmul::matmul::trace::<half::f16, f32>(&Specialization::default(), 64, 64, 32).unwrap();
    let text = staged(&f, 4);
    for want in ["cp.async.wait_group 1", "cp.async.wait_group 0"] {
        assert!(text.contains(want), "no `{want}` in\n{text}");
    }
    // Buffers of 40 KiB: two fit the budget, so each iteration waits for all but none.
    let wide =
        matmul::matmul::trace::<half::f16, f32>(&Specialization::default(), 64, 256, 64).unwrap();
    let text = staged(&wide, 8);
    assert!(!text.contains("cp.async.wait_group 1"), "{text}");
    assert!(text.contains("cp.async.wait_group 0"), "{text}");
    let s = Specialization::default();
    let attention =
        tritium_kernels::attention::attention_forward::trace::<half::f16>(&s, 64, 32, 64, false)
            .unwrap();
    assert!(staged(&attention, 4).contains("cp.async.wait_group 1"));
}

/// A K loop whose `dot` accumulates onto a tile loaded before the loop: that accumulator
/// goes to fragments through shared memory at every iteration, where a pipelined loop's
/// copies would be in flight, so this loop is not pipelined (and its results hold).
#[tritium::kernel]
fn dot_onto_a_loaded_tile(
    out: Ptr<f32>,
    a: Ptr<half::f16>,
    b: Ptr<half::f16>,
    bias: Ptr<f32>,
    steps: i32,
    #[constexpr] S: usize,
) {
    let r = arange(0, S);
    let at = r[(.., None)] * S as i32 + r[(None, ..)];
    let base = load(bias + at);
    let mut acc = zeros([S, S], DType::F32);
    for i in range(0, steps) {
        let ta = load(a + at + i * (S * S) as i32);
        let tb = load(b + at);
        acc = dot(ta, tb, base);
    }
    store(out + at, acc);
}

#[test]
fn a_dot_onto_a_loaded_tile_is_not_pipelined_emulated() {
    use half::f16;
    let s = 32;
    let a = Array1::from(random_f32(3 * s * s, 29)).mapv(f16::from_f32);
    let b = Array1::from(random_f32(s * s, 30)).mapv(f16::from_f32);
    let bias = Array1::from(random_f32(s * s, 31));
    let f = dot_onto_a_loaded_tile::trace(&Specialization::default(), s).unwrap();
    assert!(!ptx(&f, 80, 4).contains("cp.async.wait_group 1"));
    let run = |d: &Device| {
        let mut out = Array1::<f32>::zeros(s * s);
        dot_onto_a_loaded_tile::launch(d, 1, &mut out, &a, &b, &bias, 3, s).unwrap();
        out
    };
    let want = run(&Device::interpreter());
    assert_close(
        &run(&Device::cuda_emulator()),
        &want,
        1e-4,
        1e-4,
        "dot onto a loaded tile",
    );
}

/// A `dot` of tiles loaded under box masks with `other` (`FILL`: 1, else 0) from rows
/// `ld` apart: an odd `ld` leaves most chunks misaligned, and the edges of the boxes
/// mask chunks wholly or in part, so every path of the `cp.async` copy runs. With
/// `B_COLUMNS`, `b` is read as the transpose of an `N × K` matrix (attention's `kᵀ`): its
/// columns are the runs, so its copy runs down them into a transposed layout.
#[tritium::kernel]
fn masked_operands(
    out: Ptr<f32>,
    a: Ptr<half::f16>,
    b: Ptr<half::f16>,
    m: i32,
    n: i32,
    k: i32,
    ld: i32,
    #[constexpr] M: usize,
    #[constexpr] N: usize,
    #[constexpr] K: usize,
    #[constexpr] FILL: bool,
    #[constexpr] B_COLUMNS: bool,
) {
    let rm = arange(0, M);
    let rn = arange(0, N);
    let rk = arange(0, K);
    let fill = if FILL { 1.0 } else { 0.0 };
    let ta = load(
        a + rm[(.., None)] * ld + rk[(None, ..)],
        mask = (rm[(.., None)] < m) & (rk[(None, ..)] < k),
        other = fill,
    );
    let b_at = if B_COLUMNS {
        rn[(None, ..)] * ld + rk[(.., None)]
    } else {
        rk[(.., None)] * ld + rn[(None, ..)]
    };
    let tb = load(
        b + b_at,
        mask = (rk[(.., None)] < k) & (rn[(None, ..)] < n),
        other = fill,
    );
    let acc = dot(ta, tb, zeros([M, N], DType::F32));
    store(out + rm[(.., None)] * N as i32 + rn[(None, ..)], acc);
}

/// Runs `masked_operands` on the emulator and the interpreter: the same products, and no
/// bank conflicts in the fragment reads of swizzled rows.
#[allow(clippy::too_many_arguments)]
fn check_masked_operands(
    [bm, bn, bk]: [usize; 3],
    [m, n, k, ld]: [i32; 4],
    fill: bool,
    b_columns: bool,
    num_warps: u32,
) {
    use half::f16;
    let a = Array1::from(random_f32(64 * 48, 23)).mapv(f16::from_f32);
    let b = Array1::from(random_f32(64 * 48, 24)).mapv(f16::from_f32);
    let opts = tritium::LaunchOptions {
        num_warps,
        ..Default::default()
    };
    let run = |d: &Device| {
        let mut out = Array1::<f32>::zeros(bm * bn);
        masked_operands::launch_with(
            d, 1, &opts, &mut out, &a, &b, m, n, k, ld, bm, bn, bk, fill, b_columns,
        )
        .unwrap();
        out
    };
    tritium::backend::cuda::shared_memory_stats();
    let got = run(&Device::cuda_emulator());
    let stats = tritium::backend::cuda::shared_memory_stats();
    // Rows of a number of 16-byte chunks that is not a power of two are not swizzled
    // (K = 48: rows of 96 bytes, two wavefronts per matrix).
    if bk.is_power_of_two() {
        assert_eq!(
            stats.ldmatrix_wavefronts, stats.ldmatrix_matrices,
            "bank conflicts"
        );
    }
    assert_close(
        &got,
        &run(&Device::interpreter()),
        1e-4,
        1e-4,
        "cp.async operands",
    );
}

#[rstest]
fn column_major_operands_are_copied_down_their_columns_emulated(
    #[values(40, 41, 48)] ld: i32,
    // K of 32 and 64: pairs of k steps per `ldmatrix.x4` of `b`; 48: then one `.x2`.
    #[values(
        (32, 32, 32, 32, 32),
        (16, 24, 32, 17, 27),
        (32, 16, 16, 16, 16),
        (16, 32, 48, 29, 45),
        (32, 16, 64, 16, 64)
    )]
    sizes: (usize, usize, usize, i32, i32),
    #[values(1, 4)] num_warps: u32,
) {
    let (bm, bn, bk, n, k) = sizes;
    let f = masked_operands::trace(&Specialization::default(), bm, bn, bk, false, true).unwrap();
    let text = ptx(&f, 80, num_warps);
    // `b` read without `.trans`: only plain `ldmatrix`.
    assert!(text.contains("cp.async.cg.shared.global"), "{text}");
    assert!(!text.contains(".trans"), "{text}");
    check_masked_operands([bm, bn, bk], [bm as i32, n, k, ld], false, true, num_warps);
}

#[rstest]
fn cp_async_operands_match_the_interpreter_emulated(
    #[values(false, true)] fill: bool,
    // 48: divisible by 16, so that with sizes that are too the copies need no test.
    #[values(40, 41, 48)] ld: i32,
    #[values((32, 24, 32, 20, 17, 27), (16, 32, 16, 16, 32, 16), (32, 16, 32, 0, 16, 9))] sizes: (
        usize,
        usize,
        usize,
        i32,
        i32,
        i32,
    ),
) {
    let (bm, bn, bk, m, n, k) = sizes;
    let f = masked_operands::trace(&Specialization::default(), bm, bn, bk, fill, false).unwrap();
    assert!(ptx(&f, 80, 4).contains("cp.async.cg.shared.global"));
    check_masked_operands([bm, bn, bk], [m, n, k, ld], fill, false, 4);
}

/// Tutorial 03's f16 matmul of random `m × k` and `k × n` matrices (`seed`, `seed + 1`) in
/// `bm × bn × bk` blocks over `grid` on the emulator: its output, the interpreter's, and
/// the emulator's shared-memory counters of the launch.
fn emulated_f16_matmul(
    [m, n, k]: [usize; 3],
    [bm, bn, bk]: [usize; 3],
    grid: [usize; 2],
    num_warps: u32,
    seed: u64,
) -> (
    Array2<f32>,
    Array2<f32>,
    tritium::backend::cuda::SharedMemoryStats,
) {
    use half::f16;
    let a = Array2::from_shape_vec((m, k), random_f32(m * k, seed))
        .unwrap()
        .mapv(f16::from_f32);
    let b = Array2::from_shape_vec((k, n), random_f32(k * n, seed + 1))
        .unwrap()
        .mapv(f16::from_f32);
    // Ampere's operand path (`ldmatrix`), also where the emulator runs Hopper's code.
    let opts = tritium::LaunchOptions {
        num_warps,
        emulated_sm: Some(80),
        ..Default::default()
    };
    let run = |d: &Device| {
        let mut out = Array2::<f32>::zeros((m, n));
        let (mi, ni, ki) = (m as i32, n as i32, k as i32);
        matmul::matmul::launch_explicit(
            d, grid, &opts, &mut out, &a, &b, mi, ni, ki, ki, 1, ni, 1, ni, 1, bm, bn, bk,
        )
        .unwrap();
        out
    };
    emulated_and_interpreted(run)
}

/// Tutorial 03 at sizes that are multiples of 16 copies its operands with `cp.async` and
/// no test, each warp instruction's 512 bytes four shared-memory wavefronts (the swizzle
/// spreads each row's chunks over every bank), for rows of 16 to 64 halves.
#[rstest]
fn cp_async_stores_have_no_bank_conflicts_emulated(
    // 64 × 256 × 64: two stages of 40 KiB (three would pass the 96 KiB budget).
    #[values((32, 32, 16, 1), (64, 64, 32, 4), (32, 128, 64, 4), (64, 256, 64, 8))] config: (
        usize,
        usize,
        usize,
        u32,
    ),
) {
    let (bm, bn, bk, num_warps) = config;
    let (m, n, k) = (2 * bm, 2 * bn, 2 * bk);
    let (got, want, stats) = emulated_f16_matmul([m, n, k], [bm, bn, bk], [2, 2], num_warps, 27);
    // Both operands of both K steps of the 4 programs.
    let tiles = 4 * 2 * (bm * bk + bk * bn) * 2;
    assert_eq!(stats.cp_async_bytes, tiles as u64, "{config:?}: {stats:?}");
    assert_eq!(
        stats.cp_async_wavefronts * 128,
        stats.cp_async_bytes,
        "{config:?}: {stats:?}"
    );
    assert_close(&got, &want, 1e-4, 1e-4, "f16 matmul");
}

/// The swizzled operand layouts make every 8×8 matrix an `ldmatrix` reads one
/// shared-memory wavefront (no bank conflicts), for rows of 16 to 256 halves (rows of
/// 128 halves and more in 64-half column blocks, 192 as well), `a` read along its rows and
/// `b` transposed, on warp grids and dealt round-robin; the products still match the
/// interpreter.
#[rstest]
fn ldmatrix_reads_have_no_bank_conflicts_emulated(
    #[values(
        (32, 16, 16, 1),
        (64, 64, 32, 4),
        (32, 128, 64, 4),
        (16, 24, 128, 4),
        (32, 256, 32, 4),
        (16, 32, 192, 4)
    )]
    config: (usize, usize, usize, u32),
) {
    let (bm, bn, bk, num_warps) = config;
    let (got, want, stats) =
        emulated_f16_matmul([bm, bn, 2 * bk], [bm, bn, bk], [1, 1], num_warps, 21);
    assert!(stats.ldmatrix_matrices > 0, "{config:?}: no ldmatrix");
    assert_eq!(
        stats.ldmatrix_wavefronts, stats.ldmatrix_matrices,
        "{config:?}: bank conflicts"
    );
    assert_close(&got, &want, 1e-4, 1e-4, "f16 mma");
}

/// Stores `2x` into `out[..N]`, then reads it back reversed (other threads' elements)
/// into `out[N..]`: the store must be ordered before the reload.
#[tritium::kernel]
fn store_then_reload(out: Ptr<f32>, x: Ptr<f32>, #[constexpr] N: usize) {
    let i = arange(0, N);
    store(out + i, load(x + i) * 2.0);
    let back = load(out + (N as i32 - 1) - i);
    store(out + N as i32 + i, back);
}

#[test]
fn barriers_order_only_stores_other_memory_ops_can_see() {
    let s = Specialization::default();
    // Vector add: `out` is only stored to, so no thread waits for another.
    let add = vector_add::add::trace::<f32>(&s, 1024).unwrap();
    assert!(!ptx(&add, 80, 4).contains("bar.sync"));
    let reload = store_then_reload::trace(&s, 1024).unwrap();
    assert!(ptx(&reload, 80, 4).contains("bar.sync"));
    let x = Array1::from(random_f32(1024, 41));
    for d in [Device::cuda_emulator(), Device::interpreter()]
        .into_iter()
        .chain(cuda_device("store_then_reload"))
    {
        let mut out = Array1::<f32>::zeros(2048);
        store_then_reload::launch(&d, 1, &mut out, &x, 1024).unwrap();
        let twice = &x * 2.0;
        assert_eq!(out.slice(ndarray::s![..1024]), twice, "{d:?}");
        let reversed: Vec<f32> = twice.iter().rev().copied().collect();
        assert_eq!(out.slice(ndarray::s![1024..]).to_vec(), reversed, "{d:?}");
    }
}

/// Broadcasts of index expressions in every direction: `[M, 1]` and `[1, N]` to `[M, N]`,
/// `[N]` to `[M, N]`, masks, floats and a scalar argument in the expressions.
#[tritium::kernel]
fn index_broadcasts(
    out: Ptr<i32>,
    out2: Ptr<f32>,
    base: i32,
    #[constexpr] M: usize,
    #[constexpr] N: usize,
) {
    let rm = arange(0, M);
    let rn = arange(0, N);
    let at = rm[(.., None)] * N as i32 + rn[(None, ..)];
    let rows = rm[(.., None)] * 1000 + base;
    let cols = rn[(None, ..)] * 3 - 1;
    let wide = broadcast_to(rn * 2 + base, [M, N]);
    let mask = (rm[(.., None)] < base) & (rn[(None, ..)] >= 2);
    store(out + at, where_(mask, rows + cols, wide));
    let halves = rn[(None, ..)].to(DType::F32) * 0.5 + rm[(.., None)].to(DType::F32);
    store(out2 + at, halves);
}

#[rstest]
fn index_broadcasts_are_computed_in_place(
    #[values((4, 64), (64, 4), (1, 32), (32, 1))] shape: (usize, usize),
    #[values(1, 4)] num_warps: u32,
) {
    let (m, n) = shape;
    let opts = tritium::LaunchOptions {
        num_warps,
        ..Default::default()
    };
    let run = |d: &Device| {
        let (mut out, mut out2) = (Array2::<i32>::zeros((m, n)), Array2::<f32>::zeros((m, n)));
        index_broadcasts::launch_with(d, 1, &opts, &mut out, &mut out2, 2, m, n).unwrap();
        (out, out2)
    };
    assert_eq!(
        run(&Device::cuda_emulator()),
        run(&Device::interpreter()),
        "{shape:?}"
    );
    // No value crosses threads: no shared memory, no barrier.
    let f = index_broadcasts::trace(&Specialization::default(), m, n).unwrap();
    let text = ptx(&f, 80, num_warps);
    for absent in ["bar.sync", ".shared"] {
        assert!(!text.contains(absent), "`{absent}` in\n{text}");
    }
}

#[test]
fn softmax_reduces_with_warp_shuffles() {
    let f = softmax::softmax::trace::<f32>(&Specialization::default(), 1024).unwrap();
    let text = ptx(&f, 90, 4);
    assert!(text.contains("shfl.sync.bfly"), "{text}");
    assert!(text.contains("bar.sync"), "{text}");
}

/// `maximum`, `minimum` and a row max of f32 and f64 lanes.
#[tritium::kernel]
fn extremes(out: Ptr<f32>, wide: Ptr<f64>, x: Ptr<f32>, y: Ptr<f32>, #[constexpr] N: usize) {
    let i = arange(0, N);
    let (a, b) = (load(x + i), load(y + i));
    store(out + i, maximum(a, b) + minimum(a, b));
    store(out + N as i32, max(a, 0));
    let (c, d) = (a.to(DType::F64), b.to(DType::F64));
    store(wide + i, maximum(c, d) - minimum(c, d));
}

/// Float max/min are PTX's own `max`/`min` (IEEE maximumNumber and minimumNumber with
/// -0 < +0, as the PTX ISA defines them, and as Tritium's semantics are): one instruction
/// each, none of the NaN and zero fix-ups LLVM's `maxnum` needs (the emulator runs those).
#[test]
fn float_max_min_are_ptx_max_min() {
    let f = extremes::trace(&Specialization::default(), 128).unwrap();
    let text = ptx(&f, 80, 4);
    for want in ["max.f32", "min.f32", "max.f64", "min.f64"] {
        assert!(text.contains(want), "no `{want}` in\n{text}");
    }
    assert!(!text.contains("setp.nan"), "{text}");
    let x = random_f32(128, 61);
    let mut y = random_f32(128, 62);
    y[..8].copy_from_slice(&[
        f32::NAN,
        -0.0,
        0.0,
        f32::NAN,
        1.0,
        -0.0,
        f32::INFINITY,
        -1.0,
    ]);
    let mut xs = x.clone();
    xs[..8].copy_from_slice(&[
        1.0,
        0.0,
        -0.0,
        f32::NAN,
        f32::NAN,
        -0.0,
        2.0,
        f32::NEG_INFINITY,
    ]);
    let run = |d: &Device| {
        let mut out = vec![0f32; 129];
        let mut wide = vec![0f64; 128];
        extremes::launch(d, 1, &mut out, &mut wide, &xs, &y, 128).unwrap();
        (out, wide)
    };
    let (want, want_wide) = run(&Device::interpreter());
    for device in [Device::cuda_emulator()]
        .into_iter()
        .chain(cuda_device("float max/min"))
    {
        let (got, wide) = run(&device);
        for (g, w) in got.iter().zip(&want) {
            assert!(
                g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
                "{g} vs {w} on {device:?}"
            );
        }
        for (g, w) in wide.iter().zip(&want_wide) {
            assert!(
                g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
                "{g} vs {w} on {device:?}"
            );
        }
    }
}

#[test]
fn oversized_tiles_are_an_error_not_a_panic() {
    let f = vector_add::add::trace::<f32>(&Specialization::default(), 1 << 16).unwrap();
    let e = compile_ptx(
        &f,
        "k",
        &CudaCompileOptions {
            sm: 80,
            num_warps: 1,
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(e.to_string().contains("raise num_warps"), "{e}");
}

/// A default launch's PTX is generated from the sites its proof cannot cover, listed: the
/// proof is derived once per compile (not again by the code generator), and the entry is
/// the one a launch checking those sites finds.
#[test]
fn a_default_compile_lists_its_unprovable_sites_for_the_generator() {
    use tritium::backend::cuda::compile_cached;
    use tritium::backend::pipeline::{stats, TargetKind};
    use tritium::backend::{SiteBits, SiteChecks};
    let dir = std::env::temp_dir().join(format!("tritium-cuda-listed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    use tritium::prelude::*;
    /// A histogram: its atomic is a scatter no launch proves (site 1).
    #[kernel]
    fn listed_scatter(counts: Ptr<i32>, bins: Ptr<i32>, n: i32, #[constexpr] BLOCK: usize) {
        let offs = arange(0, BLOCK);
        let mask = offs < n;
        atomic_add(
            counts + load(bins + offs, mask = mask, other = 0),
            1,
            mask = mask,
        );
    }
    let s = Specialization::default();
    let f = || listed_scatter::trace(&s, 256).unwrap();
    let unprovable = tritium::dsl::ir::bounds_proof(&f()).unprovable();
    assert_eq!(unprovable, [1]);
    let options = tritium::LaunchOptions {
        cache_dir: Some(dir.clone()),
        ..Default::default()
    };
    let copts = |sites| CudaCompileOptions {
        sm: 80,
        sites,
        ..Default::default()
    };
    let count = || stats().kernel_on(TargetKind::Nvptx, "listed_scatter");
    let default = compile_cached(f(), &copts(SiteChecks::Unprovable), &options).unwrap();
    let before = count();
    let listed = SiteChecks::Listed(SiteBits::of(&unprovable).unwrap());
    let same = compile_cached(f(), &copts(listed), &options).unwrap();
    let after = count();
    assert_eq!(same.entry, default.entry, "another cache key");
    assert_eq!(same.text, default.text);
    assert_eq!(after.codegen, before.codegen, "LLVM ran again");
    assert!(
        after.disk_hits > before.disk_hits,
        "not the default's cache entry"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn ptx_is_dumped_and_cached_on_disk() {
    use tritium::backend::cuda::compile_cached;
    let dir = std::env::temp_dir().join(format!("tritium-cuda-cache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let (cache, dump) = (dir.join("cache"), dir.join("dump"));
    let s = Specialization::default();
    let f = || softmax::softmax::trace::<f32>(&s, 256).unwrap();
    let copts = CudaCompileOptions {
        sm: 90,
        num_warps: 2,
        ..Default::default()
    };
    let dumping = tritium::LaunchOptions {
        cache_dir: Some(cache.clone()),
        dump_dir: Some(dump.clone()),
        ..Default::default()
    };
    let first = compile_cached(f(), &copts, &dumping).unwrap();
    for ext in ["tir", "ll", "opt.ll", "ptx"] {
        let path = dump.join(format!("{}.{ext}", first.entry));
        assert!(path.exists(), "no {}", path.display());
    }
    let ptx_dump = std::fs::read_to_string(dump.join(format!("{}.ptx", first.entry))).unwrap();
    assert_eq!(ptx_dump, first.text);
    let entries = std::fs::read_dir(&cache).unwrap().count();
    assert!(entries > 0, "the PTX was not cached");
    // From the cache: the same PTX; a damaged entry is recompiled, never trusted.
    let cached = tritium::LaunchOptions {
        cache_dir: Some(cache.clone()),
        ..Default::default()
    };
    assert_eq!(compile_cached(f(), &copts, &cached).unwrap(), first);
    for e in walk(&cache) {
        let mut bytes = std::fs::read(&e).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0xff;
        std::fs::write(&e, bytes).unwrap();
    }
    assert_eq!(compile_cached(f(), &copts, &cached).unwrap(), first);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Checked and unchecked PTX are different cache entries, with different entry names, in
/// memory and on disk.
#[test]
fn checked_mode_is_part_of_the_ptx_cache_key() {
    use tritium::backend::cuda::compile_cached;
    let dir = std::env::temp_dir().join(format!("tritium-cuda-checked-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let s = Specialization::default();
    let f = || vector_add::add::trace::<f32>(&s, 1024).unwrap();
    let launch = tritium::LaunchOptions {
        cache_dir: Some(dir.clone()),
        ..Default::default()
    };
    let copts = |bounds_check| CudaCompileOptions {
        sm: 80,
        num_warps: 4,
        bounds_check,
        ..Default::default()
    };
    let plain = compile_cached(f(), &copts(false), &launch).unwrap();
    let checked = compile_cached(f(), &copts(true), &launch).unwrap();
    assert_ne!(plain.entry, checked.entry);
    let extra = format!("{}_param_4", checked.entry);
    assert!(checked.text.contains(&extra), "{}", checked.text);
    // From the disk cache, each gets its own PTX back.
    assert_eq!(compile_cached(f(), &copts(true), &launch).unwrap(), checked);
    assert_eq!(compile_cached(f(), &copts(false), &launch).unwrap(), plain);
    let _ = std::fs::remove_dir_all(&dir);
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn cuda_without_a_gpu_is_an_error() {
    let Some(reason) = unavailable_reason() else {
        eprintln!("skipped cuda_without_a_gpu_is_an_error: a CUDA device is present");
        return;
    };
    let e = Device::cuda(0).unwrap_err();
    assert!(e.to_string().contains(&reason), "{e}");
    assert!(e.to_string().contains("CUDA device 0"), "{e}");
}

#[rstest]
fn vector_add_on_cuda(#[values(1, 7, 1024, 1000003)] n: usize) {
    let Some(gpu) = cuda_device("vector_add_on_cuda") else {
        return;
    };
    let x = Array1::from(random_f32(n, 1));
    let y = Array1::from(random_f32(n, 2));
    let got = vector_add::vector_add(&gpu, x.view(), y.view()).unwrap();
    assert_eq!(got, &x + &y);
}

#[test]
fn device_tensors_round_trip_and_launch() {
    let Some(gpu) = cuda_device("device_tensors_round_trip_and_launch") else {
        return;
    };
    let n = 5000;
    let x = Array1::from(random_f32(n, 3));
    let y = Array1::from(random_f32(n, 4));
    let (dx, dy) = (
        CudaTensor::from_ndarray(&gpu, &x).unwrap(),
        CudaTensor::from_ndarray(&gpu, &y).unwrap(),
    );
    let mut out = CudaTensor::<f32>::zeros(&gpu, &[n]).unwrap();
    vector_add::add::launch(&gpu, n.div_ceil(1024), &mut out, &dx, &dy, n as i32, 1024).unwrap();
    let got = out.to_ndarray().unwrap();
    assert_eq!(got.into_dimensionality().unwrap(), &x + &y);
    // Device-to-device copies, ordered after the launch that wrote the source.
    let mut copy = CudaTensor::<f32>::zeros(&gpu, &[n]).unwrap();
    vector_add::add::launch(&gpu, n.div_ceil(1024), &mut out, &dx, &dx, n as i32, 1024).unwrap();
    copy.copy_from(&out).unwrap();
    assert_eq!(
        copy.to_ndarray().unwrap().into_dimensionality().unwrap(),
        &x * 2.0
    );
    let short = CudaTensor::<f32>::zeros(&gpu, &[n - 1]).unwrap();
    let e = copy.copy_from(&short).unwrap_err();
    assert!(e.to_string().contains("copy_from"), "{e}");
    // A device tensor passed to the CPU is an error.
    let mut host = Array1::<f32>::zeros(n);
    let e = vector_add::add::launch(&Device::cpu(), 1, &mut host, &dx, &dy, n as i32, 1024)
        .unwrap_err();
    assert!(e.to_string().contains("CUDA device"), "{e}");
}

/// One device tensor for kernels and AOT operators: a kernel's output feeds a `.cu`
/// operator and the operator's output feeds a kernel, with no host copies between.
#[test]
fn kernels_and_aot_operators_share_device_tensors() {
    let Some(gpu) = cuda_device("kernels_and_aot_operators_share_device_tensors") else {
        return;
    };
    if !tritium::aot::nvcc_available() {
        eprintln!("skipped kernels_and_aot_operators_share_device_tensors: needs nvcc");
        return;
    }
    let source = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("aot/tests/data/add_mul_div.cu")
        .display()
        .to_string();
    let op = tritium::aot::AotOp::builder(format!("{source}:CustomAddMulDiv"))
        .infer_shapes(|s| vec![s[0].clone(); 3])
        .out_dtypes([DType::F32; 3])
        .checked(true)
        .build()
        .unwrap();
    let n = 3000;
    let (x, y) = (
        Array1::from(random_f32(n, 5)),
        Array1::from(random_f32(n, 6)),
    );
    let (dx, dy) = (
        CudaTensor::from_ndarray(&gpu, &x).unwrap(),
        CudaTensor::from_ndarray(&gpu, &y).unwrap(),
    );
    let mut sum = CudaTensor::<f32>::zeros(&gpu, &[n]).unwrap();
    vector_add::add::launch(&gpu, n.div_ceil(1024), &mut sum, &dx, &dy, n as i32, 1024).unwrap();
    // (x + y) + y, (x + y) · y, (x + y) / y, queued after the launch that wrote `sum`.
    let outs = op.call_device(&[sum.untyped(), dy.untyped()]).unwrap();
    let product = outs
        .into_iter()
        .nth(1)
        .unwrap()
        .into_typed::<f32>()
        .unwrap();
    let mut again = CudaTensor::<f32>::zeros(&gpu, &[n]).unwrap();
    vector_add::add::launch(
        &gpu,
        n.div_ceil(1024),
        &mut again,
        &product,
        &dx,
        n as i32,
        1024,
    )
    .unwrap();
    let want = (&x + &y) * &y + &x;
    let got = again.to_ndarray().unwrap().into_dimensionality().unwrap();
    assert_close(&got, &want, 1e-5, 1e-6, "kernel, AOT operator, kernel");
    let e = CudaTensor::from_ndarray(&gpu, &x)
        .unwrap()
        .into_untyped()
        .into_typed::<i32>()
        .unwrap_err();
    assert!(
        e.to_string().contains("f32 device tensor taken as i32"),
        "{e}"
    );
}

#[test]
fn checked_mode_on_device_tensors() {
    let Some(gpu) = cuda_device("checked_mode_on_device_tensors") else {
        return;
    };
    let x = CudaTensor::from_ndarray(&gpu, &Array1::<f32>::ones(16)).unwrap();
    let mut out = CudaTensor::<f32>::zeros(&gpu, &[8]).unwrap();
    let opts = tritium::LaunchOptions {
        bounds_check: Some(true),
        ..Default::default()
    };
    // Told n = 16, the kernel would write 8 elements past `out`.
    let e = vector_add::add::launch_with(&gpu, 1, &opts, &mut out, &x, &x, 16, 16).unwrap_err();
    let m = e.to_string();
    assert!(
        m.contains("out-of-bounds store at address")
            && m.contains("by program (0, 0, 0)")
            && m.contains("vector_add.rs:"),
        "{m}"
    );
    // The in-bounds lanes were written.
    let got = out.to_ndarray().unwrap();
    assert!(got.iter().all(|v| *v == 2.0), "{got}");
}

#[rstest]
fn softmax_on_cuda(#[values((1, 1), (17, 33), (256, 781))] shape: (usize, usize)) {
    let Some(gpu) = cuda_device("softmax_on_cuda") else {
        return;
    };
    let x = Array2::from_shape_vec(shape, random_f32(shape.0 * shape.1, 5)).unwrap() * 4.0;
    let got = softmax::softmax_rows(&gpu, x.view()).unwrap();
    let want = softmax::softmax_rows(&Device::interpreter(), x.view()).unwrap();
    assert_close(&got, &want, 1e-5, 1e-6, "cuda vs interpreter");
}

#[rstest]
fn matmul_on_cuda(#[values((1, 1, 1), (65, 33, 70), (128, 256, 64))] mkn: (usize, usize, usize)) {
    let Some(gpu) = cuda_device("matmul_on_cuda") else {
        return;
    };
    let (m, k, n) = mkn;
    let a = Array2::from_shape_vec((m, k), random_f32(m * k, 7)).unwrap();
    let b = Array2::from_shape_vec((k, n), random_f32(k * n, 8)).unwrap();
    let blocks = matmul::MatmulBlocks::default();
    let got: Array2<f32> = matmul::matmul_2d(&gpu, a.view(), b.view(), blocks).unwrap();
    let want: Array2<f32> =
        matmul::matmul_2d(&Device::interpreter(), a.view(), b.view(), blocks).unwrap();
    assert_close(&got, &want, 1e-4, 1e-4, "cuda vs interpreter");
}

/// `out = x + y` queued on `stream` with device tensors (returns once queued).
fn add_on(
    stream: &Stream,
    out: &mut CudaTensor<f32>,
    x: &CudaTensor<f32>,
    y: &CudaTensor<f32>,
) -> tritium::Result<()> {
    let n = out.numel();
    let opts = tritium::LaunchOptions {
        stream: Some(stream.clone()),
        ..Default::default()
    };
    let gpu = stream.device();
    vector_add::add::launch_with(&gpu, n.div_ceil(1024), &opts, out, x, y, n as i32, 1024)
}

#[test]
fn streams_belong_to_cuda_devices() {
    for device in [
        Device::cpu(),
        Device::interpreter(),
        Device::cuda_emulator(),
    ] {
        let e = Stream::new(&device).unwrap_err();
        assert!(e.to_string().contains(device.name()), "{e}");
    }
}

#[test]
fn launches_on_two_streams_are_ordered_by_their_tensors() {
    let Some(gpu) = cuda_device("launches_on_two_streams_are_ordered_by_their_tensors") else {
        return;
    };
    // Big enough that an unordered second launch would read `a` before it is written.
    let n = 1 << 24;
    let x = Array1::from(random_f32(n, 11));
    let (s1, s2) = (Stream::new(&gpu).unwrap(), Stream::new(&gpu).unwrap());
    let dx = CudaTensor::from_ndarray(&gpu, &x).unwrap();
    let mut a = CudaTensor::<f32>::zeros(&gpu, &[n]).unwrap();
    let mut b = CudaTensor::<f32>::zeros(&gpu, &[n]).unwrap();
    for _ in 0..3 {
        add_on(&s1, &mut a, &dx, &dx).unwrap(); // a = 2x on s1
        add_on(&s2, &mut b, &a, &a).unwrap(); // b = 4x on s2, after a's write
        add_on(&s1, &mut a, &b, &dx).unwrap(); // a = 5x on s1, after s2 read a and wrote b
    }
    let want = &x * 5.0;
    assert_eq!(a.to_ndarray().unwrap().into_dimensionality().unwrap(), want);
    assert_eq!(
        b.to_ndarray().unwrap().into_dimensionality().unwrap(),
        &x * 4.0
    );
    s1.synchronize().unwrap();
    s2.synchronize().unwrap();
}

#[test]
fn a_tensor_dropped_during_a_launch_is_freed_after_it() {
    let Some(gpu) = cuda_device("a_tensor_dropped_during_a_launch_is_freed_after_it") else {
        return;
    };
    let n = 1 << 24;
    let x = Array1::from(random_f32(n, 12));
    let stream = Stream::new(&gpu).unwrap();
    let mut out = CudaTensor::<f32>::zeros(&gpu, &[n]).unwrap();
    {
        let dx = CudaTensor::from_ndarray(&gpu, &x).unwrap();
        add_on(&stream, &mut out, &dx, &dx).unwrap();
        // `dx` is dropped here, while the kernel may still read it; a new tensor of the
        // same size (likely the same memory) is written before the kernel ends otherwise.
    }
    let junk = CudaTensor::from_ndarray(&gpu, &Array1::<f32>::from_elem(n, 7.0)).unwrap();
    assert_eq!(
        out.to_ndarray().unwrap().into_dimensionality().unwrap(),
        &x * 2.0
    );
    drop(junk);
}

#[test]
fn host_arrays_on_a_stream_are_copied_back_before_the_launch_returns() {
    let Some(gpu) =
        cuda_device("host_arrays_on_a_stream_are_copied_back_before_the_launch_returns")
    else {
        return;
    };
    let n = 100_003;
    let x = Array1::from(random_f32(n, 13));
    let mut got = Array1::<f32>::zeros(n);
    let opts = tritium::LaunchOptions {
        stream: Some(Stream::new(&gpu).unwrap()),
        ..Default::default()
    };
    vector_add::add::launch_with(
        &gpu,
        n.div_ceil(1024),
        &opts,
        &mut got,
        &x,
        &x,
        n as i32,
        1024,
    )
    .unwrap();
    assert_eq!(got, &x * 2.0);
    // A stream given to a launch on another device is an error.
    let e =
        vector_add::add::launch_with(&Device::cpu(), 1, &opts, &mut got, &x, &x, n as i32, 1024)
            .unwrap_err();
    assert!(
        e.to_string().contains("streams order CUDA launches only"),
        "{e}"
    );
}

// The CUDA lowering executed by the emulator (host threads), against the interpreter.

#[rstest]
fn vector_add_emulated(#[values(1, 7, 1024, 5000)] n: usize, #[values(1, 4)] num_warps: u32) {
    let emu = Device::cuda_emulator();
    let x = Array1::from(random_f32(n, 1));
    let y = Array1::from(random_f32(n, 2));
    let mut got = Array1::<f32>::zeros(n);
    let opts = tritium::LaunchOptions {
        num_warps,
        ..Default::default()
    };
    vector_add::add::launch_with(
        &emu,
        n.div_ceil(1024),
        &opts,
        &mut got,
        &x,
        &y,
        n as i32,
        1024,
    )
    .unwrap();
    assert_eq!(got, &x + &y);
}

#[rstest]
fn softmax_emulated(#[values((1, 1), (17, 33), (5, 781))] shape: (usize, usize)) {
    let x = Array2::from_shape_vec(shape, random_f32(shape.0 * shape.1, 5)).unwrap() * 4.0;
    let got = softmax::softmax_rows(&Device::cuda_emulator(), x.view()).unwrap();
    let want = softmax::softmax_rows(&Device::interpreter(), x.view()).unwrap();
    assert_close(&got, &want, 1e-5, 1e-6, "emulated CUDA vs interpreter");
}

#[rstest]
fn matmul_emulated(#[values((1, 1, 1), (65, 33, 70))] mkn: (usize, usize, usize)) {
    let (m, k, n) = mkn;
    let a = Array2::from_shape_vec((m, k), random_f32(m * k, 7)).unwrap();
    let b = Array2::from_shape_vec((k, n), random_f32(k * n, 8)).unwrap();
    let blocks = matmul::MatmulBlocks {
        m: 32,
        n: 32,
        k: 16,
    };
    let got: Array2<f32> =
        matmul::matmul_2d(&Device::cuda_emulator(), a.view(), b.view(), blocks).unwrap();
    let want: Array2<f32> =
        matmul::matmul_2d(&Device::interpreter(), a.view(), b.view(), blocks).unwrap();
    assert_close(&got, &want, 1e-5, 1e-5, "emulated CUDA vs interpreter");
}

/// Tensor-core accumulators in every position: a loaded (non-splat) initial value, a
/// loop that also reads the carried accumulator and may run zero times, a `dot` taking a
/// `dot`'s result as its accumulator and (cast to f16) as an operand, and an f32 `dot` of
/// `dot` results (the FMA fallback).
#[tritium::kernel]
fn mma_accumulators(
    out: Ptr<f32>,
    out2: Ptr<f32>,
    a: Ptr<half::f16>,
    b: Ptr<half::f16>,
    bias: Ptr<f32>,
    steps: i32,
    #[constexpr] S: usize,
) {
    let r = arange(0, S);
    let at = r[(.., None)] * S as i32 + r[(None, ..)];
    let ta = load(a + at);
    let tb = load(b + at);
    let mut acc = load(bias + at);
    let mut peak = zeros([S, S], DType::F32);
    for _ in range(0, steps) {
        peak = maximum(peak, acc);
        acc = dot(ta, tb, acc);
    }
    store(out + at, acc + peak);
    let d1 = dot(ta, tb, zeros([S, S], DType::F32));
    let d2 = dot(d1.to(DType::F16), tb, d1);
    let d3 = dot(d1, d2, zeros([S, S], DType::F32));
    store(out2 + at, d2 + d3);
}

#[rstest]
fn mma_accumulators_in_every_position_emulated(
    #[values(0, 1, 3)] steps: i32,
    #[values(1, 4)] num_warps: u32,
    // 16: 1 × 2 tiles, dealt round-robin over 4 warps; 32: a 2 × 2 warp grid.
    #[values(16, 32)] s: usize,
) {
    use half::f16;
    let small = |seed: u64| Array2::from_shape_vec((s, s), random_f32(s * s, seed)).unwrap() * 0.25;
    let a = small(31).mapv(f16::from_f32);
    let b = small(32).mapv(f16::from_f32);
    let bias = small(33);
    let opts = tritium::LaunchOptions {
        num_warps,
        ..Default::default()
    };
    let run = |d: &Device| {
        let (mut out, mut out2) = (Array2::<f32>::zeros((s, s)), Array2::<f32>::zeros((s, s)));
        mma_accumulators::launch_with(d, 1, &opts, &mut out, &mut out2, &a, &b, &bias, steps, s)
            .unwrap();
        (out, out2)
    };
    let (want, want2) = run(&Device::interpreter());
    let (got, got2) = run(&Device::cuda_emulator());
    assert_close(&got, &want, 1e-4, 1e-4, "loop-carried accumulator");
    assert_close(&got2, &want2, 1e-3, 1e-3, "dot of dots");
}

#[rstest]
fn f16_softmax_and_matmul_emulated(#[values((3, 50), (16, 130))] shape: (usize, usize)) {
    use half::f16;
    let emu = Device::cuda_emulator();
    let x = (Array2::from_shape_vec(shape, random_f32(shape.0 * shape.1, 9)).unwrap() * 4.0)
        .mapv(f16::from_f32);
    let got = softmax::softmax_rows(&emu, x.view()).unwrap();
    let want = softmax::softmax_rows(&Device::interpreter(), x.view()).unwrap();
    assert_close(
        &got.mapv(f16::to_f32),
        &want.mapv(f16::to_f32),
        2e-3,
        1e-3,
        "softmax f16",
    );
    let (m, k) = shape;
    let a = x.clone();
    let b = Array2::from_shape_vec((k, m), random_f32(k * m, 10))
        .unwrap()
        .mapv(f16::from_f32);
    let blocks = matmul::MatmulBlocks {
        m: 32,
        n: 16,
        k: 32,
    };
    let got: Array2<f32> = matmul::matmul_2d(&emu, a.view(), b.view(), blocks).unwrap();
    let want: Array2<f32> =
        matmul::matmul_2d(&Device::interpreter(), a.view(), b.view(), blocks).unwrap();
    assert_close(&got, &want, 1e-4, 1e-4, "matmul f16 inputs");
}

#[rstest]
fn bf16_matmul_on_tensor_cores_emulated(
    #[values((16, 8, 16), (48, 40, 64), (33, 17, 20))] mnk: (usize, usize, usize),
    #[values(1, 4)] num_warps: u32,
) {
    use half::bf16;
    let (m, n, k) = mnk;
    let a = Array2::from_shape_vec((m, k), random_f32(m * k, 11))
        .unwrap()
        .mapv(bf16::from_f32);
    let b = Array2::from_shape_vec((k, n), random_f32(k * n, 12))
        .unwrap()
        .mapv(bf16::from_f32);
    let (bm, bn, bk) = (16, 8, 16);
    let mut got = Array2::<f32>::zeros((m, n));
    let mut want = Array2::<f32>::zeros((m, n));
    let opts = tritium::LaunchOptions {
        num_warps,
        ..Default::default()
    };
    for (d, out) in [
        (Device::cuda_emulator(), &mut got),
        (Device::interpreter(), &mut want),
    ] {
        matmul::matmul::launch_explicit(
            &d,
            [m.div_ceil(bm), n.div_ceil(bn)],
            &opts,
            out,
            &a,
            &b,
            m as i32,
            n as i32,
            k as i32,
            k as i32,
            1,
            n as i32,
            1,
            n as i32,
            1,
            bm,
            bn,
            bk,
        )
        .unwrap();
    }
    assert_close(&got, &want, 1e-4, 1e-4, "bf16 mma vs interpreter");
}

// Custom ops on CUDA: NVPTX bitcode is linked and inlined; host bitcode is refused.

mod custom {
    use super::ptx;
    use tritium::backend::cuda::{compile_ptx, CudaCompileOptions};
    use tritium::dsl::custom::{CustomArgs, CustomImpl};
    use tritium::dsl::ir::Bitcode;
    use tritium::dsl::trace::Specialization;
    use tritium::prelude::*;
    use tritium_kernels::custom_bitcode::{ADD_BC, ADD_NVPTX_BC};

    #[register_custom_op(core = Vector, pipe = PipeV, mode = Simt)]
    struct NvptxAdd;
    impl NvptxAdd {
        fn init(_: &CustomArgs) -> Result<CustomImpl, String> {
            Ok(CustomImpl::new("custom_add_simt_float32")
                .bitcode(Bitcode::from_bytes("add.nvptx.bc", ADD_NVPTX_BC)))
        }
    }

    #[register_custom_op(core = Vector, pipe = PipeV, mode = Simd)]
    struct NvptxAddSimd;
    impl NvptxAddSimd {
        fn init(_: &CustomArgs) -> Result<CustomImpl, String> {
            Ok(CustomImpl::new("custom_add_float32")
                .bitcode(Bitcode::from_bytes("add.nvptx.bc", ADD_NVPTX_BC)))
        }
    }

    #[register_custom_op(core = Vector, pipe = PipeV, mode = Simt)]
    struct HostAdd;
    impl HostAdd {
        fn init(_: &CustomArgs) -> Result<CustomImpl, String> {
            Ok(CustomImpl::new("custom_add_simt_float32")
                .bitcode(Bitcode::from_bytes("add.bc", ADD_BC)))
        }
    }

    #[kernel]
    fn add_with(
        out: Ptr<f32>,
        a: Ptr<f32>,
        b: Ptr<f32>,
        #[constexpr] N: usize,
        #[constexpr] op: u32,
    ) {
        let i = arange(0, N);
        let x = load(a + i);
        let y = load(b + i);
        let buf = zeros([N], DType::F32);
        let r = if op == 0 {
            custom("nvptx_add", x, y, out = buf)
        } else if op == 1 {
            custom("nvptx_add_simd", x, y, out = buf)
        } else {
            custom("host_add", x, y, out = buf)
        };
        store(out + i, r);
    }

    #[kernel]
    fn gather(out: Ptr<f32>, src: Ptr<f32>, idx: Ptr<i64>, #[constexpr] N: usize) {
        let i = arange(0, N);
        let ix = load(idx + i);
        let buf = full([N], -1.0, DType::F32);
        let g = custom("__builtin_gather_load", src, ix, 50, out = buf);
        store(out + i, g);
    }

    #[rstest::rstest]
    fn nvptx_bitcode_is_linked_and_inlined(#[values(80, 90)] sm: u32) {
        let s = Specialization::default();
        let simt = add_with::trace(&s, 256, 0).unwrap();
        let text = ptx(&simt, sm, 4);
        assert!(text.contains("add.rn.f32"), "{text}");
        assert!(
            !text.contains("call.uni"),
            "the Simt entry is inlined:\n{text}"
        );
        let simd = add_with::trace(&s, 256, 1).unwrap();
        let text = ptx(&simd, sm, 4);
        assert!(text.contains("bar.sync"), "{text}");
    }

    /// A cooperative Simd entry's thread helpers become `%tid.x`, `%ntid.x` and
    /// `bar.sync`, inlined into the kernel.
    #[rstest::rstest]
    fn cooperative_simd_is_called_by_every_thread(#[values(80, 90)] sm: u32) {
        let s = Specialization::default();
        let f = tritium_kernels::custom_add::custom_add_reversed::trace::<f32>(&s, 256).unwrap();
        let text = ptx(&f, sm, 4);
        for want in ["%tid.x", "%ntid.x", "bar.sync"] {
            assert!(text.contains(want), "no `{want}` in\n{text}");
        }
        assert!(!text.contains("call.uni"), "the entry is inlined:\n{text}");
    }

    #[rstest::rstest]
    fn builtins_compile_to_ptx(#[values(80, 90)] sm: u32) {
        let f = gather::trace(&Specialization::default(), 64).unwrap();
        let text = ptx(&f, sm, 4);
        assert!(text.contains(".entry k("), "{text}");
    }

    #[test]
    fn host_bitcode_on_cuda_is_an_error() {
        let f = add_with::trace(&Specialization::default(), 256, 2).unwrap();
        let e = compile_ptx(&f, "k", &CudaCompileOptions::default()).unwrap_err();
        let m = e.to_string();
        assert!(
            m.contains("custom op `host_add`") && m.contains("nvptx64-nvidia-cuda"),
            "{m}"
        );
    }
}

/// Float atomics are `atomicrmw fadd/fmax/fmin`: PTX has `atom`/`red.global.add.f32`, and
/// every device (the emulator included) sums and takes extremes of contended tiles.
mod float_atomics {
    use crate::common::all_devices;
    use ndarray::Array1;
    use tritium::backend::cuda::{compile_ptx, CudaCompileOptions};
    use tritium::dsl::trace::Specialization;
    use tritium::prelude::*;

    /// Element `i` of `x` goes to bucket `i % 4` of `sum`, `hi` and `lo`.
    #[kernel]
    fn buckets(sum: Ptr<f32>, hi: Ptr<f32>, lo: Ptr<f32>, x: Ptr<f32>, #[constexpr] N: usize) {
        let i = arange(0, N);
        let v = load(x + i);
        let b = i % 4;
        atomic_add(sum + b, v);
        atomic_max(hi + b, v);
        atomic_min(lo + b, v);
    }

    #[rstest::rstest]
    fn ptx_uses_float_atomic_add(#[values(80, 90)] sm: u32) {
        let f = buckets::trace(&Specialization::default(), 256).unwrap();
        let text = compile_ptx(
            &f,
            "k",
            &CudaCompileOptions {
                sm,
                num_warps: 4,
                ..Default::default()
            },
        )
        .unwrap()
        .text;
        assert!(
            text.contains("atom.global.add.f32") || text.contains("red.global.add.f32"),
            "{text}"
        );
    }

    #[rstest::rstest]
    fn contended_float_atomics(#[values(4, 300)] n: usize) {
        // Halves and small integers: every order of the sums is exact.
        let x: Array1<f32> = (0..n).map(|i| (i % 37) as f32 * 0.5 - 6.0).collect();
        let mut want = ([0f32; 4], [f32::NEG_INFINITY; 4], [f32::INFINITY; 4]);
        for (i, v) in x.iter().enumerate() {
            want.0[i % 4] += v;
            want.1[i % 4] = want.1[i % 4].max(*v);
            want.2[i % 4] = want.2[i % 4].min(*v);
        }
        for device in all_devices() {
            let mut sum = Array1::<f32>::zeros(4);
            let mut hi = Array1::from_elem(4, f32::NEG_INFINITY);
            let mut lo = Array1::from_elem(4, f32::INFINITY);
            buckets::launch(&device, [1], &mut sum, &mut hi, &mut lo, &x, n).unwrap();
            let got = (sum.to_vec(), hi.to_vec(), lo.to_vec());
            let want = (want.0.to_vec(), want.1.to_vec(), want.2.to_vec());
            assert_eq!(got, want, "{device:?} n={n}");
        }
    }
}

/// `exp`, `exp2`, `log`, `log2`, `sin`, `cos` in f64 and f32: the CUDA lowering computes
/// them itself (no libdevice; `backend/src/llvm/math`, and PTX `ex2.approx.ftz` for f32 `exp2`)
/// and agrees with the CPU's libm and the interpreter within a few ulps; a GPU computes
/// exactly what the emulator does (but f32 `exp2` and `exp`).
mod math_functions {
    use crate::common::devices_for;
    use ndarray::{Array1, Array2};
    use tritium::prelude::*;

    /// Row k of `out` is function k (`exp`, `exp2`, `log`, `log2`, `sin`, `cos`) of `x`.
    #[kernel]
    fn math<T: Element>(out: Ptr<T>, x: Ptr<T>, n: i32, #[constexpr] BLOCK: usize) {
        let offs = program_id(0) * BLOCK as i32 + arange(0, BLOCK);
        let mask = offs < n;
        let v = load(x + offs, mask = mask, other = 1.0);
        store(out + offs, exp(v), mask = mask);
        store(out + n + offs, exp2(v), mask = mask);
        store(out + 2 * n + offs, log(v), mask = mask);
        store(out + 3 * n + offs, log2(v), mask = mask);
        store(out + 4 * n + offs, sin(v), mask = mask);
        store(out + 5 * n + offs, cos(v), mask = mask);
    }

    const NAMES: [&str; 6] = ["exp", "exp2", "log", "log2", "sin", "cos"];

    /// `n` inputs: moderate values of both signs, then magnitudes from 2^-1074 to 2^1023
    /// (overflowing and underflowing `exp`, huge `sin`/`cos` arguments; 0 or inf in f32),
    /// zeros, infinities and NaN.
    fn inputs(n: usize) -> Vec<f64> {
        let specials = [0.0, -0.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 1.0];
        let mut s = 0x2545_F491_4F6C_DD1Du64;
        (0..n)
            .map(|i| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                let u = (s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0;
                match i % 4 {
                    _ if i % 97 == 13 => specials[i / 97 % specials.len()],
                    0 | 1 => u * 40.0,
                    2 => u * 2f64.powi((s % 2098) as i32 - 1074),
                    _ => u * 2f64.powi((s % 60) as i32),
                }
            })
            .collect()
    }

    /// Runs `math::<T>` on every device against the interpreter: equal, both NaN, or within
    /// `rtol` relative (or `atol` absolute, for subnormal results), except where
    /// `documented(row, x)`. Where a GPU is present, the rows of `bit_equal` must match the
    /// emulator's bit for bit.
    fn agrees_across_devices<T>(
        n: usize,
        cast: fn(f64) -> T,
        rtol: f64,
        atol: f64,
        bit_equal: &[usize],
        documented: fn(usize, f64) -> bool,
    ) where
        T: Element + Copy + Default + Into<f64>,
    {
        const BLOCK: usize = 512;
        let x: Array1<T> = inputs(n).into_iter().map(cast).collect();
        let run = |d: &Device| {
            let mut out = Array2::<T>::from_elem((6, n), T::default());
            math::launch(d, n.div_ceil(BLOCK), &mut out, &x, n as i32, BLOCK).unwrap();
            out.mapv(Into::into)
        };
        let want = run(&Device::interpreter());
        let mut emulated = None;
        for d in devices_for(6 * n) {
            let got = run(&d);
            for ((k, i), &g) in got.indexed_iter() {
                let (w, xi): (f64, f64) = (want[[k, i]], x[i].into());
                let ok = g == w
                    || (g.is_nan() && w.is_nan())
                    || (g - w).abs() <= rtol * w.abs() + atol
                    || documented(k, xi);
                assert!(
                    ok,
                    "{d:?}: {}({xi:e}) = {g:e}, the interpreter's {w:e}",
                    NAMES[k]
                );
            }
            match d {
                Device::CudaEmulator => emulated = Some(got),
                Device::Cuda(_) => {
                    let Some(e) = &emulated else { continue };
                    for ((k, i), &g) in got.indexed_iter() {
                        let em = e[[k, i]];
                        let same = g.to_bits() == em.to_bits() || (g.is_nan() && em.is_nan());
                        let xi: f64 = x[i].into();
                        assert!(
                            same || !bit_equal.contains(&k),
                            "{}({xi:e}): GPU {g:e}, emulator {em:e}",
                            NAMES[k]
                        );
                    }
                }
                _ => {}
            }
        }
    }

    #[rstest::rstest]
    fn f64_math_agrees_across_devices(#[values(1, 100, 4097, 100_003)] n: usize) {
        // 4 ulps, a few subnormal steps.
        let all = [0, 1, 2, 3, 4, 5];
        agrees_across_devices::<f64>(n, |v| v, 2f64.powi(-50), 1e-320, &all, |_, _| false);
    }

    /// f32 `exp2` on CUDA is `ex2.approx.ftz`, as Triton's: results below 2^-126 are 0
    /// in the PTX's semantics and the emulator's, where the CPU keeps the subnormal.
    #[test]
    fn f32_exp2_flushes_subnormal_results_on_cuda() {
        #[kernel]
        fn exp2_of(out: Ptr<f32>, x: Ptr<f32>) {
            store(out + arange(0, 4), exp2(load(x + arange(0, 4))));
        }
        let x = Array1::from(vec![-130.0f32, -126.0, 0.0, -149.0]);
        let run = |d: &Device| {
            let mut out = Array1::<f32>::zeros(4);
            exp2_of::launch(d, 1, &mut out, &x).unwrap();
            out
        };
        assert_eq!(
            run(&Device::cpu()).to_vec(),
            [2f32.powi(-130), 2f32.powi(-126), 1.0, 2f32.powi(-149)]
        );
        assert_eq!(
            run(&Device::cuda_emulator()).to_vec(),
            [0.0, 2f32.powi(-126), 1.0, 0.0]
        );
        let f = exp2_of::trace(&Default::default()).unwrap();
        let copts = tritium::backend::cuda::CudaCompileOptions {
            sm: 80,
            ..Default::default()
        };
        let ptx = tritium::backend::cuda::compile_ptx(&f, "k", &copts)
            .unwrap()
            .text;
        assert!(ptx.contains("ex2.approx.ftz.f32"), "{ptx}");
    }

    #[rstest::rstest]
    fn f32_math_agrees_across_devices(#[values(1, 100, 4097, 100_003)] n: usize) {
        // 4 ulps (`ex2.approx` is within 2), subnormal results loosely: the GPU's `exp2`
        // flushes them to zero (`ex2.approx.ftz`, as Triton's). `exp` is contracted by each target's rules.
        agrees_across_devices::<f32>(
            n,
            |v| v as f32,
            2f64.powi(-21),
            2f64.powi(-126),
            &[2, 3, 4, 5],
            |_, _| false,
        );
    }
}

/// `s × s` small integers as f16 (`seed` varies them): every product and every sum of a
/// `dot` over them is exact, so results compare bit for bit.
fn small_int_f16s(s: usize, seed: usize) -> Vec<half::f16> {
    (0..s * s)
        .map(|i| half::f16::from_f32(((i * 7 + seed) % 5) as f32 - 2.0))
        .collect()
}

/// A kernel of a `dot`'s rows writing `[2S]` f32 (`launch` on a device, with options, into
/// the output), on the emulator at `sm` with 4 warps and on the interpreter: the
/// interpreter's output, which the emulator's must equal bit for bit.
fn dot_rows_agree(
    sm: u32,
    s: usize,
    launch: impl Fn(&Device, &tritium::LaunchOptions, &mut [f32]) -> tritium::Result<()>,
) -> Vec<f32> {
    let opts = tritium::LaunchOptions {
        num_warps: 4,
        emulated_sm: Some(sm),
        ..Default::default()
    };
    let run = |d: &Device| {
        let mut out = vec![7f32; 2 * s];
        launch(d, &opts, &mut out).unwrap();
        out
    };
    let (got, want, _) = emulated_and_interpreted(run);
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(g.to_bits() == w.to_bits(), "{i}: {g} for {w} on sm_{sm}");
    }
    want
}

/// The row and column sums of a `dot` result negated, `[S]` each (`out[0..S]`,
/// `out[S..2S]`).
#[tritium::kernel]
fn dot_negated_sums(out: Ptr<f32>, a: Ptr<half::f16>, b: Ptr<half::f16>, #[constexpr] S: usize) {
    let r = arange(0, S);
    let at = r[(.., None)] * S as i32 + r[(None, ..)];
    let acc = -dot(load(a + at), load(b + at));
    store(out + r, sum(acc, 1));
    store(out + S as i32 + r, sum(acc, 0));
}

/// A float sum along the rows of a `dot`'s fragments folds from -0, the sum's identity,
/// which LLVM drops (no zero constant added first, as Triton's tree from the row's first
/// register): rows of -0 sum to -0 and the rest as the interpreter's, bit for bit, on both
/// emulated GPUs.
#[rstest]
fn fragment_row_sums_fold_from_negative_zero(#[values(80, 90)] sm: u32) {
    let s = 64;
    // Rows 0 and 9 of `a` are zero, so rows 0 and 9 of the result are -0 (and so is
    // column 0, `b`'s column 0 being zero).
    let (mut a, mut b) = (small_int_f16s(s, 1), small_int_f16s(s, 3));
    for row in [0, 9] {
        a[row * s..][..s].fill(half::f16::ZERO);
    }
    for k in 0..s {
        b[k * s] = half::f16::ZERO;
    }
    let want = dot_rows_agree(sm, s, |d, opts, out| {
        dot_negated_sums::launch_with(d, 1, opts, out, &a, &b, s)
    });
    for i in [0, 9, s] {
        assert!(
            want[i] == 0.0 && want[i].is_sign_negative(),
            "{i}: {}",
            want[i]
        );
    }
    // No float sum or difference reads a register set to +0, on sm_80 (the mma's zero
    // accumulator is one; sm_90's wgmma writes its accumulator's registers in place).
    if sm != 80 {
        return;
    }
    let f = dot_negated_sums::trace(&Specialization::default(), s).unwrap();
    let text = ptx(&f, sm, 4);
    let zeros: Vec<String> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("mov.f32"))
        .filter_map(|l| l.trim().strip_suffix(", 0f00000000;"))
        .map(|r| r.trim().to_string())
        .collect();
    assert!(!zeros.is_empty(), "{text}");
    for line in text.lines().map(str::trim) {
        if line.starts_with("add.rn.f32") || line.starts_with("sub.rn.f32") {
            let reads = line.split_once(',').map_or("", |(_, r)| r);
            let zero = zeros.iter().find(|z| {
                reads
                    .split([',', ';', ' '])
                    .any(|operand| operand == z.as_str())
            });
            assert!(zero.is_none(), "{line} adds {zero:?} (+0)\n{text}");
        }
    }
}

/// The row max and min of a `dot` result, `[S]` each (`out[0..S]`, `out[S..2S]`).
#[tritium::kernel]
fn dot_row_extremes(out: Ptr<f32>, a: Ptr<half::f16>, b: Ptr<half::f16>, #[constexpr] S: usize) {
    let r = arange(0, S);
    let at = r[(.., None)] * S as i32 + r[(None, ..)];
    let acc = dot(load(a + at), load(b + at));
    store(out + r, max(acc, 1));
    store(out + S as i32 + r, min(acc, 1));
}

/// A float max or min along the rows of a `dot`'s fragments folds from each row's first
/// register (no NaN identity, one instruction fewer per row, as Triton's tree): the same
/// values as the interpreter's on both emulated GPUs, rows holding NaNs (all, or some)
/// included, and no NaN constant left in the PTX.
#[rstest]
fn fragment_row_extremes_fold_from_the_first_register(#[values(80, 90)] sm: u32) {
    let s = 64;
    // Row 3 of `a` holds a NaN (row 3 of the result is all NaN) and column 5 of `b` one
    // (column 5 is NaN in every row: each row holds some NaNs).
    let (mut a, mut b) = (small_int_f16s(s, 1), small_int_f16s(s, 3));
    a[3 * s] = half::f16::NAN;
    b[7 * s + 5] = half::f16::NAN;
    let want = dot_rows_agree(sm, s, |d, opts, out| {
        dot_row_extremes::launch_with(d, 1, opts, out, &a, &b, s)
    });
    assert!(want[3].is_nan() && want[s + 3].is_nan(), "{want:?}");
    let f = dot_row_extremes::trace(&Specialization::default(), s).unwrap();
    let text = ptx(&f, sm, 4);
    assert!(text.contains("max.f32"), "{text}");
    assert!(
        !text.contains("0f7FC00000") && !text.contains("0f7FFFFFFF"),
        "{text}"
    );
}

/// Memory other CUDA code allocated (a cudarc slice on a stream of its own, as candle's
/// tensors are) is a kernel argument where it lies: a launch on another stream waits for
/// the work queued on the slice's stream and that stream then waits for the launch; one
/// on the slice's own stream (`Stream::from_cuda_stream`) queues in order there.
#[test]
fn cudarc_slices_are_kernel_arguments_ordered_by_their_stream() {
    let Some(gpu) = cuda_device("cudarc_slices_are_kernel_arguments_ordered_by_their_stream")
    else {
        return;
    };
    let n = 1 << 20;
    let ctx = cudarc::driver::CudaContext::new(0).unwrap();
    let owner = ctx.new_stream().unwrap();
    let (xs, ys) = (random_f32(n, 3), random_f32(n, 4));
    let x = owner.clone_htod(&xs).unwrap();
    let y = owner.clone_htod(&ys).unwrap();
    let mut out = owner.alloc_zeros::<f32>(n).unwrap();
    // On the device's default stream: ordered after the copies queued on `owner`.
    tritium_kernels::vector_add::add::launch(
        &gpu,
        n.div_ceil(1024),
        &mut out,
        &x,
        &y,
        n as i32,
        1024,
    )
    .unwrap();
    // Queued on `owner` after the launch: reads what it wrote.
    let got = owner.clone_dtoh(&out).unwrap();
    let want: Vec<f32> = xs.iter().zip(&ys).map(|(a, b)| a + b).collect();
    assert_eq!(got, want);
    // On the owner's stream itself, twice in a row (out += x).
    let options = tritium::LaunchOptions {
        stream: Some(Stream::from_cuda_stream(owner.clone()).unwrap()),
        ..Default::default()
    };
    let mut again = owner.alloc_zeros::<f32>(n).unwrap();
    for _ in 0..2 {
        let prev = owner.clone_dtod(&again).unwrap();
        tritium_kernels::vector_add::add::launch_with(
            &gpu,
            n.div_ceil(1024),
            &options,
            &mut again,
            &prev,
            &x,
            n as i32,
            1024,
        )
        .unwrap();
    }
    let got = owner.clone_dtoh(&again).unwrap();
    assert_eq!(got, xs.iter().map(|a| a + a).collect::<Vec<_>>());
    // A slice too short for the launch is an error before anything runs.
    let short = owner.alloc_zeros::<f32>(n / 2).unwrap();
    let e = tritium_kernels::vector_add::add::launch(
        &gpu,
        n.div_ceil(1024),
        &mut out,
        &short,
        &y,
        n as i32,
        1024,
    )
    .unwrap_err();
    assert!(e.to_string().contains("out-of-bounds"), "{e}");
}
