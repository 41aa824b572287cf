//! CUDA for `.cu` operators, through the driver API loaded at run time (`libcuda.so.1`), so
//! nothing links against CUDA and machines without it build and run everything else.
//!
//! A CUDA operator takes host tensors like a CPU one; around each call the runtime copies
//! inputs to device memory, allocates outputs and workspaces there (with guard bytes in checked
//! mode), passes a fresh stream of the device's primary context as `stream`, synchronizes, and
//! copies the outputs back. The primary context is what the CUDA runtime inside an
//! nvcc-built library uses too, so the device pointers are valid on its side.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr};
use std::sync::OnceLock;

use ndarray::{ArrayBase, Data, Dimension};

use super::buffer::{guard_pattern, GUARD_BYTES};
use super::dtype::{DType, Element, MindSporeDType};
use super::error::{AotError, AotResult};
use super::tensor::{Tensor, TensorSpec};

type CuResult = c_int;
type CuDevice = c_int;
type CuContext = *mut c_void;
type CuStream = *mut c_void;
type CuDevicePtr = u64;

struct Driver {
    _lib: libloading::Library,
    init: unsafe extern "C" fn(c_uint) -> CuResult,
    device_get_count: unsafe extern "C" fn(*mut c_int) -> CuResult,
    device_get: unsafe extern "C" fn(*mut CuDevice, c_int) -> CuResult,
    primary_ctx_retain: unsafe extern "C" fn(*mut CuContext, CuDevice) -> CuResult,
    ctx_set_current: unsafe extern "C" fn(CuContext) -> CuResult,
    mem_alloc: unsafe extern "C" fn(*mut CuDevicePtr, usize) -> CuResult,
    mem_free: unsafe extern "C" fn(CuDevicePtr) -> CuResult,
    memcpy_htod: unsafe extern "C" fn(CuDevicePtr, *const c_void, usize) -> CuResult,
    memcpy_dtoh: unsafe extern "C" fn(*mut c_void, CuDevicePtr, usize) -> CuResult,
    memset_d8: unsafe extern "C" fn(CuDevicePtr, u8, usize) -> CuResult,
    stream_create: unsafe extern "C" fn(*mut CuStream, c_uint) -> CuResult,
    stream_synchronize: unsafe extern "C" fn(CuStream) -> CuResult,
    stream_destroy: unsafe extern "C" fn(CuStream) -> CuResult,
    get_error_string: unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult,
}

/// The device's primary context, retained once per process.
pub(crate) struct Device {
    drv: Driver,
    ctx: CuContext,
}

// SAFETY: a CUDA context may be made current on any thread; the driver is thread-safe.
unsafe impl Send for Device {}
// SAFETY: as above.
unsafe impl Sync for Device {}

fn load_driver() -> Result<Driver, String> {
    // SAFETY: loading the CUDA driver runs its initializers, as any CUDA program does.
    let lib = unsafe { libloading::Library::new("libcuda.so.1") }
        .or_else(|_| unsafe { libloading::Library::new("libcuda.so") })
        .map_err(|e| format!("the CUDA driver (libcuda.so.1) is not available: {e}"))?;
    macro_rules! sym {
        ($name:literal) => {
            // SAFETY: the signature matches the CUDA driver API's declaration of this symbol.
            *unsafe { lib.get(concat!($name, "\0").as_bytes()) }
                .map_err(|e| format!("libcuda has no `{}`: {e}", $name))?
        };
    }
    Ok(Driver {
        init: sym!("cuInit"),
        device_get_count: sym!("cuDeviceGetCount"),
        device_get: sym!("cuDeviceGet"),
        primary_ctx_retain: sym!("cuDevicePrimaryCtxRetain"),
        ctx_set_current: sym!("cuCtxSetCurrent"),
        mem_alloc: sym!("cuMemAlloc_v2"),
        mem_free: sym!("cuMemFree_v2"),
        memcpy_htod: sym!("cuMemcpyHtoD_v2"),
        memcpy_dtoh: sym!("cuMemcpyDtoH_v2"),
        memset_d8: sym!("cuMemsetD8_v2"),
        stream_create: sym!("cuStreamCreate"),
        stream_synchronize: sym!("cuStreamSynchronize"),
        stream_destroy: sym!("cuStreamDestroy_v2"),
        get_error_string: sym!("cuGetErrorString"),
        _lib: lib,
    })
}

impl Driver {
    fn check(&self, r: CuResult, what: &str) -> Result<(), String> {
        if r == 0 {
            return Ok(());
        }
        let mut s: *const c_char = std::ptr::null();
        // SAFETY: cuGetErrorString writes a pointer to a static string or leaves it null.
        unsafe { (self.get_error_string)(r, &mut s) };
        let msg = if s.is_null() {
            "unknown error".to_string()
        } else {
            // SAFETY: a NUL-terminated static string from the driver.
            unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned()
        };
        Err(format!("{what} failed: CUDA error {r} ({msg})"))
    }
}

fn open_device() -> Result<Device, String> {
    let drv = load_driver()?;
    // SAFETY: plain driver API calls with valid out-pointers.
    unsafe {
        drv.check((drv.init)(0), "cuInit")?;
        let mut n = 0;
        drv.check((drv.device_get_count)(&mut n), "cuDeviceGetCount")?;
        if n == 0 {
            return Err("no CUDA device is present".to_string());
        }
        let mut dev = 0;
        drv.check((drv.device_get)(&mut dev, 0), "cuDeviceGet")?;
        let mut ctx = std::ptr::null_mut();
        drv.check(
            (drv.primary_ctx_retain)(&mut ctx, dev),
            "cuDevicePrimaryCtxRetain",
        )?;
        Ok(Device { drv, ctx })
    }
}

static DEVICE: OnceLock<Result<Device, String>> = OnceLock::new();

/// The CUDA device (device 0 of `CUDA_VISIBLE_DEVICES`), or why there is none.
pub(crate) fn device() -> AotResult<&'static Device> {
    DEVICE
        .get_or_init(open_device)
        .as_ref()
        .map_err(|e| AotError::Cuda(e.clone()))
}

/// True when the CUDA driver loads and a device is present.
pub fn cuda_available() -> bool {
    device().is_ok()
}

/// Device memory: `len` usable bytes then `guard` guard bytes; freed on drop.
pub(crate) struct DeviceBuffer<'d> {
    dev: &'d Device,
    ptr: CuDevicePtr,
    len: usize,
    guard: usize,
    /// This buffer's guard bytes (see `buffer::guard_pattern`).
    pattern: [u8; GUARD_BYTES],
}

impl Drop for DeviceBuffer<'_> {
    fn drop(&mut self) {
        // SAFETY: allocated by cuMemAlloc in this context and freed once.
        unsafe { (self.dev.drv.mem_free)(self.ptr) };
    }
}

impl DeviceBuffer<'_> {
    /// The device pointer as the kernel sees it.
    pub fn ptr(&self) -> *mut c_void {
        self.ptr as usize as *mut c_void
    }

    /// Copies the usable bytes back.
    pub fn download(&self) -> AotResult<Vec<u8>> {
        self.download_range(0, self.len)
    }

    pub(crate) fn download_range(&self, offset: usize, len: usize) -> AotResult<Vec<u8>> {
        let mut out = vec![0u8; len];
        if len > 0 {
            let d = &self.dev.drv;
            // SAFETY: `offset + len` lies inside the allocation; `out` has `len` bytes.
            let r =
                unsafe { (d.memcpy_dtoh)(out.as_mut_ptr().cast(), self.ptr + offset as u64, len) };
            d.check(r, "cuMemcpyDtoH").map_err(AotError::Cuda)?;
        }
        Ok(out)
    }

    /// The first guard byte that no longer holds `value`, if any.
    pub fn overwritten_guard(&self) -> AotResult<Option<usize>> {
        if self.guard == 0 {
            return Ok(None);
        }
        let g = self.download_range(self.len, self.guard)?;
        Ok(g.iter().zip(&self.pattern).position(|(b, p)| b != p))
    }

    /// The usable length.
    pub fn len(&self) -> usize {
        self.len
    }
}

impl Device {
    fn err(&self, r: CuResult, what: &str) -> AotResult<()> {
        self.drv.check(r, what).map_err(AotError::Cuda)
    }

    /// Makes the primary context current on this thread.
    pub fn bind(&self) -> AotResult<()> {
        // SAFETY: the context was retained and is never released.
        self.err(
            unsafe { (self.drv.ctx_set_current)(self.ctx) },
            "cuCtxSetCurrent",
        )
    }

    /// Allocates `len + guard` bytes, zeroes the usable part and fills the guard with
    /// `guard_value`, then copies `init` (if any) into the start.
    pub fn alloc(
        &self,
        len: usize,
        guard: usize,
        init: Option<&[u8]>,
    ) -> AotResult<DeviceBuffer<'_>> {
        let guard = guard.min(GUARD_BYTES);
        let total = len
            .checked_add(guard)
            .ok_or_else(|| AotError::Cuda(format!("allocation of {len} bytes overflows")))?;
        let mut ptr: CuDevicePtr = 0;
        // SAFETY: valid out-pointer; a zero-byte request is rounded up to one byte.
        self.err(
            unsafe { (self.drv.mem_alloc)(&mut ptr, total.max(1)) },
            &format!("cuMemAlloc({total} bytes)"),
        )?;
        let buf = DeviceBuffer {
            dev: self,
            ptr,
            len,
            guard,
            pattern: guard_pattern(),
        };
        // SAFETY: all ranges lie inside the allocation.
        unsafe {
            if len > 0 {
                self.err((self.drv.memset_d8)(ptr, 0, len), "cuMemsetD8")?;
            }
            if guard > 0 {
                self.err(
                    (self.drv.memcpy_htod)(ptr + len as u64, buf.pattern.as_ptr().cast(), guard),
                    "cuMemcpyHtoD",
                )?;
            }
            if let Some(bytes) = init {
                let n = bytes.len().min(len);
                if n > 0 {
                    self.err(
                        (self.drv.memcpy_htod)(ptr, bytes.as_ptr().cast(), n),
                        "cuMemcpyHtoD",
                    )?;
                }
            }
        }
        Ok(buf)
    }

    /// Runs `f` with a fresh stream, then synchronizes and destroys it.
    pub fn with_stream<T>(&self, f: impl FnOnce(*mut c_void) -> AotResult<T>) -> AotResult<T> {
        let mut s: CuStream = std::ptr::null_mut();
        // SAFETY: valid out-pointer; the context is current.
        self.err(
            unsafe { (self.drv.stream_create)(&mut s, 0) },
            "cuStreamCreate",
        )?;
        let result = f(s);
        // SAFETY: `s` was created above and is destroyed once.
        let sync = unsafe { (self.drv.stream_synchronize)(s) };
        unsafe { (self.drv.stream_destroy)(s) };
        let value = result?;
        self.err(sync, "the kernel (cuStreamSynchronize)")?;
        Ok(value)
    }
}

/// A tensor resident in the memory of the CUDA device, for `.cu` operators: pass it to
/// [`AotOp::call_device`](super::AotOp::call_device) and get device tensors back, so that
/// chains of CUDA operators copy nothing between calls.
pub struct DeviceTensor {
    dtype: DType,
    shape: Vec<usize>,
    buf: DeviceBuffer<'static>,
}

impl std::fmt::Debug for DeviceTensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceTensor<{}>{:?}", self.dtype.ms_name(), self.shape)
    }
}

impl DeviceTensor {
    /// Copies a host tensor to the device (an error naming the reason where no CUDA device is
    /// usable).
    pub fn upload(t: &Tensor) -> AotResult<DeviceTensor> {
        let dev = device()?;
        dev.bind()?;
        let bytes = t.as_bytes();
        Ok(DeviceTensor {
            dtype: t.dtype(),
            shape: t.shape().to_vec(),
            buf: dev.alloc(bytes.len(), 0, Some(bytes))?,
        })
    }

    /// Copies an ndarray array (any layout) to the device.
    pub fn from_array<T: Element, S: Data<Elem = T>, D: Dimension>(
        a: &ArrayBase<S, D>,
    ) -> AotResult<DeviceTensor> {
        DeviceTensor::upload(&Tensor::from_array(a))
    }

    /// Copies the tensor back to the host.
    pub fn download(&self) -> AotResult<Tensor> {
        device()?.bind()?;
        let bytes = self.buf.download_range(0, self.nbytes())?;
        Tensor::from_bytes(self.dtype, &self.shape, &bytes)
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// The shape and dtype.
    pub fn spec(&self) -> TensorSpec {
        TensorSpec::new(
            self.shape.iter().map(|&d| d as i64).collect::<Vec<_>>(),
            self.dtype,
        )
    }

    /// The device pointer, for handing the tensor to other CUDA code of this process (it is
    /// valid in the device's primary context).
    pub fn device_ptr(&self) -> *mut c_void {
        self.buf.ptr()
    }

    fn nbytes(&self) -> usize {
        self.shape.iter().product::<usize>() * self.dtype.size_bytes()
    }

    pub(crate) fn buffer(&self) -> &DeviceBuffer<'static> {
        &self.buf
    }

    /// An output: `buf` holds at least `shape`'s bytes (an upper-bound output trimmed to
    /// its data-dependent shape keeps its larger allocation; the data is its prefix).
    pub(crate) fn from_buffer(
        dtype: DType,
        shape: Vec<usize>,
        buf: DeviceBuffer<'static>,
    ) -> DeviceTensor {
        DeviceTensor { dtype, shape, buf }
    }
}
