//! `dot(a, b, acc)`: operands in scratch buffers, then an i-k-j loop nest whose innermost
//! loop LLVM vectorizes with FMAs.

use super::{Gen, Lv};
use inkwell::values::IntValue;
use tritium_dsl::ir::{Elem, Inst, Op};

impl<'ctx> Gen<'ctx, '_> {
    pub(super) fn dot(&mut self, inst: &Inst) {
        let Op::Dot { a, b, acc } = &inst.op else {
            unreachable!()
        };
        let (a, b, acc) = (*a, *b, *acc);
        let at = self.ty(a).clone();
        let bt = self.ty(b).clone();
        let r = inst.results[0];
        let rt = self.ty(r).clone();
        let (m, k, n) = (at.shape[0], at.shape[1], bt.shape[1]);
        let da = at.dtype().expect("numbers");
        let dr = rt.dtype().expect("numbers");
        let abuf = self.as_buf(a);
        let bbuf = self.as_buf(b);
        let c = self.alloc_buf(&rt);
        self.fill_buf(c, &rt, acc);
        let rs = self.storage_ty(dr);
        let is_float = dr.is_float();
        self.loop_nest(&[m, k], &mut |g, ik| {
            let (i, kk) = (ik[0], ik[1]);
            let ap = g.buf_elem(abuf, &at, &[i, kk]);
            let av = g.b.build_load(g.storage_ty(da), ap, "").unwrap();
            let av = g.decode_storage(av, Elem::Scalar(da));
            let av = g.cast(av, da, dr);
            g.loop_nest(&[n], &mut |g, jv: &[IntValue<'ctx>]| {
                let j = jv[0];
                let bp = g.buf_elem(bbuf, &bt, &[kk, j]);
                let bv = g.b.build_load(g.storage_ty(da), bp, "").unwrap();
                let bv = g.decode_storage(bv, Elem::Scalar(da));
                let bv = g.cast(bv, da, dr);
                let cp = g.buf_elem(c, &rt, &[i, j]);
                let cv = g.b.build_load(rs, cp, "").unwrap();
                let cv = g.decode_storage(cv, Elem::Scalar(dr));
                let nv = if is_float {
                    let t = g.compute_ty(dr);
                    let v = g.intrinsic("llvm.fmuladd", &[t], &[av, bv, cv]);
                    g.round_to(v, dr)
                } else {
                    let p =
                        g.b.build_int_mul(av.into_int_value(), bv.into_int_value(), "")
                            .unwrap();
                    g.b.build_int_add(p, cv.into_int_value(), "")
                        .unwrap()
                        .into()
                };
                g.b.build_store(cp, g.to_storage(nv, Elem::Scalar(dr)))
                    .unwrap();
            });
        });
        self.lv.insert(r, Lv::Buf(c));
    }
}
