//! The fixed budget of `cargo test`: random programs on every target against the
//! interpreter (`scripts/dev fuzz` runs any number). `TRITIUM_FUZZ_PROGRAMS` changes the
//! budget of each half.

use tritium_fuzz::{check, generate, GenConfig, Target};

fn budget() -> u64 {
    std::env::var("TRITIUM_FUZZ_PROGRAMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100)
}

/// Checks seeds `first, first + 2, …` (two tests share the budget, one per core).
fn run_half(first: u64) {
    let config = GenConfig::default();
    let mut failures = Vec::new();
    for k in 0..budget() {
        let seed = first + 2 * k;
        let case = generate(seed, &config);
        let report = check(&case, &Target::ALL);
        if !report.ok() {
            failures.push(format!(
                "seed {seed}: {:?} {:?} (replay: scripts/dev fuzz --print {seed} > case.tir; scripts/dev fuzz --replay case.tir)",
                report.invalid, report.mismatches
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn random_programs_agree_with_the_interpreter_even_seeds() {
    run_half(0);
}

#[test]
fn random_programs_agree_with_the_interpreter_odd_seeds() {
    run_half(1);
}
