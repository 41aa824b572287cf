//! Options of one launch, with the environment's defaults.

use super::checked::SiteChecks;
use crate::pipeline::CompileOptions;
use crate::runtime::Stream;
use std::path::PathBuf;

/// Options of one launch. `None` fields take their value from the environment, read once
/// per process (`TRITIUM_BOUNDS_CHECK` and the others set after the first launch are not
/// seen; set the field instead).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LaunchOptions {
    /// Checked mode: every load, store and atomic is compared with the buffers at run
    /// time, and failed `device_assert`s become errors (`TRITIUM_BOUNDS_CHECK`,
    /// `TRITIUM_DEBUG`). Off, a launch is still sound: the kernel's bounds proof covers
    /// what it can from the launch's grid, integer arguments and buffer sizes, and the
    /// accesses it leaves are checked one by one (see [`LaunchOptions::unchecked`]).
    pub bounds_check: Option<bool>,
    /// Run through the reference interpreter (`TRITIUM_INTERPRET`).
    pub interpret: Option<bool>,
    /// Race detection on the interpreter and the CPU (`TRITIUM_RACE_CHECK`): two programs
    /// of the launch touching one element, one of them writing, without both using
    /// atomics, make the launch an error. The CPU compiles such launches in checked mode
    /// with every access reported. Another device with `Some(true)` here is an error
    /// (the environment variable is ignored there).
    pub race_check: Option<bool>,
    /// Warps per program on CUDA (Triton's `num_warps`, 1..=32, default 4): a program is
    /// a CTA of `num_warps × 32` threads. Ignored on the CPU and the interpreter.
    pub num_warps: u32,
    /// Software-pipelining stages on CUDA (Triton's `num_stages`, default 3): a loop around
    /// a tensor-core `dot` keeps the operand tiles of `num_stages - 1` iterations in shared
    /// memory, as Triton counts them on Ampere (`num_stages` on Hopper, as Triton there;
    /// fewer where they would not fit; none below 2 buffers), unless its
    /// `range(…, num_stages = s)` says otherwise. Changes no result.
    /// Ignored on the CPU and the interpreter.
    pub num_stages: u32,
    /// Root of the on-disk kernel cache (`TRITIUM_CACHE_DIR`, else `~/.cache/tritium`).
    pub cache_dir: Option<PathBuf>,
    /// Where to dump the IR, LLVM IR and assembly of compiled kernels (`TRITIUM_DUMP`).
    /// Dumps are written when a kernel is compiled, which happens once per process and
    /// set of compile options; a dump always compiles (it does not load from the disk cache).
    pub dump_dir: Option<PathBuf>,
    /// Set only by `unsafe` code ([`LaunchOptions::unchecked`]): no access is checked.
    pub unchecked: Unchecked,
    /// The CUDA stream to queue the launch on (a launch on another device is an error);
    /// `None` is the device's default stream. A launch whose buffers are all device
    /// tensors returns once queued; one with host arrays waits for the kernel.
    pub stream: Option<Stream>,
    /// The GPU architecture the CUDA emulator generates code for (`TRITIUM_EMULATE_SM`,
    /// default 80): `Some(90)` runs Hopper's code (`wgmma`) on the emulator. Ignored
    /// elsewhere (a GPU's own architecture decides there).
    pub emulated_sm: Option<u32>,
}

impl Default for LaunchOptions {
    fn default() -> Self {
        LaunchOptions {
            bounds_check: None,
            interpret: None,
            race_check: None,
            num_warps: 4,
            num_stages: 3,
            cache_dir: None,
            dump_dir: None,
            unchecked: Unchecked::default(),
            stream: None,
            emulated_sm: None,
        }
    }
}

/// The promise of [`LaunchOptions::unchecked`]: every launch made with options carrying a
/// set one touches only bytes of its buffers. Only `unsafe` code sets it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Unchecked(bool);

impl Unchecked {
    /// Whether the promise was made.
    pub fn is_set(self) -> bool {
        self.0
    }
}

/// The `TRITIUM_*` switches of launches, read from the environment once per process (at
/// the first launch that looks): four lookups per launch were a tenth of a cached launch.
struct EnvFlags {
    bounds_check: bool,
    debug: bool,
    race_check: bool,
    interpret: bool,
    emulated_sm: Option<u32>,
}

fn env_flags() -> &'static EnvFlags {
    static FLAGS: std::sync::OnceLock<EnvFlags> = std::sync::OnceLock::new();
    FLAGS.get_or_init(|| EnvFlags {
        bounds_check: env_flag("TRITIUM_BOUNDS_CHECK"),
        debug: env_flag("TRITIUM_DEBUG"),
        race_check: env_flag("TRITIUM_RACE_CHECK"),
        interpret: env_flag("TRITIUM_INTERPRET"),
        emulated_sm: std::env::var("TRITIUM_EMULATE_SM")
            .ok()
            .and_then(|v| v.trim().parse().ok()),
    })
}

fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.is_empty() && v != "0" && v.to_lowercase() != "false")
}

impl LaunchOptions {
    /// These options with no access checked at run time, even those the kernel's bounds
    /// proof does not cover: what `my_kernel::launch_unchecked` uses, today's Triton
    /// behaviour. Checked mode (`bounds_check`, `TRITIUM_BOUNDS_CHECK`) still checks
    /// every access.
    ///
    /// # Safety
    ///
    /// Every launch made with the result (and its clones) must touch, with every load,
    /// store and atomic whose mask is true, only bytes of the buffer its pointer derives
    /// from (for a pointer read from a [`PtrTable`](super::PtrTable), one of the table's
    /// buffers), and write only buffers passed as `&mut`. Otherwise the kernel reads or
    /// writes memory it does not own: undefined behaviour.
    pub unsafe fn unchecked(mut self) -> Self {
        self.unchecked = Unchecked(true);
        self
    }

    /// Checked mode for this launch: out-of-bounds accesses and failed `device_assert`s
    /// are errors. Unset, it follows `TRITIUM_BOUNDS_CHECK` or `TRITIUM_DEBUG` (Triton's
    /// `TRITON_DEBUG`).
    pub fn bounds_check(&self) -> bool {
        self.bounds_check
            .unwrap_or_else(|| env_flags().bounds_check || env_flags().debug)
    }

    /// The architecture the CUDA emulator generates code for (see
    /// [`LaunchOptions::emulated_sm`]).
    pub fn emulated_sm(&self) -> u32 {
        self.emulated_sm.or(env_flags().emulated_sm).unwrap_or(80)
    }

    /// Race detection for this launch (see [`LaunchOptions::race_check`]).
    pub fn race_check(&self) -> bool {
        self.race_check.unwrap_or_else(|| env_flags().race_check)
    }

    /// What the CPU backend compiles this launch's kernel with.
    pub fn compile_options(&self) -> CompileOptions {
        let race_check = self.race_check();
        let bounds_check = self.bounds_check() || race_check;
        CompileOptions {
            bounds_check,
            race_check,
            sites: if bounds_check || self.unchecked.is_set() {
                SiteChecks::None
            } else {
                SiteChecks::Unprovable
            },
            cache_dir: self.cache_dir.clone(),
            dump_dir: self.dump_dir.clone(),
        }
    }

    /// Interpreter mode for this launch.
    pub fn interpret(&self) -> bool {
        self.interpret.unwrap_or_else(|| env_flags().interpret)
    }
}
