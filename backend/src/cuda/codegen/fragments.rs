//! Values held in `mma` fragments (`held.rs` decides which): where each register lies,
//! conversions to and from slots, and the ops that stay in the layout — elementwise ops,
//! reductions along the rows (a fold of the lane's registers, then two shuffles across
//! its quad) and broadcasts of rows back to fragments.
//!
//! Accumulator fragments follow the PTX ISA's `m16n8k16` layout: lane `l` holds, of each
//! `16 × 8` tile, rows `l / 4` and `l / 4 + 8`, columns `2 (l % 4)` and `+ 1` (register `i`:
//! row `+ 8 (i / 2)`, column `+ i % 2`).

use super::held::{FragLayout, Held};
use super::{Gen, V};
use crate::llvm::{CodegenError, Emitter, Fp8Inputs, Result};
use inkwell::types::BasicTypeEnum;
use inkwell::values::{BasicValueEnum, IntValue};
use tritium_dsl::ir::{DType, Inst, Op, ReduceOp, Type, Value};

/// How the `16 × 8` output tiles of a tensor-core `dot` are dealt to the warps.
#[derive(Clone, Copy)]
pub(super) enum MmaTiling {
    /// A `wm × wn` grid of warps, each owning `mi × ni` tiles (`rows` says which rows):
    /// per k step a warp loads `mi` A and `ni` B fragments for its `mi · ni` `mma`s.
    Grid {
        wn: usize,
        mi: usize,
        ni: usize,
        rows: WarpRows,
    },
    /// Round-robin when no grid divides the tiles: tile `w + r · warps` in round `r`
    /// (clamped and discarded past the last tile), its own fragments each.
    Spread { rounds: usize },
}

/// Which rows of `16 × 8` tiles warp row `wy` of a `wm × wn` grid owns.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum WarpRows {
    /// `wy · mi + i`: a block of consecutive tile rows.
    Blocked,
    /// `wy + wm · i` (with `wn = 1`): warps `4g..4g + 4` own 64 consecutive rows, as a
    /// warpgroup's `wgmma` writes them (`wgmma.rs`).
    Interleaved,
}

/// Where one lane's accumulator fragment of one round lies (see [`Gen::frag_site`]).
pub(super) struct FragSite<'ctx> {
    /// Whether the warp has a tile this round.
    pub valid: IntValue<'ctx>,
    /// The tile's row of `16 × 8` tiles (its first row is `16 tm`).
    pub tm: IntValue<'ctx>,
    /// The tile's column of tiles (its first column is `8 tn`).
    pub tn: IntValue<'ctx>,
    /// The row and column of the lane's registers 0 and 1 (2 and 3 are 8 rows below).
    pub row0: IntValue<'ctx>,
    pub col0: IntValue<'ctx>,
    /// Row-major indices of the lane's 4 accumulator registers.
    pub index: [IntValue<'ctx>; 4],
}

/// Where an elementwise op over held values finds each operand's register.
enum Source<'ctx> {
    /// A register per position.
    Regs(Vec<BasicValueEnum<'ctx>>),
    /// One value everywhere.
    One(BasicValueEnum<'ctx>),
    /// An index expression, evaluated at each position's coordinates.
    Index(Value),
}

impl<'ctx> Gen<'ctx, '_> {
    /// How the held layout of `v` was decided (`held.rs`); slots when it was not.
    pub(super) fn held(&self, v: Value) -> Held {
        self.held.get(&v).copied().unwrap_or(Held::Slots)
    }

    /// How the `16 × 8` tiles of an accumulator are dealt to the warps (see
    /// [`MmaTiling`]).
    pub(super) fn mma_tiling(&self, l: FragLayout) -> MmaTiling {
        let warps = self.threads / 32;
        let (tiles_m, tiles_n) = (l.m / 16, l.n / 8);
        if l.by_rows || self.warpgroup_rows(l.m) {
            return MmaTiling::Grid {
                wn: 1,
                mi: tiles_m / warps,
                ni: tiles_n,
                rows: match self.warpgroup_rows(l.m) {
                    true => WarpRows::Interleaved,
                    false => WarpRows::Blocked,
                },
            };
        }
        // Warp grids `wm × wn` whose blocks divide the tiles evenly; the fewest fragment
        // loads per `mma` (4 per A fragment row, 2 per B fragment column) wins.
        let grid = (0..=warps.ilog2())
            .map(|e| (1usize << e, warps >> e))
            .filter(|&(wm, wn)| tiles_m % wm == 0 && tiles_n % wn == 0)
            .min_by_key(|&(wm, wn)| {
                let (mi, ni) = (tiles_m / wm, tiles_n / wn);
                (4 * mi + 2 * ni) * 1000 / (mi * ni)
            });
        match grid {
            Some((wm, wn)) => MmaTiling::Grid {
                wn,
                mi: tiles_m / wm,
                ni: tiles_n / wn,
                rows: WarpRows::Blocked,
            },
            None => MmaTiling::Spread {
                rounds: (tiles_m * tiles_n).div_ceil(warps),
            },
        }
    }

    /// Whether the accumulators of `m` rows are dealt to warpgroups as `wgmma` writes
    /// them ([`WarpRows::Interleaved`]): on Hopper, with whole warpgroups each owning
    /// the same number of 16-row tiles. Only `m` decides, so that rows reduced from such
    /// fragments (`Held::Rows`) lie alike.
    pub(super) fn warpgroup_rows(&self, m: usize) -> bool {
        let warps = self.threads / 32;
        self.wgmma && warps.is_multiple_of(4) && self.rows_fit(m)
    }

    /// The tile row of the `i`-th row band of the warp at grid row `wy` of a `wm`-row grid
    /// whose warps own `mi` bands each.
    fn band_row(
        &self,
        rows: WarpRows,
        wy: IntValue<'ctx>,
        wm: usize,
        mi: usize,
        i: usize,
    ) -> Result<IntValue<'ctx>> {
        let (b, c) = (self.b, |v: usize| self.i32c(v as u64));
        Ok(match rows {
            WarpRows::Blocked => b.build_int_add(b.build_int_mul(wy, c(mi), "")?, c(i), "")?,
            WarpRows::Interleaved => b.build_int_add(wy, c(wm * i), "")?,
        })
    }

    /// How many rounds of `16 × 8` tiles each warp holds.
    pub(super) fn mma_rounds(&self, l: FragLayout) -> usize {
        match self.mma_tiling(l) {
            MmaTiling::Grid { mi, ni, .. } => mi * ni,
            MmaTiling::Spread { rounds } => rounds,
        }
    }

    /// Registers per thread of a value held as `h`.
    pub(super) fn held_count(&self, h: Held, ty: &Type) -> usize {
        match h {
            Held::Slots if ty.is_scalar() => 1,
            Held::Slots => self.slots(ty.numel()),
            Held::Frag(l) => self.mma_rounds(l) * 4,
            Held::Rows { m } => 2 * m / 16 / (self.threads / 32),
        }
    }

    /// Where this lane's fragment of `round` lies: whether the warp has a tile this
    /// round (else it works on tile 0 and discards it), the tile, the lane's first row
    /// and column in it, and the row-major indices of its 4 registers.
    pub(super) fn frag_site(&self, l: FragLayout, round: usize) -> Result<FragSite<'ctx>> {
        let (lane, warp) = self.lane_and_warp()?;
        let b = self.b;
        let c = |v: u64| self.i32c(v);
        let add = |x: IntValue<'ctx>, y: IntValue<'ctx>| b.build_int_add(x, y, "");
        let mul = |x: IntValue<'ctx>, y: u64| b.build_int_mul(x, c(y), "");
        let group = b.build_right_shift(lane, c(2), false, "group")?;
        let quad = b.build_and(lane, c(3), "quad")?;
        let (tiles_n, tiles) = (l.n / 8, (l.m / 16) * (l.n / 8));
        let (valid, tm, tn) = match self.mma_tiling(l) {
            MmaTiling::Grid { wn, mi, ni, rows } => {
                // Warp (wy, wx) of the grid owns the tile rows `band_row` gives and
                // columns wx·ni..; round r is its tile (band r / ni, column r % ni).
                let wy = b.build_int_unsigned_div(warp, c(wn as u64), "")?;
                let wx = b.build_int_unsigned_rem(warp, c(wn as u64), "")?;
                let wm = self.threads / 32 / wn;
                let tm = self.band_row(rows, wy, wm, mi, round / ni)?;
                let tn = add(mul(wx, ni as u64)?, c((round % ni) as u64))?;
                (self.ctx.bool_type().const_all_ones(), tm, tn)
            }
            MmaTiling::Spread { .. } => {
                let tile = add(warp, c((round * (self.threads / 32)) as u64))?;
                let (valid, tile) = self.below_or_zero(tile, tiles)?;
                let tm = b.build_int_unsigned_div(tile, c(tiles_n as u64), "")?;
                let tn = b.build_int_unsigned_rem(tile, c(tiles_n as u64), "")?;
                (valid, tm, tn)
            }
        };
        let row0 = add(mul(tm, 16)?, group)?;
        let col0 = add(mul(tn, 8)?, mul(quad, 2)?)?;
        let mut index = [row0; 4];
        for (i, at) in (0u64..).zip(index.iter_mut()) {
            let row = add(row0, c(8 * (i / 2)))?;
            *at = add(mul(row, l.n as u64)?, add(col0, c(i % 2))?)?;
        }
        Ok(FragSite {
            valid,
            tm,
            tn,
            row0,
            col0,
            index,
        })
    }

    /// For each register of a value held as `h` (not slots): its row and column, whether
    /// it holds an element this lane writes back (fragments of a warp without a tile this
    /// round, and all lanes of a quad but the first for rows, do not), and its row-major
    /// index in the tile.
    pub(super) fn held_sites(&self, h: Held) -> Result<Vec<HeldSite<'ctx>>> {
        let b = self.b;
        match h {
            Held::Slots => Err(CodegenError::internal("slots have no fragment sites")),
            Held::Frag(l) => {
                let mut sites = Vec::new();
                for round in 0..self.mma_rounds(l) {
                    let s = self.frag_site(l, round)?;
                    for i in 0..4u64 {
                        sites.push(HeldSite {
                            row: b.build_int_add(s.row0, self.i32c(8 * (i / 2)), "")?,
                            col: b.build_int_add(s.col0, self.i32c(i % 2), "")?,
                            writes: s.valid,
                            index: s.index[i as usize],
                        });
                    }
                }
                Ok(sites)
            }
            Held::Rows { m } => {
                let (lane, warp) = self.lane_and_warp()?;
                let group = b.build_right_shift(lane, self.i32c(2), false, "")?;
                let quad = b.build_and(lane, self.i32c(3), "")?;
                let first =
                    b.build_int_compare(inkwell::IntPredicate::EQ, quad, self.i32c(0), "")?;
                let warps = self.threads / 32;
                let mi = m / 16 / warps;
                let rows = match self.warpgroup_rows(m) {
                    true => WarpRows::Interleaved,
                    false => WarpRows::Blocked,
                };
                (0..2 * mi)
                    .map(|q| {
                        let tm = self.band_row(rows, warp, warps, mi, q / 2)?;
                        let top = b.build_int_mul(tm, self.i32c(16), "")?;
                        let base = b.build_int_add(top, group, "")?;
                        let row = b.build_int_add(base, self.i32c(8 * (q as u64 % 2)), "")?;
                        Ok(HeldSite {
                            row,
                            col: self.i32c(0),
                            writes: first,
                            index: row,
                        })
                    })
                    .collect()
            }
        }
    }

    /// The registers of `v` held as `h`: as held, one value repeated, an index
    /// expression evaluated at each register's place, or from slots through shared memory
    /// (from byte 0).
    pub(super) fn held_regs(&mut self, v: Value, h: Held) -> Result<Vec<BasicValueEnum<'ctx>>> {
        let ty = self.ty(v).clone();
        let count = self.held_count(h, &ty);
        match (self.raw_val(v)?, h) {
            (V::Frag(l, regs), Held::Frag(want)) if l == want => return Ok(regs),
            (V::Rows(m, regs), Held::Rows { m: want }) if m == want => return Ok(regs),
            (V::Scalar(s), _) => return Ok(vec![s; count]),
            _ => {}
        }
        if h == Held::Slots {
            return self.tile_slots(v, ty.numel());
        }
        match self.source(v)? {
            Source::One(x) => return Ok(vec![x; count]),
            Source::Index(x) => {
                let sites = self.held_sites(h)?;
                return (sites.iter())
                    .map(|s| self.index_at(x, s))
                    .collect::<Result<_>>();
            }
            Source::Regs(_) => {}
        }
        self.spill_to_shared(v, 0)?;
        self.barrier()?;
        let sites = self.held_sites(h)?;
        let regs = (sites.iter())
            .map(|s| {
                let p = self.shared_elem(0, ty.elem, s.index)?;
                self.shared_load(p, ty.elem)
            })
            .collect::<Result<_>>()?;
        self.barrier()?;
        Ok(regs)
    }

    /// The slots of `v`, held as `h` in `regs`, through shared memory (from byte 0).
    pub(super) fn held_to_slots(
        &mut self,
        v: Value,
        h: Held,
        regs: &[BasicValueEnum<'ctx>],
    ) -> Result<Vec<BasicValueEnum<'ctx>>> {
        let ty = self.ty(v).clone();
        let numel = ty.numel();
        self.reserve_scratch(numel * self.shared_size(ty.elem));
        let sites = self.held_sites(h)?;
        for (s, x) in sites.iter().zip(regs) {
            self.when(Some(s.writes), &mut |g| {
                let p = g.shared_elem(0, ty.elem, s.index)?;
                g.shared_store(p, *x, ty.elem)
            })?;
        }
        self.barrier()?;
        let slots = (0..self.slots(numel))
            .map(|j| {
                let lin = self.clamped_lin(numel, j)?;
                let p = self.shared_elem(0, ty.elem, lin)?;
                self.shared_load(p, ty.elem)
            })
            .collect::<Result<_>>()?;
        self.barrier()?;
        Ok(slots)
    }

    /// Whether every lane of `v` holds one value by its definition (a constant or a splat
    /// of a scalar), the same in every thread.
    pub(super) fn is_uniform_tile(&self, v: Value) -> bool {
        matches!(
            self.defs.get(&v).map(|i| &i.op),
            Some(Op::Const(_) | Op::Splat(_))
        )
    }

    /// Where an op over held values finds operand `v`'s elements, other than in its own
    /// registers: a scalar or a splat (a constant), or an index expression. (Slots of one
    /// thread that all hold one value are not enough: a column broadcast may give each
    /// thread a single value of its own, and a fragment register lies in another column
    /// than the slot; seed 3631150.)
    fn source(&mut self, v: Value) -> Result<Source<'ctx>> {
        Ok(match self.raw_val(v)? {
            V::Scalar(s) => Source::One(s),
            V::Tile(t) if self.is_uniform_tile(v) && t.iter().all(|x| *x == t[0]) => {
                Source::One(t[0])
            }
            V::Tile(_) if self.is_index_value(v) => Source::Index(v),
            V::Tile(t) | V::Frag(_, t) | V::Rows(_, t) => Source::Regs(t),
        })
    }

    /// Index expression `x` at a held register's place (dims of size 1 at 0).
    pub(super) fn index_at(
        &mut self,
        x: Value,
        s: &HeldSite<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        let shape = self.ty(x).shape.clone();
        let at: Vec<IntValue<'ctx>> = match shape.len() {
            1 => vec![s.row],
            _ => vec![s.row, if shape[1] == 1 { self.i32c(0) } else { s.col }],
        };
        self.eval_at(x, &at)
    }

    /// Generates `inst`, whose result `held.rs` holds as `h` (fragments or rows).
    pub(super) fn held_op(&mut self, inst: &Inst, h: Held) -> Result<()> {
        let r = inst.results[0];
        let regs = match (&inst.op, h) {
            (Op::Reduce { op, x, .. }, Held::Rows { .. }) => {
                let Held::Frag(l) = self.held(*x) else {
                    return Err(CodegenError::internal("a row reduction of slots"));
                };
                self.reduce_rows(*op, *x, l)?
            }
            (Op::ExpandDims { x, .. } | Op::Reshape(x), _) => self.held_regs(*x, h)?,
            (Op::Broadcast(x), Held::Frag(l)) => {
                let m = l.m;
                let rows = self.held_regs(*x, Held::Rows { m })?;
                let MmaTiling::Grid { ni, .. } = self.mma_tiling(l) else {
                    return Err(CodegenError::internal("rows broadcast to a spread layout"));
                };
                (0..self.mma_rounds(l) * 4)
                    .map(|p| rows[(p / 4 / ni) * 2 + (p % 4) / 2])
                    .collect()
            }
            _ => self.held_elementwise(inst, h)?,
        };
        self.vals.insert(
            r,
            match h {
                Held::Frag(l) => V::Frag(l, regs),
                Held::Rows { m } => V::Rows(m, regs),
                Held::Slots => unreachable!("held_op is for held results"),
            },
        );
        Ok(())
    }

    /// An elementwise op register by register.
    fn held_elementwise(&mut self, inst: &Inst, h: Held) -> Result<Vec<BasicValueEnum<'ctx>>> {
        let count = self.held_count(h, self.ty(inst.results[0]));
        let sources: Vec<Source<'ctx>> = (inst.op.operands().iter())
            .map(|o| match self.raw_val(*o)? {
                V::Frag(..) | V::Rows(..) => Ok(Source::Regs(self.held_regs(*o, h)?)),
                _ => match self.source(*o)? {
                    Source::Regs(_) => Ok(Source::Regs(self.held_regs(*o, h)?)),
                    s => Ok(s),
                },
            })
            .collect::<Result<_>>()?;
        let sites = match sources.iter().any(|s| matches!(s, Source::Index(_))) {
            true => self.held_sites(h)?,
            false => Vec::new(),
        };
        (0..count)
            .map(|p| {
                let args: Vec<BasicValueEnum<'ctx>> = (sources.iter())
                    .map(|s| match s {
                        Source::Regs(r) => Ok(r[p]),
                        Source::One(x) => Ok(*x),
                        Source::Index(x) => self.index_at(*x, &sites[p]),
                    })
                    .collect::<Result<_>>()?;
                self.element(inst, &args)
            })
            .collect()
    }

    /// A reduction along the rows of by-rows fragments: each lane folds its registers of a
    /// row in column order, then its quad (the four lanes holding the row) combines by
    /// `shfl.sync.bfly`, so every lane holds its rows' results.
    fn reduce_rows(
        &mut self,
        op: ReduceOp,
        x: Value,
        l: FragLayout,
    ) -> Result<Vec<BasicValueEnum<'ctx>>> {
        let d = self.ty(x).dtype().expect("reductions take numbers");
        let regs = self.held_regs(x, Held::Frag(l))?;
        let MmaTiling::Grid { mi, ni, .. } = self.mma_tiling(l) else {
            return Err(CodegenError::internal("a row reduction of a spread layout"));
        };
        let arg = matches!(op, ReduceOp::ArgMax | ReduceOp::ArgMin);
        let sites = match arg {
            true => self.held_sites(Held::Frag(l))?,
            false => Vec::new(),
        };
        // A float max or min folds from the row's first register: from the identity (NaN,
        // which PTX's max/min ignore, as LLVM's maxnum/minnum do) it is the same value and
        // one instruction more per row (Triton's tree has none).
        let from_first = d.is_float() && matches!(op, ReduceOp::Max | ReduceOp::Min);
        let mut out = Vec::with_capacity(2 * mi);
        for q in 0..2 * mi {
            let at = |tn: usize, e: usize| ((q / 2) * ni + tn) * 4 + (q % 2) * 2 + e;
            let mut acc = match from_first {
                true => (regs[at(0, 0)], None),
                false => self.identity(op, d),
            };
            for tn in 0..ni {
                for e in 0..2 {
                    let p = at(tn, e);
                    if from_first && p == at(0, 0) {
                        continue;
                    }
                    let idx = arg.then(|| sites[p].col);
                    acc = self.combine(op, d, acc, (regs[p], idx))?;
                }
            }
            acc = self.butterfly(op, d, acc, 4)?;
            out.push(self.finish(op, d, acc)?);
        }
        Ok(out)
    }
}

/// Where one register of a held value lies (see [`Gen::held_sites`]).
pub(super) struct HeldSite<'ctx> {
    pub row: IntValue<'ctx>,
    pub col: IntValue<'ctx>,
    pub writes: IntValue<'ctx>,
    pub index: IntValue<'ctx>,
}

impl<'ctx> Gen<'ctx, '_> {
    /// Whether tensor-core `dot`'s `a` is held as by-rows fragments of the rows of the
    /// `dot`'s own by-rows accumulator: then they are its A fragments (16-bit only: an fp8
    /// `a` goes to shared memory).
    pub(super) fn a_fragments_in_registers(&self, dot: &Inst) -> bool {
        let Op::Dot { a, .. } = &dot.op else {
            return false;
        };
        match (self.held(*a), self.held(dot.results[0])) {
            (Held::Frag(la), Held::Frag(l)) => la.by_rows && l.by_rows && la.m == l.m,
            _ => false,
        }
    }

    /// The A fragments of a tensor-core `dot` (accumulator layout `l`) straight from the
    /// registers of `a`, where `a` is held as by-rows fragments of the same rows (`p` in
    /// attention): an `m16n8k16` A fragment of k step `s` is the accumulator fragments of
    /// columns `16 s..16 s + 16`, each pair of registers packed into one word
    /// (FlashAttention's trick; no trip through shared memory). Indexed by the warp's tile
    /// row, then the k step; `None` where `a` is held otherwise.
    pub(super) fn a_fragments_held(
        &self,
        dot: &Inst,
        from: tritium_dsl::ir::DType,
    ) -> Result<Option<Vec<Vec<Vec<IntValue<'ctx>>>>>> {
        let Op::Dot { a, .. } = &dot.op else {
            return Ok(None);
        };
        let Some(V::Frag(la, regs)) = self.vals.get(a) else {
            return Ok(None);
        };
        if !self.a_fragments_in_registers(dot) {
            return Ok(None);
        }
        let MmaTiling::Grid { mi, ni, .. } = self.mma_tiling(*la) else {
            return Ok(None);
        };
        // `p.to(f16)`: the f32 registers before the cast, rounded once by the packing
        // conversion (the cast's own rounding, with its NaN bits, is then dead code).
        let regs = match self.defs.get(a).map(|i| &i.op) {
            Some(Op::Cast(src)) if from == DType::F16 || from.fp8_format().is_some() => {
                match (self.ty(*src).dtype(), self.vals.get(src)) {
                    (Some(tritium_dsl::ir::DType::F32), Some(V::Frag(ls, r))) if ls == la => r,
                    _ => regs,
                }
            }
            _ => regs,
        };
        if let Some(f) = from.fp8_format() {
            return self.fp8_a_words(regs, mi, ni, la.n / 32, f).map(Some);
        }
        let half = tritium_dsl::ir::Elem::Scalar(from);
        let i32t = self.ctx.i32_type();
        // f16 pairs are packed by one conversion (`cvt.rn.f16x2.f32`); a NaN's payload is
        // not kept, as no `mma` result depends on it. bf16 goes through its storage form.
        let pack = |lo: BasicValueEnum<'ctx>, hi: BasicValueEnum<'ctx>| -> Result<IntValue<'ctx>> {
            if from == tritium_dsl::ir::DType::F16 {
                let f32x2 = self.ctx.f32_type().vec_type(2);
                let mut v = f32x2.get_undef();
                for (i, x) in [lo, hi].into_iter().enumerate() {
                    let at = self.i32c(i as u64);
                    v = self
                        .b
                        .build_insert_element(v, x.into_float_value(), at, "")?;
                }
                let f16x2 = self.ctx.f16_type().vec_type(2);
                let h = self.b.build_float_trunc(v, f16x2, "")?;
                return Ok(self.b.build_bit_cast(h, i32t, "")?.into_int_value());
            }
            let bits = |v| -> Result<IntValue<'ctx>> {
                let h = self.to_storage(v, half)?.into_int_value();
                Ok(self.b.build_int_z_extend(h, i32t, "")?)
            };
            let hi = self.b.build_left_shift(bits(hi)?, self.i32c(16), "")?;
            Ok(self.b.build_or(bits(lo)?, hi, "")?)
        };
        (0..mi)
            .map(|i| {
                (0..la.n / 16)
                    .map(|s| {
                        let (r0, r1) = (4 * (i * ni + 2 * s), 4 * (i * ni + 2 * s + 1));
                        [(r0, 0), (r0, 2), (r1, 0), (r1, 2)]
                            .into_iter()
                            .map(|(r, e)| pack(regs[r + e], regs[r + e + 1]))
                            .collect()
                    })
                    .collect()
            })
            .collect::<Result<_>>()
            .map(Some)
    }
}

impl<'ctx> Gen<'ctx, '_> {
    /// The `wgmma` A fragments (`k32`, fp8) of accumulator registers `regs` (`mi` row
    /// tiles of `ni` `16 × 8` tiles): band `i`, k step `s`, this lane's 4 words, each 4
    /// bytes along k (word `w`: row `l / 4 + 8 (w % 2)`, columns `32 s + 16 (w / 2) + 4 (l %
    /// 4)..`). The accumulator gives lane `4g + u` columns `2u, 2u + 1` of each `16 × 8`
    /// tile, so each word gathers two lanes' pairs: each lane packs, per 16 columns, one
    /// word of each tile (its rows `g` and `g + 8`), and two shuffles bring every lane the
    /// words it needs (`2 (t % 2) + t / 2`, then `2 (t % 2) + 1 − t / 2`: each a permutation
    /// of the quad, so that a lane sends the tile its reader needs), which two byte
    /// permutations order (Triton's conversion: 1 shuffle per word, no shared memory).
    fn fp8_a_words(
        &self,
        regs: &[BasicValueEnum<'ctx>],
        mi: usize,
        ni: usize,
        steps: usize,
        f: tritium_dsl::ir::fp8::Fp8Format,
    ) -> Result<Vec<Vec<Vec<IntValue<'ctx>>>>> {
        let (b, c) = (self.b, |v: u64| self.i32c(v));
        let i32t = self.ctx.i32_type();
        let (lane, _) = self.lane_and_warp()?;
        let quad = b.build_and(lane, c(!3u32 as u64), "")?;
        let t = b.build_and(lane, c(3), "")?;
        let (t_lo, t_hi) = (
            b.build_and(t, c(1), "")?,
            b.build_right_shift(t, c(1), false, "")?,
        );
        let odd = b.build_int_compare(inkwell::IntPredicate::EQ, t_lo, c(1), "")?;
        let upper = b.build_int_compare(inkwell::IntPredicate::EQ, t_hi, c(1), "")?;
        let from_a = b.build_int_add(b.build_left_shift(t_lo, c(1), "")?, t_hi, "")?;
        let from_b = b.build_int_sub(b.build_left_shift(t_lo, c(1), "")?, t_hi, "")?;
        let from_b = b.build_int_add(from_b, c(1), "")?;
        let src_a = b.build_or(quad, from_a, "")?;
        let src_b = b.build_or(quad, from_b, "")?;
        let e = self.emit();
        // Each tile's word: rows g (bytes 0, 1) and g + 8 (bytes 2, 3) of the lane's
        // columns (its first register here), by band, step, half and tile.
        let tiles: Vec<usize> = (0..mi)
            .flat_map(|i| (0..4 * steps).map(move |j| 4 * (i * ni + j)))
            .collect();
        let inputs = match e.fp8_fixes_infinities(f) {
            // Infinities are fixed up after (see `fp8_infinities_kept`).
            true => Fp8Inputs::NoInfinity,
            false => Fp8Inputs::Any,
        };
        let mut packed = Vec::with_capacity(tiles.len());
        for &r in &tiles {
            let f32s = |k: usize| regs[r + k].into_float_value();
            let lo = e.fp8_pair_for_products(f32s(0), f32s(1), f, inputs)?;
            let hi = e.fp8_pair_for_products(f32s(2), f32s(3), f, inputs)?;
            // `mov.b32 {lo, hi}`, which ptxas folds into the second conversion (F2FP's
            // MERGE_C form), where a shift and an OR took a PRMT.
            let pair = self.ctx.i16_type().vec_type(2).get_undef();
            let pair = b.build_insert_element(pair, lo, c(0), "")?;
            let pair = b.build_insert_element(pair, hi, c(1), "")?;
            packed.push(b.build_bit_cast(pair, i32t, "")?.into_int_value());
        }
        if inputs == Fp8Inputs::NoInfinity {
            packed = self.fp8_infinities_kept(regs, &tiles, packed, f)?;
        }
        let word = |i: usize, s: usize, h: usize, p: usize| packed[(i * steps + s) * 4 + 2 * h + p];
        let select = |p, x: IntValue<'ctx>, y: IntValue<'ctx>| -> Result<IntValue<'ctx>> {
            Ok(b.build_select(p, x, y, "")?.into_int_value())
        };
        // Columns 4t, 4t + 1 come from lane 2 (t % 2), the next two from the lane after it:
        // the first shuffle's below t = 2, the second's from it. Rows g (bytes 0, 1 of the
        // words) and g + 8 (bytes 2, 3) by one byte permutation each, its selector the lane's.
        let sel_g = select(upper, c(0x1054), c(0x5410))?;
        let sel_g8 = select(upper, c(0x3276), c(0x7632))?;
        (0..mi)
            .map(|i| {
                (0..steps)
                    .map(|s| {
                        let mut words = [c(0); 4];
                        for h in 0..2 {
                            let (w0, w1) = (word(i, s, h, 0), word(i, s, h, 1));
                            // Lane u's reader in the first shuffle needs tile u % 2, in the
                            // second the other.
                            let first = self.shuffle_from(select(odd, w1, w0)?, src_a)?;
                            let second = self.shuffle_from(select(odd, w0, w1)?, src_b)?;
                            words[2 * h] = self.byte_permute(first, second, sel_g)?;
                            words[2 * h + 1] = self.byte_permute(first, second, sel_g8)?;
                        }
                        Ok(words.to_vec())
                    })
                    .collect()
            })
            .collect()
    }

    /// E5M2 `words` (packed by the conversion instruction, which saturates infinities;
    /// word `w` holds registers `tiles[w]..+4`, one per byte) with each ±inf's byte made
    /// the infinity again, on a branch taken only where a byte of the words may be one: the
    /// conversion gives ±inf (and finite overflow) the largest finite byte, `0x7b` below the
    /// sign, and NaN `0x7f`, so that an infinity leaves a byte whose low 7 bits are at least
    /// `0x7b` in the words' OR (its bits a superset), which one add shows in the byte's top
    /// bit. The OR costs a 3-input LOP3 per two words, where a max of the f32 values cost
    /// one instruction per value; it may take the branch without an infinity (bytes whose
    /// bits together reach `0x7b`), never miss one, and attention's `p` in [0, 1] (bytes up
    /// to `0x3c`) never takes it. A NaN needs nothing, as any NaN byte multiplies to NaN.
    fn fp8_infinities_kept(
        &self,
        regs: &[BasicValueEnum<'ctx>],
        tiles: &[usize],
        words: Vec<IntValue<'ctx>>,
        f: tritium_dsl::ir::fp8::Fp8Format,
    ) -> Result<Vec<IntValue<'ctx>>> {
        let (b, i32t) = (self.b, self.ctx.i32_type());
        let e = self.emit();
        let c = |v: u64| self.i32c(v);
        let mut any = words[0];
        for w in &words[1..] {
            any = b.build_or(any, *w, "")?;
        }
        let low7 = b.build_and(any, c(0x7f7f_7f7f), "")?;
        // No carry crosses a byte: 0x7f + 5 < 0x100.
        let top = b.build_int_add(low7, c(0x0505_0505), "")?;
        let top = b.build_and(top, c(0x8080_8080), "")?;
        let infinite = b.build_int_compare(inkwell::IntPredicate::NE, top, c(0), "infinite")?;
        let entry = b.get_insert_block().expect("in a block");
        let (fix, join) = (
            self.ctx.append_basic_block(self.func, "fp8.inf"),
            self.ctx.append_basic_block(self.func, "fp8.packed"),
        );
        let branch = b.build_conditional_branch(infinite, fix, join)?;
        // Told rare, LLVM keeps the usual path's registers as they were (180 against 193
        // at attention's D = 64; ptxas places the fix-up inside the loop either way).
        let weights = self.ctx.metadata_node(&[
            self.ctx.metadata_string("branch_weights").into(),
            c(1).into(),
            c(1 << 20).into(),
        ]);
        branch
            .set_metadata(weights, self.ctx.get_kind_id("prof"))
            .expect("a branch takes !prof");
        b.position_at_end(fix);
        let mut fixed = Vec::with_capacity(words.len());
        for (&w, &t) in words.iter().zip(tiles) {
            let mut w = w;
            for (at, r) in (0..).step_by(8).zip(&regs[t..t + 4]) {
                w = e.fp8_keep_infinity(w, at, r.into_float_value(), f)?;
            }
            fixed.push(w);
        }
        let fix_end = b.get_insert_block().expect("in a block");
        b.build_unconditional_branch(join)?;
        b.position_at_end(join);
        words
            .iter()
            .zip(&fixed)
            .map(|(plain, fixed)| {
                let phi = b.build_phi(i32t, "")?;
                phi.add_incoming(&[(plain, entry), (fixed, fix_end)]);
                Ok(phi.as_basic_value().into_int_value())
            })
            .collect()
    }

    /// Whether every pair of lanes `2c, 2c + 1` along `last` of store pointer `ptr`, of
    /// 32-bit elements, is known (`dsl::ir::axis_info`, given the launch's
    /// specialization) to be two consecutive elements aligned to their pair's size, under
    /// one mask value.
    fn pairs_proven(&self, ptr: Value, mask: Option<Value>, last: usize) -> bool {
        let Some(p) = self.axis.get(&ptr) else {
            return false;
        };
        // Only elements stored as they are held (f32): a pair of f16 conversions, whose
        // NaN-preserving form is a dozen instructions, made LLVM hoist them out of the
        // guarded stores, and ptxas spilled 84-88 bytes in tutorial 03's largest configs.
        // (16-bit results take `epilogue.rs`'s 16-byte stores where proven.)
        let d = self.ty(ptr).elem.pointee();
        if !matches!(d, Some(DType::F32 | DType::I32 | DType::U32)) {
            return false;
        }
        let size = d.map_or(0, DType::size_bytes) as u64;
        let pairs = self.ty(ptr).shape.get(last).is_some_and(|n| n % 2 == 0)
            && p.contiguity.get(last).is_some_and(|c| *c >= 2)
            && p.divisibility.get(last).is_some_and(|d| *d >= 2 * size);
        let uniform = mask.is_none_or(|m| {
            self.ty(m).is_scalar()
                || (self.axis.get(&m))
                    .is_some_and(|i| i.constancy.get(last).is_some_and(|c| *c >= 2))
        });
        size > 0 && pairs && uniform
    }

    /// A vector of `xs` (values of one type).
    fn vector_of(&self, xs: &[BasicValueEnum<'ctx>]) -> Result<BasicValueEnum<'ctx>> {
        let n = xs.len() as u32;
        let undef: inkwell::values::VectorValue<'ctx> = match xs[0].get_type() {
            BasicTypeEnum::IntType(t) => t.vec_type(n).get_undef(),
            BasicTypeEnum::FloatType(t) => t.vec_type(n).get_undef(),
            t => return Err(CodegenError::internal(format!("no vector of {t:?}"))),
        };
        let mut v = undef;
        for (i, x) in xs.iter().enumerate() {
            v = self
                .b
                .build_insert_element(v, *x, self.i32c(i as u64), "")?;
        }
        Ok(v.into())
    }

    /// A store of a value held in fragments whose pointers and mask are index
    /// expressions: each register is stored where it lies, its address and mask evaluated
    /// at its coordinates (the matmul and attention epilogues), instead of the value going
    /// to slots through shared memory. Not in checked mode (its checks read slots). False
    /// (nothing emitted) where it does not apply.
    pub(super) fn store_held(&mut self, inst: &Inst) -> Result<bool> {
        let Op::Store {
            ptr,
            value,
            mask,
            hints,
        } = &inst.op
        else {
            return Ok(false);
        };
        let Some(V::Frag(l, regs)) = self.vals.get(value).cloned() else {
            return Ok(false);
        };
        let indexed = |g: &Self, v: Value| !g.ty(v).is_scalar() && g.is_index_value(v);
        if self.checks(inst) || !indexed(self, *ptr) || !mask.is_none_or(|m| indexed(self, m)) {
            return Ok(false);
        }
        let d = self.ty(*ptr).elem.pointee().expect("stores need pointers");
        let elem = tritium_dsl::ir::Elem::Scalar(d);
        let ordered = !self.lone_stores.contains(&(inst as *const Inst as usize));
        let staged = self.staged_epilogue_applies(*ptr, *mask, l);
        // Staged through shared memory, it waits for every warp to be done with what it
        // overwrites (a warpgroup's last `wgmma` reading its operands included).
        if ordered || staged {
            self.barrier()?;
        }
        if staged {
            self.staged_epilogue((*ptr, *value, *mask, *hints), l, &regs, d)?;
            return Ok(true);
        }
        let sites = self.held_sites(Held::Frag(l))?;
        // Registers 2k and 2k + 1 of a fragment lie in one row, in columns 2c and 2c + 1:
        // one vector store of both where each such pair is proven one aligned run under
        // one mask value.
        let last = self.ty(*ptr).rank().saturating_sub(1);
        let group = if self.pairs_proven(*ptr, *mask, last) {
            2
        } else {
            1
        };
        for (site, xs) in sites.iter().step_by(group).zip(regs.chunks(group)) {
            let p = self.index_at(*ptr, site)?.into_pointer_value();
            let mut cond = site.writes;
            if let Some(m) = mask {
                let m = self.index_at(*m, site)?.into_int_value();
                cond = self.b.build_and(cond, m, "")?;
            }
            let hints = *hints;
            let align = (group > 1).then_some((group * d.size_bytes()) as u32);
            self.when(Some(cond), &mut |g| {
                let stored: Vec<BasicValueEnum<'ctx>> = (xs.iter())
                    .map(|x| g.to_storage(*x, elem))
                    .collect::<Result<_>>()?;
                let v = match stored.as_slice() {
                    [one] => *one,
                    _ => g.vector_of(&stored)?,
                };
                g.global_store(p, v, hints, align)
            })?;
        }
        if ordered {
            self.barrier()?;
        }
        Ok(true)
    }
}
