//! `device_assert`: in checked mode, a failing lane is recorded as a fault of the assert's
//! site, its row-major index in the address word (`launch/checked.rs` turns it into the
//! message; each thread reports its first failing slot, the first thread to claim the
//! record wins); outside checked mode, nothing.
//!
//! `device_print`: each thread prints its own slots (a scalar: thread 0). In the emulator
//! each lane's record (`llvm/print.rs`) goes to the emulator's print hook; on NVPTX each
//! lane is one `vprintf` with the line's format (values through C's `%lld`, `%llu`, `%llx`
//! and `%.9g`/`%.17g`, so a GPU's lines can differ from the host's in float digits).

use super::sync::EMU_PRINT;
use super::Gen;
use crate::launch::print::PRINT_WORDS;
use crate::llvm::{CodegenError, Result};
use crate::llvm::{Emitter, PrintSite};
use inkwell::module::Linkage;
use inkwell::types::BasicTypeEnum;
use inkwell::values::{BasicMetadataValueEnum, BasicValueEnum, IntValue};
use inkwell::AddressSpace;
use tritium_dsl::ir::{DType, Elem, Inst, Op};

impl<'ctx> Gen<'ctx, '_> {
    pub(super) fn device_assert(&mut self, inst: &Inst) -> Result<()> {
        let Op::Assert { cond, mask, .. } = &inst.op else {
            unreachable!()
        };
        let Some(check) = self.check.as_ref().filter(|_| self.checked_mode()) else {
            return Ok(());
        };
        let record = check.record;
        let Some(site) = check.sites.get(&(inst as *const Inst)).copied() else {
            return Err(CodegenError::internal(
                "the assert has no checked-mode site",
            ));
        };
        let (b, i64t) = (self.b, self.ctx.i64_type());
        let ct = self.ty(*cond).clone();
        let numel = ct.numel();
        let conds = self.tile_slots(*cond, numel)?;
        let masks = mask.map(|m| self.tile_slots(m, numel)).transpose()?;
        // Per slot: whether it holds an element this thread checks (a scalar: thread 0).
        let checked: Vec<Option<IntValue<'ctx>>> = if ct.is_scalar() {
            vec![Some(self.is_thread_zero()?)]
        } else {
            (0..conds.len())
                .map(|j| self.valid(numel, j))
                .collect::<Result<_>>()?
        };
        let mut any = self.ctx.bool_type().const_zero();
        let mut first = i64t.const_zero();
        for j in (0..conds.len()).rev() {
            let mut bad = b.build_not(conds[j].into_int_value(), "")?;
            if let Some(m) = &masks {
                bad = b.build_and(bad, m[j].into_int_value(), "")?;
            }
            if let Some(c) = checked[j] {
                bad = b.build_and(bad, c, "")?;
            }
            let lane = if ct.is_scalar() {
                i64t.const_zero()
            } else {
                b.build_int_z_extend(self.lin(numel, j)?, i64t, "")?
            };
            first = b.build_select(bad, lane, first, "")?.into_int_value();
            any = b.build_or(any, bad, "")?;
        }
        self.when(Some(any), &mut |g| {
            g.emit().record_fault(g.func, record, site, first, g.pids)
        })
    }

    pub(super) fn device_print(&mut self, inst: &Inst) -> Result<()> {
        let Op::Print { prefix, args, hex } = &inst.op else {
            unreachable!()
        };
        let site_prefix = self.emit().print_prefix(prefix);
        let record = self
            .emu
            .is_some()
            .then(|| self.entry_alloca(self.ctx.i64_type().array_type(PRINT_WORDS as u32).into()))
            .transpose()?;
        for (k, a) in args.iter().enumerate() {
            let t = self.ty(*a).clone();
            let d = t.dtype().expect("verified: numbers");
            let numel = t.numel();
            let slots = self.tile_slots(*a, numel)?;
            let site = PrintSite {
                prefix: site_prefix,
                dtype: d,
                hex: *hex,
                operand: (k, args.len()),
            };
            for (j, v) in slots.into_iter().enumerate() {
                let cond = if t.is_scalar() {
                    Some(self.is_thread_zero()?)
                } else {
                    self.valid(numel, j)?
                };
                let idx = if t.is_scalar() {
                    Vec::new()
                } else {
                    self.multi_index(self.lin(numel, j)?, &t.shape)?
                };
                self.when(cond, &mut |g| {
                    let s = g.to_storage(v, Elem::Scalar(d))?;
                    match record {
                        Some(record) => {
                            g.emit().print_record(record, &site, g.pids, &idx, s)?;
                            let ptr = g.ctx.ptr_type(AddressSpace::default());
                            let f = g.emu_word(EMU_PRINT, ptr.into())?.into_pointer_value();
                            let ty = g.ctx.void_type().fn_type(&[ptr.into()], false);
                            g.b.build_indirect_call(ty, f, &[record.into()], "")?;
                            Ok(())
                        }
                        None => g.vprintf(prefix, &site, &idx, v, s),
                    }
                })?;
            }
        }
        Ok(())
    }

    /// The row-major multi-index (i32 each) of linear index `lin` in `shape`.
    fn multi_index(&self, lin: IntValue<'ctx>, shape: &[usize]) -> Result<Vec<IntValue<'ctx>>> {
        let b = self.b;
        let mut stride = 1u64;
        let mut idx = vec![lin; shape.len()];
        for (i, &n) in shape.iter().enumerate().rev() {
            let q = b.build_int_unsigned_div(lin, self.i32c(stride), "")?;
            idx[i] = b.build_int_unsigned_rem(q, self.i32c(n as u64), "")?;
            stride *= n as u64;
        }
        Ok(idx)
    }

    /// One line through CUDA's `vprintf(format, args)`: `value` in compute form, `storage`
    /// in memory form.
    fn vprintf(
        &self,
        prefix: &str,
        site: &PrintSite<'ctx>,
        idx: &[IntValue<'ctx>],
        value: BasicValueEnum<'ctx>,
        storage: BasicValueEnum<'ctx>,
    ) -> Result<()> {
        let (b, ctx) = (self.b, self.ctx);
        let (i32t, i64t) = (ctx.i32_type(), ctx.i64_type());
        let d = site.dtype;
        let mut fmt = String::from("pid (%d, %d, %d)");
        if !idx.is_empty() {
            fmt += &format!(" idx ({})", vec!["%d"; idx.len()].join(", "));
        }
        let prefix = prefix.trim_end();
        let prefix = prefix.strip_suffix(':').unwrap_or(prefix);
        if !prefix.is_empty() {
            // `%` in the prefix is printed as itself.
            fmt += &format!(" {}", prefix.replace('%', "%%"));
        }
        if site.operand.1 > 1 {
            fmt += &format!(" (operand {})", site.operand.0);
        }
        let bits = self.emit().storage_bits(storage)?;
        let (conv, shown): (&str, BasicValueEnum<'ctx>) = if site.hex {
            ("0x%llx", bits.into())
        } else if d.is_float() {
            // The compute form: f16/bf16 compute in f32.
            let f = value.into_float_value();
            let wide = if d == DType::F64 {
                f
            } else {
                b.build_float_ext(f, ctx.f64_type(), "")?
            };
            let conv = if d == DType::F64 { "%.17g" } else { "%.9g" };
            (conv, wide.into())
        } else if d.is_signed_int() {
            let v = value.into_int_value();
            (
                "%lld",
                b.build_int_s_extend_or_bit_cast(v, i64t, "")?.into(),
            )
        } else {
            ("%llu", bits.into())
        };
        fmt += ": ";
        fmt += conv;
        fmt += "\n";
        let mut vals: Vec<BasicValueEnum<'ctx>> = self.pids.iter().map(|p| (*p).into()).collect();
        vals.extend(idx.iter().map(|i| BasicValueEnum::from(*i)));
        vals.push(shown);
        let types: Vec<BasicTypeEnum<'ctx>> = vals.iter().map(|v| v.get_type()).collect();
        let st = ctx.struct_type(&types, false);
        let buf = self.entry_alloca(st.into())?;
        for (k, v) in vals.iter().enumerate() {
            let p = b.build_struct_gep(st, buf, k as u32, "")?;
            b.build_store(p, *v)?;
        }
        let text = ctx.const_string(fmt.as_bytes(), true);
        let g = self
            .module
            .add_global(text.get_type(), None, "print.format");
        g.set_initializer(&text);
        g.set_constant(true);
        g.set_linkage(Linkage::Private);
        let ptr = ctx.ptr_type(AddressSpace::default());
        let vprintf = self.module.get_function("vprintf").unwrap_or_else(|| {
            let ty = i32t.fn_type(&[ptr.into(), ptr.into()], false);
            self.module
                .add_function("vprintf", ty, Some(Linkage::External))
        });
        let args: [BasicMetadataValueEnum<'ctx>; 2] = [g.as_pointer_value().into(), buf.into()];
        b.build_call(vprintf, &args, "")?;
        Ok(())
    }
}
