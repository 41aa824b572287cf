//! Checked mode on a GPU: the check buffer a checked kernel takes as its last parameter
//! (see `codegen/memory.rs`), allocated per launch like the staged arguments, and the
//! fault record read back after the grid.

use crate::launch::checked::{self, FAULT_WORDS};
use crate::launch::{RawArg, RawBuffer};
use crate::runtime::{driver_error, CudaDevice};
use crate::Result;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr};
use std::sync::Arc;
use tritium_dsl::ir::Function;

/// A launch's check buffer in device memory: a zeroed fault record, then the check words
/// (`checked::CheckWords`) in device addresses.
pub(crate) struct DeviceCheck {
    device: CudaSlice<u8>,
    /// The bytes copied in, alive until the record is read back: the copy is queued on
    /// the stream like the staged arguments'.
    _host: Vec<u8>,
    /// Every buffer's name and range as the kernel compares them (the error lists them).
    names: Vec<(String, (u64, u64))>,
    /// The buffer's device address: the kernel's last parameter.
    pub address: u64,
}

impl DeviceCheck {
    /// Copies the record and the ranges (`range` gives a buffer's device byte range) in;
    /// with `buffer_list`, the list of every buffer after them.
    pub(crate) fn copy_in(
        gpu: &CudaDevice,
        stream: &Arc<CudaStream>,
        buffers: &[(String, RawBuffer)],
        args: &[RawArg],
        buffer_list: bool,
        range: impl Fn(&RawBuffer) -> (u64, u64),
    ) -> Result<DeviceCheck> {
        let mut words = checked::CheckWords::new(args, buffers, &[], buffer_list, &range);
        let names = checked::named_ranges(buffers, &range);
        let len = 8 * (FAULT_WORDS + words.words.len());
        let mut device = gpu.alloc_on(stream, len)?;
        let address = device.device_ptr(stream).0;
        words.place(address + 8 * FAULT_WORDS as u64);
        let bytes: Vec<u8> = ([0u64; FAULT_WORDS].iter().chain(&words.words))
            .flat_map(|w| w.to_le_bytes())
            .collect();
        let mut view = device.slice_mut(0..bytes.len());
        stream
            .memcpy_htod(bytes.as_slice(), &mut view)
            .map_err(|e| driver_error("copying the bounds-check buffer to the GPU", e))?;
        Ok(DeviceCheck {
            device,
            _host: bytes,
            names,
            address,
        })
    }

    /// After the grid: `Ok`, or the first fault as the CPU reports it (with device
    /// addresses).
    pub(crate) fn result(self, stream: &Arc<CudaStream>, f: &Function) -> Result<()> {
        let mut bytes = [0u8; FAULT_WORDS * 8];
        let view = self.device.slice(0..bytes.len());
        stream
            .memcpy_dtoh(&view, &mut bytes[..])
            .map_err(|e| driver_error("copying the bounds-check record from the GPU", e))?;
        stream
            .synchronize()
            .map_err(|e| driver_error("reading the bounds-check record", e))?;
        let mut record = [0u64; FAULT_WORDS];
        for (r, b) in record.iter_mut().zip(bytes.chunks_exact(8)) {
            let mut w = [0u8; 8];
            w.copy_from_slice(b);
            *r = u64::from_le_bytes(w);
        }
        if record[0] == 0 {
            return Ok(());
        }
        let sites = f.fault_sites();
        checked::fault_result(f, &sites, &record, &self.names)
    }
}
