//! What the comparison may assume of each value: whether every device must agree on it
//! bit for bit, within a tolerance, or not at all, and whether a float is known to hold
//! small integers (so that its sums and dots are exact in any order).
//!
//! The generator builds programs whose stored values are reliable; [`analyze`] recomputes
//! the same facts from the IR alone, so a shrunk or hand-edited case is judged by the same
//! rules. A loop is assumed to run at most [`MAX_TRIPS`] times (the generator's promise).

use std::collections::HashMap;
use tritium_dsl::ir::{
    BinOp, Block, Const, DType, Function, Inst, Op, ReduceOp, ScanOp, Type, UnOp, Value,
};

/// How far devices may disagree on a value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tol {
    /// Bit for bit (every NaN equal to every NaN).
    Exact,
    /// Within this many units in the last place of the value's dtype (transcendental
    /// functions: each device has its own polynomial).
    Ulps(u32),
    /// Not comparable: the value depends on an order the semantics leave open (a shared
    /// atomic's old value) or an approximate value went through an op that amplifies
    /// differences (a comparison, a cast to an integer, a sum of arbitrary floats).
    Unreliable,
}

/// The ulps a transcendental function may differ by across devices, in its result dtype
/// (f32 `exp2` on CUDA is `ex2.approx.ftz`, 2 ulps and subnormal results flushed to zero:
/// see `compare::close`; the others are within 1 ulp of exact;
/// f16/bf16 round the f32 result, so they differ by at most one step).
pub fn transcendental_ulps(d: DType) -> u32 {
    if d.is_narrow_float() {
        1
    } else {
        4
    }
}

/// Facts about one value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Info {
    /// How far devices may disagree.
    pub tol: Tol,
    /// For floats: every element is an integer of magnitude at most this (never NaN or
    /// infinite), so sums and products of few of them are exact in any order. For
    /// integers: every element's magnitude is at most this (a constant's, a remainder's),
    /// so that a cast to a float is bounded by it rather than by the dtype's range.
    pub int_bound: Option<f64>,
    /// For floats: no element is below zero (NaN and -0 may occur), so a sum of them in
    /// any order is within a relative bound of the exact sum (see [`sum_ulps`]).
    pub nonneg: bool,
}

impl Info {
    /// Bit-exact, nothing known about the range.
    pub const EXACT: Info = Info {
        tol: Tol::Exact,
        int_bound: None,
        nonneg: false,
    };

    /// Not comparable.
    pub const UNRELIABLE: Info = Info {
        tol: Tol::Unreliable,
        int_bound: None,
        nonneg: false,
    };

    /// Bit-exact small integers of magnitude at most `b`.
    pub fn ints(b: f64) -> Info {
        Info {
            tol: Tol::Exact,
            int_bound: Some(b),
            nonneg: false,
        }
    }

    /// True when devices must agree bit for bit.
    pub fn is_exact(&self) -> bool {
        self.tol == Tol::Exact
    }

    /// The least upper bound: what holds of a value that is either `self` or `o`.
    pub fn join(self, o: Info) -> Info {
        Info {
            tol: self.tol.max(o.tol),
            int_bound: match (self.int_bound, o.int_bound) {
                (Some(a), Some(b)) => Some(a.max(b)),
                _ => None,
            },
            nonneg: self.nonneg && o.nonneg,
        }
    }

    /// `self`, known to hold no element below zero.
    pub fn nonneg(self) -> Info {
        Info {
            nonneg: true,
            ..self
        }
    }

    /// `self` with its integer bound dropped where a value of type `t` cannot hold it
    /// exactly (pointers, floats too narrow for it, integers whose largest value is
    /// below it: past it the value may have wrapped).
    pub fn fit(mut self, t: &Type) -> Info {
        if let Some(b) = self.int_bound {
            let holds = |d: DType| match d.is_float() {
                true => b <= exact_int_limit(d),
                false => d.is_int() && b <= int_max(d),
            };
            if !t.dtype().is_some_and(holds) {
                self.int_bound = None;
            }
        }
        self
    }
}

/// The largest integer magnitude below which every integer is exact in `d` (floats).
pub fn exact_int_limit(d: DType) -> f64 {
    match d {
        DType::F16 => 2048.0,
        DType::BF16 => 256.0,
        // 2^(mantissa bits + 1).
        DType::F8E4M3 => 16.0,
        DType::F8E5M2 => 8.0,
        // 0 and ±1 only: its largest value is 1.75.
        DType::F8E4B15 => 1.0,
        DType::F32 => 16_777_216.0,
        DType::F64 => 9_007_199_254_740_992.0,
        _ => 0.0,
    }
}

/// The dtype sums and dots of `d` accumulate in (f16/bf16 in f32).
pub fn accumulator(d: DType) -> DType {
    d.accumulator()
}

/// What the comparison knows of each pointer parameter's memory.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Memory {
    /// Read-only input; elements are integers of magnitude at most the bound when given.
    Input(Option<f64>),
    /// Written by each program in its own region: loads see exact values.
    Output,
    /// Atomics from every program on shared elements: old values are unreliable.
    SharedAtomics,
}

/// Facts about every value of a function and what its stores write.
#[derive(Debug, Clone)]
pub struct Facts {
    /// Indexed by value.
    pub values: Vec<Info>,
    /// Per parameter index: the join of what stores and atomics write through it.
    pub stored: HashMap<usize, Info>,
}

/// Facts about every value of `f` given each parameter's memory (`None` for scalars).
pub fn analyze(f: &Function, memory: &[Option<Memory>]) -> Facts {
    let mut a = Analysis {
        f,
        infos: vec![Info::EXACT; f.types.len()],
        param_memory: HashMap::new(),
        roots: roots_through_addresses(f),
        stored: HashMap::new(),
        writes: HashMap::new(),
        consts: HashMap::new(),
    };
    f.walk(&mut |inst| {
        if let (Op::Const(Const::Int(c)), [r]) = (&inst.op, inst.results.as_slice()) {
            a.consts.insert(*r, *c);
        }
    });
    for (p, m) in f.params.iter().zip(memory) {
        if let Some(m) = m {
            a.param_memory.insert(a.param_index(p.value), *m);
        }
    }
    // The second pass sees in every load what any store of the first wrote.
    a.block(&f.body);
    a.block(&f.body);
    // Shared memory ends the same in any order of the programs only when every write to
    // it is an integer atomic of one kind: adds commute, maxes commute, and/or/xor commute,
    // two kinds do not.
    for (p, kinds) in &a.writes {
        let one_kind = kinds.len() == 1
            && ["add", "max", "min", "and", "or", "xor"].contains(&kinds[0].as_str());
        let int = f
            .ty(f.params[*p].value)
            .elem
            .pointee()
            .is_some_and(|d| d.is_int());
        if a.param_memory.get(p) == Some(&Memory::SharedAtomics) && !(one_kind && int) {
            a.stored.insert(*p, Info::UNRELIABLE);
        }
    }
    Facts {
        values: a.infos,
        stored: a.stored,
    }
}

/// `f.pointer_roots()`, where a pointer the generator computes through its address
/// (`inttoptr(ptrtoint(p) + …)`, which stays in `p`'s buffer) gets `p`'s roots rather than
/// every parameter's.
fn roots_through_addresses(f: &Function) -> HashMap<Value, Vec<usize>> {
    let mut defs: HashMap<Value, Op> = HashMap::new();
    f.walk(&mut |inst| {
        for r in &inst.results {
            defs.insert(*r, inst.op.clone());
        }
    });
    fn source(v: Value, defs: &HashMap<Value, Op>) -> Option<Value> {
        match defs.get(&v)? {
            Op::PtrToInt(p) => Some(*p),
            Op::Binary(BinOp::Add, a, b) => source(*a, defs).or_else(|| source(*b, defs)),
            Op::Cast(a) => source(*a, defs),
            _ => None,
        }
    }
    fn rewrite(b: &mut Block, defs: &HashMap<Value, Op>) {
        for inst in &mut b.insts {
            if let Op::IntToPtr(x) = inst.op {
                if let Some(p) = source(x, defs) {
                    // Same shape as the result: the roots analysis unions pointer operands.
                    inst.op = Op::Reshape(p);
                }
            }
            for r in inst.op.regions_mut() {
                rewrite(r, defs);
            }
        }
    }
    let mut g = f.clone();
    rewrite(&mut g.body, &defs);
    g.pointer_roots()
}

struct Analysis<'f> {
    f: &'f Function,
    infos: Vec<Info>,
    param_memory: HashMap<usize, Memory>,
    roots: HashMap<Value, Vec<usize>>,
    /// The join of what the stores write through each output parameter.
    stored: HashMap<usize, Info>,
    /// The kinds of write to each parameter (`store`, an atomic op's name, `cas`, or
    /// `unknown` for an indirect atomic whose kind is not a constant).
    writes: HashMap<usize, Vec<String>>,
    /// Integer constants, for the kind of an indirect atomic.
    consts: HashMap<Value, i128>,
}

/// Most times a loop body runs (the generator's promise; the analysis iterates that often).
pub const MAX_TRIPS: usize = 4;

impl Analysis<'_> {
    fn param_index(&self, v: Value) -> usize {
        self.f
            .params
            .iter()
            .position(|p| p.value == v)
            .expect("a parameter")
    }

    fn get(&self, v: Value) -> Info {
        self.infos[v.index()]
    }

    fn set(&mut self, v: Value, i: Info) {
        self.infos[v.index()] = i.fit(self.f.ty(v));
    }

    fn block(&mut self, b: &Block) {
        for inst in &b.insts {
            self.inst(inst);
        }
    }

    /// Runs `blocks` up to `MAX_TRIPS + 1` times, each trip binding every list of `args`
    /// to the current facts and joining what the last block yields into them; a bound
    /// still growing at the end is dropped (widening).
    fn carried(&mut self, args: &[&[Value]], init: &[Info], blocks: &[&Block]) -> Vec<Info> {
        let mut cur: Vec<Info> = init.to_vec();
        for trip in 0..=MAX_TRIPS + 1 {
            for list in args {
                for (a, i) in list.iter().zip(&cur) {
                    self.set(*a, *i);
                }
            }
            for b in blocks {
                self.block(b);
            }
            let ys = blocks.last().expect("a body").yields();
            let next: Vec<Info> = cur
                .iter()
                .zip(ys)
                .map(|(c, y)| c.join(self.get(*y)))
                .collect();
            if next == cur {
                return cur;
            }
            cur = next;
            if trip == MAX_TRIPS {
                for i in &mut cur {
                    i.int_bound = None;
                }
            }
        }
        cur
    }

    fn inst(&mut self, inst: &Inst) {
        match &inst.op {
            Op::Store { ptr, value, .. } => {
                self.record_store(*ptr, self.get(*value));
                self.record_write(*ptr, "store");
            }
            Op::Custom(c) => {
                let f = self.f;
                if c.writes_memory() {
                    // An indirect atomic writes values of its inputs through its pointers.
                    let written = c
                        .ins
                        .iter()
                        .filter(|v| f.ty(**v).dtype().is_some())
                        .fold(Info::EXACT, |a, v| a.join(self.get(*v)));
                    let kind = match (c.name.as_str(), c.ins.get(4)) {
                        ("__builtin_indirect_atomic", Some(k)) => match self.consts.get(k) {
                            Some(0) => "add",
                            Some(1) => "max",
                            Some(2) => "min",
                            Some(3) => "xchg",
                            Some(_) => "none",
                            None => "unknown",
                        },
                        _ => "unknown",
                    };
                    for p in c.ins.iter().filter(|v| f.ty(**v).dtype().is_none()) {
                        self.record_store(*p, written);
                        if kind != "none" {
                            self.record_write(*p, kind);
                        }
                    }
                }
                let out = transfer(
                    &inst.op,
                    inst.results.first().copied(),
                    &|v| f.ty(v),
                    &|v| self.get(v),
                    &|p| self.memory_info(p),
                )
                .unwrap_or(Info::EXACT);
                for res in &inst.results {
                    self.set(*res, out);
                }
            }
            Op::For { init, body, .. } => {
                let init: Vec<Info> = init.iter().map(|v| self.get(*v)).collect();
                self.set(body.args[0], Info::EXACT);
                let out = self.carried(&[&body.args[1..]], &init, &[body]);
                for (res, i) in inst.results.iter().zip(out) {
                    self.set(*res, i);
                }
            }
            Op::While { init, cond, body } => {
                let init: Vec<Info> = init.iter().map(|v| self.get(*v)).collect();
                let mut out = self.carried(&[&cond.args, &body.args], &init, &[cond, body]);
                // The trip count depends on the condition: it must be exact.
                if let Some(Op::Condition(c)) = cond.insts.last().map(|i| &i.op) {
                    if !self.get(*c).is_exact() {
                        out = vec![Info::UNRELIABLE; out.len()];
                    }
                }
                for (res, i) in inst.results.iter().zip(out) {
                    self.set(*res, i);
                }
            }
            Op::If {
                cond,
                then_region,
                else_region,
            } => {
                let c = self.get(*cond);
                self.block(then_region);
                self.block(else_region);
                let (t, e) = (then_region.yields(), else_region.yields());
                for (k, res) in inst.results.iter().enumerate() {
                    let i = exact_only(&[c], self.get(t[k]).join(self.get(e[k])));
                    self.set(*res, i);
                }
            }
            op => {
                if let Op::Atomic { ptr, value, .. } | Op::AtomicCas { ptr, value, .. } = op {
                    self.record_store(*ptr, self.get(*value));
                }
                match op {
                    Op::Atomic { ptr, op, .. } => self.record_write(*ptr, op.name()),
                    Op::AtomicCas { ptr, .. } => self.record_write(*ptr, "cas"),
                    _ => {}
                }
                let f = self.f;
                let info = transfer(
                    op,
                    inst.results.first().copied(),
                    &|v| f.ty(v),
                    &|v| self.get(v),
                    &|p| self.memory_info(p),
                );
                if let (Some(r), Some(i)) = (inst.results.first(), info) {
                    self.set(*r, i);
                }
            }
        }
    }

    fn record_write(&mut self, ptr: Value, kind: &str) {
        for p in self.roots.get(&ptr).cloned().into_iter().flatten() {
            let kinds = self.writes.entry(p).or_default();
            if !kinds.iter().any(|k| k == kind) {
                kinds.push(kind.to_string());
            }
        }
    }

    fn record_store(&mut self, ptr: Value, v: Info) {
        for p in self.roots.get(&ptr).cloned().into_iter().flatten() {
            let s = self.stored.entry(p).or_insert(v);
            *s = s.join(v);
        }
    }

    /// What a load through `ptr` sees: the join over the parameters it derives from.
    fn memory_info(&self, ptr: Value) -> Info {
        let mut out: Option<Info> = None;
        for p in self.roots.get(&ptr).into_iter().flatten() {
            let i = match self.param_memory.get(p) {
                Some(Memory::Input(bound)) => input_info(*bound, self.f.ty(ptr)),
                // Elements no store wrote keep their arbitrary initial values.
                Some(Memory::Output) | None => Info {
                    tol: self.stored.get(p).map_or(Tol::Exact, |s| s.tol),
                    ..Info::EXACT
                },
                Some(Memory::SharedAtomics) => Info::UNRELIABLE,
            };
            out = Some(out.map_or(i, |o| o.join(i)));
        }
        out.unwrap_or(Info::EXACT)
    }
}

/// What a load through a pointer of type `ptr` from an input buffer of bound `bound` sees:
/// small integers up to the bound where its elements are floats (only those are drawn
/// within it; an integer buffer holds any values).
pub fn input_info(bound: Option<f64>, ptr: &Type) -> Info {
    let floats = ptr.elem.pointee().is_some_and(DType::is_float);
    Info {
        int_bound: bound.filter(|_| floats),
        ..Info::EXACT
    }
}

/// The facts about the result of a non-region op `op` (`None` for ops without results),
/// given the types and facts of its operands and what a load through a pointer sees.
pub fn transfer<'t>(
    op: &Op,
    result: Option<Value>,
    ty: &dyn Fn(Value) -> &'t Type,
    get: &dyn Fn(Value) -> Info,
    memory: &dyn Fn(Value) -> Info,
) -> Option<Info> {
    Some(match op {
        Op::Const(c) => {
            let i = match c {
                Const::Float(x) if x.is_finite() && x.fract() == 0.0 => Info::ints(x.abs()),
                Const::Int(i) => Info::ints((*i as f64).abs()),
                _ => Info::EXACT,
            };
            let nonneg = match c {
                Const::Float(x) => x.is_nan() || x.is_sign_positive(),
                Const::Int(i) => *i >= 0,
            };
            Info { nonneg, ..i }
        }
        Op::ProgramId(_) | Op::NumPrograms(_) | Op::Arange { .. } => Info::EXACT,
        Op::Splat(x)
        | Op::Broadcast(x)
        | Op::ExpandDims { x, .. }
        | Op::Reshape(x)
        | Op::Permute { x, .. }
        | Op::Flip { x, .. }
        | Op::Hint { x, .. } => get(*x),
        Op::Gather { src, index, .. } => {
            let zero = Info {
                tol: Tol::Exact,
                int_bound: Some(0.0),
                nonneg: true,
            };
            exact_only(&[get(*index)], get(*src).join(zero))
        }
        Op::Binary(op, a, b) => binary(*op, get(*a), get(*b), ty(*a)),
        Op::Unary(op, x) => unary(*op, get(*x), ty(*x)),
        Op::Cmp(_, a, b) => exact_only(&[get(*a), get(*b)], Info::EXACT),
        Op::Select(c, a, b) => exact_only(&[get(*c)], get(*a).join(get(*b))),
        Op::Fma(a, b, c) => {
            let (a, b, c) = (get(*a), get(*b), get(*c));
            let bound = match (a.int_bound, b.int_bound, c.int_bound) {
                (Some(x), Some(y), Some(z)) => Some(x * y + z),
                _ => None,
            };
            exact_only(
                &[a, b, c],
                Info {
                    int_bound: bound,
                    nonneg: a.nonneg && b.nonneg && c.nonneg,
                    ..Info::EXACT
                },
            )
        }
        Op::Cast(x) => cast(get(*x), ty(*x), ty(result?)),
        // Bits are exact, except a float's NaN payload: the interpreter holds floats as
        // f64 and quiets signaling NaNs. A float known to hold small integers has none.
        Op::Bitcast(x) => {
            let xi = get(*x);
            let from_float = ty(*x).dtype().is_some_and(|d| d.is_float());
            if from_float && xi.int_bound.is_none() {
                Info::UNRELIABLE
            } else {
                exact_only(&[xi], Info::EXACT)
            }
        }
        Op::AddPtr(p, o) => exact_only(&[get(*p), get(*o)], Info::EXACT),
        // Addresses differ between the devices' copies of a buffer: only pointers made
        // back from them are compared (through what they load and store).
        Op::PtrToInt(_) => Info::UNRELIABLE,
        Op::IntToPtr(_) => Info::EXACT,
        // In order on every target: exact when the input is; running sums of small
        // integers stay small integers.
        Op::Scan { op, x, axis, .. } => {
            let (xi, n) = (get(*x), ty(*x).shape[*axis as usize] as f64);
            let bound = match op {
                ScanOp::Sum => xi.int_bound.map(|b| b * n),
                ScanOp::Prod => xi.int_bound.filter(|b| *b <= 1.0),
            };
            let d = ty(*x).dtype().expect("numbers");
            let int_bound = bound.filter(|b| !d.is_float() || *b <= exact_int_limit(d));
            exact_only(
                &[xi],
                Info {
                    int_bound,
                    ..Info::EXACT
                },
            )
        }
        Op::Reduce { op, x, axis } => {
            let xt = ty(*x);
            reduce(*op, get(*x), xt, xt.shape[*axis as usize])
        }
        Op::Dot { a, b, acc } => {
            let k = ty(*a).shape[1];
            dot(get(*a), get(*b), get(*acc), ty(*acc), k)
        }
        Op::Load {
            ptr, mask, other, ..
        } => {
            let mut deps = vec![get(*ptr)];
            deps.extend(mask.map(get));
            let loaded = memory(*ptr);
            let loaded = match (mask, other) {
                (Some(_), Some(o)) => loaded.join(get(*o)),
                (Some(_), None) => loaded.join(Info::ints(0.0)),
                _ => loaded,
            };
            exact_only(&deps, loaded)
        }
        Op::Atomic {
            ptr, value, mask, ..
        } => {
            let mut deps = vec![get(*ptr), get(*value)];
            deps.extend(mask.map(get));
            exact_only(&deps, memory(*ptr))
        }
        Op::AtomicCas { ptr, cmp, value } => {
            exact_only(&[get(*ptr), get(*cmp), get(*value)], memory(*ptr))
        }
        Op::Custom(c) => {
            // Results mix the operands with what the pointers read (a gather) or held (an
            // atomic's old values): exact when all of them are.
            let mut deps = Vec::new();
            let mut read = Info::EXACT;
            for v in c.ins.iter().chain(&c.outs) {
                if ty(*v).dtype().is_some() {
                    deps.push(get(*v));
                } else {
                    read = read.join(memory(*v));
                }
            }
            exact_only(
                &deps,
                Info {
                    tol: read.tol,
                    ..Info::EXACT
                },
            )
        }
        Op::Store { .. }
        | Op::Assert { .. }
        | Op::Print { .. }
        | Op::For { .. }
        | Op::If { .. }
        | Op::While { .. }
        | Op::Yield(_)
        | Op::Condition(_) => return None,
    })
}

/// `result` when every dependency is exact, else unreliable.
fn exact_only(deps: &[Info], result: Info) -> Info {
    if deps.iter().all(Info::is_exact) {
        result
    } else {
        Info::UNRELIABLE
    }
}

fn bound2(a: Info, b: Info, f: impl Fn(f64, f64) -> f64) -> Option<f64> {
    Some(f(a.int_bound?, b.int_bound?))
}

fn binary(op: BinOp, a: Info, b: Info, t: &Type) -> Info {
    let is_float = t.dtype().is_some_and(DType::is_float);
    if !is_float {
        // Integers: a remainder is smaller than its divisor (and no larger than its
        // dividend; `x % 0` is 0), a max or min one of its operands.
        let int_bound = match op {
            BinOp::Rem => b
                .int_bound
                .map(|d| (d - 1.0).max(0.0))
                .map(|r| a.int_bound.map_or(r, |x| x.min(r))),
            BinOp::Max | BinOp::Min => bound2(a, b, f64::max),
            _ => None,
        };
        return exact_only(
            &[a, b],
            Info {
                int_bound,
                ..Info::EXACT
            },
        );
    }
    let nonneg = a.nonneg && b.nonneg;
    let exact = |int_bound: Option<f64>| {
        exact_only(
            &[a, b],
            Info {
                int_bound,
                nonneg,
                ..Info::EXACT
            },
        )
    };
    match op {
        // maximumNumber/minimumNumber: the result is one of the operands (a NaN operand
        // gives the other, so only two non-negative operands give a non-negative result).
        BinOp::Max | BinOp::Min => Info {
            tol: a.tol.max(b.tol),
            int_bound: bound2(a, b, f64::max),
            nonneg,
        },
        BinOp::Add => exact(bound2(a, b, |x, y| x + y)),
        BinOp::Sub => Info {
            nonneg: false,
            ..exact(bound2(a, b, |x, y| x + y))
        },
        BinOp::Mul => exact(bound2(a, b, |x, y| x * y)),
        BinOp::Div => exact(None),
        _ => Info {
            nonneg: false,
            ..exact(None)
        },
    }
}

fn unary(op: UnOp, x: Info, t: &Type) -> Info {
    let d = t.dtype().expect("numbers");
    match op {
        // An unsigned negation wraps, and so, on an integer, does `not`'s every bit: no
        // magnitude bound left (a signed one's is at most the largest value, which negates).
        UnOp::Neg if !d.is_float() && !d.is_signed_int() => Info {
            int_bound: None,
            nonneg: false,
            ..x
        },
        UnOp::Neg => Info { nonneg: false, ..x },
        UnOp::Abs => x.nonneg(),
        UnOp::Not => Info {
            int_bound: None,
            ..x
        },
        UnOp::Floor | UnOp::Ceil | UnOp::Trunc | UnOp::Round | UnOp::Rint | UnOp::Sqrt => {
            exact_only(
                &[x],
                Info {
                    int_bound: if op == UnOp::Sqrt { None } else { x.int_bound },
                    // sqrt(x < 0) is NaN; the roundings keep the sign.
                    nonneg: op == UnOp::Sqrt || x.nonneg,
                    ..Info::EXACT
                },
            )
        }
        UnOp::Exp | UnOp::Exp2 | UnOp::Log | UnOp::Log2 | UnOp::Sin | UnOp::Cos | UnOp::Rsqrt => {
            exact_only(
                &[x],
                Info {
                    tol: Tol::Ulps(transcendental_ulps(d)),
                    int_bound: None,
                    nonneg: matches!(op, UnOp::Exp | UnOp::Exp2 | UnOp::Rsqrt),
                },
            )
        }
    }
}

fn cast(x: Info, from: &Type, to: &Type) -> Info {
    let (fd, td) = (from.dtype().expect("number"), to.dtype().expect("number"));
    if !x.is_exact() {
        // Rounding an approximate float to another float keeps it approximate (one more
        // step of the narrower type); anything else amplifies the difference.
        return if fd.is_float() && td.is_float() {
            Info {
                tol: Tol::Ulps(match x.tol {
                    Tol::Ulps(u) if td.bits() >= fd.bits() => u,
                    Tol::Ulps(u) => u.min(2),
                    _ => 2,
                }),
                int_bound: None,
                nonneg: x.nonneg,
            }
        } else {
            Info::UNRELIABLE
        };
    }
    let bound = if fd.is_float() {
        x.int_bound
    } else {
        Some(x.int_bound.map_or(int_range(fd), |b| b.min(int_range(fd))))
    };
    Info {
        tol: Tol::Exact,
        int_bound: if td.is_float() { bound } else { None },
        nonneg: if fd.is_float() {
            x.nonneg
        } else {
            !fd.is_signed_int()
        },
    }
}

/// The largest value an integer dtype holds.
fn int_max(d: DType) -> f64 {
    match d {
        d if d.is_signed_int() => 2f64.powi(d.bits() as i32 - 1) - 1.0,
        d => 2f64.powi(d.bits() as i32) - 1.0,
    }
}

/// The largest magnitude an integer dtype holds.
fn int_range(d: DType) -> f64 {
    match d {
        DType::Bool => 1.0,
        d if d.is_signed_int() => 2f64.powi(d.bits() as i32 - 1),
        d => 2f64.powi(d.bits() as i32) - 1.0,
    }
}

/// How many ulps (of the sum's dtype `d`) two sums of `n` non-negative elements in
/// different orders may differ by, on top of their inputs' ulps `input`: each order is
/// within `(n - 1)·eps/2·s` of the exact sum `s` (so two within `2n` ulps of `s`), inputs
/// within `u` ulps each move the sum by at most `2u + 1` ulps of it. f16/bf16 sum in f32
/// and round once: the orders' difference is far below one step of `d`.
pub fn sum_ulps(d: DType, n: usize, input: u32) -> u32 {
    let order = if d.is_narrow_float() { 1 } else { 2 * n as u32 };
    2 * input + 1 + order
}

fn reduce(op: ReduceOp, x: Info, xt: &Type, n: usize) -> Info {
    let d = xt.dtype().expect("numbers");
    if !d.is_float() {
        return exact_only(&[x], Info::EXACT);
    }
    match op {
        ReduceOp::Max | ReduceOp::Min => x,
        ReduceOp::ArgMax | ReduceOp::ArgMin => exact_only(&[x], Info::EXACT),
        // The verifier rejects float xor.
        ReduceOp::Xor => Info::UNRELIABLE,
        ReduceOp::Sum => match (x.int_bound, x.tol) {
            (Some(b), Tol::Exact) if b * n as f64 <= exact_int_limit(accumulator(d)) => {
                Info::ints(b * n as f64)
            }
            // Reassociated sums of non-negative values: within a relative bound.
            (_, Tol::Exact) if x.nonneg => Info {
                tol: Tol::Ulps(sum_ulps(d, n, 0)),
                ..Info::EXACT
            }
            .nonneg(),
            (_, Tol::Ulps(u)) if x.nonneg => Info {
                tol: Tol::Ulps(sum_ulps(d, n, u)),
                ..Info::EXACT
            }
            .nonneg(),
            _ => Info::UNRELIABLE,
        },
    }
}

fn dot(a: Info, b: Info, acc: Info, acc_t: &Type, k: usize) -> Info {
    let d = acc_t.dtype().expect("numbers");
    if !d.is_float() {
        return exact_only(&[a, b, acc], Info::EXACT);
    }
    let exact = a.is_exact() && b.is_exact() && acc.is_exact();
    match (a.int_bound, b.int_bound, acc.int_bound) {
        (Some(x), Some(y), Some(z))
            if exact && x * y * k as f64 + z <= exact_int_limit(accumulator(d)) =>
        {
            Info::ints(x * y * k as f64 + z)
        }
        // k exact products (fused or not, each within half an ulp) and the accumulator:
        // a sum of k + 1 non-negative terms, a product underflowing adds at most half an
        // ulp of the result each.
        _ if exact && a.nonneg && b.nonneg && acc.nonneg => Info {
            tol: Tol::Ulps(sum_ulps(d, k + 1, 1) + k as u32),
            ..Info::EXACT
        }
        .nonneg(),
        _ => Info::UNRELIABLE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tritium_dsl::ir::parse_function;

    /// Integer bounds: a constant's magnitude, a remainder below its divisor (and no larger
    /// than its dividend), a max of two bounded values; an integer cast to a float is
    /// bounded by them rather than by the integer dtype's range, so that `arange % 17` cast
    /// to f16 is a small integer (the fuzzer's column-varying `dot` operands).
    #[test]
    fn integer_bounds_pass_through_remainders_and_casts() {
        let f = parse_function(
            "kernel @k(p0 %0: i32) {
  %1 = arange {start = 0, end = 64} : tile<64xi32> loc(\"t.rs\":1:1)
  %2 = const {value = 17} : tile<64xi32> loc(\"t.rs\":2:1)
  %3 = rem %1, %2 : tile<64xi32> loc(\"t.rs\":3:1)
  %4 = cast %3 : tile<64xf16> loc(\"t.rs\":4:1)
  %5 = cast %1 : tile<64xf16> loc(\"t.rs\":5:1)
  %6 = const {value = 5} : tile<64xi32> loc(\"t.rs\":6:1)
  %7 = rem %6, %2 : tile<64xi32> loc(\"t.rs\":7:1)
  %8 = max %3, %6 : tile<64xi32> loc(\"t.rs\":8:1)
  %9 = rem %1, %0 : tile<64xi32> loc(\"t.rs\":9:1)
  %10 = const {value = 300} : tile<64xi32> loc(\"t.rs\":10:1)
  %11 = cast %10 : tile<64xi8> loc(\"t.rs\":11:1)
  %12 = const {value = 100} : tile<64xi32> loc(\"t.rs\":12:1)
  %13 = rem %1, %12 : tile<64xi32> loc(\"t.rs\":13:1)
  %14 = cast %13 : tile<64xfp8e5> loc(\"t.rs\":14:1)
  %15 = const {value = 6} : tile<64xu16> loc(\"t.rs\":15:1)
  %16 = not %15 : tile<64xu16> loc(\"t.rs\":16:1)
  %17 = neg %15 : tile<64xu16> loc(\"t.rs\":17:1)
  %18 = neg %6 : tile<64xi32> loc(\"t.rs\":18:1)
}",
        )
        .unwrap();
        let facts = analyze(&f, &[None]);
        let bound = |v: usize| facts.values[v].int_bound;
        let table = [
            (2, Some(17.0)),
            (3, Some(16.0)),
            (4, Some(16.0)),
            // An unbounded i32 cast to f16: past f16's exact integers.
            (5, None),
            (7, Some(5.0)),
            (8, Some(16.0)),
            // A divisor of no known bound.
            (9, None),
            // An int-to-int cast keeps no bound.
            (11, None),
            // Past E5M2's exact integers (8).
            (14, None),
            // Bitwise `not` and unsigned negation wrap (fuzz seed 5670040: `not` of a u16
            // 6 kept its bound, and its cast failed an `assert` that the bound promised).
            (16, None),
            (17, None),
            (18, Some(5.0)),
        ];
        for (v, want) in table {
            assert_eq!(bound(v), want, "%{v}");
        }
    }
}
