//! Execution on the CPU in this process: outputs, workspaces and shape buffers in fresh
//! zeroed buffers (guarded in checked mode), `Func` called with a null stream. Isolated
//! operators go to the worker instead (`isolated.rs`).

use std::ffi::c_void;

use super::instance::Instance;
use super::outputs::{buffer_names, checked_bytes, le_words, shape_buffer_init};
use super::AotOp;
use crate::abi;
use crate::buffer::Buffer;
use crate::error::{AotError, AotResult};
use crate::extra::Extra;
use crate::tensor::{Tensor, TensorRef, TensorSpec};

impl AotOp {
    pub(super) fn execute(
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
            let names = buffer_names(outs.len(), ws.len(), shape_bufs.len());
            for (name, b) in names.zip(outs.iter().chain(&ws).chain(&shape_bufs)) {
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
}
