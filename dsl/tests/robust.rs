//! The parser and the verifier on hostile text: documented limits, constants that must fit
//! their dtype, escapes and floats that round trip. `tritium-fuzz` mutates kernels at random;
//! these are the cases it (or a new user) found, one row each.

use std::time::{Duration, Instant};
use tritium_dsl::ir::{
    parse_function, print_function, verify, Block, Const, Function, Inst, Loc, Op, Type,
    MAX_NESTING, MAX_RANK, MAX_TILE_ELEMS, MAX_VALUES,
};
use tritium_dsl::trace::lang::*;
use tritium_dsl::trace::{ptr_param, Operand, Tracer};
use tritium_dsl::{DType, Error};

const L: &str = "loc(\"k.rs\":1:1)";

/// A kernel `@k(x %0: ptr<i32>, c %1: bool)` with these lines as its body.
fn kernel(body: &[&str]) -> String {
    let mut t = String::from("kernel @k(x %0: ptr<i32>, c %1: bool) {\n");
    for line in body {
        t += &format!("  {line} {L}\n");
    }
    t + "}\n"
}

/// Parses and verifies: the error, which must come quickly.
fn error_of(text: &str) -> Error {
    let start = Instant::now();
    let r = parse_function(text).and_then(|f| verify(&f));
    assert!(start.elapsed() < Duration::from_secs(1), "slow on {text}");
    r.expect_err(text)
}

#[test]
fn hostile_texts_get_errors_that_name_what_is_wrong() {
    let huge_tile = "%2 = const {value = 1} : tile<4294967296x4294967296xi32>";
    let rank9 = format!(
        "%2 = const {{value = 1}} : tile<{}i32>",
        "1x".repeat(MAX_RANK + 1)
    );
    #[rustfmt::skip]
    let cases: &[(&str, String, &[&str])] = &[
        // The parser sized its value table by the largest value number.
        ("huge value number", kernel(&["%4000000000 = const {value = 1} : i32"]), &["%4000000000", "MAX_VALUES"]),
        ("value number at the limit", kernel(&[&format!("%{MAX_VALUES} = const {{value = 1}} : i32")]), &["MAX_VALUES"]),
        ("value number past u64", kernel(&["%99999999999999999999999 = const {value = 1} : i32"]), &["MAX_VALUES"]),
        ("a value used but never defined", kernel(&["store %0, %9"]), &["%9 is never defined"]),
        ("a gap in the value numbers", kernel(&["%5 = const {value = 1} : i32"]), &["%2 is never defined"]),
        // Constants must fit their dtype.
        ("i32 constant too large", kernel(&["%2 = const {value = 99999999999} : i32"]), &["99999999999", "does not fit i32"]),
        ("u8 constant 256", kernel(&["%2 = const {value = 256} : tile<4xu8>"]), &["256", "does not fit u8"]),
        ("i8 constant -129", kernel(&["%2 = const {value = -129} : i8"]), &["does not fit i8"]),
        ("u64 constant -1", kernel(&["%2 = const {value = -1} : u64"]), &["does not fit u64"]),
        ("u64 constant 2^64", kernel(&["%2 = const {value = 18446744073709551616} : u64"]), &["does not fit u64"]),
        ("bool constant 2", kernel(&["%2 = const {value = 2} : bool"]), &["does not fit bool"]),
        ("float constant for i32", kernel(&["%2 = const {value = 1.5} : i32"]), &["float constant", "i32"]),
        ("integer constant for f32", kernel(&["%2 = const {value = 1} : f32"]), &["integer constant", "f32"]),
        ("float literal beyond f64", kernel(&["%2 = const {value = 1e400} : f64"]), &["1e400", "out of range of f64"]),
        ("integer literal beyond i128", kernel(&["%2 = const {value = 999999999999999999999999999999999999999999} : i64"]), &["bad integer"]),
        // Tile sizes, ranks and dims.
        ("4294967296 x 4294967296 tile", kernel(&[huge_tile]), &["MAX_TILE_ELEMS"]),
        ("one element over the limit", kernel(&[&format!("%2 = const {{value = 1}} : tile<{}xi8>", MAX_TILE_ELEMS + 1)]), &["MAX_TILE_ELEMS"]),
        ("rank over the limit", kernel(&[&rank9]), &["rank 9", "MAX_RANK"]),
        ("zero-size dim", kernel(&["%2 = const {value = 1} : tile<4x0xi32>"]), &["dim of size 0"]),
        ("tile parameter", "kernel @k(x %0: tile<4xi32>) {\n}\n".into(), &["parameter `x`", "number or a pointer"]),
        ("arange beyond i32", kernel(&["%2 = arange {start = 0, end = 4294967296} : tile<4294967296xi32>"]), &["MAX_TILE_ELEMS"]),
        ("arange start beyond i32", kernel(&["%2 = arange {start = -2147483649, end = -2147483640} : tile<9xi32>"]), &["does not fit i32"]),
        ("arange with overflowing length", kernel(&["%2 = arange {start = -9223372036854775808, end = 9223372036854775807} : tile<4xi32>"]), &["does not fit i32"]),
        ("huge extra buffer", kernel(&["%2 = const {value = 0} : tile<4xi32>", "%3 = custom \"f\" {core = vector, pipe = pipe_v, mode = simd, symbol = \"f\", bitcode = \"f.bc\", extra = [99999999999xf32]} ins() outs(%2 : tile<4xi32>) -> tile<4xi32>"]), &["extra buffer", "MAX_TILE_ELEMS"]),
        // Attributes and operands are what the op takes.
        ("axis past u32", kernel(&["%2 = program_id {axis = 4294967296} : i32"]), &["axis 4294967296 is out of range"]),
        ("permute dims not numbers", kernel(&["%2 = const {value = 1} : tile<2x4xi32>", "%3 = permute %2 {dims = 1y0} : tile<4x2xi32>"]), &["`dims` must be dims joined by `x`", "1y0"]),
        ("permute dims not a permutation", kernel(&["%2 = const {value = 1} : tile<2x4xi32>", "%3 = permute %2 {dims = 0x0} : tile<2x2xi32>"]), &["not a permutation"]),
        ("permute result of the wrong shape", kernel(&["%2 = const {value = 1} : tile<2x4xi32>", "%3 = permute %2 {dims = 1x0} : tile<2x4xi32>"]), &["permute type"]),
        ("gather index of floats", kernel(&["%2 = const {value = 1} : tile<4xi32>", "%3 = const {value = 1.0} : tile<4xf32>", "%4 = gather %2, %3 {axis = 0} : tile<4xi32>"]), &["integer index"]),
        ("gather index of another shape", kernel(&["%2 = const {value = 1} : tile<4x2xi32>", "%3 = const {value = 1} : tile<4x3xi32>", "%4 = gather %2, %3 {axis = 0} : tile<4x3xi32>"]), &["must have the shape of"]),
        ("gather axis out of range", kernel(&["%2 = const {value = 1} : tile<4xi32>", "%3 = gather %2, %2 {axis = 1} : tile<4xi32>"]), &["gather axis 1 out of range"]),
        ("unknown attribute", kernel(&["%2 = program_id {axis = 0, value = 1} : i32"]), &["`program_id` has no attribute `value`"]),
        ("attribute twice", kernel(&["%2 = program_id {axis = 0, axis = 1} : i32"]), &["`axis` given twice"]),
        ("mask on add", kernel(&["%2 = const {value = 1} : i32", "%3 = add %2, %2, mask = %1 : i32"]), &["`add` takes no `mask`"]),
        ("mask twice", kernel(&["%2 = load %0, mask = %1, mask = %1 : i32"]), &["`mask` given twice"]),
        ("unknown custom attribute", kernel(&["%2 = custom \"f\" {core = vector, colour = red} ins() outs() ->"]), &["unknown attribute `colour`"]),
        // Strings.
        ("unknown escape", "kernel @k() {\n  yield loc(\"a\\qb\":1:1)\n}\n".into(), &["unknown escape `\\q`"]),
        ("surrogate escape", "kernel @k() {\n  yield loc(\"\\u{d800}\":1:1)\n}\n".into(), &["\\u{d800}", "not a Unicode scalar value"]),
        ("escape past Unicode", "kernel @k() {\n  yield loc(\"\\u{110000}\":1:1)\n}\n".into(), &["not a Unicode scalar value"]),
        ("empty \\u escape", "kernel @k() {\n  yield loc(\"\\u{}\":1:1)\n}\n".into(), &["not a Unicode scalar value"]),
        ("\\u escape of 7 digits", "kernel @k() {\n  yield loc(\"\\u{0000041}\":1:1)\n}\n".into(), &["at most 6 digits"]),
        ("unterminated \\u escape", "kernel @k() {\n  yield loc(\"\\u{41".into(), &["at most 6 digits"]),
        // Nesting.
        ("regions nested past the limit", nested(MAX_NESTING + 1), &["MAX_NESTING"]),
    ];
    for (what, text, want) in cases {
        let e = error_of(text).to_string();
        for w in *want {
            assert!(e.contains(w), "{what}: `{e}` does not name `{w}`");
        }
    }
}

#[test]
fn parse_errors_name_a_line_of_the_text() {
    for text in [
        "",
        "kernel",
        "kernel @k(",
        "\n\nkernel @k() {\n  %0 = const",
    ] {
        match parse_function(text) {
            Err(Error::Parse { line, .. }) => {
                assert!(
                    (1..=text.lines().count().max(1)).contains(&line),
                    "{text:?}: line {line}"
                )
            }
            other => panic!("{text:?}: {other:?}"),
        }
    }
}

/// `depth` nested `if`s on `%0: bool`.
fn nested(depth: usize) -> String {
    fn go(depth: usize, pad: &str, out: &mut String) {
        if depth == 0 {
            return;
        }
        *out += &format!("{pad}if %0 {L} {{\n{pad}^()\n");
        go(depth - 1, &format!("{pad}  "), out);
        *out += &format!("{pad}  yield {L}\n{pad}}} {{\n{pad}^()\n{pad}  yield {L}\n{pad}}}\n");
    }
    let mut out = String::from("kernel @k(c %0: bool) {\n");
    go(depth, "  ", &mut out);
    out + "}\n"
}

#[test]
fn texts_at_the_limits_are_accepted_and_round_trip() {
    let max_rank = format!(
        "%2 = const {{value = 1}} : tile<{}i32>",
        "1x".repeat(MAX_RANK)
    );
    let cases = [
        kernel(&[&format!(
            "%2 = const {{value = 1}} : tile<{MAX_TILE_ELEMS}xi8>"
        )]),
        kernel(&[&max_rank]),
        kernel(&[
            "%2 = arange {start = 2147483646, end = 2147483648} : tile<2xi32>",
            "%3 = arange {start = -2147483648, end = -2147483647} : tile<1xi32>",
        ]),
        kernel(&[
            "%2 = const {value = -128} : i8",
            "%3 = const {value = 18446744073709551615} : u64",
            "%4 = const {value = -9223372036854775808} : i64",
            "%5 = const {value = 1} : bool",
            "%6 = const {value = 0} : tile<2x2xu16>",
            "%7 = const {value = -0.0} : bf16",
        ]),
        nested(MAX_NESTING),
    ];
    for text in cases {
        let f = parse_function(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        verify(&f).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(print_function(&f), text);
    }
}

/// The verifier stops at the nesting limit too, for functions built in code.
#[test]
fn the_verifier_bounds_nesting_of_built_functions() {
    let loc = Loc::default();
    let yield_ = || Inst {
        results: vec![],
        op: Op::Yield(vec![]),
        loc: loc.clone(),
    };
    let mut region = Block {
        args: vec![],
        insts: vec![yield_()],
    };
    for _ in 0..MAX_NESTING + 10 {
        let inst = Inst {
            results: vec![],
            op: Op::If {
                cond: tritium_dsl::ir::Value(0),
                then_region: region,
                else_region: Block {
                    args: vec![],
                    insts: vec![yield_()],
                },
            },
            loc: loc.clone(),
        };
        region = Block {
            args: vec![],
            insts: vec![inst, yield_()],
        };
    }
    region.insts.pop();
    let f = Function {
        name: "k".into(),
        params: vec![tritium_dsl::ir::Param {
            name: "c".into(),
            value: tritium_dsl::ir::Value(0),
        }],
        body: region,
        types: vec![Type::scalar(DType::Bool)],
    };
    let e = verify(&f).unwrap_err().to_string();
    assert!(e.contains("MAX_NESTING"), "{e}");
}

/// Print and parse agree on one escape scheme for every char.
#[test]
fn every_char_in_a_string_round_trips() {
    let mut names: Vec<String> = (0u32..0x800)
        .chain([0x2028, 0x2029, 0xfeff, 0xfffd, 0x1f980, 0x10ffff])
        .filter_map(char::from_u32)
        .map(|c| format!("a{c}b"))
        .collect();
    names.extend(
        [
            "\\\"",
            "\\u{41}",
            "\u{f}\u{0}\u{7f}\u{85}",
            "e\u{301}",
            "\"\"",
            "\\",
        ]
        .map(String::from),
    );
    let base = parse_function(&kernel(&["%2 = const {value = 1} : i32"])).unwrap();
    for name in names {
        let mut f = base.clone();
        f.body.insts[0].loc.file = name.clone();
        let text = print_function(&f);
        assert_eq!(
            text.lines().count(),
            3,
            "{name:?} printed on one line: {text}"
        );
        let back = parse_function(&text).unwrap_or_else(|e| panic!("{name:?}: {e}\n{text}"));
        assert_eq!(back.body.insts[0].loc.file, name, "{text}");
        assert_eq!(print_function(&back), text);
    }
    // Control chars are written `\u{hex}`, as the parser reads them.
    let mut f = base.clone();
    f.body.insts[0].loc.file = "x\u{f}\u{0}".into();
    assert!(print_function(&f).contains("loc(\"x\\u{f}\\u{0}\":1:1)"));
}

/// Float constants print and parse back to the same bits (any NaN to a NaN).
#[test]
fn float_constants_round_trip_exactly() {
    let specials = [
        0.0,
        -0.0,
        0.1,
        -1.5,
        1e300,
        f64::MAX,
        f64::MIN,
        f64::MIN_POSITIVE,
        5e-324,
        1e-310,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        f32::MAX as f64,
        f32::MIN_POSITIVE as f64,
        1e-45f32 as f64,
        65504.0,
        6e-8,
        half::f16::MIN_POSITIVE_SUBNORMAL.to_f64(),
        half::bf16::MAX.to_f64(),
        1.0 / 3.0,
    ];
    for d in [DType::F16, DType::BF16, DType::F32, DType::F64] {
        for x in specials {
            let text = kernel(&[&format!("%2 = const {{value = 0.0}} : tile<2x{d}>")]);
            let mut f = parse_function(&text).unwrap();
            f.body.insts[0].op = Op::Const(Const::Float(x));
            verify(&f).unwrap();
            let printed = print_function(&f);
            let back = parse_function(&printed).unwrap();
            match back.body.insts[0].op {
                Op::Const(Const::Float(y)) if x.is_nan() => assert!(y.is_nan(), "{printed}"),
                Op::Const(Const::Float(y)) => assert_eq!(y.to_bits(), x.to_bits(), "{printed}"),
                ref op => panic!("{op:?}"),
            }
            assert_eq!(print_function(&back), printed);
        }
    }
}

/// The tracer stores integer constants wrapped into their dtype, as every backend reads
/// them, so that its output passes the verifier's range check.
#[test]
fn traced_constants_fit_their_dtype() {
    let t = Tracer::begin("wrap").unwrap();
    let out = ptr_param("out", DType::F32);
    let cases = [
        (Operand::Int(-1), DType::U32, Const::Int(4294967295)),
        (Operand::Int(300), DType::I8, Const::Int(44)),
        (Operand::Int(0xFFFF_FFFF), DType::I32, Const::Int(-1)),
        (Operand::Int(1 << 64), DType::U64, Const::Int(0)),
        (Operand::Int(2), DType::Bool, Const::Int(1)),
        (Operand::Int(7), DType::F16, Const::Float(7.0)),
    ];
    let mut acc = scalar(0.0, DType::F32);
    for (v, d, _) in cases {
        acc += cast(scalar(v, d), DType::F32);
    }
    acc += cast(full([4], 2.0, DType::Bool), DType::F32).sum(0);
    store(out, acc, NoArg);
    let f = t.finish().expect("the tracer's constants verify");
    let consts: Vec<Const> = f
        .body
        .insts
        .iter()
        .filter_map(|i| match i.op {
            Op::Const(c) => Some(c),
            _ => None,
        })
        .collect();
    for (_, _, want) in cases {
        assert!(consts.contains(&want), "{want:?} not in {consts:?}");
    }
    assert!(print_function(&f).contains("const {value = 1} : tile<4xbool>"));
}

#[test]
fn dtype_ranges_and_wrapping() {
    assert_eq!(DType::Bool.int_range(), Some((0, 1)));
    assert_eq!(DType::I8.int_range(), Some((-128, 127)));
    assert_eq!(DType::U64.int_range(), Some((0, u64::MAX as i128)));
    assert_eq!(DType::F32.int_range(), None);
    assert_eq!(DType::I8.wrap_int(128), -128);
    assert_eq!(DType::U16.wrap_int(-1), 65535);
    assert_eq!(DType::I64.wrap_int(1 << 63), i64::MIN as i128);
    assert_eq!(DType::Bool.wrap_int(-5), 1);
}
