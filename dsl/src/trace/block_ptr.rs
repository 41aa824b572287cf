//! Triton's block pointers (`make_block_ptr`, `advance`, and `load`/`store` through one
//! with `boundary_check` and `padding_option`) and tensor descriptors
//! (`make_tensor_descriptor`, `desc.load`/`desc.store`), written in tile ops. A block's pointers are
//! `base + Σ_d (offset_d + arange(0, block_d)) × stride_d`, and its boundary mask compares
//! each checked dim's index with 0 and the dim's size, so every backend, checked mode and
//! the fuzzer see ops they already implement. As in Triton, offsets are i32 and shapes
//! and strides i64; the index arithmetic is i64.

use super::flow::Carry;
use super::lang::{arange, cast, compare, fail_with, reshape, ConstInt, OptMessage};
use super::tile::{IntoOperand, Operand, Tile};
use crate::ir::{CmpPred, DType};

/// The most dims a block pointer has.
pub const MAX_BLOCK_RANK: usize = 5;

/// A pointer to a block of a tensor (Triton's `make_block_ptr`): the tensor's base,
/// shape and strides, where the block starts, the block's shape and its `order` (a layout
/// hint, validated and kept). `Copy` like [`Tile`]; [`advance`] gives a moved copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockPtr {
    base: Tile,
    rank: usize,
    shape: [Tile; MAX_BLOCK_RANK],
    strides: [Tile; MAX_BLOCK_RANK],
    offsets: [Tile; MAX_BLOCK_RANK],
    block: [usize; MAX_BLOCK_RANK],
    order: [usize; MAX_BLOCK_RANK],
}

/// Runtime values per dim (a tuple or an array of tiles and integers): a block pointer's
/// shape, strides, offsets and `advance`'s deltas.
pub trait IntoDims {
    /// The values, in dim order.
    fn operands(self) -> Vec<Operand>;
}

impl<T: IntoOperand, const N: usize> IntoDims for [T; N] {
    fn operands(self) -> Vec<Operand> {
        self.into_iter().map(IntoOperand::into_operand).collect()
    }
}

macro_rules! tuple_dims {
    ($($name:ident $idx:tt),+) => {
        impl<$($name: IntoOperand),+> IntoDims for ($($name,)+) {
            fn operands(self) -> Vec<Operand> {
                vec![$(self.$idx.into_operand()),+]
            }
        }
    };
}
tuple_dims!(A 0);
tuple_dims!(A 0, B 1);
tuple_dims!(A 0, B 1, C 2);
tuple_dims!(A 0, B 1, C 2, D 3);
tuple_dims!(A 0, B 1, C 2, D 3, E 4);

/// Compile-time dims (`block_shape`, `order`, `boundary_check`): a tuple or an array of
/// integers; [`NoArg`](super::lang::NoArg) is none.
pub trait OptConstDims {
    /// The dims.
    fn const_dims(self) -> Vec<i64>;
}

impl OptConstDims for super::lang::NoArg {
    fn const_dims(self) -> Vec<i64> {
        Vec::new()
    }
}

impl<T: ConstInt, const N: usize> OptConstDims for [T; N] {
    fn const_dims(self) -> Vec<i64> {
        self.iter().map(|d| d.get()).collect()
    }
}

macro_rules! one_const_dim {
    ($($t:ty),*) => {$(
        impl OptConstDims for $t {
            fn const_dims(self) -> Vec<i64> {
                vec![self as i64]
            }
        }
    )*};
}
one_const_dim!(i32, i64, u32, usize);

macro_rules! tuple_const_dims {
    ($($name:ident $idx:tt),+) => {
        impl<$($name: ConstInt),+> OptConstDims for ($($name,)+) {
            fn const_dims(self) -> Vec<i64> {
                vec![$(self.$idx.get()),+]
            }
        }
    };
}
tuple_const_dims!(A 0);
tuple_const_dims!(A 0, B 1);
tuple_const_dims!(A 0, B 1, C 2);
tuple_const_dims!(A 0, B 1, C 2, D 3);
tuple_const_dims!(A 0, B 1, C 2, D 3, E 4);

/// A pointer to the block `offsets … offsets + block_shape` of the `shape` tensor at
/// `base` with `strides` (Triton's `make_block_ptr`; `order` lists the dims from the
/// fastest-varying, a permutation of `0..rank`).
#[track_caller]
pub fn make_block_ptr(
    base: Tile,
    shape: impl IntoDims,
    strides: impl IntoDims,
    offsets: impl IntoDims,
    block_shape: impl OptConstDims,
    order: impl OptConstDims,
) -> BlockPtr {
    let (shape, strides, offsets) = (shape.operands(), strides.operands(), offsets.operands());
    let (block, order) = (block_shape.const_dims(), order.const_dims());
    let rank = block.len();
    let mut errors = Vec::new();
    let mut fail = |message: String| errors.push(format!("make_block_ptr: {message}"));
    let mut bp = BlockPtr {
        base,
        rank: rank.clamp(1, MAX_BLOCK_RANK),
        shape: [base; MAX_BLOCK_RANK],
        strides: [base; MAX_BLOCK_RANK],
        offsets: [base; MAX_BLOCK_RANK],
        block: [1; MAX_BLOCK_RANK],
        order: [0, 1, 2, 3, 4],
    };
    if rank == 0 || rank > MAX_BLOCK_RANK {
        fail(format!(
            "block_shape has {rank} dims; a block pointer has 1 to {MAX_BLOCK_RANK}"
        ));
    }
    let lens = [
        ("shape", shape.len()),
        ("strides", strides.len()),
        ("offsets", offsets.len()),
        ("order", order.len()),
    ];
    for (what, n) in lens {
        if n != rank {
            fail(format!("{what} has {n} dims, block_shape has {rank}"));
        }
    }
    let mut sorted = order.clone();
    sorted.sort_unstable();
    if !sorted.iter().copied().eq(0..rank as i64) {
        fail(format!("order {order:?} is not a permutation of 0..{rank}"));
    }
    if base.ty().elem.pointee().is_none() || !base.ty().is_scalar() {
        fail(format!("base must be a scalar pointer, got {}", base.ty()));
    }
    if let Some(b) = block.iter().find(|&&b| b < 1) {
        fail(format!("block_shape {block:?} has a dim of {b}"));
    }
    // Here, not in `fail`: a closure cannot pass the caller's location on.
    for message in errors {
        fail_with(base, message);
    }
    for (d, &b) in block.iter().enumerate().take(bp.rank) {
        bp.block[d] = b.max(1) as usize;
        bp.order[d] = order.get(d).copied().unwrap_or(d as i64).clamp(0, 4) as usize;
        if let Some(s) = shape.get(d) {
            bp.shape[d] = dim_value(*s, DType::I64, "shape");
        }
        if let Some(s) = strides.get(d) {
            bp.strides[d] = dim_value(*s, DType::I64, "strides");
        }
        if let Some(o) = offsets.get(d) {
            bp.offsets[d] = dim_value(*o, DType::I32, "offsets");
        }
    }
    bp
}

/// `ptr` moved by `offsets` blocks elements (Triton's `advance`: a new block pointer).
#[track_caller]
pub fn advance(ptr: BlockPtr, offsets: impl IntoDims) -> BlockPtr {
    let deltas = offsets.operands();
    if deltas.len() != ptr.rank {
        let msg = format!(
            "advance: {} offsets for a block pointer of {} dims",
            deltas.len(),
            ptr.rank
        );
        fail_with(ptr.base, msg);
        return ptr;
    }
    let mut moved = ptr;
    for (d, delta) in deltas.into_iter().enumerate() {
        moved.offsets[d] = ptr.offsets[d] + dim_value(delta, DType::I32, "offsets");
    }
    moved
}

#[track_caller]
fn dim_value(o: Operand, dtype: DType, what: &str) -> Tile {
    let t = cast(o, dtype);
    if !t.ty().is_scalar() || !t.dtype().is_int() {
        let msg = format!(
            "block pointer {what} must be integer scalars, got {}",
            t.ty()
        );
        return fail_with(t, msg);
    }
    t
}

impl BlockPtr {
    /// The block's shape.
    pub fn block_shape(&self) -> Vec<usize> {
        self.block[..self.rank].to_vec()
    }

    /// The pointee dtype.
    pub fn dtype(&self) -> DType {
        self.base.ty().elem.pointee().unwrap_or(DType::F32)
    }

    /// The i64 index of every element along `d`, shaped to broadcast over the block.
    #[track_caller]
    fn index(&self, d: usize) -> Tile {
        let n = self.block[d];
        let idx = cast(arange(0, n as i64), DType::I64) + cast(self.offsets[d], DType::I64);
        let mut shape = vec![1; self.rank];
        shape[d] = n;
        reshape(idx, shape)
    }

    /// The block's pointers, and the mask of the `boundary_check` dims (none when empty).
    #[track_caller]
    pub(crate) fn resolve(&self, boundary_check: &[i64], what: &str) -> (Tile, Option<Tile>) {
        let mut offset: Option<Tile> = None;
        let mut mask: Option<Tile> = None;
        for d in 0..self.rank {
            let idx = self.index(d);
            let term = idx * self.strides[d];
            offset = Some(match offset {
                Some(o) => o + term,
                None => term,
            });
            if boundary_check.contains(&(d as i64)) {
                let inside =
                    compare(idx, CmpPred::Ge, 0) & compare(idx, CmpPred::Lt, self.shape[d]);
                mask = Some(match mask {
                    Some(m) => m & inside,
                    None => inside,
                });
            }
        }
        if let Some(&bad) = boundary_check
            .iter()
            .find(|&&d| d < 0 || d >= self.rank as i64)
        {
            let msg = format!(
                "{what}: boundary_check dim {bad} is out of range for a block pointer of {} dims",
                self.rank
            );
            fail_with(self.base, msg);
        }
        let block = self.block_shape();
        let offset = offset.expect("rank >= 1").broadcast_to(block.clone());
        (self.base + offset, mask.map(|m| m.broadcast_to(block)))
    }
}

impl Carry for BlockPtr {
    fn tiles(&self, out: &mut Vec<Tile>) {
        out.extend_from_slice(&self.offsets[..self.rank]);
    }
    fn rebuild(&self, tiles: &mut std::slice::Iter<'_, Tile>) -> Self {
        let mut bp = *self;
        for o in &mut bp.offsets[..bp.rank] {
            *o = *tiles.next().expect("one tile per carried offset");
        }
        bp
    }
    fn same_native(&self, other: &Self) -> bool {
        let r = self.rank;
        self.base == other.base
            && r == other.rank
            && self.shape[..r] == other.shape[..r]
            && self.strides[..r] == other.strides[..r]
            && self.block == other.block
            && self.order == other.order
    }
}

/// What `load` and `store` go through: a pointer tile or a block pointer.
#[derive(Debug, Clone, Copy)]
pub enum PointerArg {
    /// A pointer or a tile of pointers.
    Tile(Tile),
    /// A block pointer.
    Block(BlockPtr),
}

impl From<Tile> for PointerArg {
    fn from(t: Tile) -> Self {
        PointerArg::Tile(t)
    }
}

impl From<BlockPtr> for PointerArg {
    fn from(b: BlockPtr) -> Self {
        PointerArg::Block(b)
    }
}

/// What a load's out-of-bounds elements of a block read (Triton's `padding_option`).
pub(crate) enum Padding {
    /// `""`: unspecified (Tritium reads 0).
    Unset,
    /// `"zero"`.
    Zero,
    /// `"nan"` (float blocks only).
    Nan,
}

/// Parses `padding_option`, failing the trace at the caller on another value.
#[track_caller]
pub(crate) fn padding(option: impl OptMessage, at: Tile) -> Padding {
    match option.message().as_str() {
        "" => Padding::Unset,
        "zero" => Padding::Zero,
        "nan" => Padding::Nan,
        other => {
            let msg = format!("padding_option must be \"zero\" or \"nan\", got {other:?}");
            fail_with(at, msg);
            Padding::Unset
        }
    }
}

/// Checks a `cache_modifier` or `eviction_policy` string against Triton's values.
#[track_caller]
pub(crate) fn check_hint(what: &str, value: impl OptMessage, allowed: &[&str], at: Tile) {
    let v = value.message();
    if !v.is_empty() && !allowed.contains(&v.as_str()) {
        let msg = format!("{what} must be one of {allowed:?}, got {v:?}");
        fail_with(at, msg);
    }
}

/// A tensor's base, shape and strides with a block shape (Triton's
/// `make_tensor_descriptor`): [`TensorDescriptor::load`] and [`TensorDescriptor::store`]
/// move a block at any offsets, clipped to the tensor (outside elements read 0 and are
/// not written), as Triton's TMA descriptors do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TensorDescriptor {
    block: BlockPtr,
}

/// A descriptor of the `shape` tensor at `base` with `strides`, moving `block_shape`
/// blocks (Triton's `make_tensor_descriptor`).
#[track_caller]
pub fn make_tensor_descriptor(
    base: Tile,
    shape: impl IntoDims,
    strides: impl IntoDims,
    block_shape: impl OptConstDims,
) -> TensorDescriptor {
    let block_shape = block_shape.const_dims();
    let rank = block_shape.len();
    let zeros = vec![Operand::Int(0); rank];
    let order: Vec<i64> = (0..rank as i64).rev().collect();
    let block = make_block_ptr(
        base,
        shape.operands(),
        strides.operands(),
        zeros,
        block_shape,
        order,
    );
    TensorDescriptor { block }
}

impl IntoDims for Vec<Operand> {
    fn operands(self) -> Vec<Operand> {
        self
    }
}

impl OptConstDims for Vec<i64> {
    fn const_dims(self) -> Vec<i64> {
        self
    }
}

impl TensorDescriptor {
    /// The block at `offsets` (elements outside the tensor read 0).
    #[track_caller]
    pub fn load(&self, offsets: impl IntoDims) -> Tile {
        let (p, mask) = self.at(offsets, "load");
        super::lang::load(p, mask, super::lang::NoArg)
    }

    /// Writes `value` to the block at `offsets` (elements outside the tensor are not
    /// written).
    #[track_caller]
    pub fn store(&self, offsets: impl IntoDims, value: impl IntoOperand) {
        let (p, mask) = self.at(offsets, "store");
        super::lang::store(p, value, mask)
    }

    /// The block's shape.
    pub fn block_shape(&self) -> Vec<usize> {
        self.block.block_shape()
    }

    /// The pointers and the in-tensor mask of the block at `offsets`.
    #[track_caller]
    fn at(&self, offsets: impl IntoDims, what: &str) -> (Tile, Option<Tile>) {
        let block = advance(self.block, offsets);
        let all: Vec<i64> = (0..block.rank as i64).collect();
        block.resolve(&all, &format!("tensor descriptor {what}"))
    }
}

impl Carry for TensorDescriptor {
    fn tiles(&self, _: &mut Vec<Tile>) {}
    fn rebuild(&self, _: &mut std::slice::Iter<'_, Tile>) -> Self {
        *self
    }
    fn same_native(&self, other: &Self) -> bool {
        self == other
    }
}

/// `desc.load(offsets)` (Triton's `load_tensor_descriptor`).
#[track_caller]
pub fn load_tensor_descriptor(desc: TensorDescriptor, offsets: impl IntoDims) -> Tile {
    desc.load(offsets)
}

/// `desc.store(offsets, value)` (Triton's `store_tensor_descriptor`).
#[track_caller]
pub fn store_tensor_descriptor(
    desc: TensorDescriptor,
    offsets: impl IntoDims,
    value: impl IntoOperand,
) {
    desc.store(offsets, value)
}
