//! Checking one case on every target against the interpreter.

use crate::case::{Arg, Case};
use crate::compare::{compare, tolerances};
use crate::exec::{execute, mode, run, Executed, Mode, Target};
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
    /// For an out-of-bounds case ([`Case::out_of_bounds`]), what the interpreter made
    /// of it.
    pub verdict: Option<Verdict>,
}

/// What the interpreter made of an out-of-bounds case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// It touches bytes outside every buffer (the interpreter's error): every compiled
    /// target had to reject it, guards intact.
    Refused(String),
    /// Every access was in bounds after all: the results were compared as usual.
    Accepted,
    /// Only loads whose values nothing uses go outside (the interpreter refuses the case,
    /// and accepts it without its dead code): a target may skip such a load, as the CPU
    /// does, or refuse the launch, but writes nothing outside the buffers, and a launch
    /// that succeeds gives the results of the case without its dead code.
    DeadLoads(String),
    /// The interpreter stopped it for another reason (an assert on the program id, say):
    /// nothing to compare.
    Skipped(String),
}

impl Verdict {
    /// A short name for reports.
    pub fn name(&self) -> &'static str {
        match self {
            Verdict::Refused(_) => "refused",
            Verdict::Accepted => "accepted",
            Verdict::DeadLoads(_) => "dead",
            Verdict::Skipped(_) => "skipped",
        }
    }
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
    caught(|| run(case, target))
}

/// [`execute`] of `target` the `mode` way, a panic the launch's error.
pub fn execute_caught(case: &Case, target: Target, mode: Mode) -> Executed {
    caught(|| Ok(execute(case, target, mode))).unwrap_or_else(|e| Executed {
        launch: Err(e),
        guards: Ok(()),
        contents: Vec::new(),
    })
}

fn caught<T>(f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    record_panic_locations(false);
    match catch_unwind(AssertUnwindSafe(f)) {
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
///
/// An out-of-bounds case ([`Case::out_of_bounds`]) is launched the default way on every
/// compiled target (PTX, which compiles the same kernel as its case's, is left out). When
/// the interpreter rejects it for an access outside every buffer, every target must
/// return an error too, with every guard around every buffer intact
/// ([`Verdict::Refused`]; where only loads whose values nothing uses go outside, a target
/// may skip them instead: [`Verdict::DeadLoads`]); when the interpreter accepts it, the
/// results are compared as usual; when it stops it for another reason, nothing is
/// compared ([`Verdict::Skipped`]).
pub fn check(case: &Case, targets: &[Target]) -> Report {
    check_as(case, targets, mode(case))
}

/// [`check`] with the compiled targets launched the `mode` way (tests show with
/// [`Mode::Unchecked`] that an out-of-bounds launch without checks is caught).
pub fn check_as(case: &Case, targets: &[Target], mode: Mode) -> Report {
    let mut report = Report::default();
    if let Err(e) = tritium_dsl::ir::verify(&case.function) {
        report.invalid = Some(format!("the verifier rejects it: {e}"));
        return report;
    }
    let clock = std::time::Instant::now();
    let want = run_caught(case, Target::Interpreter);
    report.times.push((Target::Interpreter, clock.elapsed()));
    let targets: Vec<Target> = targets
        .iter()
        .copied()
        .filter(|t| *t != Target::Interpreter)
        .filter(|t| !(case.out_of_bounds && matches!(t, Target::Ptx(_))))
        .filter(|t| *t != Target::HopperEmulator || crate::exec::has_dot(&case.function))
        .collect();
    let want = match want {
        Ok(w) => w,
        Err(e) if case.out_of_bounds && is_bounds_error(&e) => {
            // Without its dead code (a load whose value nothing uses), is it still refused?
            let mut live = case.clone();
            crate::shrink::dead_code(&mut live.function);
            let live_want = match live.function == case.function {
                true => Err(e.clone()),
                false => run_caught(&live, Target::Interpreter),
            };
            match live_want {
                Err(_) => {
                    refused(case, &targets, mode, &e, &mut report);
                    report.verdict = Some(Verdict::Refused(e));
                }
                Ok(w) => {
                    dead_loads(case, &targets, mode, &w, &mut report);
                    report.verdict = Some(Verdict::DeadLoads(e));
                }
            }
            return report;
        }
        Err(e) if case.out_of_bounds => {
            report.verdict = Some(Verdict::Skipped(e));
            return report;
        }
        Err(e) => {
            report.invalid = Some(format!("the interpreter rejects it: {e}"));
            return report;
        }
    };
    if case.out_of_bounds {
        report.verdict = Some(Verdict::Accepted);
    }
    let tols = tolerances(case);
    for (p, bytes) in &case.expect {
        if want.get(*p) != Some(bytes) {
            report.mismatches.push(Mismatch {
                target: Target::Interpreter,
                message: format!("parameter {p} differs from the pinned result"),
            });
        }
    }
    for t in targets {
        let clock = std::time::Instant::now();
        let got = execute_caught(case, t, mode).outcome();
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

/// Whether `e`, a compiled target's error, is one for an access outside the buffers
/// (checked code's, a default launch's per-site checks', or the interpreter's).
pub fn is_bounds_error(e: &str) -> bool {
    e.contains("out-of-bounds")
        || e.contains("outside every buffer")
        // (A strided view's gap, as the interpreter names it for an access or an extent.)
        || e.contains("falls between its elements")
        || e.contains("whose gaps are not its elements")
}

/// An error naming the first gap byte of a strided view ([`Case::views`]) that a launch
/// changed: its bytes between the view's elements are not the view's to write.
pub fn gaps_intact(case: &Case, contents: &[Vec<u8>]) -> Result<(), String> {
    for v in &case.views {
        let (Some(Arg::Buffer { bytes, .. }), Some(got)) =
            (case.args.get(v.param), contents.get(v.param))
        else {
            continue;
        };
        let f = &case.function;
        let size = (f.params.get(v.param))
            .and_then(|p| f.ty(p.value).elem.pointee())
            .map_or(1, |d| d.size_bytes());
        let changed =
            (0..bytes.len().min(got.len())).find(|&b| !v.holds(b / size) && bytes[b] != got[b]);
        if let Some(b) = changed {
            return Err(format!(
                "p{}'s byte {b}, between its view's elements, was written",
                v.param
            ));
        }
    }
    Ok(())
}

/// What a launch of `case` wrote outside its buffers' elements: a guard around a buffer,
/// else a view's gap ([`gaps_intact`]); `None` when nothing.
fn wrote_outside(case: &Case, got: &Executed) -> Option<String> {
    (got.guards.clone())
        .and_then(|()| gaps_intact(case, &got.contents))
        .err()
}

/// An out-of-bounds case the interpreter rejected with `why`: every target's launch must
/// fail too, for an access outside the buffers, and write nothing outside them.
fn refused(case: &Case, targets: &[Target], mode: Mode, why: &str, report: &mut Report) {
    // User ops see raw pointers: no bounds proof covers their accesses, no launch checks
    // them (variants never shorten their buffers: `oob::custom_roots`).
    let note = match calls_user_code_with_pointers(&case.function) {
        true => "(the program gives a user op a pointer) ",
        false => "",
    };
    for &t in targets {
        let clock = std::time::Instant::now();
        let got = execute_caught(case, t, mode);
        report.times.push((t, clock.elapsed()));
        let launch = match &got.launch {
            Ok(()) => Some(format!(
                "the launch succeeded where the interpreter reports: {why}"
            )),
            Err(e) if !is_bounds_error(e) => Some(format!(
                "the launch failed for another reason than an access out of bounds: {e}"
            )),
            Err(_) => None,
        };
        let guards = wrote_outside(case, &got).map(|e| {
            let returned = match &got.launch {
                Ok(()) => "succeeded",
                Err(_) => "failed",
            };
            format!("out-of-bounds launch ({returned}) wrote outside its buffers: {e}")
        });
        for message in guards.into_iter().chain(launch) {
            let message = format!("{note}{message}");
            report.mismatches.push(Mismatch { target: t, message });
        }
    }
}

/// An out-of-bounds case whose only accesses outside are loads whose values nothing uses
/// (`want`: the interpreter's results for the case without them): a target may refuse it
/// (for an access out of bounds) or succeed with `want`, and writes nothing outside.
fn dead_loads(case: &Case, targets: &[Target], mode: Mode, want: &[Vec<u8>], report: &mut Report) {
    let tols = tolerances(case);
    for &t in targets {
        let clock = std::time::Instant::now();
        let got = execute_caught(case, t, mode);
        report.times.push((t, clock.elapsed()));
        let launch = match &got.launch {
            Ok(()) => compare(case, &tols, &got.contents, want)
                .err()
                .or_else(|| compare_prints(case, &got.contents, want)),
            Err(e) if !is_bounds_error(e) => Some(format!(
                "the launch failed for another reason than an access out of bounds: {e}"
            )),
            Err(_) => None,
        };
        let guards =
            wrote_outside(case, &got).map(|e| format!("the launch wrote outside its buffers: {e}"));
        for message in guards.into_iter().chain(launch) {
            report.mismatches.push(Mismatch { target: t, message });
        }
    }
}

/// Whether `f` calls a user op (not a builtin, whose accesses are checked) with a pointer
/// among its inputs.
pub fn calls_user_code_with_pointers(f: &tritium_dsl::ir::Function) -> bool {
    let mut found = false;
    f.walk(&mut |inst| {
        if let tritium_dsl::ir::Op::Custom(c) = &inst.op {
            found |= !c.is_builtin() && c.ins.iter().any(|v| f.ty(*v).elem.pointee().is_some());
        }
    });
    found
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
