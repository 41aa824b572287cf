//! Custom-op calls on CUDA (see `docs/custom_ops.md`), linked as on the CPU.
//!
//! - Simt: every thread calls `<symbol>` once per element it holds of the out shape
//!   (inputs broadcast to it through shared memory when their shape differs).
//! - Simd (and the builtins): the call's tiles are laid out row-major in shared memory,
//!   `_mlir_ciface_<symbol>` is called with memref descriptors of them, and every
//!   thread reads the outs back. Barriers fence the call on both sides. A cooperative
//!   entry (one that uses `custom_op.h`'s thread helpers, `CustomEntry::cooperative`) is
//!   called by every thread of the CTA, which split the work; any other by thread 0.

use super::Gen;
use crate::llvm::{CodegenError, Result};
use inkwell::types::{BasicType, BasicTypeEnum};
use inkwell::values::{BasicValueEnum, FunctionValue, PointerValue};
use inkwell::AddressSpace;
use tritium_dsl::ir::{CustomCall, Elem, Inst, Op, Type, Value};

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
            (Some(e), Some(func)) => self.custom_simd(inst, c, func, e.cooperative),
            _ => Err(CodegenError::internal("the call was not linked")),
        };
        result.map_err(|e| e.of_custom_call(&c.name))
    }

    fn custom_simt(
        &mut self,
        inst: &Inst,
        c: &CustomCall,
        func: FunctionValue<'ctx>,
    ) -> Result<()> {
        let out_ty = self.ty(c.outs[0]).clone();
        let (_, out_elems) = self.emit().check_simt_call(c, |v| self.ty(v), func)?;
        let single = out_elems.len() == 1;
        let numel = out_ty.numel();
        let cols: Vec<Vec<BasicValueEnum<'ctx>>> = c
            .ins
            .clone()
            .into_iter()
            .map(|v| self.broadcast_slots(v, &out_ty))
            .collect::<Result<_>>()?;
        let outs: Vec<Vec<BasicValueEnum<'ctx>>> = c
            .outs
            .iter()
            .map(|o| self.tile_slots(*o, numel))
            .collect::<Result<_>>()?;
        let cells: Vec<PointerValue<'ctx>> = if single {
            vec![]
        } else {
            out_elems
                .iter()
                .map(|e| self.entry_alloca(self.c_ty(*e)))
                .collect::<Result<_>>()?
        };
        let mut results: Vec<Vec<BasicValueEnum<'ctx>>> = vec![Vec::new(); c.outs.len()];
        for j in 0..self.slots(numel) {
            let mut args: Vec<BasicValueEnum<'ctx>> = c
                .ins
                .iter()
                .zip(&cols)
                .map(|(v, col)| self.encode_c(col[j], self.ty(*v).elem))
                .collect::<Result<_>>()?;
            for (k, cell) in cells.iter().enumerate() {
                let x = self.encode_c(outs[k][j], out_elems[k])?;
                self.b.build_store(*cell, x)?;
                args.push((*cell).into());
            }
            let ret = self.call(func, &args)?;
            for (k, e) in out_elems.iter().enumerate() {
                let x = match ret {
                    Some(x) => x,
                    None => self.b.build_load(self.c_ty(*e), cells[k], "")?,
                };
                results[k].push(self.decode_c(x, *e)?);
            }
        }
        for (r, slots) in inst.results.iter().zip(results) {
            self.define(*r, slots);
        }
        Ok(())
    }

    /// This thread's slots of `x` broadcast to `out` (scalars splat).
    fn broadcast_slots(&mut self, x: Value, out: &Type) -> Result<Vec<BasicValueEnum<'ctx>>> {
        let xs = self.ty(x).shape.clone();
        if xs.is_empty() || xs.iter().product::<usize>() == out.numel() {
            return self.tile_slots(x, out.numel());
        }
        let off = out.rank() - xs.len();
        self.exchange_slots(out, x, &mut |g, idx| {
            Ok(xs
                .iter()
                .enumerate()
                .map(|(k, d)| if *d == 1 { g.i32c(0) } else { idx[off + k] })
                .collect())
        })
    }

    fn custom_simd(
        &mut self,
        inst: &Inst,
        c: &CustomCall,
        func: FunctionValue<'ctx>,
        cooperative: bool,
    ) -> Result<()> {
        let generic: BasicTypeEnum = self.ctx.ptr_type(AddressSpace::default()).into();
        // Byte offsets of each tile in shared memory: ins, outs, extra buffers.
        let mut end = 0usize;
        let mut place = |bytes: usize| {
            let at = end.div_ceil(16) * 16;
            end = at + bytes.max(1);
            at
        };
        // One place per position (ins, then outs), even where one value is passed at
        // several positions: each out gets its own buffer (the fuzzer's seed 1000844 had a
        // value as both outs of `divmod`, whose quotient the remainder overwrote).
        let mut layout: Vec<(Value, usize)> = Vec::new();
        let mut place_of: Vec<Option<usize>> = Vec::new();
        for (i, v) in c.ins.iter().chain(&c.outs).enumerate() {
            let t = self.ty(*v).clone();
            if t.is_scalar() && i < c.ins.len() {
                place_of.push(None);
                continue;
            }
            if t.elem.pointee().is_some() {
                return Err(CodegenError::unsupported(format!(
                    "input {v} is a tile of pointers ({t}); pass a pointer or a tile of numbers"
                )));
            }
            let at = place(t.numel() * t.dtype().map_or(8, |d| d.size_bytes()));
            layout.push((*v, at));
            place_of.push(Some(at));
        }
        let extra: Vec<(usize, usize)> = c
            .extra
            .iter()
            .map(|e| {
                let bytes = e.len * e.dtype.size_bytes();
                (place(bytes), bytes)
            })
            .collect();
        self.reserve_shared(end);
        for (v, offset) in &layout {
            self.spill_storage(*v, *offset)?;
        }
        let first = self.is_thread_zero()?;
        if !extra.is_empty() {
            self.when(Some(first), &mut |g| {
                for (at, bytes) in &extra {
                    let p = g.shared_byte(*at)?;
                    let n = g.ctx.i64_type().const_int(*bytes as u64, false);
                    g.b.build_memset(p, 1, g.ctx.i8_type().const_zero(), n)?;
                }
                Ok(())
            })?;
        }
        self.barrier()?;
        let mut types = Vec::new();
        let mut arg_parts = Vec::new();
        for (i, v) in c.ins.iter().chain(&c.outs).enumerate() {
            let t = self.ty(*v).clone();
            match place_of[i] {
                None => {
                    let x = self.scalar(*v)?;
                    arg_parts.push((Some(self.encode_c(x, t.elem)?), None));
                    types.push(self.c_ty(t.elem));
                }
                Some(at) => {
                    arg_parts.push((None, Some((at, t.shape.clone()))));
                    types.push(generic);
                }
            }
        }
        for (e, (at, _)) in c.extra.iter().zip(&extra) {
            arg_parts.push((None, Some((*at, vec![e.len.max(1)]))));
            types.push(generic);
        }
        self.check_signature(
            func,
            None,
            &types,
            "Simd: `void _mlir_ciface_<symbol>(memref_t<T, R>* ins…, outs…, extra…)`",
        )?;
        // Every thread calls a cooperative entry (with its own copy of the same
        // descriptors); thread 0 alone calls any other.
        let caller = (!cooperative).then_some(first);
        self.when(caller, &mut |g| {
            let args: Vec<BasicValueEnum<'ctx>> = arg_parts
                .iter()
                .map(|part| -> Result<BasicValueEnum<'ctx>> {
                    match part {
                        (Some(x), _) => Ok(*x),
                        (None, Some((at, shape))) => {
                            let base = g.generic(g.shared_byte(*at)?)?;
                            Ok(g.memref(base, shape)?.into())
                        }
                        _ => unreachable!("every argument is a value or a tile"),
                    }
                })
                .collect::<Result<_>>()?;
            g.call(func, &args)?;
            Ok(())
        })?;
        self.barrier()?;
        for (k, r) in inst.results.iter().enumerate() {
            let at = place_of[c.ins.len() + k].expect("outs are placed");
            let t = self.ty(*r).clone();
            let numel = t.numel();
            let st = self.elem_storage_ty_of(t.elem);
            let slots = (0..self.slots(numel))
                .map(|j| {
                    let lin = self.clamped_lin(numel, j)?;
                    let p = self.shared_at(at, st, lin)?;
                    let raw = self.b.build_load(st, p, "")?;
                    self.decode_storage(raw, t.elem)
                })
                .collect::<Result<_>>()?;
            self.define(*r, slots);
        }
        self.barrier()?;
        Ok(())
    }

    /// Writes the valid slots of `v` to shared memory at byte `offset` in storage form
    /// (the C layout: bools as bytes, halves as 16 bits).
    fn spill_storage(&mut self, v: Value, offset: usize) -> Result<()> {
        let t = self.ty(v).clone();
        let numel = t.numel();
        let st = self.elem_storage_ty_of(t.elem);
        let slots = self.tile_slots(v, numel)?;
        for (j, s) in slots.into_iter().enumerate() {
            let ok = self.valid(numel, j)?;
            let bits = self.to_storage(s, t.elem)?;
            self.when(ok, &mut |g| {
                let lin = g.lin(numel, j)?;
                let p = g.shared_at(offset, st, lin)?;
                g.b.build_store(p, bits)?;
                Ok(())
            })?;
        }
        Ok(())
    }

    fn elem_storage_ty_of(&self, e: Elem) -> BasicTypeEnum<'ctx> {
        match e {
            Elem::Scalar(d) => self.storage_ty(d),
            Elem::Ptr(_) => self.ctx.ptr_type(self.global).into(),
        }
    }

    fn shared_byte(&self, offset: usize) -> Result<PointerValue<'ctx>> {
        // SAFETY (of the generated code): `reserve_shared` covers the call's tiles.
        unsafe {
            Ok(self.b.build_gep(
                self.ctx.i8_type(),
                self.smem,
                &[self.i32c(offset as u64)],
                "",
            )?)
        }
    }

    fn shared_at(
        &self,
        offset: usize,
        ty: BasicTypeEnum<'ctx>,
        index: inkwell::values::IntValue<'ctx>,
    ) -> Result<PointerValue<'ctx>> {
        // SAFETY (of the generated code): as `shared_byte`.
        unsafe {
            Ok(self
                .b
                .build_gep(ty, self.shared_byte(offset)?, &[index], "")?)
        }
    }

    /// A generic (`addrspace(0)`) pointer, as C code takes it.
    fn generic(&self, p: PointerValue<'ctx>) -> Result<PointerValue<'ctx>> {
        let generic = self.ctx.ptr_type(AddressSpace::default());
        if p.get_type() == generic {
            return Ok(p);
        }
        Ok(self.b.build_address_space_cast(p, generic, "")?)
    }

    fn memref(&self, buf: PointerValue<'ctx>, shape: &[usize]) -> Result<PointerValue<'ctx>> {
        let st = self.emit().memref_type(shape.len());
        let desc = self.entry_alloca(st.as_basic_type_enum())?;
        self.emit().fill_memref(desc, buf, shape)?;
        Ok(desc)
    }

    /// The LLVM type of a C argument of element `e` (`_Float16` → half, `__bf16` → bfloat).
    fn c_ty(&self, e: Elem) -> BasicTypeEnum<'ctx> {
        self.emit().c_ty(e)
    }

    fn encode_c(&self, v: BasicValueEnum<'ctx>, e: Elem) -> Result<BasicValueEnum<'ctx>> {
        match e {
            Elem::Ptr(_) => Ok(self.generic(v.into_pointer_value())?.into()),
            _ => Ok(self.emit().encode_c(v, e)?),
        }
    }

    fn decode_c(&self, v: BasicValueEnum<'ctx>, e: Elem) -> Result<BasicValueEnum<'ctx>> {
        self.emit().decode_c(v, e)
    }

    fn check_signature(
        &self,
        func: FunctionValue<'ctx>,
        ret: Option<BasicTypeEnum<'ctx>>,
        params: &[BasicTypeEnum<'ctx>],
        what: &str,
    ) -> Result<()> {
        self.emit().check_signature(func, ret, params, what)
    }

    fn call(
        &self,
        func: FunctionValue<'ctx>,
        args: &[BasicValueEnum<'ctx>],
    ) -> Result<Option<BasicValueEnum<'ctx>>> {
        self.emit().call(func, args)
    }
}
