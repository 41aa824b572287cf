//! `device_assert`: in checked mode, the first failing lane (row-major) of a program is
//! recorded as a fault of the assert's site, its row-major index in the address word
//! (`launch/checked.rs` turns it into the message); outside checked mode, nothing.
//!
//! `device_print`: each lane's record (`llvm/print.rs`) goes to the hook the JIT defines
//! as `launch::print::PRINT_SYMBOL`.

use super::Gen;
use crate::launch::print::{PRINT_SYMBOL, PRINT_WORDS};
use crate::llvm::Result;
use crate::llvm::{Emitter, PrintSite};
use inkwell::module::Linkage;
use tritium_dsl::ir::{Elem, Inst, Op};

impl<'ctx> Gen<'ctx, '_> {
    pub(super) fn device_assert(&mut self, inst: &Inst) -> Result<()> {
        let Op::Assert { cond, mask, .. } = &inst.op else {
            unreachable!()
        };
        if !self.opts.bounds_check {
            return Ok(());
        }
        let (cond, mask) = (*cond, *mask);
        let shape = self.ty(cond).shape.clone();
        let site = self.site_ids[&(inst as *const Inst)];
        let done = self.entry_alloca(self.ctx.bool_type().into())?;
        self.b
            .build_store(done, self.ctx.bool_type().const_zero())?;
        self.loop_nest(&shape, &mut |g, idx| {
            let bl = g.b;
            let ok = g.lane(cond, idx)?.into_int_value();
            let mut bad = bl.build_not(ok, "")?;
            if let Some(m) = mask {
                let m = g.lane(m, idx)?.into_int_value();
                bad = bl.build_and(bad, m, "")?;
            }
            // One record per program: later lanes of a failed assert are not looked at.
            let reported = bl.build_load(g.ctx.bool_type(), done, "")?.into_int_value();
            let first = bl.build_not(reported, "")?;
            let bad = bl.build_and(bad, first, "assert.bad")?;
            let fail = g.ctx.append_basic_block(g.func, "assert.fail");
            let cont = g.ctx.append_basic_block(g.func, "assert.ok");
            bl.build_conditional_branch(bad, fail, cont)?;
            bl.position_at_end(fail);
            let mut flat = g.i64c(0);
            for (i, ix) in idx.iter().enumerate() {
                flat = bl.build_int_mul(flat, g.i64c(shape[i] as u64), "")?;
                flat = bl.build_int_add(flat, *ix, "")?;
            }
            g.emit().record_fault(g.func, g.err, site, flat, g.pids)?;
            g.b.build_store(done, g.ctx.bool_type().const_all_ones())?;
            g.b.build_unconditional_branch(cont)?;
            g.b.position_at_end(cont);
            Ok(())
        })
    }

    pub(super) fn device_print(&mut self, inst: &Inst) -> Result<()> {
        let Op::Print { prefix, args, hex } = &inst.op else {
            unreachable!()
        };
        let hook = self.module.get_function(PRINT_SYMBOL).unwrap_or_else(|| {
            let ptr = self.ctx.ptr_type(inkwell::AddressSpace::default());
            let ty = self.ctx.void_type().fn_type(&[ptr.into()], false);
            self.module
                .add_function(PRINT_SYMBOL, ty, Some(Linkage::External))
        });
        let words = self.ctx.i64_type().array_type(PRINT_WORDS as u32);
        let record = self.entry_alloca(words.into())?;
        let prefix = self.emit().print_prefix(prefix);
        for (k, a) in args.iter().enumerate() {
            let t = self.ty(*a).clone();
            let d = t.dtype().expect("verified: numbers");
            let site = PrintSite {
                prefix,
                dtype: d,
                hex: *hex,
                operand: (k, args.len()),
            };
            let a = *a;
            self.loop_nest(&t.shape, &mut |g, idx| {
                let v = g.lane(a, idx)?;
                let s = g.to_storage(v, Elem::Scalar(d))?;
                g.emit().print_record(record, &site, g.pids, idx, s)?;
                g.b.build_call(hook, &[record.into()], "")?;
                Ok(())
            })?;
        }
        Ok(())
    }
}
