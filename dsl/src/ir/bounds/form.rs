//! Linear forms: an integer value of every lane as a launch-time constant plus launch-time
//! coefficients times variables (lane indices, program ids, loop iterations and opaque
//! values known only by their range).

use super::scalar::{ScalarId, Scalars};

/// A variable of a [`Form`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Var {
    /// The lane's index along `axis` of the value's own shape, `0..extent` (never 1).
    Lane { axis: u32, extent: u64 },
    /// Atom `id` (see `AtomDef`). An atom of a tile value differs between lanes: `place`
    /// lists, for each axis of that tile it varies along, the axis of this value's shape
    /// it lies along now; two variables are one only when both agree.
    Atom { id: u32, place: Vec<u32> },
}

/// `constant + Σ coef · var`, the variables sorted and distinct, no zero coefficient
/// left where it is a known constant.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Form {
    pub constant: ScalarId,
    pub terms: Vec<(Var, ScalarId)>,
}

impl Form {
    pub fn constant(c: ScalarId) -> Form {
        Form {
            constant: c,
            terms: Vec::new(),
        }
    }

    pub fn var(s: &mut Scalars, v: Var) -> Form {
        Form {
            constant: s.constant(0),
            terms: vec![(v, s.constant(1))],
        }
    }

    /// No variable: the same on every lane of every program.
    pub fn is_uniform(&self) -> bool {
        self.terms.is_empty()
    }

    /// `self + k · other`.
    pub fn add_scaled(&self, s: &mut Scalars, other: &Form, k: ScalarId) -> Form {
        let scaled = other.scaled(s, k);
        let constant = s.add(self.constant, scaled.constant);
        let mut terms: Vec<(Var, ScalarId)> =
            Vec::with_capacity(self.terms.len() + scaled.terms.len());
        let (mut i, mut j) = (0, 0);
        while i < self.terms.len() || j < scaled.terms.len() {
            let next = match (self.terms.get(i), scaled.terms.get(j)) {
                (Some(a), Some(b)) if a.0 == b.0 => {
                    i += 1;
                    j += 1;
                    (a.0.clone(), s.add(a.1, b.1))
                }
                (Some(a), Some(b)) if a.0 < b.0 => {
                    i += 1;
                    a.clone()
                }
                (Some(a), None) => {
                    i += 1;
                    a.clone()
                }
                (_, Some(b)) => {
                    j += 1;
                    b.clone()
                }
                (None, None) => unreachable!(),
            };
            if s.as_const(next.1) != Some(0) {
                terms.push(next);
            }
        }
        Form { constant, terms }
    }

    pub fn add(&self, s: &mut Scalars, other: &Form) -> Form {
        let one = s.constant(1);
        self.add_scaled(s, other, one)
    }

    pub fn sub(&self, s: &mut Scalars, other: &Form) -> Form {
        let m = s.constant(-1);
        self.add_scaled(s, other, m)
    }

    pub fn scaled(&self, s: &mut Scalars, k: ScalarId) -> Form {
        let mut terms = Vec::with_capacity(self.terms.len());
        for (v, c) in &self.terms {
            let c = s.mul(*c, k);
            if s.as_const(c) != Some(0) {
                terms.push((v.clone(), c));
            }
        }
        Form {
            constant: s.mul(self.constant, k),
            terms,
        }
    }

    pub fn plus_constant(&self, s: &mut Scalars, c: i128) -> Form {
        let k = s.constant(c);
        Form {
            constant: s.add(self.constant, k),
            terms: self.terms.clone(),
        }
    }

    /// The form of the same lanes in another shape: axis `a` of this value lies along
    /// axis `to(a)` there (`None` only for axes of extent 1, which no variable uses).
    pub fn moved(&self, to: impl Fn(u32) -> Option<u32>) -> Option<Form> {
        let mut terms = Vec::with_capacity(self.terms.len());
        for (v, c) in &self.terms {
            let v = match v {
                Var::Lane { axis, extent } => Var::Lane {
                    axis: to(*axis)?,
                    extent: *extent,
                },
                Var::Atom { id, place } => Var::Atom {
                    id: *id,
                    place: place.iter().map(|a| to(*a)).collect::<Option<_>>()?,
                },
            };
            terms.push((v, *c));
        }
        terms.sort();
        Some(Form {
            constant: self.constant,
            terms,
        })
    }

    /// Whether some variable varies between the lanes of one program.
    pub fn varies_by_lane(&self) -> bool {
        self.terms.iter().any(|(v, _)| match v {
            Var::Lane { .. } => true,
            Var::Atom { place, .. } => !place.is_empty(),
        })
    }
}
