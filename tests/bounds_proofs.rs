//! Launch-time bounds proofs (`dsl::ir::bounds_proof`): which access sites of the kernels
//! of `tritium-kernels` the proof covers, and what it concludes for right and wrong launches.

use half::f16;
use tritium::dsl::ir::{bounds_proof, Function, LaunchValues, SiteProof};
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
        // Tutorial 08 reads its matrices through pointers loaded from tables: checked.
        (
            "08 grouped GEMM",
            grouped_gemm::grouped_matmul::trace::<f16>(&s, 4, 32, 32, 32).unwrap(),
            &["54 load", "59 load", "68 store"],
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
