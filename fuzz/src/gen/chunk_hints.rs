//! `likely` hints over lanes that run in chunks, read at other lanes' indices.
//!
//! The CPU tests the hints of a lane loop over a rank-1 tile of whole chunks once per
//! chunk of 32 lanes (codegen `likely`, `versioned_chunk`) unless a lane reads them at
//! another lane's index, where the test stays per tile. A wrong call there gives wrong
//! lanes only where a chunk's own lanes hold the hint and the lanes it reads do not, so the
//! random programs, whose rank-1 tiles are one chunk or less and whose hinted bools are
//! seldom uniform over a chunk, almost never catch it (seeded bugs went unseen in 75
//! programs). This generator builds such tiles on purpose: two to eight chunks, a hinted
//! condition that holds chunk by chunk (a prefix of whole chunks, every other chunk, all
//! but one lane) or data's, read through a flip, a gather, a reshape round trip or a
//! select made of it first.

use super::{Gen, Need};
// The CPU's chunk of lanes, by which it tests a `likely` hint.
use tritium_backend::cpu::LANE_CHUNK as CHUNK;
use tritium_dsl::ir::{BinOp, CmpPred, DType, HintKind, Op, Value};

impl Gen {
    /// A length for [`chunk_hinted`](Self::chunk_hinted): two chunks or more.
    pub(super) fn chunked_len(&mut self) -> usize {
        *self.hint_rng.pick(&[2 * CHUNK, 4 * CHUNK, 8 * CHUNK])
    }

    /// A value of `d` over `[n]` (`n` a multiple of [`CHUNK`]) that selects between two
    /// values by a `likely`-hinted condition read at other lanes' indices (or at its own,
    /// now and then, as the per-chunk test's control).
    pub(super) fn chunk_hinted(&mut self, d: DType, n: usize, need: Need) -> Value {
        let shape = [n];
        let idx = self.push1(
            Op::Arange {
                start: 0,
                end: n as i64,
            },
            Self::tile(DType::I32, &shape),
        );
        let cond = match self.hint_rng.below(4) {
            0 => {
                // A prefix: of whole chunks mostly.
                let k = match self.hint_rng.chance(0.7) {
                    true => CHUNK * self.hint_rng.range(1, (n / CHUNK) as i64) as usize,
                    false => self.hint_rng.range(1, n as i64) as usize,
                };
                let k = self.int_const(DType::I32, &shape, k as i128);
                self.cmp(CmpPred::Lt, idx, k)
            }
            1 => {
                // Every other chunk: bit 5 of the lane index.
                let bit = self.int_const(DType::I32, &shape, CHUNK as i128);
                let masked = self.binary(BinOp::And, idx, bit);
                let zero = self.int_const(DType::I32, &shape, 0);
                self.cmp(CmpPred::Eq, masked, zero)
            }
            2 => {
                // All lanes but one.
                let k = self.hint_rng.below(n) as i128;
                let k = self.int_const(DType::I32, &shape, k);
                self.cmp(CmpPred::Ne, idx, k)
            }
            _ => self.value(DType::Bool, &shape, Need::EXACT),
        };
        let t = self.ty(cond).clone();
        let value = self.hint_rng.chance(0.8);
        let hinted = self.push1(
            Op::Hint {
                x: cond,
                kind: HintKind::Likely,
                values: vec![value as u32],
            },
            t,
        );
        let (a, b) = (self.value(d, &shape, need), self.value(d, &shape, need));
        let out = Self::tile(d, &shape);
        // A consequence of the hint (a select made of it) remapped, or the hint itself.
        if self.hint_rng.chance(0.35) {
            let chosen = self.push1(Op::Select(hinted, a, b), out);
            return self.remapped(chosen, idx, n);
        }
        let read = self.remapped(hinted, idx, n);
        self.push1(Op::Select(read, a, b), out)
    }

    /// `x` (rank 1, `n` lanes) read at other lanes: flipped, gathered from a rotation or a
    /// mirror of the lane index, through `[n / CHUNK, CHUNK]` flipped or transposed, or
    /// as it is (one time in six).
    fn remapped(&mut self, x: Value, idx: Value, n: usize) -> Value {
        let t = self.ty(x).clone();
        let d = t.dtype().expect("a tile of a dtype");
        let shape = [n];
        match self.hint_rng.below(6) {
            0 => self.push1(Op::Flip { x, axis: 0 }, t),
            1 | 2 => {
                // Rotated by a random number of lanes (a whole chunk half the time), or
                // mirrored.
                let index = match self.hint_rng.below(3) {
                    0 => {
                        let last = self.int_const(DType::I32, &shape, n as i128 - 1);
                        self.binary(BinOp::Sub, last, idx)
                    }
                    k => {
                        let by = match k {
                            1 => CHUNK * self.hint_rng.range(1, (n / CHUNK) as i64) as usize,
                            _ => self.hint_rng.range(1, n as i64) as usize,
                        };
                        let by = self.int_const(DType::I32, &shape, by as i128);
                        let moved = self.binary(BinOp::Add, idx, by);
                        let len = self.int_const(DType::I32, &shape, n as i128);
                        self.binary(BinOp::Rem, moved, len)
                    }
                };
                self.push1(
                    Op::Gather {
                        src: x,
                        index,
                        axis: 0,
                    },
                    t,
                )
            }
            3 | 4 => {
                let rows = Self::tile(d, &[n / CHUNK, CHUNK]);
                let r = self.push1(Op::Reshape(x), rows.clone());
                let moved = match self.hint_rng.chance(0.5) {
                    true => self.push1(Op::Flip { x: r, axis: 0 }, rows),
                    false => self.push1(
                        Op::Permute {
                            x: r,
                            dims: vec![1, 0],
                        },
                        Self::tile(d, &[CHUNK, n / CHUNK]),
                    ),
                };
                self.push1(Op::Reshape(moved), t)
            }
            _ => x,
        }
    }
}
