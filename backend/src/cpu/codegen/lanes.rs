//! One lane of an elementwise op, in compute form.

use super::Gen;
use crate::llvm::{Emitter, Result};
use inkwell::values::{BasicValueEnum, IntValue};
use tritium_dsl::ir::{BinOp, Const, DType, Elem, Inst, Op, UnOp, Value};

impl<'ctx> Gen<'ctx, '_> {
    /// The signed minimum of two i64s.
    pub(super) fn smin64(&self, a: IntValue<'ctx>, b: IntValue<'ctx>) -> Result<IntValue<'ctx>> {
        let i64t = self.ctx.i64_type().into();
        Ok(self
            .intrinsic("llvm.smin", &[i64t], &[a.into(), b.into()])?
            .into_int_value())
    }

    /// The signed maximum of two i64s.
    pub(super) fn smax64(&self, a: IntValue<'ctx>, b: IntValue<'ctx>) -> Result<IntValue<'ctx>> {
        let i64t = self.ctx.i64_type().into();
        Ok(self
            .intrinsic("llvm.smax", &[i64t], &[a.into(), b.into()])?
            .into_int_value())
    }

    /// The i64 `x` clamped to `0..=hi` (signed): a count of lanes.
    pub(super) fn clamp_lanes(
        &self,
        x: IntValue<'ctx>,
        hi: IntValue<'ctx>,
    ) -> Result<IntValue<'ctx>> {
        let x = self.smax64(x, self.i64c(0))?;
        self.smin64(x, hi)
    }

    pub(super) fn dtype_of(&self, v: Value) -> DType {
        match self.ty(v).elem {
            Elem::Scalar(d) | Elem::Ptr(d) => d,
        }
    }

    /// Lane `idx` of a larger shape read from `x` broadcast to it.
    pub(super) fn broadcast_lane(
        &mut self,
        x: Value,
        idx: &[IntValue<'ctx>],
    ) -> Result<BasicValueEnum<'ctx>> {
        let mapped = self.broadcast_index(x, idx);
        self.lane(x, &mapped)
    }

    /// The index into `x` of lane `idx` of a larger shape `x` is broadcast to: size-1 dims
    /// repeat (index 0), missing leading dims are dropped.
    pub(super) fn broadcast_index(&self, x: Value, idx: &[IntValue<'ctx>]) -> Vec<IntValue<'ctx>> {
        let xs = &self.ty(x).shape;
        let off = idx.len() - xs.len();
        xs.iter()
            .enumerate()
            .map(|(k, d)| if *d == 1 { self.i64c(0) } else { idx[off + k] })
            .collect()
    }

    /// Computes lane `idx` of an elementwise op.
    pub(super) fn op_lane(
        &mut self,
        inst: &Inst,
        idx: &[IntValue<'ctx>],
    ) -> Result<BasicValueEnum<'ctx>> {
        let r = inst.results[0];
        let rt = self.ty(r);
        match &inst.op {
            Op::Const(c) => Ok(self.const_value(*c, rt.dtype().expect("numeric constant"))),
            Op::ProgramId(a) => Ok(self.pids[*a as usize].into()),
            Op::NumPrograms(a) => Ok(self.nprogs[*a as usize].into()),
            Op::Arange { start, .. } => {
                let v = self.b.build_int_add(idx[0], self.i64c(*start as u64), "")?;
                Ok(self
                    .b
                    .build_int_truncate(v, self.ctx.i32_type(), "")?
                    .into())
            }
            Op::Splat(x) => self.lane(*x, &[]),
            Op::Custom(c) => Ok(self.custom_lane(inst, c, idx)?),
            Op::Broadcast(x) => self.broadcast_lane(*x, idx),
            Op::ExpandDims { x, axis } => {
                let mut mapped = idx.to_vec();
                mapped.remove(*axis as usize);
                self.lane(*x, &mapped)
            }
            Op::Permute { x, dims } => {
                let mut mapped = idx.to_vec();
                for (i, &d) in dims.iter().enumerate() {
                    mapped[d as usize] = idx[i];
                }
                self.lane(*x, &mapped)
            }
            Op::Flip { x, axis } => {
                let a = *axis as usize;
                let last = self.i64c(rt.shape[a] as u64 - 1);
                let mut mapped = idx.to_vec();
                mapped[a] = self.b.build_int_sub(last, idx[a], "")?;
                self.lane(*x, &mapped)
            }
            Op::Reshape(x) => {
                let lin = self.ravel(&rt.shape, idx)?;
                let xs = self.ty(*x).shape.clone();
                let mut mapped = vec![self.i64c(0); xs.len()];
                let mut rest = lin;
                for k in (0..xs.len()).rev() {
                    let d = self.i64c(xs[k] as u64);
                    mapped[k] = self.b.build_int_unsigned_rem(rest, d, "")?;
                    rest = self.b.build_int_unsigned_div(rest, d, "")?;
                }
                self.lane(*x, &mapped)
            }
            Op::Binary(op, a, b) => {
                let d = self.dtype_of(*a);
                let (x, y) = (self.lane(*a, idx)?, self.lane(*b, idx)?);
                Ok(self.binary(*op, d, x, y)?)
            }
            Op::Unary(op, a) => {
                let d = self.dtype_of(*a);
                let x = self.lane(*a, idx)?;
                Ok(self.unary(*op, d, x)?)
            }
            Op::Cmp(p, a, b) => {
                let d = self.dtype_of(*a);
                let (x, y) = (self.lane(*a, idx)?, self.lane(*b, idx)?);
                Ok(self.compare(*p, d, x, y)?.into())
            }
            Op::Select(c, a, b) => {
                let c = self.lane(*c, idx)?.into_int_value();
                let (x, y) = (self.lane(*a, idx)?, self.lane(*b, idx)?);
                Ok(self.b.build_select(c, x, y, "")?)
            }
            Op::Fma(a, b, c) => {
                let d = self.dtype_of(*a);
                let (x, y, z) = (
                    self.lane(*a, idx)?,
                    self.lane(*b, idx)?,
                    self.lane(*c, idx)?,
                );
                let t = self.compute_ty(d);
                let v = self.intrinsic("llvm.fma", &[t], &[x, y, z])?;
                Ok(self.round_to(v, d)?)
            }
            Op::Cast(x) => {
                let from = self.dtype_of(*x);
                let to = rt.dtype().expect("cast to a number");
                let v = self.lane(*x, idx)?;
                Ok(self.cast(v, from, to)?)
            }
            Op::Bitcast(x) => {
                let from = self.dtype_of(*x);
                let to = rt.dtype().expect("bitcast to a number");
                let v = self.lane(*x, idx)?;
                Ok(self.emit().bitcast(v, from, to)?)
            }
            // A promise only the CUDA generator uses: the value itself.
            Op::Hint { x, .. } => self.lane(*x, idx),
            Op::IntToPtr(x) => {
                let v = self.lane(*x, idx)?.into_int_value();
                let ptr = self.ctx.ptr_type(inkwell::AddressSpace::default());
                Ok(self.b.build_int_to_ptr(v, ptr, "")?.into())
            }
            Op::PtrToInt(x) => {
                let v = self.lane(*x, idx)?.into_pointer_value();
                let i64t = self.ctx.i64_type();
                Ok(self.b.build_ptr_to_int(v, i64t, "")?.into())
            }
            Op::AddPtr(p, o) => {
                let pointee = self.dtype_of(*p);
                let od = self.dtype_of(*o);
                let (pv, ov) = (self.lane(*p, idx)?, self.lane(*o, idx)?);
                let off = self.b.build_int_cast_sign_flag(
                    ov.into_int_value(),
                    self.ctx.i64_type(),
                    od.is_signed_int(),
                    "",
                )?;
                if self.feeds_checked(inst.results[0]) {
                    let p = pv.into_pointer_value();
                    return Ok(self
                        .emit()
                        .checked_offset(p, off, pointee.size_bytes())?
                        .into());
                }
                let st = self.storage_ty(pointee);
                // SAFETY (of the generated code): pointer arithmetic; accesses are trusted as
                // in Triton.
                Ok(unsafe { self.b.build_gep(st, pv.into_pointer_value(), &[off], "") }?.into())
            }
            Op::Load { .. } => self.load_lane(inst, idx),
            Op::Gather { src, index, axis } => {
                let a = *axis as usize;
                let id = self.dtype_of(*index);
                let raw = self.lane(*index, idx)?.into_int_value();
                let i64t = self.ctx.i64_type();
                let p = self
                    .b
                    .build_int_cast_sign_flag(raw, i64t, id.is_signed_int(), "")?;
                // Unsigned: a negative index is past the end too.
                let len = self.i64c(self.ty(*src).shape[a] as u64);
                let inside = self
                    .b
                    .build_int_compare(inkwell::IntPredicate::ULT, p, len, "")?;
                let mut at = idx.to_vec();
                at[a] = self
                    .b
                    .build_select(inside, p, self.i64c(0), "")?
                    .into_int_value();
                let v = self.lane(*src, &at)?;
                let zero = self.const_value(Const::Int(0), self.dtype_of(*src));
                Ok(self.b.build_select(inside, v, zero, "")?)
            }
            op => unreachable!("op_lane on non-elementwise `{}`", op.mnemonic()),
        }
    }

    /// `a op b` for two lanes of dtype `d`.
    pub(super) fn binary(
        &self,
        op: BinOp,
        d: DType,
        a: BasicValueEnum<'ctx>,
        b: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        self.emit().binary(op, d, a, b)
    }

    fn unary(&self, op: UnOp, d: DType, x: BasicValueEnum<'ctx>) -> Result<BasicValueEnum<'ctx>> {
        if !d.is_float() {
            return self.emit().int_unary(op, d, x);
        }
        let e = self.emit();
        let t = self.compute_ty(d);
        // libm intrinsics, except f32 `exp` and `exp2`: arithmetic, so that loops containing
        // them vectorize (LLVM would call libm once per lane of a vector `llvm.exp2`).
        e.float_unary(op, d, x.into_float_value(), |op, f| {
            let name = match op {
                UnOp::Exp if d != DType::F64 => return Ok(e.exp_f32(f)?.into()),
                UnOp::Exp => "llvm.exp",
                UnOp::Exp2 if d != DType::F64 => return Ok(e.exp2_f32(f)?.into()),
                UnOp::Exp2 => "llvm.exp2",
                UnOp::Log => "llvm.log",
                UnOp::Log2 => "llvm.log2",
                UnOp::Sin => "llvm.sin",
                _ => "llvm.cos",
            };
            e.intrinsic(name, &[t], &[f.into()])
        })
    }
}
