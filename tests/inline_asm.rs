//! `inline_asm_elementwise` (Triton's inline PTX, issue 46 item 8): CUDA hardware runs the
//! asm, `pack` elements per call; the CPU, the interpreter and the emulator run the
//! required Simt `fallback` op. Several results (a tuple or array `dtype`) and Triton's
//! wide packings (an operand of `pack` elements in several registers, `l` registers of
//! 64-bit elements, a 16-bit register of two fp8s) are checked on every device against
//! plain Rust, and in the PTX (no GPU needed).

use crate::common::all_devices;
use half::f16;
use ndarray::Array1;
use std::fmt::Debug;
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

/// PTX's `cvt.rn.f16x2.e4m3x2` per element: `custom_fp8e4m3_to_float16` (host bitcode).
#[register_custom_op(core = Vector, pipe = PipeV, mode = Simt, name = "fp8_to_f16")]
struct Fp8ToF16;
impl Fp8ToF16 {
    fn init(args: &CustomArgs) -> Result<CustomImpl, String> {
        args.expect_arity(1, 1)?;
        if args.in_dtype(0)? != DType::F8E4M3 || args.outs[0].dtype() != Some(DType::F16) {
            return Err(format!("takes f8e4m3 to f16, not {args:?}"));
        }
        Ok(CustomImpl::new("custom_fp8e4m3_to_float16")
            .bitcode(Bitcode::from_bytes("add.bc", ADD_BC)))
    }
}

/// Triton's own `inline_asm_elementwise` example: `(a as i32, max(a as f32, b))` of a u8
/// and an f32, two results of two dtypes: `custom_u8_max_float32` (host bitcode).
#[register_custom_op(core = Vector, pipe = PipeV, mode = Simt, name = "u8_max")]
struct U8Max;
impl U8Max {
    fn init(args: &CustomArgs) -> Result<CustomImpl, String> {
        args.expect_arity(2, 2)?;
        Ok(CustomImpl::new("custom_u8_max_float32").bitcode(Bitcode::from_bytes("add.bc", ADD_BC)))
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

/// One form of `(a + b, a - b)` by inline asm with two results, its fallback `add_sub`.
struct AddSubCase {
    dtype: DType,
    asm: &'static str,
    constraints: &'static str,
    pack: u32,
    /// Text the PTX must hold: the asm with its operands as registers of their kind.
    ptx: &'static [&'static str],
}

/// Every operand layout: one register per element (`pack = 1`); two f16 in one register;
/// four f16 in two registers per operand; f32 in `f` and in `r` registers, two or four
/// per operand; i64 in `l` registers. Results' registers first (result by result), then
/// the inputs' (input by input), as Triton numbers them.
const ADD_SUB: &[AddSubCase] = &[
    AddSubCase {
        dtype: DType::I32,
        asm: "add.s32 $0, $2, $3; sub.s32 $1, $2, $3;",
        constraints: "=r,=r,r,r",
        pack: 1,
        ptx: &["add.s32 %r", "sub.s32 %r"],
    },
    AddSubCase {
        dtype: DType::F16,
        asm: "add.rn.f16x2 $0, $2, $3; sub.rn.f16x2 $1, $2, $3;",
        constraints: "=r,=r,r,r",
        pack: 2,
        ptx: &["add.rn.f16x2 %r", "sub.rn.f16x2 %r"],
    },
    AddSubCase {
        dtype: DType::F16,
        asm: "add.rn.f16x2 $0, $4, $6; add.rn.f16x2 $1, $5, $7; \
              sub.rn.f16x2 $2, $4, $6; sub.rn.f16x2 $3, $5, $7;",
        constraints: "=r,=r,=r,=r,r,r,r,r",
        pack: 4,
        ptx: &["add.rn.f16x2 %r", "sub.rn.f16x2 %r"],
    },
    AddSubCase {
        dtype: DType::F32,
        asm: "add.rn.f32 $0, $4, $6; add.rn.f32 $1, $5, $7; \
              sub.rn.f32 $2, $4, $6; sub.rn.f32 $3, $5, $7;",
        constraints: "=f,=f,=f,=f,f,f,f,f",
        pack: 2,
        ptx: &["add.rn.f32 %f", "sub.rn.f32 %f"],
    },
    AddSubCase {
        dtype: DType::F32,
        asm: "add.rn.f32 $0, $8, $12; add.rn.f32 $1, $9, $13; \
              add.rn.f32 $2, $10, $14; add.rn.f32 $3, $11, $15; \
              sub.rn.f32 $4, $8, $12; sub.rn.f32 $5, $9, $13; \
              sub.rn.f32 $6, $10, $14; sub.rn.f32 $7, $11, $15;",
        constraints: "=r,=r,=r,=r,=r,=r,=r,=r,r,r,r,r,r,r,r,r",
        pack: 4,
        ptx: &["add.rn.f32 %r", "sub.rn.f32 %r"],
    },
    AddSubCase {
        dtype: DType::I64,
        asm: "add.s64 $0, $4, $6; add.s64 $1, $5, $7; sub.s64 $2, $4, $6; sub.s64 $3, $5, $7;",
        constraints: "=l,=l,=l,=l,l,l,l,l",
        pack: 2,
        ptx: &["add.s64 %rd", "sub.s64 %rd"],
    },
];

fn add_sub_case(case: usize) -> (&'static str, &'static str, u32) {
    let c = &ADD_SUB[case];
    (c.asm, c.constraints, c.pack)
}

/// `(sum, diff) = (a + b, a - b)` by `ADD_SUB[CASE]`; with `ARRAY` the `dtype` is an array
/// (the call gives an array of tiles), else a tuple.
#[kernel]
fn add_sub<T: Element>(
    sum: Ptr<T>,
    diff: Ptr<T>,
    a: Ptr<T>,
    b: Ptr<T>,
    #[constexpr] CASE: usize,
    #[constexpr] ARRAY: bool,
    #[constexpr] block: usize,
) {
    let idx = program_id(0) * block + arange(0, block);
    let (asm, constraints, pack) = add_sub_case(CASE);
    let args = (load(a + idx), load(b + idx));
    let (s, d) = if ARRAY {
        let [s, d] = inline_asm_elementwise(
            asm,
            constraints,
            args,
            [T::DTYPE; 2],
            true,
            pack,
            fallback = "add_sub",
        );
        (s, d)
    } else {
        inline_asm_elementwise(
            asm,
            constraints,
            args,
            (T::DTYPE, T::DTYPE),
            true,
            pack,
            fallback = "add_sub",
        )
    };
    store(sum + idx, s);
    store(diff + idx, d);
}

/// fp8 (E4M3) → f16 as Triton converts it on sm_89+: with `PACK = 4` four bytes in one
/// 32-bit register, four halves out in two (`=r,=r,r`); with `PACK = 2` two bytes in a
/// 16-bit register, two halves out in one (`=r,h`).
#[kernel]
fn fp8_to_f16(out: Ptr<f16>, x: Ptr<F8E4M3>, #[constexpr] PACK: u32, #[constexpr] block: usize) {
    let idx = program_id(0) * block + arange(0, block);
    let (asm, constraints) = if PACK == 4 {
        (FP8X4, "=r,=r,r")
    } else {
        (FP8X2, "=r,h")
    };
    let r = inline_asm_elementwise(
        asm,
        constraints,
        [load(x + idx)],
        DType::F16,
        true,
        PACK,
        fallback = "fp8_to_f16",
    );
    store(out + idx, r);
}

const FP8X4: &str = "{ .reg .b16 lo, hi; mov.b32 {lo, hi}, $2; \
                     cvt.rn.f16x2.e4m3x2 $0, lo; cvt.rn.f16x2.e4m3x2 $1, hi; }";
const FP8X2: &str = "cvt.rn.f16x2.e4m3x2 $0, $1;";

/// Triton's documented example: 4 elements per call, a u8 input packed into one register
/// (`$8`), an f32 input in four (`$9…$12`), two results of four registers each (`$0…$7`).
const U8_MAX: &str = "{ .reg .b8 tmp<4>; mov.b32 {tmp0, tmp1, tmp2, tmp3}, $8; \
     cvt.u32.u8 $0, tmp0; cvt.u32.u8 $1, tmp1; cvt.u32.u8 $2, tmp2; cvt.u32.u8 $3, tmp3; } \
     cvt.rn.f32.s32 $4, $0; cvt.rn.f32.s32 $5, $1; cvt.rn.f32.s32 $6, $2; cvt.rn.f32.s32 $7, $3; \
     max.f32 $4, $4, $9; max.f32 $5, $5, $10; max.f32 $6, $6, $11; max.f32 $7, $7, $12;";

#[kernel]
fn u8_max(ai: Ptr<i32>, m: Ptr<f32>, a: Ptr<u8>, b: Ptr<f32>, #[constexpr] block: usize) {
    let idx = program_id(0) * block + arange(0, block);
    let (c, d) = inline_asm_elementwise(
        U8_MAX,
        "=r,=r,=r,=r,=r,=r,=r,=r,r,r,r,r,r",
        (load(a + idx), load(b + idx)),
        (DType::I32, DType::F32),
        true,
        4,
        fallback = "u8_max",
    );
    store(ai + idx, c);
    store(m + idx, d);
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

/// Bad calls with several results or wide packs, `CASE`: 0 two results with one output
/// constraint; 1 a fallback with one out for two results; 2 f16 `pack = 4` with one
/// register per operand; 3 two fp8 in a 32-bit register; 4 an output after an input;
/// 5 an unknown register class.
#[kernel]
fn bad_wide(out: Ptr<u32>, a: Ptr<u32>, h: Ptr<f16>, q: Ptr<F8E4M3>, #[constexpr] CASE: u8) {
    let idx = arange(0, 16);
    let (x, y, z) = (load(a + idx), load(h + idx), load(q + idx));
    let two = (DType::U32, DType::U32);
    let r = match CASE {
        0 => {
            inline_asm_elementwise(
                SHF,
                "=r,r,r,r",
                (x, x, x),
                two,
                true,
                1,
                fallback = "funnel_shift",
            )
            .0
        }
        1 => {
            inline_asm_elementwise(
                SHF,
                "=r,=r,r,r,r",
                (x, x, x),
                two,
                true,
                1,
                fallback = "funnel_shift",
            )
            .0
        }
        2 => cast(
            inline_asm_elementwise(
                "",
                "=r,r,r",
                (y, y),
                DType::F16,
                true,
                4,
                fallback = "add_simt",
            ),
            DType::U32,
        ),
        3 => cast(
            inline_asm_elementwise(
                FP8X2,
                "=r,r",
                [z],
                DType::F16,
                true,
                2,
                fallback = "fp8_to_f16",
            ),
            DType::U32,
        ),
        4 => {
            inline_asm_elementwise(
                SHF,
                "=r,r,=r,r,r",
                (x, x, x),
                two,
                true,
                1,
                fallback = "funnel_shift",
            )
            .0
        }
        _ => inline_asm_elementwise(
            SHF,
            "=r,r,r,q",
            (x, x, x),
            DType::U32,
            true,
            1,
            fallback = "funnel_shift",
        ),
    };
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

/// Runs `add_sub` case `case` (both `dtype` spellings) on every device against `want`.
fn check_add_sub<T>(case: usize, a: &[T], b: &[T], want: impl Fn(T, T) -> (T, T))
where
    T: Element + Copy + Default + PartialEq + Debug,
{
    let n = a.len();
    let (ws, wd): (Vec<T>, Vec<T>) = a.iter().zip(b).map(|(x, y)| want(*x, *y)).unzip();
    for device in all_devices() {
        for array in [false, true] {
            let (mut s, mut d) = (vec![T::default(); n], vec![T::default(); n]);
            add_sub::launch(
                &device,
                [n / 128],
                &mut s[..],
                &mut d[..],
                a,
                b,
                case,
                array,
                128,
            )
            .unwrap();
            let what = format!(
                "{device:?} case {case} ({}), array {array}",
                ADD_SUB[case].dtype
            );
            assert_eq!(s, ws, "{what}: sums");
            assert_eq!(d, wd, "{what}: differences");
        }
    }
}

#[test]
fn several_results_and_wide_packs_run_on_every_device() {
    let n = 256;
    let w = words(n, 7);
    let v = words(n, 8);
    for (case, c) in ADD_SUB.iter().enumerate() {
        match c.dtype {
            DType::I32 => {
                let (a, b): (Vec<i32>, Vec<i32>) =
                    (0..n).map(|i| (w[i] as i32, v[i] as i32)).unzip();
                check_add_sub(case, &a, &b, |x, y| (x.wrapping_add(y), x.wrapping_sub(y)));
            }
            DType::I64 => {
                let (a, b): (Vec<i64>, Vec<i64>) = (0..n)
                    .map(|i| {
                        (
                            ((w[i] as i64) << 32) | v[i] as i64,
                            (v[i] as i64) << 31 | w[i] as i64,
                        )
                    })
                    .unzip();
                check_add_sub(case, &a, &b, |x, y| (x.wrapping_add(y), x.wrapping_sub(y)));
            }
            DType::F32 => {
                let (a, b): (Vec<f32>, Vec<f32>) = (0..n)
                    .map(|i| (i as f32 * 0.37 - 20.0, 1.0 / (i as f32 + 0.5)))
                    .unzip();
                check_add_sub(case, &a, &b, |x, y| (x + y, x - y));
            }
            DType::F16 => {
                let (a, b): (Vec<f16>, Vec<f16>) = (0..n)
                    .map(|i| {
                        (
                            f16::from_f32(i as f32 * 0.25 - 7.0),
                            f16::from_f32(3.0 - i as f32 / 7.0),
                        )
                    })
                    .unzip();
                let f = |x: f32| f16::from_f32(x);
                check_add_sub(case, &a, &b, |x, y| {
                    (f(x.to_f32() + y.to_f32()), f(x.to_f32() - y.to_f32()))
                });
            }
            d => unreachable!("{d}"),
        }
    }
}

#[test]
fn fp8_to_f16_packs_four_bytes_in_one_register() {
    // Every E4M3 byte but the two NaNs, whose f16 NaN payload is the asm's.
    let bytes: Vec<u8> = (0..=255u8)
        .filter(|b| b & 0x7f != 0x7f)
        .cycle()
        .take(512)
        .collect();
    let x: Vec<F8E4M3> = bytes.iter().map(|b| F8E4M3::from_bits(*b)).collect();
    let want: Vec<f16> = x.iter().map(|v| f16::from_f32(v.to_f32())).collect();
    // The asm's `cvt.rn.f16x2.e4m3x2` needs sm_89 (so the emulator emulates one, and the
    // PTX it writes for `scripts/dev ptx-sweep` is sm_89's); older GPUs are skipped.
    let opts = tritium::LaunchOptions {
        emulated_sm: Some(89),
        ..Default::default()
    };
    for device in all_devices() {
        if let Device::Cuda(gpu) = &device {
            if gpu.sm().is_ok_and(|sm| sm < 89) {
                eprintln!("skipped fp8_to_f16 on {}: its asm needs sm_89", gpu.name());
                continue;
            }
        }
        for pack in [4u32, 2] {
            let mut out = vec![f16::ZERO; x.len()];
            let grid = [x.len() / 128];
            fp8_to_f16::launch_with(&device, grid, &opts, &mut out[..], &x[..], pack, 128).unwrap();
            let bits = |v: &[f16]| v.iter().map(|h| h.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&out), bits(&want), "{device:?} pack {pack}");
        }
    }
}

#[test]
fn triton_example_two_dtypes_of_results() {
    let n = 256;
    let a: Vec<u8> = (0..n).map(|i| (i * 37 % 256) as u8).collect();
    let b: Vec<f32> = (0..n).map(|i| i as f32 * 1.37 - 100.3).collect();
    let want_ai: Vec<i32> = a.iter().map(|x| *x as i32).collect();
    let want_m: Vec<f32> = a.iter().zip(&b).map(|(x, y)| (*x as f32).max(*y)).collect();
    for device in all_devices() {
        let (mut ai, mut m) = (vec![0i32; n], vec![0f32; n]);
        u8_max::launch(
            &device,
            [n / 128],
            &mut ai[..],
            &mut m[..],
            &a[..],
            &b[..],
            128,
        )
        .unwrap();
        assert_eq!(ai, want_ai, "{device:?}");
        assert_eq!(m, want_m, "{device:?}");
    }
}

/// The inline asm blocks of PTX `text` whose text holds `what`, one line each.
fn asm_blocks(text: &str, what: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut lines = text.lines();
    while lines.any(|l| l.trim() == "// begin inline asm") {
        let block: Vec<&str> = lines
            .by_ref()
            .take_while(|l| l.trim() != "// end inline asm")
            .collect();
        let block = block.join(" ");
        if block.contains(what) {
            blocks.push(block);
        }
    }
    blocks
}

/// The distinct registers (`%r12`, `%rd3`, `%rs1`, `%f7`) block `b` names.
fn registers(b: &str) -> std::collections::BTreeSet<&str> {
    b.split(|c: char| !(c.is_ascii_alphanumeric() || c == '%'))
        .filter(|t| t.starts_with('%'))
        .collect()
}

/// The PTX of every wide form: the asm once per `pack` of a thread's 4 elements (512
/// elements over 128 threads), its operands registers of their kind, every one distinct
/// (each register holds its own elements).
#[test]
fn the_ptx_passes_several_results_and_wide_packs() {
    let spec = Specialization::default();
    let operands = |c: &str| c.split(',').count();
    for (case, c) in ADD_SUB.iter().enumerate() {
        let f = match c.dtype {
            DType::I32 => add_sub::trace::<i32>(&spec, case, false, 512),
            DType::I64 => add_sub::trace::<i64>(&spec, case, true, 512),
            DType::F32 => add_sub::trace::<f32>(&spec, case, false, 512),
            _ => add_sub::trace::<f16>(&spec, case, true, 512),
        }
        .unwrap();
        let text = ptx(&f);
        assert!(!text.contains("custom_add_sub"), "case {case}: {text}");
        let blocks = asm_blocks(&text, c.ptx[0].split(' ').next().unwrap());
        assert_eq!(blocks.len(), 4 / c.pack as usize, "case {case}: {text}");
        for b in &blocks {
            for want in c.ptx {
                let op = want.split(' ').next().unwrap();
                assert_eq!(
                    b.matches(want).count(),
                    c.asm.matches(op).count(),
                    "case {case}: {b}"
                );
            }
            assert_eq!(
                registers(b).len(),
                operands(c.constraints),
                "case {case}: {b}"
            );
        }
    }
    // The fp8 conversion needs sm_89, and PTX ISA 8.1 there (ptxas refuses it in 7.8).
    let text = ptx_for(&fp8_to_f16::trace(&spec, 4, 512).unwrap(), 89);
    assert!(text.contains(".version 8.1\n.target sm_89\n"), "{text}");
    let blocks = asm_blocks(&text, "cvt.rn.f16x2.e4m3x2");
    assert_eq!(blocks.len(), 1, "{text}");
    assert!(blocks[0].contains("mov.b32 {lo, hi}, %r"), "{}", blocks[0]);
    assert_eq!(
        blocks[0].matches("cvt.rn.f16x2.e4m3x2 %r").count(),
        2,
        "{}",
        blocks[0]
    );
    assert_eq!(registers(&blocks[0]).len(), 3, "{}", blocks[0]);
    let text = ptx_for(&fp8_to_f16::trace(&spec, 2, 512).unwrap(), 89);
    // The two bytes of a 16-bit operand are packed in registers, not through local memory
    // (as a `<2 x i8>` bitcast to `i16` was).
    assert!(!text.contains(".local"), "{text}");
    let blocks = asm_blocks(&text, "cvt.rn.f16x2.e4m3x2");
    assert_eq!(blocks.len(), 2, "{text}");
    for b in &blocks {
        // Two bytes in a 16-bit register, two halves out in a 32-bit one.
        assert!(
            b.contains("cvt.rn.f16x2.e4m3x2 %r") && b.contains(", %rs"),
            "{b}"
        );
    }
    let text = ptx(&u8_max::trace(&spec, 512).unwrap());
    let blocks = asm_blocks(&text, "max.f32");
    assert_eq!(blocks.len(), 1, "{text}");
    // 8 outputs, one register of four u8 and four f32 inputs.
    assert_eq!(registers(&blocks[0]).len(), 13, "{}", blocks[0]);
    assert!(!text.contains("custom_u8_max"), "{text}");
}

fn traced_funnel() -> Function {
    funnel::trace(&Specialization::default(), 64).unwrap()
}

fn ptx(f: &Function) -> String {
    ptx_for(f, 80)
}

fn ptx_for(f: &Function, sm: u32) -> String {
    let copts = CudaCompileOptions {
        sm,
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
    assert!(e.contains("pack must be 1, 2, 4, 8 or 16, not 3"), "{e}");
    // Two results with wide packs read back the same; the verifier counts their registers.
    let f = add_sub::trace::<f16>(&Specialization::default(), 2, false, 512).unwrap();
    let text = print_function(&f);
    assert!(
        text.contains(r#"constraints = "=r,=r,=r,=r,r,r,r,r", pack = 4"#),
        "{text}"
    );
    let back = parse_function(&text).unwrap();
    assert_eq!(print_function(&back), text);
    let bad = text.replace("=r,=r,=r,=r,r,r,r,r", "=r,=r,r,r");
    let e = verify(&parse_function(&bad).unwrap())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("constraints `=r,=r,r,r` name 4 operands; 2 results and 2 inputs with pack = 4 need 8: 2 registers of 2 for the f16 result"),
        "{e}"
    );
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
    assert!(e.contains("pack must be 1, 2, 4, 8 or 16, not 3"), "{e}");
    let e = run(1);
    assert!(
        e.contains("constraints `=r,r,r` name 3 operands; 1 result and 3 inputs need 4 (one register each)"),
        "{e}"
    );
    let e = run(2);
    assert!(
        e.contains("the fallback of `inline_asm_elementwise` must be a Simt op"),
        "{e}"
    );
}

#[test]
fn bad_wide_calls_are_trace_errors_at_their_line() {
    let a = [0u32; 16];
    let h = [f16::ZERO; 16];
    let q = [F8E4M3::from_bits(0); 16];
    let run = |case: u8| {
        let mut out = [0u32; 16];
        let r = bad_wide::launch(
            &Device::cpu(),
            [1],
            &mut out[..],
            &a[..],
            &h[..],
            &q[..],
            case,
        );
        r.unwrap_err().to_string()
    };
    let cases: [(u8, &str); 6] = [
        (0, "constraints `=r,r,r,r` name 4 operands; 2 results and 3 inputs need 5 (one register each)"),
        (1, "`funnel_shift` takes 3 input(s) and 1 out(s), got 3 and 2 (the fallback computes the call's 2 results as its outs: u32, u32)"),
        (2, "constraints `=r,r,r` name 3 operands; 1 result and 2 inputs with pack = 4 need 6: 2 registers of 2 for the f16 result, 2 registers of 2 for the f16 input, 2 registers of 2 for the f16 input"),
        (3, "constraint `r` of operand $1 (input 0) is a 32-bit integer register, but the operand holds 2 fp8e4nv elements per register (16 bits, pack = 2): use `h`"),
        (4, "constraints `=r,r,=r,r,r` must start with the 2 output registers (`=r`), then the 3 input registers"),
        (5, "constraint `q` of operand $3: supported registers are c, h, r, l"),
    ];
    for (case, want) in cases {
        let e = run(case);
        assert!(e.contains(want), "case {case}: {e}");
        // The error names this file and the call's line.
        assert!(e.contains("inline_asm.rs:"), "case {case}: {e}");
    }
}
