//! Running a case: the interpreter, the CPU, the CUDA emulator, PTX generation, and CUDA
//! device 0 when the machine has a GPU.

use crate::case::{Arg, Case};
use std::path::PathBuf;
use tritium_backend::cuda::{compile_ptx, run_emulated_with, CudaCompileOptions};
use tritium_backend::launch::ViewLayout;
use tritium_backend::{
    cpu, interp, Device, Grid, KernelArgs, KernelKey, LaunchOptions, Memory, RawArg, RawBuffer,
};
use tritium_dsl::ir::{Function, Op};

/// Where a case runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    /// The reference interpreter.
    Interpreter,
    /// Compiled for the host CPU.
    Cpu,
    /// The CUDA lowering on host threads.
    Emulator,
    /// The CUDA lowering for Hopper (sm 90: `dot`s on `wgmma`) on host threads; only
    /// cases with a `dot` (the others' code is the emulator's).
    HopperEmulator,
    /// PTX for this `sm_` (compiled, not run).
    Ptx(u32),
    /// CUDA device 0: the PTX run on a GPU, buffers staged as a launch with host arrays
    /// stages them (`device_print` lines go to the GPU's `printf`, not compared).
    Gpu,
}

impl Target {
    /// Every target a case is checked on, the reference first.
    pub const ALL: [Target; 6] = [
        Target::Interpreter,
        Target::Cpu,
        Target::Emulator,
        Target::HopperEmulator,
        Target::Ptx(80),
        Target::Ptx(90),
    ];

    /// [`Target::ALL`], and [`Target::Gpu`] where CUDA device 0 opens.
    pub fn available() -> Vec<Target> {
        static GPU: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        let gpu = *GPU.get_or_init(|| Device::cuda(0).is_ok());
        let mut all = Target::ALL.to_vec();
        all.extend(gpu.then_some(Target::Gpu));
        all
    }

    /// A short name for reports.
    pub fn name(self) -> String {
        match self {
            Target::Interpreter => "interpreter".into(),
            Target::Cpu => "cpu".into(),
            Target::Emulator => "emulator".into(),
            Target::HopperEmulator => "emulator-sm90".into(),
            Target::Ptx(sm) => format!("ptx-sm{sm}"),
            Target::Gpu => "gpu".into(),
        }
    }
}

/// The contents of every parameter after a launch (empty for scalars), or the error.
pub type Outcome = Result<Vec<Vec<u8>>, String>;

/// Where compiled CPU kernels are cached: a directory of this process, so that a stale
/// entry from another build can never stand in for what this build generates. The first
/// call removes the directories of processes that no longer run (a crashed worker's).
pub fn cache_dir() -> PathBuf {
    static SWEPT: std::sync::Once = std::sync::Once::new();
    let root = std::env::temp_dir().join("tritium-fuzz");
    SWEPT.call_once(|| {
        let proc_fs = std::path::Path::new("/proc/self").exists();
        for entry in std::fs::read_dir(&root).into_iter().flatten().flatten() {
            let pid = entry.file_name().to_string_lossy().parse::<u32>().ok();
            let gone = pid.is_some_and(|p| {
                proc_fs
                    && p != std::process::id()
                    && !std::path::Path::new(&format!("/proc/{p}")).exists()
            });
            if gone {
                let _ = std::fs::remove_dir_all(entry.path());
            }
        }
    });
    root.join(std::process::id().to_string())
}

/// Removes this process's [`cache_dir`].
pub fn remove_cache_dir() {
    let _ = std::fs::remove_dir_all(cache_dir());
}

/// Whether `case` runs in checked mode (on the CPU, the emulator and PTX; the interpreter
/// always checks): a program with a `device_assert` of an odd seed, or written by hand.
/// Its asserts hold, so checked code must give the interpreter's results; unchecked, the
/// asserts emit nothing and the rest is what unchecked code (the fast paths: in-place
/// custom-op memory, transposed packing, prefetches) must compute. Checking every program
/// with an assert left most programs' unchecked code unfuzzed.
pub fn runs_checked(case: &Case) -> bool {
    let asserts = has_op(&case.function.body, &|op| matches!(op, Op::Assert { .. }));
    asserts && (case.seed == 0 || case.seed % 2 == 1)
}

/// How the compiled targets (the CPU, the emulator, PTX and the GPU) launch a case.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Checked mode: every access compared with the buffers, `device_assert`s on.
    Checked,
    /// A default launch (`tritium_backend::launch`, neither checked nor unchecked): the
    /// kernel's bounds proof is evaluated for the launch, and the accesses it leaves are
    /// checked one by one on the CPU (the emulator and CUDA then run in checked mode).
    Default,
    /// Unchecked code: the CPU kernel compiled and run directly, the emulator's code
    /// run directly, `LaunchOptions::unchecked` on the GPU. Only for cases whose accesses
    /// are in bounds (the generator's, by construction), or to show what the guards
    /// catch when they are not.
    Unchecked,
}

impl Mode {
    /// A short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Checked => "checked",
            Mode::Default => "default",
            Mode::Unchecked => "unchecked",
        }
    }
}

/// How `case` is launched: [`runs_checked`] cases in checked mode; out-of-bounds variants
/// the default way; the others the default way when bit 1 of their seed is clear, else
/// unchecked (so that each way gets half the programs, those with asserts too).
pub fn mode(case: &Case) -> Mode {
    if case.out_of_bounds {
        Mode::Default
    } else if runs_checked(case) {
        Mode::Checked
    } else if case.seed & 2 == 0 {
        Mode::Default
    } else {
        Mode::Unchecked
    }
}

/// Runs `case` on `target` ([`mode`]'s way); PTX targets give no buffers, only whether
/// compilation worked.
pub fn run(case: &Case, target: Target) -> Outcome {
    execute(case, target, mode(case)).outcome()
}

/// [`Target::Gpu`]'s launch path on `device` instead of CUDA device 0 (tests run it on the
/// emulator, where no GPU is).
pub fn run_gpu_path_on(case: &Case, device: &Device) -> Outcome {
    execute_on(case, Target::Gpu, mode(case), Some(device)).outcome()
}

/// What a launch did: its result, whether the guards around every buffer survived it
/// (looked at whatever the launch returned), and the buffers' contents.
#[derive(Debug, Clone, PartialEq)]
pub struct Executed {
    /// The launch's result (a PTX target's: whether compilation worked).
    pub launch: Result<(), String>,
    /// The first guard word a launch overwrote, named with its parameter (`Ok` when none).
    pub guards: Result<(), String>,
    /// Every parameter's contents after the launch (empty for scalars), then the sorted
    /// `device_print` lines when the program prints; empty for PTX targets.
    pub contents: Vec<Vec<u8>>,
}

impl Executed {
    /// The launch's error, else the guards' error, else the contents.
    pub fn outcome(self) -> Outcome {
        self.launch?;
        self.guards?;
        Ok(self.contents)
    }
}

/// Runs `case` on `target`, compiled targets launched the `mode` way.
pub fn execute(case: &Case, target: Target, mode: Mode) -> Executed {
    execute_on(case, target, mode, None)
}

fn execute_on(case: &Case, target: Target, mode: Mode, gpu: Option<&Device>) -> Executed {
    let f = &case.function;
    let checked = mode == Mode::Checked;
    if let Target::Ptx(sm) = target {
        let options = CudaCompileOptions {
            sm,
            num_warps: case.num_warps,
            bounds_check: checked,
            ..Default::default()
        };
        return Executed {
            launch: compile_ptx(f, "fuzz", &options)
                .map(|_| ())
                .map_err(|e| e.to_string()),
            guards: Ok(()),
            contents: Vec::new(),
        };
    }
    let mut words = guarded_args(case);
    let raw = raw_args(f, case, &mut words);
    let grid = Grid(case.grid);
    // A launch through `tritium_backend::launch` on `device` (the GPU target's path, and
    // the CPU's and the emulator's default launches).
    let launched = |device: &Device, emulated_sm: Option<u32>| {
        let mut args = KernelArgs::new();
        args.args = raw.clone();
        args.names = vec!["arg"; raw.len()];
        // Each case is its own kernel: the launch caches compiled kernels by key.
        let text = tritium_dsl::ir::print_function(f);
        let key = KernelKey {
            name: "fuzz",
            constexprs: format!("case={:016x}", fingerprint(&text)),
        };
        let options = LaunchOptions {
            num_warps: case.num_warps,
            // `Some(false)`, not `None`: `TRITIUM_BOUNDS_CHECK` in the environment must
            // not turn default launches into checked ones.
            bounds_check: Some(checked),
            cache_dir: Some(cache_dir()),
            emulated_sm,
            ..Default::default()
        };
        let options = match mode {
            // SAFETY: unchecked launches are made of cases in bounds by construction (the
            // generator's; the interpreter checks each one), or by tests that show what
            // the guards catch: their accesses stay within the guards' 4 KiB around each
            // buffer, memory this process owns.
            Mode::Unchecked => unsafe { options.unchecked() },
            Mode::Checked | Mode::Default => options,
        };
        let trace = |_: &_| Ok(f.clone());
        tritium_backend::launch(device, grid, &options, key, args, &trace)
    };
    let launch = || match target {
        Target::Interpreter => {
            // Programs are race-free by construction: the interpreter checks that too, and
            // that no two lanes of a store write different values to one element.
            let options = interp::InterpretOptions {
                race_check: true,
                user_ops: Some(&tritium_backend::dispatch::CPU_USER_OPS),
                lane_conflicts: true,
            };
            interp::interpret_with(f, grid, &raw, &options)
        }
        Target::Cpu if mode == Mode::Default => launched(&Device::cpu(), None),
        Target::Cpu => {
            let options = cpu::CompileOptions {
                cache_dir: Some(cache_dir()),
                bounds_check: checked,
                ..Default::default()
            };
            cpu::compile(f.clone(), &options).and_then(|k| k.run(grid, &raw, checked))
        }
        Target::Emulator | Target::HopperEmulator => {
            let sm = match target {
                Target::HopperEmulator => 90,
                _ => 80,
            };
            if mode == Mode::Default {
                return launched(&Device::cuda_emulator(), Some(sm));
            }
            let mut args = KernelArgs::new();
            args.args = raw.clone();
            args.names = vec!["arg"; raw.len()];
            let options = CudaCompileOptions {
                sm,
                num_warps: case.num_warps,
                bounds_check: checked,
                ..Default::default()
            };
            run_emulated_with(f, grid, &args, &options)
        }
        Target::Gpu => match gpu {
            Some(d) => launched(d, None),
            None => launched(&Device::cuda(0)?, None),
        },
        Target::Ptx(_) => unreachable!("handled above"),
    };
    // Printed lines are compared too, sorted (the order between programs is not fixed).
    // A GPU's `device_print` goes to its `printf`, not to the hook: nothing to compare.
    let on_gpu = target == Target::Gpu && gpu.is_none();
    let prints = !on_gpu && has_op(&f.body, &|op| matches!(op, Op::Print { .. }));
    let (result, printed) = if prints {
        tritium_backend::capture_device_prints(launch)
    } else {
        (launch(), String::new())
    };
    // The guards are looked at whatever the launch returned: one that fails must not
    // have written outside its buffers either.
    let guards = case
        .args
        .iter()
        .zip(&words)
        .enumerate()
        .try_for_each(|(i, (a, w))| match a {
            Arg::Buffer { bytes, .. } => {
                guards_intact(w, bytes.len()).map_err(|e| format!("parameter p{i}: {e}"))
            }
            Arg::Scalar(_) => Ok(()),
        });
    let mut lines: Vec<&str> = printed.lines().collect();
    lines.sort_unstable();
    let printed = prints.then(|| lines.join("\n").into_bytes());
    let contents = case
        .args
        .iter()
        .zip(&words)
        .map(|(a, w)| match a {
            Arg::Buffer { bytes, .. } => data(w, bytes.len()).to_vec(),
            Arg::Scalar(_) => Vec::new(),
        })
        .chain(printed)
        .collect();
    Executed {
        launch: result.map_err(|e| e.to_string()),
        guards,
        contents,
    }
}

/// The fault sites a default launch of `case` checks at run time (its bounds proof shows
/// every other access inside its buffers, views included), or the error that refuses it
/// before it runs: [`tritium_backend::launch::checked_sites`] for the case's arguments.
pub fn checked_sites(case: &Case) -> Result<Vec<u32>, String> {
    let mut words = guarded_args(case);
    let mut args = KernelArgs::new();
    args.args = raw_args(&case.function, case, &mut words);
    tritium_backend::launch::checked_sites(&case.function, Grid(case.grid), &args)
        .map_err(|e| e.to_string())
}

/// Each buffer argument's bytes in eight-byte words, which keep every buffer aligned for its
/// dtype, between guards (see [`guarded`]); nothing for scalars.
fn guarded_args(case: &Case) -> Vec<Vec<u64>> {
    (case.args.iter())
        .map(|a| match a {
            Arg::Buffer { bytes, .. } => guarded(bytes),
            Arg::Scalar(_) => Vec::new(),
        })
        .collect()
}

fn raw_args(f: &Function, case: &Case, words: &mut [Vec<u64>]) -> Vec<RawArg> {
    f.params
        .iter()
        .zip(&case.args)
        .zip(words.iter_mut())
        .enumerate()
        .map(|(i, ((p, a), w))| {
            let t = f.ty(p.value);
            match a {
                Arg::Buffer { bytes, .. } => {
                    let ptr = w[GUARD_WORDS..].as_mut_ptr() as usize;
                    // The generator promises 16-byte alignment of 16-bit matrices
                    // (`multiple_of(16)` on their pointers): the system allocator gives
                    // it to every buffer this large, and a promise broken here would
                    // make a false mismatch.
                    assert!(
                        ptr.is_multiple_of(16),
                        "fuzz: a buffer at {ptr:#x} is not 16-byte aligned"
                    );
                    let dtype = t.elem.pointee().expect("a pointer parameter");
                    // A strided view's elements are its rows; the rest of the buffer is gaps.
                    let (hi, view) = match case.views.iter().find(|v| v.param == i) {
                        Some(v) => {
                            let size = dtype.size_bytes();
                            assert!(
                                v.extent() * size <= bytes.len(),
                                "fuzz: a view past its buffer"
                            );
                            let stride = (v.row + v.gap) as isize;
                            let layout = ViewLayout::of(&[v.rows, v.row], &[stride, 1], size);
                            (ptr + v.extent() * size, layout)
                        }
                        None => (ptr + bytes.len(), None),
                    };
                    RawArg::Ptr(RawBuffer {
                        ptr,
                        lo: ptr,
                        hi,
                        dtype,
                        writable: true,
                        memory: Memory::Host,
                        view,
                    })
                }
                Arg::Scalar(bits) => RawArg::Scalar {
                    dtype: t.dtype().expect("a scalar parameter"),
                    bits: *bits,
                },
            }
        })
        .collect()
}

/// Words of canaries on each side of every buffer. A compiled kernel that reads past a
/// buffer's end (or before its start) gets values that no input holds, where plain heap
/// memory next to it was often zeros or a copy of nearby data and hid the read (a run
/// taken over offsets that wrap reads the line's end plus one, past a 256-element
/// input); one that writes there is caught by [`guards_intact`].
const GUARD_WORDS: usize = 512;

/// The canary at word `i` of a guard: differs from word to word, so that a read shifted by
/// some elements does not find the value it would have found at another shift.
fn canary(i: usize) -> u64 {
    let x = (i as u64 ^ 0x9e37_79b9_7f4a_7c15).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    (x ^ (x >> 31)) | 1
}

/// `bytes` in a buffer of words between two guards of canaries.
fn guarded(bytes: &[u8]) -> Vec<u64> {
    let len = bytes.len().div_ceil(8);
    let mut w: Vec<u64> = (0..2 * GUARD_WORDS + len).map(canary).collect();
    w[GUARD_WORDS..GUARD_WORDS + len].fill(0);
    data_mut(&mut w, bytes.len()).copy_from_slice(bytes);
    w
}

/// The `len` bytes of a [`guarded`] buffer.
fn data(w: &[u64], len: usize) -> &[u8] {
    &as_bytes(&w[GUARD_WORDS..])[..len]
}

fn data_mut(w: &mut [u64], len: usize) -> &mut [u8] {
    &mut as_bytes_mut(&mut w[GUARD_WORDS..])[..len]
}

/// An error naming the first guard word of a [`guarded`] buffer of `len` bytes that a
/// launch overwrote (the padding after the last byte, up to a word, counts as guard too).
fn guards_intact(w: &[u64], len: usize) -> Result<(), String> {
    let words = len.div_ceil(8);
    let after = GUARD_WORDS + words;
    if let Some(i) = (0..GUARD_WORDS).rev().find(|&i| w[i] != canary(i)) {
        let before = (GUARD_WORDS - i) * 8;
        return Err(format!(
            "memory {before} bytes before the buffer was written"
        ));
    }
    if let Some(i) = (after..w.len()).find(|&i| w[i] != canary(i)) {
        let past = (i - GUARD_WORDS) * 8 - len;
        return Err(format!(
            "memory {past} bytes past the buffer's end was written"
        ));
    }
    let tail = &as_bytes(&w[GUARD_WORDS..after])[len..];
    if tail.iter().any(|&b| b != 0) {
        return Err("the bytes after the buffer's last element were written".into());
    }
    Ok(())
}

fn as_bytes(w: &[u64]) -> &[u8] {
    // SAFETY: u64 has no padding and any byte is a valid u8; the length is in bytes.
    unsafe { std::slice::from_raw_parts(w.as_ptr() as *const u8, w.len() * 8) }
}

fn as_bytes_mut(w: &mut [u64]) -> &mut [u8] {
    // SAFETY: as `as_bytes`, and every byte pattern is a valid u64.
    unsafe { std::slice::from_raw_parts_mut(w.as_mut_ptr() as *mut u8, w.len() * 8) }
}

/// Whether `f` has a `dot`: only then does Hopper's code ([`Target::HopperEmulator`])
/// differ from the emulator's.
pub(crate) fn has_dot(f: &tritium_dsl::ir::Function) -> bool {
    has_op(&f.body, &|op| matches!(op, Op::Dot { .. }))
}

/// Whether `b` (or a region in it) holds an op that `is` accepts.
fn has_op(b: &tritium_dsl::ir::Block, is: &dyn Fn(&Op) -> bool) -> bool {
    b.insts
        .iter()
        .any(|i| is(&i.op) || i.op.regions().into_iter().any(|r| has_op(r, is)))
}

/// FNV-1a of `text`, a case's program: its kernel key on the GPU.
fn fingerprint(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A guarded buffer holds its bytes between canaries; a write to either guard, or to
    /// the padding after the last byte, is reported with where it was.
    #[test]
    fn writes_around_a_buffer_are_caught() {
        let bytes: Vec<u8> = (1..=13).collect();
        let fresh = guarded(&bytes);
        assert_eq!(data(&fresh, bytes.len()), &bytes[..]);
        assert_eq!(guards_intact(&fresh, bytes.len()), Ok(()));
        let cases: [(usize, &str); 5] = [
            (GUARD_WORDS - 1, "8 bytes before"),
            (0, "4096 bytes before"),
            // 13 bytes take 2 words: bytes 13..16 are padding, then the guard.
            (GUARD_WORDS + 1, "after the buffer's last element"),
            (GUARD_WORDS + 2, "3 bytes past the buffer's end"),
            (GUARD_WORDS + 12, "83 bytes past the buffer's end"),
        ];
        for (word, want) in cases {
            let mut w = fresh.clone();
            w[word] ^= 1 << 60;
            let e = guards_intact(&w, bytes.len()).expect_err(want);
            assert!(e.contains(want), "word {word}: {e}");
        }
        // Neighbouring guard words differ: a read shifted by a word finds another value.
        assert!((1..GUARD_WORDS).all(|i| canary(i) != canary(i - 1)));
    }
}
