//! A proof evaluated for one launch: every scalar, every atom's range, then each access's
//! lowest and highest byte against its argument's span; a site left unproven inside an
//! enumerated loop is then tried iteration by iteration.

use super::form::{Form, Var};
use super::{
    Access, AtomDef, BoundsProof, CheckId, Constraint, Entry, Enumeration, LaunchMemory,
    LaunchValues, MemoryRead, RangeOp, Refuted, SiteProof, MAX_ENUMERATED,
};
use crate::ir::DType;

/// `[lo, hi]`; empty when `lo > hi` (a loop that never runs).
type Range = (i128, i128);

/// The empty range: the values of an op that never runs.
const EMPTY: Range = (1, 0);

fn is_empty(r: Range) -> bool {
    r.0 > r.1
}

pub(super) struct Launch<'p, 'l> {
    proof: &'p BoundsProof,
    launch: &'l LaunchValues<'l>,
    scalars: Vec<Option<i128>>,
    atoms: Vec<Option<Range>>,
    checks: Vec<Option<bool>>,
    /// The memory read, in order.
    reads: Vec<MemoryRead>,
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

impl<'p, 'l> Launch<'p, 'l> {
    pub fn new(proof: &'p BoundsProof, launch: &'l LaunchValues<'l>) -> Self {
        let mut reads = Vec::new();
        let scalars = proof
            .scalars
            .evaluate(launch.scalars, launch.grid, &mut |p, o, d| {
                read(launch.memory, &mut reads, p, o, d)
            });
        let mut l = Launch {
            proof,
            launch,
            scalars,
            atoms: Vec::with_capacity(proof.atoms.len()),
            checks: vec![None; proof.checks.len()],
            reads,
        };
        for a in &proof.atoms {
            let r = l.atom(a);
            l.atoms.push(r);
        }
        l
    }

    /// The memory this launch's evaluation read.
    pub fn into_reads(self) -> Vec<MemoryRead> {
        self.reads
    }

    /// The sites this launch does not prove.
    pub fn unproven(&mut self) -> Vec<u32> {
        let mut out = Vec::new();
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
        out
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
            self.scalars[e.counter as usize] = Some(counter);
            for (c, v) in e.carried.iter().zip(&carried) {
                self.scalars[c.0 as usize] = *v;
            }
            let (memory, reads) = (self.launch.memory, &mut self.reads);
            let (params, grid) = (self.launch.scalars, self.launch.grid);
            for &id in &e.scalars {
                if id == e.counter || e.carried.iter().any(|c| c.0 == id) {
                    continue;
                }
                let v =
                    (self.proof.scalars).value(id, &self.scalars, params, grid, &mut |p, o, d| {
                        read(memory, reads, p, o, d)
                    });
                self.scalars[id as usize] = v;
            }
            for c in e.checks.clone() {
                self.checks[c as usize] = None;
            }
            for a in e.atoms.clone() {
                let r = self.atom(&self.proof.atoms[a as usize]);
                self.atoms[a as usize] = r;
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

    fn scalar(&self, id: u32) -> Option<i128> {
        self.scalars[id as usize]
    }

    fn var(&self, v: &Var) -> Option<Range> {
        match v {
            Var::Lane { extent, .. } => Some((0, *extent as i128 - 1)),
            Var::Atom { id, .. } => self.atoms.get(*id as usize).copied().flatten(),
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

    fn holds(&mut self, ids: &[CheckId]) -> bool {
        ids.iter().all(|&id| {
            if let Some(r) = self.checks[id as usize] {
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
            self.checks[id as usize] = Some(r);
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
        context: &[Evaluated<'p>],
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
        context: &[Evaluated<'p>],
    ) -> Option<Option<Range>> {
        let e = self.evaluated(f)?;
        if e.terms.iter().any(|t| is_empty(t.range)) {
            return Some(None);
        }
        let mut constraints: Vec<Evaluated<'p>> = Vec::new();
        for c in guards {
            if let Some(c) = self.constraint(c) {
                if c.range().is_some_and(|r| r.0 > 0) {
                    return Some(None);
                }
                constraints.push(c);
            }
        }
        let plain = (e.bound(&constraints, false)?, e.bound(&constraints, true)?);
        if context.is_empty() {
            return Some(Some(plain));
        }
        // With the context's constraints too: none of its lanes where they hold nowhere.
        constraints.extend(context.iter().cloned());
        Some(
            match (e.bound(&constraints, false), e.bound(&constraints, true)) {
                (Some(lo), Some(hi)) if lo > hi => None,
                (Some(lo), Some(hi)) => Some((lo, hi)),
                _ => Some(plain),
            },
        )
    }

    /// The constraints of `cs` (the loops and `if`s around a value) this launch can
    /// evaluate, those relying on a failed check dropped; `None` when one can never hold
    /// (the code inside never runs in this launch).
    fn context(&mut self, cs: &'p [Constraint]) -> Option<Vec<Evaluated<'p>>> {
        let mut out = Vec::with_capacity(cs.len());
        for c in cs {
            if let Some(e) = self.constraint(c) {
                if e.terms.iter().any(|t| is_empty(t.range)) || e.range().is_some_and(|r| r.0 > 0) {
                    return None;
                }
                out.push(e);
            }
        }
        Some(out)
    }

    /// The range of `f` where `context` holds: [`EMPTY`] where the constraints hold
    /// nowhere together (a sound bound of what they allow has its lowest value above its
    /// highest).
    fn bounded(&self, f: &'p Form, context: &[Evaluated<'p>]) -> Option<Range> {
        let plain = self.range(f)?;
        if context.is_empty() || is_empty(plain) {
            return Some(plain);
        }
        let e = self.evaluated(f)?;
        Some(match (e.bound(context, false), e.bound(context, true)) {
            (Some(lo), Some(hi)) if lo > hi => EMPTY,
            (Some(lo), Some(hi)) => (lo.max(plain.0), hi.min(plain.1)),
            _ => plain,
        })
    }

    /// Site `site` when it is an unconditional access whose every lane lies outside its
    /// argument in this launch (its offsets' enclosure misses the span).
    pub fn refuted(&mut self, site: u32) -> Option<Refuted> {
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
        if !self.holds(&a.checks) {
            return false;
        }
        let Some(offset) = self.evaluated(&a.offset) else {
            return false;
        };
        let mut constraints = Vec::new();
        for c in &a.constraints {
            if let Some(e) = self.constraint(c) {
                constraints.push(e);
            }
        }
        // An empty variable or an unsatisfiable constraint: the access never happens.
        let empty = |e: &Evaluated| e.terms.iter().any(|t| is_empty(t.range));
        if empty(&offset) || constraints.iter().any(empty) {
            return true;
        }
        if constraints
            .iter()
            .any(|c| c.range().is_some_and(|r| r.0 > 0))
        {
            return true;
        }
        let (Some(max), Some(min)) = (
            offset.bound(&constraints, true),
            offset.bound(&constraints, false),
        ) else {
            return false;
        };
        // Bounds that cross: no lane satisfies every constraint.
        if min > max {
            return true;
        }
        let bytes = a.bytes as i128;
        lo <= min && max.checked_add(bytes).is_some_and(|end| end <= hi)
    }

    fn constraint(&mut self, c: &'p Constraint) -> Option<Evaluated<'p>> {
        if let Some((s, positive)) = c.when {
            let v = self.scalar(s)?;
            if (v > 0) != positive || v == 0 {
                return None;
            }
        }
        if !self.holds(&c.checks) {
            return None;
        }
        self.evaluated(&c.form)
    }

    fn evaluated(&self, f: &'p Form) -> Option<Evaluated<'p>> {
        let constant = self.scalar(f.constant)?;
        let mut terms = Vec::with_capacity(f.terms.len());
        for (v, k) in &f.terms {
            terms.push(Term {
                var: v,
                coef: self.scalar(*k)?,
                range: self.var(v)?,
            });
        }
        Some(Evaluated { constant, terms })
    }
}

#[derive(Clone)]
struct Term<'p> {
    var: &'p Var,
    coef: i128,
    range: Range,
}

/// A form with its launch's numbers.
#[derive(Clone)]
struct Evaluated<'p> {
    constant: i128,
    terms: Vec<Term<'p>>,
}

impl Evaluated<'_> {
    /// The range over every variable's range.
    fn range(&self) -> Option<Range> {
        range_of(self.constant, self.terms.iter())
    }

    /// The largest (`upper`) or smallest value on lanes where every constraint `c ≤ 0`
    /// holds: the constraints whose variables this form has in proportion `λ·c` (`λ > 0`
    /// for the largest, `< 0` for the smallest) bound that part by `λ` times their limit;
    /// the rest takes its variables' ranges.
    fn bound(&self, constraints: &[Evaluated<'_>], upper: bool) -> Option<i128> {
        let mut left: Vec<bool> = vec![true; self.terms.len()];
        let mut total = self.constant;
        for c in constraints {
            // The variables shared with what is left of this form.
            let shared: Vec<(usize, usize)> = (self.terms.iter().enumerate())
                .filter(|(i, _)| left[*i])
                .filter_map(|(i, t)| c.terms.iter().position(|u| u.var == t.var).map(|j| (i, j)))
                .collect();
            let Some(&(i0, j0)) = shared.first() else {
                continue;
            };
            let (a, b) = (self.terms[i0].coef, c.terms[j0].coef);
            if b == 0 || a % b != 0 {
                continue;
            }
            let lambda = a / b;
            if (lambda > 0) != upper || lambda == 0 {
                continue;
            }
            if !shared
                .iter()
                .all(|&(i, j)| Some(self.terms[i].coef) == c.terms[j].coef.checked_mul(lambda))
            {
                continue;
            }
            // c = L_S + L_rest + c0 ≤ 0, so L_S ≤ −c0 − min(L_rest).
            let rest = (c.terms.iter().enumerate())
                .filter(|(j, _)| !shared.iter().any(|s| s.1 == *j))
                .map(|(_, t)| t);
            let Some((rest_min, _)) = range_of(0, rest) else {
                continue;
            };
            let Some(limit) = c.constant.checked_add(rest_min).and_then(i128::checked_neg) else {
                continue;
            };
            let Some((_, box_max)) = range_of(0, shared.iter().map(|&(_, j)| &c.terms[j])) else {
                continue;
            };
            total = total.checked_add(lambda.checked_mul(limit.min(box_max))?)?;
            for &(i, _) in &shared {
                left[i] = false;
            }
        }
        let (lo, hi) = range_of(
            0,
            (self.terms.iter().enumerate())
                .filter(|(i, _)| left[*i])
                .map(|(_, t)| t),
        )?;
        total.checked_add(if upper { hi } else { lo })
    }
}

fn range_of<'a, 'p: 'a>(
    constant: i128,
    terms: impl Iterator<Item = &'a Term<'p>>,
) -> Option<Range> {
    let (mut lo, mut hi) = (constant, constant);
    for t in terms {
        let (a, b) = scaled(t.range, t.coef)?;
        lo = lo.checked_add(a)?;
        hi = hi.checked_add(b)?;
    }
    Some((lo, hi))
}

/// `k · [lo, hi]`.
fn scaled((lo, hi): Range, k: i128) -> Option<Range> {
    let (a, b) = (lo.checked_mul(k)?, hi.checked_mul(k)?);
    Some((a.min(b), a.max(b)))
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
