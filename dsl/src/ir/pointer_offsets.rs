//! Loop-carried pointer tiles that advance by a scalar, as a base tile plus a carried
//! offset.
//!
//! Triton's tutorial 03 moves its operand pointers with `a_ptrs += BLOCK_K * stride_ak` at
//! every iteration. Carried as it is written, such a tile holds one 64-bit address per
//! element across the loop, adds to each at every iteration, and is no index expression: a
//! GPU code generator cannot compute its elements at any lane, so the loads it feeds are
//! neither copied by `cp.async` nor pipelined. [`carry_pointer_offsets`] rewrites it: the
//! loop carries one i64 scalar instead (the sum of the steps so far, from 0) and the tile
//! is its initial value plus that offset, an index expression wherever the initial tile is
//! one (Triton's pointers as "a base plus offsets"; the offset is an induction the
//! pipeliner advances).
//!
//! Memory ops are neither added, removed nor reordered, so fault sites
//! ([`Function::fault_sites`]) keep their numbers; results are the same bit for bit
//! (addresses wrap as the adds did).

use super::{BinOp, Block, Const, DType, Function, Inst, Loc, Op, Type, Value};
use std::collections::{HashMap, HashSet};

/// `f` with every carried pointer tile of a `for` loop that is yielded as itself plus a
/// splat scalar carried as a scalar offset instead (see the module docs), or `None` when
/// no loop has one.
pub fn carry_pointer_offsets(f: &Function) -> Option<Function> {
    // Most kernels carry no pointer tile: no copy for them (this runs at every compile).
    let mut carries_pointers = false;
    f.walk(&mut |i| {
        if let Op::For { body, .. } = &i.op {
            carries_pointers |= body.args.iter().skip(1).any(|a| {
                let t = f.ty(*a);
                !t.is_scalar() && t.elem.pointee().is_some()
            });
        }
    });
    if !carries_pointers {
        return None;
    }
    let mut out = f.clone();
    let mut splats = HashMap::new();
    let mut used = HashSet::new();
    f.walk(&mut |i| {
        if let Op::Splat(s) = i.op {
            splats.insert(i.results[0], s);
        }
        used.extend(i.op.operands());
    });
    let mut rewrite = Rewrite {
        types: std::mem::take(&mut out.types),
        splats,
        used,
        changed: false,
    };
    let mut body = std::mem::take(&mut out.body);
    rewrite.block(&mut body);
    out.body = body;
    out.types = rewrite.types;
    rewrite.changed.then_some(out)
}

struct Rewrite {
    types: Vec<Type>,
    /// The scalar each splat of the function splats.
    splats: HashMap<Value, Value>,
    /// The values some op of the function uses.
    used: HashSet<Value>,
    changed: bool,
}

/// A carried value `j` of a loop that the rewrite takes: its step and where that is defined.
struct Advance {
    j: usize,
    /// The scalar added at every iteration.
    step: Value,
    /// The step is defined before the loop (its i64 value can be too).
    invariant: bool,
}

impl Rewrite {
    fn new_value(&mut self, ty: Type) -> Value {
        self.types.push(ty);
        Value(self.types.len() as u32 - 1)
    }

    fn block(&mut self, block: &mut Block) {
        let insts = std::mem::take(&mut block.insts);
        for mut inst in insts {
            for region in inst.op.regions_mut() {
                self.block(region);
            }
            let advances = match &inst.op {
                Op::For { init, body, .. } => self.advances(init, body),
                _ => Vec::new(),
            };
            if advances.is_empty() {
                block.insts.push(inst);
                continue;
            }
            self.changed = true;
            let mut after = Vec::new();
            for a in advances {
                self.rewrite(&mut inst, a, &mut block.insts, &mut after);
            }
            block.insts.push(inst);
            block.insts.extend(after);
        }
    }

    /// The carried pointer tiles of a loop yielded as `arg + splat(step)`, `step` a scalar
    /// integer, the sum defined at the top level of the body.
    fn advances(&self, init: &[Value], body: &Block) -> Vec<Advance> {
        let Some(Inst {
            op: Op::Yield(yields),
            ..
        }) = body.insts.last()
        else {
            return Vec::new();
        };
        let inner = defined_in(body);
        let def = |v: Value| body.insts.iter().find(|i| i.results.contains(&v));
        let ty = |v: Value| &self.types[v.index()];
        (0..init.len())
            .filter_map(|j| {
                let arg = body.args[1 + j];
                let t = ty(arg);
                if t.is_scalar() || t.elem.pointee().is_none() {
                    return None;
                }
                let Op::AddPtr(p, offsets) = def(yields[j])?.op else {
                    return None;
                };
                let step = *self.splats.get(&offsets)?;
                let integer = ty(step).is_scalar() && ty(step).dtype().is_some_and(DType::is_int);
                (p == arg && integer).then(|| Advance {
                    j,
                    step,
                    invariant: !inner.contains(&step),
                })
            })
            .collect()
    }

    /// Rewrites carried value `a.j` of the `for` `inst`: constants and casts it needs go
    /// to `before` (the enclosing block, ahead of the loop), the tile after the loop to
    /// `after`.
    fn rewrite(
        &mut self,
        inst: &mut Inst,
        a: Advance,
        before: &mut Vec<Inst>,
        after: &mut Vec<Inst>,
    ) {
        let loc = inst.loc.clone();
        let Op::For { init, body, .. } = &mut inst.op else {
            unreachable!("advances are found in `for` loops")
        };
        let i64t = Type::scalar(DType::I64);
        let tile = body.args[1 + a.j];
        let start = init[a.j];
        let shape = self.types[tile.index()].shape.clone();
        let offsets_ty = Type::tile(super::Elem::Scalar(DType::I64), shape);
        // The tile at offset `o`: `start + splat(o)`, defining `result`.
        let at_offset = |r: &mut Self, o: Value, result: Value, to: &mut Vec<Inst>| {
            let splat = r.new_value(offsets_ty.clone());
            to.push(inst_of(Op::Splat(o), splat, &loc));
            to.push(inst_of(Op::AddPtr(start, splat), result, &loc));
        };
        let zero = self.new_value(i64t.clone());
        before.push(inst_of(Op::Const(Const::Int(0)), zero, &loc));
        init[a.j] = zero;
        // The step as an i64, before the loop where it is defined there.
        let mut step = a.step;
        let mut in_body = Vec::new();
        if self.types[step.index()].dtype() != Some(DType::I64) {
            let wide = self.new_value(i64t.clone());
            let cast = inst_of(Op::Cast(step), wide, &loc);
            match a.invariant {
                true => before.push(cast),
                false => in_body.push(cast),
            }
            step = wide;
        }
        // In the body: the carried offset `o`, the tile from it, the next offset yielded.
        let o = self.new_value(i64t.clone());
        body.args[1 + a.j] = o;
        let mut head = Vec::new();
        at_offset(self, o, tile, &mut head);
        let next = self.new_value(i64t.clone());
        in_body.push(inst_of(Op::Binary(BinOp::Add, o, step), next, &loc));
        let yield_at = body.insts.len() - 1;
        let Op::Yield(yields) = &mut body.insts[yield_at].op else {
            unreachable!("the body ends with its yield")
        };
        let old = std::mem::replace(&mut yields[a.j], next);
        body.insts.splice(yield_at..yield_at, in_body);
        body.insts.splice(0..0, head);
        remove_if_unused(body, old);
        // After the loop: the tile at the final offset, where the loop's result was read.
        let result = inst.results[a.j];
        let final_offset = self.new_value(i64t);
        inst.results[a.j] = final_offset;
        if self.used.contains(&result) {
            at_offset(self, final_offset, result, after);
        }
    }
}

/// Removes the instruction defining `v` at the top level of `block` when nothing in the
/// block uses `v`, then its operands' instructions likewise.
fn remove_if_unused(block: &mut Block, v: Value) {
    let used = |b: &Block| {
        let mut n = 0;
        walk(b, &mut |i| {
            n += i.op.operands().iter().filter(|o| **o == v).count()
        });
        n > 0
    };
    if used(block) {
        return;
    }
    let Some(at) = block.insts.iter().position(|i| i.results == [v]) else {
        return;
    };
    if !block.insts[at].op.regions().is_empty() || block.insts[at].op.fault_kind().is_some() {
        return;
    }
    let removed = block.insts.remove(at);
    for o in removed.op.operands() {
        remove_if_unused(block, o);
    }
}

fn walk(b: &Block, f: &mut impl FnMut(&Inst)) {
    for i in &b.insts {
        f(i);
        for r in i.op.regions() {
            walk(r, f);
        }
    }
}

/// The values defined anywhere in `block` (its arguments and nested regions included).
fn defined_in(block: &Block) -> HashSet<Value> {
    let mut inner: HashSet<Value> = block.args.iter().copied().collect();
    walk(block, &mut |i| {
        inner.extend(i.results.iter().copied());
        for r in i.op.regions() {
            inner.extend(r.args.iter().copied());
        }
    });
    inner
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

    /// A loop over `%2` iterations that loads through a carried 8-pointer tile and adds
    /// `advance` to it, then loads through the tile after the loop.
    fn kernel(advance: &str) -> Function {
        let text = format!(
            "kernel @k(x %0: ptr<f32>, out %1: ptr<f32>, n %2: i32) {{
               %3 = arange {{start = 0, end = 8}} : tile<8xi32>
               %4 = splat %0 : tile<8xptr<f32>>
               %5 = addptr %4, %3 : tile<8xptr<f32>>
               %6 = const {{value = 0}} : i32
               %7 = const {{value = 1}} : i32
               %8 = for %6, %2, %7, %5 : tile<8xptr<f32>> {{
               ^(%9: i32, %10: tile<8xptr<f32>>)
                 %11 = load %10 : tile<8xf32>
                 {advance}
                 yield %13
               }}
               %14 = load %8 : tile<8xf32>
               %15 = splat %1 : tile<8xptr<f32>>
               %16 = addptr %15, %3 : tile<8xptr<f32>>
               store %16, %14
             }}"
        );
        // Every op has a location.
        let located: Vec<String> = text
            .lines()
            .map(|l| {
                let l = l.trim();
                let op = l.starts_with('%') || l.starts_with("yield") || l.starts_with("store");
                match (op, l.strip_suffix(" {")) {
                    (true, Some(head)) => format!("{head} loc(\"k.rs\":1:1) {{"),
                    (true, None) => format!("{l} loc(\"k.rs\":1:1)"),
                    (false, _) => l.to_string(),
                }
            })
            .collect();
        let text = located.join("\n");
        parse_function(&text).unwrap_or_else(|e| panic!("{e:?} in\n{text}"))
    }

    /// The tile advanced by a splat scalar (defined in the loop or before it, any integer
    /// dtype) is carried as an i64 offset: the loop yields no pointer tile, the result is
    /// rebuilt after it, the memory ops are the same, and the function verifies.
    #[test]
    fn carried_pointer_tiles_become_offsets() {
        for advance in [
            "%12 = splat %2 : tile<8xi32>
             %13 = addptr %10, %12 : tile<8xptr<f32>>",
            "%17 = mul %2, %9 : i32
             %12 = splat %17 : tile<8xi32>
             %13 = addptr %10, %12 : tile<8xptr<f32>>",
            "%17 = cast %2 : u16
             %12 = splat %17 : tile<8xu16>
             %13 = addptr %10, %12 : tile<8xptr<f32>>",
        ] {
            let f = kernel(advance);
            let g = carry_pointer_offsets(&f).expect("rewritten");
            verify(&g).unwrap_or_else(|e| panic!("{e}\n{}", print_function(&g)));
            let text = print_function(&g);
            let for_line = text.lines().find(|l| l.contains("= for ")).unwrap();
            assert!(for_line.contains(": i64 loc"), "{text}");
            assert_eq!(f.fault_sites(), g.fault_sites(), "{text}");
            // The old advance is gone; the new one adds an i64 to the offset.
            assert!(!text.contains("addptr %10, %12"), "{text}");
            // The tile after the loop is rebuilt where it is read.
            assert!(text.contains("%8 = addptr %5"), "{text}");
        }
    }

    /// A tile advanced by a tile that varies, or by itself, is left as it is.
    #[test]
    fn other_advances_are_kept() {
        for advance in [
            "%12 = add %3, %3 : tile<8xi32>
             %13 = addptr %10, %12 : tile<8xptr<f32>>",
            "%12 = splat %2 : tile<8xi32>
             %13 = addptr %5, %12 : tile<8xptr<f32>>",
        ] {
            assert!(
                carry_pointer_offsets(&kernel(advance)).is_none(),
                "{advance}"
            );
        }
    }
}
