//! Runtime-allocated output and workspace buffers, with guard bytes in checked mode.

use std::ffi::c_void;

/// Guard bytes placed after every output and workspace in checked mode.
pub const GUARD_BYTES: usize = 64;
const ALIGN: usize = 64;

/// A fresh guard pattern: every buffer of every call gets its own, so a kernel that copies
/// one buffer's guard bytes over another's (or last call's over this call's) is caught.
pub(crate) fn guard_pattern() -> [u8; GUARD_BYTES] {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0x005e_ed0f_9a4d);
    let mut x = NEXT.fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed);
    let mut out = [0u8; GUARD_BYTES];
    for chunk in out.chunks_mut(8) {
        // splitmix64
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        chunk.copy_from_slice(&(z ^ (z >> 31)).to_le_bytes()[..chunk.len()]);
    }
    out
}

/// A zero-initialized, 64-byte aligned buffer followed (in checked mode) by guard bytes of
/// its own pattern.
pub(crate) struct Buffer {
    words: Vec<u64>,
    offset: usize,
    len: usize,
    guard: usize,
    pattern: [u8; GUARD_BYTES],
}

impl Buffer {
    /// `len` usable bytes, plus [`GUARD_BYTES`] of guard when `checked`; `None` when the size
    /// overflows or the memory cannot be allocated (never an abort).
    pub fn new(len: usize, checked: bool) -> Option<Buffer> {
        let guard = if checked { GUARD_BYTES } else { 0 };
        let total = len.checked_add(guard + ALIGN)?;
        let n_words = total.div_ceil(8).max(1);
        let mut words: Vec<u64> = Vec::new();
        words.try_reserve_exact(n_words).ok()?;
        words.resize(n_words, 0);
        let addr = words.as_ptr() as usize;
        let offset = (ALIGN - addr % ALIGN) % ALIGN;
        let mut b = Buffer {
            words: Vec::new(),
            offset,
            len,
            guard,
            pattern: guard_pattern(),
        };
        {
            // SAFETY: offset + len + guard <= total bytes of `words`.
            let bytes =
                unsafe { std::slice::from_raw_parts_mut(words.as_mut_ptr().cast::<u8>(), total) };
            bytes[offset + len..offset + len + guard].copy_from_slice(&b.pattern[..guard]);
        }
        b.words = words;
        Some(b)
    }

    fn all(&self) -> &[u8] {
        // SAFETY: `words` holds at least offset + len + guard bytes.
        unsafe {
            std::slice::from_raw_parts(
                self.words.as_ptr().cast::<u8>().add(self.offset),
                self.len + self.guard,
            )
        }
    }

    /// The pointer handed to the kernel.
    pub fn ptr(&mut self) -> *mut c_void {
        // SAFETY: within the allocation.
        unsafe { self.words.as_mut_ptr().cast::<u8>().add(self.offset).cast() }
    }

    /// The usable bytes.
    pub fn data(&self) -> &[u8] {
        &self.all()[..self.len]
    }

    /// The usable length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The first overwritten guard byte (offset after the end), if any.
    pub fn overwritten_guard(&self) -> Option<usize> {
        self.all()[self.len..]
            .iter()
            .zip(&self.pattern)
            .position(|(b, p)| b != p)
    }
}
