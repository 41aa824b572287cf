//! The printed kernels the mutator starts from: the pinned texts, every shipped kernel, and
//! one kernel of odd constants and names. All are built into the binary.

use tritium_dsl::ir::{print_function, Function};
use tritium_dsl::trace::lang::*;
use tritium_dsl::trace::{ptr_param, scalar_param, Operand, Specialization, Tracer};
use tritium_dsl::DType;
use tritium_kernels::custom_add::{self, AddOp};
use tritium_kernels::{layer_norm, matmul, misc, softmax, vector_add};

/// The IR texts pinned by `tritium-dsl`'s tests (`dsl/tests/pinned`).
const PINNED: &[&str] = &[
    include_str!("../../../dsl/tests/pinned/vadd.tir"),
    include_str!("../../../dsl/tests/pinned/loop_sum.tir"),
];

/// Printed seed kernels: together they use every op, every control-flow form, custom ops,
/// float specials, extreme integers and file names that need escapes.
pub fn seed_kernels() -> Vec<String> {
    let s = Specialization::default();
    let traced: Vec<Function> = vec![
        vector_add::add::trace::<half::f16>(&s, 1024).unwrap(),
        vector_add::add::trace::<i32>(&s, 256).unwrap(),
        softmax::softmax::trace::<f32>(&s, 1024).unwrap(),
        matmul::matmul::trace::<half::f16, f32>(&s, 64, 64, 32).unwrap(),
        layer_norm::layer_norm_fwd::trace::<f32>(&s, 1024).unwrap(),
        layer_norm::layer_norm_bwd_dwdb::trace::<f32>(&s, 32, 64).unwrap(),
        misc::histogram::trace(&s, 256).unwrap(),
        misc::row_stats::trace(&s, 256).unwrap(),
        misc::collatz::trace(&s, 4).unwrap(),
        custom_add::custom_add::trace::<half::f16>(&s, 1024, AddOp::Simt).unwrap(),
        custom_add::custom_divmod::trace(&s, 100, true).unwrap(),
        custom_add::custom_scale::trace::<f32>(&s, 8, 16, true).unwrap(),
        odd(),
    ];
    PINNED
        .iter()
        .map(|t| t.to_string())
        .chain(traced.iter().map(print_function))
        .collect()
}

/// Float specials of every float dtype, integers at the ends of their ranges, reshapes and
/// transposes, and source files whose names need every kind of escape.
#[rustfmt::skip]
fn odd() -> Function {
    let t = Tracer::begin("odd").unwrap();
    let out = ptr_param("out", DType::F32);
    let counts = ptr_param("counts", DType::U64);
    let n = scalar_param("n", DType::I64, 3, &Specialization::default());
    let specials = [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0, 5e-324, 1e-310, 0.1, 65504.0];
    let mut acc = zeros([2, 4], DType::F32);
    for (k, v) in specials.into_iter().enumerate() {
        let d = [DType::F16, DType::BF16, DType::F32, DType::F64][k % 4];
        acc += cast(full([2, 4], v, d), DType::F32);
    }
    let ints = [
        (i128::from(i64::MIN), DType::I64), (i128::from(u64::MAX), DType::U64),
        (-128, DType::I8), (255, DType::U8), (i128::from(i32::MAX), DType::I32), (1, DType::Bool),
        // Out of range: the tracer wraps them as every backend does.
        (-1, DType::U32), (300, DType::I8),
    ];
    for (v, d) in ints {
        acc += cast(scalar(Operand::Int(v), d), DType::F32);
    }
    let m = trans(reshape(acc, [4, 2])).expand_dims(0).sqrt().sum(0);
    let m = fma(m, broadcast_to(2.5f32, [2, 4]), m);
    store(out + arange(0, 8), reshape(m, [8]), NoArg);
    atomic_cas(counts + arange(0, 4), n.to(DType::U64), 7u64);
    let mut f = t.finish().unwrap();
    let files = ["dir\\sub \"q\".rs", "tab\there\nnew", "ctl\u{0}\u{f}\u{7f}\u{85}", "é∑🦀\u{301}"];
    for (k, inst) in f.body.insts.iter_mut().enumerate() {
        inst.loc.file = files[k % files.len()].to_string();
    }
    f
}
