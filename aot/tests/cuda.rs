//! CUDA variants: run only where nvcc and a GPU are present, skipped with a reason otherwise.
use tritium_aot::{
    cuda_available, cuda_device, nvcc_available, AotError, DType, DeviceTensor, Tensor,
};

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

/// MindSpore's AOT GPU example, `add.cu`, as its tutorial calls it.
#[test]
fn the_gpu_example_adds() {
    if let Some(reason) = skip_reason() {
        eprintln!("skipped the_gpu_example_adds: {reason}");
        return;
    }
    let op = op("add.cu", "CustomAdd")
        .infer_shape(|x| x[0].clone())
        .infer_dtype(|x| x[0])
        .checked(true)
        .build()
        .expect("nvcc compiles MindSpore's GPU example");
    let x0 = ndarray::array![[0.0f32, 0.0], [1.0, 1.0]];
    let x1 = ndarray::array![[2.0f32, 2.0], [3.0, 3.0]];
    let out = op.call((&x0, &x1)).unwrap();
    assert_eq!(out[0].to_vec::<f32>().unwrap(), [2.0, 2.0, 4.0, 4.0]);
}

/// `add_mul_div.cu` in MindSpore's multi-output net, with its backward.
#[test]
fn add_mul_div_cuda_backward() {
    if let Some(reason) = skip_reason() {
        eprintln!("skipped add_mul_div_cuda_backward: {reason}");
        return;
    }
    super::grad::add_mul_div_net_and_its_gradients("add_mul_div.cu");
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
        .target(tritium_aot::Target::Cuda)
        .out_shape([1])
        .out_dtype(DType::F32)
        .build()
        .unwrap();
    let x = ndarray::array![1.0f32];
    let err = op.call((&x, &x)).unwrap_err();
    assert!(matches!(err, AotError::Cuda(_)), "{err}");
    assert!(err.to_string().contains("CUDA"), "{err}");
}

#[test]
fn device_tensors_chain_cuda_operators() {
    if let Some(reason) = skip_reason() {
        eprintln!("skipped device_tensors_chain_cuda_operators: {reason}");
        return;
    }
    let op = op("add_mul_div.cu", "CustomAddMulDiv")
        .infer_shapes(|s| vec![s[0].clone(); 3])
        .out_dtypes([DType::F32; 3])
        .checked(true)
        .build()
        .unwrap();
    let gpu = cuda_device().unwrap();
    let upload = |a: ndarray::Array1<f32>| Tensor::from_array(&a).to_device(&gpu).unwrap();
    let x = upload(ndarray::array![1.0f32, 4.0, 9.0]);
    let y = upload(ndarray::array![1.0f32, 2.0, 3.0]);
    let first = op.call_device(&[&x, &y]).unwrap();
    assert_eq!(first[0].shape(), [3]);
    // The sum and the product go straight back in: (x + y) + x·y, (x + y) · x·y, (x + y) / x·y.
    let second = op.call_device(&[&first[0], &first[1]]).unwrap();
    let host = |t: &DeviceTensor| Tensor::from_device(t).unwrap().to_vec::<f32>().unwrap();
    assert_eq!(host(&first[2]), [1.0, 2.0, 3.0]);
    assert_eq!(host(&second[0]), [3.0, 14.0, 39.0]);
    assert_eq!(host(&second[1]), [2.0, 48.0, 324.0]);
    // nvcc builds with --use_fast_math: division may be off by an ulp or two.
    for (got, want) in host(&second[2]).iter().zip([2.0f32, 0.75, 12.0 / 27.0]) {
        assert!((got - want).abs() <= 1e-6 * want.abs(), "{got} vs {want}");
    }
}

#[test]
fn device_tensors_without_a_device_are_an_error() {
    if cuda_available() {
        eprintln!("skipped device_tensors_without_a_device_are_an_error: a CUDA device is present");
        return;
    }
    let err = cuda_device().unwrap_err();
    assert!(matches!(err, AotError::Cuda(_)), "{err}");
    assert!(err.to_string().contains("CUDA"), "{err}");
}

/// Device tensors are the backend's: asking for one on the host is an error naming the
/// device, on any machine.
#[test]
fn device_tensors_live_on_cuda_devices() {
    let t = Tensor::from_array(&ndarray::array![1.0f32, 2.0]);
    let err = t.to_device(&tritium_backend::Device::cpu()).unwrap_err();
    assert!(matches!(err, AotError::Cuda(_)), "{err}");
    assert!(
        err.to_string()
            .contains("lives on a CUDA device, not on cpu"),
        "{err}"
    );
}

#[test]
fn device_tensors_need_a_cuda_operator() {
    let op = op("add.cc", "CustomAdd")
        .out_shape([1])
        .out_dtype(DType::F32)
        .build()
        .unwrap();
    let err = op.call_device(&[]).unwrap_err();
    assert!(matches!(err, AotError::Input { .. }), "{err}");
    assert!(
        err.to_string()
            .contains("device tensors need a CUDA operator"),
        "{err}"
    );
}
