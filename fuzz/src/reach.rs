//! Which stores reach the comparison. The comparison sees buffers after the launch, so a
//! store whose lanes a later store overwrites checks nothing: a device could compute its
//! values wrong, or never store them, unnoticed. [`store_reach`] counts, by the reference
//! interpreter, the stores of a case that run and those of them whose removal changes no
//! buffer, so that a test can hold the generator to stores that count.

use crate::case::{Arg, Case};
use crate::exec::{self, Target};
use crate::info::Memory;
use tritium_dsl::ir::{AtomicOp, Block, Const, DType, Inst, Op, Param, Type, Value};

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

/// Counts the stores of `case` that run and those that leave no trace (see
/// [`StoreReach`]). `None` when the interpreter rejects the case itself.
pub fn store_reach(case: &Case) -> Option<StoreReach> {
    let original = exec::run(case, Target::Interpreter).ok()?;
    let stores = count_stores(&case.function.body);
    let mut reach = StoreReach {
        stores,
        ..StoreReach::default()
    };
    for k in 0..stores {
        if !runs(case, k) {
            continue;
        }
        reach.ran += 1;
        let mut without = case.clone();
        at_store(&mut without.function.body, k, &mut |b, i| {
            b.insts.remove(i);
        });
        if exec::run(&without, Target::Interpreter).is_ok_and(|out| out == original) {
            reach.silent += 1;
        }
    }
    Some(reach)
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

fn count_stores(b: &Block) -> usize {
    b.insts
        .iter()
        .map(|i| {
            let own = usize::from(matches!(i.op, Op::Store { .. }));
            own + i.op.regions().into_iter().map(count_stores).sum::<usize>()
        })
        .sum()
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
