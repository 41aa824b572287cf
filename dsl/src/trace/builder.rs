//! The thread-local IR builder that tracing fills in.

use crate::ir::{verify, Block, Function, Inst, Loc, Op, Param, Type, Value};
use crate::{Error, Result};
use std::cell::RefCell;

pub(crate) struct Builder {
    name: String,
    types: Vec<Type>,
    params: Vec<Param>,
    /// Open blocks, innermost last; the first is the function body.
    blocks: Vec<Block>,
    error: Option<Error>,
    /// Integer values that are (or derive by integer arithmetic from) a truncating `/`,
    /// with the division's location: Triton's `/` divides such operands as floats, so
    /// promoting one to a float is refused ([`Builder::refuse_int_quotient`]).
    pub(crate) int_quotients: std::collections::HashMap<Value, Loc>,
    /// Values standing for a variable no path assigned (a deferred `let` an `if` branch
    /// leaves unassigned): the variable's name and the `if`. No op defines them; an op that
    /// reads one is the trace's error ([`Tracer::finish`]).
    unassigned: std::collections::HashMap<Value, (String, Loc)>,
}

thread_local! {
    static BUILDER: RefCell<Option<Builder>> = const { RefCell::new(None) };
}

/// Runs `f` with the active builder. Outside a trace this is a programming error of the
/// caller (a DSL function used outside a kernel), reported by panicking with a clear message.
pub(crate) fn with<R>(f: impl FnOnce(&mut Builder) -> R) -> R {
    BUILDER.with(|b| {
        let mut b = b.borrow_mut();
        let b = b.as_mut().expect(
            "a Tritium DSL function was called outside a kernel trace; call it from a #[kernel] or #[device] function",
        );
        f(b)
    })
}

impl Builder {
    pub(crate) fn new_value(&mut self, ty: Type) -> Value {
        self.types.push(ty);
        Value(self.types.len() as u32 - 1)
    }

    pub(crate) fn ty(&self, v: Value) -> &Type {
        &self.types[v.index()]
    }

    /// Appends an op to the innermost open block and returns its results.
    pub(crate) fn push(&mut self, op: Op, result_types: Vec<Type>, loc: Loc) -> Vec<Value> {
        let results: Vec<Value> = result_types
            .into_iter()
            .map(|t| self.new_value(t))
            .collect();
        let block = self
            .blocks
            .last_mut()
            .expect("the body block is always open");
        block.insts.push(Inst {
            results: results.clone(),
            op,
            loc,
        });
        results
    }

    pub(crate) fn push1(&mut self, op: Op, ty: Type, loc: Loc) -> Value {
        self.push(op, vec![ty], loc)[0]
    }

    /// Records the first error; tracing goes on so that the user sees the first problem.
    pub(crate) fn fail(&mut self, loc: &Loc, message: impl Into<String>) {
        if self.error.is_none() {
            self.error = Some(Error::Trace {
                location: loc.to_string(),
                message: message.into(),
            });
        }
    }

    pub(crate) fn open_block(&mut self, arg_types: Vec<Type>) -> Vec<Value> {
        let args: Vec<Value> = arg_types.into_iter().map(|t| self.new_value(t)).collect();
        self.blocks.push(Block {
            args: args.clone(),
            insts: Vec::new(),
        });
        args
    }

    pub(crate) fn close_block(&mut self) -> Block {
        assert!(self.blocks.len() > 1, "close_block without open_block");
        self.blocks.pop().expect("checked above")
    }

    /// A value standing for variable `name`, left unassigned by the `if` at `loc`.
    pub(crate) fn unassigned(&mut self, name: &str, loc: &Loc) -> Value {
        let v = self.new_value(Type::scalar(crate::ir::DType::I32));
        self.unassigned.insert(v, (name.to_string(), loc.clone()));
        v
    }

    /// The variable and `if` of an unassigned value.
    pub(crate) fn unassigned_var(&self, v: Value) -> Option<&(String, Loc)> {
        self.unassigned.get(&v)
    }

    /// The first op (in order) that reads an unassigned value, as the error to report.
    fn read_of_unassigned(&self, body: &Block) -> Option<Error> {
        if self.unassigned.is_empty() {
            return None;
        }
        for inst in &body.insts {
            if let Some((name, at)) = inst
                .op
                .operands()
                .iter()
                .find_map(|v| self.unassigned.get(v))
            {
                return Some(Error::Trace {
                    location: inst.loc.to_string(),
                    message: format!(
                        "`{name}` is read here, but the `if` at {at} leaves it unassigned on the \
                         path taken; assign it on every path before reading it"
                    ),
                });
            }
            for r in inst.op.regions() {
                if let Some(e) = self.read_of_unassigned(r) {
                    return Some(e);
                }
            }
        }
        None
    }

    pub(crate) fn add_param(&mut self, name: &str, ty: Type) -> Value {
        let value = self.new_value(ty);
        self.params.push(Param {
            name: name.to_string(),
            value,
        });
        value
    }
}

/// An active trace of one kernel on this thread. Created by generated code; dropping it
/// without [`finish`](Tracer::finish) (e.g. when the kernel body panics) discards the trace.
pub struct Tracer {
    _private: (),
}

impl Tracer {
    /// Starts tracing kernel `name` on this thread.
    pub fn begin(name: &str) -> Result<Tracer> {
        BUILDER.with(|b| {
            let mut b = b.borrow_mut();
            if b.is_some() {
                return Err(Error::Trace {
                    location: name.to_string(),
                    message: "a kernel trace is already active on this thread (kernels cannot launch kernels)".into(),
                });
            }
            *b = Some(Builder {
                name: name.to_string(),
                types: Vec::new(),
                params: Vec::new(),
                blocks: vec![Block::default()],
                error: None,
                int_quotients: Default::default(),
                unassigned: Default::default(),
            });
            Ok(Tracer { _private: () })
        })
    }

    /// Ends the trace: returns the first tracing error, or the verified function.
    pub fn finish(self) -> Result<Function> {
        let b = BUILDER
            .with(|b| b.borrow_mut().take())
            .expect("tracer owns the builder");
        std::mem::forget(self);
        // Reading an unassigned variable comes first: its stand-in's type is made up, so
        // any other error may follow from it.
        if let Some(e) = b.read_of_unassigned(&b.blocks[0]) {
            return Err(e);
        }
        if let Some(e) = b.error {
            return Err(e);
        }
        let mut blocks = b.blocks;
        let f = Function {
            name: b.name,
            params: b.params,
            body: blocks.pop().expect("body block"),
            types: b.types,
        };
        verify(&f)?;
        Ok(f)
    }
}

impl Drop for Tracer {
    fn drop(&mut self) {
        BUILDER.with(|b| b.borrow_mut().take());
    }
}
