//! The emulator's `mbarrier`s and TMA copies (`codegen/tma.rs`).
//!
//! A barrier counts the arrivals and the transaction bytes of its current phase, and
//! completes the phase when both are in: its phase number grows, and the copies of that
//! phase are ready to land. A copy reads its box at issue (generated code writes no
//! operand it copies before the wait), fills its destination with NaNs and lands at the
//! first `try_wait` that sees its phase complete, so a read without the wait gives NaN.
//! A `try_wait` that finds its phase incomplete suspends its thread; the scheduler
//! resumes such threads until they pass or no barrier changes (`emulate.rs`).

use super::tensor_map::{Encoding, MAP_BYTES};
use std::collections::HashMap;

/// A TMA copy's tensor map and its box: the encoding, the element size and the box's
/// rows and row bytes.
fn box_of(map: *const u64) -> Result<(Encoding, usize, usize, usize), String> {
    // SAFETY: the callers' promise: `map` points to a tensor map's bytes.
    let words: &[u64; MAP_BYTES / 8] = unsafe { &*(map as *const [u64; MAP_BYTES / 8]) };
    let (enc, elem) = Encoding::from_emulated(words)
        .ok_or("a TMA copy's tensor map is not one the launch encoded")?;
    let row_bytes = enc.box_dims[0] as usize * elem;
    if enc.swizzle != 0 && row_bytes != enc.swizzle as usize || !row_bytes.is_multiple_of(16) {
        return Err(format!(
            "a TMA box of {row_bytes}-byte rows with a {}-byte swizzle",
            enc.swizzle
        ));
    }
    Ok((enc, elem, enc.box_dims[1] as usize, row_bytes))
}

/// The shared-memory byte (from the CTA's start) of byte `linear` of a box laid out row
/// after row: the swizzle XORs address bits 4.. with bits 7.. (3, 2 or 1 of them).
fn swizzled(linear: usize, swizzle: u32) -> usize {
    let mask = match swizzle {
        128 => 7,
        64 => 3,
        32 => 1,
        _ => 0,
    };
    linear ^ (((linear >> 7) & mask) << 4)
}

/// The global address of element (`col`, `row`, `batch`) of `enc`'s tensor, if it lies
/// inside.
fn element(enc: &Encoding, elem: usize, [col, row, batch]: [i64; 3]) -> Option<usize> {
    let inside = [col, row, batch]
        .iter()
        .zip(enc.dims)
        .all(|(x, n)| (0..n as i64).contains(x));
    inside.then(|| {
        (enc.address as usize)
            .wrapping_add(batch as usize * enc.batch_stride as usize)
            .wrapping_add(row as usize * enc.row_stride as usize + col as usize * elem)
    })
}

/// `cp.async.bulk.tensor.{2,3}d.global.shared::cta`: the box at `coords` (column, row,
/// batch; the batch 0 in a 2-D map) of
/// `map` from shared memory at `src` (`shared` is the CTA's shared memory,
/// `shared_bytes` long), the elements outside the tensor not written; the bytes written.
/// It completes at once (the generated code waits for it before the tile is reused).
///
/// # Safety
/// `map` points to a tensor map's bytes, and the tensor it describes is writable memory
/// wherever the box lies inside it.
pub(super) unsafe fn store(
    (src, shared, shared_bytes): (usize, usize, usize),
    map: *const u64,
    coords: [i32; 3],
) -> Result<u64, String> {
    let (enc, elem, rows, row_bytes) = box_of(map)?;
    let start = src.wrapping_sub(shared);
    if start % 128 != 0 || start + rows * row_bytes > shared_bytes {
        return Err(format!(
            "a TMA store from shared byte {start} outside or misaligned"
        ));
    }
    let mut written = 0;
    for r in 0..rows {
        for byte in (0..row_bytes).step_by(elem) {
            let at = shared + swizzled(start + r * row_bytes + byte, enc.swizzle);
            let row = i64::from(coords[1]) + r as i64;
            let col = i64::from(coords[0]) + (byte / elem) as i64;
            if let Some(dst) = element(&enc, elem, [col, row, i64::from(coords[2])]) {
                // SAFETY: inside the CTA's shared memory (checked above) and inside the
                // tensor (the caller's promise).
                unsafe { std::ptr::copy_nonoverlapping(at as *const u8, dst as *mut u8, elem) };
                written += elem as u64;
            }
        }
    }
    Ok(written)
}

/// The bytes a copy's destination holds until it lands (f16/bf16 NaNs).
const IN_FLIGHT: u8 = 0xff;

/// One 16-byte chunk of a copy: its shared-memory address and bytes.
type Chunk = (usize, [u8; 16]);

/// Every `mbarrier` of a CTA, by shared-memory address.
#[derive(Default)]
pub(super) struct Barriers {
    by_address: HashMap<usize, Barrier>,
    /// Changes to any barrier so far: a pass over waiting threads that sees none is a
    /// deadlock.
    pub progress: u64,
    /// Bytes copied by TMA.
    pub bytes: u64,
}

struct Barrier {
    /// Arrivals per phase.
    count: u32,
    /// Arrivals the current phase still needs.
    pending: u32,
    /// Transaction bytes expected less those completed, in the current phase.
    tx: i64,
    /// Phases completed.
    phase: u64,
    /// The current phase's copies.
    in_flight: Vec<Chunk>,
    /// Copies of completed phases, written at the next wait that passes.
    landed: Vec<Chunk>,
}

impl Barrier {
    fn complete_if_done(&mut self) {
        if self.pending == 0 && self.tx == 0 {
            self.phase += 1;
            self.pending = self.count;
            self.landed.append(&mut self.in_flight);
        }
    }
}

impl Barriers {
    fn get(&mut self, address: usize, what: &str) -> Result<&mut Barrier, String> {
        (self.by_address.get_mut(&address)).ok_or_else(|| {
            format!("{what} on shared address {address:#x}, no initialized mbarrier")
        })
    }

    /// `mbarrier.init` with `count` arrivals per phase.
    pub fn init(&mut self, address: usize, count: u32) {
        self.progress += 1;
        let b = Barrier {
            count,
            pending: count,
            tx: 0,
            phase: 0,
            in_flight: Vec::new(),
            landed: Vec::new(),
        };
        self.by_address.insert(address, b);
    }

    /// `mbarrier.arrive.expect_tx`: one arrival, `bytes` more to complete.
    pub fn arrive_expect_tx(&mut self, address: usize, bytes: u32) -> Result<(), String> {
        self.progress += 1;
        let b = self.get(address, "mbarrier.arrive")?;
        if b.pending == 0 {
            return Err("an mbarrier phase got more arrivals than its count".into());
        }
        b.pending -= 1;
        b.tx += i64::from(bytes);
        b.complete_if_done();
        Ok(())
    }

    /// `mbarrier.try_wait.parity`: whether the phase of that parity is complete (the
    /// current phase has the other parity); if so, the copies of completed phases land.
    pub fn try_wait(&mut self, address: usize, parity: u32) -> Result<bool, String> {
        let b = self.get(address, "mbarrier.try_wait")?;
        if b.phase & 1 == u64::from(parity & 1) {
            return Ok(false);
        }
        let mut raced = None;
        for (dst, data) in b.landed.drain(..) {
            // SAFETY: `dst` is 16 bytes of the CTA's shared memory, checked at issue.
            let now = unsafe { std::slice::from_raw_parts(dst as *const u8, 16) };
            // A store to a destination in flight races with the copy on a GPU: the bytes
            // still marked in flight say none did.
            if now.iter().any(|x| *x != IN_FLIGHT) {
                raced.get_or_insert(dst);
            }
            // SAFETY: as above.
            unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), dst as *mut u8, 16) };
        }
        match raced {
            Some(dst) => Err(format!(
                "shared memory at address {dst:#x} was written while a TMA copy to it was in flight"
            )),
            None => Ok(true),
        }
    }

    /// `mbarrier.inval`: the barrier's memory may be used otherwise.
    pub fn inval(&mut self, address: usize) -> Result<(), String> {
        self.progress += 1;
        let b = self.get(address, "mbarrier.inval")?;
        if !b.in_flight.is_empty() || !b.landed.is_empty() {
            return Err("an mbarrier was invalidated with copies not waited for".into());
        }
        self.by_address.remove(&address);
        Ok(())
    }

    /// `cp.async.bulk.tensor.{2,3}d`: the box at `coords` (column, row, batch) of `map`
    /// into shared
    /// memory at `dst` (`shared` is the CTA's shared memory, `shared_bytes` long),
    /// completing its bytes on the barrier at `barrier`.
    ///
    /// # Safety
    /// `map` points to a tensor map's bytes, and the tensor it describes is readable
    /// memory wherever the box lies inside it.
    pub unsafe fn copy(
        &mut self,
        (dst, shared, shared_bytes): (usize, usize, usize),
        map: *const u64,
        coords: [i32; 3],
        barrier: usize,
    ) -> Result<(), String> {
        let (enc, elem, box_rows, row_bytes) = box_of(map)?;
        let box_cols = row_bytes / elem;
        let start = dst.wrapping_sub(shared);
        if start % 128 != 0 || start + box_rows * row_bytes > shared_bytes {
            return Err(format!(
                "a TMA copy to shared byte {start} ({} bytes) outside or misaligned",
                box_rows * row_bytes
            ));
        }
        let mut chunks = Vec::with_capacity(box_rows * row_bytes / 16);
        for r in 0..box_rows {
            for c in (0..box_cols).step_by(16 / elem) {
                let mut data = [0u8; 16];
                for (i, bytes) in data.chunks_mut(elem).enumerate() {
                    let col = i64::from(coords[0]) + (c + i) as i64;
                    let row = i64::from(coords[1]) + r as i64;
                    let at = [col, row, i64::from(coords[2])];
                    if let Some(src) = element(&enc, elem, at) {
                        // SAFETY: inside the tensor (the caller's promise).
                        unsafe {
                            std::ptr::copy_nonoverlapping(
                                src as *const u8,
                                bytes.as_mut_ptr(),
                                elem,
                            )
                        };
                    }
                }
                let address = swizzled(start + r * row_bytes + c * elem, enc.swizzle);
                chunks.push((shared + address, data));
            }
        }
        let bytes = (box_rows * row_bytes) as i64;
        self.bytes += bytes as u64;
        self.progress += 1;
        let b = self.get(barrier, "a TMA copy's mbarrier")?;
        for (dst, _) in &chunks {
            // SAFETY: inside the CTA's shared memory (checked above).
            unsafe { std::ptr::write_bytes(*dst as *mut u8, IN_FLIGHT, 16) };
        }
        b.in_flight.extend(chunks);
        b.tx -= bytes;
        b.complete_if_done();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phase_completes_with_its_arrival_and_bytes_and_lands_at_the_wait() {
        let mut shared = [0u8; 256];
        let dst = shared.as_mut_ptr() as usize;
        let mut b = Barriers::default();
        b.init(8, 1);
        // Before any phase completes, parity 1 (the phase before the first) is done.
        assert!(b.try_wait(8, 1).unwrap());
        assert!(!b.try_wait(8, 0).unwrap());
        b.arrive_expect_tx(8, 16).unwrap();
        assert!(!b.try_wait(8, 0).unwrap(), "16 bytes still expected");
        // As `copy` leaves a destination: marked in flight.
        // SAFETY: the first 16 bytes of `shared`.
        unsafe { std::ptr::write_bytes(dst as *mut u8, IN_FLIGHT, 16) };
        let bb = b.by_address.get_mut(&8).unwrap();
        bb.in_flight.push((dst, [7; 16]));
        bb.tx -= 16;
        bb.complete_if_done();
        assert_eq!(shared[0], IN_FLIGHT, "not landed before the wait");
        assert!(b.try_wait(8, 0).unwrap());
        assert_eq!(shared[..16], [7; 16]);
        assert!(
            !b.try_wait(8, 1).unwrap(),
            "the second phase is not complete"
        );
        b.inval(8).unwrap();
        assert!(b.try_wait(8, 0).is_err());
        assert!(b.arrive_expect_tx(16, 1).is_err());
    }

    /// A store to a copy's destination before the copy lands races with it on a GPU: the
    /// wait that lands the copy reports it.
    #[test]
    fn a_store_to_a_destination_in_flight_is_a_race() {
        let mut shared = [IN_FLIGHT; 64];
        let dst = shared.as_mut_ptr() as usize;
        let mut b = Barriers::default();
        b.init(8, 1);
        b.arrive_expect_tx(8, 16).unwrap();
        let bb = b.by_address.get_mut(&8).unwrap();
        bb.in_flight.push((dst, [7; 16]));
        bb.tx -= 16;
        bb.complete_if_done();
        // SAFETY: byte 3 of `shared`.
        unsafe { *(dst as *mut u8).add(3) = 0 };
        let e = b.try_wait(8, 0).unwrap_err();
        assert!(e.contains("in flight"), "{e}");
    }
}
