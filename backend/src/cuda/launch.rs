//! A launch on a CUDA device: trace → PTX (memory cache, then the disk cache, then LLVM)
//! → a module loaded once per device → host buffers staged in device memory → the grid,
//! queued on the launch's stream (asynchronous when no host buffer needs copying back).

use super::checked::DeviceCheck;
use super::{CudaCompileOptions, Ptx};
use crate::launch::{bounds, buffers, Memory, RawArg, SiteBits, SiteChecks, TraceFn};
use crate::launch::{check_args, named_buffers, Grid, KernelArgs, KernelKey, LaunchOptions};
use crate::pipeline::once::OnceMap;
use crate::runtime::{driver_error, CudaDevice};
use crate::{Error, Result};
use cudarc::driver::{result, CudaSlice, CudaStream, DevicePtr};
use std::path::PathBuf;
use std::sync::Arc;
use tritium_dsl::ir::Function;
use tritium_dsl::trace::Specialization;

/// A kernel compiled to PTX for one architecture and warp count.
pub(crate) struct CompiledPtx {
    pub function: Function,
    pub key_hash: String,
    pub ptx: Ptx,
    /// Checked code reads the list of every buffer (it has pointers made from integers).
    pub buffer_list: bool,
    /// The kernel's bounds proof (a default launch's kernel only).
    pub proof: Option<crate::launch::bounds::LaunchProof>,
    /// Outside checked mode, the checked sites (ascending).
    pub checked_sites: Vec<u32>,
    /// The kernel takes the check buffer (checked mode, or some site checked).
    pub checked: bool,
    /// The accesses made by TMA, whose tensor maps each launch encodes (`tensor_map.rs`).
    pub maps: Vec<super::tensor_map::PlannedMap>,
}

type MemKey = (
    KernelKey,
    Specialization,
    CudaCompileOptions,
    Option<PathBuf>,
    Option<PathBuf>,
);

/// PTX compiled in this process.
static COMPILED: OnceMap<MemKey, CompiledPtx> = OnceMap::new();

/// Launches `key` on `gpu` (what [`crate::launch`] calls for a CUDA device) on the
/// options' stream. With host arrays among the arguments it returns after the kernel has
/// finished and written arrays are copied back; with device tensors only, once queued.
pub(crate) fn launch(
    gpu: &Arc<CudaDevice>,
    grid: Grid,
    options: &LaunchOptions,
    key: &KernelKey,
    args: &KernelArgs<'_>,
    trace: TraceFn<'_>,
) -> Result<()> {
    let launch_err = |message: String| Error::Launch {
        kernel: key.name.to_string(),
        message,
    };
    if grid.0[1] > 65535 || grid.0[2] > 65535 {
        return Err(launch_err(format!(
            "grid {:?}: CUDA allows at most 65535 programs along axes 1 and 2",
            grid.0
        )));
    }
    let name = |i: usize| args.names.get(i).copied().unwrap_or("?");
    for (name, b) in buffers(name, &args.args, &args.pointees) {
        if let Memory::Cuda(n) = b.memory {
            if n != gpu.ordinal() {
                return Err(launch_err(format!(
                    "argument `{name}` lives on CUDA device {n}, the launch is on device {}",
                    gpu.ordinal()
                )));
            }
        }
    }
    let mut copts = CudaCompileOptions {
        sm: gpu.sm()?,
        num_warps: options.num_warps,
        num_stages: options.num_stages,
        bounds_check: options.bounds_check(),
        sites: options.compile_options().sites,
        tma: true,
    };
    let spec = args.specialization(true);
    let mut compiled = compiled(key, &spec, &copts, options, trace)?;
    check_args(&compiled.function, args)?;
    // The accesses the launch's bounds proof leaves are checked.
    let proof = compiled.proof.as_ref();
    let checked = &compiled.checked_sites;
    if let Some(more) = bounds::more_checks(proof, checked, grid, &args.args, &args.pointees)? {
        more.apply(&mut copts.bounds_check, &mut copts.sites);
        compiled = self::compiled(key, &spec, &copts, options, trace)?;
    }
    let mut kernel = gpu.load(&compiled.key_hash, &compiled.ptx)?;
    let stream = match &options.stream {
        Some(s) if !Arc::ptr_eq(s.gpu(), gpu) => {
            return Err(launch_err(format!(
                "the stream belongs to CUDA device {}, the launch is on device {}",
                s.gpu().ordinal(),
                gpu.ordinal()
            )))
        }
        Some(s) => s.cuda().clone(),
        None => gpu.stream().clone(),
    };
    let staged = Staging::copy_in(gpu, &stream, args)?;
    let mut values: Vec<u64> = args
        .args
        .iter()
        .map(|a| match a {
            RawArg::Ptr(b) => staged.device_address(b.ptr, b.memory),
            RawArg::Scalar { bits, .. } => *bits,
        })
        .collect();
    // Checked mode: the check buffer is one more parameter (ranges in device addresses).
    let check = match compiled.checked {
        true => {
            let buffers = named_buffers(&compiled.function, &args.args, &args.pointees);
            Some(DeviceCheck::copy_in(
                gpu,
                &stream,
                &buffers,
                &args.args,
                compiled.buffer_list,
                |b| {
                    let lo = staged.device_address(b.lo, b.memory);
                    (lo, lo.wrapping_add((b.hi - b.lo) as u64))
                },
            )?)
        }
        false => None,
    };
    values.extend(check.as_ref().map(|c| c.address));
    // Tensor maps, after the check buffer (`tensor_map.rs`): a launch whose maps TMA (or
    // the driver) cannot encode takes the kernel compiled without TMA.
    let params = &values[..args.args.len()];
    let encoded = super::tensor_map::encode_all(&compiled.maps, params).and_then(|encodings| {
        (encodings.iter())
            .map(super::tensor_map::encode_on_driver)
            .collect::<std::result::Result<Vec<_>, _>>()
    });
    let mut maps = match encoded {
        Ok(maps) => maps,
        Err(_) => {
            copts.tma = false;
            compiled = self::compiled(key, &spec, &copts, options, trace)?;
            kernel = gpu.load(&compiled.key_hash, &compiled.ptx)?;
            Vec::new()
        }
    };
    // The driver reads each parameter's size from the kernel: the low bytes of each
    // little-endian u64 are the value.
    let mut params: Vec<*mut std::ffi::c_void> =
        values.iter_mut().map(|v| (v as *mut u64).cast()).collect();
    params.extend(maps.iter_mut().map(|m| m.as_mut_ptr().cast()));
    gpu.bind()?;
    for (writes, uses) in &args.device_uses {
        uses.order_before(&stream, *writes)?;
    }
    let [x, y, z] = grid.0;
    // SAFETY: `params` has one pointer per kernel parameter (checked by `check_args`; the
    // check buffer follows them in checked mode, then the planned tensor maps, 128 bytes
    // each), each to a value of at least the parameter's size (the driver copies them at
    // the call). Staged host buffers and the
    // check buffer live until the stream is synchronized below; device tensors are freed
    // only after the use recorded below.
    unsafe {
        result::launch_kernel(
            kernel.function,
            (x as u32, y as u32, z as u32),
            (kernel.threads, 1, 1),
            kernel.shared_bytes as u32,
            stream.cu_stream(),
            &mut params,
        )
    }
    .map_err(|e| driver_error(&format!("launching `{}`", key.name), e))?;
    for (writes, uses) in &args.device_uses {
        uses.record(&stream, *writes)?;
    }
    if staged.regions.is_empty() && check.is_none() {
        // Only device memory: asynchronous, like Triton; a failure shows at the next
        // synchronization (a copy to the host, `Stream::synchronize`).
        return Ok(());
    }
    staged.copy_out(&stream).map_err(|e| match e {
        Error::Device(m) => Error::Device(format!("kernel `{}`: {m}", key.name)),
        e => e,
    })?;
    match check {
        Some(c) => c.result(&stream, &compiled.function),
        None => Ok(()),
    }
}

/// The PTX for this launch, compiled at most once per process and options.
fn compiled(
    key: &KernelKey,
    spec: &Specialization,
    copts: &CudaCompileOptions,
    options: &LaunchOptions,
    trace: TraceFn<'_>,
) -> Result<Arc<CompiledPtx>> {
    let (cache, dump) = (&options.cache_dir, &options.dump_dir);
    COMPILED.get_or_make_like(
        &(key, spec, copts, cache, dump),
        |k| k.0 == *key && k.1 == *spec && k.2 == *copts && k.3 == *cache && k.4 == *dump,
        || {
            (
                key.clone(),
                spec.clone(),
                *copts,
                cache.clone(),
                dump.clone(),
            )
        },
        || compile(trace(spec)?, copts, options),
    )
}

/// PTX for `f` from the disk cache (verified) or LLVM; `TRITIUM_DUMP` always runs LLVM.
pub(crate) fn compile(
    f: Function,
    copts: &CudaCompileOptions,
    options: &LaunchOptions,
) -> Result<CompiledPtx> {
    // A default launch's kernel: its bounds proof is derived once, here, and the code
    // generator gets the sites no launch proves as a list (the same code, from the same
    // list, without deriving the proof again).
    let (proof, checked_sites) = bounds::compiled_checks(&f, copts.bounds_check, copts.sites);
    let mut generated = *copts;
    if proof.is_some() {
        if let Some(bits) = SiteBits::of(&checked_sites) {
            generated.sites = SiteChecks::Listed(bits);
        }
    }
    let c = crate::pipeline::compile::compile(
        &super::target::Nvptx(generated),
        f,
        &options.compile_options(),
    )?;
    let checked = copts.bounds_check || !checked_sites.is_empty();
    let buffer_list = checked && !c.function.foreign_pointers().is_empty();
    let maps = super::tensor_map::planned(&c.function, copts);
    Ok(CompiledPtx {
        maps,
        buffer_list,
        proof,
        checked_sites,
        checked,
        function: c.function,
        key_hash: c.key_hash,
        ptx: Ptx {
            entry: c.symbol,
            text: c.code,
            shared_bytes: c.meta,
            threads: copts.num_warps * 32,
        },
    })
}

/// Host buffers copied to the device for one launch. Overlapping buffers share one
/// device copy (so aliasing is preserved); regions holding a written buffer are copied
/// back whole after the kernel. A pointer table's device copy holds its entries' device
/// addresses.
struct Staging {
    regions: Vec<Region>,
    /// The translated pointer tables, alive until the stream is synchronized (their
    /// copies are queued on it).
    _tables: Vec<Vec<u8>>,
}

struct Region {
    lo: usize,
    hi: usize,
    writable: bool,
    device: CudaSlice<u8>,
    base: u64,
}

impl Staging {
    fn copy_in(
        gpu: &CudaDevice,
        stream: &Arc<CudaStream>,
        args: &KernelArgs<'_>,
    ) -> Result<Staging> {
        let buffers = (args.args.iter())
            .filter_map(|a| match a {
                RawArg::Ptr(b) => Some(b),
                RawArg::Scalar { .. } => None,
            })
            .chain(args.pointees.iter().map(|e| &e.buffer));
        let mut spans: Vec<(usize, usize, bool)> = buffers
            .filter(|b| b.memory == Memory::Host)
            .map(|b| (b.lo, b.hi, b.writable))
            .collect();
        spans.sort_unstable();
        let mut merged: Vec<(usize, usize, bool)> = Vec::new();
        for (lo, hi, w) in spans {
            match merged.last_mut() {
                Some(last) if lo < last.1 => {
                    last.1 = last.1.max(hi);
                    last.2 |= w;
                }
                _ => merged.push((lo, hi, w)),
            }
        }
        let mut regions = Vec::with_capacity(merged.len());
        for (lo, hi, writable) in merged {
            let mut device = gpu.alloc_on(stream, hi - lo)?;
            if hi > lo {
                // SAFETY: `[lo, hi)` is inside buffers borrowed by the launch's arguments.
                let host = unsafe { std::slice::from_raw_parts(lo as *const u8, hi - lo) };
                let mut view = device.slice_mut(0..hi - lo);
                stream
                    .memcpy_htod(host, &mut view)
                    .map_err(|e| driver_error("copying an argument to the GPU", e))?;
            }
            let base = device.device_ptr(stream).0;
            regions.push(Region {
                lo,
                hi,
                writable,
                base,
                device,
            });
        }
        let mut staging = Staging {
            regions,
            _tables: Vec::new(),
        };
        staging.translate_tables(stream, args)?;
        Ok(staging)
    }

    /// Overwrites each pointer table's device copy with its entries' device addresses.
    fn translate_tables(&mut self, stream: &Arc<CudaStream>, args: &KernelArgs<'_>) -> Result<()> {
        for (arg, a) in args.args.iter().enumerate() {
            let RawArg::Ptr(table) = a else { continue };
            let entries = args.pointees.iter().filter(|e| e.arg == arg);
            let bytes: Vec<u8> = entries
                .flat_map(|e| (self.device_address(e.buffer.ptr, e.buffer.memory)).to_le_bytes())
                .collect();
            if bytes.is_empty() || table.memory != Memory::Host {
                continue;
            }
            let Some(r) = (self.regions.iter_mut()).find(|r| r.lo <= table.ptr && table.ptr < r.hi)
            else {
                continue;
            };
            let at = table.ptr - r.lo;
            let mut view = r.device.slice_mut(at..at + bytes.len());
            stream
                .memcpy_htod(bytes.as_slice(), &mut view)
                .map_err(|e| driver_error("copying a pointer table to the GPU", e))?;
            self._tables.push(bytes);
        }
        Ok(())
    }

    /// The address the kernel gets for a buffer whose first element is at `ptr`.
    fn device_address(&self, ptr: usize, memory: Memory) -> u64 {
        if memory != Memory::Host {
            return ptr as u64;
        }
        let spans = self.regions.iter().map(|r| (r.lo, r.hi));
        match region_of(spans, ptr).map(|i| &self.regions[i]) {
            Some(r) => r.base.wrapping_add((ptr - r.lo) as u64),
            None => 0,
        }
    }

    /// Copies written regions back after the kernel and waits for both.
    fn copy_out(self, stream: &Arc<CudaStream>) -> Result<()> {
        for r in self.regions.iter().filter(|r| r.writable && r.hi > r.lo) {
            // SAFETY: written regions are made of buffers the launch borrows exclusively.
            let host = unsafe { std::slice::from_raw_parts_mut(r.lo as *mut u8, r.hi - r.lo) };
            let view = r.device.slice(0..r.hi - r.lo);
            stream
                .memcpy_dtoh(&view, host)
                .map_err(|e| driver_error("copying a result from the GPU", e))?;
        }
        stream
            .synchronize()
            .map_err(|e| driver_error("running on the GPU", e))
    }
}

/// The index of the staged span `[lo, hi)` that a buffer starting at `ptr` lies in: the
/// span holding its first byte, else one that ends (or is empty) at `ptr`, where a
/// zero-length buffer may lie. An empty span holds no other pointer: taking it for every
/// address above it sent the other arguments' device addresses gigabytes past their copies.
fn region_of(spans: impl Iterator<Item = (usize, usize)> + Clone, ptr: usize) -> Option<usize> {
    (spans.clone().position(|(lo, hi)| lo <= ptr && ptr < hi))
        .or_else(|| spans.clone().position(|(lo, hi)| lo <= ptr && ptr <= hi))
}

#[cfg(test)]
mod tests {
    use super::region_of;

    #[test]
    fn each_buffer_finds_its_own_staged_span() {
        // A zero-length array's dangling pointer (4) sorts before the real buffers.
        let spans = [(4, 4), (0x1000, 0x1040), (0x2000, 0x2010)];
        let cases = [
            (4, Some(0)),
            (0x1000, Some(1)),
            (0x1020, Some(1)),
            (0x1040, Some(1)), // a zero-length buffer just past the first one
            (0x2000, Some(2)),
            (0x3000, None),
        ];
        for (ptr, want) in cases {
            assert_eq!(region_of(spans.into_iter(), ptr), want, "pointer {ptr:#x}");
        }
    }
}
