//! MindSpore-compatible AOT operators (re-exported as `tritium::aot`).
//!
//! An AOT operator is a C/C++/CUDA function with MindSpore's signature
//!
//! ```c
//! extern "C" int Func(int nparam, void **params, int *ndims, int64_t **shapes,
//!                     const char **dtypes, void *stream, void *extra);
//! ```
//!
//! taken from a shared library (`"path/lib.so:Func"`) or from a source compiled on first use
//! into a content-addressed cache (`"path/file.cc:Func"`, `.cpp`, `.cu`). Optional companions
//! are found by name: `FuncInit` (once per kernel instance), `FuncInferShape` and
//! `FuncInferType`. Kernels read attributes, request workspaces and keep per-instance data
//! through `AotExtra` from the shipped, ABI-compatible [`CUSTOM_AOT_EXTRA_H`].
//!
//! ```no_run
//! use ndarray::array;
//! use tritium_aot::{AotOp, DType};
//!
//! let op = AotOp::builder("kernels/add.cc:CustomAdd")
//!     .infer_shape(|inputs| inputs[0].clone())
//!     .out_dtype(DType::F32)
//!     .build()?;
//! let (x, y) = (array![1.0f32, 2.0], array![3.0f32, 4.0]);
//! let sum = op.call1((&x, &y))?.to_array::<f32>()?;
//! # Ok::<(), tritium_aot::AotError>(())
//! ```
//!
//! Codemap: [`operator`] (definition and call protocol, one concern per file), [`tensor`] (host tensors and
//! inputs), [`dtype`], [`attrs`], [`compile`] (auto-compilation cache), [`whitelist`],
//! [`package`] (portable packages), [`grad`](mod@grad) (reverse mode); `abi`, `extra`, `library`,
//! `buffer`, `isolate` (operators in a worker process) and `cuda` (`.cu` operators on the backend's CUDA
//! runtime; [`DeviceTensor`] is the backend's device tensor) are internal. The C++ side lives in `aot/shim/`.
//!
//! Invariants: no C++ exception unwinds into Rust and no Rust panic unwinds into C++ (every
//! crossing is a catching trampoline); no kernel data outlives its operator instance, and no
//! library is unloaded while an instance holds its kernel data.
#![deny(missing_docs)]

mod abi;
pub mod attrs;
mod buffer;
pub mod compile;
mod cuda;
pub mod dtype;
mod error;
mod extra;
pub mod grad;
mod isolate;
mod library;
pub mod operator;
pub mod package;
mod reply_pipe;
pub mod tensor;
pub mod whitelist;

pub use abi::{AotInitFn, AotMainFn, CUSTOM_AOT_EXTRA_H, CUSTOM_AOT_TYPEID_H};
pub use attrs::{AttrKind, AttrValue, Attrs};
pub use buffer::GUARD_BYTES;
pub use compile::{
    cache_dir, compile_source, header_dir, nvcc_available, CompileOptions, SourceKind,
};
pub use cuda::{cuda_available, cuda_device, DeviceTensor};
pub use dtype::{DType, Element, MindSporeDType};
pub use error::{AotError, AotResult};
pub use grad::{grad, Differentiable, Function, Tape, Var};
pub use isolate::Isolation;
pub use operator::{
    AotOp, AotOpBuilder, AotOptions, FuncSpec, IntoShape, Target, MAX_DYNAMIC_RANK,
};
pub use package::{Package, PACKAGE_MAGIC, PACKAGE_VERSION};
pub use tensor::{AsInput, Inputs, Shape, Tensor, TensorRef, TensorSpec, DYN_DIM, DYN_RANK};
pub use whitelist::Whitelist;
