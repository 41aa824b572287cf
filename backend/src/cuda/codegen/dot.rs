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
//! it as it is, a `for` loop carries it in registers (see `control`), ops over it stay in
//! fragments where `held.rs` says so (`fragments.rs`), and an `a` held as fragments of the
//! `dot`'s own rows is packed into A fragments without `ldmatrix`; any other use converts
//! it to the blocked layout through shared memory (as an accumulator in slots is converted
//! to fragments). Every warp runs the same number of `mma`s (a warp without a
//! tile left computes a clamped one and discards it), so control flow stays uniform.
//!
//! fp8 (E4M3 or E5M2) takes tensor cores on Hopper only, where `wgmma`
//! m64nNk32 reads both operands K-major from shared memory (`MmaInputs`): their tiles
//! are the same swizzled layout counted in bytes, so a 32-byte k step is 16 halves or 32
//! fp8 values alike, and a row-major `b` (which `wgmma` cannot transpose at 8 bits) is
//! loaded and staged transposed, as Triton does.
//!
//! Otherwise (the fallback): `a` and `b`, converted to the accumulator's dtype as a cast
//! would, go to shared memory; each accumulator slot runs its own `k` loop of `fmuladd`s
//! in k order (integers: wrapping multiply-add). f16/bf16 accumulators add in f32 and
//! round once at the end, as the interpreter does.

use super::fragments::{FragSite, MmaTiling};
use super::held::{FragLayout, Held};
use super::ldmatrix::Ldmatrix;
use super::reduce::Acc;
use super::swizzle::{Swizzled, CHUNK_BYTES};
use super::wgmma::{WgmmaA, WgmmaDot};
use super::{Gen, V};
use crate::llvm::{CodegenError, Emitter, Result};
use inkwell::types::BasicTypeEnum;
use inkwell::values::{BasicValueEnum, IntValue, PointerValue};
use tritium_dsl::ir::{BinOp, Block, DType, Elem, Inst, Op, Value};

/// The most k steps (of 16) of a tensor-core `dot` emitted unrolled.
const UNROLLED_K_STEPS: usize = 8;

/// The most registers per thread that a loop-invariant `a`'s A fragments take where the
/// loop could keep `a` in shared memory instead (as Triton keeps attention's `q`: 32
/// registers for it spill at 128 × 64, D = 64, 4 warps), and where it could not.
const HOISTED_A_WORDS: usize = 16;
const HOISTED_A_WORDS_AT_MOST: usize = 64;

/// Where a loop-invariant `a` of a `dot` in a loop is kept (see [`Gen::hoist_a_fragments`]).
pub(super) enum HoistedA<'ctx> {
    /// Its A fragments in registers: per A fragment row, per k step, four words.
    Registers(Vec<Vec<Vec<IntValue<'ctx>>>>),
    /// Staged once into this tile, below the loop's other shared memory.
    Shared(Swizzled),
}

/// The dtypes a tensor-core `dot` multiplies: `a` and `b` both f16, both bf16, or (on
/// `wgmma` only) each E4M3 or E5M2 (a mixed pair too, as `wgmma` multiplies them), whose
/// tiles are K-major bytes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) struct MmaInputs {
    pub a: DType,
    pub b: DType,
}

impl MmaInputs {
    /// Bytes per element of both operands.
    pub(super) fn elem_bytes(self) -> usize {
        self.a.size_bytes()
    }

    pub(super) fn is_fp8(self) -> bool {
        self.elem_bytes() == 1
    }

    /// The k elements of one tensor-core step, 32 bytes of a row: 16, or 32 for fp8.
    pub(super) fn k_step(self) -> usize {
        32 / self.elem_bytes()
    }
}

/// Whether `d` is an fp8 format `wgmma` multiplies.
fn wgmma_fp8(d: DType) -> bool {
    matches!(d, DType::F8E4M3 | DType::F8E5M2)
}

/// One `ldmatrix` of a k step's B fragments: n-tile `tn`, and `tn + 1` when `pair`.
struct BLoad<'ctx> {
    tn: IntValue<'ctx>,
    pair: bool,
}

/// [`Gen::paired_columns`]: each n-tile's address without the lane's part, the lane's
/// row offset, and the chunk XOR of `.x4` and `.x2` reads.
struct PairedColumns<'ctx> {
    tiles: Vec<IntValue<'ctx>>,
    lane_at: IntValue<'ctx>,
    q4: IntValue<'ctx>,
    q2: IntValue<'ctx>,
}

impl<'ctx> PairedColumns<'ctx> {
    /// The lane's part of the address of k steps `step` and (`both`) the next.
    fn lane_part(
        &self,
        g: &Gen<'ctx, '_>,
        tile: &Swizzled,
        step: usize,
        both: bool,
    ) -> Result<IntValue<'ctx>> {
        let q = if both { self.q4 } else { self.q2 };
        g.swizzled_chunk(tile, self.lane_at, g.i32c(2 * step as u64), q)
    }
}

impl<'ctx, 'f> Gen<'ctx, 'f> {
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
        let (m, k, n) = (at.shape[0], at.shape[1], bt.shape[1]);
        let elem = Elem::Scalar(d);
        let size = self.shared_size(elem);
        let b_offset = (m * k * size).div_ceil(16) * 16;
        self.reserve_scratch(b_offset + k * n * size);
        for (x, offset, numel) in [(*a, 0, m * k), (*b, b_offset, k * n)] {
            // Each operand's own dtype (two fp8s may differ).
            let from = self.ty(x).dtype().expect("dot takes numbers");
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

    /// The input dtypes and `[m, n, k]` of a `dot` that runs on tensor cores. fp8 `dot`s
    /// take them only where they are certain to run on `wgmma` (the accumulator dealt to
    /// warpgroups, K-major rows of a hardware swizzle's width): `mma.sync` has no fp8 form
    /// at the PTX versions Tritium targets, so elsewhere they stay on the fallback.
    pub(super) fn mma_shape(&self, inst: &Inst) -> Option<(MmaInputs, [usize; 3])> {
        let Op::Dot { a, b, .. } = &inst.op else {
            return None;
        };
        let (at, bt) = (self.ty(*a), self.ty(*b));
        let inputs = MmaInputs {
            a: at.dtype()?,
            b: bt.dtype()?,
        };
        let d = self.ty(inst.results[0]).dtype()?;
        let (m, k, n) = (at.shape[0], at.shape[1], bt.shape[1]);
        let kinds = match (inputs.a, inputs.b) {
            (DType::F16, DType::F16) | (DType::BF16, DType::BF16) => true,
            (x, y) if wgmma_fp8(x) && wgmma_fp8(y) => {
                self.warpgroup_rows(m) && (k == 32 || k == 64 || k.is_multiple_of(128))
            }
            _ => false,
        };
        (kinds && d == DType::F32 && m % 16 == 0 && n % 8 == 0 && k.is_multiple_of(inputs.k_step()))
            .then_some((inputs, [m, n, k]))
    }

    /// The accumulator layout of a tensor-core `dot` with an `m × n` result: as `held.rs`
    /// decided (it decides one for every such `dot`).
    pub(super) fn mma_layout(&self, dot: &Inst, m: usize, n: usize) -> FragLayout {
        match self.held(dot.results[0]) {
            Held::Frag(l) => l,
            _ => FragLayout {
                m,
                n,
                by_rows: false,
            },
        }
    }

    /// The tensor-core path (see the module docs).
    fn mma_dot(&mut self, inst: &Inst, from: MmaInputs, [m, n, k]: [usize; 3]) -> Result<()> {
        let Op::Dot { a, b, acc } = &inst.op else {
            unreachable!()
        };
        let r = inst.results[0];
        let layout = self.mma_layout(inst, m, n);
        let init = self.held_regs(*acc, Held::Frag(layout))?;
        let (a_held, a_kept) = match self.a_hoisted.get(&r) {
            Some(HoistedA::Registers(words)) => (Some(words.clone()), None),
            Some(HoistedA::Shared(tile)) => (None, Some(*tile)),
            None => (self.a_fragments_held(inst, from.a)?, None),
        };
        let a_elsewhere = a_held.is_some() || a_kept.is_some();
        // In a pipelined loop (`pipeline.rs`) the tiles of this iteration are in flight
        // already: wait for them, then issue a later iteration's into the buffer the last
        // one read; elsewhere the operands are copied or staged now.
        // The first `dot` of the body waits and issues; the others read the same stage.
        let pipelined = (self.pipelined.as_ref()).and_then(|p| {
            let at = p.dots.iter().position(|d| std::ptr::eq(d.dot, inst))?;
            let ahead = p.ahead.expect("the loop sets the iteration ahead");
            let stage = p.stage.expect("and the stage");
            Some((
                p.dots[at].tiles,
                at == 0,
                p.stage_bytes,
                p.stages,
                stage,
                ahead,
                p.tma.zip(p.phase),
            ))
        });
        let (a_tile, b_tile, b_columns) = match pipelined {
            Some((tiles, ..)) => tiles,
            None => self.operand_tiles(inst, self.deferred.contains(b), a_elsewhere),
        };
        let a_tile = a_kept.unwrap_or(a_tile);
        let stage_bytes = pipelined.as_ref().map_or(0, |p| p.2);
        let on_wgmma = {
            let a_shared = a_held.is_none().then_some(&a_tile);
            self.wgmma_fits(layout, a_shared, &b_tile, stage_bytes)
        };
        // On `wgmma`, a loop's only `dot` accumulating into a carried value leaves its
        // group in flight across the back edge (`wgmma.rs`): the copies of a later
        // iteration then go into the buffer the last one read only once every warpgroup's
        // wait has seen that iteration's group complete.
        let (in_flight, zero_init, trip) = match self.pipelined.as_ref() {
            Some(p) if p.carried_acc.is_some() => (true, p.zero_init, p.trip),
            _ => (false, false, None),
        };
        if (in_flight || from.is_fp8()) && !on_wgmma {
            return Err(CodegenError::internal(
                "a dot planned for wgmma (pipelined, or of fp8 tiles) does not take it",
            ));
        }
        let mut issue_after = None;
        let stage_base = match pipelined {
            Some((_, first, stage_bytes, stages, stage, (iv, runs), tma)) => {
                if first {
                    self.reserve_shared(self.shared_floor + stages * stage_bytes);
                    match tma {
                        // Each thread waits for the stage itself; with the group left
                        // in flight, the barrier after the `dot` is the one that lets
                        // thread 0 refill the buffer the last iteration read.
                        Some((t, phase)) => {
                            self.tma_wait(t, stage, phase)?;
                            if !in_flight {
                                self.barrier()?;
                            }
                        }
                        None => {
                            self.wait_copies(stages as u32 - 2)?;
                            self.fence_proxy_async()?;
                            self.barrier()?;
                        }
                    }
                    // The stage before this one: `(stage + stages - 1) % stages` (a mask
                    // for a power of two, else a select on the first stage).
                    let stages_n = stages as u64;
                    let later = match stages_n.is_power_of_two() {
                        true => {
                            let before =
                                (self.b).build_int_add(stage, self.i32c(stages_n - 1), "")?;
                            self.b.build_and(before, self.i32c(stages_n - 1), "")?
                        }
                        false => {
                            let first_stage = (self.b).build_int_compare(
                                inkwell::IntPredicate::EQ,
                                stage,
                                self.i32c(0),
                                "",
                            )?;
                            let before = self.b.build_int_sub(stage, self.i32c(1), "")?;
                            let last = self.i32c(stages_n - 1);
                            (self.b.build_select(first_stage, last, before, ""))?.into_int_value()
                        }
                    };
                    match in_flight {
                        true => issue_after = Some((iv, runs, later, stages_n - 1)),
                        false => self.issue_stage(iv, runs, later, (stages_n - 1, false))?,
                    }
                }
                self.b
                    .build_int_mul(stage, self.i32c(stage_bytes as u64), "")?
            }
            None => {
                self.reserve_shared(b_tile.offset + b_tile.bytes());
                let mut copies = false;
                // By position, not value: `dot(x, x)` stages `x` twice, as `a` and as `b`.
                for (is_b, x, tile) in [(false, *a, a_tile), (true, *b, b_tile)] {
                    if !is_b && a_elsewhere {
                        continue;
                    }
                    let columns = is_b && b_columns;
                    if self.deferred.contains(&x) {
                        self.copy_operand(x, tile, columns, self.i32c(0))?;
                        copies = true;
                    } else {
                        self.stage_operand(x, tile, columns)?;
                    }
                }
                if copies {
                    self.wait_async_copies()?;
                }
                self.fence_proxy_async()?;
                self.barrier()?;
                self.i32c(0)
            }
        };
        if on_wgmma {
            let a = match (a_held, a_kept) {
                (Some(words), _) => WgmmaA::Registers(words),
                (None, Some(tile)) => WgmmaA::Shared(tile, self.i32c(0)),
                (None, None) => WgmmaA::Shared(a_tile, stage_base),
            };
            let d = WgmmaDot {
                from,
                layout,
                k,
                a,
                b: b_tile,
                b_columns,
                b_base: stage_base,
            };
            // Accumulators starting undefined: the first iteration ignores them.
            let scale_d = match (zero_init, trip) {
                (true, Some(t)) => {
                    let first =
                        self.b
                            .build_int_compare(inkwell::IntPredicate::NE, t, self.i32c(0), "")?;
                    Some(
                        self.b
                            .build_int_z_extend(first, self.ctx.i32_type(), "scale_d")?,
                    )
                }
                _ => None,
            };
            let out = self.wgmma_dot(&d, init, in_flight, scale_d)?;
            // Every warp is done reading `a` and `b` before shared memory is reused.
            self.barrier()?;
            if let Some((iv, runs, later, distance)) = issue_after {
                self.issue_stage(iv, runs, later, (distance, false))?;
            }
            self.vals.insert(r, V::Frag(layout, out));
            return Ok(());
        }
        let c = |g: &Self, v: u64| g.i32c(v);
        let add = |g: &Self, x: IntValue<'ctx>, y: IntValue<'ctx>| g.b.build_int_add(x, y, "");
        let mul = |g: &Self, x: IntValue<'ctx>, y: u64| g.b.build_int_mul(x, g.i32c(y), "");
        let tiling = self.mma_tiling(layout);
        let (a_of, b_of, sites) = self.fragment_owners(layout)?;
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
        // A tile kept for the loop lies where it was put, in no stage.
        let a_base = if a_kept.is_some() {
            c(self, 0)
        } else {
            stage_base
        };
        let a_rows = match a_held {
            Some(_) => Vec::new(),
            None => self.a_fragment_rows(&a_tile, a_base, &a_of, &sites)?,
        };
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
            mul(self, in_block, b_tile.row_stride() as u64)?,
        )?;
        // Stored by columns (`n × k`), a pair's matrix `j` is n-tile `tn + j / 2`, chunk
        // `2 step + j % 2`: lane rows `8 (tn + j / 2) + l % 8`, as `a`'s with the bits of `j`
        // swapped.
        // Over unrolled k steps, a `b` stored by columns is read two steps at a time.
        let unrolled = a_held.is_some();
        let steps = k / 16;
        let paired = match b_columns && steps >= 2 && (steps <= UNROLLED_K_STEPS || unrolled) {
            true => Some(self.paired_columns(&b_tile, b_base, (0..b_frags).map(b_tn))?),
            false => None,
        };
        let b_bases: Vec<(IntValue<'ctx>, IntValue<'ctx>)> = b_loads
            .iter()
            .filter(|_| paired.is_none())
            .map(|l| {
                if b_columns {
                    let tile = if l.pair { add(self, l.tn, j_hi)? } else { l.tn };
                    let lane_row = self.b.build_and(lane, c(self, 7), "")?;
                    let row = add(self, mul(self, tile, 8)?, lane_row)?;
                    let phase = self.swizzle_phase(&b_tile, row)?;
                    let base = add(self, b_base, mul(self, row, b_tile.row_stride() as u64)?)?;
                    return Ok((base, self.b.build_xor(j_lo, phase, "")?));
                }
                let chunk = if l.pair { add(self, l.tn, j_hi)? } else { l.tn };
                let at = self.swizzled_chunk(&b_tile, b_row, chunk, b_phase)?;
                Ok((at, c(self, 0)))
            })
            .collect::<Result<_>>()?;
        let accs: Vec<Acc<'ctx>> = init.iter().map(|v| (*v, None)).collect();
        // The second step's words of each `ldmatrix.x4` of `paired`, for the odd step.
        let mut pending: Vec<Vec<IntValue<'ctx>>> = Vec::new();
        let d = self.k_steps(steps, unrolled, accs, &mut |g, step, accs| {
            let step2 = mul(g, step, 2)?;
            let a_frags: Vec<Vec<IntValue<'ctx>>> = match &a_held {
                Some(held) => {
                    let s = step.get_zero_extended_constant().expect("unrolled steps") as usize;
                    held.iter().map(|f| f[s].clone()).collect()
                }
                None => (a_rows.iter())
                    .map(|row| g.load_a_fragment(&a_tile, *row, step))
                    .collect::<Result<_>>()?,
            };
            let b_step = mul(g, step, 16 * b_tile.row_stride() as u64)?;
            let mut b_frags: Vec<Vec<IntValue<'ctx>>> = Vec::with_capacity(b_frags);
            if let Some(paired) = &paired {
                let s = step.get_zero_extended_constant().expect("unrolled steps") as usize;
                match s % 2 {
                    1 => b_frags = std::mem::take(&mut pending),
                    _ => {
                        let both = s + 1 < steps;
                        let lane_part = paired.lane_part(g, &b_tile, s, both)?;
                        let matrices = if both { 4 } else { 2 };
                        for tile_at in &paired.tiles {
                            let at = add(g, *tile_at, lane_part)?;
                            let trans = false;
                            let words = g.ldmatrix(Ldmatrix { matrices, trans }, at)?;
                            b_frags.push(words[..2].to_vec());
                            if both {
                                pending.push(words[2..].to_vec());
                            }
                        }
                    }
                }
            }
            for (load, (base, q)) in b_loads.iter().zip(&b_bases) {
                let matrices = if load.pair { 4 } else { 2 };
                let at = match b_columns {
                    true => g.swizzled_chunk(&b_tile, *base, step2, *q)?,
                    false => add(g, *base, b_step)?,
                };
                let trans = !b_columns;
                let words = g.ldmatrix(Ldmatrix { matrices, trans }, at)?;
                b_frags.extend(words.chunks(2).map(<[_]>::to_vec));
            }
            let mut next = Vec::with_capacity(accs.len());
            for (r, four) in accs.chunks(4).enumerate() {
                let cs: Vec<BasicValueEnum<'ctx>> = four.iter().map(|(v, _)| *v).collect();
                let out = g.mma(from.a, &a_frags[a_of[r]], &b_frags[b_of[r]], &cs)?;
                next.extend(out.into_iter().map(|v| (v, None)));
            }
            Ok(next)
        })?;
        let out: Vec<BasicValueEnum<'ctx>> = d.into_iter().map(|(v, _)| v).collect();
        // Every warp is done reading `a` and `b` before shared memory is reused.
        self.barrier()?;
        self.vals.insert(r, V::Frag(layout, out));
        Ok(())
    }

    /// The `ldmatrix` addresses of a `b` stored by columns (`n × k`) whose K steps are
    /// unrolled: each n-tile's 8 rows by 4 chunks, two k steps, per `ldmatrix.x4` (matrix
    /// `j` chunk `2 step + j`), as Triton reads `kᵀ`. The swizzle's phase of row `8 tn + l
    /// % 8` is that of `l % 8` (a phase repeats every 8 rows), so the lane's part of the
    /// address is the same for every n-tile and one value per pair of steps, and an n-tile
    /// is a constant offset from it (where the reads of one row of chunks per step would
    /// XOR each step's chunk into every n-tile's address).
    fn paired_columns(
        &self,
        tile: &Swizzled,
        b_base: IntValue<'ctx>,
        tns: impl Iterator<Item = IntValue<'ctx>>,
    ) -> Result<PairedColumns<'ctx>> {
        let (b, c) = (self.b, |v: u64| self.i32c(v));
        let (lane, _) = self.lane_and_warp()?;
        let lane_row = b.build_and(lane, c(7), "")?;
        let j = b.build_right_shift(lane, c(3), false, "")?;
        let phase = self.swizzle_phase(tile, lane_row)?;
        let stride = tile.row_stride() as u64;
        let tiles = tns
            .map(|tn| Ok(b.build_int_add(b_base, b.build_int_mul(tn, c(8 * stride), "")?, "")?))
            .collect::<Result<_>>()?;
        Ok(PairedColumns {
            tiles,
            lane_at: b.build_int_mul(lane_row, c(stride), "")?,
            // `.x2` (a last odd step) takes lanes 0–15's addresses, matrices 0 and 1.
            q4: b.build_xor(j, phase, "")?,
            q2: b.build_xor(b.build_and(j, c(1), "")?, phase, "")?,
        })
    }

    /// Which A fragment (a row of tiles) and B fragment (a column) each round of `layout`
    /// uses, and where the round's tile lies: on a warp grid, rounds share them and each
    /// is loaded once per k step.
    fn fragment_owners(
        &self,
        layout: FragLayout,
    ) -> Result<(Vec<usize>, Vec<usize>, Vec<FragSite<'ctx>>)> {
        let rounds = self.mma_rounds(layout);
        let (a_of, b_of) = match self.mma_tiling(layout) {
            MmaTiling::Grid { ni, .. } => (0..rounds).map(|r| (r / ni, r % ni)).unzip(),
            MmaTiling::Spread { .. } => (0..rounds).map(|r| (r, r)).unzip(),
        };
        let sites = (0..rounds)
            .map(|r| self.frag_site(layout, r))
            .collect::<Result<_>>()?;
        Ok((a_of, b_of, sites))
    }

    /// Before a loop: every tensor-core `dot` of its body whose `a` is defined outside it
    /// (attention's `q`) gets `a` staged once instead of at every iteration: its A
    /// fragments read into registers where they are few ([`HOISTED_A_WORDS`]), else, where
    /// nothing else in the body uses shared memory, the tile kept in shared memory below
    /// the loop's other tiles (`shared_floor`), its fragments read by `ldmatrix` at each
    /// iteration as Triton does, else registers up to [`HOISTED_A_WORDS_AT_MOST`].
    pub(super) fn hoist_a_fragments(&mut self, body: &'f Block) -> Result<()> {
        let quiet = self.uses_no_shared_memory(body);
        for dot in &body.insts {
            let Op::Dot { a, .. } = &dot.op else {
                continue;
            };
            let Some(kept) = self.a_hoisting(dot, body, quiet) else {
                continue;
            };
            let Some((from, [m, n, k])) = self.mma_shape(dot) else {
                continue;
            };
            let layout = self.mma_layout(dot, m, n);
            let (a_of, _, sites) = self.fragment_owners(layout)?;
            // Copied by TMA before the loops already (`hoisted_tma.rs`), above the floor.
            let tile = match self.a_in_shared.get(a) {
                Some(tile) => *tile,
                None => {
                    let tile = Swizzled::of_bytes(self.shared_floor, m, k, from.elem_bytes());
                    self.reserve_shared(tile.offset + tile.bytes());
                    self.stage_operand(*a, tile, false)?;
                    self.fence_proxy_async()?;
                    self.barrier()?;
                    if kept {
                        let end = tile.offset + tile.bytes();
                        self.shared_floor = end.next_multiple_of(self.tile_alignment());
                    }
                    tile
                }
            };
            if kept {
                self.a_hoisted
                    .insert(dot.results[0], HoistedA::Shared(tile));
                continue;
            }
            let rows = self.a_fragment_rows(&tile, self.i32c(0), &a_of, &sites)?;
            let words = (rows.iter())
                .map(|row| {
                    (0..k / 16)
                        .map(|s| self.load_a_fragment(&tile, *row, self.i32c(s as u64)))
                        .collect::<Result<Vec<_>>>()
                })
                .collect::<Result<Vec<_>>>()?;
            self.barrier()?;
            self.a_hoisted
                .insert(dot.results[0], HoistedA::Registers(words));
        }
        Ok(())
    }

    /// How [`Self::hoist_a_fragments`] keeps the `a` of `dot`, a tensor-core `dot` directly
    /// in the loop `body` (`quiet`: [`Self::uses_no_shared_memory`] of it): `Some(true)`
    /// in shared memory, `Some(false)` as A fragments in registers, `None` not hoisted.
    pub(super) fn a_hoisting(&self, dot: &Inst, body: &Block, quiet: bool) -> Option<bool> {
        let Op::Dot { a, .. } = &dot.op else {
            return None;
        };
        let (from, [m, n, k]) = self.mma_shape(dot)?;
        let inner = body.insts.iter().any(|i| i.results.contains(a));
        if inner || self.deferred.contains(a) || self.a_fragments_in_registers(dot) {
            return None;
        }
        let layout = self.mma_layout(dot, m, n);
        let rounds = self.mma_rounds(layout);
        let frags = match self.mma_tiling(layout) {
            MmaTiling::Grid { ni, .. } => rounds.div_ceil(ni),
            MmaTiling::Spread { .. } => rounds,
        };
        let words = frags * (k / 16) * 4;
        // fp8's `wgmma` reads `a` from shared memory only (its register form is not
        // generated).
        let kept = quiet && (words > HOISTED_A_WORDS || from.is_fp8());
        let registers = !kept && words <= HOISTED_A_WORDS_AT_MOST && !from.is_fp8();
        (kept || registers).then_some(kept)
    }

    /// Where each A fragment (a row of `16 × 8` tiles, `a_of` of each round) is read by
    /// `ldmatrix` from `tile` (`stage_base` bytes on): this lane's row address and the
    /// chunk XOR of its row. Lane `l` gives the address of row `l % 8` of matrix
    /// `j = l / 8` of the fragment's `16 × 16`: rows `8 (j % 2)..`, columns `8 (j / 2)..`,
    /// chunk `2 step + j / 2` of row `16 tm + l % 8 + 8 (j % 2)`, whose phase does not
    /// depend on the step: `(2 step + j / 2) ^ phase = 2 step ^ (j / 2 ^ phase)`.
    fn a_fragment_rows(
        &self,
        tile: &Swizzled,
        stage_base: IntValue<'ctx>,
        a_of: &[usize],
        sites: &[FragSite<'ctx>],
    ) -> Result<Vec<(IntValue<'ctx>, IntValue<'ctx>)>> {
        let (b, c) = (self.b, |v: u64| self.i32c(v));
        let (lane, _) = self.lane_and_warp()?;
        let j = b.build_right_shift(lane, c(3), false, "")?;
        let j_hi = b.build_right_shift(j, c(1), false, "")?;
        let j_lo = b.build_and(j, c(1), "")?;
        let in_block = b.build_int_add(
            b.build_and(lane, c(7), "")?,
            b.build_int_mul(j_lo, c(8), "")?,
            "",
        )?;
        let frags = a_of.iter().copied().max().map_or(0, |x| x + 1);
        (0..frags)
            .map(|i| {
                let first = a_of.iter().position(|k| *k == i).expect("a first round");
                let tm = b.build_int_mul(sites[first].tm, c(16), "")?;
                let row = b.build_int_add(tm, in_block, "")?;
                let phase = self.swizzle_phase(tile, row)?;
                let at = b.build_int_add(c(tile.offset as u64), stage_base, "")?;
                let row_at = b.build_int_mul(row, c(tile.row_stride() as u64), "")?;
                let base = b.build_int_add(at, row_at, "")?;
                Ok((base, b.build_xor(j_hi, phase, "")?))
            })
            .collect()
    }

    /// The A fragment of k `step` at a row found by [`Self::a_fragment_rows`]: one
    /// `ldmatrix.x4`.
    fn load_a_fragment(
        &self,
        tile: &Swizzled,
        (base, q): (IntValue<'ctx>, IntValue<'ctx>),
        step: IntValue<'ctx>,
    ) -> Result<Vec<IntValue<'ctx>>> {
        let step2 = self.b.build_int_mul(step, self.i32c(2), "")?;
        let at = self.swizzled_chunk(tile, base, step2, q)?;
        let x4 = Ldmatrix {
            matrices: 4,
            trans: false,
        };
        self.ldmatrix(x4, at)
    }

    /// The `steps` k steps of a tensor-core `dot`, unrolled up to [`UNROLLED_K_STEPS`]
    /// (always when `unrolled`: A fragments in registers are indexed by the step)
    /// (each step's fragment addresses are then constants, and the next step's fragment
    /// reads may be scheduled under this step's `mma`s, as Triton's are), else a loop.
    fn k_steps(
        &mut self,
        steps: usize,
        unrolled: bool,
        init: Vec<Acc<'ctx>>,
        body: &mut super::reduce::FoldStep<'_, 'ctx, Self>,
    ) -> Result<Vec<Acc<'ctx>>> {
        if steps > UNROLLED_K_STEPS && !unrolled {
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
    /// transposed (`n × k`) and read without `.trans`; and whether it is. An `a` whose A
    /// fragments are elsewhere (`a_held`: registers, or kept for the loop) takes none here.
    /// Both lie above the tiles kept for the loop being generated (`shared_floor`).
    pub(super) fn operand_tiles(
        &self,
        dot: &Inst,
        b_copied: bool,
        a_held: bool,
    ) -> (Swizzled, Swizzled, bool) {
        let Op::Dot { a, b, .. } = &dot.op else {
            unreachable!("a dot")
        };
        let (m, k, n) = (
            self.ty(*a).shape[0],
            self.ty(*a).shape[1],
            self.ty(*b).shape[1],
        );
        let Some((inputs, _)) = self.mma_shape(dot) else {
            unreachable!("a tensor-core dot")
        };
        // fp8 tiles are K-major: a `b` not copied by columns is staged transposed.
        let b_columns = inputs.is_fp8() || (b_copied && self.copies_columns(*b));
        let floor = self.shared_floor;
        let elem = inputs.elem_bytes();
        let a_tile = Swizzled::of_bytes(floor, m, k, elem);
        let b_at = if a_held {
            floor
        } else {
            (floor + a_tile.bytes()).next_multiple_of(self.tile_alignment())
        };
        let b_tile = match b_columns {
            true => Swizzled::of_bytes(b_at, n, k, elem),
            false => Swizzled::of_bytes(b_at, k, n, elem),
        };
        (a_tile, b_tile, b_columns)
    }

    /// Stores this thread's slots of the `dot` operand `x` into `tile` (with `columns`,
    /// transposed: `tile` is `x`ᵀ): a chunk of consecutive slots lies in one 16-byte chunk
    /// of a row (rows are whole chunks), so, not transposed, it is one vector store.
    fn stage_operand(&mut self, x: Value, tile: Swizzled, columns: bool) -> Result<()> {
        let it = self.ctx.custom_width_int_type(8 * tile.elem as u32);
        let numel = tile.rows * tile.cols;
        let slots = self.tile_slots(x, numel)?;
        let elem = Elem::Scalar(self.ty(x).dtype().expect("dot operands are numbers"));
        let bits: Vec<_> = slots
            .iter()
            .map(|v| self.to_storage(*v, elem))
            .collect::<Result<_>>()?;
        let x_cols = self.ty(x).shape[1];
        let address = |g: &Self, lin: IntValue<'ctx>| -> Result<PointerValue<'ctx>> {
            let cols = g.i32c(x_cols as u64);
            let row = g.b.build_int_unsigned_div(lin, cols, "")?;
            let col = g.b.build_int_unsigned_rem(lin, cols, "")?;
            let at = match columns {
                true => g.swizzled_element(&tile, col, row)?,
                false => g.swizzled_element(&tile, row, col)?,
            };
            g.shared_byte(at)
        };
        let chunk = self.chunk(numel);
        if chunk > 1 && !columns && self.valid(numel, 0)?.is_none() {
            let vt = it.vec_type(chunk as u32);
            for (j0, run) in bits.chunks(chunk).enumerate() {
                let mut v = vt.get_undef();
                for (e, x) in run.iter().enumerate() {
                    v = self
                        .b
                        .build_insert_element(v, *x, self.i32c(e as u64), "")?;
                }
                let p = address(self, self.lin(numel, j0 * chunk)?)?;
                let st = self.b.build_store(p, v)?;
                st.set_alignment((chunk * tile.elem) as u32)?;
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

    /// The alignment of the tiles of tensor-core operands and of the tiles kept for a
    /// loop: a whole 128-byte swizzle period (8 rows × 128 bytes) where `wgmma` may read
    /// them, which decodes the swizzle from absolute address bits.
    pub(super) fn tile_alignment(&self) -> usize {
        match self.wgmma {
            true => 1024,
            false => 128,
        }
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
        let per = tile.chunk_elems();
        let chunk = b.build_right_shift(col, c(per.trailing_zeros() as usize), false, "")?;
        let row_at = b.build_int_mul(row, c(tile.row_stride()), "")?;
        let base = b.build_int_add(row_at, c(tile.offset), "")?;
        let phase = self.swizzle_phase(tile, row)?;
        let at = self.swizzled_chunk(tile, base, chunk, phase)?;
        let within = b.build_int_mul(b.build_and(col, c(per - 1), "")?, c(tile.elem), "")?;
        Ok(b.build_int_add(at, within, "")?)
    }

    /// The byte offset of chunk `chunk` of a row of `tile` starting (in its first column
    /// block) at `row_base`, with the row's phase (or any value XOR-ed into it) `phase`:
    /// its column block, then its place in the block's row XOR the phase.
    fn swizzled_chunk(
        &self,
        tile: &Swizzled,
        row_base: IntValue<'ctx>,
        chunk: IntValue<'ctx>,
        phase: IntValue<'ctx>,
    ) -> Result<IntValue<'ctx>> {
        let b = self.b;
        let c = |v: usize| self.i32c(v as u64);
        let block = b.build_right_shift(chunk, c(3), false, "")?;
        let block_at = b.build_int_mul(block, c(tile.block_bytes()), "")?;
        let phys = b.build_xor(b.build_and(chunk, c(7), "")?, phase, "")?;
        let chunk_at = b.build_int_mul(phys, c(CHUNK_BYTES), "")?;
        Ok(b.build_int_add(b.build_int_add(row_base, block_at, "")?, chunk_at, "")?)
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
