//! What the generator promises: verifier-clean, deterministic, printable cases whose
//! compared values are reliable, covering every op kind of the IR.

use std::collections::BTreeSet;
use tritium_dsl::custom::BUILTIN_NAMES;
use tritium_dsl::ir::{Block, Op};
use tritium_fuzz::compare::tolerances;
use tritium_fuzz::coverage::{all_kinds, kinds};
use tritium_fuzz::gen::KERNEL_OPS;
use tritium_fuzz::info::Tol;
use tritium_fuzz::{generate, Case, GenConfig};

const SEEDS: u64 = 300;

#[test]
fn generated_programs_verify_and_print_back() {
    let config = GenConfig::default();
    for seed in 0..SEEDS {
        let case = generate(seed, &config);
        tritium_dsl::ir::verify(&case.function)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}\n{}", case.to_text()));
        let text = case.to_text();
        let back = Case::from_text(&text).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        assert_eq!(back.to_text(), text, "seed {seed}");
        // Text, not `==`: NaN constants are unequal to themselves.
        let again = generate(seed, &config).to_text();
        assert_eq!(again, text, "seed {seed} is not deterministic");
    }
}

#[test]
fn every_compared_buffer_is_reliable() {
    let config = GenConfig::default();
    for seed in 0..SEEDS {
        let case = generate(seed, &config);
        let tols = tolerances(&case);
        assert!(
            !tols.contains(&Some(Tol::Unreliable)),
            "seed {seed}: a buffer would not be compared: {tols:?}\n{}",
            case.to_text()
        );
    }
}

#[test]
fn every_op_kind_is_generated() {
    let config = GenConfig::default();
    let mut seen = BTreeSet::new();
    for seed in 0..SEEDS {
        seen.extend(kinds(&generate(seed, &config).function));
    }
    let missing: Vec<String> = all_kinds()
        .into_iter()
        .filter(|k| !seen.contains(k))
        .collect();
    assert!(
        missing.is_empty(),
        "never generated in {SEEDS} programs: {missing:?}"
    );
}

/// Every builtin and every op of `tritium-kernels` the generator knows is called.
#[test]
fn every_custom_op_is_called() {
    fn names(b: &Block, out: &mut BTreeSet<String>) {
        for inst in &b.insts {
            if let Op::Custom(c) = &inst.op {
                out.insert(c.name.clone());
            }
            for r in inst.op.regions() {
                names(r, out);
            }
        }
    }
    let config = GenConfig::default();
    let mut seen = BTreeSet::new();
    for seed in 0..SEEDS {
        names(&generate(seed, &config).function.body, &mut seen);
    }
    let missing: Vec<&str> = KERNEL_OPS
        .iter()
        .chain(BUILTIN_NAMES)
        .copied()
        .filter(|n| !seen.contains(*n))
        .collect();
    assert!(
        missing.is_empty(),
        "never called in {SEEDS} programs: {missing:?}"
    );
}

/// A buffer all programs update is compared only when its final value cannot depend on
/// the programs' order: integer atomics of one kind. An add and a max of different
/// programs do not commute (a generator bug the suite found under thread contention).
#[test]
fn shared_atomics_of_mixed_kinds_are_not_compared() {
    let case = |second: &str| {
        let text = format!(
            "// tritium-fuzz case\n// grid 2 1 1\n// num_warps 4\n// arg shared_atomics 0000000000000000\n\
             kernel @k(p0 %0: ptr<i32>) {{\n  %1 = const {{value = 3}} : i32 loc(\"k.rs\":1:1)\n  \
             %2 = atomic %0, %1 {{op = add}} : i32 loc(\"k.rs\":2:1)\n  \
             %3 = atomic %0, %1 {{op = {second}}} : i32 loc(\"k.rs\":3:1)\n}}\n"
        );
        Case::from_text(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
    };
    let table = [
        ("add", Some(Tol::Exact)),
        ("max", Some(Tol::Unreliable)),
        ("xchg", Some(Tol::Unreliable)),
    ];
    for (second, want) in table {
        assert_eq!(tolerances(&case(second)), vec![want], "add then {second}");
    }
}
