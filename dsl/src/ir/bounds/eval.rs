//! A proof evaluated for one launch: every scalar, every atom's range, then each access's
//! lowest and highest byte against its argument's span.

use super::form::{Form, Var};
use super::{
    Access, AtomDef, BoundsProof, CheckId, Constraint, LaunchValues, RangeOp, Refuted, SiteProof,
};

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
}

impl<'p, 'l> Launch<'p, 'l> {
    pub fn new(proof: &'p BoundsProof, launch: &'l LaunchValues<'l>) -> Self {
        let scalars = proof.scalars.evaluate(launch.scalars, launch.grid);
        let mut l = Launch {
            proof,
            launch,
            scalars,
            atoms: Vec::with_capacity(proof.atoms.len()),
            checks: vec![None; proof.checks.len()],
        };
        for a in &proof.atoms {
            let r = l.atom(a);
            l.atoms.push(r);
        }
        l
    }

    /// The sites this launch does not prove.
    pub fn unproven(&mut self) -> Vec<u32> {
        let mut out = Vec::new();
        for (i, site) in self.proof.sites.iter().enumerate() {
            let proven = match site {
                SiteProof::Proof(a) => self.proves(a),
                SiteProof::Unproven(_) => false,
                SiteProof::NotAccess => true,
            };
            if !proven {
                out.push(i as u32);
            }
        }
        out
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
            let r = self
                .range(&c.form)
                .is_some_and(|r| is_empty(r) || (lo <= r.0 && r.1 <= hi));
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
                let span = match step {
                    0 => return None,
                    s if s > 0 => hi.1.checked_sub(lo.0)?,
                    _ => lo.1.checked_sub(hi.0)?,
                };
                let trips = if span <= 0 {
                    0
                } else {
                    ceil_div(span, step.checked_abs()?)
                };
                match a {
                    AtomDef::Iter(_) => Some((0, trips - 1)),
                    _ => Some((0, trips)),
                }
            }
            AtomDef::Range { op, dtype, checks } => {
                if !self.holds(checks) {
                    return None;
                }
                let r = self.range_op(op, dtype.int_range())?;
                let (lo, hi) = dtype.int_range()?;
                (is_empty(r) || (lo <= r.0 && r.1 <= hi)).then_some(r)
            }
            AtomDef::Placeholder => None,
        }
    }

    fn range_op(&mut self, op: &'p RangeOp, dtype: Option<(i128, i128)>) -> Option<Range> {
        let forms: Vec<&Form> = match op {
            RangeOp::Div(a, b)
            | RangeOp::Rem(a, b)
            | RangeOp::Min(a, b)
            | RangeOp::Max(a, b)
            | RangeOp::Mul(a, b) => vec![a, b],
            RangeOp::Hull(fs) => fs.iter().map(|(f, _)| f).collect(),
            RangeOp::Bool => vec![],
        };
        for f in forms {
            if is_empty(self.range(f)?) {
                return Some(EMPTY);
            }
        }
        Some(match op {
            RangeOp::Div(x, d) => {
                let ((lo, hi), d) = (self.range(x)?, self.range(d)?);
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
            RangeOp::Rem(x, m) => {
                let ((lo, hi), m) = (self.range(x)?, self.range(m)?);
                // |x % m| < |m| with the sign of x; x % 0 is 0.
                let a = m.0.checked_abs()?.max(m.1.checked_abs()?).max(1) - 1;
                (
                    if lo >= 0 { 0 } else { lo.max(-a) },
                    if hi <= 0 { 0 } else { hi.min(a) },
                )
            }
            RangeOp::Min(a, b) => {
                let (a, b) = (self.range(a)?, self.range(b)?);
                (a.0.min(b.0), a.1.min(b.1))
            }
            RangeOp::Max(a, b) => {
                let (a, b) = (self.range(a)?, self.range(b)?);
                (a.0.max(b.0), a.1.max(b.1))
            }
            RangeOp::Mul(a, b) => {
                let (a, b) = (self.range(a)?, self.range(b)?);
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
                    let Some(x) = self.guarded(f, guards)? else {
                        continue;
                    };
                    r = Some(r.map_or(x, |r| (r.0.min(x.0), r.1.max(x.1))));
                }
                r.unwrap_or(EMPTY)
            }
            RangeOp::Bool => (0, 1),
        })
    }

    /// The range of `f` on lanes where `guards` hold: `Some(None)` when none does.
    fn guarded(&mut self, f: &'p Form, guards: &'p [Constraint]) -> Option<Option<Range>> {
        let e = self.evaluated(f)?;
        let mut constraints = Vec::new();
        for c in guards {
            if let Some(c) = self.constraint(c) {
                if c.range().is_some_and(|r| r.0 > 0) {
                    return Some(None);
                }
                constraints.push(c);
            }
        }
        Some(Some((
            e.bound(&constraints, false)?,
            e.bound(&constraints, true)?,
        )))
    }

    /// Site `site` when it is an unconditional access whose every lane lies outside its
    /// argument in this launch (its offsets' enclosure misses the span).
    pub fn refuted(&mut self, site: u32) -> Option<Refuted> {
        let SiteProof::Proof(a) = self.proof.sites.get(site as usize)? else {
            return None;
        };
        if !a.unconditional || !self.holds(&a.checks) {
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
        let Some(Some((lo, hi))) = self.launch.spans.get(a.root).copied() else {
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

struct Term<'p> {
    var: &'p Var,
    coef: i128,
    range: Range,
}

/// A form with its launch's numbers.
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
