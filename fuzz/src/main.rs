//! `tritium-fuzz`: runs random programs on every target against the interpreter.
//!
//! ```text
//! tritium-fuzz [--programs N | --minutes M] [--seed S]   fuzz (seeds S, S+1, …)
//! tritium-fuzz --print S                                  print the case of seed S
//! tritium-fuzz --shrink S                                 print the smallest failing case of seed S
//! tritium-fuzz --replay FILE                              check a case file
//! tritium-fuzz --pin FILE                                 pin the interpreter's results in it
//! ```

use std::time::{Duration, Instant};
use tritium_fuzz::{check, generate, Case, GenConfig, Target};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |name: &str| -> Option<String> {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let num = |name: &str| value(name).map(|v| v.parse::<u64>().unwrap_or_else(|_| usage()));
    let config = GenConfig::default();
    if let Some(seed) = num("--print") {
        print!("{}", generate(seed, &config).to_text());
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
        let case = generate(seed, &config);
        let report = check(&case, &Target::ALL);
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
        eprintln!("{:?}", check(&small, &Target::ALL).mismatches);
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
        let report = check(&case, &Target::ALL);
        println!("{report:#?}");
        std::process::exit(if report.ok() { 0 } else { 1 });
    }
    let first = num("--seed").unwrap_or(1);
    let programs = num("--programs");
    let deadline = num("--minutes").map(|m| Instant::now() + Duration::from_secs(m * 60));
    let programs = programs.unwrap_or(if deadline.is_some() { u64::MAX } else { 100 });
    let mut failed = 0;
    let start = Instant::now();
    let mut n = 0;
    let mut times: std::collections::BTreeMap<Target, Duration> = Default::default();
    let mut kinds = std::collections::BTreeSet::new();
    for seed in first..first.saturating_add(programs) {
        if deadline.is_some_and(|d| Instant::now() > d) {
            break;
        }
        let case = generate(seed, &config);
        kinds.extend(tritium_fuzz::coverage::kinds(&case.function));
        let report = check(&case, &Target::ALL);
        n += 1;
        for (t, d) in &report.times {
            *times.entry(*t).or_default() += *d;
        }
        if !report.ok() {
            failed += 1;
            println!("seed {seed}: {report:?}");
        }
        if n % 10 == 0 {
            eprintln!(
                "{n} programs, {failed} failing, {:.1} s",
                start.elapsed().as_secs_f64()
            );
        }
    }
    println!("{n} programs, {failed} failing");
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
            t.name(),
            d.as_secs_f64() * 1e3 / n.max(1) as f64
        );
    }
    std::process::exit(i32::from(failed > 0));
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
        "// arg ",
        "// expect ",
    ]
    .iter()
    .any(|h| line.starts_with(h))
}

fn usage() -> ! {
    eprintln!(
        "usage: tritium-fuzz [--programs N | --minutes M] [--seed S] | --print S | --replay FILE"
    );
    std::process::exit(2)
}
