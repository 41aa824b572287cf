//! Saving, zeroing and restoring a launch argument's elements from the host: autotuning's
//! `reset_to_zero` and `restore_value`, for kernels that write in place and run once per
//! timed config. Only a view's elements are touched, never the bytes between them (another
//! view of the same array may own those).

use super::{KernelArgs, Memory, RawArg, RawBuffer};
use crate::{Device, Error, Result};

/// The writable pointer argument `name` of `args`, or an error naming the kernel and why.
pub fn writable_buffer(kernel: &str, args: &KernelArgs<'_>, name: &str) -> Result<RawBuffer> {
    let err = |message: String| Error::Launch {
        kernel: kernel.to_string(),
        message,
    };
    let at = args.names.iter().position(|n| *n == name);
    match at.map(|i| args.args[i]) {
        Some(RawArg::Ptr(b)) if b.writable => Ok(b),
        Some(RawArg::Ptr(_)) => Err(err(format!(
            "`{name}` is reset or restored between timed configs, so it must be passed as `&mut`"
        ))),
        _ => Err(err(format!("`{name}` is not a pointer argument"))),
    }
}

/// A copy of `b`'s elements, in the order [`restore`] takes them.
pub fn save(device: &Device, b: &RawBuffer) -> Result<Vec<u8>> {
    let mut saved = Vec::new();
    for (addr, len) in runs(b) {
        let at = saved.len();
        saved.resize(at + len, 0);
        copy_out(device, b, addr, &mut saved[at..])?;
    }
    Ok(saved)
}

/// Writes back what [`save`] returned for `b`.
pub fn restore(device: &Device, b: &RawBuffer, saved: &[u8]) -> Result<()> {
    let mut at = 0;
    for (addr, len) in runs(b) {
        let Some(bytes) = saved.get(at..at + len) else {
            return Err(Error::Device(format!(
                "restoring {} saved bytes over a buffer of more",
                saved.len()
            )));
        };
        copy_in(device, b, addr, bytes)?;
        at += len;
    }
    Ok(())
}

/// Sets every element of `b` to zero bytes.
pub fn zero(device: &Device, b: &RawBuffer) -> Result<()> {
    let runs = runs(b);
    let zeros = vec![0u8; runs.iter().map(|r| r.1).max().unwrap_or(0)];
    for (addr, len) in runs {
        copy_in(device, b, addr, &zeros[..len])?;
    }
    Ok(())
}

/// `(address, length)` of each run of element bytes: the whole span of a dense buffer,
/// each element of a strided view.
fn runs(b: &RawBuffer) -> Vec<(usize, usize)> {
    match &b.view {
        None => vec![(b.lo, b.hi - b.lo)],
        Some(layout) => {
            let size = b.dtype.size_bytes();
            layout
                .element_offsets()
                .map(|off| (b.lo + off as usize, size))
                .collect()
        }
    }
}

fn copy_out(device: &Device, b: &RawBuffer, addr: usize, out: &mut [u8]) -> Result<()> {
    match b.memory {
        // SAFETY: `addr..addr + out.len()` holds elements of a buffer the launch's arguments
        // borrow for as long as they live, and no launch is running.
        Memory::Host => unsafe {
            std::ptr::copy_nonoverlapping(addr as *const u8, out.as_mut_ptr(), out.len())
        },
        Memory::Cuda(n) => {
            let gpu = cuda_of(device, n)?;
            gpu.synchronize_all()?;
            gpu.bind()?;
            // SAFETY: device memory of a live tensor the arguments borrow; all work on it
            // has finished (synchronized above).
            unsafe { cudarc::driver::result::memcpy_dtoh_sync(out, addr as u64) }
                .map_err(|e| crate::runtime::driver_error("saving a tensor for autotuning", e))?;
        }
    }
    Ok(())
}

fn copy_in(device: &Device, b: &RawBuffer, addr: usize, bytes: &[u8]) -> Result<()> {
    match b.memory {
        // SAFETY: as in `copy_out`; the buffer was passed as `&mut` (`writable_buffer`).
        Memory::Host => unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), addr as *mut u8, bytes.len())
        },
        Memory::Cuda(n) => {
            let gpu = cuda_of(device, n)?;
            gpu.synchronize_all()?;
            gpu.bind()?;
            // SAFETY: as in `copy_out`.
            unsafe { cudarc::driver::result::memcpy_htod_sync(addr as u64, bytes) }.map_err(
                |e| crate::runtime::driver_error("restoring a tensor for autotuning", e),
            )?;
        }
    }
    Ok(())
}

fn cuda_of(device: &Device, ordinal: usize) -> Result<&crate::runtime::CudaDevice> {
    match device {
        Device::Cuda(gpu) if gpu.ordinal() == ordinal => Ok(gpu),
        _ => Err(Error::Device(format!(
            "a tensor on CUDA device {ordinal} passed to a launch on {}",
            device.name()
        ))),
    }
}
