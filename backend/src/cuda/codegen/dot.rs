//! `dot(a, b, acc)`.
//!
//! f16/bf16 inputs with an f32 accumulator, `M % 16 == 0`, `N % 8 == 0`, `K % 16 == 0`:
//! tensor cores. `a` and `b` (16-bit) go to shared memory row-major in the swizzled
//! layout (`swizzle.rs`), stored a thread's chunk at a time. The `16 × 8` output tiles are
//! dealt to a grid of warps, each owning a block of them, so that per `K / 16` step a warp
//! loads each A fragment (a row of tiles; one `ldmatrix.x4`) and B fragment (a column; an
//! `ldmatrix.x4.trans` for two) once for all its `mma.sync.aligned.m16n8k16.row.col`
//! (round-robin, one tile at a time, when no grid divides the tiles); fragments follow
//! the PTX ISA's `m16n8k16` layouts, which are `ldmatrix`'s.
//! The result stays in the accumulator-fragment layout (`V::Frag`): the next `dot` takes
//! it as it is, and a `for` loop carries it in registers (see `control`); any other use
//! converts it to the blocked layout through shared memory (as an accumulator in slots is
//! converted to fragments). Every warp runs the same number of `mma`s (a warp without a
//! tile left computes a clamped one and discards it), so control flow stays uniform.
//!
//! Otherwise (the fallback): `a` and `b`, converted to the accumulator's dtype as a cast
//! would, go to shared memory; each accumulator slot runs its own `k` loop of `fmuladd`s
//! in k order (integers: wrapping multiply-add). f16/bf16 accumulators add in f32 and
//! round once at the end, as the interpreter does.

use super::ldmatrix::Ldmatrix;
use super::reduce::Acc;
use super::swizzle::{Swizzled, CHUNK_BYTES};
use super::{Gen, V};
use crate::llvm::{CodegenError, Result};
use inkwell::types::BasicTypeEnum;
use inkwell::values::{BasicValueEnum, IntValue, PointerValue};
use tritium_dsl::ir::{BinOp, DType, Elem, Inst, Op, Value};

/// The most k steps (of 16) of a tensor-core `dot` emitted unrolled.
const UNROLLED_K_STEPS: usize = 8;

/// How the `16 × 8` output tiles of a tensor-core `dot` are dealt to the warps.
#[derive(Clone, Copy)]
enum MmaTiling {
    /// A `wm × wn` grid of warps, each owning a block of `mi × ni` tiles: per k step a
    /// warp loads `mi` A and `ni` B fragments for its `mi · ni` `mma`s.
    Grid { wn: usize, mi: usize, ni: usize },
    /// Round-robin when no grid divides the tiles: tile `w + r · warps` in round `r`
    /// (clamped and discarded past the last tile), its own fragments each.
    Spread { rounds: usize },
}

/// Where one lane's accumulator fragment of one round lies (see [`Gen::frag_site`]).
struct FragSite<'ctx> {
    /// Whether the warp has a tile this round.
    valid: IntValue<'ctx>,
    /// The tile's row of `16 × 8` tiles (its first row is `16 tm`).
    tm: IntValue<'ctx>,
    /// The tile's column of tiles (its first column is `8 tn`).
    tn: IntValue<'ctx>,
    /// Row-major indices of the lane's 4 accumulator registers.
    index: [IntValue<'ctx>; 4],
}

/// One `ldmatrix` of a k step's B fragments: n-tile `tn`, and `tn + 1` when `pair`.
struct BLoad<'ctx> {
    tn: IntValue<'ctx>,
    pair: bool,
}

impl<'ctx> Gen<'ctx, '_> {
    pub(super) fn dot(&mut self, inst: &Inst) -> Result<()> {
        let Op::Dot { a, b, acc } = &inst.op else {
            unreachable!()
        };
        let (at, bt) = (self.ty(*a).clone(), self.ty(*b).clone());
        let r = inst.results[0];
        let d = self.ty(r).dtype().expect("dot gives numbers");
        if d.is_bool() {
            return Err(CodegenError::unsupported(
                "dot with a bool accumulator is not supported on CUDA",
            ));
        }
        if let Some((from, mnk)) = self.mma_shape(inst) {
            return self.mma_dot(inst, from, mnk);
        }
        let from = at.dtype().expect("dot takes numbers");
        let (m, k, n) = (at.shape[0], at.shape[1], bt.shape[1]);
        let elem = Elem::Scalar(d);
        let size = self.shared_size(elem);
        let b_offset = (m * k * size).div_ceil(16) * 16;
        self.reserve_shared(b_offset + k * n * size);
        for (x, offset, numel) in [(*a, 0, m * k), (*b, b_offset, k * n)] {
            let slots = self.tile_slots(x, numel)?;
            for (j, s) in slots.into_iter().enumerate() {
                let ok = self.valid(numel, j)?;
                let v = self.cast(s, from, d)?;
                self.when(ok, &mut |g| {
                    let lin = g.lin(numel, j)?;
                    let p = g.shared_elem(offset, elem, lin)?;
                    g.shared_store(p, v, elem)
                })?;
            }
        }
        self.barrier()?;
        let numel = m * n;
        let init = self.tile_slots(*acc, numel)?;
        let rows_cols: Vec<(IntValue<'ctx>, IntValue<'ctx>)> = (0..init.len())
            .map(|j| {
                let lin = self.clamped_lin(numel, j)?;
                let idx = self.unravel(&[m, n], lin)?;
                let row = self.b.build_int_mul(idx[0], self.i32c(k as u64), "")?;
                Ok((row, idx[1]))
            })
            .collect::<Result<_>>()?;
        let init = init.into_iter().map(|v| (v, None)).collect();
        let accs = self.counted_loop(k, init, &mut |g, kk, accs| {
            let b_row = g.b.build_int_mul(kk, g.i32c(n as u64), "")?;
            accs.iter()
                .zip(&rows_cols)
                .map(|((acc, _), (row, col))| {
                    let ai = g.b.build_int_add(*row, kk, "")?;
                    let bi = g.b.build_int_add(b_row, *col, "")?;
                    let pa = g.shared_elem(0, elem, ai)?;
                    let pb = g.shared_elem(b_offset, elem, bi)?;
                    let (x, y) = (g.shared_load(pa, elem)?, g.shared_load(pb, elem)?);
                    Ok((g.multiply_add(d, x, y, *acc)?, None))
                })
                .collect()
        })?;
        self.barrier()?;
        let out = accs
            .into_iter()
            .map(|(v, _)| self.round_to(v, d))
            .collect::<Result<_>>()?;
        self.define(r, out);
        Ok(())
    }

    /// `x * y + acc` without intermediate rounding of halves.
    fn multiply_add(
        &mut self,
        d: DType,
        x: BasicValueEnum<'ctx>,
        y: BasicValueEnum<'ctx>,
        acc: BasicValueEnum<'ctx>,
    ) -> Result<BasicValueEnum<'ctx>> {
        if d.is_float() {
            let t = self.compute_ty(d);
            return self.intrinsic("llvm.fmuladd", &[t], &[x, y, acc]);
        }
        let p = self.binary(BinOp::Mul, d, x, y)?;
        self.binary(BinOp::Add, d, p, acc)
    }

    /// The input dtype and `[m, n, k]` of a `dot` that runs on tensor cores.
    pub(super) fn mma_shape(&self, inst: &Inst) -> Option<(DType, [usize; 3])> {
        let Op::Dot { a, b, .. } = &inst.op else {
            return None;
        };
        let (at, bt) = (self.ty(*a), self.ty(*b));
        let from = at.dtype()?;
        let d = self.ty(inst.results[0]).dtype()?;
        let (m, k, n) = (at.shape[0], at.shape[1], bt.shape[1]);
        (matches!(from, DType::F16 | DType::BF16)
            && d == DType::F32
            && m % 16 == 0
            && n % 8 == 0
            && k % 16 == 0)
            .then_some((from, [m, n, k]))
    }

    /// How the `16 × 8` tiles of an `m × n` accumulator are dealt to the warps (see
    /// [`MmaTiling`]).
    fn mma_tiling(&self, m: usize, n: usize) -> MmaTiling {
        let warps = self.threads / 32;
        let (tiles_m, tiles_n) = (m / 16, n / 8);
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
            },
            None => MmaTiling::Spread {
                rounds: (tiles_m * tiles_n).div_ceil(warps),
            },
        }
    }

    /// How many rounds of `16 × 8` tiles each warp holds of an `m × n` accumulator.
    pub(super) fn mma_rounds(&self, m: usize, n: usize) -> usize {
        match self.mma_tiling(m, n) {
            MmaTiling::Grid { mi, ni, .. } => mi * ni,
            MmaTiling::Spread { rounds } => rounds,
        }
    }

    /// Where this lane's fragment of `round` lies in an `m × n` accumulator: whether the
    /// warp has a tile this round (else it works on tile 0 and discards it), the tile's
    /// first row and column of this lane, and the row-major indices of its 4 registers
    /// (register i: row group + 8 (i / 2), column 2 quad + i % 2).
    fn frag_site(&self, m: usize, n: usize, round: usize) -> Result<FragSite<'ctx>> {
        let (lane, warp) = self.lane_and_warp()?;
        let b = self.b;
        let c = |v: u64| self.i32c(v);
        let add = |x: IntValue<'ctx>, y: IntValue<'ctx>| b.build_int_add(x, y, "");
        let mul = |x: IntValue<'ctx>, y: u64| b.build_int_mul(x, c(y), "");
        let group = b.build_right_shift(lane, c(2), false, "group")?;
        let quad = b.build_and(lane, c(3), "quad")?;
        let (tiles_n, tiles) = (n / 8, (m / 16) * (n / 8));
        let (valid, tm, tn) = match self.mma_tiling(m, n) {
            MmaTiling::Grid { wn, mi, ni } => {
                // Warp (wy, wx) of the grid owns tile rows wy·mi.. and columns wx·ni..;
                // round r is its tile (r / ni, r % ni).
                let wy = b.build_int_unsigned_div(warp, c(wn as u64), "")?;
                let wx = b.build_int_unsigned_rem(warp, c(wn as u64), "")?;
                let tm = add(mul(wy, mi as u64)?, c((round / ni) as u64))?;
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
            *at = add(mul(row, n as u64)?, add(col0, c(i % 2))?)?;
        }
        Ok(FragSite {
            valid,
            tm,
            tn,
            index,
        })
    }

    /// Accumulator fragments to this thread's slots of the `m × n` tile, through shared
    /// memory (from byte 0).
    pub(super) fn frags_to_slots(
        &mut self,
        regs: &[BasicValueEnum<'ctx>],
        m: usize,
        n: usize,
    ) -> Result<Vec<BasicValueEnum<'ctx>>> {
        let f32t = self.ctx.f32_type();
        self.reserve_shared(m * n * 4);
        for (round, four) in regs.chunks(4).enumerate() {
            let site = self.frag_site(m, n, round)?;
            self.when(Some(site.valid), &mut |g| {
                for (ix, v) in site.index.iter().zip(four) {
                    let p = g.shared_typed(0, f32t.into(), *ix)?;
                    g.b.build_store(p, *v)?;
                }
                Ok(())
            })?;
        }
        self.barrier()?;
        let slots = (0..self.slots(m * n))
            .map(|j| {
                let lin = self.clamped_lin(m * n, j)?;
                let p = self.shared_typed(0, f32t.into(), lin)?;
                Ok(self.b.build_load(f32t, p, "")?)
            })
            .collect::<Result<_>>()?;
        self.barrier()?;
        Ok(slots)
    }

    /// `v` (an f32 `m × n` tile) as accumulator fragments: as held, splat from a scalar,
    /// or from slots through shared memory (from byte 0).
    pub(super) fn frag_regs(
        &mut self,
        v: Value,
        m: usize,
        n: usize,
    ) -> Result<Vec<BasicValueEnum<'ctx>>> {
        let rounds = self.mma_rounds(m, n);
        let slots = match self.raw_val(v)? {
            V::Frag(regs) => return Ok(regs),
            V::Scalar(s) => return Ok(vec![s; rounds * 4]),
            // A splat (`zeros`, a constant): no exchange needed. Slots of one thread that
            // hold one value are not enough: a column broadcast (`arange` along the
            // columns) may give each thread a single value of its own, and a register of
            // the fragment lies in another column than the slot (seed 3631150).
            V::Tile(t) if self.is_uniform_tile(v) && t.iter().all(|x| *x == t[0]) => {
                return Ok(vec![t[0]; rounds * 4])
            }
            V::Tile(_) => self.tile_slots(v, m * n)?,
        };
        let f32t = self.ctx.f32_type();
        self.reserve_shared(m * n * 4);
        for (j, s) in slots.into_iter().enumerate() {
            let ok = self.valid(m * n, j)?;
            self.when(ok, &mut |g| {
                let lin = g.lin(m * n, j)?;
                let p = g.shared_typed(0, f32t.into(), lin)?;
                g.b.build_store(p, s)?;
                Ok(())
            })?;
        }
        self.barrier()?;
        let mut regs = Vec::with_capacity(rounds * 4);
        for round in 0..rounds {
            let site = self.frag_site(m, n, round)?;
            for ix in site.index {
                let p = self.shared_typed(0, f32t.into(), ix)?;
                regs.push(self.b.build_load(f32t, p, "")?);
            }
        }
        self.barrier()?;
        Ok(regs)
    }

    /// Whether every lane of `v` holds one value by its definition (a constant or a splat
    /// of a scalar), the same in every thread.
    fn is_uniform_tile(&self, v: Value) -> bool {
        matches!(
            self.defs.get(&v).map(|i| &i.op),
            Some(Op::Const(_) | Op::Splat(_))
        )
    }

    /// The tensor-core path (see the module docs).
    fn mma_dot(&mut self, inst: &Inst, from: DType, [m, n, k]: [usize; 3]) -> Result<()> {
        let Op::Dot { a, b, acc } = &inst.op else {
            unreachable!()
        };
        let r = inst.results[0];
        let init = self.frag_regs(*acc, m, n)?;
        // In a pipelined loop (`pipeline.rs`) the tiles of this iteration are in flight
        // already: wait for them, then issue a later iteration's into the buffer the last
        // one read; elsewhere the operands are copied or staged now.
        let pipelined = (self.pipelined.as_ref())
            .filter(|p| std::ptr::eq(p.dot, inst))
            .map(|p| {
                let ahead = p.ahead.expect("the loop sets the iteration ahead");
                let stage = p.stage.expect("and the stage");
                (p.tiles, p.stage_bytes, p.stages, stage, ahead)
            });
        let (a_tile, b_tile, b_columns) = match pipelined {
            Some((tiles, ..)) => tiles,
            None => self.operand_tiles(inst, self.deferred.contains(b)),
        };
        let stage_base = match pipelined {
            Some((_, stage_bytes, stages, stage, (iv, runs))) => {
                self.reserve_shared(stages * stage_bytes);
                self.wait_copies(stages as u32 - 2)?;
                self.barrier()?;
                let later = self
                    .b
                    .build_int_add(stage, self.i32c(stages as u64 - 1), "")?;
                let later = (self.b).build_int_unsigned_rem(later, self.i32c(stages as u64), "")?;
                self.issue_stage(iv, runs, later)?;
                self.b
                    .build_int_mul(stage, self.i32c(stage_bytes as u64), "")?
            }
            None => {
                self.reserve_shared(b_tile.offset + b_tile.bytes());
                let mut copies = false;
                for (x, tile) in [(*a, a_tile), (*b, b_tile)] {
                    if self.deferred.contains(&x) {
                        let columns = x == *b && b_columns;
                        self.copy_operand(x, tile, columns, self.i32c(0))?;
                        copies = true;
                    } else {
                        self.stage_operand(x, from, tile)?;
                    }
                }
                if copies {
                    self.wait_async_copies()?;
                }
                self.barrier()?;
                self.i32c(0)
            }
        };
        let c = |g: &Self, v: u64| g.i32c(v);
        let add = |g: &Self, x: IntValue<'ctx>, y: IntValue<'ctx>| g.b.build_int_add(x, y, "");
        let mul = |g: &Self, x: IntValue<'ctx>, y: u64| g.b.build_int_mul(x, g.i32c(y), "");
        // Which A fragment (a row of tiles) and B fragment (a column) each round uses:
        // on a warp grid, rounds share them and each is loaded once per k step.
        let rounds = init.len() / 4;
        let tiling = self.mma_tiling(m, n);
        let (a_of, b_of): (Vec<usize>, Vec<usize>) = match tiling {
            MmaTiling::Grid { ni, .. } => (0..rounds).map(|r| (r / ni, r % ni)).unzip(),
            MmaTiling::Spread { .. } => (0..rounds).map(|r| (r, r)).unzip(),
        };
        let sites: Vec<FragSite<'ctx>> = (0..rounds)
            .map(|r| self.frag_site(m, n, r))
            .collect::<Result<_>>()?;
        let first_round = |keys: &[usize], key: usize| {
            keys.iter()
                .position(|k| *k == key)
                .expect("every key has a first round")
        };
        // Lane `l` gives the address of row `l % 8` of matrix `j = l / 8`: of the A
        // fragment's `16 × 16`, rows `8 (j % 2)..` and columns `8 (j / 2)..`; of a B
        // pair's `16 × 16`, k rows `8 (j % 2)..` and n-tile `j / 2`.
        let (lane, _) = self.lane_and_warp()?;
        let j = self.b.build_right_shift(lane, c(self, 3), false, "")?;
        let j_hi = self.b.build_right_shift(j, c(self, 1), false, "")?;
        let j_lo = self.b.build_and(j, c(self, 1), "")?;
        let in_block = add(
            self,
            self.b.build_and(lane, c(self, 7), "")?,
            mul(self, j_lo, 8)?,
        )?;
        // A: chunk `2 step + j / 2` of row `16 tm + in_block`, whose phase does not
        // depend on the step: `(2 step + j / 2) ^ phase = 2 step ^ (j / 2 ^ phase)`.
        let a_frags = a_of.iter().copied().max().map_or(0, |x| x + 1);
        let a_rows: Vec<(IntValue<'ctx>, IntValue<'ctx>)> = (0..a_frags)
            .map(|i| {
                let row = add(
                    self,
                    mul(self, sites[first_round(&a_of, i)].tm, 16)?,
                    in_block,
                )?;
                let phase = self.swizzle_phase(&a_tile, row)?;
                let base = add(
                    self,
                    add(self, c(self, a_tile.offset as u64), stage_base)?,
                    mul(self, row, a_tile.row_bytes() as u64)?,
                )?;
                Ok((base, self.b.build_xor(j_hi, phase, "")?))
            })
            .collect::<Result<_>>()?;
        // B: k row `16 step + in_block` (the same phase at every step, as 16 is a whole
        // number of phases), chunk `tn` (+ `j / 2` for a pair).
        let b_frags = b_of.iter().copied().max().map_or(0, |x| x + 1);
        let b_tn = |i: usize| sites[first_round(&b_of, i)].tn;
        let b_loads: Vec<BLoad<'ctx>> = match tiling {
            MmaTiling::Grid { .. } => (0..b_frags)
                .step_by(2)
                .map(|i| BLoad {
                    tn: b_tn(i),
                    pair: i + 1 < b_frags,
                })
                .collect(),
            MmaTiling::Spread { .. } => (0..b_frags)
                .map(|i| BLoad {
                    tn: b_tn(i),
                    pair: false,
                })
                .collect(),
        };
        let b_phase = self.swizzle_phase(&b_tile, in_block)?;
        let b_base = add(self, c(self, b_tile.offset as u64), stage_base)?;
        let b_row = add(
            self,
            b_base,
            mul(self, in_block, b_tile.row_bytes() as u64)?,
        )?;
        // Stored by columns (`n × k`), a pair's matrix `j` is n-tile `tn + j / 2`, chunk
        // `2 step + j % 2`: lane rows `8 (tn + j / 2) + l % 8`, as `a`'s with the bits of `j`
        // swapped.
        let b_bases: Vec<(IntValue<'ctx>, IntValue<'ctx>)> = b_loads
            .iter()
            .map(|l| {
                if b_columns {
                    let tile = if l.pair { add(self, l.tn, j_hi)? } else { l.tn };
                    let lane_row = self.b.build_and(lane, c(self, 7), "")?;
                    let row = add(self, mul(self, tile, 8)?, lane_row)?;
                    let phase = self.swizzle_phase(&b_tile, row)?;
                    let base = add(self, b_base, mul(self, row, b_tile.row_bytes() as u64)?)?;
                    return Ok((base, self.b.build_xor(j_lo, phase, "")?));
                }
                let chunk = if l.pair { add(self, l.tn, j_hi)? } else { l.tn };
                let phys = self.b.build_xor(chunk, b_phase, "")?;
                Ok((
                    add(self, b_row, mul(self, phys, CHUNK_BYTES as u64)?)?,
                    c(self, 0),
                ))
            })
            .collect::<Result<_>>()?;
        let accs: Vec<Acc<'ctx>> = init.iter().map(|v| (*v, None)).collect();
        let d = self.k_steps(k / 16, accs, &mut |g, step, accs| {
            let step2 = mul(g, step, 2)?;
            let a_frags: Vec<Vec<IntValue<'ctx>>> = a_rows
                .iter()
                .map(|(base, q)| {
                    let phys = g.b.build_xor(step2, *q, "")?;
                    let at = add(g, *base, mul(g, phys, CHUNK_BYTES as u64)?)?;
                    g.ldmatrix(
                        Ldmatrix {
                            matrices: 4,
                            trans: false,
                        },
                        at,
                    )
                })
                .collect::<Result<_>>()?;
            let b_step = mul(g, step, 16 * b_tile.row_bytes() as u64)?;
            let mut b_frags: Vec<Vec<IntValue<'ctx>>> = Vec::with_capacity(b_frags);
            for (load, (base, q)) in b_loads.iter().zip(&b_bases) {
                let matrices = if load.pair { 4 } else { 2 };
                let at = match b_columns {
                    true => {
                        let phys = g.b.build_xor(step2, *q, "")?;
                        add(g, *base, mul(g, phys, CHUNK_BYTES as u64)?)?
                    }
                    false => add(g, *base, b_step)?,
                };
                let trans = !b_columns;
                let words = g.ldmatrix(Ldmatrix { matrices, trans }, at)?;
                b_frags.extend(words.chunks(2).map(<[_]>::to_vec));
            }
            let mut next = Vec::with_capacity(accs.len());
            for (r, four) in accs.chunks(4).enumerate() {
                let cs: Vec<BasicValueEnum<'ctx>> = four.iter().map(|(v, _)| *v).collect();
                let out = g.mma(from, &a_frags[a_of[r]], &b_frags[b_of[r]], &cs)?;
                next.extend(out.into_iter().map(|v| (v, None)));
            }
            Ok(next)
        })?;
        let out: Vec<BasicValueEnum<'ctx>> = d.into_iter().map(|(v, _)| v).collect();
        // Every warp is done reading `a` and `b` before shared memory is reused.
        self.barrier()?;
        self.vals.insert(r, V::Frag(out));
        Ok(())
    }

    /// The `steps` k steps of a tensor-core `dot`, unrolled up to [`UNROLLED_K_STEPS`]
    /// (each step's fragment addresses are then constants, and the next step's fragment
    /// reads may be scheduled under this step's `mma`s, as Triton's are), else a loop.
    fn k_steps(
        &mut self,
        steps: usize,
        init: Vec<Acc<'ctx>>,
        body: &mut super::reduce::FoldStep<'_, 'ctx, Self>,
    ) -> Result<Vec<Acc<'ctx>>> {
        if steps > UNROLLED_K_STEPS {
            return self.counted_loop(steps, init, body);
        }
        let mut accs = init;
        for step in 0..steps {
            accs = body(self, self.i32c(step as u64), &accs)?;
        }
        Ok(accs)
    }

    /// The shared-memory layouts of a tensor-core `dot`'s operands: `a` (`m × k`) and `b`
    /// (`k × n`) row-major in the swizzled layout (the staging stores are whole chunks,
    /// and every 8×8 matrix an `ldmatrix` reads is one wavefront; `b` is read transposed by
    /// `ldmatrix.trans`), or, for a `b` copied (`b_copied`) by columns, `b` stored
    /// transposed (`n × k`) and read without `.trans`; and whether it is.
    pub(super) fn operand_tiles(&self, dot: &Inst, b_copied: bool) -> (Swizzled, Swizzled, bool) {
        let Op::Dot { a, b, .. } = &dot.op else {
            unreachable!("a dot")
        };
        let (m, k, n) = (
            self.ty(*a).shape[0],
            self.ty(*a).shape[1],
            self.ty(*b).shape[1],
        );
        let b_columns = b_copied && self.copies_columns(*b);
        let a_tile = Swizzled::new(0, m, k);
        let b_tile = match b_columns {
            true => Swizzled::new(a_tile.bytes(), n, k),
            false => Swizzled::new(a_tile.bytes(), k, n),
        };
        (a_tile, b_tile, b_columns)
    }

    /// Stores this thread's slots of the 16-bit `dot` operand `x` into `tile`: a chunk of
    /// consecutive slots lies in one 16-byte chunk of a row (rows are whole chunks), so
    /// it is one vector store.
    fn stage_operand(&mut self, x: Value, from: DType, tile: Swizzled) -> Result<()> {
        let i16t = self.ctx.i16_type();
        let numel = tile.rows * tile.cols;
        let slots = self.tile_slots(x, numel)?;
        let half = Elem::Scalar(from);
        let bits: Vec<_> = slots
            .iter()
            .map(|v| self.to_storage(*v, half))
            .collect::<Result<_>>()?;
        let address = |g: &Self, lin: IntValue<'ctx>| -> Result<PointerValue<'ctx>> {
            let cols = g.i32c(tile.cols as u64);
            let row = g.b.build_int_unsigned_div(lin, cols, "")?;
            let col = g.b.build_int_unsigned_rem(lin, cols, "")?;
            let byte = g.swizzled_element(&tile, row, col)?;
            // SAFETY (of the generated code): the tile lies in reserved shared memory.
            Ok(unsafe { g.b.build_gep(g.ctx.i8_type(), g.smem, &[byte], "sm") }?)
        };
        let chunk = self.chunk(numel);
        if chunk > 1 && self.valid(numel, 0)?.is_none() {
            let vt = i16t.vec_type(chunk as u32);
            for (j0, run) in bits.chunks(chunk).enumerate() {
                let mut v = vt.get_undef();
                for (e, x) in run.iter().enumerate() {
                    v = self
                        .b
                        .build_insert_element(v, *x, self.i32c(e as u64), "")?;
                }
                let p = address(self, self.lin(numel, j0 * chunk)?)?;
                let st = self.b.build_store(p, v)?;
                st.set_alignment((chunk * 2) as u32)?;
            }
            return Ok(());
        }
        for (j, x) in bits.into_iter().enumerate() {
            let ok = self.valid(numel, j)?;
            self.when(ok, &mut |g| {
                let p = address(g, g.lin(numel, j)?)?;
                g.b.build_store(p, x)?;
                Ok(())
            })?;
        }
        Ok(())
    }

    /// The phase of `row` in `tile`: its chunks are XOR-ed with it (see `swizzle.rs`).
    fn swizzle_phase(&self, tile: &Swizzled, row: IntValue<'ctx>) -> Result<IntValue<'ctx>> {
        let (per_phase, phases) = tile.phases();
        let shifted = self.b.build_right_shift(
            row,
            self.i32c(u64::from(per_phase.trailing_zeros())),
            false,
            "",
        )?;
        Ok(self
            .b
            .build_and(shifted, self.i32c(phases as u64 - 1), "phase")?)
    }

    /// The byte offset in shared memory of element `(row, col)` of `tile`.
    pub(super) fn swizzled_element(
        &self,
        tile: &Swizzled,
        row: IntValue<'ctx>,
        col: IntValue<'ctx>,
    ) -> Result<IntValue<'ctx>> {
        let b = self.b;
        let c = |v: usize| self.i32c(v as u64);
        let chunk = b.build_right_shift(col, c(3), false, "")?;
        let phys = b.build_xor(chunk, self.swizzle_phase(tile, row)?, "")?;
        let within = b.build_int_mul(b.build_and(col, c(7), "")?, c(2), "")?;
        let at = b.build_int_add(
            b.build_int_mul(row, c(tile.row_bytes()), "")?,
            b.build_int_mul(phys, c(CHUNK_BYTES), "")?,
            "",
        )?;
        Ok(b.build_int_add(b.build_int_add(at, within, "")?, c(tile.offset), "")?)
    }

    /// Element `index` of an array of `ty` at byte `offset` of shared memory.
    fn shared_typed(
        &self,
        offset: usize,
        ty: BasicTypeEnum<'ctx>,
        index: IntValue<'ctx>,
    ) -> Result<PointerValue<'ctx>> {
        // SAFETY (of the generated code): `reserve_shared` covers every array we index.
        unsafe {
            let base = self.b.build_gep(
                self.ctx.i8_type(),
                self.smem,
                &[self.i32c(offset as u64)],
                "",
            )?;
            Ok(self.b.build_gep(ty, base, &[index], "sm")?)
        }
    }

    /// One `mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}` on this lane's fragments
    /// (32-bit words of two 16-bit elements, low half first), or the emulator's.
    fn mma(
        &self,
        from: DType,
        a: &[IntValue<'ctx>],
        b: &[IntValue<'ctx>],
        c: &[BasicValueEnum<'ctx>],
    ) -> Result<Vec<BasicValueEnum<'ctx>>> {
        if self.emu.is_some() {
            return self.emulator_mma(from, a, b, c);
        }
        let words = |w: &[IntValue<'ctx>]| -> Result<Vec<BasicValueEnum<'ctx>>> {
            w.iter()
                .map(|x| {
                    Ok(match from {
                        DType::F16 => {
                            self.b
                                .build_bit_cast(*x, self.ctx.f16_type().vec_type(2), "")?
                        }
                        _ => (*x).into(),
                    })
                })
                .collect()
        };
        let name = match from {
            DType::F16 => "llvm.nvvm.mma.m16n8k16.row.col.f32.f32",
            _ => "llvm.nvvm.mma.m16n8k16.row.col.bf16",
        };
        let mut args = words(a)?;
        args.extend(words(b)?);
        args.extend_from_slice(c);
        let i = inkwell::intrinsics::Intrinsic::find(name).expect("LLVM 19 has the m16n8k16 mma");
        let decl = i.get_declaration(self.module, &[]).expect("declaration");
        let args: Vec<_> = args.iter().map(|v| (*v).into()).collect();
        let call = self.b.build_call(decl, &args, "mma")?;
        let st = match call.try_as_basic_value() {
            inkwell::values::ValueKind::Basic(v) => v.into_struct_value(),
            inkwell::values::ValueKind::Instruction(_) => unreachable!("mma returns 4 floats"),
        };
        Ok((0..4)
            .map(|i| self.b.build_extract_value(st, i, ""))
            .collect::<Result<_, _>>()?)
    }

    /// The emulator's `mma` (see `cuda/emulate.rs`): fragments through memory.
    fn emulator_mma(
        &self,
        from: DType,
        a: &[IntValue<'ctx>],
        b: &[IntValue<'ctx>],
        c: &[BasicValueEnum<'ctx>],
    ) -> Result<Vec<BasicValueEnum<'ctx>>> {
        let (i32t, f32t) = (self.ctx.i32_type(), self.ctx.f32_type());
        let frags = self.entry_alloca(i32t.array_type(6).into())?;
        let acc = self.entry_alloca(f32t.array_type(4).into())?;
        let at = |base: PointerValue<'ctx>, ty: BasicTypeEnum<'ctx>, i: u64| -> Result<_> {
            // SAFETY (of the generated code): within the arrays allocated above.
            Ok(unsafe { self.b.build_gep(ty, base, &[self.i32c(i)], "") }?)
        };
        for (i, w) in a.iter().chain(b).enumerate() {
            self.b.build_store(at(frags, i32t.into(), i as u64)?, *w)?;
        }
        for (i, v) in c.iter().enumerate() {
            self.b.build_store(at(acc, f32t.into(), i as u64)?, *v)?;
        }
        let kind = self.i32c(u64::from(from == DType::BF16));
        let args = [kind.into(), frags.into(), acc.into()];
        self.emulator_hook(super::sync::EMU_MMA, &args, None)?;
        (0..4)
            .map(|i| Ok(self.b.build_load(f32t, at(acc, f32t.into(), i)?, "")?))
            .collect()
    }
}
