//! What every execution (in process, isolated, CUDA) shares on the output side: buffer sizes
//! and names, data-dependent shape buffers, and host tensors trimmed to the shapes written.

use super::instance::Instance;
use super::AotOp;
use crate::dtype::DType;
use crate::error::{AotError, AotResult};
use crate::tensor::Tensor;

/// Largest rank a data-dependent output may report beyond its upper bound's rank.
pub const MAX_DYNAMIC_RANK: usize = 8;

fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// Bytes of a tensor, `None` on overflow.
pub(super) fn checked_bytes(shape: &[usize], dtype: DType) -> Option<usize> {
    shape
        .iter()
        .try_fold(dtype.size_bytes(), |acc, &d| acc.checked_mul(d))
}

/// The names errors give a call's buffers after its inputs, in parameter order: outputs,
/// workspaces, shape buffers.
pub(super) fn buffer_names(
    outputs: usize,
    workspaces: usize,
    shape_buffers: usize,
) -> impl Iterator<Item = String> {
    let named = |what: &'static str, n: usize| (0..n).map(move |k| format!("{what} {k}"));
    named("output", outputs)
        .chain(named("workspace", workspaces))
        .chain(named("shape buffer", shape_buffers))
}

/// The initial content of a data-dependent output's shape buffer: `[ndim, d0, …]` of the upper
/// bound, padded to `1 + max(rank, MAX_DYNAMIC_RANK)` slots.
pub(super) fn shape_buffer_init(bound: &[usize]) -> Vec<u64> {
    let mut words = vec![0u64; 1 + bound.len().max(MAX_DYNAMIC_RANK)];
    words[0] = bound.len() as u64;
    for (w, &d) in words[1..].iter_mut().zip(bound) {
        *w = d as u64;
    }
    words
}

/// A shape buffer's bytes as its little-endian words.
pub(super) fn le_words(bytes: &[u8]) -> Vec<u64> {
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

impl AotOp {
    /// The final shape of each output: the instance's, or for data-dependent shapes the one
    /// the kernel wrote into its shape buffer (checked against the upper bound).
    pub(super) fn output_shapes(
        &self,
        inst: &Instance,
        shape_words: &[Vec<u64>],
    ) -> AotResult<Vec<Vec<usize>>> {
        let sym = &self.inner.spec.symbol;
        let mut result = Vec::with_capacity(inst.outputs.len());
        for (k, (shape, _)) in inst.outputs.iter().enumerate() {
            let Some(words) = shape_words.get(k) else {
                result.push(shape.clone());
                continue;
            };
            let bad = || AotError::BadShapeBuffer {
                function: sym.clone(),
                output: k,
                written: words.iter().take(1 + MAX_DYNAMIC_RANK).copied().collect(),
                bound: shape.clone(),
            };
            let ndim = words.first().map_or(usize::MAX, |&w| w as usize);
            if ndim >= words.len() {
                return Err(bad());
            }
            let dims: Vec<usize> = words[1..=ndim].iter().map(|&d| d as usize).collect();
            let n = dims
                .iter()
                .try_fold(1usize, |acc, &d| acc.checked_mul(d))
                .ok_or_else(bad)?;
            if n > numel(shape) {
                return Err(bad());
            }
            result.push(dims);
        }
        Ok(result)
    }

    /// Host tensors from the outputs' bytes (upper-bound sized), trimmed to their final shapes.
    pub(super) fn finish(
        &self,
        inst: &Instance,
        data: &[&[u8]],
        shape_words: &[Vec<u64>],
    ) -> AotResult<Vec<Tensor>> {
        let shapes = self.output_shapes(inst, shape_words)?;
        let mut result = Vec::with_capacity(data.len());
        for ((bytes, (bound, dtype)), dims) in data.iter().zip(&inst.outputs).zip(shapes) {
            let mut t = Tensor::from_bytes(*dtype, bound, bytes)?;
            if dims != *bound {
                t.truncate(dims);
            }
            result.push(t);
        }
        Ok(result)
    }
}
