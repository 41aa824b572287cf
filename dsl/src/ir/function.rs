//! Instructions, blocks (regions) and kernel functions.

use super::{Loc, Op, Type, Value};

/// An operation with its results and kernel-source location.
#[derive(Debug, Clone, PartialEq)]
pub struct Inst {
    /// Values defined by this op.
    pub results: Vec<Value>,
    /// The operation.
    pub op: Op,
    /// Where in the kernel source it was written.
    pub loc: Loc,
}

/// A region: block arguments and a straight-line list of ops (control flow is nested).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Block {
    /// Values bound on entry (loop induction variable, carried values).
    pub args: Vec<Value>,
    /// The ops, the last one a terminator for non-function regions.
    pub insts: Vec<Inst>,
}

impl Block {
    /// What the region yields (nothing when it ends otherwise, as a kernel's body does).
    pub fn yields(&self) -> &[Value] {
        match self.insts.last().map(|i| &i.op) {
            Some(Op::Yield(ys)) => ys,
            _ => &[],
        }
    }
}

/// A kernel parameter.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    /// Its name in the kernel source.
    pub name: String,
    /// The value bound to it.
    pub value: Value,
}

/// A traced kernel: parameters, a body and the type of every value.
#[derive(Debug, Clone, PartialEq)]
pub struct Function {
    /// Kernel name (a valid identifier).
    pub name: String,
    /// Runtime parameters in launch order.
    pub params: Vec<Param>,
    /// The body; it has no terminator.
    pub body: Block,
    /// `types[v.index()]` is the type of value `v`.
    pub types: Vec<Type>,
}

impl Function {
    /// The type of a value.
    pub fn ty(&self, v: Value) -> &Type {
        &self.types[v.index()]
    }

    /// Visits every instruction, depth first, in program order.
    pub fn walk(&self, f: &mut impl FnMut(&Inst)) {
        fn go(b: &Block, f: &mut impl FnMut(&Inst)) {
            for inst in &b.insts {
                f(inst);
                for r in inst.op.regions() {
                    go(r, f);
                }
            }
        }
        go(&self.body, f);
    }

    /// How many operands of instructions anywhere in the function are `v`.
    pub fn uses(&self, v: Value) -> usize {
        let mut n = 0;
        self.walk(&mut |i| n += i.op.operands().iter().filter(|o| **o == v).count());
        n
    }

    /// The instruction defining each value, nested regions included (parameters and
    /// region arguments have none).
    pub fn defs(&self) -> std::collections::HashMap<Value, &Inst> {
        fn go<'a>(b: &'a Block, defs: &mut std::collections::HashMap<Value, &'a Inst>) {
            for inst in &b.insts {
                for r in &inst.results {
                    defs.insert(*r, inst);
                }
                for r in inst.op.regions() {
                    go(r, defs);
                }
            }
        }
        let mut defs = std::collections::HashMap::new();
        go(&self.body, &mut defs);
        defs
    }

    /// The memory ops (loads, stores, atomics: [`Op::fault_kind`]) in walk order, with
    /// their kind: checked mode reports a fault by its index in this list.
    pub fn fault_sites(&self) -> Vec<(Loc, &'static str)> {
        let mut sites = Vec::new();
        self.walk(&mut |inst| {
            if let Some(kind) = inst.op.fault_kind() {
                sites.push((inst.loc.clone(), kind));
            }
        });
        sites
    }

    /// Each memory op's index in [`Function::fault_sites`], by the address of its
    /// instruction in this function.
    pub fn fault_site_ids(&self) -> std::collections::HashMap<*const Inst, u32> {
        let mut ids = std::collections::HashMap::new();
        self.walk(&mut |inst| {
            if inst.op.fault_kind().is_some() {
                let id = ids.len() as u32;
                ids.insert(inst as *const Inst, id);
            }
        });
        ids
    }

    /// What fault sites `sites` access: their pointer values, and the results of the
    /// loads among them (the ones a code generator checks one by one).
    pub fn site_accesses(
        &self,
        sites: &std::collections::HashSet<u32>,
    ) -> (
        std::collections::HashSet<Value>,
        std::collections::HashSet<Value>,
    ) {
        let (mut pointers, mut loads) = (Default::default(), std::collections::HashSet::new());
        if sites.is_empty() {
            return (pointers, loads);
        }
        let mut next = 0u32;
        self.walk(&mut |inst| {
            if inst.op.fault_kind().is_none() {
                return;
            }
            let id = next;
            next += 1;
            if !sites.contains(&id) {
                return;
            }
            match &inst.op {
                Op::Load { ptr, .. } => {
                    pointers.insert(*ptr);
                    loads.extend(inst.results.iter().copied());
                }
                Op::Store { ptr, .. } | Op::Atomic { ptr, .. } | Op::AtomicCas { ptr, .. } => {
                    pointers.insert(*ptr);
                }
                Op::Custom(c) => pointers.extend(c.ins.first()),
                _ => {}
            }
        });
        (pointers, loads)
    }

    /// Indices of the pointer parameters that some store or atomic may write through.
    /// Pointers made from integers ([`Op::IntToPtr`]) are not counted: which buffer they
    /// reach is known only at run time (checked mode and the interpreter test each access).
    pub fn written_params(&self) -> Vec<usize> {
        let roots = self.raw_pointer_roots();
        let mut written = vec![false; self.params.len()];
        self.walk(&mut |inst| {
            let ptrs = match &inst.op {
                Op::Store { ptr, .. } | Op::Atomic { ptr, .. } | Op::AtomicCas { ptr, .. } => {
                    vec![*ptr]
                }
                Op::Custom(c) if c.writes_memory() => c.ins.clone(),
                _ => return,
            };
            for ptr in ptrs {
                for &p in roots.get(&ptr).into_iter().flatten() {
                    if let Some(w) = written.get_mut(p) {
                        *w = true;
                    }
                }
            }
        });
        (0..self.params.len()).filter(|i| written[*i]).collect()
    }

    /// For every pointer-typed value, the parameters it may be derived from. A pointer
    /// made from an integer ([`Op::IntToPtr`]) may be derived from any of them (it may
    /// also point elsewhere: see [`Function::foreign_pointers`]).
    pub fn pointer_roots(&self) -> std::collections::HashMap<Value, Vec<usize>> {
        let foreign = self.params.len();
        let every: Vec<usize> = (0..self.params.len())
            .filter(|&i| self.ty(self.params[i].value).elem.pointee().is_some())
            .collect();
        let mut roots = self.raw_pointer_roots();
        for r in roots.values_mut() {
            if r.last() == Some(&foreign) {
                r.pop();
                r.extend(&every);
                r.sort_unstable();
                r.dedup();
            }
        }
        roots
    }

    /// The pointer values that may derive from an integer ([`Op::IntToPtr`]): their
    /// accesses may reach any buffer of a launch, not only the parameters'.
    pub fn foreign_pointers(&self) -> std::collections::HashSet<Value> {
        let foreign = self.params.len();
        (self.raw_pointer_roots().into_iter())
            .filter(|(_, r)| r.last() == Some(&foreign))
            .map(|(v, _)| v)
            .collect()
    }

    /// The pointer values `pointers` may derive from (themselves included), through ops,
    /// loop-carried values and `if` results.
    pub fn pointer_sources(
        &self,
        pointers: &std::collections::HashSet<Value>,
    ) -> std::collections::HashSet<Value> {
        use std::collections::{HashMap, HashSet};
        let f = self;
        // Where each value without a defining op's operands comes from.
        let mut from: HashMap<Value, Vec<Value>> = HashMap::new();
        f.walk(&mut |inst| match &inst.op {
            Op::For { init, body, .. } => {
                let ys = body.yields();
                for (k, arg) in body.args.iter().skip(1).enumerate() {
                    let e = from.entry(*arg).or_default();
                    e.extend(init.get(k));
                    e.extend(ys.get(k));
                    from.entry(inst.results[k]).or_default().extend(ys.get(k));
                }
            }
            Op::While { init, cond, body } => {
                let ys = body.yields();
                for (k, arg) in body.args.iter().chain(&cond.args).enumerate() {
                    let k = k % body.args.len().max(1);
                    let e = from.entry(*arg).or_default();
                    e.extend(init.get(k));
                    e.extend(ys.get(k));
                }
                for (k, r) in inst.results.iter().enumerate() {
                    from.entry(*r).or_default().extend(ys.get(k));
                }
            }
            Op::If {
                then_region,
                else_region,
                ..
            } => {
                for region in [then_region, else_region] {
                    for (r, y) in inst.results.iter().zip(region.yields()) {
                        from.entry(*r).or_default().push(*y);
                    }
                }
            }
            _ => {
                for r in &inst.results {
                    from.entry(*r).or_default().extend(inst.op.operands());
                }
            }
        });
        let is_ptr = |v: &Value| f.ty(*v).elem.pointee().is_some();
        let mut seen: HashSet<Value> = HashSet::new();
        let mut todo: Vec<Value> = pointers.iter().copied().collect();
        while let Some(v) = todo.pop() {
            if !is_ptr(&v) || !seen.insert(v) {
                continue;
            }
            todo.extend(from.get(&v).into_iter().flatten().copied());
        }
        seen
    }

    /// [`Function::pointer_roots`] with `params.len()` standing for "made from an integer".
    fn raw_pointer_roots(&self) -> std::collections::HashMap<Value, Vec<usize>> {
        use std::collections::HashMap;
        let mut roots: HashMap<Value, Vec<usize>> = HashMap::new();
        for (i, p) in self.params.iter().enumerate() {
            roots.insert(p.value, vec![i]);
        }
        let foreign = self.params.len();
        // Iterate to a fixed point: loop-carried pointers flow backwards through yields.
        loop {
            let before: usize = roots.values().map(Vec::len).sum();
            propagate(&self.body, &self.types, foreign, &mut roots);
            if roots.values().map(Vec::len).sum::<usize>() == before {
                return roots;
            }
        }
        fn union(roots: &mut HashMap<Value, Vec<usize>>, dst: Value, srcs: &[Value]) {
            let mut acc: Vec<usize> = roots.get(&dst).cloned().unwrap_or_default();
            for s in srcs {
                acc.extend(roots.get(s).into_iter().flatten());
            }
            acc.sort_unstable();
            acc.dedup();
            if !acc.is_empty() {
                roots.insert(dst, acc);
            }
        }
        fn propagate(
            b: &Block,
            types: &[super::Type],
            foreign: usize,
            roots: &mut HashMap<Value, Vec<usize>>,
        ) {
            for inst in &b.insts {
                match &inst.op {
                    Op::IntToPtr(_) => {
                        roots.insert(inst.results[0], vec![foreign]);
                    }
                    Op::For { init, body, .. } => {
                        for (k, v) in init.iter().enumerate() {
                            union(roots, body.args[k + 1], &[*v]);
                        }
                        propagate(body, types, foreign, roots);
                        for (k, y) in body.yields().iter().enumerate() {
                            union(roots, body.args[k + 1], &[*y]);
                            union(roots, inst.results[k], &[*y, init[k]]);
                        }
                    }
                    Op::While { init, cond, body } => {
                        for (k, v) in init.iter().enumerate() {
                            union(roots, cond.args[k], &[*v]);
                            union(roots, body.args[k], &[*v]);
                        }
                        propagate(cond, types, foreign, roots);
                        propagate(body, types, foreign, roots);
                        for (k, y) in body.yields().iter().enumerate() {
                            union(roots, cond.args[k], &[*y]);
                            union(roots, body.args[k], &[*y]);
                            union(roots, inst.results[k], &[*y, init[k]]);
                        }
                    }
                    Op::If {
                        then_region,
                        else_region,
                        ..
                    } => {
                        propagate(then_region, types, foreign, roots);
                        propagate(else_region, types, foreign, roots);
                        for region in [then_region, else_region] {
                            for (k, y) in region.yields().iter().enumerate() {
                                union(roots, inst.results[k], &[*y]);
                            }
                        }
                    }
                    op => {
                        // Only pointers carry provenance: a loaded integer used as an
                        // offset does not make its buffer a root of the sum.
                        let is_ptr = |v: &Value| types[v.index()].elem.pointee().is_some();
                        let ops: Vec<Value> = op.operands().into_iter().filter(is_ptr).collect();
                        for r in inst.results.iter().filter(|r| is_ptr(r)) {
                            union(roots, *r, &ops);
                        }
                    }
                }
            }
        }
    }
}
