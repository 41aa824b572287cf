//! A Llama checkpoint on disk: `config.json` and `model.safetensors` (or the shards a
//! `model.safetensors.index.json` lists) in Hugging Face's names, and random weights with
//! a fixed seed written the same way.

use super::Config;
use candle_core::{DType, Device, Error, Result, Tensor};
use std::collections::HashMap;
use std::path::Path;

/// Every weight a [`Config`] needs: its Hugging Face name and `[out, in]` shape.
pub fn names(cfg: &Config) -> Vec<(String, Vec<usize>)> {
    let (h, d) = (cfg.hidden, cfg.head_dim());
    let mut all = vec![("model.embed_tokens.weight".to_string(), vec![cfg.vocab, h])];
    for i in 0..cfg.layers {
        let p = format!("model.layers.{i}");
        all.extend([
            (format!("{p}.input_layernorm.weight"), vec![h]),
            (
                format!("{p}.self_attn.q_proj.weight"),
                vec![cfg.heads * d, h],
            ),
            (
                format!("{p}.self_attn.k_proj.weight"),
                vec![cfg.kv_heads * d, h],
            ),
            (
                format!("{p}.self_attn.v_proj.weight"),
                vec![cfg.kv_heads * d, h],
            ),
            (
                format!("{p}.self_attn.o_proj.weight"),
                vec![h, cfg.heads * d],
            ),
            (format!("{p}.post_attention_layernorm.weight"), vec![h]),
            (
                format!("{p}.mlp.gate_proj.weight"),
                vec![cfg.intermediate, h],
            ),
            (format!("{p}.mlp.up_proj.weight"), vec![cfg.intermediate, h]),
            (
                format!("{p}.mlp.down_proj.weight"),
                vec![h, cfg.intermediate],
            ),
        ]);
    }
    all.push(("model.norm.weight".to_string(), vec![h]));
    all.push(("lm_head.weight".to_string(), vec![cfg.vocab, h]));
    all
}

/// Random f32 weights from `seed`: projections uniform in `±1/√in` (PyTorch's `Linear`
/// init), the embedding in `±1`, norm weights near 1, so that every part of the model
/// matters in its output.
pub fn random(cfg: &Config, seed: u64) -> Result<HashMap<String, Tensor>> {
    let mut rng = SplitMix(seed);
    names(cfg)
        .into_iter()
        .map(|(name, shape)| {
            let n: usize = shape.iter().product();
            let data: Vec<f32> = match shape.len() {
                1 => (0..n).map(|_| 1.0 + 0.1 * rng.signed()).collect(),
                _ if name.contains("embed_tokens") => (0..n).map(|_| rng.signed()).collect(),
                _ => {
                    let a = 1.0 / (shape[1] as f32).sqrt();
                    (0..n).map(|_| a * rng.signed()).collect()
                }
            };
            let t = Tensor::from_vec(data, shape, &Device::Cpu)?;
            Ok((name, t))
        })
        .collect()
}

/// Writes a random model (`config.json`, `model.safetensors`) into `dir`, made if missing.
pub fn write_random(dir: &Path, cfg: &Config, seed: u64) -> Result<()> {
    write_random_as(dir, cfg, seed, DType::F32)
}

/// [`write_random`] with every weight stored as `dtype` (bf16: as Hugging Face ships most
/// checkpoints).
pub fn write_random_as(dir: &Path, cfg: &Config, seed: u64, dtype: DType) -> Result<()> {
    cfg.validate()?;
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join("config.json"), cfg.to_json())?;
    let tensors = (random(cfg, seed)?.into_iter())
        .map(|(name, t)| Ok((name, t.to_dtype(dtype)?)))
        .collect::<Result<HashMap<_, _>>>()?;
    candle_core::safetensors::save(&tensors, dir.join("model.safetensors"))
}

/// The config and weights of the checkpoint in `dir`: `config.json`, then
/// `model.safetensors` or every shard `model.safetensors.index.json` names; f32, bf16 and
/// f16 weights as stored, other dtypes converted to f32. An error names a missing file.
pub fn read(dir: &Path) -> Result<(Config, HashMap<String, Tensor>)> {
    let text = std::fs::read_to_string(dir.join("config.json"))
        .map_err(|e| Error::Msg(format!("{}: {e}", dir.join("config.json").display())))?;
    let cfg = Config::from_json(&text)?;
    let index = dir.join("model.safetensors.index.json");
    let files: Vec<String> = match std::fs::read_to_string(&index) {
        Ok(text) => shards(&text).map_err(|e| Error::Msg(format!("{}: {e}", index.display())))?,
        Err(_) => vec!["model.safetensors".to_string()],
    };
    let mut weights = HashMap::new();
    for file in files {
        let path = dir.join(&file);
        let tensors = candle_core::safetensors::load(&path, &Device::Cpu)
            .map_err(|e| Error::Msg(format!("{}: {e}", path.display())))?;
        for (name, t) in tensors {
            let t = match t.dtype() {
                DType::F32 | DType::BF16 | DType::F16 => t,
                _ => t.to_dtype(DType::F32)?,
            };
            weights.insert(name, t);
        }
    }
    Ok((cfg, weights))
}

/// The shard files of a `model.safetensors.index.json`, each once, in order.
fn shards(index: &str) -> std::result::Result<Vec<String>, String> {
    let v: serde_json::Value = serde_json::from_str(index).map_err(|e| e.to_string())?;
    let map = v
        .get("weight_map")
        .and_then(|m| m.as_object())
        .ok_or("no `weight_map` object")?;
    let mut files: Vec<String> = Vec::new();
    for file in map.values() {
        let file = file
            .as_str()
            .ok_or("a `weight_map` entry is not a file name")?;
        if !files.iter().any(|f| f == file) {
            files.push(file.to_string());
        }
    }
    Ok(files)
}

/// SplitMix64: a fixed, seedable stream (the weights must not depend on a crate's RNG).
struct SplitMix(u64);

impl SplitMix {
    /// Uniform in `[-1, 1)`.
    fn signed(&mut self) -> f32 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }
}
