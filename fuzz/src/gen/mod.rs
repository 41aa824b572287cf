//! The random program generator, in the spirit of Csmith and YARPGen: deterministic from
//! a seed, only verifier-clean kernels, and no undefined behaviour by construction.
//!
//! - Every access is in bounds or masked: input loads take offsets reduced into the
//!   buffer (`((x % len) + len) % len`) or masked by `0 <= x < len`; stores, loads of
//!   outputs and private atomics go through injective offsets inside the program's own
//!   region (`pid * REGION + a permutation of the lanes`), so programs never race. Each
//!   store of an output takes a window of the region no earlier one took (until it is
//!   full), so that a later store does not hide what it wrote from the comparison.
//! - Atomics on memory every program shares are integer and all of one kind, `add`, `max`
//!   or `min` (so their final value is order-independent: an add and a max of different
//!   programs do not commute), and their old values are never used.
//! - Loops run at most [`MAX_TRIPS`](crate::info::MAX_TRIPS) times.
//! - Some loads read lines a run-time stride apart, some of them of an input of their own
//!   through a scalar parameter ([`RowStride`]) that a view variant ([`crate::oob`]) of
//!   that input sets to its own rows' stride.
//! - Some loads (of lines a run-time stride apart, always where the lane offsets wrap)
//!   are also stored, cast to `i64` or `f64`, into observation buffers no other
//!   statement writes, so that what they read reaches the comparison.
//! - Values carry [`Info`]: approximate values (transcendental functions) flow only into
//!   ops that keep differences small, and float sums and dots only see small integers, so
//!   that the comparison can be exact everywhere else.

mod chunk_hints;
mod custom;
mod data;
mod deep_chains;

pub use custom::KERNEL_OPS;
pub use data::{buffer, element_bytes, float_value, int_value};

use crate::case::{Arg, Case, RowStride};
use crate::info::{self, exact_int_limit, Info, Memory, Tol, MAX_TRIPS};
use crate::Rng;
use std::collections::HashMap;
use tritium_dsl::ir::{
    AtomicOp, BinOp, Block, CacheHints, CacheModifier, CmpPred, Const, DType, Elem, Eviction,
    Function, HintKind, Inst, Loc, Op, Param, ReduceOp, ScanOp, Type, UnOp, Value,
};

/// Elements of each program's region of an output buffer: room for several tiles, each
/// store in a window of its own (see [`Gen::store_window`]).
pub const REGION: usize = 2048;

/// Elements of a tile, at most.
pub const MAX_TILE: usize = 512;

/// Elements of each program's region of an observation buffer (see [`Gen::observe`]):
/// programs observe more than they store (a region of [`REGION`] filled and began again in
/// some, so that later observations overwrote earlier ones).
pub const OBSERVE_REGION: usize = OBSERVE_REGIONS * REGION;
const OBSERVE_REGIONS: usize = 2;

/// Stores' windows start at multiples of this many elements, so that what a launch
/// promises or proves of a region's alignment holds in each of its windows.
const WINDOW_ALIGN: usize = 64;

/// Bytes of a wide `dot`'s `b` (in the accumulator's dtype): twice what the CPU packs in
/// panels from (`cpu::codegen::packing`).
pub const WIDE_B_BYTES: usize = 32 * 1024;

/// At most this many bytes of a wide `dot`'s `a`, so both fit CUDA's 48 KiB of static
/// shared memory.
/// A loop body's builder: from the generator, the counter and the carried values, the
/// values yielded.
type LoopBody<'a, G> = dyn FnMut(&mut G, Value, &[Value]) -> Vec<Value> + 'a;

const WIDE_A_BYTES: usize = 8 * 1024;

/// The pointer tile of [`Gen::strided_rows`]: `(x + rows) + cols`.
struct Strided {
    /// The buffer read instead of the input asked for (a walked copy of it), if any.
    ptr: Option<Value>,
    /// Offsets of each line's start, a run-time stride apart.
    rows: Value,
    /// Offsets of the lanes within a line.
    cols: Value,
    /// The mask when the tile may pass the input's end.
    mask: Option<Value>,
    /// Whether the lane offsets wrap inside a line (the line is no run).
    wrapped: bool,
}

/// A copy of an input read only in rows a scalar parameter apart ([`Gen::walked_rows`]).
struct Walked {
    /// The stride parameter, the copy and the longest row read.
    stride: RowStride,
    /// The input it copies (in `Gen::inputs`).
    input: usize,
    /// Its rows' stride (the parameter's value).
    cols: usize,
    /// The copy's and the stride parameter's values.
    ptr: Value,
    ld: Value,
}

/// The order in which `Gen::lane_offsets_ordered` lays a tile's lanes out.
#[derive(Clone, Copy)]
enum AxisOrder {
    /// The last axis varies fastest.
    RowMajor,
    /// The first axis varies fastest.
    ColumnMajor,
    /// Any order, sometimes reversed.
    Random,
}

/// The generated program's size and shape.
#[derive(Debug, Clone, Copy)]
pub struct GenConfig {
    /// Statements at the top level (nested regions take a share of it).
    pub statements: usize,
    /// Deepest nesting of regions.
    pub max_depth: usize,
}

impl Default for GenConfig {
    fn default() -> Self {
        GenConfig {
            statements: 14,
            max_depth: 3,
        }
    }
}

/// The program for `seed`.
pub fn generate(seed: u64, config: &GenConfig) -> Case {
    let mut g = Gen::new(seed, *config);
    g.program();
    g.finish()
}

/// What a requested value must satisfy.
#[derive(Debug, Clone, Copy)]
struct Need {
    /// Devices must agree bit for bit (else an approximate value is acceptable).
    exact: bool,
    /// Float elements must be integers of at most this magnitude.
    bound: Option<f64>,
}

impl Need {
    const EXACT: Need = Need {
        exact: true,
        bound: None,
    };
    const ANY: Need = Need {
        exact: false,
        bound: None,
    };

    fn accepts(&self, i: &Info) -> bool {
        let tol_ok = match i.tol {
            Tol::Exact => true,
            Tol::Ulps(_) => !self.exact,
            Tol::Unreliable => false,
        };
        let bound_ok = match (self.bound, i.int_bound) {
            (None, _) => true,
            (Some(want), Some(have)) => have <= want,
            (Some(_), None) => false,
        };
        tol_ok && bound_ok
    }
}

#[derive(Clone, Copy)]
struct Buffer {
    ptr: Value,
    dtype: DType,
    len: usize,
    /// Input elements' integer bound.
    bound: Option<f64>,
}

struct Gen {
    rng: Rng,
    /// Draws for hints only, so that adding them left every program's other ops as they were.
    hint_rng: Rng,
    /// Draws for rows walked with a stride parameter ([`Gen::walked_strided_rows`]) only,
    /// for the same reason.
    stride_rng: Rng,
    config: GenConfig,
    seed: u64,
    types: Vec<Type>,
    infos: Vec<Info>,
    /// Instructions of the regions being built, innermost last.
    scopes: Vec<Vec<Inst>>,
    /// Values visible in each open region, innermost last.
    visible: Vec<Vec<Value>>,
    params: Vec<Param>,
    args: Vec<Arg>,
    /// The parameter each pointer value derives from.
    roots: HashMap<Value, usize>,
    inputs: Vec<Buffer>,
    /// Outputs and private atomics: `(buffer, exact)`; loads read only exact ones.
    outputs: Vec<(Buffer, bool)>,
    /// The input of [`Gen::k_loop`], when the program has one.
    k_input: Option<usize>,
    /// The input of a `dot` at the edges of the matrices (see `edge_dot`), if any.
    edge_input: Option<usize>,
    /// Where `edge_input` is fp8, now and then an input of the other fp8: `b` of mixed
    /// `dot`s (E4M3 @ E5M2, one `wgmma` on Hopper).
    edge_partner: Option<usize>,
    /// Where [`Gen::observe`] stores loaded tiles: an `i64` and an `f64` output that no
    /// other statement writes, and how many elements of each program's region are used.
    observations: Vec<(Buffer, usize)>,
    atomics: Vec<Buffer>,
    shared: Option<Buffer>,
    /// The one op of every atomic on the shared buffer: adds and maxes of different
    /// programs do not commute with each other, each kind alone does.
    shared_op: AtomicOp,
    grid: [u64; 3],
    programs: usize,
    /// `pid * REGION` (i32).
    base: Option<Value>,
    /// `pid * OBSERVE_REGION` (i32).
    observe_base: Option<Value>,
    /// Per output (as `outputs`): where the next store's window starts in each program's
    /// region, and the windows stores took there, by their first element.
    windows: Vec<(usize, Vec<usize>)>,
    /// A scalar parameter in `0..=3` (i32), for loop bounds.
    n: Option<Value>,
    /// Inputs read only in rows a scalar parameter apart ([`Gen::walked_rows`]).
    walked: Vec<Walked>,
    dims: Vec<usize>,
    depth: usize,
    expr_depth: usize,
    line: u32,
}

/// The first element of a window of `numel` elements of a region of `region` taken from
/// `next` on (rounded up to a multiple of `align`), or from the region's start again when
/// it does not fit (a later store wins); `next` moves past it.
fn take_window(next: &mut usize, numel: usize, region: usize, align: usize) -> usize {
    let start = next.next_multiple_of(align);
    let start = if start + numel > region { 0 } else { start };
    *next = start + numel;
    start
}

/// Integer dtypes atomics support everywhere.
const ATOMIC_INTS: [DType; 4] = [DType::I32, DType::U32, DType::I64, DType::U64];

impl Gen {
    fn new(seed: u64, config: GenConfig) -> Gen {
        Gen {
            rng: Rng::new(seed),
            hint_rng: Rng::new(seed ^ 0x5eed_417e),
            stride_rng: Rng::new(seed ^ 0x0005_7a1d_e5ca_1a25),
            config,
            seed,
            types: Vec::new(),
            infos: Vec::new(),
            scopes: vec![Vec::new()],
            visible: vec![Vec::new()],
            params: Vec::new(),
            args: Vec::new(),
            roots: HashMap::new(),
            inputs: Vec::new(),
            outputs: Vec::new(),
            observations: Vec::new(),
            k_input: None,
            edge_input: None,
            edge_partner: None,
            atomics: Vec::new(),
            shared: None,
            shared_op: AtomicOp::Add,
            grid: [1, 1, 1],
            programs: 1,
            base: None,
            observe_base: None,
            windows: Vec::new(),
            n: None,
            walked: Vec::new(),
            dims: Vec::new(),
            depth: 0,
            expr_depth: 0,
            line: 0,
        }
    }

    // ---- building blocks -------------------------------------------------------------

    fn new_value(&mut self, t: Type, info: Info) -> Value {
        let v = Value(self.types.len() as u32);
        self.types.push(t);
        self.infos.push(info);
        v
    }

    fn ty(&self, v: Value) -> &Type {
        &self.types[v.index()]
    }

    fn info(&self, v: Value) -> Info {
        self.infos[v.index()]
    }

    fn loc(&mut self) -> Loc {
        self.line += 1;
        Loc {
            file: "fuzz.rs".into(),
            line: self.line,
            col: 1,
        }
    }

    fn memory_info(&self, ptr: Value) -> Info {
        match self.roots.get(&ptr).map(|p| &self.args[*p]) {
            Some(Arg::Buffer {
                memory: Memory::Input(b),
                ..
            }) => info::input_info(*b, self.ty(ptr)),
            Some(Arg::Buffer {
                memory: Memory::SharedAtomics,
                ..
            }) => Info::UNRELIABLE,
            _ => Info::EXACT,
        }
    }

    /// Appends a non-region op with results of `types`; returns the results.
    fn push(&mut self, op: Op, types: Vec<Type>) -> Vec<Value> {
        let results: Vec<Value> = types
            .into_iter()
            .map(|t| self.new_value(t, Info::EXACT))
            .collect();
        if let Some(r) = results.first() {
            let info = {
                let types = &self.types;
                let infos = &self.infos;
                info::transfer(
                    &op,
                    Some(*r),
                    &|v| &types[v.index()],
                    &|v| infos[v.index()],
                    &|p| self.memory_info(p),
                )
            };
            let info = info.unwrap_or(Info::EXACT);
            for r in &results {
                self.infos[r.index()] = info.fit(&self.types[r.index()]);
            }
        }
        if let Op::AddPtr(p, _) | Op::Splat(p) | Op::Broadcast(p) = &op {
            if let Some(root) = self.roots.get(p).copied() {
                self.roots.insert(results[0], root);
            }
        }
        let loc = self.loc();
        self.scopes.last_mut().expect("a scope").push(Inst {
            results: results.clone(),
            op,
            loc,
        });
        self.visible.last_mut().expect("a scope").extend(
            results
                .iter()
                .filter(|r| self.types[r.index()].dtype().is_some()),
        );
        results
    }

    fn push1(&mut self, op: Op, t: Type) -> Value {
        self.push(op, vec![t])[0]
    }

    fn tile(d: DType, shape: &[usize]) -> Type {
        Type::tile(Elem::Scalar(d), shape.to_vec())
    }

    fn constant(&mut self, d: DType, shape: &[usize], c: Const) -> Value {
        self.push1(Op::Const(c), Self::tile(d, shape))
    }

    fn int_const(&mut self, d: DType, shape: &[usize], v: i128) -> Value {
        let c = if d.is_float() {
            Const::Float(v as f64)
        } else {
            Const::Int(v)
        };
        self.constant(d, shape, c)
    }

    fn binary(&mut self, op: BinOp, a: Value, b: Value) -> Value {
        let t = self.ty(a).clone();
        self.push1(Op::Binary(op, a, b), t)
    }

    fn cast(&mut self, x: Value, d: DType) -> Value {
        let t = self.ty(x).with_elem(Elem::Scalar(d));
        if self.ty(x) == &t {
            return x;
        }
        self.push1(Op::Cast(x), t)
    }

    fn splat_to(&mut self, x: Value, shape: &[usize]) -> Value {
        if self.ty(x).shape == shape {
            return x;
        }
        let t = self.ty(x).with_shape(shape.to_vec());
        if self.ty(x).is_scalar() {
            self.push1(Op::Splat(x), t)
        } else {
            self.push1(Op::Broadcast(x), t)
        }
    }

    fn cmp(&mut self, p: CmpPred, a: Value, b: Value) -> Value {
        let t = self.ty(a).with_elem(Elem::Scalar(DType::Bool));
        self.push1(Op::Cmp(p, a, b), t)
    }

    // ---- shapes and dtypes -----------------------------------------------------------

    fn random_dtype(&mut self) -> DType {
        *self.rng.pick(&DType::ALL)
    }

    fn random_shape(&mut self, max_rank: usize) -> Vec<usize> {
        let rank = [0, 1, 1, 2, 2, 2, 3][self.rng.below(7)].min(max_rank);
        let mut s: Vec<usize> = (0..rank).map(|_| *self.rng.pick(&self.dims)).collect();
        while s.iter().product::<usize>() > MAX_TILE {
            s.pop();
        }
        s
    }

    // ---- values ----------------------------------------------------------------------

    /// A value of `d` with `shape` satisfying `need`: an existing one or a new expression.
    fn value(&mut self, d: DType, shape: &[usize], need: Need) -> Value {
        // Only floats have integer bounds.
        let need = Need {
            bound: need.bound.filter(|_| d.is_float()),
            ..need
        };
        let want = Self::tile(d, shape);
        let found: Vec<Value> = self
            .visible
            .iter()
            .flatten()
            .copied()
            .filter(|v| self.types[v.index()] == want && need.accepts(&self.infos[v.index()]))
            .collect();
        if !found.is_empty() && self.rng.chance(0.6) {
            return *self.rng.pick(&found);
        }
        self.expr_depth += 1;
        let v = self.fresh(d, shape, need);
        self.expr_depth -= 1;
        if d.is_int() && self.hint_rng.chance(0.03) {
            return self.hinted(v);
        }
        if d.is_bool() && self.hint_rng.chance(0.04) {
            return self.likely(v, need);
        }
        v
    }

    /// A bool tile of `v`'s type under a `likely` hint (no promise: the CPU versions the
    /// loops that read it, one copy taking its lanes as known). Either `v`, whose lanes
    /// are seldom all one value, or `x == x` (`x != x`) for a float tile `x`, whose lanes
    /// are all true (false) but where `x` is NaN, so that both copies run.
    fn likely(&mut self, v: Value, need: Need) -> Value {
        let value = self.hint_rng.chance(0.5);
        let t = self.ty(v).clone();
        let cond = if self.hint_rng.chance(0.5) {
            v
        } else {
            let x = self.value(DType::F32, &t.shape, need);
            let p = if value { CmpPred::Eq } else { CmpPred::Ne };
            self.cmp(p, x, x)
        };
        let values = vec![value as u32];
        self.push1(
            Op::Hint {
                x: cond,
                kind: HintKind::Likely,
                values,
            },
            t,
        )
    }

    /// `v` under a Triton hint that holds for any value (a value of 1: multiples of 1,
    /// runs of 1), so the promise is true and only the lowering of the op is exercised.
    fn hinted(&mut self, v: Value) -> Value {
        let promises = [
            HintKind::MultipleOf,
            HintKind::MaxContiguous,
            HintKind::MaxConstancy,
        ];
        let kind = *self.rng.pick(&promises);
        let t = self.ty(v).clone();
        let values = vec![
            1;
            if self.rng.chance(0.5) {
                1
            } else {
                t.rank().max(1)
            }
        ];
        self.push1(Op::Hint { x: v, kind, values }, t)
    }

    fn fresh(&mut self, d: DType, shape: &[usize], need: Need) -> Value {
        if self.expr_depth > 4 {
            return self.leaf(d, shape, need);
        }
        let v = match self.rng.weighted(&[3, 2, 2, 3, 3, 10, 2, 2, 3, 2, 1]) {
            0 => self.leaf(d, shape, need),
            1 if !shape.is_empty() => {
                let s = self.value(d, &[], need);
                self.splat_to(s, shape)
            }
            2 if !shape.is_empty() => self.broadcast_from_smaller(d, shape, need),
            3 => self.cast_into(d, shape, need),
            4 => self.load_input(d, shape, need),
            5 => self.elementwise(d, shape, need),
            6 => self.reduce_into(d, shape, need),
            7 => self.dot_into(d, shape, need),
            8 => self.reshaped(d, shape, need),
            9 => match self.custom_into(d, shape, need) {
                Some(v) => v,
                None => self.elementwise(d, shape, need),
            },
            10 if !shape.is_empty() && !d.is_bool() => self.scan_into(d, shape, need),
            _ => self.leaf(d, shape, need),
        };
        if need.accepts(&self.info(v)) {
            v
        } else {
            self.fix(v, need)
        }
    }

    /// Makes `v` satisfy `need`: integer-valued and bounded by quantizing and clamping.
    fn fix(&mut self, v: Value, need: Need) -> Value {
        let d = self.ty(v).dtype().expect("a number");
        let shape = self.ty(v).shape.clone();
        if !self.info(v).is_exact() && need.exact || self.info(v).tol == Tol::Unreliable {
            return self.leaf(d, &shape, need);
        }
        let Some(b) = need.bound else {
            return v;
        };
        let mut x = v;
        if self.info(x).int_bound.is_none() {
            // Saturating casts: NaN becomes 0, everything else an integer in -128..=127.
            let q = self.cast(x, DType::I8);
            x = self.push1(Op::Cast(q), Self::tile(d, &shape));
        }
        if self.info(x).int_bound.is_some_and(|have| have > b) {
            let b = b.floor() as i128;
            let hi = self.int_const(d, &shape, b);
            let lo = self.int_const(d, &shape, -b);
            x = self.binary(BinOp::Min, x, hi);
            x = self.binary(BinOp::Max, x, lo);
        }
        if need.accepts(&self.info(x)) {
            x
        } else {
            self.leaf(d, &shape, need)
        }
    }

    /// A constant, a program id or a scalar parameter.
    fn leaf(&mut self, d: DType, shape: &[usize], need: Need) -> Value {
        if shape.is_empty() && d == DType::I32 && self.rng.chance(0.3) {
            let axis = self.rng.below(3) as u32;
            let op = if self.rng.chance(0.7) {
                Op::ProgramId(axis)
            } else {
                Op::NumPrograms(axis)
            };
            return self.push1(op, Type::scalar(DType::I32));
        }
        if shape.len() == 1 && d == DType::I32 && self.rng.chance(0.3) {
            let start = self.rng.range(-4, 4);
            return self.push1(
                Op::Arange {
                    start,
                    end: start + shape[0] as i64,
                },
                Self::tile(d, shape),
            );
        }
        let c = match need.bound {
            Some(b) if d.is_float() => {
                // Integers the dtype holds exactly (fp8e5 only up to 8, fp8e4b15 up to 1).
                let b = b.min(16.0).min(exact_int_limit(d)) as i64;
                Const::Float(self.rng.range(-b, b) as f64)
            }
            _ => data::constant(d, &mut self.rng),
        };
        self.constant(d, shape, c)
    }

    /// A permutation of dims, a gather, a flip, a reshape or an expand_dims of a value of
    /// another shape.
    fn reshaped(&mut self, d: DType, shape: &[usize], need: Need) -> Value {
        let t = Self::tile(d, shape);
        let op = match self.rng.below(5) {
            4 if !shape.is_empty() => {
                // A gather along `axis` from a source of another length there; the index
                // is mostly in range, some lanes out (they read 0).
                let axis = self.rng.below(shape.len());
                let mut from = shape.to_vec();
                from[axis] = 1 + self.rng.below(8);
                let src = self.value(d, &from, need);
                let index = self.index_tile(shape, from[axis]);
                Op::Gather {
                    src,
                    index,
                    axis: axis as u32,
                }
            }
            0 if shape.len() >= 2 => {
                let mut dims: Vec<u32> = (0..shape.len() as u32).collect();
                for i in (1..dims.len()).rev() {
                    dims.swap(i, self.rng.below(i + 1));
                }
                // Input dim `dims[i]` has the result's size `shape[i]`.
                let mut from = vec![0; shape.len()];
                for (i, &d) in dims.iter().enumerate() {
                    from[d as usize] = shape[i];
                }
                let x = self.value(d, &from, need);
                Op::Permute { x, dims }
            }
            3 if !shape.is_empty() => {
                let axis = self.rng.below(shape.len()) as u32;
                let x = self.value(d, shape, need);
                Op::Flip { x, axis }
            }
            1 if shape.contains(&1) => {
                let axis = shape.iter().position(|s| *s == 1).expect("a 1");
                let mut s = shape.to_vec();
                s.remove(axis);
                let x = self.value(d, &s, need);
                Op::ExpandDims {
                    x,
                    axis: axis as u32,
                }
            }
            _ => {
                let numel: usize = shape.iter().product();
                let mut s = self.random_shape(3);
                if s.iter().product::<usize>() != numel {
                    s = vec![numel];
                }
                let x = self.value(d, &s, need);
                Op::Reshape(x)
            }
        };
        self.push1(op, t)
    }

    fn broadcast_from_smaller(&mut self, d: DType, shape: &[usize], need: Need) -> Value {
        let mut small: Vec<usize> = shape
            .iter()
            .map(|s| if self.rng.chance(0.5) { 1 } else { *s })
            .collect();
        if self.rng.chance(0.3) {
            let drop = self.rng.below(small.len() + 1);
            small.drain(..drop);
        }
        let x = self.value(d, &small, need);
        self.splat_to(x, shape)
    }

    fn cast_into(&mut self, d: DType, shape: &[usize], need: Need) -> Value {
        // A bitcast: any bits make a float, so not where small integers are needed.
        let same_width: Vec<DType> = DType::ALL
            .iter()
            .copied()
            .filter(|f| !f.is_bool() && *f != d && f.bits() == d.bits())
            .collect();
        let small_floats = d.is_float() && need.bound.is_some();
        let bitcast_ok = !d.is_bool() && !same_width.is_empty() && !small_floats;
        if bitcast_ok && self.rng.chance(0.3) {
            let from = *self.rng.pick(&same_width);
            // Floats whose bits must be exact hold small integers (no NaN payloads).
            let need_from = Need {
                exact: true,
                bound: from.is_float().then_some(1000.0),
            };
            let x = self.value(from, shape, need_from);
            let t = Self::tile(d, shape);
            return self.push1(Op::Bitcast(x), t);
        }
        let from = self.random_dtype();
        let need_from = match need.bound {
            Some(b) if d.is_float() && from.is_float() => Need {
                exact: need.exact,
                bound: Some(b),
            },
            _ => Need {
                exact: !(d.is_float() && from.is_float()) || need.exact,
                bound: None,
            },
        };
        let x = self.value(from, shape, need_from);
        self.cast(x, d)
    }

    /// Some of the time for a tile of 2 or more axes, lines that are runs a run-time stride
    /// apart, added in two steps as `(x + r·ld) + j` (tutorial 03's `b_ptrs`): the row
    /// offsets `r·ld` (`ld` = the line length times 1 or 2, with the program id) and the
    /// lane offsets `j` along the last axis, with a mask when the tile may pass `len`.
    /// The CPU reads each line as a run of its first lane behind a check of `j` alone.
    /// Now and then the lines are those of a copy of the input and `ld` a scalar parameter
    /// (the line's length: see [`Gen::walked_strided_rows`]).
    fn strided_rows(&mut self, shape: &[usize], input: usize) -> Option<Strided> {
        let len = self.inputs[input].len;
        let (&cols, lead) = shape.split_last()?;
        if lead.is_empty() || cols < 2 || !self.rng.chance(0.2) {
            return None;
        }
        let numel: usize = shape.iter().product();
        let mut line_shape = shape.to_vec();
        *line_shape.last_mut().expect("2 or more axes") = 1;
        let line = self.lane_offsets_ordered(&line_shape, AxisOrder::RowMajor);
        let line = self.splat_to(line, shape);
        let mut lane_shape = vec![1; shape.len()];
        lane_shape[shape.len() - 1] = cols;
        let j = self.lane_offsets_ordered(&lane_shape, AxisOrder::RowMajor);
        let j = self.splat_to(j, shape);
        // Sometimes the lane offsets wrap inside the line: `128 + i8(j + c)` with `j + c`
        // crossing 127, widened while laid out as a column and transposed into the line (a
        // widened tile equal along its own last axis that varies along the pointer tile's).
        // The line is then no run, and the CPU must notice. Its 256 elements take a whole
        // input: the lines are `pid % 1 = 0` apart.
        // Only tiles `observe` can store (a wide `dot` operand cannot be).
        let wrapped = len >= 256 && numel <= REGION && self.rng.chance(0.5);
        if !wrapped && self.stride_rng.chance(0.5) {
            return Some(self.walked_strided_rows(shape, input, line, j));
        }
        let pid = self.push1(Op::ProgramId(0), Type::scalar(DType::I32));
        let ld = if wrapped {
            let one = self.int_const(DType::I32, &[], 1);
            self.binary(BinOp::Rem, pid, one)
        } else {
            let two = self.int_const(DType::I32, &[], 2);
            let one = self.int_const(DType::I32, &[], 1);
            let ld = self.binary(BinOp::Rem, pid, two);
            let ld = self.binary(BinOp::Add, ld, one);
            let c = self.int_const(DType::I32, &[], cols as i128);
            self.binary(BinOp::Mul, ld, c)
        };
        let ld = self.splat_to(ld, shape);
        let rows = self.binary(BinOp::Mul, line, ld);
        if wrapped {
            let j = self.wrapped_lane_offsets(shape, cols);
            let at = self.int_const(DType::I64, shape, 128);
            return Some(Strided {
                ptr: None,
                rows,
                cols: self.binary(BinOp::Add, j, at),
                mask: None,
                wrapped: true,
            });
        }
        // Lines up to twice the tile's span apart: in bounds without a mask when that fits.
        let (rows, mask) = if 2 * numel <= len {
            let at = self.rng.below(len - 2 * numel + 1);
            let at = self.int_const(DType::I32, shape, at as i128);
            (self.binary(BinOp::Add, rows, at), None)
        } else {
            let whole = self.binary(BinOp::Add, rows, j);
            let lenv = self.int_const(DType::I32, shape, len as i128);
            (rows, Some(self.cmp(CmpPred::Lt, whole, lenv)))
        };
        Some(Strided {
            ptr: None,
            rows,
            cols: j,
            mask,
            wrapped: false,
        })
    }

    /// [`Gen::strided_rows`] of a copy of input `input` ([`Gen::walked_rows`]), `line`
    /// and `j` its line and lane indices: `(r + a)·ld + j` from a whole line `a` on where
    /// the tile fits (the same draw as `strided_rows`' start), else `r·ld + j` under a box
    /// mask, as kernels take a tile's tail, lines below those the input holds and lanes
    /// below a drawn row length.
    fn walked_strided_rows(
        &mut self,
        shape: &[usize],
        input: usize,
        line: Value,
        j: Value,
    ) -> Strided {
        let len = self.inputs[input].len;
        let numel: usize = shape.iter().product();
        let cols = shape[shape.len() - 1];
        let (lines, mask, row) = if 2 * numel <= len {
            let at = self.rng.below(len - 2 * numel + 1);
            let a = self.int_const(DType::I32, shape, (at / cols) as i128);
            (self.binary(BinOp::Add, line, a), None, cols)
        } else {
            let rows = self.int_const(DType::I32, shape, (len / cols) as i128);
            let row = 1 + self.stride_rng.below(cols);
            let row_end = self.int_const(DType::I32, shape, row as i128);
            let in_rows = self.cmp(CmpPred::Lt, line, rows);
            let in_row = self.cmp(CmpPred::Lt, j, row_end);
            (line, Some(self.binary(BinOp::And, in_rows, in_row)), row)
        };
        let (ptr, ld) = self.walked_rows(input, cols, row);
        let ld = self.splat_to(ld, shape);
        Strided {
            ptr: Some(ptr),
            rows: self.binary(BinOp::Mul, lines, ld),
            cols: j,
            mask,
            wrapped: false,
        }
    }

    /// A copy of input `input` (its dtype, length and bound, other elements) that only
    /// loads of rows `cols` elements apart read, the first `row` of each, and the scalar
    /// parameter (i32) that is their stride: `cols` here, a view's row stride in view
    /// variants of the copy ([`RowStride`]), whose rows then hold every access to it. One
    /// per input and stride, its rows as long as the longest read; neither among the inputs
    /// and values statements draw from.
    fn walked_rows(&mut self, input: usize, cols: usize, row: usize) -> (Value, Value) {
        let known = (self.walked.iter_mut()).find(|w| w.input == input && w.cols == cols);
        if let Some(w) = known {
            w.stride.row = w.stride.row.max(row);
            return (w.ptr, w.ld);
        }
        let Buffer {
            dtype, len, bound, ..
        } = self.inputs[input];
        let bytes = data::buffer(dtype, len, bound, &mut self.stride_rng);
        let memory = Memory::Input(bound);
        let ptr = self.param(Type::ptr(dtype), Arg::Buffer { memory, bytes });
        let ld = self.param(Type::scalar(DType::I32), Arg::Scalar(cols as u64));
        self.visible[0].retain(|x| *x != ld);
        let stride = RowStride {
            param: self.params.len() - 1,
            buffer: self.params.len() - 2,
            row,
        };
        self.walked.push(Walked {
            stride,
            input,
            cols,
            ptr,
            ld,
        });
        (ptr, ld)
    }

    /// `i8(j + c)` for the lane index `j` along the last axis of `shape` (`cols` lanes),
    /// `c` such that some lanes pass 127 and wrap to -128 or below, widened to i64 as a
    /// `[cols, 1]` column and transposed into a line: offsets in `-128..128`.
    fn wrapped_lane_offsets(&mut self, shape: &[usize], cols: usize) -> Value {
        let j = self.push1(
            Op::Arange {
                start: 0,
                end: cols as i64,
            },
            Self::tile(DType::I32, &[cols]),
        );
        let c = 128 - 1 - self.rng.below(cols - 1) as i128;
        let c = self.int_const(DType::I32, &[cols], c);
        let j = self.binary(BinOp::Add, j, c);
        let j = self.cast(j, DType::I8);
        let column = self.push1(
            Op::ExpandDims { x: j, axis: 1 },
            Self::tile(DType::I8, &[cols, 1]),
        );
        let column = self.cast(column, DType::I64);
        let mut line = self.push1(
            Op::Permute {
                x: column,
                dims: vec![1, 0],
            },
            Self::tile(DType::I64, &[1, cols]),
        );
        let mut placed = vec![1, cols];
        while placed.len() < shape.len() {
            placed.insert(0, 1);
            line = self.push1(
                Op::ExpandDims { x: line, axis: 0 },
                Self::tile(DType::I64, &placed),
            );
        }
        self.splat_to(line, shape)
    }

    /// `dot(a, b, acc)` of an `mm × k` tile of `from` and a `k × nn` tile of `b_from` (the
    /// same dtype, or two fp8s) loaded under box masks
    /// (`box_load`) whose K bounds mostly agree and are now and then empty (the whole K
    /// loop skipped), with `acc` of `d` (`needs`: the operands' and `acc`'s) often -0: the
    /// CPU copies the boxes' rows and runs only the K steps where either operand is not
    /// the masked-off +0, and the steps it skips turn -0 into +0.
    fn box_dot(
        &mut self,
        [from, b_from]: [DType; 2],
        d: DType,
        [mm, k, nn]: [usize; 3],
        (in_need, acc_need): (Need, Need),
    ) -> Value {
        let kk = match self.rng.chance(0.3) {
            true => 0,
            false => self.box_bound(k),
        };
        let kb = match self.rng.chance(0.7) {
            true => kk,
            false => self.box_bound(k),
        };
        let rows = self.box_bound(mm);
        let cols = self.box_bound(nn);
        let a = self.box_load(from, &[mm, k], in_need, [rows, kk]);
        let b = self.box_load(b_from, &[k, nn], in_need, [kb, cols]);
        let acc = match d.is_float() && self.rng.chance(0.5) {
            true => self.constant(d, &[mm, nn], Const::Float(-0.0)),
            false => self.value(d, &[mm, nn], acc_need),
        };
        self.push1(Op::Dot { a, b, acc }, Self::tile(d, &[mm, nn]))
    }

    /// A bound of a box along an axis of `len` lanes: mostly partial and not empty (edge
    /// blocks), else anything in `0..=len`.
    fn box_bound(&mut self, len: usize) -> usize {
        match len > 1 && self.rng.chance(0.7) {
            true => self.rng.range(1, len as i64 - 1) as usize,
            false => self.rng.range(0, len as i64) as usize,
        }
    }

    /// A load of a `rows × cols` matrix from an input, lines `cols` apart, under a box
    /// mask `(i[:, None] < r) & (j[None, :] < c)` (tutorial 03's edge tiles; `[r, c]` is
    /// `bounds`, narrowed to what the input holds) with `other` often +0. Sometimes the
    /// mask's row index is `i + e1 + e2` with extreme constants that cancel modulo 2^32:
    /// the same box, which the CPU must not take as one from the exact sum.
    fn box_load(&mut self, d: DType, shape: &[usize], need: Need, bounds: [usize; 2]) -> Value {
        let Some(input) = self.random_input(d, need) else {
            return self.elementwise(d, shape, need);
        };
        let (ptr, len) = (self.inputs[input].ptr, self.inputs[input].len);
        let [rows, cols] = shape[..] else {
            unreachable!("a matrix")
        };
        let c = bounds[1].min(len);
        let r = match c {
            0 => bounds[0],
            _ => bounds[0].min((len - c) / cols + 1),
        };
        // The last lane in the box is `(r - 1)·cols + c - 1` past the start.
        let span = if r == 0 || c == 0 {
            0
        } else {
            (r - 1) * cols + c
        };
        let mut at = self.rng.below(len - span + 1);
        // Now and then a 16-bit matrix promised 16-byte aligned (the executor's buffers
        // are) whose lines start at multiples of 8 elements: CUDA's copy of a tensor-core
        // operand then needs no run-time test where the box's columns end at a multiple
        // of 8 too (`axis_info`).
        let mut base = ptr;
        if d.size_bytes() == 2 && self.rng.chance(0.3) {
            let hint = Op::Hint {
                x: ptr,
                kind: HintKind::MultipleOf,
                values: vec![16],
            };
            base = self.push1(hint, self.ty(ptr).clone());
            if self.rng.chance(0.7) {
                at -= at % 8;
            }
        }
        let i = self.lane_offsets_ordered(&[rows, 1], AxisOrder::RowMajor);
        let mut i_mask = i;
        if self.rng.chance(0.2) {
            let (e1, e2) = *self
                .rng
                .pick(&[(i32::MIN, i32::MIN), (i32::MAX, -i32::MAX)]);
            for e in [e1, e2] {
                let e = self.int_const(DType::I32, &[rows, 1], e as i128);
                i_mask = self.binary(BinOp::Add, i_mask, e);
            }
        }
        let j = self.lane_offsets_ordered(&[1, cols], AxisOrder::RowMajor);
        let ld = self.int_const(DType::I32, &[rows, 1], cols as i128);
        let line = self.binary(BinOp::Mul, i, ld);
        let start = self.int_const(DType::I32, &[rows, 1], at as i128);
        let line = self.binary(BinOp::Add, line, start);
        let line = self.splat_to(line, shape);
        let lanes = self.splat_to(j, shape);
        let off = self.binary(BinOp::Add, line, lanes);
        let ptrs = self.pointers(base, off);
        let rb = self.int_const(DType::I32, &[], r as i128);
        let rb = self.splat_to(rb, &[rows, 1]);
        let in_rows = self.cmp(CmpPred::Lt, i_mask, rb);
        let cb = self.int_const(DType::I32, &[], c as i128);
        let cb = self.splat_to(cb, &[1, cols]);
        let in_cols = self.cmp(CmpPred::Lt, j, cb);
        let in_rows = self.splat_to(in_rows, shape);
        let in_cols = self.splat_to(in_cols, shape);
        let mask = self.binary(BinOp::And, in_rows, in_cols);
        let other = match self.rng.weighted(&[4, 4, 2]) {
            0 => None,
            1 => Some(self.int_const(d, shape, 0)),
            _ => Some(self.value(d, shape, need)),
        };
        let hints = self.cache_hints(true);
        self.push1(
            Op::Load {
                ptr: ptrs,
                mask: Some(mask),
                other,
                hints,
            },
            Self::tile(d, shape),
        )
    }

    /// Offsets into `0..len` of `shape` (i32), with a mask when some lanes are off.
    /// `run`: always one contiguous run of lanes (else sometimes).
    fn input_offsets(&mut self, shape: &[usize], len: usize, run: bool) -> (Value, Option<Value>) {
        let lenv = self.int_const(DType::I32, shape, len as i128);
        match if run { 3 } else { self.rng.below(4) } {
            3 => {
                // One contiguous run (a Simd call reads it in place when every lane is in),
                // row-major or, for a 2-D tile, column-major (a `dot` packs such an operand
                // by transposed blocks), at a constant start or one that moves with the
                // program.
                let numel: usize = shape.iter().product();
                let order = match shape.len() == 2 && self.rng.chance(0.4) {
                    true => AxisOrder::ColumnMajor,
                    false => AxisOrder::RowMajor,
                };
                let run = self.lane_offsets_ordered(shape, order);
                let fixed = numel <= len && self.rng.chance(0.5);
                let start = if fixed {
                    let at = self.rng.below(len - numel + 1);
                    self.int_const(DType::I32, &[], at as i128)
                } else {
                    let pid = self.push1(Op::ProgramId(0), Type::scalar(DType::I32));
                    let k = self.rng.below(9) as i128;
                    let k = self.int_const(DType::I32, &[], k);
                    let moved = self.binary(BinOp::Mul, pid, k);
                    let wrap = self.int_const(DType::I32, &[], len as i128 + 1);
                    self.binary(BinOp::Rem, moved, wrap)
                };
                let start = self.splat_to(start, shape);
                let mut x = self.binary(BinOp::Add, run, start);
                if !fixed && self.rng.chance(0.15) {
                    // Two extreme addends that cancel modulo 2^32: the same lanes, reached
                    // by wrapping (the CPU's prefix split must not trust their exact sum).
                    let (e1, e2) = *self
                        .rng
                        .pick(&[(i32::MIN, i32::MIN), (i32::MAX, -i32::MAX)]);
                    for e in [e1, e2] {
                        let e = self.int_const(DType::I32, shape, e as i128);
                        x = self.binary(BinOp::Add, x, e);
                    }
                }
                let mask = (!fixed).then(|| self.cmp(CmpPred::Lt, x, lenv));
                (x, mask)
            }
            0 => {
                let (own, _) = self.own_offsets(shape, 0);
                (self.binary(BinOp::Rem, own, lenv), None)
            }
            1 => {
                let x = self.value(DType::I32, shape, Need::EXACT);
                let r = self.binary(BinOp::Rem, x, lenv);
                let r = self.binary(BinOp::Add, r, lenv);
                (self.binary(BinOp::Rem, r, lenv), None)
            }
            _ => {
                let x = self.value(DType::I32, shape, Need::EXACT);
                let zero = self.int_const(DType::I32, shape, 0);
                let ge = self.cmp(CmpPred::Ge, x, zero);
                let lt = self.cmp(CmpPred::Lt, x, lenv);
                let mut m = self.binary(BinOp::And, ge, lt);
                if self.rng.chance(0.3) {
                    let extra = self.value(DType::Bool, shape, Need::EXACT);
                    m = self.binary(BinOp::And, m, extra);
                }
                (x, Some(m))
            }
        }
    }

    fn pointers(&mut self, ptr: Value, offsets: Value) -> Value {
        let shape = self.ty(offsets).shape.clone();
        let p = self.splat_to(ptr, &shape);
        let t = self.ty(p).clone();
        if self.rng.chance(0.08) {
            return self.pointers_through_addresses(ptr, p, offsets);
        }
        self.push1(Op::AddPtr(p, offsets), t)
    }

    /// The same pointers as `addptr(p, offsets)`, computed on addresses:
    /// `inttoptr(ptrtoint(p) + offsets × size)` (grouped GEMM's pointer tables read
    /// addresses as integers). The addresses themselves never reach an output.
    fn pointers_through_addresses(&mut self, root: Value, p: Value, offsets: Value) -> Value {
        let t = self.ty(p).clone();
        let shape = t.shape.clone();
        let size = t.elem.pointee().expect("a pointer").size_bytes();
        let address = if self.rng.chance(0.5) {
            DType::I64
        } else {
            DType::U64
        };
        let base = self.push1(Op::PtrToInt(p), Self::tile(address, &shape));
        let o = self.cast(offsets, address);
        let size = self.int_const(address, &shape, size as i128);
        let bytes = self.binary(BinOp::Mul, o, size);
        let sum = self.binary(BinOp::Add, base, bytes);
        let q = self.push1(Op::IntToPtr(sum), t);
        for v in [base, o, size, bytes, sum] {
            self.visible
                .last_mut()
                .expect("a scope")
                .retain(|x| *x != v);
        }
        if let Some(r) = self.roots.get(&root).copied() {
            self.roots.insert(q, r);
        }
        q
    }

    fn load_input(&mut self, d: DType, shape: &[usize], need: Need) -> Value {
        self.load_input_from(d, shape, need, false)
    }

    /// [`load_input`](Self::load_input); `run`: of one contiguous run of lanes.
    fn load_input_from(&mut self, d: DType, shape: &[usize], need: Need, run: bool) -> Value {
        let Some(i) = self.random_input(d, need) else {
            return self.elementwise(d, shape, need);
        };
        let (ptr, len) = (self.inputs[i].ptr, self.inputs[i].len);
        let strided = if run {
            None
        } else {
            self.strided_rows(shape, i)
        };
        let (ptrs, mask, observed) = match strided {
            Some(Strided {
                ptr: walked,
                rows,
                cols,
                mask,
                wrapped,
            }) => {
                let p = self.pointers(walked.unwrap_or(ptr), rows);
                let t = self.ty(p).clone();
                let observed = wrapped || self.rng.chance(0.5);
                (self.push1(Op::AddPtr(p, cols), t), mask, observed)
            }
            None => {
                let (off, mask) = self.input_offsets(shape, len, run);
                (self.pointers(ptr, off), mask, false)
            }
        };
        let other = match mask {
            Some(_) if self.rng.chance(0.6) => Some(self.value(d, shape, need)),
            _ => None,
        };
        let hints = self.cache_hints(true);
        let loaded = self.push1(
            Op::Load {
                ptr: ptrs,
                mask,
                other,
                hints,
            },
            Self::tile(d, shape),
        );
        if observed {
            self.observe(loaded);
        }
        loaded
    }

    /// Stores the loaded tile `v` where the comparison sees it and no other statement
    /// overwrites it: the next elements of the program's region of an observation
    /// buffer, as `i64` (integers, bools) or `f64` (floats), both exact casts. A random
    /// program rarely routes a given load to an output that keeps it, and a load whose
    /// addresses only one code path gets wrong (a line taken as a run where its offsets
    /// wrap) went unnoticed. (A `device_print` would not do: printed lanes are read one
    /// by one, not by the paths a store takes.)
    fn observe(&mut self, v: Value) {
        let t = self.ty(v).clone();
        let k = usize::from(t.dtype().is_some_and(|d| d.is_float()));
        let numel: usize = t.shape.iter().product();
        if numel > OBSERVE_REGION {
            return;
        }
        let (buffer, next) = &mut self.observations[k];
        let buffer = *buffer;
        let used = take_window(next, numel, OBSERVE_REGION, 1);
        let value = self.cast(v, buffer.dtype);
        let off = self.lane_offsets_ordered(&t.shape, AxisOrder::RowMajor);
        let base = self.observe_base.expect("set up first");
        let at = self.int_const(DType::I32, &[], used as i128);
        let at = self.binary(BinOp::Add, base, at);
        let at = self.splat_to(at, &t.shape);
        let off = self.binary(BinOp::Add, off, at);
        let ptrs = self.pointers(buffer.ptr, off);
        let store = Op::Store {
            ptr: ptrs,
            value,
            mask: None,
            hints: CacheHints::default(),
        };
        self.push(store, vec![]);
    }

    /// The inputs of dtype `d` whose values satisfy `need`.
    fn inputs_for(&self, d: DType, need: Need) -> Vec<usize> {
        (0..self.inputs.len())
            .filter(|i| {
                let b = &self.inputs[*i];
                b.dtype == d
                    && need.accepts(&Info {
                        int_bound: b.bound,
                        ..Info::EXACT
                    })
            })
            .collect()
    }

    /// One of the inputs of `d` that meet `need`, at random; `None` when there is none.
    fn random_input(&mut self, d: DType, need: Need) -> Option<usize> {
        let ok = self.inputs_for(d, need);
        (!ok.is_empty()).then(|| *self.rng.pick(&ok))
    }

    /// True when [`load_input_from`](Self::load_input_from) would load (not compute).
    fn has_input(&self, d: DType, need: Need) -> bool {
        !self.inputs_for(d, need).is_empty()
    }

    /// Random cache hints, mostly none: they change no result, so every device must agree
    /// with the interpreter whatever the hints.
    fn cache_hints(&mut self, load: bool) -> CacheHints {
        if !self.rng.chance(0.15) {
            return CacheHints::default();
        }
        let modifiers: &[CacheModifier] = if load {
            &CacheModifier::LOAD
        } else {
            &CacheModifier::STORE
        };
        let modifier = match self.rng.chance(0.6) {
            true => *self.rng.pick(modifiers),
            false => CacheModifier::Default,
        };
        let eviction = *self
            .rng
            .pick(&[Eviction::Normal, Eviction::First, Eviction::Last]);
        CacheHints {
            modifier,
            eviction,
            volatile: load && self.rng.chance(0.3),
        }
    }

    /// Distinct offsets into the window of this program's region that starts at element
    /// `window`, one per lane of `shape` (i32), and the window's first offset (`base +
    /// window`, a scalar).
    fn own_offsets(&mut self, shape: &[usize], window: usize) -> (Value, Value) {
        self.own_offsets_ordered(shape, AxisOrder::Random, window)
    }

    /// [`own_offsets`](Self::own_offsets) with the axes in `order`.
    fn own_offsets_ordered(
        &mut self,
        shape: &[usize],
        order: AxisOrder,
        window: usize,
    ) -> (Value, Value) {
        let base = self.base.expect("set up first");
        let origin = match window {
            0 => base,
            w => {
                let w = self.int_const(DType::I32, &[], w as i128);
                self.binary(BinOp::Add, base, w)
            }
        };
        let off = self.lane_offsets_ordered(shape, order);
        let b = self.splat_to(origin, shape);
        (self.binary(BinOp::Add, off, b), origin)
    }

    /// The first element of a window of `numel` elements in each program's region of
    /// output `k` for a store: right after the previous store's there (from the region's
    /// start again when it is full). A region held one tile before, so that every store
    /// began at its start and a later store to the same output overwrote the earlier ones'
    /// lanes: in 160 programs, 61% of the stores that ran left no trace in what the
    /// comparison sees (`reach::store_reach`).
    fn store_window(&mut self, k: usize, numel: usize) -> usize {
        if self.windows.len() <= k {
            self.windows.resize(k + 1, (0, Vec::new()));
        }
        let (next, taken) = &mut self.windows[k];
        let start = take_window(next, numel, REGION, WINDOW_ALIGN);
        taken.push(start);
        start
    }

    /// A window of output `k` for a load: mostly one a store took (so that it reads what
    /// the store wrote, through whatever each device keeps of it), else the region's
    /// start.
    fn read_window(&mut self, k: usize, numel: usize) -> usize {
        let fits: Vec<usize> = self
            .windows
            .get(k)
            .map_or(&[][..], |(_, taken)| taken)
            .iter()
            .copied()
            .filter(|w| w + numel <= REGION)
            .collect();
        match !fits.is_empty() && self.rng.chance(0.8) {
            true => *self.rng.pick(&fits),
            false => 0,
        }
    }

    /// A permutation of `0..numel` laid out over `shape` (i32).
    fn lane_offsets(&mut self, shape: &[usize]) -> Value {
        self.lane_offsets_ordered(shape, AxisOrder::Random)
    }

    /// [`lane_offsets`](Self::lane_offsets) with the axes in `order`.
    fn lane_offsets_ordered(&mut self, shape: &[usize], order: AxisOrder) -> Value {
        let numel: usize = shape.iter().product();
        let mut off = self.int_const(DType::I32, shape, 0);
        // Any order of the axes gives each lane a distinct position (the last axis first:
        // row-major).
        let mut axes: Vec<usize> = (0..shape.len()).rev().collect();
        match order {
            AxisOrder::RowMajor => {}
            AxisOrder::ColumnMajor => axes.reverse(),
            AxisOrder::Random => {
                for i in (1..axes.len()).rev() {
                    axes.swap(i, self.rng.below(i + 1));
                }
            }
        }
        let row_major = !matches!(order, AxisOrder::Random);
        let mut stride = 1usize;
        for &k in &axes {
            if shape[k] == 1 {
                continue;
            }
            let r = self.push1(
                Op::Arange {
                    start: 0,
                    end: shape[k] as i64,
                },
                Self::tile(DType::I32, &[shape[k]]),
            );
            // [shape[k]] → 1 everywhere but axis k: by expand_dims or by reshape.
            let mut placed: Vec<usize> = shape.iter().map(|_| 1).collect();
            placed[k] = shape[k];
            let e = if self.rng.chance(0.5) {
                self.push1(Op::Reshape(r), Self::tile(DType::I32, &placed))
            } else {
                let mut e = r;
                let mut s1 = vec![shape[k]];
                for _ in 0..k {
                    s1.insert(0, 1);
                    e = self.push1(
                        Op::ExpandDims { x: e, axis: 0 },
                        Self::tile(DType::I32, &s1),
                    );
                }
                while s1.len() < shape.len() {
                    let axis = s1.len() as u32;
                    s1.push(1);
                    e = self.push1(Op::ExpandDims { x: e, axis }, Self::tile(DType::I32, &s1));
                }
                e
            };
            let e = self.splat_to(e, shape);
            let sc = if stride > 1 && self.rng.chance(0.3) {
                // The same stride known only at run time (`stride + pid % 1`), as a
                // matmul's `stride_bn` on `w.t()`: a column-major run whose column stride
                // is an argument is still packed by transposed blocks on the CPU.
                let pid = self.push1(Op::ProgramId(0), Type::scalar(DType::I32));
                let one = self.int_const(DType::I32, &[], 1);
                let zero = self.binary(BinOp::Rem, pid, one);
                let s = self.int_const(DType::I32, &[], stride as i128);
                let s = self.binary(BinOp::Add, s, zero);
                self.splat_to(s, shape)
            } else {
                self.int_const(DType::I32, shape, stride as i128)
            };
            let term = self.binary(BinOp::Mul, e, sc);
            off = self.binary(BinOp::Add, off, term);
            stride *= shape[k];
        }
        if !row_major && self.rng.chance(0.3) {
            let last = self.int_const(DType::I32, shape, numel as i128 - 1);
            off = self.binary(BinOp::Sub, last, off);
        }
        off
    }

    fn elementwise(&mut self, d: DType, shape: &[usize], need: Need) -> Value {
        let mixing = d.is_int() && need.bound.is_none();
        let choice = self.rng.weighted(&[
            8,
            5,
            if d.is_bool() { 6 } else { 1 },
            3,
            2,
            u32::from(mixing),
        ]);
        match choice {
            5 => self.mixing_rounds(d, shape),
            0 => self.binary_into(d, shape, need),
            1 => self.unary_into(d, shape, need),
            2 => {
                let from = self.random_dtype();
                let a = self.value(from, shape, Need::EXACT);
                let b = self.value(from, shape, Need::EXACT);
                let p = *self.rng.pick(CmpPred::ALL);
                let c = self.cmp(p, a, b);
                self.cast(c, d)
            }
            3 => {
                let c = self.value(DType::Bool, shape, Need::EXACT);
                let a = self.value(d, shape, need);
                let b = self.value(d, shape, need);
                let t = self.ty(a).clone();
                self.push1(Op::Select(c, a, b), t)
            }
            _ if d.is_float() => {
                let sub = Need {
                    exact: true,
                    bound: need.bound.map(|b| (b / 2.0).sqrt().floor()),
                };
                let a = self.value(d, shape, sub);
                let b = self.value(d, shape, sub);
                let c = self.value(
                    d,
                    shape,
                    Need {
                        exact: true,
                        bound: need.bound.map(|b| (b / 2.0).floor()),
                    },
                );
                let t = self.ty(a).clone();
                self.push1(Op::Fma(a, b, c), t)
            }
            _ => self.binary_into(d, shape, need),
        }
    }

    /// Philox-style rounds (what `rand` traces to): every round reuses each of the two
    /// state values twice, through a double-width multiply's high half, a low multiply,
    /// xors and key additions, so expression trees are DAGs whose unfolding doubles per
    /// round.
    fn mixing_rounds(&mut self, d: DType, shape: &[usize]) -> Value {
        let mut a = self.value(d, shape, Need::EXACT);
        let mut b = self.value(d, shape, Need::EXACT);
        let rounds = 2 + self.rng.below(6);
        let wide = if d.bits() == 64 { d } else { DType::U64 };
        for _ in 0..rounds {
            let m = self.rng.next_u64() as i128 | 1;
            let key = self.rng.next_u64() as i128;
            let aw = self.cast(a, wide);
            let mw = self.int_const(wide, shape, wide.wrap_int(m));
            let product = self.binary(BinOp::Mul, aw, mw);
            let high = if d.bits() == 64 {
                product
            } else {
                let k = self.int_const(wide, shape, d.bits() as i128);
                let h = self.binary(BinOp::Shr, product, k);
                self.cast(h, d)
            };
            let key = self.int_const(d, shape, d.wrap_int(key));
            let mixed = self.binary(BinOp::Xor, high, b);
            let next_a = self.binary(BinOp::Xor, mixed, key);
            let md = self.int_const(d, shape, d.wrap_int(m));
            b = self.binary(BinOp::Mul, a, md);
            a = next_a;
        }
        a
    }

    fn binary_into(&mut self, d: DType, shape: &[usize], need: Need) -> Value {
        use BinOp::*;
        let ops: Vec<BinOp> = BinOp::ALL
            .iter()
            .copied()
            .filter(|op| match op {
                And | Or | Xor => !d.is_float(),
                Shl | Shr => d.is_int(),
                Add | Sub | Mul | Div | Rem | Max | Min => !d.is_bool(),
            })
            .filter(|op| need.bound.is_none() || matches!(op, Add | Sub | Mul | Max | Min))
            .collect();
        let op = *self.rng.pick(&ops);
        let sub = match (op, need.bound) {
            (Add | Sub, Some(b)) => Need {
                exact: true,
                bound: Some((b / 2.0).floor()),
            },
            (Mul, Some(b)) => Need {
                exact: true,
                bound: Some(b.sqrt().floor()),
            },
            (Max | Min, _) if d.is_float() => need,
            _ => Need {
                exact: true,
                bound: need.bound,
            },
        };
        let a = self.value(d, shape, sub);
        let b = if matches!(op, Shl | Shr) && self.rng.chance(0.5) {
            // Shift amounts at and past the width.
            let k = *self.rng.pick(&[
                0,
                1,
                d.bits() as i128 - 1,
                d.bits() as i128,
                d.bits() as i128 + 3,
            ]);
            self.int_const(d, shape, k)
        } else {
            self.value(d, shape, sub)
        };
        self.binary(op, a, b)
    }

    fn unary_into(&mut self, d: DType, shape: &[usize], need: Need) -> Value {
        use UnOp::*;
        let ops: Vec<UnOp> = UnOp::ALL
            .iter()
            .copied()
            .filter(|op| match op {
                Not => !d.is_float(),
                Neg | Abs => !d.is_bool(),
                _ => d.is_float(),
            })
            .filter(|op| {
                need.bound.is_none()
                    || matches!(op, Neg | Abs | Floor | Ceil | Trunc | Round | Rint)
            })
            .filter(|op| {
                !need.exact
                    || matches!(
                        op,
                        Neg | Abs | Not | Floor | Ceil | Trunc | Round | Rint | Sqrt
                    )
            })
            .collect();
        if ops.is_empty() {
            return self.binary_into(d, shape, need);
        }
        let op = *self.rng.pick(&ops);
        let sub = match op {
            Neg | Abs if d.is_float() => need,
            _ => Need {
                exact: true,
                bound: need.bound,
            },
        };
        let x = self.value(d, shape, sub);
        let t = self.ty(x).clone();
        self.push1(Op::Unary(op, x), t)
    }

    fn reduce_into(&mut self, d: DType, shape: &[usize], need: Need) -> Value {
        if shape.len() >= 3 || d.is_bool() {
            return self.elementwise(d, shape, need);
        }
        let axis = self.rng.below(shape.len() + 1);
        let m = *self.rng.pick(&self.dims);
        let mut xs = shape.to_vec();
        xs.insert(axis, m);
        if xs.iter().product::<usize>() > MAX_TILE {
            return self.elementwise(d, shape, need);
        }
        let ops: &[ReduceOp] = if d == DType::I32 {
            ReduceOp::ALL
        } else if d.is_int() {
            &[ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::Xor]
        } else {
            &[ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min]
        };
        let op = *self.rng.pick(ops);
        let (xd, xneed) = match op {
            ReduceOp::ArgMax | ReduceOp::ArgMin => {
                let xd = self.random_dtype();
                (if xd.is_bool() { DType::I8 } else { xd }, Need::EXACT)
            }
            ReduceOp::Sum if d.is_float() => {
                let limit =
                    exact_int_limit(info::accumulator(d)).min(need.bound.unwrap_or(f64::MAX));
                (
                    d,
                    Need {
                        exact: true,
                        bound: Some((limit / m as f64).floor().min(4096.0)),
                    },
                )
            }
            ReduceOp::Sum => (d, Need::EXACT),
            _ => (d, need),
        };
        let x = if op == ReduceOp::Sum && d.is_float() && !need.exact && self.rng.chance(0.5) {
            // Any non-negative floats (edge values, approximate ones): reassociated sums
            // compare within `info::sum_ulps`.
            self.nonneg_value(d, &xs)
        } else {
            self.value(xd, &xs, xneed)
        };
        self.push1(
            Op::Reduce {
                op,
                x,
                axis: axis as u32,
            },
            Self::tile(d, shape),
        )
    }

    /// A running sum or product along one axis (in order on every target, so floats
    /// compare exactly; `fix` bounds the result when small integers are needed).
    fn scan_into(&mut self, d: DType, shape: &[usize], need: Need) -> Value {
        let op = *self.rng.pick(ScanOp::ALL);
        let axis = self.rng.below(shape.len());
        let len = shape[axis] as f64;
        let sub = Need {
            exact: true,
            bound: need.bound.map(|b| match op {
                ScanOp::Sum => (b / len).floor().max(1.0),
                ScanOp::Prod => 1.0,
            }),
        };
        let x = self.value(d, shape, sub);
        let reverse = self.rng.chance(0.5);
        self.push1(
            Op::Scan {
                op,
                x,
                axis: axis as u32,
                reverse,
            },
            Self::tile(d, shape),
        )
    }

    fn dot_into(&mut self, d: DType, shape: &[usize], need: Need) -> Value {
        if shape.len() != 2 || d.is_bool() {
            return self.elementwise(d, shape, need);
        }
        // Operands loaded straight from an input reach the `dot`'s packing as loads (a
        // column-major run is packed by transposed blocks on the CPU, given dims that are
        // multiples of the vector width).
        let (mm, nn) = (shape[0], shape[1]);
        // Now and then a `b` deep enough that the CPU packs it in panels (its rows would
        // crowd L1: 32 KiB of them in the accumulator's dtype, codegen `packing`), with a
        // small `a` (CUDA stages both in shared memory), loaded from an input (computed
        // operands this big are mostly broadcasts, the same in every column).
        let size = d.size_bytes();
        let wide = matches!(nn, 16 | 32) && size >= 4 && self.rng.chance(0.35);
        // Now and then both operands at the edges of tutorial 03's matrices (below), with
        // columns the CPU's micro-kernel takes (a multiple of its vector width).
        let boxed = !wide && nn % 8 == 0 && self.rng.chance(0.4);
        let direct = wide || boxed || self.rng.chance(0.3);
        let k = match direct {
            _ if wide => WIDE_B_BYTES / (nn * size),
            true => *self.rng.pick(&[8, 16, 32]),
            false => *self.rng.pick(&[1, 2, 4, 8, 16, 16, 32]),
        };
        let too_big = match wide {
            true => mm * k * size > WIDE_A_BYTES,
            false => mm * k > MAX_TILE || k * nn > MAX_TILE,
        };
        if too_big {
            return self.elementwise(d, shape, need);
        }
        let from = match d {
            DType::F32 => *self
                .rng
                .pick(&[DType::F32, DType::F16, DType::BF16, DType::F16]),
            d => d,
        };
        let (in_need, acc_need) = if d.is_float() {
            let limit = exact_int_limit(info::accumulator(d)).min(need.bound.unwrap_or(f64::MAX));
            let ab = 8.0f64.min(exact_int_limit(from) / 2.0);
            let acc = (limit - ab * ab * k as f64).floor();
            if acc < 0.0 {
                return self.elementwise(d, shape, need);
            }
            (
                Need {
                    exact: true,
                    bound: Some(ab),
                },
                Need {
                    exact: true,
                    bound: Some(acc.min(1e6)),
                },
            )
        } else {
            (Need::EXACT, Need::EXACT)
        };
        // A wide operand's lanes are a run (at most an input's length of them in) or any
        // other offsets into the input.
        let operand = |g: &mut Self, shape: &[usize], need: Need| match direct {
            true => g.load_input_from(from, shape, need, !wide),
            false => g.value(from, shape, need),
        };
        // A wide `b` is loaded from an input of its dtype half the time, else made to
        // differ from column to column (computed ones this big are mostly broadcasts, the
        // same in every column, which would hide a wrong column).
        let operand_b = |g: &mut Self, shape: &[usize], need: Need| {
            let load = g.has_input(from, need) && g.rng.chance(0.5);
            match wide && !load {
                true => g.varied(from, shape, need),
                false => operand(g, shape, need),
            }
        };
        if boxed {
            return self.box_dot([from; 2], d, [mm, k, nn], (in_need, acc_need));
        }
        let (a, b, acc) = if d.is_float() && !need.exact && self.rng.chance(0.5) {
            // Non-negative floats of any size: compared within `info::sum_ulps`.
            let a = operand(self, &[mm, k], Need::EXACT);
            let b = operand_b(self, &[k, nn], Need::EXACT);
            let acc = self.value(d, shape, Need::EXACT);
            (self.abs(a), self.abs(b), self.abs(acc))
        } else {
            (
                operand(self, &[mm, k], in_need),
                operand_b(self, &[k, nn], in_need),
                self.value(d, shape, acc_need),
            )
        };
        self.push1(Op::Dot { a, b, acc }, Self::tile(d, shape))
    }

    /// Tutorial 03's K loop, repeated: `acc = dot(a, b, acc)` for `kb` in `0..trips`, twice
    /// over (`rep` 0 and 1), with `b` a wide tile (packed in panels on the CPU) whose lines
    /// are one run of an input, `(x + r·(pid % 1)) + (j + at + kb + rep·shift)`, and `acc`
    /// observed. The CPU keeps each iteration's packed `b` (codegen `panel_cache`): with
    /// `shift` 0 the second pass finds them, with 1 their rows differ and a wrong slot or
    /// key would read another iteration's tile. Half the time `b`'s pointers are carried
    /// through the loop as Triton's tutorial writes them (`b_ptrs += 1` at every
    /// iteration, in a dtype drawn; CUDA carries them as an offset: `dsl::ir::
    /// carry_pointer_offsets`), and now and then a tile is loaded through them after it.
    /// Else, now and then, the loop also sums a loaded line to a scalar at each iteration
    /// (a reduction across warps in a pipelined loop: its scratch lies above the stages,
    /// `cuda/codegen/sync.rs::scratch_floor`), the total observed.
    fn k_loop(&mut self, input: usize) {
        let from = self.inputs[input].dtype;
        let d = match from {
            DType::I32 => DType::I32,
            _ => DType::F32,
        };
        let trips = self.rng.range(1, 4) as i128;
        let nn = 32;
        let k = WIDE_B_BYTES / (nn * d.size_bytes());
        // 16-bit operands sometimes fill tensor-core tiles: CUDA then copies them with
        // `cp.async`, and pipelines the loop where it can (`cuda/codegen/pipeline.rs`). (Not
        // 64 rows for Hopper's `wgmma`: a 64 × 256 `a` is more than one warp's registers.)
        let sixteen_bits = matches!(from, DType::F16 | DType::BF16);
        // A loop that also sums a line to a scalar (below): tensor-core tiles whenever
        // they can be, so that CUDA pipelines it.
        let with_sum = self.rng.chance(0.15);
        let mm = match sixteen_bits && (with_sum || self.rng.chance(0.3)) {
            true => 16,
            false => *self.rng.pick(&[1, 2]),
        };
        // Products of integers up to 16, summed over at most 16 iterations (loops are
        // assumed to run up to 4 times each): exact in f32.
        let need = Need {
            exact: true,
            bound: d.is_float().then_some(16.0),
        };
        let (ptr, len) = (self.inputs[input].ptr, self.inputs[input].len);
        // The second pass reads the same lines (kept tiles are found) or lines one further
        // (every kept tile's rows differ).
        let shift = self.rng.below(2) as i128;
        let at = self.rng.below(len - nn - trips as usize) as i128;
        let zero = self.int_const(d, &[mm, nn], 0);
        let acc_info = Info {
            int_bound: d.is_float().then_some(1e6),
            ..Info::EXACT
        };
        let i32c = |g: &mut Self, v: i128| g.int_const(DType::I32, &[], v);
        let shape = [k, nn];
        // `b`'s pointers at iteration `kb` of pass `rep`.
        let b_pointers = |g: &mut Self, kb: Value, rep: Value| {
            let line = g.lane_offsets_ordered(&[k, 1], AxisOrder::RowMajor);
            let line = g.splat_to(line, &shape);
            let pid = g.push1(Op::ProgramId(0), Type::scalar(DType::I32));
            let one = i32c(g, 1);
            let ld = g.binary(BinOp::Rem, pid, one);
            let ld = g.splat_to(ld, &shape);
            let rows = g.binary(BinOp::Mul, line, ld);
            let j = g.lane_offsets_ordered(&[1, nn], AxisOrder::RowMajor);
            let j = g.splat_to(j, &shape);
            let at = i32c(g, at);
            let at = g.binary(BinOp::Add, at, kb);
            let shift = i32c(g, shift);
            let moved = g.binary(BinOp::Mul, rep, shift);
            let at = g.binary(BinOp::Add, at, moved);
            let at = g.splat_to(at, &shape);
            let cols = g.binary(BinOp::Add, j, at);
            let p = g.pointers(ptr, rows);
            let t = g.ty(p).clone();
            g.push1(Op::AddPtr(p, cols), t)
        };
        let load_b = |g: &mut Self, ptrs: Value| {
            let load = Op::Load {
                ptr: ptrs,
                mask: None,
                other: None,
                hints: CacheHints::default(),
            };
            g.push1(load, Self::tile(from, &shape))
        };
        // One run of lanes: no strided lines, whose observation would store before the dot.
        let load_a = |g: &mut Self| g.load_input_from(from, &[mm, k], need, true);
        let carried = !with_sum && self.rng.chance(0.5);
        let step_dtype = *self
            .rng
            .pick(&[DType::I32, DType::I64, DType::U32, DType::I16]);
        let read_after = self.rng.chance(0.3);
        if with_sum {
            // A line of `nn` integers whose sums stay exact in `from`, the total in `d`.
            let bound = (crate::info::exact_int_limit(from) / nn as f64)
                .floor()
                .min(16.0);
            let line_need = Need {
                exact: true,
                bound: from.is_float().then_some(bound),
            };
            let zero_total = self.int_const(d, &[], 0);
            let carry = [(zero, acc_info), (zero_total, acc_info)];
            let out = self.loop_carrying_all([0, 2, 1], &carry, &mut |g, rep, args| {
                let carry = [(args[0], acc_info), (args[1], acc_info)];
                g.loop_carrying_all([0, trips, 1], &carry, &mut |g, kb, args| {
                    let a = load_a(g);
                    let ptrs = b_pointers(g, kb, rep);
                    let b = load_b(g, ptrs);
                    let acc = g.push1(Op::Dot { a, b, acc: args[0] }, Self::tile(d, &[mm, nn]));
                    let line = g.load_input_from(from, &[nn], line_need, true);
                    let sum = Op::Reduce {
                        op: ReduceOp::Sum,
                        x: line,
                        axis: 0,
                    };
                    let sum = g.push1(sum, Self::tile(from, &[]));
                    let sum = g.cast(sum, d);
                    vec![acc, g.binary(BinOp::Add, args[1], sum)]
                })
            });
            for v in out {
                self.observe_alone(v);
            }
            return;
        }
        let result = self.loop_carrying([0, 2, 1], (zero, acc_info), &mut |g, rep, acc| {
            if !carried {
                return g.loop_carrying([0, trips, 1], (acc, acc_info), &mut |g, kb, acc| {
                    let a = load_a(g);
                    let ptrs = b_pointers(g, kb, rep);
                    let b = load_b(g, ptrs);
                    g.push1(Op::Dot { a, b, acc }, Self::tile(d, &[mm, nn]))
                });
            }
            let zero_kb = i32c(g, 0);
            let first = b_pointers(g, zero_kb, rep);
            let carry = [(acc, acc_info), (first, Info::EXACT)];
            let out = g.loop_carrying_all([0, trips, 1], &carry, &mut |g, _kb, args| {
                let a = load_a(g);
                let b = load_b(g, args[1]);
                let acc = g.push1(Op::Dot { a, b, acc: args[0] }, Self::tile(d, &[mm, nn]));
                let one = g.int_const(step_dtype, &[], 1);
                let one = g.splat_to(one, &shape);
                let t = g.ty(args[1]).clone();
                vec![acc, g.push1(Op::AddPtr(args[1], one), t)]
            });
            // The pointers past the last iteration: still inside the input (`at` leaves
            // `trips` elements after the run).
            if read_after {
                let last = load_b(g, out[1]);
                g.observe(last);
            }
            let scope = g.visible.last_mut().expect("a scope");
            scope.retain(|v| *v != out[1] && *v != first);
            out[0]
        });
        self.observe_alone(result);
    }

    /// Observes `v`, which then is used by nothing else (nor what observing it made): the
    /// comparison's analysis bounds a loop's result less tightly than the info the loop
    /// gave it, and a value built on it could not be compared.
    fn observe_alone(&mut self, v: Value) {
        let scope = self.visible.last_mut().expect("a scope");
        scope.retain(|x| *x != v);
        let visible = scope.len();
        self.observe(v);
        self.visible.last_mut().expect("a scope").truncate(visible);
    }

    /// Tutorial 03's edge tiles: a [`box_dot`](Self::box_dot) of tiles loaded from `input`,
    /// whose result is observed, and its bits too.
    fn edge_dot(&mut self, input: usize) {
        let from = self.inputs[input].dtype;
        let d = match from {
            DType::I32 => DType::I32,
            _ => DType::F32,
        };
        // Sometimes a `b` the CPU packs in panels (see `dot_into`), with a small `a`; for
        // 16-bit operands, sometimes tiles for tensor cores, whose loads CUDA copies to
        // shared memory with `cp.async` (16 bytes at a time where aligned and unmasked);
        // for fp8, sometimes 64 rows, which Hopper runs on `wgmma` with 4 warps (K-major
        // byte tiles: a row-major `b` staged transposed, a column-major one copied).
        let tensor_cores = matches!(from, DType::F16 | DType::BF16) && self.rng.chance(0.4);
        let fp8_wgmma = matches!(from, DType::F8E4M3 | DType::F8E5M2) && self.rng.chance(0.5);
        let (mm, k, nn) = match self.rng.chance(0.3) {
            _ if fp8_wgmma => (
                64,
                *self.rng.pick(&[32, 64]),
                *self.rng.pick(&[8, 16, 32, 48]),
            ),
            // 64 rows: whole warpgroups, `wgmma` on Hopper with 4 warps.
            _ if tensor_cores => (
                *self.rng.pick(&[16, 32, 64]),
                *self.rng.pick(&[16, 32]),
                *self.rng.pick(&[8, 16, 32, 48]),
            ),
            true => (*self.rng.pick(&[1, 2, 3]), WIDE_B_BYTES / (128 * 4), 128),
            false => (
                *self.rng.pick(&[1, 2, 3, 6, 8, 13]),
                *self.rng.pick(&[1, 8, 16, 32]),
                *self.rng.pick(&[16, 32, 48]),
            ),
        };
        // Integers up to 16: products up to 256, sums of 32 of them exact in f32.
        let need = Need {
            exact: true,
            bound: d.is_float().then_some(16.0),
        };
        // `b` now and then of the other fp8 (a mixed `dot`).
        let b_from = match self.edge_partner {
            Some(p) if self.rng.chance(0.6) => self.inputs[p].dtype,
            _ => from,
        };
        let result = self.box_dot([from, b_from], d, [mm, k, nn], (need, need));
        self.observe(result);
        // Its bits too: a float observation buffer that holds any approximate value is
        // compared within ulps, where -0 equals +0.
        if d == DType::F32 {
            let bits = self.push1(Op::Bitcast(result), Self::tile(DType::I32, &[mm, nn]));
            self.observe(bits);
        }
    }

    /// Tutorial 03's K loop through tensor descriptors: `acc = dot(a.load((r0, c0 + kb·k)),
    /// b.load((kb·k + r1, c1)), acc)` for `kb` in `0..trips`, `a` and `b` views of `input`
    /// (a 16-byte aligned base, lines 16–64 elements apart, constant shapes; 16-bit or fp8,
    /// `b` now and then a view of `edge_partner`: a mixed fp8 `dot`)
    /// loaded as `make_tensor_descriptor`'s loads trace (`dsl::trace::block_ptr`), blocks
    /// clipped by the views' edges, starting before them now and then. Hopper copies such
    /// blocks by TMA (`cuda/tensor_map.rs`; `wgmma` with 64 rows and 4 warps, `mma.sync`
    /// else), Ampere by `cp.async`.
    fn descriptor_k_loop(&mut self, input: usize) {
        let from = self.inputs[input].dtype;
        // fp8: `wgmma`'s K of 32, and its 64 rows more often (at 4 warps).
        let fp8 = from.size_bytes() == 1;
        let mm = *self
            .rng
            .pick(if fp8 { &[16, 64, 64] } else { &[16, 16, 64] });
        // 48: three k steps, the last one alone (on CUDA a `b` stored by columns is read
        // two steps per `ldmatrix.x4`, then one by `.x2`).
        let k = if fp8 {
            32
        } else {
            *self.rng.pick(&[16, 32, 32, 48])
        };
        let nn = *self.rng.pick(&[16, 32]);
        let trips = self.rng.range(1, 4) as i128;
        // `b` now and then from an input of the other fp8 (a mixed `dot`).
        let b_input = match self.edge_partner {
            Some(p) if fp8 && self.rng.chance(0.6) => p,
            _ => input,
        };
        let b_from = self.inputs[b_input].dtype;
        // A view of `input`: base `at` (a multiple of 8 elements), lines `ld` apart of at
        // most `ld` elements; row-major, or (`transposed`) its columns the lines (a K-major
        // `b`, which CUDA stores transposed: TMA lays its lines out so).
        let view = |g: &mut Self, input: usize, transposed: bool| {
            let (ptr, len) = (g.inputs[input].ptr, g.inputs[input].len);
            let hint = Op::Hint {
                x: ptr,
                kind: HintKind::MultipleOf,
                values: vec![16],
            };
            let aligned = g.push1(hint, g.ty(ptr).clone());
            let ld = *g.rng.pick(&[16, 32, 48, 64]);
            // 16 bytes: 8 elements of 16 bits, 16 of fp8.
            let unit = 16 / from.size_bytes();
            let at = unit * g.rng.below(len / (2 * unit));
            // Now and then the view of program `pid % 2` starts `batch` elements further
            // per program (attention's `k + head`: a TMA map's third dim on Hopper).
            let batch = match len - at > 2 * unit && g.rng.chance(0.25) {
                true => unit * g.rng.range(1, ((len - at) / (2 * unit)).min(4) as i64) as usize,
                false => 0,
            };
            // Every line's elements inside the input: the last line starts at most
            // `room - width` after `at` (and the batch).
            let room = len - at - batch;
            let width = g.rng.range(1, (ld + 1).min(room) as i64) as usize;
            let lines = g.rng.range(1, ((room - width) / ld + 1) as i64) as usize;
            let off = g.int_const(DType::I32, &[], at as i128);
            let t = g.ty(aligned).clone();
            let mut base = g.push1(Op::AddPtr(aligned, off), t.clone());
            if batch > 0 {
                let pid = g.push1(Op::ProgramId(0), Type::scalar(DType::I32));
                let two = g.int_const(DType::I32, &[], 2);
                let which = g.binary(BinOp::Rem, pid, two);
                let which = g.cast(which, DType::I64);
                let stride = g.int_const(DType::I64, &[], batch as i128);
                let moved = g.binary(BinOp::Mul, which, stride);
                base = g.push1(Op::AddPtr(base, moved), t);
            }
            let (width, lines, ld) = (width as i128, lines as i128, ld as i128);
            match transposed {
                true => (base, [width, lines], [1, ld]),
                false => (base, [lines, width], [ld, 1]),
            }
        };
        let start = |g: &mut Self| *g.rng.pick(&[-8i128, 0, 0, 8, 24]);
        // `b` K-major: a view whose columns are the lines, or (attention's `kᵀ`, as
        // `desc_k.load(..).T`) the transpose of a row-major view's `nn × k` block, which
        // GPU code loads as the transposed block (`dsl::ir::sink_transposes`).
        // (fp8 `wgmma` reads `b` K-major only: more often K-major there.)
        let (view_p, load_p) = if fp8 { (0.4, 0.6) } else { (0.3, 0.3) };
        let transposed = self.rng.chance(view_p);
        let loaded_then_transposed = !transposed && self.rng.chance(load_p);
        let (a_view, b_view) = (view(self, input, false), view(self, b_input, transposed));
        let (a_row, a_col, b_row, b_col) = (start(self), start(self), start(self), start(self));
        // A dim whose block stays inside the view at a constant offset is now and then
        // left unchecked (a block pointer's dim outside `boundary_check`).
        let inside = |g: &mut Self, at: i128, size: usize, extent: i128| {
            at >= 0 && at + size as i128 <= extent && g.rng.chance(0.5)
        };
        let a_checked = [!inside(self, a_row, mm, a_view.1[0]), true];
        let b_checked = match (loaded_then_transposed, transposed) {
            (true, _) => [!inside(self, b_col, nn, b_view.1[0]), true],
            (false, _) => [true, !inside(self, b_col, nn, b_view.1[1])],
        };
        let acc_info = Info {
            int_bound: Some(1e6),
            ..Info::EXACT
        };
        // Now and then inside an outer loop of two trips (tutorial 09's persistent form:
        // each trip's K loop sets up its stages and `mbarrier`s again), summed.
        let outer = self.rng.chance(0.25);
        // Else now and then attention's `q`: `a` loaded once before the loop at a fixed
        // block (the loop's invariant `a`: copied once by TMA on Hopper where the loop
        // keeps it in shared memory), and now and then a second loop on it too (causal
        // attention's two loops), the two summed.
        // (More often for fp8, whose `a` Hopper keeps in shared memory at any size.)
        let invariant_a = match !outer && self.rng.chance(if fp8 { 0.5 } else { 0.3 }) {
            true => {
                let rows = self.int_const(DType::I32, &[], a_row);
                let cols = self.int_const(DType::I32, &[], a_col);
                Some(self.descriptor_load(from, a_view, [rows, cols], [mm, k], a_checked))
            }
            false => None,
        };
        let k_loop = |g: &mut Self| {
            let zero = g.int_const(DType::F32, &[mm, nn], 0);
            g.loop_carrying([0, trips, 1], (zero, acc_info), &mut |g, kb, acc| {
                let kk = g.int_const(DType::I32, &[], k as i128);
                let moved = g.binary(BinOp::Mul, kb, kk);
                let offset = |g: &mut Self, at: i128| {
                    let at = g.int_const(DType::I32, &[], at);
                    g.binary(BinOp::Add, at, moved)
                };
                let a = match invariant_a {
                    Some(a) => a,
                    None => {
                        let a_cols = offset(g, a_col);
                        let a_rows = g.int_const(DType::I32, &[], a_row);
                        g.descriptor_load(from, a_view, [a_rows, a_cols], [mm, k], a_checked)
                    }
                };
                let b_rows = offset(g, b_row);
                let b_cols = g.int_const(DType::I32, &[], b_col);
                let b = match loaded_then_transposed {
                    true => {
                        let kt =
                            g.descriptor_load(b_from, b_view, [b_cols, b_rows], [nn, k], b_checked);
                        let dims = vec![1, 0];
                        g.push1(Op::Permute { x: kt, dims }, Self::tile(b_from, &[k, nn]))
                    }
                    false => {
                        g.descriptor_load(b_from, b_view, [b_rows, b_cols], [k, nn], b_checked)
                    }
                };
                g.push1(Op::Dot { a, b, acc }, Self::tile(DType::F32, &[mm, nn]))
            })
        };
        let result = match outer {
            true => {
                let zero = self.int_const(DType::F32, &[mm, nn], 0);
                let total_info = Info {
                    int_bound: Some(2e6),
                    ..Info::EXACT
                };
                self.loop_carrying([0, 2, 1], (zero, total_info), &mut |g, _, total| {
                    let r = k_loop(g);
                    g.binary(BinOp::Add, total, r)
                })
            }
            false if invariant_a.is_some() && self.rng.chance(0.5) => {
                let first = k_loop(self);
                let second = k_loop(self);
                self.binary(BinOp::Add, first, second)
            }
            false => k_loop(self),
        };
        self.observe(result);
    }

    /// A load of the block `shape` at `offsets` of a view, as a tensor descriptor's `load`
    /// traces, or a block pointer's with the `checked` dims in `boundary_check` (see
    /// [`checked_block`](Self::checked_block)).
    fn descriptor_load(
        &mut self,
        d: DType,
        view: (Value, [i128; 2], [i128; 2]),
        offsets: [Value; 2],
        shape: [usize; 2],
        checked: [bool; 2],
    ) -> Value {
        let (ptr, mask) = self.checked_block(view, offsets, shape, checked);
        let load = Op::Load {
            ptr,
            mask,
            other: None,
            hints: CacheHints::default(),
        };
        self.push1(load, Self::tile(d, &shape))
    }

    /// The pointers and mask of the block `shape` at `offsets` (i32 scalars) of the
    /// view `(base, extents, strides)`, as a tensor descriptor's access traces: per dim
    /// the i64 index `arange + off`, times the dim's stride, masked by `0 <= index <
    /// extent` (every dim: see [`checked_block`](Self::checked_block)).
    fn descriptor_block(
        &mut self,
        view: (Value, [i128; 2], [i128; 2]),
        offsets: [Value; 2],
        shape: [usize; 2],
    ) -> (Value, Value) {
        let (ptrs, mask) = self.checked_block(view, offsets, shape, [true; 2]);
        (ptrs, mask.expect("every dim checked"))
    }

    /// [`descriptor_block`](Self::descriptor_block) with only the `checked` dims masked, as
    /// a block pointer loaded with those dims in `boundary_check` traces (no mask where
    /// none is).
    fn checked_block(
        &mut self,
        (base, extents, strides): (Value, [i128; 2], [i128; 2]),
        offsets: [Value; 2],
        shape: [usize; 2],
        checked: [bool; 2],
    ) -> (Value, Option<Value>) {
        let mut terms = Vec::new();
        let mut inside = Vec::new();
        for dim in 0..2 {
            let n = shape[dim];
            let mut line = [1, 1];
            line[dim] = n;
            let lanes = self.push1(
                Op::Arange {
                    start: 0,
                    end: n as i64,
                },
                Self::tile(DType::I32, &[n]),
            );
            let lanes = self.cast(lanes, DType::I64);
            let off = self.cast(offsets[dim], DType::I64);
            let off = self.splat_to(off, &[n]);
            let index = self.binary(BinOp::Add, lanes, off);
            let index = self.push1(Op::Reshape(index), Self::tile(DType::I64, &line));
            let stride = self.int_const(DType::I64, &[], strides[dim]);
            let stride = self.splat_to(stride, &line);
            terms.push(self.binary(BinOp::Mul, index, stride));
            if !checked[dim] {
                continue;
            }
            let zero = self.int_const(DType::I64, &[], 0);
            let zero = self.splat_to(zero, &line);
            let extent = self.int_const(DType::I64, &[], extents[dim]);
            let extent = self.splat_to(extent, &line);
            let ge = self.cmp(CmpPred::Ge, index, zero);
            let lt = self.cmp(CmpPred::Lt, index, extent);
            inside.push(self.binary(BinOp::And, ge, lt));
        }
        let [t0, t1] = [terms[0], terms[1]].map(|t| self.splat_to(t, &shape));
        let offset = self.binary(BinOp::Add, t0, t1);
        let masks: Vec<Value> = inside.iter().map(|m| self.splat_to(*m, &shape)).collect();
        let mask = match masks[..] {
            [m0, m1] => Some(self.binary(BinOp::And, m0, m1)),
            [m] => Some(m),
            _ => None,
        };
        let p = self.splat_to(base, &shape);
        let t = self.ty(p).clone();
        (self.push1(Op::AddPtr(p, offset), t), mask)
    }

    /// Attention's scores: a tensor-core-sized [`box_dot`](Self::box_dot) of 16-bit or fp8
    /// tiles whose rows are reduced (max, sum of `x - max`, argmax) and broadcast back, and
    /// `p = x - max` converted to the input's dtype as the `a` of a second `dot`. CUDA holds
    /// all of it in `mma` fragments where the warps own whole rows (codegen `held`; on
    /// Hopper fp8's `p` goes into `wgmma`'s register A fragments by shuffles). With
    /// integers up to 16, every sum is an integer below 2^24: exact in any order (`p`'s
    /// rounding to 16 bits keeps integers, to fp8 gives integers of a few bits).
    fn row_dot(&mut self, input: usize) {
        let from = self.inputs[input].dtype;
        // fp8: `wgmma`'s 64 rows (at 4 warps) and K of 32 or 64 (QGMMA's), more often.
        let fp8 = from.size_bytes() == 1;
        let mm = *self
            .rng
            .pick(if fp8 { &[16, 64, 64] } else { &[16, 32, 64] });
        let k = *self.rng.pick(if fp8 { &[32, 64] } else { &[16, 32] });
        let nn = *self.rng.pick(if fp8 { &[32, 64] } else { &[16, 32] });
        let need = Need {
            exact: true,
            bound: Some(16.0),
        };
        let x = self.box_dot([from; 2], DType::F32, [mm, k, nn], (need, need));
        let f32s = |shape: &[usize]| Self::tile(DType::F32, shape);
        let rows = |g: &mut Self, op: ReduceOp, x: Value, d: DType| {
            g.push1(Op::Reduce { op, x, axis: 1 }, Self::tile(d, &[mm]))
        };
        let widen = |g: &mut Self, r: Value| {
            let col = g.push1(Op::ExpandDims { x: r, axis: 1 }, f32s(&[mm, 1]));
            g.push1(Op::Broadcast(col), f32s(&[mm, nn]))
        };
        let max = rows(self, ReduceOp::Max, x, DType::F32);
        let wide = widen(self, max);
        let e = self.binary(BinOp::Sub, x, wide);
        let sum = rows(self, ReduceOp::Sum, e, DType::F32);
        let arg = rows(self, ReduceOp::ArgMax, x, DType::I32);
        for v in [max, sum, arg] {
            self.observe(v);
        }
        if mm * nn <= REGION {
            let wide = widen(self, sum);
            let shifted = self.binary(BinOp::Add, e, wide);
            self.observe(shifted);
        }
        let p = self.cast(e, from);
        // 16 columns: a `b` Hopper's `wgmma` reads from shared memory (32-byte rows); 8
        // where 16 would make the product too big to observe (64 rows).
        let dv = match mm * 16 <= REGION {
            true => *self.rng.pick(&[8, 16]),
            false => 8,
        };
        let v = self.load_input_from(from, &[nn, dv], need, true);
        let acc = self.constant(DType::F32, &[mm, dv], Const::Float(0.0));
        let out = self.push1(Op::Dot { a: p, b: v, acc }, f32s(&[mm, dv]));
        self.observe(out);
    }

    /// `for iv in lo..hi` by `step` (i32 constants) carrying `init` (assumed to keep its
    /// info), the body's value built by `body` from the counter and the carried value;
    /// the loop's result.
    fn loop_carrying(
        &mut self,
        bounds: [i128; 3],
        (init, info): (Value, Info),
        body: &mut dyn FnMut(&mut Self, Value, Value) -> Value,
    ) -> Value {
        self.loop_carrying_all(bounds, &[(init, info)], &mut |g, iv, args| {
            vec![body(g, iv, args[0])]
        })[0]
    }

    /// [`loop_carrying`](Self::loop_carrying) with several carried values (each assumed
    /// to keep its info): the loop's results.
    fn loop_carrying_all(
        &mut self,
        [lo, hi, step]: [i128; 3],
        carried: &[(Value, Info)],
        body: &mut LoopBody<'_, Self>,
    ) -> Vec<Value> {
        let (lo, hi) = (
            self.int_const(DType::I32, &[], lo),
            self.int_const(DType::I32, &[], hi),
        );
        let step = self.int_const(DType::I32, &[], step);
        self.open();
        let iv = self.new_value(Type::scalar(DType::I32), Info::EXACT);
        let args = self.args_for(carried);
        let ys = body(self, iv, &args);
        self.push(Op::Yield(ys.clone()), vec![]);
        let body = self.close([vec![iv], args].concat());
        let op = Op::For {
            lo,
            hi,
            step,
            init: carried.iter().map(|(v, _)| *v).collect(),
            body,
            unroll: None,
            stages: self.loop_stages(),
        };
        self.finish_region_op(op, carried, &ys);
        let visible = self.visible.last().expect("a scope");
        visible[visible.len() - carried.len()..].to_vec()
    }

    /// A loop's `num_stages` now and then (CUDA pipelines a loop around a tensor-core `dot`
    /// in that many stages; 1: not at all).
    fn loop_stages(&mut self) -> Option<u32> {
        match self.rng.chance(0.3) {
            true => Some(*self.rng.pick(&[1u32, 2, 3, 4])),
            false => None,
        }
    }

    /// Small integers of dtype `d` over `shape` that differ from lane to lane (the lanes'
    /// positions modulo what `need` allows, at most 100; `info` bounds the remainder, and
    /// so its cast, by the modulus).
    fn varied(&mut self, d: DType, shape: &[usize], need: Need) -> Value {
        let most = |b: f64| b.min(exact_int_limit(d)).floor().clamp(0.0, 99.0);
        let modulus = need.bound.map_or(99.0, most) as i128 + 1;
        let off = self.lane_offsets(shape);
        let m = self.int_const(DType::I32, shape, modulus);
        let r = self.binary(BinOp::Rem, off, m);
        self.cast(r, d)
    }

    fn abs(&mut self, x: Value) -> Value {
        let t = self.ty(x).clone();
        self.push1(Op::Unary(UnOp::Abs, x), t)
    }

    /// `|x|` of a float value that may be approximate.
    fn nonneg_value(&mut self, d: DType, shape: &[usize]) -> Value {
        let x = self.value(d, shape, Need::ANY);
        self.abs(x)
    }

    // ---- statements ------------------------------------------------------------------

    fn program(&mut self) {
        let r = &mut self.rng;
        self.dims = (0..3)
            .map(|_| *r.pick(&[1, 2, 2, 4, 4, 8, 8, 16, 16, 32, 3]))
            .collect();
        let grid = [
            self.rng.range(1, 3) as u64,
            1 + u64::from(self.rng.chance(0.3)),
            1 + u64::from(self.rng.chance(0.15)),
        ];
        self.grid = grid;
        self.programs = grid.iter().product::<u64>() as usize;
        // Parameters: inputs, outputs, atomics, scalars.
        for _ in 0..self.rng.range(1, 3) {
            let d = self.random_dtype();
            let len = *self.rng.pick(&[16, 64, 256]);
            let bound = (d.is_float() && self.rng.chance(0.5)).then_some(16.0);
            self.add_input(d, len, bound);
        }
        // The input of a K loop (see `k_loop`), now and then.
        if self.rng.chance(0.3) {
            self.k_input = Some(self.dot_input(256));
        }
        // The input of a `dot` of box-masked tiles (see `edge_dot`), now and then.
        if self.rng.chance(0.3) {
            let input = self.dot_input(2048);
            self.edge_input = Some(input);
            let other = match self.inputs[input].dtype {
                DType::F8E4M3 => Some(DType::F8E5M2),
                DType::F8E5M2 => Some(DType::F8E4M3),
                _ => None,
            };
            if let Some(d) = other.filter(|_| self.rng.chance(0.5)) {
                // Integers up to 8, which both fp8s hold exactly.
                self.edge_partner = Some(self.add_input(d, 2048, Some(8.0)));
            }
        }
        for _ in 0..self.rng.range(1, 3) {
            let d = self.random_dtype();
            let exact = self.rng.chance(0.75);
            let len = self.programs * REGION;
            let bytes = data::buffer(d, len, None, &mut self.rng);
            let ptr = self.param(
                Type::ptr(d),
                Arg::Buffer {
                    memory: Memory::Output,
                    bytes,
                },
            );
            self.outputs.push((
                Buffer {
                    ptr,
                    dtype: d,
                    len,
                    bound: None,
                },
                exact,
            ));
        }
        // Made without a draw, so that the program of a seed is otherwise unchanged; of
        // bytes 0xa5 (a large negative integer, a small negative float), so that an observed
        // 0 or `false` (loads of edge values often give them) shows where it lands.
        for d in [DType::I64, DType::F64] {
            let len = self.programs * OBSERVE_REGION;
            let ptr = self.param(
                Type::ptr(d),
                Arg::Buffer {
                    memory: Memory::Output,
                    bytes: vec![0xa5; len * d.size_bytes()],
                },
            );
            let buffer = Buffer {
                ptr,
                dtype: d,
                len,
                bound: None,
            };
            self.observations.push((buffer, 0));
        }
        if self.rng.chance(0.4) {
            let d = *self.rng.pick(&[
                DType::I32,
                DType::U32,
                DType::I64,
                DType::U64,
                DType::F16,
                DType::BF16,
                DType::F32,
                DType::F64,
            ]);
            let len = self.programs * REGION;
            let bytes = data::buffer(d, len, Some(16.0), &mut self.rng);
            let ptr = self.param(
                Type::ptr(d),
                Arg::Buffer {
                    memory: Memory::Output,
                    bytes,
                },
            );
            self.atomics.push(Buffer {
                ptr,
                dtype: d,
                len,
                bound: None,
            });
        }
        if self.rng.chance(0.3) {
            let d = *self.rng.pick(&ATOMIC_INTS);
            let bytes = data::buffer(d, 8, None, &mut self.rng);
            let ptr = self.param(
                Type::ptr(d),
                Arg::Buffer {
                    memory: Memory::SharedAtomics,
                    bytes,
                },
            );
            self.shared = Some(Buffer {
                ptr,
                dtype: d,
                len: 8,
                bound: None,
            });
            self.shared_op = *self.rng.pick(&[
                AtomicOp::Add,
                AtomicOp::Max,
                AtomicOp::Min,
                AtomicOp::And,
                AtomicOp::Or,
                AtomicOp::Xor,
            ]);
        }
        let trips = self.rng.range(0, 3) as u64;
        self.n = Some(self.param(Type::scalar(DType::I32), Arg::Scalar(trips)));
        for _ in 0..self.rng.range(0, 2) {
            let d = self.random_dtype();
            let c = data::constant(d, &mut self.rng);
            let mut bytes = data::element_bytes(d, c);
            bytes.resize(8, 0);
            let bits = u64::from_le_bytes(bytes.try_into().expect("8 bytes"));
            self.param(Type::scalar(d), Arg::Scalar(bits));
        }
        // pid = x + nx * (y + ny * z); base = pid * REGION.
        let ids: Vec<Value> = (0..3)
            .map(|a| self.push1(Op::ProgramId(a), Type::scalar(DType::I32)))
            .collect();
        let nx = self.push1(Op::NumPrograms(0), Type::scalar(DType::I32));
        let ny = self.push1(Op::NumPrograms(1), Type::scalar(DType::I32));
        let t = self.binary(BinOp::Mul, ny, ids[2]);
        let t = self.binary(BinOp::Add, ids[1], t);
        let t = self.binary(BinOp::Mul, nx, t);
        let pid = self.binary(BinOp::Add, ids[0], t);
        let region = self.int_const(DType::I32, &[], REGION as i128);
        let base = self.binary(BinOp::Mul, pid, region);
        self.base = Some(base);
        let regions = self.int_const(DType::I32, &[], OBSERVE_REGIONS as i128);
        self.observe_base = Some(self.binary(BinOp::Mul, base, regions));
        // First, before anything writes memory: the CPU keeps the packed `b` tiles of such
        // a loop across iterations and programs.
        if let Some(input) = self.k_input {
            self.k_loop(input);
        }
        let n = self.config.statements;
        self.statements(n / 2);
        if let Some(input) = self.edge_input {
            self.edge_dot(input);
            let from = self.inputs[input].dtype;
            let row_dots = matches!(
                from,
                DType::F16 | DType::BF16 | DType::F8E4M3 | DType::F8E5M2
            );
            if row_dots && self.rng.chance(0.5) {
                self.row_dot(input);
            }
            // fp8 too: its K-major `b` blocks go by TMA into `wgmma`'s 8-bit tiles.
            let descriptor = matches!(
                from,
                DType::F16 | DType::BF16 | DType::F8E4M3 | DType::F8E5M2
            );
            if descriptor && self.rng.chance(0.4) {
                self.descriptor_k_loop(input);
            }
        }
        self.statements(n - n / 2);
        for k in 0..self.outputs.len() {
            self.store_output(k);
        }
    }

    /// A new input of `len` elements for a statement's `dot`s (`k_loop`, `edge_dot`): f32,
    /// f16, bf16, now and then fp8 (integers up to 16, 8 for E5M2: exact in any order of
    /// their sums) or i32.
    fn dot_input(&mut self, len: usize) -> usize {
        let d = match self.rng.chance(0.15) {
            true => *self.rng.pick(&[DType::F8E4M3, DType::F8E5M2]),
            false => *self
                .rng
                .pick(&[DType::F32, DType::F16, DType::BF16, DType::I32]),
        };
        // Integers the dtype holds exactly: E5M2 only up to 8.
        let bound = match d {
            DType::F8E5M2 => Some(8.0),
            d => d.is_float().then_some(16.0),
        };
        self.add_input(d, len, bound)
    }

    /// A new input parameter of `len` elements of `d` (floats: integers up to `bound`, when
    /// given), and its index in `inputs`.
    fn add_input(&mut self, d: DType, len: usize, bound: Option<f64>) -> usize {
        // No more than the integers the dtype holds exactly (E5M2's 8), which is all the
        // analysis takes from an input's bound (`Info::fit`): a statement asking for
        // inputs within 16 must not get an E5M2 one it would read as unbounded (seed 223,
        // a mixed fp8 `dot` of such an input left an output uncompared).
        let bound = bound.map(|b| match d.is_float() {
            true => b.min(exact_int_limit(d)),
            false => b,
        });
        let bytes = data::buffer(d, len, bound, &mut self.rng);
        let memory = Memory::Input(bound);
        let ptr = self.param(Type::ptr(d), Arg::Buffer { memory, bytes });
        self.inputs.push(Buffer {
            ptr,
            dtype: d,
            len,
            bound,
        });
        self.inputs.len() - 1
    }

    fn param(&mut self, t: Type, arg: Arg) -> Value {
        let v = self.new_value(t.clone(), Info::EXACT);
        let i = self.params.len();
        self.params.push(Param {
            name: format!("p{i}"),
            value: v,
        });
        self.args.push(arg);
        if t.elem.pointee().is_some() {
            self.roots.insert(v, i);
        } else {
            self.visible[0].push(v);
        }
        v
    }

    fn statements(&mut self, n: usize) {
        for _ in 0..n {
            self.statement();
        }
    }

    fn statement(&mut self) {
        let nested = self.depth < self.config.max_depth;
        let w = [
            4, // a value
            4, // a store
            2, // a load of an output
            u32::from(!self.atomics.is_empty()) * 2,
            u32::from(self.shared.is_some()),
            u32::from(!self.atomics.is_empty() || self.shared.is_some()), // indirect atomic
            u32::from(nested) * 2,                                        // for
            u32::from(nested),                                            // while
            u32::from(nested) * 2,                                        // if
            1,                                                            // assert
            1,                                                            // print
        ];
        match self.rng.weighted(&w) {
            0 => {
                let d = self.random_dtype();
                let s = self.random_shape(3);
                let need = if self.rng.chance(0.8) {
                    Need::EXACT
                } else {
                    Need::ANY
                };
                self.value(d, &s, need);
            }
            1 => {
                let k = self.rng.below(self.outputs.len());
                self.store_output(k);
            }
            2 => self.load_output(),
            3 => self.private_atomic(),
            4 => self.shared_atomic(),
            5 => self.indirect_atomic(),
            6 => self.for_loop(),
            7 => self.while_loop(),
            8 => self.if_else(),
            9 => self.device_assert(),
            _ => self.device_print(),
        }
    }

    /// A `device_print` of one or two exact values (their text must match the
    /// interpreter's), in hexadecimal sometimes (integers only: a NaN's payload may differ).
    fn device_print(&mut self) {
        let n = 1 + self.rng.below(2);
        let mut args = Vec::new();
        for _ in 0..n {
            let d = self.random_dtype();
            let shape = self.random_shape(2);
            args.push(self.value(d, &shape, Need::EXACT));
        }
        let all_ints = args
            .iter()
            .all(|a| self.ty(*a).dtype().is_some_and(|d| !d.is_float()));
        let hex = all_ints && self.rng.chance(0.3);
        let prefix = self
            .rng
            .pick(&["", "x", "v: ", "50% \"done\"\n"])
            .to_string();
        self.push(Op::Print { prefix, args, hex }, vec![]);
    }

    /// A `device_assert` that holds by construction (programs never fail): `|x| <= B` of a
    /// float whose elements are integers of magnitude at most `B`, or `a == a` of an
    /// integer, sometimes or-ed with any bool and masked. Programs with one run checked when
    /// their seed is odd (`exec::runs_checked`).
    fn device_assert(&mut self) {
        let shape = self.random_shape(3);
        let floats = [DType::F32, DType::F16, DType::BF16, DType::F64];
        let mut cond = if self.rng.chance(0.7) {
            let d = *self.rng.pick(&floats);
            let bound = 1024.0;
            let need = Need {
                exact: true,
                bound: Some(bound),
            };
            let x = self.value(d, &shape, need);
            let x = self.abs(x);
            let b = self.constant(d, &shape, Const::Float(bound));
            self.cmp(CmpPred::Le, x, b)
        } else {
            let d = *self
                .rng
                .pick(&[DType::I8, DType::I32, DType::U16, DType::I64]);
            let a = self.value(d, &shape, Need::EXACT);
            self.cmp(CmpPred::Eq, a, a)
        };
        if self.rng.chance(0.3) {
            let other = self.value(DType::Bool, &shape, Need::EXACT);
            cond = self.binary(BinOp::Or, cond, other);
        }
        let mask = self.maybe_mask(&shape);
        let msg = self
            .rng
            .pick(&["", "x in range", "quote \" and \\ backslash", "line\nbreak"])
            .to_string();
        self.push(Op::Assert { cond, mask, msg }, vec![]);
    }

    fn store_output(&mut self, k: usize) {
        let (ptr, d, exact) = {
            let (b, e) = &self.outputs[k];
            (b.ptr, b.dtype, *e)
        };
        let mut shape = self.random_shape(3);
        let need = if exact { Need::EXACT } else { Need::ANY };
        // Tutorial 03's `acc.to(f16)`: on CUDA an f32 accumulator held in fragments,
        // stored row-major through shared memory in 16-byte chunks where 8-column runs
        // are proven (codegen `epilogue`); its integers within what the output holds.
        let staged = d.size_bytes() == 2 && d.is_float() && self.rng.chance(0.15);
        let mut descriptor = false;
        let row_major = staged && self.rng.chance(0.7);
        let value = if staged {
            shape = self
                .rng
                .pick(&[[16, 16], [16, 32], [32, 16], [16, 8]])
                .to_vec();
            let bound = crate::info::exact_int_limit(d);
            let in_f32 = Need {
                bound: Some(need.bound.map_or(bound, |b| b.min(bound))),
                ..need
            };
            // Stored through a tensor descriptor below: a tensor-core `dot` of 16-bit tiles.
            descriptor = shape[1].is_multiple_of(8) && self.rng.chance(0.3);
            let mut acc = match descriptor {
                true => self.tensor_core_dot(&shape, in_f32),
                false => self.dot_into(DType::F32, &shape, in_f32),
            };
            // Now and then an elementwise op of it (attention's `acc / l_i[:, None]`),
            // exact and within the bound: `|acc|`, or `max(acc, 0)`, held in the `dot`'s
            // fragments on GPUs and stored from them (by TMA through a descriptor).
            if self.rng.chance(0.4) {
                acc = match self.rng.chance(0.5) {
                    true => {
                        let t = self.ty(acc).clone();
                        self.push1(Op::Unary(UnOp::Abs, acc), t)
                    }
                    false => {
                        let zero = self.int_const(DType::F32, &shape, 0);
                        self.binary(BinOp::Max, acc, zero)
                    }
                };
            }
            self.cast(acc, d)
        } else if self.hint_rng.chance(0.03) {
            // A `likely` hint over several chunks of lanes, read at other lanes.
            let n = self.chunked_len();
            shape = vec![n];
            self.chunk_hinted(d, n, need)
        } else if matches!(d, DType::F32 | DType::F64)
            && self.has_input(d, need)
            && self.hint_rng.chance(0.15)
        {
            // A long chain of lane ops over several chunks (staged on the CPU).
            let n = self.deep_chain_len();
            shape = vec![n];
            self.deep_chain(d, n, need)
        } else if !exact && d.is_float() && shape.len() < 3 && self.rng.chance(0.3) {
            // Approximate outputs often hold a sum or a dot of arbitrary values.
            if shape.len() == 2 && self.rng.chance(0.4) {
                self.dot_into(d, &shape, need)
            } else {
                self.reduce_into(d, &shape, need)
            }
        } else {
            self.value(d, &shape, need)
        };
        let window = self.store_window(k, shape.iter().product());
        let (off, origin) = match row_major {
            true => self.own_offsets_ordered(&shape, AxisOrder::RowMajor, window),
            false => self.own_offsets(&shape, window),
        };
        // Promised 16-byte aligned (the executor's buffers are), as a launch specializes
        // a tensor's pointer: row-major runs of 8 are then proven aligned.
        let ptr = match staged && self.rng.chance(0.8) {
            true => {
                let hint = Op::Hint {
                    x: ptr,
                    kind: HintKind::MultipleOf,
                    values: vec![16],
                };
                self.push1(hint, self.ty(ptr).clone())
            }
            false => ptr,
        };
        // A tensor-core `dot`'s result, now and then, through a tensor descriptor over the
        // whole output, lines of the tile's width, each program's block at its window's
        // first row (Hopper stores it by TMA from the epilogue's tile:
        // `cuda/tensor_map.rs`), its columns sometimes clipped.
        if descriptor {
            let ld = shape[1] as i128;
            let len = self.outputs[k].0.len as i128;
            let cols = match self.rng.chance(0.3) {
                true => self.rng.range(1, ld as i64) as i128,
                false => ld,
            };
            // (A window starts at a multiple of WINDOW_ALIGN, so of the width.)
            let width = self.int_const(DType::I32, &[], ld);
            let row = self.binary(BinOp::Div, origin, width);
            let col = self.int_const(DType::I32, &[], 0);
            let view = (ptr, [len / ld, cols], [ld, 1]);
            let (ptrs, mask) = self.descriptor_block(view, [row, col], [shape[0], shape[1]]);
            let store = Op::Store {
                ptr: ptrs,
                value,
                mask: Some(mask),
                hints: CacheHints::default(),
            };
            self.push(store, vec![]);
            return;
        }
        let ptrs = self.pointers(ptr, off);
        let mask = self.own_mask(off, origin, &shape);
        let hints = self.cache_hints(false);
        self.push(
            Op::Store {
                ptr: ptrs,
                value,
                mask,
                hints,
            },
            vec![],
        );
    }

    /// `a @ b` of f16 or bf16 tiles into f32 (`shape` rows and columns, k of 16 or 32),
    /// its integer sums within `need`'s bound.
    fn tensor_core_dot(&mut self, shape: &[usize], need: Need) -> Value {
        let from = *self.rng.pick(&[DType::F16, DType::BF16]);
        let k = *self.rng.pick(&[16usize, 32]);
        let limit = need
            .bound
            .unwrap_or(f64::MAX)
            .min(exact_int_limit(DType::F32));
        let ab = (limit / k as f64).sqrt().floor().min(8.0);
        let in_need = Need {
            exact: true,
            bound: Some(ab),
        };
        let a = self.load_input_from(from, &[shape[0], k], in_need, true);
        let b = self.load_input_from(from, &[k, shape[1]], in_need, true);
        let acc = self.constant(DType::F32, shape, Const::Float(0.0));
        self.push1(Op::Dot { a, b, acc }, Self::tile(DType::F32, shape))
    }

    fn load_output(&mut self) {
        let exact: Vec<usize> = (0..self.outputs.len())
            .filter(|k| self.outputs[*k].1)
            .collect();
        let Some(&k) = (!exact.is_empty()).then(|| self.rng.pick(&exact)) else {
            return;
        };
        let (ptr, d) = (self.outputs[k].0.ptr, self.outputs[k].0.dtype);
        let shape = self.random_shape(3);
        let window = self.read_window(k, shape.iter().product());
        let (off, origin) = self.own_offsets(&shape, window);
        let ptrs = self.pointers(ptr, off);
        let mask = self.own_mask(off, origin, &shape);
        let hints = self.cache_hints(true);
        self.push1(
            Op::Load {
                ptr: ptrs,
                mask,
                other: None,
                hints,
            },
            Self::tile(d, &shape),
        );
    }

    fn private_atomic(&mut self) {
        let k = self.rng.below(self.atomics.len());
        let (ptr, d) = (self.atomics[k].ptr, self.atomics[k].dtype);
        let shape = self.random_shape(2);
        let (off, origin) = self.own_offsets(&shape, 0);
        let ptrs = self.pointers(ptr, off);
        // Float adds stay exact on small integers.
        let need = Need {
            exact: true,
            bound: d.is_float().then_some(1024.0),
        };
        if !d.is_float() && self.rng.chance(0.25) {
            let cmp = self.value(d, &shape, need);
            let value = self.value(d, &shape, need);
            self.push1(
                Op::AtomicCas {
                    ptr: ptrs,
                    cmp,
                    value,
                },
                Self::tile(d, &shape),
            );
            return;
        }
        let ops: Vec<AtomicOp> = AtomicOp::ALL
            .iter()
            .copied()
            .filter(|op| !(op.bitwise() && d.is_float()))
            .collect();
        let op = *self.rng.pick(&ops);
        let value = self.value(d, &shape, need);
        let mask = self.own_mask(off, origin, &shape);
        self.atomic(op, ptrs, value, mask);
    }

    fn atomic(&mut self, op: AtomicOp, ptr: Value, value: Value, mask: Option<Value>) {
        let t = self.ty(value).clone();
        self.push1(
            Op::Atomic {
                op,
                ptr,
                value,
                mask,
            },
            t,
        );
    }

    /// A mask on the lanes of `own` (the program's own offsets from `origin`,
    /// `own_offsets`): a quarter of the time Triton's bounds mask, `own < origin + t`, a
    /// prefix of a 1-D tile (the CPU's prefix split), with the bound on either side and of
    /// every strictness (or a suffix); else a random mask some of the time.
    fn own_mask(&mut self, own: Value, origin: Value, shape: &[usize]) -> Option<Value> {
        if !self.rng.chance(0.25) {
            return self.maybe_mask(shape);
        }
        let numel: usize = shape.iter().product();
        // Past both ends sometimes: no lane, or every lane.
        let t = self.rng.below(numel + 3) as i128 - 1;
        let t = self.int_const(DType::I32, &[], t);
        // Some of the time the index is the lane number plus a constant `k` (softmax's
        // `arange(0, B) < n`), whose lanes past the prefix the CPU takes as false; near
        // `i32::MAX`, where they wrap and compare true again, it must not.
        let (own, origin) = if shape.len() == 1 && self.rng.chance(0.3) {
            let k = if self.rng.chance(0.2) {
                i128::from(i32::MAX) - self.rng.below(numel + 2) as i128
            } else {
                self.rng.range(-4, 4) as i128
            };
            let lanes = self.push1(
                Op::Arange {
                    start: 0,
                    end: numel as i64,
                },
                Self::tile(DType::I32, shape),
            );
            let k = self.int_const(DType::I32, &[], k);
            let ks = self.splat_to(k, shape);
            (self.binary(BinOp::Add, lanes, ks), k)
        } else {
            (own, origin)
        };
        let bound = self.binary(BinOp::Add, origin, t);
        let bound = self.splat_to(bound, shape);
        let (p, lhs, rhs) = match self.rng.below(6) {
            0 => (CmpPred::Lt, own, bound),
            1 => (CmpPred::Le, own, bound),
            2 => (CmpPred::Gt, bound, own),
            3 => (CmpPred::Ge, bound, own),
            // Suffixes.
            4 => (CmpPred::Ge, own, bound),
            _ => (CmpPred::Lt, bound, own),
        };
        Some(self.cmp(p, lhs, rhs))
    }

    /// A random bool mask of `shape`, some of the time.
    fn maybe_mask(&mut self, shape: &[usize]) -> Option<Value> {
        self.rng
            .chance(0.3)
            .then(|| self.value(DType::Bool, shape, Need::EXACT))
    }

    fn shared_atomic(&mut self) {
        let Some(b) = &self.shared else { return };
        let (ptr, d, len) = (b.ptr, b.dtype, b.len);
        let shape = self.random_shape(2);
        let (off, mask) = self.input_offsets(&shape, len, false);
        let ptrs = self.pointers(ptr, off);
        let value = self.value(d, &shape, Need::EXACT);
        self.atomic(self.shared_op, ptrs, value, mask);
    }

    // ---- regions ---------------------------------------------------------------------

    fn open(&mut self) {
        self.scopes.push(Vec::new());
        self.visible.push(Vec::new());
        self.depth += 1;
    }

    fn close(&mut self, args: Vec<Value>) -> Block {
        self.depth -= 1;
        self.visible.pop();
        Block {
            args,
            insts: self.scopes.pop().expect("an open region"),
        }
    }

    /// The values a loop carries: existing values, each with the facts its body may assume
    /// (a float of small integers gets room to grow and is clamped back when yielded).
    fn carried(&mut self) -> Vec<(Value, Info)> {
        let all: Vec<Value> = self.visible.iter().flatten().copied().collect();
        let mut out = Vec::new();
        for _ in 0..self.rng.range(0, 3) {
            let v = if !all.is_empty() && self.rng.chance(0.6) {
                *self.rng.pick(&all)
            } else {
                let d = self.random_dtype();
                let s = self.random_shape(3);
                self.value(d, &s, Need::EXACT)
            };
            let mut i = self.info(v);
            if i.tol == Tol::Unreliable {
                continue;
            }
            // A float's bound widened (the body may grow it); an integer's dropped, as
            // the generator satisfies no bound on integers.
            if let (Some(b), Some(d)) = (i.int_bound, self.ty(v).dtype()) {
                i.int_bound = d
                    .is_float()
                    .then(|| b.max((exact_int_limit(d) / 16.0).floor()));
            }
            out.push((v, i));
        }
        out
    }

    /// Block arguments standing for `carried` inside a region.
    fn args_for(&mut self, carried: &[(Value, Info)]) -> Vec<Value> {
        carried
            .iter()
            .map(|(v, i)| {
                let t = self.ty(*v).clone();
                let a = self.new_value(t, *i);
                self.visible.last_mut().expect("open").push(a);
                a
            })
            .collect()
    }

    /// What a region yields for each carried value: a value of its type satisfying what
    /// the body assumed of it.
    fn yields_for(&mut self, carried: &[(Value, Info)], args: &[Value]) -> Vec<Value> {
        carried
            .iter()
            .zip(args)
            .map(|((v, i), a)| {
                let t = self.ty(*v).clone();
                let need = Need {
                    exact: i.tol == Tol::Exact,
                    bound: i.int_bound,
                };
                let d = t.dtype().expect("numbers");
                let y = self.value(d, &t.shape, need);
                if need.accepts(&self.info(y)) {
                    y
                } else {
                    *a
                }
            })
            .collect()
    }

    fn body_statements(&mut self) {
        let n = self.rng.range(1, 5) as usize;
        self.statements(n);
    }

    fn for_loop(&mut self) {
        // Now and then a loop at the end of its dtype's range (`hi` its largest value, or
        // its smallest counting down), which must run its trips without wrapping; its
        // counter, far from the small values statements expect, is then not visible.
        let mut at_the_end = false;
        let (d, lo, hi, step) = if self.rng.chance(0.4) {
            let d = *self
                .rng
                .pick(&[DType::I32, DType::I32, DType::I64, DType::U32, DType::I16]);
            let n = self.n.expect("set up");
            let hi = self.cast(n, d);
            let lo = self.int_const(d, &[], 0);
            let step = self.int_const(d, &[], 1);
            (d, lo, hi, step)
        } else {
            let d = *self
                .rng
                .pick(&[DType::I32, DType::I64, DType::U8, DType::U64, DType::I8]);
            let signed = d.is_signed_int();
            let s: i128 = if signed {
                *self.rng.pick(&[1, 2, 3, -1, -2])
            } else {
                *self.rng.pick(&[1, 2, 3])
            };
            let k = self.rng.range(0, MAX_TRIPS as i64) as i128;
            let lo = if signed {
                self.rng.range(-3, 3) as i128
            } else {
                self.rng.range(0, 3) as i128
            };
            // `hi` may overshoot the last iteration by less than a step.
            let hi = lo + s * k
                - if s > 0 {
                    self.rng.below(s as usize) as i128
                } else {
                    0
                };
            let hi = if !signed { hi.max(0) } else { hi };
            at_the_end = self.rng.chance(0.15);
            let (lo, hi) = match at_the_end {
                true => {
                    let bits = d.bits();
                    let (min, max) = match signed {
                        true => (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1),
                        false => (0, (1i128 << bits) - 1),
                    };
                    let shift = if s > 0 { max - hi } else { min - hi };
                    // A loop of no trips may start past the end: at it, still none.
                    ((lo + shift).clamp(min, max), hi + shift)
                }
                false => (lo, hi),
            };
            let (lo, hi, step) = (
                self.int_const(d, &[], lo),
                self.int_const(d, &[], hi),
                self.int_const(d, &[], s),
            );
            (d, lo, hi, step)
        };
        let carried = self.carried();
        self.open();
        let iv = self.new_value(Type::scalar(d), Info::EXACT);
        if !at_the_end {
            self.visible.last_mut().expect("open").push(iv);
        }
        let args = self.args_for(&carried);
        self.body_statements();
        let ys = self.yields_for(&carried, &args);
        self.push(Op::Yield(ys.clone()), vec![]);
        let mut block_args = vec![iv];
        block_args.extend(&args);
        let body = self.close(block_args);
        // Triton's `loop_unroll_factor` and `num_stages` now and then: they change no
        // result.
        let unroll = match self.rng.chance(0.2) {
            true => Some(*self.rng.pick(&[1u32, 2, 3, 4, 8])),
            false => None,
        };
        let stages = self.loop_stages();
        self.finish_region_op(
            Op::For {
                lo,
                hi,
                step,
                init: carried.iter().map(|c| c.0).collect(),
                body,
                unroll,
                stages,
            },
            &carried,
            &ys,
        );
    }

    /// Appends a region op whose results join the carried values' facts.
    fn finish_region_op(&mut self, op: Op, carried: &[(Value, Info)], ys: &[Value]) {
        let results: Vec<Value> = carried
            .iter()
            .zip(ys)
            .map(|((v, i), y)| {
                let t = self.ty(*v).clone();
                let info = i.join(self.info(*y)).join(self.info(*v));
                self.new_value(t, info)
            })
            .collect();
        let loc = self.loc();
        self.scopes.last_mut().expect("a scope").push(Inst {
            results: results.clone(),
            op,
            loc,
        });
        self.visible.last_mut().expect("a scope").extend(&results);
    }

    fn while_loop(&mut self) {
        let start = self.rng.range(-2, 2) as i128;
        let counter = self.int_const(DType::I32, &[], start);
        let mut carried = vec![(counter, Info::EXACT)];
        carried.extend(self.carried());
        let limit_const = self.rng.range(0, MAX_TRIPS as i64) as i128 + start;
        let use_n = self.rng.chance(0.4);
        // cond: counter < limit (limit = start + n or a constant).
        self.open();
        let cargs = self.args_for(&carried);
        let limit = if use_n {
            let n = self.n.expect("set up");
            let s = self.int_const(DType::I32, &[], start);
            self.binary(BinOp::Add, n, s)
        } else {
            self.int_const(DType::I32, &[], limit_const)
        };
        let c = self.cmp(CmpPred::Lt, cargs[0], limit);
        self.push(Op::Condition(c), vec![]);
        let cond = self.close(cargs);
        self.open();
        let bargs = self.args_for(&carried);
        self.body_statements();
        let one = self.int_const(DType::I32, &[], 1);
        let next = self.binary(BinOp::Add, bargs[0], one);
        let mut ys = vec![next];
        ys.extend(self.yields_for(&carried[1..], &bargs[1..]));
        self.push(Op::Yield(ys.clone()), vec![]);
        let body = self.close(bargs);
        self.finish_region_op(
            Op::While {
                init: carried.iter().map(|c| c.0).collect(),
                cond,
                body,
            },
            &carried,
            &ys,
        );
    }

    fn if_else(&mut self) {
        let d = self.random_dtype();
        let a = self.value(d, &[], Need::EXACT);
        let b = self.value(d, &[], Need::EXACT);
        let p = *self.rng.pick(CmpPred::ALL);
        let cond = self.cmp(p, a, b);
        let types: Vec<(DType, Vec<usize>)> = (0..self.rng.range(0, 2))
            .map(|_| (self.random_dtype(), self.random_shape(3)))
            .collect();
        let mut regions = Vec::new();
        let mut yields = Vec::new();
        for _ in 0..2 {
            self.open();
            self.body_statements();
            let ys: Vec<Value> = types
                .iter()
                .map(|(d, s)| {
                    let need = if self.rng.chance(0.8) {
                        Need::EXACT
                    } else {
                        Need::ANY
                    };
                    self.value(*d, s, need)
                })
                .collect();
            self.push(Op::Yield(ys.clone()), vec![]);
            regions.push(self.close(vec![]));
            yields.push(ys);
        }
        let else_region = regions.pop().expect("two");
        let then_region = regions.pop().expect("two");
        let results: Vec<Value> = types
            .iter()
            .enumerate()
            .map(|(k, (d, s))| {
                let info = self.info(yields[0][k]).join(self.info(yields[1][k]));
                self.new_value(Self::tile(*d, s), info)
            })
            .collect();
        let loc = self.loc();
        self.scopes.last_mut().expect("a scope").push(Inst {
            results: results.clone(),
            op: Op::If {
                cond,
                then_region,
                else_region,
            },
            loc,
        });
        self.visible.last_mut().expect("a scope").extend(&results);
    }

    fn finish(mut self) -> Case {
        let num_warps = *self.rng.pick(&[1, 2, 4]);
        let body = Block {
            args: vec![],
            insts: self.scopes.pop().expect("the body"),
        };
        Case {
            seed: self.seed,
            function: Function {
                name: "fuzz".into(),
                params: self.params,
                body,
                types: self.types,
            },
            grid: self.grid,
            num_warps,
            args: self.args,
            expect: Vec::new(),
            out_of_bounds: false,
            views: Vec::new(),
            row_strides: self.walked.into_iter().map(|w| w.stride).collect(),
        }
    }
}
