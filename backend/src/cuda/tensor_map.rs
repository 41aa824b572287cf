//! TMA tensor maps (Hopper): the loads and stores of a tensor descriptor made by
//! `cp.async.bulk.tensor`.
//!
//! `make_tensor_descriptor` (and a block pointer accessed with every dim boundary-checked)
//! traces to an ordinary masked load or store (`dsl::trace::block_ptr`): per dim `d`, the
//! index `arange(0, n_d) + off_d` times the dim's stride, masked by `0 <= index <
//! shape_d`. [`BoxLoad::of`] recognizes that form, with one dim of stride 1 (the lines TMA
//! moves; the block's columns where it is row-major, its rows where its columns lie
//! contiguous, as a K-major `b`'s). On `sm_90a`, where such a load is a tensor-core `dot`
//! operand copied to shared memory in a pipelined loop (`pipeline.rs`), the block is
//! copied with TMA, one copy per 128-byte column block of the operand's swizzled layout
//! (`swizzle.rs`: the hardware's swizzle modes, so TMA writes exactly that layout; a
//! block whose columns lie contiguous lands transposed, as a `b` copied by columns is
//! laid out), and the stage's `mbarrier` counts its bytes in (`codegen/tma.rs`); where
//! such a store writes a `dot`'s 16-bit result, the epilogue's tile goes out by TMA. The
//! hardware clips the box to the tensor: elements outside read 0 and are not written, as
//! the mask gives.
//!
//! A block pointer's dim outside `boundary_check` has no mask: TMA takes it with an
//! unbounded extent where its offset is never negative by construction ([`non_negative`]),
//! so the box reads what the pointers do. 16-bit and fp8 operands are copied; 16-bit
//! results stored.
//!
//! A tensor map (CUDA's opaque 128-byte `CUtensorMap`) holds the base, shape and strides,
//! so they must be known at launch: [`plan`] keeps the accesses whose base, shape and
//! stride are computed from parameters and constants only ([`HostExpr`]) and whose base
//! and stride the specialization proves 16-byte aligned. A base that moves per program by
//! a multiple of a launch-time stride (attention's `k + head`, [`Batch`]) is a third dim
//! of the map, the multiple its coordinate.
//! The launcher evaluates them and encodes one map per planned load ([`Encoding`]:
//! `cuTensorMapEncodeTiled` on a GPU, [`Encoding::emulated`] for the emulator), each
//! passed as a `grid_constant` parameter after the kernel's own and the check buffer.

use super::codegen::swizzle::Swizzled;
use std::collections::HashMap;
use tritium_dsl::ir::{
    axis_info, integer_op, AxisInfo, BinOp, CmpPred, Const, DType, Function, Inst, Loc, Op, Value,
};

/// Bytes of a tensor map (CUDA's `CUtensorMap`, 64-byte aligned).
pub(crate) const MAP_BYTES: usize = 128;

/// The most elements along one dim of a TMA box.
const MAX_BOX: usize = 256;

/// The extent of a dim the access does not check (and of the batches): beyond any
/// coordinate (TMA's are 32-bit signed), within the 2^32 a map takes.
const UNBOUNDED: i128 = 1 << 31;

/// An access of a `rows × cols` block of a 2-D tensor, clipped to it: what a tensor
/// descriptor's `load` or `store` traces to (see the module docs). Values are the
/// kernel's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BoxLoad {
    /// The tensor's base (a scalar pointer).
    pub base: Value,
    /// Per dim (rows, cols): the block's first index (a scalar integer).
    pub offsets: [Value; 2],
    /// Per dim: the tensor's extent (a scalar integer), or `None` where the access does
    /// not check the dim (a block pointer's dim outside `boundary_check`: its index is
    /// then never negative, see [`non_negative`]).
    pub extents: [Option<Value>; 2],
    /// Where the base is a launch-time pointer moved by a multiple of a launch-time
    /// stride (attention's `k + head`, one head per program): that multiple, the index
    /// along a third dim of the tensor map.
    pub batch: Option<Batch>,
    /// The dim whose elements are adjacent in memory: 1 (row-major), or 0 (the block's
    /// columns lie contiguous: `kᵀ`, a K-major `b`).
    pub inner: usize,
    /// Elements from one line of the other dim to the next (a scalar integer).
    pub stride: Value,
    pub rows: usize,
    pub cols: usize,
}

/// A base `root + index · Π stride leaves` (an i64 product, see [`Batch::of`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Batch {
    /// The launch-time pointer.
    pub root: Value,
    /// The element offset added to it (the product).
    pub offset: Value,
    /// The product's one factor computed in the kernel: an i32 scalar, or the i32 that
    /// an i64 factor extends (TMA's coordinates are 32-bit).
    pub index: Value,
}

impl Batch {
    /// `base` as a batch base, where it is `addptr(root, offset)` with `root` a launch-time
    /// pointer and `offset` an i64 product of launch-time factors and one factor that is
    /// not (casts of i32s to i64 included).
    fn of(f: &Function, defs: &HashMap<Value, &Inst>, base: Value) -> Option<Batch> {
        let Some(Op::AddPtr(root, offset)) = defs.get(&base).map(|i| &i.op) else {
            return None;
        };
        HostExpr::of(f, defs, *root)?;
        if f.ty(*offset).dtype() != Some(DType::I64) {
            return None;
        }
        let (mut host, mut kernel) = (Vec::new(), Vec::new());
        factors(f, defs, *offset, &mut host, &mut kernel, 0)?;
        let [index] = kernel[..] else {
            return None;
        };
        let index = match defs.get(&index).map(|i| &i.op) {
            Some(Op::Cast(x)) if f.ty(*x).dtype() == Some(DType::I32) => *x,
            _ => return None,
        };
        // A negative batch would read zeros where the pointers read memory before `root`.
        if !non_negative(f, defs, index, 0) {
            return None;
        }
        Some(Batch {
            root: *root,
            offset: *offset,
            index,
        })
    }

    /// The launch-time factors of the offset (see [`Batch::of`]).
    pub(crate) fn stride_factors(&self, f: &Function, defs: &HashMap<Value, &Inst>) -> Vec<Value> {
        let (mut host, mut kernel) = (Vec::new(), Vec::new());
        factors(f, defs, self.offset, &mut host, &mut kernel, 0);
        host
    }
}

/// The leaves of the i64 product `v`: those computed at launch (`host`) and the others.
fn factors(
    f: &Function,
    defs: &HashMap<Value, &Inst>,
    v: Value,
    host: &mut Vec<Value>,
    kernel: &mut Vec<Value>,
    depth: usize,
) -> Option<()> {
    if depth > 16 {
        return None;
    }
    match defs.get(&v).map(|i| &i.op) {
        Some(Op::Binary(BinOp::Mul, x, y)) if f.ty(v).dtype() == Some(DType::I64) => {
            factors(f, defs, *x, host, kernel, depth + 1)?;
            factors(f, defs, *y, host, kernel, depth + 1)
        }
        _ => {
            match HostExpr::of(f, defs, v) {
                Some(_) => host.push(v),
                None => kernel.push(v),
            }
            Some(())
        }
    }
}

/// Whether the integer scalar `v` is never negative by construction: a constant `>= 0`, a
/// program id, a widening cast of such a value, its quotient or remainder by a positive
/// constant, or a loop's carried value that starts so and to which its loop adds such a
/// value (a block pointer's offset along a dim its loop advances, by 0 or by the block).
/// A value that grows could wrap past the dtype's maximum, but only where the pointers it
/// offsets have left their buffer long before: a launch whose bounds proof leaves the
/// access is checked, and a checked access is never copied by TMA
/// (`codegen/async_copy.rs`), so that TMA's zeros before the start are never read where
/// the pointers would have read memory.
fn non_negative(f: &Function, defs: &HashMap<Value, &Inst>, v: Value, depth: usize) -> bool {
    if depth > 8 {
        return false;
    }
    let again = |x: Value| non_negative(f, defs, x, depth + 1);
    if let Some(c) = int_const(defs, v) {
        return c >= 0;
    }
    // Carried value `j` of a `for` loop (its body's argument, or its result): it starts
    // non-negative and its loop adds a non-negative value to it.
    let carried = |init: &[Value], body: &tritium_dsl::ir::Block, j: usize| {
        let (arg, Some(&y)) = (body.args[1 + j], body.yields().get(j)) else {
            return false;
        };
        let grows = y == arg
            || match defs.get(&y).map(|d| &d.op) {
                Some(Op::Binary(BinOp::Add, x, y)) => {
                    (*x == arg && again(*y)) || (*y == arg && again(*x))
                }
                _ => false,
            };
        grows && again(init[j])
    };
    let bits = |x: Value| f.ty(x).dtype().filter(|d| d.is_int()).map(|d| d.bits());
    match defs.get(&v).map(|i| (&i.op, &i.results)) {
        // Wider, or the same dtype: a cast that keeps every non-negative value.
        Some((Op::Cast(x), _)) => {
            let same = f.ty(*x).dtype() == f.ty(v).dtype();
            (same || bits(*x).is_some_and(|b| Some(b) < bits(v))) && again(*x)
        }
        Some((Op::For { init, body, .. }, results)) => {
            let j = results.iter().position(|r| *r == v);
            j.is_some_and(|j| carried(init, body, j))
        }
        Some((Op::ProgramId(_), _)) => true,
        Some((Op::Binary(BinOp::Div | BinOp::Rem, x, c), _)) => {
            int_const(defs, *c).is_some_and(|c| c > 0) && again(*x)
        }
        Some(_) => false,
        // A block argument: a `for` loop's carried value.
        None => {
            let mut found = false;
            f.walk(&mut |i| {
                if let Op::For { init, body, .. } = &i.op {
                    if let Some(j) = body.args.iter().skip(1).position(|a| *a == v) {
                        found = carried(init, body, j);
                    }
                }
            });
            found
        }
    }
}

impl BoxLoad {
    /// The block's dims, the other dim first: how TMA lays it out in shared memory
    /// (lines of the inner dim).
    pub(crate) fn outer_inner(&self) -> [usize; 2] {
        [1 - self.inner, self.inner]
    }
}

/// One dim's part of a box load: `(arange(0, size) + offset)` reshaped, and its stride.
struct DimTerm {
    index: Value,
    offset: Value,
    size: usize,
    stride: Value,
}

impl BoxLoad {
    /// The box a `load` or `store` accesses, if it is a tensor descriptor's access of a
    /// 2-D block (see the module docs): pointers `base + Σ_d (arange + off_d) · stride_d`,
    /// the mask every dim's `0 <= index < extent`, no `other` or a zero one, one dim's
    /// stride 1.
    pub(crate) fn of(f: &Function, defs: &HashMap<Value, &Inst>, access: &Inst) -> Option<BoxLoad> {
        let (ptr, mask) = match &access.op {
            Op::Load {
                ptr, mask, other, ..
            } if other.is_none_or(|o| is_zero(defs, o)) => (ptr, mask),
            Op::Store { ptr, mask, .. } => (ptr, mask),
            _ => return None,
        };
        let ty = f.ty(*ptr);
        if ty.rank() != 2 {
            return None;
        }
        let op = |v: Value| defs.get(&v).map(|i| &i.op);
        let Some(Op::AddPtr(base, offset)) = op(*ptr) else {
            return None;
        };
        let Some(Op::Splat(base)) = op(*base) else {
            return None;
        };
        let mut terms = Vec::new();
        sum_terms(f, defs, *offset, &mut terms)?;
        // The rows' term first, whichever the sum adds first (a transposed load's sums the
        // columns' first: `dsl::ir::sink_transposes`).
        terms.sort_by_key(|t| f.ty(t.index).shape.first() == Some(&1));
        let [row, col] = <[DimTerm; 2]>::try_from(terms).ok()?;
        let shaped = |t: &DimTerm, d: usize| {
            let shape = &f.ty(t.index).shape;
            shape.len() == 2 && shape[d] == t.size && shape[1 - d] == 1
        };
        if !shaped(&row, 0) || !shaped(&col, 1) {
            return None;
        }
        let unit = |t: &DimTerm| int_const(defs, t.stride) == Some(1);
        let (inner, stride) = match (unit(&row), unit(&col)) {
            (_, true) => (1, row.stride),
            (true, false) => (0, col.stride),
            (false, false) => return None,
        };
        let mut bounds = HashMap::new();
        if let Some(m) = mask {
            in_bounds(defs, *m, &mut bounds)?;
        }
        // A dim the mask does not bound is read wherever its index points, never before
        // its start (TMA would read zeros there).
        let extent = |t: &DimTerm| match bounds.get(&t.index) {
            Some(e) => Some(Some(*e)),
            None => non_negative(f, defs, t.offset, 0).then_some(None),
        };
        let extents = [extent(&row)?, extent(&col)?];
        let checked = extents.iter().flatten().count();
        let batch = match HostExpr::of(f, defs, *base) {
            Some(_) => None,
            None => Some(Batch::of(f, defs, *base)?),
        };
        (bounds.len() == checked && ty.shape == [row.size, col.size]).then_some(BoxLoad {
            base: *base,
            offsets: [row.offset, col.offset],
            extents,
            batch,
            inner,
            stride,
            rows: row.size,
            cols: col.size,
        })
    }
}

/// The terms of a sum of `index · splat(stride)` tiles, each maybe broadcast, in order.
fn sum_terms(
    f: &Function,
    defs: &HashMap<Value, &Inst>,
    v: Value,
    out: &mut Vec<DimTerm>,
) -> Option<()> {
    match &defs.get(&v)?.op {
        Op::Broadcast(x) => sum_terms(f, defs, *x, out),
        Op::Binary(BinOp::Add, x, y) if f.ty(*x).shape == f.ty(v).shape => {
            sum_terms(f, defs, *x, out)?;
            sum_terms(f, defs, *y, out)
        }
        Op::Binary(BinOp::Mul, index, stride) => {
            let Op::Splat(stride) = &defs.get(stride)?.op else {
                return None;
            };
            let (offset, size) = dim_index(f, defs, *index)?;
            out.push(DimTerm {
                index: *index,
                offset,
                size,
                stride: *stride,
            });
            Some(())
        }
        _ => None,
    }
}

/// `reshape(cast(arange(0, n)) + splat(cast(offset)))`: the offset (before its cast) and n.
fn dim_index(f: &Function, defs: &HashMap<Value, &Inst>, v: Value) -> Option<(Value, usize)> {
    let op = |v: Value| defs.get(&v).map(|i| &i.op);
    let sum = match op(v)? {
        Op::Reshape(x) => *x,
        _ => v,
    };
    let Op::Binary(BinOp::Add, lanes, offset) = op(sum)? else {
        return None;
    };
    let lanes = match op(*lanes)? {
        Op::Cast(x) => *x,
        _ => *lanes,
    };
    let Op::Arange { start: 0, end } = op(lanes)? else {
        return None;
    };
    let Op::Splat(offset) = op(*offset)? else {
        return None;
    };
    let offset = match op(*offset) {
        Some(Op::Cast(x)) if f.ty(*x).is_scalar() => *x,
        _ => *offset,
    };
    let size = usize::try_from(*end).ok()?;
    f.ty(offset).is_scalar().then_some((offset, size))
}

/// The conjuncts `index >= 0 & index < splat(extent)` of a mask (maybe broadcast), as
/// `index → extent`.
fn in_bounds(
    defs: &HashMap<Value, &Inst>,
    v: Value,
    out: &mut HashMap<Value, Value>,
) -> Option<()> {
    let op = |v: Value| defs.get(&v).map(|i| &i.op);
    match op(v)? {
        Op::Broadcast(x) => in_bounds(defs, *x, out),
        Op::Binary(BinOp::And, x, y) => {
            if let (Some(Op::Cmp(CmpPred::Ge, i, zero)), Some(Op::Cmp(CmpPred::Lt, j, n))) =
                (op(*x), op(*y))
            {
                let Some(Op::Splat(n)) = op(*n) else {
                    return None;
                };
                return (i == j && is_zero(defs, *zero) && out.insert(*i, *n).is_none())
                    .then_some(());
            }
            in_bounds(defs, *x, out)?;
            in_bounds(defs, *y, out)
        }
        _ => None,
    }
}

/// Whether `v` is the constant 0 (a constant or a splat of one).
fn is_zero(defs: &HashMap<Value, &Inst>, v: Value) -> bool {
    match defs.get(&v).map(|i| &i.op) {
        Some(Op::Const(Const::Int(0))) => true,
        Some(Op::Const(Const::Float(x))) => x.to_bits() == 0,
        Some(Op::Splat(x)) => is_zero(defs, *x),
        _ => false,
    }
}

fn int_const(defs: &HashMap<Value, &Inst>, v: Value) -> Option<i128> {
    match defs.get(&v).map(|i| &i.op) {
        Some(Op::Const(Const::Int(c))) => Some(*c),
        _ => None,
    }
}

/// An integer (or an address) computed at launch from the kernel's parameters and
/// constants, as the generated code computes it (wrapping in each op's dtype).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HostExpr {
    /// Parameter `i`: a scalar of its dtype, or a pointer's address.
    Param(usize, Option<DType>),
    Const(i128),
    /// An integer converted to `DType`.
    Cast(Box<HostExpr>, DType),
    Binary(BinOp, DType, Box<HostExpr>, Box<HostExpr>),
    /// A pointer moved by a number of `usize`-byte elements.
    AddPtr(Box<HostExpr>, Box<HostExpr>, usize),
}

/// The deepest [`HostExpr`] built (the kernel's index arithmetic is shallow).
const MAX_DEPTH: usize = 32;

impl HostExpr {
    /// `v` of `f` as a launch-time expression, if it is one.
    pub(crate) fn of(f: &Function, defs: &HashMap<Value, &Inst>, v: Value) -> Option<HostExpr> {
        Self::at_depth(f, defs, v, 0)
    }

    fn at_depth(
        f: &Function,
        defs: &HashMap<Value, &Inst>,
        v: Value,
        depth: usize,
    ) -> Option<HostExpr> {
        let ty = f.ty(v);
        if depth > MAX_DEPTH || !ty.is_scalar() {
            return None;
        }
        if let Some(i) = f.params.iter().position(|p| p.value == v) {
            return Some(HostExpr::Param(
                i,
                ty.dtype().filter(|_| ty.elem.pointee().is_none()),
            ));
        }
        let again = |x: Value| Self::at_depth(f, defs, x, depth + 1).map(Box::new);
        let int = |x: Value| f.ty(x).dtype().is_some_and(|d| d.is_int() && !d.is_bool());
        Some(match &defs.get(&v)?.op {
            Op::Hint { x, .. } => return Self::at_depth(f, defs, *x, depth + 1),
            Op::Const(Const::Int(c)) => HostExpr::Const(*c),
            Op::Cast(x) if int(*x) && int(v) => HostExpr::Cast(again(*x)?, ty.dtype()?),
            Op::Binary(op, x, y) if int(v) => {
                HostExpr::Binary(*op, ty.dtype()?, again(*x)?, again(*y)?)
            }
            Op::AddPtr(p, o) if int(*o) => {
                let elem = ty.elem.pointee()?.size_bytes();
                HostExpr::AddPtr(again(*p)?, again(*o)?, elem)
            }
            _ => return None,
        })
    }

    /// The value for a launch whose parameter slots (what the kernel receives: addresses
    /// for pointers, the scalars' bits) are `slots`; `None` where an op has no value
    /// (`integer_op` refuses it).
    pub(crate) fn eval(&self, slots: &[u64]) -> Option<i128> {
        Some(match self {
            HostExpr::Param(i, dtype) => {
                let bits = *slots.get(*i)? as i128;
                match dtype {
                    Some(d) => d.wrap_int(bits),
                    None => bits,
                }
            }
            HostExpr::Const(c) => *c,
            HostExpr::Cast(x, d) => d.wrap_int(x.eval(slots)?),
            HostExpr::Binary(op, d, x, y) => integer_op(*op, x.eval(slots)?, y.eval(slots)?, *d)?,
            HostExpr::AddPtr(p, o, elem) => {
                let addr = p
                    .eval(slots)?
                    .wrapping_add(o.eval(slots)?.wrapping_mul(*elem as i128));
                DType::U64.wrap_int(addr)
            }
        })
    }
}

/// A load or store copied by TMA in a kernel: its tensor's map, computed at launch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PlannedMap {
    /// The access's fault-site number (`Function::fault_site_ids`): memory ops keep theirs
    /// through the code generator's rewrites.
    pub site: u32,
    pub loc: Loc,
    pub dtype: DType,
    /// The block in shared memory: `rows` lines of `cols` adjacent elements (the loaded
    /// tile's, transposed where its columns lie contiguous).
    pub rows: usize,
    pub cols: usize,
    pub base: HostExpr,
    /// Along the lines' dim, then along the lines.
    pub extents: [HostExpr; 2],
    /// Elements from one line to the next.
    pub row_stride: HostExpr,
    /// Elements from one batch to the next, where the base moves by batches
    /// ([`Batch`]): the map's third dim.
    pub batch_stride: Option<HostExpr>,
}

/// The accesses of `f` that code for Hopper may make by TMA, in site order (see the
/// module docs): each a 16-bit or fp8 tile loaded only to be a `dot` operand (of one
/// `dot`, or at the top level of several), or a
/// `dot`'s 16-bit result (maybe cast) stored, its box whole 16-byte chunks per row and at
/// most 256 rows, its base and row stride 16-byte aligned by the specialization.
fn plan(f: &Function) -> Vec<PlannedMap> {
    let defs = f.defs();
    let sites = f.fault_site_ids();
    let mut operands = Vec::new();
    f.walk(&mut |inst| {
        if let Op::Dot { a, b, .. } = &inst.op {
            operands.extend([*a, *b]);
        }
    });
    let mut found = Vec::new();
    let mut axis: Option<HashMap<Value, AxisInfo>> = None;
    // A `dot`'s result, its cast, a loop's result yielded by one (tutorial 03's
    // accumulator), or an elementwise op of one (attention's `acc / l_i[:, None]`), which
    // code generation holds in the `dot`'s fragments where it can (`codegen/held.rs`; a
    // map it does not use is only encoded).
    fn dot_result(defs: &HashMap<Value, &Inst>, v: Value, depth: usize) -> bool {
        let Some(inst) = defs.get(&v).filter(|_| depth < 8) else {
            return false;
        };
        match &inst.op {
            Op::Dot { .. } => true,
            Op::Cast(x) | Op::Unary(_, x) => dot_result(defs, *x, depth + 1),
            Op::Binary(_, x, y) => {
                dot_result(defs, *x, depth + 1) || dot_result(defs, *y, depth + 1)
            }
            Op::For { body, .. } => {
                let j = inst.results.iter().position(|r| *r == v);
                let yielded = j.and_then(|j| body.yields().get(j).copied());
                yielded.is_some_and(|y| dot_result(defs, y, depth + 1))
            }
            _ => false,
        }
    }
    // Top-level loads used by several `dot`s (attention's `q`, in each loop of the causal
    // form): copied once by TMA before the loops (`codegen/hoisted_tma.rs`).
    let top_level: Vec<Value> = (f.body.insts.iter())
        .filter(|i| matches!(i.op, Op::Load { .. }))
        .map(|i| i.results[0])
        .collect();
    f.walk(&mut |inst| {
        let dtype = match &inst.op {
            Op::Load { .. } => {
                let r = inst.results[0];
                let dot_uses = operands.iter().filter(|x| **x == r).count();
                let several = dot_uses > 1 && top_level.contains(&r);
                if dot_uses == 0 || f.uses(r) != dot_uses || (dot_uses > 1 && !several) {
                    return;
                }
                f.ty(r).dtype()
            }
            Op::Store { ptr, value, .. } if dot_result(&defs, *value, 0) => {
                f.ty(*ptr).elem.pointee()
            }
            _ => return,
        };
        // 16-bit operands and results, and fp8 operands (`wgmma`'s 8-bit forms; an fp8
        // result is stored from registers).
        let store = matches!(inst.op, Op::Store { .. });
        let Some(dtype) = dtype.filter(|d| match d {
            DType::F16 | DType::BF16 => true,
            DType::F8E4M3 | DType::F8E5M2 => !store,
            _ => false,
        }) else {
            return;
        };
        let Some(b) = BoxLoad::of(f, &defs, inst) else {
            return;
        };
        let elem = dtype.size_bytes();
        let [outer, inner] = b.outer_inner();
        let size = [b.rows, b.cols];
        let (rows, cols) = (size[outer], size[inner]);
        // Stores go out of the epilogue's row-major tile.
        let transposed_store = inner == 0 && store;
        let fits = rows <= MAX_BOX && (cols * elem).is_multiple_of(16) && !transposed_store;
        let host = |v| HostExpr::of(f, &defs, v);
        // An unchecked dim's extent: as far as a coordinate reaches.
        let extent = |e: Option<Value>| e.map_or(Some(HostExpr::Const(UNBOUNDED)), host);
        let root = b.batch.map_or(b.base, |t| t.root);
        let (Some(base), Some(outer_extent), Some(inner_extent), Some(stride)) = (
            host(root),
            extent(b.extents[outer]),
            extent(b.extents[inner]),
            host(b.stride),
        ) else {
            return;
        };
        let axis = axis.get_or_insert_with(|| axis_info(f));
        let div = |v: Value| axis.get(&v).map_or(1, AxisInfo::element_divisibility);
        // Divisibilities are powers of two: `div · per` is a multiple of `bytes` (16)
        // once it is at least that.
        let divides = |v: Value, bytes: u64, per: u64| div(v) * per >= bytes;
        let mut aligned = divides(root, 16, 1) && divides(b.stride, 16, elem as u64);
        // The batch's stride: the product of its launch-time factors.
        let mut batch_stride = None;
        if let Some(t) = b.batch {
            let leaves = t.stride_factors(f, &defs);
            let product = leaves.iter().try_fold(HostExpr::Const(1), |acc, v| {
                let x = host(*v)?;
                Some(HostExpr::Binary(
                    BinOp::Mul,
                    DType::I64,
                    Box::new(acc),
                    Box::new(x),
                ))
            });
            let d = leaves.iter().fold(1u64, |d, v| d.saturating_mul(div(*v)));
            aligned &= d.saturating_mul(elem as u64) >= 16;
            let Some(product) = product else {
                return;
            };
            batch_stride = Some(product);
        }
        if let (true, true, Some(&site)) = (fits, aligned, sites.get(&(inst as *const Inst))) {
            found.push(PlannedMap {
                site,
                loc: inst.loc.clone(),
                dtype,
                rows,
                cols,
                base,
                extents: [outer_extent, inner_extent],
                row_stride: stride,
                batch_stride,
            });
        }
    });
    found.sort_by_key(|m| m.site);
    found
}

/// One tensor map's encoding parameters: what `cuTensorMapEncodeTiled` takes (dims from
/// the innermost).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Encoding {
    pub dtype: DType,
    pub address: u64,
    /// Columns, rows, batches (1 for a 2-D map).
    pub dims: [u64; 3],
    /// Bytes from one row to the next.
    pub row_stride: u64,
    /// Bytes from one batch to the next; 0 for a 2-D map.
    pub batch_stride: u64,
    /// Columns (at most one swizzle span), rows of one copy.
    pub box_dims: [u32; 2],
    /// The swizzle span in bytes (128, 64, 32), 0 for none.
    pub swizzle: u32,
}

/// The first word of an emulated map (see [`Encoding::emulated`]).
const EMULATED_MAGIC: u64 = 0x544d_415f_5452_4954;

impl PlannedMap {
    /// The swizzled layout TMA writes the block in (that of a `dot` operand tile).
    pub(crate) fn tile(&self) -> Swizzled {
        Swizzled::of_bytes(0, self.rows, self.cols, self.dtype.size_bytes())
    }

    /// Columns one copy moves: one 128-byte column block of a blocked tile, else a row.
    pub(crate) fn box_cols(&self) -> usize {
        let t = self.tile();
        match t.blocked() {
            true => 128 / t.elem,
            false => t.cols,
        }
    }

    /// This map's encoding for a launch with parameter slots `slots`, or what TMA cannot
    /// encode (the launch then takes code without TMA).
    pub(crate) fn encode(&self, slots: &[u64]) -> Result<Encoding, String> {
        let value = |e: &HostExpr, what: &str| {
            e.eval(slots)
                .ok_or_else(|| format!("its {what} has no value at this launch"))
        };
        let address = value(&self.base, "base")?;
        let [rows, cols] = [
            value(&self.extents[0], "shape")?,
            value(&self.extents[1], "shape")?,
        ];
        let stride = value(&self.row_stride, "stride")?;
        let elem = self.dtype.size_bytes() as i128;
        if address % 16 != 0 {
            return Err(format!("its base {address:#x} is not 16-byte aligned"));
        }
        for (what, n) in [("rows", rows), ("columns", cols)] {
            if !(1..=1i128 << 32).contains(&n) {
                return Err(format!("its shape has {n} {what}; TMA takes 1 to 2^32"));
            }
        }
        let stride_bytes = |stride: i128, what: &str| {
            let bytes = stride * elem;
            match bytes % 16 == 0 && (0..1i128 << 40).contains(&bytes) {
                true => Ok(bytes as u64),
                false => Err(format!(
                    "its {what} stride of {bytes} bytes is not a multiple of 16 below 2^40"
                )),
            }
        };
        let row_stride = stride_bytes(stride, "row")?;
        let (batches, batch_stride) = match &self.batch_stride {
            Some(e) => (
                UNBOUNDED as u64,
                stride_bytes(value(e, "batch stride")?, "batch")?,
            ),
            None => (1, 0),
        };
        Ok(Encoding {
            dtype: self.dtype,
            address: address as u64,
            dims: [cols as u64, rows as u64, batches],
            row_stride,
            batch_stride,
            box_dims: [self.box_cols() as u32, self.rows as u32],
            swizzle: self.tile().swizzle_bytes() as u32,
        })
    }
}

impl Encoding {
    /// The emulator's map: the encoding's fields in words (the emulator reads them back
    /// with [`Encoding::from_emulated`]; a GPU's map is the driver's own format).
    pub(crate) fn emulated(&self) -> [u64; MAP_BYTES / 8] {
        let mut w = [0u64; MAP_BYTES / 8];
        w[0] = EMULATED_MAGIC;
        w[1] = self.dtype.size_bytes() as u64 | u64::from(self.swizzle) << 16;
        w[2] = self.address;
        w[3] = self.dims[0];
        w[4] = self.dims[1];
        w[5] = self.row_stride;
        w[6] = u64::from(self.box_dims[0]) | u64::from(self.box_dims[1]) << 32;
        w[7] = self.dims[2];
        w[8] = self.batch_stride;
        w
    }

    /// The map's rank: 3 where the base moves by batches.
    pub(crate) fn rank(&self) -> usize {
        if self.batch_stride == 0 {
            2
        } else {
            3
        }
    }

    /// An emulated map's encoding (element size for the dtype), or `None` for words that
    /// are not one.
    pub(crate) fn from_emulated(w: &[u64; MAP_BYTES / 8]) -> Option<(Encoding, usize)> {
        (w[0] == EMULATED_MAGIC).then(|| {
            let enc = Encoding {
                dtype: DType::U8,
                address: w[2],
                dims: [w[3], w[4], w[7]],
                row_stride: w[5],
                batch_stride: w[8],
                box_dims: [w[6] as u32, (w[6] >> 32) as u32],
                swizzle: (w[1] >> 16) as u32,
            };
            (enc, (w[1] & 0xffff) as usize)
        })
    }
}

/// The maps' encodings for one launch, or the first that TMA cannot encode, named.
pub(crate) fn encode_all(maps: &[PlannedMap], slots: &[u64]) -> Result<Vec<Encoding>, String> {
    (maps.iter())
        .map(|m| {
            m.encode(slots)
                .map_err(|e| format!("the tensor descriptor loaded at {}: {e}", m.loc))
        })
        .collect()
}

/// The maps of `f` compiled with `options` (none without TMA or in checked mode, where
/// no load is copied asynchronously): the tensor-map parameters its kernel takes.
pub(crate) fn planned(f: &Function, options: &super::CudaCompileOptions) -> Vec<PlannedMap> {
    let tma = options.tma && super::target::uses_wgmma(options.sm);
    planned_for(f, tma, options.bounds_check)
}

/// [`planned`] for code generated with TMA or not.
pub(crate) fn planned_for(f: &Function, tma: bool, bounds_check: bool) -> Vec<PlannedMap> {
    match tma && !bounds_check {
        // On the function the code is generated from (a transposed load's box is the
        // transposed block's); sites are the same in both.
        true => plan(super::codegen::for_gpu(f, true).as_ref().unwrap_or(f)),
        false => Vec::new(),
    }
}

/// The driver's tensor map for `e` (`cuTensorMapEncodeTiled`).
pub(crate) fn encode_on_driver(e: &Encoding) -> Result<[u64; MAP_BYTES / 8], String> {
    use cudarc::driver::sys;
    let dtype = match e.dtype {
        DType::BF16 => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        DType::F16 => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        _ => sys::CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_UINT8,
    };
    let swizzle = match e.swizzle {
        128 => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
        64 => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_64B,
        32 => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_32B,
        _ => sys::CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_NONE,
    };
    let mut map = sys::CUtensorMap { opaque: [0; 16] };
    let strides = [e.row_stride, e.batch_stride];
    let box_dims = [e.box_dims[0], e.box_dims[1], 1];
    let element_strides = [1u32; 3];
    // SAFETY: every array has at least the rank's entries (strides one fewer), the map
    // is written in place; the driver only reads the address.
    let r = unsafe {
        sys::cuTensorMapEncodeTiled(
            &mut map,
            dtype,
            e.rank() as u32,
            e.address as *mut std::ffi::c_void,
            e.dims.as_ptr(),
            strides.as_ptr(),
            box_dims.as_ptr(),
            element_strides.as_ptr(),
            sys::CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
            swizzle,
            sys::CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
            sys::CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
    };
    match r {
        sys::CUresult::CUDA_SUCCESS => Ok(map.opaque),
        e => Err(format!("cuTensorMapEncodeTiled failed: {e:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 128 × 64 f16 block of a tensor whose base, rows and row stride are parameters
    /// 0, 1 and 2 (pointer, i32, i32), 64 columns.
    fn planned() -> PlannedMap {
        PlannedMap {
            site: 0,
            loc: Loc::default(),
            dtype: DType::F16,
            rows: 128,
            cols: 64,
            base: HostExpr::Param(0, None),
            extents: [HostExpr::Param(1, Some(DType::I32)), HostExpr::Const(64)],
            row_stride: HostExpr::Cast(Box::new(HostExpr::Param(2, Some(DType::I32))), DType::I64),
            batch_stride: None,
        }
    }

    #[test]
    fn launches_tma_cannot_encode_are_named() {
        let table: [(&[u64], Option<&str>); 5] = [
            (&[0x1000, 200, 64], None),
            (&[0x1008, 200, 64], Some("not 16-byte aligned")),
            (&[0x1000, 0, 64], Some("0 rows")),
            (&[0x1000, 200, 60], Some("row stride of 120 bytes")),
            // -8 as an i32 slot: a negative stride.
            (
                &[0x1000, 200, u64::from((-8i32) as u32)],
                Some("row stride of -16 bytes"),
            ),
        ];
        for (slots, error) in table {
            match (planned().encode(slots), error) {
                (Ok(e), None) => {
                    assert_eq!(e.dims, [64, 200, 1]);
                    assert_eq!((e.row_stride, e.box_dims, e.swizzle), (128, [64, 128], 128));
                }
                (Err(got), Some(want)) => assert!(got.contains(want), "{got}"),
                (got, want) => panic!("{slots:?}: {got:?}, wanted {want:?}"),
            }
        }
    }

    #[test]
    fn wide_blocks_are_copied_by_128_byte_column_blocks() {
        let table = [
            (64, 64, 128),
            (256, 64, 128),
            (32, 32, 64),
            (16, 16, 32),
            (24, 24, 0),
        ];
        for (cols, box_cols, swizzle) in table {
            let m = PlannedMap { cols, ..planned() };
            let e = m.encode(&[0x1000, 200, 256]).unwrap();
            assert_eq!(
                (e.box_dims[0], e.swizzle),
                (box_cols, swizzle),
                "{cols} columns"
            );
        }
    }

    #[test]
    fn emulated_maps_read_back() {
        let e = planned().encode(&[0x1000, 200, 64]).unwrap();
        let (back, elem) = Encoding::from_emulated(&e.emulated()).unwrap();
        assert_eq!(elem, 2);
        assert_eq!(
            (back.address, back.dims, back.row_stride),
            (e.address, e.dims, e.row_stride)
        );
        assert_eq!((back.rank(), e.rank()), (2, 2));
        // A map whose base moves by batches: a third dim.
        let batched = PlannedMap {
            batch_stride: Some(HostExpr::Const(200 * 64)),
            ..planned()
        };
        let e = batched.encode(&[0x1000, 200, 64]).unwrap();
        let (back, _) = Encoding::from_emulated(&e.emulated()).unwrap();
        assert_eq!(
            (back.rank(), back.batch_stride, back.dims[2]),
            (3, 25600, 1 << 31)
        );
        assert_eq!((back.box_dims, back.swizzle), (e.box_dims, e.swizzle));
        assert!(Encoding::from_emulated(&[0; MAP_BYTES / 8]).is_none());
    }

    #[test]
    fn host_expressions_wrap_as_the_kernel_does() {
        let i32_max = HostExpr::Param(0, Some(DType::I32));
        let sum = HostExpr::Binary(
            BinOp::Add,
            DType::I32,
            Box::new(i32_max.clone()),
            Box::new(HostExpr::Const(1)),
        );
        assert_eq!(sum.eval(&[i32::MAX as u64]), Some(i32::MIN as i128));
        let moved = HostExpr::AddPtr(Box::new(HostExpr::Param(1, None)), Box::new(i32_max), 2);
        assert_eq!(moved.eval(&[3, 0x1000]), Some(0x1006));
        assert_eq!(HostExpr::Param(4, None).eval(&[0]), None);
    }
}
