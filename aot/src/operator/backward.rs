//! An operator's declared backward (MindSpore's `bprop`), which [`crate::grad`]'s tape calls.

use std::sync::Arc;

use super::AotOp;
use crate::error::{AotError, AotResult};
use crate::tensor::{Tensor, TensorRef};

/// A backward written in Rust: `(inputs, outputs, output gradients) → input gradients`, as
/// MindSpore's `bprop(x…, out, dout)`.
pub type BackwardFn =
    dyn Fn(&[Tensor], &[Tensor], &[Tensor]) -> AotResult<Vec<Tensor>> + Send + Sync;

/// A declared backward.
#[derive(Clone)]
pub(super) enum Backward {
    Fn(Arc<BackwardFn>),
    /// Another operator, called with `(inputs…, outputs…, douts…)`.
    Op(AotOp),
}

impl AotOp {
    /// True when a backward was declared.
    pub fn has_backward(&self) -> bool {
        self.inner.backward.is_some()
    }

    /// Runs the declared backward: `(inputs, outputs, output gradients) → input gradients`.
    pub fn backward(
        &self,
        inputs: &[Tensor],
        outputs: &[Tensor],
        douts: &[Tensor],
    ) -> AotResult<Vec<Tensor>> {
        let sym = &self.inner.spec.symbol;
        let grads = match &self.inner.backward {
            None => {
                return Err(AotError::Grad(format!(
                    "operator `{sym}` declares no backward"
                )))
            }
            Some(Backward::Fn(f)) => f(inputs, outputs, douts)?,
            Some(Backward::Op(op)) => {
                let all: Vec<TensorRef<'_>> = inputs
                    .iter()
                    .chain(outputs)
                    .chain(douts)
                    .map(TensorRef::from)
                    .collect();
                op.call(all)?
            }
        };
        if grads.len() != inputs.len() {
            return Err(AotError::Grad(format!(
                "the backward of `{sym}` returned {} gradients for {} inputs",
                grads.len(),
                inputs.len()
            )));
        }
        Ok(grads)
    }
}
