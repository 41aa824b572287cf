//! The verifier: structural and type rules of the IR. Errors name the op's source location.

use super::limits::{check_type, MAX_DEBUG_TEXT};
use super::{
    Block, CacheModifier, Const, CustomAttrs, DType, Elem, Function, HintKind, Inst, Op, ReduceOp,
    Type, UnOp, Value, MAX_NESTING, MAX_TILE_ELEMS, MAX_VALUES,
};
use crate::{Error, Result};

/// Checks that every value has a type within the [limits](super::MAX_TILE_ELEMS) and is
/// defined before use (in an enclosing scope), that regions end with the right terminator,
/// that every op's operand and result types agree, and that constants fit their dtype.
pub fn verify(f: &Function) -> Result<()> {
    let mut v = Verifier {
        f,
        defined: vec![false; f.types.len()],
    };
    v.typed_values()?;
    for p in &f.params {
        v.def(p.value, None)?;
    }
    v.block(&f.body, None)
}

struct Verifier<'a> {
    f: &'a Function,
    defined: Vec<bool>,
}

/// What terminator a region must end with.
#[derive(Clone, Copy)]
enum Term<'t> {
    Yield(&'t [Type]),
    Condition,
}

impl<'a> Verifier<'a> {
    fn err(&self, inst: Option<&Inst>, message: String) -> Error {
        Error::Verify {
            location: inst
                .map(|i| i.loc.to_string())
                .unwrap_or_else(|| self.f.name.clone()),
            message,
        }
    }

    /// Every value named anywhere has a type within the limits, every parameter is a scalar
    /// or a pointer, and regions nest at most [`MAX_NESTING`] deep: later checks index,
    /// multiply and recurse freely.
    fn typed_values(&self) -> Result<()> {
        let n = self.f.types.len();
        if n > MAX_VALUES {
            return Err(self.err(
                None,
                format!("{n} values are over the limit of {MAX_VALUES} (MAX_VALUES)"),
            ));
        }
        for p in &self.f.params {
            let t = self.typed(p.value, None)?;
            if !t.is_scalar() {
                return Err(self.err(
                    None,
                    format!(
                        "parameter `{}` must be a number or a pointer, got {t}",
                        p.name
                    ),
                ));
            }
        }
        self.typed_block(&self.f.body, None, 0)
    }

    fn typed_block(&self, b: &Block, owner: Option<&Inst>, depth: usize) -> Result<()> {
        if depth > MAX_NESTING {
            return Err(self.err(
                owner,
                format!("regions nest more than {MAX_NESTING} deep (MAX_NESTING)"),
            ));
        }
        for a in &b.args {
            self.typed(*a, owner)?;
        }
        for inst in &b.insts {
            for v in inst.results.iter().copied().chain(inst.op.operands()) {
                self.typed(v, Some(inst))?;
            }
            for r in inst.op.regions() {
                self.typed_block(r, Some(inst), depth + 1)?;
            }
        }
        Ok(())
    }

    fn typed(&self, v: Value, inst: Option<&Inst>) -> Result<&'a Type> {
        let t = self
            .f
            .types
            .get(v.index())
            .ok_or_else(|| self.err(inst, format!("{v} is never defined")))?;
        check_type(t).map_err(|m| self.err(inst, format!("{v}: {m}")))?;
        Ok(t)
    }

    fn def(&mut self, v: Value, inst: Option<&Inst>) -> Result<()> {
        match self.defined.get_mut(v.index()) {
            None => Err(self.err(inst, format!("{v} has no type"))),
            Some(true) => Err(self.err(inst, format!("{v} is defined twice"))),
            Some(d) => {
                *d = true;
                Ok(())
            }
        }
    }

    fn block(&mut self, b: &Block, term: Option<Term>) -> Result<()> {
        for a in &b.args {
            self.def(*a, None)?;
        }
        let mut scope_defs = b.args.clone();
        for (k, inst) in b.insts.iter().enumerate() {
            let is_last = k + 1 == b.insts.len();
            let is_term = matches!(inst.op, Op::Yield(_) | Op::Condition(_));
            if is_term && !(is_last && term.is_some()) {
                return Err(self.err(Some(inst), "terminator in the middle of a region".into()));
            }
            for o in inst.op.operands() {
                if !self.defined.get(o.index()).copied().unwrap_or(false) {
                    return Err(self.err(Some(inst), format!("{o} is used before it is defined")));
                }
            }
            self.inst(inst, if is_last { term } else { None })?;
            for r in &inst.results {
                self.def(*r, Some(inst))?;
                scope_defs.push(*r);
            }
        }
        match (term, b.insts.last().map(|i| &i.op)) {
            (Some(Term::Yield(_)), Some(Op::Yield(_)))
            | (Some(Term::Condition), Some(Op::Condition(_)))
            | (None, _) => {}
            _ => {
                return Err(self.err(b.insts.last(), "region lacks its terminator".into()));
            }
        }
        // Leaving the scope: its values are not visible to later ops of enclosing blocks.
        for v in scope_defs {
            self.defined[v.index()] = false;
        }
        Ok(())
    }

    fn ty(&self, v: Value) -> &'a Type {
        self.f.ty(v)
    }

    /// `dot` operands of two different fp8 dtypes (any other pair has one dtype).
    fn fp8_pair(a: &Type, b: &Type) -> bool {
        let fp8 = |t: &Type| t.dtype().and_then(DType::fp8_format).is_some();
        fp8(a) && fp8(b)
    }

    fn inst(&mut self, inst: &Inst, term: Option<Term>) -> Result<()> {
        let e = |m: String| self.err(Some(inst), m);
        let res: Vec<&Type> = inst.results.iter().map(|r| self.ty(*r)).collect();
        let want_results = |n: usize| -> Result<()> {
            if res.len() == n {
                Ok(())
            } else {
                Err(e(format!(
                    "`{}` must have {n} result(s)",
                    inst.op.mnemonic()
                )))
            }
        };
        let num = |v: Value| -> Result<DType> {
            self.ty(v)
                .dtype()
                .ok_or_else(|| e(format!("{v} is a pointer where a number is required")))
        };
        let same = |a: &Type, b: &Type, what: &str| -> Result<()> {
            if a == b {
                Ok(())
            } else {
                Err(e(format!("{what}: {a} vs {b}")))
            }
        };
        match &inst.op {
            Op::Const(c) => {
                want_results(1)?;
                let d = res[0]
                    .dtype()
                    .ok_or_else(|| e("a constant cannot be a pointer".into()))?;
                match (c, d.int_range()) {
                    (Const::Int(i), Some((lo, hi))) if !(lo..=hi).contains(i) => {
                        return Err(e(format!(
                            "constant {i} does not fit {d} (range {lo} to {hi})"
                        )));
                    }
                    (Const::Int(i), None) => {
                        return Err(e(format!(
                            "integer constant {i} for {d}: a {d} constant is written as a float"
                        )));
                    }
                    (Const::Float(x), Some(_)) => {
                        return Err(e(format!("float constant {x:?} for integer type {d}")));
                    }
                    _ => {}
                }
            }
            Op::ProgramId(a) | Op::NumPrograms(a) => {
                want_results(1)?;
                if *a > 2 {
                    return Err(e(format!("axis {a} out of range 0..3")));
                }
                same(
                    res[0],
                    &Type::scalar(DType::I32),
                    "program_id/num_programs type",
                )?;
            }
            Op::Arange { start, end } => {
                want_results(1)?;
                // The values are i32: start..=end-1 within i32, and one tile long at most.
                let i32s = i64::from(i32::MIN)..=i64::from(i32::MAX) + 1;
                if !i32s.contains(start) || !i32s.contains(end) {
                    return Err(e(format!("arange({start}, {end}) does not fit i32")));
                }
                if end <= start {
                    return Err(e(format!("arange({start}, {end}) is empty")));
                }
                let len = (end - start) as usize;
                if len > MAX_TILE_ELEMS {
                    return Err(e(format!(
                        "arange({start}, {end}) has more than {MAX_TILE_ELEMS} elements \
                         (MAX_TILE_ELEMS)"
                    )));
                }
                let want = Type::tile(Elem::Scalar(DType::I32), vec![len]);
                same(res[0], &want, "arange type")?;
            }
            Op::Splat(x) => {
                want_results(1)?;
                if !self.ty(*x).is_scalar() || res[0].elem != self.ty(*x).elem {
                    return Err(e("splat takes a scalar of the result's element type".into()));
                }
            }
            Op::Broadcast(x) => {
                want_results(1)?;
                let xt = self.ty(*x);
                if xt.elem != res[0].elem
                    || super::broadcast_shapes(&xt.shape, &res[0].shape).as_deref()
                        != Some(&res[0].shape[..])
                {
                    return Err(e(format!("cannot broadcast {xt} to {}", res[0])));
                }
            }
            Op::ExpandDims { x, axis } => {
                want_results(1)?;
                let xt = self.ty(*x);
                let mut s = xt.shape.clone();
                if *axis as usize > s.len() {
                    return Err(e(format!("expand_dims axis {axis} out of range for {xt}")));
                }
                s.insert(*axis as usize, 1);
                same(res[0], &xt.with_shape(s), "expand_dims type")?;
            }
            Op::Reshape(x) => {
                want_results(1)?;
                let xt = self.ty(*x);
                if xt.numel() != res[0].numel() || xt.elem != res[0].elem {
                    return Err(e(format!("cannot reshape {xt} to {}", res[0])));
                }
            }
            Op::Gather { src, index, axis } => {
                want_results(1)?;
                let (st, it) = (self.ty(*src), self.ty(*index));
                let a = *axis as usize;
                if st.rank() == 0 || a >= st.rank() {
                    return Err(e(format!("gather axis {axis} out of range for {st}")));
                }
                if !it.dtype().is_some_and(DType::is_int) || st.elem.pointee().is_some() {
                    return Err(e(format!(
                        "gather needs a tile of numbers and an integer index, got {st} and {it}"
                    )));
                }
                let fits = it.rank() == st.rank()
                    && (0..st.rank()).all(|d| d == a || it.shape[d] == st.shape[d]);
                if !fits {
                    return Err(e(format!(
                        "gather index {it} must have the shape of {st} except along axis {axis}"
                    )));
                }
                same(res[0], &it.with_elem(st.elem), "gather type")?;
            }
            Op::Hint { x, kind, values } if *kind == HintKind::Likely => {
                want_results(1)?;
                let xt = self.ty(*x);
                if xt.dtype() != Some(DType::Bool) || !matches!(values[..], [0] | [1]) {
                    return Err(e(format!(
                        "likely needs a bool tile and one value, 0 or 1, got {xt} and {values:?}"
                    )));
                }
                same(res[0], xt, "hint type")?;
            }
            Op::Hint { x, kind, values } => {
                want_results(1)?;
                let xt = self.ty(*x);
                // On pointers, `multiple_of` promises the address's alignment in bytes.
                let int = xt.dtype().is_some_and(|d| d.is_int())
                    || (*kind == HintKind::MultipleOf && matches!(xt.elem, Elem::Ptr(_)));
                let fits = values.len() == 1 || values.len() == xt.rank().max(1);
                if !int || !fits || values.contains(&0) {
                    return Err(e(format!(
                        "{} needs an integer tile (multiple_of: or pointers) and one positive value per dim (or one), got {xt} and {values:?}",
                        kind.name()
                    )));
                }
                same(res[0], xt, "hint type")?;
            }
            Op::Flip { x, axis } => {
                want_results(1)?;
                let xt = self.ty(*x);
                if *axis as usize >= xt.rank() {
                    return Err(e(format!("flip axis {axis} out of range for {xt}")));
                }
                same(res[0], xt, "flip type")?;
            }
            Op::Permute { x, dims } => {
                want_results(1)?;
                let xt = self.ty(*x);
                let mut sorted = dims.clone();
                sorted.sort_unstable();
                if !sorted.iter().copied().eq(0..xt.rank() as u32) {
                    return Err(e(format!(
                        "permute dims {dims:?} are not a permutation of the dims of {xt}"
                    )));
                }
                let shape = dims.iter().map(|&d| xt.shape[d as usize]).collect();
                same(res[0], &xt.with_shape(shape), "permute type")?;
            }
            Op::Binary(op, a, b) => {
                want_results(1)?;
                same(
                    self.ty(*a),
                    self.ty(*b),
                    &format!("`{}` operand types differ", op.name()),
                )?;
                same(res[0], self.ty(*a), "result type")?;
                let d = num(*a)?;
                use super::BinOp::*;
                if matches!(op, And | Or | Xor) && d.is_float() {
                    return Err(e(format!("`{}` is not defined on {d}", op.name())));
                }
                if matches!(op, Shl | Shr) && !d.is_int() {
                    return Err(e(format!("`{}` needs integers, got {d}", op.name())));
                }
                if matches!(op, Add | Sub | Mul | Div | Rem | Max | Min) && d.is_bool() {
                    return Err(e(format!("`{}` is not defined on bool", op.name())));
                }
            }
            Op::Unary(op, x) => {
                want_results(1)?;
                same(res[0], self.ty(*x), "result type")?;
                let d = num(*x)?;
                if op.float_only() && !d.is_float() {
                    return Err(e(format!("`{}` needs a float, got {d}", op.name())));
                }
                if *op == UnOp::Not && d.is_float() {
                    return Err(e("`not` needs an integer or bool".into()));
                }
            }
            Op::Cmp(_, a, b) => {
                want_results(1)?;
                same(self.ty(*a), self.ty(*b), "comparison operand types differ")?;
                same(
                    res[0],
                    &self.ty(*a).with_elem(Elem::Scalar(DType::Bool)),
                    "cmp type",
                )?;
            }
            Op::Select(c, a, b) => {
                want_results(1)?;
                same(self.ty(*a), self.ty(*b), "select operand types differ")?;
                same(res[0], self.ty(*a), "result type")?;
                same(
                    self.ty(*c),
                    &res[0].with_elem(Elem::Scalar(DType::Bool)),
                    "select mask",
                )?;
            }
            Op::Fma(a, b, c) => {
                want_results(1)?;
                for v in [a, b, c] {
                    same(self.ty(*v), res[0], "fma operand types")?;
                }
                if !num(*a)?.is_float() {
                    return Err(e("fma needs floats".into()));
                }
            }
            Op::Cast(x) => {
                want_results(1)?;
                num(*x)?;
                if res[0].dtype().is_none() || res[0].shape != self.ty(*x).shape {
                    return Err(e(format!("cannot cast {} to {}", self.ty(*x), res[0])));
                }
            }
            Op::Bitcast(x) => {
                want_results(1)?;
                let (from, xt) = (num(*x)?, self.ty(*x));
                let fits = res[0]
                    .dtype()
                    .is_some_and(|to| !to.is_bool() && !from.is_bool() && to.bits() == from.bits());
                if !fits || res[0].shape != xt.shape {
                    return Err(e(format!(
                        "cannot bitcast {xt} to {} (same shape and bit width, no bools)",
                        res[0]
                    )));
                }
            }
            Op::IntToPtr(x) | Op::PtrToInt(x) => {
                want_results(1)?;
                let xt = self.ty(*x);
                let address = |t: &Type| matches!(t.elem, Elem::Scalar(DType::I64 | DType::U64));
                let pointer = |t: &Type| t.elem.pointee().is_some();
                let fits = match inst.op {
                    Op::IntToPtr(_) => address(xt) && pointer(res[0]),
                    _ => pointer(xt) && address(res[0]),
                };
                if !fits || res[0].shape != xt.shape {
                    return Err(e(format!(
                        "{} converts between i64/u64 and pointers of one shape, got {xt} to {}",
                        inst.op.mnemonic(),
                        res[0]
                    )));
                }
            }
            Op::AddPtr(p, o) => {
                want_results(1)?;
                let (pt, ot) = (self.ty(*p), self.ty(*o));
                if pt.elem.pointee().is_none() || !num(*o)?.is_int() || pt.shape != ot.shape {
                    return Err(e(format!(
                        "addptr needs pointers and integer offsets of one shape, got {pt} and {ot}"
                    )));
                }
                same(res[0], pt, "result type")?;
            }
            Op::Scan { op, x, axis, .. } => {
                want_results(1)?;
                let xt = self.ty(*x);
                let d = num(*x)?;
                if *axis as usize >= xt.rank() {
                    return Err(e(format!("scan axis {axis} out of range for {xt}")));
                }
                if d.is_bool() {
                    return Err(e(format!("scan {} needs numbers, got {xt}", op.name())));
                }
                same(res[0], xt, "scan type")?;
            }
            Op::Reduce { op, x, axis } => {
                want_results(1)?;
                let xt = self.ty(*x);
                let d = num(*x)?;
                if *axis as usize >= xt.rank() {
                    return Err(e(format!("reduce axis {axis} out of range for {xt}")));
                }
                if *op == ReduceOp::Xor && d.is_float() {
                    return Err(e(format!("reduce xor needs integers or bools, got {xt}")));
                }
                let mut s = xt.shape.clone();
                s.remove(*axis as usize);
                let elem = match op {
                    ReduceOp::ArgMax | ReduceOp::ArgMin => DType::I32,
                    _ => d,
                };
                same(res[0], &Type::tile(Elem::Scalar(elem), s), "reduce type")?;
            }
            Op::Dot { a, b, acc } => {
                want_results(1)?;
                let (at, bt, ct) = (self.ty(*a), self.ty(*b), self.ty(*acc));
                let ok = at.rank() == 2
                    && bt.rank() == 2
                    && ct.rank() == 2
                    && at.shape[1] == bt.shape[0]
                    && ct.shape == [at.shape[0], bt.shape[1]]
                    && (at.elem == bt.elem || Self::fp8_pair(at, bt))
                    && at.dtype().is_some()
                    && ct.dtype().is_some();
                if !ok {
                    return Err(e(format!(
                        "dot shapes/types do not fit: {at} @ {bt} + {ct}"
                    )));
                }
                same(res[0], ct, "dot result type")?;
            }
            Op::Load {
                ptr,
                mask,
                other,
                hints,
            } => {
                want_results(1)?;
                let m = hints.modifier;
                if m != CacheModifier::Default && !CacheModifier::LOAD.contains(&m) {
                    return Err(e(format!("a load takes no cache modifier {}", m.name())));
                }
                let pt = self.ty(*ptr);
                let d = pt
                    .elem
                    .pointee()
                    .ok_or_else(|| e(format!("load needs pointers, got {pt}")))?;
                same(res[0], &pt.with_elem(Elem::Scalar(d)), "load type")?;
                if let Some(m) = mask {
                    same(
                        self.ty(*m),
                        &pt.with_elem(Elem::Scalar(DType::Bool)),
                        "load mask",
                    )?;
                }
                if let Some(o) = other {
                    same(self.ty(*o), res[0], "load other")?;
                }
            }
            Op::Store {
                ptr, value, mask, ..
            }
            | Op::Atomic {
                ptr, value, mask, ..
            } => {
                if let Op::Store { hints, .. } = &inst.op {
                    let m = hints.modifier;
                    if m != CacheModifier::Default && !CacheModifier::STORE.contains(&m) {
                        return Err(e(format!("a store takes no cache modifier {}", m.name())));
                    }
                    if hints.volatile {
                        return Err(e("a store cannot be volatile (as in Triton)".into()));
                    }
                }
                let is_atomic = matches!(inst.op, Op::Atomic { .. });
                want_results(usize::from(is_atomic))?;
                let pt = self.ty(*ptr);
                let d = pt
                    .elem
                    .pointee()
                    .ok_or_else(|| e(format!("store needs pointers, got {pt}")))?;
                same(
                    self.ty(*value),
                    &pt.with_elem(Elem::Scalar(d)),
                    "stored value",
                )?;
                if let Some(m) = mask {
                    same(
                        self.ty(*m),
                        &pt.with_elem(Elem::Scalar(DType::Bool)),
                        "store mask",
                    )?;
                }
                if let Op::Atomic { op, .. } = &inst.op {
                    same(res[0], self.ty(*value), "atomic result")?;
                    if let Some(why) = op.refusal(d) {
                        return Err(e(why));
                    }
                }
            }
            Op::Assert { cond, mask, msg } => {
                want_results(0)?;
                let ct = self.ty(*cond);
                if ct.elem != Elem::Scalar(DType::Bool) {
                    return Err(e(format!("assert needs a bool condition, got {ct}")));
                }
                if let Some(m) = mask {
                    same(self.ty(*m), ct, "assert mask")?;
                }
                if msg.len() > MAX_DEBUG_TEXT {
                    return Err(e(format!(
                        "assert message of {} bytes (at most {MAX_DEBUG_TEXT})",
                        msg.len()
                    )));
                }
            }
            Op::Print { prefix, args, .. } => {
                want_results(0)?;
                for a in args {
                    let t = self.ty(*a);
                    if t.dtype().is_none() {
                        return Err(e(format!("print takes bools and numbers, got {t}")));
                    }
                }
                if prefix.len() > MAX_DEBUG_TEXT {
                    return Err(e(format!(
                        "print prefix of {} bytes (at most {MAX_DEBUG_TEXT})",
                        prefix.len()
                    )));
                }
            }
            Op::AtomicCas { ptr, cmp, value } => {
                want_results(1)?;
                let pt = self.ty(*ptr);
                let d = pt
                    .elem
                    .pointee()
                    .ok_or_else(|| e("atomic_cas needs pointers".into()))?;
                let vt = pt.with_elem(Elem::Scalar(d));
                same(self.ty(*cmp), &vt, "atomic_cas compare value")?;
                same(self.ty(*value), &vt, "atomic_cas new value")?;
                same(res[0], &vt, "atomic_cas result")?;
                if d.is_float() || d.size_bytes() < 4 {
                    return Err(e(format!(
                        "atomic_cas needs 32- or 64-bit integers, got {d}"
                    )));
                }
            }
            Op::Custom(c) => {
                want_results(c.outs.len())?;
                let name = &c.name;
                for (r, o) in res.iter().zip(&c.outs) {
                    if self.ty(*o).dtype().is_none() {
                        return Err(e(format!("custom op `{name}`: out {o} is a pointer")));
                    }
                    same(
                        r,
                        self.ty(*o),
                        &format!("custom op `{name}` result vs its out"),
                    )?;
                }
                let a = &c.attrs;
                let canonical = CustomAttrs::canonical_mode(a.core, a.pipe, a.mode)
                    .map_err(|m| e(format!("custom op `{name}`: {m}")))?;
                if canonical != a.mode {
                    return Err(e(format!(
                        "custom op `{name}`: mode {:?} is not canonical for core `{}` (expected {:?})",
                        a.mode.map(|m| m.name()),
                        a.core.name(),
                        canonical.map(|m| m.name())
                    )));
                }
                if a.symbol.is_empty() {
                    return Err(e(format!("custom op `{name}` has no symbol")));
                }
                if let Some(x) = c.extra.iter().find(|x| x.len > MAX_TILE_ELEMS) {
                    return Err(e(format!(
                        "custom op `{name}`: an extra buffer of {} elements is over the limit \
                         of {MAX_TILE_ELEMS} (MAX_TILE_ELEMS)",
                        x.len
                    )));
                }
                if c.is_builtin() != a.bitcode.is_builtin() {
                    return Err(e(format!(
                        "custom op `{name}`: only `__builtin_*` ops use the builtin library"
                    )));
                }
                if let Some(x) = &c.inline_asm {
                    if a.mode != Some(crate::ir::Mode::Simt) || c.is_builtin() {
                        return Err(e(format!(
                            "custom op `{name}`: inline asm needs a registered Simt fallback op"
                        )));
                    }
                    let numel = c.outs.first().map_or(0, |o| self.ty(*o).numel());
                    let dtypes = |vs: &[Value]| -> Result<Vec<DType>, String> {
                        vs.iter()
                            .map(|v| {
                                let t = self.ty(*v);
                                t.dtype().ok_or_else(|| {
                                    format!("inline asm operands are numbers, not pointers ({t})")
                                })
                            })
                            .collect()
                    };
                    dtypes(&c.ins)
                        .and_then(|ins| x.check(&ins, &dtypes(&c.outs)?, numel))
                        .map_err(|m| e(format!("custom op `{name}`: {m}")))?;
                }
            }
            Op::For {
                lo,
                hi,
                step,
                init,
                body,
                ..
            } => {
                let it = self.ty(*lo);
                if !(it.is_scalar() && it.dtype().is_some_and(DType::is_int)) {
                    return Err(e(format!("loop bounds must be integer scalars, got {it}")));
                }
                same(self.ty(*hi), it, "loop upper bound")?;
                same(self.ty(*step), it, "loop step")?;
                let carried: Vec<Type> = init.iter().map(|v| self.ty(*v).clone()).collect();
                want_results(carried.len())?;
                if body.args.len() != carried.len() + 1 {
                    return Err(e(
                        "loop body must take the induction variable and the carried values".into(),
                    ));
                }
                same(self.ty(body.args[0]), it, "induction variable")?;
                for (k, t) in carried.iter().enumerate() {
                    same(self.ty(body.args[k + 1]), t, "carried value")?;
                    same(res[k], t, "loop result")?;
                }
                self.block(body, Some(Term::Yield(&carried)))?;
            }
            Op::If {
                cond,
                then_region,
                else_region,
            } => {
                same(self.ty(*cond), &Type::scalar(DType::Bool), "if condition")?;
                let want: Vec<Type> = res.iter().map(|t| (*t).clone()).collect();
                self.block(then_region, Some(Term::Yield(&want)))?;
                self.block(else_region, Some(Term::Yield(&want)))?;
            }
            Op::While { init, cond, body } => {
                let carried: Vec<Type> = init.iter().map(|v| self.ty(*v).clone()).collect();
                want_results(carried.len())?;
                for region in [cond, body] {
                    if region.args.len() != carried.len() {
                        return Err(e("while regions must take the carried values".into()));
                    }
                    for (k, t) in carried.iter().enumerate() {
                        same(self.ty(region.args[k]), t, "carried value")?;
                        same(res[k], t, "loop result")?;
                    }
                }
                self.block(cond, Some(Term::Condition))?;
                self.block(body, Some(Term::Yield(&carried)))?;
            }
            Op::Yield(vs) => match term {
                Some(Term::Yield(want)) => {
                    let got: Vec<Type> = vs.iter().map(|v| self.ty(*v).clone()).collect();
                    if got != want {
                        return Err(e(format!(
                            "yield types [{}] do not match [{}]",
                            got.iter()
                                .map(|t| t.to_string())
                                .collect::<Vec<_>>()
                                .join(", "),
                            want.iter()
                                .map(|t| t.to_string())
                                .collect::<Vec<_>>()
                                .join(", ")
                        )));
                    }
                }
                _ => return Err(e("`yield` outside a region that yields".into())),
            },
            Op::Condition(c) => {
                if !matches!(term, Some(Term::Condition)) {
                    return Err(e("`condition` outside a while condition".into()));
                }
                same(self.ty(*c), &Type::scalar(DType::Bool), "while condition")?;
            }
        }
        Ok(())
    }
}
