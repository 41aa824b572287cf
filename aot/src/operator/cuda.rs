//! Execution of CUDA operators: host inputs copied to the device and outputs back
//! ([`AotOp::call`]), or device tensors in and out with no host copies
//! ([`AotOp::call_device`]); both run `Func` on a fresh stream of the current context.

use std::ffi::c_void;

use super::instance::Instance;
use super::outputs::{buffer_names, checked_bytes, le_words, shape_buffer_init};
use super::{AotOp, Target};
use crate::abi;
use crate::attrs::Attrs;
use crate::buffer::GUARD_BYTES;
use crate::cuda::{self, DeviceTensor};
use crate::error::{AotError, AotResult};
use crate::extra::Extra;
use crate::tensor::{Tensor, TensorRef, TensorSpec};

impl AotOp {
    /// [`AotOp::call`] of a CUDA operator: inputs uploaded, outputs downloaded.
    pub(super) fn execute_cuda(
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
            let names = buffer_names(outs.len(), ws.len(), shape_bufs.len());
            for (name, b) in names.zip(outs.iter().chain(&ws).chain(&shape_bufs)) {
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
}
