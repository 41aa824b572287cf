//! CUDA variants: run only where nvcc and a GPU are present.
use tritium_backend::aot::{nvcc_available, AotError, DType};

use super::common::op;

fn gpu_present() -> bool {
    std::path::Path::new("/dev/nvidia0").exists()
}

#[test]
fn add_mul_div_cuda() {
    if !nvcc_available() || !gpu_present() {
        eprintln!(
            "skipped add_mul_div_cuda: needs nvcc ({}) and a GPU ({})",
            if nvcc_available() { "found" } else { "absent" },
            if gpu_present() { "found" } else { "absent" }
        );
        return;
    }
    let op = op("add_mul_div.cu", "CustomAddMulDiv")
        .out_dtypes([DType::F32; 3])
        .build()
        .expect("nvcc compiles the MindSpore example");
    let x = ndarray::array![1.0f32, 1.0, 1.0];
    match op.call((&x, &x)) {
        Ok(out) => assert_eq!(out[0].to_vec::<f32>().unwrap(), [2.0, 2.0, 2.0]),
        Err(AotError::Cuda(reason)) => eprintln!("skipped the CUDA call: {reason}"),
        Err(e) => panic!("{e}"),
    }
}
