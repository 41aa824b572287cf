//! The shrinker keeps what makes a case fail and drops the rest.

use tritium_fuzz::coverage::kinds;
use tritium_fuzz::shrink::shrink;
use tritium_fuzz::{generate, GenConfig};

fn size(f: &tritium_dsl::ir::Function) -> usize {
    let mut n = 0;
    f.walk(&mut |_| n += 1);
    n
}

/// Whether the result of a max reduction reaches a store's operands through ops (not
/// through a region's yield): a program where the reduction's value is observed, as a
/// miscompile's must be. (Seed 0's program since the `likely` hints keeps its only max
/// reduction alive through a `while` loop's carried value that an `if` yields and nothing
/// uses: every edit that would shrink it leaves the reduction dead.)
fn max_reaches_a_store(f: &tritium_dsl::ir::Function) -> bool {
    use std::collections::HashSet;
    use tritium_dsl::ir::{Op, ReduceOp};
    let mut reached = HashSet::new();
    f.walk(&mut |inst| {
        if matches!(
            inst.op,
            Op::Reduce {
                op: ReduceOp::Max,
                ..
            }
        ) {
            reached.extend(inst.results.iter().copied());
        }
    });
    let mut stored = false;
    loop {
        let before = reached.len();
        f.walk(&mut |inst| {
            if inst.op.operands().iter().any(|o| reached.contains(o)) {
                stored |= matches!(inst.op, Op::Store { .. } | Op::Atomic { .. });
                reached.extend(inst.results.iter().copied());
            }
        });
        if stored || reached.len() == before {
            return stored;
        }
    }
}

#[test]
fn shrinking_keeps_the_failing_op_and_little_else() {
    let config = GenConfig::default();
    let (case, _) = (0..50)
        .map(|s| generate(s, &config))
        .map(|c| {
            let n = size(&c.function);
            (c, n)
        })
        .find(|(c, n)| *n > 60 && max_reaches_a_store(&c.function))
        .expect("a large program with a max reduction that is stored");
    // A stand-in for a miscompile: "fails" while the program has a max reduction.
    let mut fails = |c: &tritium_fuzz::Case| kinds(&c.function).contains("reduce.max");
    let small = shrink(&case, &mut fails, 2_000);
    assert!(kinds(&small.function).contains("reduce.max"));
    // At most a loop around the reduction: its bounds and initial values (5 constants),
    // the loop, a side effect that keeps it alive (an atomic or store with its operands)
    // and the reduction with its operand and the loop's yield.
    assert!(
        size(&small.function) <= 14,
        "{} instructions left of {}:\n{}",
        size(&small.function),
        size(&case.function),
        small.to_text()
    );
    assert_eq!(small.grid, [1, 1, 1]);
    tritium_dsl::ir::verify(&small.function).unwrap();
    // The shrunk case prints and reads back.
    let text = small.to_text();
    assert_eq!(
        tritium_fuzz::Case::from_text(&text).unwrap().to_text(),
        text
    );
}

/// A case whose store has lanes writing different values to one element breaks a
/// generator promise: `check` calls it invalid (so the shrinker never keeps such a
/// candidate, whatever the targets do with it).
#[test]
fn a_store_with_conflicting_lanes_is_an_invalid_case() {
    use tritium_dsl::ir::DType;
    use tritium_dsl::trace::lang::*;
    use tritium_dsl::trace::{ptr_param, Tracer};
    use tritium_fuzz::case::Arg;
    use tritium_fuzz::info::Memory;
    let t = Tracer::begin("conflict").unwrap();
    let out = ptr_param("out", DType::I32);
    store(out + zeros([4], DType::I32), arange(0, 4), NoArg);
    let case = tritium_fuzz::Case {
        seed: 0,
        function: t.finish().unwrap(),
        grid: [1, 1, 1],
        num_warps: 1,
        args: vec![Arg::Buffer {
            memory: Memory::Output,
            bytes: vec![0; 4],
        }],
        expect: Vec::new(),
        out_of_bounds: false,
        views: Vec::new(),
        row_strides: Vec::new(),
    };
    let report = tritium_fuzz::check::check(&case, &[tritium_fuzz::exec::Target::Cpu]);
    let why = report.invalid.expect("an invalid case");
    assert!(why.contains("unspecified"), "{why}");
}
