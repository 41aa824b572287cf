//! Reverse-mode differentiation over a chain of operator calls, as MindSpore's bprop.
//!
//! Record calls on a [`Tape`]; [`Tape::grad`] walks them backwards, calling each operator's
//! backward with `(inputs, outputs, output gradients)` and summing gradients per value.

use std::sync::Arc;

use super::dtype::MindSporeDType;
use super::error::{AotError, AotResult};
use super::operator::{AotOp, BackwardFn};
use super::tensor::Tensor;

/// An operation the tape can record: a forward and its backward.
pub trait Differentiable: Send + Sync {
    /// A name for error messages.
    fn name(&self) -> String;
    /// Computes the outputs.
    fn forward(&self, inputs: &[Tensor]) -> AotResult<Vec<Tensor>>;
    /// Computes one gradient per input from `(inputs, outputs, output gradients)`.
    fn backward(
        &self,
        inputs: &[Tensor],
        outputs: &[Tensor],
        douts: &[Tensor],
    ) -> AotResult<Vec<Tensor>>;
}

impl Differentiable for AotOp {
    fn name(&self) -> String {
        self.symbol().to_string()
    }
    fn forward(&self, inputs: &[Tensor]) -> AotResult<Vec<Tensor>> {
        self.call(inputs)
    }
    fn backward(
        &self,
        inputs: &[Tensor],
        outputs: &[Tensor],
        douts: &[Tensor],
    ) -> AotResult<Vec<Tensor>> {
        AotOp::backward(self, inputs, outputs, douts)
    }
}

type ForwardFn = dyn Fn(&[Tensor]) -> AotResult<Vec<Tensor>> + Send + Sync;

/// A differentiable operation written in Rust (a forward closure and a backward closure).
#[derive(Clone)]
pub struct Function {
    name: String,
    forward: Arc<ForwardFn>,
    backward: Arc<BackwardFn>,
}

impl Function {
    /// A function from its forward and backward.
    pub fn new(
        name: impl Into<String>,
        forward: impl Fn(&[Tensor]) -> AotResult<Vec<Tensor>> + Send + Sync + 'static,
        backward: impl Fn(&[Tensor], &[Tensor], &[Tensor]) -> AotResult<Vec<Tensor>>
            + Send
            + Sync
            + 'static,
    ) -> Function {
        Function {
            name: name.into(),
            forward: Arc::new(forward),
            backward: Arc::new(backward),
        }
    }

    /// Elementwise `a + b`.
    pub fn add() -> Function {
        Function::new(
            "add",
            |x| Ok(vec![x[0].add(&x[1])?]),
            |_, _, d| Ok(vec![d[0].clone(), d[0].clone()]),
        )
    }

    /// Elementwise `a - b`.
    pub fn sub() -> Function {
        Function::new(
            "sub",
            |x| Ok(vec![x[0].sub(&x[1])?]),
            |_, _, d| Ok(vec![d[0].clone(), d[0].neg()]),
        )
    }

    /// Elementwise `a * b`.
    pub fn mul() -> Function {
        Function::new(
            "mul",
            |x| Ok(vec![x[0].mul(&x[1])?]),
            |x, _, d| Ok(vec![d[0].mul(&x[1])?, d[0].mul(&x[0])?]),
        )
    }

    /// Elementwise `a / b`.
    pub fn div() -> Function {
        Function::new(
            "div",
            |x| Ok(vec![x[0].div(&x[1])?]),
            |x, out, d| {
                let da = d[0].div(&x[1])?;
                let db = d[0].mul(&out[0])?.div(&x[1])?.neg();
                Ok(vec![da, db])
            },
        )
    }
}

impl Differentiable for Function {
    fn name(&self) -> String {
        self.name.clone()
    }
    fn forward(&self, inputs: &[Tensor]) -> AotResult<Vec<Tensor>> {
        (self.forward)(inputs)
    }
    fn backward(
        &self,
        inputs: &[Tensor],
        outputs: &[Tensor],
        douts: &[Tensor],
    ) -> AotResult<Vec<Tensor>> {
        (self.backward)(inputs, outputs, douts)
    }
}

/// A value recorded on a [`Tape`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Var(usize);

struct Node {
    op: Arc<dyn Differentiable>,
    inputs: Vec<Var>,
    outputs: Vec<Var>,
}

/// Records operator calls for [`Tape::grad`].
#[derive(Default)]
pub struct Tape {
    values: Vec<Tensor>,
    nodes: Vec<Node>,
}

impl Tape {
    /// An empty tape.
    pub fn new() -> Tape {
        Tape::default()
    }

    /// Records an input value.
    pub fn input(&mut self, value: impl Into<Tensor>) -> Var {
        self.values.push(value.into());
        Var(self.values.len() - 1)
    }

    /// The value of `v`.
    pub fn value(&self, v: Var) -> &Tensor {
        &self.values[v.0]
    }

    /// Runs `op` forward on `inputs` and records the call; returns its outputs.
    pub fn call<D: Differentiable + Clone + 'static>(
        &mut self,
        op: &D,
        inputs: &[Var],
    ) -> AotResult<Vec<Var>> {
        let args: Vec<Tensor> = inputs.iter().map(|v| self.values[v.0].clone()).collect();
        let outs = op.forward(&args)?;
        let outputs: Vec<Var> = outs
            .into_iter()
            .map(|t| {
                self.values.push(t);
                Var(self.values.len() - 1)
            })
            .collect();
        self.nodes.push(Node {
            op: Arc::new(op.clone()),
            inputs: inputs.to_vec(),
            outputs: outputs.clone(),
        });
        Ok(outputs)
    }

    /// Like [`Tape::call`] for an operation with one output.
    pub fn call1<D: Differentiable + Clone + 'static>(
        &mut self,
        op: &D,
        inputs: &[Var],
    ) -> AotResult<Var> {
        let out = self.call(op, inputs)?;
        match out.as_slice() {
            [v] => Ok(*v),
            _ => Err(AotError::Grad(format!(
                "`{}` has {} outputs, call1 needs one",
                op.name(),
                out.len()
            ))),
        }
    }

    /// Records `a + b`.
    pub fn add(&mut self, a: Var, b: Var) -> AotResult<Var> {
        self.call1(&Function::add(), &[a, b])
    }

    /// Records `a - b`.
    pub fn sub(&mut self, a: Var, b: Var) -> AotResult<Var> {
        self.call1(&Function::sub(), &[a, b])
    }

    /// Records `a * b`.
    pub fn mul(&mut self, a: Var, b: Var) -> AotResult<Var> {
        self.call1(&Function::mul(), &[a, b])
    }

    /// Records `a / b`.
    pub fn div(&mut self, a: Var, b: Var) -> AotResult<Var> {
        self.call1(&Function::div(), &[a, b])
    }

    /// Gradients of `outputs` (weighted by `sens`, MindSpore's `sens_param`; empty means ones)
    /// with respect to `wrt`. A value that does not influence the outputs gets zeros.
    pub fn grad(&self, outputs: &[Var], sens: &[Tensor], wrt: &[Var]) -> AotResult<Vec<Tensor>> {
        if !sens.is_empty() && sens.len() != outputs.len() {
            return Err(AotError::Grad(format!(
                "{} sens for {} outputs",
                sens.len(),
                outputs.len()
            )));
        }
        let mut adj: Vec<Option<Tensor>> = vec![None; self.values.len()];
        for (k, v) in outputs.iter().enumerate() {
            let s = match sens.get(k) {
                Some(s) => s.clone(),
                None => self.values[v.0].ones_like(),
            };
            accumulate(&mut adj, *v, s, &self.values[v.0], "sens")?;
        }
        for node in self.nodes.iter().rev() {
            if node.outputs.iter().all(|o| adj[o.0].is_none()) {
                continue;
            }
            let inputs: Vec<Tensor> = node
                .inputs
                .iter()
                .map(|v| self.values[v.0].clone())
                .collect();
            let outs: Vec<Tensor> = node
                .outputs
                .iter()
                .map(|v| self.values[v.0].clone())
                .collect();
            let douts: Vec<Tensor> = node
                .outputs
                .iter()
                .map(|o| {
                    adj[o.0]
                        .clone()
                        .unwrap_or_else(|| self.values[o.0].zeros_like())
                })
                .collect();
            let grads = node.op.backward(&inputs, &outs, &douts)?;
            if grads.len() != node.inputs.len() {
                return Err(AotError::Grad(format!(
                    "backward of `{}` returned {} gradients for {} inputs",
                    node.op.name(),
                    grads.len(),
                    node.inputs.len()
                )));
            }
            for (v, g) in node.inputs.iter().zip(grads) {
                let what = format!("gradient from `{}`", node.op.name());
                accumulate(&mut adj, *v, g, &self.values[v.0], &what)?;
            }
        }
        Ok(wrt
            .iter()
            .map(|v| {
                adj[v.0]
                    .clone()
                    .unwrap_or_else(|| self.values[v.0].zeros_like())
            })
            .collect())
    }
}

fn accumulate(
    adj: &mut [Option<Tensor>],
    v: Var,
    g: Tensor,
    value: &Tensor,
    what: &str,
) -> AotResult<()> {
    if g.shape() != value.shape() || g.dtype() != value.dtype() {
        return Err(AotError::Grad(format!(
            "{what}: {} {:?} for a value of {} {:?}",
            g.dtype().ms_name(),
            g.shape(),
            value.dtype().ms_name(),
            value.shape()
        )));
    }
    adj[v.0] = Some(match adj[v.0].take() {
        Some(prev) => prev.add(&g)?,
        None => g,
    });
    Ok(())
}

/// MindSpore's `GradOperation(sens_param=True)` over a Rust function of recorded calls:
/// runs `f` on fresh tape inputs and returns the gradients of its outputs, weighted by `sens`
/// (empty: ones), with respect to every input.
pub fn grad(
    f: impl FnOnce(&mut Tape, &[Var]) -> AotResult<Vec<Var>>,
    inputs: &[Tensor],
    sens: &[Tensor],
) -> AotResult<Vec<Tensor>> {
    let mut tape = Tape::new();
    let vars: Vec<Var> = inputs.iter().map(|t| tape.input(t.clone())).collect();
    let outs = f(&mut tape, &vars)?;
    tape.grad(&outs, sens, &vars)
}
