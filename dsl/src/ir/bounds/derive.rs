//! From the IR to a [`BoundsProof`]: one walk in program order giving every integer and
//! pointer value an abstract value ([`Abs`]), and every fault site its proof.

use super::form::{Form, Var};
use super::scalar::{Scalar, ScalarId, Scalars};
use super::{
    Access, AtomDef, BoundsProof, Check, CheckId, Constraint, Enumeration, LoopBounds, RangeOp,
    SiteProof,
};
use crate::ir::{
    BinOp, Block, BuiltinExtent, CmpPred, Const, CustomCall, DType, Elem, Function, Inst, Op, UnOp,
    Value,
};
use std::collections::{HashMap, HashSet};

/// What the proof knows of a value.
#[derive(Debug, Clone)]
enum Abs {
    /// An integer whose every lane is `form` modulo its dtype's width, where `checks` hold.
    Int {
        form: Form,
        dtype: DType,
        checks: Vec<CheckId>,
    },
    /// A pointer into parameter `root`'s buffer (with `entry`, into the buffer of the
    /// entry of table `root` at that byte offset), `offset` bytes (exactly) from its
    /// pointer, where `checks` hold.
    Ptr {
        root: usize,
        entry: Option<ScalarId>,
        offset: Form,
        checks: Vec<CheckId>,
    },
    Unknown,
}

struct Deriver<'f> {
    f: &'f Function,
    defs: HashMap<Value, &'f Inst>,
    s: Scalars,
    atoms: Vec<AtomDef>,
    checks: Vec<Check>,
    check_ids: HashMap<Check, CheckId>,
    env: HashMap<Value, Abs>,
    /// Constraints of the loops and `if`s around the op being walked.
    context: Vec<Constraint>,
    sites: Vec<SiteProof>,
    /// False while a loop body is walked only to find its carried values' steps.
    recording: bool,
    /// How many blocks the walk is in (1: the kernel's body).
    nesting: u32,
    /// `Function::foreign_pointers`, computed at the first site that needs it.
    foreign: Option<HashSet<Value>>,
    pids: [Option<u32>; 3],
    enumerations: Vec<Enumeration>,
    /// While a loop's body is walked with its counter a launch-time scalar (no loop inside
    /// it is enumerated).
    enumerating: bool,
}

pub(super) fn derive(f: &Function) -> BoundsProof {
    let mut d = Deriver {
        f,
        defs: f.defs(),
        s: Scalars::default(),
        atoms: Vec::new(),
        checks: Vec::new(),
        check_ids: HashMap::new(),
        env: HashMap::new(),
        context: Vec::new(),
        sites: Vec::new(),
        recording: true,
        nesting: 0,
        foreign: None,
        pids: [None; 3],
        enumerations: Vec::new(),
        enumerating: false,
    };
    for (i, p) in f.params.iter().enumerate() {
        let abs = match f.ty(p.value).elem {
            Elem::Ptr(_) => Abs::Ptr {
                root: i,
                entry: None,
                offset: Form::constant(d.s.constant(0)),
                checks: vec![],
            },
            Elem::Scalar(dt) if dt.is_int() => Abs::Int {
                form: Form::constant(d.s.get(Scalar::Param(i as u32))),
                dtype: dt,
                checks: vec![],
            },
            Elem::Scalar(_) => Abs::Unknown,
        };
        d.env.insert(p.value, abs);
    }
    d.block(&f.body);
    // A site the walk cannot prove shows its enumeration's proof, if it has one.
    let mut listed = d.sites.clone();
    for e in &d.enumerations {
        for (k, p) in e.sites.iter().enumerate() {
            let at = e.first_site as usize + k;
            if matches!(p, SiteProof::Proof(_)) && matches!(listed[at], SiteProof::Unproven(_)) {
                listed[at] = p.clone();
            }
        }
    }
    BoundsProof {
        scalars: d.s,
        atoms: d.atoms,
        checks: d.checks,
        walked: d.sites,
        enumerations: d.enumerations,
        sites: listed,
    }
}

impl Abs {
    /// The same value with its form (an integer's, a pointer's offset) mapped by `f`;
    /// unknown where `f` gives none.
    fn map_form(self, f: impl FnOnce(Form) -> Option<Form>) -> Abs {
        match self {
            Abs::Int {
                form,
                dtype,
                checks,
            } => match f(form) {
                Some(form) => Abs::Int {
                    form,
                    dtype,
                    checks,
                },
                None => Abs::Unknown,
            },
            Abs::Ptr {
                root,
                entry,
                offset,
                checks,
            } => match f(offset) {
                Some(offset) => Abs::Ptr {
                    root,
                    entry,
                    offset,
                    checks,
                },
                None => Abs::Unknown,
            },
            Abs::Unknown => Abs::Unknown,
        }
    }
}

fn union(a: &[CheckId], b: &[CheckId]) -> Vec<CheckId> {
    let mut v: Vec<CheckId> = a.iter().chain(b).copied().collect();
    v.sort_unstable();
    v.dedup();
    v
}

impl<'f> Deriver<'f> {
    fn abs(&self, v: Value) -> Abs {
        self.env.get(&v).cloned().unwrap_or(Abs::Unknown)
    }

    fn shape(&self, v: Value) -> &'f [usize] {
        &self.f.ty(v).shape
    }

    fn atom(&mut self, def: AtomDef) -> u32 {
        self.atoms.push(def);
        self.atoms.len() as u32 - 1
    }

    /// The variable of atom `id` for a value of `shape`: it varies along every axis of
    /// more than one lane.
    fn atom_var(&mut self, id: u32, shape: &[usize]) -> Form {
        let place = (0..shape.len() as u32)
            .filter(|a| shape[*a as usize] > 1)
            .collect();
        Form::var(&mut self.s, Var::Atom { id, place })
    }

    fn check(&mut self, form: &Form, dtype: DType) -> Vec<CheckId> {
        if form.is_uniform() {
            return vec![];
        }
        let c = Check {
            form: form.clone(),
            dtype,
            context: self.context.clone(),
        };
        let next = self.checks.len() as CheckId;
        let id = *self.check_ids.entry(c.clone()).or_insert(next);
        if id == next {
            self.checks.push(c);
        }
        vec![id]
    }

    /// The form that equals `v`'s value exactly where the returned checks hold.
    fn exact(&mut self, form: &Form, dtype: DType, checks: &[CheckId]) -> (Form, Vec<CheckId>) {
        if form.is_uniform() {
            // The constant may come from the proof's exact arithmetic: wrap it as the
            // machine does.
            let c = self.s.get(Scalar::Cast(form.constant, dtype));
            return (Form::constant(c), checks.to_vec());
        }
        let own = self.check(form, dtype);
        (form.clone(), union(checks, &own))
    }

    fn exact_int(&mut self, v: Value) -> Option<(Form, DType, Vec<CheckId>)> {
        match self.abs(v) {
            Abs::Int {
                form,
                dtype,
                checks,
            } => {
                let (f, c) = self.exact(&form, dtype, &checks);
                Some((f, dtype, c))
            }
            _ => None,
        }
    }

    /// A value known by its range: a new atom.
    fn range(&mut self, v: Value, op: RangeOp, dtype: DType, checks: Vec<CheckId>) -> Abs {
        let context = self.context.clone();
        let id = self.atom(AtomDef::Range {
            op,
            dtype,
            checks,
            context,
        });
        Abs::Int {
            form: self.atom_var(id, self.shape(v)),
            dtype,
            checks: vec![],
        }
    }

    fn block(&mut self, b: &'f Block) {
        self.nesting += 1;
        for inst in &b.insts {
            self.inst(inst);
        }
        self.nesting -= 1;
    }

    /// Whether an access at the op being walked runs in every program: in the kernel's
    /// own body (not a loop's or an `if`'s), unmasked.
    fn unconditional(&self, mask: Option<Value>) -> bool {
        self.nesting == 1 && mask.is_none()
    }

    fn set(&mut self, v: Value, a: Abs) {
        self.env.insert(v, a);
    }

    fn inst(&mut self, inst: &'f Inst) {
        let r = inst.results.first().copied();
        match &inst.op {
            Op::For {
                lo,
                hi,
                step,
                init,
                body,
                ..
            } => return self.for_loop(inst, *lo, *hi, *step, init, body),
            Op::While { init, cond, body } => return self.while_loop(inst, init, cond, body),
            Op::If {
                cond,
                then_region,
                else_region,
            } => return self.if_else(inst, *cond, then_region, else_region),
            Op::Load { ptr, mask, .. } => self.site(*ptr, *mask, false),
            Op::Store { ptr, mask, .. } | Op::Atomic { ptr, mask, .. } => {
                self.site(*ptr, *mask, true)
            }
            Op::AtomicCas { ptr, .. } => self.site(*ptr, None, true),
            Op::Custom(c) if inst.op.fault_kind().is_some() => self.builtin_site(c),
            Op::Assert { .. } if self.recording => self.sites.push(SiteProof::NotAccess),
            _ => {}
        }
        let Some(r) = r else { return };
        let a = self.value(inst, r);
        self.set(r, a);
    }

    /// The abstract value of `r`, the first result of `inst` (not a loop or `if`).
    fn value(&mut self, inst: &Inst, r: Value) -> Abs {
        let t = self.f.ty(r);
        let dtype = match t.elem {
            Elem::Scalar(d) if d.is_int() => Some(d),
            _ => None,
        };
        match (&inst.op, dtype) {
            (Op::Const(Const::Int(c)), Some(d)) => Abs::Int {
                form: Form::constant(self.s.constant(*c)),
                dtype: d,
                checks: vec![],
            },
            (Op::ProgramId(axis), Some(d)) => {
                let id = match self.pids[*axis as usize] {
                    Some(id) => id,
                    None => {
                        let id = self.atom(AtomDef::ProgramId(*axis));
                        self.pids[*axis as usize] = Some(id);
                        id
                    }
                };
                Abs::Int {
                    form: Form::var(&mut self.s, Var::Atom { id, place: vec![] }),
                    dtype: d,
                    checks: vec![],
                }
            }
            (Op::NumPrograms(axis), Some(d)) => Abs::Int {
                form: Form::constant(self.s.get(Scalar::NumPrograms(*axis))),
                dtype: d,
                checks: vec![],
            },
            (Op::Arange { start, end }, Some(d)) => {
                let base = Form::constant(self.s.constant(i128::from(*start)));
                let extent = (end - start) as u64;
                let form = if extent > 1 {
                    {
                        let lane = Form::var(&mut self.s, Var::Lane { axis: 0, extent });
                        base.add(&mut self.s, &lane)
                    }
                } else {
                    base
                };
                Abs::Int {
                    form,
                    dtype: d,
                    checks: vec![],
                }
            }
            (Op::Splat(x) | Op::Hint { x, .. }, _) => self.abs(*x),
            (Op::Broadcast(x), _) => {
                let (xs, ts) = (self.shape(*x), self.shape(r));
                let lead = (ts.len() - xs.len()) as u32;
                self.moved(*x, |a| {
                    let to = a + lead;
                    (xs[a as usize] == ts[to as usize]).then_some(to)
                })
            }
            (Op::ExpandDims { x, axis }, _) => {
                let axis = *axis;
                self.moved(*x, |a| Some(if a < axis { a } else { a + 1 }))
            }
            (Op::Permute { x, dims }, _) => {
                let dims = dims.clone();
                self.moved(*x, |a| dims.iter().position(|d| *d == a).map(|p| p as u32))
            }
            (Op::Reshape(x), _) => self.reshaped(*x, r),
            (Op::Binary(op, x, y), Some(d)) => self.binary(r, *op, *x, *y, d),
            (Op::Unary(UnOp::Neg, x), Some(d)) => match self.abs(*x) {
                Abs::Int { form, checks, .. } => {
                    let form = if form.is_uniform() {
                        let zero = self.s.constant(0);
                        Form::constant(self.s.get(Scalar::Machine(
                            BinOp::Sub,
                            zero,
                            form.constant,
                            d,
                        )))
                    } else {
                        let m = self.s.constant(-1);
                        form.scaled(&mut self.s, m)
                    };
                    Abs::Int {
                        form,
                        dtype: d,
                        checks,
                    }
                }
                _ => Abs::Unknown,
            },
            (Op::Cast(x), Some(d)) => self.cast(r, *x, d),
            (Op::Select(c, a, b), _) => {
                let yes = self.constraints_of(*c, false, 0);
                let no = self.constraints_of(*c, true, 0);
                self.hull(r, &[(*a, yes), (*b, no)])
            }
            // A scalar read from a uniform address: read at launch (when nothing may
            // write it, see `LaunchMemory::read`).
            (
                Op::Load {
                    ptr, mask: None, ..
                },
                Some(d),
            ) if t.shape.is_empty() => match self.abs(*ptr) {
                Abs::Ptr {
                    root,
                    entry: None,
                    offset,
                    checks,
                } if offset.is_uniform() && checks.is_empty() => Abs::Int {
                    form: Form::constant(self.s.get(Scalar::Load {
                        param: root as u32,
                        offset: offset.constant,
                        dtype: d,
                    })),
                    dtype: d,
                    checks: vec![],
                },
                _ => Abs::Unknown,
            },
            // An address read from a uniform place of a pointer table: its entry.
            (Op::IntToPtr(x), None) => match self.abs(*x) {
                Abs::Int { form, checks, .. } if form.is_uniform() && checks.is_empty() => {
                    match self.s.nodes[form.constant as usize] {
                        Scalar::Load {
                            param,
                            offset,
                            dtype: DType::I64 | DType::U64,
                        } => Abs::Ptr {
                            root: param as usize,
                            entry: Some(offset),
                            offset: Form::constant(self.s.constant(0)),
                            checks: vec![],
                        },
                        _ => Abs::Unknown,
                    }
                }
                _ => Abs::Unknown,
            },
            (Op::AddPtr(p, o), _) => match (self.abs(*p), self.abs(*o)) {
                (
                    Abs::Ptr {
                        root,
                        entry,
                        offset,
                        checks,
                    },
                    Abs::Int {
                        form,
                        dtype: od,
                        checks: oc,
                    },
                ) => {
                    let size = t.elem.pointee().map_or(1, DType::size_bytes);
                    // A narrow offset is widened to 64 bits: it must be exact. A 64-bit one
                    // is added modulo 2^64, as the address is.
                    let (form, oc) = if od.bits() < 64 {
                        self.exact(&form, od, &oc)
                    } else {
                        (form, oc)
                    };
                    let k = self.s.constant(size as i128);
                    Abs::Ptr {
                        root,
                        entry,
                        offset: offset.add_scaled(&mut self.s, &form, k),
                        checks: union(&checks, &oc),
                    }
                }
                _ => Abs::Unknown,
            },
            _ => Abs::Unknown,
        }
    }

    fn moved(&mut self, x: Value, to: impl Fn(u32) -> Option<u32>) -> Abs {
        self.abs(x).map_form(|f| f.moved(&to))
    }

    /// A reshape keeps a form whose lanes are all alike; else the lanes are known by
    /// their range.
    fn reshaped(&mut self, x: Value, r: Value) -> Abs {
        match self.abs(x) {
            a @ (Abs::Int { .. } | Abs::Ptr { .. }) if !varies(&a) => a,
            Abs::Int {
                form,
                dtype,
                checks,
            } => {
                let (f, c) = self.exact(&form, dtype, &checks);
                self.range(r, RangeOp::Hull(vec![(f, vec![])]), dtype, c)
            }
            Abs::Ptr {
                root,
                entry,
                offset,
                checks,
            } => {
                let context = self.context.clone();
                let id = self.atom(AtomDef::Range {
                    op: RangeOp::Hull(vec![(offset, vec![])]),
                    dtype: DType::I64,
                    checks,
                    context,
                });
                Abs::Ptr {
                    root,
                    entry,
                    offset: self.atom_var(id, self.shape(r)),
                    checks: vec![],
                }
            }
            Abs::Unknown => Abs::Unknown,
        }
    }

    /// One of `values` (a `select`'s, an `if`'s branches'), each where its constraints
    /// hold: their common form, or their hull.
    fn hull(&mut self, r: Value, values: &[(Value, Vec<Constraint>)]) -> Abs {
        let abs: Vec<Abs> = values.iter().map(|(v, _)| self.abs(*v)).collect();
        let guards: Vec<Vec<Constraint>> = values.iter().map(|(_, c)| c.clone()).collect();
        self.hull_of(r, &abs, guards)
    }

    fn hull_of(&mut self, r: Value, abs: &[Abs], guards: Vec<Vec<Constraint>>) -> Abs {
        let first = abs[0].clone();
        match first {
            Abs::Int { dtype, .. } => {
                let mut forms = Vec::new();
                let mut checks = Vec::new();
                for a in abs {
                    let Abs::Int {
                        form,
                        dtype: d,
                        checks: c,
                    } = a
                    else {
                        return Abs::Unknown;
                    };
                    if *d != dtype {
                        return Abs::Unknown;
                    }
                    let (f, c) = self.exact(form, dtype, c);
                    checks = union(&checks, &c);
                    forms.push(f);
                }
                if forms.iter().all(|f| *f == forms[0]) {
                    let form = forms.swap_remove(0);
                    return Abs::Int {
                        form,
                        dtype,
                        checks,
                    };
                }
                self.range(
                    r,
                    RangeOp::Hull(forms.into_iter().zip(guards).collect()),
                    dtype,
                    checks,
                )
            }
            Abs::Ptr { root, entry, .. } => {
                let mut forms = Vec::new();
                let mut checks = Vec::new();
                for a in abs {
                    let Abs::Ptr {
                        root: r2,
                        entry: e2,
                        offset,
                        checks: c,
                    } = a
                    else {
                        return Abs::Unknown;
                    };
                    if *r2 != root || *e2 != entry {
                        return Abs::Unknown;
                    }
                    checks = union(&checks, c);
                    forms.push(offset.clone());
                }
                if forms.iter().all(|f| *f == forms[0]) {
                    let offset = forms.swap_remove(0);
                    return Abs::Ptr {
                        root,
                        entry,
                        offset,
                        checks,
                    };
                }
                let context = self.context.clone();
                let id = self.atom(AtomDef::Range {
                    op: RangeOp::Hull(forms.into_iter().zip(guards).collect()),
                    dtype: DType::I64,
                    checks,
                    context,
                });
                Abs::Ptr {
                    root,
                    entry,
                    offset: self.atom_var(id, self.shape(r)),
                    checks: vec![],
                }
            }
            Abs::Unknown => Abs::Unknown,
        }
    }

    fn binary(&mut self, r: Value, op: BinOp, x: Value, y: Value, d: DType) -> Abs {
        let (
            Abs::Int {
                form: fx,
                checks: cx,
                ..
            },
            Abs::Int {
                form: fy,
                checks: cy,
                ..
            },
        ) = (self.abs(x), self.abs(y))
        else {
            return Abs::Unknown;
        };
        let checks = union(&cx, &cy);
        if fx.is_uniform() && fy.is_uniform() {
            let c = self.s.get(Scalar::Machine(op, fx.constant, fy.constant, d));
            return Abs::Int {
                form: Form::constant(c),
                dtype: d,
                checks,
            };
        }
        // Uniform operands as the machine values they are.
        let machine = |s: &mut Scalars, f: &Form| s.get(Scalar::Cast(f.constant, d));
        let form = match op {
            BinOp::Add => fx.add(&mut self.s, &fy),
            BinOp::Sub => fx.sub(&mut self.s, &fy),
            BinOp::Mul if fy.is_uniform() => {
                let k = machine(&mut self.s, &fy);
                fx.scaled(&mut self.s, k)
            }
            BinOp::Mul if fx.is_uniform() => {
                let k = machine(&mut self.s, &fx);
                fy.scaled(&mut self.s, k)
            }
            BinOp::Shl => match self.s.as_const(fy.constant).filter(|_| fy.is_uniform()) {
                Some(c) => {
                    let k = self.s.constant(1i128 << c.rem_euclid(i128::from(d.bits())));
                    fx.scaled(&mut self.s, k)
                }
                None => return Abs::Unknown,
            },
            BinOp::Mul | BinOp::Div | BinOp::Rem | BinOp::Min | BinOp::Max => {
                let (ex, c1) = self.exact(&fx, d, &cx);
                let (ey, c2) = self.exact(&fy, d, &cy);
                let checks = union(&c1, &c2);
                let op = match op {
                    BinOp::Div => RangeOp::Div(ex, ey),
                    BinOp::Rem => RangeOp::Rem(ex, ey),
                    BinOp::Min => RangeOp::Min(ex, ey),
                    BinOp::Max => RangeOp::Max(ex, ey),
                    _ => RangeOp::Mul(ex, ey),
                };
                return self.range(r, op, d, checks);
            }
            _ => return Abs::Unknown,
        };
        Abs::Int {
            form,
            dtype: d,
            checks,
        }
    }

    fn cast(&mut self, r: Value, x: Value, d: DType) -> Abs {
        let from = match self.f.ty(x).elem {
            Elem::Scalar(s) => s,
            Elem::Ptr(_) => return Abs::Unknown,
        };
        if from.is_bool() {
            return self.range(r, RangeOp::Bool, d, vec![]);
        }
        let Abs::Int { form, checks, .. } = self.abs(x) else {
            return Abs::Unknown;
        };
        if form.is_uniform() {
            let c = self.s.get(Scalar::Cast(form.constant, from));
            return Abs::Int {
                form: Form::constant(self.s.get(Scalar::Cast(c, d))),
                dtype: d,
                checks,
            };
        }
        // Narrowing and sign changes keep the low bits, a ring homomorphism; widening
        // extends the exact value.
        let (form, checks) = if d.bits() > from.bits() {
            self.exact(&form, from, &checks)
        } else {
            (form, checks)
        };
        Abs::Int {
            form,
            dtype: d,
            checks,
        }
    }

    /// Constraints that hold on every lane of bool `m` that is true (`negate`: false), in
    /// `m`'s shape.
    fn constraints_of(&mut self, m: Value, negate: bool, depth: u32) -> Vec<Constraint> {
        let Some(inst) = self.defs.get(&m).copied() else {
            return vec![];
        };
        if depth > 32 {
            return vec![];
        }
        match &inst.op {
            Op::Binary(BinOp::And, a, b) if !negate => {
                let mut c = self.constraints_of(*a, false, depth + 1);
                c.extend(self.constraints_of(*b, false, depth + 1));
                c
            }
            Op::Binary(BinOp::Or, a, b) if negate => {
                let mut c = self.constraints_of(*a, true, depth + 1);
                c.extend(self.constraints_of(*b, true, depth + 1));
                c
            }
            Op::Unary(UnOp::Not, x) => self.constraints_of(*x, !negate, depth + 1),
            Op::Splat(x) | Op::Hint { x, .. } => self.constraints_of(*x, negate, depth + 1),
            Op::Broadcast(x) => {
                let (xs, ts) = (self.shape(*x), self.shape(m));
                let lead = (ts.len() - xs.len()) as u32;
                let inner = self.constraints_of(*x, negate, depth + 1);
                move_constraints(inner, |a| {
                    let to = a + lead;
                    (xs[a as usize] == ts[to as usize]).then_some(to)
                })
            }
            Op::ExpandDims { x, axis } => {
                let axis = *axis;
                let inner = self.constraints_of(*x, negate, depth + 1);
                move_constraints(inner, |a| Some(if a < axis { a } else { a + 1 }))
            }
            Op::Permute { x, dims } => {
                let inner = self.constraints_of(*x, negate, depth + 1);
                move_constraints(inner, |a| {
                    dims.iter().position(|d| *d == a).map(|p| p as u32)
                })
            }
            Op::Cmp(pred, a, b) => {
                let pred = if negate { negated(*pred) } else { *pred };
                self.compare(pred, *a, *b)
            }
            _ => vec![],
        }
    }

    /// `a pred b` as constraints `form ≤ 0`.
    fn compare(&mut self, pred: CmpPred, a: Value, b: Value) -> Vec<Constraint> {
        let (Some((fa, _, ca)), Some((fb, _, cb))) = (self.exact_int(a), self.exact_int(b)) else {
            return vec![];
        };
        let checks = union(&ca, &cb);
        let s = &mut self.s;
        let forms = match pred {
            CmpPred::Lt => vec![fa.sub(s, &fb).plus_constant(s, 1)],
            CmpPred::Le => vec![fa.sub(s, &fb)],
            CmpPred::Gt => vec![fb.sub(s, &fa).plus_constant(s, 1)],
            CmpPred::Ge => vec![fb.sub(s, &fa)],
            CmpPred::Eq => vec![fa.sub(s, &fb), fb.sub(s, &fa)],
            CmpPred::Ne => vec![],
        };
        (forms.into_iter())
            .map(|form| Constraint {
                form,
                checks: checks.clone(),
                when: None,
            })
            .collect()
    }

    fn site(&mut self, ptr: Value, mask: Option<Value>, writes: bool) {
        if !self.recording {
            return;
        }
        let proof = match self.abs(ptr) {
            Abs::Ptr {
                root,
                entry,
                offset,
                checks,
            } => {
                let bytes = self.f.ty(ptr).elem.pointee().map_or(1, DType::size_bytes) as u64;
                let mut constraints = match mask {
                    Some(m) => self.constraints_of(m, false, 0),
                    None => vec![],
                };
                constraints.extend(self.context.iter().cloned());
                SiteProof::Proof(Access {
                    root,
                    bytes,
                    entry,
                    writes,
                    offset,
                    checks,
                    constraints,
                    unconditional: self.unconditional(mask),
                    extent: false,
                })
            }
            _ if (self.foreign)
                .get_or_insert_with(|| self.f.foreign_pointers())
                .contains(&ptr) =>
            {
                SiteProof::Unproven("a pointer made from an integer")
            }
            _ => SiteProof::Unproven("an address the proof cannot follow"),
        };
        self.sites.push(proof);
    }

    /// A builtin's access: its pointer's offset plus every element of its extent (an
    /// iteration of a loop `0..bound`, or of `0..rows` and `0..row_len`), so the launch
    /// proves the whole extent inside the argument or the call is checked.
    fn builtin_site(&mut self, c: &CustomCall) {
        if !self.recording {
            return;
        }
        let proof = self.builtin_access(c).map_or(
            SiteProof::Unproven("a builtin's extent the proof cannot follow"),
            SiteProof::Proof,
        );
        self.sites.push(proof);
    }

    fn builtin_access(&mut self, c: &CustomCall) -> Option<Access> {
        let f = self.f;
        let access = c.builtin_access(|v| f.ty(v).shape.clone())?;
        let Abs::Ptr {
            root,
            entry,
            offset,
            mut checks,
        } = self.abs(access.ptr)
        else {
            return None;
        };
        let bytes = f.ty(access.ptr).elem.pointee()?.size_bytes() as i128;
        let size = self.s.constant(bytes);
        let iteration = |d: &mut Self, hi: Form, hi_checks: Vec<CheckId>| {
            let (zero, one) = (d.s.constant(0), d.s.constant(1));
            let id = d.atom(AtomDef::Iter(LoopBounds {
                lo: Form::constant(zero),
                hi,
                step: one,
                checks: hi_checks,
            }));
            Form::var(&mut d.s, Var::Atom { id, place: vec![] })
        };
        let offset = match access.extent {
            BuiltinExtent::Prefix { bound } => {
                let (n, _, n_checks) = self.exact_int(bound)?;
                let k = iteration(self, n, n_checks);
                offset.add_scaled(&mut self.s, &k, size)
            }
            BuiltinExtent::Rows {
                stride,
                rows,
                row_len,
            } => {
                let (stride, _, stride_checks) = self.exact_int(stride)?;
                if !stride.is_uniform() {
                    return None;
                }
                let (rows, _, row_checks) = self.exact_int(rows)?;
                let r = iteration(self, rows, row_checks);
                let len = Form::constant(self.s.constant(i128::from(row_len)));
                let j = iteration(self, len, vec![]);
                checks = union(&checks, &stride_checks);
                let row_step = self.s.mul(stride.constant, size);
                let at = offset.add_scaled(&mut self.s, &r, row_step);
                at.add_scaled(&mut self.s, &j, size)
            }
        };
        Some(Access {
            root,
            bytes: bytes as u64,
            entry,
            writes: access.write,
            offset,
            checks,
            constraints: self.context.clone(),
            unconditional: self.unconditional(None),
            extent: true,
        })
    }

    /// Walks `body` without recording sites, its carried values stand-ins, and returns
    /// each carried value's change per iteration: `Δ` where the body yields `arg + Δ` for
    /// a uniform `Δ` (in bytes for pointers), else `None`.
    fn steps(&mut self, args: &[Value], init: &[Value], body: &'f Block) -> Vec<Option<ScalarId>> {
        let mut holders = Vec::new();
        for (arg, v) in args.iter().zip(init) {
            let id = self.atom(AtomDef::Placeholder);
            let var = Form::var(&mut self.s, Var::Atom { id, place: vec![] });
            let a = match self.abs(*v) {
                Abs::Int { dtype, .. } => Abs::Int {
                    form: var,
                    dtype,
                    checks: vec![],
                },
                Abs::Ptr { root, entry, .. } => Abs::Ptr {
                    root,
                    entry,
                    offset: var,
                    checks: vec![],
                },
                Abs::Unknown => Abs::Unknown,
            };
            holders.push(id);
            self.set(*arg, a);
        }
        let recording = std::mem::replace(&mut self.recording, false);
        self.block(body);
        self.recording = recording;
        let yields = match body.insts.last().map(|i| &i.op) {
            Some(Op::Yield(ys)) => ys.clone(),
            _ => return vec![None; args.len()],
        };
        (yields.iter().zip(&holders))
            .map(|(y, id)| {
                let form = match self.abs(*y) {
                    Abs::Int { form, .. } | Abs::Ptr { offset: form, .. } => form,
                    Abs::Unknown => return None,
                };
                let holder = Var::Atom {
                    id: *id,
                    place: vec![],
                };
                match form.terms.as_slice() {
                    [(v, c)] if *v == holder && self.s.as_const(*c) == Some(1) => {
                        Some(form.constant)
                    }
                    _ => None,
                }
            })
            .collect()
    }

    fn for_loop(
        &mut self,
        inst: &Inst,
        lo: Value,
        hi: Value,
        step: Value,
        init: &[Value],
        body: &'f Block,
    ) {
        let bounds = match (self.exact_int(lo), self.exact_int(hi), self.abs(step)) {
            (
                Some((flo, dt, clo)),
                Some((fhi, _, chi)),
                Abs::Int {
                    form: fs,
                    dtype: sd,
                    ..
                },
            ) if fs.is_uniform() => {
                let step = self.s.get(Scalar::Cast(fs.constant, sd));
                Some((
                    LoopBounds {
                        lo: flo,
                        hi: fhi,
                        step,
                        checks: union(&clo, &chi),
                    },
                    dt,
                ))
            }
            _ => None,
        };
        let iv = body.args[0];
        if let Some((b, dt)) = &bounds {
            let uniform = b.lo.is_uniform() && b.hi.is_uniform();
            if uniform && self.recording && !self.enumerating && loads_by(self.f, body, iv) {
                self.enumerate(b, *dt, init, body);
            }
        }
        let (iter, trips) = match &bounds {
            Some((b, dt)) => {
                let iter = self.atom(AtomDef::Iter(b.clone()));
                let trips = self.atom(AtomDef::Trips(b.clone()));
                let k = Form::var(
                    &mut self.s,
                    Var::Atom {
                        id: iter,
                        place: vec![],
                    },
                );
                let form = b.lo.add_scaled(&mut self.s, &k, b.step);
                self.set(
                    iv,
                    Abs::Int {
                        form,
                        dtype: *dt,
                        checks: b.checks.clone(),
                    },
                );
                (Some(iter), Some(trips))
            }
            None => {
                self.set(iv, Abs::Unknown);
                (None, None)
            }
        };
        let args = &body.args[1..];
        let steps = self.steps(args, init, body);
        let mut results = Vec::new();
        for (k, arg) in args.iter().enumerate() {
            let start = self.abs(init[k]);
            let (a, out) = match (steps[k], iter, trips) {
                (Some(d), _, _) if self.s.as_const(d) == Some(0) => (start.clone(), start),
                (Some(d), Some(it), Some(tr)) => {
                    (self.advanced(&start, d, it), self.advanced(&start, d, tr))
                }
                _ => (Abs::Unknown, Abs::Unknown),
            };
            self.set(*arg, a);
            results.push(out);
        }
        let pushed = match (&bounds, iter) {
            (Some((b, _)), Some(it)) => self.loop_constraints(b, it),
            _ => vec![],
        };
        let n = pushed.len();
        self.context.extend(pushed);
        self.block(body);
        self.context.truncate(self.context.len() - n);
        for (r, a) in inst.results.iter().zip(results) {
            self.set(*r, a);
        }
    }

    /// Derives `body` again with its counter a launch-time scalar (`Scalar::Enum`) and
    /// each carried integer that stays uniform a `Scalar::Carried`, recording its sites
    /// in a new [`Enumeration`] (not in `sites`: the usual walk follows).
    fn enumerate(&mut self, b: &LoopBounds, dt: DType, init: &[Value], body: &'f Block) {
        let id = self.enumerations.len() as u32;
        let counter = self.s.get(Scalar::Enum(id));
        let args = &body.args[1..];
        // (its scalar, dtype, value before the first iteration)
        let mut carried: Vec<Option<(ScalarId, DType, ScalarId)>> = Vec::new();
        for (k, v) in init.iter().enumerate() {
            carried.push(match self.abs(*v) {
                Abs::Int { form, dtype, .. } if form.is_uniform() => Some((
                    self.s.get(Scalar::Carried(id, k as u32)),
                    dtype,
                    self.s.get(Scalar::Cast(form.constant, dtype)),
                )),
                _ => None,
            });
        }
        let bind = |d: &mut Self, carried: &[Option<(ScalarId, DType, ScalarId)>]| {
            let c = Form::constant(counter);
            d.set(
                body.args[0],
                Abs::Int {
                    form: c,
                    dtype: dt,
                    checks: vec![],
                },
            );
            for (arg, c) in args.iter().zip(carried) {
                let a = match c {
                    Some((s, dtype, _)) => Abs::Int {
                        form: Form::constant(*s),
                        dtype: *dtype,
                        checks: vec![],
                    },
                    None => Abs::Unknown,
                };
                d.set(*arg, a);
            }
        };
        // What each iteration yields: a carried integer's machine value, while uniform.
        let yielded = |d: &mut Self, carried: &[Option<(ScalarId, DType, ScalarId)>]| {
            let ys = body.yields();
            (carried.iter().enumerate())
                .map(|(k, c)| {
                    let (_, dtype, _) = (*c)?;
                    match d.abs(*ys.get(k)?) {
                        Abs::Int { form, dtype: t, .. } if form.is_uniform() && t == dtype => {
                            Some(d.s.get(Scalar::Cast(form.constant, dtype)))
                        }
                        _ => None,
                    }
                })
                .collect::<Vec<_>>()
        };
        // Checks are shared by equal forms: the final walk may find those of the first.
        let c0 = self.checks.len();
        self.enumerating = true;
        let recording = std::mem::replace(&mut self.recording, false);
        loop {
            bind(self, &carried);
            self.block(body);
            let ys = yielded(self, &carried);
            let mut changed = false;
            for (c, y) in carried.iter_mut().zip(&ys) {
                if c.is_some() && y.is_none() {
                    *c = None;
                    changed = true;
                }
            }
            if !changed {
                break;
            }
        }
        self.recording = recording;
        let (s0, a0) = (self.sites.len(), self.atoms.len());
        bind(self, &carried);
        self.block(body);
        let ys = yielded(self, &carried);
        self.enumerating = false;
        let sites = self.sites.split_off(s0);
        let carried: Vec<(ScalarId, ScalarId, ScalarId)> = (carried.iter().zip(&ys))
            .filter_map(|(c, y)| Some((c.as_ref()?.0, c.as_ref()?.2, (*y)?)))
            .collect();
        let mut roots = vec![counter];
        roots.extend(carried.iter().map(|c| c.0));
        let scalars = self.s.dependents(&roots);
        self.enumerations.push(Enumeration {
            lo: b.lo.constant,
            hi: b.hi.constant,
            step: b.step,
            counter,
            carried,
            scalars,
            atoms: a0 as u32..self.atoms.len() as u32,
            checks: c0 as u32..self.checks.len() as u32,
            first_site: s0 as u32,
            sites,
        });
    }

    /// `start + Δ·atom`.
    fn advanced(&mut self, start: &Abs, d: ScalarId, atom: u32) -> Abs {
        let var = Form::var(
            &mut self.s,
            Var::Atom {
                id: atom,
                place: vec![],
            },
        );
        let s = &mut self.s;
        start.clone().map_form(|f| Some(f.add_scaled(s, &var, d)))
    }

    /// `lo + step·k < hi` counting up, `> hi` counting down, as constraints `≤ 0`.
    fn loop_constraints(&mut self, b: &LoopBounds, iter: u32) -> Vec<Constraint> {
        let s = &mut self.s;
        let k = Form::var(
            s,
            Var::Atom {
                id: iter,
                place: vec![],
            },
        );
        let iv = b.lo.add_scaled(s, &k, b.step);
        let up = iv.sub(s, &b.hi).plus_constant(s, 1);
        let down = b.hi.sub(s, &iv).plus_constant(s, 1);
        let sign = s.as_const(b.step).map(|c| c > 0);
        let make = |form, when| Constraint {
            form,
            checks: b.checks.clone(),
            when,
        };
        match sign {
            Some(true) => vec![make(up, None)],
            Some(false) => vec![make(down, None)],
            None => vec![
                make(up, Some((b.step, true))),
                make(down, Some((b.step, false))),
            ],
        }
    }

    /// A carried value the loop never changes keeps its value; a changing integer is any
    /// value of its dtype (an atom), bounded inside the body by the condition, which
    /// holds there.
    fn while_loop(&mut self, inst: &Inst, init: &[Value], cond: &'f Block, body: &'f Block) {
        let steps = self.steps(&body.args, init, body);
        let mut results = Vec::new();
        for (k, arg) in body.args.iter().enumerate() {
            let start = self.abs(init[k]);
            let a = match (steps[k], self.f.ty(*arg).elem) {
                (Some(d), _) if self.s.as_const(d) == Some(0) => start,
                (_, Elem::Scalar(dt)) if dt.is_int() => self.range(*arg, RangeOp::Any, dt, vec![]),
                _ => Abs::Unknown,
            };
            self.set(*arg, a.clone());
            self.set(cond.args[k], a.clone());
            results.push(a);
        }
        self.block(cond);
        let holds = match cond.insts.last().map(|i| &i.op) {
            Some(Op::Condition(c)) => self.constraints_of(*c, false, 0),
            _ => vec![],
        };
        let n = holds.len();
        self.context.extend(holds);
        self.block(body);
        self.context.truncate(self.context.len() - n);
        for (r, a) in inst.results.iter().zip(results) {
            self.set(*r, a);
        }
    }

    fn if_else(&mut self, inst: &Inst, cond: Value, then: &'f Block, els: &'f Block) {
        let yes = self.constraints_of(cond, false, 0);
        let no = self.constraints_of(cond, true, 0);
        let mut yields = Vec::new();
        for (region, extra) in [(then, yes.clone()), (els, no.clone())] {
            let n = extra.len();
            self.context.extend(extra);
            self.block(region);
            self.context.truncate(self.context.len() - n);
            if let Some(Op::Yield(ys)) = region.insts.last().map(|i| &i.op) {
                yields.push(ys.clone());
            }
        }
        if yields.len() != 2 {
            return;
        }
        for (k, r) in inst.results.iter().enumerate() {
            let a = self.hull(
                *r,
                &[(yields[0][k], yes.clone()), (yields[1][k], no.clone())],
            );
            self.set(*r, a);
        }
    }
}

/// Whether `body` loads a scalar from an address made from `iv` (a loop whose iterations
/// a launch may enumerate: tutorial 08's groups).
fn loads_by(f: &Function, body: &Block, iv: Value) -> bool {
    fn walk(f: &Function, b: &Block, dep: &mut HashSet<Value>) -> bool {
        for inst in &b.insts {
            if let Op::Load { ptr, .. } = &inst.op {
                if dep.contains(ptr) && inst.results.iter().all(|r| f.ty(*r).shape.is_empty()) {
                    return true;
                }
            }
            let uses = inst.op.operands();
            let before = dep.len();
            if uses.iter().any(|v| dep.contains(v)) {
                for r in inst.op.regions() {
                    dep.extend(r.args.iter().copied());
                }
                dep.extend(inst.results.iter().copied());
            }
            for r in inst.op.regions() {
                if walk(f, r, dep) {
                    return true;
                }
            }
            if dep.len() > before {
                dep.extend(inst.results.iter().copied());
            }
        }
        false
    }
    walk(f, body, &mut HashSet::from([iv]))
}

fn varies(a: &Abs) -> bool {
    match a {
        Abs::Int { form, .. } | Abs::Ptr { offset: form, .. } => form.varies_by_lane(),
        Abs::Unknown => true,
    }
}

fn negated(p: CmpPred) -> CmpPred {
    match p {
        CmpPred::Lt => CmpPred::Ge,
        CmpPred::Le => CmpPred::Gt,
        CmpPred::Gt => CmpPred::Le,
        CmpPred::Ge => CmpPred::Lt,
        CmpPred::Eq => CmpPred::Ne,
        CmpPred::Ne => CmpPred::Eq,
    }
}

fn move_constraints(cs: Vec<Constraint>, to: impl Fn(u32) -> Option<u32>) -> Vec<Constraint> {
    (cs.into_iter())
        .filter_map(|c| {
            Some(Constraint {
                form: c.form.moved(&to)?,
                ..c
            })
        })
        .collect()
}
