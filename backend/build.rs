//! Builds the AOT operator runtime's C++ shim (`aot-shim/shim.cc`).
//!
//! The shim is compiled exactly like the user sources the runtime auto-compiles
//! (`-std=c++17 -D_GLIBCXX_USE_CXX11_ABI=0`), so `std::string` and `std::vector` in
//! `custom_aot_extra.h` have one layout on both sides.

fn main() {
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
}
