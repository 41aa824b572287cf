//! What is known at compile time of the lanes of integer, bool and pointer values, per dim
//! (Triton's `AxisInfo`): runs of consecutive values, the divisibility of each run's first
//! value, and runs of equal values. A code generator proves with it that the 8 halves a
//! thread copies are one aligned 16-byte run under a mask that is the same for all 8,
//! without testing them at run time.
//!
//! Divisibility comes from constants, aranges, loop counters and the launch's
//! specialization (`multiple_of(16)` hints on arguments divisible by 16 and on pointers
//! aligned to 16 bytes, see `trace::Specialization`). Integers wrap, so a run of
//! consecutive narrow integers could jump where it wraps; a run of length `L` whose first
//! value is a multiple of `L` (a power of two) cannot: the wrap point is a multiple of it.
//! Runs are therefore capped by their divisibility wherever a narrow integer is widened
//! (a cast, or an `addptr` offset), and every run length here is a power of two.

use super::{BinOp, CmpPred, Const, Elem, Function, HintKind, Inst, Op, Type, Value};
use std::collections::HashMap;

/// The divisibility of 0 (and the cap of every divisibility).
pub const MAX_DIVISIBILITY: u64 = 1 << 40;

/// What is known of a value's lanes along each dim (one entry for a scalar).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AxisInfo {
    /// Lanes form runs of this many consecutive values (pointers: consecutive elements)
    /// along the dim, starting at lane indices that are multiples of it.
    pub contiguity: Vec<u64>,
    /// The first value of each such run (each lane where the contiguity is 1) is a
    /// multiple of this (pointers: its address, in bytes).
    pub divisibility: Vec<u64>,
    /// Lanes form runs of this many equal values along the dim, starting at multiples of
    /// it.
    pub constancy: Vec<u64>,
}

impl AxisInfo {
    /// Nothing known of a value of `t`.
    pub fn unknown(t: &Type) -> AxisInfo {
        AxisInfo::uniform(t.rank().max(1), 1, 1, 1)
    }

    fn uniform(rank: usize, contiguity: u64, divisibility: u64, constancy: u64) -> AxisInfo {
        AxisInfo {
            contiguity: vec![contiguity; rank],
            divisibility: vec![divisibility; rank],
            constancy: vec![constancy; rank],
        }
    }

    /// A value equal in every lane of `t`, divisible by `div`.
    fn splat(t: &Type, div: u64) -> AxisInfo {
        match t.rank() {
            0 => AxisInfo::uniform(1, 1, div, 1),
            _ => AxisInfo {
                contiguity: vec![1; t.rank()],
                divisibility: vec![div; t.rank()],
                constancy: t.shape.iter().map(|n| pow2_dividing(*n as u64)).collect(),
            },
        }
    }

    /// What divides every lane: the divisibility along a dim without runs.
    pub fn element_divisibility(&self) -> u64 {
        (self.contiguity.iter().zip(&self.divisibility))
            .map(|(c, d)| if *c > 1 { 1 } else { *d })
            .min()
            .unwrap_or(1)
    }

    /// The least of two infos of one type (a value that may be either).
    fn meet(&self, other: &AxisInfo) -> AxisInfo {
        let min = |a: &[u64], b: &[u64]| a.iter().zip(b).map(|(x, y)| *x.min(y)).collect();
        AxisInfo {
            contiguity: min(&self.contiguity, &other.contiguity),
            divisibility: min(&self.divisibility, &other.divisibility),
            constancy: min(&self.constancy, &other.constancy),
        }
    }
}

/// The largest power of two dividing `n` (`MAX_DIVISIBILITY` for 0).
pub fn pow2_dividing(n: u64) -> u64 {
    match n {
        0 => MAX_DIVISIBILITY,
        n => (1u64 << n.trailing_zeros()).min(MAX_DIVISIBILITY),
    }
}

/// The info of every integer, bool and pointer value of `f` (others have none; a value
/// missing from the map is [`AxisInfo::unknown`]).
pub fn axis_info(f: &Function) -> HashMap<Value, AxisInfo> {
    let mut a = Analysis {
        f,
        defs: f.defs(),
        info: HashMap::new(),
        loop_depth: 0,
    };
    // A pointer argument points at an element: aligned to its size.
    for p in &f.params {
        if let Some(d) = f.ty(p.value).elem.pointee() {
            a.info
                .insert(p.value, AxisInfo::uniform(1, 1, d.size_bytes() as u64, 1));
        }
    }
    a.block(&f.body.insts);
    a.info
}

struct Analysis<'f> {
    f: &'f Function,
    defs: HashMap<Value, &'f Inst>,
    info: HashMap<Value, AxisInfo>,
    /// `for` loops around the op being analyzed.
    loop_depth: usize,
}

/// Rounds of a loop's carried values before they are taken as unknown.
const LOOP_ROUNDS: usize = 6;

/// Loops nested deeper than this take their carried values as unknown in one pass: each
/// round of a loop analyzes the loops inside it again, so rounds at every depth would
/// cost `LOOP_ROUNDS^depth`.
const FIXED_POINT_DEPTH: usize = 2;

impl Analysis<'_> {
    fn get(&self, v: Value) -> AxisInfo {
        self.info
            .get(&v)
            .cloned()
            .unwrap_or_else(|| AxisInfo::unknown(self.f.ty(v)))
    }

    fn tracked(&self, v: Value) -> bool {
        match self.f.ty(v).elem {
            Elem::Ptr(_) => true,
            Elem::Scalar(d) => d.is_int() || d.is_bool(),
        }
    }

    fn block(&mut self, insts: &[Inst]) {
        for inst in insts {
            self.inst(inst);
        }
    }

    fn inst(&mut self, inst: &Inst) {
        match &inst.op {
            Op::For {
                lo,
                step,
                init,
                body,
                ..
            } => {
                let iv = self.scalar_div(*lo).min(self.scalar_div(*step));
                self.info
                    .insert(body.args[0], AxisInfo::uniform(1, 1, iv, 1));
                let carried = self.carried(init, &body.args[1..], body);
                for (r, c) in inst.results.iter().zip(carried) {
                    self.set(*r, c);
                }
            }
            Op::While { init, cond, body } => {
                for args in [&cond.args, &body.args] {
                    for a in args.iter() {
                        self.info.remove(a);
                    }
                }
                self.block(&cond.insts);
                self.block(&body.insts);
                for (r, v) in inst.results.iter().zip(init) {
                    let unknown = AxisInfo::unknown(self.f.ty(*v));
                    self.set(*r, unknown);
                }
            }
            Op::If {
                then_region,
                else_region,
                ..
            } => {
                self.block(&then_region.insts);
                self.block(&else_region.insts);
                let (t, e) = (then_region.yields(), else_region.yields());
                for (k, r) in inst.results.iter().enumerate() {
                    let m = match (t.get(k), e.get(k)) {
                        (Some(a), Some(b)) => self.get(*a).meet(&self.get(*b)),
                        _ => AxisInfo::unknown(self.f.ty(*r)),
                    };
                    self.set(*r, m);
                }
            }
            op => {
                if let Some(r) = inst.results.first().filter(|r| self.tracked(**r)) {
                    let info = self.op(op, *r);
                    self.set(*r, info);
                }
                for region in op.regions() {
                    self.block(&region.insts);
                }
            }
        }
    }

    /// A loop's carried values to a fixed point: each round meets the initial values with
    /// what the body yields; after [`LOOP_ROUNDS`] they are unknown. Returns the infos of
    /// the loop's results.
    fn carried(&mut self, init: &[Value], args: &[Value], body: &super::Block) -> Vec<AxisInfo> {
        self.loop_depth += 1;
        let first = match self.loop_depth > FIXED_POINT_DEPTH {
            true => LOOP_ROUNDS,
            false => 0,
        };
        let mut state: Vec<AxisInfo> = init.iter().map(|v| self.get(*v)).collect();
        let mut result = Vec::new();
        for round in first..=LOOP_ROUNDS {
            if round == LOOP_ROUNDS {
                state = (init.iter())
                    .map(|v| AxisInfo::unknown(self.f.ty(*v)))
                    .collect();
            }
            for (a, s) in args.iter().zip(&state) {
                self.set(*a, s.clone());
            }
            self.block(&body.insts);
            let ys = body.yields();
            let next: Vec<AxisInfo> = (state.iter().zip(ys))
                .map(|(s, y)| s.meet(&self.get(*y)))
                .collect();
            if next == state || round == LOOP_ROUNDS {
                result = next;
                break;
            }
            state = next;
        }
        self.loop_depth -= 1;
        result
    }

    fn set(&mut self, v: Value, info: AxisInfo) {
        if self.tracked(v) {
            self.info.insert(v, info);
        }
    }

    fn scalar_div(&self, v: Value) -> u64 {
        self.get(v).element_divisibility()
    }

    /// The constant integer `v` is, if it is one.
    fn constant(&self, v: Value) -> Option<i128> {
        match self.defs.get(&v).map(|i| &i.op) {
            Some(Op::Const(Const::Int(c))) => Some(*c),
            Some(Op::Splat(x)) => self.constant(*x),
            _ => None,
        }
    }

    fn op(&self, op: &Op, r: Value) -> AxisInfo {
        let t = self.f.ty(r);
        let rank = t.rank().max(1);
        let unknown = AxisInfo::unknown(t);
        match op {
            Op::Const(Const::Int(c)) => AxisInfo::splat(t, pow2_dividing(c.unsigned_abs() as u64)),
            Op::Const(_) => AxisInfo::splat(t, 1),
            Op::Splat(x) => AxisInfo::splat(t, self.scalar_div(*x)),
            Op::Arange { start, end } => {
                let len = pow2_dividing((end - start) as u64);
                AxisInfo::uniform(1, len, pow2_dividing(start.unsigned_abs()), 1)
            }
            Op::Hint { x, kind, values } => {
                let mut info = self.get(*x);
                for d in 0..rank {
                    let v = u64::from(*values.get(d).unwrap_or(&values[0]));
                    let p = pow2_dividing(v);
                    match kind {
                        HintKind::MultipleOf => info.divisibility[d] = info.divisibility[d].max(p),
                        HintKind::MaxContiguous => info.contiguity[d] = info.contiguity[d].max(p),
                        HintKind::MaxConstancy => info.constancy[d] = info.constancy[d].max(p),
                        HintKind::Likely => {}
                    }
                }
                info
            }
            Op::Cast(x) => {
                let (from, to) = (self.f.ty(*x).dtype(), t.dtype());
                match (from, to) {
                    (Some(a), Some(b)) if a.is_int() && b.is_int() => {
                        let info = self.get(*x);
                        // Widened, a narrow run could jump where it wrapped; narrowed, it
                        // can wrap at the new width's sign.
                        match b.bits() != a.bits() {
                            true => cap_runs(info),
                            false => info,
                        }
                    }
                    _ => AxisInfo {
                        constancy: self.get(*x).constancy,
                        ..unknown
                    },
                }
            }
            Op::Broadcast(x) => self.broadcast(*x, t),
            Op::ExpandDims { x, axis } => {
                let mut info = self.get(*x);
                let div = info.element_divisibility();
                if self.f.ty(*x).rank() == 0 {
                    info = AxisInfo::uniform(0, 1, 1, 1);
                }
                let at = *axis as usize;
                info.contiguity.insert(at, 1);
                info.divisibility.insert(at, div);
                info.constancy.insert(at, 1);
                info
            }
            Op::Reshape(x) => self.reshape(*x, t).unwrap_or(unknown),
            Op::AddPtr(p, off) => {
                let size = t.elem.pointee().map_or(1, |d| d.size_bytes() as u64);
                let (pi, oi) = (self.info_as(*p, t), self.info_as(*off, t));
                let narrow = self.f.ty(*off).dtype().is_some_and(|d| d.bits() < 64);
                let oi = if narrow { cap_runs(oi) } else { oi };
                let scaled = AxisInfo {
                    divisibility: (oi.divisibility.iter())
                        .map(|d| d.saturating_mul(size).min(MAX_DIVISIBILITY))
                        .collect(),
                    ..oi
                };
                add(&pi, &scaled, false)
            }
            Op::Binary(bop, a, b) => {
                let (x, y) = (self.info_as(*a, t), self.info_as(*b, t));
                match bop {
                    BinOp::Add => add(&x, &y, false),
                    BinOp::Sub => add(&x, &y, true),
                    BinOp::Mul => mul(&x, &y, self.constant(*a), self.constant(*b)),
                    BinOp::Shl => match self.constant(*b) {
                        Some(s @ 0..=40) => mul(&x, &AxisInfo::splat(t, 1 << s), None, None),
                        _ => AxisInfo {
                            constancy: gcd_all(&x.constancy, &y.constancy),
                            ..unknown
                        },
                    },
                    _ => AxisInfo {
                        constancy: gcd_all(&x.constancy, &y.constancy),
                        ..unknown
                    },
                }
            }
            Op::Cmp(pred, a, b) => {
                let (x, y) = (self.info_as(*a, t), self.info_as(*b, t));
                let mut constancy = gcd_all(&x.constancy, &y.constancy);
                // `x < y` with `x` a run from a multiple of `g` and `y` a multiple of `g`
                // equal along it: the same for `g` lanes (`s < y` ⇔ `s + e < y`, `e < g`).
                let runs = |lo: &AxisInfo, hi: &AxisInfo, d: usize| match hi.constancy[d]
                    >= lo.contiguity[d]
                {
                    true => lo.contiguity[d]
                        .min(lo.divisibility[d])
                        .min(hi.element_divisibility()),
                    false => 1,
                };
                for (d, k) in constancy.iter_mut().enumerate() {
                    let extra = match pred {
                        CmpPred::Lt | CmpPred::Ge => runs(&x, &y, d),
                        CmpPred::Gt | CmpPred::Le => runs(&y, &x, d),
                        _ => 1,
                    };
                    *k = (*k).max(extra);
                }
                AxisInfo {
                    constancy,
                    ..unknown
                }
            }
            Op::Select(c, a, b) => {
                let (c, x, y) = (
                    self.info_as(*c, t),
                    self.info_as(*a, t),
                    self.info_as(*b, t),
                );
                AxisInfo {
                    contiguity: vec![1; rank],
                    divisibility: x
                        .divisibility
                        .iter()
                        .zip(&y.divisibility)
                        .map(|(p, q)| *p.min(q))
                        .collect(),
                    constancy: gcd_all(&gcd_all(&c.constancy, &x.constancy), &y.constancy),
                }
            }
            Op::Unary(_, x) => AxisInfo {
                constancy: self.info_as(*x, t).constancy,
                ..unknown
            },
            _ => unknown,
        }
    }

    /// `v`'s info seen in `t`'s shape: a scalar operand is splat.
    fn info_as(&self, v: Value, t: &Type) -> AxisInfo {
        match self.f.ty(v).rank() == 0 && t.rank() > 0 {
            true => AxisInfo::splat(t, self.scalar_div(v)),
            false => self.get(v),
        }
    }

    /// The broadcast of `x` to `t`: dims of size 1 (and new leading ones) become equal
    /// lanes.
    fn broadcast(&self, x: Value, t: &Type) -> AxisInfo {
        let xt = self.f.ty(x);
        if xt.rank() == 0 {
            return AxisInfo::splat(t, self.scalar_div(x));
        }
        let xi = self.get(x);
        let div = xi.element_divisibility();
        let extra = t.rank() - xt.rank();
        let mut out = AxisInfo::uniform(t.rank(), 1, div, 1);
        for d in 0..t.rank() {
            let from = d.checked_sub(extra);
            match from.filter(|k| xt.shape[*k] == t.shape[d]) {
                Some(k) => {
                    out.contiguity[d] = xi.contiguity[k];
                    out.divisibility[d] = xi.divisibility[k];
                    out.constancy[d] = xi.constancy[k];
                }
                None => out.constancy[d] = pow2_dividing(t.shape[d] as u64),
            }
        }
        out
    }

    /// A reshape that only adds or removes dims of size 1.
    fn reshape(&self, x: Value, t: &Type) -> Option<AxisInfo> {
        let xt = self.f.ty(x);
        let xi = self.get(x);
        let real = |s: &[usize]| -> Vec<usize> { s.iter().copied().filter(|n| *n != 1).collect() };
        if real(&xt.shape) != real(&t.shape) {
            return None;
        }
        let div = xi.element_divisibility();
        let mut out = AxisInfo::uniform(t.rank().max(1), 1, div, 1);
        let mut from = (0..xt.rank()).filter(|k| xt.shape[*k] != 1);
        for d in (0..t.rank()).filter(|d| t.shape[*d] != 1) {
            let k = from.next()?;
            out.contiguity[d] = xi.contiguity[k];
            out.divisibility[d] = xi.divisibility[k];
            out.constancy[d] = xi.constancy[k];
        }
        Some(out)
    }
}

/// Runs no longer than their first value's divisibility: a narrow run that long cannot
/// wrap inside (see the module docs), so it stays a run when widened.
fn cap_runs(mut info: AxisInfo) -> AxisInfo {
    for (c, d) in info.contiguity.iter_mut().zip(&info.divisibility) {
        *c = (*c).min(*d).max(1);
    }
    info
}

fn gcd_all(a: &[u64], b: &[u64]) -> Vec<u64> {
    a.iter().zip(b).map(|(x, y)| *x.min(y)).collect()
}

/// `x + y` (`x - y` when `sub`): runs of one plus equal lanes of the other.
fn add(x: &AxisInfo, y: &AxisInfo, sub: bool) -> AxisInfo {
    let n = x.contiguity.len();
    let contiguity = (0..n)
        .map(|d| {
            let left = x.contiguity[d].min(y.constancy[d]);
            let right = x.constancy[d].min(y.contiguity[d]);
            match sub {
                true => left,
                false => left.max(right),
            }
        })
        .collect();
    AxisInfo {
        contiguity,
        divisibility: gcd_all(&x.divisibility, &y.divisibility),
        constancy: gcd_all(&x.constancy, &y.constancy),
    }
}

/// `x * y`; a factor that is the constant 1 keeps the other's runs.
fn mul(x: &AxisInfo, y: &AxisInfo, xc: Option<i128>, yc: Option<i128>) -> AxisInfo {
    let n = x.contiguity.len();
    let contiguity = (0..n)
        .map(|d| match (xc, yc) {
            (_, Some(1)) => x.contiguity[d],
            (Some(1), _) => y.contiguity[d],
            _ => 1,
        })
        .collect();
    // Where a factor has runs, its lanes are not all multiples of its divisibility.
    let lane_div = |i: &AxisInfo, d: usize| match i.contiguity[d] > 1 {
        true => 1,
        false => i.divisibility[d],
    };
    let divisibility = (0..n)
        .map(|d| match (xc, yc) {
            (_, Some(1)) => x.divisibility[d],
            (Some(1), _) => y.divisibility[d],
            _ => lane_div(x, d)
                .saturating_mul(lane_div(y, d))
                .min(MAX_DIVISIBILITY),
        })
        .collect();
    AxisInfo {
        contiguity,
        divisibility,
        constancy: gcd_all(&x.constancy, &y.constancy),
    }
}
