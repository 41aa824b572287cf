//! Builds the backend's native parts:
//!
//! - the AOT operator runtime's C++ shim (`aot-shim/shim.cc`), with `cc`. The shim is
//!   compiled exactly like the user sources the runtime auto-compiles
//!   (`-std=c++17 -D_GLIBCXX_USE_CXX11_ABI=0`), so `std::string` and `std::vector` in
//!   `custom_aot_extra.h` have one layout on both sides;
//! - the `__builtin_*` custom-op library (`builtins/builtins.cpp`), with `tritium-build`
//!   (clang 19), into `$OUT_DIR/builtins.bc` (host) and `$OUT_DIR/builtins.nvptx.bc`
//!   (`nvptx64-nvidia-cuda`, sm_80), embedded by `src/builtins.rs`.

use tritium_build::{Bitcode, Target};

fn main() -> Result<(), tritium_build::Error> {
    println!("cargo:rerun-if-changed=aot-shim/shim.cc");
    println!("cargo:rerun-if-changed=aot-shim/include/custom_aot_extra.h");
    println!("cargo:rerun-if-changed=build.rs");
    cc::Build::new()
        .cpp(true)
        .file("aot-shim/shim.cc")
        .include("aot-shim/include")
        .flag("-std=c++17")
        .define("_GLIBCXX_USE_CXX11_ABI", "0")
        .flag_if_supported("-fvisibility=hidden")
        .warnings(true)
        .compile("tritium_aot_shim");

    let mut builtins = Bitcode::new();
    builtins
        .file("builtins/builtins.cpp")
        // The float atomics reinterpret the element as its bit pattern.
        .flag("-fno-strict-aliasing")
        .flag("-Werror");
    builtins.clone().target(Target::Host).compile("builtins")?;
    builtins
        .clone()
        .target(Target::Nvptx { sm: 80 })
        .compile("builtins.nvptx")?;
    Ok(())
}
