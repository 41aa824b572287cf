//! Kernel instances (GE's compile stage): one per input-shape key and call-time attributes,
//! created with its output layout and `FuncInit`'s kernel data on first use, reused after.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use super::AotOp;
use crate::abi;
use crate::abi::ShapeArgs;
use crate::attrs::Attrs;
use crate::dtype::DType;
use crate::error::{AotError, AotResult};
use crate::extra::Extra;
use crate::library::Library;
use crate::tensor::{Shape, TensorSpec};

/// An operator's instances by key (input shapes and dtypes, call-time attributes).
pub(super) type Instances = Mutex<HashMap<String, Arc<Mutex<Instance>>>>;

/// One kernel instance: what `FuncInit` set up for one input-shape key. Field order matters:
/// the kernel data is destroyed before the library can be unloaded.
pub(super) struct Instance {
    /// In this process (`None` for isolated operators, whose kernel data lives in the worker).
    pub(super) extra: Option<Extra>,
    pub(super) outputs: Vec<(Vec<usize>, DType)>,
    pub(super) workspaces: Vec<usize>,
    /// Isolated operators: the attributes (to initialize the instance in a fresh worker) and
    /// the worker generation and id it was initialized with.
    pub(super) isolated: Option<(Attrs, Option<(u64, u64)>)>,
    _lib: Arc<Library>,
}

impl AotOp {
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

    fn lock_instances(&self) -> MutexGuard<'_, HashMap<String, Arc<Mutex<Instance>>>> {
        self.inner
            .instances
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// The kernel instance for these (static) input specs and call-time attributes, created
    /// and initialized (`FuncInit`) on first use.
    pub(super) fn instance_for(
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

    /// Infers the instance's (static) outputs and runs `FuncInit`, in this process; an
    /// isolated operator's `FuncInit` runs in the worker at the instance's first call there.
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
}
