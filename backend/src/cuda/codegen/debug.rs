//! `device_assert`: in checked mode, a failing lane is recorded as a fault of the assert's
//! site, its row-major index in the address word (`launch/checked.rs` turns it into the
//! message; each thread reports its first failing slot, the first thread to claim the
//! record wins); outside checked mode, nothing.

use super::Gen;
use inkwell::values::IntValue;
use tritium_dsl::ir::{Inst, Op};

impl<'ctx> Gen<'ctx, '_> {
    pub(super) fn device_assert(&mut self, inst: &Inst) {
        let Op::Assert { cond, mask, .. } = &inst.op else {
            unreachable!()
        };
        let Some(check) = &self.check else {
            return;
        };
        let record = check.record;
        let Some(site) = check.sites.get(&(inst as *const Inst)).copied() else {
            self.fail(format!("internal: assert at {} has no site", inst.loc));
            return;
        };
        let (b, i64t) = (self.b, self.ctx.i64_type());
        let ct = self.ty(*cond).clone();
        let numel = ct.numel();
        let conds = self.tile_slots(*cond, numel);
        let masks = mask.map(|m| self.tile_slots(m, numel));
        // Per slot: whether it holds an element this thread checks (a scalar: thread 0).
        let checked: Vec<Option<IntValue<'ctx>>> = if ct.is_scalar() {
            vec![Some(self.is_thread_zero())]
        } else {
            (0..conds.len()).map(|j| self.valid(numel, j)).collect()
        };
        let mut any = self.ctx.bool_type().const_zero();
        let mut first = i64t.const_zero();
        for j in (0..conds.len()).rev() {
            let mut bad = b.build_not(conds[j].into_int_value(), "").unwrap();
            if let Some(m) = &masks {
                bad = b.build_and(bad, m[j].into_int_value(), "").unwrap();
            }
            if let Some(c) = checked[j] {
                bad = b.build_and(bad, c, "").unwrap();
            }
            let lane = if ct.is_scalar() {
                i64t.const_zero()
            } else {
                b.build_int_z_extend(self.lin(numel, j), i64t, "").unwrap()
            };
            first = b
                .build_select(bad, lane, first, "")
                .unwrap()
                .into_int_value();
            any = b.build_or(any, bad, "").unwrap();
        }
        self.when(Some(any), &mut |g| {
            g.emit().record_fault(g.func, record, site, first, g.pids);
        });
    }
}
