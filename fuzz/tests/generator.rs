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

/// Whether the emulator runs `case`'s code without checks, where loads feeding a `dot`
/// may be copied asynchronously (`cp.async`, TMA): an unchecked launch, or a default one
/// whose bounds proof leaves no access to check (else it runs in checked mode).
fn runs_without_checks(case: &Case) -> bool {
    use tritium_fuzz::exec::{mode, Mode};
    match mode(case) {
        Mode::Unchecked => true,
        Mode::Default => tritium_dsl::ir::bounds_proof(&case.function)
            .unprovable()
            .is_empty(),
        Mode::Checked => false,
    }
}

/// Checks seed `seed`'s `case` on the emulated `targets` against the interpreter, which
/// they must agree with, and gives the shared-memory statistics of those runs (copies by
/// `cp.async` and TMA, `wgmma`s).
fn stats_of_agreeing(
    seed: u64,
    case: &Case,
    targets: &[tritium_fuzz::Target],
) -> tritium_backend::cuda::SharedMemoryStats {
    use tritium_backend::cuda::shared_memory_stats;
    shared_memory_stats();
    let report = tritium_fuzz::check(case, targets);
    let stats = shared_memory_stats();
    assert!(
        report.ok(),
        "seed {seed}: {:?} {:?}",
        report.invalid,
        report.mismatches
    );
    stats
}

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

/// Stores that run reach the comparison: most write lanes no later store overwrites. When
/// every store of an output began at its region's start, 61% of those that ran (in seeds
/// 5620000..5620060 and 5630000..5630100) left every buffer as it was without them; each
/// store's window of its own leaves the fully masked ones, those that write what was
/// there, and those of programs whose stores fill their regions (17%; 14% once the
/// observation buffers start as bytes 0xa5 rather than zeros, which observed zeros matched;
/// 11% with observation regions twice as large, which some programs filled).
#[test]
fn stores_that_run_are_mostly_seen_by_the_comparison() {
    use tritium_fuzz::reach::{store_reach, StoreReach};
    let mut all = StoreReach::default();
    for seed in 0..40 {
        let case = generate(seed, &GenConfig::default());
        let Some(r) = store_reach(&case) else {
            continue;
        };
        all.stores += r.stores;
        all.ran += r.ran;
        all.silent += r.silent;
    }
    assert!(all.ran > 200, "{all:?}");
    // 61 of 454 (13%: mostly stores masked by a constant false, as many as the programs'
    // random streams give; 53 of 463 before integers carried bounds in `info`, which moved
    // them); 65 of 454 with observation regions of `REGION`, 79 with observation buffers
    // of zeros, 311 of 482 before the store windows.
    assert!(all.silent * 100 < all.ran * 15, "{all:?}");
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

/// `inline_asm_elementwise` calls are drawn in every form the CUDA generator lowers: one
/// and two results, every `pack`, operands over several registers, 16-bit and 64-bit
/// registers.
#[test]
fn inline_asm_calls_of_every_form_are_generated() {
    fn visit(f: &tritium_dsl::ir::Function, b: &Block, seen: &mut BTreeSet<String>) {
        for inst in &b.insts {
            if let Op::Custom(c) = &inst.op {
                if let Some(x) = &c.inline_asm {
                    let d = |v: &tritium_dsl::ir::Value| f.ty(*v).dtype().expect("numbers");
                    let ins: Vec<_> = c.ins.iter().map(d).collect();
                    let outs: Vec<_> = c.outs.iter().map(d).collect();
                    let (res, args) = x.layout(&ins, &outs);
                    seen.insert(format!("{} results", outs.len()));
                    seen.insert(format!("pack {}", x.pack));
                    if res.iter().chain(&args).any(|o| o.registers > 1) {
                        seen.insert("several registers".into());
                    }
                    for k in x.operands() {
                        seen.insert(k.trim_start_matches('=').to_string());
                    }
                }
            }
            for r in inst.op.regions() {
                visit(f, r, seen);
            }
        }
    }
    let config = GenConfig::default();
    let mut seen = BTreeSet::new();
    for seed in 0..SEEDS {
        let f = generate(seed, &config).function;
        visit(&f, &f.body, &mut seen);
    }
    let want = [
        "1 results",
        "2 results",
        "pack 1",
        "pack 2",
        "pack 4",
        "pack 8",
        "several registers",
        "h",
        "r",
        "l",
        "f",
    ];
    let missing: Vec<&str> = want.into_iter().filter(|w| !seen.contains(*w)).collect();
    assert!(
        missing.is_empty(),
        "never generated in {SEEDS} programs: {missing:?} (saw {seen:?})"
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

/// Reassociated float sums and dots of arbitrary non-negative values are generated and
/// compared within `info::sum_ulps` (more ulps than any elementwise op needs).
#[test]
fn approximate_sums_are_generated_and_compared() {
    let config = GenConfig::default();
    let approximate = (0..SEEDS)
        .filter(|seed| {
            tolerances(&generate(*seed, &config))
                .iter()
                .any(|t| matches!(t, Some(Tol::Ulps(u)) if *u > 8))
        })
        .count();
    assert!(
        approximate >= 5,
        "{approximate} of {SEEDS} programs store approximate sums"
    );
}

/// The value facts of a sum: bit-exact for small integers, within `sum_ulps` for
/// non-negative floats, not compared for floats of both signs (cancellation).
#[test]
fn sums_are_exact_bounded_or_not_compared() {
    use tritium_fuzz::info::sum_ulps;
    let case = |body: &str| {
        let text = format!(
            "// tritium-fuzz case\n// grid 1 1 1\n// num_warps 4\n// arg output 0000000000000000\n\
             // arg input - 0000803f000000c000004040000080c0\n\
             kernel @k(p0 %0: ptr<f32>, p1 %1: ptr<f32>) {{\n  \
             %2 = arange {{start = 0, end = 4}} : tile<4xi32> loc(\"k.rs\":1:1)\n  \
             %3 = splat %1 : tile<4xptr<f32>> loc(\"k.rs\":2:1)\n  \
             %4 = addptr %3, %2 : tile<4xptr<f32>> loc(\"k.rs\":3:1)\n  \
             %5 = load %4 : tile<4xf32> loc(\"k.rs\":4:1)\n{body}}}\n"
        );
        Case::from_text(&text).unwrap_or_else(|e| panic!("{e}\n{text}"))
    };
    let table = [
        ("", None),
        (
            "abs",
            Some(Tol::Ulps(sum_ulps(tritium_dsl::DType::F32, 4, 0))),
        ),
        ("neg", Some(Tol::Unreliable)),
    ];
    for (unary, want) in table {
        let body = if unary.is_empty() {
            // A float input of any sign: its sum is not compared.
            "  %6 = reduce %5 {op = sum, axis = 0} : f32 loc(\"k.rs\":6:1)\n  \
             store %0, %6 loc(\"k.rs\":7:1)\n"
                .to_string()
        } else {
            format!(
                "  %6 = {unary} %5 : tile<4xf32> loc(\"k.rs\":5:1)\n  \
                 %7 = reduce %6 {{op = sum, axis = 0}} : f32 loc(\"k.rs\":6:1)\n  \
                 store %0, %7 loc(\"k.rs\":7:1)\n"
            )
        };
        let want = want.or(Some(Tol::Unreliable));
        assert_eq!(tolerances(&case(&body))[0], want, "sum of {unary:?}");
    }
}

/// Triton's bounds mask, `offsets < n`, guards some rank-1 stores and loads of the
/// program's own region, with the offsets on either side of each comparison (the CPU runs
/// the prefix of lanes such a mask keeps without testing each: codegen `prefix`).
#[test]
fn bounds_masks_on_own_offsets_are_generated() {
    use tritium_dsl::ir::{CmpPred, Value};
    let config = GenConfig::default();
    let mut preds = BTreeSet::new();
    for seed in 0..SEEDS {
        let f = generate(seed, &config).function;
        let defs = f.defs();
        let offsets_of = |ptr: Value| match defs.get(&ptr).map(|i| &i.op) {
            Some(Op::AddPtr(_, off)) => Some(*off),
            _ => None,
        };
        f.walk(&mut |inst| {
            let (ptr, mask) = match &inst.op {
                Op::Store { ptr, mask, .. } | Op::Load { ptr, mask, .. } => (*ptr, *mask),
                _ => return,
            };
            let (Some(off), Some(m)) = (offsets_of(ptr), mask) else {
                return;
            };
            if f.ty(ptr).rank() != 1 {
                return;
            }
            if let Some(Op::Cmp(p, x, y)) = defs.get(&m).map(|i| &i.op) {
                if *x == off || *y == off {
                    preds.insert((format!("{p:?}"), *x == off));
                }
            }
        });
    }
    let want = [
        (CmpPred::Lt, true),
        (CmpPred::Le, true),
        (CmpPred::Gt, false),
        (CmpPred::Ge, false),
    ];
    for (p, offsets_first) in want {
        assert!(
            preds.contains(&(format!("{p:?}"), offsets_first)),
            "no rank-1 access masked by `{}` in {SEEDS} programs: {preds:?}",
            match offsets_first {
                true => format!("offsets {p:?} n"),
                false => format!("n {p:?} offsets"),
            }
        );
    }
}

/// Some `dot`s have a `b` of `WIDE_B_BYTES` in the accumulator's dtype, which the CPU
/// packs in panels of the micro-kernel's width (tiles within `MAX_TILE` never are).
#[test]
fn wide_dots_are_generated() {
    use tritium_fuzz::gen::WIDE_B_BYTES;
    let config = GenConfig::default();
    let mut wide = 0;
    for seed in 0..SEEDS {
        let f = generate(seed, &config).function;
        f.walk(&mut |inst| {
            if let Op::Dot { b, .. } = &inst.op {
                let acc = f.ty(inst.results[0]).dtype().expect("numbers");
                let numel: usize = f.ty(*b).shape.iter().product();
                if numel * acc.size_bytes() == WIDE_B_BYTES {
                    wide += 1;
                }
            }
        });
    }
    assert!(wide >= 3, "{wide} wide dots in {SEEDS} programs");
}

/// Loads of lines whose lane offsets wrap (`(x + r·ld) + (128 + i64(i8(j + c)))`, which
/// the CPU must not read as runs) are stored where the comparison sees them: each is
/// followed by a store of it, cast to an observation buffer's dtype. Before, most such
/// loads fed values no output kept, and a build that read them as runs passed.
#[test]
fn loads_of_wrapping_lines_are_observed() {
    use tritium_dsl::ir::{Const, DType, Value};
    let config = GenConfig::default();
    let mut wrapped = 0;
    for seed in 0..SEEDS {
        let f = generate(seed, &config).function;
        let defs = f.defs();
        let op = |v: Value| defs.get(&v).map(|i| &i.op);
        // `cols` of a two-step pointer tile is `128 + …` in i64.
        let wraps = |ptr: Value| {
            let Some(Op::AddPtr(rows, cols)) = op(ptr) else {
                return false;
            };
            let two_step = matches!(op(*rows), Some(Op::AddPtr(..)));
            let Some(Op::Binary(_, _, c)) = op(*cols) else {
                return false;
            };
            two_step
                && f.ty(*cols).dtype() == Some(DType::I64)
                && matches!(op(*c), Some(Op::Const(Const::Int(128))))
        };
        let mut stored = BTreeSet::new();
        f.walk(&mut |inst| {
            if let Op::Store { value, .. } = &inst.op {
                stored.insert(match op(*value) {
                    Some(Op::Cast(x)) => *x,
                    _ => *value,
                });
            }
        });
        f.walk(&mut |inst| {
            if let Op::Load { ptr, .. } = &inst.op {
                if wraps(*ptr) {
                    wrapped += 1;
                    let v = inst.results[0];
                    assert!(stored.contains(&v), "seed {seed}: {v:?} is not stored");
                }
            }
        });
    }
    assert!(
        wrapped >= 3,
        "{wrapped} loads of wrapping lines in {SEEDS} programs"
    );
}

/// Some programs open with a repeated K loop (`acc = dot(a, load(b), acc)` in a loop in a
/// loop, nothing written before it), whose packed `b` tiles the CPU keeps across
/// iterations (codegen `panel_cache`).
#[test]
fn k_loops_open_some_programs() {
    use tritium_dsl::ir::Inst;
    fn writes(b: &Block) -> bool {
        b.insts.iter().any(|i| {
            matches!(
                i.op,
                Op::Store { .. } | Op::Atomic { .. } | Op::AtomicCas { .. }
            ) || i.op.regions().into_iter().any(writes)
        })
    }
    fn loads_into_dot(b: &Block, load: &dyn Fn(&Inst) -> bool) -> bool {
        b.insts.iter().any(|i| match &i.op {
            Op::For { body, .. } => loads_into_dot(body, load),
            Op::Dot { .. } => load(i),
            _ => false,
        })
    }
    let config = GenConfig::default();
    let mut opened = 0;
    for seed in 0..SEEDS {
        let f = generate(seed, &config).function;
        let defs = f.defs();
        let b_is_load = |dot: &Inst| match &dot.op {
            Op::Dot { b, .. } => matches!(
                defs.get(b).map(|i| &i.op),
                Some(Op::Load { mask: None, .. })
            ),
            _ => false,
        };
        let first_loop = f
            .body
            .insts
            .iter()
            .position(|i| matches!(i.op, Op::For { .. }));
        let Some(at) = first_loop else { continue };
        let before = &f.body.insts[..at];
        if before.iter().any(|i| matches!(i.op, Op::Store { .. })) {
            continue;
        }
        if let Op::For { body, .. } = &f.body.insts[at].op {
            if loads_into_dot(body, &b_is_load) && !writes(body) {
                opened += 1;
            }
        }
    }
    assert!(
        opened >= 30,
        "{opened} of {SEEDS} programs open with a K loop"
    );
}

/// K loops that also sum a loaded line to a scalar at each iteration (`k_loop`) are
/// generated and, over several warps (a reduction across warps through scratch, above a
/// pipelined loop's stages: `scratch_floor`), agree with the interpreter on both emulated
/// GPUs, some of them pipelined (16-bit tensor-core tiles: `cp.async` waits that leave
/// later iterations' copies in flight).
#[test]
fn k_loops_summing_to_a_scalar_agree_on_gpus() {
    use tritium_fuzz::Target;
    // A loop whose body has a `dot` and a sum of a loaded line to a scalar.
    fn sums_beside_a_dot(f: &tritium_dsl::ir::Function, b: &Block) -> bool {
        let defs = f.defs();
        b.insts.iter().any(|i| match &i.op {
            Op::For { body, .. } => {
                let dot = body.insts.iter().any(|i| matches!(i.op, Op::Dot { .. }));
                let sum = (body.insts.iter()).any(|i| match &i.op {
                    Op::Reduce { x, .. } => {
                        f.ty(i.results[0]).is_scalar()
                            && matches!(defs.get(x).map(|d| &d.op), Some(Op::Load { .. }))
                    }
                    _ => false,
                });
                (dot && sum) || sums_beside_a_dot(f, body)
            }
            _ => false,
        })
    }
    let config = GenConfig::default();
    let (mut found, mut run, mut pipelined) = (0, 0, 0);
    for seed in 0..SEEDS * 16 {
        let case = generate(seed, &config);
        if !sums_beside_a_dot(&case.function, &case.function.body) {
            continue;
        }
        found += 1;
        if case.num_warps == 1 || !runs_without_checks(&case) {
            continue;
        }
        run += 1;
        let targets = [Target::Emulator, Target::HopperEmulator];
        let stats = stats_of_agreeing(seed, &case, &targets);
        pipelined += usize::from(stats.cp_async_overlapped_waits > 0);
        if run >= 6 && pipelined >= 2 {
            break;
        }
    }
    assert!(
        found >= 6 && run >= 4 && pipelined >= 2,
        "{found} K loops summing to a scalar, {run} run on several warps, {pipelined} pipelined"
    );
}

/// Tensor-descriptor K loops (`descriptor_k_loop`) and stores of `dot` results through
/// descriptors (`store_output`; now and then an elementwise op of the result, as
/// attention's `acc / l_i[:, None]`) are generated, and Hopper's code moves their blocks by
/// TMA (`cuda/tensor_map.rs`): loads with `mma.sync` or `wgmma`, stores from the
/// epilogue's tile, agreeing with the interpreter.
#[test]
fn descriptor_accesses_are_made_by_tma_on_hopper() {
    use tritium_fuzz::Target;
    let config = GenConfig::default();
    let (mut found, mut run, mut loaded, mut stored) = (0, 0, 0, 0);
    // Runs storing an elementwise op of a `dot` result, and those by TMA.
    let (mut op_run, mut op_stored) = (0, 0);
    for seed in 0..SEEDS * 8 {
        let case = generate(seed, &config);
        let f = &case.function;
        let defs = f.defs();
        let op = |v: &tritium_dsl::ir::Value| defs.get(v).map(|d| &d.op);
        // A descriptor's block: its mask `(0 <= i & i < rows) & (0 <= j & j < cols)`.
        let in_dim = |v: &tritium_dsl::ir::Value| match op(v) {
            Some(Op::Broadcast(x)) => matches!(
                op(x),
                Some(Op::Binary(tritium_dsl::ir::BinOp::And, ge, lt))
                    if matches!(op(ge), Some(Op::Cmp(tritium_dsl::ir::CmpPred::Ge, ..)))
                        && matches!(op(lt), Some(Op::Cmp(tritium_dsl::ir::CmpPred::Lt, ..)))
            ),
            _ => false,
        };
        // An elementwise op of a `dot`'s result, cast.
        let op_of_dot = |v: &tritium_dsl::ir::Value| {
            let Some(Op::Cast(x)) = op(v) else {
                return false;
            };
            let is_dot = |d: &tritium_dsl::ir::Value| matches!(op(d), Some(Op::Dot { .. }));
            match op(x) {
                Some(Op::Unary(_, d)) | Some(Op::Binary(_, d, _)) => is_dot(d),
                _ => false,
            }
        };
        // Whether it has a descriptor's block, and its descriptor stores: how many, and of
        // those how many store an op of a `dot` result.
        let (mut descriptor, mut stores, mut op_stores) = (false, 0, 0);
        f.walk(&mut |i| {
            let (Op::Load { mask: Some(m), .. } | Op::Store { mask: Some(m), .. }) = &i.op else {
                return;
            };
            if let Some(Op::Binary(tritium_dsl::ir::BinOp::And, x, y)) = op(m) {
                let block = in_dim(x) && in_dim(y);
                descriptor |= block;
                if let (Op::Store { value, .. }, true) = (&i.op, block) {
                    stores += 1;
                    op_stores += usize::from(op_of_dot(value));
                }
            }
        });
        // The only descriptor store: its TMA bytes are its own.
        let stores_op = stores == 1 && op_stores == 1;
        if !descriptor || seed >= SEEDS * 2 && !stores_op {
            continue;
        }
        found += usize::from(seed < SEEDS * 2);
        if !runs_without_checks(&case) {
            continue;
        }
        if run >= 12 && !(stores_op && op_stored < 1) {
            continue;
        }
        run += 1;
        op_run += usize::from(stores_op);
        let stats = stats_of_agreeing(seed, &case, &[Target::HopperEmulator]);
        loaded += usize::from(stats.tma_bytes > 0);
        stored += usize::from(stats.tma_store_bytes > 0);
        op_stored += usize::from(stores_op && stats.tma_store_bytes > 0);
    }
    assert!(
        found >= 10,
        "{found} of {SEEDS} programs access through descriptors"
    );
    assert!(
        loaded >= 2 && stored >= 1 && op_stored >= 1,
        "of {run}: {loaded} loaded, {stored} stored by TMA \
         ({op_stored} of {op_run} storing an op of a `dot` result)"
    );
}

/// Stores of a `dot`'s result cast to 16 bits (tutorial 03's `acc.to(f16)`) are generated,
/// and on Hopper some go to the epilogue's tile by `stmatrix` (where every warp holds
/// tiles of its own: one warp here), of 4 matrices and, at 16 × 8, of 2, agreeing with
/// the interpreter.
#[test]
fn staged_epilogues_go_by_stmatrix_on_hopper() {
    use tritium_fuzz::Target;
    let config = GenConfig::default();
    let (mut run, mut by_stmatrix, mut x2) = (0, 0, 0);
    for seed in 0..SEEDS * 8 {
        let case = generate(seed, &config);
        let f = &case.function;
        let defs = f.defs();
        let mut shape = None;
        f.walk(&mut |i| {
            if let Op::Store { value, .. } = &i.op {
                if let Some(Op::Cast(x)) = defs.get(value).map(|d| &d.op) {
                    let from_dot =
                        std::iter::successors(Some(*x), |v| match defs.get(v).map(|d| &d.op) {
                            Some(Op::Unary(_, y)) | Some(Op::Binary(_, y, _)) => Some(*y),
                            _ => None,
                        })
                        .any(|v| matches!(defs.get(&v).map(|d| &d.op), Some(Op::Dot { .. })));
                    if from_dot && f.ty(*value).dtype().is_some_and(|d| d.size_bytes() == 2) {
                        shape = Some(f.ty(*value).shape.clone());
                    }
                }
            }
        });
        let Some(shape) = shape else { continue };
        if case.num_warps != 1 || !runs_without_checks(&case) {
            continue;
        }
        run += 1;
        let matrices = stats_of_agreeing(seed, &case, &[Target::HopperEmulator]).stmatrix_matrices;
        by_stmatrix += usize::from(matrices > 0);
        x2 += usize::from(matrices > 0 && shape == [16, 8]);
        if by_stmatrix >= 3 && x2 >= 1 {
            break;
        }
    }
    assert!(
        by_stmatrix >= 3 && x2 >= 1,
        "of {run} on one warp: {by_stmatrix} by stmatrix, {x2} of 16 × 8"
    );
}

/// Transposes of loaded descriptor blocks feeding a `dot` (attention's `kᵀ` as
/// `desc_k.load(..).T`), 16-bit and fp8, are generated, and their code, which loads the
/// transposed block (`dsl::ir::sink_transposes`: by TMA on Hopper, by `cp.async` on
/// Ampere), agrees with the interpreter.
#[test]
fn transposed_descriptor_loads_are_generated_and_agree() {
    use tritium_dsl::ir::DType;
    use tritium_fuzz::Target;
    let config = GenConfig::default();
    // Per element size (2, 1): programs run, and those copied by TMA.
    let (mut found, mut by_tma) = ([0; 2], [0; 2]);
    for seed in 0..SEEDS * 40 {
        let case = generate(seed, &config);
        let f = &case.function;
        let defs = f.defs();
        let mut transposed = None;
        f.walk(&mut |i| {
            if let Op::Permute { x, .. } = &i.op {
                let loaded = defs.get(x).map(|d| &d.op);
                if matches!(loaded, Some(Op::Load { mask: Some(_), .. })) && f.ty(*x).rank() == 2 {
                    transposed = f.ty(*x).dtype();
                }
            }
        });
        // fp8: where Hopper can take its `dot` to `wgmma` (64 rows, 4 warps).
        let fp8 = |d: Option<DType>| matches!(d, Some(DType::F8E4M3 | DType::F8E5M2));
        let (mut dot, mut wgmma_fp8) = (false, false);
        f.walk(&mut |i| {
            if let Op::Dot { a, .. } = &i.op {
                dot = true;
                wgmma_fp8 |= fp8(f.ty(*a).dtype()) && f.ty(*a).shape[0] == 64;
            }
        });
        let Some(dtype) = transposed.filter(|_| dot) else {
            continue;
        };
        let which = usize::from(fp8(Some(dtype)));
        if which == 1 && !(wgmma_fp8 && case.num_warps == 4) || !runs_without_checks(&case) {
            continue;
        }
        if found[which] == [4, 3][which] {
            continue;
        }
        found[which] += 1;
        let targets = [Target::Emulator, Target::HopperEmulator];
        by_tma[which] += usize::from(stats_of_agreeing(seed, &case, &targets).tma_bytes > 0);
        if found == [4, 3] {
            break;
        }
    }
    assert!(
        found[0] >= 3 && found[1] >= 1,
        "{found:?} programs transpose a loaded block"
    );
    assert!(
        by_tma[0] >= 1 && by_tma[1] >= 1,
        "of {found:?}: {by_tma:?} by TMA"
    );
}

/// Mixed fp8 `dot`s (E4M3 @ E5M2 either way round: `edge_dot`'s and descriptor K loops'
/// `b` from an input of the other fp8) are generated, agree with the interpreter on both
/// emulated GPUs, and Hopper runs those of 64 rows at 4 warps on `wgmma` (E4M3 by E5M2 in
/// one instruction).
#[test]
fn mixed_fp8_dots_are_generated_and_run_on_wgmma() {
    use tritium_fuzz::Target;
    let config = GenConfig::default();
    let (mut found, mut on_wgmma, mut descriptor) = (0, 0, 0);
    for seed in 0..SEEDS * 40 {
        let case = generate(seed, &config);
        let f = &case.function;
        // The rows of a mixed `dot`, and whether one is fed by a loop's loads.
        let (mut rows, mut in_loop) = (None, false);
        f.walk(&mut |i| match &i.op {
            Op::Dot { a, b, .. } if f.ty(*a).dtype() != f.ty(*b).dtype() => {
                rows = Some(f.ty(*a).shape[0]);
            }
            Op::For { body, .. } => in_loop |= body.insts.iter().any(
                |d| matches!(&d.op, Op::Dot { a, b, .. } if f.ty(*a).dtype() != f.ty(*b).dtype()),
            ),
            _ => {}
        });
        let Some(rows) = rows else {
            continue;
        };
        // Enough of them, unless this one could run on `wgmma` or is the first fed by a
        // loop's loads.
        let wgmma_shape = rows == 64 && case.num_warps == 4;
        if found >= 6 && !(wgmma_shape && on_wgmma < 2) && !(in_loop && descriptor == 0) {
            continue;
        }
        found += 1;
        descriptor += usize::from(in_loop);
        let targets = [Target::Emulator, Target::HopperEmulator];
        on_wgmma += usize::from(stats_of_agreeing(seed, &case, &targets).wgmma > 0);
        if found >= 6 && on_wgmma >= 2 && descriptor >= 1 {
            break;
        }
    }
    assert!(
        found >= 6 && on_wgmma >= 2 && descriptor >= 1,
        "{found} mixed fp8 dots, {on_wgmma} on wgmma, {descriptor} in descriptor loops"
    );
}

/// Loop-invariant descriptor blocks (attention's `q`: `a` loaded once before one or two
/// K loops) are generated and agree with the interpreter on both emulated GPUs, and
/// Hopper copies some of them once by TMA (where the loop keeps `a` in shared memory:
/// fp8 at 64 rows and 4 warps), as the bytes TMA copied show: `a`'s block once per
/// program, beside each loop's `b` blocks.
#[test]
fn loop_invariant_descriptor_blocks_are_copied_once_by_tma() {
    use tritium_dsl::ir::Const;
    use tritium_fuzz::Target;
    let config = GenConfig::default();
    let (mut found, mut twice, mut once_by_tma) = (0, 0, 0);
    for seed in 0..SEEDS * 80 {
        let case = generate(seed, &config);
        let f = &case.function;
        let defs = f.defs();
        let constant = |v: &tritium_dsl::ir::Value| match defs.get(v).map(|d| &d.op) {
            Some(Op::Const(Const::Int(n))) => Some(*n as usize),
            _ => None,
        };
        let bytes = |v: &tritium_dsl::ir::Value| {
            let t = f.ty(*v);
            t.numel() * t.dtype().map_or(0, |d| d.size_bytes())
        };
        // A top-level load that is the `a` of a `dot` in top-level loops: its bytes, and
        // the bytes of those loops' `b` blocks (trips × block).
        let mut invariant = None;
        for load in &f.body.insts {
            let Op::Load { .. } = load.op else {
                continue;
            };
            let r = load.results[0];
            let (mut loops, mut b_bytes) = (0, 0);
            for l in &f.body.insts {
                let Op::For {
                    lo, hi, step, body, ..
                } = &l.op
                else {
                    continue;
                };
                for d in &body.insts {
                    if let Op::Dot { a, b, .. } = &d.op {
                        if *a == r {
                            let trips = match (constant(lo), constant(hi), constant(step)) {
                                (Some(lo), Some(hi), Some(1)) => hi - lo,
                                _ => 0,
                            };
                            loops += 1;
                            b_bytes += trips * bytes(b);
                        }
                    }
                }
            }
            if loops > 0 {
                invariant = Some((r, loops, b_bytes));
            }
        }
        let Some((a, loops, b_bytes)) = invariant else {
            continue;
        };
        let a_bytes = bytes(&a);
        let fp8 = f.ty(a).dtype().is_some_and(|d| d.size_bytes() == 1);
        let copied_once_maybe = fp8 && case.num_warps == 4 && runs_without_checks(&case);
        if found >= 6 && !(copied_once_maybe && once_by_tma < 2) {
            continue;
        }
        found += 1;
        twice += usize::from(loops == 2);
        // Hopper alone, for its copies' bytes.
        stats_of_agreeing(seed, &case, &[Target::Emulator]);
        let stats = stats_of_agreeing(seed, &case, &[Target::HopperEmulator]);
        // The `b` blocks go by TMA (or `cp.async`, or from registers); an `a` outside
        // the loops by TMA once per program, or from registers: TMA's bytes add up to
        // both only when `a` went by TMA (the other `dot`s' operands are no descriptor
        // blocks: no TMA).
        let programs = case.grid.iter().product::<u64>() as usize;
        let copied = stats.tma_bytes as usize;
        once_by_tma += usize::from(copied == programs * (a_bytes + b_bytes));
        if found >= 6 && once_by_tma >= 2 && twice >= 1 {
            break;
        }
    }
    assert!(
        found >= 6 && once_by_tma >= 2 && twice >= 1,
        "{found} invariant `a` blocks, {twice} used by two loops, {once_by_tma} copied once by TMA"
    );
}

/// Descriptor K loops whose view moves per program (`base + (pid % 2) · batch`, a TMA
/// map's third dim), whose blocks leave a dim unchecked (a block pointer's dim outside
/// `boundary_check`, the map's extent unbounded there), or that run inside an outer loop
/// (tutorial 09's persistent form) are generated, and Hopper copies them by TMA in
/// agreement with the interpreter.
#[test]
fn batched_and_unchecked_descriptor_blocks_go_by_tma() {
    use tritium_dsl::ir::BinOp;
    use tritium_fuzz::Target;
    let config = GenConfig::default();
    // Per form (batched, unchecked, nested): programs run, and those copied by TMA.
    let (mut found, mut by_tma) = ([0; 3], [0; 3]);
    for seed in 0..SEEDS * 40 {
        let case = generate(seed, &config);
        let f = &case.function;
        let defs = f.defs();
        let op = |v: &tritium_dsl::ir::Value| defs.get(v).map(|d| &d.op);
        let (mut batched, mut unchecked, mut nested) = (false, false, false);
        // The operands of a 64-row `dot` in a loop (`wgmma` on Hopper at 4 warps), through
        // a transpose, as loads: their base and mask.
        let loaded = |v: &tritium_dsl::ir::Value| {
            let v = match op(v) {
                Some(Op::Permute { x, .. }) => *x,
                _ => *v,
            };
            match op(&v) {
                Some(Op::Load { ptr, mask, .. }) => Some((*ptr, *mask)),
                _ => None,
            }
        };
        f.walk(&mut |i| {
            let Op::For { body, .. } = &i.op else {
                return;
            };
            // A loop directly around a 64-row `dot`'s loop.
            nested |= body.insts.iter().any(|l| match &l.op {
                Op::For { body, .. } => body
                    .insts
                    .iter()
                    .any(|d| matches!(&d.op, Op::Dot { a, .. } if f.ty(*a).shape[0] == 64)),
                _ => false,
            });
            for d in &body.insts {
                let Op::Dot { a, b, .. } = &d.op else {
                    continue;
                };
                if f.ty(*a).shape[0] != 64 {
                    continue;
                }
                for (ptr, mask) in [a, b].into_iter().filter_map(loaded) {
                    // `splat(base) + offsets`, `base` moved by `cast(pid % 2) · stride`.
                    let base = match op(&ptr) {
                        Some(Op::AddPtr(s, _)) => match op(s) {
                            Some(Op::Splat(base)) => Some(*base),
                            _ => None,
                        },
                        _ => None,
                    };
                    if let Some(Op::AddPtr(_, moved)) = base.as_ref().and_then(op) {
                        if let Some(Op::Binary(BinOp::Mul, x, _)) = op(moved) {
                            let pid = |v| matches!(op(v), Some(Op::ProgramId(_)));
                            batched |= matches!(op(x), Some(Op::Cast(r))
                                if matches!(op(r), Some(Op::Binary(BinOp::Rem, p, _)) if pid(p)));
                        }
                    }
                    // One dim masked (`broadcast(ge & lt)`), or none.
                    unchecked |= match mask.as_ref().and_then(op) {
                        None => true,
                        Some(Op::Broadcast(m)) => matches!(op(m), Some(Op::Binary(BinOp::And, ..))),
                        _ => false,
                    };
                }
            }
        });
        for (which, form) in [batched, unchecked, nested].into_iter().enumerate() {
            if !form || found[which] == 4 || case.num_warps != 4 || !runs_without_checks(&case) {
                continue;
            }
            found[which] += 1;
            let stats = stats_of_agreeing(seed, &case, &[Target::HopperEmulator]);
            by_tma[which] += usize::from(stats.tma_bytes > 0);
        }
        if found == [4; 3] {
            break;
        }
    }
    let what = "programs batched / unchecked / nested";
    assert!(found.iter().all(|n| *n >= 1), "{found:?} {what}");
    assert!(
        by_tma.iter().all(|n| *n >= 1),
        "of {found:?}: {by_tma:?} by TMA"
    );
}

/// Bounded float buffers (the data of exactly compared sums) hold -0 as well as +0: a zero
/// takes the sign of the last nonzero value before it, so that lanes of -0 come up and a
/// sum of them is compared with its sign (every target's float sums fold from -0), in
/// every float dtype's encoding.
#[test]
fn bounded_float_zeros_take_the_sign_before_them() {
    use tritium_dsl::ir::DType;
    for d in [
        DType::F32,
        DType::F16,
        DType::BF16,
        DType::F8E4M3,
        DType::F64,
    ] {
        let bytes = tritium_fuzz::gen::buffer(d, 4096, Some(2.0), &mut tritium_fuzz::Rng::new(7));
        let size = d.size_bytes();
        let zero = |sign: bool| {
            tritium_fuzz::gen::element_bytes(
                d,
                tritium_dsl::ir::Const::Float(if sign { -0.0 } else { 0.0 }),
            )
        };
        let (plus, minus) = (zero(false), zero(true));
        assert_ne!(plus, minus, "{d:?}");
        let mut negative = false;
        let mut counts = [0usize; 2];
        for element in bytes.chunks(size) {
            if element == plus.as_slice() || element == minus.as_slice() {
                let want = if negative { &minus } else { &plus };
                assert_eq!(element, want.as_slice(), "{d:?}");
                counts[usize::from(negative)] += 1;
            } else {
                // The sign bit is the top bit of the last byte (little-endian).
                negative = element[size - 1] & 0x80 != 0;
            }
        }
        assert!(counts[0] > 100 && counts[1] > 100, "{d:?}: {counts:?}");
    }
}

/// `likely` hints over rank-1 tiles of several 32-lane chunks, read at other lanes (through
/// a flip, a gather, a reshape, or a select made of the hint first) are generated, and the
/// CPU, which tests such hints per tile and others per chunk, agrees with the interpreter
/// on them. Random tiles of rank 1 are a chunk or less, so before the generator built
/// these on purpose a build that tested every hint per chunk (`reads_own_lanes` true for
/// any op) passed 75 programs; now it fails here (seed 10), and the fuzzer found it in 8
/// of 150 programs with these tiles twice as frequent as now.
#[test]
fn chunked_likely_hints_read_at_other_lanes_are_generated_and_agree() {
    use tritium_dsl::ir::{HintKind, Value};
    let config = GenConfig::default();
    let mut found = Vec::new();
    for seed in 0..SEEDS {
        let case = generate(seed, &config);
        let f = &case.function;
        let chunked = |v: Value| {
            let s = &f.ty(v).shape;
            s.len() == 1 && s[0] >= 64 && s[0].is_multiple_of(32)
        };
        let mut hinted: BTreeSet<Value> = BTreeSet::new();
        let mut remapped = false;
        f.walk(&mut |inst| match &inst.op {
            Op::Hint {
                x,
                kind: HintKind::Likely,
                ..
            } if chunked(*x) => {
                hinted.insert(inst.results[0]);
            }
            Op::Select(c, ..) if hinted.contains(c) => {
                hinted.insert(inst.results[0]);
            }
            Op::Flip { x, .. } | Op::Reshape(x) | Op::Gather { src: x, .. } => {
                remapped |= hinted.contains(x);
            }
            _ => {}
        });
        if remapped {
            let special = stores_of(f, &hinted);
            found.push((seed, case, special));
        }
    }
    assert_enough_agree_on_the_cpu(&found);
}

/// The CPU software-pipelines a lane loop whose chains are long over a rank-1 tile of four
/// chunks or more (codegen `staged`). Random tiles of rank 1 are a chunk or less and their
/// chains short, so the generator builds such stores on purpose (`gen/deep_chains.rs`):
/// enough of them are generated, and they agree with the interpreter on the CPU.
#[test]
fn deep_lane_chains_over_several_chunks_are_generated_and_agree() {
    use std::collections::HashMap;
    use tritium_dsl::ir::Value;
    let config = GenConfig::default();
    let mut found = Vec::new();
    for seed in 0..SEEDS {
        let case = generate(seed, &config);
        let f = &case.function;
        // The longest chain of pointwise ops over tiles of four chunks or more.
        let mut chain: HashMap<Value, usize> = HashMap::new();
        let mut deepest = 0;
        f.walk(&mut |inst| {
            let [r] = inst.results[..] else { return };
            let s = &f.ty(r).shape;
            if !(inst.op.is_pointwise() && s.len() == 1 && s[0] >= 128) {
                return;
            }
            let longest = inst.op.operands().iter().filter_map(|o| chain.get(o)).max();
            let length = 1 + longest.copied().unwrap_or(0);
            deepest = deepest.max(length);
            chain.insert(r, length);
        });
        if deepest >= 12 {
            let long = chain.iter().filter(|(_, n)| **n >= 12).map(|(v, _)| *v);
            let special = stores_of(f, &long.collect());
            found.push((seed, case, special));
        }
    }
    assert_enough_agree_on_the_cpu(&found);
}

/// The places (in program order) of the stores of `f` whose values derive from `from`.
fn stores_of(f: &tritium_dsl::ir::Function, from: &BTreeSet<tritium_dsl::ir::Value>) -> Vec<usize> {
    let mut derived = from.clone();
    let (mut place, mut found) = (0, Vec::new());
    f.walk(&mut |inst| {
        if let Op::Store { value, .. } = inst.op {
            if derived.contains(&value) {
                found.push(place);
            }
            place += 1;
        } else if inst.op.operands().iter().any(|o| derived.contains(o)) {
            derived.extend(inst.results.iter().copied());
        }
    });
    found
}

/// At least 10 `found` programs (of [`SEEDS`]), each with the places of the stores of its
/// special form, and the first 8 agree with the interpreter on the CPU, where each of
/// those forms reaches the comparison: one of its stores that ran is seen in the buffers
/// (`reach`; before the generator's store windows, every deep chain's store was
/// overwritten by a later one).
fn assert_enough_agree_on_the_cpu(found: &[(u64, Case, Vec<usize>)]) {
    use tritium_fuzz::reach::{store_fates, StoreFate};
    assert!(
        found.len() >= 10,
        "{} such programs in {SEEDS}",
        found.len()
    );
    let mut unseen = Vec::new();
    for (seed, case, special) in found.iter().take(8) {
        let report = tritium_fuzz::check(case, &[tritium_fuzz::Target::Cpu]);
        assert!(
            report.ok(),
            "seed {seed}: {:?} {:?}",
            report.invalid,
            report.mismatches
        );
        let fates = store_fates(case).expect("the interpreter runs it");
        let ran: Vec<StoreFate> = special
            .iter()
            .map(|k| fates[*k])
            .filter(|f| *f != StoreFate::NotRun)
            .collect();
        if !ran.is_empty() && !ran.contains(&StoreFate::Seen) {
            unseen.push((*seed, special.clone(), ran));
        }
    }
    // One may mask every lane (seed 21's chunked-hint store: its mask selects between
    // `x != x` and others, false at run time).
    assert!(
        unseen.len() <= 1,
        "special stores that ran but none is seen (seed, stores, fates): {unseen:?}"
    );
}
