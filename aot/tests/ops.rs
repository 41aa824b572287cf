//! MindSpore's AOT acceptance cases.
use ndarray::{array, Array2, ArrayD, IxDyn};
use rstest::rstest;
use tritium_aot::{AotOp, Attrs, DType, Tensor, TensorSpec, CUSTOM_AOT_EXTRA_H, DYN_DIM, DYN_RANK};

use super::common::{data, op, options, prebuilt, scratch};

fn add_inputs() -> (Array2<f32>, Array2<f32>) {
    (
        array![[0.0, 0.0], [1.0, 1.0]],
        array![[2.0, 2.0], [3.0, 3.0]],
    )
}

#[test]
fn operators_and_tensors_are_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<AotOp>();
    check::<Tensor>();
    check::<tritium_aot::AotError>();
}

#[test]
fn add_from_prebuilt_library() {
    let lib = prebuilt("add.cc", &scratch("prebuilt"));
    let op = AotOp::builder(format!("{}:CustomAdd", lib.display()))
        .options(options())
        .infer_shape(|x| x[0].clone())
        .infer_dtype(|x| x[0])
        .build()
        .unwrap();
    let (x0, x1) = add_inputs();
    let out = op.call1((&x0, &x1)).unwrap();
    assert_eq!(out.dtype(), DType::F32);
    assert_eq!(
        out.to_array::<f32>().unwrap(),
        array![[2.0, 2.0], [4.0, 4.0]].into_dyn()
    );
}

#[test]
fn add_auto_compiled() {
    let op = op("add.cc", "CustomAdd")
        .infer_shape(|x| x[0].clone())
        .out_dtype(DType::F32)
        .build()
        .unwrap();
    assert!(op.library_path().starts_with(super::common::cache()));
    let (x0, x1) = add_inputs();
    let out = op.call1((&x0, &x1)).unwrap();
    assert_eq!(
        out.to_array::<f32>().unwrap(),
        array![[2.0, 2.0], [4.0, 4.0]].into_dyn()
    );
    // Non-contiguous inputs are copied into C order first.
    let t = x1.t();
    let out = op.call1((&x0.t(), &t)).unwrap();
    assert_eq!(
        out.to_array::<f32>().unwrap(),
        array![[2.0, 4.0], [2.0, 4.0]].into_dyn()
    );
}

#[test]
fn compile_cache_is_content_addressed() {
    // Same basename, different content, different directories: no collision.
    let (a, b) = (scratch("same-name-a"), scratch("same-name-b"));
    std::fs::copy(data("add.cc"), a.join("k.cc")).unwrap();
    let sub = std::fs::read_to_string(data("add.cc"))
        .unwrap()
        .replace("input1[i] + input2[i]", "input1[i] - input2[i]");
    std::fs::write(b.join("k.cc"), sub).unwrap();
    let build = |dir: &std::path::Path| {
        AotOp::builder(format!("{}:CustomAdd", dir.join("k.cc").display()))
            .options(options())
            .out_shape([2])
            .out_dtype(DType::F32)
            .build()
            .unwrap()
    };
    let (op_a, op_b) = (build(&a), build(&b));
    assert_ne!(op_a.library_path(), op_b.library_path());
    let (x, y) = (array![5.0f32, 6.0], array![1.0f32, 2.0]);
    assert_eq!(
        op_a.call1((&x, &y)).unwrap().to_vec::<f32>().unwrap(),
        [6.0, 8.0]
    );
    assert_eq!(
        op_b.call1((&x, &y)).unwrap().to_vec::<f32>().unwrap(),
        [4.0, 4.0]
    );
    // Building again reuses the cached library.
    assert_eq!(build(&a).library_path(), op_a.library_path());
}

#[test]
fn concurrent_compiles_of_one_source_agree() {
    let dir = scratch("concurrent");
    let stamp = format!(
        "// unique {:?} {}\n",
        std::time::SystemTime::now(),
        std::process::id()
    );
    let src = dir.join("add_concurrent.cc");
    std::fs::write(
        &src,
        stamp + &std::fs::read_to_string(data("add.cc")).unwrap(),
    )
    .unwrap();
    let spec = format!("{}:CustomAdd", src.display());
    let paths: Vec<_> = (0..4)
        .map(|_| {
            let spec = spec.clone();
            std::thread::spawn(move || {
                AotOp::builder(spec)
                    .options(options())
                    .out_shape([1])
                    .out_dtype(DType::F32)
                    .build()
                    .map(|op| op.library_path().to_path_buf())
            })
        })
        .collect::<Vec<_>>()
        .into_iter()
        .map(|h| h.join().unwrap().unwrap())
        .collect();
    assert!(paths.windows(2).all(|w| w[0] == w[1]));
    let leftovers = std::fs::read_dir(paths[0].parent().unwrap())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name().to_string_lossy().contains("add_concurrent")
                && e.file_name().to_string_lossy().contains(".tmp.")
        })
        .count();
    assert_eq!(leftovers, 0, "temporary files left in the cache");
}

#[test]
fn header_is_shipped_into_the_cache() {
    let dir = tritium_aot::header_dir(&super::common::cache()).unwrap();
    let text = std::fs::read_to_string(dir.join("custom_aot_extra.h")).unwrap();
    assert_eq!(text, CUSTOM_AOT_EXTRA_H);
    assert!(dir.join("custom_aot_typeid.h").is_file());
}

#[test]
fn add_with_attributes_and_workspace() {
    let op = op("add_attr.cc", "CustomAdd")
        .infer_shape(|x| x[0].clone())
        .out_dtype(DType::F32)
        .attr("scale", 0.7)
        .attr("paddings", [2, 2])
        .build()
        .unwrap();
    let x = array![[1.0f32, 2.0], [3.0, 4.0]];
    let y = array![[1.0f32, 10.0], [-1.0, 0.5]];
    let out = op.call1((&x, &y)).unwrap().to_array::<f32>().unwrap();
    let expect = (&x + &(y.mapv(|v| 1.4 * v)) + 4.0).into_dyn();
    for (a, b) in out.iter().zip(expect.iter()) {
        assert!((a - b).abs() < 1e-5, "{out} vs {expect}");
    }
    // Attributes given at the call replace the definition's, in a separate kernel instance.
    let out = op
        .call_with(
            (&x, &y),
            &Attrs::new().with("scale", 0.5).with("paddings", [0, 1]),
        )
        .unwrap();
    let expect = (&x + &y + 1.0).into_dyn();
    assert_eq!(out[0].to_array::<f32>().unwrap(), expect);
    assert_eq!(op.instance_count(), 2);
}

#[test]
fn attributes_of_every_kind_cross_the_abi() {
    let op = op("attrs.cc", "ReadAttrs")
        .out_shape([15])
        .out_dtype(DType::F64)
        .attr("b", true)
        .attr("i", -42i64)
        .attr("f", 0.25f32)
        .attr("s", "hello")
        .attr("iv", vec![1i64, 2, 3])
        .attr("fv", vec![0.5f32, 1.5])
        .attr("i2", vec![vec![1i64], vec![2, 3, 9]])
        .attr("f2", vec![vec![4.0f32, 8.5]])
        .build()
        .unwrap();
    let x = array![0.0f32];
    let out = op.call1((&x,)).unwrap().to_vec::<f64>().unwrap();
    assert_eq!(
        out,
        [1.0, -42.0, 0.25, 5.0, 104.0, 3.0, 3.0, 2.0, 1.5, 2.0, 3.0, 9.0, 1.0, 8.5, -42.0]
    );
}

/// The seed's `kernel.cc`, byte for byte as the tutorial prints it, compiles against the
/// shipped header and runs. (The tutorial's kernel sizes its add by the output, so only its
/// inference is checked numerically here; `add_reduce.cc` is the corrected kernel.)
#[test]
fn seed_kernel_cc_compiles_and_runs_unchanged() {
    let op = op("kernel.cc", "CustomKernel")
        .out_dtype(DType::F32)
        .attr("axis", 1i64)
        .attr("keep_dim", false)
        .build()
        .unwrap();
    assert!(op.has_init());
    let specs = op
        .infer(&[
            TensorSpec::new([4, DYN_DIM], DType::F32),
            TensorSpec::new([4, DYN_DIM], DType::F32),
        ])
        .unwrap();
    assert_eq!(specs, [TensorSpec::new([4], DType::F32)]);
    let x = Array2::<f32>::ones((4, 5));
    let out = op.call1((&x, &x)).unwrap();
    assert_eq!(out.shape(), [4]);
}

#[rstest]
fn fused_add_reduce_sum(#[values(0, 1)] axis: i64, #[values(false, true)] keep_dim: bool) {
    let op = op("add_reduce.cc", "CustomKernel")
        .out_dtype(DType::F32)
        .attr("axis", axis)
        .attr("keep_dim", keep_dim)
        .checked(true)
        .build()
        .unwrap();
    let x = Array2::<f32>::ones((4, 5));
    let out = op.call1((&x, &x)).unwrap().to_array::<f32>().unwrap();
    let expect = match (axis, keep_dim) {
        (1, false) => ArrayD::from_elem(IxDyn(&[4]), 10.0),
        (1, true) => ArrayD::from_elem(IxDyn(&[4, 1]), 10.0),
        (0, false) => ArrayD::from_elem(IxDyn(&[5]), 8.0),
        _ => ArrayD::from_elem(IxDyn(&[1, 5]), 8.0),
    };
    assert_eq!(out, expect);
    if (axis, keep_dim) == (1, false) {
        assert_eq!(out.as_slice().unwrap(), [10.0, 10.0, 10.0, 10.0]);
    }
}

#[rstest]
#[case(1, false, vec![4, DYN_DIM], vec![4])]
#[case(0, false, vec![4, DYN_DIM], vec![DYN_DIM])]
#[case(1, true, vec![DYN_DIM, 5], vec![DYN_DIM, 1])]
#[case(0, true, vec![4, DYN_DIM], vec![1, DYN_DIM])]
#[case(1, false, vec![DYN_RANK], vec![DYN_RANK])]
fn dynamic_shape_and_rank_inference(
    #[case] axis: i64,
    #[case] keep_dim: bool,
    #[case] input: Vec<i64>,
    #[case] expect: Vec<i64>,
) {
    let op = op("add_reduce.cc", "CustomKernel")
        .out_dtype(DType::F32)
        .attr("axis", axis)
        .attr("keep_dim", keep_dim)
        .build()
        .unwrap();
    let spec = TensorSpec::new(input, DType::F32);
    let out = op.infer(&[spec.clone(), spec]).unwrap();
    assert_eq!(out, [TensorSpec::new(expect, DType::F32)]);
}

#[test]
fn dynamic_shapes_get_one_instance_per_shape() {
    let op = op("add_reduce.cc", "CustomKernel")
        .out_dtype(DType::F32)
        .attr("axis", 1i64)
        .attr("keep_dim", false)
        .build()
        .unwrap();
    for cols in [5, 7, 5, 3] {
        let x = Array2::<f32>::ones((4, cols));
        let out = op.call1((&x, &x)).unwrap().to_vec::<f32>().unwrap();
        assert_eq!(out, vec![2.0 * cols as f32; 4]);
    }
    assert_eq!(op.instance_count(), 3);
}

#[test]
fn gather_by_int64_indices() {
    let op = op("gather.cc", "Gather").build().unwrap();
    let data = array![[0.0f32, 1.0], [10.0, 11.0], [20.0, 21.0]];
    let idx = array![2i64, 0, 2, 1];
    let out = op.call1((&data, &idx)).unwrap();
    assert_eq!(out.dtype(), DType::F32);
    assert_eq!(
        out.to_array::<f32>().unwrap(),
        array![[20.0, 21.0], [0.0, 1.0], [20.0, 21.0], [10.0, 11.0]].into_dyn()
    );
    let spec = op
        .infer(&[
            TensorSpec::new([3, 2], DType::F32),
            TensorSpec::dynamic_rank(DType::I64),
        ])
        .unwrap();
    assert_eq!(spec, [TensorSpec::dynamic_rank(DType::F32)]);
}

#[test]
fn mixed_dtypes_f32_times_f16_gives_f16() {
    use half::f16;
    let op = op("infer.cc", "MulMixed").build().unwrap();
    let x = array![1.5f32, -2.0, 4.0];
    let y = array![f16::from_f32(2.0), f16::from_f32(0.25), f16::from_f32(-1.0)];
    let out = op.call1((&x, &y)).unwrap();
    assert_eq!(out.dtype(), DType::F16);
    assert_eq!(
        out.to_vec::<f16>().unwrap(),
        [3.0f32, -0.5, -4.0].map(f16::from_f32)
    );
    // FuncInferType sees MindSpore's TypeIds: float32 x float32 is rejected by it.
    let err = op
        .infer(&[
            TensorSpec::new([3], DType::F32),
            TensorSpec::new([3], DType::F32),
        ])
        .unwrap_err();
    assert!(err.to_string().contains("TypeId 0"), "{err}");
}

#[test]
fn three_outputs() {
    let op = op("add_mul_div.cc", "CustomAddMulDiv")
        .out_dtypes([DType::F32; 3])
        .build()
        .unwrap();
    let x = array![1.0f32, 4.0, 9.0];
    let y = array![1.0f32, 2.0, 3.0];
    let out = op.call((&x, &y)).unwrap();
    assert_eq!(out.len(), 3);
    assert_eq!(out[0].to_vec::<f32>().unwrap(), [2.0, 6.0, 12.0]);
    assert_eq!(out[1].to_vec::<f32>().unwrap(), [1.0, 8.0, 27.0]);
    assert_eq!(out[2].to_vec::<f32>().unwrap(), [1.0, 2.0, 3.0]);
    // MindSpore's net: (o0 + o1) * o2 on x = y = ones(3) gives [3, 3, 3].
    let ones = array![1.0f32, 1.0, 1.0];
    let o = op.call((&ones, &ones)).unwrap();
    let r = o[0].add(&o[1]).unwrap().mul(&o[2]).unwrap();
    assert_eq!(r.to_vec::<f32>().unwrap(), [3.0, 3.0, 3.0]);
}

#[test]
fn fixed_shapes_for_several_outputs() {
    let op = op("add_mul_div.cc", "CustomAddMulDiv")
        .out_shapes([[3], [3], [3]])
        .out_dtypes([DType::F32, DType::F32, DType::F32])
        .build()
        .unwrap();
    let x = array![2.0f32, 4.0, 6.0];
    let out = op.call([&x, &x]).unwrap();
    assert_eq!(out[2].to_vec::<f32>().unwrap(), [1.0, 1.0, 1.0]);
}

#[test]
fn data_dependent_nonzero() {
    let op = op("nonzero.cc", "NonZero")
        .infer_shape(|x| vec![x[0][0], 1])
        .out_dtype(DType::I64)
        .data_dependent_shapes()
        .checked(true)
        .build()
        .unwrap();
    let x = array![1.0f32, 0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0];
    let out = op.call1((&x,)).unwrap();
    assert_eq!(out.shape(), [4, 1]);
    assert_eq!(out.to_vec::<i64>().unwrap(), [0, 2, 4, 7]);
    let none = op.call1((&ndarray::Array1::<f32>::zeros(8),)).unwrap();
    assert_eq!(none.shape(), [0, 1]);
}

#[test]
fn kernel_instance_life_cycle() {
    let op = op("lifecycle.cc", "LifeCycle")
        .out_shape([1])
        .out_dtype(DType::I64)
        .build()
        .unwrap();
    // SAFETY: the same library the operator loaded; the counters take no arguments.
    let lib = unsafe { libloading::Library::new(op.library_path()) }.unwrap();
    let inits = unsafe { lib.get::<unsafe extern "C" fn() -> i32>(b"LifeCycleInits") }.unwrap();
    let dtors = unsafe { lib.get::<unsafe extern "C" fn() -> i32>(b"LifeCycleDtors") }.unwrap();
    let (i0, d0) = unsafe { (inits(), dtors()) };
    let a = array![1.0f32, 2.0];
    let b = array![1.0f32, 2.0, 3.0];
    let calls = |t: Tensor| t.to_vec::<i64>().unwrap()[0];
    // GE's compile stage initializes the instance ahead of the first call.
    let outs = op.compile(&[TensorSpec::new([2], DType::F32)]).unwrap();
    assert_eq!(outs, [TensorSpec::new([1], DType::I64)]);
    assert_eq!(unsafe { inits() } - i0, 1);
    assert!(op
        .compile(&[TensorSpec::new([DYN_DIM], DType::F32)])
        .is_err());
    assert_eq!(calls(op.call1((&a,)).unwrap()), 1);
    assert_eq!(calls(op.call1((&a,)).unwrap()), 2); // kernel data persists
    assert_eq!(unsafe { inits() } - i0, 1); // Init once per instance
    assert_eq!(calls(op.call1((&b,)).unwrap()), 1); // new shape, new instance
    assert_eq!(unsafe { inits() } - i0, 2);
    assert_eq!(unsafe { dtors() } - d0, 0);
    let clone = op.clone();
    drop(op);
    assert_eq!(
        unsafe { dtors() } - d0,
        0,
        "a clone still holds the instances"
    );
    drop(clone);
    assert_eq!(
        unsafe { dtors() } - d0,
        2,
        "kernel data destroyed with the operator"
    );
}

#[test]
fn null_stream_and_dtype_strings_on_cpu() {
    // add.cc returns 3 for a non-null stream and 2 for any dtype string but "float32".
    let op = op("add.cc", "CustomAdd")
        .infer_shape(|x| x[0].clone())
        .infer_dtype(|x| x[0])
        .build()
        .unwrap();
    let x = array![1.0f32];
    assert!(op.call1((&x, &x)).is_ok());
    let d = array![1.0f64];
    let err = op.call1((&d, &d)).unwrap_err();
    assert!(err.to_string().contains("returned error code 2"), "{err}");
}

#[test]
fn tensors_round_trip_every_dtype_and_do_float_arithmetic() {
    use half::{bf16, f16};
    let t = Tensor::from(array![true, false, true]);
    assert_eq!(t.dtype(), DType::Bool);
    assert_eq!(t.to_vec::<bool>().unwrap(), [true, false, true]);
    assert_eq!(t.ones_like().to_vec::<bool>().unwrap(), [true; 3]);
    assert_eq!(
        Tensor::from(array![1u8, 255]).to_vec::<u8>().unwrap(),
        [1, 255]
    );
    assert_eq!(
        Tensor::from(array![-1i16, 7]).to_vec::<i16>().unwrap(),
        [-1, 7]
    );
    assert_eq!(
        Tensor::from(array![u64::MAX]).to_vec::<u64>().unwrap(),
        [u64::MAX]
    );
    let h = Tensor::from(array![f16::from_f32(1.5), f16::from_f32(-2.0)]);
    assert_eq!(
        h.add(&h).unwrap().to_vec::<f16>().unwrap(),
        [3.0f32, -4.0].map(f16::from_f32)
    );
    let b = Tensor::from(array![bf16::from_f32(3.0)]);
    assert_eq!(
        b.mul(&b).unwrap().to_vec::<bf16>().unwrap(),
        [bf16::from_f32(9.0)]
    );
    let d = Tensor::from(array![[1.0f64, 2.0], [3.0, 4.0]]);
    assert_eq!(
        d.div(&d.ones_like().map(|v| v * 2.0))
            .unwrap()
            .view::<f64>()
            .unwrap(),
        array![[0.5, 1.0], [1.5, 2.0]].into_dyn()
    );
    assert!(d.add(&h).is_err());
    let raw = Tensor::from_bytes(DType::Bool, &[2], &[0, 7]).unwrap();
    assert_eq!(raw.as_bytes(), [0, 1], "bools are normalized");
    assert!(Tensor::from_bytes(DType::F32, &[2], &[0; 7]).is_err());
}
