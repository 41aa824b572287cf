//! A proof evaluated for one launch: every scalar, every atom's range, then each access's
//! lowest and highest byte against its argument's span; a site left unproven inside an
//! enumerated loop is then tried iteration by iteration.
//!
//! Forms are read where they lie in the proof, their scalars and ranges looked up per term,
//! and constraints are lists of references on the stack: with a [`ProofWorkspace`] kept from
//! launch to launch, a verdict allocates nothing but what grows its output (enumerating a
//! loop's iterations allocates a few small lists).

use super::form::{Form, Var};
use super::scalar::ScalarId;
use super::{
    Access, AtomDef, BoundsProof, CheckId, Constraint, Entry, Enumeration, LaunchMemory,
    LaunchValues, MemoryRead, RangeOp, Refuted, SiteProof, Verdict, ViewElements, MAX_ENUMERATED,
};
use crate::ir::{DType, MAX_VIEW_AXES};

/// `[lo, hi]`; empty when `lo > hi` (a loop that never runs).
type Range = (i128, i128);

/// The empty range: the values of an op that never runs.
const EMPTY: Range = (1, 0);

fn is_empty(r: Range) -> bool {
    r.0 > r.1
}

/// What a proof's evaluation keeps between launches: its per-scalar, per-atom and
/// per-check tables (see [`BoundsProof::verdict_with`]).
#[derive(Debug, Clone, Default)]
pub struct ProofWorkspace {
    scalars: Vec<Option<i128>>,
    atoms: Vec<Option<Range>>,
    checks: Vec<Option<bool>>,
}

pub(super) struct Launch<'p, 'l, 'w> {
    proof: &'p BoundsProof,
    launch: &'l LaunchValues<'l>,
    ws: &'w mut ProofWorkspace,
    /// The memory read, in order.
    reads: &'w mut Vec<MemoryRead>,
}

/// [`LaunchMemory::read`], recorded.
fn read(
    memory: Option<&dyn LaunchMemory>,
    reads: &mut Vec<MemoryRead>,
    param: u32,
    offset: i128,
    dtype: DType,
) -> Option<i128> {
    let memory = memory?;
    let param = param as usize;
    let value = memory.read(param, offset, dtype);
    reads.push(MemoryRead::Int {
        param,
        offset,
        dtype,
        value,
    });
    value
}

/// The most constraints one bound takes (the others are left out: a looser bound).
const MAX_CONSTRAINTS: usize = 32;

static NO_FORM: Form = Form {
    constant: 0,
    terms: Vec::new(),
};

/// Constraint forms (each `≤ 0`), on the stack.
#[derive(Clone, Copy)]
struct Constraints<'p> {
    forms: [&'p Form; MAX_CONSTRAINTS],
    len: usize,
}

impl<'p> Constraints<'p> {
    fn new() -> Self {
        Constraints {
            forms: [&NO_FORM; MAX_CONSTRAINTS],
            len: 0,
        }
    }

    fn push(&mut self, f: &'p Form) {
        if self.len < MAX_CONSTRAINTS {
            self.forms[self.len] = f;
            self.len += 1;
        }
    }

    fn extend(&mut self, other: &Constraints<'p>) {
        for f in other.as_slice() {
            self.push(f);
        }
    }

    fn as_slice(&self) -> &[&'p Form] {
        &self.forms[..self.len]
    }
}

/// Fills `out` with the verdict of `proof` for `launch` (see [`BoundsProof::verdict`]).
pub(super) fn verdict(
    proof: &BoundsProof,
    launch: &LaunchValues<'_>,
    ws: &mut ProofWorkspace,
    out: &mut Verdict,
) {
    out.unproven.clear();
    out.refuted = None;
    out.reads.clear();
    let mut l = Launch::new(proof, launch, ws, &mut out.reads);
    l.unproven(&mut out.unproven);
    out.refuted = out.unproven.iter().find_map(|&s| l.refuted(s));
}

impl<'p, 'l, 'w> Launch<'p, 'l, 'w> {
    fn new(
        proof: &'p BoundsProof,
        launch: &'l LaunchValues<'l>,
        ws: &'w mut ProofWorkspace,
        reads: &'w mut Vec<MemoryRead>,
    ) -> Self {
        proof.scalars.evaluate_into(
            &mut ws.scalars,
            launch.scalars,
            launch.grid,
            &mut |p, o, d| read(launch.memory, reads, p, o, d),
        );
        ws.checks.clear();
        ws.checks.resize(proof.checks.len(), None);
        ws.atoms.clear();
        let mut l = Launch {
            proof,
            launch,
            ws,
            reads,
        };
        for a in &proof.atoms {
            let r = l.atom(a);
            l.ws.atoms.push(r);
        }
        l
    }

    /// The sites this launch does not prove, into `out`.
    fn unproven(&mut self, out: &mut Vec<u32>) {
        for (i, site) in self.proof.walked.iter().enumerate() {
            let proven = match site {
                SiteProof::Proof(a) => self.proves(a),
                SiteProof::Unproven(_) => false,
                SiteProof::NotAccess => true,
            };
            if !proven {
                out.push(i as u32);
            }
        }
        // Sites left inside an enumerated loop: iteration by iteration.
        for e in &self.proof.enumerations {
            let (first, n) = (e.first_site, e.sites.len() as u32);
            let wanted: Vec<u32> = (out.iter().copied())
                .filter(|s| (first..first + n).contains(s))
                .filter(|s| matches!(e.sites[(s - first) as usize], SiteProof::Proof(_)))
                .collect();
            if wanted.is_empty() {
                continue;
            }
            let proven = self.enumerate(e, &wanted);
            out.retain(|s| !proven.contains(s));
        }
    }

    /// Which of sites `wanted` (of `e`'s body) every iteration of `e` this launch runs
    /// proves in bounds, with that iteration's counter and carried values.
    fn enumerate(&mut self, e: &'p Enumeration, wanted: &[u32]) -> Vec<u32> {
        let bounds = (self.scalar(e.lo), self.scalar(e.hi), self.scalar(e.step));
        let (Some(lo), Some(hi), Some(step)) = bounds else {
            return Vec::new();
        };
        let Some(trips) = trips(lo, hi, step) else {
            return Vec::new();
        };
        if trips > MAX_ENUMERATED {
            return Vec::new();
        }
        let mut carried: Vec<Option<i128>> = e.carried.iter().map(|c| self.scalar(c.1)).collect();
        let mut ok = vec![true; wanted.len()];
        for k in 0..trips {
            let Some(counter) = step.checked_mul(k).and_then(|d| lo.checked_add(d)) else {
                return Vec::new();
            };
            self.ws.scalars[e.counter as usize] = Some(counter);
            for (c, v) in e.carried.iter().zip(&carried) {
                self.ws.scalars[c.0 as usize] = *v;
            }
            let (memory, reads, ws) = (self.launch.memory, &mut *self.reads, &mut *self.ws);
            let (params, grid) = (self.launch.scalars, self.launch.grid);
            for &id in &e.scalars {
                if id == e.counter || e.carried.iter().any(|c| c.0 == id) {
                    continue;
                }
                let v =
                    (self.proof.scalars).value(id, &ws.scalars, params, grid, &mut |p, o, d| {
                        read(memory, reads, p, o, d)
                    });
                ws.scalars[id as usize] = v;
            }
            for c in e.checks.clone() {
                self.ws.checks[c as usize] = None;
            }
            for a in e.atoms.clone() {
                let r = self.atom(&self.proof.atoms[a as usize]);
                self.ws.atoms[a as usize] = r;
            }
            for (w, &s) in wanted.iter().enumerate() {
                if ok[w] {
                    ok[w] = match &e.sites[(s - e.first_site) as usize] {
                        SiteProof::Proof(a) => self.proves(a),
                        _ => false,
                    };
                }
            }
            if !ok.contains(&true) {
                break;
            }
            for (c, v) in e.carried.iter().zip(&mut carried) {
                *v = self.scalar(c.2);
            }
        }
        (wanted.iter().zip(&ok))
            .filter(|(_, ok)| **ok)
            .map(|(s, _)| *s)
            .collect()
    }

    /// [`LaunchMemory::entry`], recorded.
    fn entry(&mut self, param: usize, offset: i128) -> Option<Entry> {
        let entry = self.launch.memory?.entry(param, offset);
        self.reads.push(MemoryRead::Entry {
            param,
            offset,
            entry,
        });
        entry
    }

    fn scalar(&self, id: ScalarId) -> Option<i128> {
        self.ws.scalars[id as usize]
    }

    fn var(&self, v: &Var) -> Option<Range> {
        match v {
            Var::Lane { extent, .. } => Some((0, *extent as i128 - 1)),
            Var::Atom { id, .. } => self.ws.atoms.get(*id as usize).copied().flatten(),
        }
    }

    /// The range of `f` over every value of its variables ([`EMPTY`] if one has none).
    fn range(&self, f: &Form) -> Option<Range> {
        let c = self.scalar(f.constant)?;
        let (mut lo, mut hi) = (c, c);
        for (v, k) in &f.terms {
            let r = self.var(v)?;
            if r.0 > r.1 {
                return Some(EMPTY);
            }
            let (a, b) = scaled(r, self.scalar(*k)?)?;
            lo = lo.checked_add(a)?;
            hi = hi.checked_add(b)?;
        }
        Some((lo, hi))
    }

    /// Whether this launch knows `f`'s constant, coefficients and variables' ranges.
    fn known(&self, f: &Form) -> bool {
        self.scalar(f.constant).is_some()
            && (f.terms.iter()).all(|(v, k)| self.scalar(*k).is_some() && self.var(v).is_some())
    }

    /// Whether a variable of `f` has no value (the value is never computed).
    fn never(&self, f: &Form) -> bool {
        (f.terms.iter()).any(|(v, _)| self.var(v).is_some_and(is_empty))
    }

    fn holds(&mut self, ids: &[CheckId]) -> bool {
        ids.iter().all(|&id| {
            if let Some(r) = self.ws.checks[id as usize] {
                return r;
            }
            let c = &self.proof.checks[id as usize];
            let (lo, hi) = c.dtype.int_range().unwrap_or((1, 0));
            let fits = |r: Range| is_empty(r) || (lo <= r.0 && r.1 <= hi);
            let mut r = self.range(&c.form).is_some_and(fits);
            if !r && !c.context.is_empty() {
                // Where the loops and `if`s around the value let it be (nowhere: the value
                // is never computed).
                r = match self.context(&c.context) {
                    Some(context) => self.bounded(&c.form, &context).is_some_and(fits),
                    None => true,
                };
            }
            self.ws.checks[id as usize] = Some(r);
            r
        })
    }

    fn atom(&mut self, a: &'p AtomDef) -> Option<Range> {
        match a {
            AtomDef::ProgramId(axis) => Some((0, i128::from(self.launch.grid[*axis as usize]) - 1)),
            AtomDef::Iter(b) | AtomDef::Trips(b) => {
                if !self.holds(&b.checks) {
                    return None;
                }
                let (lo, hi, step) = (self.range(&b.lo)?, self.range(&b.hi)?, self.scalar(b.step)?);
                if is_empty(lo) || is_empty(hi) {
                    return Some(EMPTY);
                }
                let trips = match step {
                    0 => return None,
                    s if s > 0 => trips(lo.0, hi.1, s)?,
                    s => trips(lo.1, hi.0, s)?,
                };
                match a {
                    AtomDef::Iter(_) => Some((0, trips - 1)),
                    _ => Some((0, trips)),
                }
            }
            AtomDef::Range {
                op,
                dtype,
                checks,
                context,
            } => {
                if !self.holds(checks) {
                    return None;
                }
                let Some(context) = self.context(context) else {
                    return Some(EMPTY); // never computed
                };
                let r = self.range_op(op, dtype.int_range(), &context)?;
                let (lo, hi) = dtype.int_range()?;
                (is_empty(r) || (lo <= r.0 && r.1 <= hi)).then_some(r)
            }
            AtomDef::Placeholder => None,
        }
    }

    /// The range of `op`'s result, its operands taken where `context` holds.
    fn range_op(
        &mut self,
        op: &'p RangeOp,
        dtype: Option<(i128, i128)>,
        context: &Constraints<'p>,
    ) -> Option<Range> {
        let c = context;
        let operands = match op {
            RangeOp::Div(a, b)
            | RangeOp::Rem(a, b)
            | RangeOp::Min(a, b)
            | RangeOp::Max(a, b)
            | RangeOp::Mul(a, b) => Some((self.bounded(a, c)?, self.bounded(b, c)?)),
            // A branch that never runs leaves the others.
            RangeOp::Hull(_) | RangeOp::Bool | RangeOp::Any => None,
        };
        let (a, b) = match operands {
            Some((a, b)) if is_empty(a) || is_empty(b) => return Some(EMPTY),
            Some(ab) => ab,
            None => (EMPTY, EMPTY),
        };
        Some(match op {
            RangeOp::Div(..) => {
                let ((lo, hi), d) = (a, b);
                if d.0 <= -1 && -1 <= d.1 && dtype.is_some_and(|t| lo <= t.0) {
                    return None; // MIN / -1 wraps
                }
                // x / d is monotone in d on each side of 0: the extremes are at the ends of
                // the positive and negative parts of d's range; x / 0 is 0.
                let mut r: Option<Range> = (d.0 <= 0 && 0 <= d.1).then_some((0, 0));
                let ends = [d.0.max(1), d.1, d.0, d.1.min(-1)];
                for (k, e) in ends.into_iter().enumerate() {
                    let inside = if k < 2 { d.1 >= 1 } else { d.0 <= -1 };
                    if inside {
                        for q in [lo / e, hi / e] {
                            r = Some(r.map_or((q, q), |r| (r.0.min(q), r.1.max(q))));
                        }
                    }
                }
                r?
            }
            RangeOp::Rem(..) => {
                let ((lo, hi), m) = (a, b);
                // |x % m| < |m| with the sign of x; x % 0 is 0.
                let a = m.0.checked_abs()?.max(m.1.checked_abs()?).max(1) - 1;
                (
                    if lo >= 0 { 0 } else { lo.max(-a) },
                    if hi <= 0 { 0 } else { hi.min(a) },
                )
            }
            RangeOp::Min(..) => (a.0.min(b.0), a.1.min(b.1)),
            RangeOp::Max(..) => (a.0.max(b.0), a.1.max(b.1)),
            RangeOp::Mul(..) => {
                let p = [
                    a.0.checked_mul(b.0)?,
                    a.0.checked_mul(b.1)?,
                    a.1.checked_mul(b.0)?,
                    a.1.checked_mul(b.1)?,
                ];
                (*p.iter().min()?, *p.iter().max()?)
            }
            RangeOp::Hull(fs) => {
                let mut r: Option<Range> = None;
                for (f, guards) in fs {
                    let Some(x) = self.guarded(f, guards, c)? else {
                        continue;
                    };
                    r = Some(r.map_or(x, |r| (r.0.min(x.0), r.1.max(x.1))));
                }
                r.unwrap_or(EMPTY)
            }
            RangeOp::Bool => (0, 1),
            RangeOp::Any => dtype?,
        })
    }

    /// The range of `f` on lanes where `guards` and `context` hold: `Some(None)` when
    /// none does (or `f` has a variable without values: that branch never runs).
    fn guarded(
        &mut self,
        f: &'p Form,
        guards: &'p [Constraint],
        context: &Constraints<'p>,
    ) -> Option<Option<Range>> {
        if !self.known(f) {
            return None;
        }
        if self.never(f) {
            return Some(None);
        }
        let mut constraints = Constraints::new();
        for c in guards {
            if let Some(c) = self.constraint(c) {
                if self.range(c).is_some_and(|r| r.0 > 0) {
                    return Some(None);
                }
                constraints.push(c);
            }
        }
        let cs = constraints.as_slice();
        let plain = (self.bound(f, cs, false)?, self.bound(f, cs, true)?);
        if context.len == 0 {
            return Some(Some(plain));
        }
        // With the context's constraints too: none of its lanes where they hold nowhere.
        constraints.extend(context);
        let cs = constraints.as_slice();
        Some(match (self.bound(f, cs, false), self.bound(f, cs, true)) {
            (Some(lo), Some(hi)) if lo > hi => None,
            (Some(lo), Some(hi)) => Some((lo, hi)),
            _ => Some(plain),
        })
    }

    /// The constraints of `cs` (the loops and `if`s around a value) this launch can
    /// evaluate, those relying on a failed check dropped; `None` when one can never hold
    /// (the code inside never runs in this launch).
    fn context(&mut self, cs: &'p [Constraint]) -> Option<Constraints<'p>> {
        let mut out = Constraints::new();
        for c in cs {
            if let Some(f) = self.constraint(c) {
                if self.never(f) || self.range(f).is_some_and(|r| r.0 > 0) {
                    return None;
                }
                out.push(f);
            }
        }
        Some(out)
    }

    /// The range of `f` where `context` holds: [`EMPTY`] where the constraints hold
    /// nowhere together (a sound bound of what they allow has its lowest value above its
    /// highest).
    fn bounded(&self, f: &'p Form, context: &Constraints<'p>) -> Option<Range> {
        let plain = self.range(f)?;
        if context.len == 0 || is_empty(plain) {
            return Some(plain);
        }
        let cs = context.as_slice();
        Some(match (self.bound(f, cs, false), self.bound(f, cs, true)) {
            (Some(lo), Some(hi)) if lo > hi => EMPTY,
            (Some(lo), Some(hi)) => (lo.max(plain.0), hi.min(plain.1)),
            _ => plain,
        })
    }

    /// Site `site` when it is an unconditional access whose every lane lies outside its
    /// argument in this launch (its offsets' enclosure misses the span).
    fn refuted(&mut self, site: u32) -> Option<Refuted> {
        let SiteProof::Proof(a) = self.proof.walked.get(site as usize)? else {
            return None;
        };
        if !a.unconditional || a.entry.is_some() || !self.holds(&a.checks) {
            return None;
        }
        let span = self.launch.spans.get(a.root).copied().flatten()?;
        let (min, max) = self.range(&a.offset)?;
        if is_empty((min, max)) {
            return None;
        }
        let bytes = a.bytes as i128;
        let end = max.checked_add(bytes)?;
        (min.checked_add(bytes)? > span.1 || max < span.0).then_some(Refuted {
            site,
            root: a.root,
            touched: (min, end),
            span,
        })
    }

    /// Whether every byte access `a` touches in this launch lies inside its argument.
    fn proves(&mut self, a: &'p Access) -> bool {
        let span = match a.entry {
            None => self.launch.spans.get(a.root).copied().flatten(),
            Some(at) => (self.scalar(at))
                .and_then(|at| self.entry(a.root, at))
                .filter(|e| e.writable || !a.writes)
                .map(|e| e.span),
        };
        let Some((lo, hi)) = span else {
            return false;
        };
        if !self.holds(&a.checks) || !self.known(&a.offset) {
            return false;
        }
        let mut constraints = Constraints::new();
        for c in &a.constraints {
            if let Some(f) = self.constraint(c) {
                constraints.push(f);
            }
        }
        let cs = constraints.as_slice();
        // An empty variable or an unsatisfiable constraint: the access never happens.
        if self.never(&a.offset) || cs.iter().any(|c| self.never(c)) {
            return true;
        }
        if cs.iter().any(|c| self.range(c).is_some_and(|r| r.0 > 0)) {
            return true;
        }
        let (Some(max), Some(min)) = (
            self.bound(&a.offset, cs, true),
            self.bound(&a.offset, cs, false),
        ) else {
            return false;
        };
        // Bounds that cross: no lane satisfies every constraint.
        if min > max {
            return true;
        }
        let bytes = a.bytes as i128;
        let inside = lo <= min && max.checked_add(bytes).is_some_and(|end| end <= hi);
        // A strided view's span holds gaps: every lane must land on one of its elements.
        let view = match a.entry {
            None => self.launch.views.get(a.root).copied().flatten(),
            Some(_) => None,
        };
        inside && view.is_none_or(|v| !a.extent && self.on_elements(&a.offset, a.bytes, &v, cs))
    }

    /// Whether every lane of byte offset `f` where `cs` hold starts an element of `view`
    /// and an access of `bytes` there touches that element only. Each term of `f` goes to
    /// the outermost axis whose step divides its coefficient (the terms no step divides
    /// must sum to 0), the constant (less the lowest element's offset) is split greedily
    /// from the outermost axis down, and each axis's part, a multiple of its step so, must
    /// lie in `[0, (dims − 1) · step]`: then the parts are the axes' indices times their
    /// steps, and `f` an element's offset.
    fn on_elements(&self, f: &Form, bytes: u64, view: &ViewElements, cs: &[&Form]) -> bool {
        let axes = view.layout.axes();
        if bytes != view.bytes || f.terms.len() > 128 {
            return false;
        }
        let mut parts = [0u128; MAX_VIEW_AXES];
        // Terms no step divides, which must sum to 0 where `cs` hold (a lane index masked
        // to 0 (`j < 1`) in a view whose rows of one element dropped their axis).
        let mut nil = 0u128;
        for (i, (_, k)) in f.terms.iter().enumerate() {
            let Some(c) = self.scalar(*k) else {
                return false;
            };
            match (axes.clone()).position(|(_, step)| step > 0 && c % step as i128 == 0) {
                Some(j) => parts[j] |= 1 << i,
                None => nil |= 1 << i,
            }
        }
        if nil != 0 {
            let (Some(lo), Some(hi)) = (
                self.bound_of(f, nil, 0, cs, false),
                self.bound_of(f, nil, 0, cs, true),
            ) else {
                return false;
            };
            if lo <= hi && (lo, hi) != (0, 0) {
                return false;
            }
        }
        let Some(mut rest) = self.scalar(f.constant).and_then(|c| c.checked_sub(view.lo)) else {
            return false;
        };
        for (&terms, (dim, step)) in parts.iter().zip(axes) {
            let step = step as i128;
            let own = rest.div_euclid(step) * step;
            rest -= own;
            let (Some(lo), Some(hi)) = (
                self.bound_of(f, terms, own, cs, false),
                self.bound_of(f, terms, own, cs, true),
            ) else {
                return false;
            };
            let last = (dim as i128 - 1).checked_mul(step);
            // (Crossing bounds: no lane satisfies every constraint.)
            if lo <= hi && (lo < 0 || last.is_none_or(|last| hi > last)) {
                return false;
            }
        }
        rest == 0
    }

    /// `c`'s form, where this launch can use it: its condition holds, its checks hold, and
    /// every number it has is known.
    fn constraint(&mut self, c: &'p Constraint) -> Option<&'p Form> {
        if let Some((s, positive)) = c.when {
            let v = self.scalar(s)?;
            if (v > 0) != positive || v == 0 {
                return None;
            }
        }
        if !self.holds(&c.checks) || !self.known(&c.form) {
            return None;
        }
        Some(&c.form)
    }

    /// The largest (`upper`) or smallest value of `f` on lanes where every constraint
    /// `c ≤ 0` of `cs` holds: the constraints whose variables `f` has in proportion `λ·c`
    /// (`λ > 0` for the largest, `< 0` for the smallest) bound that part by `λ` times their
    /// limit; the rest takes its variables' ranges. `f` and `cs` are known.
    fn bound(&self, f: &Form, cs: &[&Form], upper: bool) -> Option<i128> {
        let n = f.terms.len();
        if n > 128 {
            let r = self.range(f)?;
            return Some(if upper { r.1 } else { r.0 });
        }
        let all = if n == 128 {
            u128::MAX
        } else {
            (1u128 << n) - 1
        };
        self.bound_of(f, all, self.scalar(f.constant)?, cs, upper)
    }

    /// [`bound`](Self::bound) of the part of `f` made of the terms in `terms` (bit `i`:
    /// term `i`; at most 128 terms) and `constant` in place of `f`'s.
    fn bound_of(
        &self,
        f: &Form,
        terms: u128,
        constant: i128,
        cs: &[&Form],
        upper: bool,
    ) -> Option<i128> {
        let n = f.terms.len();
        if n > 128 {
            return None;
        }
        let coef = |k: ScalarId| self.scalar(k);
        // The terms of the part no constraint has bounded yet.
        let mut left = terms;
        let is_left = |left: u128, i: usize| left >> i & 1 == 1;
        let mut total = constant;
        'constraints: for c in cs {
            // The first of `f`'s left variables that `c` has gives the proportion.
            // Where `v` is among what is left of `f`.
            let shared = |left: u128, v: &Var| {
                (f.terms.iter().enumerate()).position(|(i, t)| is_left(left, i) && same(&t.0, v))
            };
            let Some(i0) = (0..n)
                .find(|&i| is_left(left, i) && c.terms.iter().any(|u| same(&u.0, &f.terms[i].0)))
            else {
                continue;
            };
            let j0 = c.terms.iter().position(|u| same(&u.0, &f.terms[i0].0))?;
            let (a, b) = (coef(f.terms[i0].1)?, coef(c.terms[j0].1)?);
            let Some(lambda) = exact_quotient(a, b) else {
                continue;
            };
            if (lambda > 0) != upper || lambda == 0 {
                continue;
            }
            // c = L_S + L_rest + c0 ≤ 0, so L_S ≤ −c0 − min(L_rest).
            let (mut rest_min, mut box_max, mut used) = (0i128, 0i128, 0u128);
            for u in &c.terms {
                let (k, r) = (coef(u.1)?, self.var(&u.0)?);
                match shared(left, &u.0) {
                    Some(i) => {
                        if Some(coef(f.terms[i].1)?) != mul(k, lambda) {
                            continue 'constraints;
                        }
                        let Some(m) = scaled(r, k).and_then(|s| box_max.checked_add(s.1)) else {
                            continue 'constraints;
                        };
                        box_max = m;
                        used |= 1 << i;
                    }
                    None => {
                        let Some(m) = scaled(r, k).and_then(|s| rest_min.checked_add(s.0)) else {
                            continue 'constraints;
                        };
                        rest_min = m;
                    }
                }
            }
            let Some(limit) = (coef(c.constant)?)
                .checked_add(rest_min)
                .and_then(i128::checked_neg)
            else {
                continue;
            };
            total = total.checked_add(mul(lambda, limit.min(box_max))?)?;
            left &= !used;
        }
        let (mut lo, mut hi) = (0i128, 0i128);
        for (i, (v, k)) in f.terms.iter().enumerate() {
            if is_left(left, i) {
                let (a, b) = scaled(self.var(v)?, coef(*k)?)?;
                lo = lo.checked_add(a)?;
                hi = hi.checked_add(b)?;
            }
        }
        total.checked_add(if upper { hi } else { lo })
    }
}

/// `a == b`, field by field, without a `memcmp` call for the few axes of a place (bounds
/// compare variables in their inner loops).
#[inline]
fn same(a: &Var, b: &Var) -> bool {
    match (a, b) {
        (Var::Lane { axis: a, extent: e }, Var::Lane { axis: b, extent: f }) => a == b && e == f,
        (Var::Atom { id: a, place: p }, Var::Atom { id: b, place: q }) => {
            a == b && p.len() == q.len() && p.iter().zip(q).all(|(x, y)| x == y)
        }
        _ => false,
    }
}

/// `k · [lo, hi]`.
fn scaled((lo, hi): Range, k: i128) -> Option<Range> {
    let (a, b) = (mul(lo, k)?, mul(hi, k)?);
    Some((a.min(b), a.max(b)))
}

/// `a · b`, in 64 bits where they fit (a launch's numbers nearly always do).
#[inline]
fn mul(a: i128, b: i128) -> Option<i128> {
    match (i64::try_from(a), i64::try_from(b)) {
        (Ok(x), Ok(y)) => Some(i128::from(x) * i128::from(y)),
        _ => a.checked_mul(b),
    }
}

/// `a / b` when `b` divides `a`, in 64 bits where they fit.
#[inline]
fn exact_quotient(a: i128, b: i128) -> Option<i128> {
    if b == 0 {
        return None;
    }
    match (i64::try_from(a), i64::try_from(b)) {
        (Ok(x), Ok(y)) if y != -1 => (x % y == 0).then(|| i128::from(x / y)),
        _ => (a % b == 0).then(|| a / b),
    }
}

fn ceil_div(a: i128, b: i128) -> i128 {
    (a + b - 1) / b
}

/// How many iterations `lo, lo + step, …` run before passing `hi` (`step ≠ 0`).
fn trips(lo: i128, hi: i128, step: i128) -> Option<i128> {
    let span = match step {
        0 => return None,
        s if s > 0 => hi.checked_sub(lo)?,
        _ => lo.checked_sub(hi)?,
    };
    Some(if span <= 0 {
        0
    } else {
        ceil_div(span, step.checked_abs()?)
    })
}
