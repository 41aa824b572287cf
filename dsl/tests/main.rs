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
    for f in [vadd(), loop_sum()] {
        let text = print_function(&f);
        let parsed = parse_function(&text).unwrap();
        assert_eq!(parsed, f);
        verify(&parsed).unwrap();
        assert_eq!(print_function(&parsed), text);
    }
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
