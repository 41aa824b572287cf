//! The IR's text form (pinned and round-tripped) and verifier errors.

use tritium_dsl::ir::{parse_function, print_function, verify, CmpPred, Function};
use tritium_dsl::trace::lang::*;
use tritium_dsl::trace::{flow, ptr_param, scalar_param, Specialization, Tracer};
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
    let (_, acc) = flow::if_else(
        compare(n, CmpPred::Gt, 2),
        acc,
        |a| ((), a * 2.0),
        |a| ((), a),
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
