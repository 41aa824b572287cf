//! `scan`: one fold per line, in index order (from the end when reversed), into a scratch
//! buffer; the accumulator starts at each line's first element, so results are the
//! interpreter's bit for bit (f16/bf16 accumulate in f32 and round each result).

use super::{Gen, Lv};
use inkwell::IntPredicate;
use tritium_dsl::ir::{Elem, Inst, Op};

impl<'ctx> Gen<'ctx, '_> {
    pub(super) fn scan(&mut self, inst: &Inst) {
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
        let r = inst.results[0];
        let rt = self.ty(r).clone();
        let d = rt.dtype().expect("scans take numbers");
        let acc_d = d.accumulator();
        let out = self.alloc_buf(&rt);
        let slot = self.entry_alloca(self.compute_ty(acc_d));
        let mut lines = rt.shape.clone();
        let len = lines.remove(axis);
        let combine = op.binary();
        self.loop_nest(&lines, &mut |g, line| {
            let line = line.to_vec();
            g.loop_nest(&[len], &mut |g, k| {
                let k = k[0];
                let i = if reverse {
                    g.b.build_int_sub(g.i64c(len as u64 - 1), k, "").unwrap()
                } else {
                    k
                };
                let mut idx = line.clone();
                idx.insert(axis, i);
                let v = g.lane(x, &idx);
                let v = g.cast(v, d, acc_d);
                let acc = g.b.build_load(g.compute_ty(acc_d), slot, "").unwrap();
                let first =
                    g.b.build_int_compare(IntPredicate::EQ, k, g.i64c(0), "")
                        .unwrap();
                let combined = g.binary(combine, acc_d, acc, v);
                let next = g.b.build_select(first, v, combined, "").unwrap();
                g.b.build_store(slot, next).unwrap();
                let result = g.cast(next, acc_d, d);
                let p = g.buf_elem(out, &rt, &idx);
                g.b.build_store(p, g.to_storage(result, Elem::Scalar(d)))
                    .unwrap();
            });
        });
        self.lv.insert(r, Lv::Buf(out));
    }
}
