//! `tritium-fuzz`: runs random programs on every target against the interpreter.
//!
//! ```text
//! tritium-fuzz [--programs N | --minutes M] [--seed S] [--jobs J]
//!                                                         fuzz seeds S, S+1, … in J worker
//!                                                         processes (default: one per core)
//! tritium-fuzz --mutants N [--seed S]                     mutate printed kernels N times
//! tritium-fuzz --package-mutants N [--seed S]             mutate an AOT package N times
//! tritium-fuzz --print S                                  print the case of seed S
//! tritium-fuzz --print-oob S                              print seed S's out-of-bounds variant
//! tritium-fuzz --coverage N                               count the op kinds of seeds 1..=N
//! tritium-fuzz --shrink S                                 print the smallest failing case of seed S
//!                                                         (its out-of-bounds variant, if that fails)
//! tritium-fuzz --replay FILE                              check a case file
//! tritium-fuzz --pin FILE                                 pin the interpreter's results in it
//! tritium-fuzz --help                                     print this; an unknown option is an error
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tritium_fuzz::pool::{self, done_line, Event, PoolConfig};
use tritium_fuzz::{check, generate, oob, Case, GenConfig, Target};

/// Options that take a value.
const VALUED: [&str; 13] = [
    "--programs",
    "--minutes",
    "--seed",
    "--jobs",
    "--mutants",
    "--package-mutants",
    "--print",
    "--print-oob",
    "--coverage",
    "--shrink",
    "--replay",
    "--pin",
    "--deadline-ms",
];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--help" || a == "-h") {
        println!("{USAGE}");
        return;
    }
    if let Err(e) = check_options(&args) {
        eprintln!("tritium-fuzz: {e}");
        usage();
    }
    let value = |name: &str| -> Option<String> {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let num = |name: &str| {
        value(name).map(|v| {
            v.parse::<u64>().unwrap_or_else(|_| {
                eprintln!("tritium-fuzz: {name} takes a whole number, not `{v}`");
                usage()
            })
        })
    };
    let config = GenConfig::default();
    // Caught panics are in the reports, with where they happened.
    tritium_fuzz::check::record_panic_locations(true);
    if let Some(seed) = num("--print") {
        print!("{}", generate(seed, &config).to_text());
        return;
    }
    if let Some(seed) = num("--print-oob") {
        match oob::draw(&generate(seed, &config)) {
            Some(v) => print!("// {}\n{}", v.change, v.case.to_text()),
            None => {
                eprintln!("tritium-fuzz: seed {seed} runs no out-of-bounds variant");
                std::process::exit(1)
            }
        }
        return;
    }
    if let Some(n) = num("--coverage") {
        let mut kinds = std::collections::BTreeMap::<String, usize>::new();
        for seed in 1..=n {
            for k in tritium_fuzz::coverage::kinds(&generate(seed, &config).function) {
                *kinds.entry(k).or_default() += 1;
            }
        }
        for k in tritium_fuzz::coverage::all_kinds() {
            println!("{:24} {}", k, kinds.get(&k).copied().unwrap_or(0));
        }
        return;
    }
    if let Some(seed) = num("--shrink") {
        let mut case = generate(seed, &config);
        let mut report = check(&case, &Target::available());
        if report.mismatches.is_empty() {
            // The case passes: its out-of-bounds variant may not.
            if let Some(v) = oob::draw(&case) {
                let r = check(&v.case, &Target::available());
                if !r.mismatches.is_empty() {
                    eprintln!("seed {seed}'s out-of-bounds variant ({}) fails", v.change);
                    (case, report) = (v.case, r);
                }
            }
        }
        let Some(first) = report.mismatches.first().map(|m| m.target) else {
            println!("seed {seed} passes: {report:?}");
            return;
        };
        let mut fails = |c: &Case| {
            check(c, &[first])
                .mismatches
                .iter()
                .any(|m| m.target == first)
        };
        let small = tritium_fuzz::shrink::shrink(&case, &mut fails, 5_000);
        print!("{}", small.to_text());
        eprintln!("{:?}", check(&small, &Target::available()).mismatches);
        return;
    }
    if let Some(path) = value("--pin") {
        pin(&path);
        return;
    }
    if let Some(path) = value("--replay") {
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            eprintln!("cannot read {path}: {e}");
            std::process::exit(2)
        });
        let case = Case::from_text(&text).unwrap_or_else(|e| {
            eprintln!("{path}: {e}");
            std::process::exit(2)
        });
        let report = check(&case, &Target::available());
        println!("{report:#?}");
        std::process::exit(if report.ok() { 0 } else { 1 });
    }
    if let Some(n) = num("--mutants") {
        let summary = tritium_fuzz::mutate::run(
            &tritium_fuzz::mutate::seed_kernels(),
            n as usize,
            num("--seed").unwrap_or(1),
        );
        println!("{summary}");
        std::process::exit(i32::from(summary.failures > 0));
    }
    if let Some(n) = num("--package-mutants") {
        let cache = std::env::temp_dir().join(format!("tritium-pkg-fuzz-{}", std::process::id()));
        let start = Instant::now();
        let r = tritium_fuzz::package::run(n, num("--seed").unwrap_or(1), &cache);
        let _ = std::fs::remove_dir_all(&cache);
        println!(
            "{} package mutants in {:.1} s: {} unchanged, {} failures",
            r.mutants,
            start.elapsed().as_secs_f64(),
            r.unchanged,
            r.failures.len()
        );
        for f in r.failures.iter().take(10) {
            println!("  {f}");
        }
        std::process::exit(i32::from(!r.failures.is_empty()));
    }
    let first = num("--seed").unwrap_or(1);
    let deadline = num("--deadline-ms")
        .map(|ms| UNIX_EPOCH + Duration::from_millis(ms))
        .or_else(|| num("--minutes").map(|m| SystemTime::now() + Duration::from_secs(m * 60)));
    let programs = num("--programs").unwrap_or(if deadline.is_some() { u64::MAX } else { 100 });
    let code = if args.iter().any(|a| a == "--worker") {
        worker(first, programs, deadline, &config)
    } else {
        let jobs = num("--jobs").map_or_else(
            || std::thread::available_parallelism().map_or(1, |n| n.get()),
            |j| j as usize,
        );
        parent(first, programs, deadline, jobs)
    };
    tritium_fuzz::exec::remove_cache_dir();
    std::process::exit(code);
}

/// Runs seeds in this process, speaking [`tritium_fuzz::pool`]'s line protocol.
fn worker(first: u64, programs: u64, deadline: Option<SystemTime>, config: &GenConfig) -> i32 {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    for seed in first..first.saturating_add(programs) {
        if deadline.is_some_and(|d| SystemTime::now() > d) {
            break;
        }
        let _ = writeln!(out, "start {seed}");
        let _ = out.flush();
        let case = generate(seed, config);
        let kinds: Vec<String> = tritium_fuzz::coverage::kinds(&case.function)
            .into_iter()
            .collect();
        let before = tritium_backend::pipeline::stats().phases;
        let report = check(&case, &Target::available());
        let mut tags = vec![format!("launch.{}", tritium_fuzz::exec::mode(&case).name())];
        let mut times: Vec<(String, Duration)> = report
            .times
            .iter()
            .map(|(t, d)| (t.name().to_string(), *d))
            .collect();
        let mut lines: Vec<String> = report.to_string().lines().map(str::to_string).collect();
        let mut ok = report.ok();
        // One case in four also runs an out-of-bounds variant.
        if let Some(v) = oob::draw(&case) {
            let r = check(&v.case, &Target::available());
            let verdict = r.verdict.as_ref().map_or("invalid", |v| v.name());
            tags.push(format!("oob.{verdict}"));
            if let oob::Change::View(view) = v.change {
                tags.push(format!("oob.view.{verdict}"));
                if view.stride.is_some() {
                    tags.push(format!("oob.walked.{verdict}"));
                }
            }
            times.extend(
                r.times
                    .iter()
                    .map(|(t, d)| (format!("oob.{}", t.name()), *d)),
            );
            if !r.ok() {
                ok = false;
                lines.push(format!(
                    "out-of-bounds variant ({}; `--print-oob {seed}`, `--shrink {seed}`):",
                    v.change
                ));
                lines.extend(r.to_string().lines().map(|l| format!("  {l}")));
            }
        }
        let phases = tritium_backend::pipeline::stats().phases.since(&before);
        if !ok {
            for line in lines.iter().filter(|l| !l.trim().is_empty()) {
                let _ = writeln!(out, "| {line}");
            }
        }
        times.extend(phase_times(&phases));
        let _ = writeln!(out, "{}", done_line(seed, ok, &kinds, &times, &tags));
        let _ = out.flush();
    }
    0
}

/// Where the compile time of every target went, as `compile.<phase>` entries.
fn phase_times(p: &tritium_backend::pipeline::PhaseTimes) -> Vec<(String, Duration)> {
    [
        ("trace", p.trace),
        ("key", p.key),
        ("link", p.link),
        ("codegen", p.codegen),
        ("verify", p.verify),
        ("optimize", p.optimize),
        ("emit", p.emit),
        ("load", p.load),
    ]
    .into_iter()
    .map(|(name, d)| (format!("compile.{name}"), d))
    .collect()
}

/// Spreads the seeds over worker processes; prints progress, failures and a summary.
fn parent(first: u64, programs: u64, deadline: Option<SystemTime>, jobs: usize) -> i32 {
    let exe = std::env::current_exe().unwrap_or_else(|e| {
        eprintln!("tritium-fuzz: cannot find its own executable: {e}");
        std::process::exit(2)
    });
    let until = deadline.map(|d| d.duration_since(UNIX_EPOCH).unwrap_or_default().as_millis());
    let command = move |from: u64, count: u64| {
        let mut c = Command::new(&exe);
        c.args([
            "--worker",
            "--seed",
            &from.to_string(),
            "--programs",
            &count.to_string(),
        ]);
        if let Some(ms) = until {
            c.args(["--deadline-ms", &ms.to_string()]);
        }
        c
    };
    let config = PoolConfig {
        jobs,
        batch: 100,
        hang: Duration::from_secs(300),
        deadline,
    };
    let start = Instant::now();
    let (mut n, mut failing, mut crashed) = (0u64, Vec::new(), Vec::new());
    let mut times: BTreeMap<String, Duration> = BTreeMap::new();
    let mut kinds = BTreeSet::new();
    let mut tags: BTreeMap<String, u64> = BTreeMap::new();
    pool::run(Arc::new(command), first, programs, config, &mut |e| {
        n += 1;
        match e {
            Event::Done {
                seed,
                ok,
                kinds: k,
                times: t,
                report,
                tags: g,
            } => {
                kinds.extend(k);
                for tag in g {
                    *tags.entry(tag).or_default() += 1;
                }
                for (target, d) in t {
                    *times.entry(target).or_default() += d;
                }
                if !ok {
                    failing.push(seed);
                    println!("seed {seed}:");
                    for line in report {
                        println!("{line}");
                    }
                }
            }
            Event::Crashed { seed, why } => {
                crashed.push(seed);
                println!("seed {seed}: {why}");
            }
        }
        if n % 20 == 0 {
            eprintln!(
                "{n} programs, {} failing, {} crashed, {:.1} s",
                failing.len(),
                crashed.len(),
                start.elapsed().as_secs_f64()
            );
        }
    });
    failing.sort_unstable();
    crashed.sort_unstable();
    println!(
        "{n} programs (seeds from {first}, {jobs} workers, {:.0} s): {} failing {failing:?}, {} crashed {crashed:?}",
        start.elapsed().as_secs_f64(),
        failing.len(),
        crashed.len()
    );
    let tag = |t: &str| tags.get(t).copied().unwrap_or(0);
    println!(
        "launches: {} default, {} unchecked, {} checked",
        tag("launch.default"),
        tag("launch.unchecked"),
        tag("launch.checked")
    );
    println!(
        "out-of-bounds variants: {} ({} refused by the interpreter and so by every target, {} refused for dead loads only, {} in bounds after all, {} stopped by the interpreter for another reason, {} invalid)",
        ["refused", "dead", "accepted", "skipped", "invalid"]
            .iter()
            .map(|v| tag(&format!("oob.{v}")))
            .sum::<u64>(),
        tag("oob.refused"),
        tag("oob.dead"),
        tag("oob.accepted"),
        tag("oob.skipped"),
        tag("oob.invalid")
    );
    println!(
        "of them buffers given as strided views: {} refused, {} refused for dead loads only, {} in bounds",
        tag("oob.view.refused"),
        tag("oob.view.dead"),
        tag("oob.view.accepted")
    );
    println!(
        "of those rows walked with a stride parameter: {} refused, {} refused for dead loads only, {} in bounds",
        tag("oob.walked.refused"),
        tag("oob.walked.dead"),
        tag("oob.walked.accepted")
    );
    let all = tritium_fuzz::coverage::all_kinds();
    let missing: Vec<&String> = all.difference(&kinds).collect();
    println!(
        "op kinds covered: {} of {}; never generated: {missing:?}",
        all.len() - missing.len(),
        all.len()
    );
    for (t, d) in &times {
        println!(
            "  {:12} {:8.1} ms per program",
            t,
            d.as_secs_f64() * 1e3 / n.max(1) as f64
        );
    }
    i32::from(!failing.is_empty() || !crashed.is_empty())
}

/// Adds the interpreter's results to a case file as its pinned expectations.
fn pin(path: &str) {
    let fail = |m: String| -> ! {
        eprintln!("{path}: {m}");
        std::process::exit(2)
    };
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| fail(e.to_string()));
    let mut case = Case::from_text(&text).unwrap_or_else(|e| fail(e));
    let out = tritium_fuzz::exec::run(&case, Target::Interpreter).unwrap_or_else(|e| fail(e));
    case.expect = case
        .args
        .iter()
        .enumerate()
        // What the kernel may write: every buffer but the read-only inputs.
        .filter(|(_, a)| {
            matches!(a, tritium_fuzz::Arg::Buffer { memory, .. }
                if !matches!(memory, tritium_fuzz::info::Memory::Input(_)))
        })
        .map(|(p, _)| (p, out[p].clone()))
        .collect();
    // Keep the hand-written comments above the case header.
    let notes: String = text
        .lines()
        .take_while(|l| l.starts_with("//"))
        .filter(|l| !is_header(l))
        .map(|l| format!("{l}\n"))
        .collect();
    let body = case.to_text();
    let (first, rest) = body.split_once('\n').expect("a header line");
    let pinned = format!("{first}\n{notes}{rest}");
    std::fs::write(path, pinned).unwrap_or_else(|e| fail(e.to_string()));
}

fn is_header(line: &str) -> bool {
    [
        "// tritium-fuzz case",
        "// seed ",
        "// grid ",
        "// num_warps ",
        "// out_of_bounds",
        "// arg ",
        "// expect ",
    ]
    .iter()
    .any(|h| line.starts_with(h))
}

/// The options, as the module docs list them.
const USAGE: &str = "\
usage: tritium-fuzz [--programs N | --minutes M] [--seed S] [--jobs J]
                        fuzz seeds S, S+1, ... in J worker processes (default: one per core)
       tritium-fuzz --mutants N [--seed S]          mutate printed kernels N times
       tritium-fuzz --package-mutants N [--seed S]  mutate an AOT package N times
       tritium-fuzz --print S                       print the case of seed S
       tritium-fuzz --print-oob S                   print seed S's out-of-bounds variant
       tritium-fuzz --coverage N                    count the op kinds of seeds 1..=N
       tritium-fuzz --shrink S                      print the smallest failing case of seed S
                                                    (its out-of-bounds variant, if that fails)
       tritium-fuzz --replay FILE                   check a case file
       tritium-fuzz --pin FILE                      pin the interpreter's results in it";

fn usage() -> ! {
    eprintln!("{USAGE}");
    std::process::exit(2)
}

/// Every argument is a known option, each valued one followed by its value: a typo must not
/// start a campaign with the defaults.
fn check_options(args: &[String]) -> Result<(), String> {
    let mut rest = args.iter();
    while let Some(a) = rest.next() {
        if VALUED.contains(&a.as_str()) {
            if rest.next().is_none() {
                return Err(format!("{a} needs a value"));
            }
        } else if a != "--worker" {
            return Err(format!("unknown option `{a}`"));
        }
    }
    Ok(())
}
