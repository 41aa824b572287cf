//! Execution in the worker process (`AotOpBuilder::isolated`): the instance initialized there
//! first (again after a crash), tensors laid out in the shared mapping as in process, guard
//! bytes included, and the worker's reply turned into the error a call in process would give.

use super::instance::Instance;
use super::outputs::{buffer_names, checked_bytes, le_words, shape_buffer_init};
use super::AotOp;
use crate::buffer::{guard_pattern, GUARD_BYTES};
use crate::compile;
use crate::error::{AotError, AotResult};
use crate::isolate::{self, Isolation, Worker};
use crate::tensor::{Tensor, TensorRef, TensorSpec};

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

impl AotOp {
    /// [`AotOp::execute`] in the worker process: the instance is initialized there first
    /// (again after a crash), inputs are copied into shared memory, and outputs, workspaces
    /// and shape buffers are laid out there as in-process, guard bytes included.
    pub(super) fn execute_isolated(
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
        let mut sizes: Vec<usize> = Vec::new();
        for (k, (s, d)) in inst.outputs.iter().enumerate() {
            let bytes =
                checked_bytes(s, *d).ok_or_else(|| alloc_err(format!("output {k}"), usize::MAX))?;
            sizes.push(bytes);
        }
        sizes.extend(&inst.workspaces);
        let shape_words: Vec<Vec<u64>> = match i.data_dependent {
            true => inst
                .outputs
                .iter()
                .map(|(s, _)| shape_buffer_init(s))
                .collect(),
            false => Vec::new(),
        };
        sizes.extend(shape_words.iter().map(|w| 8 * w.len()));
        let names = buffer_names(inst.outputs.len(), inst.workspaces.len(), shape_words.len());
        let written: Vec<(String, usize)> = names.zip(sizes).collect();
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
        let patterns: Vec<[u8; GUARD_BYTES]> =
            (0..written.len()).map(|_| guard_pattern()).collect();
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
}
