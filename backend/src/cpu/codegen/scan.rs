//! `scan`: one fold per line, in index order (from the end when reversed), into a scratch
//! buffer; the accumulator starts at each line's first element, so results are the
//! interpreter's bit for bit (f16/bf16 accumulate in f32 and round each result). When the
//! scanned axis is not the last, the lines that share the axis step are folded together:
//! the innermost loop runs over the trailing dims, whose accumulators sit side by side in a
//! scratch row, so LLVM vectorizes the scan across lines without reordering any line's
//! combines.

use super::{Gen, Lv};
use crate::llvm::{Emitter, Result};
use inkwell::IntPredicate;
use tritium_dsl::ir::{Elem, Inst, Op, Type};

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
        let r = inst.results[0];
        let rt = self.ty(r).clone();
        let d = rt.dtype().expect("scans take numbers");
        let acc_d = d.accumulator();
        let out = self.alloc_buf(&rt)?;
        let combine = op.binary();
        let (outer, trailing) = (&rt.shape[..axis], &rt.shape[axis + 1..]);
        let len = rt.shape[axis];
        // One accumulator per trailing position (a single one for the last axis).
        let acc_t = Type::tile(Elem::Scalar(acc_d), trailing.to_vec());
        let accs = self.alloc_buf(&acc_t)?;
        self.loop_nest(outer, &mut |g, o| {
            let o = o.to_vec();
            g.loop_nest(&[len], &mut |g, k| {
                let k = k[0];
                let i = if reverse {
                    g.b.build_int_sub(g.i64c(len as u64 - 1), k, "")?
                } else {
                    k
                };
                let first = g.b.build_int_compare(IntPredicate::EQ, k, g.i64c(0), "")?;
                g.loop_nest(trailing, &mut |g, t| {
                    let mut idx = o.clone();
                    idx.push(i);
                    idx.extend_from_slice(t);
                    let v = g.lane(x, &idx)?;
                    let v = g.cast(v, d, acc_d)?;
                    let slot = g.buf_elem(accs, &acc_t, t)?;
                    let acc = g.b.build_load(g.compute_ty(acc_d), slot, "")?;
                    let combined = g.binary(combine, acc_d, acc, v)?;
                    let next = g.b.build_select(first, v, combined, "")?;
                    g.b.build_store(slot, next)?;
                    let result = g.cast(next, acc_d, d)?;
                    let p = g.buf_elem(out, &rt, &idx)?;
                    g.b.build_store(p, g.to_storage(result, Elem::Scalar(d))?)?;
                    Ok(())
                })
            })
        })?;
        self.lv.insert(r, Lv::Buf(out));
        Ok(())
    }
}
