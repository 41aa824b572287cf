//! Kernels as candle custom ops in a few lines: implement [`UnaryKernel`] (one input) or
//! [`BinaryKernel`] (two) with the launches of a forward kernel and, for autograd, a
//! backward one, and [`KernelOp`] is the candle op: the dtype (f32, f16, bf16) picked at
//! run time, inputs read where they lie when row-major, the output (of the input's shape,
//! or of the kernel's `output_shape`: a reduction, a product of differently shaped
//! operands) made without a copy, shapes and dtypes checked, errors as candle errors
//! naming the op. The same launches serve CPU tensors (`cpu_fwd`) and, with the `cuda`
//! feature, CUDA ones (`cuda_fwd`): a kernel launches on [`On::device`] with
//! [`On::options`] (for CUDA, candle's device and stream), reading [`Rows`] and writing
//! [`Out`] buffers of either.
//!
//! ```ignore
//! #[derive(Clone)]
//! struct Gelu;
//! impl UnaryKernel for Gelu {
//!     fn name(&self) -> &'static str { "gelu" }
//!     fn forward<T: KernelFloat>(&self, on: &On, x: &Rows<T>, y: &mut Out<T>) -> tritium::Result<()> {
//!         let n = y.len();
//!         gelu_erf::launch_with(on.device(), n.div_ceil(1024), on.options(), y, x, n as i32, 1024)
//!     }
//!     fn backward<T: KernelFloat>(&self, on: &On, x: &Rows<T>, dy: &Rows<T>, dx: &mut Out<T>) -> tritium::Result<()> {
//!         let n = dx.len();
//!         gelu_erf_bwd::launch_with(on.device(), n.div_ceil(1024), on.options(), dx, x, dy, n as i32, 1024)
//!     }
//! }
//! let y = x.apply_op1(KernelOp(Gelu))?; // differentiable under candle's autograd
//! ```

use crate::candle_error;
use crate::op::{cpu_array, dispatch, op_error, same_dtype, zeros, KernelFloat, PerFloat};
use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp1, CustomOp2, CustomOp3, Layout, Result, Shape, Tensor};
use ndarray::{CowArray, IxDyn};
use tritium::backend::launch::{PackedPtr, PtrArg, RawBuffer};
use tritium::{Device, LaunchOptions};

/// Where an op's launches run: the device and the options to launch with (on CUDA,
/// candle's stream, so that a launch is queued in order with candle's own work).
#[derive(Debug, Clone)]
pub struct On {
    device: Device,
    options: LaunchOptions,
}

impl On {
    /// Launches on `device` with default options (CPU tensors' ops: [`Device::cpu`]).
    pub fn new(device: Device) -> On {
        On {
            device,
            options: LaunchOptions::default(),
        }
    }

    /// The device to launch on.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The options to launch with (`launch_with`).
    pub fn options(&self) -> &LaunchOptions {
        &self.options
    }
}

/// A kernel's input: the tensor's elements row-major in its shape, where they lie when
/// they are so, else a row-major copy; in host memory for a CPU tensor, device memory for
/// a CUDA one. A kernel's `Ptr<T>` parameter takes `&Rows<T>`.
pub struct Rows<'a, T> {
    shape: Vec<usize>,
    data: RowsData<'a, T>,
}

enum RowsData<'a, T> {
    Host(CowArray<'a, T, IxDyn>),
    #[cfg(feature = "cuda")]
    Cuda(cuda::DeviceRows<'a, T>),
}

impl<'a, T> Rows<'a, T> {
    /// Host rows (a CPU tensor's, or an array of one's shape).
    pub fn host(array: CowArray<'a, T, IxDyn>) -> Self {
        Rows {
            shape: array.shape().to_vec(),
            data: RowsData::Host(array),
        }
    }

    /// The tensor's shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
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

impl<'a, 'r: 'a, T: KernelFloat> PtrArg<'a, T> for &'r Rows<'_, T> {
    fn raw_buffer(self) -> RawBuffer {
        PtrArg::<T>::pack(self).raw()
    }

    fn pack(self) -> PackedPtr<'a> {
        match &self.data {
            RowsData::Host(a) => PtrArg::<T>::pack(a),
            #[cfg(feature = "cuda")]
            RowsData::Cuda(d) => d.pack(),
        }
    }
}

/// A kernel's output: `len()` elements it writes whole, row-major in the output's shape
/// (host memory for CPU tensors, device memory candle's stream allocated for CUDA ones).
/// A kernel's `Ptr<T>` parameter takes `&mut Out<T>` (pass `y` where `y: &mut Out<T>`).
pub enum Out<'a, T> {
    /// Host memory.
    Host(&'a mut [T]),
    /// Device memory.
    #[cfg(feature = "cuda")]
    Cuda(tritium::backend::cuda::SliceRangeMut<'a, T>),
}

impl<T> Out<'_, T> {
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

impl<'a, 'r: 'a, T: KernelFloat> PtrArg<'a, T> for &'r mut Out<'_, T> {
    fn raw_buffer(self) -> RawBuffer {
        PtrArg::<T>::pack(self).raw()
    }

    fn pack(self) -> PackedPtr<'a> {
        match self {
            Out::Host(v) => PtrArg::<T>::pack(&mut **v),
            #[cfg(feature = "cuda")]
            Out::Cuda(v) => PtrArg::<T>::pack(v),
        }
    }
}

/// One input, one output of the input's dtype: of its shape (an activation, a row-wise
/// norm without weights, …) or of [`UnaryKernel::output_shape`] (a reduction, …).
pub trait UnaryKernel: Clone + Send + Sync + 'static {
    /// The op's name, in candle's graph and in errors.
    fn name(&self) -> &'static str;

    /// The input's name, in errors.
    fn input_name(&self) -> &'static str {
        "x"
    }

    /// The output's shape for an input of shape `x` (by default `x`'s), or what is wrong
    /// with `x` (the op's error then).
    fn output_shape(&self, x: &[usize]) -> std::result::Result<Vec<usize>, String> {
        Ok(x.to_vec())
    }

    /// Writes `y` (row-major, [`UnaryKernel::output_shape`]'s elements) from `x`, launching
    /// on `on`.
    fn forward<T: KernelFloat>(&self, on: &On, x: &Rows<T>, y: &mut Out<T>) -> tritium::Result<()>;

    /// Writes `dx` (of `x`'s shape) from `x` and the output's gradient `dy` (of the
    /// output's shape). Without it, the op has no backward: autograd through it is an
    /// error naming it.
    fn backward<T: KernelFloat>(
        &self,
        on: &On,
        x: &Rows<T>,
        dy: &Rows<T>,
        dx: &mut Out<T>,
    ) -> tritium::Result<()> {
        let _ = (on, x, dy, dx);
        Err(no_backward(self.name()))
    }
}

/// Two inputs of one dtype, one output of that dtype: by default the inputs have one
/// shape, the output's (a gated activation, an elementwise product, …); a kernel whose
/// operands or output differ in shape (a row scaling, a product) says so in
/// [`BinaryKernel::output_shape`].
pub trait BinaryKernel: Clone + Send + Sync + 'static {
    /// The op's name, in candle's graph and in errors.
    fn name(&self) -> &'static str;

    /// The inputs' names, in errors.
    fn input_names(&self) -> [&'static str; 2] {
        ["a", "b"]
    }

    /// The output's shape for inputs of shapes `a` and `b` (by default: `a`'s, which `b`
    /// must have), or what is wrong with them (the op's error then).
    fn output_shape(&self, a: &[usize], b: &[usize]) -> std::result::Result<Vec<usize>, String> {
        let [an, bn] = self.input_names();
        match a == b {
            true => Ok(a.to_vec()),
            false => Err(format!("{bn} must have {an}'s shape {a:?}, got {b:?}")),
        }
    }

    /// Writes `y` (row-major, [`BinaryKernel::output_shape`]'s elements) from `a` and `b`,
    /// launching on `on`.
    fn forward<T: KernelFloat>(
        &self,
        on: &On,
        a: &Rows<T>,
        b: &Rows<T>,
        y: &mut Out<T>,
    ) -> tritium::Result<()>;

    /// Writes `da` and `db` (of `a`'s and `b`'s shapes) from `a`, `b` and the output's
    /// gradient `dy`. Without it, the op has no backward: autograd through it is an error
    /// naming it.
    fn backward<T: KernelFloat>(
        &self,
        on: &On,
        a: &Rows<T>,
        b: &Rows<T>,
        dy: &Rows<T>,
        da: &mut Out<T>,
        db: &mut Out<T>,
    ) -> tritium::Result<()> {
        let _ = (on, a, b, dy, da, db);
        Err(no_backward(self.name()))
    }
}

/// The candle op of a [`UnaryKernel`] (`x.apply_op1(KernelOp(k))`) or a [`BinaryKernel`]
/// (`a.apply_op2(&b, KernelOp(k))`), differentiable where the kernel has a backward.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelOp<K>(pub K);

fn no_backward(name: &str) -> tritium::Error {
    tritium::Error::Launch {
        kernel: name.into(),
        message: "has no backward kernel (UnaryKernel/BinaryKernel::backward)".into(),
    }
}

/// `shape` or the op's error naming what was wrong.
fn shape_of(op: &str, shape: std::result::Result<Vec<usize>, String>) -> Result<Shape> {
    shape.map(Shape::from).map_err(|m| op_error(op, m))
}

/// A gradient `dy` must have the op's output shape.
fn check_dy(op: &str, dy: &Layout, out: &Shape) -> Result<()> {
    match dy.dims() == out.dims() {
        true => Ok(()),
        false => Err(op_error(
            op,
            format!(
                "dy must have the output's shape {:?}, got {:?}",
                out.dims(),
                dy.dims()
            ),
        )),
    }
}

/// The storages and layouts a launch reads (CPU or CUDA ones), checked to share one dtype.
pub(crate) struct Inputs<'a, S> {
    op: &'static str,
    all: Vec<(&'a S, &'a Layout)>,
}

impl<'a, S: BackendStorage> Inputs<'a, S> {
    pub(crate) fn new(op: &'static str, named: &[(&str, &'a S, &'a Layout)]) -> Result<Self> {
        let dtypes: Vec<_> = named.iter().map(|(n, s, _)| (*n, s.dtype())).collect();
        same_dtype(op, &dtypes)?;
        Ok(Inputs {
            op,
            all: named.iter().map(|(_, s, l)| (*s, *l)).collect(),
        })
    }

    pub(crate) fn elems(&self, k: usize) -> usize {
        self.all[k].1.shape().elem_count()
    }
}

/// A storage kernel ops launch on: runs `f` with every input as [`Rows`] of the inputs'
/// float type and zeroed outputs of `lens` elements, one after the other, on the storage's
/// device; gives them as one storage.
pub(crate) trait Launches: BackendStorage + Sized {
    fn launch<F: LaunchWith>(inputs: Inputs<'_, Self>, lens: &[usize], f: F) -> Result<Self>;
}

impl Launches for CpuStorage {
    fn launch<F: LaunchWith>(inputs: Inputs<'_, Self>, lens: &[usize], f: F) -> Result<Self> {
        let (op, dtype) = (inputs.op, inputs.all[0].0.dtype());
        let lens = lens.to_vec();
        dispatch(op, dtype, Run { inputs, lens, f })
    }
}

/// What a launch does with the inputs' rows and its outputs, for any float type.
pub(crate) trait LaunchWith {
    fn with<T: KernelFloat>(
        &self,
        on: &On,
        rows: &[Rows<'_, T>],
        outs: &mut [Out<'_, T>],
    ) -> tritium::Result<()>;
}

struct Run<'a, F> {
    inputs: Inputs<'a, CpuStorage>,
    lens: Vec<usize>,
    f: F,
}

impl<F: LaunchWith> PerFloat for Run<'_, F> {
    type Output = CpuStorage;

    fn run<T: KernelFloat>(self) -> Result<CpuStorage> {
        let total = self.lens.iter().sum();
        let mut out = zeros::<T>(total);
        if total > 0 {
            let rows = (self.inputs.all.iter())
                .map(|(s, l)| cpu_array::<T>(s, l).map(Rows::host))
                .collect::<Result<Vec<_>>>()?;
            let mut outs = Vec::with_capacity(self.lens.len());
            let mut rest = out.as_mut_slice();
            for &n in &self.lens {
                let (one, more) = rest.split_at_mut(n);
                outs.push(Out::Host(one));
                rest = more;
            }
            let on = On::new(Device::cpu());
            self.f.with(&on, &rows, &mut outs).map_err(candle_error)?;
        }
        Ok(T::to_cpu_storage_owned(out))
    }
}

struct Forward1<'k, K>(&'k K);
impl<K: UnaryKernel> LaunchWith for Forward1<'_, K> {
    fn with<T: KernelFloat>(
        &self,
        on: &On,
        r: &[Rows<'_, T>],
        outs: &mut [Out<'_, T>],
    ) -> tritium::Result<()> {
        self.0.forward(on, &r[0], &mut outs[0])
    }
}

struct Backward1<'k, K>(&'k K);
impl<K: UnaryKernel> LaunchWith for Backward1<'_, K> {
    fn with<T: KernelFloat>(
        &self,
        on: &On,
        r: &[Rows<'_, T>],
        outs: &mut [Out<'_, T>],
    ) -> tritium::Result<()> {
        self.0.backward(on, &r[0], &r[1], &mut outs[0])
    }
}

struct Forward2<'k, K>(&'k K);
impl<K: BinaryKernel> LaunchWith for Forward2<'_, K> {
    fn with<T: KernelFloat>(
        &self,
        on: &On,
        r: &[Rows<'_, T>],
        outs: &mut [Out<'_, T>],
    ) -> tritium::Result<()> {
        self.0.forward(on, &r[0], &r[1], &mut outs[0])
    }
}

struct Backward2<'k, K>(&'k K);
impl<K: BinaryKernel> LaunchWith for Backward2<'_, K> {
    fn with<T: KernelFloat>(
        &self,
        on: &On,
        r: &[Rows<'_, T>],
        outs: &mut [Out<'_, T>],
    ) -> tritium::Result<()> {
        let [da, db] = outs else {
            unreachable!("two gradients")
        };
        self.0.backward(on, &r[0], &r[1], &r[2], da, db)
    }
}

/// A unary kernel's gradient: `(x, dy) → dx`.
#[derive(Clone)]
struct Grad<K>(K);

/// `cpu_fwd` and, with the `cuda` feature, `cuda_fwd`: the generic forward `$f` of the
/// op (its storages' kind `S` a type parameter) for both kinds of storage.
macro_rules! forwards {
    ($f:ident($($s:ident, $l:ident),+)) => {
        fn cpu_fwd(&self, $($s: &CpuStorage, $l: &Layout),+) -> Result<(CpuStorage, Shape)> {
            self.$f($($s, $l),+)
        }

        #[cfg(feature = "cuda")]
        fn cuda_fwd(
            &self,
            $($s: &candle_core::CudaStorage, $l: &Layout),+
        ) -> Result<(candle_core::CudaStorage, Shape)> {
            self.$f($($s, $l),+)
        }
    };
}

pub(crate) use forwards;

impl<K: UnaryKernel> KernelOp<K> {
    fn forward<S: Launches>(&self, s: &S, l: &Layout) -> Result<(S, Shape)> {
        let op = self.0.name();
        let shape = shape_of(op, self.0.output_shape(l.dims()))?;
        let inputs = Inputs::new(op, &[(self.0.input_name(), s, l)])?;
        let out = S::launch(inputs, &[shape.elem_count()], Forward1(&self.0))?;
        Ok((out, shape))
    }
}

impl<K: UnaryKernel> CustomOp1 for KernelOp<K> {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    forwards!(forward(s, l));

    fn bwd(&self, x: &Tensor, _y: &Tensor, dy: &Tensor) -> Result<Option<Tensor>> {
        let dy = dy.to_dtype(x.dtype())?;
        Ok(Some(x.apply_op2_no_bwd(&dy, &Grad(self.0.clone()))?))
    }
}

impl<K: UnaryKernel> Grad<K> {
    fn forward<S: Launches>(&self, xs: &S, xl: &Layout, ds: &S, dl: &Layout) -> Result<(S, Shape)> {
        let (op, x) = (self.0.name(), self.0.input_name());
        check_dy(op, dl, &shape_of(op, self.0.output_shape(xl.dims()))?)?;
        let inputs = Inputs::new(op, &[(x, xs, xl), ("dy", ds, dl)])?;
        let lens = [inputs.elems(0)];
        Ok((
            S::launch(inputs, &lens, Backward1(&self.0))?,
            xl.shape().clone(),
        ))
    }
}

impl<K: UnaryKernel> CustomOp2 for Grad<K> {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    forwards!(forward(xs, xl, ds, dl));
}

/// A binary kernel's gradients: `(a, b, dy) → da, db` flattened one after the other.
#[derive(Clone)]
struct Grads<K>(K);

impl<K: BinaryKernel> KernelOp<K> {
    fn forward2<S: Launches>(&self, a: &S, al: &Layout, b: &S, bl: &Layout) -> Result<(S, Shape)> {
        let ([an, bn], op) = (self.0.input_names(), self.0.name());
        let shape = shape_of(op, self.0.output_shape(al.dims(), bl.dims()))?;
        let inputs = Inputs::new(op, &[(an, a, al), (bn, b, bl)])?;
        let out = S::launch(inputs, &[shape.elem_count()], Forward2(&self.0))?;
        Ok((out, shape))
    }
}

impl<K: BinaryKernel> CustomOp2 for KernelOp<K> {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    forwards!(forward2(a, al, b, bl));

    fn bwd(
        &self,
        a: &Tensor,
        b: &Tensor,
        _y: &Tensor,
        dy: &Tensor,
    ) -> Result<(Option<Tensor>, Option<Tensor>)> {
        let dy = dy.to_dtype(a.dtype())?;
        let grads = a.apply_op3_no_bwd(b, &dy, &Grads(self.0.clone()))?;
        let na = a.elem_count();
        let da = grads.narrow(0, 0, na)?.reshape(a.shape())?;
        let db = grads.narrow(0, na, b.elem_count())?.reshape(b.shape())?;
        Ok((Some(da), Some(db)))
    }
}

impl<K: BinaryKernel> Grads<K> {
    #[allow(clippy::too_many_arguments)]
    fn forward<S: Launches>(
        &self,
        a: &S,
        al: &Layout,
        b: &S,
        bl: &Layout,
        d: &S,
        dl: &Layout,
    ) -> Result<(S, Shape)> {
        let ([an, bn], op) = (self.0.input_names(), self.0.name());
        let out_shape = shape_of(op, self.0.output_shape(al.dims(), bl.dims()))?;
        check_dy(op, dl, &out_shape)?;
        let inputs = Inputs::new(op, &[(an, a, al), (bn, b, bl), ("dy", d, dl)])?;
        let lens = [inputs.elems(0), inputs.elems(1)];
        let total = Shape::from(lens[0] + lens[1]);
        Ok((S::launch(inputs, &lens, Backward2(&self.0))?, total))
    }
}

impl<K: BinaryKernel> CustomOp3 for Grads<K> {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    forwards!(forward(a, al, b, bl, d, dl));
}

/// Kernel ops on candle's CUDA storage: inputs read in device memory where they lie (a
/// row-major layout, from its offset) or from a row-major copy, outputs allocated on
/// candle's stream (several outputs as windows of one allocation), launches queued on that
/// stream.
#[cfg(feature = "cuda")]
mod cuda {
    use super::{dispatch, Inputs, KernelFloat, LaunchWith, Launches, On, Out, PerFloat, Rows};
    use crate::candle_error;
    use candle_core::backend::{BackendDevice, BackendStorage};
    use candle_core::{CudaStorage, Layout, Result};
    use tritium::backend::cuda::{SliceRange, SliceRangeMut, Stream};
    use tritium::backend::launch::{PackedPtr, PtrArg};
    use tritium::LaunchOptions;

    /// A CUDA input's rows.
    pub(super) enum DeviceRows<'a, T> {
        /// The storage's own elements.
        Window(SliceRange<'a, T>),
        /// A row-major copy (of another layout).
        Copy(CudaStorage),
    }

    impl<T: KernelFloat> DeviceRows<'_, T> {
        pub(super) fn pack<'a>(&'a self) -> PackedPtr<'a> {
            match self {
                DeviceRows::Window(w) => PtrArg::<T>::pack(w),
                DeviceRows::Copy(s) => match T::as_cuda_slice(s) {
                    Ok(slice) => PtrArg::<T>::pack(slice),
                    Err(e) => unreachable!("a copy made of the op's dtype: {e}"),
                },
            }
        }
    }

    /// Storage `s` under `layout` as rows of `T`.
    fn rows<'s, T: KernelFloat>(s: &'s CudaStorage, layout: &Layout) -> Result<Rows<'s, T>> {
        let data = match layout.contiguous_offsets() {
            Some((start, end)) => {
                let slice = T::as_cuda_slice(s)?;
                let window = SliceRange::new(slice, start..end).ok_or_else(|| {
                    candle_core::Error::Msg(format!(
                        "a tensor of layout {layout:?} does not fit its storage of {} elements",
                        slice.len()
                    ))
                })?;
                DeviceRows::Window(window)
            }
            None => {
                let mut copy = s.device().zeros_impl(layout.shape(), s.dtype())?;
                s.copy_strided_src(&mut copy, 0, layout)?;
                DeviceRows::Copy(copy)
            }
        };
        Ok(Rows {
            shape: layout.dims().to_vec(),
            data: super::RowsData::Cuda(data),
        })
    }

    impl Launches for CudaStorage {
        fn launch<F: LaunchWith>(inputs: Inputs<'_, Self>, lens: &[usize], f: F) -> Result<Self> {
            let (op, dtype) = (inputs.op, inputs.all[0].0.dtype());
            let lens = lens.to_vec();
            dispatch(op, dtype, Run { inputs, lens, f })
        }
    }

    struct Run<'a, F> {
        inputs: Inputs<'a, CudaStorage>,
        lens: Vec<usize>,
        f: F,
    }

    impl<F: LaunchWith> PerFloat for Run<'_, F> {
        type Output = CudaStorage;

        fn run<T: KernelFloat>(self) -> Result<CudaStorage> {
            let dev = self.inputs.all[0].0.device().clone();
            let total: usize = self.lens.iter().sum();
            // (At least one element: the driver allocates no zero-byte buffers.)
            let mut out = dev.alloc_zeros::<T>(total.max(1))?;
            if total > 0 {
                let rows = (self.inputs.all.iter())
                    .map(|(s, l)| rows::<T>(s, l))
                    .collect::<Result<Vec<_>>>()?;
                // candle's stream, and the device it belongs to (opened once, by the stream).
                let stream = Stream::from_cuda_stream(dev.cuda_stream()).map_err(candle_error)?;
                let on = On {
                    device: stream.device(),
                    options: LaunchOptions {
                        stream: Some(stream),
                        ..Default::default()
                    },
                };
                // Every output a window of the one storage, one after the other.
                let windows = SliceRangeMut::split(&mut out, &self.lens)
                    .ok_or_else(|| candle_core::Error::Msg("outputs past their storage".into()))?;
                let mut outs: Vec<Out<'_, T>> = windows.into_iter().map(Out::Cuda).collect();
                self.f.with(&on, &rows, &mut outs).map_err(candle_error)?;
            }
            Ok(T::wrap_cuda_slice(out, dev))
        }
    }
}
