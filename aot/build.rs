//! Builds the AOT runtime's C++ shim (`shim/shim.cc`) with `cc`. The shim is compiled exactly
//! like the user sources the runtime auto-compiles (`-std=c++17 -D_GLIBCXX_USE_CXX11_ABI=0`),
//! so `std::string` and `std::vector` in `custom_aot_extra.h` have one layout on both sides.

fn main() {
    println!("cargo:rerun-if-changed=shim/shim.cc");
    println!("cargo:rerun-if-changed=shim/include/custom_aot_extra.h");
    println!("cargo:rerun-if-changed=build.rs");
    cc::Build::new()
        .cpp(true)
        .file("shim/shim.cc")
        .include("shim/include")
        .flag("-std=c++17")
        .define("_GLIBCXX_USE_CXX11_ABI", "0")
        .flag_if_supported("-fvisibility=hidden")
        .warnings(true)
        .compile("tritium_aot_shim");
}
