//! The CUDA backend: tile IR → NVPTX LLVM IR → PTX (LLVM's NVPTX backend, no CUDA
//! toolkit needed) → a module loaded by the driver (cudarc, loaded at run time) → a grid
//! of CTAs of `num_warps × 32` threads.
//!
//! PTX generation needs no GPU: [`compile_ptx`] works on any machine.

mod checked;
mod codegen;
pub(crate) mod emulate;
mod emulate_tma;
mod emulate_wgmma;
mod launch;
mod ptx_conversions;
mod target;
pub(crate) mod tensor_map;

pub use crate::runtime::{
    unavailable_reason, CudaDevice, CudaTensor, DeviceTensor, Ptx, SliceRange, SliceRangeMut,
    Stream,
};
pub use emulate::{shared_memory_stats, SharedMemoryStats};
pub(crate) use launch::launch;

use crate::pipeline::dump::Dumps;
use crate::pipeline::target::Target;
use crate::{Error, Result};
use tritium_dsl::ir::Function;

/// What a kernel is compiled for on CUDA.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CudaCompileOptions {
    /// The GPU architecture, `80` for `sm_80` (supported: 80, 86, 87, 89, 90).
    pub sm: u32,
    /// Warps per program (CTA); Triton's `num_warps`.
    pub num_warps: u32,
    /// Software-pipelining stages of a loop around a tensor-core `dot` that does not set
    /// its own (`range(…, num_stages = s)`); Triton's `num_stages`, 1: none.
    pub num_stages: u32,
    /// Checked mode (`TRITIUM_BOUNDS_CHECK`): the kernel takes one more parameter, a
    /// device buffer with a fault record and every buffer's range, and an out-of-bounds
    /// access is skipped and recorded instead of touching memory.
    pub bounds_check: bool,
    /// Outside checked mode, the accesses that are checked (a default launch: those its
    /// bounds proof leaves); any makes the kernel take the check buffer.
    pub sites: crate::launch::SiteChecks,
    /// On Hopper, tensor-descriptor loads feeding a pipelined `dot` are copied by TMA
    /// (`cp.async.bulk.tensor`; see `tensor_map.rs`), their tensor maps encoded at launch.
    /// A launch whose maps TMA cannot encode takes code compiled without.
    pub tma: bool,
}

impl Default for CudaCompileOptions {
    fn default() -> Self {
        CudaCompileOptions {
            sm: 80,
            num_warps: 4,
            num_stages: 3,
            bounds_check: false,
            sites: crate::launch::SiteChecks::None,
            tma: true,
        }
    }
}

/// Compiles a traced kernel to PTX whose entry is named `entry` (no GPU needed).
pub fn compile_ptx(f: &Function, entry: &str, options: &CudaCompileOptions) -> Result<Ptx> {
    let target = target::Nvptx(*options);
    let err = |message: String| Error::Compile {
        kernel: f.name.clone(),
        message,
    };
    let e = crate::pipeline::compile::generate(&target, f, entry, &Dumps::new(None, entry))
        .map_err(err)?;
    Ok(Ptx {
        entry: entry.to_string(),
        text: target.decode(&e.bytes, entry).map_err(err)?,
        shared_bytes: e.meta,
        threads: options.num_warps * 32,
    })
}

/// Compiles a traced kernel to PTX as a launch does: from the verified disk cache under
/// `TRITIUM_CACHE_DIR` (or `launch.cache_dir`) when it has the kernel, else with LLVM
/// (writing the cache entry), with `.tir`, `.ll`, `.opt.ll` and `.ptx` dumps when
/// `TRITIUM_DUMP` (or `launch.dump_dir`) is set. The entry is `tritium_<name>_<hash>`.
pub fn compile_cached(
    f: Function,
    options: &CudaCompileOptions,
    launch: &crate::LaunchOptions,
) -> Result<Ptx> {
    Ok(launch::compile(f, options, launch)?.ptx)
}

/// Runs a traced kernel on the CUDA emulator (see [`crate::Device::CudaEmulator`]) with
/// `num_warps` warps per program, after checking the arguments.
pub fn run_emulated(
    f: &Function,
    grid: crate::Grid,
    args: &crate::KernelArgs<'_>,
    num_warps: u32,
) -> Result<()> {
    let options = CudaCompileOptions {
        num_warps,
        ..Default::default()
    };
    run_emulated_with(f, grid, args, &options)
}

/// [`run_emulated`] with the code generated as for `options` (of `sm`, only whether it
/// chooses Hopper's `wgmma`): in
/// checked mode, an out-of-bounds access is the same [`Error::Runtime`] as on the CPU.
pub fn run_emulated_with(
    f: &Function,
    grid: crate::Grid,
    args: &crate::KernelArgs<'_>,
    options: &CudaCompileOptions,
) -> Result<()> {
    grid.validate(&f.name)?;
    crate::check_args(f, args)?;
    let mut k = emulate::compile(f.clone(), options, &Default::default())?;
    // As a launch does: code without TMA where this launch's tensor maps cannot be encoded.
    let maps = match k.encode_maps(&args.args) {
        Some(maps) => maps,
        None => {
            let without = CudaCompileOptions {
                tma: false,
                ..*options
            };
            k = emulate::compile(f.clone(), &without, &Default::default())?;
            Vec::new()
        }
    };
    k.run(grid, &args.args, &args.pointees, &maps)
}
