//! Custom calls: the shipped `__builtin_*` ops and the Simt, Simd and Mix ops that
//! `tritium-kernels` registers (its C++ in `kernels/csrc/add.cpp`). Calls are resolved by
//! [`plan_call`], as the tracer resolves them, so a generated call is one a kernel could
//! make.
//!
//! Builtins read only inside the buffers they are given: a gather's `bound` and an index
//! select's rows stay inside the input, an indirect atomic's `dst` is the program's own
//! region (injective indices, some pushed out of range) or the shared integer buffer.

use super::{Gen, Need, REGION};
use tritium_dsl::custom::{plan_call, CustomArgs, CustomOptions};
use tritium_dsl::ir::{
    AsmOperand, BinOp, CmpPred, CustomCall, DType, InlineAsm, Op, Type, UnOp, Value,
};

/// The registered ops of `tritium-kernels` the generator calls (each with the dtypes and
/// ranks its C++ implements).
pub const KERNEL_OPS: &[&str] = &[
    "add",
    "add_simt",
    "add_mix",
    "add_mix_simd",
    "divmod",
    "divmod_simd",
    "add_sub",
    "scale",
    "add_reversed",
    "cumsum",
    "widen_mul",
];

impl Gen {
    /// A value of `d` with `shape` computed by a custom call, or `None` when no op makes it.
    pub(super) fn custom_into(&mut self, d: DType, shape: &[usize], need: Need) -> Option<Value> {
        let rank = shape.len();
        let mut ops: Vec<&str> = Vec::new();
        if matches!(d, DType::I32 | DType::F32 | DType::F16) {
            ops.extend(["add_simt", "add_mix"]);
            if rank == 1 {
                ops.extend(["add", "add_mix_simd"]);
            }
        }
        if matches!(d, DType::I32 | DType::I64 | DType::F32 | DType::F16) {
            ops.push("add_sub");
        }
        if d == DType::I32 {
            ops.extend(["divmod", "widen_mul"]);
            if rank == 1 {
                ops.extend(["divmod_simd", "__builtin_histogram"]);
            }
        }
        if matches!(d, DType::I32 | DType::F32) && matches!(rank, 1 | 2) {
            ops.push("scale");
        }
        if matches!(d, DType::I32 | DType::F32) && rank == 1 {
            ops.push("add_reversed");
        }
        if d == DType::F32 && rank == 1 {
            ops.push("cumsum");
        }
        if rank >= 1 && !d.is_bool() && self.inputs.iter().any(|b| b.dtype == d) {
            ops.push("__builtin_gather_load");
            if rank == 2 {
                ops.push("__builtin_index_select");
            }
        }
        if ops.is_empty() {
            return None;
        }
        let name = *self.rng.pick(&ops);
        // Operands are exact; floats that feed a sum or a product stay small integers.
        let half = Need {
            exact: true,
            bound: need.bound.map(|b| (b / 2.0).floor()),
        };
        let v = match name {
            "add" | "add_simt" | "add_mix" | "add_mix_simd" | "add_reversed" => {
                let a = self.call_input(name, d, shape, half);
                let b = self.call_input(name, d, shape, half);
                let out = self.out_tile(d, shape);
                // `add_simt` is also the fallback of an `inline_asm_elementwise` add, whose
                // PTX CUDA hardware runs: a GPU run compares the asm with the C++.
                let asm = if name == "add_simt" && self.rng.chance(0.3) {
                    Some(self.add_asm(d, shape.iter().product(), 1))
                } else {
                    None
                };
                self.call_with(name, &[a, b], &[out], asm)[0]
            }
            "add_sub" => {
                let a = self.value(d, shape, half);
                let b = self.value(d, shape, half);
                let (s, t) = (self.out_tile(d, shape), self.out_tile(d, shape));
                // Mostly the fallback of an `inline_asm_elementwise` call with two results.
                let asm = if self.rng.chance(0.7) {
                    Some(self.add_asm(d, shape.iter().product(), 2))
                } else {
                    None
                };
                let res = self.call_with(name, &[a, b], &[s, t], asm);
                *self.rng.pick(&res)
            }
            "divmod" | "divmod_simd" => {
                let a = self.call_input(name, d, shape, Need::EXACT);
                let b = self.call_input(name, d, shape, Need::EXACT);
                let (q, r) = (self.out_tile(d, shape), self.out_tile(d, shape));
                let res = self.call(name, &[a, b], &[q, r]);
                *self.rng.pick(&res)
            }
            "scale" => {
                let x = self.call_input(name, d, shape, half);
                let out = self.out_tile(d, shape);
                self.call(name, &[x], &[out])[0]
            }
            "cumsum" => {
                let x = self.call_input(name, d, shape, Need::EXACT);
                let out = self.out_tile(d, shape);
                self.call(name, &[x], &[out])[0]
            }
            "widen_mul" => {
                let from = *self.rng.pick(&[DType::I8, DType::I32]);
                let a = self.value(from, shape, Need::EXACT);
                let b = self.value(from, shape, Need::EXACT);
                let out = self.out_tile(d, shape);
                self.call(name, &[a, b], &[out])[0]
            }
            "__builtin_histogram" => {
                let at = self.tile_shape(2);
                let values = self.index_tile(&at, 2 * shape[0]);
                let bins = self.value(d, shape, Need::EXACT);
                self.call(name, &[values], &[bins])[0]
            }
            "__builtin_gather_load" => self.gather(d, shape, need),
            _ => self.index_select(d, shape, need),
        };
        Some(v)
    }

    /// An input of a call of `name`: for the ops that run once per program (Simd), often
    /// a load of an input buffer, which the CPU may hand to the C++ in place.
    fn call_input(&mut self, name: &str, d: DType, shape: &[usize], need: Need) -> Value {
        let per_program = matches!(
            name,
            "add" | "add_mix_simd" | "add_reversed" | "divmod_simd" | "scale" | "cumsum"
        );
        if per_program && self.rng.chance(0.5) {
            self.load_input(d, shape, need)
        } else {
            self.value(d, shape, need)
        }
    }

    /// A custom call statement: an indirect atomic on the program's own atomics region or
    /// on the shared integer buffer.
    pub(super) fn indirect_atomic(&mut self) {
        // The builtin has no bitwise atomics, and none on 16-bit elements.
        let shared_ok = self.shared.is_some() && !self.shared_op.bitwise();
        let own: Vec<usize> = (0..self.atomics.len())
            .filter(|&k| self.atomics[k].dtype.size_bytes() >= 4)
            .collect();
        if !shared_ok && own.is_empty() {
            return;
        }
        let shared = shared_ok && (own.is_empty() || self.rng.chance(0.4));
        let shape = self.tile_shape(2);
        let numel: usize = shape.iter().product();
        let (dst, d, index, bound, kind) = if shared {
            let b = self.shared.as_ref().expect("checked");
            let (ptr, d, len) = (b.ptr, b.dtype, b.len);
            // The buffer's one order-free integer op; any lanes may collide.
            let index = self.index_tile(&shape, len + 2);
            let bound = self.bound_scalar(len);
            let kind = tritium_backend::builtins::AtomicKind::from_op(self.shared_op)
                .expect("not bitwise")
                .code() as i128;
            (ptr, d, index, bound, kind)
        } else {
            let k = *self.rng.pick(&own);
            let (ptr, d) = (self.atomics[k].ptr, self.atomics[k].dtype);
            let base = self.base.expect("set up first");
            let dst = self.push1(Op::AddPtr(ptr, base), self.ty(ptr).clone());
            // Distinct lanes of the region: in-order and out-of-order devices agree.
            let mut index = self.lane_offsets(&shape);
            if self.rng.chance(0.5) {
                let off = self.value(DType::Bool, &shape, Need::EXACT);
                let bad = *self.rng.pick(&[-1, REGION as i128, i32::MIN as i128]);
                let bad = self.int_const(DType::I32, &shape, bad);
                let t = self.ty(index).clone();
                index = self.push1(Op::Select(off, bad, index), t);
            }
            if self.rng.chance(0.5) {
                index = self.cast(index, DType::I64);
            }
            let bound = *self.rng.pick(&[REGION, numel, numel / 2]);
            let bound = self.bound_scalar(bound);
            // 0 add, 1 max, 2 min, 3 xchg; an unknown kind does nothing.
            let kind = *self.rng.pick(&[0, 1, 2, 3, 0, 7]);
            (dst, d, index, bound, kind)
        };
        let need = Need {
            exact: true,
            bound: d.is_float().then_some(1024.0),
        };
        let value = self.value(d, &shape, need);
        let kind = self.int_const(DType::I32, &[], kind);
        let out = self.value(d, &shape, Need::EXACT);
        self.call(
            "__builtin_indirect_atomic",
            &[dst, index, value, bound, kind],
            &[out],
        );
    }

    fn gather(&mut self, d: DType, shape: &[usize], need: Need) -> Value {
        let src = self.input_of(d);
        let len = self.inputs[src].len;
        let ptr = self.inputs[src].ptr;
        let index = self.index_tile(shape, len + len / 4);
        let bound = *self.rng.pick(&[len, len, len / 2, 1, 0]);
        let bound = self.bound_scalar(bound);
        // Lanes out of range keep the out tile's value.
        let out = self.value(d, shape, need);
        self.call("__builtin_gather_load", &[ptr, index, bound], &[out])[0]
    }

    fn index_select(&mut self, d: DType, shape: &[usize], need: Need) -> Value {
        let src = self.input_of(d);
        let (len, ptr) = (self.inputs[src].len, self.inputs[src].ptr);
        let (rows, width) = (shape[0], shape[1]);
        let out = self.value(d, shape, need);
        if width > len {
            return out;
        }
        // Every selected row `i < num_rows` reads `i * stride + 0..width` inside the input.
        let stride = *self.rng.pick(&[0, 1, width, width, width + 1, 2 * width]);
        // A zero stride reads row 0 whatever the index: any number of rows.
        let max_rows = (len - width).checked_div(stride).map_or(8, |r| r + 1);
        let num_rows = self.rng.range(1, max_rows as i64) as usize;
        let index = self.index_tile(&[rows], num_rows + 2);
        let stride = self.bound_scalar(stride);
        let num_rows = self.bound_scalar(num_rows);
        self.call(
            "__builtin_index_select",
            &[ptr, index, stride, num_rows],
            &[out],
        )[0]
    }

    /// A random shape of rank 1 to `max_rank`.
    fn tile_shape(&mut self, max_rank: usize) -> Vec<usize> {
        let s = self.random_shape(max_rank);
        if s.is_empty() {
            vec![*self.rng.pick(&self.dims)]
        } else {
            s
        }
    }

    /// An input buffer of `d` (one exists).
    fn input_of(&mut self, d: DType) -> usize {
        let of: Vec<usize> = (0..self.inputs.len())
            .filter(|i| self.inputs[*i].dtype == d)
            .collect();
        *self.rng.pick(&of)
    }

    /// An i32 or i64 index tile: mostly in `0..range`, some lanes negative or far out.
    pub(super) fn index_tile(&mut self, shape: &[usize], range: usize) -> Value {
        let x = self.value(DType::I32, shape, Need::EXACT);
        let x = if self.rng.chance(0.7) {
            let r = self.int_const(DType::I32, shape, range.max(1) as i128);
            let m = self.binary(BinOp::Rem, x, r);
            if self.rng.chance(0.5) {
                // Mostly non-negative: |x % range|.
                let zero = self.int_const(DType::I32, shape, 0);
                let neg = self.cmp(CmpPred::Lt, m, zero);
                let t = self.ty(m).clone();
                let flipped = self.push1(Op::Unary(UnOp::Neg, m), t.clone());
                self.push1(Op::Select(neg, flipped, m), t)
            } else {
                m
            }
        } else {
            x
        };
        if self.rng.chance(0.4) {
            self.cast(x, DType::I64)
        } else {
            x
        }
    }

    /// An integer scalar holding `v`, in a random integer dtype wide enough for it.
    fn bound_scalar(&mut self, v: usize) -> Value {
        let d = *self
            .rng
            .pick(&[DType::I32, DType::I64, DType::U32, DType::I16, DType::U64]);
        self.int_const(d, &[], v as i128)
    }

    /// An out tile whose initial value the call overwrites.
    fn out_tile(&mut self, d: DType, shape: &[usize]) -> Value {
        if self.rng.chance(0.5) {
            self.int_const(d, shape, 0)
        } else {
            self.value(d, shape, Need::EXACT)
        }
    }

    /// Emits the call `name(ins, outs)` the way the tracer does (dtype overrides, 1-D
    /// flattening and the reshape back); returns one result per out.
    fn call(&mut self, name: &str, ins: &[Value], outs: &[Value]) -> Vec<Value> {
        self.call_with(name, ins, outs, None)
    }

    /// [`call`](Self::call) carrying `inline_asm_elementwise`'s asm.
    fn call_with(
        &mut self,
        name: &str,
        ins: &[Value],
        outs: &[Value],
        inline_asm: Option<InlineAsm>,
    ) -> Vec<Value> {
        let args = CustomArgs {
            name: name.into(),
            ins: ins.iter().map(|v| self.ty(*v).clone()).collect(),
            outs: outs.iter().map(|v| self.ty(*v).clone()).collect(),
        };
        let plan = plan_call(&args, CustomOptions::default())
            .unwrap_or_else(|e| panic!("generator: custom `{name}` rejected {args:?}: {e}"));
        let mut ins = ins.to_vec();
        for &(i, d) in &plan.arg_dtypes {
            ins[i] = self.cast(ins[i], d);
        }
        for &i in &plan.flatten_ins {
            ins[i] = self.flat(ins[i]);
        }
        let call_outs: Vec<Value> = if plan.flatten_outs {
            outs.iter().map(|v| self.flat(*v)).collect()
        } else {
            outs.to_vec()
        };
        let types: Vec<Type> = call_outs.iter().map(|v| self.ty(*v).clone()).collect();
        let call = CustomCall {
            name: name.into(),
            attrs: plan.attrs,
            ins,
            outs: call_outs,
            extra: plan.extra,
            inline_asm,
        };
        let results = self.push(Op::Custom(Box::new(call)), types);
        results
            .into_iter()
            .zip(outs)
            .map(|(r, out)| {
                let want = self.ty(*out).clone();
                if *self.ty(r) == want {
                    r
                } else {
                    self.push1(Op::Reshape(r), want)
                }
            })
            .collect()
    }

    fn flat(&mut self, v: Value) -> Value {
        let t = self.ty(v).clone();
        if t.rank() == 1 {
            return v;
        }
        self.push1(Op::Reshape(v), t.with_shape(vec![t.numel()]))
    }
}

impl Gen {
    /// The PTX of `add_simt` (`results = 1`: `a + b`) or `add_sub` (`2`: `a + b`, `a - b`)
    /// on `d` (i32, i64, f32, f16) over `numel` elements: `pack` 1, 2, 4 or 8 where `numel`
    /// allows, each operand in Triton's registers (`AsmOperand`): f16 pairs in one 32-bit
    /// register (`h` one by one), f32 in `f` or `r`, i64 in `l`, several registers per
    /// operand where `pack` exceeds one register's elements.
    fn add_asm(&mut self, d: DType, numel: usize, results: usize) -> InlineAsm {
        let packs: Vec<u32> = [1, 2, 4, 8]
            .into_iter()
            .filter(|p| numel.is_multiple_of(*p as usize))
            .collect();
        let pack = *self.rng.pick(&packs);
        let o = AsmOperand::of(d, pack);
        let (suffix, letter) = match (d, o.per_register) {
            (DType::I32, _) => ("s32", "r"),
            (DType::I64, _) => ("s64", "l"),
            (DType::F32, _) => ("rn.f32", *self.rng.pick(&["f", "r"])),
            (_, 1) => ("rn.f16", "h"),
            _ => ("rn.f16x2", "r"),
        };
        let regs = o.registers;
        let (a, b) = (results * regs, results * regs + regs);
        let mut asm = Vec::new();
        for (k, op) in ["add", "sub"].iter().take(results).enumerate() {
            for r in 0..regs {
                let out = k * regs + r;
                asm.push(format!("{op}.{suffix} ${out}, ${}, ${};", a + r, b + r));
            }
        }
        let outs = vec![format!("={letter}"); results * regs];
        let ins = vec![letter.to_string(); 2 * regs];
        InlineAsm {
            asm: asm.join(" "),
            constraints: [outs, ins].concat().join(","),
            pack,
            pure: true,
        }
    }
}
