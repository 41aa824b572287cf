//! `inline_asm_elementwise` (Triton's inline PTX, issue 46 item 8): CUDA hardware runs the
//! asm, `pack` elements per call; the CPU, the interpreter and the emulator run the
//! required Simt `fallback` op. Checked on every device against plain Rust, and in the PTX
//! (no GPU needed).

use crate::common::all_devices;
use half::f16;
use ndarray::Array1;
use tritium::backend::cuda::{compile_ptx, CudaCompileOptions};
use tritium::dsl::custom::{CustomArgs, CustomImpl};
use tritium::dsl::ir::{parse_function, print_function, verify, Bitcode, Function, Op};
use tritium::dsl::trace::Specialization;
use tritium::prelude::*;
use tritium_kernels::custom_add::add_bitcode;
use tritium_kernels::custom_bitcode::ADD_BC;

/// `shf.l.wrap.b32`'s host fallback: `custom_funnel_shift_uint32` in `kernels/csrc/add.cpp`,
/// host bitcode only (CUDA hardware runs the asm, so it needs no NVPTX variant).
#[register_custom_op(core = Vector, pipe = PipeV, mode = Simt)]
struct FunnelShift;
impl FunnelShift {
    fn init(args: &CustomArgs) -> Result<CustomImpl, String> {
        args.expect_arity(3, 1)?;
        args.expect_all_dtype(DType::U32)?;
        Ok(CustomImpl::new("custom_funnel_shift_uint32")
            .bitcode(Bitcode::from_bytes("add.bc", ADD_BC)))
    }
}

/// The same op registered as Simd: not a valid fallback.
#[register_custom_op(core = Vector, pipe = PipeV, mode = Simd, name = "funnel_shift_simd")]
struct FunnelShiftSimd;
impl FunnelShiftSimd {
    fn init(_: &CustomArgs) -> Result<CustomImpl, String> {
        Ok(CustomImpl::new("custom_funnel_shift_uint32").bitcode(add_bitcode()))
    }
}

const SHF: &str = "shf.l.wrap.b32 $0, $1, $2, $3;";

#[kernel]
fn funnel(out: Ptr<u32>, lo: Ptr<u32>, hi: Ptr<u32>, n: Ptr<u32>, #[constexpr] block: usize) {
    let idx = program_id(0) * block + arange(0, block);
    let (x, y, s) = (load(lo + idx), load(hi + idx), load(n + idx));
    let r = inline_asm_elementwise(
        SHF,
        "=r,r,r,r",
        (x, y, s),
        DType::U32,
        true,
        1,
        fallback = "funnel_shift",
    );
    store(out + idx, r);
}

/// A scalar shift amount broadcasts against the tiles, as Triton's args do.
#[kernel]
fn funnel_by(out: Ptr<u32>, lo: Ptr<u32>, hi: Ptr<u32>, n: u32, #[constexpr] block: usize) {
    let idx = program_id(0) * block + arange(0, block);
    let r = inline_asm_elementwise(
        SHF,
        "=r,r,r,r",
        (load(lo + idx), load(hi + idx), n),
        DType::U32,
        true,
        1,
        fallback = "funnel_shift",
    );
    store(out + idx, r);
}

/// Two f16 elements per asm call in one 32-bit register (`add.rn.f16x2`); the fallback
/// is `add.cpp`'s per-element f16 add (`add_simt`).
#[kernel]
fn add_f16x2(out: Ptr<f16>, a: Ptr<f16>, b: Ptr<f16>, #[constexpr] block: usize) {
    let idx = arange(0, block);
    let r = inline_asm_elementwise(
        "add.rn.f16x2 $0, $1, $2;",
        "=r,r,r",
        (load(a + idx), load(b + idx)),
        DType::F16,
        true,
        2,
        fallback = "add_simt",
    );
    store(out + idx, r);
}

/// One element per call in a 16-bit (`h`) or f32 (`f`) register.
#[kernel]
fn add_one(out: Ptr<f16>, a: Ptr<f16>, b: Ptr<f16>, #[constexpr] block: usize) {
    let idx = arange(0, block);
    let (x, y) = (load(a + idx), load(b + idx));
    let h = inline_asm_elementwise(
        "add.rn.f16 $0, $1, $2;",
        "=h,h,h",
        (x, y),
        DType::F16,
        true,
        1,
        fallback = "add_simt",
    );
    let f = inline_asm_elementwise(
        "add.rn.f32 $0, $1, $2;",
        "=f,f,f",
        [cast(x, DType::F32), cast(y, DType::F32)],
        DType::F32,
        true,
        1,
        fallback = "add_simt",
    );
    store(out + idx, h + cast(f, DType::F16));
}

/// A bad call: `CASE` 0 a pack of 3, 1 too few constraints, 2 a Simd fallback.
#[kernel]
fn bad_call(out: Ptr<u32>, a: Ptr<u32>, #[constexpr] CASE: u8) {
    let idx = arange(0, 16);
    let x = load(a + idx);
    let (constraints, pack, fallback) = match CASE {
        0 => ("=r,r,r,r", 3, "funnel_shift"),
        1 => ("=r,r,r", 1, "funnel_shift"),
        _ => ("=r,r,r,r", 1, "funnel_shift_simd"),
    };
    let r = inline_asm_elementwise(
        SHF,
        constraints,
        (x, x, x),
        DType::U32,
        true,
        pack,
        fallback = fallback,
    );
    store(out + idx, r);
}

fn shf(lo: u32, hi: u32, n: u32) -> u32 {
    let v = ((hi as u64) << 32) | lo as u64;
    ((v << (n & 31)) >> 32) as u32
}

/// Deterministic words (xorshift), shift amounts over 0..64 so `n & 31` matters.
fn words(n: usize, seed: u32) -> Array1<u32> {
    let mut s = seed;
    Array1::from_iter((0..n).map(|_| {
        s ^= s << 13;
        s ^= s >> 17;
        s ^= s << 5;
        s
    }))
}

#[test]
fn funnel_shift_runs_the_fallback_or_the_asm_on_every_device() {
    let n = 256;
    let lo = words(n, 1);
    let hi = words(n, 2);
    let sh = words(n, 3).mapv(|v| v % 64);
    let want = Array1::from_iter((0..n).map(|i| shf(lo[i], hi[i], sh[i])));
    for device in all_devices() {
        let mut out = Array1::<u32>::zeros(n);
        funnel::launch(&device, [n / 64], &mut out, &lo, &hi, &sh, 64).unwrap();
        assert_eq!(out, want, "{device:?}");
        let mut out = Array1::<u32>::zeros(n);
        funnel_by::launch(&device, [n / 64], &mut out, &lo, &hi, 37u32, 64).unwrap();
        let want_by = Array1::from_iter((0..n).map(|i| shf(lo[i], hi[i], 37)));
        assert_eq!(out, want_by, "{device:?}");
    }
}

#[test]
fn packed_f16_runs_on_every_device() {
    let n = 128;
    let a = Array1::from_iter((0..n).map(|i| f16::from_f32(i as f32 * 0.25 - 7.0)));
    let b = Array1::from_iter((0..n).map(|i| f16::from_f32(3.0 - i as f32 * 0.125)));
    let want = Array1::from_iter((0..n).map(|i| f16::from_f32(a[i].to_f32() + b[i].to_f32())));
    let twice = want.mapv(|x| f16::from_f32(x.to_f32() * 2.0));
    for device in all_devices() {
        let mut out = Array1::from_elem(n, f16::ZERO);
        add_f16x2::launch(&device, [1], &mut out, &a, &b, n).unwrap();
        assert_eq!(out, want, "{device:?}");
        let mut out = Array1::from_elem(n, f16::ZERO);
        add_one::launch(&device, [1], &mut out, &a, &b, n).unwrap();
        assert_eq!(out, twice, "{device:?}");
    }
}

fn traced_funnel() -> Function {
    funnel::trace(&Specialization::default(), 64).unwrap()
}

fn ptx(f: &Function) -> String {
    let copts = CudaCompileOptions {
        sm: 80,
        num_warps: 4,
        ..Default::default()
    };
    compile_ptx(f, "k", &copts).unwrap().text
}

#[test]
fn the_ptx_runs_the_asm_not_the_fallback() {
    let text = ptx(&traced_funnel());
    assert!(text.contains("shf.l.wrap.b32"), "{text}");
    assert!(!text.contains("custom_funnel_shift_uint32"), "{text}");
    let f = add_f16x2::trace(&Specialization::default(), 128).unwrap();
    let text = ptx(&f);
    // 128 elements over 128 threads: one slot each, so one packed call with a repeat.
    assert_eq!(text.matches("add.rn.f16x2").count(), 1, "{text}");
    assert!(!text.contains("custom_add_simt_float16"), "{text}");
    let f = add_one::trace(&Specialization::default(), 128).unwrap();
    let text = ptx(&f);
    assert!(text.contains("add.rn.f16 %rs"), "{text}");
    assert!(text.contains("add.rn.f32 %f"), "{text}");
}

#[test]
fn the_ir_text_keeps_the_asm() {
    let f = traced_funnel();
    let text = print_function(&f);
    assert!(
        text.contains(r#"asm = "shf.l.wrap.b32 $0, $1, $2, $3;", constraints = "=r,r,r,r", pack = 1, pure = true"#),
        "{text}"
    );
    let back = parse_function(&text).unwrap();
    assert_eq!(print_function(&back), text);
    let asm = |f: &Function| {
        f.body.insts.iter().find_map(|i| match &i.op {
            Op::Custom(c) => c.inline_asm.clone(),
            _ => None,
        })
    };
    assert_eq!(asm(&back), asm(&f));
    assert!(asm(&f).is_some());
    // The verifier checks the attribute read back from text.
    let bad = text.replace("pack = 1", "pack = 3");
    let e = verify(&parse_function(&bad).unwrap())
        .unwrap_err()
        .to_string();
    assert!(e.contains("pack must be 1, 2 or 4, not 3"), "{e}");
}

#[test]
fn bad_calls_are_trace_errors() {
    let a = Array1::<u32>::zeros(16);
    let run = |case: u8| {
        let mut out = Array1::<u32>::zeros(16);
        let r = bad_call::launch(&Device::cpu(), [1], &mut out, &a, case);
        r.unwrap_err().to_string()
    };
    let e = run(0);
    assert!(e.contains("pack must be 1, 2 or 4, not 3"), "{e}");
    let e = run(1);
    assert!(
        e.contains("constraints `=r,r,r` name 3 operands; one output and 3 inputs need 4"),
        "{e}"
    );
    let e = run(2);
    assert!(
        e.contains("the fallback of `inline_asm_elementwise` must be a Simt op"),
        "{e}"
    );
}
