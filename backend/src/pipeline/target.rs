//! What differs between the targets one [`compile`](super::compile::compile) serves: the
//! host CPU (`cpu::HostCpu`), NVPTX (`cuda::target::Nvptx`) and the CUDA emulator
//! (`cuda::emulate::Emulator`). Everything else (cache keys, dumps, the disk cache,
//! linking, verifying, the pass pipeline, stats) is the pipeline's, once.

use super::link::{BitcodeTarget, CustomEntries};
use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::targets::TargetMachine;
use tritium_dsl::ir::Function;

use super::cache::Store;
use super::dump::Dumps;

/// The targets, as [`Stats`](super::stats::Stats) names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TargetKind {
    /// The host CPU backend.
    Cpu,
    /// PTX for CUDA devices.
    Nvptx,
    /// The CUDA code generator built for the host (`Device::CudaEmulator`).
    Emulator,
}

impl TargetKind {
    /// A short lower-case name (`cpu`, `nvptx`, `emulator`).
    pub fn name(self) -> &'static str {
        match self {
            TargetKind::Cpu => "cpu",
            TargetKind::Nvptx => "nvptx",
            TargetKind::Emulator => "emulator",
        }
    }
}

/// One compile target.
pub(crate) trait Target {
    /// What emitted bytes become once loaded: an entry address, or PTX text.
    type Code;

    /// Which target this is (stats, messages).
    fn kind(&self) -> TargetKind;

    /// The cache-key parts that precede the linked bitcode's hashes and the IR text: the
    /// generated code's version, the machine and the options that change the code.
    fn key(&self) -> Result<Vec<String>, String>;

    /// Where entries live in the disk cache; `None`: never cached on disk.
    fn store(&self) -> Option<Store>;

    /// Which compilation of custom-op libraries is linked.
    fn bitcode(&self) -> BitcodeTarget;

    /// Run on every linked library after its entries are resolved.
    fn prepare_library(&self, _lib: &Module<'_>) -> Result<(), String> {
        Ok(())
    }

    /// The target machine, at O3.
    fn machine(&self) -> Result<TargetMachine, String>;

    /// Generates `f` into `module` as `symbol`; returns the number the launch needs
    /// besides the code (the cache entry's `meta`: scratch or shared-memory bytes). An
    /// error names the op that failed and its source location (see `llvm::CodegenError`).
    fn generate<'ctx>(
        &self,
        ctx: &'ctx Context,
        module: &Module<'ctx>,
        f: &Function,
        symbol: &str,
        customs: &CustomEntries,
    ) -> Result<usize, crate::llvm::CodegenError>;

    /// The LLVM pass pipeline.
    fn passes(&self) -> &'static str {
        "default<O3>"
    }

    /// The optimized module's bytes (an object file, PTX text), with its assembly dump.
    fn emit(
        &self,
        machine: &TargetMachine,
        module: &Module<'_>,
        dumps: &Dumps<'_>,
    ) -> Result<Vec<u8>, String>;

    /// Emitted (or cached) bytes made usable; an error on cached bytes means the entry
    /// is rejected and regenerated.
    fn decode(&self, bytes: &[u8], symbol: &str) -> Result<Self::Code, String>;
}
