//! Every error path: bad definitions, compilers, loading, whitelist, kernels that fail,
//! throw or write out of bounds. None may crash the process.
use std::path::Path;

use ndarray::array;
use tritium_aot::{AotError, AotOp, CompileOptions, DType, Whitelist};

use super::common::{data, func, op, options, prebuilt, scratch};

fn x() -> ndarray::Array1<f32> {
    array![1.0f32, 2.0, 3.0]
}

fn faulty(f: &str) -> AotOp {
    op("faults.cc", f)
        .infer_shape(|x| x[0].clone())
        .out_dtype(DType::F32)
        .checked(true)
        .build()
        .unwrap()
}

#[test]
fn bad_func_specs() {
    for spec in ["add.cc", ":Func", "add.cc:", "add.cc:1abc", "add.cc:a-b"] {
        let err = AotOp::builder(spec).build().unwrap_err();
        assert!(matches!(err, AotError::BadFuncSpec { .. }), "{spec}: {err}");
        assert!(err.to_string().contains(spec), "{err}");
    }
}

#[test]
fn non_zero_return_code() {
    let err = faulty("ReturnsSeven").call((&x(),)).unwrap_err();
    assert!(
        matches!(&err, AotError::ReturnCode { function, code: 7 } if function == "ReturnsSeven"),
        "{err}"
    );
}

#[test]
fn cpp_exception_in_kernel() {
    let err = faulty("Throws").call((&x(),)).unwrap_err();
    match &err {
        AotError::CppException { function, what } => {
            assert_eq!(function, "Throws");
            assert_eq!(what, "boom from the kernel");
        }
        _ => panic!("{err}"),
    }
    let err = faulty("ThrowsInt").call((&x(),)).unwrap_err();
    assert!(err.to_string().contains("unknown C++ exception"), "{err}");
}

#[test]
fn init_failures() {
    let err = faulty("InitFails").call((&x(),)).unwrap_err();
    assert!(
        matches!(&err, AotError::ReturnCode { function, code: 3 } if function == "InitFailsInit"),
        "{err}"
    );
    let err = faulty("InitThrows").call((&x(),)).unwrap_err();
    assert!(
        matches!(&err, AotError::CppException { function, what } if function == "InitThrowsInit" && what == "init cannot cope"),
        "{err}"
    );
}

#[test]
fn attribute_errors_become_exceptions_then_errors() {
    let err = faulty("MissingAttr").call((&x(),)).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("gamma") && msg.contains("not set"), "{msg}");
    let op = op("faults.cc", "WrongAttrType")
        .infer_shape(|x| x[0].clone())
        .out_dtype(DType::F32)
        .attr("scale", 0.5)
        .build()
        .unwrap();
    let msg = op.call((&x(),)).unwrap_err().to_string();
    assert!(
        msg.contains("scale") && msg.contains("float") && msg.contains("std::string"),
        "{msg}"
    );
}

#[test]
fn inference_exception() {
    let op = op("faults.cc", "InferThrows")
        .out_dtype(DType::F32)
        .build()
        .unwrap();
    let err = op.call((&x(),)).unwrap_err();
    assert!(
        matches!(&err, AotError::CppException { function, .. } if function == "InferThrowsInferShape"),
        "{err}"
    );
}

#[test]
fn checked_mode_catches_output_overrun() {
    let err = faulty("OutputOverrun").call((&x(),)).unwrap_err();
    match &err {
        AotError::GuardOverwritten {
            function,
            buffer,
            len,
            offset,
        } => {
            assert_eq!(function, "OutputOverrun");
            assert_eq!(buffer, "output 0");
            assert_eq!((*len, *offset), (12, 0));
        }
        _ => panic!("{err}"),
    }
}

#[test]
fn checked_mode_catches_workspace_overrun() {
    let err = faulty("WorkspaceOverrun").call((&x(),)).unwrap_err();
    assert!(
        matches!(&err, AotError::GuardOverwritten { buffer, len: 16, offset: 0, .. } if buffer == "workspace 0"),
        "{err}"
    );
}

/// Every buffer of every call has its own guard pattern: guard bytes copied from the
/// workspace over the output's are caught.
#[test]
fn guard_bytes_differ_per_buffer_so_copied_guards_are_caught() {
    for _ in 0..2 {
        let err = faulty("GuardCopy").call((&x(),)).unwrap_err();
        assert!(
            matches!(&err, AotError::GuardOverwritten { buffer, len: 12, .. } if buffer == "output 0"),
            "{err}"
        );
    }
}

#[test]
fn data_dependent_shape_beyond_upper_bound() {
    let op = op("faults.cc", "ShapeTooBig")
        .infer_shape(|x| x[0].clone())
        .out_dtype(DType::F32)
        .data_dependent_shapes()
        .build()
        .unwrap();
    let err = op.call((&x(),)).unwrap_err();
    assert!(matches!(err, AotError::BadShapeBuffer { .. }), "{err}");
    assert!(err.to_string().contains("1000"), "{err}");
}

#[test]
fn missing_symbol() {
    let err = op("add.cc", "NoSuchFunc")
        .out_shape([1])
        .out_dtype(DType::F32)
        .build()
        .unwrap_err();
    assert!(
        matches!(&err, AotError::MissingSymbol { symbol, .. } if symbol == "NoSuchFunc"),
        "{err}"
    );
}

#[test]
fn dlopen_failures() {
    let err = AotOp::builder(func("not_a_library.so", "F"))
        .options(options())
        .build()
        .unwrap_err();
    assert!(matches!(err, AotError::LoadFailed { .. }), "{err}");
    assert!(err.to_string().contains("not_a_library.so"), "{err}");
    let err = AotOp::builder("/nonexistent/dir/libx.so:F")
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("no such file"), "{err}");
}

#[test]
fn missing_inference_is_a_definition_error() {
    let err = op("add.cc", "CustomAdd")
        .out_shape([1])
        .build()
        .unwrap_err();
    assert!(
        err.to_string().contains("no output dtype")
            && err.to_string().contains("CustomAddInferType"),
        "{err}"
    );
    let err = op("add.cc", "CustomAdd")
        .out_shapes([[1], [1]])
        .out_dtype(DType::F32)
        .build()
        .unwrap_err();
    assert!(matches!(err, AotError::Definition { .. }), "{err}");
}

#[test]
fn input_count_and_dynamic_output_errors() {
    let op1 = op("add.cc", "CustomAdd")
        .num_inputs(2)
        .infer_shape(|x| x[0].clone())
        .out_dtype(DType::F32)
        .build()
        .unwrap();
    let err = op1.call((&x(),)).unwrap_err();
    assert!(
        err.to_string().contains("expected 2 inputs, got 1"),
        "{err}"
    );
    let op2 = op("add.cc", "CustomAdd")
        .infer_shape(|_| vec![-1])
        .out_dtype(DType::F32)
        .build()
        .unwrap();
    let err = op2.call((&x(), &x())).unwrap_err();
    assert!(matches!(err, AotError::Inference { .. }), "{err}");
}

#[test]
fn compiler_failure_returns_its_output() {
    let err = op("broken.cc", "Broken")
        .out_shape([1])
        .out_dtype(DType::F32)
        .build()
        .unwrap_err();
    match &err {
        AotError::CompileFailed {
            source_path,
            output,
            command,
            ..
        } => {
            assert!(source_path.ends_with("broken.cc"));
            assert!(
                output.contains("this_identifier_does_not_exist_anywhere"),
                "{output}"
            );
            assert!(command.contains("-D_GLIBCXX_USE_CXX11_ABI=0"), "{command}");
        }
        _ => panic!("{err}"),
    }
}

#[test]
fn missing_compiler() {
    let mut o = options();
    o.compile.cxx = Some("/nonexistent/bin/g++".to_string());
    let err = AotOp::builder(func("add.cc", "CustomAdd"))
        .options(o)
        .out_shape([1])
        .out_dtype(DType::F32)
        .build()
        .unwrap_err();
    assert!(
        matches!(&err, AotError::CompilerNotFound { compiler, .. } if compiler == "/nonexistent/bin/g++"),
        "{err}"
    );
}

#[test]
fn compile_time_limit() {
    let dir = scratch("slow-compiler");
    let fake = dir.join("slow-cxx.sh");
    std::fs::write(
        &fake,
        "#!/bin/sh\nif [ \"$1\" = \"--version\" ]; then echo slow-cxx 1.0; exit 0; fi\nexec sleep 30\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut o = options();
    o.compile = CompileOptions {
        cxx: Some(fake.display().to_string()),
        timeout: std::time::Duration::from_millis(500),
        cache_dir: Some(dir.join("cache")),
        ..CompileOptions::default()
    };
    let start = std::time::Instant::now();
    let err = AotOp::builder(func("add.cc", "CustomAdd"))
        .options(o)
        .out_shape([1])
        .out_dtype(DType::F32)
        .build()
        .unwrap_err();
    assert!(matches!(err, AotError::CompileTimeout { .. }), "{err}");
    assert!(start.elapsed() < std::time::Duration::from_secs(10));
}

#[test]
fn nvcc_absent_is_a_clear_error() {
    if tritium_aot::nvcc_available() {
        eprintln!("skipped: nvcc is installed, so the missing-nvcc error cannot be observed");
        return;
    }
    let err = op("add_mul_div.cu", "CustomAddMulDiv")
        .out_dtypes([DType::F32; 3])
        .build()
        .unwrap_err();
    assert!(
        matches!(&err, AotError::CompilerNotFound { compiler, .. } if compiler == "nvcc"),
        "{err}"
    );
    assert!(err.to_string().contains("CUDA toolkit"), "{err}");
}

fn build_lib(lib: &Path, whitelist: Whitelist) -> Result<AotOp, AotError> {
    AotOp::builder(format!("{}:CustomAdd", lib.display()))
        .options(options())
        .whitelist(whitelist)
        .out_shape([1])
        .out_dtype(DType::F32)
        .build()
}

#[test]
fn whitelist_prefix_match_on_canonical_paths() {
    let root = scratch("whitelist");
    let ok = root.join("ok");
    let evil = root.join("ok-evil");
    let lib_ok = prebuilt("add.cc", &ok);
    let lib_evil = prebuilt("add.cc", &evil);
    let wl = Whitelist::new([&ok]);
    build_lib(&lib_ok, wl.clone()).unwrap();
    // "ok-evil" starts with "ok" as a string, but is not inside it.
    let err = build_lib(&lib_evil, wl.clone()).unwrap_err();
    match &err {
        AotError::NotWhitelisted {
            library, whitelist, ..
        } => {
            assert_eq!(library, &std::fs::canonicalize(&lib_evil).unwrap());
            assert_eq!(whitelist, &vec![ok.clone()]);
        }
        _ => panic!("{err}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains("ok-evil") && msg.contains(&ok.display().to_string()),
        "{msg}"
    );
    // A symlink inside the whitelist that points outside is judged by its target.
    let link = ok.join("escape.so");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(&lib_evil, &link).unwrap();
    assert!(matches!(
        build_lib(&link, wl.clone()),
        Err(AotError::NotWhitelisted { .. })
    ));
    // Auto-compiled sources load from the runtime's cache, which is always allowed.
    op("add.cc", "CustomAdd")
        .whitelist(wl)
        .out_shape([1])
        .out_dtype(DType::F32)
        .build()
        .unwrap();
    // An empty whitelist allows only the cache.
    assert!(build_lib(&lib_ok, Whitelist::default()).is_err());
    let _ = data("add.cc");
}

#[test]
fn wrong_dtype_when_reading_outputs() {
    let op = op("add.cc", "CustomAdd")
        .infer_shape(|x| x[0].clone())
        .out_dtype(DType::F32)
        .build()
        .unwrap();
    let out = op.call1((&x(), &x())).unwrap();
    let err = out.to_array::<f64>().unwrap_err();
    assert!(
        err.to_string().contains("expected float64, found float32"),
        "{err}"
    );
}

#[test]
fn impossible_output_sizes_are_errors_not_aborts() {
    let op = op("add.cc", "CustomAdd")
        .infer_shape(|_| vec![1 << 40, 1 << 40])
        .out_dtype(DType::F32)
        .build()
        .unwrap();
    let err = op.call((&x(), &x())).unwrap_err();
    assert!(
        matches!(&err, AotError::Alloc { what, .. } if what == "output 0"),
        "{err}"
    );
}

/// Declared inputs (`AotOpBuilder::input`) are checked before the C++ runs: the seed's
/// `add.cc` trusts its shapes (x of 2^24 elements and y of 1 read past y), so the operator
/// declares both as 4 floats; another size, rank or dtype is an `Input` error.
#[test]
fn declared_inputs_are_checked_before_the_cpp_runs() {
    use tritium_aot::{TensorSpec, DYN_DIM};
    let add = op("add.cc", "CustomAdd")
        .input(TensorSpec::new([4], DType::F32))
        .input(TensorSpec::new([DYN_DIM], DType::F32))
        .infer_shape(|x| x[0].clone())
        .out_dtype(DType::F32)
        .build()
        .unwrap();
    let four = array![1.0f32, 2.0, 3.0, 4.0];
    let out = add.call1((&four, &four)).unwrap();
    assert_eq!(out.to_vec::<f32>().unwrap(), [2.0, 4.0, 6.0, 8.0]);
    let big = ndarray::Array1::<f32>::zeros(1 << 10);
    let doubles = array![1.0f64, 2.0, 3.0, 4.0];
    let square = ndarray::Array2::<f32>::zeros((2, 2));
    let rows: [(&str, tritium_aot::AotResult<_>); 3] = [
        (
            "input 0 is float32 [1024], declared float32 [4]",
            add.call1((&big, &four)),
        ),
        (
            "input 1 is float64 [4], declared float32 [-1]",
            add.call1((&four, &doubles)),
        ),
        (
            "input 1 is float32 [2, 2], declared float32 [-1]",
            add.call1((&four, &square)),
        ),
    ];
    for (want, got) in rows {
        match got {
            Err(AotError::Input { message, .. }) => assert!(message.contains(want), "{message}"),
            other => panic!("expected an input error ({want}), got {other:?}"),
        }
    }
    let err = op("add.cc", "CustomAdd")
        .num_inputs(3)
        .input(TensorSpec::new([4], DType::F32))
        .build()
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("num_inputs is 3 but 1 inputs are declared"),
        "{err}"
    );
}
