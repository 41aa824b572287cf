//! Shrinking a failing case: the smallest program that still fails the same way.
//!
//! Greedy, as C-Reduce: each round tries candidate edits from the largest (inline or drop
//! a region, drop a store) to the smallest (a value becomes a constant, a constant becomes
//! 0 or 1, fewer programs), keeps the first that still fails, removes the dead code it
//! leaves, and starts over until no edit helps.

use crate::case::Case;
use tritium_dsl::ir::{verify, Block, Const, Function, Inst, Op, Value};

/// Shrinks `case` while `fails` holds of it (it must hold of `case`). `budget` bounds the
/// number of candidates tried.
pub fn shrink(case: &Case, fails: &mut dyn FnMut(&Case) -> bool, budget: usize) -> Case {
    let mut best = case.clone();
    dead_code(&mut best.function);
    if !fails(&best) {
        best = case.clone();
    }
    let mut tried = 0;
    'round: loop {
        for edit in edits(&best) {
            if tried >= budget {
                break 'round;
            }
            let Some(mut c) = apply(&best, &edit) else {
                continue;
            };
            dead_code(&mut c.function);
            if c.function == best.function && c.grid == best.grid {
                continue;
            }
            if verify(&c.function).is_err() {
                continue;
            }
            tried += 1;
            if fails(&c) {
                best = c;
                continue 'round;
            }
        }
        break;
    }
    compact(&mut best.function);
    best
}

/// Where an instruction is: indices of regions and instructions from the body down.
type Path = Vec<(usize, usize)>;

#[derive(Debug, Clone)]
enum Edit {
    /// Fewer programs.
    Grid([u64; 3]),
    /// Delete a side-effecting instruction (a store, an atomic, a region).
    Delete(Path),
    /// Replace a region by one run of it (a loop's body once, one branch of an `if`).
    Inline(Path, usize),
    /// Drop result `k` of an `if`, which nothing uses, and what its branches yield for it
    /// (an `if` kept for its condition, or a store in it, carries no dead values).
    DropResult(Path, usize),
    /// Replace an instruction's results by constants.
    Constant(Path, Const),
    /// Replace an instruction's result by its operand `k`, of the same type (drops the
    /// ops between a failing op and what keeps it alive).
    Forward(Path, usize),
}

fn edits(case: &Case) -> Vec<Edit> {
    let mut out = Vec::new();
    let [x, y, z] = case.grid;
    if case.grid != [1, 1, 1] {
        out.push(Edit::Grid([1, 1, 1]));
        out.push(Edit::Grid([x.div_ceil(2), y, z]));
    }
    let mut paths = Vec::new();
    collect(&case.function.body, &mut Vec::new(), &mut paths);
    let f = &case.function;
    for (path, inst) in &paths {
        match &inst.op {
            Op::For { .. } | Op::While { .. } | Op::If { .. } => {
                out.push(Edit::Delete(path.clone()));
                out.push(Edit::Inline(path.clone(), 0));
                if matches!(inst.op, Op::If { .. }) {
                    out.push(Edit::Inline(path.clone(), 1));
                    for (k, r) in inst.results.iter().enumerate() {
                        if f.uses(*r) == 0 {
                            out.push(Edit::DropResult(path.clone(), k));
                        }
                    }
                }
            }
            Op::Store { .. }
            | Op::Atomic { .. }
            | Op::AtomicCas { .. }
            | Op::Assert { .. }
            | Op::Print { .. }
            | Op::Custom(_) => out.push(Edit::Delete(path.clone())),
            _ => {}
        }
    }
    for (path, inst) in &paths {
        if let [r] = inst.results[..] {
            for (k, o) in inst.op.operands().into_iter().enumerate() {
                if f.ty(o) == f.ty(r) {
                    out.push(Edit::Forward(path.clone(), k));
                }
            }
        }
    }
    for (path, inst) in &paths {
        let numeric = inst.results.iter().all(|r| f.ty(*r).dtype().is_some());
        if inst.results.is_empty() || !numeric {
            continue;
        }
        if let Op::Const(c) = inst.op {
            if c != Const::Int(0) && c != Const::Float(0.0) {
                out.push(Edit::Constant(path.clone(), Const::Int(0)));
                out.push(Edit::Constant(path.clone(), Const::Int(1)));
            }
            continue;
        }
        out.push(Edit::Constant(path.clone(), Const::Int(0)));
        out.push(Edit::Constant(path.clone(), Const::Int(1)));
    }
    out
}

fn collect<'b>(b: &'b Block, path: &mut Path, out: &mut Vec<(Path, &'b Inst)>) {
    for (i, inst) in b.insts.iter().enumerate() {
        if matches!(inst.op, Op::Yield(_) | Op::Condition(_)) {
            continue;
        }
        path.push((0, i));
        out.push((path.clone(), inst));
        for (r, region) in inst.op.regions().into_iter().enumerate() {
            path.last_mut().expect("pushed").0 = r;
            collect(region, &mut path.clone(), out);
        }
        path.pop();
    }
}

/// The block holding the instruction at `path`, and its index there.
fn locate<'b>(body: &'b mut Block, path: &[(usize, usize)]) -> Option<(&'b mut Block, usize)> {
    let (last, outer) = path.split_last()?;
    let mut b = body;
    // `(r, i)`: instruction `i` of the block, then (for all but the last) its region `r`.
    for (r, i) in outer {
        let inst = b.insts.get_mut(*i)?;
        b = inst.op.regions_mut().into_iter().nth(*r)?;
    }
    Some((b, last.1))
}

fn apply(case: &Case, edit: &Edit) -> Option<Case> {
    let mut c = case.clone();
    match edit {
        Edit::Grid(g) => c.grid = *g,
        Edit::Delete(path) => {
            let (b, i) = locate(&mut c.function.body, path)?;
            let inst = b.insts.remove(i);
            // Results of a deleted loop are its initial values; an op with side effects
            // (a custom call) goes only where nothing reads its results.
            let subst: Vec<(Value, Value)> = match &inst.op {
                Op::For { init, .. } | Op::While { init, .. } => inst
                    .results
                    .iter()
                    .copied()
                    .zip(init.iter().copied())
                    .collect(),
                _ if inst.results.iter().all(|r| case.function.uses(*r) == 0) => Vec::new(),
                _ => return None,
            };
            for (from, to) in subst {
                replace_uses(&mut c.function.body, from, to);
            }
        }
        Edit::Inline(path, which) => {
            let (b, i) = locate(&mut c.function.body, path)?;
            let inst = b.insts.remove(i);
            let (mut region, bind): (Block, Vec<(Value, Value)>) = match inst.op {
                Op::For { lo, init, body, .. } => {
                    let mut bind = vec![(body.args[0], lo)];
                    bind.extend(body.args[1..].iter().copied().zip(init));
                    (body, bind)
                }
                Op::While { init, body, .. } => {
                    let bind = body.args.iter().copied().zip(init).collect();
                    (body, bind)
                }
                Op::If {
                    then_region,
                    else_region,
                    ..
                } => (
                    if *which == 0 {
                        then_region
                    } else {
                        else_region
                    },
                    Vec::new(),
                ),
                _ => return None,
            };
            let ys = match region.insts.pop().map(|y| y.op) {
                Some(Op::Yield(ys)) => ys,
                _ => return None,
            };
            let tail = b.insts.split_off(i);
            b.insts.extend(region.insts);
            b.insts.extend(tail);
            for (from, to) in bind.into_iter().chain(inst.results.into_iter().zip(ys)) {
                replace_uses(&mut c.function.body, from, to);
            }
        }
        Edit::DropResult(path, k) => {
            let (b, i) = locate(&mut c.function.body, path)?;
            let inst = &mut b.insts[i];
            let Op::If {
                then_region,
                else_region,
                ..
            } = &mut inst.op
            else {
                return None;
            };
            for region in [then_region, else_region] {
                match region.insts.last_mut().map(|y| &mut y.op) {
                    Some(Op::Yield(ys)) if *k < ys.len() => {
                        ys.remove(*k);
                    }
                    _ => return None,
                }
            }
            if *k >= inst.results.len() {
                return None;
            }
            inst.results.remove(*k);
        }
        Edit::Constant(path, k) => {
            let (b, i) = locate(&mut c.function.body, path)?;
            let inst = &mut b.insts[i];
            if inst.results.len() != 1 {
                return None;
            }
            let r = inst.results[0];
            let d = c.function.types[r.index()].dtype()?;
            let k = match (k, d.is_float()) {
                (Const::Int(v), true) => Const::Float(*v as f64),
                (k, _) => *k,
            };
            inst.op = Op::Const(k);
        }
        Edit::Forward(path, k) => {
            let (b, i) = locate(&mut c.function.body, path)?;
            let inst = &b.insts[i];
            let (r, to) = (*inst.results.first()?, *inst.op.operands().get(*k)?);
            replace_uses(&mut c.function.body, r, to);
        }
    }
    Some(c)
}

fn replace_uses(b: &mut Block, from: Value, to: Value) {
    for inst in &mut b.insts {
        for o in inst.op.operands_mut() {
            if *o == from {
                *o = to;
            }
        }
        for r in inst.op.regions_mut() {
            replace_uses(r, from, to);
        }
    }
}

/// Removes instructions without side effects whose results nothing uses (loads among
/// them).
pub fn dead_code(f: &mut Function) {
    loop {
        let mut used = std::collections::HashSet::new();
        f.walk(&mut |i: &Inst| used.extend(i.op.operands()));
        let before = count(&f.body);
        sweep(&mut f.body, &used);
        if count(&f.body) == before {
            return;
        }
    }
}

fn count(b: &Block) -> usize {
    b.insts
        .iter()
        .map(|i| 1 + i.op.regions().into_iter().map(count).sum::<usize>())
        .sum()
}

fn sweep(b: &mut Block, used: &std::collections::HashSet<Value>) {
    b.insts.retain(|i| {
        matches!(i.op, Op::Yield(_) | Op::Condition(_))
            || i.op.has_side_effects()
            || i.results.iter().any(|r| used.contains(r))
    });
    for inst in &mut b.insts {
        for r in inst.op.regions_mut() {
            sweep(r, used);
        }
    }
}

/// Renumbers values in definition order (parameters first), dropping unused types.
fn compact(f: &mut Function) {
    let mut map = std::collections::HashMap::new();
    let mut types = Vec::new();
    let mut def = |v: &mut Value, types_in: &[tritium_dsl::ir::Type]| {
        let n = *map.entry(*v).or_insert_with(|| {
            types.push(types_in[v.index()].clone());
            Value(types.len() as u32 - 1)
        });
        *v = n;
    };
    let old = f.types.clone();
    for p in &mut f.params {
        def(&mut p.value, &old);
    }
    fn go(
        b: &mut Block,
        def: &mut dyn FnMut(&mut Value, &[tritium_dsl::ir::Type]),
        old: &[tritium_dsl::ir::Type],
    ) {
        for a in &mut b.args {
            def(a, old);
        }
        for inst in &mut b.insts {
            for o in inst.op.operands_mut() {
                def(o, old);
            }
            for r in inst.op.regions_mut() {
                go(r, def, old);
            }
            for r in &mut inst.results {
                def(r, old);
            }
        }
    }
    go(&mut f.body, &mut def, &old);
    f.types = types;
}
