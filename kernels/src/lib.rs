//! Kernels written in the Tritium DSL: Triton's tutorials 01 (vector add), 02 (fused
//! softmax), 03 (matmul), 04 (low-memory dropout) and 05 (layer norm forward and
//! backward), plus small kernels exercising atomics and arg-reductions, and SiLU/GELU
//! activations. Each comes with a host wrapper over ndarray.

pub mod activation;
pub mod attention;
pub mod attention_cached;
pub mod attention_descriptor;
pub mod bench;
pub mod cross_entropy;
pub mod custom_add;
pub mod custom_bitcode;
pub mod custom_overrides;
pub mod dropout;
pub mod embedding;
pub mod grouped_gemm;
pub mod layer_norm;
pub mod linear;
pub mod matmul;
pub mod matvec;
pub mod misc;
pub mod rms_norm;
pub mod rope;
pub mod sampling;
pub mod softmax;
pub mod swiglu;
pub mod vector_add;
