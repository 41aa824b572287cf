//! Compiles the custom-op C++ sources (`csrc/`) to LLVM bitcode with `tritium-build`:
//! `$OUT_DIR/add.bc` for the CPU backend and `$OUT_DIR/add.nvptx.bc`
//! (`nvptx64-nvidia-cuda`, sm_80) for CUDA. `src/custom_bitcode.rs` embeds both.

use tritium_build::{Bitcode, Target};

fn main() -> Result<(), tritium_build::Error> {
    println!("cargo:rerun-if-changed=build.rs");
    Bitcode::new()
        .file("csrc/add.cpp")
        .target(Target::Host)
        .compile("add")?;
    Bitcode::new()
        .file("csrc/add.cpp")
        .target(Target::Nvptx { sm: 80 })
        .compile("add.nvptx")?;
    Ok(())
}
