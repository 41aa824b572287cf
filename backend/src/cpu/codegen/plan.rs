//! Which tile values are computed lazily, lane by lane inside their consumer's loop
//! (elementwise fusion), and which are materialized into a scratch buffer.
//!
//! Cheap index and mask arithmetic is lazy, so that LLVM sees `base + pid*B + i` and
//! `i < n` inside the consumer's loop and emits contiguous (masked) vector accesses; but a
//! cheap value whose lazy expression tree is large is materialized when its lanes would be
//! emitted more than once (integer hashes such as Philox reuse every value several times:
//! re-emitting the tree at each use grew the LLVM IR exponentially, 229 MB for 7 rounds of
//! Philox-4x64).
//! Expensive values are lazy only when their lanes would be computed exactly once: used
//! once, or used by several ops that all end in one store's or materialization's loop, at
//! the value's own index, where the lane memo of `Gen::lane` computes it once (a DAG of
//! shared pure ops, as the f32 libm functions are, then runs in one loop instead of one
//! loop and buffer per shared value). A load is lazy for up to a few consumers (reading
//! memory again costs what reading a copy costs) when no write can come between it and the
//! places its lanes are consumed.

use std::collections::{HashMap, HashSet};
use tritium_dsl::ir::{BinOp, Block, Function, Inst, Op, Type, UnOp, Value};

/// Lanes are emitted "many" times: inside a nested region or behind a broadcast.
const MANY: u32 = u32::MAX;

/// Values to emit lazily. `lane_calls` are the custom calls computed per element (Simt
/// with one out): they fuse like elementwise ops.
pub(crate) fn lazy_values(f: &Function, lane_calls: &HashSet<*const Inst>) -> HashSet<Value> {
    let roots = f.pointer_roots();
    let mut lazy = HashSet::new();
    let ctx = Plan {
        f,
        roots: &roots,
        lane_calls,
    };
    plan_block(&ctx, &f.body, &mut lazy);
    lazy
}

struct Plan<'a> {
    f: &'a Function,
    roots: &'a HashMap<Value, Vec<usize>>,
    lane_calls: &'a HashSet<*const Inst>,
}

/// Whether `op` may write memory: a custom call only through a pointer it is given.
pub(crate) fn writes_memory(f: &Function, op: &Op) -> bool {
    match op {
        Op::Custom(c) => {
            c.writes_memory() && c.ins.iter().any(|v| f.ty(*v).elem.pointee().is_some())
        }
        Op::For { .. } | Op::If { .. } | Op::While { .. } => op
            .regions()
            .iter()
            .any(|r| r.insts.iter().any(|i| writes_memory(f, &i.op))),
        op => op.has_side_effects(),
    }
}

fn is_cheap(f: &Function, inst: &Inst) -> bool {
    let float = |v: &Value| f.ty(*v).dtype().is_some_and(|d| d.is_float());
    match &inst.op {
        Op::Const(_)
        | Op::Splat(_)
        | Op::Broadcast(_)
        | Op::ExpandDims { .. }
        | Op::Arange { .. }
        | Op::Reshape(_)
        | Op::Permute { .. }
        | Op::Flip { .. }
        | Op::AddPtr(..)
        | Op::IntToPtr(_)
        | Op::PtrToInt(_)
        | Op::Hint { .. }
        | Op::Cmp(..)
        | Op::Select(..) => true,
        Op::Binary(op, a, _) => !float(a) && !matches!(op, BinOp::Div | BinOp::Rem),
        Op::Cast(x) => !float(x) && !float(&inst.results[0]),
        Op::Bitcast(_) => true,
        Op::Unary(op, x) => !float(x) && matches!(op, UnOp::Neg | UnOp::Not | UnOp::Abs),
        _ => false,
    }
}

/// True for users whose lanes read some operand lane more than once.
fn replicates(f: &Function, user: &Inst, operand: Value) -> bool {
    match &user.op {
        Op::Broadcast(x) => f.ty(*x).numel() != f.ty(user.results[0]).numel() && *x == operand,
        Op::Splat(_) => true,
        _ => false,
    }
}

fn plan_block(p: &Plan<'_>, block: &Block, lazy: &mut HashSet<Value>) {
    let f = p.f;
    for inst in &block.insts {
        for r in inst.op.regions() {
            plan_block(p, r, lazy);
        }
    }
    // Users of each value: in this block (index) or nested somewhere inside inst `index`.
    let mut users: HashMap<Value, Vec<(usize, bool)>> = HashMap::new();
    for (i, inst) in block.insts.iter().enumerate() {
        let mut operands = inst.op.operands();
        if inst.op.is_elementwise() {
            // `x * x` computes x's lane twice at the same index: LLVM merges the two.
            operands.sort();
            operands.dedup();
        }
        for o in operands {
            users.entry(o).or_default().push((i, false));
        }
        for r in inst.op.regions() {
            visit_uses(r, &mut |v| users.entry(v).or_default().push((i, true)));
        }
    }
    // The size of each value's expression tree were every cheap op lazy (an upper bound).
    let mut tree: HashMap<Value, u32> = HashMap::new();
    for inst in &block.insts {
        if inst.results.len() == 1 && inst.op.is_elementwise() && is_cheap(f, inst) {
            let size = inst.op.operands().iter().fold(1u32, |s, o| {
                s.saturating_add(tree.get(o).copied().unwrap_or(0))
            });
            tree.insert(inst.results[0], size);
        }
    }
    // Values of this block whose lanes may be emitted across new basic blocks were every
    // op lazy: through a float `%` (an exact fmod loop) or a call. A lane memoized in one
    // block is computed again in the next (see `Gen::lane`), so sharing one across such
    // ops could grow the code exponentially.
    let defs: HashMap<Value, &Inst> = block
        .insts
        .iter()
        .filter(|i| i.results.len() == 1)
        .map(|i| (i.results[0], i))
        .collect();
    let mut branches: HashSet<Value> = HashSet::new();
    for inst in &block.insts {
        if inst.results.len() != 1 || !inst.op.is_elementwise() {
            continue;
        }
        let own = match &inst.op {
            Op::Binary(BinOp::Rem, a, _) => f.ty(*a).dtype().is_some_and(|d| d.is_float()),
            _ => p.lane_calls.contains(&(inst as *const Inst)),
        };
        if own || inst.op.operands().iter().any(|o| branches.contains(o)) {
            branches.insert(inst.results[0]);
        }
    }
    // Loads below a shared value (see `shared_root`): materialized, so that a masked or
    // checked load's branches are not emitted between the value's uses either.
    let mut buffered_loads: HashSet<Value> = HashSet::new();
    let mut scanned: HashSet<Value> = HashSet::new();
    // Reverse order: every same-block user is decided before the value it uses.
    let mut emit_count: HashMap<Value, u32> = HashMap::new();
    // First and last instruction (of this block) where a lazy value's lanes are emitted.
    let mut emit_span: HashMap<Value, (usize, usize)> = HashMap::new();
    let side_effect: Vec<bool> = block
        .insts
        .iter()
        .map(|i| writes_memory(f, &i.op))
        .collect();
    // For lazy values: the one materialized op or store whose loop emits every lane of
    // theirs, each at its own index (see `shared_root`).
    let mut root: HashMap<Value, usize> = HashMap::new();
    for (i, inst) in block.insts.iter().enumerate().rev() {
        let lane_op = inst.op.is_elementwise() || p.lane_calls.contains(&(inst as *const Inst));
        if inst.results.len() != 1 || !lane_op {
            continue;
        }
        let v = inst.results[0];
        if f.ty(v).is_scalar() {
            continue;
        }
        let uses = users.get(&v).map(Vec::as_slice).unwrap_or(&[]);
        let shared = shared_root(block, uses, &emit_count, &root);
        let mut count = 0u32;
        let (mut first, mut last) = (usize::MAX, 0usize);
        for &(u, nested) in uses {
            let user = &block.insts[u];
            let c = if nested || replicates(f, user, v) {
                MANY
            } else if let Some(&uc) = user.results.first().and_then(|r| emit_count.get(r)) {
                let (a, b) = emit_span[&user.results[0]];
                first = first.min(a);
                last = last.max(b);
                uc
            } else {
                first = first.min(u);
                last = last.max(u);
                1
            };
            count = count.saturating_add(c);
        }
        let repeated_tree = count > 1 && tree.get(&v).is_some_and(|&t| t > MAX_REPEATED_TREE);
        let cheap = is_cheap(f, inst) && !repeated_tree;
        // A pure op whose uses all land in one loop, at its own index: computed there once
        // (the lanes are memoized, see `Gen::lane`) instead of into a buffer of its own.
        let shared_once =
            count > 1 && inst.op.is_pointwise() && shared.is_some() && !branches.contains(&v);
        if shared_once {
            count = 1;
            collect_loads(&defs, v, &mut scanned, &mut buffered_loads);
        }
        let make_lazy = cheap
            || shared_once
            || count == 0
            || match &inst.op {
                // A load is as cheap to repeat as a copy of it is to read: it stays lazy for a
                // few consumers when it can move to each of them.
                // A volatile load reads each lane once, where it is written.
                Op::Load { hints, .. } if hints.volatile => false,
                Op::Load { .. } if buffered_loads.contains(&v) => false,
                Op::Load { ptr, .. } => {
                    count <= MAX_LOAD_REPEATS
                        && load_can_move(p, block, i, first, last, *ptr, &side_effect)
                }
                _ => count == 1,
            };
        if make_lazy {
            lazy.insert(v);
            if let Some(r) = shared {
                root.insert(v, r);
            }
            emit_count.insert(v, count.max(1));
            let span = if first == usize::MAX {
                (i, i)
            } else {
                (first, last)
            };
            emit_span.insert(v, span);
        }
    }
}

/// Adds the loads `v`'s lanes are computed from (through elementwise ops of this block) to
/// `loads`; `scanned` holds the values already visited.
fn collect_loads(
    defs: &HashMap<Value, &Inst>,
    v: Value,
    scanned: &mut HashSet<Value>,
    loads: &mut HashSet<Value>,
) {
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        if !scanned.insert(v) {
            continue;
        }
        let Some(inst) = defs.get(&v) else { continue };
        match &inst.op {
            Op::Load { .. } => {
                loads.insert(v);
            }
            op if op.is_elementwise() => stack.extend(op.operands()),
            _ => {}
        }
    }
}

/// The instruction whose single loop emits every lane of a value with these `uses`, each
/// at the value's own index, if there is one: every use is outside nested regions, and is
/// a store or a materialized pointwise op (whose loop computes its lanes from its operands'
/// at the same index), or a lazy pointwise op with such a root itself; all the same one.
fn shared_root(
    block: &Block,
    uses: &[(usize, bool)],
    emit_count: &HashMap<Value, u32>,
    root: &HashMap<Value, usize>,
) -> Option<usize> {
    let mut shared = None;
    for &(u, nested) in uses {
        let user = &block.insts[u];
        if nested {
            return None;
        }
        let r = match user.results.first() {
            Some(r) if emit_count.contains_key(r) => {
                if !user.op.is_pointwise() {
                    return None;
                }
                *root.get(r)?
            }
            _ if user.op.is_pointwise() || matches!(user.op, Op::Store { .. }) => u,
            _ => return None,
        };
        if shared.is_some_and(|s| s != r) {
            return None;
        }
        shared = Some(r);
    }
    shared
}

/// How many times a load's lanes may be emitted before it is materialized instead.
const MAX_LOAD_REPEATS: u32 = 4;

/// The largest expression tree of cheap ops emitted again at each of several uses; a larger
/// one is computed once into a buffer. Index and mask arithmetic stays well below it.
const MAX_REPEATED_TREE: u32 = 24;

/// A load at `at` can be emitted at every point of `first..=last` instead when nothing from
/// `at` to `last` (exclusive) writes memory and the consumer at `last` does not write memory
/// the load reads.
fn load_can_move(
    p: &Plan<'_>,
    block: &Block,
    at: usize,
    first: usize,
    last: usize,
    ptr: Value,
    side_effect: &[bool],
) -> bool {
    let (f, roots) = (p.f, p.roots);
    if first == usize::MAX || first <= at {
        return false;
    }
    if side_effect[at + 1..last].iter().any(|s| *s) {
        return false;
    }
    let consumer = &block.insts[last];
    let written = match &consumer.op {
        Op::Store { ptr: p, .. } | Op::Atomic { ptr: p, .. } | Op::AtomicCas { ptr: p, .. } => *p,
        op if writes_memory(f, op) => return false,
        _ => return true,
    };
    let (Some(a), Some(b)) = (roots.get(&ptr), roots.get(&written)) else {
        return false;
    };
    !a.iter().any(|x| b.contains(x))
}

/// The values that compute the same lanes as `v`: pure ops of the same kind, attributes,
/// result type and (recursively equivalent) operands, wherever they are in the function.
/// `v` itself is included.
pub(crate) fn equivalents(f: &Function, v: Value) -> Vec<Value> {
    let mut canon: HashMap<Value, Value> = HashMap::new();
    let mut first: HashMap<(String, Vec<Value>, Type), Value> = HashMap::new();
    f.walk(&mut |inst| {
        let [r] = inst.results[..] else { return };
        let Some((tag, operands)) = pure_key(&inst.op) else {
            return;
        };
        let operands: Vec<Value> = operands
            .iter()
            .map(|o| canon.get(o).copied().unwrap_or(*o))
            .collect();
        let c = *first.entry((tag, operands, f.ty(r).clone())).or_insert(r);
        canon.insert(r, c);
    });
    let class = canon.get(&v).copied().unwrap_or(v);
    let mut out: Vec<Value> = canon
        .iter()
        .filter(|(_, c)| **c == class)
        .map(|(x, _)| *x)
        .collect();
    if !out.contains(&v) {
        out.push(v);
    }
    out
}

/// What identifies a pure elementwise op apart from its operands, and its operands.
fn pure_key(op: &Op) -> Option<(String, Vec<Value>)> {
    Some(match op {
        Op::Const(c) => (format!("const {c:?}"), vec![]),
        Op::ProgramId(a) => (format!("pid {a}"), vec![]),
        Op::NumPrograms(a) => (format!("nprog {a}"), vec![]),
        Op::Arange { start, end } => (format!("arange {start} {end}"), vec![]),
        Op::Splat(x) => ("splat".into(), vec![*x]),
        Op::Broadcast(x) => ("broadcast".into(), vec![*x]),
        Op::ExpandDims { x, axis } => (format!("expand {axis}"), vec![*x]),
        Op::Reshape(x) => ("reshape".into(), vec![*x]),
        Op::Permute { x, dims } => (format!("permute {dims:?}"), vec![*x]),
        Op::Flip { x, axis } => (format!("flip {axis}"), vec![*x]),
        Op::Gather { src, index, axis } => (format!("gather {axis}"), vec![*src, *index]),
        Op::Cast(x) => ("cast".into(), vec![*x]),
        Op::Bitcast(x) => ("bitcast".into(), vec![*x]),
        Op::IntToPtr(x) => ("inttoptr".into(), vec![*x]),
        Op::Hint { x, kind, values } => (format!("hint {} {values:?}", kind.name()), vec![*x]),
        Op::PtrToInt(x) => ("ptrtoint".into(), vec![*x]),
        Op::Binary(b, x, y) => (format!("binary {b:?}"), vec![*x, *y]),
        Op::Unary(u, x) => (format!("unary {u:?}"), vec![*x]),
        Op::Cmp(p, x, y) => (format!("cmp {p:?}"), vec![*x, *y]),
        Op::Select(c, x, y) => ("select".into(), vec![*c, *x, *y]),
        Op::AddPtr(p, o) => ("addptr".into(), vec![*p, *o]),
        _ => return None,
    })
}

fn visit_uses(b: &Block, f: &mut impl FnMut(Value)) {
    for inst in &b.insts {
        for o in inst.op.operands() {
            f(o);
        }
        for r in inst.op.regions() {
            visit_uses(r, f);
        }
    }
}
