//! The Llama decoder on Tritium kernels against candle-transformers' Llama on the same
//! safetensors file: logits of prefill and decode steps, batches, generation, sampling,
//! the checkpoint loader and its errors.

use candle_core::{DType, Device, IndexOp, Tensor};
use candle_transformers::models::llama as reference;
use std::path::PathBuf;
use tritium_candle::llama::kernels::{sample, Sampling};
use tritium_candle::llama::{weights, Config, Llama};

/// A model small enough to check in a second: GQA (4 heads over 2), head dim 32.
pub fn tiny() -> Config {
    Config {
        hidden: 128,
        intermediate: 344,
        vocab: 1000,
        layers: 2,
        heads: 4,
        kv_heads: 2,
        rms_eps: 1e-5,
        rope_theta: 10_000.0,
        max_seq: 64,
    }
}

/// A fresh directory under the target's temp dir.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tritium-llama-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// candle-transformers' Llama from the files in `dir`, read with its own config parser.
fn candle_llama(dir: &std::path::Path) -> (reference::Llama, reference::Config) {
    let text = std::fs::read_to_string(dir.join("config.json")).unwrap();
    let cfg: reference::LlamaConfig = serde_json::from_str(&text).unwrap();
    let cfg = cfg.into_config(false);
    let tensors =
        candle_core::safetensors::load(dir.join("model.safetensors"), &Device::Cpu).unwrap();
    let vb = candle_nn::VarBuilder::from_tensors(tensors, DType::F32, &Device::Cpu);
    (reference::Llama::load(vb, &cfg).unwrap(), cfg)
}

/// `max |a − b| / max |b|`.
pub fn rel_diff(a: &Tensor, b: &Tensor) -> f32 {
    assert_eq!(a.dims(), b.dims());
    let scale = b.abs().unwrap().flatten_all().unwrap().max(0).unwrap();
    let d = (a - b)
        .unwrap()
        .abs()
        .unwrap()
        .flatten_all()
        .unwrap()
        .max(0)
        .unwrap();
    d.to_scalar::<f32>().unwrap() / scale.to_scalar::<f32>().unwrap()
}

fn tokens(b: usize, t: usize, seed: u32) -> Tensor {
    tokens_below(tiny().vocab, b, t, seed)
}

pub fn tokens_below(vocab: usize, b: usize, t: usize, seed: u32) -> Tensor {
    let v: Vec<u32> = (0..b * t)
        .map(|i| (i as u32 * 7919 + seed * 104_729) % vocab as u32)
        .collect();
    Tensor::from_vec(v, (b, t), &Device::Cpu).unwrap()
}

#[test]
fn llama_logits_match_candle_transformers_in_prefill_and_decode() {
    let dir = scratch("logits");
    weights::write_random(&dir, &tiny(), 7).unwrap();
    let ours = Llama::load(&dir).unwrap();
    let (theirs, cfg) = candle_llama(&dir);
    for batch in [1, 2] {
        let mut cache = ours.cache(batch).unwrap();
        let mut their_cache = reference::Cache::new(true, DType::F32, &cfg, &Device::Cpu).unwrap();
        // A prefill of 11 tokens, then decode steps of one token, then a chunk of 3.
        let mut pos = 0;
        for (step, t) in [11, 1, 1, 1, 3, 1].into_iter().enumerate() {
            let x = tokens(batch, t, step as u32);
            let a = ours.forward_last(&x, &mut cache).unwrap();
            let b = theirs.forward(&x, pos, &mut their_cache).unwrap();
            let d = rel_diff(&a, &b);
            assert!(d < 1e-4, "batch {batch} step {step} (t = {t}): {d}");
            pos += t;
            assert_eq!(cache.len(), pos);
        }
    }
    // Every position's logits: the last one is forward_last's.
    let x = tokens(2, 9, 5);
    let all = ours.forward(&x, &mut ours.cache(2).unwrap()).unwrap();
    let last = ours.forward_last(&x, &mut ours.cache(2).unwrap()).unwrap();
    assert_eq!(all.dims(), [2, 9, 1000]);
    assert!(rel_diff(&all.i((.., 8, ..)).unwrap(), &last) < 1e-6);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A bf16 (or f16) checkpoint keeps its projections in that dtype (activations rounded to
/// it before each product, sums in f32): its logits are the f32 model's on the same
/// weights within that rounding, not equal to them.
#[test]
fn sixteen_bit_weights_are_multiplied_in_their_dtype() {
    for dtype in [DType::BF16, DType::F16] {
        let dir = scratch(&format!("{dtype:?}"));
        weights::write_random_as(&dir, &tiny(), 7, dtype).unwrap();
        let ours = Llama::load(&dir).unwrap();
        assert_eq!(ours.weight_dtype(), dtype);
        // candle-transformers in f32 on the same (rounded) weights.
        let (theirs, cfg) = candle_llama(&dir);
        let mut cache = ours.cache(2).unwrap();
        let mut their_cache = reference::Cache::new(true, DType::F32, &cfg, &Device::Cpu).unwrap();
        let mut pos = 0;
        for (step, t) in [11, 1, 1].into_iter().enumerate() {
            let x = tokens(2, t, step as u32);
            let a = ours.forward_last(&x, &mut cache).unwrap();
            let b = theirs.forward(&x, pos, &mut their_cache).unwrap();
            let d = rel_diff(&a, &b);
            eprintln!("{dtype:?} step {step}: logits {d:e} from the f32 model's");
            let most = if dtype == DType::BF16 { 1e-2 } else { 2e-3 };
            assert!(1e-6 < d && d < most, "{dtype:?} step {step}: {d}");
            pos += t;
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[test]
fn the_interpreter_and_the_emulator_give_the_cpus_logits() {
    let cfg = Config {
        hidden: 64,
        intermediate: 96,
        vocab: 300,
        layers: 1,
        heads: 4,
        kv_heads: 2,
        max_seq: 16,
        ..tiny()
    };
    let w = weights::random(&cfg, 5).unwrap();
    let cpu = Llama::new(cfg.clone(), &w).unwrap();
    for dev in [
        tritium::Device::interpreter(),
        tritium::Device::cuda_emulator(),
    ] {
        let other = cpu.clone().on_device(dev.clone());
        let (mut a, mut b) = (cpu.cache(2).unwrap(), other.cache(2).unwrap());
        // A prefill of 5 tokens (blocked matmul), then a decode step (matvec).
        for t in [5, 1] {
            let x = tokens_below(cfg.vocab, 2, t, t as u32);
            let want = cpu.forward_last(&x, &mut a).unwrap();
            let got = other.forward_last(&x, &mut b).unwrap();
            let d = rel_diff(&got, &want);
            assert!(d < 1e-5, "{dev:?} t = {t}: {d}");
        }
    }
}

#[test]
fn greedy_generation_follows_candle_transformers_argmax() {
    let dir = scratch("generate");
    weights::write_random(&dir, &tiny(), 11).unwrap();
    let ours = Llama::load(&dir).unwrap();
    let (theirs, cfg) = candle_llama(&dir);
    let prompt = tokens(1, 5, 3);
    let got = ours.generate(&prompt, 6, Sampling::Greedy).unwrap();
    let mut cache = reference::Cache::new(true, DType::F32, &cfg, &Device::Cpu).unwrap();
    let (mut x, mut pos, mut want) = (prompt.clone(), 0, vec![]);
    for _ in 0..6 {
        let logits = theirs.forward(&x, pos, &mut cache).unwrap();
        pos += x.dims()[1];
        let next = logits.argmax(1).unwrap().to_vec1::<u32>().unwrap()[0];
        want.push(next);
        x = Tensor::new(&[[next]], &Device::Cpu).unwrap();
    }
    assert_eq!(got.to_vec2::<u32>().unwrap(), vec![want]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn sampling_draws_from_the_softmax_of_the_logits() {
    let dev = tritium_candle::On::new(tritium::Device::cpu());
    // 20000 rows of the same four logits: the frequencies are softmax(logits / τ).
    let rows = 20_000;
    let row = [0.0f32, 1.0, 2.0, -1.0];
    let logits = Tensor::from_vec(row.repeat(rows), (rows, 4), &Device::Cpu).unwrap();
    for temperature in [1.0f32, 0.5, 2.0] {
        let how = Sampling::Temperature {
            temperature,
            seed: 42,
        };
        let picks = sample(&dev, &logits, how)
            .unwrap()
            .to_vec1::<u32>()
            .unwrap();
        let z: f32 = row.iter().map(|x| (x / temperature).exp()).sum();
        for (j, x) in row.iter().enumerate() {
            let want = (x / temperature).exp() / z;
            let got = picks.iter().filter(|&&p| p == j as u32).count() as f32 / rows as f32;
            assert!(
                (got - want).abs() < 0.015,
                "τ {temperature} token {j}: {got} vs {want}"
            );
        }
        // The same seed draws the same tokens; another seed others.
        let again = sample(&dev, &logits, how)
            .unwrap()
            .to_vec1::<u32>()
            .unwrap();
        assert_eq!(again, picks);
        let other = Sampling::Temperature {
            temperature,
            seed: 43,
        };
        assert_ne!(
            sample(&dev, &logits, other)
                .unwrap()
                .to_vec1::<u32>()
                .unwrap(),
            picks
        );
    }
    // Greedy: the first largest.
    let logits = Tensor::new(
        &[[1.0f32, 3.0, 3.0, 0.0], [5.0, 1.0, 2.0, 4.9]],
        &Device::Cpu,
    )
    .unwrap();
    let greedy = sample(&dev, &logits, Sampling::Greedy).unwrap();
    assert_eq!(greedy.to_vec1::<u32>().unwrap(), [1, 0]);
    let bad = Sampling::Temperature {
        temperature: 0.0,
        seed: 1,
    };
    let e = sample(&dev, &logits, bad).unwrap_err();
    assert!(e.to_string().contains("temperature must be above 0"), "{e}");
}

#[test]
fn checkpoints_are_read_back_and_bad_ones_are_errors() {
    let dir = scratch("files");
    let cfg = tiny();
    weights::write_random(&dir, &cfg, 3).unwrap();
    let (read, tensors) = weights::read(&dir).unwrap();
    assert_eq!(read, cfg);
    let want = weights::random(&cfg, 3).unwrap();
    assert_eq!(tensors.len(), want.len());
    for (name, t) in &want {
        let got = &tensors[name];
        assert_eq!(rel_diff(got, t), 0.0, "{name}");
    }
    // A missing weight, a wrong shape, a token past the vocabulary, past max_seq.
    let mut missing = tensors.clone();
    missing.remove("model.layers.1.mlp.up_proj.weight");
    let e = Llama::new(cfg.clone(), &missing).unwrap_err();
    assert!(
        e.to_string()
            .contains("`model.layers.1.mlp.up_proj.weight` missing"),
        "{e}"
    );
    let mut wrong = tensors.clone();
    wrong.insert(
        "model.norm.weight".into(),
        Tensor::zeros(7, DType::F32, &Device::Cpu).unwrap(),
    );
    let e = Llama::new(cfg.clone(), &wrong).unwrap_err();
    assert!(
        e.to_string()
            .contains("`model.norm.weight` must be f32, bf16 or f16 [128], got F32 [7]"),
        "{e}"
    );
    let mut integer = tensors.clone();
    integer.insert(
        "model.norm.weight".into(),
        Tensor::zeros(128, DType::U32, &Device::Cpu).unwrap(),
    );
    let e = Llama::new(cfg.clone(), &integer).unwrap_err();
    assert!(e.to_string().contains("got U32 [128]"), "{e}");
    let model = Llama::new(cfg.clone(), &tensors).unwrap();
    let past_vocab = Tensor::new(&[[1u32, 1000]], &Device::Cpu).unwrap();
    let e = model
        .forward_last(&past_vocab, &mut model.cache(1).unwrap())
        .unwrap_err();
    assert!(e.to_string().contains("table"), "{e}");
    let mut cache = model.cache(1).unwrap();
    model.forward_last(&tokens(1, 60, 1), &mut cache).unwrap();
    let e = model
        .forward_last(&tokens(1, 5, 2), &mut cache)
        .unwrap_err();
    assert!(e.to_string().contains("within max_seq 64"), "{e}");
    // A config.json of another architecture's options, and none at all.
    let text = cfg.to_json().replace(
        "\"rope_theta\"",
        "\"rope_scaling\": {\"factor\": 8.0}, \"rope_theta\"",
    );
    let e = Config::from_json(&text).unwrap_err();
    assert!(e.to_string().contains("rope_scaling"), "{e}");
    std::fs::remove_file(dir.join("config.json")).unwrap();
    let e = Llama::load(&dir).unwrap_err();
    assert!(e.to_string().contains("config.json"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}
