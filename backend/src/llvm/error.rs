//! The one error type of code generation (`llvm`, `cpu/codegen`, `cuda/codegen`).
//!
//! Every function that emits LLVM IR returns [`Result`]: a builder that refuses an
//! instruction (inkwell's [`BuilderError`]) propagates with `?` instead of panicking, as
//! does a program a generator rejects (an invalid custom call, a tile too large for a
//! CTA). Each generator's per-op dispatch wraps an error once in [`CodegenError::At`],
//! naming the IR op (its mnemonic) and its source location; the pipeline turns the
//! error's text into `Error::Compile`'s message (`pipeline::compile::generate`).

use inkwell::basic_block::BasicBlock;
use inkwell::builder::{Builder, BuilderError};
use inkwell::values::{FunctionValue, InstructionValueError};
use tritium_dsl::ir::{Inst, Loc};

/// What can go wrong while generating LLVM IR for a kernel.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CodegenError {
    /// LLVM's builder refused an instruction (an unpositioned builder, operands of the
    /// wrong types): a bug of the generator, reported instead of a panic.
    #[error("internal error: LLVM builder: {0}")]
    Builder(#[from] BuilderError),
    /// Setting an instruction's property (an alignment) failed: a bug of the generator.
    #[error("internal error: LLVM instruction: {0}")]
    Instruction(#[from] InstructionValueError),
    /// The builder had no insertion block where the generator needed one: a bug.
    #[error("internal error: the LLVM builder is not positioned in a function's block")]
    Unpositioned,
    /// Another inconsistency the generator found in itself (a bug).
    #[error("internal error: {0}")]
    Internal(String),
    /// The program asks for what this target does not generate (a custom call that does
    /// not match its function, a tile too large for a CTA): the user's to change.
    #[error("{0}")]
    Unsupported(String),
    /// An error while generating one op: its mnemonic and where it was written.
    #[error("op `{op}` at {loc}: {source}")]
    At {
        /// The op's mnemonic (`load`, `dot`, `custom`…).
        op: &'static str,
        /// The op's source location.
        loc: Loc,
        /// What went wrong.
        source: Box<CodegenError>,
    },
}

/// The result of emitting code.
pub(crate) type Result<T, E = CodegenError> = std::result::Result<T, E>;

impl CodegenError {
    /// An internal error (a bug of the generator) described by `message`.
    pub(crate) fn internal(message: impl Into<String>) -> Self {
        CodegenError::Internal(message.into())
    }

    /// A program the target does not generate, described by `message`.
    pub(crate) fn unsupported(message: impl Into<String>) -> Self {
        CodegenError::Unsupported(message.into())
    }

    /// This error as one of the custom call `name`: a rejected call names the op it calls.
    pub(crate) fn of_custom_call(self, name: &str) -> Self {
        match self {
            CodegenError::Unsupported(m) => {
                CodegenError::Unsupported(format!("custom op `{name}`: {m}"))
            }
            e => e,
        }
    }

    /// This error as one of generating `inst`; an error that already names an op keeps
    /// it (the innermost op, whose code failed: a fused lane or a loop body's op).
    pub(crate) fn at(self, inst: &Inst) -> Self {
        match self {
            e @ CodegenError::At { .. } => e,
            e => CodegenError::At {
                op: inst.op.mnemonic(),
                loc: inst.loc.clone(),
                source: Box::new(e),
            },
        }
    }
}

/// Where the builder is, as a [`Result`].
pub(crate) trait Positioned<'ctx> {
    /// The block the builder inserts into.
    fn current_block(&self) -> Result<BasicBlock<'ctx>>;
    /// The function the builder inserts into.
    fn current_function(&self) -> Result<FunctionValue<'ctx>>;
}

impl<'ctx> Positioned<'ctx> for Builder<'ctx> {
    fn current_block(&self) -> Result<BasicBlock<'ctx>> {
        self.get_insert_block().ok_or(CodegenError::Unpositioned)
    }

    fn current_function(&self) -> Result<FunctionValue<'ctx>> {
        self.current_block()?
            .get_parent()
            .ok_or(CodegenError::Unpositioned)
    }
}

/// Test support: a builder failure injected at the dispatch of a chosen op.
#[cfg(test)]
pub(crate) mod inject {
    use inkwell::builder::Builder;
    use std::cell::Cell;
    use tritium_dsl::ir::Inst;

    thread_local! {
        static AT: Cell<Option<&'static str>> = const { Cell::new(None) };
    }

    /// Unpositions the builder just before the next op named `mnemonic` is generated on
    /// this thread, so that its first instruction fails.
    pub(crate) fn unposition_before(mnemonic: &'static str) {
        AT.with(|a| a.set(Some(mnemonic)));
    }

    /// Called by the generators' per-op dispatch.
    pub(crate) fn before(b: &Builder<'_>, inst: &Inst) {
        if AT.with(|a| a.get()) == Some(inst.op.mnemonic()) {
            AT.with(|a| a.set(None));
            b.clear_insertion_position();
        }
    }

    /// Checks what a generator returned for `dsl/tests/pinned/vadd.tir` with the builder
    /// unpositioned before its `mul`: an error naming the op and its location.
    pub(crate) fn assert_names_the_mul<T>(result: super::Result<T>) {
        let Err(err) = result else {
            panic!("an unpositioned builder must fail");
        };
        let super::CodegenError::At { op, loc, source } = &err else {
            panic!("the error names its op: {err:?}");
        };
        assert_eq!(*op, "mul");
        assert_eq!(loc.to_string(), "dsl/tests/main.rs:14:16");
        assert!(
            matches!(**source, super::CodegenError::Builder(_)),
            "{source:?}"
        );
        let message = err.to_string();
        let want = "op `mul` at dsl/tests/main.rs:14:16: internal error: LLVM builder:";
        assert!(message.starts_with(want), "{message}");
    }
}
