//! Reductions along one axis. Sums are reassociable (LLVM vectorizes them); f16/bf16 sums
//! accumulate in f32 and round once at the end. Float max/min are maximumNumber/
//! minimumNumber folds from NaN (maxnum with -0 < +0), as the interpreter's (a lane of NaN
//! only gives NaN); along the last axis they keep partial results in one LLVM vector
//! (they give the same value, zeros included, in any order),
//! started at ±inf, and a result of ±inf looks at its lane again to tell "all NaN". The
//! full sum of a tile that is materialized anyway is taken in the loop that writes it, and
//! that of a loop-carried tile in the loop's last write of it (see `control`).

use super::{Gen, Lv};
use crate::llvm::{Emitter, Positioned, Result};
use inkwell::types::{BasicType, VectorType};
use inkwell::values::{BasicValueEnum, InstructionValue, IntValue, PointerValue, VectorValue};
use tritium_dsl::ir::{BinOp, Block, CmpPred, Const, DType, Elem, Inst, Op, ReduceOp, Type, Value};

/// LLVM fast-math flags: reassociation only. Not `nsz`, which lets LLVM give either sign
/// of a zero: sums fold from -0 on every target, so a sum of -0 lanes is -0 and one with a
/// +0 is +0, in any order (with +0 starts, `nsz` once made the CPU return -0 where the
/// interpreter gave +0: fuzzer seed 3711397, `fuzz/cases/cpu_sum_of_negative_zeros.tir`).
const REASSOC: u32 = 1;

impl<'ctx> Gen<'ctx, '_> {
    /// An `alloca` in the function's entry block (promoted to a register by mem2reg).
    pub(super) fn entry_alloca(
        &self,
        ty: inkwell::types::BasicTypeEnum<'ctx>,
    ) -> Result<PointerValue<'ctx>> {
        let entry = self
            .func
            .get_first_basic_block()
            .expect("body has an entry block");
        let tmp = self.ctx.create_builder();
        match entry.get_first_instruction() {
            Some(i) => tmp.position_before(&i),
            None => tmp.position_at_end(entry),
        }
        Ok(tmp.build_alloca(ty, "slot")?)
    }

    fn identity(&self, op: ReduceOp, d: DType) -> BasicValueEnum<'ctx> {
        let t = self.compute_ty(d);
        match op {
            // -0 for float sums: `-0 + x` is `x` for every `x` (+0 + -0 is +0), so LLVM
            // drops the first addition and a lane of -0s sums to -0.
            ReduceOp::Sum if d.is_float() => self.const_value(Const::Float(-0.0), d),
            ReduceOp::Sum | ReduceOp::Xor => self.const_value(Const::Int(0), d),
            ReduceOp::Max | ReduceOp::ArgMax | ReduceOp::Min | ReduceOp::ArgMin => {
                let want_low = matches!(op, ReduceOp::Max | ReduceOp::ArgMax);
                if d.is_float() {
                    let inf = if want_low {
                        f64::NEG_INFINITY
                    } else {
                        f64::INFINITY
                    };
                    t.into_float_type().const_float(inf).into()
                } else {
                    let it = t.into_int_type();
                    let bits = d.bits();
                    let v: u64 = match (want_low, d.is_signed_int()) {
                        (true, true) => 1u64 << (bits - 1),
                        (true, false) => 0,
                        (false, true) => (1u64 << (bits - 1)) - 1,
                        (false, false) => u64::MAX,
                    };
                    it.const_int(v, false).into()
                }
            }
        }
    }

    /// The accumulator's start: the identity, except for float max/min, which start at NaN
    /// (`maxnum(NaN, x) == x`) so that a lane of NaN only gives NaN, as the interpreter's
    /// fold does.
    fn start(&self, op: ReduceOp, d: DType) -> BasicValueEnum<'ctx> {
        match op {
            ReduceOp::Max | ReduceOp::Min if d.is_float() => self
                .compute_ty(d)
                .into_float_type()
                .const_float(f64::NAN)
                .into(),
            _ => self.identity(op, d),
        }
    }

    fn combine(
        &self,
        op: ReduceOp,
        d: DType,
        acc: BasicValueEnum<'ctx>,
        x: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        match op {
            ReduceOp::Sum if d.is_float() => {
                let v = self
                    .b
                    .build_float_add(acc.into_float_value(), x.into_float_value(), "")?;
                if let Some(i) = v.as_instruction() {
                    set_fmf(i, REASSOC);
                }
                Ok(v.into())
            }
            // `d` is the accumulator dtype (f32 for f16/bf16 inputs), so nothing rounds here.
            ReduceOp::Sum => Ok(self.binary(BinOp::Add, d, acc, x)?),
            ReduceOp::Max => Ok(self.binary(BinOp::Max, d, acc, x)?),
            ReduceOp::Min => self.binary(BinOp::Min, d, acc, x),
            ReduceOp::Xor => self.binary(BinOp::Xor, d, acc, x),
            ReduceOp::ArgMax | ReduceOp::ArgMin => unreachable!("handled with an index"),
        }
    }

    pub(super) fn reduce(&mut self, inst: &Inst) -> Result<()> {
        let Op::Reduce { op, x, axis } = &inst.op else {
            unreachable!()
        };
        if self.lv.contains_key(&inst.results[0]) {
            // Computed while `x` was materialized (see `fused_sums`).
            return Ok(());
        }
        let (op, x, axis) = (*op, *x, *axis as usize);
        let xt = self.ty(x).clone();
        let d = xt.dtype().expect("numbers");
        let r = inst.results[0];
        let rt = self.ty(r).clone();
        let is_arg = matches!(op, ReduceOp::ArgMax | ReduceOp::ArgMin);
        // Accumulators in compute form: f16/bf16 accumulate in f32.
        let acc_d = d.accumulator();
        let acc_ty = Type::tile(Elem::Scalar(acc_d), rt.shape.clone());
        let (acc_buf, idx_buf) = if rt.is_scalar() {
            (None, None)
        } else {
            let a = self.alloc_buf(&acc_ty)?;
            let i = is_arg.then(|| self.alloc_buf(&rt)).transpose()?;
            (Some(a), i)
        };
        let acc_slot = rt
            .is_scalar()
            .then(|| self.entry_alloca(self.compute_ty(acc_d)))
            .transpose()?;
        let idx_slot =
            (rt.is_scalar() && is_arg).then(|| self.entry_alloca(self.ctx.i32_type().into()));
        let idx_slot = idx_slot.transpose()?;
        let init = self.start(op, acc_d);
        let i32z = self.ctx.i32_type().const_zero();
        // Initialize.
        match (acc_slot, acc_buf) {
            (Some(s), _) => {
                self.b.build_store(s, init)?;
                if let Some(is) = idx_slot {
                    self.b.build_store(is, i32z)?;
                }
            }
            (None, Some(ab)) => {
                let acc_ty2 = acc_ty.clone();
                let rt2 = rt.clone();
                self.loop_nest(&rt.shape, &mut |g, idx| {
                    let p = g.buf_elem(ab, &acc_ty2, idx)?;
                    g.b.build_store(p, g.to_storage(init, Elem::Scalar(acc_d))?)?;
                    if let Some(ib) = idx_buf {
                        let p = g.buf_elem(ib, &rt2, idx)?;
                        g.b.build_store(p, i32z)?;
                    }
                    Ok(())
                })?;
            }
            (None, None) => unreachable!(),
        }
        // Accumulate. Full blocks of a masked load in `x` take the unmasked copy.
        let mask = self.load_mask_in(x);
        let lanes = self.partial_lanes(op, acc_d, &xt.shape, axis);
        self.versioned(mask, (&[x], &[]), &mut |g| match lanes {
            Some(w) => {
                let acc = acc_buf.map(|ab| (ab, acc_ty.clone()));
                let in_vectors = |g: &mut Self, rows: RowSource| {
                    g.reduce_last_axis_in_vectors(
                        op,
                        x,
                        (d, acc_d),
                        w,
                        &xt.shape,
                        (acc_slot, acc.clone()),
                        rows,
                    )
                };
                // A run of `w` lanes of a load along rows is one vector load, masked when
                // the mask is not known all true here (else the lanes are loaded one by
                // one: LLVM merges unmasked ones only in part, masked ones not at all).
                let source = match g.rows_load(x, d) {
                    Some(rows) => Some((rows, RowSource::Vector(x))),
                    None => g
                        .masked_rows_load(x, d)
                        .map(|(rows, mask, other)| (rows, RowSource::Masked { mask, other })),
                };
                match source.filter(|_| d == acc_d) {
                    Some((rows, source)) => {
                        let ok = g.run_holds(&rows)?;
                        let ptr = rows.ptr;
                        g.when_else(ok, &mut |g| in_vectors(g, source.at(ptr)), &mut |g| {
                            in_vectors(g, RowSource::Lanes)
                        })
                    }
                    None => in_vectors(g, RowSource::Lanes),
                }
            }
            None => Ok(g.reduce_in_order(
                op,
                x,
                d,
                acc_d,
                &xt.shape,
                axis,
                (acc_slot, idx_slot),
                (acc_buf, idx_buf),
                (&acc_ty, &rt),
            )?),
        })?;
        // Results.
        match (acc_slot, acc_buf) {
            (Some(s), _) => {
                let v = if is_arg {
                    self.b
                        .build_load(self.ctx.i32_type(), idx_slot.expect("index slot"), "")?
                } else {
                    let v = self.b.build_load(self.compute_ty(acc_d), s, "")?;
                    self.cast(v, acc_d, d)?
                };
                self.lv.insert(r, Lv::Scalar(v));
                Ok(())
            }
            (None, Some(ab)) => {
                if is_arg {
                    self.lv.insert(r, Lv::Buf(idx_buf.expect("index buffer")));
                    Ok(())
                } else if acc_d == d {
                    self.lv.insert(r, Lv::Buf(ab));
                    Ok(())
                } else {
                    let out = self.alloc_buf(&rt)?;
                    let rt3 = rt.clone();
                    self.loop_nest(&rt.shape, &mut |g, idx| {
                        let p = g.buf_elem(ab, &acc_ty, idx)?;
                        let v = g.b.build_load(g.storage_ty(acc_d), p, "")?;
                        let v = g.cast(v, acc_d, d)?;
                        let q = g.buf_elem(out, &rt3, idx)?;
                        g.b.build_store(q, g.to_storage(v, Elem::Scalar(d))?)?;
                        Ok(())
                    })?;
                    self.lv.insert(r, Lv::Buf(out));
                    Ok(())
                }
            }
            (None, None) => unreachable!(),
        }
    }

    /// Accumulates in row-major order over the input, one lane at a time.
    #[allow(clippy::too_many_arguments)]
    fn reduce_in_order(
        &mut self,
        op: ReduceOp,
        x: Value,
        d: DType,
        acc_d: DType,
        shape: &[usize],
        axis: usize,
        (acc_slot, idx_slot): (Option<PointerValue<'ctx>>, Option<PointerValue<'ctx>>),
        (acc_buf, idx_buf): (Option<PointerValue<'ctx>>, Option<PointerValue<'ctx>>),
        (acc_ty, rt): (&Type, &Type),
    ) -> Result<()> {
        let is_arg = matches!(op, ReduceOp::ArgMax | ReduceOp::ArgMin);
        let rt2 = rt.clone();
        let acc_ty = acc_ty.clone();
        self.loop_nest(shape, &mut |g, idx| {
            let mut ridx: Vec<IntValue> = idx.to_vec();
            let k = ridx.remove(axis);
            let xv = g.lane(x, idx)?;
            let xv = g.cast(xv, d, acc_d)?;
            let (acc_p, idx_p) = match (acc_slot, acc_buf) {
                (Some(s), _) => (s, idx_slot),
                (None, Some(ab)) => (
                    g.buf_elem(ab, &acc_ty, &ridx)?,
                    idx_buf.map(|ib| g.buf_elem(ib, &rt2, &ridx)).transpose()?,
                ),
                (None, None) => unreachable!(),
            };
            let acc_storage = g.storage_ty(acc_d);
            let acc = g.b.build_load(
                if acc_slot.is_some() {
                    g.compute_ty(acc_d)
                } else {
                    acc_storage
                },
                acc_p,
                "",
            )?;
            let acc = if acc_slot.is_some() {
                acc
            } else {
                g.decode_storage(acc, Elem::Scalar(acc_d))?
            };
            if is_arg {
                let pred = if op == ReduceOp::ArgMax {
                    CmpPred::Gt
                } else {
                    CmpPred::Lt
                };
                let better = g.compare(pred, acc_d, xv, acc)?;
                let nv = g.b.build_select(better, xv, acc, "")?;
                let k32 = g.b.build_int_truncate(k, g.ctx.i32_type(), "")?;
                let ip = idx_p.expect("argmax keeps an index");
                let old = g.b.build_load(g.ctx.i32_type(), ip, "")?.into_int_value();
                let ni = g.b.build_select(better, k32, old, "")?;
                g.b.build_store(ip, ni)?;
                let nv = if acc_slot.is_some() {
                    nv
                } else {
                    g.to_storage(nv, Elem::Scalar(acc_d))?
                };
                g.b.build_store(acc_p, nv)?;
                Ok(())
            } else {
                let nv = g.combine(op, acc_d, acc, xv)?;
                let nv = if acc_slot.is_some() {
                    nv
                } else {
                    g.to_storage(nv, Elem::Scalar(acc_d))?
                };
                g.b.build_store(acc_p, nv)?;
                Ok(())
            }
        })
    }

    /// The vector partials `acc` carried through `step` over the vectors `lo..hi` (i64,
    /// none when `lo >= hi`) of `w` lanes each; `step` gets a vector's first lane.
    fn partials_loop(
        &mut self,
        (lo, hi): (IntValue<'ctx>, IntValue<'ctx>),
        acc: VectorValue<'ctx>,
        w: usize,
        step: &mut dyn FnMut(
            &mut Self,
            IntValue<'ctx>,
            VectorValue<'ctx>,
        ) -> Result<VectorValue<'ctx>>,
    ) -> Result<VectorValue<'ctx>> {
        let i64t = self.ctx.i64_type();
        let pre = self.b.current_block()?;
        let header = self.ctx.append_basic_block(self.func, "red.vec");
        let exit = self.ctx.append_basic_block(self.func, "red.vec.end");
        let any = self
            .b
            .build_int_compare(inkwell::IntPredicate::SLT, lo, hi, "")?;
        self.b.build_conditional_branch(any, header, exit)?;
        self.b.position_at_end(header);
        let kk = self.b.build_phi(i64t, "kk")?;
        kk.add_incoming(&[(&lo, pre)]);
        let phi = self.b.build_phi(acc.get_type(), "acc")?;
        phi.add_incoming(&[(&acc, pre)]);
        let kv = kk.as_basic_value().into_int_value();
        let base = self.b.build_int_mul(kv, self.i64c(w as u64), "")?;
        let next_acc = step(self, base, phi.as_basic_value().into_vector_value())?;
        let latch = self.b.current_block()?;
        let next = self.b.build_int_add(kv, self.i64c(1), "")?;
        kk.add_incoming(&[(&next, latch)]);
        phi.add_incoming(&[(&next_acc, latch)]);
        let more = self
            .b
            .build_int_compare(inkwell::IntPredicate::SLT, next, hi, "")?;
        let back = self.b.build_conditional_branch(more, header, exit)?;
        // Each step is `w` lanes in one vector already: with a bound known only at run time
        // LLVM unrolled the loop into a prologue, four copies and an epilogue, only more
        // code to compile (softmax's cold compile took a sixth more time).
        let constant = |v: IntValue| v.get_zero_extended_constant().is_some();
        if !constant(lo) || !constant(hi) {
            self.emit().unroll_hint(back, 1);
        }
        self.b.position_at_end(exit);
        let out = self.b.build_phi(acc.get_type(), "partials")?;
        out.add_incoming(&[(&acc, pre), (&next_acc, latch)]);
        Ok(out.as_basic_value().into_vector_value())
    }

    /// How many partial accumulators a reduction along the last axis gets, when it gets
    /// them: float max/min, whose sequential form LLVM does not vectorize (maxnum is exact
    /// in any order, so the partial results combine to the same value).
    fn partial_lanes(
        &self,
        op: ReduceOp,
        acc_d: DType,
        shape: &[usize],
        axis: usize,
    ) -> Option<usize> {
        if !matches!(op, ReduceOp::Max | ReduceOp::Min) || !acc_d.is_float() {
            return None;
        }
        let w = 128 / acc_d.size_bytes();
        let k = shape[axis];
        (axis + 1 == shape.len() && k >= w && k.is_multiple_of(w)).then_some(w)
    }

    /// A reduction along the last axis with `w` partial accumulators in one LLVM vector:
    /// `w` consecutive lanes are combined with the vector at a time, and the vector is
    /// reduced once per output lane. `rows` says where the `w` lanes come from: one by
    /// one, or (for a load of `x` whose runs along the last axis are contiguous, with
    /// `d == acc_d`) one vector load, masked where the mask is not known all true.
    #[allow(clippy::too_many_arguments)]
    fn reduce_last_axis_in_vectors(
        &mut self,
        op: ReduceOp,
        x: Value,
        (d, acc_d): (DType, DType),
        w: usize,
        shape: &[usize],
        (acc_slot, acc_buf): (
            Option<PointerValue<'ctx>>,
            Option<(PointerValue<'ctx>, Type)>,
        ),
        rows: RowSource,
    ) -> Result<()> {
        let outer = &shape[..shape.len() - 1];
        let k = shape[shape.len() - 1];
        let ft = self.compute_ty(acc_d).into_float_type();
        let vt = ft.vec_type(w as u32);
        let init = self.identity(op, acc_d).into_float_value();
        let is_max = op == ReduceOp::Max;
        let pred = if is_max {
            inkwell::FloatPredicate::OGT
        } else {
            inkwell::FloatPredicate::OLT
        };
        let splat = self.splat(init.into(), vt, w)?;
        self.loop_nest(outer, &mut |g, ridx| {
            let step = |g: &mut Self, rows: RowSource, base: IntValue<'ctx>, accv| {
                let v = match rows {
                    RowSource::Vector(ptr) => {
                        let mut idx = ridx.to_vec();
                        idx.push(base);
                        let p = g.lane(ptr, &idx)?.into_pointer_value();
                        g.load_vec(vt, p, d.size_bytes() as u32)?
                    }
                    RowSource::MaskedAt { ptr, mask, other } => {
                        // Rank 1 (`masked_rows_load`): the lanes are `base..base + w`.
                        let p = g.lane(ptr, &[base])?;
                        let m = g.vector_lanes(mask, base, w)?;
                        let o = g.vector_lanes(other, base, w)?;
                        let align = g.ctx.i32_type().const_int(d.size_bytes() as u64, false);
                        let args = [p, align.into(), m.into(), o.into()];
                        let types = [vt.into(), p.get_type()];
                        g.intrinsic("llvm.masked.load", &types, &args)?
                            .into_vector_value()
                    }
                    RowSource::Lanes | RowSource::Masked { .. } => {
                        // The float's accumulator (f32 for the narrow ones, else itself)
                        // has its compute form, so the lanes need no conversion.
                        debug_assert_eq!(g.compute_ty(d), g.compute_ty(acc_d));
                        let mut idx = ridx.to_vec();
                        idx.push(base);
                        g.row_lanes(x, &idx, w)?
                    }
                };
                // `x > acc ? x : acc` is maxnum here: acc starts at -inf and never becomes
                // NaN, and a NaN x loses the comparison. It is one `maxps` (minnum alike).
                // A lane of NaN only thus ends at -inf, which `nan_unless_some_number`
                // fixes afterwards. Equal zeros take the sign `float_max_min` gives (+0
                // wins a max).
                let better = g.b.build_float_compare(pred, v, accv, "")?;
                let picked = g.b.build_select(better, v, accv, "")?;
                Ok(g.emit()
                    .order_signed_zeros(is_max, v.into(), accv.into(), picked)?
                    .into_vector_value())
            };
            let vectors = g.i64c((k / w) as u64);
            // In the masked copy of an index mask true on lanes `0..p` (see `prefix`), the
            // vectors below `p` are loaded plainly: a masked load is slow on AMD CPUs.
            let split = match rows {
                RowSource::MaskedAt { ptr, mask, .. } => g
                    .split_for(k)
                    .filter(|s| s.covers(mask))
                    .map(|s| (s, RowSource::Vector(ptr))),
                _ => None,
            };
            let next_acc = match split {
                Some((s, plain)) => {
                    let whole = g.b.build_int_unsigned_div(s.p, g.i64c(w as u64), "")?;
                    let acc = g.partials_loop((g.i64c(0), whole), splat, w, &mut |g, b, a| {
                        step(g, plain, b, a)
                    })?;
                    g.partials_loop((whole, vectors), acc, w, &mut |g, b, a| step(g, rows, b, a))?
                }
                None => g.partials_loop((g.i64c(0), vectors), splat, w, &mut |g, b, a| {
                    step(g, rows, b, a)
                })?,
            };
            // Fold the partial results into the accumulator.
            let (p, ty) = match (&acc_slot, &acc_buf) {
                (Some(s), _) => (*s, None),
                (None, Some((ab, t))) => (g.buf_elem(*ab, t, ridx)?, Some(t)),
                (None, None) => unreachable!(),
            };
            let raw = g.b.build_load(
                if ty.is_some() {
                    g.storage_ty(acc_d)
                } else {
                    g.compute_ty(acc_d)
                },
                p,
                "",
            )?;
            let mut r = if ty.is_some() {
                g.decode_storage(raw, Elem::Scalar(acc_d))
            } else {
                Ok(raw)
            }?;
            // Halve the vector until one lane is left (the partials are never NaN, so the
            // comparison form is exact), then fold that lane in.
            let lane = g.fold_halves(next_acc, w, &mut |g, lo, hi| {
                let better = g.b.build_float_compare(pred, hi, lo, "")?;
                let picked = g.b.build_select(better, hi, lo, "")?;
                Ok(g.emit()
                    .order_signed_zeros(is_max, hi.into(), lo.into(), picked)?
                    .into_vector_value())
            })?;
            r = g.combine(op, acc_d, r, lane)?;
            // The partials start at the identity (±inf), so a lane holding only NaN (which
            // must give NaN) ends there too: in that rare case, look at the lane again.
            let r = g.nan_unless_some_number(r, init, x, d, acc_d, ridx, k)?;
            let r = if ty.is_some() {
                g.to_storage(r, Elem::Scalar(acc_d))
            } else {
                Ok(r)
            }?;
            g.b.build_store(p, r)?;
            Ok(())
        })
    }

    /// `r`, the max/min of the lane `ridx` of `x` (`k` elements along its last axis), as
    /// the interpreter's maxnum/minnum fold gives it: when `r` equals `identity` (±inf),
    /// every element is NaN or ±inf, and the fold gives NaN iff every one is NaN; the
    /// lane is looked at again only in that case.
    #[allow(clippy::too_many_arguments)]
    fn nan_unless_some_number(
        &mut self,
        r: BasicValueEnum<'ctx>,
        identity: inkwell::values::FloatValue<'ctx>,
        x: Value,
        d: DType,
        acc_d: DType,
        ridx: &[IntValue<'ctx>],
        k: usize,
    ) -> Result<BasicValueEnum<'ctx>> {
        let rf = r.into_float_value();
        let ft = rf.get_type();
        let hit = self
            .b
            .build_float_compare(inkwell::FloatPredicate::OEQ, rf, identity, "")?;
        // Rare: keep the second look out of the hot path's layout.
        let bool_t = self.ctx.bool_type();
        let hit = self
            .intrinsic(
                "llvm.expect",
                &[bool_t.into()],
                &[hit.into(), bool_t.const_zero().into()],
            )?
            .into_int_value();
        let pre = self.b.current_block()?;
        let rescan = self.ctx.append_basic_block(self.func, "red.allnan");
        let join = self.ctx.append_basic_block(self.func, "red.allnan.end");
        self.b.build_conditional_branch(hit, rescan, join)?;
        self.b.position_at_end(rescan);
        let any = self.entry_alloca(bool_t.into())?;
        self.b.build_store(any, bool_t.const_zero())?;
        let ridx = ridx.to_vec();
        // Rarely run: a scalar loop is enough, and costs a vectorized one's compile time.
        self.with_region_loops(super::LoopUnroll::Scalar, |g| {
            g.loop_nest(&[k], &mut |g, i| {
                let mut idx = ridx.clone();
                idx.push(i[0]);
                let xv = g.lane(x, &idx)?;
                let xv = g.cast(xv, d, acc_d)?.into_float_value();
                let num =
                    g.b.build_float_compare(inkwell::FloatPredicate::ORD, xv, xv, "")?;
                let old = g.b.build_load(bool_t, any, "")?.into_int_value();
                let new = g.b.build_or(old, num, "")?;
                g.b.build_store(any, new)?;
                Ok(())
            })
        })?;
        let some = self.b.build_load(bool_t, any, "")?.into_int_value();
        let fixed = self
            .b
            .build_select(some, rf, ft.const_float(f64::NAN), "")?;
        let end = self.b.current_block()?;
        self.b.build_unconditional_branch(join)?;
        self.b.position_at_end(join);
        let phi = self.b.build_phi(ft, "")?;
        phi.add_incoming(&[(&r, pre), (&fixed, end)]);
        Ok(phi.as_basic_value())
    }

    /// The full sums of the 1-D tile `v` taken later in `v`'s block: they are accumulated
    /// in the loop that materializes `v` instead of in a second pass over its buffer
    /// (same lanes, same order). Each comes with its accumulator slot and dtypes.
    pub(super) fn fused_sums(&mut self, v: Value) -> Result<Vec<FusedSum<'ctx>>> {
        let f = self.f;
        let Some(def) = self.defs.get(&v).copied() else {
            return Ok(Vec::new());
        };
        let Some(block) = holder(&f.body, def) else {
            return Ok(Vec::new());
        };
        self.sums_in(block, v)
    }

    /// The full sums (`reduce sum, axis 0`) of the 1-D numeric tile `v` that `block` takes,
    /// each with a fresh accumulator slot set to the identity here.
    pub(super) fn sums_in(&mut self, block: &Block, v: Value) -> Result<Vec<FusedSum<'ctx>>> {
        let vt = self.f.ty(v);
        let Some(d) = vt.dtype().filter(|d| !d.is_bool()) else {
            return Ok(Vec::new());
        };
        if vt.rank() != 1 {
            return Ok(Vec::new());
        }
        let acc_d = d.accumulator();
        let mut out = Vec::new();
        for inst in &block.insts {
            if let Op::Reduce {
                op: ReduceOp::Sum,
                x,
                axis: 0,
            } = inst.op
            {
                if x == v {
                    let slot = self.entry_alloca(self.compute_ty(acc_d))?;
                    let init = self.identity(ReduceOp::Sum, acc_d);
                    self.b.build_store(slot, init)?;
                    out.push(FusedSum {
                        result: inst.results[0],
                        slot,
                        d,
                        acc_d,
                    });
                }
            }
        }
        Ok(out)
    }

    /// Sets each fused sum's accumulator back to the identity.
    pub(super) fn fused_sums_reset(&mut self, sums: &[FusedSum<'ctx>]) -> Result<()> {
        for s in sums {
            let init = self.identity(ReduceOp::Sum, s.acc_d);
            self.b.build_store(s.slot, init)?;
        }
        Ok(())
    }

    /// Adds lane `x` (compute form) of the materialized tile to each fused sum.
    pub(super) fn fused_sums_step(
        &mut self,
        sums: &[FusedSum<'ctx>],
        x: BasicValueEnum<'ctx>,
    ) -> Result<()> {
        for s in sums {
            let xv = self.cast(x, s.d, s.acc_d)?;
            let acc = self.b.build_load(self.compute_ty(s.acc_d), s.slot, "")?;
            let nv = self.combine(ReduceOp::Sum, s.acc_d, acc, xv)?;
            self.b.build_store(s.slot, nv)?;
        }
        Ok(())
    }

    /// `w` partial accumulators per fused sum (entry-block arrays set to the identity), for
    /// a loop that visits its lanes in chunks of `w`: lane `j` of every chunk adds into
    /// partial `j`, and the partials are folded in order at the end (a reassociation of the
    /// same sum, as LLVM's vectorized form of the plain loop is).
    pub(super) fn fused_sums_partials(
        &mut self,
        sums: &[FusedSum<'ctx>],
        w: usize,
    ) -> Result<Vec<PointerValue<'ctx>>> {
        sums.iter()
            .map(|s| {
                let t = self.compute_ty(s.acc_d);
                let arr = self.entry_alloca(t.array_type(w as u32).into())?;
                // The loop adds whole vectors into it: on a cache-line boundary none is
                // split across two lines, wherever the frame puts it.
                if let Some(i) = arr.as_instruction() {
                    i.set_alignment(64)
                        .map_err(|e| crate::llvm::CodegenError::internal(e.to_string()))?;
                }
                let init = self.identity(ReduceOp::Sum, s.acc_d);
                for j in 0..w {
                    // SAFETY (of the generated code): `j < w`, inside the array.
                    let p = unsafe { self.b.build_gep(t, arr, &[self.i64c(j as u64)], "") }?;
                    self.b.build_store(p, init)?;
                }
                Ok(arr)
            })
            .collect()
    }

    /// Adds lane `x` (compute form), lane `j` of its chunk, to the partials of each sum.
    pub(super) fn fused_sums_step_partial(
        &mut self,
        sums: &[FusedSum<'ctx>],
        parts: &[PointerValue<'ctx>],
        j: IntValue<'ctx>,
        x: BasicValueEnum<'ctx>,
    ) -> Result<()> {
        for (s, arr) in sums.iter().zip(parts) {
            let t = self.compute_ty(s.acc_d);
            let xv = self.cast(x, s.d, s.acc_d)?;
            // SAFETY (of the generated code): `j` is below the chunk width.
            let p = unsafe { self.b.build_gep(t, *arr, &[j], "") }?;
            let acc = self.b.build_load(t, p, "")?;
            let nv = self.combine(ReduceOp::Sum, s.acc_d, acc, xv)?;
            self.b.build_store(p, nv)?;
        }
        Ok(())
    }

    /// Adds the `w` partials of each sum into its accumulator: halves added pairwise until
    /// one is left (which vectorizes), then that one into the accumulator.
    pub(super) fn fused_sums_fold(
        &mut self,
        sums: &[FusedSum<'ctx>],
        parts: &[PointerValue<'ctx>],
        w: usize,
    ) -> Result<()> {
        for (s, arr) in sums.iter().zip(parts) {
            let t = self.compute_ty(s.acc_d);
            let folded = match w.is_power_of_two() && s.acc_d.is_float() {
                true => self.fold_partials_as_vector(s.acc_d, *arr, w)?,
                false => self.fold_partials(s.acc_d, *arr, w)?,
            };
            let acc = self.b.build_load(t, s.slot, "")?;
            let acc = self.combine(ReduceOp::Sum, s.acc_d, acc, folded)?;
            self.b.build_store(s.slot, acc)?;
        }
        Ok(())
    }

    /// The sum of the `w` partial sums of dtype `d` at `arr`, halving the list: element
    /// `j` of the first half plus element `j` of the second, until one is left.
    fn fold_partials(
        &mut self,
        d: DType,
        arr: PointerValue<'ctx>,
        w: usize,
    ) -> Result<BasicValueEnum<'ctx>> {
        let t = self.compute_ty(d);
        let mut vals: Vec<BasicValueEnum<'ctx>> = (0..w)
            .map(|j| {
                // SAFETY (of the generated code): `j < w`, inside the array.
                let p = unsafe { self.b.build_gep(t, arr, &[self.i64c(j as u64)], "") }?;
                Ok(self.b.build_load(t, p, "")?)
            })
            .collect::<Result<_>>()?;
        while vals.len() > 1 {
            let half = vals.len().div_ceil(2);
            let (lo, hi) = vals.split_at(half);
            let mut next: Vec<_> = lo
                .iter()
                .zip(hi)
                .map(|(a, b)| self.combine(ReduceOp::Sum, d, *a, *b))
                .collect::<Result<_>>()?;
            if lo.len() > hi.len() {
                next.push(lo[lo.len() - 1]);
            }
            vals = next;
        }
        Ok(vals[0])
    }

    /// [`fold_partials`](Self::fold_partials) of floats for a power-of-two `w`, in the same order,
    /// on one vector: a load and `log2(w)` shuffles and adds instead of `w` loads and
    /// `w - 1` scalar adds (less code to compile; the same sums bit for bit).
    fn fold_partials_as_vector(
        &mut self,
        d: DType,
        arr: PointerValue<'ctx>,
        w: usize,
    ) -> Result<BasicValueEnum<'ctx>> {
        let t = self.compute_ty(d);
        let vt = super::vector_lanes::vec_type(t, w);
        let v = self.load_vec(vt, arr, d.size_bytes() as u32)?;
        self.fold_halves(v, w, &mut |g, lo, hi| {
            let sum = g.b.build_float_add(lo, hi, "")?;
            if let Some(i) = sum.as_instruction() {
                set_fmf(i, REASSOC);
            }
            Ok(sum)
        })
    }

    /// Lane 0 of the power-of-two-wide vector `v` (`w` lanes) halved until one lane is
    /// left: at each step lanes `j` and `j + n` of the `2n` left are combined into lane
    /// `j` by `combine(low half, high half)`.
    fn fold_halves(
        &mut self,
        mut v: VectorValue<'ctx>,
        w: usize,
        combine: &mut dyn FnMut(
            &mut Self,
            VectorValue<'ctx>,
            VectorValue<'ctx>,
        ) -> Result<VectorValue<'ctx>>,
    ) -> Result<BasicValueEnum<'ctx>> {
        let i32t = self.ctx.i32_type();
        let mut n = w;
        while n > 1 {
            n /= 2;
            let pick = |from: usize| {
                let idx: Vec<_> = (from..from + n)
                    .map(|k| i32t.const_int(k as u64, false))
                    .collect();
                VectorType::const_vector(&idx)
            };
            let lo = self.b.build_shuffle_vector(v, v, pick(0), "")?;
            let hi = self.b.build_shuffle_vector(v, v, pick(n), "")?;
            v = combine(self, lo, hi)?;
        }
        Ok(self.b.build_extract_element(v, i32t.const_zero(), "")?)
    }

    /// Makes the fused sums' results available (their `reduce` ops then emit nothing).
    pub(super) fn fused_sums_finish(&mut self, sums: &[FusedSum<'ctx>]) -> Result<()> {
        for s in sums {
            let v = self.b.build_load(self.compute_ty(s.acc_d), s.slot, "")?;
            let v = self.cast(v, s.acc_d, s.d)?;
            self.lv.insert(s.result, Lv::Scalar(v));
        }
        Ok(())
    }
}

/// Where a reduction in vector partials takes its `w` lanes at a time.
#[derive(Clone, Copy)]
enum RowSource {
    /// One by one.
    Lanes,
    /// One vector load at the run's lane (`rows_load`).
    Vector(Value),
    /// A masked load of a run whose mask and `other` lanes are known, before the run's
    /// pointer is known to the caller.
    Masked { mask: Value, other: Value },
    /// The same at the run's pointer tile `ptr`.
    MaskedAt {
        ptr: Value,
        mask: Value,
        other: Value,
    },
}

impl RowSource {
    /// This source reading the run `ptr` (`Lanes` stays lane by lane).
    fn at(self, ptr: Value) -> RowSource {
        match self {
            RowSource::Vector(_) => RowSource::Vector(ptr),
            RowSource::Masked { mask, other } | RowSource::MaskedAt { mask, other, .. } => {
                RowSource::MaskedAt { ptr, mask, other }
            }
            RowSource::Lanes => RowSource::Lanes,
        }
    }
}

/// A sum computed in the loop that materializes its input (see `Gen::fused_sums`).
pub(super) struct FusedSum<'ctx> {
    result: Value,
    slot: PointerValue<'ctx>,
    d: DType,
    acc_d: DType,
}

/// The block whose instruction list holds `inst`.
pub(super) fn holder<'b>(b: &'b Block, inst: &Inst) -> Option<&'b Block> {
    for i in &b.insts {
        if std::ptr::eq(i, inst) {
            return Some(b);
        }
        for r in i.op.regions() {
            if let Some(found) = holder(r, inst) {
                return Some(found);
            }
        }
    }
    None
}

/// Sets fast-math flags on a floating-point instruction.
pub(super) fn set_fmf(i: InstructionValue<'_>, flags: u32) {
    i.set_fast_math_flags(flags);
}
