//! The call protocol's front: inputs checked against the declaration before any C code runs,
//! the instance found, then execution on the operator's target.

use super::instance::Instance;
use super::{AotOp, Target};
use crate::abi::ShapeArgs;
use crate::attrs::Attrs;
use crate::dtype::{DType, MindSporeDType};
use crate::error::{AotError, AotResult};
use crate::tensor::{Inputs, Shape, Tensor, TensorRef, TensorSpec, DYN_DIM, DYN_RANK};

impl AotOp {
    /// Calls the operator on host inputs (ndarray arrays or [`Tensor`]s) and returns its outputs.
    pub fn call<'a>(&self, inputs: impl Inputs<'a>) -> AotResult<Vec<Tensor>> {
        self.call_impl(inputs.into_inputs(), None)
    }

    /// [`AotOp::call`] with call-time attributes added to (or replacing) the definition's.
    /// Each distinct set of call-time attributes gets its own kernel instance.
    pub fn call_with<'a>(&self, inputs: impl Inputs<'a>, attrs: &Attrs) -> AotResult<Vec<Tensor>> {
        self.call_impl(inputs.into_inputs(), Some(attrs))
    }

    /// Calls an operator with exactly one output and returns it.
    pub fn call1<'a>(&self, inputs: impl Inputs<'a>) -> AotResult<Tensor> {
        let mut out = self.call(inputs)?;
        if out.len() != 1 {
            return Err(AotError::Definition {
                symbol: self.inner.spec.symbol.clone(),
                message: format!("call1 on an operator with {} outputs", out.len()),
            });
        }
        Ok(out.remove(0))
    }

    /// The declared input count (`num_inputs`), if any, against a call's.
    pub(super) fn check_input_count(&self, got: usize) -> AotResult<()> {
        match self.inner.num_inputs {
            Some(n) if n != got => Err(self.input_err(format!("expected {n} inputs, got {got}"))),
            _ => Ok(()),
        }
    }

    /// The call's inputs against the declared ones ([`AotOpBuilder::input`](super::AotOpBuilder::input)).
    pub(super) fn check_declared_inputs(&self, got: &[TensorSpec]) -> AotResult<()> {
        for (k, (want, got)) in self.inner.inputs.iter().zip(got).enumerate() {
            let rank_ok = want.shape == [DYN_RANK] || want.shape.len() == got.shape.len();
            let dims_ok = rank_ok
                && (want.shape == [DYN_RANK]
                    || want
                        .shape
                        .iter()
                        .zip(&got.shape)
                        .all(|(w, g)| *w == DYN_DIM || w == g));
            if want.dtype != got.dtype || !dims_ok {
                return Err(self.input_err(format!(
                    "input {k} is {} {:?}, declared {} {:?} (-1: any size, [-2]: any rank)",
                    got.dtype.ms_name(),
                    got.shape,
                    want.dtype.ms_name(),
                    want.shape
                )));
            }
        }
        Ok(())
    }

    pub(super) fn input_err(&self, message: String) -> AotError {
        AotError::Input {
            symbol: self.inner.spec.symbol.clone(),
            message,
        }
    }

    fn call_impl(
        &self,
        inputs: Vec<TensorRef<'_>>,
        call_attrs: Option<&Attrs>,
    ) -> AotResult<Vec<Tensor>> {
        let i = &self.inner;
        self.check_input_count(inputs.len())?;
        let specs: Vec<TensorSpec> = inputs
            .iter()
            .map(|t| {
                TensorSpec::new(
                    t.shape().iter().map(|&d| d as i64).collect::<Vec<_>>(),
                    t.dtype(),
                )
            })
            .collect();
        self.check_declared_inputs(&specs)?;
        let instance = self.instance_for(&specs, call_attrs)?;
        let mut guard = instance.lock().unwrap_or_else(|p| p.into_inner());
        match i.target {
            Target::Cpu => self.execute(&mut guard, &inputs, &specs),
            Target::Cuda => self.execute_cuda(&mut guard, &inputs, &specs),
        }
    }

    /// The `ndims`/`shapes`/`dtypes` of a call: inputs then outputs.
    pub(super) fn call_args(inst: &Instance, specs: &[TensorSpec]) -> ShapeArgs {
        let (shapes, dtypes) = Self::call_specs(inst, specs);
        ShapeArgs::new(&shapes, &dtypes)
    }

    /// The shapes and dtypes of a call's inputs, then its outputs.
    pub(super) fn call_specs(inst: &Instance, specs: &[TensorSpec]) -> (Vec<Shape>, Vec<DType>) {
        let shapes: Vec<Shape> = specs
            .iter()
            .map(|s| s.shape.clone())
            .chain(
                inst.outputs
                    .iter()
                    .map(|(s, _)| s.iter().map(|&d| d as i64).collect()),
            )
            .collect();
        let dtypes: Vec<DType> = specs
            .iter()
            .map(|s| s.dtype)
            .chain(inst.outputs.iter().map(|(_, d)| *d))
            .collect();
        (shapes, dtypes)
    }
}
