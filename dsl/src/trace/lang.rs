//! The kernel language: the functions a `#[kernel]` body calls (Triton's `tl.*`).
//!
//! Every function records the caller's source location on the ops it emits. Optional
//! arguments take [`NoArg`]; the `#[kernel]` macro fills them in, so kernel code writes
//! `load(p, mask = m, other = 0.0)` or just `load(p)`.

pub use super::block_ptr::{
    advance, load_tensor_descriptor, make_block_ptr, make_tensor_descriptor,
    store_tensor_descriptor, BlockPtr, IntoDims, OptConstDims, PointerArg, TensorDescriptor,
};
pub use super::combine::{associative_scan, reduce};
pub use super::hints::{assume, debug_barrier, likely, max_constancy, max_contiguous, multiple_of};
pub use super::libm::{
    acos, acosh, asin, asinh, atan, atan2, atanh, cbrt, copysign, cosh, erfc, erfinv, exp10, expm1,
    fmod, frexp, hypot, ldexp, lgamma, log10, log1p, nextafter, pow, remainder, sinh, tanh, tgamma,
};
pub use super::math::{
    clamp, div_rn, erf, fdiv, floordiv, histogram, isfinite, isinf, isnan, maximum_with,
    minimum_with, sigmoid, signbit, softmax, sqrt_rn,
};
pub use super::random::{
    pair_uniform_to_normal, philox, rand, rand4x, randint, randint4x, randn, randn4x,
    uint_to_uniform_float, umulhi, Rounds, N_ROUNDS_DEFAULT,
};
pub use super::scaled::dot_scaled;
pub use super::shape::{
    broadcast, cat, flip, full_like, interleave, join, ravel, split, swizzle2d, view, zeros_like,
};
pub use super::sort::{sort, topk};
pub use crate::custom::inline_asm_elementwise;

use super::block_ptr;

use super::builder::{with, Builder};
use super::tile::{caller_loc, IntoOperand, Operand, Tile};
use crate::ir::{
    broadcast_shapes, AtomicOp, BinOp, CacheHints, CacheModifier, CmpPred, Const, DType, Elem,
    Eviction, Loc, Op, ReduceOp, ScanOp, Type, UnOp,
};

/// The absent optional argument.
#[derive(Debug, Clone, Copy)]
pub struct NoArg;

/// An optional operand: [`NoArg`], a [`Tile`], a literal, or an `Option` of them.
pub trait OptOperand {
    /// The operand, if given.
    fn opt(self) -> Option<Operand>;
}
impl OptOperand for NoArg {
    fn opt(self) -> Option<Operand> {
        None
    }
}
impl<T: IntoOperand> OptOperand for T {
    fn opt(self) -> Option<Operand> {
        Some(self.into_operand())
    }
}
impl<T: IntoOperand> OptOperand for Option<T> {
    fn opt(self) -> Option<Operand> {
        self.map(IntoOperand::into_operand)
    }
}

/// A compile-time integer: what tile shapes, aranges and axes are made of.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a compile-time integer",
    label = "a tile shape needs a #[constexpr] parameter or a literal here, not a runtime value",
    note = "runtime values are `Tile`s; mark the parameter #[constexpr] to specialize the kernel on it"
)]
pub trait ConstInt: Copy {
    /// The value.
    fn get(self) -> i64;
}
macro_rules! const_int {
    ($($t:ty),*) => {$( impl ConstInt for $t { fn get(self) -> i64 { self as i64 } } )*};
}
const_int!(i8, i16, i32, i64, u8, u16, u32, u64, usize, isize);

/// A static shape: `[M, N]`, `vec![..]`, `&[..]` or a single `usize`.
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not a static tile shape",
    label = "tile shapes are arrays of #[constexpr] integers"
)]
pub trait IntoShape {
    /// The dims.
    fn dims(self) -> Vec<usize>;
}
impl<T: ConstInt, const N: usize> IntoShape for [T; N] {
    fn dims(self) -> Vec<usize> {
        self.iter().map(|d| d.get() as usize).collect()
    }
}
impl<T: ConstInt> IntoShape for &[T] {
    fn dims(self) -> Vec<usize> {
        self.iter().map(|d| d.get() as usize).collect()
    }
}
impl<T: ConstInt> IntoShape for Vec<T> {
    fn dims(self) -> Vec<usize> {
        self.iter().map(|d| d.get() as usize).collect()
    }
}
impl IntoShape for usize {
    fn dims(self) -> Vec<usize> {
        vec![self]
    }
}

macro_rules! tuple_shape {
    ($($name:ident $idx:tt),+) => {
        /// Triton's tuple shapes: `reshape(x, (A, B))`.
        impl<$($name: ConstInt),+> IntoShape for ($($name,)+) {
            fn dims(self) -> Vec<usize> {
                vec![$(self.$idx.get() as usize),+]
            }
        }
    };
}
tuple_shape!(A 0);
tuple_shape!(A 0, B 1);
tuple_shape!(A 0, B 1, C 2);
tuple_shape!(A 0, B 1, C 2, D 3);
tuple_shape!(A 0, B 1, C 2, D 3, E 4);

fn here(l: &'static std::panic::Location<'static>) -> Loc {
    caller_loc(l)
}

macro_rules! loc {
    () => {
        here(std::panic::Location::caller())
    };
}

fn emit(f: impl FnOnce(&mut Builder) -> crate::ir::Value) -> Tile {
    Tile(with(f))
}

/// Records a trace error at the caller's location and gives `x` back, so tracing goes on
/// (the launch reports the first error).
#[track_caller]
pub(crate) fn fail_with(x: Tile, message: String) -> Tile {
    let loc = loc!();
    with(|b| b.fail(&loc, message));
    x
}

/// The index of this program along `axis` (0, 1 or 2), an i32 scalar.
#[track_caller]
pub fn program_id(axis: u32) -> Tile {
    let loc = loc!();
    emit(|b| {
        if axis > 2 {
            b.fail(
                &loc,
                format!("program_id axis must be 0, 1 or 2, got {axis}"),
            );
        }
        b.push1(Op::ProgramId(axis.min(2)), Type::scalar(DType::I32), loc)
    })
}

/// The number of programs along `axis`, an i32 scalar.
#[track_caller]
pub fn num_programs(axis: u32) -> Tile {
    let loc = loc!();
    emit(|b| {
        if axis > 2 {
            b.fail(
                &loc,
                format!("num_programs axis must be 0, 1 or 2, got {axis}"),
            );
        }
        b.push1(Op::NumPrograms(axis.min(2)), Type::scalar(DType::I32), loc)
    })
}

/// `[start, end)` as a 1-D i32 tile; both bounds are compile-time integers.
#[track_caller]
pub fn arange(start: impl ConstInt, end: impl ConstInt) -> Tile {
    let loc = loc!();
    let (start, end) = (start.get(), end.get());
    emit(|b| {
        if end <= start {
            b.fail(&loc, format!("arange({start}, {end}) is empty"));
            return b.constant(
                Const::Int(0),
                Type::tile(Elem::Scalar(DType::I32), vec![1]),
                &loc,
            );
        }
        let ty = Type::tile(Elem::Scalar(DType::I32), vec![(end - start) as usize]);
        b.push1(Op::Arange { start, end }, ty, loc)
    })
}

/// A tile of `shape` filled with `value`, of `dtype`.
#[track_caller]
pub fn full(shape: impl IntoShape, value: impl IntoOperand, dtype: DType) -> Tile {
    let loc = loc!();
    let shape = shape.dims();
    emit(|b| {
        let ty = Type::tile(Elem::Scalar(dtype), shape.clone());
        let c = match value.into_operand() {
            Operand::Int(i) => Const::Int(i),
            Operand::Float(f) => Const::Float(f),
            Operand::Bool(v) => Const::Int(v as i128),
            Operand::Tile(t) => {
                let v = b.cast(t.0, dtype, &loc);
                return b.broadcast_to(v, &shape, &loc);
            }
        };
        if shape.is_empty() || shape.contains(&0) {
            b.fail(&loc, format!("tile shape {shape:?} must be non-empty"));
        }
        b.constant(c, ty, &loc)
    })
}

/// A tile of zeros.
#[track_caller]
pub fn zeros(shape: impl IntoShape, dtype: DType) -> Tile {
    let loc = loc!();
    let shape = shape.dims();
    emit(|b| b.constant(Const::Int(0), Type::tile(Elem::Scalar(dtype), shape), &loc))
}

/// A scalar constant of `dtype`.
#[track_caller]
pub fn scalar(value: impl IntoOperand, dtype: DType) -> Tile {
    let loc = loc!();
    let op = value.into_operand();
    emit(|b| {
        let v = b.operand(op, Some(dtype), &loc);
        b.cast(v, dtype, &loc)
    })
}

/// Broadcasts `x` to `shape` (numpy rules).
#[track_caller]
pub fn broadcast_to(x: impl IntoOperand, shape: impl IntoShape) -> Tile {
    let loc = loc!();
    let shape = shape.dims();
    let x = x.into_operand();
    emit(|b| {
        let v = b.operand(x, None, &loc);
        b.broadcast_to(v, &shape, &loc)
    })
}

/// Inserts a size-1 dim at `axis` (Triton's `x[:, None]` is `expand_dims(x, 1)`).
#[track_caller]
pub fn expand_dims(x: Tile, axis: impl ConstInt) -> Tile {
    let loc = loc!();
    let axis = axis.get();
    emit(|b| {
        let t = b.ty(x.0).clone();
        let rank = t.rank() as i64;
        let a = if axis < 0 { axis + rank + 1 } else { axis };
        if a < 0 || a > rank {
            b.fail(
                &loc,
                format!("expand_dims axis {axis} out of range for {t}"),
            );
            return x.0;
        }
        let mut s = t.shape.clone();
        s.insert(a as usize, 1);
        b.push1(
            Op::ExpandDims {
                x: x.0,
                axis: a as u32,
            },
            t.with_shape(s),
            loc,
        )
    })
}

/// The same elements in row-major order with another shape.
#[track_caller]
pub fn reshape(x: Tile, shape: impl IntoShape) -> Tile {
    let loc = loc!();
    let shape = shape.dims();
    emit(|b| {
        let t = b.ty(x.0).clone();
        if t.numel() != shape.iter().product::<usize>() {
            b.fail(&loc, format!("cannot reshape {t} to {shape:?}"));
            return x.0;
        }
        if t.shape == shape {
            return x.0;
        }
        b.push1(Op::Reshape(x.0), t.with_shape(shape), loc)
    })
}

/// Triton's `reshape(x, shape, can_reorder)` (what `#[kernel]` calls): Tritium keeps the
/// row-major order either way, which `can_reorder = true` allows.
#[track_caller]
pub fn reshape_with(x: Tile, shape: impl IntoShape, can_reorder: impl OptFlag) -> Tile {
    let _ = can_reorder.flag();
    reshape(x, shape)
}

/// A 2-D tile transposed (see [`trans_with`] for dims).
#[track_caller]
pub fn trans(x: Tile) -> Tile {
    trans_with(x, NoArg)
}

/// `x` with its dims reordered by `dims` (Triton's `trans(x, dims)`, what `#[kernel]`
/// calls); without `dims`, a 2-D tile transposed.
#[track_caller]
pub fn trans_with(x: Tile, dims: impl OptConstDims) -> Tile {
    let dims = dims.const_dims();
    if dims.is_empty() && x.ty().rank() != 2 {
        let msg = format!("trans without dims needs a 2-D tile, got {}", x.ty());
        return fail_with(x, msg);
    }
    match dims.is_empty() {
        true => permute(x, [1, 0]),
        false => permute(x, dims),
    }
}

/// Elements of `src` picked along `axis` by the integer tile `index` (Triton's `gather`):
/// element `i` of the result is `src[i with i[axis] = index[i]]`. `index` has `src`'s
/// rank and shape except along `axis`; an index outside the axis gives 0 (where Triton's
/// is undefined).
#[track_caller]
pub fn gather(src: Tile, index: Tile, axis: impl ConstInt) -> Tile {
    let loc = loc!();
    let axis = axis.get();
    emit(|b| {
        let (st, it) = (b.ty(src.0).clone(), b.ty(index.0).clone());
        let rank = st.rank() as i64;
        let a = if axis < 0 { axis + rank } else { axis };
        let fits = a >= 0
            && a < rank
            && it.rank() == st.rank()
            && (0..st.rank()).all(|d| d as i64 == a || it.shape[d] == st.shape[d]);
        if !fits || !it.dtype().is_some_and(DType::is_int) || st.elem.pointee().is_some() {
            b.fail(
                &loc,
                format!(
                    "gather: index {it} must be integers of {st}'s shape except along axis {axis}"
                ),
            );
            return src.0;
        }
        let op = Op::Gather {
            src: src.0,
            index: index.0,
            axis: a as u32,
        };
        b.push1(op, it.with_elem(st.elem), loc)
    })
}

/// `x` with its dims reordered: result dim `i` is `x`'s dim `dims[i]` (Triton's
/// `permute`).
#[track_caller]
pub fn permute(x: Tile, dims: impl OptConstDims) -> Tile {
    let loc = loc!();
    let dims = dims.const_dims();
    emit(|b| {
        let t = b.ty(x.0).clone();
        let mut sorted = dims.clone();
        sorted.sort_unstable();
        if !sorted.iter().copied().eq(0..t.rank() as i64) {
            b.fail(
                &loc,
                format!("permute: dims {dims:?} are not a permutation of the dims of {t}"),
            );
            return x.0;
        }
        let shape = dims.iter().map(|&d| t.shape[d as usize]).collect();
        let dims = dims.iter().map(|&d| d as u32).collect();
        b.push1(Op::Permute { x: x.0, dims }, t.with_shape(shape), loc)
    })
}

/// `cond ? a : b` elementwise, with broadcasting and dtype promotion of `a` and `b`; a
/// numeric `cond` is true where nonzero (NaN too), as Triton converts it.
#[track_caller]
pub fn where_(cond: impl IntoOperand, a: impl IntoOperand, b: impl IntoOperand) -> Tile {
    let loc = loc!();
    let (c, a, bb) = (cond.into_operand(), a.into_operand(), b.into_operand());
    emit(|b| {
        let mut c = b.operand(c, Some(DType::Bool), &loc);
        // Numbers are conditions as in Triton: nonzero is true (`cond.to(int1)`).
        match b.ty(c).dtype() {
            Some(DType::Bool) => {}
            Some(_) => c = b.cast(c, DType::Bool, &loc),
            None => {
                let t = b.ty(c).clone();
                b.fail(
                    &loc,
                    format!("where needs a bool or number condition, got {t}"),
                );
                return c;
            }
        }
        let (va, vb) = b.unify(a, bb, &loc);
        let (ct, vt) = (b.ty(c).clone(), b.ty(va).clone());
        let Some(shape) = broadcast_shapes(&ct.shape, &vt.shape) else {
            b.fail(
                &loc,
                format!("where: condition {ct} does not broadcast with {vt}"),
            );
            return va;
        };
        let (c, va, vb) = (
            b.broadcast_to(c, &shape, &loc),
            b.broadcast_to(va, &shape, &loc),
            b.broadcast_to(vb, &shape, &loc),
        );
        let t = b.ty(va).clone();
        b.push1(Op::Select(c, va, vb), t, loc)
    })
}

/// Converts `x` to `dtype` (float→int saturates and maps NaN to 0, as Rust `as`), or
/// between 64-bit integers and pointers: `cast(addrs, pointer_type(F16))` reads i64/u64
/// addresses as pointers (grouped GEMM's tables of pointers), `cast(p, I64)` gives a
/// pointer's address, and a pointer cast to another pointee goes through its address.
#[track_caller]
pub fn cast(x: impl IntoOperand, dtype: impl Into<CastTarget>) -> Tile {
    let loc = loc!();
    let x = x.into_operand();
    let to = dtype.into();
    emit(|b| {
        let like = match to {
            CastTarget::Number(d) => d,
            CastTarget::Pointer(_) => DType::I64,
        };
        let v = b.operand(x, Some(like), &loc);
        b.cast_to(v, to, &loc)
    })
}

/// Triton's `cast(x, dtype, fp_downcast_rounding, bitcast)` (what `#[kernel]` calls):
/// `fp_downcast_rounding = "rtz"` rounds a float cast to a narrower float toward zero
/// (`"rtne"`, to nearest even, is the default); `bitcast = true` is [`bitcast`].
#[track_caller]
pub fn cast_with(
    x: impl IntoOperand,
    dtype: impl Into<CastTarget>,
    fp_downcast_rounding: impl OptMessage,
    bitcast_bits: impl OptFlag,
) -> Tile {
    let to = dtype.into();
    let rounding = fp_downcast_rounding.message();
    let x = x.into_operand();
    if bitcast_bits.flag() {
        return match to {
            CastTarget::Number(d) => bitcast(x, d),
            CastTarget::Pointer(_) => fail_with(
                cast(x, DType::I64),
                "cannot bitcast to a pointer type".into(),
            ),
        };
    }
    match (rounding.as_str(), to) {
        ("" | "rtne", _) => cast(x, to),
        ("rtz", CastTarget::Number(d)) => {
            let t = match x {
                Operand::Tile(t) => t,
                other => cast(other, DType::F32),
            };
            if !t.dtype().is_float() || !d.is_float() || d.bits() >= t.dtype().bits() {
                let msg = format!(
                    "fp_downcast_rounding applies to a float cast to a narrower float, not {} to {d}",
                    t.dtype()
                );
                return fail_with(t, msg);
            }
            toward_zero(t, d)
        }
        (other, _) => fail_with(
            cast(x, DType::F32),
            format!("fp_downcast_rounding must be \"rtne\" or \"rtz\", got {other:?}"),
        ),
    }
}

/// `x` cast to the narrower float `d` rounding toward zero: the nearest value, stepped one
/// ulp toward zero where it rounded away (overflow gives the largest finite value).
#[track_caller]
fn toward_zero(x: Tile, d: DType) -> Tile {
    let r = cast(x, d);
    let back = cast(r, x.dtype());
    let away = compare(abs(back), CmpPred::Gt, abs(x));
    let bits = match d.bits() {
        8 => DType::U8,
        16 => DType::U16,
        _ => DType::U32,
    };
    let stepped = bitcast(bitcast(r, bits) - 1, d);
    where_(away, stepped, r)
}

/// Triton's `tl.pointer_type(dtype)`: the type of a pointer to `dtype` elements, for
/// [`cast`] and [`Tile::to`].
pub fn pointer_type(dtype: DType) -> PointerType {
    PointerType(dtype)
}

/// A pointer type ([`pointer_type`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PointerType(pub DType);

/// What [`cast`] converts to: a number dtype or a pointer type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CastTarget {
    /// Numbers of this dtype.
    Number(DType),
    /// Pointers to elements of this dtype.
    Pointer(DType),
}

impl From<DType> for CastTarget {
    fn from(d: DType) -> Self {
        CastTarget::Number(d)
    }
}

impl From<PointerType> for CastTarget {
    fn from(p: PointerType) -> Self {
        CastTarget::Pointer(p.0)
    }
}

/// An optional message: [`NoArg`] or text.
pub trait OptMessage {
    /// The message ("" when absent).
    fn message(self) -> String;
}
impl OptMessage for NoArg {
    fn message(self) -> String {
        String::new()
    }
}
impl OptMessage for &str {
    fn message(self) -> String {
        self.to_string()
    }
}
impl OptMessage for String {
    fn message(self) -> String {
        self
    }
}

/// Fails the trace at the caller's line when `cond` is false (Triton's `static_assert`):
/// the launch returns that error. `cond` is a Rust `bool` known while tracing
/// (constexprs are plain values then), for example `static_assert(BLOCK % 16 == 0, "…")`.
#[track_caller]
pub fn static_assert(cond: bool, msg: impl OptMessage) {
    let loc = loc!();
    if !cond {
        let msg = msg.message();
        let text = if msg.is_empty() {
            "static_assert failed".to_string()
        } else {
            format!("static_assert failed: {msg}")
        };
        with(|b| b.fail(&loc, text));
    }
}

/// Triton's `device_assert`: in checked mode (`TRITIUM_BOUNDS_CHECK=1`, `TRITIUM_DEBUG=1`
/// or `LaunchOptions::bounds_check`) and on the interpreter, a lane where `cond` is false
/// (and `mask`, when given, true) fails the launch with an error naming `msg`, this line,
/// the program and the lane; otherwise it compiles to nothing. `cond` is a bool scalar or
/// tile; `mask` broadcasts to its shape.
#[track_caller]
pub fn device_assert(cond: impl IntoOperand, msg: impl OptMessage, mask: impl OptOperand) {
    let loc = loc!();
    let (cond, msg, mask) = (cond.into_operand(), msg.message(), mask.opt());
    with(|b| {
        let c = b.operand(cond, Some(DType::Bool), &loc);
        let ct = b.ty(c).clone();
        if ct.dtype() != Some(DType::Bool) {
            b.fail(
                &loc,
                format!("device_assert needs a bool condition, got {ct}"),
            );
            return;
        }
        let mask = mask.map(|m| {
            let v = b.operand(m, Some(DType::Bool), &loc);
            if b.ty(v).dtype() != Some(DType::Bool) {
                let t = b.ty(v).clone();
                b.fail(&loc, format!("device_assert mask must be bool, got {t}"));
            }
            b.broadcast_to(v, &ct.shape, &loc)
        });
        b.push(Op::Assert { cond: c, mask, msg }, vec![], loc.clone());
    })
}

/// The values [`device_print_with`] prints: a tuple of operands (what `#[kernel]` builds
/// from `device_print(prefix, a, b, …)`), up to eight.
pub trait PrintArgs {
    /// The operands, in order.
    fn operands(self) -> Vec<Operand>;
}
impl PrintArgs for () {
    fn operands(self) -> Vec<Operand> {
        Vec::new()
    }
}
macro_rules! print_args {
    ($($t:ident $v:ident),+) => {
        impl<$($t: IntoOperand),+> PrintArgs for ($($t,)+) {
            fn operands(self) -> Vec<Operand> {
                let ($($v,)+) = self;
                vec![$($v.into_operand()),+]
            }
        }
    };
}
print_args!(A a);
print_args!(A a, B b);
print_args!(A a, B b, C c);
print_args!(A a, B b, C c, D d);
print_args!(A a, B b, C c, D d, E e);
print_args!(A a, B b, C c, D d, E e, F f);
print_args!(A a, B b, C c, D d, E e, F f, G g);
print_args!(A a, B b, C c, D d, E e, F f, G g, H h);

/// Triton's `device_print(prefix, *args, hex=False)` (in a kernel:
/// `device_print("x", a, b, hex = true)`): when the program runs, prints every lane of each
/// argument, argument after argument and lanes in row-major order, one line each:
/// `pid (x, y, z) idx (i, j) prefix: value` (`idx` left out for scalars; with several
/// arguments the prefix is followed by ` (operand k)`). Lines go to standard output (or to
/// `tritium::backend::capture_device_prints`); the order between programs is not fixed.
#[track_caller]
pub fn device_print_with(prefix: impl OptMessage, args: impl PrintArgs, hex: impl OptFlag) {
    let loc = loc!();
    let (prefix, args, hex) = (prefix.message(), args.operands(), hex.flag());
    with(|b| {
        let mut values = Vec::new();
        for a in args {
            let v = b.operand(a, None, &loc);
            let t = b.ty(v).clone();
            if t.dtype().is_none() {
                b.fail(
                    &loc,
                    format!("device_print takes bools and numbers, got {t}"),
                );
                return;
            }
            values.push(v);
        }
        b.push(
            Op::Print {
                prefix,
                args: values,
                hex,
            },
            vec![],
            loc.clone(),
        );
    })
}

/// What [`static_print`] shows: a tile's type, or a value known while tracing.
pub trait StaticShow {
    /// The text printed.
    fn show(&self) -> String;
}
impl StaticShow for Tile {
    fn show(&self) -> String {
        self.ty().to_string()
    }
}
macro_rules! static_show {
    ($($t:ty),*) => {$(
        impl StaticShow for $t {
            fn show(&self) -> String {
                format!("{self:?}")
            }
        }
    )*};
}
static_show!(
    &str, String, bool, i8, i16, i32, i64, u8, u16, u32, u64, usize, isize, f32, f64, DType
);

/// Prints `x` (a tile's type, or a constexpr's value) to stderr while tracing, once per
/// compilation, prefixed with the caller's `file:line:col` (Triton's `static_print`).
#[track_caller]
pub fn static_print(x: impl StaticShow) {
    let loc = loc!();
    eprintln!("{loc}: {}", x.show());
}

/// The bits of `x` read as `dtype`, which must have the same width (Triton's
/// `x.to(dtype, bitcast=True)`; also [`Tile::to_bitcast`]). Bools have no bitcast.
#[track_caller]
pub fn bitcast(x: impl IntoOperand, dtype: DType) -> Tile {
    let loc = loc!();
    let x = x.into_operand();
    emit(|b| {
        let v = b.operand(x, None, &loc);
        let t = b.ty(v).clone();
        match t.dtype() {
            Some(from) if from == dtype => v,
            Some(from) if !from.is_bool() && !dtype.is_bool() && from.bits() == dtype.bits() => {
                b.push1(Op::Bitcast(v), t.with_elem(Elem::Scalar(dtype)), loc)
            }
            _ => {
                b.fail(
                    &loc,
                    format!("cannot bitcast {t} to {dtype}: the widths must match and neither may be bool"),
                );
                v
            }
        }
    })
}

macro_rules! unary_fns {
    ($($(#[$m:meta])* $name:ident => $op:ident;)*) => {$(
        $(#[$m])*
        #[track_caller]
        pub fn $name(x: impl IntoOperand) -> Tile {
            let loc = loc!();
            let x = x.into_operand();
            emit(|b| b.unary(UnOp::$op, x, &loc))
        }
    )*};
}
unary_fns! {
    /// `e^x`.
    exp => Exp;
    /// `2^x`.
    exp2 => Exp2;
    /// Natural logarithm.
    log => Log;
    /// Base-2 logarithm.
    log2 => Log2;
    /// Square root.
    sqrt => Sqrt;
    /// `1 / sqrt(x)`.
    rsqrt => Rsqrt;
    /// Absolute value.
    abs => Abs;
    /// Sine.
    sin => Sin;
    /// Cosine.
    cos => Cos;
    /// Round down.
    floor => Floor;
    /// Round up.
    ceil => Ceil;
    /// Round toward zero.
    trunc => Trunc;
    /// Round to nearest, halfway cases away from zero (libdevice's `round`).
    round => Round;
    /// Round to nearest, halfway cases to even (libdevice's `rint`).
    rint => Rint;
    /// Round to nearest, halfway cases to even (libdevice's `nearbyint`, the same as `rint`:
    /// no target raises floating-point exceptions).
    nearbyint => Rint;
}

/// Elementwise maximum.
#[track_caller]
pub fn maximum(a: impl IntoOperand, b: impl IntoOperand) -> Tile {
    let loc = loc!();
    let (a, bb) = (a.into_operand(), b.into_operand());
    emit(|b| b.binary(BinOp::Max, a, bb, &loc))
}

/// Elementwise minimum.
#[track_caller]
pub fn minimum(a: impl IntoOperand, b: impl IntoOperand) -> Tile {
    let loc = loc!();
    let (a, bb) = (a.into_operand(), b.into_operand());
    emit(|b| b.binary(BinOp::Min, a, bb, &loc))
}

/// `a * b + c` with a single rounding (floats).
#[track_caller]
pub fn fma(a: impl IntoOperand, b: impl IntoOperand, c: impl IntoOperand) -> Tile {
    let loc = loc!();
    let (a, bb, c) = (a.into_operand(), b.into_operand(), c.into_operand());
    emit(|b| {
        let (va, vb) = b.unify(a, bb, &loc);
        let (va, vc) = b.unify(Operand::Tile(Tile(va)), c, &loc);
        let (va, vb) = b.unify_values(va, vb, &loc);
        let (vb, vc) = b.unify_values(vb, vc, &loc);
        let mut t = b.ty(va).clone();
        if !t.dtype().is_some_and(DType::is_float) {
            let d = t.dtype();
            b.fail(&loc, format!("fma needs floats, got {d:?}"));
            t = t.with_elem(Elem::Scalar(DType::F32));
        }
        b.push1(Op::Fma(va, vb, vc), t, loc)
    })
}

fn reduce_op(op: ReduceOp, x: Tile, axis: i64, loc: Loc) -> Tile {
    emit(|b| {
        let t = b.ty(x.0).clone();
        let Some(mut d) = t.dtype() else {
            b.fail(&loc, format!("cannot reduce pointers ({t})"));
            return x.0;
        };
        let rank = t.rank() as i64;
        let a = if axis < 0 { axis + rank } else { axis };
        if rank == 0 || a < 0 || a >= rank {
            let name = match op {
                ReduceOp::Sum => "sum",
                ReduceOp::Max => "max",
                ReduceOp::Min => "min",
                ReduceOp::ArgMax => "argmax",
                ReduceOp::ArgMin => "argmin",
                ReduceOp::Xor => "xor_sum",
            };
            let hint = match op {
                ReduceOp::Max => "; `max(x, axis)` reduces a tile: for the larger of two values use `maximum(a, b)`",
                ReduceOp::Min => "; `min(x, axis)` reduces a tile: for the smaller of two values use `minimum(a, b)`",
                _ => "",
            };
            b.fail(
                &loc,
                format!("{name}: axis {axis} is out of range for {t}{hint}"),
            );
            return x.0;
        }
        if op == ReduceOp::Xor && d.is_float() {
            b.fail(&loc, format!("xor_sum needs integers or bools, got {t}"));
            return x.0;
        }
        let mut v = x.0;
        // Small integers and bools are summed in i32, as Triton does.
        if op == ReduceOp::Sum && (d.is_bool() || (d.is_int() && d.bits() < 32)) {
            d = if d.is_unsigned_int() {
                DType::U32
            } else {
                DType::I32
            };
            v = b.cast(v, d, &loc);
        }
        let mut s = t.shape.clone();
        s.remove(a as usize);
        let rd = match op {
            ReduceOp::ArgMax | ReduceOp::ArgMin => DType::I32,
            _ => d,
        };
        b.push1(
            Op::Reduce {
                op,
                x: v,
                axis: a as u32,
            },
            Type::tile(Elem::Scalar(rd), s),
            loc,
        )
    })
}

/// The optional `axis` of a reduction: [`NoArg`] (every axis, as Triton's `axis=None`) or a
/// compile-time integer (negative counts from the end).
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not an axis",
    label = "an axis is a compile-time integer (or `None`)",
    note = "`max`/`min` reduce one tile along an axis (Triton's `tl.max`); for the elementwise maximum or minimum of two tiles (Python's `max(a, b)`), write `maximum(a, b)` or `minimum(a, b)`"
)]
pub trait OptAxis {
    /// The axis, if one was given.
    fn axis(self) -> Option<i64>;
}
impl OptAxis for NoArg {
    fn axis(self) -> Option<i64> {
        None
    }
}
/// Triton's `axis=None`: every axis.
impl OptAxis for Option<i64> {
    fn axis(self) -> Option<i64> {
        self
    }
}
impl<T: ConstInt> OptAxis for T {
    fn axis(self) -> Option<i64> {
        Some(self.get())
    }
}

/// An optional flag: [`NoArg`] (false) or a `bool`.
pub trait OptFlag {
    /// The flag's value.
    fn flag(self) -> bool;
    /// The flag's value, `default` when absent.
    fn flag_or(self, default: bool) -> bool;
}
impl OptFlag for NoArg {
    fn flag(self) -> bool {
        false
    }
    fn flag_or(self, default: bool) -> bool {
        default
    }
}
impl OptFlag for bool {
    fn flag(self) -> bool {
        self
    }
    fn flag_or(self, _default: bool) -> bool {
        self
    }
}

/// Reduces `x` along `axis`, or along every axis (row-major) when `axis` is `None`;
/// `keep_dims` keeps the reduced axes with size 1, as Triton's `keep_dims=True`.
fn reduce_keep(op: ReduceOp, x: Tile, axis: Option<i64>, keep_dims: bool, loc: Loc) -> Tile {
    let shape = x.shape();
    let Some(axis) = axis else {
        let flat = if shape.len() == 1 {
            x
        } else {
            emit(|b| {
                let t = b.ty(x.0).clone();
                b.push1(Op::Reshape(x.0), t.with_shape(vec![t.numel()]), loc.clone())
            })
        };
        let r = reduce_op(op, flat, 0, loc.clone());
        return if keep_dims {
            emit(|b| {
                let t = b.ty(r.0).clone();
                b.push1(
                    Op::Reshape(r.0),
                    t.with_shape(vec![1; shape.len().max(1)]),
                    loc,
                )
            })
        } else {
            r
        };
    };
    let r = reduce_op(op, x, axis, loc.clone());
    let rank = shape.len() as i64;
    if !keep_dims || !(-rank..rank).contains(&axis) {
        return r;
    }
    let a = if axis < 0 { axis + rank } else { axis };
    emit(|b| {
        let t = b.ty(r.0).clone();
        let mut s = t.shape.clone();
        s.insert(a as usize, 1);
        b.push1(
            Op::ExpandDims {
                x: r.0,
                axis: a as u32,
            },
            t.with_shape(s),
            loc,
        )
    })
}

macro_rules! reduce_fns {
    ($($(#[$m:meta])* $name:ident => $op:ident;)*) => {$(
        $(#[$m])*
        #[track_caller]
        pub fn $name(x: Tile, axis: impl OptAxis, keep_dims: impl OptFlag) -> Tile {
            reduce_keep(ReduceOp::$op, x, axis.axis(), keep_dims.flag(), loc!())
        }
    )*};
}
reduce_fns! {
    /// Sum along `axis` (the axis is removed; negative counts from the end), or of every
    /// element without an axis; `keep_dims = true` keeps reduced axes with size 1.
    sum => Sum;
    /// Maximum along `axis` (or of every element), as [`sum`].
    max => Max;
    /// Minimum along `axis` (or of every element), as [`sum`].
    min => Min;
    /// i32 index of the first maximum along `axis` (without an axis: the row-major index).
    argmax => ArgMax;
    /// i32 index of the first minimum along `axis`, as [`argmax`].
    argmin => ArgMin;
    /// Bitwise xor of integers or bools along `axis` (or of every element), as [`sum`].
    xor_sum => Xor;
}

/// The running `op` of `x` along `axis` (default 0; negative counts from the end), from the
/// end when `reverse`. Sums of bools and of integers narrower than 32 bits run in i32 (u32
/// for unsigned), as Triton's `cumsum`; products of bools are an error.
fn scan(op: ScanOp, x: Tile, axis: Option<i64>, reverse: bool, loc: Loc) -> Tile {
    let name = match op {
        ScanOp::Sum => "cumsum",
        ScanOp::Prod => "cumprod",
    };
    emit(|b| {
        let t = b.ty(x.0).clone();
        let Some(mut d) = t.dtype() else {
            b.fail(&loc, format!("{name} needs numbers, got {t}"));
            return x.0;
        };
        let rank = t.rank() as i64;
        let axis = axis.unwrap_or(0);
        let a = if axis < 0 { axis + rank } else { axis };
        if rank == 0 || a < 0 || a >= rank {
            b.fail(&loc, format!("{name}: axis {axis} is out of range for {t}"));
            return x.0;
        }
        let mut v = x.0;
        if d.is_bool() && op == ScanOp::Prod {
            b.fail(&loc, format!("cumprod needs numbers, got {t}"));
            return x.0;
        }
        if op == ScanOp::Sum && (d.is_bool() || (d.is_int() && d.bits() < 32)) {
            d = if d.is_unsigned_int() {
                DType::U32
            } else {
                DType::I32
            };
            v = b.cast(v, d, &loc);
        }
        b.push1(
            Op::Scan {
                op,
                x: v,
                axis: a as u32,
                reverse,
            },
            t.with_elem(Elem::Scalar(d)),
            loc,
        )
    })
}

/// Running sums along `axis` (default 0), from the end when `reverse = true` (Triton's
/// `cumsum`). Every target adds in index order, so float results agree bit for bit.
#[track_caller]
pub fn cumsum(x: Tile, axis: impl OptAxis, reverse: impl OptFlag) -> Tile {
    scan(ScanOp::Sum, x, axis.axis(), reverse.flag(), loc!())
}

/// Running products along `axis` (default 0), from the end when `reverse = true` (Triton's
/// `cumprod`).
#[track_caller]
pub fn cumprod(x: Tile, axis: impl OptAxis, reverse: impl OptFlag) -> Tile {
    scan(ScanOp::Prod, x, axis.axis(), reverse.flag(), loc!())
}

/// An optional dtype: [`NoArg`] or a [`DType`].
pub trait OptDType {
    /// The dtype, if given.
    fn dtype(self) -> Option<DType>;
}
impl OptDType for NoArg {
    fn dtype(self) -> Option<DType> {
        None
    }
}
impl OptDType for DType {
    fn dtype(self) -> Option<DType> {
        Some(self)
    }
}

/// `a @ b + acc` for 2-D tiles. Without `acc` the accumulator is zeros of f32 for float
/// inputs (f16 inputs accumulate in f32) and i32 for integer inputs. See [`dot_with`] for
/// 3-D (batched) tiles and Triton's keywords.
#[track_caller]
pub fn dot(a: Tile, b: Tile, acc: impl OptOperand) -> Tile {
    dot_with(a, b, acc, NoArg, NoArg, NoArg, NoArg)
}

/// Triton's `dot` with every keyword (what `#[kernel]` calls). 3-D tiles are batched:
/// `[B, M, K] @ [B, K, N]`, each batch a 2-D `dot` of its slices. `out_dtype` is the
/// accumulator's dtype when `acc` is absent (and must be `acc`'s when both are given).
/// `input_precision` (`"ieee"`, `"tf32"`, `"tf32x3"`; `allow_tf32` is its old spelling)
/// permits less precise products: every target computes IEEE products, which every
/// setting allows. `max_num_imprecise_acc` (fp8 accumulation on Hopper) is accepted.
#[allow(clippy::too_many_arguments)]
#[track_caller]
pub fn dot_with(
    a: Tile,
    b: Tile,
    acc: impl OptOperand,
    input_precision: impl OptMessage,
    allow_tf32: impl OptFlag,
    max_num_imprecise_acc: impl OptOperand,
    out_dtype: impl OptDType,
) -> Tile {
    let precision = input_precision.message();
    let _ = (allow_tf32.flag(), max_num_imprecise_acc.opt());
    if !["", "ieee", "tf32", "tf32x3"].contains(&precision.as_str()) {
        let msg = format!(
            "dot: input_precision must be \"ieee\", \"tf32\" or \"tf32x3\", got {precision:?}"
        );
        return fail_with(a, msg);
    }
    let (acc, out_dtype) = (acc.opt(), out_dtype.dtype());
    if let (Some(Operand::Tile(t)), Some(d)) = (acc, out_dtype) {
        if t.dtype() != d {
            let msg = format!(
                "dot: out_dtype {d} differs from the accumulator's dtype {}",
                t.dtype()
            );
            return fail_with(a, msg);
        }
    }
    if a.ty().rank() == 3 && b.ty().rank() == 3 {
        return batched_dot(a, b, acc, out_dtype);
    }
    dot_2d(a, b, acc, out_dtype)
}

/// `[B, M, K] @ [B, K, N] (+ acc)`: each batch's slices through a 2-D `dot`, the results
/// placed by selects (exact: no arithmetic touches a result).
#[track_caller]
fn batched_dot(a: Tile, b: Tile, acc: Option<Operand>, out_dtype: Option<DType>) -> Tile {
    let (sa, sb) = (a.shape(), b.shape());
    if sa[0] != sb[0] || sa[2] != sb[1] {
        let msg = format!(
            "dot needs [B, M, K] @ [B, K, N], got {} @ {}",
            a.ty(),
            b.ty()
        );
        return fail_with(a, msg);
    }
    let (batches, m, n) = (sa[0], sa[1], sb[2]);
    let slice = |x: Tile, at: usize| {
        let mut one = x.shape();
        one[0] = 1;
        let index = full(one.clone(), at as i64, DType::I32);
        reshape(gather(x, index, 0), one[1..].to_vec())
    };
    let mut out: Option<Tile> = None;
    let batch = reshape(arange(0, batches as i64), [batches, 1, 1]);
    for at in 0..batches {
        // A 3-D accumulator is sliced like the operands; a lower-rank one broadcasts.
        let acc_at = match acc {
            Some(Operand::Tile(t)) if t.ty().rank() == 3 => {
                Some(Operand::Tile(slice(broadcast_to(t, [batches, m, n]), at)))
            }
            other => other,
        };
        let r = dot_2d(slice(a, at), slice(b, at), acc_at, out_dtype);
        let r = broadcast_to(reshape(r, [1, m, n]), [batches, m, n]);
        out = Some(match out {
            None => r,
            Some(o) => where_(compare(batch, CmpPred::Eq, at as i64), r, o),
        });
    }
    out.expect("a batch")
}

#[track_caller]
fn dot_2d(a: Tile, b: Tile, acc: Option<Operand>, out_dtype: Option<DType>) -> Tile {
    let loc = loc!();
    emit(|bl| {
        let (ta, tb) = (bl.ty(a.0).clone(), bl.ty(b.0).clone());
        if ta.rank() != 2 || tb.rank() != 2 || ta.shape[1] != tb.shape[0] {
            bl.fail(&loc, format!("dot needs [M, K] @ [K, N], got {ta} @ {tb}"));
            return a.0;
        }
        let (Some(da), Some(db)) = (ta.dtype(), tb.dtype()) else {
            bl.fail(&loc, "dot operands must be numbers");
            return a.0;
        };
        // Two different fp8s stay as they are (Triton's `dot` takes any pair of them, and
        // Hopper's `wgmma` multiplies E4M3 by E5M2): their products are exact in f32, as
        // they would be in the f16 that promotion gives.
        let fp8_pair = da.fp8_format().is_some() && db.fp8_format().is_some();
        let (va, vb, d) = match fp8_pair {
            true => (a.0, b.0, da),
            false => {
                let d = DType::promote(da, db);
                (bl.cast(a.0, d, &loc), bl.cast(b.0, d, &loc), d)
            }
        };
        let shape = vec![ta.shape[0], tb.shape[1]];
        let acc_dtype = match out_dtype {
            Some(o) => o,
            None if d == DType::F64 => DType::F64,
            None if d.is_float() => DType::F32,
            None => DType::I32,
        };
        let vacc = match acc {
            None => bl.constant(
                Const::Int(0),
                Type::tile(Elem::Scalar(acc_dtype), shape.clone()),
                &loc,
            ),
            Some(op) => {
                let v = bl.operand(op, Some(acc_dtype), &loc);
                bl.broadcast_to(v, &shape, &loc)
            }
        };
        let t = bl.ty(vacc).clone();
        bl.push1(
            Op::Dot {
                a: va,
                b: vb,
                acc: vacc,
            },
            t,
            loc,
        )
    })
}

/// Shapes the mask and value operands of a memory op like `ptr`.
fn memory_operands(
    b: &mut Builder,
    ptr: Tile,
    mask: Option<Operand>,
    what: &str,
    loc: &Loc,
) -> Option<(Type, DType, Option<crate::ir::Value>)> {
    let pt = b.ty(ptr.0).clone();
    let Some(d) = pt.elem.pointee() else {
        b.fail(
            loc,
            format!("{what} needs a pointer or a tile of pointers, got {pt}"),
        );
        return None;
    };
    let mask = mask.map(|m| {
        let v = b.operand(m, Some(DType::Bool), loc);
        if b.ty(v).dtype() != Some(DType::Bool) {
            let t = b.ty(v).clone();
            b.fail(loc, format!("{what} mask must be bool, got {t}"));
        }
        b.broadcast_to(v, &pt.shape, loc)
    });
    Some((pt, d, mask))
}

/// Loads through `ptr`; lanes where `mask` is false read nothing and give `other` (or 0).
/// `ptr` may be a [`BlockPtr`] (then without `mask` and `other`: see [`load_with`]).
#[track_caller]
pub fn load(ptr: impl Into<PointerArg>, mask: impl OptOperand, other: impl OptOperand) -> Tile {
    load_with(ptr, mask, other, NoArg, NoArg, NoArg, NoArg, NoArg)
}

/// Triton's `load` with every keyword (what `#[kernel]` calls): through a block pointer,
/// the `boundary_check` dims are bounds-checked and their outside elements read
/// `padding_option` (`"zero"`, `"nan"`; unset reads 0). `cache_modifier` (`.ca`, `.cg`,
/// `.cv`), `eviction_policy` (`evict_first`, `evict_last`) and `volatile` are the load's
/// cache hints ([`CacheHints`]: PTX cache operators and eviction priorities on CUDA,
/// volatile loads everywhere).
#[allow(clippy::too_many_arguments)]
#[track_caller]
pub fn load_with(
    ptr: impl Into<PointerArg>,
    mask: impl OptOperand,
    other: impl OptOperand,
    boundary_check: impl OptConstDims,
    padding_option: impl OptMessage,
    cache_modifier: impl OptMessage,
    eviction_policy: impl OptMessage,
    volatile: impl OptFlag,
) -> Tile {
    let loc = loc!();
    let (mask, other) = (mask.opt(), other.opt());
    let boundary_check = boundary_check.const_dims();
    let (cache, eviction) = (cache_modifier.message(), eviction_policy.message());
    let hints = CacheHints {
        modifier: CacheModifier::from_name(&cache).unwrap_or_default(),
        eviction: Eviction::from_name(&eviction).unwrap_or_default(),
        volatile: volatile.flag(),
    };
    let (ptr, mask, other) = match ptr.into() {
        PointerArg::Tile(p) => {
            if !boundary_check.is_empty() {
                let msg = "load: boundary_check needs a block pointer".to_string();
                return fail_with(p, msg);
            }
            let pad = block_ptr::padding(padding_option, p);
            if !matches!(pad, block_ptr::Padding::Unset) {
                let msg = "load: padding_option needs a block pointer".to_string();
                return fail_with(p, msg);
            }
            (p, mask, other)
        }
        PointerArg::Block(bp) => {
            let (p, check) = bp.resolve(&boundary_check, "load");
            if mask.is_some() || other.is_some() {
                let msg = "load: `mask` and `other` cannot be given for a block pointer (use boundary_check and padding_option)".to_string();
                return fail_with(p, msg);
            }
            let other = match block_ptr::padding(padding_option, p) {
                block_ptr::Padding::Unset | block_ptr::Padding::Zero => None,
                block_ptr::Padding::Nan if bp.dtype().is_float() => Some(Operand::Float(f64::NAN)),
                block_ptr::Padding::Nan => {
                    let msg = format!(
                        "load: padding_option \"nan\" needs a float block, got {}",
                        bp.dtype()
                    );
                    return fail_with(p, msg);
                }
            };
            (
                p,
                check.map(Operand::Tile),
                other.filter(|_| check.is_some()),
            )
        }
    };
    block_ptr::check_hint(
        "load: cache_modifier",
        cache.as_str(),
        &[".ca", ".cg", ".cv"],
        ptr,
    );
    block_ptr::check_hint(
        "load: eviction_policy",
        eviction.as_str(),
        &["evict_first", "evict_last", "evict_normal"],
        ptr,
    );
    emit(|b| {
        let Some((pt, d, mask)) = memory_operands(b, ptr, mask, "load", &loc) else {
            return ptr.0;
        };
        let other = other.map(|o| {
            let v = b.operand(o, Some(d), &loc);
            let v = b.cast(v, d, &loc);
            b.broadcast_to(v, &pt.shape, &loc)
        });
        b.push1(
            Op::Load {
                ptr: ptr.0,
                mask,
                other,
                hints,
            },
            pt.with_elem(Elem::Scalar(d)),
            loc,
        )
    })
}

/// Stores `value` (converted to the pointee dtype, broadcast) through `ptr` where `mask`.
/// `ptr` may be a [`BlockPtr`] (then without `mask`: see [`store_with`]).
#[track_caller]
pub fn store(ptr: impl Into<PointerArg>, value: impl IntoOperand, mask: impl OptOperand) {
    store_with(ptr, value, mask, NoArg, NoArg, NoArg)
}

/// Triton's `store` with every keyword (what `#[kernel]` calls): through a block pointer,
/// elements outside the `boundary_check` dims are not written. `cache_modifier` (`.wb`,
/// `.cg`, `.cs`, `.wt`) and `eviction_policy` are the store's cache hints ([`CacheHints`]:
/// PTX cache operators and eviction priorities on CUDA; plain vector stores on the CPU).
#[track_caller]
pub fn store_with(
    ptr: impl Into<PointerArg>,
    value: impl IntoOperand,
    mask: impl OptOperand,
    boundary_check: impl OptConstDims,
    cache_modifier: impl OptMessage,
    eviction_policy: impl OptMessage,
) {
    let loc = loc!();
    let (value, mask) = (value.into_operand(), mask.opt());
    let boundary_check = boundary_check.const_dims();
    let (cache, eviction) = (cache_modifier.message(), eviction_policy.message());
    let hints = CacheHints {
        modifier: CacheModifier::from_name(&cache).unwrap_or_default(),
        eviction: Eviction::from_name(&eviction).unwrap_or_default(),
        volatile: false,
    };
    let (ptr, mask) = match ptr.into() {
        PointerArg::Tile(p) => {
            if !boundary_check.is_empty() {
                fail_with(p, "store: boundary_check needs a block pointer".to_string());
                return;
            }
            (p, mask)
        }
        PointerArg::Block(bp) => {
            let (p, check) = bp.resolve(&boundary_check, "store");
            if mask.is_some() {
                let msg = "store: `mask` cannot be given for a block pointer (use boundary_check)";
                fail_with(p, msg.to_string());
                return;
            }
            (p, check.map(Operand::Tile))
        }
    };
    block_ptr::check_hint(
        "store: cache_modifier",
        cache.as_str(),
        &[".wb", ".cg", ".cs", ".wt"],
        ptr,
    );
    block_ptr::check_hint(
        "store: eviction_policy",
        eviction.as_str(),
        &["evict_first", "evict_last", "evict_normal"],
        ptr,
    );
    with(|b| {
        let Some((pt, d, mask)) = memory_operands(b, ptr, mask, "store", &loc) else {
            return;
        };
        let v = b.operand(value, Some(d), &loc);
        let v = b.cast(v, d, &loc);
        let vt = b.ty(v).clone();
        if !vt.is_scalar() && vt.shape != pt.shape {
            b.fail(
                &loc,
                format!("stored value {vt} does not fit pointers {pt}"),
            );
            return;
        }
        let v = b.broadcast_to(v, &pt.shape, &loc);
        b.push(
            Op::Store {
                ptr: ptr.0,
                value: v,
                mask,
                hints,
            },
            vec![],
            loc.clone(),
        );
    })
}

fn atomic(op: AtomicOp, ptr: Tile, value: Operand, mask: Option<Operand>, loc: Loc) -> Tile {
    emit(|b| {
        let Some((pt, d, mask)) = memory_operands(b, ptr, mask, "atomic", &loc) else {
            return ptr.0;
        };
        if let Some(why) = op.refusal(d) {
            b.fail(&loc, why);
        }
        let v = b.operand(value, Some(d), &loc);
        let v = b.cast(v, d, &loc);
        let v = b.broadcast_to(v, &pt.shape, &loc);
        let t = pt.with_elem(Elem::Scalar(d));
        b.push1(
            Op::Atomic {
                op,
                ptr: ptr.0,
                value: v,
                mask,
            },
            t,
            loc,
        )
    })
}

/// Checks Triton's `sem` and `scope` of an atomic. Every atomic is sequentially consistent
/// (stronger than any `sem`) and device-wide (CUDA's `gpu` scope, which covers `cta`;
/// `sys` is `gpu` too: host and peer-device memory are not shared with a running kernel).
#[track_caller]
fn check_atomic_options(ptr: Tile, sem: impl OptMessage, scope: impl OptMessage) {
    let (sem, scope) = (sem.message(), scope.message());
    if !["", "acquire", "release", "acq_rel", "relaxed"].contains(&sem.as_str()) {
        let msg = format!(
            "atomic: sem must be \"acquire\", \"release\", \"acq_rel\" or \"relaxed\", got {sem:?}"
        );
        fail_with(ptr, msg);
    }
    if !["", "gpu", "cta", "sys"].contains(&scope.as_str()) {
        let msg = format!("atomic: scope must be \"gpu\", \"cta\" or \"sys\", got {scope:?}");
        fail_with(ptr, msg);
    }
}

macro_rules! atomic_fns {
    ($($(#[$m:meta])* $name:ident, $with:ident => $op:ident;)*) => {$(
        $(#[$m])*
        #[track_caller]
        pub fn $name(ptr: Tile, value: impl IntoOperand, mask: impl OptOperand) -> Tile {
            atomic(AtomicOp::$op, ptr, value.into_operand(), mask.opt(), loc!())
        }

        /// With Triton's `sem` and `scope` (what `#[kernel]` calls; see
        /// `check_atomic_options` for how they are honoured).
        #[track_caller]
        pub fn $with(
            ptr: Tile,
            value: impl IntoOperand,
            mask: impl OptOperand,
            sem: impl OptMessage,
            scope: impl OptMessage,
        ) -> Tile {
            check_atomic_options(ptr, sem, scope);
            atomic(AtomicOp::$op, ptr, value.into_operand(), mask.opt(), loc!())
        }
    )*};
}
atomic_fns! {
    /// Atomically adds; returns the old values.
    atomic_add, atomic_add_with => Add;
    /// Atomic maximum; returns the old values.
    atomic_max, atomic_max_with => Max;
    /// Atomic minimum; returns the old values.
    atomic_min, atomic_min_with => Min;
    /// Atomic exchange; returns the old values.
    atomic_xchg, atomic_xchg_with => Xchg;
    /// Atomic bitwise and (integers); returns the old values.
    atomic_and, atomic_and_with => And;
    /// Atomic bitwise or (integers); returns the old values.
    atomic_or, atomic_or_with => Or;
    /// Atomic bitwise xor (integers); returns the old values.
    atomic_xor, atomic_xor_with => Xor;
}

/// `atomic_cas` with Triton's `sem` and `scope` (what `#[kernel]` calls).
#[track_caller]
pub fn atomic_cas_with(
    ptr: Tile,
    cmp: impl IntoOperand,
    value: impl IntoOperand,
    sem: impl OptMessage,
    scope: impl OptMessage,
) -> Tile {
    check_atomic_options(ptr, sem, scope);
    atomic_cas(ptr, cmp, value)
}

/// Atomic compare-and-swap on 32/64-bit integers; returns the old values.
#[track_caller]
pub fn atomic_cas(ptr: Tile, cmp: impl IntoOperand, value: impl IntoOperand) -> Tile {
    let loc = loc!();
    let (cmp, value) = (cmp.into_operand(), value.into_operand());
    emit(|b| {
        let Some((pt, d, _)) = memory_operands(b, ptr, None, "atomic_cas", &loc) else {
            return ptr.0;
        };
        if !d.is_int() || d.size_bytes() < 4 {
            b.fail(
                &loc,
                format!("atomic_cas needs 32- or 64-bit integers, got {d}"),
            );
        }
        let [c, v] = [cmp, value].map(|o| {
            let v = b.operand(o, Some(d), &loc);
            let v = b.cast(v, d, &loc);
            b.broadcast_to(v, &pt.shape, &loc)
        });
        let t = pt.with_elem(Elem::Scalar(d));
        b.push1(
            Op::AtomicCas {
                ptr: ptr.0,
                cmp: c,
                value: v,
            },
            t,
            loc,
        )
    })
}

/// Comparison used by `#[kernel]` for `<`, `==`, …: tiles give bool tiles, plain Rust
/// values (constexprs) give `bool`.
pub trait Compare<Rhs> {
    /// `Tile` or `bool`.
    type Output;
    /// Compares with `pred`.
    fn compare(self, pred: CmpPred, rhs: Rhs, loc: Loc) -> Self::Output;
}

impl<R: IntoOperand> Compare<R> for Tile {
    type Output = Tile;
    fn compare(self, pred: CmpPred, rhs: R, loc: Loc) -> Tile {
        let rhs = rhs.into_operand();
        emit(|b| b.cmp(pred, Operand::Tile(self), rhs, &loc))
    }
}

fn native_cmp<T: PartialOrd>(a: T, pred: CmpPred, b: T) -> bool {
    match pred {
        CmpPred::Eq => a == b,
        CmpPred::Ne => a != b,
        CmpPred::Lt => a < b,
        CmpPred::Le => a <= b,
        CmpPred::Gt => a > b,
        CmpPred::Ge => a >= b,
    }
}

macro_rules! native_compare {
    ($($t:ty),*) => {$(
        impl Compare<$t> for $t {
            type Output = bool;
            fn compare(self, pred: CmpPred, rhs: $t, _loc: Loc) -> bool { native_cmp(self, pred, rhs) }
        }
        impl Compare<Tile> for $t {
            type Output = Tile;
            fn compare(self, pred: CmpPred, rhs: Tile, loc: Loc) -> Tile {
                let lhs = self.into_operand();
                emit(|b| b.cmp(pred, lhs, Operand::Tile(rhs), &loc))
            }
        }
    )*};
}
native_compare!(i8, i16, i32, i64, u8, u16, u32, u64, usize, isize, f32, f64, bool);

impl Compare<&str> for &str {
    type Output = bool;
    fn compare(self, pred: CmpPred, rhs: &str, _loc: Loc) -> bool {
        native_cmp(self, pred, rhs)
    }
}

impl Compare<DType> for DType {
    type Output = bool;
    fn compare(self, pred: CmpPred, rhs: DType, _loc: Loc) -> bool {
        native_cmp(self, pred, rhs)
    }
}

/// `a < b` etc. as the `#[kernel]` macro emits them.
#[track_caller]
pub fn compare<L: Compare<R>, R>(lhs: L, pred: CmpPred, rhs: R) -> L::Output {
    lhs.compare(pred, rhs, loc!())
}

/// `&&` / `||` as the `#[kernel]` macro emits them: bools stay bools, tiles become
/// elementwise `and` / `or`.
pub trait Logic<Rhs> {
    /// `Tile` or `bool`.
    type Output;
    /// `and` when `is_and`, else `or`.
    fn logic(self, is_and: bool, rhs: Rhs, loc: Loc) -> Self::Output;
}
impl Logic<bool> for bool {
    type Output = bool;
    fn logic(self, is_and: bool, rhs: bool, _loc: Loc) -> bool {
        if is_and {
            self && rhs
        } else {
            self || rhs
        }
    }
}
impl<R: IntoOperand> Logic<R> for Tile {
    type Output = Tile;
    fn logic(self, is_and: bool, rhs: R, loc: Loc) -> Tile {
        let op = if is_and { BinOp::And } else { BinOp::Or };
        let rhs = rhs.into_operand();
        emit(|b| b.binary(op, Operand::Tile(self), rhs, &loc))
    }
}
impl Logic<Tile> for bool {
    type Output = Tile;
    fn logic(self, is_and: bool, rhs: Tile, loc: Loc) -> Tile {
        let op = if is_and { BinOp::And } else { BinOp::Or };
        emit(|b| b.binary(op, Operand::Bool(self), Operand::Tile(rhs), &loc))
    }
}

/// `a && b` / `a || b` as the `#[kernel]` macro emits them.
#[track_caller]
pub fn logic<L: Logic<R>, R>(lhs: L, is_and: bool, rhs: R) -> L::Output {
    lhs.logic(is_and, rhs, loc!())
}

/// Ceiling division, for host sizes and for tiles: `cdiv(n, BLOCK)`.
pub trait CeilDiv<Rhs> {
    /// The quotient type.
    type Output;
    /// `(self + rhs - 1) / rhs`.
    fn ceil_div(self, rhs: Rhs, loc: Loc) -> Self::Output;
}
macro_rules! host_cdiv {
    ($($t:ty),*) => {$(
        impl CeilDiv<$t> for $t {
            type Output = $t;
            fn ceil_div(self, rhs: $t, _loc: Loc) -> $t { self.div_ceil(rhs) }
        }
    )*};
}
host_cdiv!(u8, u16, u32, u64, usize);
impl<R: IntoOperand> CeilDiv<R> for Tile {
    type Output = Tile;
    fn ceil_div(self, rhs: R, loc: Loc) -> Tile {
        let rhs = rhs.into_operand();
        emit(|b| {
            let (x, y) = b.unify(Operand::Tile(self), rhs, &loc);
            let t = b.ty(x).clone();
            let one = b.constant(Const::Int(1), t.clone(), &loc);
            let s = b.push1(Op::Binary(BinOp::Add, x, y), t.clone(), loc.clone());
            let s = b.push1(Op::Binary(BinOp::Sub, s, one), t.clone(), loc.clone());
            b.push1(Op::Binary(BinOp::Div, s, y), t, loc.clone())
        })
    }
}

/// Ceiling division of sizes (host) or tiles (kernel).
#[track_caller]
pub fn cdiv<L: CeilDiv<R>, R>(lhs: L, rhs: R) -> L::Output {
    lhs.ceil_div(rhs, loc!())
}

/// The smallest power of two `>= n` (1 for 0).
pub fn next_power_of_2(n: usize) -> usize {
    n.max(1).next_power_of_two()
}

impl Tile {
    /// `cast(self, dtype)`: to a number dtype or a [`pointer_type`].
    #[track_caller]
    pub fn to(self, dtype: impl Into<CastTarget>) -> Tile {
        let loc = loc!();
        let to = dtype.into();
        emit(|b| b.cast_to(self.0, to, &loc))
    }
    /// `cast(self, dtype)`, as [`to`](Tile::to).
    #[track_caller]
    pub fn cast(self, dtype: impl Into<CastTarget>) -> Tile {
        self.to(dtype)
    }
    /// `bitcast(self, dtype)`: the same bits read as `dtype`.
    #[track_caller]
    pub fn to_bitcast(self, dtype: DType) -> Tile {
        bitcast(self, dtype)
    }
    /// `expand_dims(self, axis)`.
    #[track_caller]
    pub fn expand_dims(self, axis: impl ConstInt) -> Tile {
        expand_dims(self, axis)
    }
    /// `reshape(self, shape)`.
    #[track_caller]
    pub fn reshape(self, shape: impl IntoShape) -> Tile {
        reshape(self, shape)
    }
    /// `broadcast_to(self, shape)`.
    #[track_caller]
    pub fn broadcast_to(self, shape: impl IntoShape) -> Tile {
        broadcast_to(self, shape)
    }
    /// `trans(self)`.
    #[track_caller]
    pub fn trans(self) -> Tile {
        trans(self)
    }
    /// `trans(self)`: a 2-D tile transposed (Triton's `.T`).
    #[track_caller]
    pub fn t(self) -> Tile {
        trans(self)
    }
    /// `permute(self, dims)`.
    #[track_caller]
    pub fn permute(self, dims: impl OptConstDims) -> Tile {
        permute(self, dims)
    }
    /// `sum(self, axis)`.
    #[track_caller]
    pub fn sum(self, axis: impl ConstInt) -> Tile {
        reduce_op(ReduceOp::Sum, self, axis.get(), loc!())
    }
    /// `max(self, axis)`.
    #[track_caller]
    pub fn max(self, axis: impl ConstInt) -> Tile {
        reduce_op(ReduceOp::Max, self, axis.get(), loc!())
    }
    /// `min(self, axis)`.
    #[track_caller]
    pub fn min(self, axis: impl ConstInt) -> Tile {
        reduce_op(ReduceOp::Min, self, axis.get(), loc!())
    }
    /// `exp(self)`.
    #[track_caller]
    pub fn exp(self) -> Tile {
        let loc = loc!();
        emit(|b| b.unary(UnOp::Exp, Operand::Tile(self), &loc))
    }
    /// `sqrt(self)`.
    #[track_caller]
    pub fn sqrt(self) -> Tile {
        let loc = loc!();
        emit(|b| b.unary(UnOp::Sqrt, Operand::Tile(self), &loc))
    }
}
