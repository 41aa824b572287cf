//! One path from a candle op's storages to its launches, for CPU and (with the `cuda`
//! feature) CUDA storage alike: the inputs checked and read as [`Rows`] of their float
//! type, the outputs allocated where the inputs lie as windows of one [`Buffer`], the
//! launches run [`On`] the storage's device, and the buffer given back as the op's storage.
//! An op writes its forward once, generic over the storage kind `S: Launches`, and
//! [`forwards!`] makes it both `cpu_fwd` and `cuda_fwd`.

use crate::candle_error;
use crate::on::{Buffer, On, Out, Rows};
use crate::op::{cpu_array, dispatch, last_dim_contiguous, same_dtype, KernelElem, KernelFloat};
use crate::op::{op_error, PerFloat};
use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, Layout, Result, Storage};

/// How a launch reads an input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Read {
    /// Row-major in its shape (a copy made where the layout is not).
    RowMajor,
    /// With its last dim contiguous, the other dims at any strides ([`Rows::strides`]), for
    /// kernels that take them (a copy made where the last dim is strided).
    LastDimContiguous,
}

/// The storages and layouts a launch reads (CPU or CUDA ones), checked to share one dtype.
pub(crate) struct Inputs<'a, S> {
    op: &'static str,
    all: Vec<(&'a S, &'a Layout, Read)>,
}

impl<'a, S: BackendStorage> Inputs<'a, S> {
    /// The named inputs, read row-major; an error naming two of different dtypes.
    pub(crate) fn new(op: &'static str, named: &[(&str, &'a S, &'a Layout)]) -> Result<Self> {
        let dtypes: Vec<_> = named.iter().map(|(n, s, _)| (*n, s.dtype())).collect();
        same_dtype(op, &dtypes)?;
        Ok(Inputs {
            op,
            all: named
                .iter()
                .map(|(_, s, l)| (*s, *l, Read::RowMajor))
                .collect(),
        })
    }

    /// Input `k` read with its outer strides ([`Read::LastDimContiguous`]).
    pub(crate) fn strided(mut self, k: usize) -> Self {
        self.all[k].2 = Read::LastDimContiguous;
        self
    }

    /// The number of elements of input `k`.
    pub(crate) fn elems(&self, k: usize) -> usize {
        self.all[k].1.shape().elem_count()
    }
}

/// A gradient `dy` must have `want`, the shape of `of` (the op's output, or the input it
/// is the gradient of); else the op's error naming both.
pub(crate) fn check_dy(op: &str, dy: &Layout, of: &str, want: &[usize]) -> Result<()> {
    match dy.dims() == want {
        true => Ok(()),
        false => Err(op_error(
            op,
            format!("dy must have {of}'s shape {want:?}, got {:?}", dy.dims()),
        )),
    }
}

/// What a launch does with the inputs' rows and its outputs, for any float type.
pub(crate) trait LaunchWith {
    /// The outputs' element: the inputs' float type, or one of its own (an f32 loss).
    type Output<T: KernelFloat>: KernelElem;

    fn with<T: KernelFloat>(
        &self,
        on: &On,
        rows: &[Rows<'_, T>],
        outs: &mut [Out<'_, Self::Output<T>>],
    ) -> tritium::Result<()>;
}

/// A storage kernel ops launch on.
pub(crate) trait Launches: BackendStorage + Sized {
    /// Where launches on this storage run.
    fn on(&self) -> Result<On>;

    /// The storage under `layout` as rows of `E`, read as `read` says.
    fn rows<'s, E: KernelElem>(&'s self, layout: &Layout, read: Read) -> Result<Rows<'s, E>>;

    /// A buffer [`Launches::on`] made, as storage of this kind.
    fn from_buffer<E: KernelElem>(buffer: Buffer<E>) -> Result<Self>;

    /// Runs `f` with every input as [`Rows`] of the inputs' float type and zeroed outputs
    /// of `lens` elements, one after the other, on the storage's device; gives the outputs
    /// as one storage.
    fn launch<F: LaunchWith>(inputs: Inputs<'_, Self>, lens: &[usize], f: F) -> Result<Self> {
        let (op, dtype) = (inputs.op, inputs.all[0].0.dtype());
        let lens = lens.to_vec();
        dispatch(op, dtype, Run { inputs, lens, f })
    }
}

struct Run<'a, S, F> {
    inputs: Inputs<'a, S>,
    lens: Vec<usize>,
    f: F,
}

impl<S: Launches, F: LaunchWith> PerFloat for Run<'_, S, F> {
    type Output = S;

    fn run<T: KernelFloat>(self) -> Result<S> {
        let on = self.inputs.all[0].0.on()?;
        let total = self.lens.iter().sum();
        let mut out = on.zeros::<F::Output<T>>(total).map_err(candle_error)?;
        if total > 0 {
            let rows = (self.inputs.all.iter())
                .map(|(s, l, read)| s.rows::<T>(l, *read))
                .collect::<Result<Vec<_>>>()?;
            let mut outs = out
                .outs(&self.lens)
                .ok_or_else(|| op_error(self.inputs.op, "outputs past their buffer"))?;
            self.f.with(&on, &rows, &mut outs).map_err(candle_error)?;
        }
        S::from_buffer(out)
    }
}

impl Launches for CpuStorage {
    fn on(&self) -> Result<On> {
        Ok(On::host())
    }

    fn rows<'s, E: KernelElem>(&'s self, layout: &Layout, read: Read) -> Result<Rows<'s, E>> {
        Ok(Rows::host(match read {
            Read::RowMajor => cpu_array(self, layout)?,
            Read::LastDimContiguous => last_dim_contiguous(self, layout)?,
        }))
    }

    fn from_buffer<E: KernelElem>(buffer: Buffer<E>) -> Result<Self> {
        match buffer.into_storage() {
            Storage::Cpu(s) => Ok(s),
            _ => unreachable!("a host buffer made device storage"),
        }
    }
}

/// `cpu_fwd` and, with the `cuda` feature, `cuda_fwd`: the generic forward `$f` of the
/// op (its storages' kind `S` a type parameter) for both kinds of storage.
macro_rules! forwards {
    ($f:ident($($s:ident, $l:ident),+)) => {
        fn cpu_fwd(
            &self,
            $($s: &candle_core::CpuStorage, $l: &candle_core::Layout),+
        ) -> candle_core::Result<(candle_core::CpuStorage, candle_core::Shape)> {
            self.$f($($s, $l),+)
        }

        #[cfg(feature = "cuda")]
        fn cuda_fwd(
            &self,
            $($s: &candle_core::CudaStorage, $l: &candle_core::Layout),+
        ) -> candle_core::Result<(candle_core::CudaStorage, candle_core::Shape)> {
            self.$f($($s, $l),+)
        }
    };
}

pub(crate) use forwards;

/// Row-major strides of `shape`.
#[cfg(feature = "cuda")]
fn row_major(shape: &[usize]) -> Vec<isize> {
    let mut strides = vec![1isize; shape.len()];
    for k in (0..shape.len().saturating_sub(1)).rev() {
        strides[k] = strides[k + 1] * shape[k + 1] as isize;
    }
    strides
}

/// Candle's CUDA storage: inputs read in device memory where they lie (from the layout's
/// offset) or from a row-major copy, outputs allocated on candle's stream, launches queued
/// on that stream.
#[cfg(feature = "cuda")]
impl Launches for candle_core::CudaStorage {
    fn on(&self) -> Result<On> {
        On::cuda(self.device())
    }

    fn rows<'s, E: KernelElem>(&'s self, layout: &Layout, read: Read) -> Result<Rows<'s, E>> {
        use crate::on::DeviceRows;
        use candle_core::backend::BackendDevice;
        use tritium::backend::cuda::SliceRange;
        let dims = layout.dims();
        let stride: Vec<isize> = layout.stride().iter().map(|&s| s as isize).collect();
        // The elements the kernel reads where they lie: a row-major layout's, or (read
        // strided) those up to the last element of a layout whose last dim is contiguous.
        let span = match (read, layout.contiguous_offsets()) {
            (_, Some((start, end))) => Some((start..end, row_major(dims))),
            (Read::LastDimContiguous, None)
                if dims.last().is_none_or(|&n| n <= 1) || stride.last() == Some(&1) =>
            {
                let start = layout.start_offset();
                let last = (dims.iter().zip(layout.stride()))
                    .map(|(&n, &s)| n.saturating_sub(1) * s)
                    .sum::<usize>();
                let end = match dims.contains(&0) {
                    true => start,
                    false => start + last + 1,
                };
                Some((start..end, stride))
            }
            _ => None,
        };
        match span {
            Some((range, strides)) => {
                let slice = E::as_cuda_slice(self)?;
                let len = slice.len();
                let window = SliceRange::new(slice, range).ok_or_else(|| {
                    candle_core::Error::Msg(format!(
                        "a tensor of layout {layout:?} does not fit its storage of {len} elements"
                    ))
                })?;
                Ok(Rows::device(dims, &strides, DeviceRows::Window(window)))
            }
            None => {
                let mut copy = self.device().zeros_impl(layout.shape(), self.dtype())?;
                self.copy_strided_src(&mut copy, 0, layout)?;
                Ok(Rows::device(dims, &row_major(dims), DeviceRows::Copy(copy)))
            }
        }
    }

    fn from_buffer<E: KernelElem>(buffer: Buffer<E>) -> Result<Self> {
        match buffer.into_storage() {
            Storage::Cuda(s) => Ok(s),
            _ => unreachable!("a device buffer made host storage"),
        }
    }
}
