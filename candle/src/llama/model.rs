//! [`Llama`]: the decoder's weights and its forward pass over a [`KvCache`], every step a
//! Tritium kernel (the fused ops of this crate, [`super::kernels`]' launches).

use super::kernels::{
    add_tensors, attend, cache_write, embed, linear, sample, AttentionShape, LayerCache, Sampling,
};
use super::{weights, Config};
use crate::on::On;
use candle_core::{DType, Device, Error, IndexOp, Result, Tensor};
use std::collections::HashMap;
use std::path::Path;

/// One decoder layer's weights; the query/key/value projections stacked into one matrix
/// and gate/up into another, so each is one matmul.
#[derive(Debug, Clone)]
struct Layer {
    attn_norm: Tensor,
    /// `[(H + 2·H_kv)·D, hidden]`: q, k, v.
    qkv: Tensor,
    o: Tensor,
    mlp_norm: Tensor,
    /// `[2·intermediate, hidden]`: gate, up.
    gate_up: Tensor,
    down: Tensor,
}

/// A Llama-style decoder on Tritium kernels, its weights CPU tensors or (with the `cuda`
/// feature, [`Llama::to_device`]) CUDA ones. Its projections keep a 16-bit checkpoint's
/// dtype (bf16 or f16: half the bytes a decode step streams, each multiplied in its dtype
/// with f32 sums), everything else is f32.
#[derive(Debug, Clone)]
pub struct Llama {
    cfg: Config,
    /// Its tensors' device.
    device: Device,
    /// For a model on the CPU, the Tritium device its launches run on when not the one
    /// [`crate::host_ops_device`] names ([`Llama::on_device`]).
    host: Option<tritium::Device>,
    embed: Tensor,
    layers: Vec<Layer>,
    norm: Tensor,
    lm_head: Tensor,
    /// `[max_seq, D/2]` RoPE tables, as candle-transformers' Llama computes them.
    cos: Tensor,
    sin: Tensor,
}

/// Keys and values of every layer for one batch of sequences, filled to `len` positions,
/// where the model's tensors lie.
#[derive(Debug)]
pub struct KvCache {
    layers: Vec<LayerCache>,
    /// The device of the model that made it.
    device: Device,
    batch: usize,
    len: usize,
}

impl KvCache {
    /// Positions held (the prompt and the tokens generated so far).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether nothing is cached yet.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Llama {
    /// The model of `cfg` from Hugging Face-named weights (f32, bf16 or f16); an error
    /// names a missing weight or one of the wrong shape or dtype. The projections take the
    /// first one's dtype ([`Llama::weight_dtype`]), the embedding and norms f32.
    pub fn new(cfg: Config, weights: &HashMap<String, Tensor>) -> Result<Llama> {
        cfg.validate()?;
        for (name, shape) in weights::names(&cfg) {
            let t = weights
                .get(&name)
                .ok_or_else(|| Error::Msg(format!("llama: weight `{name}` missing")))?;
            let float = matches!(t.dtype(), DType::F32 | DType::BF16 | DType::F16);
            if t.dims() != shape.as_slice() || !float {
                return Err(Error::Msg(format!(
                    "llama: weight `{name}` must be f32, bf16 or f16 {shape:?}, got {:?} {:?}",
                    t.dtype(),
                    t.dims()
                )));
            }
        }
        let first = weights["model.layers.0.self_attn.q_proj.weight"].dtype();
        let projection = |name: String| weights[&name].to_dtype(first)?.contiguous();
        let w = |name: String| weights[&name].to_dtype(DType::F32)?.contiguous();
        let layers = (0..cfg.layers)
            .map(|i| {
                let p = format!("model.layers.{i}");
                let attn = |n: &str| projection(format!("{p}.self_attn.{n}_proj.weight"));
                let mlp = |n: &str| projection(format!("{p}.mlp.{n}_proj.weight"));
                Ok(Layer {
                    attn_norm: w(format!("{p}.input_layernorm.weight"))?,
                    qkv: Tensor::cat(&[attn("q")?, attn("k")?, attn("v")?], 0)?,
                    o: attn("o")?,
                    mlp_norm: w(format!("{p}.post_attention_layernorm.weight"))?,
                    gate_up: Tensor::cat(&[mlp("gate")?, mlp("up")?], 0)?,
                    down: mlp("down")?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let (cos, sin) = rope_tables(&cfg)?;
        Ok(Llama {
            device: Device::Cpu,
            host: None,
            embed: w("model.embed_tokens.weight".into())?,
            layers,
            norm: w("model.norm.weight".into())?,
            lm_head: projection("lm_head.weight".into())?,
            cos,
            sin,
            cfg,
        })
    }

    /// The checkpoint in `dir` (`config.json` and safetensors, see [`weights::read`]).
    pub fn load(dir: &Path) -> Result<Llama> {
        let (cfg, weights) = weights::read(dir)?;
        Llama::new(cfg, &weights)
    }

    /// The model, its tensors on the CPU, launching every kernel (its own: embedding,
    /// projections, attention, residual adds, sampling; and the fused ops: RMSNorm, RoPE,
    /// SwiGLU, through [`launch_host_ops_on`](crate::launch_host_ops_on)) on `dev` instead
    /// of the CPU's code: the interpreter or the CUDA emulator check them against the CPU.
    /// A model moved to CUDA ([`Llama::to_device`]) launches on its GPU whatever `dev` is.
    pub fn on_device(mut self, dev: tritium::Device) -> Llama {
        self.host = Some(dev);
        self
    }

    /// Where its launches run now.
    fn on(&self) -> Result<On> {
        match (&self.device, &self.host) {
            (Device::Cpu, Some(dev)) => Ok(On::new(dev.clone())),
            (device, _) => On::of(device),
        }
    }

    /// The model with its weights, tables and caches on candle's `device`, launching there:
    /// CUDA tensors (the `cuda` feature) run every kernel on candle's GPU and stream, the
    /// tokens moved there, logits and tokens given there.
    pub fn to_device(self, device: &Device) -> Result<Llama> {
        // A device Tritium does not launch on is an error before anything moves.
        On::of(device)?;
        let moved = |t: &Tensor| t.to_device(device);
        let layers = (self.layers.iter())
            .map(|l| {
                Ok(Layer {
                    attn_norm: moved(&l.attn_norm)?,
                    qkv: moved(&l.qkv)?,
                    o: moved(&l.o)?,
                    mlp_norm: moved(&l.mlp_norm)?,
                    gate_up: moved(&l.gate_up)?,
                    down: moved(&l.down)?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Llama {
            device: device.clone(),
            host: self.host,
            embed: moved(&self.embed)?,
            layers,
            norm: moved(&self.norm)?,
            lm_head: moved(&self.lm_head)?,
            cos: moved(&self.cos)?,
            sin: moved(&self.sin)?,
            cfg: self.cfg,
        })
    }

    /// Its tensors' device.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Its sizes.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The dtype its projections are multiplied in (f32, bf16 or f16).
    pub fn weight_dtype(&self) -> DType {
        self.lm_head.dtype()
    }

    /// An empty cache for `batch` sequences of up to `max_seq` positions, on the model's
    /// device (an error when its memory cannot be had).
    pub fn cache(&self, batch: usize) -> Result<KvCache> {
        let on = self.on()?;
        let layers = (0..self.cfg.layers)
            .map(|_| LayerCache::new(&on, self.shape(batch)))
            .collect::<Result<Vec<_>>>()?;
        Ok(KvCache {
            layers,
            device: self.device.clone(),
            batch,
            len: 0,
        })
    }

    fn shape(&self, batch: usize) -> AttentionShape {
        AttentionShape {
            batch,
            heads: self.cfg.heads,
            kv_heads: self.cfg.kv_heads,
            head_dim: self.cfg.head_dim(),
            max_seq: self.cfg.max_seq,
        }
    }

    /// The last layer's normalized hidden states `[B·T, hidden]` for `tokens` (u32 `[B, T]`)
    /// at the cache's next positions, which it appends to the cache.
    fn hidden(&self, on: &On, tokens: &Tensor, cache: &mut KvCache) -> Result<Tensor> {
        match &self.host {
            // The fused ops launch where the model's own kernels do.
            Some(dev) => {
                crate::launch_host_ops_on(dev.clone(), || self.hidden_here(on, tokens, cache))
            }
            None => self.hidden_here(on, tokens, cache),
        }
    }

    fn hidden_here(&self, on: &On, tokens: &Tensor, cache: &mut KvCache) -> Result<Tensor> {
        let (b, t) = tokens.dims2()?;
        let tokens = tokens.to_device(&self.device)?;
        let (cfg, pos) = (&self.cfg, cache.len);
        if !cache.device.same_device(&self.device) {
            return Err(Error::Msg(format!(
                "llama: a cache made on {:?} for a model on {:?}",
                cache.device.location(),
                self.device.location()
            )));
        }
        if b != cache.batch {
            return Err(Error::Msg(format!(
                "llama: {b} sequences but the cache holds {}",
                cache.batch
            )));
        }
        if t == 0 || pos + t > cfg.max_seq {
            return Err(Error::Msg(format!(
                "llama: positions {pos}..{} must be non-empty and within max_seq {}",
                pos + t,
                cfg.max_seq
            )));
        }
        let (h, kv, d) = (cfg.heads, cfg.kv_heads, cfg.head_dim());
        let shape = self.shape(b);
        let (cos, sin) = (self.cos.narrow(0, pos, t)?, self.sin.narrow(0, pos, t)?);
        let mut x = embed(on, &self.embed, &tokens.flatten_all()?)?;
        for (layer, lc) in self.layers.iter().zip(&mut cache.layers) {
            let normed = crate::rms_norm(&x, &layer.attn_norm, cfg.rms_eps)?;
            let qkv = linear(on, &normed, &layer.qkv)?.reshape((b, t, h + 2 * kv, d))?;
            // `[B, heads, T, D]` views of the projection: RoPE and the cache read them
            // through their strides.
            let heads = |first: usize, n: usize| qkv.narrow(2, first, n)?.transpose(1, 2);
            let q = crate::rope(&heads(0, h)?, &cos, &sin)?;
            let k = crate::rope(&heads(h, kv)?, &cos, &sin)?;
            cache_write(on, lc, &k, &heads(h + kv, kv)?, pos, shape)?;
            let att = attend(on, &q, lc, pos, shape)?;
            x = add_tensors(on, &x, &linear(on, &att, &layer.o)?)?;
            let normed = crate::rms_norm(&x, &layer.mlp_norm, cfg.rms_eps)?;
            let gate_up = linear(on, &normed, &layer.gate_up)?;
            let i = cfg.intermediate;
            let act = crate::swiglu(&gate_up.narrow(1, 0, i)?, &gate_up.narrow(1, i, i)?)?;
            x = add_tensors(on, &x, &linear(on, &act, &layer.down)?)?;
        }
        cache.len += t;
        crate::rms_norm(&x, &self.norm, cfg.rms_eps)
    }

    /// Logits `[B, T, vocab]` of every position of `tokens` (u32 `[B, T]`), which are
    /// appended to the cache: what a loss over the whole sequence needs.
    pub fn forward(&self, tokens: &Tensor, cache: &mut KvCache) -> Result<Tensor> {
        let ((b, t), on) = (tokens.dims2()?, self.on()?);
        let x = self.hidden(&on, tokens, cache)?;
        linear(&on, &x, &self.lm_head)?.reshape((b, t, self.cfg.vocab))
    }

    /// Logits `[B, vocab]` of the last position of `tokens` only (prefill and decode),
    /// which are appended to the cache; what candle-transformers' `Llama::forward` gives.
    pub fn forward_last(&self, tokens: &Tensor, cache: &mut KvCache) -> Result<Tensor> {
        let ((b, t), on) = (tokens.dims2()?, self.on()?);
        let x = self
            .hidden(&on, tokens, cache)?
            .reshape((b, t, self.cfg.hidden))?;
        let last = x.i((.., t - 1, ..))?.contiguous()?;
        linear(&on, &last, &self.lm_head)
    }

    /// `steps` tokens after `prompt` (u32 `[B, T]`): the prompt in one prefill, then one
    /// decode step per token, each token picked from the last logits by `how`. Gives the
    /// new tokens `[B, steps]` on the model's device.
    pub fn generate(&self, prompt: &Tensor, steps: usize, how: Sampling) -> Result<Tensor> {
        let (b, _) = prompt.dims2()?;
        let (mut cache, on) = (self.cache(b)?, self.on()?);
        let mut logits = self.forward_last(prompt, &mut cache)?;
        let mut out = Vec::with_capacity(steps);
        for step in 0..steps {
            let next = sample(&on, &logits, how.at_step(step))?.reshape((b, 1))?;
            out.push(next.clone());
            if step + 1 < steps {
                logits = self.forward_last(&next, &mut cache)?;
            }
        }
        match out.is_empty() {
            true => Tensor::zeros((b, 0), DType::U32, &self.device),
            false => Tensor::cat(&out, 1),
        }
    }
}

/// RoPE's `[max_seq, D/2]` cos and sin tables: angle `p · θ^(−2i/D)`, in f32 as
/// candle-transformers and Hugging Face compute them.
fn rope_tables(cfg: &Config) -> Result<(Tensor, Tensor)> {
    let d = cfg.head_dim();
    let inv: Vec<f32> = (0..d)
        .step_by(2)
        .map(|i| 1f32 / cfg.rope_theta.powf(i as f32 / d as f32))
        .collect();
    let angles: Vec<f32> = (0..cfg.max_seq)
        .flat_map(|p| inv.iter().map(move |f| p as f32 * f))
        .collect();
    let (cos, sin) = angles.iter().map(|a| (a.cos(), a.sin())).unzip();
    let shape = (cfg.max_seq, d / 2);
    Ok((
        Tensor::from_vec(cos, shape, &Device::Cpu)?,
        Tensor::from_vec(sin, shape, &Device::Cpu)?,
    ))
}
