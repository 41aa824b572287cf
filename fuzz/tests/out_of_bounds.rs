//! Out-of-bounds variants (issue 43): where the interpreter rejects a launch for an access
//! outside every buffer, every compiled target's default launch rejects it too and writes
//! nothing outside the buffers; and the guards around the buffers do catch a launch that
//! writes there (an unchecked one).

use tritium_fuzz::check::{calls_user_code_with_pointers, check, check_as, Verdict};
use tritium_fuzz::exec::{execute, Mode, Target};
use tritium_fuzz::info::Memory;
use tritium_fuzz::oob::{apply, draw, Change};
use tritium_fuzz::{generate, Arg, Case, GenConfig};

/// The compiled targets that run (PTX only compiles).
fn launched() -> Vec<Target> {
    Target::available()
        .into_iter()
        .filter(|t| !matches!(t, Target::Ptx(_)))
        .collect()
}

/// A hand-written case of one program of one warp with these arguments.
fn one_program(function: tritium_dsl::ir::Function, args: Vec<Arg>, out_of_bounds: bool) -> Case {
    Case {
        seed: 0,
        function,
        grid: [1, 1, 1],
        num_warps: 1,
        args,
        expect: Vec::new(),
        out_of_bounds,
        views: Vec::new(),
        row_strides: Vec::new(),
    }
}

/// The first generated case from seed 0 on that gives no user op a pointer (user code's
/// accesses are outside every check) and that one of the variants
/// `changes` gives makes the interpreter refuse, with that variant (not one whose only
/// accesses outside are dead loads, which a target may skip: `Verdict::DeadLoads`).
fn refused_variant(changes: impl Fn(&Case) -> Vec<Change>) -> (u64, Case) {
    let config = GenConfig::default();
    for seed in 0..100 {
        let case = generate(seed, &config);
        if calls_user_code_with_pointers(&case.function) {
            continue;
        }
        for v in changes(&case).into_iter().filter_map(|c| apply(&case, c)) {
            let interp = execute(&v, Target::Interpreter, Mode::Default).outcome();
            let live = || {
                let verdict = check(&v, &[Target::Interpreter]).verdict;
                matches!(verdict, Some(Verdict::Refused(_)))
            };
            if interp.is_err_and(|e| e.contains("outside every buffer")) && live() {
                return (seed, v);
            }
        }
    }
    panic!("no seed below 100 gives a refused variant");
}

fn assert_refused_everywhere(seed: u64, v: &Case) {
    let report = check(v, &launched());
    assert!(
        matches!(report.verdict, Some(Verdict::Refused(_))),
        "seed {seed}: {:?}",
        report.verdict
    );
    assert!(report.ok(), "seed {seed}:{report}");
    // Each target ran its default launch: an error, every guard intact.
    for t in launched().into_iter().filter(|t| *t != Target::Interpreter) {
        let got = execute(v, t, Mode::Default);
        let e = got.launch.expect_err("an error");
        assert!(
            tritium_fuzz::check::is_bounds_error(&e),
            "seed {seed}, {}: {e}",
            t.name()
        );
        assert_eq!(got.guards, Ok(()), "seed {seed}, {}", t.name());
    }
}

/// An input half its length, and one program more than the outputs have regions for:
/// errors on every target (CPU per-site checks, the emulator's checked mode).
#[test]
fn out_of_bounds_variants_are_errors_on_every_target() {
    // An input loses the second half of its elements.
    let (seed, v) = refused_variant(|c| {
        (c.args.iter().enumerate())
            .filter_map(|(param, a)| match a {
                Arg::Buffer {
                    memory: Memory::Input(_),
                    bytes,
                } => {
                    let size = c.function.ty(c.function.params[param].value).elem;
                    let size = size.pointee().unwrap().size_bytes();
                    let elements = bytes.len() / size / 2;
                    Some(Change::Shorten { param, elements })
                }
                _ => None,
            })
            .collect()
    });
    assert_refused_everywhere(seed, &v);
    let (seed, v) = refused_variant(|_| vec![Change::Grid { axis: 0 }]);
    assert_refused_everywhere(seed, &v);
}

/// Every `fuzz/cases/refused/*.tir` (builtins given pointers past their buffers) is
/// refused by the interpreter and by every target's default launch, the guards intact.
#[test]
fn refused_cases_are_refused_everywhere() {
    let cases = crate::cases_in("cases/refused");
    assert!(cases.len() >= 2, "{} refused cases", cases.len());
    for (n, (path, case)) in cases.iter().enumerate() {
        assert!(case.out_of_bounds, "{}", path.display());
        assert_refused_everywhere(n as u64, case);
    }
}

/// `out[i] = i` for 16 lanes into a buffer of 12 `i32`s: the interpreter and every default
/// launch refuse it; launched unchecked, the store passes the buffer's end, and the check
/// reports the guard it overwrote (what makes a broken default launch a failure).
#[test]
fn the_guards_catch_an_unchecked_launch_past_a_buffer() {
    use tritium_dsl::ir::DType;
    use tritium_dsl::trace::lang::*;
    use tritium_dsl::trace::{ptr_param, Tracer};
    let t = Tracer::begin("past_the_end").unwrap();
    let out = ptr_param("out", DType::I32);
    store(out + arange(0, 16), arange(0, 16) + 1, NoArg);
    let case = one_program(
        t.finish().unwrap(),
        vec![Arg::Buffer {
            memory: Memory::Output,
            bytes: vec![0; 12 * 4],
        }],
        true,
    );
    let targets = [Target::Interpreter, Target::Cpu, Target::Emulator];
    let report = check(&case, &targets);
    assert!(report.ok(), "{report}");
    assert!(matches!(report.verdict, Some(Verdict::Refused(_))));
    let report = check_as(&case, &targets, Mode::Unchecked);
    for t in [Target::Cpu, Target::Emulator] {
        let said: Vec<&str> = (report.mismatches.iter())
            .filter(|m| m.target == t)
            .map(|m| m.message.as_str())
            .collect();
        let wrote = "wrote outside its buffers: parameter p0: memory 0 bytes past the buffer's end";
        assert!(
            said.iter()
                .any(|m| m.contains("launch (succeeded)") && m.contains(wrote)),
            "{}: {said:?}",
            t.name()
        );
        assert!(
            said.iter()
                .any(|m| m.contains("succeeded where the interpreter reports")),
            "{}: {said:?}",
            t.name()
        );
    }
}

/// About one case in four draws a variant (and the few that walk rows with a stride
/// parameter); the flag survives the text form.
#[test]
fn a_quarter_of_the_cases_run_a_variant_and_it_prints() {
    let config = GenConfig::default();
    let cases: Vec<Case> = (0..200).map(|s| generate(s, &config)).collect();
    let variants: Vec<_> = cases.iter().filter_map(draw).collect();
    assert!(
        (30..=70).contains(&variants.len()),
        "{} variants in 200 cases",
        variants.len()
    );
    let grids = (variants.iter())
        .filter(|v| matches!(v.change, Change::Grid { .. }))
        .count();
    assert!(grids > 0 && grids < variants.len(), "{grids} grid variants");
    let v = &variants[0].case;
    assert!(v.out_of_bounds);
    let text = v.to_text();
    assert!(text.contains("\n// out_of_bounds\n"), "{text}");
    let back = Case::from_text(&text).unwrap();
    assert!(back.out_of_bounds);
    assert_eq!(back.to_text(), text);
}

/// A load past the end whose value nothing uses: the interpreter refuses it, the CPU skips
/// the load (in every mode), the emulator refuses it. Both are right; neither may write
/// outside the buffer.
#[test]
fn a_dead_load_past_the_end_may_be_skipped() {
    use tritium_dsl::ir::DType;
    use tritium_dsl::trace::lang::*;
    use tritium_dsl::trace::{ptr_param, Tracer};
    let t = Tracer::begin("dead_load").unwrap();
    let x = ptr_param("x", DType::I8);
    let out = ptr_param("out", DType::I8);
    let _unused = load(x + arange(0, 16), NoArg, NoArg);
    store(
        out + arange(0, 4),
        load(x + arange(0, 4), NoArg, NoArg),
        NoArg,
    );
    let case = one_program(
        t.finish().unwrap(),
        vec![
            Arg::Buffer {
                memory: Memory::Input(None),
                bytes: (1..=12).collect(),
            },
            Arg::Buffer {
                memory: Memory::Output,
                bytes: vec![0; 4],
            },
        ],
        true,
    );
    let report = check(&case, &[Target::Interpreter, Target::Cpu, Target::Emulator]);
    assert!(
        matches!(report.verdict, Some(Verdict::DeadLoads(_))),
        "{:?}",
        report.verdict
    );
    assert!(report.ok(), "{report}");
}

/// `out[i] = x[i] + 1` over 16 `i32` lanes, `x` and `out` as strided views ([`View`]):
/// rows that hold all 16 elements are proven and agree with the interpreter; rows of 8
/// with 2 elements between them put lanes 8 and 9 in a gap, which the interpreter and
/// every default launch refuse, gaps intact; launched unchecked, the store into the
/// output's gap is what the check reports.
#[test]
fn strided_view_variants_are_proven_on_their_rows_and_refused_in_their_gaps() {
    use tritium_dsl::ir::DType;
    use tritium_dsl::trace::lang::*;
    use tritium_dsl::trace::{ptr_param, Tracer};
    use tritium_fuzz::case::View;
    let t = Tracer::begin("rows").unwrap();
    let x = ptr_param("x", DType::I32);
    let out = ptr_param("out", DType::I32);
    let lanes = arange(0, 16);
    store(out + lanes, load(x + lanes, NoArg, NoArg) + 1, NoArg);
    let base = one_program(
        t.finish().unwrap(),
        vec![
            Arg::Buffer {
                memory: Memory::Input(None),
                bytes: (0..16i32).flat_map(|v| (v * 3).to_le_bytes()).collect(),
            },
            Arg::Buffer {
                memory: Memory::Output,
                bytes: vec![0; 16 * 4],
            },
        ],
        false,
    );
    let view = |param, row, gap| {
        Change::View(View {
            param,
            rows: 2,
            row,
            gap,
            stride: None,
        })
    };
    let targets = launched();
    for param in [0, 1] {
        let whole = apply(&base, view(param, 16, 3)).unwrap();
        let report = check(&whole, &targets);
        assert_eq!(report.verdict, Some(Verdict::Accepted), "p{param}");
        assert!(report.ok(), "p{param}:{report}");
        let gapped = apply(&base, view(param, 8, 2)).unwrap();
        assert_refused_everywhere(param as u64, &gapped);
        // The text form keeps the view.
        let text = gapped.to_text();
        assert!(
            text.contains(&format!("\n// view {param} 2 8 2\n")),
            "{text}"
        );
        assert_eq!(Case::from_text(&text).unwrap(), gapped);
    }
    let gapped_out = apply(&base, view(1, 8, 2)).unwrap();
    let report = check_as(
        &gapped_out,
        &[Target::Interpreter, Target::Cpu],
        Mode::Unchecked,
    );
    let said: Vec<&str> = (report.mismatches.iter())
        .filter(|m| m.target == Target::Cpu)
        .map(|m| m.message.as_str())
        .collect();
    assert!(
        said.iter()
            .any(|m| m.contains("between its view's elements, was written")),
        "{said:?}"
    );
}

/// Generated cases' view variants: some of them, each agreeing with the interpreter (in
/// bounds on the view's rows) or refused everywhere (an access in a gap).
#[test]
fn generated_cases_run_strided_view_variants() {
    let config = GenConfig::default();
    let views: Vec<_> = (0..200)
        .map(|s| generate(s, &config))
        .filter_map(|c| draw(&c))
        .filter(|v| matches!(v.change, Change::View(_)))
        .collect();
    assert!(
        views.len() >= 5,
        "{} view variants in 200 cases",
        views.len()
    );
    for v in views.iter().take(3) {
        let report = check(&v.case, &launched());
        assert!(report.ok(), "seed {}, {}:{report}", v.case.seed, v.change);
    }
}

/// Generated kernels that walk an input's rows with a stride parameter
/// ([`tritium_fuzz::RowStride`]; the input is read no other way), the input given as a
/// view with rows as long as those and the parameter set to the view's row stride: the
/// launch proves every site the dense case's launch proves (each row's accesses on a row
/// of the view) and agrees with the interpreter; rows one element shorter put each row's
/// last access in a gap, which the interpreter refuses where those loads run. The fuzzer
/// draws such variants.
#[test]
fn generated_cases_walk_view_rows_with_their_stride_parameter() {
    use tritium_fuzz::exec::checked_sites;
    use tritium_fuzz::View;
    let config = GenConfig::default();
    let cases: Vec<Case> = (0..400).map(|s| generate(s, &config)).collect();
    let walked: Vec<&Case> = (cases.iter())
        .filter(|c| !c.row_strides.is_empty() && !calls_user_code_with_pointers(&c.function))
        .take(8)
        .collect();
    assert!(walked.len() == 8, "{} cases walk rows", walked.len());
    let mut refused = 0;
    for (n, case) in walked.into_iter().enumerate() {
        let s = case.row_strides[0];
        let Arg::Buffer { bytes, .. } = &case.args[s.buffer] else {
            panic!("seed {}: p{} is no buffer", case.seed, s.buffer);
        };
        let size = case.function.ty(case.function.params[s.buffer].value).elem;
        let len = bytes.len() / size.pointee().unwrap().size_bytes();
        let view = |row, gap| {
            let view = View {
                param: s.buffer,
                rows: len.div_ceil(s.row).max(2),
                row,
                gap,
                stride: Some(s.param),
            };
            apply(case, Change::View(view)).unwrap()
        };
        let v = view(s.row, 3);
        assert_eq!(checked_sites(&v), checked_sites(case), "seed {}", case.seed);
        // Compiled and run on every target for a few (each takes seconds).
        let targets = if n < 2 {
            launched()
        } else {
            vec![Target::Interpreter]
        };
        let report = check(&v, &targets);
        assert_eq!(
            report.verdict,
            Some(Verdict::Accepted),
            "seed {}",
            case.seed
        );
        assert!(report.ok(), "seed {}:{report}", case.seed);
        let text = v.to_text();
        assert!(
            text.contains(&format!(" {}\n// row_stride ", s.param)),
            "{text}"
        );
        // (Read back, the late parameter's value is renumbered: the same text.)
        assert!(
            Case::from_text(&text).unwrap().to_text() == text,
            "seed {}",
            case.seed
        );
        // (Unless the walking loads never run, under an `if` not taken, in a loop of no
        // trips, or their masks leave no lane, or the loads' values are dead.)
        if s.row > 1 {
            let short = check(&view(s.row - 1, 2), &[Target::Interpreter]).verdict;
            refused += usize::from(matches!(short, Some(Verdict::Refused(_))));
        }
    }
    assert!(refused >= 2, "{refused} views of short rows refused");
    let drawn = (cases.iter().filter_map(draw))
        .filter(|v| {
            matches!(
                v.change,
                Change::View(View {
                    stride: Some(_),
                    ..
                })
            )
        })
        .count();
    assert!(
        drawn >= 2,
        "{drawn} walked view variants drawn in 400 cases"
    );
}
