//! The host target machine: triple, CPU and features, O3.

use inkwell::targets::{CodeModel, InitializationConfig, RelocMode, Target, TargetMachine};
use inkwell::OptimizationLevel;
use std::sync::Once;

static INIT: Once = Once::new();

/// Initializes LLVM's native target once per process.
pub(crate) fn initialize() {
    INIT.call_once(|| {
        Target::initialize_native(&InitializationConfig::default())
            .expect("LLVM supports the host target");
    });
    super::options::apply();
}

/// A description of the host target, part of every cache key.
pub(crate) fn host_description() -> String {
    initialize();
    format!(
        "{}|{}|{}",
        TargetMachine::get_default_triple()
            .as_str()
            .to_string_lossy(),
        TargetMachine::get_host_cpu_name().to_string(),
        TargetMachine::get_host_cpu_features().to_string()
    )
}

/// A target machine for the host CPU at O3.
pub(crate) fn host_machine() -> Result<TargetMachine, String> {
    initialize();
    let triple = TargetMachine::get_default_triple();
    let target = Target::from_triple(&triple).map_err(|e| e.to_string())?;
    target
        .create_target_machine(
            &triple,
            &TargetMachine::get_host_cpu_name().to_string(),
            &TargetMachine::get_host_cpu_features().to_string(),
            OptimizationLevel::Aggressive,
            RelocMode::PIC,
            CodeModel::Default,
        )
        .ok_or_else(|| {
            format!(
                "LLVM cannot create a target machine for {}",
                triple.as_str().to_string_lossy()
            )
        })
}
