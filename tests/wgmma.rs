//! Hopper's tensor-core path (issue 45): tutorial 03 on `wgmma` (sm_90a), executed by the
//! emulator's Hopper path (`LaunchOptions::emulated_sm`, `TRITIUM_EMULATE_SM=90`) against
//! the interpreter, and its PTX checked offline (no GPU needed).

use crate::common::{
    all_sixteens, assert_close, emulated_and_interpreted, matmul_specialization, random_f32,
};
use half::{bf16, f16};
use ndarray::Array2;
use tritium::backend::cuda::{compile_ptx, shared_memory_stats, CudaCompileOptions};
use tritium::dsl::trace::Specialization;
use tritium::prelude::*;
use tritium::{Device, LaunchOptions};
use tritium_kernels::matmul;

/// One matmul config: sizes, blocks, warps, and whether its accumulator's rows fill
/// whole warpgroups (else it stays on `mma.sync`).
struct Case {
    mnk: [usize; 3],
    blocks: [usize; 3],
    warps: u32,
    wgmma: bool,
}

const CASES: &[Case] = &[
    // Tutorial 03's largest config: `b` rows of 256 halves in four 128-byte column
    // blocks, one m64n256k16 per band and k step; `a` in one block (128-byte swizzle).
    Case {
        mnk: [128, 256, 128],
        blocks: [128, 256, 64],
        warps: 8,
        wgmma: true,
    },
    // Two bands per warpgroup (128 rows, 4 warps); 64-byte rows (k = 32).
    Case {
        mnk: [128, 128, 96],
        blocks: [128, 128, 32],
        warps: 4,
        wgmma: true,
    },
    // The 32-byte swizzle (k = 16), a partial last block in m, n and k.
    Case {
        mnk: [100, 72, 40],
        blocks: [64, 64, 16],
        warps: 4,
        wgmma: true,
    },
    // `b` MN-major in the 64- and 32-byte swizzles (n = 32, 16); a 320-column `b` takes
    // a 256- and a 64-column instruction.
    Case {
        mnk: [64, 64, 64],
        blocks: [64, 32, 32],
        warps: 4,
        wgmma: true,
    },
    Case {
        mnk: [64, 32, 64],
        blocks: [64, 16, 64],
        warps: 4,
        wgmma: true,
    },
    Case {
        mnk: [64, 320, 32],
        blocks: [64, 320, 16],
        warps: 4,
        wgmma: true,
    },
    // 32 rows on 4 warps: no whole warpgroup; `mma.sync` as on Ampere.
    Case {
        mnk: [64, 64, 64],
        blocks: [32, 64, 32],
        warps: 4,
        wgmma: false,
    },
];

/// Tutorial 03 on the emulator's Hopper path against the interpreter, f16 and bf16.
#[test]
fn matmul_on_wgmma_matches_the_interpreter_emulated() {
    for (i, c) in CASES.iter().enumerate() {
        let [m, n, k] = c.mnk;
        let [bm, bn, bk] = c.blocks;
        let a32 = random_f32(m * k, 70 + i as u64);
        let b32 = random_f32(k * n, 90 + i as u64);
        let opts = tritium::LaunchOptions {
            num_warps: c.warps,
            emulated_sm: Some(90),
            ..Default::default()
        };
        let grid = [m.div_ceil(bm), n.div_ceil(bn)];
        let (mi, ni, ki) = (m as i32, n as i32, k as i32);
        let what = format!("{m}×{n}×{k} in {bm}×{bn}×{bk}, {} warps", c.warps);
        macro_rules! check {
            ($t:ty) => {{
                let a = Array2::from_shape_vec((m, k), a32.clone())
                    .unwrap()
                    .mapv(<$t>::from_f32);
                let b = Array2::from_shape_vec((k, n), b32.clone())
                    .unwrap()
                    .mapv(<$t>::from_f32);
                let run = |d: &Device| {
                    let mut out = Array2::<f32>::zeros((m, n));
                    matmul::matmul::launch_explicit(
                        d, grid, &opts, &mut out, &a, &b, mi, ni, ki, ki, 1, ni, 1, ni, 1, bm, bn,
                        bk,
                    )
                    .unwrap();
                    out
                };
                shared_memory_stats();
                let got = run(&Device::cuda_emulator());
                let wgmma = shared_memory_stats().wgmma;
                let want = run(&Device::interpreter());
                let what = format!("{what}, {}", stringify!($t));
                assert_eq!(wgmma > 0, c.wgmma, "{what}: {wgmma} wgmma");
                assert_close(&got, &want, 1e-4, 1e-4, &what);
            }};
        }
        check!(f16);
        check!(bf16);
    }
}

/// The sm_90a PTX of tutorial 03's 128 × 256 × 64 config on 8 warps: `wgmma`
/// (m64n256k16, `b` MN-major), fenced, one group in flight across the K loop and waited
/// for after it, and no `mma.sync`; sm_80's has none. Hopper keeps `num_stages` buffers.
#[test]
fn hopper_ptx_runs_dot_on_wgmma() {
    let f = matmul::matmul::trace::<f16, f32>(&Specialization::default(), 128, 256, 64).unwrap();
    let compiled = |sm| {
        let o = CudaCompileOptions {
            sm,
            num_warps: 8,
            num_stages: 3,
            ..Default::default()
        };
        compile_ptx(&f, "k", &o).unwrap()
    };
    let ptx = |sm| compiled(sm).text;
    // Three stages: three 48 KiB buffers on Hopper, two on Ampere, as Triton keeps them.
    let stage = (128 * 64 + 64 * 256) * 2;
    assert_eq!(compiled(90).shared_bytes, 3 * stage);
    assert_eq!(compiled(80).shared_bytes, 2 * stage);
    let hopper = ptx(90);
    for want in [
        ".target sm_90a",
        "wgmma.fence.sync.aligned;",
        "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16",
        "p, 1, 1, 0, 1;",
        "wgmma.commit_group.sync.aligned;",
        // The K loop keeps one group in flight; the one after it waits for all.
        "wgmma.wait_group.sync.aligned 1;",
        "wgmma.wait_group.sync.aligned 0;",
        "fence.proxy.async.shared::cta;",
    ] {
        assert!(hopper.contains(want), "no `{want}` in\n{hopper}");
    }
    assert!(!hopper.contains("mma.sync"), "{hopper}");
    assert!(!ptx(80).contains("wgmma"));
}

/// Tutorial 03's K loop keeps its `wgmma` group in flight and starts its accumulator
/// undefined (the first `wgmma` ignores it): a loop that runs no iteration (K = 0) still
/// stores zeros, on the emulator's Hopper path as on the interpreter.
#[test]
fn a_k_loop_that_runs_no_iteration_gives_zeros_emulated() {
    let (m, n) = (128, 128);
    let a = Array2::from_elem((m, 16), f16::ONE);
    let b = Array2::from_elem((16, n), f16::ONE);
    let opts = tritium::LaunchOptions {
        num_warps: 4,
        emulated_sm: Some(90),
        ..Default::default()
    };
    for d in [Device::cuda_emulator(), Device::interpreter()] {
        let mut out = Array2::<f32>::from_elem((m, n), 7.0);
        let (mi, ni) = (m as i32, n as i32);
        matmul::matmul::launch_explicit(
            &d,
            [1, 1],
            &opts,
            &mut out,
            &a,
            &b,
            mi,
            ni,
            0,
            0,
            1,
            ni,
            1,
            ni,
            1,
            128,
            128,
            32,
        )
        .unwrap();
        assert!(out.iter().all(|x| *x == 0.0), "{d:?}");
    }
}

/// One fp8 matmul config: sizes, blocks, warps, and whether `b` is stored K-major (by
/// columns, as tutorial 03's fp8 benchmark passes `b.T`) or row-major.
struct Fp8Case {
    mnk: [usize; 3],
    blocks: [usize; 3],
    warps: u32,
    b_by_columns: bool,
}

const FP8_CASES: &[Fp8Case] = &[
    // Tutorial 03's fp8 config on Hopper: 128 × 256 × 128, 8 warps; `b` K-major, so both
    // operands are copied by `cp.async` and pipelined; rows of 128 bytes.
    Fp8Case {
        mnk: [128, 256, 256],
        blocks: [128, 256, 128],
        warps: 8,
        b_by_columns: true,
    },
    // Partial blocks in m, n and k (masked copies), 64-byte rows (k = 64).
    Fp8Case {
        mnk: [100, 72, 160],
        blocks: [64, 64, 64],
        warps: 4,
        b_by_columns: true,
    },
    // A row-major `b`: fp8 `wgmma` reads K-major tiles only, so `b` is loaded and staged
    // transposed; 32-byte rows (k = 32).
    Fp8Case {
        mnk: [128, 64, 96],
        blocks: [128, 64, 32],
        warps: 4,
        b_by_columns: false,
    },
];

/// Triton's fp8 matmul (E4M3 and E5M2, accumulated in f32) on the emulator's Hopper path
/// against the interpreter: `wgmma` m64nNk32 from K-major byte tiles.
#[test]
fn fp8_matmul_on_wgmma_matches_the_interpreter_emulated() {
    for (i, c) in FP8_CASES.iter().enumerate() {
        let [m, n, k] = c.mnk;
        let [bm, bn, bk] = c.blocks;
        let a32 = random_f32(m * k, 170 + i as u64);
        let b32 = random_f32(k * n, 190 + i as u64);
        let opts = tritium::LaunchOptions {
            num_warps: c.warps,
            emulated_sm: Some(90),
            ..Default::default()
        };
        let grid = [m.div_ceil(bm), n.div_ceil(bn)];
        let (mi, ni, ki) = (m as i32, n as i32, k as i32);
        let what = format!(
            "{m}×{n}×{k} in {bm}×{bn}×{bk}, {} warps, b by columns {}",
            c.warps, c.b_by_columns
        );
        macro_rules! check {
            ($t:ty) => {{
                let a = Array2::from_shape_vec((m, k), a32.clone())
                    .unwrap()
                    .mapv(|x| <$t>::from_f32(4.0 * x));
                // `b[kk][j]` at `kk * sbk + j * sbn`.
                let (b, sbk, sbn) = match c.b_by_columns {
                    true => {
                        let bt = Array2::from_shape_vec((n, k), b32.clone()).unwrap();
                        (bt.mapv(|x| <$t>::from_f32(4.0 * x)), 1, ki)
                    }
                    false => {
                        let b = Array2::from_shape_vec((k, n), b32.clone()).unwrap();
                        (b.mapv(|x| <$t>::from_f32(4.0 * x)), ni, 1)
                    }
                };
                let run = |d: &Device| {
                    let mut out = Array2::<f32>::zeros((m, n));
                    matmul::matmul::launch_explicit(
                        d, grid, &opts, &mut out, &a, &b, mi, ni, ki, ki, 1, sbk, sbn, ni, 1, bm,
                        bn, bk,
                    )
                    .unwrap();
                    out
                };
                let (got, want, stats) = emulated_and_interpreted(run);
                let what = format!("{what}, {}", stringify!($t));
                // Every block's K steps on `wgmma` (k 32 each, one per 64-row band and 256
                // columns); `a`, and `b` where stored by
                // columns, copied by `cp.async`, each chunk store one wavefront.
                let blocks = grid[0] * grid[1] * k.div_ceil(bk);
                let per_block = bm / 64 * bk / 32 * bn.div_ceil(256);
                assert_eq!(stats.wgmma as usize, blocks * per_block, "{what}");
                let copied = bm * bk + usize::from(c.b_by_columns) * bn * bk;
                assert_eq!(stats.cp_async_bytes as usize, blocks * copied, "{what}");
                assert_eq!(
                    stats.cp_async_wavefronts * 128,
                    stats.cp_async_bytes,
                    "{what}"
                );
                assert_close(&got, &want, 1e-5, 1e-4, &what);
            }};
        }
        check!(F8E4M3);
        check!(F8E5M2);
    }
}

/// The sm_90a PTX of tutorial 03's fp8 config (128 × 256 × 128, 8 warps, 3 stages, `b`
/// K-major): `wgmma` m64n256k32 on E4M3 bytes with no transpose immediates, fed by
/// `cp.async` and pipelined; no `mma.sync`. sm_80 has no fp8 tensor-core form and keeps
/// the fallback.
#[test]
fn hopper_ptx_runs_fp8_dot_on_wgmma() {
    // Launched as the benchmark launches it: aligned matrices, sizes and leading
    // dimensions divisible by 16, `stride_ak`, `stride_bk` and `stride_cn` 1.
    let spec = matmul_specialization(&[7, 8, 11]);
    let f = matmul::matmul::trace::<F8E4M3, f32>(&spec, 128, 256, 128).unwrap();
    // 8 warps, the default 3 stages.
    let ptx = |sm| crate::cuda::ptx(&f, sm, 8);
    let hopper = ptx(90);
    for want in [
        "wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3",
        "p, 1, 1;",
        "wgmma.wait_group.sync.aligned 1;",
        "cp.async.cg.shared.global",
    ] {
        assert!(hopper.contains(want), "no `{want}` in\n{hopper}");
    }
    assert!(!hopper.contains("mma.sync"), "{hopper}");
    assert!(!ptx(80).contains("wgmma"));
}

/// Tutorial 09's persistent matmul on the emulator's Hopper path: the K loop nested in the
/// loop over tiles is tutorial 03's (operands copied by `cp.async` into pipelined buffers,
/// its `wgmma` group in flight across the K loop's back edge and drained after it, each
/// tile's), fewer programs than tiles, partial tiles; against the interpreter.
#[test]
fn persistent_matmul_on_wgmma_matches_the_interpreter_emulated() {
    let (m, n, k) = (200, 136, 160);
    let (bm, bn, bk, programs) = (128, 64, 64, 3);
    let a = Array2::from_shape_vec((m, k), random_f32(m * k, 41))
        .unwrap()
        .mapv(f16::from_f32);
    let b = Array2::from_shape_vec((k, n), random_f32(k * n, 42))
        .unwrap()
        .mapv(f16::from_f32);
    let opts = tritium::LaunchOptions {
        num_warps: 4,
        emulated_sm: Some(90),
        ..Default::default()
    };
    let (mi, ni, ki) = (m as i32, n as i32, k as i32);
    let run = |d: &Device| {
        let mut out = Array2::<f32>::zeros((m, n));
        matmul::matmul_persistent::launch_with(
            d, programs, &opts, &mut out, &a, &b, mi, ni, ki, ki, 1, ni, 1, ni, 1, bm, bn, bk, 8,
            programs,
        )
        .unwrap();
        out
    };
    let (got, want, stats) = emulated_and_interpreted(run);
    // 2 × 3 tiles, 3 K steps each: a band per 64 rows, a `wgmma` per 16 of k.
    assert_eq!(stats.wgmma, 6 * 3 * 2 * 4, "{stats:?}");
    // At least the two whole K steps of every tile copied by `cp.async` (the third's
    // chunks past k are zero-filled).
    let whole = 6 * 2 * (128 * 64 + 64 * 64) * 2;
    assert!(stats.cp_async_bytes >= whole, "{stats:?}");
    assert_close(&got, &want, 1e-4, 1e-4, "persistent matmul");
}

/// The persistent matmul's K loop (its operands' index tiles behind `multiple_of` /
/// `max_contiguous` hints, which cost no op) takes tutorial 03's path: `cp.async` copies
/// on sm_80, and on sm_90a a `wgmma` group left in flight across the K loop.
#[test]
fn persistent_matmul_k_loop_is_tutorial_03s() {
    let spec = matmul_specialization(&[7, 9, 11]);
    let f = matmul::matmul_persistent::trace::<f16, f16>(&spec, 128, 256, 64, 8, 132).unwrap();
    // 8 warps, the default 3 stages.
    let ptx = |sm| crate::cuda::ptx(&f, sm, 8);
    let ampere = ptx(80);
    assert!(ampere.contains("cp.async.cg.shared.global"), "{ampere}");
    assert!(!ampere.contains("ld.global.u16"), "{ampere}");
    let hopper = ptx(90);
    for want in [
        "cp.async.cg.shared.global",
        "wgmma.wait_group.sync.aligned 1;",
    ] {
        assert!(hopper.contains(want), "no `{want}` in\n{hopper}");
    }
}

/// `t @ t` of one fp8 tile (`a` and `b` the same value, staged from registers: `b`
/// transposed, `a` not).
#[kernel]
fn fp8_square(out: Ptr<f32>, x: Ptr<F8E4M3>, #[constexpr] N: usize) {
    let (r, c) = (arange(0, N), arange(0, N));
    let at = r[(.., None)] * N as i32 + c[(None, ..)];
    let t = load(x + at);
    store(out + at, dot(t, t));
}

/// A `dot` whose `a` and `b` are one fp8 tile runs on `wgmma` with each operand in its
/// own layout.
#[test]
fn fp8_dot_of_a_tile_with_itself_emulated() {
    let n = 64;
    let x: Vec<F8E4M3> = (random_f32(n * n, 9).into_iter())
        .map(|v| F8E4M3::from_f32(8.0 * v))
        .collect();
    let opts = tritium::LaunchOptions {
        num_warps: 4,
        emulated_sm: Some(90),
        ..Default::default()
    };
    let run = |d: &Device| {
        let mut out = vec![0f32; n * n];
        fp8_square::launch_with(d, [1], &opts, &mut out[..], &x[..], n).unwrap();
        ndarray::Array1::from(out)
    };
    shared_memory_stats();
    let got = run(&Device::cuda_emulator());
    assert!(shared_memory_stats().wgmma > 0, "no wgmma");
    assert_close(&got, &run(&Device::interpreter()), 1e-5, 1e-4, "t @ t");
}

/// Asserts that a 16-bit matmul's every `a` and `b` block of every K step (tiles of
/// `blocks` over `sizes`) was copied whole by TMA (the box moves zeros past the matrices)
/// and nothing by `cp.async`; the number of (row, column, K) tiles.
fn assert_operands_by_tma(
    stats: &tritium::backend::cuda::SharedMemoryStats,
    [m, n, k]: [usize; 3],
    [bm, bn, bk]: [usize; 3],
) -> usize {
    let tiles = m.div_ceil(bm) * n.div_ceil(bn) * k.div_ceil(bk);
    let bytes = (tiles * (bm * bk + bk * bn) * 2) as u64;
    assert_eq!(stats.tma_bytes, bytes, "{stats:?}");
    assert_eq!(stats.cp_async_bytes, 0, "{stats:?}");
    tiles
}

/// Tutorial 03 through tensor descriptors on Hopper: both operands' blocks copied by TMA
/// (one thread's `cp.async.bulk.tensor` per 128-byte column block, waited for on each
/// stage's `mbarrier`), clipped to the matrices at the last row, column and K blocks.
#[test]
fn descriptor_matmul_on_tma_matches_the_interpreter_emulated() {
    let (m, n, k) = (200, 144, 160);
    let (bm, bn, bk) = (128, 64, 64);
    let a = Array2::from_shape_vec((m, k), random_f32(m * k, 43))
        .unwrap()
        .mapv(f16::from_f32);
    let b = Array2::from_shape_vec((k, n), random_f32(k * n, 44))
        .unwrap()
        .mapv(f16::from_f32);
    let (mi, ni, ki) = (m as i32, n as i32, k as i32);
    let grid = m.div_ceil(bm) * n.div_ceil(bn);
    for warps in [4, 8] {
        let opts = tritium::LaunchOptions {
            num_warps: warps,
            emulated_sm: Some(90),
            ..Default::default()
        };
        let run = |d: &Device| {
            let mut out = Array2::<f32>::zeros((m, n));
            matmul::matmul_descriptor::launch_with(
                d, grid, &opts, &mut out, &a, &b, mi, ni, ki, bm, bn, bk, 8,
            )
            .unwrap();
            out
        };
        let (got, want, stats) = emulated_and_interpreted(run);
        let tiles = assert_operands_by_tma(&stats, [m, n, k], [bm, bn, bk]);
        assert_eq!(stats.wgmma, (tiles * 2 * 4) as u64, "{stats:?}");
        assert_close(&got, &want, 1e-4, 1e-4, "descriptor matmul");
        // An f16 result goes out through the epilogue's tile by TMA stores, clipped to
        // `c`: every element inside written once.
        let run = |d: &Device| {
            let mut out = Array2::from_elem((m, n), f16::NAN);
            matmul::matmul_descriptor::launch_with(
                d, grid, &opts, &mut out, &a, &b, mi, ni, ki, bm, bn, bk, 8,
            )
            .unwrap();
            out.mapv(f16::to_f32)
        };
        let (got, want, stats) = emulated_and_interpreted(run);
        assert_eq!(stats.tma_store_bytes, (m * n * 2) as u64, "{stats:?}");
        assert_close(&got, &want, 1e-3, 1e-3, "descriptor matmul, f16 result");
    }
}

/// The descriptor matmul's PTX: TMA copies and `mbarrier` waits in the K loop on sm_90a
/// (tensor maps as 64-byte aligned `grid_constant` parameters, their addresses read back
/// from lane 0 by `shfl.sync.idx` so that ptxas keeps them in uniform registers: taken
/// straight from `cvta.param`, they were formed again in every trip, 16 instructions of
/// 82), no `cp.async`; sm_80 copies the same loads with `cp.async` and takes no map.
#[test]
fn descriptor_matmul_ptx_copies_by_tma_on_hopper() {
    let spec = all_sixteens(6);
    let f = matmul::matmul_descriptor::trace::<f16, f16>(&spec, 128, 256, 64, 8).unwrap();
    let hopper = crate::cuda::ptx(&f, 90, 8);
    for want in [
        ".param .align 64 .b8",
        "cvta.param.u64",
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes",
        "mbarrier.try_wait.parity.shared::cta.b64",
        "mbarrier.arrive.expect_tx.shared::cta.b64",
        "wgmma.wait_group.sync.aligned 1;",
        // The f16 result stored by TMA from the epilogue's tile.
        "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group",
        "cp.async.bulk.wait_group 0;",
    ] {
        assert!(hopper.contains(want), "no `{want}` in\n{hopper}");
    }
    assert!(!hopper.contains("cp.async.cg.shared.global"), "{hopper}");
    // No copy takes its map's address as `cvta.param` gives it.
    let generic: Vec<&str> = (hopper.lines())
        .filter_map(|l| l.trim().strip_prefix("cvta.param.u64"))
        .filter_map(|rest| rest.split(',').next().map(str::trim))
        .collect();
    assert!(!generic.is_empty(), "{hopper}");
    for l in hopper
        .lines()
        .filter(|l| l.contains("cp.async.bulk.tensor"))
    {
        for r in &generic {
            assert!(
                !l.contains(&format!("[{r}, ")),
                "`{l}` takes {r} from cvta.param"
            );
        }
    }
    // One instruction per operand per stage, its column blocks dealt to the warps.
    let copies = hopper.matches("shared::cluster.global.mbarrier").count();
    assert!(copies >= 2, "{copies} copies in\n{hopper}");
    let ampere = crate::cuda::ptx(&f, 80, 8);
    assert!(ampere.contains("cp.async.cg.shared.global"), "{ampere}");
    assert!(!ampere.contains(".param .align 64 .b8"), "{ampere}");
}

/// A launch whose tensor maps TMA cannot encode (here `k = 0`: a tensor map has no empty
/// dim) takes the kernel compiled without TMA, as on a GPU: no error, zeros.
#[test]
fn descriptor_matmul_that_tma_cannot_encode_falls_back_emulated() {
    let (m, n) = (64, 64);
    let a = Array2::from_elem((m, 16), f16::ONE);
    let b = Array2::from_elem((16, n), f16::ONE);
    let opts = tritium::LaunchOptions {
        num_warps: 4,
        emulated_sm: Some(90),
        ..Default::default()
    };
    let mut out = Array2::<f32>::from_elem((m, n), f32::NAN);
    shared_memory_stats();
    matmul::matmul_descriptor::launch_with(
        &Device::cuda_emulator(),
        1,
        &opts,
        &mut out,
        &a,
        &b,
        m as i32,
        n as i32,
        0,
        64,
        64,
        64,
        8,
    )
    .unwrap();
    assert_eq!(shared_memory_stats().tma_bytes, 0);
    assert!(out.iter().all(|x| *x == 0.0), "{out:?}");
}

/// Tutorial 03 through descriptors with `b` K-major (`bt` is `n × k` row-major, read
/// through a descriptor of `b` with unit stride down its columns): TMA lays each `b`
/// block out transposed, as the `dot` reads a `b` whose columns lie contiguous.
#[kernel]
fn descriptor_matmul_bt(
    c: Ptr<f32>,
    a: Ptr<f16>,
    bt: Ptr<f16>,
    m: i32,
    n: i32,
    k: i32,
    #[constexpr] BM: usize,
    #[constexpr] BN: usize,
    #[constexpr] BK: usize,
) {
    let a_desc = make_tensor_descriptor(a, (m, k), (k, 1), (BM, BK));
    let b_desc = make_tensor_descriptor(bt, (k, n), (1, k), (BK, BN));
    let c_desc = make_tensor_descriptor(c, (m, n), (n, 1), (BM, BN));
    let (om, on) = (program_id(0) * BM as i32, program_id(1) * BN as i32);
    let mut acc = zeros([BM, BN], DType::F32);
    for ki in range(0, cdiv(k, BK as i32)) {
        let ok = ki * BK as i32;
        acc = dot(a_desc.load((om, ok)), b_desc.load((ok, on)), acc);
    }
    c_desc.store((om, on), acc);
}

#[test]
fn descriptor_matmul_with_k_major_b_on_tma_emulated() {
    let (m, n, k) = (136, 80, 96);
    let (bm, bn, bk) = (64, 64, 64);
    let a = Array2::from_shape_vec((m, k), random_f32(m * k, 45))
        .unwrap()
        .mapv(f16::from_f32);
    let bt = Array2::from_shape_vec((n, k), random_f32(n * k, 46))
        .unwrap()
        .mapv(f16::from_f32);
    let opts = tritium::LaunchOptions {
        num_warps: 4,
        emulated_sm: Some(90),
        ..Default::default()
    };
    let grid = (m.div_ceil(bm), n.div_ceil(bn));
    let run = |d: &Device| {
        let mut out = Array2::<f32>::zeros((m, n));
        let (mi, ni, ki) = (m as i32, n as i32, k as i32);
        descriptor_matmul_bt::launch_with(
            d, grid, &opts, &mut out, &a, &bt, mi, ni, ki, bm, bn, bk,
        )
        .unwrap();
        out
    };
    let (got, want, stats) = emulated_and_interpreted(run);
    assert_operands_by_tma(&stats, [m, n, k], [bm, bn, bk]);
    assert_close(&got, &want, 1e-4, 1e-4, "descriptor matmul, K-major b");
}

/// Tutorial 06's Hopper form (`attention_descriptor`: keys taken as
/// `desc_k.load(..).T`): on sm_90a both products on `wgmma` and the key and value blocks
/// of the loop copied by TMA (the transposed keys' block as a K-major `b`), no
/// `cp.async`; sm_80 copies the same blocks with `cp.async`.
#[test]
fn descriptor_attention_ptx_copies_keys_and_values_by_tma() {
    use tritium_kernels::attention_descriptor::attention_descriptor;
    let spec = all_sixteens(8);
    for (bm, bn, d, warps) in [(128, 64, 64, 4), (128, 128, 128, 8)] {
        let f = attention_descriptor::trace::<f16>(&spec, bm, bn, d, false).unwrap();
        let hopper = crate::cuda::ptx(&f, 90, warps);
        for want in [
            "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes",
            "mbarrier.try_wait.parity.shared::cta.b64",
            "wgmma.mma_async",
        ] {
            assert!(hopper.contains(want), "D={d}: no `{want}` in\n{hopper}");
        }
        assert!(
            !hopper.contains("cp.async.cg.shared.global"),
            "D={d}: {hopper}"
        );
        let ampere = crate::cuda::ptx(&f, 80, warps);
        assert!(
            ampere.contains("cp.async.cg.shared.global"),
            "D={d}: {ampere}"
        );
    }
}

/// Tutorial 06's Hopper form on the emulator's Hopper path: the key and value blocks of
/// both loops (off-band and, causal, the diagonal band) copied by TMA, exactly their
/// bytes, no `cp.async`; the results the interpreter's.
#[test]
fn descriptor_attention_on_tma_matches_the_interpreter_emulated() {
    use tritium_kernels::attention_descriptor::attention_descriptor;
    let (z, h, n, d) = (1, 2, 256, 64);
    for (bm, bn, causal) in [(64, 64, false), (128, 64, true)] {
        // Per program, the key blocks it sees (causal: up to its diagonal band's end).
        let blocks: usize = (0..n / bm)
            .map(|m| if causal { (m + 1) * bm / bn } else { n / bn })
            .sum();
        let what = format!("{bm}x{bn} causal={causal}");
        let launch = |dev: &Device, opts: &LaunchOptions, io: AttentionIo<'_>| {
            let (zh, ni) = ((z * h) as i32, n as i32);
            let (out, lse, [q, k, v]) = io;
            attention_descriptor::launch_with(
                dev,
                [n / bm, z * h],
                opts,
                out,
                lse,
                q,
                k,
                v,
                0.125,
                zh,
                ni,
                bm,
                bn,
                d,
                causal,
            )
        };
        // `q` by TMA too, once per program, where the loops keep it in shared memory (128
        // rows at 4 warps; 64 are read into registers).
        let q_rows = if bm == 128 { z * h * n } else { 0 };
        let rows = [q_rows, z * h * blocks * bn];
        assert_attention_on_tma([z, h, n, d], rows, &what, launch);
    }
}

/// An attention forward's arguments: the output, the log-sum-exp, and `q`, `k`, `v`.
type AttentionIo<'a> = (
    &'a mut ndarray::Array4<f16>,
    &'a mut ndarray::Array3<f32>,
    [ndarray::ArrayView4<'a, f16>; 3],
);

/// `launch`, an attention forward over `[Z, H, N, D]` f16 inputs, on the emulator's Hopper
/// path (4 warps) and on the interpreter: `q_rows` rows of `q` and its key and value
/// blocks, `keys` rows of each in all, copied by TMA and nothing by `cp.async`, the
/// output stored by TMA, its results the interpreter's.
fn assert_attention_on_tma(
    [z, h, n, d]: [usize; 4],
    [q_rows, keys]: [usize; 2],
    what: &str,
    launch: impl Fn(&Device, &LaunchOptions, AttentionIo<'_>) -> tritium::Result<()>,
) {
    use ndarray::{Array3, Array4};
    let shape = (z, h, n, d);
    let half = |seed| {
        Array4::from_shape_vec(shape, random_f32(z * h * n * d, seed))
            .unwrap()
            .mapv(f16::from_f32)
    };
    let (q, k, v) = (half(51), half(52), half(53));
    let opts = LaunchOptions {
        num_warps: 4,
        emulated_sm: Some(90),
        ..Default::default()
    };
    let run = |dev: &Device| {
        let mut out = Array4::from_elem(shape, f16::NAN);
        let mut lse = Array3::<f32>::zeros((z, h, n));
        let inputs = [q.view(), k.view(), v.view()];
        launch(dev, &opts, (&mut out, &mut lse, inputs)).unwrap();
        (out.mapv(f16::to_f32), lse)
    };
    let ((out, lse), (want, want_lse), stats) = emulated_and_interpreted(run);
    assert_eq!(
        stats.tma_bytes,
        ((q_rows + keys * 2) * d * 2) as u64,
        "{what}: {stats:?}"
    );
    assert_eq!(stats.cp_async_bytes, 0, "{what}: {stats:?}");
    // The output by TMA too, from the epilogue's tile, clipped at `N`.
    assert_eq!(
        stats.tma_store_bytes,
        (z * h * n * d * 2) as u64,
        "{what}: {stats:?}"
    );
    assert!(stats.wgmma > 0, "{what}: {stats:?}");
    assert_close(&out, &want, 1e-3, 1e-3, &format!("{what}: out"));
    assert_close(&lse, &want_lse, 1e-4, 1e-4, &format!("{what}: lse"));
}

/// Tutorial 09's descriptor matmul on fp8 as its benchmark runs it: `a` row-major, `b`
/// passed transposed (`bt`, `n × k` row-major) and read as `bt_desc.load(..).T`; the two
/// may be different fp8s.
#[kernel]
fn descriptor_matmul_fp8<A: Float, B: Float>(
    c: Ptr<f32>,
    a: Ptr<A>,
    bt: Ptr<B>,
    m: i32,
    n: i32,
    k: i32,
    #[constexpr] BM: usize,
    #[constexpr] BN: usize,
    #[constexpr] BK: usize,
) {
    let a_desc = make_tensor_descriptor(a, (m, k), (k, 1), (BM, BK));
    let bt_desc = make_tensor_descriptor(bt, (n, k), (k, 1), (BN, BK));
    let c_desc = make_tensor_descriptor(c, (m, n), (n, 1), (BM, BN));
    let (om, on) = (program_id(0) * BM as i32, program_id(1) * BN as i32);
    let mut acc = zeros([BM, BN], DType::F32);
    for ki in range(0, cdiv(k, BK as i32)) {
        let ok = ki * BK as i32;
        acc = dot(a_desc.load((om, ok)), bt_desc.load((on, ok)).t(), acc);
    }
    c_desc.store((om, on), acc);
}

/// fp8 operands by TMA on Hopper: both blocks (`b`'s transposed, as a K-major box) copied
/// by `cp.async.bulk.tensor` into the 8-bit swizzled tiles `wgmma` reads (QGMMA), clipped
/// at the edges, E4M3 and E5M2 and the two mixed (one `wgmma` of E4M3 by E5M2, as Triton
/// and the hardware multiply them; no f16 copies); no `cp.async`.
#[test]
fn fp8_descriptor_matmul_on_tma_matches_the_interpreter_emulated() {
    let (m, n, k) = (144, 136, 192);
    let (bm, bn, bk) = (128, 128, 64);
    let a32 = random_f32(m * k, 61);
    let b32 = random_f32(n * k, 62);
    let opts = tritium::LaunchOptions {
        num_warps: 4,
        emulated_sm: Some(90),
        ..Default::default()
    };
    let grid = (m.div_ceil(bm), n.div_ceil(bn));
    macro_rules! check {
        ($ta:ty, $tb:ty) => {{
            let a = Array2::from_shape_vec((m, k), a32.clone())
                .unwrap()
                .mapv(|x| <$ta>::from_f32(4.0 * x));
            let bt = Array2::from_shape_vec((n, k), b32.clone())
                .unwrap()
                .mapv(|x| <$tb>::from_f32(4.0 * x));
            let run = |d: &Device| {
                let mut out = Array2::<f32>::zeros((m, n));
                let (mi, ni, ki) = (m as i32, n as i32, k as i32);
                descriptor_matmul_fp8::launch_with(
                    d, grid, &opts, &mut out, &a, &bt, mi, ni, ki, bm, bn, bk,
                )
                .unwrap();
                out
            };
            let (got, want, stats) = emulated_and_interpreted(run);
            let what = concat!(stringify!($ta), " @ ", stringify!($tb));
            let tiles = grid.0 * grid.1 * k.div_ceil(bk);
            assert_eq!(
                stats.tma_bytes,
                (tiles * (bm + bn) * bk) as u64,
                "{what} {stats:?}"
            );
            assert_eq!(stats.cp_async_bytes, 0, "{what} {stats:?}");
            assert_eq!(
                stats.wgmma as usize,
                tiles * (bm / 64) * (bk / 32),
                "{what}"
            );
            assert_close(&got, &want, 1e-5, 1e-4, what);
        }};
    }
    check!(F8E4M3, F8E4M3);
    check!(F8E5M2, F8E5M2);
    check!(F8E4M3, F8E5M2);
    check!(F8E5M2, F8E4M3);
    let spec = all_sixteens(6);
    let same = descriptor_matmul_fp8::trace::<F8E5M2, F8E5M2>(&spec, 128, 256, 128).unwrap();
    let mixed = descriptor_matmul_fp8::trace::<F8E4M3, F8E5M2>(&spec, 128, 256, 128).unwrap();
    for (f, pair) in [(same, ".e5m2.e5m2"), (mixed, ".e4m3.e5m2")] {
        let hopper = crate::cuda::ptx(&f, 90, 8);
        for want in ["cp.async.bulk.tensor.2d", "wgmma.mma_async", pair] {
            assert!(hopper.contains(want), "no `{want}` in\n{hopper}");
        }
        for unwanted in [
            "cp.async.cg.shared.global",
            "cvt.rn.f16x2.e4m3x2",
            ".f16.f16",
        ] {
            assert!(!hopper.contains(unwanted), "`{unwanted}` in\n{hopper}");
        }
    }
}

/// Tutorial 06's block-pointer attention on the emulator's Hopper path: its key and value
/// blocks (`k + head`, a base one head further per program) are copied by TMA through
/// 3-D tensor maps, the head a third coordinate, so that a block past `N` reads zeros
/// of its own head rather than the next head's rows; exactly the blocks the loops visit,
/// and `q` once per program where it is kept in shared memory (its 128-row block clipped
/// at `N`), no `cp.async`; the results the interpreter's, with `N` not a multiple of the
/// blocks.
#[test]
fn block_pointer_attention_on_tma_matches_the_interpreter_emulated() {
    use tritium_kernels::attention::attention_forward;
    let (z, h, n, d) = (1, 2, 200usize, 64);
    for (bm, bn, causal) in [(64, 64, false), (64, 32, true), (128, 64, true)] {
        let grid = [n.div_ceil(bm), z * h];
        // The key blocks a program visits: up to its band's end (causal), else all.
        let blocks: usize = (0..grid[0])
            .map(|m| match causal {
                true => ((m + 1) * bm).min(n).div_ceil(bn),
                false => n.div_ceil(bn),
            })
            .sum();
        let what = format!("{bm}x{bn} causal={causal}");
        let launch = |dev: &Device, opts: &LaunchOptions, io: AttentionIo<'_>| {
            let (out, lse, [q, k, v]) = io;
            attention_forward::launch_with(
                dev, grid, opts, out, lse, q, k, v, 0.125, n as i32, bm, bn, d, causal,
            )
        };
        let q_rows = if bm == 128 { z * h * grid[0] * bm } else { 0 };
        let rows = [q_rows, z * h * blocks * bn];
        assert_attention_on_tma([z, h, n, d], rows, &what, launch);
    }
}

/// Tutorial 03 through block pointers whose dims are checked (`CHECK_K`: only K, the dim
/// that moves; else none): a dim left unchecked goes by TMA where its offset never goes
/// below its start, whether it stays (M, N: 0 here) or grows (K, advanced by the block:
/// it could wrap past `i32::MAX` only where the kernel's pointers left their buffer,
/// which a launch checks, and a checked load is never copied by TMA).
#[kernel]
fn block_pointer_matmul(
    c: Ptr<f32>,
    a: Ptr<f16>,
    b: Ptr<f16>,
    k: i32,
    #[constexpr] BM: usize,
    #[constexpr] BN: usize,
    #[constexpr] BK: usize,
    #[constexpr] CHECK_K: bool,
) {
    let (bm, bn) = (BM as i32, BN as i32);
    let mut a_block = make_block_ptr(a, (bm, k), (k, 1), (0, 0), (BM, BK), (1, 0));
    let mut b_block = make_block_ptr(b, (k, bn), (bn, 1), (0, 0), (BK, BN), (1, 0));
    let mut acc = zeros([BM, BN], DType::F32);
    for _ in range(0, cdiv(k, BK as i32)) {
        let (x, y) = if CHECK_K {
            let x = load(a_block, boundary_check = (1,), padding_option = "zero");
            (
                x,
                load(b_block, boundary_check = (0,), padding_option = "zero"),
            )
        } else {
            (load(a_block), load(b_block))
        };
        acc = dot(x, y, acc);
        a_block = advance(a_block, (0, BK as i32));
        b_block = advance(b_block, (BK as i32, 0));
    }
    let rows = arange(0, BM);
    let cols = arange(0, BN);
    store(c + rows[(.., None)] * bn + cols[(None, ..)], acc);
}

#[test]
fn unchecked_block_pointer_dims_go_by_tma_where_their_offset_never_falls() {
    let (m, n, k) = (64usize, 64usize, 128usize);
    let a = Array2::from_shape_vec((m, k), random_f32(m * k, 81))
        .unwrap()
        .mapv(f16::from_f32);
    let b = Array2::from_shape_vec((k, n), random_f32(k * n, 82))
        .unwrap()
        .mapv(f16::from_f32);
    let opts = tritium::LaunchOptions {
        num_warps: 4,
        emulated_sm: Some(90),
        ..Default::default()
    };
    for check_k in [true, false] {
        let run = |d: &Device| {
            let mut out = Array2::<f32>::zeros((m, n));
            block_pointer_matmul::launch_with(
                d, 1, &opts, &mut out, &a, &b, k as i32, m, n, 32, check_k,
            )
            .unwrap();
            out
        };
        let (got, want, stats) = emulated_and_interpreted(run);
        let bytes = ((m + n) * k * 2) as u64;
        let what = format!("check_k={check_k}: {stats:?}");
        assert_eq!(
            (stats.tma_bytes, stats.cp_async_bytes),
            (bytes, 0),
            "{what}"
        );
        assert_close(&got, &want, 1e-4, 1e-4, &what);
    }
    // `b` a row short: the launch's proof leaves its load, which is then checked (not
    // copied by TMA, whose box would read on past the buffer) and faults.
    let short = b.slice(ndarray::s![..k - 1, ..]).to_owned();
    for dev in [Device::interpreter(), Device::cuda_emulator()] {
        let mut out = Array2::<f32>::zeros((m, n));
        let e = block_pointer_matmul::launch_with(
            &dev, 1, &opts, &mut out, &a, &short, k as i32, m, n, 32, false,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("load") && e.contains("at address"),
            "{dev:?}: {e}"
        );
    }
}

/// Tutorial 09's persistent matmul through descriptors on the emulator's Hopper path: each
/// program's tiles one after another, every tile's K loop by TMA (its `mbarrier`s set up
/// and invalidated per tile, their phases from 0 again), clipped at the edges; exactly
/// every tile's blocks, no `cp.async`; the f16 result by TMA stores.
#[test]
fn persistent_descriptor_matmul_on_tma_matches_the_interpreter_emulated() {
    let (m, n, k) = (200, 144, 160);
    let (bm, bn, bk) = (64, 64, 64);
    let a = Array2::from_shape_vec((m, k), random_f32(m * k, 91))
        .unwrap()
        .mapv(f16::from_f32);
    let b = Array2::from_shape_vec((k, n), random_f32(k * n, 92))
        .unwrap()
        .mapv(f16::from_f32);
    let (mi, ni, ki) = (m as i32, n as i32, k as i32);
    let opts = tritium::LaunchOptions {
        num_warps: 4,
        emulated_sm: Some(90),
        ..Default::default()
    };
    // Fewer programs than the 12 tiles: 3 tiles each.
    let programs = 4;
    let run = |d: &Device| {
        let mut out = Array2::from_elem((m, n), f16::NAN);
        matmul::matmul_descriptor_persistent::launch_with(
            d, programs, &opts, &mut out, &a, &b, mi, ni, ki, bm, bn, bk, 8, programs,
        )
        .unwrap();
        out.mapv(f16::to_f32)
    };
    let (got, want, stats) = emulated_and_interpreted(run);
    assert_operands_by_tma(&stats, [m, n, k], [bm, bn, bk]);
    assert_eq!(stats.tma_store_bytes, (m * n * 2) as u64, "{stats:?}");
    assert_close(&got, &want, 1e-3, 1e-3, "persistent descriptor matmul");
}

/// `trans(load(..))` of an `8 × 4` block of a 21-element buffer: lanes from element 21 on
/// are outside it.
#[kernel]
fn transposed_load_past_the_end(out: Ptr<f32>, x: Ptr<f32>) {
    let (r, c) = (arange(0, 8), arange(0, 4));
    let t = trans(load(x + r[(.., None)] * 4 + c[(None, ..)]));
    store(out + c[(.., None)] * 8 + r[(None, ..)], t);
}

/// Checked code keeps a transposed load as written (`dsl::ir::sink_transposes` only serves
/// asynchronous copies), so its first faulting lane in the loaded tile's order, and the
/// address the error names, are the interpreter's: element 21 (loading the transposed
/// block, the first would be element 24; the CPU, which packs the transpose into its
/// load, names 24 too).
#[test]
fn a_checked_transposed_load_faults_where_the_interpreter_does() {
    let x = ndarray::Array1::<f32>::zeros(21);
    let opts = tritium::LaunchOptions {
        bounds_check: Some(true),
        num_warps: 1,
        ..Default::default()
    };
    let fault = |d: &Device| {
        let mut out = Array2::<f32>::zeros((4, 8));
        let e = transposed_load_past_the_end::launch_with(d, 1, &opts, &mut out, &x)
            .unwrap_err()
            .to_string();
        // The address, as an offset from the buffer's start.
        let at = |key: &str| {
            let i = e.find(key).unwrap_or_else(|| panic!("no `{key}` in {e}")) + key.len();
            let hex: String = e[i..]
                .chars()
                .take_while(|c| c.is_ascii_hexdigit())
                .collect();
            u64::from_str_radix(&hex, 16).unwrap()
        };
        (at("at address 0x") - at("`x` [0x")) / 4
    };
    assert_eq!(fault(&Device::interpreter()), 21);
    assert_eq!(fault(&Device::cuda_emulator()), 21);
}

/// `q` (128 × 64, through a descriptor) the `a` of two K loops with a sum across warps
/// between them, whose partials meet in shared memory from byte 0.
#[kernel]
fn two_loops_around_a_sum(
    out: Ptr<f32>,
    q: Ptr<f16>,
    b: Ptr<f16>,
    x: Ptr<f32>,
    n: i32,
    #[constexpr] D: usize,
) {
    let desc_q = make_tensor_descriptor(q, (128, D as i32), (D as i32, 1), (128, D));
    let desc_b = make_tensor_descriptor(b, (D as i32, n), (n, 1), (D, 64));
    let q_block = desc_q.load((0, 0));
    let mut first = zeros([128, 64], DType::F32);
    for j in range(0, n / 64) {
        first = dot(q_block, desc_b.load((0, j * 64)), first);
    }
    let s = sum(load(x + arange(0, 128)), 0);
    let mut second = zeros([128, 64], DType::F32);
    for j in range(0, n / 64) {
        second = dot(q_block, desc_b.load((0, j * 64)), second);
    }
    let (r, c) = (arange(0, 128), arange(0, 64));
    store(out + r[(.., None)] * 64 + c[(None, ..)], first + second + s);
}

/// A `q` the loops keep in shared memory is copied once by TMA below the floor, and a
/// cross-warp sum between the loops takes its scratch above it (`scratch_floor`; at byte
/// 0 it overwrote `q`'s first bytes, and `q` was then staged at each loop): the results
/// the interpreter's.
#[test]
fn a_sum_between_the_loops_keeps_q_from_the_one_copy_emulated() {
    let (d, n) = (64, 256);
    let q = random_f32(128 * d, 81)
        .into_iter()
        .map(f16::from_f32)
        .collect::<Vec<_>>();
    let b = random_f32(d * n, 82)
        .into_iter()
        .map(f16::from_f32)
        .collect::<Vec<_>>();
    let x = random_f32(128, 83);
    let opts = LaunchOptions {
        num_warps: 4,
        emulated_sm: Some(90),
        ..Default::default()
    };
    let run = |dev: &Device| {
        let mut out = vec![0f32; 128 * 64];
        two_loops_around_a_sum::launch_with(dev, 1, &opts, &mut out, &q, &b, &x, n as i32, d)
            .unwrap();
        ndarray::arr1(&out)
    };
    let (got, want, stats) = emulated_and_interpreted(run);
    // The `b` blocks of both loops by TMA, and `q` once.
    assert_eq!(
        stats.tma_bytes,
        (2 * d * n * 2 + 128 * d * 2) as u64,
        "{stats:?}"
    );
    assert_close(&got, &want, 1e-3, 1e-3, "two loops around a sum");
}

/// Tutorial 06 on fp8 (`v` given transposed, as the tutorial takes it) on the emulator's
/// Hopper path: both products on QGMMA, the second with `p` converted straight from the
/// scores' registers into `wgmma`'s fp8 A fragments (two shuffles per 8 bytes, no trip
/// through shared memory); the results the interpreter's, E5M2 and E4M3.
#[test]
fn fp8_attention_takes_p_from_registers_emulated() {
    fn check<T: Float + Default + Copy>(
        to: fn(f32) -> T,
        back: fn(T) -> f32,
        (d, bm, bn, num_warps): (usize, usize, usize, u32),
    ) {
        use ndarray::{Array3, Array4};
        use tritium_kernels::attention::attention_forward;
        let (z, h, n) = (1, 2, 192);
        let shape = (z, h, n, d);
        let tensor = |seed| {
            Array4::from_shape_vec(shape, random_f32(z * h * n * d, seed))
                .unwrap()
                .mapv(to)
        };
        let (q, k) = (tensor(61), tensor(62));
        // `[Z, H, D, N]`.
        let vt = tensor(63)
            .permuted_axes([0, 1, 3, 2])
            .as_standard_layout()
            .to_owned();
        let opts = LaunchOptions {
            num_warps,
            emulated_sm: Some(90),
            ..Default::default()
        };
        for causal in [false, true] {
            let run = |dev: &Device| {
                let mut out = Array4::from_elem(shape, to(0.0));
                let mut lse = Array3::<f32>::zeros((z, h, n));
                attention_forward::launch_with(
                    dev,
                    [n.div_ceil(bm), z * h],
                    &opts,
                    &mut out,
                    &mut lse,
                    q.view(),
                    k.view(),
                    vt.view(),
                    0.125,
                    n as i32,
                    bm,
                    bn,
                    d,
                    causal,
                )
                .unwrap();
                (out.mapv(back), lse)
            };
            let ((out, lse), (want, want_lse), stats) = emulated_and_interpreted(run);
            let what = format!(
                "{} D={d} {bm}x{bn} warps={num_warps} causal={causal}",
                std::any::type_name::<T>()
            );
            assert!(stats.wgmma > 0, "{what}: {stats:?}");
            assert_close(&lse, &want_lse, 1e-5, 1e-5, &format!("{what}: lse"));
            assert_close(&out, &want, 1e-6, 1e-6, &format!("{what}: out"));
        }
    }
    // Tutorial 06's D = 64 config (one warpgroup, two 64-row bands, two k steps of 32 in
    // the second product), and D = 128 at 128 × 128 over 8 warps (a band per warpgroup,
    // four k steps).
    check(F8E5M2::from_f32, F8E5M2::to_f32, (64, 128, 64, 4));
    check(F8E4M3::from_f32, F8E4M3::to_f32, (64, 128, 64, 4));
    check(F8E5M2::from_f32, F8E5M2::to_f32, (128, 128, 128, 8));
}

/// The PTX of that loop: the second product's `wgmma` takes four registers for `a`, filled
/// by `shfl.sync.idx` (Triton's 16 per trip at this config) and packed by Hopper's
/// conversion instruction, and `p` is stored to shared memory nowhere.
#[test]
fn fp8_attention_ptx_packs_p_into_a_registers() {
    use tritium_kernels::attention::attention_forward;
    // As a launch at multiples of 16 specializes it (`sm_scale`, a float, aside).
    let spec = Specialization {
        ones: vec![false; 7],
        sixteens: (0..7).map(|i| i != 5).collect(),
    };
    let f = attention_forward::trace::<F8E5M2>(&spec, 128, 64, 64, false).unwrap();
    let text = crate::cuda::ptx(&f, 90, 4);
    let register_a = text
        .lines()
        .filter(|l| l.contains("wgmma.mma_async") && l.contains("}, {%r"))
        .count();
    assert!(register_a > 0, "{text}");
    assert!(text.contains("shfl.sync.idx.b32"), "{text}");
    assert!(text.contains("cvt.rn.satfinite.e5m2x2.f32"), "{text}");
    assert!(!text.contains("st.shared.u8"), "{text}");
    // The check for infinities (E5M2 only) costs no max per value: as many `max` as the
    // E4M3 kernel's (the softmax's own), where a max of every `|p|` took 63 more.
    let maxes = |text: &str| text.lines().filter(|l| l.contains("max.f32")).count();
    let e4m3 = attention_forward::trace::<F8E4M3>(&spec, 128, 64, 64, false).unwrap();
    let e4m3 = crate::cuda::ptx(&e4m3, 90, 4);
    assert_eq!(maxes(&text), maxes(&e4m3));
}

/// `p = (x · scale).to(E5M2)` into the register A fragments of a second `dot`, with
/// `scale` past f32's range on rows 0–7 (±inf there, which Hopper's conversion saturates
/// to 57344 and the fragments' fix-up makes infinite again) and small elsewhere.
#[kernel]
fn fp8_scaled_products(out: Ptr<f32>, a: Ptr<F8E5M2>, b: Ptr<F8E5M2>, v: Ptr<F8E5M2>) {
    let (rows, k, n) = (arange(0, 64), arange(0, 32), arange(0, 8));
    let ta = load(a + rows[(.., None)] * 32 + k[(None, ..)]);
    let tb = load(b + k[(.., None)] * 32 + k[(None, ..)]);
    let x = dot(ta, tb, zeros([64, 32], DType::F32));
    let scale = where_(rows[(.., None)] < 8, 2f32.powi(124), 0.25);
    let p = (x * scale).to(DType::F8E5M2);
    let tv = load(v + k[(.., None)] * 8 + n[(None, ..)]);
    let o = dot(p, tv, zeros([64, 8], DType::F32));
    store(out + rows[(.., None)] * 8 + n[(None, ..)], o);
}

#[test]
fn fp8_register_a_keeps_e5m2_infinities_emulated() {
    let small = |n: usize, seed| -> Vec<F8E5M2> {
        (random_f32(n, seed).into_iter())
            .map(|x| F8E5M2::from_f32((x.abs() * 4.0).round()))
            .collect()
    };
    let (a, b) = (small(64 * 32, 71), small(32 * 32, 72));
    // No negative value: a row's products sum to +inf where it holds +inf.
    let v: Vec<F8E5M2> = (random_f32(32 * 8, 73).into_iter())
        .map(|x| F8E5M2::from_f32(1.0 + x.abs()))
        .collect();
    let opts = LaunchOptions {
        num_warps: 4,
        emulated_sm: Some(90),
        ..Default::default()
    };
    let run = |dev: &Device| {
        let mut out = vec![0f32; 64 * 8];
        fp8_scaled_products::launch_with(dev, 1, &opts, &mut out, &a, &b, &v).unwrap();
        out
    };
    let (got, want, stats) = emulated_and_interpreted(run);
    assert!(stats.wgmma > 0, "{stats:?}");
    assert!(
        want[..64].iter().any(|x| x.is_infinite()),
        "{:?}",
        &want[..64]
    );
    assert!(want[64..].iter().all(|x| x.is_finite()), "{want:?}");
    for (i, (g, w)) in got.iter().zip(&want).enumerate() {
        assert!(
            g == w || (g.is_nan() && w.is_nan()),
            "at {i}: got {g}, want {w}"
        );
    }
}
