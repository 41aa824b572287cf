//! AOT operators: the definition ([`AotOpBuilder`]), and the GE-style life cycle of a call:
//! infer output shapes and dtypes → get or create the kernel instance for the input-shape key
//! (running `FuncInit` once) → execute `Func`.

use std::collections::HashMap;
use std::ffi::c_void;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::abi::{self, RawFn, ShapeArgs};
use super::attrs::{AttrValue, Attrs};
use super::buffer::{Buffer, GUARD_BYTES};
use super::compile::{self, CompileOptions, SourceKind};
use super::cuda::{self, DeviceTensor};
use super::dtype::{DType, MindSporeDType};
use super::error::{AotError, AotResult};
use super::extra::Extra;
use super::isolate::{self, Isolation, Worker};
use super::library::Library;
use super::tensor::{Inputs, Shape, Tensor, TensorRef, TensorSpec, DYN_DIM, DYN_RANK};
use super::whitelist::Whitelist;

/// Largest rank a data-dependent output may report beyond its upper bound's rank.
pub const MAX_DYNAMIC_RANK: usize = 8;

/// A parsed `"path:Func"`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FuncSpec {
    /// The source or library path.
    pub path: PathBuf,
    /// The main function's symbol.
    pub symbol: String,
}

impl FuncSpec {
    /// Parses `"path/to/file.cc:Func"` (the last `:` separates the symbol).
    pub fn parse(spec: &str) -> AotResult<FuncSpec> {
        let bad = |reason: &str| AotError::BadFuncSpec {
            spec: spec.to_string(),
            reason: reason.to_string(),
        };
        let (path, symbol) = spec
            .rsplit_once(':')
            .ok_or_else(|| bad("expected \"path:Func\" (e.g. \"add.cc:CustomAdd\")"))?;
        if path.is_empty() {
            return Err(bad("the path before ':' is empty"));
        }
        let mut chars = symbol.chars();
        let ok = matches!(chars.next(), Some(c) if c == '_' || c.is_ascii_alphabetic())
            && chars.all(|c| c == '_' || c.is_ascii_alphanumeric());
        if !ok {
            return Err(bad("the function name after ':' is not a C identifier"));
        }
        Ok(FuncSpec {
            path: PathBuf::from(path),
            symbol: symbol.to_string(),
        })
    }

    /// What the path names (source or library), by suffix.
    pub fn kind(&self) -> SourceKind {
        SourceKind::of(&self.path)
    }
}

/// Where an operator runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// Host memory, `stream` is null.
    Cpu,
    /// A CUDA source (`.cu`): device memory and a CUDA stream.
    Cuda,
}

/// Output-shape inference closure: input shapes (with `-1`/`[-2]` when dynamic) and attributes
/// to output shapes.
pub type ShapeFn = dyn Fn(&[Shape], &Attrs) -> Result<Vec<Shape>, String> + Send + Sync;
/// Output-dtype inference closure.
pub type DTypeFn = dyn Fn(&[DType], &Attrs) -> Result<Vec<DType>, String> + Send + Sync;
/// A backward written in Rust: `(inputs, outputs, output gradients) → input gradients`, as
/// MindSpore's `bprop(x…, out, dout)`.
pub type BackwardFn =
    dyn Fn(&[Tensor], &[Tensor], &[Tensor]) -> AotResult<Vec<Tensor>> + Send + Sync;

#[derive(Clone)]
enum ShapeRule {
    Library,
    Fixed(Vec<Shape>),
    Fn(Arc<ShapeFn>),
}

#[derive(Clone)]
enum DTypeRule {
    Library,
    Fixed(Vec<DType>),
    Fn(Arc<DTypeFn>),
}

#[derive(Clone)]
enum Backward {
    Fn(Arc<BackwardFn>),
    Op(AotOp),
}

/// Options of an operator that are not part of its meaning.
#[derive(Clone, Debug, Default)]
pub struct AotOptions {
    /// Checked mode: guard bytes after every output and workspace, and an error when the kernel
    /// overwrites them. Also on when `TRITIUM_BOUNDS_CHECK=1`.
    pub checked: bool,
    /// How sources are compiled and where the cache lives.
    pub compile: CompileOptions,
    /// The library whitelist; `None` reads `TRITIUM_AOT_WHITELIST` when the operator is built.
    pub whitelist: Option<Whitelist>,
}

fn env_checked() -> bool {
    matches!(
        std::env::var("TRITIUM_BOUNDS_CHECK").as_deref(),
        Ok("1") | Ok("true") | Ok("on")
    )
}

/// Something usable as a fixed shape: `[2, 3]`, `vec![4]`, `&[5usize][..]`.
pub trait IntoShape {
    /// The shape.
    fn into_shape(self) -> Shape;
}

macro_rules! into_shape {
    ($($t:ty),*) => {$(
        impl IntoShape for Vec<$t> {
            fn into_shape(self) -> Shape { self.into_iter().map(|d| d as i64).collect() }
        }
        impl IntoShape for &[$t] {
            fn into_shape(self) -> Shape { self.iter().map(|&d| d as i64).collect() }
        }
        impl<const N: usize> IntoShape for [$t; N] {
            fn into_shape(self) -> Shape { self.iter().map(|&d| d as i64).collect() }
        }
    )*};
}
into_shape!(i32, i64, u32, u64, usize);

/// Defines an [`AotOp`]. Everything but the function is optional; see the module docs.
#[derive(Clone)]
pub struct AotOpBuilder {
    func: String,
    shapes: ShapeRule,
    dtypes: DTypeRule,
    attrs: Attrs,
    num_inputs: Option<usize>,
    inputs: Vec<TensorSpec>,
    num_outputs: Option<usize>,
    tuple_infer: bool,
    data_dependent: bool,
    backward: Option<Backward>,
    options: AotOptions,
    target: Option<Target>,
    isolation: Option<Isolation>,
}

impl AotOpBuilder {
    /// Starts a definition of `"path:Func"`: a shared library, or a `.cc`/`.cpp`/`.cu` source
    /// compiled automatically.
    pub fn new(func: impl Into<String>) -> Self {
        AotOpBuilder {
            func: func.into(),
            shapes: ShapeRule::Library,
            dtypes: DTypeRule::Library,
            attrs: Attrs::new(),
            num_inputs: None,
            inputs: Vec::new(),
            num_outputs: None,
            tuple_infer: false,
            data_dependent: false,
            backward: None,
            options: AotOptions::default(),
            target: None,
            isolation: None,
        }
    }

    /// One output of a fixed shape.
    pub fn out_shape(mut self, shape: impl IntoShape) -> Self {
        self.shapes = ShapeRule::Fixed(vec![shape.into_shape()]);
        self
    }

    /// Several outputs of fixed shapes.
    pub fn out_shapes<S: IntoShape>(mut self, shapes: impl IntoIterator<Item = S>) -> Self {
        self.shapes = ShapeRule::Fixed(shapes.into_iter().map(IntoShape::into_shape).collect());
        self
    }

    /// One output whose shape a closure computes from the input shapes
    /// (MindSpore's `out_shape=lambda x, _: x`).
    pub fn infer_shape(mut self, f: impl Fn(&[Shape]) -> Shape + Send + Sync + 'static) -> Self {
        self.shapes = ShapeRule::Fn(Arc::new(move |s, _| Ok(vec![f(s)])));
        self
    }

    /// Several outputs whose shapes a closure computes from the input shapes.
    pub fn infer_shapes(
        mut self,
        f: impl Fn(&[Shape]) -> Vec<Shape> + Send + Sync + 'static,
    ) -> Self {
        self.shapes = ShapeRule::Fn(Arc::new(move |s, _| Ok(f(s))));
        self
    }

    /// Output shapes from a fallible closure that also sees the attributes.
    pub fn try_infer_shapes(
        mut self,
        f: impl Fn(&[Shape], &Attrs) -> Result<Vec<Shape>, String> + Send + Sync + 'static,
    ) -> Self {
        self.shapes = ShapeRule::Fn(Arc::new(f));
        self
    }

    /// One output of a fixed dtype.
    pub fn out_dtype(mut self, dtype: DType) -> Self {
        self.dtypes = DTypeRule::Fixed(vec![dtype]);
        self
    }

    /// Several outputs of fixed dtypes.
    pub fn out_dtypes(mut self, dtypes: impl IntoIterator<Item = DType>) -> Self {
        self.dtypes = DTypeRule::Fixed(dtypes.into_iter().collect());
        self
    }

    /// One output whose dtype a closure computes from the input dtypes.
    pub fn infer_dtype(mut self, f: impl Fn(&[DType]) -> DType + Send + Sync + 'static) -> Self {
        self.dtypes = DTypeRule::Fn(Arc::new(move |d, _| Ok(vec![f(d)])));
        self
    }

    /// Several outputs whose dtypes a closure computes from the input dtypes.
    pub fn infer_dtypes(
        mut self,
        f: impl Fn(&[DType]) -> Vec<DType> + Send + Sync + 'static,
    ) -> Self {
        self.dtypes = DTypeRule::Fn(Arc::new(move |d, _| Ok(f(d))));
        self
    }

    /// Output dtypes from a fallible closure that also sees the attributes.
    pub fn try_infer_dtypes(
        mut self,
        f: impl Fn(&[DType], &Attrs) -> Result<Vec<DType>, String> + Send + Sync + 'static,
    ) -> Self {
        self.dtypes = DTypeRule::Fn(Arc::new(f));
        self
    }

    /// Sets an attribute, read by the kernel with `extra->Attr<T>(name)`.
    pub fn attr(mut self, name: impl Into<String>, value: impl Into<AttrValue>) -> Self {
        self.attrs.set(name, value);
        self
    }

    /// Sets several attributes.
    pub fn attrs(mut self, attrs: &Attrs) -> Self {
        self.attrs = self.attrs.merged(attrs);
        self
    }

    /// Declares the next input: its dtype and shape (dims may be `DYN_DIM`, or the whole
    /// shape `[DYN_RANK]`). A call whose input has another dtype, rank or size is an
    /// [`AotError::Input`] before the C++ runs (the C++ trusts the shapes it is given).
    /// Declaring inputs sets [`num_inputs`](Self::num_inputs) to their count.
    pub fn input(mut self, spec: TensorSpec) -> Self {
        self.inputs.push(spec);
        self
    }

    /// The number of inputs; calls with another count are rejected before any C code runs.
    pub fn num_inputs(mut self, n: usize) -> Self {
        self.num_inputs = Some(n);
        self
    }

    /// The number of outputs. With more than one, the library's `FuncInferShape` and
    /// `FuncInferType` are called in their tuple forms (`std::vector<std::vector<int64_t>>`,
    /// `std::vector<TypeId>`).
    pub fn num_outputs(mut self, n: usize) -> Self {
        self.num_outputs = Some(n);
        self
    }

    /// Calls the library's inference functions in their tuple forms even for one output.
    pub fn tuple_infer(mut self) -> Self {
        self.tuple_infer = true;
        self
    }

    /// Data-dependent output shapes (GE): inferred shapes are upper bounds; the kernel gets, after
    /// the workspaces, one `uint64_t` shape buffer per output (`[ndim, d0, d1, …]`, pre-filled
    /// with the upper bound) and the runtime trims each output to what the kernel wrote.
    pub fn data_dependent_shapes(mut self) -> Self {
        self.data_dependent = true;
        self
    }

    /// A backward written in Rust: `(inputs, outputs, douts) → input gradients`.
    pub fn backward(
        mut self,
        f: impl Fn(&[Tensor], &[Tensor], &[Tensor]) -> AotResult<Vec<Tensor>> + Send + Sync + 'static,
    ) -> Self {
        self.backward = Some(Backward::Fn(Arc::new(f)));
        self
    }

    /// A backward implemented by another AOT operator, called with
    /// `(inputs…, outputs…, douts…)` and returning one gradient per input.
    pub fn backward_op(mut self, op: AotOp) -> Self {
        self.backward = Some(Backward::Op(op));
        self
    }

    /// Where the operator runs. Sources decide by suffix (`.cu` is CUDA); a prebuilt library
    /// is CPU unless set here, as MindSpore decides by its device target.
    pub fn target(mut self, target: Target) -> Self {
        self.target = Some(target);
        self
    }

    /// Runs `FuncInit` and `Func` in a worker process (CPU operators; also
    /// `TRITIUM_AOT_ISOLATE=1`): a segfault, abort, `exit` or a call past the timeout (60 s)
    /// becomes an [`AotError::Worker`] naming the function and the signal, and the next call
    /// starts a fresh worker (which runs `FuncInit` again). Tensors travel through shared
    /// memory; `FuncInferShape`/`FuncInferType` still run in this process.
    pub fn isolated(self) -> Self {
        self.isolated_with(Isolation::default())
    }

    /// [`AotOpBuilder::isolated`] with another timeout.
    pub fn isolated_with(mut self, isolation: Isolation) -> Self {
        self.isolation = Some(isolation);
        self
    }

    /// Checked mode (see [`AotOptions::checked`]).
    pub fn checked(mut self, on: bool) -> Self {
        self.options.checked = on;
        self
    }

    /// Replaces all options.
    pub fn options(mut self, options: AotOptions) -> Self {
        self.options = options;
        self
    }

    /// Replaces the compile options.
    pub fn compile_options(mut self, compile: CompileOptions) -> Self {
        self.options.compile = compile;
        self
    }

    /// Uses this whitelist instead of `TRITIUM_AOT_WHITELIST`.
    pub fn whitelist(mut self, whitelist: Whitelist) -> Self {
        self.options.whitelist = Some(whitelist);
        self
    }

    /// Parses the function, compiles a source (or reuses the cache), loads the library (after
    /// the whitelist check) and resolves `Func`, `FuncInit`, `FuncInferShape`, `FuncInferType`.
    pub fn build(self) -> AotResult<AotOp> {
        let spec = FuncSpec::parse(&self.func)?;
        let num_inputs = match (self.num_inputs, self.inputs.len()) {
            (n, 0) => n,
            (Some(n), k) if n != k => {
                return Err(AotError::Definition {
                    symbol: spec.symbol.clone(),
                    message: format!("num_inputs is {n} but {k} inputs are declared"),
                })
            }
            (_, k) => Some(k),
        };
        let kind = spec.kind();
        let target = match (self.target, kind) {
            (Some(t), _) => t,
            (None, SourceKind::Cuda) => Target::Cuda,
            (None, _) => Target::Cpu,
        };
        let cache = self.options.compile.cache_dir();
        let whitelist = self.options.whitelist.clone().or_else(Whitelist::from_env);
        let (library_path, lib) = match kind {
            SourceKind::Library => {
                let lib = Library::open(&spec.path, whitelist.as_ref(), &cache)?;
                (spec.path.clone(), lib)
            }
            SourceKind::Cpp | SourceKind::Cuda => {
                let path = compile::compile_source(&spec.path, &self.options.compile)?;
                match Library::open(&path, whitelist.as_ref(), &cache) {
                    Ok(lib) => (path, lib),
                    // A cache entry that fails to load is rebuilt, never trusted.
                    Err(AotError::LoadFailed { .. }) => {
                        let path = compile::recompile_source(&spec.path, &self.options.compile)?;
                        let lib = Library::open(&path, whitelist.as_ref(), &cache)?;
                        (path, lib)
                    }
                    Err(e) => return Err(e),
                }
            }
        };
        let sym = &spec.symbol;
        let main = lib.symbol(sym)?;
        let init = lib.optional(&format!("{sym}Init"));
        let infer_shape = lib.optional(&format!("{sym}InferShape"));
        let infer_type = lib.optional(&format!("{sym}InferType"));
        let def_err = |message: String| AotError::Definition {
            symbol: sym.clone(),
            message,
        };
        if let (ShapeRule::Fixed(s), DTypeRule::Fixed(d)) = (&self.shapes, &self.dtypes) {
            if s.len() != d.len() {
                return Err(def_err(format!(
                    "{} output shapes but {} output dtypes",
                    s.len(),
                    d.len()
                )));
            }
        }
        if let Some(n) = self.num_outputs {
            for (what, len) in [
                ("shapes", fixed_len_shapes(&self.shapes)),
                ("dtypes", fixed_len_dtypes(&self.dtypes)),
            ] {
                if let Some(len) = len {
                    if len != n {
                        return Err(def_err(format!(
                            "num_outputs is {n} but {len} fixed output {what} are given"
                        )));
                    }
                }
            }
        }
        if matches!(self.shapes, ShapeRule::Library) && infer_shape.is_none() {
            return Err(def_err(format!(
                "no output shape: give out_shape/infer_shape, or export `{sym}InferShape` from {}",
                library_path.display()
            )));
        }
        if matches!(self.dtypes, DTypeRule::Library) && infer_type.is_none() {
            return Err(def_err(format!(
                "no output dtype: give out_dtype/infer_dtype, or export `{sym}InferType` from {}",
                library_path.display()
            )));
        }
        let checked = self.options.checked || env_checked();
        let isolation = match (self.isolation, target) {
            (Some(_), Target::Cuda) => {
                return Err(def_err(
                    "isolation runs CPU operators in a worker process; CUDA operators run in \
                     this process"
                        .to_string(),
                ))
            }
            (Some(iso), Target::Cpu) => Some(iso),
            (None, Target::Cpu) => Isolation::from_env(),
            (None, Target::Cuda) => None,
        };
        Ok(AotOp {
            inner: Arc::new(OpInner {
                instances: Mutex::new(HashMap::new()),
                spec,
                target,
                library_path,
                main,
                init,
                infer_shape,
                infer_type,
                shapes: self.shapes,
                dtypes: self.dtypes,
                attrs: self.attrs,
                num_inputs,
                inputs: self.inputs,
                num_outputs: self.num_outputs,
                tuple_infer: self.tuple_infer,
                data_dependent: self.data_dependent,
                backward: self.backward,
                checked,
                isolation,
                worker: Mutex::new(None),
                options: self.options,
                lib: Arc::new(lib),
            }),
        })
    }
}

impl fmt::Debug for AotOpBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AotOpBuilder")
            .field("func", &self.func)
            .field("attrs", &self.attrs)
            .field("num_inputs", &self.num_inputs)
            .field("num_outputs", &self.num_outputs)
            .field("data_dependent", &self.data_dependent)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

fn fixed_len_shapes(r: &ShapeRule) -> Option<usize> {
    match r {
        ShapeRule::Fixed(v) => Some(v.len()),
        _ => None,
    }
}

fn fixed_len_dtypes(r: &DTypeRule) -> Option<usize> {
    match r {
        DTypeRule::Fixed(v) => Some(v.len()),
        _ => None,
    }
}

/// One kernel instance: what `FuncInit` set up for one input-shape key. Field order matters:
/// the kernel data is destroyed before the library can be unloaded.
struct Instance {
    /// In this process (`None` for isolated operators, whose kernel data lives in the worker).
    extra: Option<Extra>,
    outputs: Vec<(Vec<usize>, DType)>,
    workspaces: Vec<usize>,
    /// Isolated operators: the attributes (to initialize the instance in a fresh worker) and
    /// the worker generation and id it was initialized with.
    isolated: Option<(Attrs, Option<(u64, u64)>)>,
    _lib: Arc<Library>,
}

struct OpInner {
    instances: Mutex<HashMap<String, Arc<Mutex<Instance>>>>,
    spec: FuncSpec,
    target: Target,
    library_path: PathBuf,
    main: RawFn,
    init: Option<RawFn>,
    infer_shape: Option<RawFn>,
    infer_type: Option<RawFn>,
    shapes: ShapeRule,
    dtypes: DTypeRule,
    attrs: Attrs,
    num_inputs: Option<usize>,
    /// Declared inputs (empty: any).
    inputs: Vec<TensorSpec>,
    num_outputs: Option<usize>,
    tuple_infer: bool,
    data_dependent: bool,
    backward: Option<Backward>,
    checked: bool,
    isolation: Option<Isolation>,
    /// The isolated operator's worker process, started on first use and after a crash.
    worker: Mutex<Option<Worker>>,
    options: AotOptions,
    lib: Arc<Library>,
}

/// A MindSpore-compatible AOT operator: `extern "C" int Func(int nparam, void **params,
/// int *ndims, int64_t **shapes, const char **dtypes, void *stream, void *extra)` from a shared
/// library or an auto-compiled source. Cheap to clone; instances are shared.
#[derive(Clone)]
pub struct AotOp {
    inner: Arc<OpInner>,
}

impl fmt::Debug for AotOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AotOp")
            .field("symbol", &self.inner.spec.symbol)
            .field("library", &self.inner.library_path)
            .field("target", &self.inner.target)
            .field("attrs", &self.inner.attrs)
            .finish_non_exhaustive()
    }
}

fn numel(shape: &[usize]) -> usize {
    shape.iter().product()
}

/// The initial content of a data-dependent output's shape buffer: `[ndim, d0, …]` of the upper
/// bound, padded to `1 + max(rank, MAX_DYNAMIC_RANK)` slots.
fn shape_buffer_init(bound: &[usize]) -> Vec<u64> {
    let mut words = vec![0u64; 1 + bound.len().max(MAX_DYNAMIC_RANK)];
    words[0] = bound.len() as u64;
    for (w, &d) in words[1..].iter_mut().zip(bound) {
        *w = d as u64;
    }
    words
}

/// `Ok` for a worker reply that ran `function` to a zero return value; else its exception,
/// return code or failure.
fn reply_result(function: &str, reply: &isolate::Reply) -> AotResult<()> {
    match (reply.status, reply.ret) {
        (0, 0) => Ok(()),
        (0, code) => Err(AotError::ReturnCode {
            function: function.to_string(),
            code,
        }),
        (2, _) => Err(AotError::CppException {
            function: function.to_string(),
            what: reply.message.clone(),
        }),
        _ => Err(AotError::Worker {
            function: function.to_string(),
            message: reply.message.clone(),
        }),
    }
}

fn le_words(bytes: &[u8]) -> Vec<u64> {
    bytes
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// Bytes of a tensor, `None` on overflow.
fn checked_bytes(shape: &[usize], dtype: DType) -> Option<usize> {
    shape
        .iter()
        .try_fold(dtype.size_bytes(), |acc, &d| acc.checked_mul(d))
}

impl AotOp {
    /// Starts a definition: see [`AotOpBuilder`].
    pub fn builder(func: impl Into<String>) -> AotOpBuilder {
        AotOpBuilder::new(func)
    }

    /// The main function's symbol.
    pub fn symbol(&self) -> &str {
        &self.inner.spec.symbol
    }

    /// The path as given in `"path:Func"`.
    pub fn source_path(&self) -> &Path {
        &self.inner.spec.path
    }

    /// The loaded library (for sources: the compiled library in the cache).
    pub fn library_path(&self) -> &Path {
        &self.inner.library_path
    }

    /// Where the operator runs.
    pub fn target(&self) -> Target {
        self.inner.target
    }

    /// The definition-time attributes.
    pub fn attrs(&self) -> &Attrs {
        &self.inner.attrs
    }

    /// True in checked mode.
    pub fn is_checked(&self) -> bool {
        self.inner.checked
    }

    /// True when the library exports `FuncInit`.
    pub fn has_init(&self) -> bool {
        self.inner.init.is_some()
    }

    /// Number of kernel instances (one per input-shape key, each initialized once).
    pub fn instance_count(&self) -> usize {
        self.lock_instances().len()
    }

    /// Destroys every kernel instance (and its kernel data, in the worker for isolated
    /// operators); the next call initializes anew.
    pub fn clear_instances(&self) {
        let instances: Vec<_> = self.lock_instances().drain().map(|(_, v)| v).collect();
        let Some(isolation) = self.inner.isolation else {
            return;
        };
        let mut slot = self.inner.worker.lock().unwrap_or_else(|p| p.into_inner());
        let Some(worker) = slot.as_mut() else {
            return;
        };
        for inst in instances {
            let inst = inst.lock().unwrap_or_else(|p| p.into_inner());
            let Some((_, Some((generation, id)))) = inst.isolated else {
                continue;
            };
            if generation == worker.generation {
                let freed = worker.free(id, &self.inner.spec.symbol, isolation.timeout);
                if matches!(freed, Err(AotError::Worker { .. })) {
                    *slot = None;
                    return;
                }
            }
        }
    }

    fn lock_instances(&self) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Mutex<Instance>>>> {
        self.inner
            .instances
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    fn tuple_form(&self) -> bool {
        let i = &self.inner;
        i.tuple_infer
            || i.num_outputs.is_some_and(|n| n > 1)
            || fixed_len_shapes(&i.shapes).is_some_and(|n| n > 1)
            || fixed_len_dtypes(&i.dtypes).is_some_and(|n| n > 1)
    }

    /// Infers output shapes and dtypes from input specs, which may be dynamic (`-1` dims,
    /// `[-2]` rank): the GE `InferShape`/`InferDataType` step.
    pub fn infer(&self, inputs: &[TensorSpec]) -> AotResult<Vec<TensorSpec>> {
        self.infer_with(inputs, &Attrs::new())
    }

    /// [`AotOp::infer`] with call-time attributes added to the definition's.
    pub fn infer_with(&self, inputs: &[TensorSpec], attrs: &Attrs) -> AotResult<Vec<TensorSpec>> {
        self.infer_impl(inputs, &self.inner.attrs.merged(attrs))
    }

    fn infer_err(&self, message: String) -> AotError {
        AotError::Inference {
            symbol: self.inner.spec.symbol.clone(),
            message,
        }
    }

    fn infer_impl(&self, inputs: &[TensorSpec], attrs: &Attrs) -> AotResult<Vec<TensorSpec>> {
        let i = &self.inner;
        let sym = &i.spec.symbol;
        let in_shapes: Vec<Shape> = inputs.iter().map(|s| s.shape.clone()).collect();
        let in_dtypes: Vec<DType> = inputs.iter().map(|s| s.dtype).collect();
        let tuple = self.tuple_form();
        let shapes = match &i.shapes {
            ShapeRule::Fixed(v) => v.clone(),
            ShapeRule::Fn(f) => f(&in_shapes, attrs).map_err(|m| self.infer_err(m))?,
            ShapeRule::Library => {
                let f = i.infer_shape.expect("checked at build");
                let extra = Extra::new(attrs.clone(), sym)?;
                let mut args = ShapeArgs::new(&in_shapes, &in_dtypes);
                abi::call_infer_shape(
                    f,
                    &format!("{sym}InferShape"),
                    tuple,
                    &mut args,
                    extra.as_ptr(),
                )?
            }
        };
        let dtypes = match &i.dtypes {
            DTypeRule::Fixed(v) => v.clone(),
            DTypeRule::Fn(f) => f(&in_dtypes, attrs).map_err(|m| self.infer_err(m))?,
            DTypeRule::Library => {
                let f = i.infer_type.expect("checked at build");
                let extra = Extra::new(attrs.clone(), sym)?;
                let ids = (in_dtypes.iter())
                    .map(|d| {
                        d.type_id().ok_or_else(|| {
                            self.infer_err(format!(
                                "`{sym}InferType` takes MindSpore TypeIds, and {d} has none here"
                            ))
                        })
                    })
                    .collect::<AotResult<Vec<i32>>>()?;
                let out = abi::call_infer_type(
                    f,
                    &format!("{sym}InferType"),
                    tuple,
                    &ids,
                    extra.as_ptr(),
                )?;
                out.iter()
                    .map(|&id| {
                        DType::from_type_id(id).ok_or_else(|| {
                            self.infer_err(format!(
                                "`{sym}InferType` returned TypeId {id}, which is no number type"
                            ))
                        })
                    })
                    .collect::<AotResult<Vec<_>>>()?
            }
        };
        if shapes.is_empty() {
            return Err(self.infer_err("no outputs were inferred".to_string()));
        }
        if shapes.len() != dtypes.len() {
            return Err(self.infer_err(format!(
                "{} output shapes {shapes:?} but {} output dtypes {dtypes:?}",
                shapes.len(),
                dtypes.len()
            )));
        }
        if let Some(n) = i.num_outputs {
            if n != shapes.len() {
                return Err(self.infer_err(format!(
                    "num_outputs is {n} but {} outputs were inferred",
                    shapes.len()
                )));
            }
        }
        for s in &shapes {
            let bad = s.iter().any(|&d| d < DYN_RANK) || (s.contains(&DYN_RANK) && s.len() != 1);
            if bad {
                return Err(self.infer_err(format!("invalid output shape {s:?}")));
            }
        }
        Ok(shapes
            .into_iter()
            .zip(dtypes)
            .map(|(s, d)| TensorSpec::new(s, d))
            .collect())
    }

    /// Calls the operator on host inputs (ndarray arrays or [`Tensor`]s) and returns its outputs.
    pub fn call<'a>(&self, inputs: impl Inputs<'a>) -> AotResult<Vec<Tensor>> {
        self.call_impl(inputs.into_inputs(), None)
    }

    /// [`AotOp::call`] with call-time attributes added to (or replacing) the definition's.
    /// Each distinct set of call-time attributes gets its own kernel instance.
    pub fn call_with<'a>(&self, inputs: impl Inputs<'a>, attrs: &Attrs) -> AotResult<Vec<Tensor>> {
        self.call_impl(inputs.into_inputs(), Some(attrs))
    }

    /// Calls an operator with exactly one output and returns it.
    pub fn call1<'a>(&self, inputs: impl Inputs<'a>) -> AotResult<Tensor> {
        let mut out = self.call(inputs)?;
        if out.len() != 1 {
            return Err(AotError::Definition {
                symbol: self.inner.spec.symbol.clone(),
                message: format!("call1 on an operator with {} outputs", out.len()),
            });
        }
        Ok(out.remove(0))
    }

    /// The declared input count (`num_inputs`), if any, against a call's.
    fn check_input_count(&self, got: usize) -> AotResult<()> {
        match self.inner.num_inputs {
            Some(n) if n != got => Err(self.input_err(format!("expected {n} inputs, got {got}"))),
            _ => Ok(()),
        }
    }

    /// The call's inputs against the declared ones ([`AotOpBuilder::input`]).
    fn check_declared_inputs(&self, got: &[TensorSpec]) -> AotResult<()> {
        for (k, (want, got)) in self.inner.inputs.iter().zip(got).enumerate() {
            let rank_ok = want.shape == [DYN_RANK] || want.shape.len() == got.shape.len();
            let dims_ok = rank_ok
                && (want.shape == [DYN_RANK]
                    || want
                        .shape
                        .iter()
                        .zip(&got.shape)
                        .all(|(w, g)| *w == DYN_DIM || w == g));
            if want.dtype != got.dtype || !dims_ok {
                return Err(self.input_err(format!(
                    "input {k} is {} {:?}, declared {} {:?} (-1: any size, [-2]: any rank)",
                    got.dtype.ms_name(),
                    got.shape,
                    want.dtype.ms_name(),
                    want.shape
                )));
            }
        }
        Ok(())
    }

    fn input_err(&self, message: String) -> AotError {
        AotError::Input {
            symbol: self.inner.spec.symbol.clone(),
            message,
        }
    }

    fn call_impl(
        &self,
        inputs: Vec<TensorRef<'_>>,
        call_attrs: Option<&Attrs>,
    ) -> AotResult<Vec<Tensor>> {
        let i = &self.inner;
        self.check_input_count(inputs.len())?;
        let specs: Vec<TensorSpec> = inputs
            .iter()
            .map(|t| {
                TensorSpec::new(
                    t.shape().iter().map(|&d| d as i64).collect::<Vec<_>>(),
                    t.dtype(),
                )
            })
            .collect();
        self.check_declared_inputs(&specs)?;
        let instance = self.instance_for(&specs, call_attrs)?;
        let mut guard = instance.lock().unwrap_or_else(|p| p.into_inner());
        match i.target {
            Target::Cpu => self.execute(&mut guard, &inputs, &specs),
            Target::Cuda => self.execute_cuda(&mut guard, &inputs, &specs),
        }
    }

    /// The kernel instance for these (static) input specs and call-time attributes, created
    /// and initialized (`FuncInit`) on first use.
    fn instance_for(
        &self,
        specs: &[TensorSpec],
        call_attrs: Option<&Attrs>,
    ) -> AotResult<Arc<Mutex<Instance>>> {
        let key = format!(
            "{:?}|{}",
            specs
                .iter()
                .map(|s| (s.shape.clone(), s.dtype))
                .collect::<Vec<_>>(),
            call_attrs.map(Attrs::fingerprint).unwrap_or_default()
        );
        let mut map = self.lock_instances();
        if let Some(inst) = map.get(&key) {
            return Ok(inst.clone());
        }
        let attrs = match call_attrs {
            Some(a) => self.inner.attrs.merged(a),
            None => self.inner.attrs.clone(),
        };
        let inst = Arc::new(Mutex::new(self.create_instance(specs, attrs)?));
        map.insert(key, inst.clone());
        Ok(inst)
    }

    /// GE's compile stage: creates (and `FuncInit`s) the kernel instance for these static input
    /// specs ahead of the first call, and returns the output specs it will produce. A later
    /// call with inputs of these shapes and dtypes reuses the instance.
    pub fn compile(&self, inputs: &[TensorSpec]) -> AotResult<Vec<TensorSpec>> {
        self.compile_impl(inputs, None)
    }

    /// [`AotOp::compile`] for calls made with these call-time attributes ([`AotOp::call_with`]).
    pub fn compile_with(&self, inputs: &[TensorSpec], attrs: &Attrs) -> AotResult<Vec<TensorSpec>> {
        self.compile_impl(inputs, Some(attrs))
    }

    fn compile_impl(
        &self,
        inputs: &[TensorSpec],
        attrs: Option<&Attrs>,
    ) -> AotResult<Vec<TensorSpec>> {
        if let Some(bad) = inputs.iter().find(|s| !s.is_static()) {
            return Err(self.input_err(format!(
                "compile needs static input shapes, got {:?}",
                bad.shape
            )));
        }
        if let Some(n) = self.inner.num_inputs {
            if inputs.len() != n {
                return Err(self.input_err(format!("expected {n} inputs, got {}", inputs.len())));
            }
        }
        let inst = self.instance_for(inputs, attrs)?;
        let guard = inst.lock().unwrap_or_else(|p| p.into_inner());
        Ok(guard
            .outputs
            .iter()
            .map(|(s, d)| TensorSpec::new(s.iter().map(|&x| x as i64).collect::<Vec<_>>(), *d))
            .collect())
    }

    fn create_instance(&self, specs: &[TensorSpec], attrs: Attrs) -> AotResult<Instance> {
        let i = &self.inner;
        let sym = &i.spec.symbol;
        let outs = self.infer_impl(specs, &attrs)?;
        let mut outputs = Vec::new();
        for (k, o) in outs.iter().enumerate() {
            if !o.is_static() {
                return Err(self.infer_err(format!(
                    "output {k} has shape {:?} for inputs {:?}; a call needs every dimension \
                     known (give an upper bound and use data_dependent_shapes for outputs whose \
                     size depends on values)",
                    o.shape,
                    specs.iter().map(|s| &s.shape).collect::<Vec<_>>()
                )));
            }
            outputs.push((o.shape.iter().map(|&d| d as usize).collect(), o.dtype));
        }
        if i.isolation.is_some() {
            // `FuncInit` runs in the worker, at the instance's first call there.
            return Ok(Instance {
                extra: None,
                outputs,
                workspaces: Vec::new(),
                isolated: Some((attrs, None)),
                _lib: i.lib.clone(),
            });
        }
        let extra = Extra::new(attrs, sym)?;
        if let Some(init) = i.init {
            let shapes: Vec<Shape> = specs
                .iter()
                .map(|s| s.shape.clone())
                .chain(outs.iter().map(|o| o.shape.clone()))
                .collect();
            let dtypes: Vec<DType> = specs.iter().chain(&outs).map(|s| s.dtype).collect();
            let mut args = ShapeArgs::new(&shapes, &dtypes);
            let name = format!("{sym}Init");
            let rc = abi::call_init(init, &name, &mut args, extra.as_ptr())?;
            if rc != 0 {
                return Err(AotError::ReturnCode {
                    function: name,
                    code: rc,
                });
            }
        }
        let workspaces = extra.workspace();
        Ok(Instance {
            extra: Some(extra),
            outputs,
            workspaces,
            isolated: None,
            _lib: i.lib.clone(),
        })
    }

    fn execute(
        &self,
        inst: &mut Instance,
        inputs: &[TensorRef<'_>],
        specs: &[TensorSpec],
    ) -> AotResult<Vec<Tensor>> {
        let i = &self.inner;
        if let Some(isolation) = i.isolation {
            let mut worker = i.worker.lock().unwrap_or_else(|p| p.into_inner());
            let result = self.execute_isolated(&mut worker, isolation, inst, inputs, specs);
            if matches!(result, Err(AotError::Worker { .. })) {
                // Crashed, exited or killed: the next call starts a fresh worker.
                *worker = None;
            }
            return result;
        }
        let sym = &i.spec.symbol;
        let checked = i.checked;
        let alloc = |what: String, bytes: Option<usize>| {
            bytes
                .and_then(|n| Buffer::new(n, checked))
                .ok_or_else(|| AotError::Alloc {
                    function: sym.clone(),
                    what,
                    bytes: bytes.unwrap_or(usize::MAX),
                })
        };
        let mut outs: Vec<Buffer> = inst
            .outputs
            .iter()
            .enumerate()
            .map(|(k, (s, d))| alloc(format!("output {k}"), checked_bytes(s, *d)))
            .collect::<AotResult<_>>()?;
        let mut ws: Vec<Buffer> = inst
            .workspaces
            .iter()
            .enumerate()
            .map(|(k, &n)| alloc(format!("workspace {k}"), Some(n)))
            .collect::<AotResult<_>>()?;
        let mut shape_bufs: Vec<Buffer> = Vec::new();
        if i.data_dependent {
            for (s, _) in &inst.outputs {
                let words = shape_buffer_init(s);
                let mut b = alloc(
                    format!("shape buffer {}", shape_bufs.len()),
                    Some(words.len() * 8),
                )?;
                // SAFETY: the buffer holds `words.len()` u64 slots, 64-byte aligned.
                let p = b.ptr().cast::<u64>();
                for (k, w) in words.iter().enumerate() {
                    unsafe { p.add(k).write(*w) };
                }
                shape_bufs.push(b);
            }
        }
        let mut params: Vec<*mut c_void> = inputs
            .iter()
            .map(|t| t.as_bytes().as_ptr() as *mut c_void)
            .collect();
        params.extend(outs.iter_mut().map(Buffer::ptr));
        params.extend(ws.iter_mut().map(Buffer::ptr));
        params.extend(shape_bufs.iter_mut().map(Buffer::ptr));
        let mut args = Self::call_args(inst, specs);
        let rc = abi::call_main(
            i.main,
            sym,
            &mut params,
            &mut args,
            std::ptr::null_mut(),
            inst.extra
                .as_ref()
                .map_or(std::ptr::null_mut(), Extra::as_ptr),
        )?;
        if rc != 0 {
            return Err(AotError::ReturnCode {
                function: sym.clone(),
                code: rc,
            });
        }
        if checked {
            let named = outs
                .iter()
                .enumerate()
                .map(|(k, b)| (format!("output {k}"), b))
                .chain(
                    ws.iter()
                        .enumerate()
                        .map(|(k, b)| (format!("workspace {k}"), b)),
                )
                .chain(
                    shape_bufs
                        .iter()
                        .enumerate()
                        .map(|(k, b)| (format!("shape buffer {k}"), b)),
                );
            for (name, b) in named {
                if let Some(offset) = b.overwritten_guard() {
                    return Err(AotError::GuardOverwritten {
                        function: sym.clone(),
                        buffer: name,
                        len: b.len(),
                        offset,
                    });
                }
            }
        }
        let data: Vec<&[u8]> = outs.iter().map(Buffer::data).collect();
        let words: Vec<Vec<u64>> = shape_bufs.iter().map(|b| le_words(b.data())).collect();
        self.finish(inst, &data, &words)
    }

    /// [`AotOp::execute`] in the worker process: the instance is initialized there first
    /// (again after a crash), inputs are copied into shared memory, and outputs, workspaces
    /// and shape buffers are laid out there as in-process, guard bytes included.
    fn execute_isolated(
        &self,
        slot: &mut Option<Worker>,
        isolation: Isolation,
        inst: &mut Instance,
        inputs: &[TensorRef<'_>],
        specs: &[TensorSpec],
    ) -> AotResult<Vec<Tensor>> {
        let i = &self.inner;
        let (sym, timeout) = (&i.spec.symbol, isolation.timeout);
        if slot.is_none() {
            let executable = compile::worker_executable(&i.options.compile)?;
            *slot = Some(Worker::spawn(&executable, sym)?);
        }
        let worker = slot.as_mut().expect("started");
        let (shapes, dtypes) = Self::call_specs(inst, specs);
        let (attrs, initialized) = inst.isolated.as_mut().expect("an isolated instance");
        let id = match *initialized {
            Some((generation, id)) if generation == worker.generation => id,
            _ => {
                let id = isolate::next_id();
                let init = i.init.map(|_| format!("{sym}Init"));
                let library = i.lib.path();
                let reply = worker.init(
                    id,
                    library,
                    sym,
                    init.as_deref(),
                    attrs,
                    &shapes,
                    &dtypes,
                    timeout,
                )?;
                let function = init.unwrap_or_else(|| sym.clone());
                reply_result(&function, &reply)?;
                inst.workspaces = reply.workspaces;
                *initialized = Some((worker.generation, id));
                id
            }
        };
        // Layout: inputs, then outputs, workspaces and shape buffers, each 64-byte aligned
        // and followed by its guard bytes in checked mode.
        let guard = if i.checked { GUARD_BYTES } else { 0 };
        let alloc_err = |what: String, bytes: usize| AotError::Alloc {
            function: sym.clone(),
            what,
            bytes,
        };
        let mut written: Vec<(String, usize)> = Vec::new();
        for (k, (s, d)) in inst.outputs.iter().enumerate() {
            let bytes =
                checked_bytes(s, *d).ok_or_else(|| alloc_err(format!("output {k}"), usize::MAX))?;
            written.push((format!("output {k}"), bytes));
        }
        for (k, &n) in inst.workspaces.iter().enumerate() {
            written.push((format!("workspace {k}"), n));
        }
        let shape_words: Vec<Vec<u64>> = match i.data_dependent {
            true => inst
                .outputs
                .iter()
                .map(|(s, _)| shape_buffer_init(s))
                .collect(),
            false => Vec::new(),
        };
        for (k, w) in shape_words.iter().enumerate() {
            written.push((format!("shape buffer {k}"), 8 * w.len()));
        }
        let mut at = 0usize;
        let mut place = |len: usize, guard: usize| {
            let start = at;
            at = start
                .checked_add(len)
                .and_then(|e| e.checked_add(guard))
                .and_then(|e| e.checked_next_multiple_of(64))?;
            Some(start)
        };
        let in_offsets = (inputs.iter())
            .map(|t| place(t.as_bytes().len(), 0))
            .collect::<Option<Vec<_>>>();
        let out_offsets = (written.iter())
            .map(|(_, n)| place(*n, guard))
            .collect::<Option<Vec<_>>>();
        let (Some(in_offsets), Some(out_offsets)) = (in_offsets, out_offsets) else {
            return Err(alloc_err("the shared tensors".into(), usize::MAX));
        };
        let arena = worker.arena(at, sym, timeout)?;
        // Outputs, workspaces and shape buffers start zeroed, as in-process; the inputs are
        // copied over whatever the last call left.
        if let Some(&first) = out_offsets.first() {
            arena[first..].fill(0);
        }
        for (t, &o) in inputs.iter().zip(&in_offsets) {
            let b = t.as_bytes();
            arena[o..o + b.len()].copy_from_slice(b);
        }
        let shape_at = &out_offsets[out_offsets.len() - shape_words.len()..];
        for (w, &o) in shape_words.iter().zip(shape_at) {
            for (k, v) in w.iter().enumerate() {
                arena[o + 8 * k..o + 8 * k + 8].copy_from_slice(&v.to_le_bytes());
            }
        }
        let patterns: Vec<[u8; GUARD_BYTES]> = (0..written.len())
            .map(|_| super::buffer::guard_pattern())
            .collect();
        for (((_, n), &o), p) in written.iter().zip(&out_offsets).zip(&patterns) {
            arena[o + n..o + n + guard].copy_from_slice(&p[..guard]);
        }
        let offsets: Vec<usize> = in_offsets.iter().chain(&out_offsets).copied().collect();
        let reply = worker.call(id, sym, &offsets, &shapes, &dtypes, timeout)?;
        reply_result(sym, &reply)?;
        let arena = worker.mapped();
        for (((name, n), &o), p) in written.iter().zip(&out_offsets).zip(&patterns) {
            let seen = &arena[o + n..o + n + guard];
            if let Some(offset) = seen.iter().zip(&p[..guard]).position(|(a, b)| a != b) {
                return Err(AotError::GuardOverwritten {
                    function: sym.clone(),
                    buffer: name.clone(),
                    len: *n,
                    offset,
                });
            }
        }
        let data: Vec<&[u8]> = (written.iter().zip(&out_offsets))
            .take(inst.outputs.len())
            .map(|((_, n), &o)| &arena[o..o + n])
            .collect();
        let words: Vec<Vec<u64>> = (shape_words.iter().zip(shape_at))
            .map(|(w, &o)| le_words(&arena[o..o + 8 * w.len()]))
            .collect();
        self.finish(inst, &data, &words)
    }

    /// Builds output tensors from their bytes, trimming data-dependent outputs to the shape
    /// the kernel wrote into its shape buffer.
    /// The final shape of each output: the instance's, or for data-dependent shapes the one
    /// the kernel wrote into its shape buffer (checked against the upper bound).
    fn output_shapes(
        &self,
        inst: &Instance,
        shape_words: &[Vec<u64>],
    ) -> AotResult<Vec<Vec<usize>>> {
        let sym = &self.inner.spec.symbol;
        let mut result = Vec::with_capacity(inst.outputs.len());
        for (k, (shape, _)) in inst.outputs.iter().enumerate() {
            let Some(words) = shape_words.get(k) else {
                result.push(shape.clone());
                continue;
            };
            let bad = || AotError::BadShapeBuffer {
                function: sym.clone(),
                output: k,
                written: words.iter().take(1 + MAX_DYNAMIC_RANK).copied().collect(),
                bound: shape.clone(),
            };
            let ndim = words.first().map_or(usize::MAX, |&w| w as usize);
            if ndim >= words.len() {
                return Err(bad());
            }
            let dims: Vec<usize> = words[1..=ndim].iter().map(|&d| d as usize).collect();
            let n = dims
                .iter()
                .try_fold(1usize, |acc, &d| acc.checked_mul(d))
                .ok_or_else(bad)?;
            if n > numel(shape) {
                return Err(bad());
            }
            result.push(dims);
        }
        Ok(result)
    }

    /// Host tensors from the outputs' bytes (upper-bound sized), trimmed to their final shapes.
    fn finish(
        &self,
        inst: &Instance,
        data: &[&[u8]],
        shape_words: &[Vec<u64>],
    ) -> AotResult<Vec<Tensor>> {
        let shapes = self.output_shapes(inst, shape_words)?;
        let mut result = Vec::with_capacity(data.len());
        for ((bytes, (bound, dtype)), dims) in data.iter().zip(&inst.outputs).zip(shapes) {
            let mut t = Tensor::from_bytes(*dtype, bound, bytes)?;
            if dims != *bound {
                t.truncate(dims);
            }
            result.push(t);
        }
        Ok(result)
    }

    /// The `ndims`/`shapes`/`dtypes` of a call: inputs then outputs.
    fn call_args(inst: &Instance, specs: &[TensorSpec]) -> ShapeArgs {
        let (shapes, dtypes) = Self::call_specs(inst, specs);
        ShapeArgs::new(&shapes, &dtypes)
    }

    /// The shapes and dtypes of a call's inputs, then its outputs.
    fn call_specs(inst: &Instance, specs: &[TensorSpec]) -> (Vec<Shape>, Vec<DType>) {
        let shapes: Vec<Shape> = specs
            .iter()
            .map(|s| s.shape.clone())
            .chain(
                inst.outputs
                    .iter()
                    .map(|(s, _)| s.iter().map(|&d| d as i64).collect()),
            )
            .collect();
        let dtypes: Vec<DType> = specs
            .iter()
            .map(|s| s.dtype)
            .chain(inst.outputs.iter().map(|(_, d)| *d))
            .collect();
        (shapes, dtypes)
    }

    fn execute_cuda(
        &self,
        inst: &mut Instance,
        inputs: &[TensorRef<'_>],
        specs: &[TensorSpec],
    ) -> AotResult<Vec<Tensor>> {
        let dev = cuda::device()?;
        dev.bind()?;
        let ins = inputs
            .iter()
            .map(|t| dev.alloc(t.as_bytes().len(), 0, Some(t.as_bytes())))
            .collect::<AotResult<Vec<_>>>()?;
        let (outs, words) = self.run_cuda(inst, &ins.iter().collect::<Vec<_>>(), specs)?;
        let data = outs
            .iter()
            .map(|b| b.download())
            .collect::<AotResult<Vec<_>>>()?;
        let views: Vec<&[u8]> = data.iter().map(Vec::as_slice).collect();
        self.finish(inst, &views, &words)
    }

    /// Runs the kernel on inputs already in device memory: allocates outputs, workspaces and
    /// shape buffers there (with guards in checked mode), calls on a fresh stream, checks the
    /// return code and the guards, and returns the (upper-bound) outputs and the shape words.
    fn run_cuda(
        &self,
        inst: &mut Instance,
        ins: &[&cuda::DeviceBuffer<'static>],
        specs: &[TensorSpec],
    ) -> AotResult<(Vec<cuda::DeviceBuffer<'static>>, Vec<Vec<u64>>)> {
        let i = &self.inner;
        let sym = &i.spec.symbol;
        let dev = cuda::device()?;
        dev.bind()?;
        let guard = if i.checked { GUARD_BYTES } else { 0 };
        let outs = inst
            .outputs
            .iter()
            .enumerate()
            .map(|(k, (s, d))| {
                let n = checked_bytes(s, *d).ok_or_else(|| AotError::Alloc {
                    function: sym.clone(),
                    what: format!("output {k}"),
                    bytes: usize::MAX,
                })?;
                dev.alloc(n, guard, None)
            })
            .collect::<AotResult<Vec<_>>>()?;
        let ws = inst
            .workspaces
            .iter()
            .map(|&n| dev.alloc(n, guard, None))
            .collect::<AotResult<Vec<_>>>()?;
        let shape_bufs = if i.data_dependent {
            inst.outputs
                .iter()
                .map(|(s, _)| {
                    let init = shape_buffer_init(s);
                    let bytes: Vec<u8> = init.iter().flat_map(|w| w.to_le_bytes()).collect();
                    dev.alloc(bytes.len(), guard, Some(&bytes))
                })
                .collect::<AotResult<Vec<_>>>()?
        } else {
            Vec::new()
        };
        let mut params: Vec<*mut c_void> = ins
            .iter()
            .copied()
            .chain(&outs)
            .chain(&ws)
            .chain(&shape_bufs)
            .map(|b| b.ptr())
            .collect();
        let mut args = Self::call_args(inst, specs);
        let extra = inst
            .extra
            .as_ref()
            .map_or(std::ptr::null_mut(), Extra::as_ptr);
        let rc = dev.with_stream(|stream| {
            abi::call_main(i.main, sym, &mut params, &mut args, stream, extra)
        })?;
        if rc != 0 {
            return Err(AotError::ReturnCode {
                function: sym.clone(),
                code: rc,
            });
        }
        if i.checked {
            let named = outs
                .iter()
                .enumerate()
                .map(|(k, b)| (format!("output {k}"), b))
                .chain(
                    ws.iter()
                        .enumerate()
                        .map(|(k, b)| (format!("workspace {k}"), b)),
                )
                .chain(
                    shape_bufs
                        .iter()
                        .enumerate()
                        .map(|(k, b)| (format!("shape buffer {k}"), b)),
                );
            for (name, b) in named {
                if let Some(offset) = b.overwritten_guard()? {
                    return Err(AotError::GuardOverwritten {
                        function: sym.clone(),
                        buffer: name,
                        len: b.len(),
                        offset,
                    });
                }
            }
        }
        let words = shape_bufs
            .iter()
            .map(|b| b.download().map(|d| le_words(&d)))
            .collect::<AotResult<Vec<_>>>()?;
        Ok((outs, words))
    }

    /// Calls a CUDA operator on tensors resident in device memory; its outputs stay there
    /// (no host copies either way). Errors for an operator that runs on the CPU.
    pub fn call_device(&self, inputs: &[&DeviceTensor]) -> AotResult<Vec<DeviceTensor>> {
        self.call_device_impl(inputs, None)
    }

    /// [`AotOp::call_device`] with call-time attributes (see [`AotOp::call_with`]).
    pub fn call_device_with(
        &self,
        inputs: &[&DeviceTensor],
        attrs: &Attrs,
    ) -> AotResult<Vec<DeviceTensor>> {
        self.call_device_impl(inputs, Some(attrs))
    }

    fn call_device_impl(
        &self,
        inputs: &[&DeviceTensor],
        call_attrs: Option<&Attrs>,
    ) -> AotResult<Vec<DeviceTensor>> {
        let i = &self.inner;
        if i.target != Target::Cuda {
            return Err(self.input_err(
                "device tensors need a CUDA operator (a `.cu` source or `target(Target::Cuda)`); \
                 this one runs on the CPU: pass host tensors to `call`"
                    .into(),
            ));
        }
        self.check_input_count(inputs.len())?;
        let specs: Vec<TensorSpec> = inputs.iter().map(|t| t.spec()).collect();
        self.check_declared_inputs(&specs)?;
        let instance = self.instance_for(&specs, call_attrs)?;
        let mut guard = instance.lock().unwrap_or_else(|p| p.into_inner());
        let bufs: Vec<_> = inputs.iter().map(|t| t.buffer()).collect();
        let (outs, words) = self.run_cuda(&mut guard, &bufs, &specs)?;
        let shapes = self.output_shapes(&guard, &words)?;
        Ok(outs
            .into_iter()
            .zip(&guard.outputs)
            .zip(shapes)
            .map(|((buf, (_, dtype)), shape)| DeviceTensor::from_buffer(*dtype, shape, buf))
            .collect())
    }

    /// True when a backward was declared.
    pub fn has_backward(&self) -> bool {
        self.inner.backward.is_some()
    }

    /// Runs the declared backward: `(inputs, outputs, output gradients) → input gradients`.
    pub fn backward(
        &self,
        inputs: &[Tensor],
        outputs: &[Tensor],
        douts: &[Tensor],
    ) -> AotResult<Vec<Tensor>> {
        let sym = &self.inner.spec.symbol;
        let grads = match &self.inner.backward {
            None => {
                return Err(AotError::Grad(format!(
                    "operator `{sym}` declares no backward"
                )))
            }
            Some(Backward::Fn(f)) => f(inputs, outputs, douts)?,
            Some(Backward::Op(op)) => {
                let all: Vec<TensorRef<'_>> = inputs
                    .iter()
                    .chain(outputs)
                    .chain(douts)
                    .map(TensorRef::from)
                    .collect();
                op.call(all)?
            }
        };
        if grads.len() != inputs.len() {
            return Err(AotError::Grad(format!(
                "the backward of `{sym}` returned {} gradients for {} inputs",
                grads.len(),
                inputs.len()
            )));
        }
        Ok(grads)
    }

    // ---- accessors for packages ----

    pub(crate) fn fixed_shapes(&self) -> Option<&[Shape]> {
        match &self.inner.shapes {
            ShapeRule::Fixed(v) => Some(v),
            _ => None,
        }
    }

    pub(crate) fn fixed_dtypes(&self) -> Option<&[DType]> {
        match &self.inner.dtypes {
            DTypeRule::Fixed(v) => Some(v),
            _ => None,
        }
    }

    pub(crate) fn flags(&self) -> (Option<usize>, Option<usize>, bool, bool) {
        let i = &self.inner;
        (i.num_inputs, i.num_outputs, i.tuple_infer, i.data_dependent)
    }

    /// The operator's options.
    pub fn options(&self) -> &AotOptions {
        &self.inner.options
    }
}

impl AotOpBuilder {
    pub(crate) fn set_flags(
        mut self,
        num_inputs: Option<usize>,
        num_outputs: Option<usize>,
        tuple: bool,
        data_dependent: bool,
    ) -> Self {
        self.num_inputs = num_inputs;
        self.num_outputs = num_outputs;
        self.tuple_infer = tuple;
        self.data_dependent = data_dependent;
        self
    }

    pub(crate) fn set_func(mut self, func: String) -> Self {
        self.func = func;
        self
    }
}
