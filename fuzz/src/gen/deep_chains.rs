//! Long chains of lane ops over tiles of several chunks.
//!
//! The CPU software-pipelines a lane loop whose lanes compute long dependency chains over
//! a rank-1 tile of four chunks or more (codegen `staged`: chunk `c`'s later stages beside
//! chunk `c + 1`'s earlier ones, the values crossing stages kept in scratch rings, chunks
//! whose `likely` hints hold in one copy and the others in another). The random programs'
//! rank-1 tiles are a chunk or less and their chains a few ops deep, so they never take
//! that path; this builds such tiles on purpose: twenty to thirty-six links, each a
//! halving fused multiply-add, a max or min, a square root, a division or a mean of the
//! chain so far and a freshly loaded value, or a select of them by a compare hinted
//! `likely` true.

use super::{Gen, Need};
use tritium_backend::cpu::LANE_CHUNK as CHUNK;
use tritium_dsl::ir::{BinOp, CmpPred, Const, DType, HintKind, Op, UnOp, Value};

impl Gen {
    /// A length for [`deep_chain`](Self::deep_chain): four chunks or more.
    pub(super) fn deep_chain_len(&mut self) -> usize {
        *self.hint_rng.pick(&[4 * CHUNK, 8 * CHUNK])
    }

    /// A float value of `d` over `[n]` computed by a long chain of lane ops from loads of
    /// inputs of `d` (which there must be). Each is an IEEE operation, so exact on every
    /// device: an approximate value (a transcendental function's) would make the rest of
    /// the chain unreliable (see `info`).
    pub(super) fn deep_chain(&mut self, d: DType, n: usize, need: Need) -> Value {
        let shape = [n];
        // Each link is read once (by the next), so that it is computed in the store's
        // loop, not materialized: no other op picks the chain's values.
        let visible = self.visible.last().map_or(0, Vec::len);
        let mut x = self.load_input(d, &shape, need);
        let links = self.hint_rng.range(20, 37);
        for _ in 0..links {
            let y = self.load_input(d, &shape, need);
            let t = self.ty(x).clone();
            // Each keeps the magnitudes of the loaded values (no overflow to a tile of
            // infinities and NaNs, where reading another chunk's lanes would not show).
            let next = match self.hint_rng.below(6) {
                0 => {
                    let half = self.constant(d, &shape, Const::Float(0.5));
                    self.push1(Op::Fma(x, half, y), t)
                }
                1 => {
                    let op = *self.hint_rng.pick(&[BinOp::Max, BinOp::Min]);
                    self.binary(op, x, y)
                }
                2 => {
                    let a = self.push1(Op::Unary(UnOp::Abs, x), t.clone());
                    let r = self.push1(Op::Unary(UnOp::Sqrt, a), t);
                    self.binary(BinOp::Add, r, y)
                }
                3 => {
                    let a = self.push1(Op::Unary(UnOp::Abs, y), t);
                    let one = self.int_const(d, &shape, 1);
                    let den = self.binary(BinOp::Add, a, one);
                    self.binary(BinOp::Div, x, den)
                }
                4 => {
                    let sum = self.binary(BinOp::Add, x, y);
                    let quarter = self.constant(d, &shape, Const::Float(0.25));
                    self.binary(BinOp::Mul, sum, quarter)
                }
                _ => {
                    let p = *self.hint_rng.pick(&[CmpPred::Lt, CmpPred::Ge]);
                    // Likely true, so that the chain goes on in the copy taking it as known.
                    let c = self.cmp(p, x, y);
                    let hint = Op::Hint {
                        x: c,
                        kind: HintKind::Likely,
                        values: vec![1],
                    };
                    let c = self.push1(hint, self.ty(c).clone());
                    self.push1(Op::Select(c, x, y), t)
                }
            };
            x = match need.accepts(&self.info(next)) {
                true => next,
                false => self.fix(next, need),
            };
            if let Some(scope) = self.visible.last_mut() {
                scope.truncate(visible);
            }
        }
        // Observed too: later stores to the output may cover the caller's.
        self.observe_alone(x);
        x
    }
}
