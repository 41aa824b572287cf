//! Which stores reach the comparison. The comparison sees buffers after the launch, so a
//! store whose lanes a later store overwrites checks nothing: a device could compute its
//! values wrong, or never store them, unnoticed. [`store_reach`] counts, by the reference
//! interpreter, the stores of a case that run and those of them whose removal changes no
//! buffer, so that a test can hold the generator to stores that count.

use crate::case::{Arg, Case};
use crate::exec::{self, Target};
use crate::info::Memory;
use tritium_dsl::ir::{AtomicOp, Block, Const, DType, Function, Inst, Op, Param, Type, Value};

/// What [`store_reach`] found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StoreReach {
    /// Store ops in the program.
    pub stores: usize,
    /// Those that ran (in some program, at some trip).
    pub ran: usize,
    /// Those that ran and whose removal leaves every buffer as it was: overwritten, fully
    /// masked, or writing what was there.
    pub silent: usize,
}

/// What became of one store (by its place in program order: an op before the regions
/// nested in it, as [`Function::walk`](tritium_dsl::ir::Function::walk) visits them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreFate {
    /// It never ran.
    NotRun,
    /// It ran, and some buffer differs without it.
    Seen,
    /// It ran, and every buffer is the same without it.
    Silent,
}

/// Counts the stores of `case` that run and those that leave no trace (see
/// [`StoreReach`]). `None` when the interpreter rejects the case itself.
pub fn store_reach(case: &Case) -> Option<StoreReach> {
    let fates = store_fates(case)?;
    let count = |f: StoreFate| fates.iter().filter(|x| **x == f).count();
    Some(StoreReach {
        stores: fates.len(),
        ran: fates.len() - count(StoreFate::NotRun),
        silent: count(StoreFate::Silent),
    })
}

/// The [`StoreFate`] of each store of `case`, in program order; `None` when the
/// interpreter rejects the case itself.
pub fn store_fates(case: &Case) -> Option<Vec<StoreFate>> {
    let original = exec::run(case, Target::Interpreter).ok()?;
    let fate = |k: usize| {
        if !runs(case, k) {
            return StoreFate::NotRun;
        }
        let mut without = case.clone();
        at_store(&mut without.function.body, k, &mut |b, i| {
            b.insts.remove(i);
        });
        match exec::run(&without, Target::Interpreter).is_ok_and(|out| out == original) {
            true => StoreFate::Silent,
            false => StoreFate::Seen,
        }
    };
    Some((0..count_stores(&case.function)).map(fate).collect())
}

/// Whether store `k` (in program order) runs: an atomic add of 1 to a counter of its
/// own (a parameter added last), just before it, leaves the counter above 0.
fn runs(case: &Case, k: usize) -> bool {
    let mut witness = case.clone();
    let f = &mut witness.function;
    let mut new_value = |ty: Type| {
        f.types.push(ty);
        Value(f.types.len() as u32 - 1)
    };
    let counter = new_value(Type::ptr(DType::I32));
    let one = new_value(Type::scalar(DType::I32));
    let old = new_value(Type::scalar(DType::I32));
    f.params.push(Param {
        name: "witness".into(),
        value: counter,
    });
    witness.args.push(Arg::Buffer {
        memory: Memory::SharedAtomics,
        bytes: vec![0; 4],
    });
    at_store(&mut f.body, k, &mut |b, i| {
        let loc = b.insts[i].loc.clone();
        let add = Op::Atomic {
            op: AtomicOp::Add,
            ptr: counter,
            value: one,
            mask: None,
        };
        let inst = |results, op| Inst {
            results,
            op,
            loc: loc.clone(),
        };
        b.insts.insert(i, inst(vec![old], add));
        b.insts.insert(i, inst(vec![one], Op::Const(Const::Int(1))));
    });
    let param = witness.function.params.len() - 1;
    exec::run(&witness, Target::Interpreter)
        .is_ok_and(|out| out.get(param).is_some_and(|c| c.iter().any(|b| *b != 0)))
}

fn count_stores(f: &Function) -> usize {
    let mut n = 0;
    f.walk(&mut |i| n += usize::from(matches!(i.op, Op::Store { .. })));
    n
}

/// Calls `f` with the block holding store `k` (in program order: an op before the
/// regions nested in it) and the store's index there.
fn at_store(b: &mut Block, k: usize, f: &mut dyn FnMut(&mut Block, usize)) {
    fn go(b: &mut Block, k: &mut usize, f: &mut dyn FnMut(&mut Block, usize)) -> bool {
        for i in 0..b.insts.len() {
            if matches!(b.insts[i].op, Op::Store { .. }) {
                if *k == 0 {
                    f(b, i);
                    return true;
                }
                *k -= 1;
            }
            for r in b.insts[i].op.regions_mut() {
                if go(r, k, f) {
                    return true;
                }
            }
        }
        false
    }
    go(b, &mut { k }, f);
}
