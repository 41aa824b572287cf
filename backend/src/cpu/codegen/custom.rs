//! Custom-op calls (see `docs/custom_ops.md`): Simd calls `_mlir_ciface_<symbol>` once per
//! program with memref descriptors of whole tiles (a tile loaded from one contiguous run of
//! memory is passed in place, others as copies in scratch); Simt calls `<symbol>` once per element
//! of the out shape (inputs broadcast), in a loop LLVM vectorizes after inlining it.

use super::{Gen, Lv};
use crate::llvm::{CodegenError, Emitter, Positioned, Result};
use inkwell::types::{BasicType, BasicTypeEnum};
use inkwell::values::{BasicValueEnum, FunctionValue, IntValue, PointerValue};
use inkwell::{AddressSpace, IntPredicate};
use tritium_dsl::ir::{affine_lanes, CustomCall, Elem, Inst, Op, Type, Value, Widened};

impl<'ctx, 'f> Gen<'ctx, 'f> {
    pub(super) fn custom(&mut self, inst: &'f Inst) -> Result<()> {
        let Op::Custom(c) = &inst.op else {
            unreachable!()
        };
        let entry = self.customs.get(&(inst as *const Inst)).cloned();
        let func = entry
            .as_ref()
            .and_then(|e| self.module.get_function(&e.function));
        let result = match (entry, func) {
            (Some(e), Some(func)) if e.per_element => self.custom_simt(inst, c, func),
            (Some(_), Some(func)) => self.custom_simd(inst, c, func),
            _ => Err(CodegenError::internal("the call was not linked")),
        };
        result.map_err(|e| e.of_custom_call(&c.name))
    }

    /// One lane of a fused per-element call (one out; see `plan`): the function was
    /// checked when the call was planned lazy.
    pub(super) fn custom_lane(
        &mut self,
        inst: &Inst,
        c: &CustomCall,
        idx: &[IntValue<'ctx>],
    ) -> Result<BasicValueEnum<'ctx>> {
        let entry = &self.customs[&(inst as *const Inst)];
        let func = self.module.get_function(&entry.function).expect("linked");
        let args = self.simt_args(c, idx)?;
        let e = self.ty(inst.results[0]).elem;
        let x = self.call(func, &args)?.expect("one out returns its value");
        self.decode_c(x, e)
    }

    /// The C arguments of one element: input lanes broadcast to the out shape.
    fn simt_args(
        &mut self,
        c: &CustomCall,
        idx: &[IntValue<'ctx>],
    ) -> Result<Vec<BasicValueEnum<'ctx>>> {
        c.ins
            .iter()
            .map(|v| {
                let x = self.broadcast_lane(*v, idx)?;
                self.encode_c(x, self.ty(*v).elem)
            })
            .collect()
    }

    /// A `memref_t<T, R>` descriptor of a row-major buffer (offset 0, allocated == aligned).
    fn memref(&self, buf: PointerValue<'ctx>, shape: &[usize]) -> Result<PointerValue<'ctx>> {
        let st = self.emit().memref_type(shape.len());
        let desc = self.entry_alloca(st.as_basic_type_enum())?;
        self.emit().fill_memref(desc, buf, shape)?;
        Ok(desc)
    }

    fn bind_result(&mut self, r: Value, buf: PointerValue<'ctx>) -> Result<()> {
        let ty = self.ty(r);
        if ty.is_scalar() {
            let raw = self.b.build_load(self.elem_storage_ty(ty.elem), buf, "")?;
            let v = self.decode_storage(raw, ty.elem)?;
            self.lv.insert(r, Lv::Scalar(v));
            Ok(())
        } else {
            self.lv.insert(r, Lv::Buf(buf));
            Ok(())
        }
    }

    fn custom_simd(
        &mut self,
        inst: &'f Inst,
        c: &'f CustomCall,
        func: FunctionValue<'ctx>,
    ) -> Result<()> {
        let ptr_ty: BasicTypeEnum = self.ctx.ptr_type(AddressSpace::default()).into();
        let mut args = Vec::new();
        let mut types = Vec::new();
        // Where each input tile is read, and its bytes (for the overlap test of outs
        // written in place).
        let mut read = Vec::new();
        for v in &c.ins {
            let t = self.ty(*v).clone();
            match (t.elem, t.is_scalar()) {
                (Elem::Ptr(_), false) => {
                    return Err(CodegenError::unsupported(format!(
                    "input {v} is a tile of pointers ({t}); pass a pointer or a tile of numbers"
                )))
                }
                (e, true) => {
                    let x = self.lane(*v, &[])?;
                    args.push(self.encode_c(x, e)?);
                    types.push(self.c_ty(e));
                }
                (_, false) => {
                    let buf = self.input_memory(c, *v)?;
                    args.push(self.memref(buf, &t.shape)?.into());
                    types.push(ptr_ty);
                    read.push((buf, t.numel() * self.elem_size(t.elem)));
                }
            }
        }
        let in_place = self.direct_store(inst, c);
        let mut out_bufs = Vec::new();
        for (k, o) in c.outs.iter().enumerate() {
            let t = self.ty(*o).clone();
            let buf = match &in_place {
                Some((out, store, direct)) if *out == k => {
                    self.output_memory(store, direct, *o, &read)?
                }
                _ => {
                    let buf = self.alloc_buf(&t)?;
                    self.fill_buf(buf, &t, *o)?;
                    buf
                }
            };
            args.push(self.memref(buf, &t.shape)?.into());
            types.push(ptr_ty);
            out_bufs.push(buf);
        }
        for e in &c.extra {
            let t = Type::tile(Elem::Scalar(e.dtype), vec![e.len.max(1)]);
            let buf = self.alloc_buf(&t)?;
            let bytes = self.i64c((e.len * e.dtype.size_bytes()) as u64);
            self.b
                .build_memset(buf, 1, self.ctx.i8_type().const_zero(), bytes)?;
            args.push(self.memref(buf, &[e.len])?.into());
            types.push(ptr_ty);
        }
        self.check_signature(
            func,
            None,
            &types,
            "Simd: `void _mlir_ciface_<symbol>(ins…, outs…, extra…)` with memref_t* for tiles",
        )?;
        let checked = self.check_builtin_extent(inst, c)?;
        self.call(func, &args)?;
        if let Some(join) = checked {
            self.b.build_unconditional_branch(join)?;
            self.b.position_at_end(join);
        }
        for (r, buf) in inst.results.iter().zip(out_bufs) {
            self.bind_result(*r, buf)?;
        }
        Ok(())
    }

    /// A checked builtin call: branches on its whole extent lying inside a buffer its
    /// pointer may point into, to the call (where the builder is left) or to a fault
    /// record; returns the block both join in. `None` for a call that is not checked.
    fn check_builtin_extent(
        &mut self,
        inst: &Inst,
        c: &CustomCall,
    ) -> Result<Option<inkwell::basic_block::BasicBlock<'ctx>>> {
        if !self.checks(inst) {
            return Ok(None);
        }
        let f = self.f;
        let Some(access) = c.builtin_access(|v| f.ty(v).shape.clone()) else {
            return Ok(None);
        };
        let size = (self.ty(access.ptr).elem.pointee())
            .ok_or_else(|| CodegenError::internal("a builtin's pointer is not a pointer"))?
            .size_bytes();
        let p = self.lane(access.ptr, &[])?.into_pointer_value();
        let mut values = std::collections::HashMap::new();
        for &v in &c.ins[1..] {
            if self.ty(v).is_scalar() {
                values.insert(v, self.lane(v, &[])?.into_int_value());
            }
        }
        let value = |v: Value| {
            (values.get(&v).copied())
                .ok_or_else(|| CodegenError::internal("a builtin's extent is not a scalar"))
        };
        let (start, len) = self.emit().builtin_extent(p, &access.extent, value, size)?;
        let inside = self.in_buffers(access.ptr, start, Some(len), size, access.write)?;
        let bl = self.b;
        let none = bl.build_int_compare(IntPredicate::EQ, len, self.i64c(0), "")?;
        let ok = bl.build_or(none, inside, "")?;
        let (call, fault, join) = (
            self.ctx.append_basic_block(self.func, "builtin.call"),
            self.ctx.append_basic_block(self.func, "builtin.fault"),
            self.ctx.append_basic_block(self.func, "builtin.join"),
        );
        bl.build_conditional_branch(ok, call, fault)?;
        bl.position_at_end(fault);
        let start_in = self.in_buffers(access.ptr, start, None, size, access.write)?;
        let at = (self.emit()).extent_fault_address(start, len, size, start_in)?;
        self.record_fault_at(inst, at)?;
        bl.build_unconditional_branch(join)?;
        bl.position_at_end(call);
        Ok(Some(join))
    }

    /// Where a Simd call reads input tile `v`: the argument's own memory when `v` is a load
    /// of one contiguous row-major run whose lanes are all in (mask all true, checked at
    /// run time), else a copy in scratch. The C++ reads its inputs and writes only its outs
    /// and extra buffers, so the memory holds the loaded values for the whole call.
    fn input_memory(&mut self, c: &CustomCall, v: Value) -> Result<PointerValue<'ctx>> {
        let Some(direct) = self.direct_load(c, v) else {
            return self.as_buf(v);
        };
        let t = self.ty(v).clone();
        let ok = self.run_holds(&direct)?;
        let first: Vec<IntValue> = t.shape.iter().map(|_| self.i64c(0)).collect();
        let memory = self.lane(direct.ptr, &first)?.into_pointer_value();
        let buf = self.alloc_buf(&t)?;
        let from = self.b.current_block()?;
        let copy = self.ctx.append_basic_block(self.func, "simd.copy");
        let join = self.ctx.append_basic_block(self.func, "simd.input");
        self.b.build_conditional_branch(ok, join, copy)?;
        self.b.position_at_end(copy);
        self.fill_buf(buf, &t, v)?;
        let copied = self.b.current_block()?;
        self.b.build_unconditional_branch(join)?;
        self.b.position_at_end(join);
        let phi = self.b.build_phi(memory.get_type(), "input")?;
        phi.add_incoming(&[(&memory, from), (&buf, copied)]);
        Ok(phi.as_basic_value().into_pointer_value())
    }

    /// Input `v` as a [`Direct`] access when it may be read in place: a lazy,
    /// non-volatile load (of numbers: a bool byte is normalized by loading it) whose pointers
    /// are provably `first + row-major index` given the run-time checks of
    /// [`run_holds`](Self::run_holds), in unchecked code, passed to a call
    /// that cannot write memory.
    fn direct_load(&self, c: &CustomCall, v: Value) -> Option<Direct> {
        if !self.may_pass_memory(c) || !matches!(self.lv.get(&v), Some(Lv::Lazy)) {
            return None;
        }
        let Op::Load {
            ptr, mask, hints, ..
        } = &self.defs.get(&v)?.op
        else {
            return None;
        };
        let t = self.ty(v);
        if hints.volatile || t.dtype() == Some(tritium_dsl::ir::DType::Bool) {
            return None;
        }
        self.run(*ptr, *mask, &t.shape)
    }

    /// Whether Simd call `c` may be given tensor memory in place: unchecked code (checked
    /// mode checks every lane), and no pointer argument (the C++ may write through one,
    /// maybe into that memory).
    fn may_pass_memory(&self, c: &CustomCall) -> bool {
        let given_pointer = c.ins.iter().any(|i| self.ty(*i).elem.pointee().is_some());
        !self.opts.bounds_check && !self.site_checked.any() && !given_pointer
    }

    /// `ptr` under `mask` as a [`Direct`] access when its lanes are provably one row-major
    /// run of `shape` (given the run-time checks of [`run_holds`](Self::run_holds)).
    fn run(&self, ptr: Value, mask: Option<Value>, shape: &[usize]) -> Option<Direct> {
        let a = affine_lanes(self.f, &self.defs, ptr)?;
        (a.is_row_major(shape) && a.is_checkable()).then_some(Direct {
            ptr,
            mask,
            widened: a.widened,
        })
    }

    /// An i1 that holds when the access `d` touches every lane at `first + row-major
    /// index`: its mask is all true and no widened offset wraps.
    pub(super) fn run_holds(&mut self, d: &Direct) -> Result<IntValue<'ctx>> {
        let mut ok = match d.mask.filter(|m| !self.true_masks.contains(m)) {
            Some(m) => {
                let shape = self.ty(m).shape.clone();
                self.all_lanes_true(m, &shape)?
            }
            None => self.ctx.bool_type().const_all_ones(),
        };
        let i64t = self.ctx.i64_type();
        for w in &d.widened {
            let span = w.span.expect("`run` takes only checkable tiles");
            let shape = self.ty(w.value).shape.clone();
            let first: Vec<IntValue> = shape.iter().map(|_| self.i64c(0)).collect();
            let last: Vec<IntValue> = shape.iter().map(|n| self.i64c(*n as u64 - 1)).collect();
            let mut ext = |idx: &[IntValue<'ctx>]| -> Result<IntValue<'ctx>> {
                let x = self.lane(w.value, idx)?.into_int_value();
                Ok(self.b.build_int_cast_sign_flag(x, i64t, w.signed, "")?)
            };
            let (lo, hi) = (ext(&first)?, ext(&last)?);
            let got = self.b.build_int_sub(hi, lo, "")?;
            let exact =
                self.b
                    .build_int_compare(IntPredicate::EQ, got, self.i64c(span as u64), "")?;
            ok = self.b.build_and(ok, exact, "")?;
        }
        Ok(ok)
    }

    /// The out of Simd call `inst` that the C++ may write straight into the memory its
    /// store writes, and that store: the out's result is used once, by a store later in the
    /// same block with only pure ops between (nothing reads or writes memory there), whose
    /// pointers are provably one row-major run (checked at run time by
    /// [`output_memory`](Self::output_memory)); unchecked code, a call given no pointer.
    fn direct_store(&self, inst: &'f Inst, c: &CustomCall) -> Option<(usize, &'f Inst, Direct)> {
        if !self.may_pass_memory(c) {
            return None;
        }
        let block = super::reduce::holder(&self.f.body, inst)?;
        let at = block.insts.iter().position(|i| std::ptr::eq(i, inst))?;
        for later in &block.insts[at + 1..] {
            let Op::Store {
                ptr,
                value,
                mask,
                hints,
            } = &later.op
            else {
                if super::prefetch::is_pure(&later.op) {
                    continue;
                }
                return None;
            };
            let out = inst.results.iter().position(|r| r == value)?;
            let t = self.ty(*value);
            if t.is_scalar() {
                return None;
            }
            let ok = self.f.uses(*value) == 1
                && !hints.volatile
                && t.dtype() != Some(tritium_dsl::ir::DType::Bool);
            if !ok {
                return None;
            }
            return self.run(*ptr, *mask, &t.shape).map(|d| (out, later, d));
        }
        None
    }

    /// Where a Simd call writes out `o`, whose result `store` stores: the store's own memory
    /// when its lanes are one row-major run there (mask all true, no widened offset
    /// wrapping) that overlaps none of the inputs `read` (where, how many bytes), else a
    /// buffer in scratch. Either starts as `o`'s value. The store then writes only when
    /// the call did not.
    fn output_memory(
        &mut self,
        store: &'f Inst,
        direct: &Direct,
        o: Value,
        read: &[(PointerValue<'ctx>, usize)],
    ) -> Result<PointerValue<'ctx>> {
        let t = self.ty(o).clone();
        let buf = self.alloc_buf(&t)?;
        // The store's pointers and mask are pure, maybe defined after the call.
        let mut added = Vec::new();
        let available = self.make_available(direct.ptr, &mut added)?
            && match direct.mask {
                None => true,
                Some(m) => self.make_available(m, &mut added)?,
            };
        if !available {
            for v in added {
                self.lv.remove(&v);
            }
            self.fill_buf(buf, &t, o)?;
            return Ok(buf);
        }
        let mut ok = self.run_holds(direct)?;
        let first: Vec<IntValue> = t.shape.iter().map(|_| self.i64c(0)).collect();
        let memory = self.lane(direct.ptr, &first)?.into_pointer_value();
        let i64t = self.ctx.i64_type();
        let bytes = (t.numel() * self.elem_size(t.elem)) as u64;
        let lo = self.b.build_ptr_to_int(memory, i64t, "")?;
        let hi = self.b.build_int_add(lo, self.i64c(bytes), "")?;
        for (p, n) in read {
            let p_lo = self.b.build_ptr_to_int(*p, i64t, "")?;
            let p_hi = self.b.build_int_add(p_lo, self.i64c(*n as u64), "")?;
            let before = self.b.build_int_compare(IntPredicate::ULE, hi, p_lo, "")?;
            let after = self.b.build_int_compare(IntPredicate::ULE, p_hi, lo, "")?;
            let apart = self.b.build_or(before, after, "")?;
            ok = self.b.build_and(ok, apart, "")?;
        }
        for v in added {
            self.lv.remove(&v);
        }
        // One fill of whichever memory the C++ writes.
        let out = self
            .b
            .build_select(ok, memory, buf, "out")?
            .into_pointer_value();
        self.fill_buf(out, &t, o)?;
        self.stored_in_place.insert(store as *const Inst, ok);
        Ok(out)
    }

    fn custom_simt(
        &mut self,
        inst: &'f Inst,
        c: &'f CustomCall,
        func: FunctionValue<'ctx>,
    ) -> Result<()> {
        let (shape, out_elems) = self.emit().check_simt_call(c, |v| self.ty(v), func)?;
        let single = out_elems.len() == 1;
        if single && self.lazy.contains(&inst.results[0]) {
            // Fused (see `plan`): lanes are called where they are consumed.
            self.lv.insert(inst.results[0], Lv::Lazy);
            return Ok(());
        }
        let bufs: Vec<PointerValue> = c
            .outs
            .iter()
            .map(|o| {
                let t = self.ty(*o).clone();
                self.alloc_buf(&t)
            })
            .collect::<Result<_>>()?;
        let slots: Vec<PointerValue> = if single {
            vec![]
        } else {
            out_elems
                .iter()
                .map(|e| self.entry_alloca(self.c_ty(*e)))
                .collect::<Result<_>>()?
        };
        self.loop_nest(&shape.clone(), &mut |g, idx: &[IntValue<'ctx>]| {
            let mut args = g.simt_args(c, idx)?;
            for (k, o) in c.outs.iter().enumerate().filter(|_| !single) {
                let x = g.lane(*o, idx)?;
                g.b.build_store(slots[k], g.encode_c(x, out_elems[k])?)?;
                args.push(slots[k].into());
            }
            let ret = g.call(func, &args)?;
            for (k, e) in out_elems.iter().enumerate() {
                let x = match ret {
                    Some(x) => x,
                    None => g.b.build_load(g.c_ty(*e), slots[k], "")?,
                };
                let x = g.decode_c(x, *e)?;
                let p = g.buf_elem(bufs[k], &Type::tile(*e, shape.clone()), idx)?;
                g.b.build_store(p, g.to_storage(x, *e)?)?;
            }
            Ok(())
        })?;
        for (r, buf) in inst.results.iter().zip(bufs) {
            self.bind_result(*r, buf)?;
        }
        Ok(())
    }
}

/// A load or store whose lanes are provably one row-major run starting at lane 0's
/// pointer, given the run-time checks of `Gen::run_holds`.
pub(super) struct Direct {
    pub(super) ptr: Value,
    pub(super) mask: Option<Value>,
    /// The widened offsets to check (all with a known span).
    pub(super) widened: Vec<Widened>,
}
