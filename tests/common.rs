//! Helpers shared by the test modules.

use ndarray::{ArrayBase, Data, Dimension};
use tritium::dsl::trace::Specialization;
use tritium::Device;

/// The devices a kernel test over `elements` elements runs on: the CPU, the interpreter,
/// the CUDA lowering on the emulator (up to [`EMULATED_ELEMENTS`]: it runs every GPU
/// thread in turn on one OS thread), and CUDA device 0 when a GPU is present. What is skipped is
/// reported with the reason.
pub fn devices_for(elements: usize) -> Vec<Device> {
    let mut all = vec![Device::cpu(), Device::interpreter()];
    if elements <= EMULATED_ELEMENTS {
        all.push(Device::cuda_emulator());
    } else {
        eprintln!("skipped on the CUDA emulator: {elements} elements (at most {EMULATED_ELEMENTS}; every GPU thread runs in turn on one core)");
    }
    all.extend(cuda_device("this case"));
    all
}

/// The largest case run on the CUDA emulator.
pub const EMULATED_ELEMENTS: usize = 1 << 16;

/// Every device, for small cases (the CUDA emulator included).
pub fn all_devices() -> Vec<Device> {
    devices_for(0)
}

/// CUDA device 0, or `None` after printing why `what` is skipped on CUDA.
pub fn cuda_device(what: &str) -> Option<Device> {
    match Device::cuda(0) {
        Ok(d) => Some(d),
        Err(e) => {
            eprintln!("skipped {what} on CUDA: {e}");
            None
        }
    }
}

/// Deterministic pseudo-random values in [-1, 1) (xorshift), so failures reproduce.
pub fn random_f32(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

/// [`random_f32`] rounded to f16.
pub fn random_f16(n: usize, seed: u64) -> Vec<half::f16> {
    random_f32(n, seed)
        .into_iter()
        .map(half::f16::from_f32)
        .collect()
}

/// Asserts `|got - want| <= atol + rtol * |want|` elementwise, naming the first mismatch.
pub fn assert_close<S1, S2, D>(
    got: &ArrayBase<S1, D>,
    want: &ArrayBase<S2, D>,
    rtol: f64,
    atol: f64,
    what: &str,
) where
    S1: Data,
    S2: Data,
    S1::Elem: Copy + Into<f64>,
    S2::Elem: Copy + Into<f64>,
    D: Dimension,
{
    assert_eq!(got.shape(), want.shape(), "{what}: shapes differ");
    for ((i, g), w) in got.indexed_iter().zip(want.iter()) {
        let (g, w): (f64, f64) = ((*g).into(), (*w).into());
        let ok = (g - w).abs() <= atol + rtol * w.abs() || (g.is_nan() && w.is_nan());
        assert!(ok, "{what}: at {i:?} got {g}, want {w}");
    }
}

/// erf in f64: the Taylor series up to |x| = 3 (under 1e-12 of cancellation), else
/// 1 − erfc with Numerical Recipes' Chebyshev erfc (relative error 1.2e-7 of an erfc under
/// 2.3e-5).
pub fn erf_f64(x: f64) -> f64 {
    if x.abs() > 3.0 {
        let z = x.abs();
        let t = 1.0 / (1.0 + 0.5 * z);
        let c = [
            -1.26551223,
            1.00002368,
            0.37409196,
            0.09678418,
            -0.18628806,
            0.27886807,
            -1.13520398,
            1.48851587,
            -0.82215223,
            0.17087277,
        ];
        let p = c.iter().rev().fold(0.0, |acc, k| acc * t + k);
        return x.signum() * (1.0 - t * (p - z * z).exp());
    }
    let (mut term, mut sum, z) = (x, x, x * x);
    for n in 1..400 {
        term *= -z / n as f64;
        let add = term / (2 * n + 1) as f64;
        sum += add;
        if add.abs() < 1e-18 * sum.abs() {
            break;
        }
    }
    sum * std::f64::consts::FRAC_2_SQRT_PI
}

/// The dumps (`TRITIUM_DUMP`) of the kernel `launch` compiles, by what follows the first
/// `.` of each file name: `"tir"`, `"ll"`, `"opt.ll"`, `"s"`. `launch` gets options that
/// dump into a fresh directory named after `what`, removed afterwards.
pub fn dumps_of(what: &str, launch: impl FnOnce(&tritium::LaunchOptions)) -> Dumps {
    let dir = std::env::temp_dir().join(format!("tritium-{what}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let options = tritium::LaunchOptions {
        dump_dir: Some(dir.clone()),
        ..Default::default()
    };
    launch(&options);
    let files = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("no dumps in {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter_map(|p| {
            let name = p.file_name()?.to_string_lossy().into_owned();
            let ext = name.split_once('.')?.1.to_string();
            Some((ext, std::fs::read_to_string(&p).unwrap()))
        })
        .collect();
    let _ = std::fs::remove_dir_all(&dir);
    Dumps(files)
}

/// What [`dumps_of`] found.
pub struct Dumps(Vec<(String, String)>);

impl Dumps {
    /// The dump of this kind (`"s"`, `"ll"`, …); panics when there is none.
    pub fn get(&self, ext: &str) -> &str {
        (self.0.iter())
            .find(|(e, _)| e == ext)
            .map(|(_, text)| text.as_str())
            .unwrap_or_else(|| panic!("no .{ext} dump"))
    }
}

/// True when `asm` has an `op` instruction on 256- or 512-bit registers.
pub fn packed(asm: &str, op: &str) -> bool {
    asm.lines().any(|l| {
        let l = l.trim();
        l.starts_with(op) && (l.contains("ymm") || l.contains("zmm"))
    })
}

/// A matmul kernel (`tritium_kernels::matmul`'s twelve runtime parameters: `c`, `a`, `b`,
/// `m`, `n`, `k`, six strides) specialized as a launch at the benchmarks' sizes
/// specializes it: the parameters at `ones` (unit strides) equal 1, the others divisible
/// by 16 (the pointers 16-byte aligned).
/// The specialization of a launch whose `params` parameters (pointers and integers) are
/// all multiples of 16, none 1.
pub fn all_sixteens(params: usize) -> Specialization {
    Specialization {
        ones: vec![false; params],
        sixteens: vec![true; params],
    }
}

pub fn matmul_specialization(ones: &[usize]) -> Specialization {
    Specialization {
        ones: (0..12).map(|i| ones.contains(&i)).collect(),
        sixteens: (0..12).map(|i| !ones.contains(&i)).collect(),
    }
}

/// `run` on the CUDA emulator, then on the interpreter: both results, and the shared
/// memory the emulator's run saw (`shared_memory_stats`, reset first).
pub fn emulated_and_interpreted<T>(
    run: impl Fn(&Device) -> T,
) -> (T, T, tritium::backend::cuda::SharedMemoryStats) {
    use tritium::backend::cuda::shared_memory_stats;
    shared_memory_stats();
    let got = run(&Device::cuda_emulator());
    let stats = shared_memory_stats();
    (got, run(&Device::interpreter()), stats)
}
