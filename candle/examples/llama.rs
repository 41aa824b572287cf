//! A Llama-style decoder built from Tritium kernels on candle tensors: prefill, the loss of
//! the prompt, then decode, with tokens/s. Without a checkpoint it writes a random one
//! (4 layers, hidden 512, 8 heads over 2 KV heads, vocab 32000; fixed seed) as
//! `config.json` and `model.safetensors`, then reads it back as it would read yours.
//!
//! ```text
//! cargo run --release -p tritium-candle --example llama                # random weights
//! cargo run --release -p tritium-candle --example llama -- --dir PATH  # a HF checkpoint
//! cargo run --release -p tritium-candle --example llama -- --compare   # vs candle-transformers
//! ```
//!
//! Options: `--prompt N` tokens (128), `--steps N` decode steps (32), `--temperature T`
//! (0.8; 0 is greedy), `--seed S`, `--dtype f32|bf16|f16` (the random weights' dtype, in
//! `target/llama-small-<dtype>` unless `--dir`; a checkpoint's own dtype otherwise),
//! `--compare` (the same weights in candle-transformers' Llama in the weights' dtype,
//! on the same device, timed alternately with this one), `--cuda` (both models on CUDA
//! device 0: needs the crate's `cuda` feature and a GPU; each phase's time ends with the
//! device synchronized).

use candle_core::{DType, Device, Tensor};
use candle_transformers::models::llama as reference;
use std::path::PathBuf;
use std::time::Instant;
use tritium_candle::llama::kernels::Sampling;
use tritium_candle::llama::{weights, Config, Llama};

struct Args {
    dir: PathBuf,
    prompt: usize,
    steps: usize,
    temperature: f32,
    seed: u64,
    compare: bool,
    cuda: bool,
    dtype: DType,
}

fn args() -> Result<Args, String> {
    let mut a = Args {
        dir: PathBuf::from("target/llama-small"),
        prompt: 128,
        steps: 32,
        temperature: 0.8,
        seed: 2026,
        compare: false,
        cuda: false,
        dtype: DType::F32,
    };
    let mut dir = None;
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--dir" => dir = Some(PathBuf::from(value()?)),
            "--dtype" => {
                a.dtype = match value()?.as_str() {
                    "f32" => DType::F32,
                    "bf16" => DType::BF16,
                    "f16" => DType::F16,
                    other => return Err(format!("--dtype: f32, bf16 or f16, not `{other}`")),
                }
            }
            "--prompt" => a.prompt = value()?.parse().map_err(|e| format!("--prompt: {e}"))?,
            "--steps" => a.steps = value()?.parse().map_err(|e| format!("--steps: {e}"))?,
            "--temperature" => {
                a.temperature = value()?
                    .parse()
                    .map_err(|e| format!("--temperature: {e}"))?
            }
            "--seed" => a.seed = value()?.parse().map_err(|e| format!("--seed: {e}"))?,
            "--compare" => a.compare = true,
            "--cuda" => a.cuda = true,
            other => return Err(format!("unknown option {other} (see the example's doc)")),
        }
    }
    a.dir = dir.unwrap_or_else(|| match a.dtype {
        DType::F32 => a.dir.clone(),
        d => PathBuf::from(format!("target/llama-small-{}", d.as_str())),
    });
    if a.prompt < 2 {
        return Err("--prompt must be at least 2 tokens (the loss needs a next token)".into());
    }
    Ok(a)
}

/// What one run measured.
struct Timing {
    prefill_s: f64,
    decode_s: f64,
}

fn prompt_tokens(cfg: &Config, n: usize, seed: u64) -> candle_core::Result<Tensor> {
    let ids: Vec<u32> = (0..n as u64)
        .map(|i| {
            ((i + 1).wrapping_mul(seed | 1).wrapping_mul(0x9E37_79B9) >> 7) as u32
                % cfg.vocab as u32
        })
        .collect();
    Tensor::from_vec(ids, (1, n), &Device::Cpu)
}

/// Prefill of `prompt`, then `steps` decode steps of greedy or sampled tokens.
fn run_ours(
    model: &Llama,
    prompt: &Tensor,
    steps: usize,
    how: Sampling,
) -> candle_core::Result<(Timing, Vec<u32>)> {
    let on = tritium_candle::On::of(model.device())?;
    let mut cache = model.cache(1)?;
    let start = Instant::now();
    let mut logits = model.forward_last(prompt, &mut cache)?;
    model.device().synchronize()?;
    let prefill_s = start.elapsed().as_secs_f64();
    let start = Instant::now();
    let mut out = vec![];
    for step in 0..steps {
        let next = tritium_candle::llama::kernels::sample(&on, &logits, how.at_step(step))?;
        out.push(next.to_vec1::<u32>()?[0]);
        logits = model.forward_last(&next.reshape((1, 1))?, &mut cache)?;
    }
    model.device().synchronize()?;
    let decode_s = start.elapsed().as_secs_f64();
    Ok((
        Timing {
            prefill_s,
            decode_s,
        },
        out,
    ))
}

/// The same in candle-transformers' Llama (greedy: its logits' argmax).
fn run_candle(
    (model, cfg, device): (&reference::Llama, &reference::Config, &Device),
    dtype: DType,
    prompt: &Tensor,
    steps: usize,
) -> candle_core::Result<Timing> {
    let prompt = prompt.to_device(device)?;
    let mut cache = reference::Cache::new(true, dtype, cfg, device)?;
    let start = Instant::now();
    let mut logits = model.forward(&prompt, 0, &mut cache)?;
    device.synchronize()?;
    let prefill_s = start.elapsed().as_secs_f64();
    let start = Instant::now();
    for pos in prompt.dims()[1]..prompt.dims()[1] + steps {
        let next = logits.argmax(1)?.reshape((1, 1))?;
        logits = model.forward(&next, pos, &mut cache)?;
    }
    device.synchronize()?;
    let decode_s = start.elapsed().as_secs_f64();
    Ok(Timing {
        prefill_s,
        decode_s,
    })
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let a = args()?;
    if !a.dir.join("config.json").exists() {
        let start = Instant::now();
        weights::write_random_as(&a.dir, &Config::small(), a.seed, a.dtype)?;
        println!(
            "wrote random weights to {} ({:.1} s)",
            a.dir.display(),
            start.elapsed().as_secs_f64()
        );
    }
    let start = Instant::now();
    let model = match a.cuda {
        true => Llama::load(&a.dir)?.to_device(&Device::new_cuda(0)?)?,
        false => Llama::load(&a.dir)?,
    };
    let cfg = model.config().clone();
    println!(
        "loaded {} ({} layers, hidden {}, {} heads / {} kv heads, vocab {}, {:?} projections, {:?}) in {:.2} s",
        a.dir.display(),
        cfg.layers,
        cfg.hidden,
        cfg.heads,
        cfg.kv_heads,
        cfg.vocab,
        model.weight_dtype(),
        model.device().location(),
        start.elapsed().as_secs_f64()
    );
    if a.prompt + a.steps > cfg.max_seq {
        return Err(format!("--prompt + --steps must fit max_seq {}", cfg.max_seq).into());
    }
    let prompt = prompt_tokens(&cfg, a.prompt, a.seed)?;

    // The loss of predicting each prompt token from those before it.
    let logits = model.forward(&prompt, &mut model.cache(1)?)?;
    let n = a.prompt - 1;
    let inputs = logits.squeeze(0)?.narrow(0, 0, n)?;
    let targets = prompt
        .squeeze(0)?
        .narrow(0, 1, n)?
        .to_device(model.device())?;
    let loss = tritium_candle::cross_entropy(&inputs, &targets)?.to_scalar::<f32>()?;
    println!(
        "prompt loss {loss:.4} (ln vocab = {:.4})",
        (cfg.vocab as f32).ln()
    );

    let how = match a.temperature {
        t if t > 0.0 => Sampling::Temperature {
            temperature: t,
            seed: a.seed as i32,
        },
        _ => Sampling::Greedy,
    };
    // The first run compiles the kernels and tunes the matmul's blocks per shape.
    let start = Instant::now();
    run_ours(&model, &prompt, 2, how)?;
    println!(
        "first run (compiles, tunes): {:.2} s",
        start.elapsed().as_secs_f64()
    );
    let (ours, tokens) = run_ours(&model, &prompt, a.steps, how)?;
    println!("generated: {tokens:?}");
    let rate = |n: usize, s: f64| n as f64 / s;
    println!(
        "tritium  prefill {:>8.1} tokens/s ({} tokens)   decode {:>7.1} tokens/s ({} steps)",
        rate(a.prompt, ours.prefill_s),
        a.prompt,
        rate(a.steps, ours.decode_s),
        a.steps
    );
    if a.compare {
        let text = std::fs::read_to_string(a.dir.join("config.json"))?;
        let rcfg = serde_json::from_str::<reference::LlamaConfig>(&text)?.into_config(false);
        let device = model.device();
        let tensors = candle_core::safetensors::load(a.dir.join("model.safetensors"), device)?;
        let dtype = model.weight_dtype();
        let vb = candle_nn::VarBuilder::from_tensors(tensors, dtype, device);
        let theirs = reference::Llama::load(vb, &rcfg)?;
        run_candle((&theirs, &rcfg, device), dtype, &prompt, 2)?;
        // Alternated runs, medians.
        let (mut ours_runs, mut their_runs) = (vec![], vec![]);
        for _ in 0..3 {
            ours_runs.push(run_ours(&model, &prompt, a.steps, Sampling::Greedy)?.0);
            their_runs.push(run_candle(
                (&theirs, &rcfg, device),
                dtype,
                &prompt,
                a.steps,
            )?);
        }
        let median = |runs: &[Timing], f: fn(&Timing) -> f64| {
            let mut v: Vec<f64> = runs.iter().map(f).collect();
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        };
        type Phase = (&'static str, fn(&Timing) -> f64, usize);
        let rows: [Phase; 2] = [
            ("prefill", |t| t.prefill_s, a.prompt),
            ("decode", |t| t.decode_s, a.steps),
        ];
        println!("\n{dtype:?} weights");
        println!("| phase | tritium tokens/s | candle-transformers tokens/s | ratio |");
        println!("|---|---|---|---|");
        for (name, f, n) in rows {
            let (o, t) = (median(&ours_runs, f), median(&their_runs, f));
            println!(
                "| {name} ({n} tokens) | {:.1} | {:.1} | {:.2}× |",
                rate(n, o),
                rate(n, t),
                t / o
            );
        }
    }
    Ok(())
}
