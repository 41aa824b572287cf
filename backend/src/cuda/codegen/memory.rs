//! Loads, stores and atomics through global pointers.
//!
//! Each chunk of a thread's slots (consecutive elements, see the layout) is accessed with
//! one vector instruction (`ld.global.v4.f32`, …) when, at run time, its pointers are
//! consecutive, the first is aligned to the vector's size and every element is valid and
//! unmasked; otherwise element by element, each guarded by its mask. A masked-off or
//! invalid element never touches memory. Scalar stores and atomics are done by thread 0.
//!
//! In checked mode (see `launch/checked.rs`) every accessed slot is first compared with
//! the byte ranges of the parameters its pointer derives from; a slot outside them is
//! dropped from the access (a load gives `other`, an atomic 0) and the thread's first such
//! slot is recorded as a fault. The vector path needs every element accessed, so a chunk
//! with any out-of-bounds element takes the checked element-by-element path.
//!
//! A program's memory ops keep their order across threads: `bar.sync` comes before every
//! tile store and atomic (earlier loads are done) and after every store and atomic (later
//! loads see them) — except around a top-level store to buffers no other memory op of
//! the kernel touches (Rust's borrows keep a written buffer from aliasing the others).

use super::Gen;
use crate::launch::checked::{FAULT_WORDS, PARAM_WORDS};
use crate::llvm::{CodegenError, Emitter, Positioned, Result};
use inkwell::types::BasicTypeEnum;
use inkwell::values::{
    AsValueRef, BasicValue, BasicValueEnum, IntValue, PointerValue, VectorValue,
};
use inkwell::{AtomicOrdering, IntPredicate};
use std::collections::{HashMap, HashSet};
use tritium_dsl::ir::{AtomicOp, Const, DType, Elem, Function, HintKind, Inst, Op, Value};

/// Checked mode's state. The check buffer the kernel gets holds the fault record
/// (`FAULT_WORDS` u64) followed by `[lo, hi]` (u64 byte addresses) per parameter.
pub(super) struct Checked<'ctx> {
    /// The fault record (the check buffer's start).
    pub(super) record: PointerValue<'ctx>,
    /// Each pointer parameter's `[lo, hi, view]`, loaded once in the entry block.
    ranges: Vec<Option<[IntValue<'ctx>; 3]>>,
    /// The parameters each pointer value may derive from (`Function::pointer_roots`).
    roots: HashMap<Value, Vec<usize>>,
    /// Pointers made from integers (`Function::foreign_pointers`), checked against the
    /// list of every buffer of the launch, which follows the ranges.
    foreign: std::collections::HashSet<Value>,
    /// That list (`launch::checked::buffer_list`).
    buffer_list: PointerValue<'ctx>,
    /// Each memory op and assert's index in `fault_sites`, which the fault reports.
    pub(super) sites: HashMap<*const Inst, u32>,
    /// Checked mode: every access and `device_assert` is checked.
    full: bool,
    /// Else the checked sites (those the launch's bounds proof leaves).
    listed: HashSet<u32>,
    /// The results of the checked loads: never copied by `cp.async` or pipelined.
    loads: HashSet<Value>,
    /// The pointers the checked accesses' pointers may derive from: their `addptr`s give
    /// 2^63 where an offset leaves i64, so that no address wraps back onto a buffer.
    feeding: HashSet<Value>,
}

impl<'ctx> Gen<'ctx, '_> {
    pub(super) fn load(&mut self, inst: &Inst) -> Result<()> {
        let Op::Load {
            ptr,
            mask,
            other,
            hints,
        } = &inst.op
        else {
            unreachable!()
        };
        let hints = *hints;
        let r = inst.results[0];
        let rt = self.ty(r).clone();
        let d = rt.dtype().expect("loads give numbers");
        let numel = rt.numel();
        let ptrs = self.tile_slots(*ptr, numel)?;
        let masks = mask.map(|m| self.tile_slots(m, numel)).transpose()?;
        let zero = self.const_value(Const::Int(0), d);
        let others = match other {
            Some(o) => self.tile_slots(*o, numel)?,
            None => vec![zero; ptrs.len()],
        };
        let elem = Elem::Scalar(d);
        let st = self.storage_ty(d);
        let load_one = |g: &mut Self, p: BasicValueEnum<'ctx>| -> Result<_> {
            let raw = g.global_load(st, p.into_pointer_value(), hints)?;
            g.decode_storage(raw, elem)
        };
        if rt.is_scalar() {
            let m = masks.map(|m| m[0].into_int_value());
            let m = self.checked_conds(inst, *ptr, &ptrs, vec![m], d.size_bytes())?[0];
            let v = self.when_value(m, others[0], &mut |g| load_one(g, ptrs[0]))?;
            self.define(r, vec![v]);
            return Ok(());
        }
        let conds = self.access_conds(numel, masks.as_deref())?;
        let conds = self.checked_conds(inst, *ptr, &ptrs, conds, d.size_bytes())?;
        let c = self.vector_chunk(numel, d);
        let consecutive = self.promised_consecutive(*ptr, c);
        let mut out = Vec::with_capacity(ptrs.len());
        for j0 in (0..ptrs.len()).step_by(c) {
            if c == 1 {
                let v = self.when_value(conds[j0], others[j0], &mut |g| load_one(g, ptrs[j0]))?;
                out.push(v);
                continue;
            }
            // Both paths give the chunk as one vector in storage form: a vector load whose
            // only user is a phi stays one `ld.global.v*` (it is not split into scalars).
            let fast =
                self.chunk_is_whole(&ptrs[j0..j0 + c], &conds[j0..j0 + c], d, consecutive)?;
            let ct = self.chunk_type(st, c);
            let chunk = self.two_paths(
                fast,
                &mut |g| {
                    let p = ptrs[j0].into_pointer_value();
                    let v = g.global_load(ct, p, hints)?;
                    set_align(v, (c * d.size_bytes()) as u32);
                    Ok(vec![v])
                },
                &mut |g| {
                    let mut elems = Vec::with_capacity(c);
                    for j in j0..j0 + c {
                        let other = g.to_storage(others[j], elem)?;
                        elems.push(g.when_value(conds[j], other, &mut |g| {
                            g.global_load(st, ptrs[j].into_pointer_value(), hints)
                        })?);
                    }
                    Ok(vec![g.pack_chunk(ct, &elems)?])
                },
            )?;
            for e in self.unpack_chunk(chunk[0], c)? {
                out.push(self.decode_storage(e, elem)?);
            }
        }
        self.define(r, out);
        Ok(())
    }

    pub(super) fn store(&mut self, inst: &Inst) -> Result<()> {
        let Op::Store {
            ptr,
            value,
            mask,
            hints,
        } = &inst.op
        else {
            unreachable!()
        };
        let hints = *hints;
        let ptr_value = *ptr;
        let pt = self.ty(*ptr).clone();
        let d = pt.elem.pointee().expect("stores need pointers");
        let elem = Elem::Scalar(d);
        let numel = pt.numel();
        let ptrs = self.tile_slots(*ptr, numel)?;
        let values = self.tile_slots(*value, numel)?;
        let masks = mask.map(|m| self.tile_slots(m, numel)).transpose()?;
        let store_one = |g: &mut Self, j: usize| -> Result<_> {
            let s = g.to_storage(values[j], elem)?;
            g.global_store(ptrs[j].into_pointer_value(), s, hints, None)?;
            Ok(())
        };
        // A store no other memory op can see needs no barrier (see `lone_stores`).
        let ordered = !self.lone_stores.contains(&(inst as *const Inst as usize));
        // Earlier loads of other threads of the program, which may read what this store
        // overwrites, are done (a scalar load runs in every thread; the fuzzer found a
        // thread reading the value thread 0 had just stored).
        if ordered {
            self.barrier()?;
        }
        if pt.is_scalar() {
            let first = self.is_thread_zero()?;
            let cond = match &masks {
                Some(m) => self.b.build_and(first, m[0].into_int_value(), "")?,
                None => first,
            };
            let cond =
                self.checked_conds(inst, ptr_value, &ptrs, vec![Some(cond)], d.size_bytes())?[0];
            self.when(cond, &mut |g| store_one(g, 0))?;
            // Later loads by other threads of the program see the store.
            if ordered {
                self.barrier()?;
            }
            return Ok(());
        }
        let conds = self.access_conds(numel, masks.as_deref())?;
        let conds = self.checked_conds(inst, ptr_value, &ptrs, conds, d.size_bytes())?;
        let c = self.vector_chunk(numel, d);
        let consecutive = self.promised_consecutive(ptr_value, c);
        for j0 in (0..ptrs.len()).step_by(c) {
            let range = j0..j0 + c;
            let scalar_path = &mut |g: &mut Self| -> Result<Vec<BasicValueEnum<'ctx>>> {
                for j in range.clone() {
                    g.when(conds[j], &mut |g| store_one(g, j))?;
                }
                Ok(vec![])
            };
            if c == 1 {
                scalar_path(self)?;
                continue;
            }
            let fast =
                self.chunk_is_whole(&ptrs[range.clone()], &conds[range.clone()], d, consecutive)?;
            let ct = self.chunk_type(self.storage_ty(d), c);
            self.two_paths(
                fast,
                &mut |g| {
                    let elems = (j0..j0 + c)
                        .map(|j| g.to_storage(values[j], elem))
                        .collect::<Result<Vec<_>>>()?;
                    let v = g.pack_chunk(ct, &elems)?;
                    let align = (c * d.size_bytes()) as u32;
                    g.global_store(ptrs[j0].into_pointer_value(), v, hints, Some(align))?;
                    Ok(vec![])
                },
                scalar_path,
            )?;
        }
        // Later loads by other threads of the program see these stores.
        if ordered {
            self.barrier()?;
        }
        Ok(())
    }

    pub(super) fn atomic(&mut self, inst: &Inst) -> Result<()> {
        let r = inst.results[0];
        let rt = self.ty(r).clone();
        let d = rt.dtype().expect("atomics give numbers");
        let (ptr, mask) = match &inst.op {
            Op::Atomic { ptr, mask, .. } => (*ptr, *mask),
            Op::AtomicCas { ptr, .. } => (ptr.to_owned(), None),
            _ => unreachable!(),
        };
        if d.fp8_format().is_some() || d == DType::Bool {
            return Err(CodegenError::unsupported(format!(
                "atomics on {d} are not supported on CUDA"
            )));
        }
        let numel = rt.numel();
        let ptrs = self.tile_slots(ptr, numel)?;
        let masks = mask.map(|m| self.tile_slots(m, numel)).transpose()?;
        let (a, b) = match &inst.op {
            Op::Atomic { value, .. } => (self.tile_slots(*value, numel)?, None),
            Op::AtomicCas { cmp, value, .. } => (
                self.tile_slots(*cmp, numel)?,
                Some(self.tile_slots(*value, numel)?),
            ),
            _ => unreachable!(),
        };
        let zero = self.const_value(Const::Int(0), d);
        let one = |g: &mut Self, j: usize| -> Result<BasicValueEnum<'ctx>> {
            let p = ptrs[j].into_pointer_value();
            Ok(match &inst.op {
                Op::Atomic { op, .. } => g.rmw(*op, d, p, a[j])?,
                _ => {
                    let seq = AtomicOrdering::SequentiallyConsistent;
                    let new = b.as_ref().expect("cas value")[j].into_int_value();
                    let r = g.b.build_cmpxchg(p, a[j].into_int_value(), new, seq, seq)?;
                    g.b.build_extract_value(r, 0, "")?
                }
            })
        };
        // Memory ops of every thread before the atomic happen before it.
        self.barrier()?;
        if rt.is_scalar() {
            // Thread 0 does it; the old value reaches every thread through shared memory.
            let first = self.is_thread_zero()?;
            let cond = match &masks {
                Some(m) => self.b.build_and(first, m[0].into_int_value(), "")?,
                None => first,
            };
            let cond = self.checked_conds(inst, ptr, &ptrs, vec![Some(cond)], d.size_bytes())?[0];
            let elem = Elem::Scalar(d);
            self.reserve_scratch(8);
            self.when(Some(first), &mut |g| {
                let old = g.when_value(cond, zero, &mut |g| one(g, 0))?;
                let p = g.shared_elem(0, elem, g.i32c(0))?;
                g.shared_store(p, old, elem)
            })?;
            self.barrier()?;
            let p = self.shared_elem(0, elem, self.i32c(0))?;
            let old = self.shared_load(p, elem)?;
            self.barrier()?;
            self.define(r, vec![old]);
            return Ok(());
        }
        let conds = self.access_conds(numel, masks.as_deref())?;
        let conds = self.checked_conds(inst, ptr, &ptrs, conds, d.size_bytes())?;
        let olds = (0..ptrs.len())
            .map(|j| self.when_value(conds[j], zero, &mut |g| one(g, j)))
            .collect::<Result<_>>()?;
        self.barrier()?;
        self.define(r, olds);
        Ok(())
    }

    /// `atomicrmw`: integer ops, and for f16, f32 and f64 `fadd`, for f32 and f64 `xchg`;
    /// float max/min, bf16 add and 16-bit exchanges are a compare-exchange loop shared with
    /// the CPU.
    fn rmw(
        &mut self,
        op: AtomicOp,
        d: DType,
        p: PointerValue<'ctx>,
        v: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        let bl = self.b;
        if !d.is_float() {
            return self.emit().int_atomic_rmw(op, d, p, v);
        }
        // `atomicrmw fmax` is maxnum, which leaves max(+0, -0) open. bf16 add is native
        // on sm_90 only (`atom.add.noftz.bf16`), and PTX has no 16-bit `atom.exch`, so
        // those are loops on the 16 bits (NVPTX widens a 16-bit compare-exchange itself).
        let looped = match op {
            AtomicOp::Max | AtomicOp::Min => true,
            AtomicOp::Add => d == DType::BF16,
            _ => d == DType::F16 || d == DType::BF16,
        };
        if looped {
            return self.emit().float_atomic_cas(op, d, p, v);
        }
        // Float add and exchange: `atomicrmw fadd/xchg` (inkwell's builder takes integers
        // only). NVPTX selects `atom.global.add.f32`/`.f64`, `atom.global.add.noftz.f16`
        // (or `red.` when the old value is unused); the host expands them for the emulator.
        // An f16 operand goes as `half`, rounded as a store rounds it.
        use llvm_sys::LLVMAtomicRMWBinOp as R;
        let rop = match op {
            AtomicOp::Add => R::LLVMAtomicRMWBinOpFAdd,
            _ => R::LLVMAtomicRMWBinOpXchg,
        };
        let half = d == DType::F16;
        let operand = if half {
            let bits = self.to_storage(v, Elem::Scalar(d))?;
            bl.build_bit_cast(bits, self.ctx.f16_type(), "")?
        } else {
            v
        };
        // SAFETY: the builder is positioned in a function; `p` points to a float of
        // `operand`'s type in global memory, and LLVM 19 accepts these ops on float operands.
        let old = unsafe {
            let r = llvm_sys::core::LLVMBuildAtomicRMW(
                bl.as_mut_ptr(),
                rop,
                p.as_value_ref(),
                operand.as_value_ref(),
                llvm_sys::LLVMAtomicOrdering::LLVMAtomicOrderingSequentiallyConsistent,
                0,
            );
            BasicValueEnum::new(r)
        };
        if half {
            let bits = bl.build_bit_cast(old, self.ctx.i16_type(), "")?;
            return self.decode_storage(bits, Elem::Scalar(d));
        }
        Ok(old)
    }

    /// Checked mode's state for the check buffer `buf`: loads every pointer parameter's
    /// range (here, in the entry block, so that it is read once per thread).
    pub(super) fn checked_state(
        &self,
        buf: PointerValue<'ctx>,
        full: bool,
        listed: &[u32],
    ) -> Result<Checked<'ctx>> {
        let (b, i64t) = (self.b, self.ctx.i64_type());
        let word = |k: usize| -> Result<_> {
            // SAFETY (of the generated code): the check buffer holds the fault record and
            // the check words (`launch::checked::CheckWords`).
            let p = unsafe { b.build_gep(i64t, buf, &[i64t.const_int(k as u64, false)], "") }?;
            Ok(b.build_load(i64t, p, "range")?.into_int_value())
        };
        let ranges = (self.f.params.iter().enumerate())
            .map(|(i, p)| {
                let is_ptr = self.f.ty(p.value).elem.pointee().is_some();
                let at = FAULT_WORDS + PARAM_WORDS * i;
                Ok(if is_ptr {
                    Some([word(at)?, word(at + 1)?, word(at + 2)?])
                } else {
                    None
                })
            })
            .collect::<Result<_>>()?;
        let words = FAULT_WORDS + PARAM_WORDS * self.f.params.len();
        let at = i64t.const_int(words as u64, false);
        // SAFETY (of the generated code): read only by kernels with pointers made from
        // integers, whose launcher appends the list.
        let buffer_list = unsafe { b.build_gep(i64t, buf, &[at], "buffers") }?;
        let listed: HashSet<u32> = listed.iter().copied().collect();
        let (pointers, loads) = self.f.site_accesses(&listed);
        Ok(Checked {
            record: buf,
            ranges,
            roots: self.f.pointer_roots(),
            foreign: self.f.foreign_pointers(),
            buffer_list,
            sites: self.f.fault_site_ids(),
            full,
            listed,
            loads,
            feeding: self.f.pointer_sources(&pointers),
        })
    }

    /// Whether memory op or assert `inst` is checked.
    pub(super) fn checks(&self, inst: &Inst) -> bool {
        self.check.as_ref().is_some_and(|c| {
            c.full || (c.sites.get(&(inst as *const Inst))).is_some_and(|s| c.listed.contains(s))
        })
    }

    /// Whether `v` is the result of a checked load.
    pub(super) fn checked_load(&self, v: Value) -> bool {
        self.check
            .as_ref()
            .is_some_and(|c| c.full || c.loads.contains(&v))
    }

    /// Whether pointer `v` may be what a checked access's pointer derives from.
    pub(super) fn feeds_checked(&self, v: Value) -> bool {
        self.check
            .as_ref()
            .is_some_and(|c| c.full || c.feeding.contains(&v))
    }

    /// Whether some access in `body` is checked.
    pub(super) fn checks_in(&self, body: &tritium_dsl::ir::Block) -> bool {
        (body.insts.iter())
            .any(|i| self.checks(i) || i.op.regions().iter().any(|r| self.checks_in(r)))
    }

    /// Checked mode (every access and `device_assert` checked).
    pub(super) fn checked_mode(&self) -> bool {
        self.check.as_ref().is_some_and(|c| c.full)
    }

    /// Checked mode: `conds` (per slot, whether it is accessed; `None`: always) narrowed
    /// to the slots whose `size` bytes at `ptrs[j]` lie in a buffer `ptr` derives from.
    /// The first accessed slot outside them (in slot order) is recorded as a fault of
    /// `inst`. Outside checked mode, `conds` unchanged.
    fn checked_conds(
        &mut self,
        inst: &Inst,
        ptr: Value,
        ptrs: &[BasicValueEnum<'ctx>],
        conds: Vec<Option<IntValue<'ctx>>>,
        size: usize,
    ) -> Result<Vec<Option<IntValue<'ctx>>>> {
        let Some(check) = self.check.as_ref().filter(|_| self.checks(inst)) else {
            return Ok(conds);
        };
        let (b, i64t) = (self.b, self.ctx.i64_type());
        let all: Vec<usize> = (0..self.f.params.len()).collect();
        let ranges: Vec<_> = (check.roots.get(&ptr).unwrap_or(&all).iter())
            .filter_map(|r| check.ranges[*r])
            .collect();
        let record = check.record;
        let Some(site) = check.sites.get(&(inst as *const Inst)).copied() else {
            return Err(CodegenError::internal(
                "the memory op has no checked-mode site",
            ));
        };
        let addrs: Vec<IntValue<'ctx>> = (ptrs.iter())
            .map(|p| b.build_ptr_to_int(p.into_pointer_value(), i64t, "addr"))
            .collect::<Result<_, _>>()?;
        let (foreign, list) = (check.foreign.contains(&ptr), check.buffer_list);
        let write = !matches!(inst.op, Op::Load { .. });
        let oks: Vec<IntValue<'ctx>> = (addrs.iter())
            .map(|a| {
                if foreign {
                    return self.emit().in_any_buffer(list, *a, size, write);
                }
                let mut ok = self.ctx.bool_type().const_zero();
                for fields in &ranges {
                    let inside = self.emit().in_buffer(*a, size, *fields, record)?;
                    ok = b.build_or(ok, inside, "")?;
                }
                Ok(ok)
            })
            .collect::<Result<_>>()?;
        let mut any = self.ctx.bool_type().const_zero();
        let mut first = i64t.const_zero();
        for j in (0..ptrs.len()).rev() {
            let out = b.build_not(oks[j], "")?;
            let bad = match conds[j] {
                Some(c) => b.build_and(c, out, "")?,
                None => out,
            };
            first = (b.build_select(bad, addrs[j], first, "")?).into_int_value();
            any = b.build_or(any, bad, "")?;
        }
        self.when(Some(any), &mut |g| {
            g.emit().record_fault(g.func, record, site, first, g.pids)
        })?;
        (conds.into_iter().zip(oks))
            .map(|(c, ok)| {
                Ok(Some(match c {
                    Some(c) => b.build_and(c, ok, "")?,
                    None => ok,
                }))
            })
            .collect()
    }

    /// A checked builtin call: i1 "its whole extent lies inside a buffer its pointer may
    /// point into" (the same on every thread), thread 0 recording a fault where it does
    /// not; `None` for a call that is not checked.
    pub(super) fn builtin_extent_ok(
        &mut self,
        inst: &Inst,
        c: &tritium_dsl::ir::CustomCall,
    ) -> Result<Option<IntValue<'ctx>>> {
        let f = self.f;
        let (Some(check), Some(access)) = (
            self.check.as_ref().filter(|_| self.checks(inst)),
            c.builtin_access(|v| f.ty(v).shape.clone()),
        ) else {
            return Ok(None);
        };
        let (b, i64t) = (self.b, self.ctx.i64_type());
        let all: Vec<usize> = (0..f.params.len()).collect();
        let ranges: Vec<_> = (check.roots.get(&access.ptr).unwrap_or(&all).iter())
            .filter_map(|r| check.ranges[*r])
            .collect();
        let (record, list) = (check.record, check.buffer_list);
        let foreign = check.foreign.contains(&access.ptr);
        let Some(site) = check.sites.get(&(inst as *const Inst)).copied() else {
            return Err(CodegenError::internal(
                "the builtin has no checked-mode site",
            ));
        };
        let size = (f.ty(access.ptr).elem.pointee())
            .ok_or_else(|| CodegenError::internal("a builtin's pointer is not a pointer"))?
            .size_bytes();
        let p = self.scalar(access.ptr)?.into_pointer_value();
        let mut values = HashMap::new();
        for &v in &c.ins[1..] {
            if f.ty(v).is_scalar() {
                values.insert(v, self.scalar(v)?.into_int_value());
            }
        }
        let value = |v: Value| {
            (values.get(&v).copied())
                .ok_or_else(|| CodegenError::internal("a builtin's extent is not a scalar"))
        };
        let (start, len) = self.emit().builtin_extent(p, &access.extent, value, size)?;
        let one = i64t.const_int(size as u64, false);
        let inside = |len: IntValue<'ctx>| -> Result<IntValue<'ctx>> {
            if foreign {
                return (self.emit()).in_any_buffer_extent(list, start, len, size, access.write);
            }
            let mut ok = self.ctx.bool_type().const_zero();
            for fields in &ranges {
                let inside = self
                    .emit()
                    .in_buffer_extent(start, len, size, *fields, record)?;
                ok = b.build_or(ok, inside, "")?;
            }
            Ok(ok)
        };
        let none = b.build_int_compare(IntPredicate::EQ, len, i64t.const_zero(), "")?;
        let ok = b.build_or(none, inside(len)?, "")?;
        let at = (self.emit()).extent_fault_address(start, len, size, inside(one)?)?;
        let bad = b.build_and(b.build_not(ok, "")?, self.is_thread_zero()?, "")?;
        self.when(Some(bad), &mut |g| {
            g.emit().record_fault(g.func, record, site, at, g.pids)
        })?;
        Ok(Some(ok))
    }

    /// `tid == 0`.
    pub(super) fn is_thread_zero(&self) -> Result<IntValue<'ctx>> {
        Ok(self
            .b
            .build_int_compare(IntPredicate::EQ, self.tid, self.i32c(0), "first")?)
    }

    /// Per slot: valid and unmasked (`None`: always).
    fn access_conds(
        &self,
        numel: usize,
        masks: Option<&[BasicValueEnum<'ctx>]>,
    ) -> Result<Vec<Option<IntValue<'ctx>>>> {
        (0..self.slots(numel))
            .map(|j| {
                let valid = self.valid(numel, j)?;
                let m = masks.map(|m| m[j].into_int_value());
                Ok(match (valid, m) {
                    (Some(a), Some(b)) => Some(self.b.build_and(a, b, "")?),
                    (a, b) => a.or(b),
                })
            })
            .collect()
    }

    /// Elements per vector access: the layout's chunk, at most 16 bytes.
    fn vector_chunk(&self, numel: usize, d: DType) -> usize {
        let mut c = self.chunk(numel);
        while c > 1 && c * d.size_bytes() > 16 {
            c /= 2;
        }
        if d == DType::Bool {
            1
        } else {
            c
        }
    }

    /// True when the program promises (Triton's `max_contiguous` on the offsets of
    /// `base + offsets`, one base for every lane) that every `chunk` consecutive elements
    /// of `ptr`'s last dim starting at a multiple of `chunk` are consecutive addresses.
    fn promised_consecutive(&self, ptr: Value, chunk: usize) -> bool {
        let last = self.ty(ptr).shape.last().copied().unwrap_or(1);
        let Some(Op::AddPtr(base, offsets)) = self.defs.get(&ptr).map(|i| &i.op) else {
            return false;
        };
        let uniform = self.ty(*base).is_scalar()
            || matches!(self.defs.get(base).map(|i| &i.op), Some(Op::Splat(_)));
        let mut v = *offsets;
        let mut run = 1;
        while let Some(Op::Hint { x, kind, values }) = self.defs.get(&v).map(|i| &i.op) {
            if *kind == HintKind::MaxContiguous {
                run = run.max(values.last().copied().unwrap_or(1) as usize);
            }
            v = *x;
        }
        uniform && last % chunk == 0 && run % chunk == 0
    }

    /// True (at run time) when a chunk can be one vector access: every element accessed,
    /// pointers consecutive (tested unless `consecutive` is promised), the first aligned to
    /// the whole chunk.
    fn chunk_is_whole(
        &self,
        ptrs: &[BasicValueEnum<'ctx>],
        conds: &[Option<IntValue<'ctx>>],
        d: DType,
        consecutive: bool,
    ) -> Result<IntValue<'ctx>> {
        let (b, i64t) = (self.b, self.ctx.i64_type());
        let size = d.size_bytes() as u64;
        let addr = |p: BasicValueEnum<'ctx>| -> Result<_> {
            Ok(b.build_ptr_to_int(p.into_pointer_value(), i64t, "")?)
        };
        let first = addr(ptrs[0])?;
        let bytes = size * ptrs.len() as u64;
        let low = b.build_and(first, i64t.const_int(bytes - 1, false), "")?;
        let mut ok = b.build_int_compare(IntPredicate::EQ, low, i64t.const_zero(), "aligned")?;
        for (k, p) in ptrs.iter().enumerate().skip(1).filter(|_| !consecutive) {
            let want = b.build_int_add(first, i64t.const_int(k as u64 * size, false), "")?;
            let same = b.build_int_compare(IntPredicate::EQ, addr(*p)?, want, "")?;
            ok = b.build_and(ok, same, "")?;
        }
        for c in conds.iter().flatten() {
            ok = b.build_and(ok, *c, "")?;
        }
        Ok(ok)
    }

    /// The type a chunk of `c` storage elements `st` is accessed as: a vector, but for two
    /// bytes an `i16` ([`crate::llvm::Emit::byte_pair`]: a `<2 x i8>` phi of the two
    /// paths went through local memory, `st.v2.u8` then `ld.u16`, which `scripts/dev
    /// ptx-sweep` found in fp8 attention).
    fn chunk_type(&self, st: BasicTypeEnum<'ctx>, c: usize) -> BasicTypeEnum<'ctx> {
        match st {
            BasicTypeEnum::IntType(t) if t.get_bit_width() == 8 && c == 2 => {
                self.ctx.i16_type().into()
            }
            _ => st.vector_of(c).into(),
        }
    }

    /// Elements `elems` (storage form) as one chunk of type `ct` ([`Self::chunk_type`]):
    /// the first at the lowest address (the low byte of an `i16`).
    fn pack_chunk(
        &self,
        ct: BasicTypeEnum<'ctx>,
        elems: &[BasicValueEnum<'ctx>],
    ) -> Result<BasicValueEnum<'ctx>> {
        if ct.is_int_type() {
            let [lo, hi] = [elems[0], elems[1]].map(|e| e.into_int_value());
            return Ok(self.emit().byte_pair(lo, hi)?.into());
        }
        let mut v = ct.into_vector_type().get_undef();
        for (k, e) in elems.iter().enumerate() {
            v = self
                .b
                .build_insert_element(v, *e, self.i32c(k as u64), "")?;
        }
        Ok(v.into())
    }

    /// The `c` elements (storage form) of a chunk made by [`Self::pack_chunk`].
    fn unpack_chunk(
        &self,
        chunk: BasicValueEnum<'ctx>,
        c: usize,
    ) -> Result<Vec<BasicValueEnum<'ctx>>> {
        if let BasicValueEnum::IntValue(pair) = chunk {
            return Ok(self.emit().pair_bytes(pair)?.map(Into::into).to_vec());
        }
        let v: VectorValue = chunk.into_vector_value();
        (0..c)
            .map(|k| Ok(self.b.build_extract_element(v, self.i32c(k as u64), "")?))
            .collect()
    }

    /// Emits `fast` where `cond` holds and `slow` elsewhere; joins their values with phis.
    pub(super) fn two_paths(
        &mut self,
        cond: IntValue<'ctx>,
        fast: &mut dyn FnMut(&mut Self) -> Result<Vec<BasicValueEnum<'ctx>>>,
        slow: &mut dyn FnMut(&mut Self) -> Result<Vec<BasicValueEnum<'ctx>>>,
    ) -> Result<Vec<BasicValueEnum<'ctx>>> {
        let fast_bb = self.ctx.append_basic_block(self.func, "vec");
        let slow_bb = self.ctx.append_basic_block(self.func, "scalar");
        let done = self.ctx.append_basic_block(self.func, "vec.end");
        self.b.build_conditional_branch(cond, fast_bb, slow_bb)?;
        self.b.position_at_end(fast_bb);
        let a = fast(self)?;
        let a_end = self.b.current_block()?;
        self.b.build_unconditional_branch(done)?;
        self.b.position_at_end(slow_bb);
        let s = slow(self)?;
        let s_end = self.b.current_block()?;
        self.b.build_unconditional_branch(done)?;
        self.b.position_at_end(done);
        a.iter()
            .zip(&s)
            .map(|(x, y)| {
                let phi = self.b.build_phi(x.get_type(), "")?;
                phi.add_incoming(&[(x, a_end), (y, s_end)]);
                Ok(phi.as_basic_value())
            })
            .collect()
    }
}

fn set_align(v: BasicValueEnum<'_>, align: u32) {
    if let Some(i) = v.as_instruction_value() {
        let _ = i.set_alignment(align);
    }
}

/// Vector types of storage element types.
trait VectorOf<'ctx> {
    fn vector_of(self, n: usize) -> inkwell::types::VectorType<'ctx>;
}

impl<'ctx> VectorOf<'ctx> for inkwell::types::BasicTypeEnum<'ctx> {
    fn vector_of(self, n: usize) -> inkwell::types::VectorType<'ctx> {
        match self {
            inkwell::types::BasicTypeEnum::IntType(t) => t.vec_type(n as u32),
            inkwell::types::BasicTypeEnum::FloatType(t) => t.vec_type(n as u32),
            other => unreachable!("no vector of {other:?} is loaded"),
        }
    }
}

/// The top-level stores (by address) whose buffers no other memory op of the kernel may
/// touch: no thread of the program reads or writes what they write before or after, so
/// they need no barrier to order them across threads. Pointers an op may derive from
/// several parameters count for each; custom calls count for every pointer they take.
pub(super) fn lone_stores(f: &Function) -> HashSet<usize> {
    let roots = f.pointer_roots();
    let mut uses: HashMap<usize, usize> = HashMap::new();
    f.walk(&mut |inst| {
        let ptrs: Vec<Value> = match &inst.op {
            Op::Load { ptr, .. }
            | Op::Store { ptr, .. }
            | Op::Atomic { ptr, .. }
            | Op::AtomicCas { ptr, .. } => vec![*ptr],
            Op::Custom(c) => c.ins.iter().chain(&c.outs).copied().collect(),
            _ => return,
        };
        let mut touched: Vec<usize> = ptrs
            .iter()
            .flat_map(|p| roots.get(p).cloned().unwrap_or_default())
            .collect();
        touched.sort_unstable();
        touched.dedup();
        for r in touched {
            *uses.entry(r).or_default() += 1;
        }
    });
    f.body
        .insts
        .iter()
        .filter(|inst| match &inst.op {
            Op::Store { ptr, .. } => roots
                .get(ptr)
                .is_some_and(|rs| !rs.is_empty() && rs.iter().all(|r| uses.get(r) == Some(&1))),
            _ => false,
        })
        .map(|inst| inst as *const Inst as usize)
        .collect()
}
