//! The seed's custom add (triton-ascend `test_custom_op.py`), end to end: C++ in
//! `csrc/add.cpp`, compiled to bitcode by `build.rs`, registered here, called from kernels.
//!
//! Ops registered here (callable from any crate's kernels by name):
//!
//! | name | mode | symbol |
//! | --- | --- | --- |
//! | `add` | Simd | `custom_add_<dtype>` (the seed's op) |
//! | `add_simt` | Simt | `custom_add_simt_<dtype>` |
//! | `add_mix` | Mix | `custom_add_simt_<dtype>`: the Simt entry exists, so per element |
//! | `add_mix_simd` | Mix | `custom_add_<dtype>`: only the Simd entry exists |
//! | `divmod` | Simt | `custom_divmod_int32`: two outs |
//! | `divmod_simd` | Simd | `custom_divmod_int32`: two outs |
//! | `add_sub` | Simt | `custom_add_sub_<dtype>`: two outs, `a + b` and `a - b` (the fallback of `inline_asm_elementwise` calls with two results) |
//! | `scale` | Simd | `custom_scale_<dtype>_<rank>d`: the symbol depends on the rank |
//! | `where` | Simd | `custom_where_float32_<rank>d`: the address each input element is read from |
//! | `where_out` | Simd | `custom_where_out_int64_1d`: the address each out element is written to |
//! | `add_reversed` | Simd, cooperative | `custom_add_reversed_<dtype>`: the CTA's threads split it |

use tritium::dsl::custom::{CustomArgs, CustomImpl};
use tritium::dsl::ir::Bitcode;
use tritium::prelude::*;

/// `add.bc` (host) with `add.nvptx.bc` for CUDA: the bitcode of every op registered here.
pub fn add_bitcode() -> Bitcode {
    Bitcode::from_bytes("add.bc", crate::custom_bitcode::ADD_BC)
        .with_nvptx(crate::custom_bitcode::ADD_NVPTX_BC)
}

/// `add(a, b, out)` over same-dtype tiles: the symbol names the dtype (`custom_add_int32`).
fn add_symbol(args: &CustomArgs, prefix: &str) -> Result<CustomImpl, String> {
    args.expect_arity(2, 1)?;
    let d = args.in_dtype(0)?;
    args.expect_all_dtype(d)?;
    if !matches!(d, DType::I32 | DType::F32 | DType::F16) {
        return Err(format!(
            "no implementation for {d} (add.cpp has int32, float32, float16)"
        ));
    }
    Ok(CustomImpl::new(format!("{prefix}{}", d.str_name())).bitcode(add_bitcode()))
}

/// The seed's op: Simd, `_mlir_ciface_custom_add_<dtype>(memref*, memref*, memref*)`.
#[register_custom_op(core = Vector, pipe = PipeV, mode = Simd)]
pub struct Add;
impl Add {
    fn init(args: &CustomArgs) -> Result<CustomImpl, String> {
        add_symbol(args, "custom_add_")
    }
}

/// Per element: `custom_add_simt_<dtype>(a, b) -> a + b`, inlined and vectorized.
#[register_custom_op(core = Vector, pipe = PipeV, mode = Simt)]
pub struct AddSimt;
impl AddSimt {
    fn init(args: &CustomArgs) -> Result<CustomImpl, String> {
        add_symbol(args, "custom_add_simt_")
    }
}

/// Mix whose bitcode defines the scalar entry: runs per element.
#[register_custom_op(core = Vector, pipe = PipeV, mode = Mix)]
pub struct AddMix;
impl AddMix {
    fn init(args: &CustomArgs) -> Result<CustomImpl, String> {
        add_symbol(args, "custom_add_simt_")
    }
}

/// Mix whose bitcode defines only `_mlir_ciface_<symbol>`: runs once per program.
#[register_custom_op(core = Vector, pipe = PipeV, mode = Mix, name = "add_mix_simd")]
pub struct AddMixSimd;
impl AddMixSimd {
    fn init(args: &CustomArgs) -> Result<CustomImpl, String> {
        add_symbol(args, "custom_add_")
    }
}

fn divmod(args: &CustomArgs) -> Result<CustomImpl, String> {
    args.expect_arity(2, 2)?;
    args.expect_all_dtype(DType::I32)?;
    Ok(CustomImpl::new("custom_divmod_int32").bitcode(add_bitcode()))
}

/// Two outs per element: `custom_divmod_int32(a, b, *q, *r)`.
#[register_custom_op(core = Vector, pipe = PipeV, mode = Simt)]
pub struct Divmod;
impl Divmod {
    fn init(args: &CustomArgs) -> Result<CustomImpl, String> {
        divmod(args)
    }
}

/// Two outs per element, `(a + b, a - b)`: `custom_add_sub_<dtype>(a, b, *sum, *diff)` for
/// int32, int64, float32 and float16 (integers wrap). The host fallback of
/// `inline_asm_elementwise` calls with two results (`tests/inline_asm.rs`, the fuzzer).
#[register_custom_op(core = Vector, pipe = PipeV, mode = Simt)]
pub struct AddSub;
impl AddSub {
    fn init(args: &CustomArgs) -> Result<CustomImpl, String> {
        args.expect_arity(2, 2)?;
        let d = args.in_dtype(0)?;
        args.expect_all_dtype(d)?;
        if !matches!(d, DType::I32 | DType::I64 | DType::F32 | DType::F16) {
            return Err(format!(
                "no implementation for {d} (add.cpp has int32, int64, float32, float16)"
            ));
        }
        Ok(CustomImpl::new(format!("custom_add_sub_{}", d.str_name())).bitcode(add_bitcode()))
    }
}

/// Two outs, whole tiles.
#[register_custom_op(core = Vector, pipe = PipeV, mode = Simd, name = "divmod_simd")]
pub struct DivmodSimd;
impl DivmodSimd {
    fn init(args: &CustomArgs) -> Result<CustomImpl, String> {
        divmod(args)
    }
}

/// `out = in * 2`; the symbol depends on dtype and rank (`custom_scale_float32_2d`).
#[register_custom_op(core = Vector, pipe = PipeV, mode = Simd)]
pub struct Scale;
impl Scale {
    fn init(args: &CustomArgs) -> Result<CustomImpl, String> {
        args.expect_arity(1, 1)?;
        let d = args.in_dtype(0)?;
        args.expect_all_dtype(d)?;
        let rank = args.ins[0].rank();
        if args.outs[0].shape != args.ins[0].shape {
            return Err(format!(
                "out {} must have the input's shape {:?}",
                args.outs[0], args.ins[0].shape
            ));
        }
        Ok(
            CustomImpl::new(format!("custom_scale_{}_{rank}d", d.str_name()))
                .bitcode(add_bitcode()),
        )
    }
}

/// `out` = the address the C++ reads each element of `in` from (an i64 tile of `in`'s
/// shape; f32, rank 1 or 2): whether a tile reaches the C++ in place or as a copy.
#[register_custom_op(core = Vector, pipe = PipeV, mode = Simd)]
pub struct Where;
impl Where {
    fn init(args: &CustomArgs) -> Result<CustomImpl, String> {
        args.expect_arity(1, 1)?;
        let rank = args.ins[0].rank();
        if args.in_dtype(0)? != DType::F32 || args.outs[0].shape != args.ins[0].shape {
            return Err(format!(
                "`where` takes an f32 tile and an i64 out of its shape, not {} and {}",
                args.ins[0], args.outs[0]
            ));
        }
        Ok(CustomImpl::new(format!("custom_where_float32_{rank}d")).bitcode(add_bitcode()))
    }
}

/// `out` = the address the C++ writes each element of `out` to (i64, rank 1; `in` gives
/// the shape): whether an out reaches the C++ as the stored memory or as a buffer.
#[register_custom_op(core = Vector, pipe = PipeV, mode = Simd)]
pub struct WhereOut;
impl WhereOut {
    fn init(args: &CustomArgs) -> Result<CustomImpl, String> {
        args.expect_arity(1, 1)?;
        let rank1_i64 = |t: &tritium::dsl::ir::Type| t.rank() == 1 && t.dtype() == Some(DType::I64);
        if !rank1_i64(&args.ins[0]) || args.outs[0] != args.ins[0] {
            return Err(format!(
                "`where_out` takes two rank-1 i64 tiles of one shape, not {} and {}",
                args.ins[0], args.outs[0]
            ));
        }
        Ok(CustomImpl::new("custom_where_out_int64_1d").bitcode(add_bitcode()))
    }
}

/// The seed's kernel: one program adds `l` elements through custom op `op`.
#[kernel]
pub fn custom_add<T: Element>(
    output: Ptr<T>,
    a: Ptr<T>,
    b: Ptr<T>,
    #[constexpr] l: usize,
    #[constexpr] op: AddOp,
) {
    let idx = arange(0, l);
    let a = load(a + idx);
    let b = load(b + idx);
    let buf = full([l], 0, a.dtype());
    let res = custom(op.name(), a, b, out = buf);
    store(output + idx, res);
}

/// Which registered add a kernel calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AddOp {
    /// `add` (Simd).
    Simd,
    /// `add_simt`.
    Simt,
    /// `add_mix` (resolves to the Simt entry).
    MixSimt,
    /// `add_mix_simd` (resolves to the Simd entry).
    MixSimd,
}

impl AddOp {
    /// Every variant.
    pub const ALL: [AddOp; 4] = [AddOp::Simd, AddOp::Simt, AddOp::MixSimt, AddOp::MixSimd];

    /// The registered op name.
    pub fn name(self) -> &'static str {
        match self {
            AddOp::Simd => Add::NAME,
            AddOp::Simt => AddSimt::NAME,
            AddOp::MixSimt => AddMix::NAME,
            AddOp::MixSimd => AddMixSimd::NAME,
        }
    }
}

impl std::fmt::Display for AddOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `out[i] = x[i] + y[i]` for `i < n` through custom op `op`, `BLOCK` elements per program
/// (the benchmark's counterpart of [`crate::vector_add::add`]).
#[kernel]
pub fn custom_add_blocked<T: Element>(
    out: Ptr<T>,
    x: Ptr<T>,
    y: Ptr<T>,
    n: i32,
    #[constexpr] BLOCK: usize,
    #[constexpr] op: AddOp,
) {
    let offs = program_id(0) * BLOCK as i32 + arange(0, BLOCK);
    let mask = offs < n;
    let a = load(x + offs, mask = mask, other = 0);
    let b = load(y + offs, mask = mask, other = 0);
    let res = custom(op.name(), a, b, out = zeros([BLOCK], a.dtype()));
    store(out + offs, res, mask = mask);
}

/// `q, r = divmod(a, b)` (two outs) with the Simt or the Simd implementation.
#[kernel]
pub fn custom_divmod(
    q: Ptr<i32>,
    r: Ptr<i32>,
    a: Ptr<i32>,
    b: Ptr<i32>,
    #[constexpr] l: usize,
    #[constexpr] simd: bool,
) {
    let idx = arange(0, l);
    let a = load(a + idx);
    let b = load(b + idx);
    let (q0, r0) = (zeros([l], DType::I32), zeros([l], DType::I32));
    let (qv, rv) = if simd {
        DivmodSimd::call((a, b), (q0, r0))
    } else {
        custom("divmod", a, b, out = (q0, r0))
    };
    store(q + idx, qv);
    store(r + idx, rv);
}

/// `out = 2 * x` over an `[M, N]` tile (rank 2) or its flattening (rank 1).
#[kernel]
pub fn custom_scale<T: Element>(
    out: Ptr<T>,
    x: Ptr<T>,
    #[constexpr] M: usize,
    #[constexpr] N: usize,
    #[constexpr] rank2: bool,
) {
    let offs = arange(0, M)[(.., None)] * N as i32 + arange(0, N)[(None, ..)];
    let v = load(x + offs);
    if rank2 {
        let r = custom("scale", v, out = zeros([M, N], v.dtype()));
        store(out + offs, r);
    } else {
        let flat = reshape(v, [M * N]);
        let r = custom("scale", flat, out = zeros([M * N], v.dtype()));
        store(out + arange(0, M * N), r);
    }
}

/// Cooperative Simd: `_mlir_ciface_custom_add_reversed_<dtype>(a, b, out)`, `out[i] =
/// a[n-1-i] + b[n-1-i]`. The C++ uses `custom_op.h`'s thread helpers, so on CUDA every
/// thread of the CTA calls it and they split the work in two phases around a barrier.
#[register_custom_op(core = Vector, pipe = PipeV, mode = Simd)]
pub struct AddReversed;
impl AddReversed {
    fn init(args: &CustomArgs) -> Result<CustomImpl, String> {
        args.expect_arity(2, 1)?;
        let d = args.in_dtype(0)?;
        args.expect_all_dtype(d)?;
        if !matches!(d, DType::I32 | DType::F32) {
            return Err(format!(
                "no implementation for {d} (add.cpp has int32, float32)"
            ));
        }
        Ok(CustomImpl::new(format!("custom_add_reversed_{}", d.str_name())).bitcode(add_bitcode()))
    }
}

/// `out = reverse(a + b)` over `l` elements through the cooperative [`AddReversed`].
#[kernel]
pub fn custom_add_reversed<T: Element>(
    output: Ptr<T>,
    a: Ptr<T>,
    b: Ptr<T>,
    #[constexpr] l: usize,
) {
    let idx = arange(0, l);
    let a = load(a + idx);
    let b = load(b + idx);
    let res = custom("add_reversed", a, b, out = zeros([l], a.dtype()));
    store(output + idx, res);
}
