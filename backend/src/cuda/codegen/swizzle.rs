//! The swizzled shared-memory layout of a tensor-core operand.
//!
//! A `rows × cols` tile of 16-bit (or, for fp8 `wgmma` operands, 8-bit) elements is
//! stored in 16-byte chunks (8 or 16 elements) whose place in
//! their row is XOR-ed with the row's *phase*. The 8 rows that one `ldmatrix` 8×8 matrix
//! reads then start in 8 different bank groups (of the 32 banks' 128 bytes), so each
//! matrix is one shared-memory wavefront, whether the operand is read along its rows
//! (`a`) or transposed (`b` by `ldmatrix.trans`). These are the hardware's swizzle modes,
//! which `wgmma` descriptors and TMA decode from address bits (bits 4–6 XOR-ed with bits
//! 7–9 for 128 bytes), so one layout serves `ldmatrix` and `wgmma`:
//! - Rows of a multiple of 128 bytes are cut into column *blocks* of 128 bytes (64
//!   halves), block after block, each `rows × 128` bytes with phase `row % 8`: the
//!   128-byte swizzle's atoms (8 rows × 128 bytes), as `wgmma` reads a K- or MN-major
//!   operand wider than one atom (the descriptor's leading byte offset is the block size).
//! - Rows of 64 or 32 bytes share a phase between `8 / chunks` consecutive rows (the 64-
//!   and 32-byte swizzles; Triton's `vec = 8`, `perPhase = 128 / row bytes`).
//! - Any other row is not swizzled: an odd chunk count needs no swizzle (8 rows start in 8
//!   bank groups), an even one keeps some bank conflicts.
//!
//! A swizzled tile's offset is a multiple of its pattern's period (`8 × 128`, `8 × 64`…
//! bytes; [`Swizzled::alignment`]) wherever `wgmma` reads it, as the hardware XORs
//! absolute address bits.

/// Bytes in one swizzled chunk.
pub(crate) const CHUNK_BYTES: usize = 16;

/// A `rows × cols` tile of `elem`-byte elements (2, or 1 for fp8) at byte `offset` of
/// shared memory.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Swizzled {
    pub offset: usize,
    pub rows: usize,
    pub cols: usize,
    pub elem: usize,
}

impl Swizzled {
    /// A tile of 16-bit elements; `cols` must be a multiple of 8 (whole chunks per row).
    pub(crate) fn new(offset: usize, rows: usize, cols: usize) -> Swizzled {
        Self::of_bytes(offset, rows, cols, 2)
    }

    /// A tile of `elem`-byte elements, whole chunks per row.
    pub(crate) fn of_bytes(offset: usize, rows: usize, cols: usize, elem: usize) -> Swizzled {
        debug_assert!(
            (cols * elem).is_multiple_of(CHUNK_BYTES) && offset.is_multiple_of(CHUNK_BYTES)
        );
        Swizzled {
            offset,
            rows,
            cols,
            elem,
        }
    }

    /// The same layout at another offset.
    pub(crate) fn at(self, offset: usize) -> Swizzled {
        Self::of_bytes(offset, self.rows, self.cols, self.elem)
    }

    /// Elements in one chunk.
    pub(crate) fn chunk_elems(&self) -> usize {
        CHUNK_BYTES / self.elem
    }

    /// Bytes the tile takes.
    pub(crate) fn bytes(&self) -> usize {
        self.rows * self.row_bytes()
    }

    pub(crate) fn row_bytes(&self) -> usize {
        self.cols * self.elem
    }

    /// Chunks per row.
    pub(crate) fn chunks(&self) -> usize {
        self.row_bytes() / CHUNK_BYTES
    }

    /// Whether rows are cut into 128-byte column blocks (rows of a multiple of 128 bytes).
    pub(crate) fn blocked(&self) -> bool {
        self.row_bytes().is_multiple_of(128)
    }

    /// Bytes from one row to the next within a column block.
    pub(crate) fn row_stride(&self) -> usize {
        match self.blocked() {
            true => 128,
            false => self.row_bytes(),
        }
    }

    /// Bytes from one group of 8 chunks of a row to the next: a column block, or (rows
    /// not cut) the next 128 bytes of the row.
    pub(crate) fn block_bytes(&self) -> usize {
        match self.blocked() {
            true => self.rows * 128,
            false => 128,
        }
    }

    /// Consecutive rows sharing one phase, and the number of phases (1: no swizzle).
    pub(crate) fn phases(&self) -> (usize, usize) {
        let c = self.chunks();
        if self.blocked() {
            return (1, 8);
        }
        if !c.is_power_of_two() {
            return (1, 1);
        }
        ((8 / c).max(1), c.min(8))
    }

    /// The hardware swizzle mode in bytes (128, 64, 32), or 0 for none.
    pub(crate) fn swizzle_bytes(&self) -> usize {
        match self.phases() {
            (_, 1) => 0,
            (per_phase, _) => 128 / per_phase,
        }
    }

    /// The offset alignment at which the layout's phases are the hardware's: one period
    /// of the pattern (8 rows of the swizzle's width), or a chunk when not swizzled.
    pub(crate) fn alignment(&self) -> usize {
        match self.swizzle_bytes() {
            0 => CHUNK_BYTES,
            w => 8 * w,
        }
    }

    /// The byte offset (from the start of shared memory) of chunk `chunk` of `row`: what
    /// `Gen::swizzled_element` emits, as the tests' reference.
    #[cfg(test)]
    pub(crate) fn chunk_address(&self, row: usize, chunk: usize) -> usize {
        let (per_phase, phases) = self.phases();
        let phase = (row / per_phase) % phases;
        self.offset
            + (chunk / 8) * self.block_bytes()
            + row * self.row_stride()
            + CHUNK_BYTES * ((chunk % 8) ^ phase)
    }

    /// The byte offset of element `(row, col)`.
    #[cfg(test)]
    pub(crate) fn element_address(&self, row: usize, col: usize) -> usize {
        let per = self.chunk_elems();
        self.chunk_address(row, col / per) + self.elem * (col % per)
    }
}

/// Shared-memory wavefronts of one warp's access: the 4-byte words it touches, per bank
/// (`word % 32`), at most one distinct word per bank per wavefront.
pub(crate) fn wavefronts(byte_ranges: impl IntoIterator<Item = (usize, usize)>) -> usize {
    let mut per_bank: [Vec<usize>; 32] = Default::default();
    for (start, len) in byte_ranges {
        for word in start / 4..(start + len).div_ceil(4) {
            let bank = &mut per_bank[word % 32];
            if !bank.contains(&word) {
                bank.push(word);
            }
        }
    }
    per_bank.iter().map(Vec::len).max().unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every element has its own address inside the tile.
    #[test]
    fn the_layout_is_a_permutation_of_the_tile() {
        for (rows, cols) in [
            (16, 16),
            (32, 32),
            (64, 64),
            (16, 128),
            (16, 8),
            (16, 24),
            (64, 192),
            (8, 256),
        ] {
            let t = Swizzled::new(32, rows, cols);
            let mut seen = vec![false; t.bytes() / 2];
            for r in 0..rows {
                for c in 0..cols {
                    let at = (t.element_address(r, c) - 32) / 2;
                    assert!(!seen[at], "{rows}×{cols}: ({r}, {c}) collides");
                    seen[at] = true;
                }
            }
        }
    }

    /// The rows of an 8×8 matrix that `ldmatrix` reads (8 consecutive rows, one chunk
    /// each) are one wavefront for every power-of-two row of at least 8 halves; reading
    /// `b` transposed reads the same row chunks.
    #[test]
    fn ldmatrix_rows_are_one_wavefront() {
        for cols in [8, 16, 32, 64, 128, 256] {
            let t = Swizzled::new(0, 64, cols);
            for row0 in (0..64).step_by(8) {
                for chunk in 0..t.chunks() {
                    let rows = (row0..row0 + 8).map(|r| (t.chunk_address(r, chunk), 16));
                    assert_eq!(
                        wavefronts(rows),
                        1,
                        "cols {cols}, rows {row0}.., chunk {chunk}"
                    );
                }
            }
        }
        // Without the swizzle, 64-byte rows would be four wavefronts and 128-byte rows 8.
        let plain = |w: usize| (0..8).map(move |r| (r * w, 16));
        assert_eq!((wavefronts(plain(64)), wavefronts(plain(128))), (4, 8));
    }

    /// The staged epilogue (`epilogue.rs`) writes a warp's fragment pairs (lane `4g + c`
    /// writes columns `2c, 2c + 1` of one chunk of row `g` of 8) as one wavefront, and reads
    /// whole chunks in row-major order, 8 threads' 16 bytes one wavefront.
    #[test]
    fn epilogue_pairs_and_chunks_are_one_wavefront() {
        for cols in [8, 16, 32, 64, 128, 192, 256] {
            let t = Swizzled::new(0, 64, cols);
            for row0 in (0..64).step_by(8) {
                for chunk in 0..t.chunks() {
                    let pairs = (0..32).map(|lane| {
                        (
                            t.element_address(row0 + lane / 4, chunk * 8 + 2 * (lane % 4)),
                            4,
                        )
                    });
                    assert_eq!(
                        wavefronts(pairs),
                        1,
                        "cols {cols}, rows {row0}.., chunk {chunk}"
                    );
                }
            }
            for q0 in (0..64 * t.chunks()).step_by(8) {
                let chunks =
                    (q0..q0 + 8).map(|q| (t.chunk_address(q / t.chunks(), q % t.chunks()), 16));
                assert_eq!(wavefronts(chunks), 1, "cols {cols}, chunks {q0}..");
            }
        }
    }

    /// Where swizzled, the layout is the hardware's swizzle of its mode (bits 4–6 of an
    /// address XOR-ed with bits 7–9 for 128 bytes, 4–5 with 7–8 for 64, 4 with 7 for 32)
    /// applied to the unswizzled atoms, at an aligned offset: what `wgmma` reads.
    #[test]
    fn swizzled_tiles_follow_the_hardware_swizzle_modes() {
        for (rows, cols, mode) in [(16, 16, 32), (16, 32, 64), (16, 64, 128), (32, 256, 128)] {
            let t = Swizzled::new(3 * 1024, rows, cols);
            assert_eq!((t.swizzle_bytes(), t.alignment()), (mode, 8 * mode));
            let bits = (mode / 32).trailing_zeros() + 1;
            let mask = (1 << bits) - 1;
            for r in 0..rows {
                for c in 0..t.chunks() {
                    // The unswizzled address: column block, row in it, chunk in the row.
                    let plain =
                        t.offset + (c / 8) * t.block_bytes() + r * t.row_stride() + 16 * (c % 8);
                    let hw = plain ^ (((plain >> 7) & mask) << 4);
                    assert_eq!(
                        t.chunk_address(r, c),
                        hw,
                        "{rows}×{cols}, row {r}, chunk {c}"
                    );
                }
            }
        }
    }
}
