//! The text parser and the verifier against mutated kernels.

use tritium_dsl::ir::{parse_function, print_function};
use tritium_fuzz::mutate::{check, mutate, run, seed_kernels, Outcome};
use tritium_fuzz::Rng;

/// `TRITIUM_MUTANTS` (default `default`) and `TRITIUM_SEED` (default 1).
fn settings(default: usize) -> (usize, u64) {
    let var = |k: &str| std::env::var(k).ok().and_then(|v| v.parse().ok());
    (
        var("TRITIUM_MUTANTS").unwrap_or(default as u64) as usize,
        var("TRITIUM_SEED").unwrap_or(1),
    )
}

/// The seeds are printed kernels: each parses back to the same text.
#[test]
fn every_seed_kernel_is_accepted_and_prints_back_the_same() {
    for text in seed_kernels() {
        assert_eq!(check(&text), Ok(Outcome::Accepted), "{text}");
        assert_eq!(print_function(&parse_function(&text).unwrap()), text);
    }
}

#[test]
fn mutants_are_deterministic_and_varied() {
    let seeds = seed_kernels();
    let draw = || {
        let mut rng = Rng::new(7);
        (0..200)
            .map(|_| {
                let text: &String = rng.pick(&seeds);
                mutate(text, &mut rng)
            })
            .collect::<Vec<_>>()
    };
    let (a, b) = (draw(), draw());
    assert_eq!(a, b);
    let outcomes: Vec<Outcome> = a.iter().map(|m| check(m).unwrap()).collect();
    let accepted = outcomes.iter().filter(|o| **o == Outcome::Accepted).count();
    assert!(
        accepted > 0 && accepted < outcomes.len(),
        "{accepted} of 200 accepted"
    );
}

/// A short run; `TRITIUM_MUTANTS=100000` (with `--release`) is the long one.
#[test]
fn mutated_kernels_parse_or_fail_clearly() {
    let (count, seed) = settings(4000);
    let s = run(&seed_kernels(), count, seed);
    eprintln!("{s}");
    assert_eq!(s.failures, 0, "{s}");
}
