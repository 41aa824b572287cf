//! Dispatch: which target runs a launch. [`launch`] checks what every target needs (grid,
//! streams, host memory, arguments), then hands the kernel to CUDA, the emulator, the
//! interpreter or the CPU. The only module that knows every target.

use crate::launch::{bounds, buffers, Memory, TraceFn};
use crate::launch::{check_args, check_args_written, Grid, KernelArgs, KernelKey, LaunchOptions};
use crate::runtime::CudaDevice;
use crate::{Error, Result};
use std::sync::Arc;
use tritium_dsl::trace::Specialization;

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

/// Launches a kernel on `device` over `grid` (what `my_kernel::launch` calls).
pub fn launch(
    device: &Device,
    grid: impl Into<Grid>,
    options: &LaunchOptions,
    key: KernelKey,
    args: KernelArgs<'_>,
    trace: TraceFn<'_>,
) -> Result<()> {
    let grid = grid.into();
    grid.validate(key.name)?;
    if let Some(problem) = args.problems.first() {
        return Err(Error::Launch {
            kernel: key.name.to_string(),
            message: problem.clone(),
        });
    }
    let spec = args.specialization(matches!(device, Device::Cuda(_) | Device::CudaEmulator));
    // A panic in the kernel body's Rust code while tracing is an error at its line; every
    // trace error names the kernel.
    let guarded = |spec: &Specialization| {
        crate::pipeline::stats::timed(crate::pipeline::stats::Phase::Trace, || {
            tritium_dsl::trace::catch_panic(key.name, || trace(spec))
        })
        .map_err(|e| e.in_kernel(key.name))
    };
    let trace: TraceFn<'_> = &guarded;
    if let Some(stream) = &options.stream {
        if !matches!(device, Device::Cuda(_)) {
            return Err(Error::Launch {
                kernel: key.name.to_string(),
                message: format!(
                    "LaunchOptions::stream is set but the launch is on {}; streams order CUDA launches only",
                    device.name()
                ),
            });
        }
        if stream.device() != *device {
            return Err(Error::Launch {
                kernel: key.name.to_string(),
                message: format!(
                    "the stream belongs to {:?}, the launch is on {:?}",
                    stream.device(),
                    device
                ),
            });
        }
    }
    let on_gpu = matches!(device, Device::Cuda(_) | Device::CudaEmulator);
    if on_gpu && !options.interpret() && options.race_check == Some(true) {
        return Err(Error::Launch {
            kernel: key.name.to_string(),
            message: format!(
                "LaunchOptions::race_check runs on the CPU and the interpreter; this launch is on {}",
                device.name()
            ),
        });
    }
    if let Device::Cuda(gpu) = device {
        if !options.interpret() {
            return crate::cuda::launch(gpu, grid, options, &key, &args, trace);
        }
    }
    check_host_memory(key.name, &args)?;
    if crate::cpu::deferred::deferred(device, &key, &spec, options, trace)? {
        return Ok(());
    }
    if *device == Device::CudaEmulator && !options.interpret() {
        let mut copts = crate::cuda::CudaCompileOptions {
            sm: options.emulated_sm(),
            num_warps: options.num_warps,
            num_stages: options.num_stages,
            bounds_check: options.bounds_check(),
            sites: options.compile_options().sites,
            tma: true,
        };
        let mut k = crate::cuda::emulate::compiled(&key, &spec, &copts, options, trace)?;
        check_args(&k.function, &args)?;
        // The accesses the launch's bounds proof leaves are checked.
        if let Some(more) = bounds::more_checks(
            k.proof.as_ref(),
            &k.checked_sites,
            grid,
            &args.args,
            &args.pointees,
        )? {
            more.apply(&mut copts.bounds_check, &mut copts.sites);
            k = crate::cuda::emulate::compiled(&key, &spec, &copts, options, trace)?;
        }
        // As on a GPU: tensor maps TMA cannot encode for this launch, code without TMA.
        let maps = match k.encode_maps(&args.args) {
            Some(maps) => maps,
            None => {
                copts.tma = false;
                k = crate::cuda::emulate::compiled(&key, &spec, &copts, options, trace)?;
                Vec::new()
            }
        };
        return k.run(grid, &args.args, &args.pointees, &maps);
    }
    if matches!(device, Device::Interpreter | Device::Cuda(_)) || options.interpret() {
        let f = trace(&spec)?;
        check_args(&f, &args)?;
        let interp = crate::interp::InterpretOptions {
            race_check: options.race_check(),
            user_ops: Some(&CPU_USER_OPS),
            lane_conflicts: false,
        };
        return crate::interp::interpret_launch(&f, grid, &args.args, &args.pointees, &interp);
    }
    let compiled = crate::cpu::compiled(&key, &spec, options, trace)?;
    check_args_written(&compiled.function, compiled.written_params(), &args)?;
    // The accesses the launch's bounds proof leaves are checked.
    let compiled = crate::cpu::proven(compiled, &key, &spec, options, grid, &args)?;
    compiled.run_launch(grid, &args.args, &args.pointees)
}

/// Checks that every buffer (pointer tables' entries too) is in host memory (the CPU and
/// the interpreter read it).
fn check_host_memory(kernel: &str, args: &KernelArgs<'_>) -> Result<()> {
    let name = |i: usize| args.names.get(i).copied().unwrap_or("?");
    for (name, b) in buffers(name, &args.args, &args.pointees) {
        if let Memory::Cuda(n) = b.memory {
            return Err(Error::Launch {
                kernel: kernel.to_string(),
                message: format!(
                    "argument `{name}` is a tensor on CUDA device {n}; launch on `Device::cuda({n})` or copy it to the host"
                ),
            });
        }
    }
    Ok(())
}

/// The CPU backend as the interpreter's compiler of user custom ops' calls
/// ([`crate::interp::HostCompiler`]).
pub static CPU_USER_OPS: CpuUserOps = CpuUserOps;

/// See [`CPU_USER_OPS`].
#[derive(Debug)]
pub struct CpuUserOps;

impl crate::interp::HostCompiler for CpuUserOps {
    fn compile(&self, f: tritium_dsl::ir::Function) -> Result<Box<dyn crate::interp::HostKernel>> {
        let options = LaunchOptions::default().compile_options();
        Ok(Box::new(crate::cpu::compile(f, &options)?))
    }
}

impl crate::interp::HostKernel for crate::cpu::Compiled {
    fn run(&self, args: &[crate::launch::RawArg]) -> Result<()> {
        self.run_launch(Grid([1, 1, 1]), args, &[])
    }
}
