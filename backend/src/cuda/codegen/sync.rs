//! The target hooks: special registers, barriers, warp shuffles and shared memory. Every
//! NVVM intrinsic the code generator uses is called from this file (and `ex2.approx` in
//! `scalar.rs`, `mma` in `dot.rs`, `ldmatrix` in `ldmatrix.rs`, `wgmma`'s inline PTX in
//! `wgmma.rs`); for the host emulator each hook reads the thread's `EmuThread` words or
//! calls back into the emulator instead.

use super::{Gen, V};
use crate::llvm::{Emitter, Result};
use inkwell::types::{BasicMetadataTypeEnum, BasicType, BasicTypeEnum};
use inkwell::values::{BasicMetadataValueEnum, BasicValueEnum, IntValue, PointerValue};
use inkwell::{AddressSpace, IntPredicate};
use tritium_dsl::ir::{DType, Elem, Type, Value};

/// Where an exchange reads: the source index of a result index (empty: element 0).
pub(super) type IndexMap<'a, 'ctx, G> =
    dyn FnMut(&G, &[IntValue<'ctx>]) -> Result<Vec<IntValue<'ctx>>> + 'a;

/// Words of the emulator's per-thread state (`EmuThread` in `cuda/emulate.rs`).
pub(crate) const EMU_TID: u64 = 0;
pub(crate) const EMU_CTAID: u64 = 1;
pub(crate) const EMU_NCTAID: u64 = 4;
pub(crate) const EMU_SHARED: u64 = 7;
pub(crate) const EMU_BARRIER: u64 = 8;
pub(crate) const EMU_SHUFFLE: u64 = 9;
pub(crate) const EMU_STATE: u64 = 10;
pub(crate) const EMU_MMA: u64 = 11;
/// `device_print`'s hook (`launch::print::print_hook`).
pub(crate) const EMU_PRINT: u64 = 12;
/// `ldmatrix` (see `ldmatrix.rs`).
pub(crate) const EMU_LDMATRIX: u64 = 13;
/// `cp.async`, and its `commit_group` / `wait_group` (see `async_copy.rs`).
pub(crate) const EMU_CP_ASYNC: u64 = 14;
pub(crate) const EMU_CP_ASYNC_GROUP: u64 = 15;
/// `wgmma.mma_async`, and its `wait_group` (see `wgmma.rs`).
pub(crate) const EMU_WGMMA: u64 = 16;
pub(crate) const EMU_WGMMA_WAIT: u64 = 17;
/// `mbarrier` operations and TMA copies (see `tma.rs`).
pub(crate) const EMU_MBARRIER: u64 = 18;
pub(crate) const EMU_TMA: u64 = 19;
pub(crate) const EMU_TMA_STORE: u64 = 20;
/// `stmatrix` (see `ldmatrix.rs`).
pub(crate) const EMU_STMATRIX: u64 = 21;
/// The number of words.
pub(crate) const EMU_WORDS: usize = 22;

impl<'ctx> Gen<'ctx, '_> {
    /// `%tid.x`, `%ctaid.y`, `%nctaid.z`, … as an i32.
    pub(super) fn special_register(&self, name: &str) -> Result<IntValue<'ctx>> {
        if self.emu.is_some() {
            let word = match name {
                "tid.x" => EMU_TID,
                "ctaid.x" => EMU_CTAID,
                "ctaid.y" => EMU_CTAID + 1,
                "ctaid.z" => EMU_CTAID + 2,
                "nctaid.x" => EMU_NCTAID,
                "nctaid.y" => EMU_NCTAID + 1,
                _ => EMU_NCTAID + 2,
            };
            let w = self
                .emu_word(word, self.ctx.i64_type().into())?
                .into_int_value();
            return Ok(self.b.build_int_truncate(w, self.ctx.i32_type(), name)?);
        }
        Ok(self
            .intrinsic(&format!("llvm.nvvm.read.ptx.sreg.{name}"), &[], &[])?
            .into_int_value())
    }

    /// `bar.sync 0`: every thread of the CTA waits here.
    pub(super) fn barrier(&self) -> Result<()> {
        if self.emu.is_some() {
            let ptr = self.ctx.ptr_type(AddressSpace::default());
            let f = self.emu_word(EMU_BARRIER, ptr.into())?.into_pointer_value();
            let state = self.emu_word(EMU_STATE, ptr.into())?;
            let ty = self.ctx.void_type().fn_type(&[ptr.into()], false);
            self.b.build_indirect_call(ty, f, &[state.into()], "")?;
            return Ok(());
        }
        let i = inkwell::intrinsics::Intrinsic::find("llvm.nvvm.barrier0")
            .expect("LLVM 19 has llvm.nvvm.barrier0");
        let decl = i.get_declaration(self.module, &[]).expect("declaration");
        self.b.build_call(decl, &[], "")?;
        Ok(())
    }

    /// `bar.warp.sync` of the whole warp: orders the lanes' shared-memory accesses before
    /// it (a warp collective's included) before those after. The emulator's collectives
    /// end with a barrier of their own.
    pub(super) fn warp_sync(&self) -> Result<()> {
        if self.emu.is_some() {
            return Ok(());
        }
        let i = inkwell::intrinsics::Intrinsic::find("llvm.nvvm.bar.warp.sync")
            .expect("LLVM 19 has llvm.nvvm.bar.warp.sync");
        let decl = i.get_declaration(self.module, &[]).expect("declaration");
        self.b
            .build_call(decl, &[self.i32c(u32::MAX as u64).into()], "")?;
        Ok(())
    }

    /// The emulator's shared memory for this CTA.
    pub(super) fn emulator_shared_memory(&self) -> Result<PointerValue<'ctx>> {
        let ptr = self.ctx.ptr_type(AddressSpace::default());
        Ok(self.emu_word(EMU_SHARED, ptr.into())?.into_pointer_value())
    }

    /// Calls the emulator's hook at word `hook` of `EmuThread` as
    /// `hook(state, tid, args…) -> ret`: every warp collective and asynchronous copy the
    /// emulator executes takes the launch's state and the calling thread first.
    pub(super) fn emulator_hook(
        &self,
        hook: u64,
        args: &[BasicValueEnum<'ctx>],
        ret: Option<BasicTypeEnum<'ctx>>,
    ) -> Result<Option<BasicValueEnum<'ctx>>> {
        let ptr = self.ctx.ptr_type(AddressSpace::default());
        let f = self.emu_word(hook, ptr.into())?.into_pointer_value();
        let state = self.emu_word(EMU_STATE, ptr.into())?;
        let mut all = vec![state, self.tid.into()];
        all.extend_from_slice(args);
        let params: Vec<BasicMetadataTypeEnum<'ctx>> =
            all.iter().map(|a| a.get_type().into()).collect();
        let ty = match ret {
            Some(t) => t.fn_type(&params, false),
            None => self.ctx.void_type().fn_type(&params, false),
        };
        let args: Vec<BasicMetadataValueEnum<'ctx>> = all.iter().map(|a| (*a).into()).collect();
        let call = self.b.build_indirect_call(ty, f, &args, "")?;
        Ok(match call.try_as_basic_value() {
            inkwell::values::ValueKind::Basic(v) => Some(v),
            inkwell::values::ValueKind::Instruction(_) => None,
        })
    }

    /// Word `k` of this thread's `EmuThread`.
    pub(super) fn emu_word(&self, k: u64, ty: BasicTypeEnum<'ctx>) -> Result<BasicValueEnum<'ctx>> {
        let emu = self.emu.expect("emulator state");
        let i64t = self.ctx.i64_type();
        // SAFETY (of the generated code): `EmuThread` has `EMU_WORDS` words.
        let p = unsafe { self.b.build_gep(i64t, emu, &[i64t.const_int(k, false)], "") }?;
        Ok(self.b.build_load(ty, p, "")?)
    }

    /// `shfl.sync.bfly.b32`, or the emulator's shuffle.
    fn shuffle_word(&self, w: IntValue<'ctx>, mask: u32) -> Result<IntValue<'ctx>> {
        let i32t = self.ctx.i32_type();
        if self.emu.is_some() {
            let args = [w.into(), self.i32c(mask as u64).into()];
            let v = self.emulator_hook(EMU_SHUFFLE, &args, Some(i32t.into()))?;
            return Ok(v.expect("the shuffle hook returns i32").into_int_value());
        }
        Ok(self
            .intrinsic(
                "llvm.nvvm.shfl.sync.bfly.i32",
                &[],
                &[
                    i32t.const_all_ones().into(),
                    w.into(),
                    self.i32c(mask as u64).into(),
                    self.i32c(31).into(),
                ],
            )?
            .into_int_value())
    }

    /// The word `w` of lane `src` of this warp (`shfl.sync.idx.b32`; the emulator's
    /// shuffle reads lane `lane ^ mask`, so the mask is this lane's XOR with `src`).
    pub(super) fn shuffle_from(
        &self,
        w: IntValue<'ctx>,
        src: IntValue<'ctx>,
    ) -> Result<IntValue<'ctx>> {
        let i32t = self.ctx.i32_type();
        if self.emu.is_some() {
            let (lane, _) = self.lane_and_warp()?;
            let mask = self.b.build_xor(lane, src, "")?;
            let v = self.emulator_hook(EMU_SHUFFLE, &[w.into(), mask.into()], Some(i32t.into()))?;
            return Ok(v.expect("the shuffle hook returns i32").into_int_value());
        }
        let args = [
            i32t.const_all_ones().into(),
            w.into(),
            src.into(),
            self.i32c(0x1f).into(),
        ];
        Ok(self
            .intrinsic("llvm.nvvm.shfl.sync.idx.i32", &[], &args)?
            .into_int_value())
    }

    /// PTX's `prmt.b32 a, b, sel`: byte `i` of the result is byte `sel`'s nibble `i` of
    /// `{b, a}` (bytes 0–3 `a`'s, 4–7 `b`'s; no sign replication). In the emulator, shifts
    /// of the pair as an i64.
    pub(super) fn byte_permute(
        &self,
        a: IntValue<'ctx>,
        b: IntValue<'ctx>,
        sel: IntValue<'ctx>,
    ) -> Result<IntValue<'ctx>> {
        if self.emu.is_none() {
            let args = [a.into(), b.into(), sel.into()];
            return Ok(self
                .intrinsic("llvm.nvvm.prmt", &[], &args)?
                .into_int_value());
        }
        let (bld, i32t, i64t) = (self.b, self.ctx.i32_type(), self.ctx.i64_type());
        let k64 = |v: u64| i64t.const_int(v, false);
        let pair = bld.build_or(
            bld.build_left_shift(bld.build_int_z_extend(b, i64t, "")?, k64(32), "")?,
            bld.build_int_z_extend(a, i64t, "")?,
            "",
        )?;
        let sel = bld.build_int_z_extend(sel, i64t, "")?;
        let mut out = k64(0);
        for i in 0..4u64 {
            let nibble = bld.build_right_shift(sel, k64(4 * i), false, "")?;
            let at = bld.build_and(nibble, k64(7), "")?;
            let byte =
                bld.build_right_shift(pair, bld.build_int_mul(at, k64(8), "")?, false, "")?;
            let byte = bld.build_and(byte, k64(0xff), "")?;
            out = bld.build_or(out, bld.build_left_shift(byte, k64(8 * i), "")?, "")?;
        }
        Ok(bld.build_int_truncate(out, i32t, "")?)
    }

    /// This thread's lane in its warp and its warp in the CTA.
    pub(super) fn lane_and_warp(&self) -> Result<(IntValue<'ctx>, IntValue<'ctx>)> {
        let lane = self.b.build_and(self.tid, self.i32c(31), "lane")?;
        let warp = self
            .b
            .build_right_shift(self.tid, self.i32c(5), false, "warp")?;
        Ok((lane, warp))
    }

    /// This thread's warp index, known to `ptxas` to be the same in every lane of the warp
    /// (lane 0's, by `shfl.sync.idx`), so that values made from it (a `wgmma` descriptor)
    /// live in uniform registers.
    pub(super) fn uniform_warp(&self) -> Result<IntValue<'ctx>> {
        if let Some(w) = self.warp_uniform {
            return Ok(w);
        }
        let (_, warp) = self.lane_and_warp()?;
        if self.emu.is_some() {
            return Ok(warp);
        }
        self.lane_0s(warp)
    }

    /// Lane 0's `w` (an i32) by `shfl.sync.idx`: `ptxas` knows the result the same in
    /// every lane of the warp.
    fn lane_0s(&self, w: IntValue<'ctx>) -> Result<IntValue<'ctx>> {
        let args = [
            self.i32c(u64::from(u32::MAX)).into(),
            w.into(),
            self.i32c(0).into(),
            self.i32c(0x1f).into(),
        ];
        Ok(self
            .intrinsic("llvm.nvvm.shfl.sync.idx.i32", &[], &args)?
            .into_int_value())
    }

    /// A 64-bit value the same in every lane (a tensor map's address), read back from
    /// lane 0 by `shfl.sync.idx`, so that `ptxas` keeps it in uniform registers (as the
    /// TMA copies take it) rather than forming it again in every loop trip.
    pub(super) fn warp_uniform_u64(&self, v: IntValue<'ctx>) -> Result<IntValue<'ctx>> {
        if self.emu.is_some() {
            return Ok(v);
        }
        let (b, i32t, i64t) = (self.b, self.ctx.i32_type(), self.ctx.i64_type());
        let lo = self.lane_0s(b.build_int_truncate(v, i32t, "")?)?;
        let hi = b.build_right_shift(v, i64t.const_int(32, false), false, "")?;
        let hi = self.lane_0s(b.build_int_truncate(hi, i32t, "")?)?;
        let hi = b.build_left_shift(
            b.build_int_z_extend(hi, i64t, "")?,
            i64t.const_int(32, false),
            "",
        )?;
        Ok(b.build_or(hi, b.build_int_z_extend(lo, i64t, "")?, "")?)
    }

    /// `shfl.sync.bfly` of any compute value: the value of lane `lane ^ mask`.
    pub(super) fn shuffle_xor(
        &self,
        v: BasicValueEnum<'ctx>,
        mask: u32,
    ) -> Result<BasicValueEnum<'ctx>> {
        let (b, i32t) = (self.b, self.ctx.i32_type());
        let shfl = |w: IntValue<'ctx>| self.shuffle_word(w, mask);
        let ty = v.get_type();
        let bits = match ty {
            BasicTypeEnum::FloatType(_) | BasicTypeEnum::IntType(_) => self.target_data_bits(ty),
            _ => 64,
        };
        let int_ty = self.ctx.custom_width_int_type(bits);
        let as_int = if ty.is_float_type() {
            b.build_bit_cast(v, int_ty, "")?.into_int_value()
        } else if ty.is_pointer_type() {
            b.build_ptr_to_int(v.into_pointer_value(), int_ty, "")?
        } else {
            v.into_int_value()
        };
        let result = if bits <= 32 {
            let w = b.build_int_z_extend_or_bit_cast(as_int, i32t, "")?;
            b.build_int_truncate_or_bit_cast(shfl(w)?, int_ty, "")?
        } else {
            let i64t = self.ctx.i64_type();
            let lo = b.build_int_truncate(as_int, i32t, "")?;
            let hi = b.build_right_shift(as_int, i64t.const_int(32, false), false, "")?;
            let hi = b.build_int_truncate(hi, i32t, "")?;
            let (lo, hi) = (shfl(lo)?, shfl(hi)?);
            let lo = b.build_int_z_extend(lo, i64t, "")?;
            let hi = b.build_int_z_extend(hi, i64t, "")?;
            let hi = b.build_left_shift(hi, i64t.const_int(32, false), "")?;
            b.build_or(lo, hi, "")?
        };
        if ty.is_float_type() {
            Ok(b.build_bit_cast(result, ty, "")?)
        } else if ty.is_pointer_type() {
            Ok(b.build_int_to_ptr(result, ty.into_pointer_type(), "")?
                .into())
        } else {
            Ok(result.into())
        }
    }

    fn target_data_bits(&self, ty: BasicTypeEnum<'ctx>) -> u32 {
        match ty {
            BasicTypeEnum::IntType(t) => t.get_bit_width(),
            BasicTypeEnum::FloatType(t) if t == self.ctx.f64_type() => 64,
            BasicTypeEnum::FloatType(t) if t == self.ctx.f16_type() => 16,
            _ => 32,
        }
    }

    /// The type an element of `elem` has in shared memory (bools as bytes).
    pub(super) fn shared_ty(&self, elem: Elem) -> BasicTypeEnum<'ctx> {
        match elem {
            Elem::Scalar(DType::Bool) => self.ctx.i8_type().into(),
            e => self.elem_compute_ty(e),
        }
    }

    /// Bytes per element of `elem` in shared memory.
    pub(super) fn shared_size(&self, elem: Elem) -> usize {
        match elem {
            Elem::Ptr(_) => 8,
            Elem::Scalar(d) if d.is_narrow_float() => 4,
            Elem::Scalar(d) => d.size_bytes(),
        }
    }

    /// Reserves shared memory up to byte `end` (rounded up to 16 bytes).
    pub(super) fn reserve_shared(&mut self, end: usize) {
        self.shared_bytes = self.shared_bytes.max(end.div_ceil(16) * 16);
    }

    /// Where an op's scratch arrays start (16-byte aligned; [`Self::shared_elem`]'s offsets
    /// count from here): above the tiles kept across what is being generated
    /// (`shared_floor`) and, in a pipelined loop's body, above its stages and their
    /// barriers, whose copies may be in flight across the whole body. Every scratch user
    /// (reductions, scans, layout conversions, the FMA `dot`, custom ops, a scalar
    /// atomic's broadcast) ends with a barrier, so that the next may reuse the bytes.
    pub(super) fn scratch_floor(&self) -> usize {
        let top = match &self.pipelined {
            Some(p) => match &p.tma {
                Some(t) => t.barriers + p.stages * super::tma::MBARRIER_BYTES,
                None => self.shared_floor + p.stages * p.stage_bytes,
            },
            None => self.shared_floor,
        };
        top.next_multiple_of(16)
    }

    /// Reserves scratch bytes `0..end` (from [`Self::scratch_floor`]).
    pub(super) fn reserve_scratch(&mut self, end: usize) {
        self.reserve_shared(self.scratch_floor() + end);
    }

    /// The address of element `index` of a scratch array of `elem` at byte `offset` from
    /// [`Self::scratch_floor`].
    pub(super) fn shared_elem(
        &self,
        offset: usize,
        elem: Elem,
        index: IntValue<'ctx>,
    ) -> Result<PointerValue<'ctx>> {
        let base = self.shared_byte(self.i32c((self.scratch_floor() + offset) as u64))?;
        // SAFETY (of the generated code): `reserve_shared` covers every array we index.
        Ok(unsafe { (self.b).build_gep(self.shared_ty(elem), base, &[index], "sm") }?)
    }

    /// The address of byte `byte` of shared memory (a tile's swizzled element, …).
    pub(super) fn shared_byte(&self, byte: IntValue<'ctx>) -> Result<PointerValue<'ctx>> {
        // SAFETY (of the generated code): `reserve_shared` covers every tile we address.
        Ok(unsafe { (self.b).build_gep(self.ctx.i8_type(), self.smem, &[byte], "sm") }?)
    }

    /// `bytes` past shared-memory address `p` (a constant stays an address offset,
    /// `[r + 0x800]`, where an integer sum could become an `or`).
    pub(super) fn shared_offset(
        &self,
        p: PointerValue<'ctx>,
        bytes: IntValue<'ctx>,
    ) -> Result<PointerValue<'ctx>> {
        // SAFETY (of the generated code): an address, not an access (`shared_byte`'s).
        Ok(unsafe { (self.b).build_gep(self.ctx.i8_type(), p, &[bytes], "sm") }?)
    }

    /// Stores a compute value into shared memory.
    pub(super) fn shared_store(
        &self,
        p: PointerValue<'ctx>,
        v: BasicValueEnum<'ctx>,
        elem: Elem,
    ) -> Result<()> {
        let v = match elem {
            Elem::Scalar(DType::Bool) => self
                .b
                .build_int_z_extend(v.into_int_value(), self.ctx.i8_type(), "")?
                .into(),
            _ => v,
        };
        self.b.build_store(p, v)?;
        Ok(())
    }

    /// Loads a compute value from shared memory.
    pub(super) fn shared_load(
        &self,
        p: PointerValue<'ctx>,
        elem: Elem,
    ) -> Result<BasicValueEnum<'ctx>> {
        let raw = self.b.build_load(self.shared_ty(elem), p, "")?;
        match elem {
            Elem::Scalar(DType::Bool) => Ok(self
                .b
                .build_int_compare(
                    IntPredicate::NE,
                    raw.into_int_value(),
                    self.ctx.i8_type().const_zero(),
                    "",
                )?
                .into()),
            _ => Ok(raw),
        }
    }

    /// Writes every valid slot of tile `x` to shared memory at byte `offset`, row-major.
    pub(super) fn spill_to_shared(&mut self, x: Value, offset: usize) -> Result<()> {
        let ty: Type = self.ty(x).clone();
        let numel = ty.numel();
        self.reserve_scratch(offset + numel * self.shared_size(ty.elem));
        let slots = self.tile_slots(x, numel)?;
        for (j, s) in slots.into_iter().enumerate() {
            let ok = self.valid(numel, j)?;
            self.when(ok, &mut |g| {
                let lin = g.lin(numel, j)?;
                let p = g.shared_elem(offset, ty.elem, lin)?;
                g.shared_store(p, s, ty.elem)
            })?;
        }
        Ok(())
    }

    /// Defines `r` from `x` through shared memory: element `idx` of `r` is element
    /// `map(idx)` of `x` (an empty map reads element 0, for scalars).
    pub(super) fn exchange(
        &mut self,
        r: Value,
        x: Value,
        map: &mut IndexMap<'_, 'ctx, Self>,
    ) -> Result<()> {
        let rt = self.ty(r).clone();
        let slots = self.exchange_slots(&rt, x, map)?;
        self.define(r, slots);
        Ok(())
    }

    /// This thread's slots of a tile of type `rt` whose element `idx` is element
    /// `map(idx)` of `x`, moved through shared memory.
    pub(super) fn exchange_slots(
        &mut self,
        rt: &Type,
        x: Value,
        map: &mut IndexMap<'_, 'ctx, Self>,
    ) -> Result<Vec<BasicValueEnum<'ctx>>> {
        let xt = self.ty(x).clone();
        let numel = rt.numel();
        if let V::Scalar(s) = self.val(x)? {
            return Ok(vec![s; self.slots(numel)]);
        }
        self.spill_to_shared(x, 0)?;
        self.barrier()?;
        let slots = (0..self.slots(numel))
            .map(|j| {
                let lin = self.clamped_lin(numel, j)?;
                let idx = self.unravel(&rt.shape, lin)?;
                let src = map(self, &idx)?;
                let src_lin = if src.is_empty() {
                    self.i32c(0)
                } else {
                    self.ravel(&xt.shape, &src)?
                };
                let p = self.shared_elem(0, xt.elem, src_lin)?;
                Ok(self.shared_load(p, xt.elem))
            })
            .collect::<Result<_>>()?;
        self.barrier()?;
        slots
    }
}
