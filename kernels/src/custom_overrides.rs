//! Custom ops that use the optional parts of a constructor's answer: an extra temp buffer
//! ([`CustomImpl::extra_buffer`]) and per-argument dtype overrides ([`CustomImpl::arg_dtype`]).
//! The C++ is in `csrc/add.cpp`.
//!
//! | name | mode | symbol | what it shows |
//! | --- | --- | --- | --- |
//! | `cumsum` | Simd | `custom_cumsum_float32` | an f64 temp buffer of the tile's length, passed after the out |
//! | `widen_mul` | Simt | `custom_widen_mul_int32` | i8 inputs converted to i32 before the call |

use crate::custom_add::add_bitcode;
use tritium::dsl::custom::{CustomArgs, CustomImpl};
use tritium::prelude::*;

/// Prefix sum of a rank-1 f32 tile, accumulated in double in a per-program temp buffer.
#[register_custom_op(core = Vector, pipe = PipeV, mode = Simd)]
pub struct Cumsum;
impl Cumsum {
    fn init(args: &CustomArgs) -> Result<CustomImpl, String> {
        args.expect_arity(1, 1)?;
        args.expect_all_dtype(DType::F32)?;
        let input = &args.ins[0];
        if input.rank() != 1 || args.outs[0].shape != input.shape {
            return Err(format!(
                "cumsum takes a rank-1 tile and an out of its shape, got {input} -> {}",
                args.outs[0]
            ));
        }
        Ok(CustomImpl::new("custom_cumsum_float32")
            .bitcode(add_bitcode())
            .extra_buffer(DType::F64, input.numel()))
    }
}

/// `a * b` per element for i8 or i32 inputs with an i32 out: i8 inputs are widened to i32
/// by dtype overrides, so the C++ sees `int32_t` and the product cannot overflow.
#[register_custom_op(core = Vector, pipe = PipeV, mode = Simt)]
pub struct WidenMul;
impl WidenMul {
    fn init(args: &CustomArgs) -> Result<CustomImpl, String> {
        args.expect_arity(2, 1)?;
        let d = args.in_dtype(0)?;
        if args.in_dtype(1)? != d || !matches!(d, DType::I8 | DType::I32) {
            return Err(format!("inputs must both be i8 or both i32, got {d}"));
        }
        if args.out_dtype(0)? != DType::I32 {
            return Err(format!("out must be i32, got {}", args.outs[0]));
        }
        Ok(CustomImpl::new("custom_widen_mul_int32")
            .bitcode(add_bitcode())
            .arg_dtype(0, DType::I32)
            .arg_dtype(1, DType::I32))
    }
}

/// `out[0..l] = cumsum(x[0..l])` in one program.
#[kernel]
pub fn custom_cumsum(out: Ptr<f32>, x: Ptr<f32>, #[constexpr] l: usize) {
    let idx = arange(0, l);
    let v = load(x + idx);
    let sums = custom("cumsum", v, out = zeros([l], DType::F32));
    store(out + idx, sums);
}

/// `out[0..l] = a[0..l] * b[0..l]` with i8 inputs and an i32 out.
#[kernel]
pub fn custom_widen_mul(out: Ptr<i32>, a: Ptr<i8>, b: Ptr<i8>, #[constexpr] l: usize) {
    let idx = arange(0, l);
    let prod = custom(
        "widen_mul",
        load(a + idx),
        load(b + idx),
        out = zeros([l], DType::I32),
    );
    store(out + idx, prod);
}
