//! The fused Llama ops of `tritium-candle` against candle's own CPU ops, on Llama-7B-like
//! shapes in f32: `cargo run --release -p tritium-candle --example bench_candle` (or
//! `scripts/dev bench candle`).
//!
//! Each row times the Tritium op, candle's unfused composition of the same computation
//! (what a model written with candle's tensor ops runs: `rms_norm_slow`, `rope_slow`,
//! `silu(g) * u`, softmax as max/sub/exp/sum/div, `candle_nn::loss::cross_entropy`) and,
//! where candle has one, its own fused CPU op (`candle_nn::ops::rms_norm`,
//! `rotary_emb::rope`, `softmax_last_dim`). The candidates run alternated, round after
//! round, after one warm-up each (the Tritium kernels' compiles); each is reported as the
//! median of its rounds, and ratio = candle's time / Tritium's (> 1: Tritium is faster).
//! Rows marked "fwd+bwd" time the forward and the backward under candle's autograd
//! (`(y · g).sum_all().backward()`, or the loss's for cross-entropy) against candle's
//! autograd over its composition.
//!
//! Arguments: the number of rounds (default 15), and `--no-backward` to skip the
//! fwd+bwd rows.

use candle_core::{DType, Device, Result, Tensor, Var, D};
use std::time::{Duration, Instant};

/// A closure timed in the rounds.
type Run<'a> = Box<dyn FnMut() -> Result<()> + 'a>;

/// The median of each candidate's times over `rounds` rounds that run each once, in turn,
/// after one warm-up run each.
fn medians(rounds: usize, fs: &mut [Run<'_>]) -> Result<Vec<Duration>> {
    for f in fs.iter_mut() {
        f()?;
    }
    let mut times = vec![Vec::with_capacity(rounds); fs.len()];
    for _ in 0..rounds.max(1) {
        for (f, t) in fs.iter_mut().zip(times.iter_mut()) {
            let start = Instant::now();
            f()?;
            t.push(start.elapsed());
        }
    }
    Ok(times
        .into_iter()
        .map(|mut t| {
            t.sort();
            t[t.len() / 2]
        })
        .collect())
}

fn randn(shape: &[usize], seed: u64) -> Result<Tensor> {
    let n: usize = shape.iter().product();
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let v: Vec<f32> = (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32 * 4.0 - 2.0
        })
        .collect();
    Tensor::from_vec(v, shape, &Device::Cpu)
}

/// Llama's rotary tables for `t` positions and `half` pairs.
fn cos_sin(t: usize, half: usize) -> Result<(Tensor, Tensor)> {
    let inv: Vec<f32> = (0..half)
        .map(|i| 1.0 / 10000f32.powf(i as f32 / half as f32))
        .collect();
    let inv = Tensor::from_vec(inv, (1, half), &Device::Cpu)?;
    let pos = Tensor::arange(0u32, t as u32, &Device::Cpu)?
        .to_dtype(DType::F32)?
        .reshape((t, 1))?;
    let f = pos.broadcast_mul(&inv)?;
    Ok((f.cos()?, f.sin()?))
}

/// candle-nn's `softmax` over the last dim: max, subtract, exp, sum, divide.
fn softmax_composed(x: &Tensor) -> Result<Tensor> {
    candle_nn::ops::softmax(x, D::Minus1)
}

/// One row of the table.
struct Row {
    op: &'static str,
    shape: String,
    tritium: Duration,
    unfused: Duration,
    fused: Option<Duration>,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Times the forward of `ours`, `unfused` and `fused` (if any).
fn forward<'a>(
    rounds: usize,
    op: &'static str,
    shape: String,
    ours: impl FnMut() -> Result<Tensor> + 'a,
    unfused: impl FnMut() -> Result<Tensor> + 'a,
    fused: Option<Box<dyn FnMut() -> Result<Tensor> + 'a>>,
) -> Result<Row> {
    let run = |mut f: Box<dyn FnMut() -> Result<Tensor> + 'a>| -> Run<'a> {
        Box::new(move || f().map(|_| ()))
    };
    let mut fs = vec![run(Box::new(ours)), run(Box::new(unfused))];
    let has_fused = fused.is_some();
    if let Some(f) = fused {
        fs.push(run(f));
    }
    let t = medians(rounds, &mut fs)?;
    Ok(Row {
        op,
        shape,
        tritium: t[0],
        unfused: t[1],
        fused: has_fused.then(|| t[2]),
    })
}

/// Times the forward and backward (`(f(x) · g).sum_all().backward()`, or `f`'s own scalar
/// where `g` is `None`) of `ours` against `theirs`, both on `Var`s of `inputs`.
fn backward<'a>(
    rounds: usize,
    op: &'static str,
    shape: String,
    inputs: &'a [Tensor],
    g: Option<&'a Tensor>,
    ours: impl Fn(&[Tensor]) -> Result<Tensor> + 'a,
    theirs: impl Fn(&[Tensor]) -> Result<Tensor> + 'a,
) -> Result<Row> {
    let vars: Vec<Var> = inputs.iter().map(Var::from_tensor).collect::<Result<_>>()?;
    let step = move |f: &dyn Fn(&[Tensor]) -> Result<Tensor>, vars: &[Var]| -> Result<()> {
        let xs: Vec<Tensor> = vars.iter().map(|v| v.as_tensor().clone()).collect();
        let y = f(&xs)?;
        let loss = match g {
            Some(g) => (y * g)?.sum_all()?,
            None => y,
        };
        let grads = loss.backward()?;
        for v in vars {
            grads.get(v.as_tensor()).expect("a gradient");
        }
        Ok(())
    };
    let (v1, v2) = (vars.clone(), vars);
    let mut fs: Vec<Run<'a>> = vec![
        Box::new(move || step(&ours, &v1)),
        Box::new(move || step(&theirs, &v2)),
    ];
    let t = medians(rounds, &mut fs)?;
    Ok(Row {
        op,
        shape,
        tritium: t[0],
        unfused: t[1],
        fused: None,
    })
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rounds = (args.iter())
        .find_map(|a| a.parse::<usize>().ok())
        .unwrap_or(15);
    let with_backward = !args.iter().any(|a| a == "--no-backward");
    let mut rows = Vec::new();

    // RMSNorm, 512 rows of a 4096 hidden dim.
    let (x, w) = (randn(&[512, 4096], 1)?, randn(&[4096], 2)?);
    let eps = 1e-5;
    rows.push(forward(
        rounds,
        "RMSNorm",
        "512×4096".into(),
        || tritium_candle::rms_norm(&x, &w, eps),
        || candle_nn::ops::rms_norm_slow(&x, &w, eps),
        Some(Box::new(|| candle_nn::ops::rms_norm(&x, &w, eps))),
    )?);

    // RoPE, one sequence of 512 positions, 32 heads of 128.
    let (b, h, t, d) = (1usize, 32usize, 512usize, 128usize);
    let q = randn(&[b, h, t, d], 3)?;
    let (cos, sin) = cos_sin(t, d / 2)?;
    rows.push(forward(
        rounds,
        "RoPE",
        format!("({b},{h},{t},{d})"),
        || tritium_candle::rope(&q, &cos, &sin),
        || candle_nn::rotary_emb::rope_slow(&q, &cos, &sin),
        Some(Box::new(|| candle_nn::rotary_emb::rope(&q, &cos, &sin))),
    )?);
    // The same heads as attention's projections give them: (b, t, h, d) viewed as
    // (b, h, t, d). candle's fused op needs them contiguous: the copy is part of its time.
    let q_bthd = randn(&[b, t, h, d], 4)?;
    let q_view = q_bthd.transpose(1, 2)?;
    rows.push(forward(
        rounds,
        "RoPE, (b,t,h,d) view",
        format!("({b},{h},{t},{d})ᵀ"),
        || tritium_candle::rope(&q_view, &cos, &sin),
        || candle_nn::rotary_emb::rope_slow(&q_view, &cos, &sin),
        Some(Box::new(|| {
            candle_nn::rotary_emb::rope(&q_view.contiguous()?, &cos, &sin)
        })),
    )?);

    // SwiGLU, 512 rows of Llama-7B's 11008 intermediate dim.
    let (gate, up) = (randn(&[512, 11008], 5)?, randn(&[512, 11008], 6)?);
    rows.push(forward(
        rounds,
        "SwiGLU",
        "512×11008".into(),
        || tritium_candle::swiglu(&gate, &up),
        || candle_nn::ops::silu(&gate)? * &up,
        None,
    )?);

    // Softmax over a 32000 vocabulary, 512 rows.
    let logits = (randn(&[512, 32000], 7)? * 3.0)?;
    rows.push(forward(
        rounds,
        "softmax",
        "512×32000".into(),
        || tritium_candle::softmax_last_dim(&logits),
        || softmax_composed(&logits),
        Some(Box::new(|| candle_nn::ops::softmax_last_dim(&logits))),
    )?);

    // Cross-entropy over the same logits.
    let targets: Vec<u32> = (0..512u32).map(|i| (i * 7919) % 32000).collect();
    let targets = Tensor::new(targets, &Device::Cpu)?;
    rows.push(forward(
        rounds,
        "cross-entropy",
        "512×32000".into(),
        || tritium_candle::cross_entropy(&logits, &targets),
        || candle_nn::loss::cross_entropy(&logits, &targets),
        None,
    )?);

    if with_backward {
        let g_x = randn(&[512, 4096], 8)?;
        rows.push(backward(
            rounds,
            "RMSNorm fwd+bwd",
            "512×4096".into(),
            &[x.clone(), w.clone()][..],
            Some(&g_x),
            |v| tritium_candle::rms_norm(&v[0], &v[1], eps),
            |v| candle_nn::ops::rms_norm_slow(&v[0], &v[1], eps),
        )?);
        let g_q = randn(&[b, h, t, d], 9)?;
        let (c, s) = (cos.clone(), sin.clone());
        let (c2, s2) = (cos.clone(), sin.clone());
        rows.push(backward(
            rounds,
            "RoPE fwd+bwd",
            format!("({b},{h},{t},{d})"),
            &[q.clone()][..],
            Some(&g_q),
            move |v| tritium_candle::rope(&v[0], &c, &s),
            move |v| candle_nn::rotary_emb::rope_slow(&v[0], &c2, &s2),
        )?);
        let g_h = randn(&[512, 11008], 10)?;
        rows.push(backward(
            rounds,
            "SwiGLU fwd+bwd",
            "512×11008".into(),
            &[gate.clone(), up.clone()][..],
            Some(&g_h),
            |v| tritium_candle::swiglu(&v[0], &v[1]),
            |v| candle_nn::ops::silu(&v[0])? * &v[1],
        )?);
        let g_l = randn(&[512, 32000], 11)?;
        rows.push(backward(
            rounds,
            "softmax fwd+bwd",
            "512×32000".into(),
            &[logits.clone()][..],
            Some(&g_l),
            |v| tritium_candle::softmax_last_dim(&v[0]),
            |v| softmax_composed(&v[0]),
        )?);
        let (t1, t2) = (targets.clone(), targets.clone());
        rows.push(backward(
            rounds,
            "cross-entropy fwd+bwd",
            "512×32000".into(),
            &[logits.clone()][..],
            None,
            move |v| tritium_candle::cross_entropy(&v[0], &t1),
            move |v| candle_nn::loss::cross_entropy(&v[0], &t2),
        )?);
    }

    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "tritium-candle fused ops vs candle's CPU ops, f32, median of {rounds} alternated rounds, \
         {threads} cores (ratio = candle / Tritium)"
    );
    println!();
    println!(
        "| op | shape | Tritium (ms) | candle unfused (ms) | ratio | candle fused (ms) | ratio |"
    );
    println!("| --- | --- | ---: | ---: | ---: | ---: | ---: |");
    for r in &rows {
        let (fused, fused_ratio) = match r.fused {
            Some(f) => (
                format!("{:.2}", ms(f)),
                format!("{:.2}×", ms(f) / ms(r.tritium)),
            ),
            None => ("–".into(), "–".into()),
        };
        println!(
            "| {} | {} | {:.2} | {:.2} | {:.2}× | {} | {} |",
            r.op,
            r.shape,
            ms(r.tritium),
            ms(r.unfused),
            ms(r.unfused) / ms(r.tritium),
            fused,
            fused_ratio
        );
    }
    Ok(())
}
