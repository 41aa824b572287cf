//! Mutations of printed kernels: the parser and the verifier never panic, abort or hang.
//!
//! [`mutate`] edits a printed kernel the way a new user might (flipped bytes, truncation,
//! deleted, duplicated and swapped lines and tokens, extreme numbers, huge tile types);
//! [`check`] parses and verifies the result and, when it is accepted, checks that printing
//! and parsing it again is stable; [`run`] does both for many mutants and reports the first
//! failures with the mutant text, so that each can be replayed with [`check`].

mod edits;
mod seeds;

pub use seeds::seed_kernels;

use crate::Rng;
use std::fmt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};
use tritium_dsl::ir::{parse_function, print_function, verify};
use tritium_dsl::Error;

/// What the parser and the verifier made of a text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Parsed and verified; printing and parsing it again is stable.
    Accepted,
    /// Rejected with this (clear) error.
    Rejected(String),
}

/// Applies 1–3 random edits to `text`.
pub fn mutate(text: &str, rng: &mut Rng) -> String {
    let mut t = text.to_string();
    for _ in 0..1 + rng.below(3) {
        t = edits::apply(&t, rng);
    }
    t
}

/// Parses and verifies `text`. `Err` describes a failure of the parser or the verifier: a
/// panic, an error that names no place, or an accepted program whose print → parse → print
/// round trip is not stable.
pub fn check(text: &str) -> Result<Outcome, String> {
    crate::check::record_panic_locations(false);
    catch_unwind(AssertUnwindSafe(|| check_unguarded(text))).unwrap_or_else(|p| {
        let msg = p
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a non-string payload".into());
        let at = crate::check::last_panic_location().unwrap_or_default();
        Err(format!("panicked at {at}: {msg}"))
    })
}

fn check_unguarded(text: &str) -> Result<Outcome, String> {
    let f = match parse_function(text).and_then(|f| verify(&f).map(|()| f)) {
        Ok(f) => f,
        Err(e) => return clear(e, text).map(Outcome::Rejected),
    };
    let printed = print_function(&f);
    let back = parse_function(&printed)
        .map_err(|e| format!("its printed text does not parse: {e}\n{printed}"))?;
    verify(&back).map_err(|e| format!("its printed text does not verify: {e}\n{printed}"))?;
    // Debug forms compare NaN constants as equal, which `==` does not.
    if format!("{back:?}") != format!("{f:?}") {
        return Err(format!(
            "its printed text parses to another function\n{printed}"
        ));
    }
    let again = print_function(&back);
    if let Some((k, (a, b))) = printed
        .lines()
        .zip(again.lines())
        .enumerate()
        .find(|(_, (a, b))| a != b)
    {
        return Err(format!(
            "print → parse → print differs at line {}:\n  {a}\n  {b}",
            k + 1
        ));
    }
    if printed != again {
        return Err("print → parse → print differs in length".into());
    }
    Ok(Outcome::Accepted)
}

/// The error's text, or why it is not a clear one (no message, or a line outside the text).
fn clear(e: Error, text: &str) -> Result<String, String> {
    let lines = text.lines().count().max(1);
    match &e {
        Error::Parse { line, .. } if !(1..=lines).contains(line) => {
            Err(format!("`{e}` names line {line} of a {lines}-line text"))
        }
        Error::Parse { message, .. } | Error::Verify { message, .. } if message.is_empty() => {
            Err(format!("`{e}` has no message"))
        }
        _ => Ok(e.to_string()),
    }
}

/// A mutant the parser or the verifier failed on.
#[derive(Debug, Clone)]
pub struct Failure {
    /// Which mutant of the run (0-based).
    pub index: usize,
    /// What went wrong.
    pub problem: String,
    /// How many mutants failed this way (the same first line of `problem`).
    pub count: usize,
    /// The mutant: `check(&mutant)` replays it.
    pub mutant: String,
}

/// The result of [`run`].
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// Mutants checked.
    pub mutants: usize,
    /// Mutants parsed and verified.
    pub accepted: usize,
    /// Mutants rejected with a clear error.
    pub rejected: usize,
    /// Mutants the parser or the verifier failed on.
    pub failures: usize,
    /// The first failures of each kind (by the first line of the problem), at most
    /// [`KEPT_FAILURES`].
    pub first_failures: Vec<Failure>,
    /// The slowest check.
    pub slowest: Duration,
}

/// How many failures [`Summary::first_failures`] keeps.
pub const KEPT_FAILURES: usize = 20;

/// A check that takes longer than this is a failure: every check is linear in the text.
pub const SLOW_CHECK: Duration = Duration::from_secs(2);

/// A check that takes longer than this is taken to hang; the run stops there.
pub const HUNG_CHECK: Duration = Duration::from_secs(30);

impl Summary {
    fn fail(&mut self, index: usize, problem: String, mutant: String) {
        self.failures += 1;
        let kind = |p: &str| p.lines().next().unwrap_or("").to_string();
        let kept = self.first_failures.len();
        match self
            .first_failures
            .iter_mut()
            .find(|f| kind(&f.problem) == kind(&problem))
        {
            Some(f) => f.count += 1,
            None if kept < KEPT_FAILURES => self.first_failures.push(Failure {
                index,
                problem,
                count: 1,
                mutant,
            }),
            None => {}
        }
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} mutants: {} accepted, {} rejected, {} failures; slowest check {:.1} ms",
            self.mutants,
            self.accepted,
            self.rejected,
            self.failures,
            self.slowest.as_secs_f64() * 1e3
        )?;
        for x in &self.first_failures {
            writeln!(
                f,
                "--- mutant {} ({} like it): {}",
                x.index, x.count, x.problem
            )?;
            writeln!(f, "{}", x.mutant)?;
        }
        Ok(())
    }
}

/// What the worker thread reports for one mutant.
struct Report {
    result: Result<Outcome, String>,
    took: Duration,
    mutant: String,
}

/// Checks `count` mutants of `seeds` (printed kernels, at least one), drawn from `seed`.
/// The same arguments give the same mutants. A check that panics, is slower than
/// [`SLOW_CHECK`] or rejects without a clear error is a failure; one that takes longer than
/// [`HUNG_CHECK`] stops the run.
pub fn run(seeds: &[String], count: usize, seed: u64) -> Summary {
    assert!(!seeds.is_empty(), "mutate::run needs at least one seed");
    let (tx, rx) = mpsc::channel::<Report>();
    let current = Arc::new(Mutex::new(String::new()));
    let worker = {
        let (seeds, current) = (seeds.to_vec(), current.clone());
        move || {
            let mut rng = Rng::new(seed);
            for _ in 0..count {
                let text: &String = rng.pick(&seeds);
                let mutant = mutate(text, &mut rng);
                *current.lock().unwrap() = mutant.clone();
                let start = Instant::now();
                let result = check(&mutant);
                let took = start.elapsed();
                if tx
                    .send(Report {
                        result,
                        took,
                        mutant,
                    })
                    .is_err()
                {
                    return;
                }
            }
        }
    };
    // A thread of our own: a hung check is reported instead of hanging the caller.
    let _ = std::thread::Builder::new()
        .name("mutants".into())
        .spawn(worker)
        .expect("spawn the mutant thread");
    let mut s = Summary::default();
    while s.mutants < count {
        let index = s.mutants;
        let r = match rx.recv_timeout(HUNG_CHECK) {
            Ok(r) => r,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                let mutant = current.lock().map(|m| m.clone()).unwrap_or_default();
                s.mutants += 1;
                s.fail(index, format!("no answer in {HUNG_CHECK:?}"), mutant);
                return s;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                s.fail(index, "the mutator itself panicked".into(), String::new());
                return s;
            }
        };
        s.mutants += 1;
        s.slowest = s.slowest.max(r.took);
        match r.result {
            Err(problem) => s.fail(index, problem, r.mutant),
            Ok(_) if r.took > SLOW_CHECK => s.fail(index, format!("took {:?}", r.took), r.mutant),
            Ok(Outcome::Accepted) => s.accepted += 1,
            Ok(Outcome::Rejected(_)) => s.rejected += 1,
        }
    }
    s
}
