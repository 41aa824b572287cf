//! The swizzled shared-memory layout of a 16-bit tensor-core operand.
//!
//! A `rows × cols` tile of halves is stored row-major without padding, in 16-byte chunks
//! (8 halves) whose place in their row is XOR-ed with the row's *phase*. The 8 rows that
//! one `ldmatrix` 8×8 matrix reads then start in 8 different bank groups (of the 32 banks'
//! 128 bytes), so each matrix is one shared-memory wavefront, whether the operand is read
//! along its rows (`a`) or transposed (`b` by `ldmatrix.trans`). With rows of 128 bytes
//! or more the phase is `row % 8`: the 128-byte swizzle that `wgmma` descriptors and TMA
//! also use. Narrower rows share a phase between `8 / chunks` consecutive rows, as
//! Triton's shared layouts for `mma` operands do (`vec = 8`, `perPhase = 128 / row bytes`).
//! A row whose chunk count is not a power of two is not swizzled: an odd count needs no
//! swizzle (8 rows start in 8 bank groups), an even one keeps some bank conflicts.

/// Bytes in one swizzled chunk.
pub(crate) const CHUNK_BYTES: usize = 16;

/// A `rows × cols` tile of 16-bit elements at byte `offset` of shared memory.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Swizzled {
    pub offset: usize,
    pub rows: usize,
    pub cols: usize,
}

impl Swizzled {
    /// `cols` must be a multiple of 8 (whole chunks per row).
    pub(crate) fn new(offset: usize, rows: usize, cols: usize) -> Swizzled {
        debug_assert!(cols.is_multiple_of(8) && offset.is_multiple_of(CHUNK_BYTES));
        Swizzled { offset, rows, cols }
    }

    /// Bytes the tile takes.
    pub(crate) fn bytes(&self) -> usize {
        self.rows * self.row_bytes()
    }

    pub(crate) fn row_bytes(&self) -> usize {
        self.cols * 2
    }

    /// Chunks per row.
    pub(crate) fn chunks(&self) -> usize {
        self.cols / 8
    }

    /// Consecutive rows sharing one phase, and the number of phases (1: no swizzle).
    pub(crate) fn phases(&self) -> (usize, usize) {
        let c = self.chunks();
        if !c.is_power_of_two() {
            return (1, 1);
        }
        ((8 / c).max(1), c.min(8))
    }

    /// The byte offset (from the start of shared memory) of chunk `chunk` of `row`: what
    /// `Gen::swizzled_element` emits, as the tests' reference.
    #[cfg(test)]
    pub(crate) fn chunk_address(&self, row: usize, chunk: usize) -> usize {
        let (per_phase, phases) = self.phases();
        let phase = (row / per_phase) % phases;
        self.offset + row * self.row_bytes() + CHUNK_BYTES * (chunk ^ phase)
    }

    /// The byte offset of element `(row, col)`.
    #[cfg(test)]
    pub(crate) fn element_address(&self, row: usize, col: usize) -> usize {
        self.chunk_address(row, col / 8) + 2 * (col % 8)
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
        for (rows, cols) in [(16, 16), (32, 32), (64, 64), (16, 128), (16, 8), (16, 24)] {
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
}
