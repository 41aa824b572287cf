//! Records the triple this helper is built for: as a build-dependency it runs on the build
//! machine, so this is the host triple when `Target::Host` is compiled outside a build script.
fn main() {
    let target = std::env::var("TARGET").expect("cargo sets TARGET for build scripts");
    println!("cargo:rustc-env=TRITIUM_BUILD_HOST={target}");
    println!("cargo:rerun-if-changed=build.rs");
}
