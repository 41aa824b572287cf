//! `device_assert`: in checked mode, the first failing lane (row-major) of a program is
//! recorded as a fault of the assert's site, its row-major index in the address word
//! (`launch/checked.rs` turns it into the message); outside checked mode, nothing.

use super::Gen;
use tritium_dsl::ir::{Inst, Op};

impl<'ctx> Gen<'ctx, '_> {
    pub(super) fn device_assert(&mut self, inst: &Inst) {
        let Op::Assert { cond, mask, .. } = &inst.op else {
            unreachable!()
        };
        if !self.opts.bounds_check {
            return;
        }
        let (cond, mask) = (*cond, *mask);
        let shape = self.ty(cond).shape.clone();
        let site = self.site_ids[&(inst as *const Inst)];
        let done = self.entry_alloca(self.ctx.bool_type().into());
        self.b
            .build_store(done, self.ctx.bool_type().const_zero())
            .unwrap();
        self.loop_nest(&shape, &mut |g, idx| {
            let bl = g.b;
            let ok = g.lane(cond, idx).into_int_value();
            let mut bad = bl.build_not(ok, "").unwrap();
            if let Some(m) = mask {
                let m = g.lane(m, idx).into_int_value();
                bad = bl.build_and(bad, m, "").unwrap();
            }
            // One record per program: later lanes of a failed assert are not looked at.
            let reported = bl
                .build_load(g.ctx.bool_type(), done, "")
                .unwrap()
                .into_int_value();
            let first = bl.build_not(reported, "").unwrap();
            let bad = bl.build_and(bad, first, "assert.bad").unwrap();
            let fail = g.ctx.append_basic_block(g.func, "assert.fail");
            let cont = g.ctx.append_basic_block(g.func, "assert.ok");
            bl.build_conditional_branch(bad, fail, cont).unwrap();
            bl.position_at_end(fail);
            let mut flat = g.i64c(0);
            for (i, ix) in idx.iter().enumerate() {
                flat = bl.build_int_mul(flat, g.i64c(shape[i] as u64), "").unwrap();
                flat = bl.build_int_add(flat, *ix, "").unwrap();
            }
            g.emit().record_fault(g.func, g.err, site, flat, g.pids);
            g.b.build_store(done, g.ctx.bool_type().const_all_ones())
                .unwrap();
            g.b.build_unconditional_branch(cont).unwrap();
            g.b.position_at_end(cont);
        });
    }
}
