//! MindSpore's fused add + reduce-sum AOT operator (seed 001), end to end:
//! a C++ source with `CustomKernelInit` (workspace + attributes into kernel data),
//! `CustomKernelInferShape` (dynamic shape and rank) and `CustomKernel`, compiled
//! automatically, inferred on a dynamic input, then run on `ones(4, 5)`.
//!
//! ```text
//! cargo run --example aot_add_reduce
//! ```
//!
//! Python original:
//!
//! ```python
//! op = ops.Custom("./kernel.cc:CustomKernel", None, mstype.float32, "aot", reg_info=reduce_cpu_info)
//! test.set_inputs(Tensor(shape=[4, None], dtype=mstype.float32), ...)
//! print(test(Tensor(np.ones((4, 5), np.float32)), Tensor(np.ones((4, 5), np.float32))))  # [10. 10. 10. 10.]
//! ```

use ndarray::Array2;
use tritium::aot::{AotOp, DType, TensorSpec, DYN_DIM};

/// The operator source; MindSpore users keep it as `kernel.cc` next to their script.
const KERNEL_CC: &str = include_str!("../aot/tests/data/add_reduce.cc");

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Put kernel.cc in a directory of its own, as a user would.
    let dir = std::env::temp_dir().join(format!("tritium-aot-example-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let source = dir.join("kernel.cc");
    std::fs::write(&source, KERNEL_CC)?;

    let (axis, keep_dim) = (1i64, false);
    // out_shape is left out: the library's CustomKernelInferShape decides.
    let op = AotOp::builder(format!("{}:CustomKernel", source.display()))
        .out_dtype(DType::F32)
        .attr("axis", axis)
        .attr("keep_dim", keep_dim)
        .build()?;
    println!("compiled into {}", op.library_path().display());

    // GE-style inference on a dynamic input, like `set_inputs(Tensor(shape=[4, None]))`.
    let dyn_x = TensorSpec::new([4, DYN_DIM], DType::F32);
    let inferred = op.infer(&[dyn_x.clone(), dyn_x])?;
    println!("inferred output for [4, -1]: {:?}", inferred[0].shape);

    let input_x = Array2::<f32>::ones((4, 5));
    let input_y = Array2::<f32>::ones((4, 5));
    let output = op.call1((&input_x, &input_y))?.to_array::<f32>()?;
    println!("{output}");
    assert_eq!(output.as_slice(), Some(&[10.0f32, 10.0, 10.0, 10.0][..]));

    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
