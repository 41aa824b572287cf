//! Custom ops: the seed's `test_custom` through every mode, two outs, rank-dependent
//! symbols, the IR text, and every error the issue lists (message asserted).
//! Ops are registered in `tritium-kernels` (another crate: no manual set-up needed).

use crate::common::all_devices;
use half::f16;
use ndarray::{Array1, Array2};
use rstest::rstest;
use tritium::dsl::custom::{CustomArgs, CustomImpl};
use tritium::dsl::ir::{parse_function, print_function, Bitcode};
use tritium::dsl::trace::Specialization;
use tritium::prelude::*;
use tritium_kernels::custom_add::{
    custom_add, custom_add_blocked, custom_add_reversed, custom_divmod, custom_scale, AddOp,
};
use tritium_kernels::custom_overrides::{custom_cumsum, custom_widen_mul};

fn check_add<T>(l: usize, op: AddOp, make: impl Fn(usize) -> T)
where
    T: tritium::dsl::trace::Element + num_like::Num,
{
    let a: Array1<T> = (0..l).map(&make).collect();
    let b: Array1<T> = (0..l).map(|i| make(i * 7 % 13)).collect();
    let want: Array1<T> = a.iter().zip(&b).map(|(x, y)| x.add(*y)).collect();
    for device in all_devices() {
        let mut out = Array1::<T>::from_elem(l, make(0));
        custom_add::launch(&device, [1], &mut out, &a, &b, l, op).unwrap();
        assert_eq!(out, want, "{device:?} {op} L={l}");
    }
}

/// The operations the test needs on each dtype.
mod num_like {
    pub trait Num: Copy + PartialEq + std::fmt::Debug {
        fn add(self, o: Self) -> Self;
    }
    impl Num for i32 {
        fn add(self, o: Self) -> Self {
            self.wrapping_add(o)
        }
    }
    impl Num for f32 {
        fn add(self, o: Self) -> Self {
            self + o
        }
    }
    impl Num for half::f16 {
        fn add(self, o: Self) -> Self {
            half::f16::from_f32(self.to_f32() + o.to_f32())
        }
    }
}

#[rstest]
fn test_custom_i32(
    #[values(32, 1000, 1024)] l: usize,
    #[values(AddOp::Simd, AddOp::Simt, AddOp::MixSimt, AddOp::MixSimd)] op: AddOp,
) {
    check_add(l, op, |i| i as i32 - 300);
}

#[rstest]
fn test_custom_f32(
    #[values(32, 1000, 1024)] l: usize,
    #[values(AddOp::Simd, AddOp::Simt, AddOp::MixSimt, AddOp::MixSimd)] op: AddOp,
) {
    check_add(l, op, |i| i as f32 * 0.25 - 3.0);
}

#[rstest]
fn test_custom_f16(
    #[values(32, 1000, 1024)] l: usize,
    #[values(AddOp::Simd, AddOp::Simt, AddOp::MixSimt, AddOp::MixSimd)] op: AddOp,
) {
    check_add(l, op, |i| f16::from_f32((i % 64) as f32 * 0.125));
}

/// A cooperative Simd op (`custom_op.h`'s thread helpers): on CUDA every thread of the
/// CTA calls it and phase 2 reads what other threads wrote in phase 1, so a missing
/// barrier or a call by one thread shows; on the CPU it is one call doing everything.
/// Lengths below, at and above the CTA's size, with 1, 2 and 4 warps on the emulator.
#[rstest]
fn cooperative_simd(#[values(1, 100, 128, 1000)] l: usize, #[values(1, 2, 4)] num_warps: u32) {
    fn check<T>(l: usize, num_warps: u32, make: impl Fn(usize) -> T, add: impl Fn(T, T) -> T)
    where
        T: tritium::dsl::trace::Element + PartialEq + std::fmt::Debug,
    {
        let a: Array1<T> = (0..l).map(&make).collect();
        let b: Array1<T> = (0..l).map(|i| make(i * 7 % 13)).collect();
        let want: Array1<T> = (0..l).map(|i| add(a[l - 1 - i], b[l - 1 - i])).collect();
        let opts = tritium::LaunchOptions {
            num_warps,
            ..Default::default()
        };
        for device in all_devices() {
            let mut out = Array1::<T>::from_elem(l, make(0));
            custom_add_reversed::launch_with(&device, [1], &opts, &mut out, &a, &b, l).unwrap();
            assert_eq!(out, want, "{device:?} L={l} num_warps={num_warps}");
        }
    }
    check(l, num_warps, |i| i as i32 * 3 - 500, i32::wrapping_add);
    check(l, num_warps, |i| i as f32 * 0.5 - 7.0, |x, y| x + y);
}

#[rstest]
fn two_outs(#[values(false, true)] simd: bool) {
    let l = 64;
    let a: Array1<i32> = (0..l as i32).map(|i| i * 37 - 1000).collect();
    let b: Array1<i32> = (0..l as i32).map(|i| i % 7 - 3).collect();
    // add.cpp defines x / 0 = 0 and x % 0 = 0.
    let q_want: Array1<i32> = a
        .iter()
        .zip(&b)
        .map(|(x, y)| if *y == 0 { 0 } else { x / y })
        .collect();
    let r_want: Array1<i32> = a
        .iter()
        .zip(&b)
        .map(|(x, y)| if *y == 0 { 0 } else { x % y })
        .collect();
    for device in all_devices() {
        let (mut q, mut r) = (Array1::<i32>::zeros(l), Array1::<i32>::zeros(l));
        custom_divmod::launch(&device, [1], &mut q, &mut r, &a, &b, l, simd).unwrap();
        assert_eq!((&q, &r), (&q_want, &r_want), "{device:?} simd={simd}");
    }
}

/// An extra temp buffer (`CustomImpl::extra_buffer`): the C++ accumulates in f64 in it
/// and writes NaN if it is shorter than the tile.
#[rstest]
fn extra_temp_buffer(#[values(1, 100, 1024)] l: usize) {
    let x: Array1<f32> = (0..l).map(|i| (i % 17) as f32 * 0.37 - 2.0).collect();
    let mut running = 0f64;
    let want: Array1<f32> = x
        .iter()
        .map(|v| {
            running += *v as f64;
            running as f32
        })
        .collect();
    for device in all_devices() {
        let mut out = Array1::<f32>::zeros(l);
        custom_cumsum::launch(&device, [1], &mut out, &x, l).unwrap();
        assert_eq!(out, want, "{device:?} L={l}");
    }
    let f = custom_cumsum::trace(&Specialization::default(), l).unwrap();
    assert!(
        print_function(&f).contains(&format!("extra = [{l}xf64]")),
        "{}",
        print_function(&f)
    );
}

/// Per-argument dtype overrides (`CustomImpl::arg_dtype`): i8 inputs reach the C++ as
/// `int32_t`, so `-128 * -128` is 16384 rather than an i8 wrap.
#[test]
fn argument_dtype_overrides_widen_inputs() {
    let l = 256;
    let a: Array1<i8> = (0..l).map(|i| (i as i32 - 128) as i8).collect();
    let b: Array1<i8> = (0..l).map(|i| (127 - i as i32 * 3 % 256) as i8).collect();
    let want: Array1<i32> = a
        .iter()
        .zip(&b)
        .map(|(x, y)| *x as i32 * *y as i32)
        .collect();
    assert!(want
        .iter()
        .any(|p| *p > i8::MAX as i32 || *p < i8::MIN as i32));
    for device in all_devices() {
        let mut out = Array1::<i32>::zeros(l);
        custom_widen_mul::launch(&device, [1], &mut out, &a, &b, l).unwrap();
        assert_eq!(out, want, "{device:?}");
    }
}

#[rstest]
#[case::rank1(false)]
#[case::rank2(true)]
fn symbol_depends_on_dtype_and_rank(#[case] rank2: bool) {
    let x = Array2::from_shape_fn((8, 16), |(i, j)| (i * 16 + j) as f32 - 50.0);
    let xi = x.mapv(|v| v as i32);
    for device in all_devices() {
        let mut out = Array2::<f32>::zeros((8, 16));
        custom_scale::launch(&device, [1], &mut out, &x, 8, 16, rank2).unwrap();
        assert_eq!(out, &x * 2.0);
        let mut outi = Array2::<i32>::zeros((8, 16));
        custom_scale::launch(&device, [1], &mut outi, &xi, 8, 16, rank2).unwrap();
        assert_eq!(outi, &xi * 2);
    }
    let f = custom_scale::trace::<f32>(&Specialization::default(), 8, 16, rank2).unwrap();
    let want = if rank2 {
        "custom_scale_float32_2d"
    } else {
        "custom_scale_float32_1d"
    };
    assert!(print_function(&f).contains(&format!("symbol = \"{want}\"")));
}

#[test]
fn ir_text_prints_like_hivm_custom_and_round_trips() {
    let f = custom_add::trace::<i32>(&Specialization::default(), 32, AddOp::Simd).unwrap();
    let text = print_function(&f);
    let line = text.lines().find(|l| l.contains("custom ")).unwrap();
    let expected = "custom \"add\" {core = vector, pipe = pipe_v, mode = simd, symbol = \"custom_add_int32\", bitcode = \"add.bc\"} ins(";
    assert!(line.contains(expected), "{line}");
    assert!(
        line.contains(": tile<32xi32>, tile<32xi32>) outs("),
        "{line}"
    );
    assert!(line.contains("-> tile<32xi32> loc("), "{line}");
    let back = parse_function(&text).unwrap();
    assert_eq!(print_function(&back), text);
    tritium::dsl::ir::verify(&back).unwrap();
}

// ---- errors: each one is a `Result` naming the op, the call site and what was expected ----

fn add_bc() -> Bitcode {
    Bitcode::from_bytes("add.bc", tritium_kernels::custom_bitcode::ADD_BC)
}

#[register_custom_op(core = Vector, pipe = PipeM, mode = Simd)]
struct BadPipe;
impl BadPipe {
    fn init(_: &CustomArgs) -> Result<CustomImpl, String> {
        Ok(CustomImpl::new("custom_add_int32").bitcode(add_bc()))
    }
}

#[register_custom_op(core = Vector, pipe = PipeV, mode = Simd)]
struct NoBitcode;
impl NoBitcode {
    fn init(_: &CustomArgs) -> Result<CustomImpl, String> {
        Ok(CustomImpl::new("custom_add_int32"))
    }
}

#[register_custom_op(core = Vector, pipe = PipeV, mode = Simd)]
struct MissingFile;
impl MissingFile {
    fn init(_: &CustomArgs) -> Result<CustomImpl, String> {
        Ok(CustomImpl::new("custom_add_int32").bitcode(Bitcode::from_file("no/such/dir/add.bc")?))
    }
}

#[register_custom_op(core = Vector, pipe = PipeV, mode = Simd)]
struct JunkBitcode;
impl JunkBitcode {
    fn init(_: &CustomArgs) -> Result<CustomImpl, String> {
        Ok(
            CustomImpl::new("custom_add_int32").bitcode(Bitcode::from_bytes(
                "junk.bc",
                &b"definitely not bitcode"[..],
            )),
        )
    }
}

#[register_custom_op(core = Vector, pipe = PipeV, mode = Simd)]
struct AbsentSymbol;
impl AbsentSymbol {
    fn init(_: &CustomArgs) -> Result<CustomImpl, String> {
        Ok(CustomImpl::new("custom_nope").bitcode(add_bc()))
    }
}

/// The float32 Simt entry, called with i32 tiles: the signature does not match.
#[register_custom_op(core = Vector, pipe = PipeV, mode = Simt)]
struct WrongSignature;
impl WrongSignature {
    fn init(_: &CustomArgs) -> Result<CustomImpl, String> {
        Ok(CustomImpl::new("custom_add_simt_float32").bitcode(add_bc()))
    }
}

/// The float32 Simd entry, called with i32 tiles: the memrefs' element type differs.
#[register_custom_op(core = Vector, pipe = PipeV, mode = Simd)]
struct FloatSimd;
impl FloatSimd {
    fn init(_: &CustomArgs) -> Result<CustomImpl, String> {
        Ok(CustomImpl::new("custom_add_float32").bitcode(add_bc()))
    }
}

/// The rank-2 Simd `scale`, called with rank-1 tiles.
#[register_custom_op(core = Vector, pipe = PipeV, mode = Simd)]
struct ScaleTwoD;
impl ScaleTwoD {
    fn init(_: &CustomArgs) -> Result<CustomImpl, String> {
        Ok(CustomImpl::new("custom_scale_int32_2d").bitcode(add_bc()))
    }
}

/// The int32 Simt add, called with i64 tiles.
#[register_custom_op(core = Vector, pipe = PipeV, mode = Simt)]
struct IntSimtOnI64;
impl IntSimtOnI64 {
    fn init(_: &CustomArgs) -> Result<CustomImpl, String> {
        Ok(CustomImpl::new("custom_add_simt_int32").bitcode(add_bc()))
    }
}

#[kernel]
fn scale_rank1(out: Ptr<i32>, a: Ptr<i32>) {
    let idx = arange(0, 16);
    let r = custom("scale_two_d", load(a + idx), out = zeros([16], DType::I32));
    store(out + idx, r);
}

#[kernel]
fn add_i64(out: Ptr<i64>, a: Ptr<i64>) {
    let idx = arange(0, 16);
    let x = load(a + idx);
    let r = custom("int_simt_on_i64", x, x, out = zeros([16], DType::I64));
    store(out + idx, r);
}

/// The C++ signature record (`tritium-build` reads it from clang's debug info) catches a
/// rank-2 memref given rank-1 tiles and an int32 scalar entry given i64 lanes, on the
/// CPU and the emulator: both used to compute garbage.
#[test]
fn calls_are_checked_against_the_cpp_signature() {
    for device in [Device::cpu(), Device::cuda_emulator()] {
        let a = Array1::from_iter(0..16);
        let mut out = Array1::zeros(16);
        let e = scale_rank1::launch(&device, 1, &mut out, &a)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("parameter 0 of `_mlir_ciface_custom_scale_int32_2d` is `memref_t<int32_t, 2>*` in C++, the call passes input 0 (tile<16xi32>), which needs `memref_t<int32_t, 1>*`"),
            "{device:?}: {e}"
        );
        let a = Array1::from_iter(0..16i64);
        let mut out = Array1::<i64>::zeros(16);
        let e = add_i64::launch(&device, 1, &mut out, &a)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("parameter 0 of `custom_add_simt_int32` is `int32_t` in C++, the call passes input 0 (tile<16xi64>), which needs `int64_t`"),
            "{device:?}: {e}"
        );
    }
}

#[register_custom_op(core = Vector, pipe = PipeV, mode = Simd)]
struct RejectsF64;
impl RejectsF64 {
    fn init(a: &CustomArgs) -> Result<CustomImpl, String> {
        a.expect_all_dtype(DType::F64)?;
        Ok(CustomImpl::new("x").bitcode(add_bc()))
    }
}

#[register_custom_op(core = Vector, pipe = PipeV, mode = Simd, name = "twice")]
struct Twice1;
impl Twice1 {
    fn init(_: &CustomArgs) -> Result<CustomImpl, String> {
        Ok(CustomImpl::new("custom_add_int32").bitcode(add_bc()))
    }
}
#[register_custom_op(core = Vector, pipe = PipeV, mode = Simd, name = "twice")]
struct Twice2;
impl Twice2 {
    fn init(_: &CustomArgs) -> Result<CustomImpl, String> {
        Ok(CustomImpl::new("custom_add_int32").bitcode(add_bc()))
    }
}

/// A cube op: its mode is canonicalized away and it runs with the Simd convention.
#[register_custom_op(core = Cube, pipe = PipeM, mode = Simt)]
struct CubeAdd;
impl CubeAdd {
    fn init(_: &CustomArgs) -> Result<CustomImpl, String> {
        Ok(CustomImpl::new("custom_add_int32").bitcode(add_bc()))
    }
}

#[kernel]
fn call_by_name(out: Ptr<i32>, a: Ptr<i32>, #[constexpr] name: &'static str) {
    let idx = arange(0, 16);
    let x = load(a + idx);
    let r = custom(name, x, x, out = zeros([16], DType::I32));
    store(out + idx, r);
}

#[kernel]
fn builtin_attrs_on_registered_op(out: Ptr<i32>, a: Ptr<i32>) {
    let idx = arange(0, 16);
    let x = load(a + idx);
    let r = custom("add", x, x, out = zeros([16], DType::I32), mode = Simt);
    store(out + idx, r);
}

fn launch_by_name(name: &'static str) -> tritium::Result<Array1<i32>> {
    let a = Array1::from_iter(0..16);
    let mut out = Array1::zeros(16);
    call_by_name::launch(&Device::cpu(), [1], &mut out, &a, name)?;
    Ok(out)
}

#[rstest]
#[case::unknown_name("nope", &["unknown custom op `nope`", "registered: ", "add"])]
#[case::invalid_combination("bad_pipe", &["custom op `bad_pipe`", "pipe `pipe_m` is not available on core `vector`", "expected one of pipe_v"])]
#[case::no_bitcode("no_bitcode", &["custom op `no_bitcode`", "needs bitcode", "NoBitcode"])]
#[case::unreadable_bitcode("missing_file", &["custom op `missing_file`", "cannot read bitcode file `no/such/dir/add.bc`"])]
#[case::invalid_bitcode("junk_bitcode", &["custom op `junk_bitcode`", "invalid bitcode `junk.bc`"])]
#[case::absent_symbol("absent_symbol", &["custom op `absent_symbol`", "symbol `_mlir_ciface_custom_nope` is not defined in bitcode `add.bc`", "_mlir_ciface_custom_add_int32"])]
#[case::signature_mismatch("wrong_signature", &["custom op `wrong_signature`", "parameter 0 of `custom_add_simt_float32` is `float` in C++, the call passes input 0 (tile<16xi32>), which needs `int32_t`"])]
#[case::simd_element_type("float_simd", &["custom op `float_simd`", "parameter 0 of `_mlir_ciface_custom_add_float32` is `memref_t<float, 1>*` in C++, the call passes input 0 (tile<16xi32>), which needs `memref_t<int32_t, 1>*`"])]
#[case::rejected_by_init("rejects_f64", &["custom op `rejects_f64`", "rejected the call", "every input must be f64, got tile<16xi32>"])]
#[case::registered_twice("twice", &["custom op `twice` is registered 2 times", "Twice1", "Twice2"])]
fn errors_name_the_op_and_call_site(#[case] name: &'static str, #[case] expected: &[&str]) {
    let err = launch_by_name(name).unwrap_err().to_string();
    for e in expected {
        assert!(err.contains(e), "error for `{name}` lacks {e:?}: {err}");
    }
    // The call site: this file's kernel.
    assert!(
        err.contains("tests/custom_ops.rs:"),
        "no call site in: {err}"
    );
}

#[test]
fn registered_ops_keep_their_attributes() {
    let a = Array1::from_iter(0..16);
    let mut out = Array1::zeros(16);
    let err = builtin_attrs_on_registered_op::launch(&Device::cpu(), [1], &mut out, &a)
        .unwrap_err()
        .to_string();
    assert!(err.contains("fixed by its registration"), "{err}");
}

#[test]
fn cube_core_drops_the_mode_and_runs_simd() {
    assert_eq!(
        launch_by_name("cube_add").unwrap(),
        Array1::from_iter((0..16).map(|i| 2 * i))
    );
    let f = call_by_name::trace(&Specialization::default(), "cube_add").unwrap();
    let text = print_function(&f);
    assert!(
        text.contains("{core = cube, pipe = pipe_m, symbol = \"custom_add_int32\""),
        "{text}"
    );
}

#[test]
fn ir_without_bitcode_contents_is_a_compile_error() {
    let f = custom_add::trace::<i32>(&Specialization::default(), 32, AddOp::Simd).unwrap();
    let back = parse_function(&print_function(&f)).unwrap();
    let err = tritium::backend::cpu::compile(back, &LaunchOptions::default().compile_options())
        .err()
        .expect("must fail")
        .to_string();
    assert!(err.contains("bitcode `add.bc` has no contents"), "{err}");
}

/// The interpreter runs a user op through the host compiler its caller passes in; without
/// one the op is an error naming it, not a panic.
#[rstest]
#[case::without_a_host_compiler(false)]
#[case::with_the_cpu(true)]
fn interpreter_runs_user_ops_with_the_host_compiler_it_is_given(#[case] with_cpu: bool) {
    use tritium::backend::interp::{interpret_with, InterpretOptions};
    use tritium::backend::KernelArgs;
    let f = custom_add::trace::<i32>(&Specialization::default(), 32, AddOp::Simd).unwrap();
    let (a, b): (Array1<i32>, Array1<i32>) = ((0..32).collect(), (100..132).collect());
    let mut out = Array1::<i32>::zeros(32);
    let mut args = KernelArgs::new();
    args.ptr("output", &mut out);
    args.ptr("a", &a);
    args.ptr("b", &b);
    let options = InterpretOptions {
        user_ops: with_cpu.then_some(&tritium::backend::dispatch::CPU_USER_OPS as _),
        ..Default::default()
    };
    let run = interpret_with(&f, Grid([1, 1, 1]), &args.args, &options);
    drop(args);
    match with_cpu {
        true => {
            run.unwrap();
            assert_eq!(out, &a + &b);
        }
        false => {
            let err = run.expect_err("no host compiler").to_string();
            assert!(
                err.contains("custom op `add`") && err.contains("host compiler"),
                "{err}"
            );
        }
    }
}

// ---- builtins: compiled (embedded C++ library) vs interpreter (reference) vs ndarray ----

#[kernel]
fn gather_2d(
    out: Ptr<f32>,
    src: Ptr<f32>,
    idx: Ptr<i64>,
    bound: i32,
    #[constexpr] M: usize,
    #[constexpr] N: usize,
) {
    let offs = arange(0, M)[(.., None)] * N as i32 + arange(0, N)[(None, ..)];
    let i = load(idx + offs);
    let r = custom(
        "__builtin_gather_load",
        src,
        i,
        bound,
        out = full([M, N], -1.0, DType::F32),
    );
    store(out + offs, r);
}

#[kernel]
fn index_select_rows(
    out: Ptr<i32>,
    src: Ptr<i32>,
    idx: Ptr<i32>,
    row_stride: i32,
    num_rows: i32,
    #[constexpr] N: usize,
    #[constexpr] D: usize,
) {
    let i = load(idx + arange(0, N));
    let r = custom(
        "__builtin_index_select",
        src,
        i,
        row_stride,
        num_rows,
        out = full([N, D], 7, DType::I32),
        mode = Simd,
    );
    let offs = arange(0, N)[(.., None)] * D as i32 + arange(0, D)[(None, ..)];
    store(out + offs, r);
}

#[kernel]
fn scatter_add(
    old: Ptr<f32>,
    dst: Ptr<f32>,
    idx: Ptr<i32>,
    vals: Ptr<f32>,
    bound: i32,
    #[constexpr] N: usize,
) {
    let offs = program_id(0) * N as i32 + arange(0, N);
    let i = load(idx + offs);
    let v = load(vals + offs);
    let r = custom(
        "__builtin_indirect_atomic",
        dst,
        i,
        v,
        bound,
        0,
        out = full([N], -5.0, DType::F32),
    );
    store(old + offs, r);
}

#[kernel]
fn histogram_bins(out: Ptr<i32>, values: Ptr<i32>, #[constexpr] N: usize, #[constexpr] B: usize) {
    let v = load(values + arange(0, N));
    let h = custom("__builtin_histogram", v, out = zeros([B], DType::I32));
    store(out + arange(0, B), h);
}

#[test]
fn builtin_gather_load() {
    let src: Array1<f32> = (0..50).map(|i| i as f32 * 0.5).collect();
    let idx = Array2::from_shape_fn((4, 8), |(i, j)| (i as i64 * 13 + j as i64 * 7) % 60 - 5);
    let bound = 50;
    let want = idx.mapv(|i| {
        if (0..bound as i64).contains(&i) {
            src[i as usize]
        } else {
            -1.0
        }
    });
    for device in all_devices() {
        let mut out = Array2::<f32>::zeros((4, 8));
        gather_2d::launch(&device, [1], &mut out, &src, &idx, bound, 4, 8).unwrap();
        assert_eq!(out, want, "{device:?}");
    }
}

#[test]
fn builtin_index_select() {
    let (rows, stride, d) = (6usize, 5usize, 4usize);
    let src: Array1<i32> = (0..(rows * stride) as i32).collect();
    let idx = Array1::from(vec![2, 0, 9, 5, -1, 3, 3, 1]);
    let want = Array2::from_shape_fn((8, d), |(i, j)| {
        let k = idx[i];
        if (0..rows as i32).contains(&k) {
            src[k as usize * stride + j]
        } else {
            7
        }
    });
    for device in all_devices() {
        let mut out = Array2::<i32>::zeros((8, d));
        index_select_rows::launch(
            &device,
            [1],
            &mut out,
            &src,
            &idx,
            stride as i32,
            rows as i32,
            8,
            d,
        )
        .unwrap();
        assert_eq!(out, want, "{device:?}");
    }
}

#[test]
fn builtin_indirect_atomic_add() {
    let n = 64;
    let programs = 4;
    let idx: Array1<i32> = (0..n * programs).map(|i| (i * 7 % 19) as i32 - 1).collect();
    let vals: Array1<f32> = (0..n * programs).map(|i| (i % 5) as f32).collect();
    let bound = 16;
    let mut want = Array1::<f32>::zeros(16);
    for (i, v) in idx.iter().zip(&vals) {
        if (0..bound).contains(i) {
            want[*i as usize] += v;
        }
    }
    for device in all_devices() {
        let mut dst = Array1::<f32>::zeros(16);
        let mut old = Array1::<f32>::zeros(n * programs);
        scatter_add::launch(
            &device,
            [programs],
            &mut old,
            &mut dst,
            &idx,
            &vals,
            bound,
            n,
        )
        .unwrap();
        assert_eq!(dst, want, "{device:?}");
        for (o, i) in old.iter().zip(&idx) {
            if !(0..bound).contains(i) {
                assert_eq!(
                    *o, -5.0,
                    "{device:?}: out-of-range lanes keep their out value"
                );
            } else {
                assert!(
                    *o >= 0.0 && *o <= want[*i as usize],
                    "{device:?}: old value {o}"
                );
            }
        }
    }
}

#[test]
fn builtin_histogram() {
    let values: Array1<i32> = (0..256).map(|i| (i * 37 % 23) - 3).collect();
    let mut want = Array1::<i32>::zeros(16);
    for v in values.iter().filter(|v| (0..16).contains(*v)) {
        want[*v as usize] += 1;
    }
    for device in all_devices() {
        let mut out = Array1::<i32>::zeros(16);
        histogram_bins::launch(&device, [1], &mut out, &values, 256, 16).unwrap();
        assert_eq!(out, want, "{device:?}");
    }
}

#[test]
fn builtin_argument_errors_name_the_builtin() {
    #[kernel]
    fn bad_gather(out: Ptr<f32>, src: Ptr<f32>) {
        let i = arange(0, 8);
        let r = custom(
            "__builtin_gather_load",
            src,
            i,
            8,
            out = zeros([4], DType::F32),
        );
        store(out + arange(0, 4), r);
    }
    let src = Array1::<f32>::zeros(8);
    let mut out = Array1::<f32>::zeros(4);
    let err = bad_gather::launch(&Device::cpu(), [1], &mut out, &src)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("custom op `__builtin_gather_load`")
            && err.contains("out must be a f32 tile of the index's shape [8]"),
        "{err}"
    );
}

/// A Simt op ends up inlined and vectorized: the dumped assembly of a kernel that adds
/// through `add_simt` has packed f32 adds and no call to the scalar C++ function.
#[cfg(target_arch = "x86_64")]
#[test]
fn simt_call_is_inlined_and_vectorized_in_the_assembly() {
    let dir = std::env::temp_dir().join(format!("tritium-simt-asm-{}", std::process::id()));
    let opts = LaunchOptions {
        cache_dir: Some(dir.join("cache")),
        dump_dir: Some(dir.join("dump")),
        ..Default::default()
    };
    let n = 4096;
    let x = Array1::<f32>::ones(n);
    let mut out = Array1::<f32>::zeros(n);
    custom_add_blocked::launch_with(
        &Device::cpu(),
        [n / 1024],
        &opts,
        &mut out,
        &x,
        &x,
        n as i32,
        1024,
        AddOp::Simt,
    )
    .unwrap();
    assert!(out.iter().all(|v| *v == 2.0));
    let asm: String = std::fs::read_dir(dir.join("dump"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "s"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(!asm.is_empty(), "no assembly dumped");
    let packed_add = asm.lines().any(|l| {
        let l = l.trim();
        (l.starts_with("addps") || l.starts_with("vaddps")) && l.contains("mm")
    });
    assert!(packed_add, "no packed f32 add in:\n{asm}");
    assert!(
        !asm.lines()
            .any(|l| l.trim().starts_with("call") && l.contains("custom_add_simt")),
        "the scalar custom_add_simt_float32 is still called:\n{asm}"
    );
}
