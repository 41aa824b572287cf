//! `Tile`: the handle kernel code computes with, and the implicit conversions of operands.

use super::builder::{with, Builder};
use super::lang::CastTarget;
use crate::ir::{broadcast_shapes, BinOp, CmpPred, Const, DType, Elem, Loc, Op, Type, UnOp, Value};

/// A traced value: a scalar, a tile, a pointer or a tile of pointers.
/// It is `Copy`; operators build IR in the active trace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Tile(pub(crate) Value);

impl Tile {
    /// The IR value.
    pub fn value(self) -> Value {
        self.0
    }

    /// The type of the value.
    pub fn ty(self) -> Type {
        with(|b| b.ty(self.0).clone())
    }

    /// The element dtype (for a pointer tile: the pointee dtype).
    pub fn dtype(self) -> DType {
        match self.ty().elem {
            Elem::Scalar(d) | Elem::Ptr(d) => d,
        }
    }

    /// The static shape (`[]` for a scalar).
    pub fn shape(self) -> Vec<usize> {
        self.ty().shape
    }
}

/// Anything usable where a value is expected: a [`Tile`] or a Rust literal/constexpr.
/// Literals are weakly typed: they take the dtype of the tile they meet (Triton's rule).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Operand {
    /// A traced value.
    Tile(Tile),
    /// An integer literal.
    Int(i128),
    /// A float literal.
    Float(f64),
    /// A bool literal.
    Bool(bool),
}

/// Conversion into an [`Operand`].
pub trait IntoOperand {
    /// The operand.
    fn into_operand(self) -> Operand;
}

impl IntoOperand for Operand {
    fn into_operand(self) -> Operand {
        self
    }
}
impl IntoOperand for Tile {
    fn into_operand(self) -> Operand {
        Operand::Tile(self)
    }
}
impl IntoOperand for &Tile {
    fn into_operand(self) -> Operand {
        Operand::Tile(*self)
    }
}
impl IntoOperand for bool {
    fn into_operand(self) -> Operand {
        Operand::Bool(self)
    }
}
macro_rules! int_operand {
    ($($t:ty),*) => {$(
        impl IntoOperand for $t {
            fn into_operand(self) -> Operand { Operand::Int(self as i128) }
        }
    )*};
}
int_operand!(i8, i16, i32, i64, u8, u16, u32, u64, usize, isize);
impl IntoOperand for f32 {
    fn into_operand(self) -> Operand {
        Operand::Float(self as f64)
    }
}
impl IntoOperand for f64 {
    fn into_operand(self) -> Operand {
        Operand::Float(self)
    }
}
impl IntoOperand for half::f16 {
    fn into_operand(self) -> Operand {
        Operand::Float(self.to_f64())
    }
}
impl IntoOperand for half::bf16 {
    fn into_operand(self) -> Operand {
        Operand::Float(self.to_f64())
    }
}

pub(crate) fn caller_loc(l: &'static std::panic::Location<'static>) -> Loc {
    Loc::from_caller(l)
}

impl Builder {
    /// A constant of `ty` (splatted when `ty` is a tile).
    pub(crate) fn constant(&mut self, c: Const, ty: Type, loc: &Loc) -> Value {
        let d = ty.dtype().expect("constants are numbers");
        // Integers are stored in the dtype's range (the verifier requires it), wrapped as
        // every backend reads them.
        let c = match c {
            Const::Float(f) if d.is_float() => Const::Float(f),
            Const::Int(i) if d.is_float() => Const::Float(i as f64),
            Const::Float(f) => Const::Int(d.wrap_int(f as i128)),
            Const::Int(i) => Const::Int(d.wrap_int(i)),
        };
        self.push1(Op::Const(c), ty, loc.clone())
    }

    /// The default dtype of a lone literal: i32 (i64 when it does not fit), f32, bool.
    fn literal_dtype(op: Operand) -> DType {
        match op {
            Operand::Int(i) if i32::try_from(i).is_ok() => DType::I32,
            Operand::Int(_) => DType::I64,
            Operand::Float(_) => DType::F32,
            Operand::Bool(_) => DType::Bool,
            Operand::Tile(_) => unreachable!("not a literal"),
        }
    }

    /// Turns an operand into a value; a literal takes `like` as its dtype when given.
    pub(crate) fn operand(&mut self, op: Operand, like: Option<DType>, loc: &Loc) -> Value {
        let c = match op {
            Operand::Tile(t) => return t.0,
            Operand::Int(i) => Const::Int(i),
            Operand::Float(f) => Const::Float(f),
            Operand::Bool(b) => Const::Int(b as i128),
        };
        let d = match (op, like) {
            // An int literal never turns a float context into an int one, but a float literal
            // meeting integers becomes f32 (Triton's weak typing).
            (Operand::Float(_), Some(d)) if !d.is_float() => DType::F32,
            (_, Some(d)) => d,
            (op, None) => Self::literal_dtype(op),
        };
        self.constant(c, Type::scalar(d), loc)
    }

    /// Converts `v` to dtype `d` (no-op when equal).
    pub(crate) fn cast(&mut self, v: Value, d: DType, loc: &Loc) -> Value {
        let t = self.ty(v).clone();
        match t.elem {
            Elem::Scalar(from) if from == d => v,
            Elem::Scalar(_) => self.push1(Op::Cast(v), t.with_elem(Elem::Scalar(d)), loc.clone()),
            Elem::Ptr(_) => {
                self.fail(
                    loc,
                    format!("cannot convert pointer {t} to {d} (only to i64 or u64: its address)"),
                );
                v
            }
        }
    }

    /// Converts `v` to a number dtype or a pointer type ([`cast`](super::lang::cast)).
    pub(crate) fn cast_to(&mut self, v: Value, to: CastTarget, loc: &Loc) -> Value {
        let t = self.ty(v).clone();
        let address = |d: DType| matches!(d, DType::I64 | DType::U64);
        match (t.elem, to) {
            (Elem::Ptr(_), CastTarget::Number(d)) if address(d) => {
                self.push1(Op::PtrToInt(v), t.with_elem(Elem::Scalar(d)), loc.clone())
            }
            (_, CastTarget::Number(d)) => self.cast(v, d, loc),
            (Elem::Ptr(from), CastTarget::Pointer(to)) if from == to => v,
            (Elem::Ptr(_), CastTarget::Pointer(_)) => {
                let addr = self.cast_to(v, CastTarget::Number(DType::I64), loc);
                self.cast_to(addr, to, loc)
            }
            (Elem::Scalar(d), CastTarget::Pointer(to)) if address(d) => {
                self.push1(Op::IntToPtr(v), t.with_elem(Elem::Ptr(to)), loc.clone())
            }
            (Elem::Scalar(_), CastTarget::Pointer(to)) => {
                self.fail(
                    loc,
                    format!("cannot convert {t} to ptr<{to}>: addresses are i64 or u64"),
                );
                v
            }
        }
    }

    /// Broadcasts `v` to `shape` (scalars are splatted).
    pub(crate) fn broadcast_to(&mut self, v: Value, shape: &[usize], loc: &Loc) -> Value {
        let t = self.ty(v).clone();
        if t.shape == shape {
            return v;
        }
        if t.is_scalar() {
            return self.push1(Op::Splat(v), t.with_shape(shape.to_vec()), loc.clone());
        }
        if broadcast_shapes(&t.shape, shape).as_deref() != Some(shape) {
            self.fail(loc, format!("cannot broadcast {t} to shape {shape:?}"));
            return v;
        }
        self.push1(Op::Broadcast(v), t.with_shape(shape.to_vec()), loc.clone())
    }

    /// Converts two operands to a common dtype and shape.
    pub(crate) fn unify(&mut self, a: Operand, b: Operand, loc: &Loc) -> (Value, Value) {
        let da = match a {
            Operand::Tile(t) => self.ty(t.0).elem.dtype(),
            _ => None,
        };
        let db = match b {
            Operand::Tile(t) => self.ty(t.0).elem.dtype(),
            _ => None,
        };
        let va = self.operand(a, db.or(da), loc);
        let vb = self.operand(b, da.or(db), loc);
        self.unify_values(va, vb, loc)
    }

    pub(crate) fn unify_values(&mut self, va: Value, vb: Value, loc: &Loc) -> (Value, Value) {
        self.unify_values_by(va, vb, DType::promote, loc)
    }

    /// [`unify_values`](Builder::unify_values) with `rule` choosing the common dtype.
    fn unify_values_by(
        &mut self,
        va: Value,
        vb: Value,
        rule: fn(DType, DType) -> DType,
        loc: &Loc,
    ) -> (Value, Value) {
        let (ta, tb) = (self.ty(va).clone(), self.ty(vb).clone());
        let shape = match broadcast_shapes(&ta.shape, &tb.shape) {
            Some(s) => s,
            None => {
                self.fail(loc, format!("incompatible shapes {ta} and {tb}"));
                return (va, vb);
            }
        };
        let (va, vb) = match (ta.elem, tb.elem) {
            (Elem::Scalar(x), Elem::Scalar(y)) => {
                let d = rule(x, y);
                if d.is_float() {
                    self.refuse_int_quotient(va, loc);
                    self.refuse_int_quotient(vb, loc);
                }
                (self.cast(va, d, loc), self.cast(vb, d, loc))
            }
            _ => (va, vb),
        };
        (
            self.broadcast_to(va, &shape, loc),
            self.broadcast_to(vb, &shape, loc),
        )
    }

    pub(crate) fn binary(&mut self, op: BinOp, a: Operand, b: Operand, loc: &Loc) -> Value {
        // Pointer arithmetic: ptr + int, ptr - int.
        if let Operand::Tile(t) = a {
            if self.ty(t.0).elem.pointee().is_some() && matches!(op, BinOp::Add | BinOp::Sub) {
                return self.add_ptr(t.0, b, op == BinOp::Sub, loc);
            }
        }
        if let (Operand::Tile(t), BinOp::Add) = (b, op) {
            if self.ty(t.0).elem.pointee().is_some() {
                return self.add_ptr(t.0, a, false, loc);
            }
        }
        let (va, vb) = self.unify_for(op, a, b, loc);
        let t = self.ty(va).clone();
        match t.elem {
            Elem::Ptr(_) => {
                self.fail(
                    loc,
                    format!("`{}` is not defined on pointers ({t})", op.name()),
                );
                va
            }
            Elem::Scalar(d) => {
                let bad = match op {
                    BinOp::And | BinOp::Or | BinOp::Xor => d.is_float(),
                    BinOp::Shl | BinOp::Shr => !d.is_int(),
                    _ => d.is_bool(),
                };
                if bad {
                    self.fail(loc, format!("`{}` is not defined on {d}", op.name()));
                }
                let r = self.push1(Op::Binary(op, va, vb), t, loc.clone());
                self.track_int_quotient(op, &[va, vb], r, loc);
                r
            }
        }
    }

    /// The operands of `op` in the dtype Triton computes it in: `/` and `%` of 16-bit
    /// floats in f32 (and no mix of signed and unsigned integers), shifts in the left
    /// operand's signedness, the rest by [`DType::promote`].
    fn unify_for(&mut self, op: BinOp, a: Operand, b: Operand, loc: &Loc) -> (Value, Value) {
        let rule: fn(DType, DType) -> DType = match op {
            BinOp::Div | BinOp::Rem => DType::promote_for_division,
            BinOp::Shl | BinOp::Shr => DType::promote_for_shift,
            _ => return self.unify(a, b, loc),
        };
        let dtype = |o: Operand, b: &Self| match o {
            Operand::Tile(t) => b.ty(t.0).elem.dtype(),
            _ => None,
        };
        let (da, db) = (dtype(a, self), dtype(b, self));
        let va = self.operand(a, db.or(da), loc);
        let vb = self.operand(b, da.or(db), loc);
        let (x, y) = (self.ty(va).dtype(), self.ty(vb).dtype());
        if let (Some(x), Some(y)) = (x, y) {
            let mixed = (x.is_signed_int() && y.is_unsigned_int())
                || (x.is_unsigned_int() && y.is_signed_int());
            if mixed && matches!(op, BinOp::Div | BinOp::Rem) {
                self.fail(
                    loc,
                    format!(
                        "cannot use `{}` with {x} and {y}: they have different signedness, \
                         which is unlikely to give a useful answer (Triton refuses it too); \
                         cast them to the same signedness",
                        if op == BinOp::Div { "/" } else { "%" }
                    ),
                );
            }
            if matches!(op, BinOp::Shl | BinOp::Shr) && !(x.is_int() && y.is_int()) {
                // Refused by `binary` in the common dtype.
                return self.unify_values(va, vb, loc);
            }
        }
        self.unify_values_by(va, vb, rule, loc)
    }

    fn add_ptr(&mut self, p: Value, off: Operand, negate: bool, loc: &Loc) -> Value {
        let mut o = self.operand(off, Some(DType::I32), loc);
        let ot = self.ty(o).clone();
        if !ot.dtype().is_some_and(DType::is_int) {
            self.fail(loc, format!("pointer offsets must be integers, got {ot}"));
            return p;
        }
        if negate {
            o = self.push1(Op::Unary(UnOp::Neg, o), ot.clone(), loc.clone());
        }
        let (p, o) = self.unify_values(p, o, loc);
        let pt = self.ty(p).clone();
        self.push1(Op::AddPtr(p, o), pt, loc.clone())
    }

    pub(crate) fn cmp(&mut self, pred: CmpPred, a: Operand, b: Operand, loc: &Loc) -> Value {
        let (va, vb) = self.unify(a, b, loc);
        let t = self.ty(va).with_elem(Elem::Scalar(DType::Bool));
        self.push1(Op::Cmp(pred, va, vb), t, loc.clone())
    }

    pub(crate) fn unary(&mut self, op: UnOp, x: Operand, loc: &Loc) -> Value {
        let mut v = self.operand(x, None, loc);
        let t = self.ty(v).clone();
        let Some(d) = t.dtype() else {
            self.fail(loc, format!("`{}` is not defined on pointers", op.name()));
            return v;
        };
        if op.float_only() && !d.is_float() {
            // Triton computes exp/log/sqrt/... of integers in f32.
            self.refuse_int_quotient(v, loc);
            v = self.cast(v, DType::F32, loc);
        } else if (op == UnOp::Not && d.is_float()) || (op == UnOp::Neg && d.is_bool()) {
            self.fail(loc, format!("`{}` is not defined on {d}", op.name()));
        }
        let t = self.ty(v).clone();
        let r = self.push1(Op::Unary(op, v), t, loc.clone());
        if op == UnOp::Neg {
            if let Some(at) = self.int_quotients.get(&v).cloned() {
                self.int_quotients.insert(r, at);
            }
        }
        r
    }

    /// Records `r` as an integer quotient when `op` is an integer `/`, or integer `+ - *`
    /// of one (`-(1 / n)`, `2 * (i / 2)`).
    fn track_int_quotient(&mut self, op: BinOp, args: &[Value], r: Value, loc: &Loc) {
        if !self.ty(r).dtype().is_some_and(DType::is_int) {
            return;
        }
        let at = match op {
            BinOp::Div => Some(loc.clone()),
            BinOp::Add | BinOp::Sub | BinOp::Mul => {
                args.iter().find_map(|a| self.int_quotients.get(a).cloned())
            }
            _ => None,
        };
        if let Some(at) = at {
            self.int_quotients.insert(r, at);
        }
    }

    /// Fails when `v`, about to be promoted to a float, is an integer quotient: Triton's
    /// `/` would have divided as floats, Rust's truncated, so a literal port would compute
    /// something else without a word.
    pub(crate) fn refuse_int_quotient(&mut self, v: Value, loc: &Loc) {
        let Some(at) = self.int_quotients.get(&v).cloned() else {
            return;
        };
        if !self.ty(v).dtype().is_some_and(DType::is_int) {
            return;
        }
        self.fail(
            loc,
            format!(
                "the integer division at {at} truncates (Triton's `//`), and its result is \
                 used in float arithmetic here, where Triton's `/` would have divided as \
                 floats (1 / 4 is 0.25 in Triton, 0 here); write `fdiv(a, b)` or \
                 `a.to(DType::F32) / b` for Triton's meaning, or `(a / b).to(DType::F32)` where the \
                 truncation is meant"
            ),
        );
    }
}

macro_rules! binop_impl {
    ($($trait:ident $method:ident $assign_trait:ident $assign:ident => $op:ident;)*) => {$(
        impl<R: IntoOperand> std::ops::$trait<R> for Tile {
            type Output = Tile;
            #[track_caller]
            fn $method(self, rhs: R) -> Tile {
                let loc = caller_loc(std::panic::Location::caller());
                Tile(with(|b| b.binary(BinOp::$op, Operand::Tile(self), rhs.into_operand(), &loc)))
            }
        }
        impl<R: IntoOperand> std::ops::$assign_trait<R> for Tile {
            #[track_caller]
            fn $assign(&mut self, rhs: R) {
                let loc = caller_loc(std::panic::Location::caller());
                *self = Tile(with(|b| b.binary(BinOp::$op, Operand::Tile(*self), rhs.into_operand(), &loc)));
            }
        }
        binop_impl!(@lhs $trait $method $op; i8 i16 i32 i64 u8 u16 u32 u64 usize isize f32 f64 bool);
    )*};
    (@lhs $trait:ident $method:ident $op:ident; $($t:ty)*) => {$(
        impl std::ops::$trait<Tile> for $t {
            type Output = Tile;
            #[track_caller]
            fn $method(self, rhs: Tile) -> Tile {
                let loc = caller_loc(std::panic::Location::caller());
                Tile(with(|b| b.binary(BinOp::$op, self.into_operand(), Operand::Tile(rhs), &loc)))
            }
        }
    )*};
}

binop_impl! {
    Add add AddAssign add_assign => Add;
    Sub sub SubAssign sub_assign => Sub;
    Mul mul MulAssign mul_assign => Mul;
    Div div DivAssign div_assign => Div;
    Rem rem RemAssign rem_assign => Rem;
    BitAnd bitand BitAndAssign bitand_assign => And;
    BitOr bitor BitOrAssign bitor_assign => Or;
    BitXor bitxor BitXorAssign bitxor_assign => Xor;
    Shl shl ShlAssign shl_assign => Shl;
    Shr shr ShrAssign shr_assign => Shr;
}

impl std::ops::Neg for Tile {
    type Output = Tile;
    #[track_caller]
    fn neg(self) -> Tile {
        let loc = caller_loc(std::panic::Location::caller());
        Tile(with(|b| b.unary(UnOp::Neg, Operand::Tile(self), &loc)))
    }
}

impl std::ops::Not for Tile {
    type Output = Tile;
    #[track_caller]
    fn not(self) -> Tile {
        let loc = caller_loc(std::panic::Location::caller());
        Tile(with(|b| b.unary(UnOp::Not, Operand::Tile(self), &loc)))
    }
}
