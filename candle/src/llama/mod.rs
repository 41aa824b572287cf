//! A Llama-style decoder whose every step is a Tritium kernel on candle tensors: RMSNorm,
//! the projections (Tritium's matmul), RoPE, causal grouped-query attention over a KV
//! cache (prefill and decode), the SwiGLU MLP, the residual adds, the embedding gather,
//! sampling and the cross-entropy loss. Weights use Hugging Face's names and layout
//! (`model.layers.{i}.self_attn.q_proj.weight`, `[out, in]`), so [`Llama::load`] reads a
//! real checkpoint's `model.safetensors` and `config.json` as well as the random ones
//! [`weights::write_random`] makes.
//!
//! - [`config`]: the model's sizes, from and to Hugging Face's `config.json`.
//! - [`weights`]: safetensors files, random weights with a fixed seed.
//! - [`kernels`]: the inference-only launches on tensors (projections, attention, …).
//! - [`model`]: [`Llama`] and its forward pass; [`KvCache`].

pub mod config;
pub mod kernels;
pub mod model;
pub mod weights;

pub use config::Config;
pub use model::{KvCache, Llama};
