//! Runs clang 19 through the helper on the fixtures (clang 19 is a build requirement of
//! the workspace, so these tests need it too).

use std::fs;
use std::path::{Path, PathBuf};
use tritium_build::{is_bitcode, Bitcode, Error, Target};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn out_dir(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("tritium-build")
        .join(test);
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap();
    dir
}

fn has(bytes: &[u8], needle: &str) -> bool {
    bytes.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// A fresh build with cargo metadata off (these are not build scripts).
fn build(out: &Path) -> Bitcode {
    let mut b = Bitcode::new();
    b.out_dir(out).cargo_metadata(false);
    b
}

#[test]
fn seed_add_compiles_unchanged_for_host_and_nvptx() {
    let out = out_dir("seed");
    let host = build(&out)
        .file(fixture("seed_add.cpp"))
        .compile("seed")
        .unwrap();
    assert_eq!(host, out.join("seed.bc"));
    let nvptx = build(&out)
        .file(fixture("seed_add.cpp"))
        .target(Target::Nvptx { sm: 80 })
        .compile("seed.nvptx.bc")
        .unwrap();
    assert_eq!(nvptx, out.join("seed.nvptx.bc"));
    for (path, triple) in [(&host, "x86_64"), (&nvptx, "nvptx64-nvidia-cuda")] {
        let bytes = fs::read(path).unwrap();
        assert!(is_bitcode(&bytes), "{}", path.display());
        assert!(has(&bytes, "_mlir_ciface_custom_add_int32"));
        if cfg!(target_arch = "x86_64") || triple != "x86_64" {
            assert!(has(&bytes, triple), "{} lacks {triple}", path.display());
        }
    }
    // The shipped header was written next to the outputs.
    let header = fs::read_to_string(out.join("tritium-build/include/custom_op.h")).unwrap();
    assert_eq!(header, tritium_build::HEADER);
}

#[test]
fn helpers_compile_with_local_includes_and_defines() {
    let out = out_dir("helpers");
    for target in [
        Target::Host,
        Target::Nvptx { sm: 80 },
        Target::Nvptx { sm: 90 },
    ] {
        let path = build(&out)
            .file(fixture("helpers.cpp"))
            .include(fixture(""))
            .define("UNUSED_FLAG", Some("1"))
            .flag("-Werror")
            .target(target)
            .compile(&format!("helpers-{target:?}").replace([' ', '{', '}', ':'], ""))
            .unwrap();
        let bytes = fs::read(&path).unwrap();
        for sym in [
            "_mlir_ciface_scale_f32_2d",
            "add_f16",
            "mul_bf16",
            "info_3d",
        ] {
            assert!(has(&bytes, sym), "{sym} missing from {}", path.display());
        }
    }
}

#[test]
fn half_typedefs_can_be_left_out() {
    let out = out_dir("own_half");
    let path = build(&out)
        .file(fixture("own_half.cpp"))
        .flag("-Werror")
        .compile("own_half")
        .unwrap();
    let bytes = fs::read(path).unwrap();
    assert!(has(&bytes, "copy_half") && has(&bytes, "add_f16"));
}

#[test]
fn several_sources_are_linked_into_one_module() {
    let out = out_dir("link");
    let path = build(&out)
        .files([fixture("seed_add.cpp"), fixture("second.cpp")])
        .compile("both")
        .unwrap();
    let bytes = fs::read(path).unwrap();
    assert!(is_bitcode(&bytes));
    assert!(has(&bytes, "_mlir_ciface_custom_add_int32"));
    assert!(has(&bytes, "second_entry"));
}

#[test]
fn a_compile_error_names_the_file_and_carries_clangs_stderr() {
    let out = out_dir("broken");
    let err = build(&out)
        .file(fixture("broken.cpp"))
        .compile("broken")
        .unwrap_err();
    assert!(matches!(err, Error::ToolFailed { .. }), "{err}");
    let text = err.to_string();
    assert!(text.contains("broken.cpp"), "{text}");
    assert!(text.contains("undeclared_name"), "{text}");
    assert!(!out.join("broken.bc").exists());
}

#[test]
fn missing_inputs_are_errors() {
    let out = out_dir("missing");
    let err = build(&out).compile("nothing").unwrap_err();
    assert!(matches!(err, Error::NoSources { .. }), "{err}");
    let err = build(&out)
        .file(fixture("does_not_exist.cpp"))
        .compile("x")
        .unwrap_err();
    assert!(
        matches!(&err, Error::MissingSource { file } if file.ends_with("does_not_exist.cpp")),
        "{err}"
    );
    let err = build(&out)
        .file(fixture("seed_add.cpp"))
        .clang("/nonexistent/clang-19")
        .compile("x")
        .unwrap_err();
    assert!(matches!(err, Error::ToolNotFound { .. }), "{err}");
}

/// clang is configured by `cc`, so `CXXFLAGS_<target>` reaches the compile as in any build
/// script (the target-specific variable keeps the other tests' host builds unaffected).
#[test]
fn cc_passes_target_cxxflags_to_clang() {
    let out = out_dir("cxxflags");
    let src = out.join("needs_flag.cpp");
    fs::write(
        &src,
        "#ifndef TRITIUM_FROM_CXXFLAGS\n#error CXXFLAGS not applied\n#endif\n\
         extern \"C\" int from_cxxflags() { return TRITIUM_FROM_CXXFLAGS; }\n",
    )
    .unwrap();
    let compile = || {
        build(&out)
            .file(&src)
            .target(Target::Nvptx { sm: 80 })
            .compile("needs_flag")
    };
    let missing = compile().unwrap_err().to_string();
    assert!(missing.contains("CXXFLAGS not applied"), "{missing}");
    std::env::set_var("CXXFLAGS_nvptx64_nvidia_cuda", "-DTRITIUM_FROM_CXXFLAGS=7");
    let result = compile();
    std::env::remove_var("CXXFLAGS_nvptx64_nvidia_cuda");
    let bytes = fs::read(result.unwrap()).unwrap();
    assert!(has(&bytes, "from_cxxflags"));
}

/// The bitcode is left for the kernel's pipeline to optimize for the CPU it runs on: the
/// add's loop is neither vectorized (for baseline x86-64's 4-lane vectors) nor marked
/// never to unroll, and no function is `optnone` (as at `-O0`).
#[test]
fn bitcode_is_left_unoptimized_for_the_kernels_pipeline() {
    let out = out_dir("unoptimized");
    let path = build(&out)
        .file(fixture("seed_add.cpp"))
        .compile("seed")
        .unwrap();
    let bytes = fs::read(path).unwrap();
    for made_here in [
        "llvm.loop.isvectorized",
        "llvm.loop.unroll.disable",
        "optnone",
    ] {
        assert!(!has(&bytes, made_here), "the bitcode has `{made_here}`");
    }
}
