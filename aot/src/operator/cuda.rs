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
use crate::cuda::{self, DeviceBuffer, DeviceTensor};
use crate::error::{AotError, AotResult};
use crate::extra::Extra;
use crate::tensor::{Tensor, TensorRef, TensorSpec};
use tritium_backend::Device;

impl AotOp {
    /// [`AotOp::call`] of a CUDA operator: inputs uploaded, outputs downloaded.
    pub(super) fn execute_cuda(
        &self,
        inst: &mut Instance,
        inputs: &[TensorRef<'_>],
        specs: &[TensorSpec],
    ) -> AotResult<Vec<Tensor>> {
        let ins = inputs
            .iter()
            .map(cuda::upload)
            .collect::<AotResult<Vec<_>>>()?;
        let device = cuda::device()?;
        let (outs, words) = self.run_cuda(inst, device, &ins.iter().collect::<Vec<_>>(), specs)?;
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
        device: &Device,
        ins: &[&DeviceTensor],
        specs: &[TensorSpec],
    ) -> AotResult<(Vec<DeviceBuffer>, Vec<Vec<u64>>)> {
        let i = &self.inner;
        let sym = &i.spec.symbol;
        let guard = if i.checked { GUARD_BYTES } else { 0 };
        let outs = inst
            .outputs
            .iter()
            .enumerate()
            .map(|(k, (s, d))| {
                checked_bytes(s, *d).ok_or_else(|| AotError::Alloc {
                    function: sym.clone(),
                    what: format!("output {k}"),
                    bytes: usize::MAX,
                })?;
                DeviceBuffer::new(device, *d, s, guard, None)
            })
            .collect::<AotResult<Vec<_>>>()?;
        let ws = inst
            .workspaces
            .iter()
            .map(|&n| DeviceBuffer::bytes(device, n, guard, None))
            .collect::<AotResult<Vec<_>>>()?;
        let shape_bufs = if i.data_dependent {
            inst.outputs
                .iter()
                .map(|(s, _)| {
                    let init = shape_buffer_init(s);
                    let bytes: Vec<u8> = init.iter().flat_map(|w| w.to_le_bytes()).collect();
                    DeviceBuffer::bytes(device, bytes.len(), guard, Some(&bytes))
                })
                .collect::<AotResult<Vec<_>>>()?
        } else {
            Vec::new()
        };
        let written: Vec<&DeviceTensor> = outs
            .iter()
            .chain(&ws)
            .chain(&shape_bufs)
            .map(DeviceBuffer::tensor)
            .collect();
        let mut params: Vec<*mut c_void> = ins
            .iter()
            .chain(&written)
            .map(|t| t.device_ptr() as usize as *mut c_void)
            .collect();
        let mut args = Self::call_args(inst, specs);
        let extra = inst
            .extra
            .as_ref()
            .map_or(std::ptr::null_mut(), Extra::as_ptr);
        let rc = cuda::with_stream(device, ins, &written, |stream| {
            abi::call_main(i.main, sym, &mut params, &mut args, stream.as_raw(), extra)
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
        let specs: Vec<TensorSpec> = inputs.iter().map(|t| cuda::spec(t)).collect();
        self.check_declared_inputs(&specs)?;
        // Outputs go where the inputs are; without inputs, to the default device.
        let device = match inputs.first() {
            Some(t) => t.device(),
            None => cuda::device()?.clone(),
        };
        if let Some((k, t)) = inputs
            .iter()
            .enumerate()
            .find(|(_, t)| t.device() != device)
        {
            return Err(self.input_err(format!(
                "input {k} is on {:?}; input 0 on {device:?}: every device tensor of a call \
                 must be on one device",
                t.device()
            )));
        }
        let instance = self.instance_for(&specs, call_attrs)?;
        let mut guard = instance.lock().unwrap_or_else(|p| p.into_inner());
        let (outs, words) = self.run_cuda(&mut guard, &device, inputs, &specs)?;
        let shapes = self.output_shapes(&guard, &words)?;
        outs.into_iter()
            .zip(shapes)
            .map(|(buf, shape)| {
                let mut t = buf.into_tensor();
                t.set_shape(&shape).map_err(cuda::cuda_err)?;
                Ok(t)
            })
            .collect()
    }
}
