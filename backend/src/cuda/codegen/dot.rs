//! `dot(a, b, acc)`: `a` and `b`, converted to the accumulator's dtype as a cast would,
//! go to shared memory; each accumulator slot then runs its own `k` loop of `fmuladd`s in
//! k order (integers: wrapping multiply-add). f16/bf16 accumulators add in f32 and round
//! once at the end, as the interpreter does. (Tensor-core `mma` is not used yet.)

use super::Gen;
use inkwell::values::{BasicValueEnum, IntValue};
use tritium_dsl::ir::{BinOp, DType, Elem, Inst, Op};

impl<'ctx> Gen<'ctx, '_> {
    pub(super) fn dot(&mut self, inst: &Inst) {
        let Op::Dot { a, b, acc } = &inst.op else {
            unreachable!()
        };
        let (at, bt) = (self.ty(*a).clone(), self.ty(*b).clone());
        let r = inst.results[0];
        let d = self.ty(r).dtype().expect("dot gives numbers");
        if d.is_bool() {
            self.fail(format!(
                "at {}: dot with a bool accumulator is not supported on CUDA",
                inst.loc
            ));
            return;
        }
        let from = at.dtype().expect("dot takes numbers");
        let (m, k, n) = (at.shape[0], at.shape[1], bt.shape[1]);
        let elem = Elem::Scalar(d);
        let size = self.shared_size(elem);
        let b_offset = (m * k * size).div_ceil(16) * 16;
        self.reserve_shared(b_offset + k * n * size);
        for (x, offset, numel) in [(*a, 0, m * k), (*b, b_offset, k * n)] {
            let slots = self.tile_slots(x, numel);
            for (j, s) in slots.into_iter().enumerate() {
                let ok = self.valid(numel, j);
                let v = self.cast(s, from, d);
                self.when(ok, &mut |g| {
                    let lin = g.lin(numel, j);
                    let p = g.shared_elem(offset, elem, lin);
                    g.shared_store(p, v, elem);
                });
            }
        }
        self.barrier();
        let numel = m * n;
        let init = self.tile_slots(*acc, numel);
        let rows_cols: Vec<(IntValue<'ctx>, IntValue<'ctx>)> = (0..init.len())
            .map(|j| {
                let lin = self.clamped_lin(numel, j);
                let idx = self.unravel(&[m, n], lin);
                let row = self
                    .b
                    .build_int_mul(idx[0], self.i32c(k as u64), "")
                    .unwrap();
                (row, idx[1])
            })
            .collect();
        let init = init.into_iter().map(|v| (v, None)).collect();
        let accs = self.counted_loop(k, init, &mut |g, kk, accs| {
            let b_row = g.b.build_int_mul(kk, g.i32c(n as u64), "").unwrap();
            accs.iter()
                .zip(&rows_cols)
                .map(|((acc, _), (row, col))| {
                    let ai = g.b.build_int_add(*row, kk, "").unwrap();
                    let bi = g.b.build_int_add(b_row, *col, "").unwrap();
                    let pa = g.shared_elem(0, elem, ai);
                    let pb = g.shared_elem(b_offset, elem, bi);
                    let (x, y) = (g.shared_load(pa, elem), g.shared_load(pb, elem));
                    (g.multiply_add(d, x, y, *acc), None)
                })
                .collect()
        });
        self.barrier();
        let out = accs.into_iter().map(|(v, _)| self.round_to(v, d)).collect();
        self.define(r, out);
    }

    /// `x * y + acc` without intermediate rounding of halves.
    fn multiply_add(
        &mut self,
        d: DType,
        x: BasicValueEnum<'ctx>,
        y: BasicValueEnum<'ctx>,
        acc: BasicValueEnum<'ctx>,
    ) -> BasicValueEnum<'ctx> {
        if d.is_float() {
            let t = self.compute_ty(d);
            return self.intrinsic("llvm.fmuladd", &[t], &[x, y, acc]);
        }
        let p = self.binary(BinOp::Mul, d, x, y);
        self.binary(BinOp::Add, d, p, acc)
    }
}
