//! Host arguments of a launch: borrowed buffers and scalars, type-checked by Rust generics.

use crate::runtime::{DeviceUse, UseTracker};
use ndarray::{ArrayBase, Data, DataMut, Dimension, RawData};
use std::marker::PhantomData;
use tritium_dsl::ir::ViewLayout;
use tritium_dsl::trace::Element;
use tritium_dsl::DType;

/// A buffer as the kernel sees it: the pointer it gets and the byte range it may touch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawBuffer {
    /// Address of the first logical element (what the kernel's pointer parameter holds).
    pub ptr: usize,
    /// First valid byte address.
    pub lo: usize,
    /// One past the last valid byte address.
    pub hi: usize,
    /// Element dtype.
    pub dtype: DType,
    /// True when the caller passed an exclusive borrow.
    pub writable: bool,
    /// Where the buffer lives.
    pub memory: Memory,
    /// For a strided view whose span has bytes that are not its elements: which ones are
    /// (checked mode and the interpreter reject accesses between them).
    pub view: Option<ViewLayout>,
}

/// Where a buffer lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Memory {
    /// Host memory (ndarray arrays, slices, vectors).
    Host,
    /// The memory of CUDA device `n` (a [`CudaTensor`](crate::cuda::CudaTensor)).
    Cuda(usize),
}

impl RawBuffer {
    /// True when `[addr, addr + size)` lies inside the buffer.
    pub fn contains(&self, addr: usize, size: usize) -> bool {
        addr >= self.lo && addr.checked_add(size).is_some_and(|end| end <= self.hi)
    }
}

/// One launch argument after packing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RawArg {
    /// A pointer parameter.
    Ptr(RawBuffer),
    /// A scalar parameter: the value's little-endian bytes zero-extended to 64 bits.
    Scalar {
        /// Its dtype.
        dtype: DType,
        /// Its bits.
        bits: u64,
    },
}

impl RawArg {
    /// The 64-bit parameter slot host code passes: the pointer, or the scalar's bits.
    pub fn slot(&self) -> u64 {
        match self {
            RawArg::Ptr(b) => b.ptr as u64,
            RawArg::Scalar { bits, .. } => *bits,
        }
    }
}

/// The bits of a scalar as [`RawArg::Scalar`] stores them.
pub fn scalar_bits<T: Element>(v: T) -> u64 {
    let size = std::mem::size_of::<T>();
    assert!(size <= 8, "Tritium elements are at most 8 bytes");
    let mut bytes = [0u8; 8];
    // SAFETY: `T` is a plain `Copy` element of `size <= 8` bytes; we copy its bytes out.
    unsafe { std::ptr::copy_nonoverlapping(&v as *const T as *const u8, bytes.as_mut_ptr(), size) };
    u64::from_le_bytes(bytes)
}

/// Something a pointer parameter of element type `T` accepts: ndarray arrays and views,
/// slices and vectors. Shared borrows are read-only; exclusive borrows may be written.
pub trait PtrArg<'a, T: Element> {
    /// The buffer.
    fn raw_buffer(self) -> RawBuffer;

    /// The buffer and, for device tensors, what orders launches on it across streams.
    fn pack(self) -> PackedPtr<'a>
    where
        Self: Sized,
    {
        PackedPtr::plain(self.raw_buffer())
    }
}

/// What an argument keeps alive for its launch (a candle tensor's storage lock).
pub trait Held {}

impl<T> Held for T {}

/// A pointer argument as [`KernelArgs`] stores it (see [`PtrArg::pack`]).
#[derive(Clone)]
pub struct PackedPtr<'a> {
    raw: RawBuffer,
    uses: Option<DeviceUse<'a>>,
    /// A [`PtrTable`]'s entries.
    pointees: Vec<PackedPtr<'a>>,
    /// Kept until the launch returns (a lock that keeps the buffer from being written).
    hold: Option<std::sync::Arc<dyn Held>>,
    /// Why this argument cannot be passed (the launch is then an error naming it).
    problem: Option<String>,
}

impl std::fmt::Debug for PackedPtr<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (f.debug_struct("PackedPtr"))
            .field("raw", &self.raw)
            .field("pointees", &self.pointees)
            .field("problem", &self.problem)
            .finish_non_exhaustive()
    }
}

impl<'a> PackedPtr<'a> {
    /// The buffer.
    pub fn raw(&self) -> RawBuffer {
        self.raw
    }

    /// A buffer that needs nothing kept alive.
    pub fn plain(raw: RawBuffer) -> Self {
        PackedPtr {
            raw,
            uses: None,
            pointees: Vec::new(),
            hold: None,
            problem: None,
        }
    }

    /// `raw`, valid while `hold` lives: it is kept until the launch returns.
    pub fn holding(raw: RawBuffer, hold: impl Held + 'static) -> Self {
        PackedPtr {
            hold: Some(std::sync::Arc::new(hold)),
            ..PackedPtr::plain(raw)
        }
    }

    /// An argument that cannot be passed, and why: its launch is an error.
    pub fn refused(raw: RawBuffer, why: String) -> Self {
        PackedPtr {
            problem: Some(why),
            ..PackedPtr::plain(raw)
        }
    }

    pub(crate) fn tracked(raw: RawBuffer, uses: &'a UseTracker) -> Self {
        PackedPtr {
            uses: Some(DeviceUse::Tracked(uses)),
            ..PackedPtr::plain(raw)
        }
    }

    /// Device memory other CUDA code owns, ordered through its owner's `stream` (see
    /// [`DeviceUse::Owned`]).
    pub(crate) fn owned_by(
        raw: RawBuffer,
        stream: std::sync::Arc<cudarc::driver::CudaStream>,
    ) -> Self {
        PackedPtr {
            uses: Some(DeviceUse::Owned(stream)),
            ..PackedPtr::plain(raw)
        }
    }

    /// The same, valid while `hold` lives: it is kept until the launch returns.
    #[cfg_attr(not(feature = "candle-cuda"), allow(dead_code))]
    pub(crate) fn held(self, hold: impl Held + 'static) -> Self {
        PackedPtr {
            hold: Some(std::sync::Arc::new(hold)),
            ..self
        }
    }
}

/// A table of pointers to arrays, for a `Ptr<i64>` (or `Ptr<u64>`) parameter that the
/// kernel reads addresses from and casts to pointers (`load(ptrs + g).to(pointer_type(F16))`),
/// as Triton's grouped GEMM takes `torch.tensor([a.data_ptr(), …])`. The table borrows
/// every array it points at for its lifetime, so a launch cannot outlive them; pushing
/// `&mut` arrays lets the kernel write them. Every entry is a buffer of the launch: checked
/// mode and the interpreter accept an access through a table pointer only inside one (a
/// store only inside a writable one), race detection watches them, a written entry must
/// not overlap any other buffer, and on CUDA host arrays are staged and the table holds
/// their device addresses.
#[derive(Debug, Default)]
pub struct PtrTable<'t> {
    addresses: Vec<i64>,
    entries: Vec<PackedPtr<'t>>,
    /// Invariant in `'t`: the arrays stay borrowed while the table lives.
    _borrows: PhantomData<&'t mut ()>,
}

impl<'t> PtrTable<'t> {
    /// An empty table.
    pub fn new() -> Self {
        PtrTable::default()
    }

    /// Appends a pointer to `array`'s first element (entry `len()`).
    pub fn push<T: Element>(&mut self, array: impl PtrArg<'t, T>) -> &mut Self {
        let packed = array.pack();
        self.addresses.push(packed.raw.ptr as i64);
        self.entries.push(packed);
        self
    }

    /// A table of `arrays`, in order.
    pub fn of<T: Element, A: PtrArg<'t, T>>(arrays: impl IntoIterator<Item = A>) -> Self {
        let mut table = PtrTable::new();
        for a in arrays {
            table.push(a);
        }
        table
    }

    /// The number of entries.
    pub fn len(&self) -> usize {
        self.addresses.len()
    }

    /// True without entries.
    pub fn is_empty(&self) -> bool {
        self.addresses.is_empty()
    }

    fn packed<'a>(&'a self, dtype: DType) -> PackedPtr<'a>
    where
        't: 'a,
    {
        let ptr = self.addresses.as_ptr() as usize;
        let raw = RawBuffer {
            ptr,
            lo: ptr,
            hi: ptr + std::mem::size_of_val(self.addresses.as_slice()),
            dtype,
            writable: false,
            memory: Memory::Host,
            view: None,
        };
        PackedPtr {
            pointees: self.entries.clone(),
            ..PackedPtr::plain(raw)
        }
    }
}

impl<'a, 'r: 'a, 't: 'r> PtrArg<'a, i64> for &'r PtrTable<'t> {
    fn raw_buffer(self) -> RawBuffer {
        self.packed(DType::I64).raw
    }

    fn pack(self) -> PackedPtr<'a> {
        self.packed(DType::I64)
    }
}

impl<'a, 'r: 'a, 't: 'r> PtrArg<'a, u64> for &'r PtrTable<'t> {
    fn raw_buffer(self) -> RawBuffer {
        self.packed(DType::U64).raw
    }

    fn pack(self) -> PackedPtr<'a> {
        self.packed(DType::U64)
    }
}

/// A buffer a launch reaches through an entry of a [`PtrTable`] argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pointee {
    /// The table's argument index.
    pub arg: usize,
    /// The entry's index in the table.
    pub entry: usize,
    /// The buffer.
    pub buffer: RawBuffer,
}

fn span<S: RawData, D: Dimension>(a: &ArrayBase<S, D>, writable: bool, dtype: DType) -> RawBuffer {
    let size = dtype.size_bytes();
    let ptr = a.as_ptr() as usize;
    if a.is_empty() {
        return RawBuffer {
            ptr,
            lo: ptr,
            hi: ptr,
            dtype,
            writable,
            memory: Memory::Host,
            view: None,
        };
    }
    let (mut min, mut max) = (0isize, 0isize);
    for (&d, &s) in a.shape().iter().zip(a.strides()) {
        let extent = s * (d as isize - 1);
        if extent < 0 {
            min += extent;
        } else {
            max += extent;
        }
    }
    let lo = (ptr as isize + min * size as isize) as usize;
    let hi = (ptr as isize + (max + 1) * size as isize) as usize;
    RawBuffer {
        ptr,
        lo,
        hi,
        dtype,
        writable,
        memory: Memory::Host,
        view: ViewLayout::of(a.shape(), a.strides(), size),
    }
}

impl<'a, 'r: 'a, T: Element, S: Data<Elem = T>, D: Dimension> PtrArg<'a, T>
    for &'r ArrayBase<S, D>
{
    fn raw_buffer(self) -> RawBuffer {
        span(self, false, T::DTYPE)
    }
}

impl<'a, 'r: 'a, T: Element, S: DataMut<Elem = T>, D: Dimension> PtrArg<'a, T>
    for &'r mut ArrayBase<S, D>
{
    fn raw_buffer(self) -> RawBuffer {
        span(self, true, T::DTYPE)
    }
}

impl<'a, 'v: 'a, T: Element, D: Dimension> PtrArg<'a, T> for ndarray::ArrayView<'v, T, D> {
    fn raw_buffer(self) -> RawBuffer {
        span(&self, false, T::DTYPE)
    }
}

impl<'a, 'v: 'a, T: Element, D: Dimension> PtrArg<'a, T> for ndarray::ArrayViewMut<'v, T, D> {
    fn raw_buffer(self) -> RawBuffer {
        span(&self, true, T::DTYPE)
    }
}

impl<'a, 'r: 'a, T: Element> PtrArg<'a, T> for &'r [T] {
    fn raw_buffer(self) -> RawBuffer {
        let ptr = self.as_ptr() as usize;
        RawBuffer {
            ptr,
            lo: ptr,
            hi: ptr + std::mem::size_of_val(self),
            dtype: T::DTYPE,
            writable: false,
            memory: Memory::Host,
            view: None,
        }
    }
}

impl<'a, 'r: 'a, T: Element> PtrArg<'a, T> for &'r mut [T] {
    fn raw_buffer(self) -> RawBuffer {
        let ptr = self.as_ptr() as usize;
        RawBuffer {
            ptr,
            lo: ptr,
            hi: ptr + std::mem::size_of_val(self),
            dtype: T::DTYPE,
            writable: true,
            memory: Memory::Host,
            view: None,
        }
    }
}

impl<'a, 'r: 'a, T: Element> PtrArg<'a, T> for &'r Vec<T> {
    fn raw_buffer(self) -> RawBuffer {
        self.as_slice().raw_buffer()
    }
}

impl<'a, 'r: 'a, T: Element> PtrArg<'a, T> for &'r mut Vec<T> {
    fn raw_buffer(self) -> RawBuffer {
        self.as_mut_slice().raw_buffer()
    }
}

/// The packed arguments of one launch. The lifetime keeps the borrowed buffers alive and
/// borrowed for as long as the launch runs.
pub struct KernelArgs<'a> {
    /// Parameter names, in kernel order.
    pub names: Vec<&'static str>,
    /// Arguments, in kernel order.
    pub args: Vec<RawArg>,
    /// Buffers reached through [`PtrTable`] arguments.
    pub pointees: Vec<Pointee>,
    /// Device memory among the buffers (arguments and pointees): whether the launch may
    /// write it, and how the launch is ordered around its other uses (a Tritium tensor's
    /// tracker, or the stream that owns memory other CUDA code allocated).
    pub(crate) device_uses: Vec<(bool, DeviceUse<'a>)>,
    /// What the arguments keep alive until the launch returns.
    holds: Vec<std::sync::Arc<dyn Held>>,
    /// Arguments that cannot be passed: `argument `name`: why`.
    pub(crate) problems: Vec<String>,
    _borrows: PhantomData<&'a mut ()>,
}

impl<'a> KernelArgs<'a> {
    /// No arguments yet.
    pub fn new() -> Self {
        KernelArgs {
            names: Vec::new(),
            args: Vec::new(),
            pointees: Vec::new(),
            device_uses: Vec::new(),
            holds: Vec::new(),
            problems: Vec::new(),
            _borrows: PhantomData,
        }
    }

    /// Adds a pointer argument.
    pub fn ptr<T: Element>(&mut self, name: &'static str, arg: impl PtrArg<'a, T>) {
        let packed = arg.pack();
        if let Some(uses) = packed.uses {
            self.device_uses.push((packed.raw.writable, uses));
        }
        self.holds.extend(packed.hold);
        if let Some(why) = packed.problem {
            self.problems.push(format!("argument `{name}`: {why}"));
        }
        for (entry, p) in packed.pointees.into_iter().enumerate() {
            if let Some(uses) = p.uses {
                self.device_uses.push((p.raw.writable, uses));
            }
            self.pointees.push(Pointee {
                arg: self.args.len(),
                entry,
                buffer: p.raw,
            });
        }
        self.names.push(name);
        self.args.push(RawArg::Ptr(packed.raw));
    }

    /// Adds a scalar argument.
    pub fn scalar<T: Element>(&mut self, name: &'static str, value: T) {
        self.names.push(name);
        self.args.push(RawArg::Scalar {
            dtype: T::DTYPE,
            bits: scalar_bits(value),
        });
    }

    /// The same arguments for one more launch, borrowing these (an autotuned kernel
    /// launches once per timed config, then with the chosen one).
    pub fn reborrow(&self) -> KernelArgs<'_> {
        KernelArgs {
            names: self.names.clone(),
            args: self.args.clone(),
            pointees: self.pointees.clone(),
            device_uses: self.device_uses.clone(),
            holds: Vec::new(),
            problems: self.problems.clone(),
            _borrows: PhantomData,
        }
    }

    /// Which integer scalars equal 1 and, with `divisibility` (GPU targets), which are
    /// divisible by 16 and which pointers are aligned to 16 bytes (Triton's specialization).
    pub fn specialization(&self, divisibility: bool) -> tritium_dsl::trace::Specialization {
        let int_bits = |a: &RawArg| match a {
            RawArg::Scalar { dtype, bits } if dtype.is_int() => {
                let mask = if dtype.bits() >= 64 {
                    u64::MAX
                } else {
                    (1u64 << dtype.bits()) - 1
                };
                Some(bits & mask)
            }
            _ => None,
        };
        let ones = self.args.iter().map(|a| int_bits(a) == Some(1)).collect();
        let sixteens = match divisibility {
            false => Vec::new(),
            true => (self.args.iter())
                .map(|a| match a {
                    RawArg::Ptr(b) => b.ptr.is_multiple_of(16),
                    a => int_bits(a).is_some_and(|v| v != 1 && v.is_multiple_of(16)),
                })
                .collect(),
        };
        tritium_dsl::trace::Specialization { ones, sixteens }
    }
}

impl std::fmt::Debug for KernelArgs<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (f.debug_struct("KernelArgs"))
            .field("names", &self.names)
            .field("args", &self.args)
            .field("pointees", &self.pointees)
            .field("problems", &self.problems)
            .finish_non_exhaustive()
    }
}

impl Default for KernelArgs<'_> {
    fn default() -> Self {
        Self::new()
    }
}
