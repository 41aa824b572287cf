//! The IR's text form (pinned and round-tripped) and verifier errors.

use tritium_dsl::ir::{parse_function, print_function, verify, CmpPred, Function};
use tritium_dsl::trace::lang::*;
use tritium_dsl::trace::{flow, ptr_param, scalar_param, Specialization, Tile, Tracer};
use tritium_dsl::{DType, Error};

#[rustfmt::skip] // the pinned text records source columns
fn vadd() -> Function {
    let t = Tracer::begin("vadd").unwrap();
    let out = ptr_param("out", DType::F32);
    let x = ptr_param("x", DType::F32);
    let n = scalar_param("n", DType::I32, 2, &Specialization::default());
    let offs = program_id(0) * 16 + arange(0, 16);
    let mask = compare(offs, CmpPred::Lt, n);
    store(out + offs, load(x + offs, mask, 0.0) * 2.0, mask);
    t.finish().unwrap()
}

#[rustfmt::skip] // the pinned text records source columns
fn loop_sum() -> Function {
    let t = Tracer::begin("loop_sum").unwrap();
    let out = ptr_param("out", DType::F32);
    let n = scalar_param("n", DType::I32, 1, &Specialization::default());
    let acc = zeros([4], DType::F32);
    let acc = flow::for_range(0, n, 1, acc, |i, acc| acc + cast(i, DType::F32));
    let (_, acc, ()) = flow::if_else(
        compare(n, CmpPred::Gt, 2),
        acc,
        |a| ((), a * 2.0, ()),
        |a| ((), a, ()),
    );
    store(out + arange(0, 4), acc, NoArg);
    t.finish().unwrap()
}

/// Two `device_assert`s: a masked one on a tile with a message that needs escapes, and a
/// scalar one without a message.
fn asserts() -> Function {
    let t = Tracer::begin("asserts").unwrap();
    let x = ptr_param("x", DType::I32);
    let n = scalar_param("n", DType::I32, 1, &Specialization::default());
    let offs = arange(0, 8);
    let v = load(x + offs, NoArg, NoArg);
    let mask = compare(offs, CmpPred::Lt, n);
    device_assert(compare(v, CmpPred::Ge, 0), "v \"{ok}\"\n\\", mask);
    device_assert(compare(n, CmpPred::Gt, 0), NoArg, NoArg);
    t.finish().unwrap()
}

/// Compares with the pinned text; `TRITIUM_BLESS=1` rewrites the pin (review the diff).
fn check_pinned(text: &str, pinned: &str, file: &str) {
    if std::env::var_os("TRITIUM_BLESS").is_some() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/pinned")
            .join(file);
        std::fs::write(path, text).unwrap();
        return;
    }
    assert_eq!(
        text, pinned,
        "the text form changed; if on purpose, rerun with TRITIUM_BLESS=1 and review"
    );
}

#[test]
fn text_of_vector_add_is_pinned() {
    check_pinned(
        &print_function(&vadd()),
        include_str!("pinned/vadd.tir"),
        "vadd.tir",
    );
}

#[test]
fn text_of_loop_with_if_is_pinned() {
    check_pinned(
        &print_function(&loop_sum()),
        include_str!("pinned/loop_sum.tir"),
        "loop_sum.tir",
    );
}

#[test]
fn text_round_trips() {
    for f in [vadd(), loop_sum(), asserts()] {
        let text = print_function(&f);
        let parsed = parse_function(&text).unwrap();
        assert_eq!(parsed, f);
        verify(&parsed).unwrap();
        assert_eq!(print_function(&parsed), text);
    }
}

#[test]
fn assert_text_and_verifier_limits() {
    let text = print_function(&asserts());
    assert!(
        text.contains(r#"assert %10, mask = %7 {msg = "v \"{ok}\"\n\\"}"#),
        "{text}"
    );
    assert!(text.contains(r#"assert %12 {msg = ""}"#), "{text}");
    let rows = [
        ("msg = v", "must be a quoted string"),
        ("msg = \"a\", msg = \"b\"", "given twice"),
        ("op = \"a\"", "has no attribute `op`"),
        ("", "needs attribute `msg`"),
    ];
    for (attrs, want) in rows {
        let bad = text.replacen(r#"{msg = ""}"#, &format!("{{{attrs}}}"), 1);
        let e = parse_function(&bad);
        assert!(e.is_err_and(|e| e.to_string().contains(want)), "{attrs}");
    }
    let long = "x".repeat(tritium_dsl::ir::MAX_DEBUG_TEXT + 1);
    let f =
        parse_function(&text.replace(r#"{msg = ""}"#, &format!("{{msg = \"{long}\"}}"))).unwrap();
    let e = verify(&f).unwrap_err().to_string();
    assert!(e.contains("at most 4096"), "{e}");
}

#[test]
fn parse_errors_name_the_line() {
    let bad = "kernel @k(x %0: ptr<f32>) {\n  %1 = frobnicate %0 : f32 loc(\"k.rs\":1:1)\n}\n";
    match parse_function(bad) {
        Err(Error::Parse { line, message }) => {
            assert_eq!(line, 2);
            assert!(message.contains("frobnicate"), "{message}");
        }
        other => panic!("expected a parse error, got {other:?}"),
    }
}

#[test]
fn verifier_errors_name_the_source_location() {
    // A store whose value type does not match the pointee, written by hand.
    let text = "kernel @k(x %0: ptr<f32>) {\n  %1 = const {value = 1} : i32 loc(\"src/k.rs\":7:9)\n  store %0, %1 loc(\"src/k.rs\":8:5)\n}\n";
    let f = parse_function(text).unwrap();
    let e = verify(&f).unwrap_err().to_string();
    assert!(
        e.contains("src/k.rs:8:5") && e.contains("stored value"),
        "{e}"
    );
}

#[test]
fn trace_errors_name_the_kernel_source_line() {
    let t = Tracer::begin("bad").unwrap();
    let x = ptr_param("x", DType::F32);
    let line = line!() + 1;
    let _ = load(x + arange(0, 4), NoArg, NoArg) + arange(0, 8);
    let e = t.finish().unwrap_err().to_string();
    assert!(
        e.contains(&format!("main.rs:{line}:")) && e.contains("incompatible shapes"),
        "{e}"
    );
}

mod robust;

/// `plan_call` resolves builtins from operand types alone; each row is a call it must reject
/// and the words its error must contain. The bool gather was found by the fuzzer: it passed
/// the plan and failed to link (`…_gather_load_int1_int32` is not in the library).
#[test]
fn builtin_plans_reject_bad_operands() {
    use tritium_dsl::custom::{plan_call, CustomArgs, CustomOptions};
    use tritium_dsl::ir::{Elem, Type};
    let tile = |d: DType, s: &[usize]| Type::tile(Elem::Scalar(d), s.to_vec());
    let scalar = Type::scalar;
    let cases: Vec<(&str, Vec<Type>, Vec<Type>, &str)> = vec![
        (
            "__builtin_gather_load",
            vec![
                Type::ptr(DType::Bool),
                tile(DType::I32, &[4]),
                scalar(DType::I32),
            ],
            vec![tile(DType::Bool, &[4])],
            "points to bool",
        ),
        (
            "__builtin_index_select",
            vec![
                Type::ptr(DType::Bool),
                tile(DType::I32, &[2]),
                scalar(DType::I32),
                scalar(DType::I32),
            ],
            vec![tile(DType::Bool, &[2, 4])],
            "points to bool",
        ),
        (
            "__builtin_gather_load",
            vec![
                Type::ptr(DType::F32),
                tile(DType::F32, &[4]),
                scalar(DType::I32),
            ],
            vec![tile(DType::F32, &[4])],
            "must be an i32 or i64 tile",
        ),
        (
            "__builtin_indirect_atomic",
            vec![
                Type::ptr(DType::F16),
                tile(DType::I32, &[4]),
                tile(DType::F16, &[4]),
                scalar(DType::I32),
                scalar(DType::I32),
            ],
            vec![tile(DType::F16, &[4])],
            "atomics on f16",
        ),
    ];
    for (name, ins, outs, want) in cases {
        let args = CustomArgs {
            name: name.into(),
            ins,
            outs,
        };
        let err = plan_call(&args, CustomOptions::default()).unwrap_err();
        assert!(err.contains(name) && err.contains(want), "{name}: {err}");
    }
    // A well-typed call plans: the library symbol names the element and index dtypes.
    let args = CustomArgs {
        name: "__builtin_gather_load".into(),
        ins: vec![
            Type::ptr(DType::U8),
            tile(DType::I64, &[2, 2]),
            scalar(DType::U32),
        ],
        outs: vec![tile(DType::U8, &[2, 2])],
    };
    let plan = plan_call(&args, CustomOptions::default()).unwrap();
    assert_eq!(plan.attrs.symbol, "__builtin_gather_load_uint8_int64");
    assert_eq!(plan.arg_dtypes, vec![(2, DType::I64)]);
    assert!(plan.flatten_outs && plan.flatten_ins == vec![1]);
}

/// Tutorial 03's `a` tile at K step `kb`: `a + rm[:, None] * lda + (rk[None, :] + kb·BK)`
/// under `(rm[:, None] < m) & (rk[None, :] < k - kb·BK)`, with runtime parameters `a`, `m`,
/// `k`, `lda` and the unit stride `one` (numbered 0..5 as a launch numbers them).
fn tutorial_03_a_tile(spec: &Specialization) -> Function {
    let t = Tracer::begin("a_tile").unwrap();
    let a = tritium_dsl::trace::ptr_param_at("a", DType::F16, 0, spec);
    let m = scalar_param("m", DType::I32, 1, spec);
    let k = scalar_param("k", DType::I32, 2, spec);
    let lda = scalar_param("lda", DType::I32, 3, spec);
    let one = scalar_param("one", DType::I32, 4, spec);
    let rm = program_id(0) * 64 + arange(0, 64);
    let rk = arange(0, 32);
    let rows = rm.expand_dims(1).broadcast_to([64, 32]);
    let cols = rk.expand_dims(0).broadcast_to([64, 32]);
    let ptrs = a + (rows * lda + cols * one);
    let sum = zeros([64, 32], DType::F32);
    flow::for_range(0, cdiv(k, 32), 1, sum, |kb, sum| {
        let k0 = kb * 32;
        let mask = compare(rows, CmpPred::Lt, m) & compare(cols, CmpPred::Lt, k - k0);
        sum + cast(load(ptrs + k0 * one, mask, 0.0), DType::F32)
    });
    t.finish().unwrap()
}

/// The value `f`'s (last) store writes.
fn stored_value(f: &Function) -> tritium_dsl::ir::Value {
    let mut stored = None;
    f.walk(&mut |i| {
        if let tritium_dsl::ir::Op::Store { value, .. } = &i.op {
            stored = Some(*value);
        }
    });
    stored.expect("a store")
}

/// The loads of `f`: (pointer, mask).
fn loads(f: &Function) -> Vec<(tritium_dsl::ir::Value, Option<tritium_dsl::ir::Value>)> {
    let mut found = Vec::new();
    f.walk(&mut |i| {
        if let tritium_dsl::ir::Op::Load { ptr, mask, .. } = &i.op {
            found.push((*ptr, *mask));
        }
    });
    found
}

/// With the launch's specialization (16-aligned `a`, `m`, `k`, `lda` divisible by 16, a
/// unit stride), each row of tutorial 03's tile is runs of 16 halves whose first is
/// 16-byte aligned, under a mask equal over runs of 16 columns; without it, nothing
/// proves either.
#[test]
fn axis_info_proves_16_byte_runs_of_tutorial_03() {
    use tritium_dsl::ir::axis_info;
    let spec = Specialization {
        ones: vec![false, false, false, false, true],
        sixteens: vec![true, true, true, true, false],
    };
    let f = tutorial_03_a_tile(&spec);
    verify(&f).unwrap();
    let info = axis_info(&f);
    let (ptr, mask) = loads(&f)[0];
    let (p, m) = (&info[&ptr], &info[&mask.unwrap()]);
    assert!(p.contiguity[1] >= 16, "{p:?}");
    assert!(p.divisibility[1] >= 16, "{p:?}");
    assert!(m.constancy[1] >= 16, "{m:?}");
    // `k` not divisible by 16: the mask's columns vary; an unaligned `a`: the runs'
    // addresses are only 2-byte multiples.
    let plain = Specialization {
        ones: spec.ones.clone(),
        sixteens: vec![false, true, false, true, false],
    };
    let f = tutorial_03_a_tile(&plain);
    let info = axis_info(&f);
    let (ptr, mask) = loads(&f)[0];
    let (p, m) = (&info[&ptr], &info[&mask.unwrap()]);
    assert_eq!((p.contiguity[1], p.divisibility[1]), (16, 2), "{p:?}");
    assert_eq!(m.constancy[1], 1, "{m:?}");
}

/// Table of single rules: (what, traced value's info along its last dim as
/// (contiguity, divisibility, constancy)).
#[test]
fn axis_info_rules() {
    use tritium_dsl::ir::{axis_info, MAX_DIVISIBILITY as MAX};
    let spec = Specialization {
        ones: vec![false, false],
        sixteens: vec![true, false],
    };
    type Build = fn(Tile, Tile) -> Tile;
    let cases: Vec<(&str, Build, (u64, u64, u64))> = vec![
        ("arange", |_, _| arange(0, 64), (64, MAX, 1)),
        ("arange from 8", |_, _| arange(8, 40), (32, 8, 1)),
        (
            "plus a multiple of 16",
            |n, _| arange(0, 64) + n,
            (64, 16, 1),
        ),
        ("plus anything", |_, x| arange(0, 64) + x, (64, 1, 1)),
        ("times 4", |_, _| arange(0, 64) * 4, (1, 4, 1)),
        (
            "times a multiple of 16",
            |n, _| (arange(0, 64) + 1) * n,
            (1, 16, 1),
        ),
        ("a splat", |n, _| broadcast_to(n, [32]), (1, 16, 32)),
        (
            "below a multiple of 16",
            |n, _| compare(arange(0, 64), CmpPred::Lt, n),
            (1, 1, 16),
        ),
        (
            "below anything",
            |_, x| compare(arange(0, 64), CmpPred::Lt, x),
            (1, 1, 1),
        ),
        (
            "above: a < b as b > a",
            |n, _| compare(n, CmpPred::Gt, arange(0, 64)),
            (1, 1, 16),
        ),
        (
            "not equal",
            |n, _| compare(arange(0, 64), CmpPred::Ne, n),
            (1, 1, 1),
        ),
        (
            "widened from 8",
            |_, _| cast(arange(8, 40), DType::I64),
            (8, 8, 1),
        ),
    ];
    for (what, build, want) in cases {
        let t = Tracer::begin("rule").unwrap();
        let n = scalar_param("n", DType::I32, 0, &spec);
        let x = scalar_param("x", DType::I32, 1, &spec);
        let v = build(n, x);
        let out = ptr_param("out", v.ty().dtype().unwrap());
        store(out + arange(0, v.ty().shape[0] as i64), v, NoArg);
        let f = t.finish().unwrap();
        let info = &axis_info(&f)[&stored_value(&f)];
        let got = (info.contiguity[0], info.divisibility[0], info.constancy[0]);
        assert_eq!(got, want, "{what}: {info:?}");
    }
}

/// Loops nested deep: the analysis of carried values stays linear past the first levels
/// (each round of a loop analyzes the loops inside it again; six rounds at each of twelve
/// levels would be 6^12 passes). Two levels keep a carried tile's divisibility; deeper
/// ones take carried values as unknown.
#[test]
fn axis_info_of_deeply_nested_loops_finishes() {
    use tritium_dsl::ir::axis_info;
    fn nest(depth: usize, x: Tile) -> Tile {
        match depth {
            0 => x + 16,
            d => flow::for_range(0, 2, 1, x, |_, x| nest(d - 1, x)),
        }
    }
    for (depth, want) in [(2, 16), (12, 1)] {
        let t = Tracer::begin("deep").unwrap();
        let out = ptr_param("out", DType::I32);
        let x = nest(depth, arange(0, 16) * 16);
        store(out + arange(0, 16), x, NoArg);
        let f = t.finish().unwrap();
        let info = &axis_info(&f)[&stored_value(&f)];
        assert_eq!(info.divisibility[0], want, "depth {depth}: {info:?}");
    }
}

/// The `likely` hint (no promise, the value a bool tile's lanes usually all have): text
/// round trip, and the verifier's refusals of a non-bool tile and of a value not 0 or 1.
#[test]
fn likely_hints_take_a_bool_tile_and_zero_or_one() {
    let text = |ty: &str, values: &str| {
        format!(
            "kernel @k(x %0: ptr<f32>) {{\n  %1 = arange {{start = 0, end = 4}} : tile<4xi32> loc(\"k.rs\":1:1)\n  %2 = const {{value = 2}} : i32 loc(\"k.rs\":2:1)\n  %3 = splat %2 : tile<4xi32> loc(\"k.rs\":2:1)\n  %4 = cmp %1, %3 {{pred = lt}} : tile<4xbool> loc(\"k.rs\":3:1)\n  %5 = hint %{} {{kind = likely, values = {values}}} : {ty} loc(\"k.rs\":4:1)\n}}\n",
            if ty.contains("bool") { 4 } else { 1 },
        )
    };
    let good = text("tile<4xbool>", "1");
    let f = parse_function(&good).unwrap();
    verify(&f).unwrap();
    assert_eq!(print_function(&f), good);
    for (ty, values, want) in [
        ("tile<4xi32>", "1", "likely needs a bool tile"),
        ("tile<4xbool>", "2", "one value, 0 or 1"),
        ("tile<4xbool>", "0x1", "one value, 0 or 1"),
    ] {
        let f = parse_function(&text(ty, values)).unwrap();
        let e = verify(&f).unwrap_err().to_string();
        assert!(
            e.contains(want) && e.contains("k.rs:4:1"),
            "{ty} {values}: {e}"
        );
    }
}
