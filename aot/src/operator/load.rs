//! [`AotOpBuilder::build`]: the library resolved (a prebuilt one, or a source compiled into
//! the cache), loaded after the whitelist check, its companions found, and the definition
//! checked against what the library exports, so that a call never finds it inconsistent.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use super::options::env_checked;
use super::rules::{DTypeRule, ShapeRule};
use super::{AotOp, AotOpBuilder, FuncSpec, OpInner, Target};
use crate::compile::{self, CompileOptions, SourceKind};
use crate::error::{AotError, AotResult};
use crate::isolate::Isolation;
use crate::library::Library;
use crate::whitelist::Whitelist;

impl AotOpBuilder {
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
        let whitelist = self.options.whitelist.clone().or_else(Whitelist::from_env);
        let (library_path, lib) = load(&spec, &self.options.compile, whitelist.as_ref())?;
        let sym = &spec.symbol;
        let main = lib.symbol(sym)?;
        let init = lib.optional(&format!("{sym}Init"));
        let infer_shape = lib.optional(&format!("{sym}InferShape"));
        let infer_type = lib.optional(&format!("{sym}InferType"));
        let def_err = |message: String| AotError::Definition {
            symbol: sym.clone(),
            message,
        };
        if let (Some(s), Some(d)) = (self.shapes.fixed(), self.dtypes.fixed()) {
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
                ("shapes", self.shapes.fixed().map(<[_]>::len)),
                ("dtypes", self.dtypes.fixed().map(<[_]>::len)),
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

/// The library `spec` names, loaded: a prebuilt one as it is, a source compiled into the
/// cache (or found there). A cache entry that fails to load is rebuilt, never trusted.
fn load(
    spec: &FuncSpec,
    options: &CompileOptions,
    whitelist: Option<&Whitelist>,
) -> AotResult<(PathBuf, Library)> {
    let cache = options.cache_dir();
    match spec.kind() {
        SourceKind::Library => {
            let lib = Library::open(&spec.path, whitelist, &cache)?;
            Ok((spec.path.clone(), lib))
        }
        SourceKind::Cpp | SourceKind::Cuda => {
            let path = compile::compile_source(&spec.path, options)?;
            match Library::open(&path, whitelist, &cache) {
                Ok(lib) => Ok((path, lib)),
                Err(AotError::LoadFailed { .. }) => {
                    let path = compile::recompile_source(&spec.path, options)?;
                    let lib = Library::open(&path, whitelist, &cache)?;
                    Ok((path, lib))
                }
                Err(e) => Err(e),
            }
        }
    }
}
