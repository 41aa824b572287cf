//! The NVPTX target machine for one GPU architecture.

use inkwell::targets::{
    CodeModel, InitializationConfig, RelocMode, Target, TargetMachine, TargetTriple,
};
use inkwell::OptimizationLevel;
use std::sync::Once;

static INIT: Once = Once::new();

/// The triple every CUDA module has.
pub(crate) const TRIPLE: &str = "nvptx64-nvidia-cuda";

/// The architectures Tritium generates code for, with the PTX ISA version each needs.
const ARCHITECTURES: &[(u32, u32)] = &[(80, 70), (86, 71), (87, 74), (89, 78), (90, 78)];

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
    INIT.call_once(|| Target::initialize_nvptx(&InitializationConfig::default()));
    crate::pipeline::options::apply();
    let triple = TargetTriple::create(TRIPLE);
    let target =
        Target::from_triple(&triple).map_err(|e| format!("this LLVM has no NVPTX target: {e}"))?;
    target
        .create_target_machine(
            &triple,
            &format!("sm_{sm}"),
            &format!("+ptx{ptx}"),
            OptimizationLevel::Aggressive,
            RelocMode::Default,
            CodeModel::Default,
        )
        .ok_or_else(|| format!("LLVM cannot create an NVPTX target machine for sm_{sm}"))
}
