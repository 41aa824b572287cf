//! Values held in a tensor-core `dot`'s layout on CUDA (codegen `held`, `fragments`): the
//! scores of attention-like kernels, their row reductions and what is broadcast back stay
//! in `mma` fragments. Checked on the emulator against the interpreter, with the warps
//! dealt by rows (`M` a multiple of 16 per warp) and not.

use crate::common::{assert_close, random_f32};
use ndarray::{Array1, Array4};
use tritium::prelude::*;
use tritium::Device;
use tritium_kernels::attention::{attention_forward, AttentionConfig};

/// Row statistics of `x = a @ b` (`M × K @ K × N`, f16) with the columns from `n` on
/// masked to -1e6: each row's max, min, sum of `exp2(x - max)`, argmax and argmin, and
/// `exp2(x - max) / sum`.
#[kernel]
fn row_stats(
    stats: Ptr<f32>,
    index: Ptr<i32>,
    soft: Ptr<f32>,
    a: Ptr<half::f16>,
    b: Ptr<half::f16>,
    n: i32,
    #[constexpr] M: usize,
    #[constexpr] N: usize,
    #[constexpr] K: usize,
) {
    let rm = arange(0, M);
    let rn = arange(0, N);
    let rk = arange(0, K);
    let ta = load(a + rm[(.., None)] * K as i32 + rk[(None, ..)]);
    let tb = load(b + rk[(.., None)] * N as i32 + rn[(None, ..)]);
    let x = where_(rn[(None, ..)] < n, dot(ta, tb), -1.0e6);
    let mx = max(x, 1);
    let p = exp2(x - mx[(.., None)]);
    let l = sum(p, 1);
    let m = M as i32;
    store(stats + rm, mx);
    store(stats + m + rm, min(x, 1));
    store(stats + 2 * m + rm, l);
    store(index + rm, argmax(x, 1));
    store(index + m + rm, argmin(x, 1));
    store(
        soft + rm[(.., None)] * N as i32 + rn[(None, ..)],
        p / l[(.., None)],
    );
}

/// `row_stats` on the emulator and the interpreter agree, for `m × 32` scores dealt to
/// the warps by rows (`m = 16 · warps · k`) or not (`m = 16`, 4 warps).
#[rstest::rstest]
#[case(64, 4)]
#[case(64, 2)]
#[case(32, 1)]
#[case(16, 4)]
fn row_reductions_of_dot_fragments_emulated(#[case] m: usize, #[case] num_warps: u32) {
    use half::f16;
    let (n, k) = (32, 32);
    let a = Array1::from(random_f32(m * k, 41)).mapv(f16::from_f32);
    let b = Array1::from(random_f32(k * n, 42)).mapv(f16::from_f32);
    let opts = tritium::LaunchOptions {
        num_warps,
        ..Default::default()
    };
    for valid in [n as i32, 19] {
        let run = |d: &Device| {
            let mut stats = Array1::<f32>::zeros(3 * m);
            let mut index = Array1::<i32>::zeros(2 * m);
            let mut soft = Array1::<f32>::zeros(m * n);
            row_stats::launch_with(
                d, 1, &opts, &mut stats, &mut index, &mut soft, &a, &b, valid, m, n, k,
            )
            .unwrap();
            (stats, index, soft)
        };
        let (stats, index, soft) = run(&Device::cuda_emulator());
        let (want_stats, want_index, want_soft) = run(&Device::interpreter());
        let what = format!("m={m} warps={num_warps} n={valid}");
        assert_close(&stats, &want_stats, 1e-5, 1e-5, &format!("{what}: stats"));
        assert_eq!(index, want_index, "{what}: argmax, argmin");
        assert_close(&soft, &want_soft, 1e-5, 1e-6, &format!("{what}: softmax"));
    }
}

/// Tutorial 06's forward pass with blocks the warps own by rows (the scores, `p`, the
/// running max and sum and the accumulator held in fragments across the key loop), on the
/// emulator against the interpreter, causal and not, with a partial last block.
/// `q`'s A fragments stay in registers (64 × 32 × 32, 32 × 16 × 16) or, 32 words a thread,
/// in shared memory kept for the loop (128 × 32 × 64); 48 × 32 takes tutorial 06's causal
/// stages without the diagonal band (48 is not a multiple of 32: every block masked).
/// Emulated as Hopper's code too (sm 90): both products on `wgmma` where a warpgroup's
/// rows fit (64 and 128 rows, 4 warps), `p` given in registers, `mma.sync` elsewhere.
#[rstest::rstest]
#[case(64, 32, 32, 4)]
#[case(32, 16, 16, 2)]
#[case(128, 32, 64, 4)]
#[case(48, 32, 16, 1)]
fn attention_in_fragments_emulated(
    #[case] block_m: usize,
    #[case] block_n: usize,
    #[case] d: usize,
    #[case] num_warps: u32,
    #[values(false, true)] causal: bool,
    #[values(80, 90)] sm: u32,
) {
    use half::f16;
    let n = 75;
    let shape = (1, 2, n, d);
    let random = |seed| {
        Array4::from_shape_vec(shape, random_f32(2 * n * d, seed))
            .unwrap()
            .mapv(f16::from_f32)
    };
    let (q, k, v) = (random(51), random(52), random(53));
    let config = AttentionConfig {
        block_m,
        block_n,
        causal,
    };
    let opts = tritium::LaunchOptions {
        num_warps,
        emulated_sm: Some(sm),
        ..Default::default()
    };
    let run = |device: &Device| {
        let mut out = Array4::from_elem(shape, f16::ZERO);
        let mut lse = ndarray::Array3::<f32>::zeros((1, 2, n));
        let grid = [n.div_ceil(config.block_m), 2];
        attention_forward::launch_with(
            device,
            grid,
            &opts,
            &mut out,
            &mut lse,
            q.view(),
            k.view(),
            v.view(),
            0.3,
            n as i32,
            config.block_m,
            config.block_n,
            d,
            config.causal,
        )
        .unwrap();
        (out.mapv(f32::from), lse)
    };
    tritium::backend::cuda::shared_memory_stats();
    let (out, lse) = run(&Device::cuda_emulator());
    let wgmma = tritium::backend::cuda::shared_memory_stats().wgmma;
    let (want, want_lse) = run(&Device::interpreter());
    let what = format!("{block_m}×{block_n} D={d} warps={num_warps} causal={causal} sm={sm}");
    let warpgroups =
        num_warps.is_multiple_of(4) && (block_m / 16).is_multiple_of(num_warps as usize);
    assert_eq!(wgmma > 0, sm == 90 && warpgroups, "{what}: {wgmma} wgmma");
    assert_close(&out, &want, 2e-3, 2e-3, &format!("{what}: out"));
    assert_close(&lse, &want_lse, 1e-5, 1e-5, &format!("{what}: lse"));
}

/// The PTX lines of the outermost loop (a label and the last branch back to it) holding
/// an `mma`.
fn mma_loop(ptx: &str) -> Vec<&str> {
    let lines: Vec<&str> = ptx.lines().map(str::trim).collect();
    let mut best: Option<(usize, usize)> = None;
    for (j, line) in lines.iter().enumerate() {
        let Some(target) = line
            .strip_prefix("bra.uni")
            .or_else(|| line.split("bra ").nth(1))
        else {
            continue;
        };
        let label = format!("{}:", target.trim().trim_end_matches(';'));
        let Some(i) = lines[..j].iter().position(|l| *l == label) else {
            continue;
        };
        let holds_mma = lines[i..j].iter().any(|l| l.starts_with("mma.sync"));
        if holds_mma && best.is_none_or(|(a, b)| j - i > b - a) {
            best = Some((i, j));
        }
    }
    let (i, j) = best.expect("a loop holding an mma");
    lines[i..=j].to_vec()
}

/// Tutorial 06's key loop at Triton's config (128 × 64, D = 64, 4 warps), specialized as
/// a launch at multiples of 16 is, keeps everything
/// in registers: no shared-memory loads or stores but `ldmatrix` and the `cp.async`
/// copies of `k` and `v` (`q` is read before the loop, `p` packed into A fragments), the
/// row max and sum by 16 butterfly shuffles (4 rows per lane, two reductions, two steps),
/// and 128 `mma`s per warp, as Triton's. (`scripts/dev gpu-report` shows 0 spills.)
#[test]
fn attention_loop_stays_in_registers() {
    // As a launch at multiples of 16 specializes it: aligned pointers, `n_ctx % 16 == 0`.
    let s = tritium::dsl::trace::Specialization {
        ones: vec![false; 7],
        sixteens: (0..7).map(|i| i != 5).collect(),
    };
    let f = attention_forward::trace::<half::f16>(&s, 128, 64, 64, false).unwrap();
    let options = tritium::backend::cuda::CudaCompileOptions {
        sm: 80,
        num_warps: 4,
        ..Default::default()
    };
    let ptx = tritium::backend::cuda::compile_ptx(&f, "k", &options)
        .unwrap()
        .text;
    let body = mma_loop(&ptx);
    let count = |prefix: &str| body.iter().filter(|l| l.starts_with(prefix)).count();
    assert_eq!(count("mma.sync"), 128);
    assert_eq!(count("ld.shared") + count("st.shared"), 0, "{body:#?}");
    assert_eq!(count("shfl.sync.bfly"), 16);
    assert_eq!(count("cp.async.cg.shared.global"), 8);
    // `kᵀ` (64 keys × D = 64) as Triton reads it: each `ldmatrix.x4` two k steps of one
    // n-tile, so that the 8 n-tiles of a pair of steps are constant offsets from one
    // address (2 addresses for the 4 steps, where a read per step and pair of n-tiles
    // gave every one of the 16 its own).
    let mut kt_bases = std::collections::BTreeMap::<&str, usize>::new();
    for line in body
        .iter()
        .filter(|l| l.starts_with("ldmatrix.sync.aligned.m8n8.x4.shared"))
    {
        let at = line.rsplit('[').next().expect("an address");
        if let Some((base, _)) = at.split_once('+') {
            *kt_bases.entry(base).or_default() += 1;
        }
    }
    assert_eq!(
        kt_bases.values().copied().collect::<Vec<_>>(),
        [8, 8],
        "{body:#?}"
    );
    assert!(!ptx.contains("ld.local") && !ptx.contains("st.local"));
    // After the loop the thread index is read again and the epilogue's index tiles are
    // computed from it (codegen `remat`), rather than kept live across the loop.
    let end = ptx
        .find(body.last().expect("the loop's branch"))
        .expect("in the PTX");
    assert!(ptx[end..].contains("%tid.x"), "{}", &ptx[end..]);
}

/// A tensor-core loop inside a runtime `if`, an index tile (`at`) used after the loop in
/// the branch and again after the branch: what is evaluated again after the loop (codegen
/// `remat`) serves only the rest of the branch (the fuzzer's seed 22 used it past the
/// branch: LLVM IR that did not verify).
#[kernel]
fn dot_loop_in_a_branch(
    out: Ptr<f32>,
    a: Ptr<half::f16>,
    b: Ptr<half::f16>,
    steps: i32,
    flag: i32,
    #[constexpr] S: usize,
) {
    let r = arange(0, S);
    let at = r[(.., None)] * S as i32 + r[(None, ..)];
    let mut acc = zeros([S, S], DType::F32);
    if flag > 0 {
        for i in range(0, steps) {
            acc = dot(load(a + at + i * (S * S) as i32), load(b + at), acc);
        }
        store(out + at, acc);
    }
    store(out + (S * S) as i32 + at, acc + 1.0);
}

#[test]
fn index_tiles_after_a_dot_loop_in_a_branch_emulated() {
    use half::f16;
    let s = 32;
    let a = Array1::from(random_f32(2 * s * s, 81)).mapv(f16::from_f32);
    let b = Array1::from(random_f32(s * s, 82)).mapv(f16::from_f32);
    for flag in [0, 1] {
        let run = |d: &Device| {
            let mut out = Array1::<f32>::zeros(2 * s * s);
            dot_loop_in_a_branch::launch(d, 1, &mut out, &a, &b, 2, flag, s).unwrap();
            out
        };
        let what = format!("flag {flag}");
        assert_close(
            &run(&Device::cuda_emulator()),
            &run(&Device::interpreter()),
            1e-4,
            1e-4,
            &what,
        );
    }
}

/// A loop whose `dot` takes a loop-invariant `a` (kept in shared memory for the loop when
/// nothing else in the body uses shared memory) and an accumulator that goes to fragments
/// through shared memory at every iteration (`base`, a loaded tile): `a` must then be
/// staged at every iteration instead, or the conversion overwrites it.
#[kernel]
fn invariant_a_onto_a_loaded_tile(
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
    let ta = load(a + at);
    let mut acc = zeros([S, S], DType::F32);
    for i in range(0, steps) {
        let tb = load(b + at + i * (S * S) as i32);
        acc = acc + dot(ta, tb, base);
    }
    store(out + at, acc);
}

#[test]
fn a_kept_for_the_loop_is_not_overwritten_emulated() {
    use half::f16;
    let s = 64;
    let a = Array1::from(random_f32(s * s, 91)).mapv(f16::from_f32);
    let b = Array1::from(random_f32(3 * s * s, 92)).mapv(f16::from_f32);
    let bias = Array1::from(random_f32(s * s, 93));
    let run = |d: &Device| {
        let mut out = Array1::<f32>::zeros(s * s);
        invariant_a_onto_a_loaded_tile::launch(d, 1, &mut out, &a, &b, &bias, 3, s).unwrap();
        out
    };
    let want = run(&Device::interpreter());
    assert_close(&run(&Device::cuda_emulator()), &want, 1e-4, 1e-4, "kept a");
}
