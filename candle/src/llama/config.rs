//! A Llama model's sizes, read from and written as Hugging Face's `config.json`.

use candle_core::{Error, Result};
use serde_json::{json, Value};

/// The sizes of a Llama-style decoder (Hugging Face's `LlamaConfig` fields it uses).
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Width of the residual stream (`hidden_size`).
    pub hidden: usize,
    /// Width of the MLP (`intermediate_size`).
    pub intermediate: usize,
    /// Tokens (`vocab_size`).
    pub vocab: usize,
    /// Decoder layers (`num_hidden_layers`).
    pub layers: usize,
    /// Query heads (`num_attention_heads`).
    pub heads: usize,
    /// Key/value heads (`num_key_value_heads`; fewer than `heads` is grouped-query attention).
    pub kv_heads: usize,
    /// RMSNorm's epsilon (`rms_norm_eps`).
    pub rms_eps: f32,
    /// RoPE's base (`rope_theta`).
    pub rope_theta: f32,
    /// The longest sequence, prompt and generated tokens together (`max_position_embeddings`).
    pub max_seq: usize,
}

impl Config {
    /// The example's model: 4 layers, hidden 512, 8 heads over 2 KV heads, vocab 32000
    /// (about 44M parameters, seconds to run on two cores).
    pub fn small() -> Config {
        Config {
            hidden: 512,
            intermediate: 1408,
            vocab: 32000,
            layers: 4,
            heads: 8,
            kv_heads: 2,
            rms_eps: 1e-5,
            rope_theta: 10_000.0,
            max_seq: 512,
        }
    }

    /// Width of one head.
    pub fn head_dim(&self) -> usize {
        self.hidden / self.heads
    }

    /// Query heads per key/value head.
    pub fn group(&self) -> usize {
        self.heads / self.kv_heads
    }

    /// An error naming the first size that does not fit the kernels.
    pub fn validate(&self) -> Result<()> {
        let fail = |why: String| Err(Error::Msg(format!("llama config: {why}")));
        if self.heads == 0 || self.kv_heads == 0 || !self.hidden.is_multiple_of(self.heads) {
            return fail(format!(
                "hidden {} must be a multiple of heads {}",
                self.hidden, self.heads
            ));
        }
        if !self.heads.is_multiple_of(self.kv_heads) {
            return fail(format!(
                "heads {} must be a multiple of kv heads {}",
                self.heads, self.kv_heads
            ));
        }
        let d = self.head_dim();
        if !d.is_power_of_two() || d < 16 {
            return fail(format!(
                "the head dim {d} must be a power of two of at least 16"
            ));
        }
        if self.vocab == 0 || self.layers == 0 || self.max_seq == 0 || self.intermediate == 0 {
            return fail(format!("every size must be positive, got {self:?}"));
        }
        Ok(())
    }

    /// The config from a Hugging Face `config.json`'s text.
    pub fn from_json(text: &str) -> Result<Config> {
        let v: Value = serde_json::from_str(text)
            .map_err(|e| Error::Msg(format!("llama config.json: {e}")))?;
        let size = |key: &str| -> Result<usize> {
            v.get(key)
                .and_then(Value::as_u64)
                .map(|n| n as usize)
                .ok_or_else(|| {
                    Error::Msg(format!("llama config.json: `{key}` missing or not a count"))
                })
        };
        let float = |key: &str, default: f64| -> Result<f32> {
            match v.get(key) {
                None => Ok(default as f32),
                Some(x) => x.as_f64().map(|f| f as f32).ok_or_else(|| {
                    Error::Msg(format!("llama config.json: `{key}` is not a number"))
                }),
            }
        };
        let heads = size("num_attention_heads")?;
        let config = Config {
            hidden: size("hidden_size")?,
            intermediate: size("intermediate_size")?,
            vocab: size("vocab_size")?,
            layers: size("num_hidden_layers")?,
            heads,
            kv_heads: match v.get("num_key_value_heads") {
                None | Some(Value::Null) => heads,
                Some(_) => size("num_key_value_heads")?,
            },
            rms_eps: float("rms_norm_eps", 1e-6)?,
            rope_theta: float("rope_theta", 10_000.0)?,
            max_seq: size("max_position_embeddings")?,
        };
        if v.get("rope_scaling").is_some_and(|s| !s.is_null()) {
            return Err(Error::Msg(
                "llama config.json: `rope_scaling` is not supported (plain RoPE only)".into(),
            ));
        }
        if v.get("tie_word_embeddings") == Some(&Value::Bool(true)) {
            return Err(Error::Msg(
                "llama config.json: tied embeddings are not supported (an `lm_head.weight` is read)"
                    .into(),
            ));
        }
        config.validate()?;
        Ok(config)
    }

    /// The config as a Hugging Face `config.json`.
    pub fn to_json(&self) -> String {
        let v = json!({
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "hidden_size": self.hidden,
            "intermediate_size": self.intermediate,
            "vocab_size": self.vocab,
            "num_hidden_layers": self.layers,
            "num_attention_heads": self.heads,
            "num_key_value_heads": self.kv_heads,
            "rms_norm_eps": self.rms_eps,
            "rope_theta": self.rope_theta,
            "max_position_embeddings": self.max_seq,
            "tie_word_embeddings": false,
            "torch_dtype": "float32",
        });
        serde_json::to_string_pretty(&v).expect("a JSON value prints")
    }
}
