//! Devices, grids and launch options.

use crate::cuda::{CudaDevice, Stream};
use crate::pipeline::CompileOptions;
use crate::{Error, Result};
use std::path::PathBuf;
use std::sync::Arc;

/// Where a launch runs.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Device {
    /// The host CPU: JIT-compiled code on a thread pool.
    Cpu,
    /// The reference interpreter (ndarray), one program after another.
    Interpreter,
    /// A CUDA GPU: PTX from LLVM's NVPTX backend, loaded and launched through the driver.
    Cuda(Arc<CudaDevice>),
    /// The CUDA code generator's output run on host threads, `num_warps × 32` OS threads
    /// per program, one program after another: slow, for testing the CUDA lowering on
    /// machines without a GPU.
    CudaEmulator,
}

impl Device {
    /// The host CPU.
    pub fn cpu() -> Device {
        Device::Cpu
    }

    /// The reference interpreter.
    pub fn interpreter() -> Device {
        Device::Interpreter
    }

    /// CUDA device `ordinal`. An error, never a panic, when the driver (libcuda) is
    /// missing, fails to initialize, or has no such device.
    pub fn cuda(ordinal: usize) -> Result<Device> {
        Ok(Device::Cuda(CudaDevice::open(ordinal)?))
    }

    /// The CUDA emulator (see [`Device::CudaEmulator`]).
    pub fn cuda_emulator() -> Device {
        Device::CudaEmulator
    }

    /// Waits until every launch and copy queued on the device (any stream) has finished,
    /// like `torch.cuda.synchronize()`; a kernel that failed after its launch returned
    /// reports here. Launches on the CPU, the interpreter and the emulator return when
    /// done, so for them this returns at once.
    pub fn synchronize(&self) -> Result<()> {
        match self {
            Device::Cuda(gpu) => gpu.synchronize_all(),
            _ => Ok(()),
        }
    }

    /// A short name for cache keys and messages.
    pub fn name(&self) -> &'static str {
        match self {
            Device::Cpu => "cpu",
            Device::Interpreter => "interpreter",
            Device::Cuda(_) => "cuda",
            Device::CudaEmulator => "cuda-emulator",
        }
    }
}

/// A launch grid: the number of programs along up to three axes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Grid(pub [u64; 3]);

/// The most programs one launch may have (2^48: a 65535³ CUDA grid fits). A validated
/// grid's program count fits `u64` arithmetic with room to spare.
pub const MAX_PROGRAMS: u64 = 1 << 48;

impl Grid {
    /// Total number of programs (saturating; [`Grid::validate`] bounds it).
    pub fn programs(&self) -> u64 {
        self.0.iter().fold(1u64, |p, &n| p.saturating_mul(n))
    }

    /// Checks that every axis has at least one program and fits an i32 program id, and
    /// that the grid has at most [`MAX_PROGRAMS`] programs.
    pub fn validate(&self, kernel: &str) -> Result<()> {
        let err = |message: String| Error::Launch {
            kernel: kernel.to_string(),
            message,
        };
        for (axis, &n) in self.0.iter().enumerate() {
            if n == 0 || n > i32::MAX as u64 {
                return Err(err(format!(
                    "grid axis {axis} is {n}; each axis needs 1..=2^31-1 programs"
                )));
            }
        }
        let [x, y, z] = self.0;
        if (x as u128) * (y as u128) * (z as u128) > MAX_PROGRAMS as u128 {
            return Err(err(format!(
                "grid {x} × {y} × {z} has more than 2^48 programs (the most one launch may have)"
            )));
        }
        Ok(())
    }
}

macro_rules! grid_from {
    ($($t:ty),*) => {$(
        impl From<$t> for Grid { fn from(n: $t) -> Grid { Grid([n as u64, 1, 1]) } }
        impl From<[$t; 1]> for Grid { fn from(g: [$t; 1]) -> Grid { Grid([g[0] as u64, 1, 1]) } }
        impl From<[$t; 2]> for Grid { fn from(g: [$t; 2]) -> Grid { Grid([g[0] as u64, g[1] as u64, 1]) } }
        impl From<[$t; 3]> for Grid { fn from(g: [$t; 3]) -> Grid { Grid([g[0] as u64, g[1] as u64, g[2] as u64]) } }
        impl From<($t, $t)> for Grid { fn from(g: ($t, $t)) -> Grid { Grid([g.0 as u64, g.1 as u64, 1]) } }
        impl From<($t, $t, $t)> for Grid { fn from(g: ($t, $t, $t)) -> Grid { Grid([g.0 as u64, g.1 as u64, g.2 as u64]) } }
    )*};
}
grid_from!(u32, u64, usize, i32);

/// Options of one launch. `None` fields take their value from the environment.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LaunchOptions {
    /// Checked mode: out-of-bounds loads and stores become errors (`TRITIUM_BOUNDS_CHECK`).
    pub bounds_check: Option<bool>,
    /// Run through the reference interpreter (`TRITIUM_INTERPRET`).
    pub interpret: Option<bool>,
    /// Warps per program on CUDA (Triton's `num_warps`, 1..=32, default 4): a program is
    /// a CTA of `num_warps × 32` threads. Ignored on the CPU and the interpreter.
    pub num_warps: u32,
    /// Root of the on-disk kernel cache (`TRITIUM_CACHE_DIR`, else `~/.cache/tritium`).
    pub cache_dir: Option<PathBuf>,
    /// Where to dump the IR, LLVM IR and assembly of compiled kernels (`TRITIUM_DUMP`).
    /// Dumps are written when a kernel is compiled, which happens once per process and
    /// set of compile options; a dump always compiles (it does not load from the disk cache).
    pub dump_dir: Option<PathBuf>,
    /// The CUDA stream to queue the launch on (a launch on another device is an error);
    /// `None` is the device's default stream. A launch whose buffers are all device
    /// tensors returns once queued; one with host arrays waits for the kernel.
    pub stream: Option<Stream>,
}

impl Default for LaunchOptions {
    fn default() -> Self {
        LaunchOptions {
            bounds_check: None,
            interpret: None,
            num_warps: 4,
            cache_dir: None,
            dump_dir: None,
            stream: None,
        }
    }
}

fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| !v.is_empty() && v != "0" && v.to_lowercase() != "false")
}

impl LaunchOptions {
    /// Checked mode for this launch.
    pub fn bounds_check(&self) -> bool {
        self.bounds_check
            .unwrap_or_else(|| env_flag("TRITIUM_BOUNDS_CHECK"))
    }

    /// What the CPU backend compiles this launch's kernel with.
    pub fn compile_options(&self) -> CompileOptions {
        CompileOptions {
            bounds_check: self.bounds_check(),
            cache_dir: self.cache_dir.clone(),
            dump_dir: self.dump_dir.clone(),
        }
    }

    /// Interpreter mode for this launch.
    pub fn interpret(&self) -> bool {
        self.interpret
            .unwrap_or_else(|| env_flag("TRITIUM_INTERPRET"))
    }
}
