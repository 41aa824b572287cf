//! CUDA variants: run only where nvcc and a GPU are present, skipped with a reason otherwise.
use tritium_backend::aot::{cuda_available, nvcc_available, AotError, DType};

use super::common::op;

/// Why CUDA tests cannot run here, if they cannot.
fn skip_reason() -> Option<String> {
    let mut missing = Vec::new();
    if !nvcc_available() {
        missing.push("nvcc");
    }
    if !cuda_available() {
        missing.push("a CUDA driver and GPU");
    }
    (!missing.is_empty()).then(|| format!("needs {}", missing.join(" and ")))
}

#[test]
fn add_mul_div_cuda() {
    if let Some(reason) = skip_reason() {
        eprintln!("skipped add_mul_div_cuda: {reason}");
        return;
    }
    let op = op("add_mul_div.cu", "CustomAddMulDiv")
        .out_shapes([[3], [3], [3]])
        .out_dtypes([DType::F32; 3])
        .checked(true)
        .build()
        .expect("nvcc compiles MindSpore's multi-output example");
    let x = ndarray::array![1.0f32, 4.0, 9.0];
    let y = ndarray::array![1.0f32, 2.0, 3.0];
    let out = op.call((&x, &y)).unwrap();
    assert_eq!(out[0].to_vec::<f32>().unwrap(), [2.0, 6.0, 12.0]);
    assert_eq!(out[1].to_vec::<f32>().unwrap(), [1.0, 8.0, 27.0]);
    assert_eq!(out[2].to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0]);
}

#[test]
fn cuda_without_a_device_is_an_error() {
    if cuda_available() {
        eprintln!("skipped cuda_without_a_device_is_an_error: a CUDA device is present");
        return;
    }
    if !nvcc_available() {
        eprintln!("skipped cuda_without_a_device_is_an_error: needs nvcc to build the operator");
        return;
    }
    let op = op("add_mul_div.cu", "CustomAddMulDiv")
        .out_dtypes([DType::F32; 3])
        .build()
        .unwrap();
    let x = ndarray::array![1.0f32];
    assert!(matches!(op.call((&x, &x)), Err(AotError::Cuda(_))));
}

#[test]
fn prebuilt_library_declared_cuda_needs_a_device() {
    if cuda_available() {
        // Running a CPU kernel on device pointers would fault; nothing to check here.
        eprintln!(
            "skipped prebuilt_library_declared_cuda_needs_a_device: a CUDA device is present"
        );
        return;
    }
    let op = op("add.cc", "CustomAdd")
        .target(tritium_backend::aot::Target::Cuda)
        .out_shape([1])
        .out_dtype(DType::F32)
        .build()
        .unwrap();
    let x = ndarray::array![1.0f32];
    let err = op.call((&x, &x)).unwrap_err();
    assert!(matches!(err, AotError::Cuda(_)), "{err}");
    assert!(err.to_string().contains("CUDA"), "{err}");
}
