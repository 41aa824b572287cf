//! The CUDA driver through cudarc, with libcuda loaded at run time: a machine without
//! CUDA builds and runs everything else, and asking for a GPU there is an error.

use super::Ptx;
use crate::{Error, Result};
use cudarc::driver::{result, sys, CudaContext, CudaSlice, CudaStream, DriverError};
use std::collections::HashMap;
use std::ffi::CString;
use std::sync::{Arc, Mutex, OnceLock};

/// One GPU: its context, the stream launches and copies use, and its loaded kernels.
pub struct CudaDevice {
    ordinal: usize,
    name: String,
    capability: (u32, u32),
    max_shared_optin: usize,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    /// Loaded kernels by cache key: each module is loaded once per device.
    kernels: Mutex<HashMap<String, Arc<LoadedKernel>>>,
}

/// A kernel loaded into a device's context.
pub(crate) struct LoadedKernel {
    pub function: sys::CUfunction,
    pub shared_bytes: usize,
    pub threads: u32,
    // Keeps the module loaded (never unloaded: kernels live as long as the process).
    _module: sys::CUmodule,
}

// SAFETY: CUDA driver handles may be used from any thread once their context is current
// (`bind`), which every use does first.
unsafe impl Send for LoadedKernel {}
unsafe impl Sync for LoadedKernel {}

impl std::fmt::Debug for CudaDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Cuda({}: {}, sm_{}{})",
            self.ordinal, self.name, self.capability.0, self.capability.1
        )
    }
}

impl PartialEq for CudaDevice {
    fn eq(&self, other: &Self) -> bool {
        self.ordinal == other.ordinal
    }
}
impl Eq for CudaDevice {}
impl std::hash::Hash for CudaDevice {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.ordinal.hash(state)
    }
}

pub(crate) fn driver_error(what: &str, e: DriverError) -> Error {
    Error::Device(format!("{what}: {e}{}", sticky_hint(e.0)))
}

/// What to add to an error the context keeps: after a kernel's illegal address (or another
/// sticky fault) every later call of the process fails with it, however unrelated (a
/// module load, an allocation), so the message says where to look instead.
fn sticky_hint(code: sys::CUresult) -> &'static str {
    use sys::CUresult::*;
    match code {
        CUDA_ERROR_ILLEGAL_ADDRESS
        | CUDA_ERROR_MISALIGNED_ADDRESS
        | CUDA_ERROR_HARDWARE_STACK_ERROR
        | CUDA_ERROR_ILLEGAL_INSTRUCTION
        | CUDA_ERROR_INVALID_ADDRESS_SPACE
        | CUDA_ERROR_INVALID_PC
        | CUDA_ERROR_LAUNCH_FAILED => {
            " (a kernel faulted, maybe an earlier one: the CUDA context is now unusable in \
             this process; rerun with TRITIUM_BOUNDS_CHECK=1 to name the access, or \
             CUDA_LAUNCH_BLOCKING=1 to stop at the launch that faulted)"
        }
        _ => "",
    }
}

/// Whether the driver's library opens (as cudarc's own check of its dynamic loading; where
/// cudarc links CUDA at build time instead, candle's `cuda` feature, it is there).
fn driver_library_present() -> bool {
    ["libcuda.so.1", "libcuda.so", "nvcuda.dll"]
        .iter()
        .any(|name| {
            // SAFETY: opening the driver's library runs only its initializers, as cudarc's
            // own loading does; nothing is called through it here.
            unsafe { libloading::Library::new(name) }.is_ok()
        })
}

/// Why no CUDA device can be used here, or `None` when the driver loads and has a device.
pub fn unavailable_reason() -> Option<String> {
    if !driver_library_present() {
        return Some("no CUDA driver (libcuda.so.1 not found)".into());
    }
    if let Err(e) = result::init() {
        return Some(format!("the CUDA driver failed to initialize: {e}"));
    }
    match result::device::get_count() {
        Ok(0) => Some("the CUDA driver reports no devices".into()),
        Ok(_) => None,
        Err(e) => Some(format!("the CUDA driver cannot count devices: {e}")),
    }
}

impl CudaDevice {
    /// Device `ordinal`, opened once per process (later calls share its context).
    pub fn open(ordinal: usize) -> Result<Arc<CudaDevice>> {
        static OPEN: OnceLock<Mutex<HashMap<usize, Arc<CudaDevice>>>> = OnceLock::new();
        let mut open = OPEN
            .get_or_init(Default::default)
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(d) = open.get(&ordinal) {
            return Ok(d.clone());
        }
        // `CudaContext::new` panics without libcuda: check first.
        if let Some(reason) = unavailable_reason() {
            return Err(Error::Device(format!(
                "CUDA device {ordinal} requested: {reason}"
            )));
        }
        let count =
            result::device::get_count().map_err(|e| driver_error("counting CUDA devices", e))?;
        if ordinal >= count.max(0) as usize {
            return Err(Error::Device(format!(
                "CUDA device {ordinal} not present: {count} device(s)"
            )));
        }
        let ctx = CudaContext::new(ordinal).map_err(|e| {
            driver_error(&format!("creating a context on CUDA device {ordinal}"), e)
        })?;
        let attr = |a| {
            ctx.attribute(a)
                .map_err(|e| driver_error("reading a device attribute", e))
        };
        use sys::CUdevice_attribute as A;
        let capability = (
            attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)? as u32,
            attr(A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)? as u32,
        );
        let max_shared_optin =
            attr(A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)?.max(0) as usize;
        let name = ctx.name().unwrap_or_else(|_| "unknown".into());
        let stream = ctx.default_stream();
        let device = Arc::new(CudaDevice {
            ordinal,
            name,
            capability,
            max_shared_optin,
            ctx,
            stream,
            kernels: Mutex::new(HashMap::new()),
        });
        device.sm()?;
        open.insert(ordinal, device.clone());
        Ok(device)
    }

    /// The device's ordinal.
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    /// The device's name, as the driver reports it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Compute capability `(major, minor)`.
    pub fn compute_capability(&self) -> (u32, u32) {
        self.capability
    }

    /// The architecture kernels are compiled for: the newest supported one not newer than
    /// the device (PTX is compiled forward by the driver for newer GPUs).
    pub fn sm(&self) -> Result<u32> {
        let cc = self.capability.0 * 10 + self.capability.1;
        [90, 89, 87, 86, 80]
            .into_iter()
            .find(|sm| *sm <= cc)
            .ok_or_else(|| {
                Error::Device(format!(
                    "CUDA device {} ({}) has compute capability {}.{}; Tritium needs 8.0 or newer",
                    self.ordinal, self.name, self.capability.0, self.capability.1
                ))
            })
    }

    /// The device's default stream: launches without [`crate::LaunchOptions::stream`] and
    /// tensor copies run on it.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// The device's (primary) context.
    pub(crate) fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// Waits for everything queued on the device's default stream.
    pub fn synchronize(&self) -> Result<()> {
        self.stream
            .synchronize()
            .map_err(|e| driver_error("synchronizing the CUDA stream", e))
    }

    /// A new non-blocking stream in the device's context.
    pub(crate) fn new_stream(&self) -> Result<Arc<CudaStream>> {
        self.bind()?;
        self.ctx
            .new_stream()
            .map_err(|e| driver_error("creating a CUDA stream", e))
    }

    /// Waits for everything queued in the device's context, on every stream.
    pub(crate) fn synchronize_all(&self) -> Result<()> {
        self.bind()?;
        self.ctx
            .synchronize()
            .map_err(|e| driver_error("synchronizing the CUDA device", e))
    }

    /// Makes the device's context current on this thread.
    pub(crate) fn bind(&self) -> Result<()> {
        self.ctx
            .bind_to_thread()
            .map_err(|e| driver_error("binding the CUDA context", e))
    }

    /// Device memory of `bytes` bytes, zeroed, allocated in order on `stream`.
    pub(crate) fn alloc_on(&self, stream: &Arc<CudaStream>, bytes: usize) -> Result<CudaSlice<u8>> {
        self.bind()?;
        stream
            .alloc_zeros::<u8>(bytes.max(1))
            .map_err(|e| driver_error(&format!("allocating {bytes} bytes on the GPU"), e))
    }

    /// The loaded kernel for `key`, loading `ptx` the first time.
    pub(crate) fn load(&self, key: &str, ptx: &Ptx) -> Result<Arc<LoadedKernel>> {
        let mut kernels = self.kernels.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(k) = kernels.get(key) {
            return Ok(k.clone());
        }
        self.bind()?;
        let text = CString::new(ptx.text.as_bytes())
            .map_err(|_| Error::Device("generated PTX contains a NUL byte".into()))?;
        // SAFETY: `text` is a NUL-terminated PTX image, alive for the call.
        let module = unsafe { result::module::load_data(text.as_ptr().cast()) }
            .map_err(|e| driver_error(&format!("loading the PTX of `{}`", ptx.entry), e))?;
        let name = CString::new(ptx.entry.as_bytes())
            .map_err(|_| Error::Device("kernel symbol contains a NUL byte".into()))?;
        // SAFETY: `module` was just loaded in the current context.
        let function = unsafe { result::module::get_function(module, name) }
            .map_err(|e| driver_error(&format!("finding `{}` in its module", ptx.entry), e))?;
        if ptx.shared_bytes > 48 * 1024 {
            if ptx.shared_bytes > self.max_shared_optin {
                return Err(Error::Device(format!(
                    "kernel `{}` needs {} bytes of shared memory; the device allows {} per block (use smaller tiles)",
                    ptx.entry, ptx.shared_bytes, self.max_shared_optin
                )));
            }
            // SAFETY: `function` is a valid handle of a loaded module.
            unsafe {
                result::function::set_function_attribute(
                    function,
                    sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    ptx.shared_bytes as i32,
                )
            }
            .map_err(|e| driver_error("raising the kernel's shared-memory limit", e))?;
        }
        let k = Arc::new(LoadedKernel {
            function,
            shared_bytes: ptx.shared_bytes,
            threads: ptx.threads,
            _module: module,
        });
        kernels.insert(key.to_string(), k.clone());
        Ok(k)
    }
}

#[cfg(test)]
mod tests {
    use super::sticky_hint;
    use cudarc::driver::sys::CUresult;

    /// A faulted context fails every later call; the error says so and how to find the
    /// kernel (on the H100, 120 tests failed at module loads and allocations after one).
    /// (`DriverError`'s own text needs libcuda, so the hint is checked alone.)
    #[test]
    fn sticky_faults_say_where_to_look() {
        let faulted = sticky_hint(CUresult::CUDA_ERROR_ILLEGAL_ADDRESS);
        assert!(faulted.contains("TRITIUM_BOUNDS_CHECK=1"), "{faulted}");
        assert_eq!(sticky_hint(CUresult::CUDA_ERROR_OUT_OF_MEMORY), "");
    }
}
