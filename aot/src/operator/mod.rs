//! AOT operators: the definition ([`AotOpBuilder`]), and the GE-style life cycle of a call:
//! infer output shapes and dtypes → get or create the kernel instance for the input-shape key
//! (running `FuncInit` once) → execute `Func`.
//!
//! One concern per file: `spec` (`"path:Func"`, [`Target`]), `options`, `rules` (where output
//! shapes and dtypes come from), `builder` (the definition), `load` (`build`: the library
//! loaded and the definition checked), `infer`, `instance` (the instance cache, `FuncInit`),
//! `call` (input checks, dispatch), `host`, `isolated` and `cuda` (execution), `outputs`
//! (what executions share: shape buffers, trimming), `backward`.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::abi::RawFn;
use crate::attrs::Attrs;
use crate::dtype::DType;
use crate::isolate::{Isolation, Worker};
use crate::library::Library;
use crate::tensor::{Shape, TensorSpec};

mod backward;
mod builder;
mod call;
mod cuda;
mod host;
mod infer;
mod instance;
mod isolated;
mod load;
mod options;
mod outputs;
mod rules;
mod spec;

pub use backward::BackwardFn;
pub use builder::{AotOpBuilder, IntoShape};
pub use options::AotOptions;
pub use outputs::MAX_DYNAMIC_RANK;
pub use rules::{DTypeFn, ShapeFn};
pub use spec::{FuncSpec, Target};

use backward::Backward;
use instance::Instances;
use rules::{DTypeRule, ShapeRule};

/// What a built operator holds: its definition, the loaded library and its symbols, the
/// instances, and the worker of an isolated operator.
struct OpInner {
    instances: Instances,
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

    /// The operator's options.
    pub fn options(&self) -> &AotOptions {
        &self.inner.options
    }

    // What a package records of the definition (`crate::package`).

    pub(crate) fn fixed_shapes(&self) -> Option<&[Shape]> {
        self.inner.shapes.fixed()
    }

    pub(crate) fn fixed_dtypes(&self) -> Option<&[DType]> {
        self.inner.dtypes.fixed()
    }

    pub(crate) fn flags(&self) -> (Option<usize>, Option<usize>, bool, bool) {
        let i = &self.inner;
        (i.num_inputs, i.num_outputs, i.tuple_infer, i.data_dependent)
    }
}
