//! Triton's random numbers (`philox`, `randint4x`, `rand`, `randn`, …) and `umulhi` on
//! every device: Random123's known-answer vectors, a table of Triton's outputs derived
//! from Triton's `random.py` (transcribed in plain Python integers), a plain-Rust Philox
//! over many seeds and offsets, and tutorial 04's dropout.

use crate::common::{all_devices, devices_for, random_f32};
use ndarray::{Array1, ArrayView1};
use rstest::rstest;
use tritium::prelude::*;
use tritium_kernels::dropout::dropout;

/// Philox of the counters `c` (`4 × N`, one row per counter word) keyed by `seed`:
/// Philox-4x32 for u32 counters, Philox-4x64 (key `(seed, 0)`) for u64.
#[kernel]
fn philox_rounds<T: Int>(
    out: Ptr<T>,
    c: Ptr<T>,
    seed: i64,
    #[constexpr] N: usize,
    #[constexpr] ROUNDS: usize,
) {
    let r = arange(0, N);
    let n = N as i32;
    let (a, b, cc, d) = philox(
        seed,
        load(c + r),
        load(c + n + r),
        load(c + 2 * n + r),
        load(c + 3 * n + r),
        n_rounds = ROUNDS,
    );
    store(out + r, a);
    store(out + n + r, b);
    store(out + 2 * n + r, cc);
    store(out + 3 * n + r, d);
}

/// `randint4x`, `rand` and `randn` of `seed` at i64 offsets `off`.
#[kernel]
fn draws64(
    ints: Ptr<u32>,
    uniform: Ptr<f32>,
    normal: Ptr<f32>,
    off: Ptr<i64>,
    seed: i64,
    #[constexpr] N: usize,
) {
    let r = arange(0, N);
    let n = N as i32;
    let o = load(off + r);
    let (a, b, c, d) = randint4x(seed, o);
    store(ints + r, a);
    store(ints + n + r, b);
    store(ints + 2 * n + r, c);
    store(ints + 3 * n + r, d);
    store(uniform + r, rand(seed, o));
    store(normal + r, randn(seed, o));
}

/// `randint`, `rand`, `rand4x` and `randn4x` of an i32 `seed` at i32 offsets.
#[kernel]
fn draws32(
    ints: Ptr<u32>,
    uniform: Ptr<f32>,
    normal: Ptr<f32>,
    off: Ptr<i32>,
    seed: i32,
    #[constexpr] N: usize,
) {
    let r = arange(0, N);
    let n = N as i32;
    let o = load(off + r);
    store(ints + r, randint(seed, o));
    store(uniform + r, rand(seed, o));
    let (u0, u1, u2, u3) = rand4x(seed, o);
    store(uniform + n + r, u0);
    store(uniform + 2 * n + r, u1);
    store(uniform + 3 * n + r, u2);
    store(uniform + 4 * n + r, u3);
    let (z0, z1, z2, z3) = randn4x(seed, o);
    store(normal + r, z0);
    store(normal + n + r, z1);
    store(normal + 2 * n + r, z2);
    store(normal + 3 * n + r, z3);
}

/// `umulhi` of every pair of `x` and `y` for four integer dtypes.
#[kernel]
fn mul_high<T: Int>(out: Ptr<T>, x: Ptr<T>, y: Ptr<T>, #[constexpr] N: usize) {
    let r = arange(0, N);
    let n = N as i32;
    let a = load(x + r);
    let b = load(y + r);
    store(
        out + r[(.., None)] * n + r[(None, ..)],
        umulhi(a[(.., None)], b[(None, ..)]),
    );
}

/// Philox rounds with the key schedule of Random123 (and Triton): the reference.
fn philox_ref32(mut c: [u32; 4], mut k: [u32; 2], rounds: usize) -> [u32; 4] {
    for _ in 0..rounds {
        let p0 = 0xD251_1F53u64 * c[0] as u64;
        let p2 = 0xCD9E_8D57u64 * c[2] as u64;
        c = [
            (p2 >> 32) as u32 ^ c[1] ^ k[0],
            p2 as u32,
            (p0 >> 32) as u32 ^ c[3] ^ k[1],
            p0 as u32,
        ];
        k = [
            k[0].wrapping_add(0x9E37_79B9),
            k[1].wrapping_add(0xBB67_AE85),
        ];
    }
    c
}

/// Triton's `randint4x(seed, offset)` for an offset of `wide` (64-bit) or 32-bit dtype.
fn randint4x_ref(seed: i64, offset: i64, wide: bool) -> [u32; 4] {
    let s = seed as u64;
    let hi = if wide { (offset >> 32) as u32 } else { 0 };
    philox_ref32([offset as u32, hi, 0, 0], [s as u32, (s >> 32) as u32], 10)
}

/// Triton's `uint_to_uniform_float` of a u32.
fn uniform_ref(x: u32) -> f32 {
    let x = x as i32;
    let x = if x < 0 {
        x.wrapping_neg().wrapping_sub(1)
    } else {
        x
    };
    x as f32 * (4.656_612_734_2e-10_f64 as f32)
}

/// Triton's Box-Muller pair in f64 (the devices' `log`/`cos`/`sin` are within ulps of it).
fn normal_ref(u1: f32, u2: f32) -> (f64, f64) {
    let u1 = u1.max(1.0e-7_f64 as f32) as f64;
    let th = (std::f64::consts::TAU as f32 * u2) as f64;
    let r = (-2.0 * u1.ln()).sqrt();
    (r * th.cos(), r * th.sin())
}

/// Random123's `kat_vectors` for Philox-4x32 (10 rounds): counter, key, output.
const KAT_4X32: [([u32; 4], [u32; 2], [u32; 4]); 3] = [
    (
        [0; 4],
        [0; 2],
        [0x6627_e8d5, 0xe169_c58d, 0xbc57_ac4c, 0x9b00_dbd8],
    ),
    (
        [u32::MAX; 4],
        [u32::MAX; 2],
        [0x408f_276d, 0x41c8_3b0e, 0xa20b_c7c6, 0x6d54_51fd],
    ),
    (
        [0x243f_6a88, 0x85a3_08d3, 0x1319_8a2e, 0x0370_7344],
        [0xa409_3822, 0x299f_31d0],
        [0xd16c_fe09, 0x94fd_cceb, 0x5001_e420, 0x2412_6ea1],
    ),
];

#[test]
fn philox_4x32_known_answers() {
    for (ctr, key, want) in KAT_4X32 {
        assert_eq!(philox_ref32(ctr, key, 10), want, "the reference");
        let seed = ((key[1] as u64) << 32 | key[0] as u64) as i64;
        let c = Array1::from_iter(ctr);
        for device in all_devices() {
            let mut out = Array1::zeros(4);
            philox_rounds::launch(&device, 1, &mut out, c.view(), seed, 1, 10).unwrap();
            assert_eq!(
                out.to_vec(),
                want,
                "{device:?}, counter {ctr:x?}, key {key:x?}"
            );
        }
    }
}

#[test]
fn philox_4x64_known_answers() {
    // Random123's vectors with a zero key (Triton's 64-bit key is `(seed, 0)`), 7 and 10 rounds.
    let cases: [(usize, [u64; 4]); 2] = [
        (
            7,
            [
                0x5dc8_ee62_68ec_62cd,
                0x139b_c570_b6c1_25a0,
                0x84d6_deb4_fb65_f49e,
                0xaff7_5833_76d3_78c2,
            ],
        ),
        (
            10,
            [
                0x1655_4d9e_ca36_314c,
                0xdb20_fe9d_672d_0fdc,
                0xd7e7_72ce_e186_176b,
                0x7e68_b68a_ec7b_a23b,
            ],
        ),
    ];
    let c = Array1::<u64>::zeros(4);
    for (rounds, want) in cases {
        for device in all_devices() {
            let mut out = Array1::zeros(4);
            philox_rounds::launch(&device, 1, &mut out, c.view(), 0, 1, rounds).unwrap();
            assert_eq!(out.to_vec(), want, "{device:?}, {rounds} rounds");
        }
    }
}

/// Triton's outputs, from `triton/language/random.py` transcribed in plain Python integers
/// (`randint4x` words and the bits of `rand`): seed, offset, whether the offset is 64-bit.
const TRITON_TABLE: [(i64, i64, bool, [u32; 4], u32); 9] = [
    (
        0,
        0,
        false,
        [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8],
        0x3f4c4fd1,
    ),
    (
        0,
        1,
        false,
        [0xf8e4cca4, 0x5cb200db, 0xb1a574eb, 0x097eff67],
        0x3d63666a,
    ),
    (
        42,
        0,
        false,
        [0x9ceaf053, 0x77f5493b, 0x12bf50ad, 0x5742b3d7],
        0x3f462a1e,
    ),
    (
        42,
        7,
        false,
        [0x5bbd83b1, 0x68784c85, 0x172067aa, 0x2e6b75b7],
        0x3f377b06,
    ),
    (
        42,
        -1,
        false,
        [0x6e2412de, 0x41d4ec95, 0x29dd3e0c, 0xaed56cfa],
        0x3f5c4825,
    ),
    (
        -1,
        123456,
        false,
        [0x44135ad7, 0x9cfc5d8b, 0x832f42e3, 0xd0f4a376],
        0x3f0826b5,
    ),
    (
        (1 << 40) + 5,
        (1 << 31) - 1,
        false,
        [0x2823e190, 0xfb760698, 0x8072fe5c, 0xd76ce393],
        0x3ea08f85,
    ),
    (
        12345,
        (1 << 33) + 9,
        true,
        [0x9f714aed, 0x74ebab3f, 0xd43e3594, 0x93f82a5e],
        0x3f411d69,
    ),
    (
        12345,
        -(1 << 33) - 9,
        true,
        [0x86d55347, 0x8ba31564, 0x64d3d0dd, 0xc7ea851e],
        0x3f725558,
    ),
];

#[test]
fn randint4x_and_rand_match_tritons_table() {
    for (seed, offset, wide, words, rand_bits) in TRITON_TABLE {
        assert_eq!(randint4x_ref(seed, offset, wide), words, "the reference");
        assert_eq!(uniform_ref(words[0]).to_bits(), rand_bits, "the reference");
        // 64-bit offsets through `draws64`; 32-bit ones as i64 values that fit i32 give the
        // same counter (the high word is `offset >> 32` only for 64-bit offsets, which
        // `draws32` checks below).
        for device in all_devices() {
            let (ints, uniform, _) = draws(&device, seed, &[offset]);
            if wide || offset >= 0 {
                assert_eq!(ints, words, "{device:?} seed {seed} offset {offset}");
                assert_eq!(
                    uniform[0].to_bits(),
                    rand_bits,
                    "{device:?} seed {seed} offset {offset}"
                );
            }
            if !wide {
                let (ints, uniform, _) = draws_i32(&device, seed as i32, &[offset as i32]);
                let s = seed as i32 as i64;
                let want = randint4x_ref(s, offset, false);
                assert_eq!(ints[0], want[0], "{device:?} i32 seed {s} offset {offset}");
                assert_eq!(uniform[0].to_bits(), uniform_ref(want[0]).to_bits());
                if s == seed {
                    assert_eq!(ints[0], words[0], "{device:?} seed {seed} offset {offset}");
                }
            }
        }
    }
}

/// `draws64` at `offsets`: the four `randint4x` words of each, `rand`, `randn`.
fn draws(device: &Device, seed: i64, offsets: &[i64]) -> (Vec<u32>, Vec<f32>, Vec<f32>) {
    let n = offsets.len();
    let mut ints = Array1::<u32>::zeros(4 * n);
    let (mut uniform, mut normal) = (Array1::<f32>::zeros(n), Array1::<f32>::zeros(n));
    let off = Array1::from_vec(offsets.to_vec());
    draws64::launch(
        device,
        1,
        &mut ints,
        &mut uniform,
        &mut normal,
        off.view(),
        seed,
        n,
    )
    .unwrap();
    (ints.to_vec(), uniform.to_vec(), normal.to_vec())
}

/// `draws32` at `offsets`: `randint`, `rand` then `rand4x`'s four, `randn4x`'s four.
fn draws_i32(device: &Device, seed: i32, offsets: &[i32]) -> (Vec<u32>, Vec<f32>, Vec<f32>) {
    let n = offsets.len();
    let mut ints = Array1::<u32>::zeros(n);
    let (mut uniform, mut normal) = (Array1::<f32>::zeros(5 * n), Array1::<f32>::zeros(4 * n));
    let off = Array1::from_vec(offsets.to_vec());
    draws32::launch(
        device,
        1,
        &mut ints,
        &mut uniform,
        &mut normal,
        off.view(),
        seed,
        n,
    )
    .unwrap();
    (ints.to_vec(), uniform.to_vec(), normal.to_vec())
}

#[rstest]
fn draws_match_the_reference(#[values(0, 7, -1, 1 << 40, i64::MIN)] seed: i64) {
    const N: usize = 256;
    // Offsets across the whole i64 range: small, negative, near 2^31 and 2^32, large.
    let offsets: Vec<i64> = (0..N as i64)
        .map(|i| match i % 4 {
            0 => i,
            1 => -i,
            2 => (1 << 31) - 2 + i,
            _ => (i << 40) ^ (0x9E37_79B9 * i),
        })
        .collect();
    for device in devices_for(N * 32) {
        let (ints, uniform, normal) = draws(&device, seed, &offsets);
        for (i, &o) in offsets.iter().enumerate() {
            let want = randint4x_ref(seed, o, true);
            for w in 0..4 {
                assert_eq!(
                    ints[w * N + i],
                    want[w],
                    "{device:?} seed {seed} offset {o} word {w}"
                );
            }
            assert_eq!(
                uniform[i].to_bits(),
                uniform_ref(want[0]).to_bits(),
                "{device:?} offset {o}"
            );
            let (z, _) = normal_ref(uniform_ref(want[0]), uniform_ref(want[1]));
            let tol = 1e-5 * (1.0 + z.abs());
            assert!(
                ((normal[i] as f64) - z).abs() <= tol,
                "{device:?} randn at {o}: {} vs {z}",
                normal[i]
            );
        }
    }
}

#[test]
fn four_at_a_time_match_one_at_a_time() {
    const N: usize = 128;
    let offsets: Vec<i32> = (0..N as i32).map(|i| i * 7919 - 500_000).collect();
    for device in all_devices() {
        let (ints, uniform, normal) = draws_i32(&device, -12345, &offsets);
        for (i, &o) in offsets.iter().enumerate() {
            let want = randint4x_ref(-12345, o as i64, false);
            assert_eq!(ints[i], want[0], "{device:?} randint at {o}");
            assert_eq!(
                uniform[i].to_bits(),
                uniform_ref(want[0]).to_bits(),
                "{device:?} rand at {o}"
            );
            for w in 0..4 {
                let u = uniform[(1 + w) * N + i];
                assert_eq!(
                    u.to_bits(),
                    uniform_ref(want[w]).to_bits(),
                    "{device:?} rand4x word {w}"
                );
                assert!((0.0..1.0).contains(&u));
            }
            for pair in 0..2 {
                let (z0, z1) =
                    normal_ref(uniform_ref(want[2 * pair]), uniform_ref(want[2 * pair + 1]));
                for (k, z) in [z0, z1].into_iter().enumerate() {
                    let got = normal[(2 * pair + k) * N + i] as f64;
                    assert!(
                        (got - z).abs() <= 1e-5 * (1.0 + z.abs()),
                        "{device:?} randn4x at {o}: {got} vs {z}"
                    );
                }
            }
        }
    }
}

#[test]
fn umulhi_is_the_high_half_of_the_unsigned_product() {
    const N: usize = 8;
    let edges = [
        0u64,
        1,
        2,
        0x7FFF_FFFF,
        0x8000_0000,
        0xFFFF_FFFF,
        0x1_0000_0001,
        u64::MAX,
    ];
    let all = |bits: u32| edges.iter().map(move |&e| e & (u64::MAX >> (64 - bits)));
    let pairs = |bits: u32| {
        let v: Vec<u64> = all(bits).collect();
        let mut want = vec![0u64; N * N];
        for i in 0..N {
            for j in 0..N {
                want[i * N + j] = ((v[i] as u128 * v[j] as u128) >> bits) as u64;
            }
        }
        (v, want)
    };
    for device in all_devices() {
        let (v, want) = pairs(32);
        let x = Array1::from_iter(v.iter().map(|&e| e as u32));
        let mut out = Array1::<u32>::zeros(N * N);
        mul_high::launch(&device, 1, &mut out, x.view(), x.view(), N).unwrap();
        assert_eq!(
            out.to_vec(),
            want.iter().map(|&w| w as u32).collect::<Vec<_>>(),
            "{device:?} u32"
        );
        let xi = x.mapv(|e| e as i32);
        let mut outi = Array1::<i32>::zeros(N * N);
        mul_high::launch(&device, 1, &mut outi, xi.view(), xi.view(), N).unwrap();
        assert_eq!(
            outi.to_vec(),
            want.iter().map(|&w| w as i32).collect::<Vec<_>>(),
            "{device:?} i32"
        );
        let (v, want) = pairs(64);
        let x = Array1::from_vec(v);
        let mut out = Array1::<u64>::zeros(N * N);
        mul_high::launch(&device, 1, &mut out, x.view(), x.view(), N).unwrap();
        assert_eq!(out.to_vec(), want, "{device:?} u64");
        let xi = x.mapv(|e| e as i64);
        let mut outi = Array1::<i64>::zeros(N * N);
        mul_high::launch(&device, 1, &mut outi, xi.view(), xi.view(), N).unwrap();
        assert_eq!(
            outi.to_vec(),
            want.iter().map(|&w| w as i64).collect::<Vec<_>>(),
            "{device:?} i64"
        );
    }
}

/// `rand` of float offsets, as a user might write by mistake.
#[kernel]
fn rand_of_floats(out: Ptr<f32>, x: Ptr<f32>) {
    let r = arange(0, 4);
    store(out + r, rand(1, load(x + r)));
}

#[test]
fn rand_of_float_offsets_is_an_error_at_the_call() {
    let x = Array1::<f32>::zeros(4);
    let mut out = Array1::<f32>::zeros(4);
    for device in [Device::cpu(), Device::interpreter()] {
        let err = rand_of_floats::launch(&device, 1, &mut out, x.view())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("rand needs an integer offset, got f32"),
            "{err}"
        );
        assert!(err.contains("random.rs:"), "names the kernel's line: {err}");
    }
}

/// Tutorial 04's reference: what Triton's kernel computes for `x`, `p` and `seed`.
fn dropout_ref(x: ArrayView1<f32>, p: f32, seed: i32) -> Array1<f32> {
    Array1::from_iter(x.iter().enumerate().map(|(i, &v)| {
        let r = uniform_ref(randint4x_ref(seed as i64, i as i64, false)[0]);
        if r > p {
            v / (1.0 - p)
        } else {
            0.0
        }
    }))
}

#[rstest]
fn dropout_keeps_tritons_mask(#[values(1, 1000, 4097)] n: usize, #[values(0.0, 0.5, 0.9)] p: f32) {
    let x = Array1::from_vec(random_f32(n, 4)).mapv(|v| v + 2.0);
    for device in devices_for(n) {
        for seed in [123, -7] {
            let got = dropout(&device, x.view(), p, seed).unwrap();
            assert_eq!(
                got,
                dropout_ref(x.view(), p, seed),
                "{device:?} n {n} p {p} seed {seed}"
            );
        }
        // Another seed drops other elements.
        if n > 100 && p == 0.5 {
            let a = dropout(&device, x.view(), p, 1).unwrap();
            let b = dropout(&device, x.view(), p, 2).unwrap();
            assert_ne!(a.mapv(|v| v == 0.0), b.mapv(|v| v == 0.0));
            let kept = a.iter().filter(|v| **v != 0.0).count() as f64 / n as f64;
            assert!((kept - 0.5).abs() < 0.1, "kept {kept}");
        }
    }
}
