//! `scan`: the input goes through shared memory; each thread folds, for each of its slots,
//! the slot's line in index order (from the end when reversed) up to the slot's position.
//! The loop runs the whole line in every thread (uniform control flow) and selects the
//! elements up to the position, so results are the interpreter's bit for bit.

use super::Gen;
use crate::llvm::{Emitter, Result};
use inkwell::IntPredicate;
use tritium_dsl::ir::{Const, Elem, Inst, Op};

impl<'ctx> Gen<'ctx, '_> {
    pub(super) fn scan(&mut self, inst: &Inst) -> Result<()> {
        let Op::Scan {
            op,
            x,
            axis,
            reverse,
        } = &inst.op
        else {
            unreachable!()
        };
        let (op, x, axis, reverse) = (*op, *x, *axis as usize, *reverse);
        let xt = self.ty(x).clone();
        let d = xt.dtype().expect("scans take numbers");
        let acc_d = d.accumulator();
        let combine = op.binary();
        let numel = xt.numel();
        let len = xt.shape[axis];
        let stride: usize = xt.shape[axis + 1..].iter().product();
        self.spill_to_shared(x, 0)?;
        self.barrier()?;
        let elem = Elem::Scalar(d);
        // Each slot's line start and its position along the axis.
        let sites: Vec<_> = (0..self.slots(numel))
            .map(|j| {
                let lin = self.clamped_lin(numel, j)?;
                let mut idx = self.unravel(&xt.shape, lin)?;
                let pos = idx[axis];
                idx[axis] = self.i32c(0);
                Ok((self.ravel(&xt.shape, &idx)?, pos))
            })
            .collect::<Result<_>>()?;
        let zero = self.const_value(Const::Int(0), acc_d);
        let init = sites.iter().map(|_| (zero, None)).collect();
        let accs = self.counted_loop(len, init, &mut |g, k, accs| {
            let e = if reverse {
                g.b.build_int_sub(g.i32c(len as u64 - 1), k, "")?
            } else {
                k
            };
            let step = g.b.build_int_mul(e, g.i32c(stride as u64), "")?;
            let first = g.b.build_int_compare(IntPredicate::EQ, k, g.i32c(0), "")?;
            let within = if reverse {
                IntPredicate::SGE
            } else {
                IntPredicate::SLE
            };
            accs.iter()
                .zip(&sites)
                .map(|(acc, (base, pos))| {
                    let at = g.b.build_int_add(*base, step, "")?;
                    let p = g.shared_elem(0, elem, at)?;
                    let v = g.shared_load(p, elem)?;
                    let v = g.cast(v, d, acc_d)?;
                    let combined = g.binary(combine, acc_d, acc.0, v)?;
                    let next = g.b.build_select(first, v, combined, "")?;
                    let take = g.b.build_int_compare(within, e, *pos, "")?;
                    Ok((g.b.build_select(take, next, acc.0, "")?, None))
                })
                .collect()
        })?;
        self.barrier()?;
        let out = accs
            .into_iter()
            .map(|(v, _)| self.cast(v, acc_d, d))
            .collect::<Result<_>>()?;
        self.define(inst.results[0], out);
        Ok(())
    }
}
