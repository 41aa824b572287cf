//! Index masks in the masked copy of a versioned loop: true on a prefix of the lanes.
//!
//! A partial block's mask is usually `arange(0, B) + c < n` on a rank-1 tile: lanes
//! `0..p` with `p = clamp(n - c, 0, B)` are in, the rest out. Computed lane by lane, the
//! masked copy becomes masked vector loads and stores (microcoded and slow on AMD CPUs: a
//! softmax over 1000 of 1024 lanes took 2.7× the time per element of full rows) with the
//! mask built from 64-bit lane compares. So in the masked copy, a rank-1 lane loop of the
//! mask's length is split in two: lanes `0..p` run with the mask known true at the loop's
//! own index (plain loads and stores), lanes `p..B` as before, or with the mask known
//! false when `c` is a constant that keeps every lane from wrapping (`arange(0, B) < n`).
//! A lane of the mask read at any other index (through a flip, say) is still computed, so
//! the split is exact.
//!
//! Each lane is `i + c` in wrapping i32 arithmetic, `c` the exact (i64) sum of the arange's
//! start and the added scalars, so a lane equals its exact value whenever that fits i32.
//! `p = clamp(n - c, 0, B)` in i64, and 0 when `c < i32::MIN`: a lane below `p` then has
//! `i32::MIN <= c <= i + c < n <= i32::MAX` exactly, so its i32 compare is true.

use super::box_mask::long_axis_len;
use super::custom::Direct;
use super::{Gen, LoopUnroll};
use crate::llvm::{Positioned, Result};
use inkwell::values::IntValue;
use inkwell::IntPredicate;
use std::collections::HashSet;
use tritium_dsl::ir::{BinOp, CmpPred, Const, DType, Op, Value};

/// Lanes `0..p` of the masks `same` (rank 1, `len` lanes) are true.
#[derive(Clone)]
pub(super) struct PrefixSplit<'ctx> {
    len: usize,
    /// `p` (i64, in `0..=len`).
    pub p: IntValue<'ctx>,
    same: HashSet<Value>,
    /// The i32 tile `i + c` the masks compare: its lanes below `p` are exact.
    index: Value,
    /// Pointer tiles that are runs along their axis at every lane below `p` (see
    /// [`exact_below_p`](Self::exact_below_p)).
    runs: Vec<Value>,
    /// The index of the loop over lanes `0..p` being generated.
    iv: Option<IntValue<'ctx>>,
    /// Whether lanes `p..len` of the masks are false: the index's offset `c` is a constant
    /// with `i32::MIN <= c` and `c + len - 1 <= i32::MAX`, so no lane wraps and lane
    /// `i >= p` has `i + c >= n` (or `> n` for `<=`) exactly.
    false_past_p: bool,
    /// The index of the loop over lanes `p..len` being generated, when they are false.
    past_iv: Option<IntValue<'ctx>>,
}

impl PrefixSplit<'_> {
    /// The masks true on lanes `0..p`.
    pub(super) fn masks(&self) -> impl Iterator<Item = Value> + '_ {
        self.same.iter().copied()
    }

    /// Whether `m` is one of the masks true on lanes `0..p`.
    pub(super) fn covers(&self, m: Value) -> bool {
        self.same.contains(&m)
    }

    /// This split with lanes below `p` of `runs` taken as runs (each [`exact_below_p`]).
    ///
    /// [`exact_below_p`]: Self::exact_below_p
    pub(super) fn with_runs(&self, runs: Vec<Value>) -> Self {
        PrefixSplit {
            runs,
            ..self.clone()
        }
    }

    /// Whether the run `r`'s only narrow offsets are the split's index, sign-extended: its
    /// lanes below `p` are exact (`i32::MIN <= c <= i + c < n`), so lane `i < p` of `r` is
    /// lane 0 plus `i` elements without the run-time check `run_holds` makes for all lanes.
    pub(super) fn exact_below_p(&self, r: &Direct) -> bool {
        let span = Some(self.len as i64 - 1);
        r.widened
            .iter()
            .all(|w| w.value == self.index && w.signed && w.span == span)
    }
}

impl<'ctx> Gen<'ctx, '_> {
    /// The split for the masked copy of a loop versioned on `m`, when `m` is an index mask
    /// (`same` computes the same lanes).
    pub(super) fn prefix_split(
        &mut self,
        m: Value,
        same: &[Value],
    ) -> Result<Option<PrefixSplit<'ctx>>> {
        let shape = self.ty(m).shape.clone();
        let [len] = shape[..] else {
            return Ok(None);
        };
        let Some((p, index, c)) = self.true_prefix(m, len)? else {
            return Ok(None);
        };
        let false_past_p = c
            .get_sign_extended_constant()
            .is_some_and(|c| c >= i64::from(i32::MIN) && c + len as i64 - 1 <= i64::from(i32::MAX));
        Ok(Some(PrefixSplit {
            len,
            p,
            same: same.iter().copied().collect(),
            index,
            runs: Vec::new(),
            iv: None,
            false_past_p,
            past_iv: None,
        }))
    }

    /// True when lane `idx` of `v` is known true: `v` is a split mask read at the index of
    /// the loop over its true prefix.
    pub(super) fn in_true_prefix(&self, v: Value, idx: &[IntValue<'ctx>]) -> bool {
        self.prefix
            .as_ref()
            .is_some_and(|s| s.iv.is_some_and(|iv| idx == [iv]) && s.same.contains(&v))
    }

    /// True when lane `idx` of `v` is known false: `v` is a split mask read at the index of
    /// the loop over the lanes past its true prefix, which are false (`false_past_p`).
    pub(super) fn in_false_past_prefix(&self, v: Value, idx: &[IntValue<'ctx>]) -> bool {
        self.prefix
            .as_ref()
            .is_some_and(|s| s.past_iv.is_some_and(|iv| idx == [iv]) && s.same.contains(&v))
    }

    /// True when lane `idx` of the pointer tile `v` is a lane of a run: `v` is one of the
    /// split's `runs` read at the index of the loop over its true prefix.
    pub(super) fn in_prefix_run(&self, v: Value, idx: &[IntValue<'ctx>]) -> bool {
        self.prefix
            .as_ref()
            .is_some_and(|s| s.iv.is_some_and(|iv| idx == [iv]) && s.runs.contains(&v))
    }

    /// The split of the masked copy being generated, for a rank-1 loop of `len` lanes
    /// (none inside the loop over its prefix).
    pub(super) fn split_for(&self, len: usize) -> Option<PrefixSplit<'ctx>> {
        self.prefix
            .clone()
            .filter(|s| s.len == len && s.iv.is_none())
    }

    /// `body` generated with the masks of `split` known true at lane index `i` (`i < p`).
    pub(super) fn in_prefix_at<T>(
        &mut self,
        split: &PrefixSplit<'ctx>,
        i: IntValue<'ctx>,
        body: impl FnOnce(&mut Self) -> T,
    ) -> T {
        let at = PrefixSplit {
            iv: Some(i),
            ..split.clone()
        };
        self.with_split(at, body)
    }

    /// `body` generated with the masks of `split` known false at lane index `i` (`i >= p`,
    /// `split.false_past_p`).
    fn past_prefix_at<T>(
        &mut self,
        split: &PrefixSplit<'ctx>,
        i: IntValue<'ctx>,
        body: impl FnOnce(&mut Self) -> T,
    ) -> T {
        let at = PrefixSplit {
            past_iv: Some(i),
            ..split.clone()
        };
        self.with_split(at, body)
    }

    /// `body` generated with `split` as the current split, the outer one restored after.
    fn with_split<T>(&mut self, split: PrefixSplit<'ctx>, body: impl FnOnce(&mut Self) -> T) -> T {
        let outer = self.prefix.replace(split);
        let r = body(self);
        self.prefix = outer;
        r
    }

    /// A rank-1 loop of `len` lanes as two loops, over the true prefix and the rest, when
    /// the masked copy being generated has a split of that length. `false` when there is
    /// none: the caller emits the plain loop.
    pub(super) fn split_lane_loop(
        &mut self,
        len: usize,
        body: &mut dyn FnMut(&mut Self, &[IntValue<'ctx>]) -> Result<()>,
    ) -> Result<bool> {
        let Some(split) = self.split_for(len) else {
            return Ok(false);
        };
        let zero = self.i64c(0);
        self.range_loop(
            "prefix.loop",
            zero,
            split.p,
            LoopUnroll::Free,
            &mut |g, i| g.in_prefix_at(&split, i, |g| body(g, &[i])),
        )?;
        // The lanes past the prefix (masked off unless the index wraps) do no work worth
        // more than one vector per iteration of code; where they cannot wrap, the mask is
        // known false there (a masked store vanishes, a masked load is its `other`).
        let end = self.i64c(len as u64);
        self.range_loop(
            "prefix.past",
            split.p,
            end,
            LoopUnroll::SingleCopy,
            &mut |g, i| {
                if split.false_past_p {
                    g.past_prefix_at(&split, i, |g| body(g, &[i]))
                } else {
                    body(g, &[i])
                }
            },
        )?;
        Ok(true)
    }

    /// A loop `i = lo..hi` (i64, none when `lo >= hi`) marked `unroll`, its blocks named
    /// `name` (dumps show which loop is which).
    pub(super) fn range_loop(
        &mut self,
        name: &str,
        lo: IntValue<'ctx>,
        hi: IntValue<'ctx>,
        unroll: LoopUnroll,
        body: &mut dyn FnMut(&mut Self, IntValue<'ctx>) -> Result<()>,
    ) -> Result<()> {
        let pre = self.b.current_block()?;
        let header = self.ctx.append_basic_block(self.func, name);
        let exit = self
            .ctx
            .append_basic_block(self.func, &format!("{name}.end"));
        let any = self.b.build_int_compare(IntPredicate::SLT, lo, hi, "")?;
        self.b.build_conditional_branch(any, header, exit)?;
        self.b.position_at_end(header);
        let phi = self.b.build_phi(self.ctx.i64_type(), "lane")?;
        phi.add_incoming(&[(&lo, pre)]);
        let i = phi.as_basic_value().into_int_value();
        body(self, i)?;
        let latch = self.b.current_block()?;
        let next = self.b.build_int_add(i, self.i64c(1), "")?;
        phi.add_incoming(&[(&next, latch)]);
        let more = self.b.build_int_compare(IntPredicate::SLT, next, hi, "")?;
        let back = self.b.build_conditional_branch(more, header, exit)?;
        self.loop_hint(back, unroll);
        self.b.position_at_end(exit);
        Ok(())
    }

    /// `p` (i64 in `0..=len`) such that lane `i` of the bool tile `m` is true for `i < p`
    /// and false otherwise (unless `i + c` wraps), when `m` compares `arange + c` with a
    /// uniform `n` in i32; with that `arange + c` and `c` (i64, exact).
    #[allow(clippy::type_complexity)]
    pub(super) fn true_prefix(
        &mut self,
        m: Value,
        len: usize,
    ) -> Result<Option<(IntValue<'ctx>, Value, IntValue<'ctx>)>> {
        let Some(Op::Cmp(pred, a, b)) = self.lazy_op(m).cloned() else {
            return Ok(None);
        };
        if self.dtype_of(a) != DType::I32 || self.dtype_of(b) != DType::I32 {
            return Ok(None);
        }
        // `i + c < n` or `<=` (also written `n > i + c`, `n >= i + c`).
        let (index, bound, inclusive) = match pred {
            CmpPred::Lt => (a, b, false),
            CmpPred::Le => (a, b, true),
            CmpPred::Gt => (b, a, false),
            CmpPred::Ge => (b, a, true),
            CmpPred::Eq | CmpPred::Ne => return Ok(None),
        };
        let Some(c) = self.index_offset(index)? else {
            return Ok(None);
        };
        let Some(n) = self.uniform_i64(bound)? else {
            return Ok(None);
        };
        let bl = self.b;
        let mut p = bl.build_int_sub(n, c, "")?;
        if inclusive {
            p = bl.build_int_add(p, self.i64c(1), "")?;
        }
        let p = self.clamp_lanes(p, self.i64c(len as u64))?;
        let i64t = self.ctx.i64_type();
        // Below i32::MIN the exact offset says nothing about the wrapped lanes: no prefix.
        let min = i64t.const_int(i32::MIN as i64 as u64, true);
        let fits = bl.build_int_compare(IntPredicate::SGE, c, min, "")?;
        let p = bl.build_select(fits, p, self.i64c(0), "")?.into_int_value();
        Ok(Some((p, index, c)))
    }

    /// `c` (i64, exact) when lane `i` of the rank-1 i32 tile `v` is `i + c` modulo 2^32 (an
    /// arange plus uniform values, through reshapes, broadcasts and `* 1` of its shape), or
    /// lane `i` along the one long axis of a tile of higher rank (an arange's `expand_dims`).
    fn index_offset(&mut self, v: Value) -> Result<Option<IntValue<'ctx>>> {
        if long_axis_len(&self.ty(v).shape).is_none() || self.dtype_of(v) != DType::I32 {
            return Ok(None);
        }
        Ok(match self.lazy_op(v).cloned() {
            Some(Op::Arange { start, .. }) => Some(self.i64c(start as u64)),
            Some(Op::Hint { x, .. }) => self.index_offset(x)?,
            // `x[:, None]`: lane `(i, 0)` is lane `i` of `x`.
            Some(Op::ExpandDims { x, .. })
                if long_axis_len(&self.ty(x).shape) == long_axis_len(&self.ty(v).shape) =>
            {
                self.index_offset(x)?
            }
            // The same lanes: a reshape or broadcast of a tile of the same shape, a reshape
            // between tiles with one long axis of the same length, `x * 1`.
            Some(Op::Reshape(x) | Op::Broadcast(x)) if self.ty(x).shape == self.ty(v).shape => {
                self.index_offset(x)?
            }
            Some(Op::Reshape(x))
                if long_axis_len(&self.ty(x).shape) == long_axis_len(&self.ty(v).shape) =>
            {
                self.index_offset(x)?
            }
            Some(Op::Binary(BinOp::Mul, x, y)) if self.is_one(y) => self.index_offset(x)?,
            Some(Op::Binary(BinOp::Mul, x, y)) if self.is_one(x) => self.index_offset(y)?,
            Some(Op::Binary(BinOp::Add, x, y)) => {
                let (lane, uniform) = match self.index_offset(x)? {
                    Some(c) => (c, y),
                    None => match self.index_offset(y)? {
                        Some(c) => (c, x),
                        None => return Ok(None),
                    },
                };
                match self.uniform_i64(uniform)? {
                    Some(s) => Some(self.b.build_int_add(lane, s, "")?),
                    None => None,
                }
            }
            _ => None,
        })
    }

    /// The value of every lane of the i32 tile or scalar `v`, sign-extended to i64, when
    /// they are all one (a scalar, a splat of one, a constant).
    fn uniform_i64(&mut self, v: Value) -> Result<Option<IntValue<'ctx>>> {
        if self.dtype_of(v) != DType::I32 {
            return Ok(None);
        }
        let i64t = self.ctx.i64_type();
        let scalar = if self.ty(v).is_scalar() {
            self.scalar_of(v).map(|s| s.into_int_value())
        } else {
            match self.lazy_op(v).cloned() {
                Some(Op::Splat(x)) if self.ty(x).is_scalar() => {
                    self.scalar_of(x).map(|s| s.into_int_value())
                }
                Some(Op::Const(Const::Int(c))) => {
                    return Ok(Some(i64t.const_int(c as i32 as i64 as u64, true)));
                }
                _ => None,
            }
        };
        Ok(match scalar {
            Some(s) => Some(self.b.build_int_s_extend(s, i64t, "")?),
            None => None,
        })
    }

    /// True when every lane of `v` is the integer 1 (a constant, or a splat of one).
    fn is_one(&self, v: Value) -> bool {
        match self.defs.get(&v).map(|i| &i.op) {
            Some(Op::Const(Const::Int(1))) => true,
            Some(Op::Splat(x)) => self.is_one(*x),
            _ => false,
        }
    }
}
