//! Operations. Structured control flow carries its regions inline.

use super::{Block, CacheHints, CustomCall, DType, Value};

named_enum! {
    /// Which promise an [`Op::Hint`] makes.
    HintKind {
        /// Elements are multiples of the value.
        MultipleOf = "multiple_of",
        /// Runs of that many consecutive integers.
        MaxContiguous = "max_contiguous",
        /// Runs of that many equal elements.
        MaxConstancy = "max_constancy",
        /// On a bool tile, not a promise: its lanes are usually all equal to the value (0
        /// or 1), so a code generator may give the code that reads it a copy for when they
        /// are, where the other cases fold away (the CPU versions its loops on it; see
        /// `cpu/codegen/likely.rs`). Every result is the same whichever copy runs.
        Likely = "likely",
    }
}

named_enum! {
    /// Binary elementwise arithmetic and bit operations.
    BinOp {
        /// `a + b`.
        Add = "add",
        /// `a - b`.
        Sub = "sub",
        /// `a * b`.
        Mul = "mul",
        /// `a / b`: true division for floats, truncating for integers (`x / 0 == 0`).
        Div = "div",
        /// `a % b`: remainder with the sign of `a` (`x % 0 == 0`).
        Rem = "rem",
        /// Bitwise/logical and.
        And = "and",
        /// Bitwise/logical or.
        Or = "or",
        /// Bitwise/logical xor.
        Xor = "xor",
        /// Left shift; the amount is taken modulo the bit width.
        Shl = "shl",
        /// Right shift (arithmetic for signed); the amount is taken modulo the bit width.
        Shr = "shr",
        /// Elementwise maximum (NaN-ignoring for floats, as `maxnum`).
        Max = "max",
        /// Elementwise minimum (NaN-ignoring for floats, as `minnum`).
        Min = "min",
    }
}

named_enum! {
    /// Unary elementwise operations.
    UnOp {
        /// Arithmetic negation.
        Neg = "neg",
        /// Bitwise/logical not.
        Not = "not",
        /// `e^x`.
        Exp = "exp",
        /// `2^x`.
        Exp2 = "exp2",
        /// Natural logarithm.
        Log = "log",
        /// Base-2 logarithm.
        Log2 = "log2",
        /// Square root.
        Sqrt = "sqrt",
        /// `1 / sqrt(x)`.
        Rsqrt = "rsqrt",
        /// Absolute value.
        Abs = "abs",
        /// Sine.
        Sin = "sin",
        /// Cosine.
        Cos = "cos",
        /// Round toward negative infinity.
        Floor = "floor",
        /// Round toward positive infinity.
        Ceil = "ceil",
        /// Round toward zero.
        Trunc = "trunc",
        /// Round to the nearest integer, halfway cases away from zero (C's `round`).
        Round = "round",
        /// Round to the nearest integer, halfway cases to even (C's `rint`/`nearbyint`).
        Rint = "rint",
    }
}

impl ScanOp {
    /// The binary op a scan folds with.
    pub fn binary(self) -> BinOp {
        match self {
            ScanOp::Sum => BinOp::Add,
            ScanOp::Prod => BinOp::Mul,
        }
    }
}

impl AtomicOp {
    /// True for the bitwise ops, defined on integers only.
    pub fn bitwise(self) -> bool {
        matches!(self, AtomicOp::And | AtomicOp::Or | AtomicOp::Xor)
    }

    /// Why this atomic cannot act on elements of `d` (`None` when it can), as Triton
    /// decides: 32- and 64-bit integers and floats, f16 and bf16; no 8- or 16-bit integers,
    /// bools or fp8s; the bitwise ops on integers only.
    pub fn refusal(self, d: DType) -> Option<String> {
        let wide = d.size_bytes() >= 4 && !d.is_bool();
        if !wide && !matches!(d, DType::F16 | DType::BF16) {
            Some(format!(
                "atomics need 32- or 64-bit elements, f16 or bf16, got {d}"
            ))
        } else if self.bitwise() && d.is_float() {
            Some(format!("atomic_{} needs integers, got {d}", self.name()))
        } else {
            None
        }
    }
}

impl UnOp {
    /// True for the ops defined on floats only.
    pub fn float_only(self) -> bool {
        !matches!(self, UnOp::Neg | UnOp::Not | UnOp::Abs)
    }
}

named_enum! {
    /// Comparison predicates; the result is a bool tile.
    CmpPred {
        /// `==`.
        Eq = "eq",
        /// `!=`.
        Ne = "ne",
        /// `<`.
        Lt = "lt",
        /// `<=`.
        Le = "le",
        /// `>`.
        Gt = "gt",
        /// `>=`.
        Ge = "ge",
    }
}

named_enum! {
    /// Reductions along one axis.
    ReduceOp {
        /// Sum.
        Sum = "sum",
        /// Maximum.
        Max = "max",
        /// Minimum.
        Min = "min",
        /// Index (i32) of the first maximum.
        ArgMax = "argmax",
        /// Index (i32) of the first minimum.
        ArgMin = "argmin",
        /// Bitwise xor of integers or bools (Triton's `xor_sum`).
        Xor = "xor",
    }
}

named_enum! {
    /// Inclusive scans along one axis.
    ScanOp {
        /// Running sum (Triton's `cumsum`).
        Sum = "sum",
        /// Running product (Triton's `cumprod`).
        Prod = "prod",
    }
}

named_enum! {
    /// Read-modify-write atomics; each returns the old value.
    AtomicOp {
        /// `*p += v`.
        Add = "add",
        /// `*p = max(*p, v)`.
        Max = "max",
        /// `*p = min(*p, v)`.
        Min = "min",
        /// `*p = v`.
        Xchg = "xchg",
        /// `*p &= v` (integers).
        And = "and",
        /// `*p |= v` (integers).
        Or = "or",
        /// `*p ^= v` (integers).
        Xor = "xor",
    }
}

/// A constant of the result dtype; the verifier checks that it fits.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Const {
    /// An integer or bool constant, within the dtype's [range](super::DType::int_range).
    Int(i128),
    /// A floating-point constant of a float dtype (rounded to it; inf and NaN allowed).
    Float(f64),
}

/// One operation. Operands are values; results are listed on the [`Inst`](super::Inst).
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// A constant splatted to the result shape.
    Const(Const),
    /// The program's index along `axis` (i32 scalar).
    ProgramId(u32),
    /// The grid size along `axis` (i32 scalar).
    NumPrograms(u32),
    /// `[start, end)` as an i32 tile.
    Arange {
        /// First value.
        start: i64,
        /// One past the last value.
        end: i64,
    },
    /// A scalar repeated to the result shape.
    Splat(Value),
    /// A tile broadcast (size-1 dims and missing leading dims) to the result shape.
    Broadcast(Value),
    /// A size-1 dim inserted at `axis`.
    ExpandDims {
        /// The input.
        x: Value,
        /// Where the new dim goes.
        axis: u32,
    },
    /// Same elements in row-major order, another shape.
    Reshape(Value),
    /// The dims of `x` reordered: result dim `i` is `x`'s dim `dims[i]` (Triton's
    /// `permute`; `trans` of a 2-D tile is `dims = [1, 0]`).
    Permute {
        /// The input.
        x: Value,
        /// A permutation of `0..rank`.
        dims: Vec<u32>,
    },
    /// Elementwise binary op on operands of the same shape and dtype.
    Binary(BinOp, Value, Value),
    /// Elementwise unary op.
    Unary(UnOp, Value),
    /// Elementwise comparison.
    Cmp(CmpPred, Value, Value),
    /// `cond ? a : b` elementwise.
    Select(Value, Value, Value),
    /// `a * b + c` with one rounding.
    Fma(Value, Value, Value),
    /// Conversion to the result dtype (float→int saturates, NaN→0, as Rust `as`).
    Cast(Value),
    /// The same bits read as the result dtype, of the same width (Triton's
    /// `to(dtype, bitcast=True)`); bools and pointers have no bitcast.
    Bitcast(Value),
    /// A 64-bit integer (i64 or u64) read as a pointer to the result's pointee (Triton's
    /// `x.to(tl.pointer_type(...))`, as grouped GEMM's tables of addresses). The result has
    /// no provenance: checked mode compares it with every buffer of the launch.
    IntToPtr(Value),
    /// A pointer's address as the result's 64-bit integer dtype (Triton's `p.to(tl.int64)`).
    /// Addresses differ between devices and runs: only differences of them are portable.
    PtrToInt(Value),
    /// Pointer plus element offset (integer tile), elementwise.
    AddPtr(Value, Value),
    /// Elements of `src` picked along `axis` by `index` (Triton's `gather`): result element
    /// `i` is `src[i with i[axis] = index[i]]`; an index outside `0..src.shape[axis]` gives
    /// 0 (false). `index` has `src`'s rank and shape except along `axis`; the result has
    /// `index`'s shape and `src`'s dtype.
    Gather {
        /// The gathered tile.
        src: Value,
        /// Integer positions along `axis`.
        index: Value,
        /// The axis indexed.
        axis: u32,
    },
    /// `x` itself, with a promise the code generators may rely on (Triton's
    /// `multiple_of`, `max_contiguous`, `max_constancy`): per dim of `x` (or one value for
    /// all), its elements are multiples of `values[d]`, or runs of `values[d]` consecutive
    /// integers, or of equal elements, starting at multiples of `values[d]` along `d`.
    /// Compiled code trusts it, as Triton's does. Or (`likely`, on a bool tile, with one
    /// value 0 or 1) no promise, only the value its lanes usually all have.
    Hint {
        /// The promised value (an integer tile; for `likely`, a bool one).
        x: Value,
        /// Which promise.
        kind: HintKind,
        /// One value per dim of `x`, or one for all dims.
        values: Vec<u32>,
    },
    /// `x` with the order of its elements along `axis` reversed (Triton's `flip`).
    Flip {
        /// The input.
        x: Value,
        /// The reversed axis.
        axis: u32,
    },
    /// Inclusive scan of `x` along `axis` (the shape is kept): element `i` combines the
    /// elements `0..=i` of its line in index order (`i..` from the end when `reverse`), so
    /// float results are the same on every target. f16/bf16 accumulate in f32 and round
    /// each result.
    Scan {
        /// The combining op.
        op: ScanOp,
        /// The input.
        x: Value,
        /// The scanned axis.
        axis: u32,
        /// From the last element of each line to the first.
        reverse: bool,
    },
    /// Reduction along `axis`; the axis is removed from the shape.
    Reduce {
        /// Which reduction.
        op: ReduceOp,
        /// The input tile.
        x: Value,
        /// The reduced axis.
        axis: u32,
    },
    /// `a @ b + acc` for 2-D tiles.
    Dot {
        /// `[M, K]`.
        a: Value,
        /// `[K, N]`.
        b: Value,
        /// `[M, N]` accumulator; its dtype is the result dtype.
        acc: Value,
    },
    /// Loads through a pointer tile; masked-off lanes read nothing and give `other` (or 0).
    Load {
        /// Pointers.
        ptr: Value,
        /// Optional bool mask.
        mask: Option<Value>,
        /// Optional value for masked-off lanes.
        other: Option<Value>,
        /// Cache hints (no effect on results).
        hints: CacheHints,
    },
    /// Stores through a pointer tile; masked-off lanes write nothing.
    Store {
        /// Pointers.
        ptr: Value,
        /// Values.
        value: Value,
        /// Optional bool mask.
        mask: Option<Value>,
        /// Cache hints (no effect on results).
        hints: CacheHints,
    },
    /// Atomic read-modify-write; results are the old values.
    Atomic {
        /// Which op.
        op: AtomicOp,
        /// Pointers.
        ptr: Value,
        /// Operand values.
        value: Value,
        /// Optional bool mask.
        mask: Option<Value>,
    },
    /// Atomic compare-and-swap; results are the old values.
    AtomicCas {
        /// Pointers.
        ptr: Value,
        /// Expected values.
        cmp: Value,
        /// New values.
        value: Value,
    },
    /// `for iv in (lo..hi).step_by(step)` with loop-carried values.
    /// `body.args = [iv, carried...]`; the body ends with `Yield(next carried...)`.
    For {
        /// Start (integer scalar).
        lo: Value,
        /// End, exclusive.
        hi: Value,
        /// Step (non-zero; negative counts down while `iv > hi`).
        step: Value,
        /// Initial carried values.
        init: Vec<Value>,
        /// The loop body.
        body: Block,
        /// Triton's `loop_unroll_factor`: unroll this many times (`Some(1)` or less: do not
        /// unroll); `None` leaves it to the compiler. Changes no result.
        unroll: Option<u32>,
        /// Triton's `num_stages`: software-pipelining stages of this loop on GPUs
        /// (`Some(1)` or less: not pipelined); `None` takes the launch's. Changes no result.
        stages: Option<u32>,
    },
    /// `if cond { then } else { else }`; both regions end with `Yield` of the results.
    If {
        /// Bool scalar.
        cond: Value,
        /// Then region.
        then_region: Block,
        /// Else region.
        else_region: Block,
    },
    /// `while cond(carried) { carried = body(carried) }`. `cond.args` and `body.args` are the
    /// carried values; `cond` ends with `Condition`, `body` with `Yield`.
    While {
        /// Initial carried values.
        init: Vec<Value>,
        /// Computes the condition.
        cond: Block,
        /// The loop body.
        body: Block,
    },
    /// Triton's `device_assert`: in checked mode, a lane where `cond` is false (and `mask`
    /// true) fails the launch with `msg`, the lane and the program; otherwise nothing.
    Assert {
        /// Bool scalar or tile: what must hold.
        cond: Value,
        /// Optional bool mask of `cond`'s shape: lanes where it is false are not checked.
        mask: Option<Value>,
        /// The message the failure reports.
        msg: String,
    },
    /// Triton's `device_print`: prints every lane of each of `args` (operand after
    /// operand, lanes in row-major order) as `pid (x, y, z) idx (i, j) prefix: value`.
    Print {
        /// Text in front of each value.
        prefix: String,
        /// Bool or number scalars and tiles.
        args: Vec<Value>,
        /// Integers (and the bits of floats) in hexadecimal.
        hex: bool,
    },
    /// A call of user code or a `__builtin_*` (`hivm.hir.custom`); one result per out.
    Custom(Box<CustomCall>),
    /// Region terminator: the values the region produces.
    Yield(Vec<Value>),
    /// Terminator of a `While` condition region.
    Condition(Value),
}

/// [`Op::fault_kind`] of [`Op::Assert`].
pub const ASSERT_KIND: &str = "device_assert";

impl Op {
    /// The IR-text mnemonic.
    pub fn mnemonic(&self) -> &'static str {
        match self {
            Op::Const(_) => "const",
            Op::ProgramId(_) => "program_id",
            Op::NumPrograms(_) => "num_programs",
            Op::Arange { .. } => "arange",
            Op::Splat(_) => "splat",
            Op::Broadcast(_) => "broadcast",
            Op::ExpandDims { .. } => "expand_dims",
            Op::Reshape(_) => "reshape",
            Op::Permute { .. } => "permute",
            Op::Flip { .. } => "flip",
            Op::Hint { .. } => "hint",
            Op::Gather { .. } => "gather",
            Op::Binary(op, ..) => op.name(),
            Op::Unary(op, _) => op.name(),
            Op::Cmp(..) => "cmp",
            Op::Select(..) => "select",
            Op::Fma(..) => "fma",
            Op::Cast(_) => "cast",
            Op::Bitcast(_) => "bitcast",
            Op::IntToPtr(_) => "inttoptr",
            Op::PtrToInt(_) => "ptrtoint",
            Op::AddPtr(..) => "addptr",
            Op::Reduce { .. } => "reduce",
            Op::Scan { .. } => "scan",
            Op::Dot { .. } => "dot",
            Op::Load { .. } => "load",
            Op::Store { .. } => "store",
            Op::Atomic { .. } => "atomic",
            Op::AtomicCas { .. } => "atomic_cas",
            Op::For { .. } => "for",
            Op::If { .. } => "if",
            Op::While { .. } => "while",
            Op::Assert { .. } => "assert",
            Op::Print { .. } => "print",
            Op::Custom(_) => "custom",
            Op::Yield(_) => "yield",
            Op::Condition(_) => "condition",
        }
    }

    /// The value operands, in order (not including values used inside regions).
    pub fn operands(&self) -> Vec<Value> {
        match self {
            Op::Const(_) | Op::ProgramId(_) | Op::NumPrograms(_) | Op::Arange { .. } => vec![],
            Op::Splat(x)
            | Op::Broadcast(x)
            | Op::Reshape(x)
            | Op::Cast(x)
            | Op::Bitcast(x)
            | Op::IntToPtr(x)
            | Op::PtrToInt(x) => vec![*x],
            Op::ExpandDims { x, .. }
            | Op::Permute { x, .. }
            | Op::Flip { x, .. }
            | Op::Hint { x, .. }
            | Op::Unary(_, x)
            | Op::Reduce { x, .. }
            | Op::Scan { x, .. } => vec![*x],
            Op::Binary(_, a, b) | Op::Cmp(_, a, b) | Op::AddPtr(a, b) => vec![*a, *b],
            Op::Gather { src, index, .. } => vec![*src, *index],
            Op::Select(a, b, c) | Op::Fma(a, b, c) => vec![*a, *b, *c],
            Op::Dot { a, b, acc } => vec![*a, *b, *acc],
            Op::Load {
                ptr, mask, other, ..
            } => {
                let mut v = vec![*ptr];
                v.extend(mask);
                v.extend(other);
                v
            }
            Op::Store {
                ptr, value, mask, ..
            }
            | Op::Atomic {
                ptr, value, mask, ..
            } => {
                let mut v = vec![*ptr, *value];
                v.extend(mask);
                v
            }
            Op::AtomicCas { ptr, cmp, value } => vec![*ptr, *cmp, *value],
            Op::For {
                lo, hi, step, init, ..
            } => {
                let mut v = vec![*lo, *hi, *step];
                v.extend(init);
                v
            }
            Op::If { cond, .. } => vec![*cond],
            Op::Assert { cond, mask, .. } => {
                let mut v = vec![*cond];
                v.extend(mask);
                v
            }
            Op::While { init, .. } => init.clone(),
            Op::Print { args, .. } => args.clone(),
            Op::Custom(c) => c.ins.iter().chain(&c.outs).copied().collect(),
            Op::Yield(v) => v.clone(),
            Op::Condition(c) => vec![*c],
        }
    }

    /// The regions of a control-flow op, in order.
    pub fn regions(&self) -> Vec<&Block> {
        match self {
            Op::For { body, .. } => vec![body],
            Op::If {
                then_region,
                else_region,
                ..
            } => vec![then_region, else_region],
            Op::While { cond, body, .. } => vec![cond, body],
            _ => vec![],
        }
    }

    /// [`regions`](Self::regions), mutably.
    pub fn regions_mut(&mut self) -> Vec<&mut Block> {
        match self {
            Op::For { body, .. } => vec![body],
            Op::If {
                then_region,
                else_region,
                ..
            } => vec![then_region, else_region],
            Op::While { cond, body, .. } => vec![cond, body],
            _ => vec![],
        }
    }

    /// [`operands`](Self::operands), mutably (for passes that rewrite uses).
    pub fn operands_mut(&mut self) -> Vec<&mut Value> {
        match self {
            Op::Const(_) | Op::ProgramId(_) | Op::NumPrograms(_) | Op::Arange { .. } => vec![],
            Op::Splat(x)
            | Op::Broadcast(x)
            | Op::Reshape(x)
            | Op::Permute { x, .. }
            | Op::Cast(x)
            | Op::Bitcast(x)
            | Op::IntToPtr(x)
            | Op::PtrToInt(x)
            | Op::ExpandDims { x, .. }
            | Op::Unary(_, x)
            | Op::Reduce { x, .. }
            | Op::Scan { x, .. }
            | Op::Flip { x, .. }
            | Op::Hint { x, .. }
            | Op::Condition(x) => vec![x],
            Op::Binary(_, a, b) | Op::Cmp(_, a, b) | Op::AddPtr(a, b) => vec![a, b],
            Op::Gather { src, index, .. } => vec![src, index],
            Op::Select(a, b, c) | Op::Fma(a, b, c) => vec![a, b, c],
            Op::Dot { a, b, acc } => vec![a, b, acc],
            Op::Load {
                ptr, mask, other, ..
            } => {
                let mut v = vec![ptr];
                v.extend(mask.as_mut());
                v.extend(other.as_mut());
                v
            }
            Op::Store {
                ptr, value, mask, ..
            }
            | Op::Atomic {
                ptr, value, mask, ..
            } => {
                let mut v = vec![ptr, value];
                v.extend(mask.as_mut());
                v
            }
            Op::AtomicCas { ptr, cmp, value } => vec![ptr, cmp, value],
            Op::For {
                lo, hi, step, init, ..
            } => {
                let mut v = vec![lo, hi, step];
                v.extend(init.iter_mut());
                v
            }
            Op::If { cond, .. } => vec![cond],
            Op::Assert { cond, mask, .. } => {
                let mut v = vec![cond];
                v.extend(mask.as_mut());
                v
            }
            Op::While { init, .. } => init.iter_mut().collect(),
            Op::Print { args, .. } => args.iter_mut().collect(),
            Op::Custom(c) => c.ins.iter_mut().chain(c.outs.iter_mut()).collect(),
            Op::Yield(v) => v.iter_mut().collect(),
        }
    }

    /// What an op that checked mode reports faults of does: a direct memory access
    /// (`load`, `store`, `atomic`), a builtin's access through its pointer, or
    /// `device_assert`; `None` for every other op (user custom calls included: what they
    /// do with a pointer is the user's contract).
    pub fn fault_kind(&self) -> Option<&'static str> {
        match self {
            Op::Load { .. } => Some("load"),
            Op::Store { .. } => Some("store"),
            Op::Atomic { .. } | Op::AtomicCas { .. } => Some("atomic"),
            Op::Assert { .. } => Some(ASSERT_KIND),
            // The builtins' pointer accesses (`CustomCall::builtin_access`).
            Op::Custom(c) => match c.name.as_str() {
                "__builtin_gather_load" => Some("`__builtin_gather_load` read of src[0..bound)"),
                "__builtin_index_select" => Some("`__builtin_index_select` read of src's rows"),
                "__builtin_indirect_atomic" => Some("`__builtin_indirect_atomic` on dst[0..bound)"),
                _ => None,
            },
            _ => None,
        }
    }

    /// True for ops that write memory or report (their order relative to loads matters,
    /// and they are never removed).
    pub fn has_side_effects(&self) -> bool {
        match self {
            Op::Store { .. } | Op::Atomic { .. } | Op::AtomicCas { .. } | Op::Assert { .. } => true,
            // User code may write through any pointer it gets.
            Op::Custom(c) => c.writes_memory(),
            Op::For { .. } | Op::If { .. } | Op::While { .. } => self
                .regions()
                .iter()
                .any(|r| r.insts.iter().any(|i| i.op.has_side_effects())),
            _ => false,
        }
    }

    /// True for ops whose every lane is computed from the same lane of each operand, all of
    /// the result's shape or scalars (no layout op among them).
    pub fn is_pointwise(&self) -> bool {
        matches!(
            self,
            Op::Binary(..)
                | Op::Unary(..)
                | Op::Cmp(..)
                | Op::Select(..)
                | Op::Fma(..)
                | Op::Cast(_)
                | Op::Bitcast(_)
                | Op::IntToPtr(_)
                | Op::PtrToInt(_)
                | Op::Hint { .. }
                | Op::AddPtr(..)
        )
    }

    /// True for ops computed lane by lane from lanes of their operands.
    pub fn is_elementwise(&self) -> bool {
        self.is_pointwise()
            || matches!(
                self,
                Op::Const(_)
                    | Op::Arange { .. }
                    | Op::Splat(_)
                    | Op::Broadcast(_)
                    | Op::ExpandDims { .. }
                    | Op::Reshape(_)
                    | Op::Permute { .. }
                    | Op::Flip { .. }
                    | Op::Gather { .. }
                    | Op::Load { .. }
            )
    }
}
