//! The NVPTX target machine for one GPU architecture, and the pipeline's NVPTX target.

use super::{codegen, CudaCompileOptions};
use crate::pipeline::cache::Store;
use crate::pipeline::dump::Dumps;
use crate::pipeline::link::{BitcodeTarget, CustomEntries};
use crate::pipeline::target::{Target, TargetKind};
use crate::pipeline::version;
use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::targets::{
    CodeModel, FileType, InitializationConfig, RelocMode, TargetMachine, TargetTriple,
};
use inkwell::OptimizationLevel;
use std::sync::Once;
use tritium_dsl::ir::Function;

static INIT: Once = Once::new();

/// The triple every CUDA module has.
pub(crate) const TRIPLE: &str = "nvptx64-nvidia-cuda";

/// The architectures Tritium generates code for, with the PTX ISA version each is given:
/// at least 7.5 (CUDA 11.5's, for `cp.async`'s `ignore-src` predicate; Triton's PTX is
/// 8.x everywhere), 8.1 for `sm_89` (whose fp8 conversions, `cvt` with `.e4m3x2` or
/// `.e5m2x2` as Triton's inline asm writes them, ptxas takes from 8.1 on there; 7.8 is
/// the least that names `sm_89`), and 8.0 for Hopper's `wgmma` (`sm_90a`).
const ARCHITECTURES: &[(u32, u32)] = &[(80, 75), (86, 75), (87, 75), (89, 81), (90, 80)];

/// The PTX target name of `sm`: `sm_90a` (the architecture-specific features: `wgmma`)
/// for Hopper, `sm_XX` otherwise.
pub(crate) fn target_name(sm: u32) -> String {
    match uses_wgmma(sm) {
        true => format!("sm_{sm}a"),
        false => format!("sm_{sm}"),
    }
}

/// Whether code for `sm` runs tensor-core `dot`s on `wgmma` (Hopper).
pub(crate) fn uses_wgmma(sm: u32) -> bool {
    sm >= 90
}

/// The PTX ISA version (`70` for 7.0) that `sm` needs, or an error naming the supported ones.
pub(crate) fn ptx_version(sm: u32) -> Result<u32, String> {
    ARCHITECTURES
        .iter()
        .find(|(s, _)| *s == sm)
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            let list: Vec<String> = ARCHITECTURES
                .iter()
                .map(|(s, _)| format!("sm_{s}"))
                .collect();
            format!(
                "sm_{sm} is not supported; Tritium generates PTX for {}",
                list.join(", ")
            )
        })
}

/// A target machine for `sm_XX` at O3.
pub(crate) fn machine(sm: u32) -> Result<TargetMachine, String> {
    let ptx = ptx_version(sm)?;
    use inkwell::targets::Target as LlvmTarget;
    INIT.call_once(|| LlvmTarget::initialize_nvptx(&InitializationConfig::default()));
    crate::pipeline::options::apply();
    let triple = TargetTriple::create(TRIPLE);
    let target = LlvmTarget::from_triple(&triple)
        .map_err(|e| format!("this LLVM has no NVPTX target: {e}"))?;
    target
        .create_target_machine(
            &triple,
            &target_name(sm),
            &format!("+ptx{ptx}"),
            OptimizationLevel::Aggressive,
            RelocMode::Default,
            CodeModel::Default,
        )
        .ok_or_else(|| format!("LLVM cannot create an NVPTX target machine for sm_{sm}"))
}

/// The NVPTX target: the CUDA code generator at O3 for `sm_XX`, PTX text in the disk cache.
pub(crate) struct Nvptx(pub CudaCompileOptions);

impl Target for Nvptx {
    type Code = String;

    fn kind(&self) -> TargetKind {
        TargetKind::Nvptx
    }

    fn key(&self) -> Result<Vec<String>, String> {
        let o = &self.0;
        let ptx = ptx_version(o.sm)?;
        Ok(vec![
            version::NVPTX.to_string(),
            format!(
                "{TRIPLE}|sm_{}|ptx{ptx}|warps={}|stages={}|bounds_check={}|sites={:?}|tma={}",
                o.sm,
                o.num_warps,
                o.num_stages,
                o.bounds_check,
                o.sites,
                o.tma && uses_wgmma(o.sm)
            ),
        ])
    }

    fn store(&self) -> Option<Store> {
        Some(Store::Ptx)
    }

    fn bitcode(&self) -> BitcodeTarget {
        BitcodeTarget::Nvptx
    }

    fn machine(&self) -> Result<TargetMachine, String> {
        machine(self.0.sm)
    }

    fn generate<'ctx>(
        &self,
        ctx: &'ctx Context,
        module: &Module<'ctx>,
        f: &Function,
        symbol: &str,
        customs: &CustomEntries,
    ) -> Result<usize, crate::llvm::CodegenError> {
        let options = codegen::CodegenOptions {
            num_warps: self.0.num_warps,
            num_stages: self.0.num_stages,
            emulate: false,
            bounds_check: self.0.bounds_check,
            sites: self.0.sites,
            ptx: ptx_version(self.0.sm).map_err(crate::llvm::CodegenError::unsupported)?,
            wgmma: uses_wgmma(self.0.sm),
            tma: self.0.tma && uses_wgmma(self.0.sm),
        };
        Ok(codegen::generate(ctx, module, f, symbol, options, customs)?.shared_bytes)
    }

    fn emit(
        &self,
        machine: &TargetMachine,
        module: &Module<'_>,
        dumps: &Dumps<'_>,
    ) -> Result<Vec<u8>, String> {
        let asm = machine
            .write_to_memory_buffer(module, FileType::Assembly)
            .map_err(|e| format!("NVPTX code generation failed: {e}"))?;
        let text = String::from_utf8_lossy(asm.as_slice())
            .trim_end_matches('\0')
            .to_string();
        dumps.write("ptx", text.as_bytes());
        Ok(text.into_bytes())
    }

    fn decode(&self, bytes: &[u8], symbol: &str) -> Result<String, String> {
        let text =
            String::from_utf8(bytes.to_vec()).map_err(|e| format!("PTX is not UTF-8: {e}"))?;
        // Another kernel's PTX under this key would load and launch the wrong entry.
        match text.contains(&format!(".entry {symbol}(")) {
            true => Ok(text),
            false => Err(format!("the PTX has no entry `{symbol}`")),
        }
    }
}
