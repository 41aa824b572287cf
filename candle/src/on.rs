//! Where a candle op's launches run and what they write: [`On`] (the device, the launch
//! options and the memory the op's tensors lie in) and [`Buffer`] (a zeroed buffer there, a
//! kernel's output or scratch that can become a tensor without a copy).

use crate::op::{zeros, KernelElem};
use candle_core::{Result, Shape, Storage, Tensor};
use ndarray::{CowArray, IxDyn};
use std::cell::RefCell;
use tritium::backend::launch::{PackedPtr, PtrArg, RawBuffer};
use tritium::{Device, LaunchOptions};

/// Where an op's launches run: the device and the options to launch with (on CUDA,
/// candle's stream, so that a launch is queued in order with candle's own work), and the
/// memory of the op's tensors, where [`On::zeros`] allocates.
#[derive(Debug, Clone)]
pub struct On {
    device: Device,
    options: LaunchOptions,
    memory: Memory,
}

#[derive(Debug, Clone)]
enum Memory {
    Host,
    #[cfg(feature = "cuda")]
    Cuda(candle_core::CudaDevice),
}

impl On {
    /// Launches on `device` with default options, buffers in host memory (CPU tensors'
    /// ops: [`Device::cpu`], or the device [`launch_host_ops_on`] names).
    pub fn new(device: Device) -> On {
        On {
            device,
            options: LaunchOptions::default(),
            memory: Memory::Host,
        }
    }

    /// The launches on tensors of candle's `device`: CPU tensors' on the CPU (or inside
    /// [`launch_host_ops_on`] the device it names), CUDA tensors' on candle's GPU and stream
    /// (the `cuda` feature); an error naming a device Tritium does not run on.
    pub fn of(device: &candle_core::Device) -> Result<On> {
        match device {
            candle_core::Device::Cpu => Ok(On::host()),
            #[cfg(feature = "cuda")]
            candle_core::Device::Cuda(dev) => On::cuda(dev),
            other => Err(candle_core::Error::Msg(format!(
                "tritium-candle: launches on CPU tensors{}, not on {:?}",
                match cfg!(feature = "cuda") {
                    true => " and CUDA ones",
                    false => " (CUDA ones with the `cuda` feature)",
                },
                other.location()
            ))),
        }
    }

    /// The launches of an op on CPU tensors: on the CPU, or inside [`launch_host_ops_on`]
    /// on the device it names.
    pub(crate) fn host() -> On {
        On::new(host_ops_device())
    }

    /// The launches of an op on candle CUDA tensors of `dev`: queued on candle's stream
    /// (the device opened once, by the stream), buffers allocated there.
    #[cfg(feature = "cuda")]
    pub(crate) fn cuda(dev: &candle_core::CudaDevice) -> Result<On> {
        use tritium::backend::cuda::Stream;
        let stream = Stream::from_cuda_stream(dev.cuda_stream()).map_err(crate::candle_error)?;
        Ok(On {
            device: stream.device(),
            options: LaunchOptions {
                stream: Some(stream),
                ..Default::default()
            },
            memory: Memory::Cuda(dev.clone()),
        })
    }

    /// The device to launch on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The options to launch with (`launch_with`).
    pub fn options(&self) -> &LaunchOptions {
        &self.options
    }

    /// `n` zeroed elements of `E` where the op's tensors lie (host memory, or device memory
    /// on candle's stream): a kernel's scratch, or an output made a tensor afterwards
    /// ([`Buffer::into_tensor`]).
    pub fn zeros<E: KernelElem>(&self, n: usize) -> tritium::Result<Buffer<E>> {
        let data = match &self.memory {
            Memory::Host => BufferData::Host(zeros::<E>(n)),
            #[cfg(feature = "cuda")]
            // (At least one element: the driver allocates no zero-byte buffers.)
            Memory::Cuda(dev) => match dev.alloc_zeros::<E>(n.max(1)) {
                Ok(slice) => BufferData::Cuda(slice, dev.clone()),
                Err(e) => {
                    let what =
                        format!("{n} elements of {:?}", <E as candle_core::WithDType>::DTYPE);
                    return Err(tritium::Error::Device(format!("allocating {what}: {e}")));
                }
            },
        };
        Ok(Buffer { len: n, data })
    }
}

thread_local! {
    /// The device ops on CPU tensors launch on in this thread ([`launch_host_ops_on`]).
    static HOST_DEVICE: RefCell<Option<Device>> = const { RefCell::new(None) };
}

/// The device this crate's ops on CPU tensors launch on in this thread: the CPU's compiled
/// code, or inside [`launch_host_ops_on`] the device it names.
pub fn host_ops_device() -> Device {
    HOST_DEVICE
        .with(|d| d.borrow().clone())
        .unwrap_or_else(Device::cpu)
}

/// Runs `f` with this crate's ops on CPU tensors (the fused ops, [`KernelOp`](crate::KernelOp)s)
/// launching their kernels on `device` (the interpreter, the CUDA emulator) instead of the
/// CPU's compiled code: the emulator runs the code a GPU would, on host memory, so the ops'
/// GPU launches are checked against the CPU's where candle has no GPU. The innermost call
/// wins; the device before it is back when `f` returns or unwinds.
pub fn launch_host_ops_on<R>(device: Device, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Device>);
    impl Drop for Restore {
        fn drop(&mut self) {
            HOST_DEVICE.with(|d| *d.borrow_mut() = self.0.take());
        }
    }
    let _restore = Restore(HOST_DEVICE.with(|d| d.borrow_mut().replace(device)));
    f()
}

/// `len` elements a kernel writes (an output, a scratch buffer) where an op's tensors lie,
/// zeroed when made ([`On::zeros`]). `&mut Buffer<E>` is a writable `Ptr<E>` argument,
/// `&Buffer<E>` a read-only one.
pub struct Buffer<E> {
    len: usize,
    data: BufferData<E>,
}

enum BufferData<E> {
    Host(Vec<E>),
    #[cfg(feature = "cuda")]
    Cuda(
        candle_core::cuda_backend::cudarc::driver::CudaSlice<E>,
        candle_core::CudaDevice,
    ),
}

impl<E> std::fmt::Debug for Buffer<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let memory = match &self.data {
            BufferData::Host(_) => "host",
            #[cfg(feature = "cuda")]
            BufferData::Cuda(..) => "cuda",
        };
        write!(f, "Buffer {{ len: {}, memory: {memory} }}", self.len)
    }
}

impl<E> Buffer<E> {
    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl<E: KernelElem> Buffer<E> {
    /// The elements as candle storage (no copy).
    pub fn into_storage(self) -> Storage {
        match self.data {
            BufferData::Host(v) => Storage::Cpu(E::to_cpu_storage_owned(v)),
            #[cfg(feature = "cuda")]
            BufferData::Cuda(slice, dev) => {
                Storage::Cuda(candle_core::CudaStorage::wrap_cuda_slice(slice, dev))
            }
        }
    }

    /// The elements as a row-major tensor of `shape` (no copy), outside candle's autograd;
    /// an error when `shape` has another number of elements.
    pub fn into_tensor(self, shape: impl Into<Shape>) -> Result<Tensor> {
        let shape = shape.into();
        if shape.elem_count() != self.len {
            return Err(candle_core::Error::Msg(format!(
                "a buffer of {} elements cannot be a tensor of shape {shape:?}",
                self.len
            )));
        }
        let storage = self.into_storage();
        let none = candle_core::op::BackpropOp::none();
        Ok(Tensor::from_storage(storage, shape, none, false))
    }
}

impl<'a, 'r: 'a, E: KernelElem> PtrArg<'a, E> for &'r Buffer<E> {
    fn raw_buffer(self) -> RawBuffer {
        PtrArg::<E>::pack(self).raw()
    }

    fn pack(self) -> PackedPtr<'a> {
        match &self.data {
            BufferData::Host(v) => PtrArg::<E>::pack(v.as_slice()),
            #[cfg(feature = "cuda")]
            BufferData::Cuda(slice, _) => PtrArg::<E>::pack(slice),
        }
    }
}

impl<'a, 'r: 'a, E: KernelElem> PtrArg<'a, E> for &'r mut Buffer<E> {
    fn raw_buffer(self) -> RawBuffer {
        PtrArg::<E>::pack(self).raw()
    }

    fn pack(self) -> PackedPtr<'a> {
        match &mut self.data {
            BufferData::Host(v) => PtrArg::<E>::pack(v.as_mut_slice()),
            #[cfg(feature = "cuda")]
            BufferData::Cuda(slice, _) => PtrArg::<E>::pack(slice),
        }
    }
}

impl<E: KernelElem> Buffer<E> {
    /// Windows of `lens` elements one after the other, each a kernel's output, or `None`
    /// when they pass the buffer's end.
    pub(crate) fn outs(&mut self, lens: &[usize]) -> Option<Vec<Out<'_, E>>> {
        if lens.iter().sum::<usize>() > self.len {
            return None;
        }
        match &mut self.data {
            BufferData::Host(v) => {
                let mut rest = v.as_mut_slice();
                let mut outs = Vec::with_capacity(lens.len());
                for &n in lens {
                    let (one, more) = rest.split_at_mut(n);
                    outs.push(Out::Host(one));
                    rest = more;
                }
                Some(outs)
            }
            #[cfg(feature = "cuda")]
            BufferData::Cuda(slice, _) => {
                let windows = tritium::backend::cuda::SliceRangeMut::split(slice, lens)?;
                Some(windows.into_iter().map(Out::Cuda).collect())
            }
        }
    }
}

/// A kernel's input: a tensor's elements in its shape, where they lie when their layout is
/// one the kernel reads (row-major; or, for kernels taking the outer strides, any layout
/// whose last dim is contiguous), else a row-major copy; in host memory for a CPU tensor,
/// device memory for a CUDA one. A kernel's `Ptr<E>` parameter takes `&Rows<E>`.
pub struct Rows<'a, E> {
    shape: Vec<usize>,
    strides: Vec<isize>,
    data: RowsData<'a, E>,
}

pub(crate) enum RowsData<'a, E> {
    Host(CowArray<'a, E, IxDyn>),
    #[cfg(feature = "cuda")]
    Cuda(DeviceRows<'a, E>),
}

impl<'a, E> Rows<'a, E> {
    /// Host rows (a CPU tensor's, or an array of one's shape), with the array's strides.
    pub fn host(array: CowArray<'a, E, IxDyn>) -> Self {
        Rows {
            shape: array.shape().to_vec(),
            strides: array.strides().to_vec(),
            data: RowsData::Host(array),
        }
    }

    /// Device rows of `shape` with element `strides` from the window's start.
    #[cfg(feature = "cuda")]
    pub(crate) fn device(shape: &[usize], strides: &[isize], rows: DeviceRows<'a, E>) -> Self {
        Rows {
            shape: shape.to_vec(),
            strides: strides.to_vec(),
            data: RowsData::Cuda(rows),
        }
    }

    /// The tensor's shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Elements between neighbours along each dim, as the kernel reads them (row-major's
    /// unless the op reads a strided layout where it lies).
    pub fn strides(&self) -> &[isize] {
        &self.strides
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.shape.iter().product()
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<'a, 'r: 'a, E: KernelElem> PtrArg<'a, E> for &'r Rows<'_, E> {
    fn raw_buffer(self) -> RawBuffer {
        PtrArg::<E>::pack(self).raw()
    }

    fn pack(self) -> PackedPtr<'a> {
        match &self.data {
            RowsData::Host(a) => PtrArg::<E>::pack(a),
            #[cfg(feature = "cuda")]
            RowsData::Cuda(d) => d.pack(),
        }
    }
}

/// A CUDA input's rows.
#[cfg(feature = "cuda")]
pub(crate) enum DeviceRows<'a, E> {
    /// The storage's own elements.
    Window(tritium::backend::cuda::SliceRange<'a, E>),
    /// A row-major copy (of another layout).
    Copy(candle_core::CudaStorage),
}

#[cfg(feature = "cuda")]
impl<E: KernelElem> DeviceRows<'_, E> {
    fn pack<'a>(&'a self) -> PackedPtr<'a> {
        match self {
            DeviceRows::Window(w) => PtrArg::<E>::pack(w),
            DeviceRows::Copy(s) => match E::as_cuda_slice(s) {
                Ok(slice) => PtrArg::<E>::pack(slice),
                Err(e) => unreachable!("a copy made of the rows' dtype: {e}"),
            },
        }
    }
}

/// A kernel's output: `len()` elements it writes whole, row-major in the output's shape
/// (host memory for CPU tensors, device memory candle's stream allocated for CUDA ones).
/// A kernel's `Ptr<E>` parameter takes `&mut Out<E>` (pass `y` where `y: &mut Out<E>`).
pub enum Out<'a, E> {
    /// Host memory.
    Host(&'a mut [E]),
    /// Device memory.
    #[cfg(feature = "cuda")]
    Cuda(tritium::backend::cuda::SliceRangeMut<'a, E>),
}

impl<E> Out<'_, E> {
    /// The number of elements.
    pub fn len(&self) -> usize {
        match self {
            Out::Host(v) => v.len(),
            #[cfg(feature = "cuda")]
            Out::Cuda(v) => v.len(),
        }
    }

    /// True when there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<'a, 'r: 'a, E: KernelElem> PtrArg<'a, E> for &'r mut Out<'_, E> {
    fn raw_buffer(self) -> RawBuffer {
        PtrArg::<E>::pack(self).raw()
    }

    fn pack(self) -> PackedPtr<'a> {
        match self {
            Out::Host(v) => PtrArg::<E>::pack(&mut **v),
            #[cfg(feature = "cuda")]
            Out::Cuda(v) => PtrArg::<E>::pack(v),
        }
    }
}
