//! Checking one case on every target against the interpreter.

use crate::case::Case;
use crate::compare::{compare, tolerances};
use crate::exec::{run, Target};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// How a target disagreed with the interpreter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// The target.
    pub target: Target,
    /// What went wrong: a different element, an error, or a panic.
    pub message: String,
}

/// The result of checking one case.
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Targets that disagreed with the interpreter.
    pub mismatches: Vec<Mismatch>,
    /// The interpreter rejected the case (the generator broke its promise), with why.
    pub invalid: Option<String>,
    /// Time spent on each target.
    pub times: Vec<(Target, std::time::Duration)>,
}

impl Report {
    /// True when every target agreed.
    pub fn ok(&self) -> bool {
        self.mismatches.is_empty() && self.invalid.is_none()
    }
}

/// One line per disagreement, each message cut to a few hundred characters (a link error
/// can list every symbol of a library).
impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const MAX: usize = 400;
        let cut = |m: &str| -> String {
            match m.char_indices().nth(MAX) {
                Some((i, _)) => format!("{}… ({} bytes)", &m[..i], m.len()),
                None => m.to_string(),
            }
        };
        if let Some(why) = &self.invalid {
            write!(f, "\n  invalid case: {}", cut(why))?;
        }
        for m in &self.mismatches {
            write!(f, "\n  {}: {}", m.target.name(), cut(&m.message))?;
        }
        Ok(())
    }
}

/// Runs `target`, turning a panic into an error that says where it happened.
pub fn run_caught(case: &Case, target: Target) -> crate::exec::Outcome {
    record_panic_locations(false);
    match catch_unwind(AssertUnwindSafe(|| run(case, target))) {
        Ok(r) => r,
        Err(p) => Err(format!(
            "panicked at {}: {}",
            last_panic_location().unwrap_or_else(|| "an unknown place".into()),
            panic_message(&p)
        )),
    }
}

thread_local! {
    /// Where this thread last panicked: a caught panic's payload does not say.
    static PANIC_AT: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

static QUIET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Records where every panic happens (for [`last_panic_location`]). `quiet` also drops
/// the default report to stderr, for runs that report caught panics themselves.
pub fn record_panic_locations(quiet: bool) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    if quiet {
        QUIET.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let at = info.location().map(|l| l.to_string());
            PANIC_AT.with(|a| *a.borrow_mut() = at);
            if !QUIET.load(std::sync::atomic::Ordering::Relaxed) {
                previous(info);
            }
        }));
    });
}

/// Where this thread last panicked, taken (the next call gives `None`).
pub fn last_panic_location() -> Option<String> {
    PANIC_AT.with(|a| a.take())
}

/// The text of a caught panic.
pub fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "a panic".into())
}

/// Checks `case` on `targets` (the interpreter is always the reference; pinned results,
/// when the case has them, are checked against the interpreter too).
pub fn check(case: &Case, targets: &[Target]) -> Report {
    let mut report = Report::default();
    if let Err(e) = tritium_dsl::ir::verify(&case.function) {
        report.invalid = Some(format!("the verifier rejects it: {e}"));
        return report;
    }
    let clock = std::time::Instant::now();
    let want = run_caught(case, Target::Interpreter);
    report.times.push((Target::Interpreter, clock.elapsed()));
    let want = match want {
        Ok(w) => w,
        Err(e) => {
            report.invalid = Some(format!("the interpreter rejects it: {e}"));
            return report;
        }
    };
    let tols = tolerances(case);
    for (p, bytes) in &case.expect {
        if want.get(*p) != Some(bytes) {
            report.mismatches.push(Mismatch {
                target: Target::Interpreter,
                message: format!("parameter {p} differs from the pinned result"),
            });
        }
    }
    for &t in targets {
        if t == Target::Interpreter {
            continue;
        }
        let clock = std::time::Instant::now();
        let got = run_caught(case, t);
        report.times.push((t, clock.elapsed()));
        let message = match got {
            Err(e) => Some(format!("error: {e}")),
            Ok(_) if matches!(t, Target::Ptx(_)) => None,
            Ok(g) => compare(case, &tols, &g, &want)
                .err()
                .or_else(|| compare_prints(case, &g, &want)),
        };
        if let Some(message) = message {
            report.mismatches.push(Mismatch { target: t, message });
        }
    }
    report
}

/// The first line where `got`'s printed text (the buffer after the parameters', when the
/// program prints) differs from `want`'s.
fn compare_prints(case: &Case, got: &[Vec<u8>], want: &[Vec<u8>]) -> Option<String> {
    let n = case.args.len();
    let (g, w) = (got.get(n)?, want.get(n)?);
    if g == w {
        return None;
    }
    let (g, w) = (String::from_utf8_lossy(g), String::from_utf8_lossy(w));
    let (gl, wl): (Vec<&str>, Vec<&str>) = (g.lines().collect(), w.lines().collect());
    let at = gl.iter().zip(&wl).position(|(a, b)| a != b);
    Some(match at {
        Some(i) => format!(
            "device_print: got `{}`, want `{}` (sorted line {i})",
            gl[i], wl[i]
        ),
        None => format!("device_print: {} lines, want {}", gl.len(), wl.len()),
    })
}
