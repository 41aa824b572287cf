//! Transposes of loaded tiles as loads of the transposed block.
//!
//! Triton's attention takes `kᵀ` as `desc_k.load([y, 0]).T` (or `tl.trans(tl.load(...))`):
//! a row-major block loaded, then transposed. As written, the GPU code generators see a
//! `permute` of a loaded tile as a `dot` operand: not a load they can copy to shared
//! memory asynchronously (`cp.async`, TMA) and pipeline. [`sink_transposes`] rewrites a
//! 2-D `permute(load(ptrs, mask, other), [1, 0])` whose load has no other use into
//! `load(ptrsᵀ, maskᵀ, otherᵀ)`, with the transposed operands computed by the same
//! elementwise ops from transposed inputs (a splat, constant or arange-derived index
//! transposes to its own transposed shape), so that the pointers stay an index expression
//! (`base + (arange + off)·stride` per dim): the load of a block whose columns lie
//! contiguous, which Triton's layouts give the same shared-memory tile. A load whose
//! operands are not all elementwise in such inputs (a carried pointer tile, say) keeps its
//! `permute`: permuting its pointers would cost more than permuting its values.
//!
//! The load stays where it was (fault sites keep their numbers and kinds); it reads the
//! same elements through the same mask, so results are the same bit for bit.

use super::{Block, Function, Inst, Loc, Op, Type, Value};
use std::collections::HashMap;

/// `f` with each transposed single-use 2-D load loading the transposed block instead (see
/// the module docs), or `None` when `f` has none.
pub fn sink_transposes(f: &Function) -> Option<Function> {
    let defs = f.defs();
    // Load result → the transpose that is its only use.
    let mut sunk = HashMap::new();
    f.walk(&mut |i| {
        if let Op::Permute { x, dims } = &i.op {
            let load = defs.get(x).filter(|d| d.results.len() == 1);
            let operands = match load.map(|d| &d.op) {
                Some(Op::Load {
                    ptr, mask, other, ..
                }) => Some([Some(*ptr), *mask, *other]),
                _ => None,
            };
            // Only where every operand transposes without a `permute` of its own (a
            // permuted pointer tile costs more than the permuted values it replaces).
            let elementwise = operands.is_some_and(|o| {
                o.iter()
                    .flatten()
                    .all(|v| transposes_elementwise(f, &defs, *v, 0))
            });
            if dims == &[1, 0] && elementwise && f.ty(*x).rank() == 2 && f.uses(*x) == 1 {
                sunk.insert(*x, i.results[0]);
            }
        }
    });
    if sunk.is_empty() {
        return None;
    }
    let defs: HashMap<Value, Inst> = defs.into_iter().map(|(v, i)| (v, i.clone())).collect();
    let mut out = f.clone();
    let mut rewrite = Rewrite {
        types: std::mem::take(&mut out.types),
        defs,
        sunk,
    };
    let mut body = std::mem::take(&mut out.body);
    rewrite.block(&mut body);
    out.body = body;
    out.types = rewrite.types;
    Some(out)
}

/// Whether [`Rewrite::transposed`] transposes `v` by elementwise ops alone (no `permute`
/// but of an already transposed value).
fn transposes_elementwise(
    f: &Function,
    defs: &HashMap<Value, &Inst>,
    v: Value,
    depth: usize,
) -> bool {
    let ty = f.ty(v);
    if ty.rank() != 2 {
        return true;
    }
    let Some(def) = defs.get(&v).filter(|_| depth < 64) else {
        return false;
    };
    let rank = |x: &Value| f.ty(*x).rank();
    let go = |x: &Value| transposes_elementwise(f, defs, *x, depth + 1);
    match &def.op {
        Op::Permute { dims, .. } => dims == &[1, 0],
        Op::Splat(_) | Op::Const(_) => true,
        Op::Broadcast(x) => rank(x) < 2 || go(x),
        Op::ExpandDims { x, .. } => rank(x) == 1,
        Op::Reshape(_) => ty.shape.contains(&1),
        Op::Hint { x, .. } => go(x),
        op if op.is_pointwise() => op.operands().iter().all(go),
        _ => false,
    }
}

struct Rewrite {
    types: Vec<Type>,
    /// Every value's defining instruction in the original function.
    defs: HashMap<Value, Inst>,
    sunk: HashMap<Value, Value>,
}

impl Rewrite {
    fn block(&mut self, block: &mut Block) {
        let insts = std::mem::take(&mut block.insts);
        for mut inst in insts {
            for region in inst.op.regions_mut() {
                self.block(region);
            }
            match &mut inst.op {
                // The transpose is the load's result now.
                Op::Permute { x, .. } if self.sunk.contains_key(x) => {}
                Op::Load {
                    ptr, mask, other, ..
                } if self.sunk.contains_key(&inst.results[0]) => {
                    // Transposed per load: what one load's operands need is computed
                    // where that load is, so every new value dominates its uses.
                    let mut memo = HashMap::new();
                    let mut before = Vec::new();
                    let loc = inst.loc.clone();
                    for v in std::iter::once(ptr).chain(mask).chain(other) {
                        *v = self.transposed(*v, &loc, &mut memo, &mut before);
                    }
                    inst.results[0] = self.sunk[&inst.results[0]];
                    block.insts.extend(before);
                    block.insts.push(inst);
                }
                _ => block.insts.push(inst),
            }
        }
    }

    fn new_value(&mut self, ty: Type) -> Value {
        self.types.push(ty);
        Value(self.types.len() as u32 - 1)
    }

    /// `v`'s 2-D transpose (`v` itself where it is not 2-D: a scalar operand), its
    /// instructions appended to `to`.
    fn transposed(
        &mut self,
        v: Value,
        loc: &Loc,
        memo: &mut HashMap<Value, Value>,
        to: &mut Vec<Inst>,
    ) -> Value {
        let ty = self.types[v.index()].clone();
        if ty.rank() != 2 {
            return v;
        }
        if let Some(t) = memo.get(&v) {
            return *t;
        }
        let flipped = Type::tile(ty.elem, vec![ty.shape[1], ty.shape[0]]);
        let def = self.defs.get(&v).map(|i| i.op.clone());
        let op = match def {
            Some(Op::Permute { x, dims }) if dims == [1, 0] => {
                memo.insert(v, x);
                return x;
            }
            Some(op @ (Op::Splat(_) | Op::Const(_))) => op,
            Some(Op::Broadcast(x)) => {
                let x = match self.types[x.index()].rank() {
                    // `[n]` broadcasts along the rows: transposed, along the columns.
                    1 => {
                        let n = self.types[x.index()].shape[0];
                        let column = Type::tile(self.types[x.index()].elem, vec![n, 1]);
                        let col = self.new_value(column);
                        to.push(inst_of(Op::ExpandDims { x, axis: 1 }, col, loc));
                        col
                    }
                    _ => self.transposed(x, loc, memo, to),
                };
                Op::Broadcast(x)
            }
            Some(Op::ExpandDims { x, axis }) if self.types[x.index()].rank() == 1 => {
                Op::ExpandDims { x, axis: 1 - axis }
            }
            // `[n, 1]` and `[1, n]` hold their elements in the same order.
            Some(Op::Reshape(x)) if ty.shape.contains(&1) => Op::Reshape(x),
            Some(Op::Hint { x, kind, values }) => {
                let mut values = values.clone();
                values.reverse();
                let x = self.transposed(x, loc, memo, to);
                Op::Hint { x, kind, values }
            }
            Some(mut op) if op.is_pointwise() => {
                for o in op.operands_mut() {
                    *o = self.transposed(*o, loc, memo, to);
                }
                op
            }
            // Not reached where `transposes_elementwise` holds; correct all the same.
            _ => Op::Permute {
                x: v,
                dims: vec![1, 0],
            },
        };
        let t = self.new_value(flipped);
        to.push(inst_of(op, t, loc));
        memo.insert(v, t);
        t
    }
}

fn inst_of(op: Op, result: Value, loc: &Loc) -> Inst {
    Inst {
        results: vec![result],
        op,
        loc: loc.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{parse_function, print_function, verify};

    /// `kᵀ` of an `8 × 4` block at row `%2` of a row-major `[n, 4]` tensor, masked to its
    /// `n` rows: `permute(load(k + (arange(8)[:, None] + %2)·4 + arange(4)[None, :]))`.
    const TRANSPOSED_LOAD: &str = r#"kernel @k(k %0: ptr<f16>, out %1: ptr<f16>, y %2: i32, n %3: i32) {
      %4 = arange {start = 0, end = 8} : tile<8xi32> loc("k.rs":1:1)
      %5 = splat %2 : tile<8xi32> loc("k.rs":1:1)
      %6 = add %4, %5 : tile<8xi32> loc("k.rs":1:1)
      %7 = expand_dims %6 {axis = 1} : tile<8x1xi32> loc("k.rs":1:1)
      %8 = const {value = 4} : tile<8x1xi32> loc("k.rs":1:1)
      %9 = mul %7, %8 : tile<8x1xi32> loc("k.rs":1:1)
      %10 = arange {start = 0, end = 4} : tile<4xi32> loc("k.rs":1:1)
      %11 = expand_dims %10 {axis = 0} : tile<1x4xi32> loc("k.rs":1:1)
      %12 = broadcast %9 : tile<8x4xi32> loc("k.rs":1:1)
      %13 = broadcast %11 : tile<8x4xi32> loc("k.rs":1:1)
      %14 = add %12, %13 : tile<8x4xi32> loc("k.rs":1:1)
      %15 = splat %0 : tile<8x4xptr<f16>> loc("k.rs":1:1)
      %16 = addptr %15, %14 : tile<8x4xptr<f16>> loc("k.rs":1:1)
      %17 = splat %3 : tile<8x1xi32> loc("k.rs":1:1)
      %18 = cmp %7, %17 {pred = lt} : tile<8x1xbool> loc("k.rs":1:1)
      %19 = broadcast %18 : tile<8x4xbool> loc("k.rs":1:1)
      %20 = load %16, mask = %19 : tile<8x4xf16> loc("k.rs":2:1)
      %21 = permute %20 {dims = 1x0} : tile<4x8xf16> loc("k.rs":3:1)
      %22 = arange {start = 0, end = 8} : tile<8xi32> loc("k.rs":1:1)
      %23 = broadcast %22 : tile<4x8xi32> loc("k.rs":1:1)
      %24 = splat %1 : tile<4x8xptr<f16>> loc("k.rs":1:1)
      %25 = addptr %24, %23 : tile<4x8xptr<f16>> loc("k.rs":1:1)
      store %25, %21 loc("k.rs":4:1)
    }"#;

    #[test]
    fn a_transposed_load_loads_the_transposed_block() {
        let f = parse_function(TRANSPOSED_LOAD).unwrap();
        verify(&f).unwrap();
        let g = sink_transposes(&f).expect("rewritten");
        let text = print_function(&g);
        verify(&g).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(f.fault_sites(), g.fault_sites(), "{text}");
        // No permute is left: the pointers, the mask and the load are 4 × 8 now.
        assert!(!text.contains("permute"), "{text}");
        let load = text.lines().find(|l| l.contains("= load ")).unwrap();
        assert!(load.trim_start().starts_with("%21 = load"), "{text}");
        assert!(load.contains(": tile<4x8xf16>"), "{text}");
        // The row index `[8, 1]` became a `[1, 8]` one; the column index's `[1, 4]` a
        // `[4, 1]`.
        assert!(text.contains("{axis = 0} : tile<1x8xi32>"), "{text}");
        assert!(text.contains("{axis = 1} : tile<4x1xi32>"), "{text}");
    }

    /// A load with another use, or a transpose of something not loaded, is left alone.
    #[test]
    fn other_transposes_are_kept() {
        let shared = TRANSPOSED_LOAD.replace(
            "store %25, %21 loc(\"k.rs\":4:1)",
            "store %25, %21 loc(\"k.rs\":4:1)\n      store %16, %20 loc(\"k.rs\":5:1)",
        );
        let f = parse_function(&shared).unwrap();
        assert!(sink_transposes(&f).is_none());
        // Offsets that are not elementwise in index tiles (a flip here): the load keeps
        // its transpose.
        let flipped = TRANSPOSED_LOAD.replace(
            "%16 = addptr %15, %14 : tile<8x4xptr<f16>> loc(\"k.rs\":1:1)",
            "%26 = flip %14 {axis = 0} : tile<8x4xi32> loc(\"k.rs\":1:1)\n      \
             %16 = addptr %15, %26 : tile<8x4xptr<f16>> loc(\"k.rs\":1:1)",
        );
        let f = parse_function(&flipped).unwrap();
        verify(&f).unwrap();
        assert!(sink_transposes(&f).is_none());
        let computed = TRANSPOSED_LOAD.replace(
            "%21 = permute %20",
            "%26 = add %20, %20 : tile<8x4xf16> loc(\"k.rs\":1:1)\n      %21 = permute %26",
        );
        let f = parse_function(&computed).unwrap();
        assert!(sink_transposes(&f).is_none());
    }
}
