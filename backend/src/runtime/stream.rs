//! User streams and the ordering of device tensors across them.
//!
//! A launch whose buffers all live on the GPU is queued on its stream and returns at once
//! (as in Triton and PyTorch); launches with host arrays stage them and wait. Each
//! [`CudaTensor`](super::CudaTensor) remembers the events of the launches that last used
//! it, so that a launch on another stream, a copy to the host, or freeing the tensor waits
//! for them: a writer waits for the last write and every read since, a reader for the last
//! write. Users never record events by hand.

use super::driver::{driver_error, CudaDevice};
use crate::{Device, Error, Result};
use cudarc::driver::{CudaEvent, CudaStream};
use std::sync::{Arc, Mutex};

/// A CUDA stream of one device: launches given it in [`crate::LaunchOptions::stream`] are
/// queued on it, in order, concurrently with other streams. Cloning shares the stream.
#[derive(Clone)]
pub struct Stream {
    device: Arc<CudaDevice>,
    inner: Arc<CudaStream>,
}

impl Stream {
    /// A new non-blocking stream on `device` (a [`Device::cuda`]); an error on any other
    /// device or when the driver fails.
    pub fn new(device: &Device) -> Result<Stream> {
        let Device::Cuda(gpu) = device else {
            return Err(Error::Device(format!(
                "streams belong to CUDA devices, not to {}",
                device.name()
            )));
        };
        Ok(Stream {
            device: gpu.clone(),
            inner: gpu.new_stream()?,
        })
    }

    /// Waits until everything queued on the stream has finished. A kernel that failed
    /// after its launch returned reports its error here.
    pub fn synchronize(&self) -> Result<()> {
        self.inner
            .synchronize()
            .map_err(|e| driver_error("synchronizing a CUDA stream", e))
    }

    /// The device the stream belongs to.
    pub fn device(&self) -> Device {
        Device::Cuda(self.device.clone())
    }

    /// The driver's handle of the stream (`CUstream`), for other CUDA code queued on it
    /// (AOT operators' `stream` argument). It stays valid while this `Stream` lives.
    pub fn as_raw(&self) -> *mut std::ffi::c_void {
        self.inner.cu_stream().cast()
    }

    /// The stream of other CUDA code in this process (cudarc's, e.g. a candle device's
    /// `cuda_stream()`), so that launches queue on it in order with that code's work. It
    /// must belong to a primary context (every cudarc context is one): an error names the
    /// device otherwise.
    pub fn from_cuda_stream(stream: Arc<CudaStream>) -> Result<Stream> {
        let ordinal = stream.context().ordinal();
        let device = Device::cuda(ordinal)?;
        let Device::Cuda(gpu) = device else {
            unreachable!("Device::cuda gives a CUDA device")
        };
        if stream.context().cu_ctx() != gpu.context().cu_ctx() {
            return Err(Error::Device(format!(
                "the stream belongs to a context of CUDA device {ordinal} other than its primary one, which Tritium's kernels are loaded into"
            )));
        }
        Ok(Stream {
            device: gpu,
            inner: stream,
        })
    }

    pub(crate) fn gpu(&self) -> &Arc<CudaDevice> {
        &self.device
    }

    pub(crate) fn cuda(&self) -> &Arc<CudaStream> {
        &self.inner
    }
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Stream({:p} on {:?})",
            Arc::as_ptr(&self.inner),
            self.device
        )
    }
}

impl PartialEq for Stream {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}
impl Eq for Stream {}
impl std::hash::Hash for Stream {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        Arc::as_ptr(&self.inner).hash(state)
    }
}

/// The launches still possibly running that used one device buffer.
#[derive(Default)]
pub(crate) struct UseTracker {
    state: Mutex<Uses>,
}

impl std::fmt::Debug for UseTracker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UseTracker")
    }
}

#[derive(Default)]
struct Uses {
    /// The last write and the stream it was queued on.
    last_write: Option<(StreamRef, CudaEvent)>,
    /// Reads since the last write, the latest per stream (a later read on a stream covers
    /// the earlier ones there).
    reads: Vec<(StreamRef, CudaEvent)>,
}

/// A stream a use was queued on, kept alive so that its handle can't be reused by a new
/// stream while a tracker compares against it.
type StreamRef = Arc<CudaStream>;

fn same(a: &CudaStream, b: &CudaStream) -> bool {
    a.cu_stream() == b.cu_stream()
}

fn wait_for(stream: &CudaStream, event: &CudaEvent) -> Result<()> {
    stream
        .wait(event)
        .map_err(|e| driver_error("ordering a launch after a tensor's last use", e))
}

/// Records `stream`'s current work into `slot`, re-recording its event when there is one
/// (creating events costs more than recording them: most launches reuse one).
fn record_into(slot: &mut Option<CudaEvent>, stream: &Arc<CudaStream>) -> Result<()> {
    let err = |e| driver_error("recording a tensor's use", e);
    match slot {
        Some(event) => event.record(stream).map_err(err),
        None => {
            *slot = Some(stream.record_event(None).map_err(err)?);
            Ok(())
        }
    }
}

/// How a launch orders itself around one device buffer's other uses.
#[derive(Clone)]
pub(crate) enum DeviceUse<'a> {
    /// A Tritium device tensor: its tracker's events (see [`UseTracker`]).
    Tracked(&'a UseTracker),
    /// Memory other CUDA code owns (a cudarc slice, a candle tensor), ordered through the
    /// stream that owns it: a launch on another stream first waits for the work queued
    /// there, and that stream then waits for the launch, so what its owner queues later
    /// follows (frees included). A launch on the owner's stream needs neither.
    Owned(Arc<CudaStream>),
}

impl DeviceUse<'_> {
    /// Makes `stream` wait for what an access (`writes` or reads) must follow.
    pub(crate) fn order_before(&self, stream: &CudaStream, writes: bool) -> Result<()> {
        match self {
            DeviceUse::Tracked(uses) => uses.order_before(stream, writes),
            DeviceUse::Owned(owner) if !same(owner, stream) => stream
                .join(owner)
                .map_err(|e| driver_error("ordering a launch after its buffer's owner", e)),
            DeviceUse::Owned(_) => Ok(()),
        }
    }

    /// Records that work just queued on `stream` reads (or `writes`) the buffer.
    pub(crate) fn record(&self, stream: &Arc<CudaStream>, writes: bool) -> Result<()> {
        match self {
            DeviceUse::Tracked(uses) => uses.record(stream, writes),
            DeviceUse::Owned(owner) if !same(owner, stream) => owner
                .join(stream)
                .map_err(|e| driver_error("ordering a buffer's owner after a launch", e)),
            DeviceUse::Owned(_) => Ok(()),
        }
    }
}

impl UseTracker {
    /// Makes `stream` wait for what an access (`writes` or reads) must follow: work on
    /// other streams (the stream's own order covers the rest).
    pub(crate) fn order_before(&self, stream: &CudaStream, writes: bool) -> Result<()> {
        let uses = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((s, w)) = &uses.last_write {
            if !same(s, stream) {
                wait_for(stream, w)?;
            }
        }
        if writes {
            for (s, r) in &uses.reads {
                if !same(s, stream) {
                    wait_for(stream, r)?;
                }
            }
        }
        Ok(())
    }

    /// Records that work just queued on `stream` reads (or `writes`) the buffer.
    pub(crate) fn record(&self, stream: &Arc<CudaStream>, writes: bool) -> Result<()> {
        let mut uses = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if writes {
            let mut event = uses.last_write.take().map(|(_, e)| e);
            record_into(&mut event, stream)?;
            uses.last_write = event.map(|e| (stream.clone(), e));
            uses.reads.clear();
        } else {
            let at = uses.reads.iter().position(|(s, _)| same(s, stream));
            let mut event = at.map(|i| uses.reads.swap_remove(i).1);
            record_into(&mut event, stream)?;
            uses.reads.extend(event.map(|e| (stream.clone(), e)));
        }
        Ok(())
    }
}
