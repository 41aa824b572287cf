//! Custom-op calls on CUDA (see `docs/custom_ops.md`), linked as on the CPU.
//!
//! - Simt: every thread calls `<symbol>` once per element it holds of the out shape
//!   (inputs broadcast to it through shared memory when their shape differs).
//! - `inline_asm_elementwise` (a Simt call with `inline_asm`): on hardware, the inline
//!   PTX instead, `pack` elements per asm call, one output register or more per result
//!   (Triton's operand layout, `dsl::ir::AsmOperand`); the emulator calls the fallback.
//! - Simd (and the builtins): the call's tiles are laid out row-major in shared memory,
//!   `_mlir_ciface_<symbol>` is called with memref descriptors of them, and every
//!   thread reads the outs back. Barriers fence the call on both sides. A cooperative
//!   entry (one that uses `custom_op.h`'s thread helpers, `CustomEntry::cooperative`) is
//!   called by every thread of the CTA, which split the work; any other by thread 0.

use super::Gen;
use crate::llvm::{CodegenError, Emitter, Result};
use inkwell::types::{BasicMetadataTypeEnum, BasicType, BasicTypeEnum};
use inkwell::values::{
    BasicMetadataValueEnum, BasicValueEnum, FunctionValue, IntValue, PointerValue,
};
use inkwell::AddressSpace;
use tritium_dsl::ir::{AsmOperand, CustomCall, DType, Elem, InlineAsm, Inst, Op, Type, Value};

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
            // Hardware runs the inline PTX; the emulator calls the fallback.
            _ if c.inline_asm.is_some() && self.emu.is_none() => {
                let x = c.inline_asm.as_ref().expect("checked");
                self.custom_inline_asm(inst, c, x)
            }
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
        let cols = self.input_columns(c, &out_ty)?;
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
                .map(|(v, col)| self.encode_c_generic(col[j], self.ty(*v).elem))
                .collect::<Result<_>>()?;
            for (k, cell) in cells.iter().enumerate() {
                let x = self.encode_c_generic(outs[k][j], out_elems[k])?;
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

    /// Each input of `c`, broadcast to the output's type, as this thread's slots.
    fn input_columns(
        &mut self,
        c: &CustomCall,
        out_ty: &Type,
    ) -> Result<Vec<Vec<BasicValueEnum<'ctx>>>> {
        c.ins
            .iter()
            .map(|v| self.broadcast_slots(*v, out_ty))
            .collect()
    }

    /// `inline_asm_elementwise` on hardware: one asm call per `pack` of this thread's
    /// slots (elementwise, so which slots share a call does not matter; a last partial
    /// group repeats its last slot). Its operands are Triton's: the results' registers,
    /// result by result, then the inputs', input by input, each operand's `pack` elements
    /// in `AsmOperand::registers` registers of `per_register` consecutive elements (the
    /// first in the low bits). Several output registers come back as one struct.
    fn custom_inline_asm(&mut self, inst: &Inst, c: &CustomCall, x: &InlineAsm) -> Result<()> {
        let out_ty = self.ty(c.outs[0]).clone();
        let numel = out_ty.numel();
        let n = self.slots(numel);
        let pack = x.pack as usize;
        let dtypes = |vs: &[Value]| -> Result<Vec<DType>> {
            vs.iter()
                .map(|v| {
                    self.ty(*v).dtype().ok_or_else(|| {
                        CodegenError::unsupported("inline asm operands are numbers, not pointers")
                    })
                })
                .collect()
        };
        let (res, ins) = x.layout(&dtypes(&c.ins)?, &dtypes(&c.outs)?);
        let ops = x.operands();
        let n_out: usize = res.iter().map(|o| o.registers).sum();
        let n_in: usize = ins.iter().map(|o| o.registers).sum();
        if ops.len() != n_out + n_in {
            return Err(CodegenError::internal(
                "inline asm constraints do not match the call",
            ));
        }
        let mut reg_tys: Vec<BasicTypeEnum<'ctx>> = Vec::with_capacity(ops.len());
        for o in res.iter().chain(&ins) {
            for _ in 0..o.registers {
                reg_tys.push(self.asm_reg_ty(ops[reg_tys.len()], o)?);
            }
        }
        let ret_ty: BasicTypeEnum<'ctx> = if n_out == 1 {
            reg_tys[0]
        } else {
            self.ctx.struct_type(&reg_tys[..n_out], false).into()
        };
        let meta: Vec<BasicMetadataTypeEnum<'ctx>> =
            reg_tys[n_out..].iter().map(|t| (*t).into()).collect();
        let fn_ty = ret_ty.fn_type(&meta, false);
        let asm = self.ctx.create_inline_asm(
            fn_ty,
            x.asm.clone(),
            x.constraints.clone(),
            !x.pure,
            false,
            None,
            false,
        );
        let cols = self.input_columns(c, &out_ty)?;
        let mut results = vec![Vec::with_capacity(n); res.len()];
        for g in (0..n).step_by(pack) {
            let group: Vec<usize> = (g..g + pack).map(|j| j.min(n - 1)).collect();
            let mut args: Vec<BasicMetadataValueEnum<'ctx>> = Vec::with_capacity(n_in);
            for (col, o) in cols.iter().zip(&ins) {
                for lanes in group.chunks(o.per_register) {
                    let vals: Vec<_> = lanes.iter().map(|&j| col[j]).collect();
                    let reg = reg_tys[n_out + args.len()];
                    args.push(self.asm_pack(&vals, Elem::Scalar(o.dtype), reg)?.into());
                }
            }
            let call = self.b.build_indirect_call(fn_ty, asm, &args, "asm")?;
            let inkwell::values::ValueKind::Basic(r) = call.try_as_basic_value() else {
                return Err(CodegenError::internal("inline asm without a result"));
            };
            let mut field = 0;
            for (out, o) in results.iter_mut().zip(&res) {
                let mut vals = Vec::with_capacity(pack);
                for _ in 0..o.registers {
                    let reg = if n_out == 1 {
                        r
                    } else {
                        self.b
                            .build_extract_value(r.into_struct_value(), field, "")?
                    };
                    field += 1;
                    vals.extend(self.asm_unpack(reg, Elem::Scalar(o.dtype), o.per_register)?);
                }
                out.extend(vals.into_iter().take(n - g));
            }
        }
        for (r, slots) in inst.results.iter().zip(results) {
            self.define(*r, slots);
        }
        Ok(())
    }

    /// The register type of operand constraint `k` (`=r`, `h`, `l`, `f`, `d`, `c`) for
    /// operand `o`: `o.per_register` elements filling the register, or one narrower
    /// integer, zero-extended (the verifier checked the widths).
    fn asm_reg_ty(&self, k: &str, o: &AsmOperand) -> Result<BasicTypeEnum<'ctx>> {
        let Some((letter, bits, int)) = InlineAsm::register_class(k) else {
            return Err(CodegenError::unsupported(format!(
                "inline asm constraint `{k}` (supported: c, h, r, l, f, d)"
            )));
        };
        let want = o.register_bits();
        if !(want == bits || (o.per_register == 1 && want < bits && int)) {
            return Err(CodegenError::internal(format!(
                "inline asm operand `{k}` cannot hold {} {} element(s)",
                o.per_register, o.dtype
            )));
        }
        Ok(match letter {
            "f" => self.ctx.f32_type().into(),
            "d" => self.ctx.f64_type().into(),
            _ => self.ctx.custom_width_int_type(bits).into(),
        })
    }

    fn bits_of(t: BasicTypeEnum<'ctx>) -> u32 {
        match t {
            BasicTypeEnum::IntType(i) => i.get_bit_width(),
            BasicTypeEnum::FloatType(f) => {
                // Storage types hold halves as i16: the floats here are f32 and f64.
                let c = f.get_context();
                if f == c.f16_type() {
                    16
                } else if f == c.f32_type() {
                    32
                } else {
                    64
                }
            }
            _ => 0,
        }
    }

    /// The storage bits of `v` (an element `e`) as an integer.
    fn asm_bits(&self, v: BasicValueEnum<'ctx>, e: Elem) -> Result<IntValue<'ctx>> {
        let s = self.to_storage(v, e)?;
        Ok(match s {
            BasicValueEnum::IntValue(i) => i,
            other => {
                let w = Self::bits_of(other.get_type());
                let t = self.ctx.custom_width_int_type(w);
                self.b.build_bit_cast(other, t, "")?.into_int_value()
            }
        })
    }

    /// The asm operand of register type `reg` holding `vals`.
    fn asm_pack(
        &self,
        vals: &[BasicValueEnum<'ctx>],
        e: Elem,
        reg: BasicTypeEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        let mut bits: Vec<IntValue<'ctx>> = vals
            .iter()
            .map(|v| self.asm_bits(*v, e))
            .collect::<Result<_>>()?;
        if let [lo, hi] = bits[..] {
            if lo.get_type().get_bit_width() == 8 {
                // One i16, not a `<2 x i8>`: see `Emit::byte_pair`.
                bits = vec![self.emit().byte_pair(lo, hi)?];
            }
        }
        if let [b] = bits[..] {
            // Zero-extended to the register's width (as an integer), then its type.
            let wide = self.ctx.custom_width_int_type(Self::bits_of(reg));
            let word = self.b.build_int_z_extend_or_bit_cast(b, wide, "")?;
            return Ok(self.b.build_bit_cast(word, reg, "")?);
        }
        let vt = bits[0].get_type().vec_type(bits.len() as u32);
        let mut v = vt.get_undef();
        for (i, b) in bits.iter().enumerate() {
            v = self
                .b
                .build_insert_element(v, *b, self.i32c(i as u64), "")?;
        }
        Ok(self.b.build_bit_cast(v, reg, "")?)
    }

    /// The `per_register` elements `e` in the asm result register `r`.
    fn asm_unpack(
        &self,
        r: BasicValueEnum<'ctx>,
        e: Elem,
        per_register: usize,
    ) -> Result<Vec<BasicValueEnum<'ctx>>> {
        let Elem::Scalar(d) = e else {
            return Err(CodegenError::unsupported("inline asm results are numbers"));
        };
        let st = self.storage_ty(d);
        let w = Self::bits_of(st);
        let it = self.ctx.custom_width_int_type(w);
        let reg_bits = Self::bits_of(r.get_type());
        let raw = self
            .b
            .build_bit_cast(r, self.ctx.custom_width_int_type(reg_bits), "")?
            .into_int_value();
        let elems: Vec<IntValue<'ctx>> = if per_register == 1 {
            vec![if reg_bits == w {
                raw
            } else {
                self.b.build_int_truncate(raw, it, "")?
            }]
        } else if per_register == 2 && w == 8 {
            // Not a `<2 x i8>`: see `Emit::byte_pair`.
            let pair = (self.b).build_int_truncate_or_bit_cast(raw, self.ctx.i16_type(), "")?;
            self.emit().pair_bytes(pair)?.to_vec()
        } else {
            let v = self
                .b
                .build_bit_cast(raw, it.vec_type(per_register as u32), "")?
                .into_vector_value();
            (0..per_register)
                .map(|i| {
                    Ok(self
                        .b
                        .build_extract_element(v, self.i32c(i as u64), "")?
                        .into_int_value())
                })
                .collect::<Result<_>>()?
        };
        elems
            .into_iter()
            .map(|b| {
                let s = self.b.build_bit_cast(b, st, "")?;
                self.decode_storage(s, e)
            })
            .collect()
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
        let mut end = self.scratch_floor();
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
                    let p = g.shared_byte(g.i32c(*at as u64))?;
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
                    arg_parts.push((Some(self.encode_c_generic(x, t.elem)?), None));
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
        // descriptors); thread 0 alone calls any other. A checked builtin only where its
        // extent lies inside a buffer.
        let caller = (!cooperative).then_some(first);
        let caller = match (self.builtin_extent_ok(inst, c)?, caller) {
            (Some(ok), Some(first)) => Some(self.b.build_and(ok, first, "")?),
            (ok, caller) => ok.or(caller),
        };
        self.when(caller, &mut |g| {
            let args: Vec<BasicValueEnum<'ctx>> = arg_parts
                .iter()
                .map(|part| -> Result<BasicValueEnum<'ctx>> {
                    match part {
                        (Some(x), _) => Ok(*x),
                        (None, Some((at, shape))) => {
                            let base = g.generic(g.shared_byte(g.i32c(*at as u64))?)?;
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

    fn shared_at(
        &self,
        offset: usize,
        ty: BasicTypeEnum<'ctx>,
        index: inkwell::values::IntValue<'ctx>,
    ) -> Result<PointerValue<'ctx>> {
        // SAFETY (of the generated code): as `shared_byte`.
        unsafe {
            Ok(self.b.build_gep(
                ty,
                self.shared_byte(self.i32c(offset as u64))?,
                &[index],
                "",
            )?)
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

    /// [`Emitter::encode_c`] with pointers made generic (the address space C functions
    /// take).
    fn encode_c_generic(&self, v: BasicValueEnum<'ctx>, e: Elem) -> Result<BasicValueEnum<'ctx>> {
        match e {
            Elem::Ptr(_) => Ok(self.generic(v.into_pointer_value())?.into()),
            _ => Ok(self.emit().encode_c(v, e)?),
        }
    }
}
