//! Launch-time bounds proofs (`dsl::ir::bounds_proof`): which access sites of the kernels
//! of `tritium-kernels` the proof covers, and what it concludes for right and wrong launches.

use half::f16;
use tritium::dsl::ir::{
    bounds_proof, DType, Entry, Function, LaunchMemory, LaunchValues, ProofWorkspace, SiteProof,
    Verdict,
};
use tritium::dsl::trace::Specialization;
use tritium_kernels::*;

/// A launch argument, by parameter name.
#[derive(Clone, Copy)]
enum Arg {
    /// An integer scalar.
    Int(i64),
    /// A buffer of this many elements.
    Buf(usize),
}

/// The sites a launch of `f` with these arguments leaves unproven, as `line: kind`.
fn unproven(f: &Function, grid: [u32; 3], args: &[(&str, Arg)]) -> Vec<String> {
    let mut scalars = vec![None; f.params.len()];
    let mut spans = vec![None; f.params.len()];
    for (i, p) in f.params.iter().enumerate() {
        let Some((_, a)) = args.iter().find(|(n, _)| *n == p.name) else {
            continue;
        };
        match *a {
            Arg::Int(v) => scalars[i] = Some(i128::from(v)),
            Arg::Buf(n) => {
                let size = f
                    .ty(p.value)
                    .elem
                    .pointee()
                    .expect("a pointer")
                    .size_bytes();
                spans[i] = Some((0, (n * size) as i128));
            }
        }
    }
    let proof = bounds_proof(f);
    let launch = LaunchValues {
        grid,
        scalars: &scalars,
        spans: &spans,
        views: &[],
        memory: None,
    };
    let sites = f.fault_sites();
    (proof.check(&launch).into_iter())
        .map(|s| {
            let (loc, kind) = &sites[s as usize];
            format!(
                "{}:{} {kind}",
                loc.file.rsplit('/').next().unwrap_or(""),
                loc.line
            )
        })
        .collect()
}

/// The sites no launch can prove.
fn unprovable(f: &Function) -> Vec<String> {
    let sites = f.fault_sites();
    (bounds_proof(f).sites().iter().enumerate())
        .filter_map(|(i, s)| match s {
            SiteProof::Unproven(why) => Some(format!("{} {}: {why}", sites[i].0.line, sites[i].1)),
            _ => None,
        })
        .collect()
}

fn spec() -> Specialization {
    Specialization::default()
}

#[test]
fn vector_add_is_proven_for_right_launches_only() {
    use Arg::*;
    let f = vector_add::add::trace::<f32>(&spec(), 1024).unwrap();
    assert_eq!(unprovable(&f), Vec::<String>::new());
    let n: usize = 5000;
    let grid = [n.div_ceil(1024) as u32, 1, 1];
    let ok = [
        ("out", Buf(n)),
        ("x", Buf(n)),
        ("y", Buf(n)),
        ("n", Int(n as i64)),
    ];
    assert_eq!(unproven(&f, grid, &ok), Vec::<String>::new());
    let short_out = [
        ("out", Buf(n - 1)),
        ("x", Buf(n)),
        ("y", Buf(n)),
        ("n", Int(n as i64)),
    ];
    assert_eq!(
        unproven(&f, grid, &short_out).len(),
        1,
        "{:?}",
        unproven(&f, grid, &short_out)
    );
    let n_past = [
        ("out", Buf(n)),
        ("x", Buf(n)),
        ("y", Buf(n)),
        ("n", Int(n as i64 + 1)),
    ];
    assert_eq!(unproven(&f, grid, &n_past).len(), 3);
    let empty = [("out", Buf(n)), ("x", Buf(0)), ("y", Buf(n)), ("n", Int(8))];
    assert_eq!(unproven(&f, grid, &empty).len(), 1);
}

/// Every kernel of `tritium-kernels` with its access sites the bounds proof cannot cover
/// (checked at run time in every launch; every other site is proven or checked per launch).
/// Triton's tutorials 01, 02, 03, 05, 06 (forward and backward) and 09 have none.
#[test]
fn every_kernel_lists_its_proven_and_checked_sites() {
    use custom_add::AddOp;
    let s = spec();
    let none: &[&str] = &[];
    let table: Vec<(&str, Function, &[&str])> = vec![
        (
            "01 vector add",
            vector_add::add::trace::<f32>(&s, 1024).unwrap(),
            none,
        ),
        (
            "02 softmax",
            softmax::softmax::trace::<f32>(&s, 1024).unwrap(),
            none,
        ),
        (
            "03 matmul",
            matmul::matmul::trace::<f32, f32>(&s, 64, 64, 32).unwrap(),
            none,
        ),
        (
            "03 matmul, grouped",
            matmul::matmul_grouped::trace::<f16, f32>(&s, 64, 64, 32, 8).unwrap(),
            none,
        ),
        (
            "04 dropout",
            dropout::seeded_dropout::trace(&s, 1024).unwrap(),
            none,
        ),
        (
            "05 layer norm",
            layer_norm::layer_norm_fwd::trace::<f32>(&s, 1024).unwrap(),
            none,
        ),
        (
            "05 layer norm dx",
            layer_norm::layer_norm_bwd_dx::trace::<f32>(&s, 1024).unwrap(),
            none,
        ),
        (
            "05 layer norm dw db",
            layer_norm::layer_norm_bwd_dwdb::trace::<f32>(&s, 32, 64).unwrap(),
            none,
        ),
        (
            "06 attention",
            attention::attention_forward::trace::<f16>(&s, 64, 32, 64, false).unwrap(),
            none,
        ),
        (
            "06 attention, causal",
            attention::attention_forward::trace::<f16>(&s, 64, 32, 64, true).unwrap(),
            none,
        ),
        (
            "06 attention delta",
            attention::attention_backward_delta::trace::<f16>(&s, 64, 64).unwrap(),
            none,
        ),
        (
            "06 attention dk dv",
            attention::attention_backward_dkdv::trace::<f16>(&s, 32, 64, 64, true).unwrap(),
            none,
        ),
        (
            "06 attention dq",
            attention::attention_backward_dq::trace::<f16>(&s, 64, 32, 64, true).unwrap(),
            none,
        ),
        // Tutorial 08 reads its matrices through pointers loaded from tables, its sizes and
        // strides from arrays: proven by enumerating its groups with what it reads.
        (
            "08 grouped GEMM",
            grouped_gemm::grouped_matmul::trace::<f16>(&s, 4, 32, 32, 32).unwrap(),
            none,
        ),
        (
            "09 persistent matmul",
            matmul::matmul_persistent::trace::<f16, f32>(&s, 64, 64, 32, 8, 4).unwrap(),
            none,
        ),
        (
            "rms norm",
            rms_norm::rms_norm_fwd::trace::<f32>(&s, 1024).unwrap(),
            none,
        ),
        (
            "rms norm backward",
            rms_norm::rms_norm_bwd::trace::<f32>(&s, 1024).unwrap(),
            none,
        ),
        (
            "rms norm dw column sums",
            rms_norm::rms_norm_bwd_dw::trace::<f32>(&s, 16, 128).unwrap(),
            none,
        ),
        (
            "rope",
            rope::rope::trace::<f32>(&s, false, 32, 64).unwrap(),
            none,
        ),
        (
            "rope backward",
            rope::rope::trace::<f32>(&s, true, 32, 64).unwrap(),
            none,
        ),
        (
            "swiglu",
            swiglu::swiglu_fwd::trace::<f32>(&s, 4096).unwrap(),
            none,
        ),
        (
            "swiglu backward",
            swiglu::swiglu_bwd::trace::<f32>(&s, 4096).unwrap(),
            none,
        ),
        (
            "softmax backward",
            softmax::softmax_bwd::trace::<f32>(&s, 1024).unwrap(),
            none,
        ),
        // The target's logit is read at a column loaded from `target`: checked.
        (
            "cross entropy",
            cross_entropy::cross_entropy_fwd::trace::<f32>(&s, 2048).unwrap(),
            &["48 load"],
        ),
        (
            "cross entropy backward",
            cross_entropy::cross_entropy_bwd::trace::<f32>(&s, 2048).unwrap(),
            none,
        ),
        (
            "cross entropy mean",
            cross_entropy::cross_entropy_mean::trace(&s, 1024).unwrap(),
            none,
        ),
        (
            "attention over a kv cache",
            attention_cached::attention_cached::trace::<f32>(&s, 4, 16, 64, 64).unwrap(),
            none,
        ),
        (
            "kv cache write",
            attention_cached::kv_cache_write::trace::<f32>(&s, 64).unwrap(),
            none,
        ),
        // A token id is data: the table row it reads is a gather.
        (
            "embedding",
            embedding::embedding::trace::<f32>(&s, 512).unwrap(),
            &["20 load"],
        ),
        (
            "linear (x wᵀ, K = 512)",
            linear::linear::trace::<f32, f32>(&s, 512, 64, 128, 64).unwrap(),
            none,
        ),
        (
            "linear, K not a multiple of BK",
            linear::linear::trace::<f32, f32>(&s, 45, 64, 128, 64).unwrap(),
            none,
        ),
        (
            "matvec",
            matvec::matvec::trace::<f32, f32>(&s, 8, 128, false).unwrap(),
            none,
        ),
        (
            "matvec even",
            matvec::matvec::trace::<f32, f32>(&s, 8, 128, true).unwrap(),
            none,
        ),
        (
            "sample tokens",
            sampling::sample_tokens::trace(&s, false, 1024).unwrap(),
            none,
        ),
        (
            "sigmoid gated",
            activation::sigmoid_gated::trace::<f32>(&s, 256).unwrap(),
            none,
        ),
        (
            "gelu",
            activation::gelu_erf::trace::<f32>(&s, 256).unwrap(),
            none,
        ),
        // A histogram's bins are data: its atomic is a scatter.
        (
            "histogram",
            misc::histogram::trace(&s, 256).unwrap(),
            &["12 atomic"],
        ),
        ("row stats", misc::row_stats::trace(&s, 256).unwrap(), none),
        ("collatz", misc::collatz::trace(&s, 256).unwrap(), none),
        (
            "custom add",
            custom_add::custom_add::trace::<f32>(&s, 1024, AddOp::Simd).unwrap(),
            none,
        ),
        (
            "custom add blocked",
            custom_add::custom_add_blocked::trace::<f32>(&s, 256, AddOp::Simt).unwrap(),
            none,
        ),
        (
            "custom divmod",
            custom_add::custom_divmod::trace(&s, 256, true).unwrap(),
            none,
        ),
        (
            "custom scale",
            custom_add::custom_scale::trace::<f32>(&s, 16, 16, true).unwrap(),
            none,
        ),
        (
            "custom add reversed",
            custom_add::custom_add_reversed::trace::<f32>(&s, 256).unwrap(),
            none,
        ),
        (
            "custom cumsum",
            custom_overrides::custom_cumsum::trace(&s, 256).unwrap(),
            none,
        ),
        (
            "custom widen mul",
            custom_overrides::custom_widen_mul::trace(&s, 256).unwrap(),
            none,
        ),
    ];
    let mut wrong = Vec::new();
    for (name, f, want) in &table {
        let sites = f.fault_sites();
        let got: Vec<String> = (bounds_proof(f).sites().iter().enumerate())
            .filter(|(_, p)| matches!(p, SiteProof::Unproven(_)))
            .map(|(i, _)| format!("{} {}", sites[i].0.line, sites[i].1))
            .collect();
        println!("{name:<24} {} sites, checked: {got:?}", sites.len());
        if got != *want {
            wrong.push(format!(
                "{name}: checked {got:?}, want {want:?}: {:?}",
                unprovable(f)
            ));
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

/// Every site of a right launch is proven, and one element short of what it touches is not.
#[test]
fn right_launches_of_the_tutorial_kernels_are_proven_exactly() {
    use Arg::*;
    let s = spec();
    let cdiv = |a: usize, b: usize| a.div_ceil(b) as u32;
    // (kernel, function, grid, arguments, the buffer that is shortened by one element)
    type Case = (
        &'static str,
        Function,
        [u32; 3],
        Vec<(&'static str, Arg)>,
        &'static str,
    );
    let (m, n, k) = (100usize, 70usize, 45usize);
    let mm = |c| -> Vec<(&'static str, Arg)> {
        vec![
            ("c", Buf(m * n)),
            ("a", Buf(m * k)),
            ("b", Buf(k * n)),
            ("m", Int(m as i64)),
            ("n", Int(n as i64)),
            ("k", Int(k as i64)),
            ("stride_am", Int(k as i64)),
            ("stride_ak", Int(1)),
            ("stride_bk", Int(n as i64)),
            ("stride_bn", Int(1)),
            ("stride_cm", Int(n as i64)),
            ("stride_cn", Int(c)),
        ]
    };
    let (rows, cols) = (37usize, 300usize);
    let (z, h, ctx, d) = (2usize, 3usize, 100usize, 64usize);
    let qkv = z * h * ctx * d;
    let attn: Vec<(&str, Arg)> = vec![
        ("out", Buf(qkv)),
        ("lse", Buf(z * h * ctx)),
        ("q", Buf(qkv)),
        ("k", Buf(qkv)),
        ("v", Buf(qkv)),
        ("n_ctx", Int(ctx as i64)),
    ];
    // 2 sequences, 8 query heads over 2 KV heads of 64, 7 new positions after 13 cached
    // fill the cache's 20: q strided as the projection's `[B, T, H, D]` read as `[B, H, T, D]`.
    let kv_cache: Vec<(&str, Arg)> = vec![
        ("out", Buf(2 * 7 * 8 * 64)),
        ("q", Buf(2 * 7 * 8 * 64)),
        ("k_cache", Buf(2 * 2 * 20 * 64)),
        ("v_cache", Buf(2 * 2 * 20 * 64)),
        ("sq_b", Int(7 * 8 * 64)),
        ("sq_h", Int(64)),
        ("sq_t", Int(8 * 64)),
        ("n_new", Int(7)),
        ("pos", Int(13)),
        ("l_max", Int(20)),
        ("heads_kv", Int(2)),
    ];
    let cases: Vec<Case> = vec![
        (
            "matmul",
            matmul::matmul::trace::<f32, f32>(&s, 32, 16, 16).unwrap(),
            [cdiv(m, 32), cdiv(n, 16), 1],
            mm(1),
            "c",
        ),
        (
            "matmul_grouped",
            matmul::matmul_grouped::trace::<f16, f32>(&s, 32, 16, 16, 4).unwrap(),
            [cdiv(m, 32) * cdiv(n, 16), 1, 1],
            mm(1),
            "a",
        ),
        (
            "matmul_persistent",
            matmul::matmul_persistent::trace::<f16, f32>(&s, 32, 16, 16, 4, 3).unwrap(),
            [3, 1, 1],
            mm(1),
            "b",
        ),
        (
            "softmax",
            softmax::softmax::trace::<f32>(&s, 512).unwrap(),
            [rows as u32, 1, 1],
            vec![
                ("out", Buf(rows * cols)),
                ("input", Buf(rows * cols)),
                ("in_stride", Int(cols as i64)),
                ("out_stride", Int(cols as i64)),
                ("n_cols", Int(cols as i64)),
            ],
            "input",
        ),
        (
            "rope, x transposed from (b, t, h, d)",
            rope::rope::trace::<f32>(&s, false, 16, 64).unwrap(),
            [cdiv(ctx, 16), (z * h) as u32, 1],
            vec![
                ("out", Buf(qkv)),
                ("x", Buf(qkv)),
                ("cos", Buf(ctx * d / 2)),
                ("sin", Buf(ctx * d / 2)),
                ("heads", Int(h as i64)),
                ("t", Int(ctx as i64)),
                ("half", Int(d as i64 / 2)),
                ("sx_b", Int((ctx * h * d) as i64)),
                ("sx_h", Int(d as i64)),
                ("sx_t", Int((h * d) as i64)),
                ("cs_b", Int(0)),
                ("cs_t", Int(d as i64 / 2)),
            ],
            "x",
        ),
        (
            "layer_norm_fwd",
            layer_norm::layer_norm_fwd::trace::<f32>(&s, 128).unwrap(),
            [rows as u32, 1, 1],
            vec![
                ("x", Buf(rows * cols)),
                ("y", Buf(rows * cols)),
                ("w", Buf(cols)),
                ("b", Buf(cols)),
                ("mean", Buf(rows)),
                ("rstd", Buf(rows)),
                ("stride", Int(cols as i64)),
                ("n", Int(cols as i64)),
            ],
            "mean",
        ),
        (
            "layer_norm_bwd_dwdb",
            layer_norm::layer_norm_bwd_dwdb::trace::<f32>(&s, 32, 64).unwrap(),
            [cdiv(cols, 64), 1, 1],
            vec![
                ("dw", Buf(cols)),
                ("db", Buf(cols)),
                ("dw_rows", Buf(rows * cols)),
                ("db_rows", Buf(rows * cols)),
                ("rows", Int(rows as i64)),
                ("n", Int(cols as i64)),
            ],
            "db_rows",
        ),
        (
            "attention_forward",
            attention::attention_forward::trace::<f16>(&s, 64, 32, 64, false).unwrap(),
            [cdiv(ctx, 64), (z * h) as u32, 1],
            attn.clone(),
            "v",
        ),
        (
            "attention_forward causal",
            attention::attention_forward::trace::<f16>(&s, 64, 32, 64, true).unwrap(),
            [cdiv(ctx, 64), (z * h) as u32, 1],
            attn.clone(),
            "lse",
        ),
        (
            "attention over a kv cache (prefill at 13, GQA 4)",
            attention_cached::attention_cached::trace::<f32>(&s, 4, 16, 16, 64).unwrap(),
            [cdiv(7 * 4, 16), (2 * 2) as u32, 1],
            kv_cache.clone(),
            "k_cache",
        ),
        (
            "attention over a kv cache, q",
            attention_cached::attention_cached::trace::<f32>(&s, 4, 16, 16, 64).unwrap(),
            [cdiv(7 * 4, 16), (2 * 2) as u32, 1],
            kv_cache.clone(),
            "q",
        ),
        (
            "linear",
            linear::linear::trace::<f32, f32>(&s, k, 32, 16, 16).unwrap(),
            [cdiv(m, 32), cdiv(n, 16), 1],
            vec![
                ("y", Buf(m * n)),
                ("x", Buf(m * k)),
                ("w", Buf(n * k)),
                ("m", Int(m as i64)),
                ("n", Int(n as i64)),
            ],
            "w",
        ),
        (
            "matvec",
            matvec::matvec::trace::<f32, f32>(&s, 8, 128, false).unwrap(),
            [cdiv(n, 8), 3, 1],
            vec![
                ("y", Buf(3 * n)),
                ("x", Buf(3 * k)),
                ("w", Buf(n * k)),
                ("n", Int(n as i64)),
                ("k", Int(k as i64)),
                ("stride_x", Int(k as i64)),
                ("stride_w", Int(k as i64)),
                ("stride_y", Int(n as i64)),
            ],
            "w",
        ),
    ];
    for (name, f, grid, args, shortened) in cases {
        assert_eq!(unproven(&f, grid, &args), Vec::<String>::new(), "{name}");
        let short: Vec<(&str, Arg)> = (args.iter())
            .map(|(p, a)| match a {
                Buf(len) if *p == shortened => (*p, Buf(len - 1)),
                a => (*p, *a),
            })
            .collect();
        assert!(
            !unproven(&f, grid, &short).is_empty(),
            "{name} with `{shortened}` short"
        );
    }
}

/// Tutorial 08's arguments as its proof reads them: pointer tables of `(entries' spans in
/// bytes, writable)` and integer arrays, by parameter.
struct Groups {
    tables: Vec<(usize, Vec<(i128, bool)>)>,
    arrays: Vec<(usize, Vec<i32>)>,
}

impl LaunchMemory for Groups {
    fn read(&self, param: usize, offset: i128, dtype: DType) -> Option<i128> {
        let (_, a) = self.arrays.iter().find(|(p, _)| *p == param)?;
        if dtype != DType::I32 || offset % 4 != 0 || offset < 0 {
            return None;
        }
        a.get(usize::try_from(offset / 4).ok()?)
            .map(|v| i128::from(*v))
    }

    fn entry(&self, param: usize, offset: i128) -> Option<Entry> {
        let (_, t) = self.tables.iter().find(|(p, _)| *p == param)?;
        if offset % 8 != 0 || offset < 0 {
            return None;
        }
        let (bytes, writable) = *t.get(usize::try_from(offset / 8).ok()?)?;
        Some(Entry {
            span: (0, bytes),
            writable,
        })
    }
}

/// The sites of tutorial 08 a launch over `problems` (`(m, k, n)`, row-major) leaves
/// unproven, with `edit` applied to its memory first.
fn grouped_unproven(
    f: &Function,
    problems: &[(usize, usize, usize)],
    programs: u32,
    edit: impl FnOnce(&mut Groups),
) -> Vec<String> {
    let g = problems.len();
    let param = |name: &str| f.params.iter().position(|p| p.name == name).unwrap();
    let span = |e: usize| (e * 2) as i128;
    let mut memory = Groups {
        tables: vec![
            (
                param("group_a_ptrs"),
                problems
                    .iter()
                    .map(|&(m, k, _)| (span(m * k), false))
                    .collect(),
            ),
            (
                param("group_b_ptrs"),
                problems
                    .iter()
                    .map(|&(_, k, n)| (span(k * n), false))
                    .collect(),
            ),
            (
                param("group_c_ptrs"),
                problems
                    .iter()
                    .map(|&(m, _, n)| (span(m * n), true))
                    .collect(),
            ),
        ],
        arrays: vec![
            (
                param("group_gemm_sizes"),
                problems
                    .iter()
                    .flat_map(|&(m, k, n)| [m, n, k])
                    .map(|v| v as i32)
                    .collect(),
            ),
            (
                param("g_lds"),
                problems
                    .iter()
                    .flat_map(|&(_, k, n)| [k, n, n])
                    .map(|v| v as i32)
                    .collect(),
            ),
        ],
    };
    edit(&mut memory);
    let mut scalars = vec![None; f.params.len()];
    let mut spans = vec![None; f.params.len()];
    for (p, t) in &memory.tables {
        spans[*p] = Some((0, 8 * t.len() as i128));
    }
    for (p, a) in &memory.arrays {
        spans[*p] = Some((0, 4 * a.len() as i128));
    }
    scalars[param("group_size")] = Some(g as i128);
    let proof = bounds_proof(f);
    let launch = LaunchValues {
        grid: [programs, 1, 1],
        scalars: &scalars,
        spans: &spans,
        views: &[],
        memory: Some(&memory),
    };
    let sites = f.fault_sites();
    (proof.check(&launch).into_iter())
        .map(|s| format!("{} {}", sites[s as usize].0.line, sites[s as usize].1))
        .collect()
}

/// A workspace and verdict kept from launch to launch (as a kernel's launches keep them)
/// give every launch the verdict a fresh evaluation gives, whatever launch came before.
#[test]
fn a_kept_workspace_gives_each_launch_its_own_verdict() {
    let f = grouped_gemm::grouped_matmul::trace::<f16>(&spec(), 4, 32, 32, 16).unwrap();
    let proof = bounds_proof(&f);
    let problems: [(usize, usize, usize); 3] = [(33, 40, 17), (64, 32, 64), (5, 70, 1)];
    let param = |name: &str| f.params.iter().position(|p| p.name == name).unwrap();
    let memory = |short: usize| Groups {
        tables: vec![
            (
                param("group_a_ptrs"),
                problems
                    .iter()
                    .map(|&(m, k, _)| ((2 * m * k) as i128, false))
                    .collect(),
            ),
            (
                param("group_b_ptrs"),
                problems
                    .iter()
                    .map(|&(_, k, n)| ((2 * k * n) as i128 - short as i128, false))
                    .collect(),
            ),
            (
                param("group_c_ptrs"),
                problems
                    .iter()
                    .map(|&(m, _, n)| ((2 * m * n) as i128, true))
                    .collect(),
            ),
        ],
        arrays: vec![
            (
                param("group_gemm_sizes"),
                problems
                    .iter()
                    .flat_map(|&(m, k, n)| [m, n, k])
                    .map(|v| v as i32)
                    .collect(),
            ),
            (
                param("g_lds"),
                problems
                    .iter()
                    .flat_map(|&(_, k, n)| [k, n, n])
                    .map(|v| v as i32)
                    .collect(),
            ),
        ],
    };
    let (mut workspace, mut kept) = (ProofWorkspace::default(), Verdict::default());
    for (short, groups, programs) in [
        (0, 3, 4),
        (2, 3, 4),
        (0, 3, 1),
        (0, 1, 4),
        (2, 2, 40),
        (0, 3, 4),
    ] {
        let memory = memory(short);
        let mut scalars = vec![None; f.params.len()];
        let mut spans = vec![None; f.params.len()];
        for (p, t) in &memory.tables {
            spans[*p] = Some((0, 8 * t.len() as i128));
        }
        for (p, a) in &memory.arrays {
            spans[*p] = Some((0, 4 * a.len() as i128));
        }
        scalars[param("group_size")] = Some(groups);
        let launch = LaunchValues {
            grid: [programs, 1, 1],
            scalars: &scalars,
            spans: &spans,
            views: &[],
            memory: Some(&memory),
        };
        proof.verdict_with(&launch, &mut workspace, &mut kept);
        let fresh = proof.verdict(&launch);
        assert_eq!(
            kept, fresh,
            "b short by {short}, {groups} groups, {programs} programs"
        );
        assert_eq!(fresh.unproven.is_empty(), short == 0);
    }
}

/// Tutorial 08 is proven by enumerating its groups at launch with the pointers, sizes and
/// strides it reads; an entry one element short, a size past its matrix, or a read-only
/// output leaves the accesses it concerns checked.
#[test]
fn grouped_gemm_is_proven_with_what_it_reads() {
    let f = grouped_gemm::grouped_matmul::trace::<f16>(&spec(), 4, 32, 32, 16).unwrap();
    let problems = [(33, 40, 17), (64, 32, 64), (5, 70, 1), (1, 1, 1)];
    let none: Vec<String> = Vec::new();
    assert_eq!(grouped_unproven(&f, &problems, 4, |_| {}), none);
    // Any number of programs (some with no tile).
    assert_eq!(grouped_unproven(&f, &problems, 1, |_| {}), none);
    assert_eq!(grouped_unproven(&f, &problems, 40, |_| {}), none);
    // No groups.
    assert_eq!(grouped_unproven(&f, &[], 4, |_| {}), none);
    let a = ["54 load"];
    let b = ["59 load"];
    let c = ["68 store"];
    // The third group's `a` one element short.
    let got = grouped_unproven(&f, &problems, 4, |m| m.tables[0].1[2].0 -= 2);
    assert_eq!(got, a);
    // The first group's `b` and `c` one element short.
    let got = grouped_unproven(&f, &problems, 4, |m| m.tables[1].1[0].0 -= 2);
    assert_eq!(got, b);
    let got = grouped_unproven(&f, &problems, 4, |m| m.tables[2].1[0].0 -= 2);
    assert_eq!(got, c);
    // A read-only output.
    let got = grouped_unproven(&f, &problems, 4, |m| m.tables[2].1[3].1 = false);
    assert_eq!(got, c);
    // The second group's m one larger: its `a` and `c` rows past their ends.
    let got = grouped_unproven(&f, &problems, 4, |m| m.arrays[0].1[3] += 1);
    assert_eq!(got, [a[0], c[0]]);
    // Its k: `a`'s columns and `b`'s rows.
    let got = grouped_unproven(&f, &problems, 4, |m| m.arrays[0].1[5] += 1);
    assert_eq!(got, [a[0], b[0]]);
    // A row stride one larger.
    let got = grouped_unproven(&f, &problems, 4, |m| m.arrays[1].1[1] += 1);
    assert_eq!(got, b);
    // A table without the last group's entry: the table's load and the pointer's.
    let got = grouped_unproven(&f, &problems, 4, |m| {
        m.tables[0].1.pop();
    });
    assert_eq!(got, ["42 load", a[0]]);
    // Arrays one group short: their loads, and everything that needs what they hold.
    let got = grouped_unproven(&f, &problems, 4, |m| {
        m.arrays[0].1.truncate(9);
    });
    assert_eq!(got, ["33 load", "34 load", "35 load", a[0], b[0], c[0]]);
    let got = grouped_unproven(&f, &problems[..2], 4, |m| {
        m.arrays[1].1.truncate(3);
    });
    assert_eq!(got, ["39 load", "40 load", "41 load", a[0], b[0], c[0]]);
    // Without the memory: what it reads is unknown.
    let sites = f.fault_sites();
    let proof = bounds_proof(&f);
    let spans = vec![Some((0, 1 << 20)); 5]
        .into_iter()
        .chain([None])
        .collect::<Vec<_>>();
    let scalars = [None, None, None, None, None, Some(4)];
    let launch = LaunchValues {
        grid: [4, 1, 1],
        scalars: &scalars,
        spans: &spans,
        views: &[],
        memory: None,
    };
    let got: Vec<String> = (proof.check(&launch).into_iter())
        .map(|s| format!("{} {}", sites[s as usize].0.line, sites[s as usize].1))
        .collect();
    assert_eq!(got, [a[0], b[0], c[0]]);
}
