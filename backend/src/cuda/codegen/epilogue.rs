//! The epilogue of a tensor-core `dot` with a 16-bit result (`acc.to(f16)` stored to
//! `c`): 16-byte global stores through shared memory, as Triton's.
//!
//! An accumulator fragment gives a lane two adjacent columns of a row, so stored where
//! they lie (`Gen::store_held`) its elements take one 2-byte store each, eight times
//! Triton's count of `st.global.v4.b32`. Here the lanes write their pairs (one 32-bit
//! word) into a [`Swizzled`] tile of shared memory, the layout `ldmatrix` reads, so that
//! the 8 rows × 16 bytes a warp's quad pattern writes are one wavefront; after a barrier
//! each thread reads whole 16-byte chunks of rows (consecutive threads, consecutive chunks:
//! one wavefront per 8 threads, and coalesced global stores) and stores each where the
//! pointer expression puts its first element, under the mask at that element.
//!
//! Only where the launch's specialization proves it (`dsl::ir::axis_info`): every run of
//! 8 elements along the last dim starting at a multiple of 8 is consecutive in memory,
//! 16-byte aligned and under one mask value.

use super::fragments::{HeldSite, MmaTiling};
use super::held::{FragLayout, Held};
use super::swizzle::{Swizzled, CHUNK_BYTES};
use super::Gen;
use super::V;
use crate::llvm::{Emitter, Result};
use inkwell::values::{BasicValue, BasicValueEnum, FloatValue, IntValue, PointerValue};
use inkwell::{FloatPredicate, IntPredicate};
use tritium_dsl::ir::{CacheHints, DType, Elem, Op, Value};

/// 16-bit elements per 16-byte chunk.
const CHUNK: usize = CHUNK_BYTES / 2;

impl<'ctx> Gen<'ctx, '_> {
    /// Whether a store of 16-bit fragments `regs` to `ptr` under `mask` goes through
    /// shared memory as 16-byte chunks: rank 2, whole chunks per row, every chunk proven
    /// one aligned run under one mask value, not in a pipelined loop, and a tile within
    /// the shared memory the kernel takes already (or 48 KiB, what any kernel may take
    /// without opting in).
    pub(super) fn staged_epilogue_applies(
        &self,
        ptr: Value,
        mask: Option<Value>,
        l: FragLayout,
    ) -> bool {
        let pt = self.ty(ptr);
        let Some(d) = pt.elem.pointee() else {
            return false;
        };
        if pt.rank() != 2 || d.size_bytes() != 2 || pt.shape != [l.m, l.n] {
            return false;
        }
        // Not inside a pipelined loop, whose plan counts on its body using shared memory
        // for its `dot`s' copies alone (some of them in flight).
        let end = self.staging_offset() + l.m * l.n * 2;
        if !l.n.is_multiple_of(CHUNK) || end > self.shared_bytes.max(48 << 10) {
            return false;
        }
        if self.pipelined.is_some() {
            return false;
        }
        let Some(p) = self.axis.get(&ptr) else {
            return false;
        };
        let runs = p.contiguity.get(1).is_some_and(|c| *c as usize >= CHUNK)
            && p.divisibility
                .get(1)
                .is_some_and(|d| *d as usize >= CHUNK_BYTES);
        let one_mask = mask.is_none_or(|m| {
            self.ty(m).is_scalar()
                || (self.axis.get(&m))
                    .is_some_and(|i| i.constancy.get(1).is_some_and(|c| *c as usize >= CHUNK))
        });
        runs && one_mask
    }

    /// Where the staged tile starts: above the tiles a loop being generated keeps
    /// (`shared_floor`; 0 at the top level).
    fn staging_offset(&self) -> usize {
        self.shared_floor.next_multiple_of(CHUNK_BYTES)
    }

    /// Stores fragments `regs` (layout `l`, element type `d`, 16 bits) to `ptr` under
    /// `mask` through shared memory (see the module doc). The caller has ordered the
    /// store after earlier memory ops and shared memory's earlier readers with a barrier;
    /// this ends with one, after which shared memory and the stored values are free for
    /// what follows.
    pub(super) fn staged_epilogue(
        &mut self,
        (ptr, value, mask, hints): (Value, Value, Option<Value>, CacheHints),
        l: FragLayout,
        regs: &[BasicValueEnum<'ctx>],
        d: DType,
    ) -> Result<()> {
        // A tensor descriptor's store goes out by TMA on Hopper (`tma.rs`), from a tile at
        // its swizzle's period, within the shared memory the kernel takes already.
        let at = Swizzled::new(0, l.m, l.n).alignment();
        let aligned = self.staging_offset().next_multiple_of(at);
        let room = self.shared_bytes.max(48 << 10);
        let tma = (self.tma.get(&ptr).copied()).filter(|t| {
            t.load.rows == l.m && t.load.cols == l.n && aligned + l.m * l.n * 2 <= room
        });
        let offset = match tma {
            Some(_) => aligned,
            None => self.staging_offset(),
        };
        let tile = Swizzled::new(offset, l.m, l.n);
        self.reserve_shared(tile.offset + tile.bytes());
        let b = self.b;
        self.stage_pairs(&tile, l, value, regs, d)?;
        if let Some(t) = tma {
            // TMA reads the tile through the async proxy.
            self.fence_proxy_async()?;
            self.barrier()?;
            self.tma_store(t, tile)?;
            return self.barrier();
        }
        self.barrier()?;
        let chunks_per_row = tile.chunks();
        let total = l.m * chunks_per_row;
        let v4 = self.ctx.i32_type().vec_type(4);
        for round in 0..total.div_ceil(self.threads) {
            // Chunk q = tid + threads · round: row q / chunks, chunk q % chunks.
            let first = self.i32c((round * self.threads) as u64);
            let q = b.build_int_add(self.tid, first, "")?;
            let row = b.build_int_unsigned_div(q, self.i32c(chunks_per_row as u64), "")?;
            let chunk = b.build_int_unsigned_rem(q, self.i32c(chunks_per_row as u64), "")?;
            let col = b.build_int_mul(chunk, self.i32c(CHUNK as u64), "")?;
            let inside = match (round + 1) * self.threads > total {
                true => {
                    let end = self.i32c(total as u64);
                    b.build_int_compare(IntPredicate::ULT, q, end, "")?
                }
                false => self.ctx.bool_type().const_all_ones(),
            };
            // Rows past the tile's end (the last round's) read row 0 instead.
            let row = b
                .build_select(inside, row, self.i32c(0), "")?
                .into_int_value();
            let site = HeldSite {
                row,
                col,
                writes: inside,
                index: row,
            };
            let at = self.swizzled_element(&tile, row, col)?;
            let p = self.shared_byte(at)?;
            let v = b.build_load(v4, p, "")?;
            if let Some(i) = v.as_instruction_value() {
                let _ = i.set_alignment(CHUNK_BYTES as u32);
            }
            let dst = self.index_at(ptr, &site)?.into_pointer_value();
            let mut cond = inside;
            if let Some(m) = mask {
                let m = self.index_at(m, &site)?.into_int_value();
                cond = b.build_and(cond, m, "")?;
            }
            self.when(Some(cond), &mut |g| {
                g.global_store(dst, v, hints, Some(CHUNK_BYTES as u32))
            })?;
        }
        self.barrier()
    }
}

impl<'ctx> Gen<'ctx, '_> {
    /// Writes each pair of registers `regs` of `value` (16-bit `d`; layout `l`) into
    /// `tile` as one word, low element first: registers 2k and 2k + 1 lie in one row, in
    /// columns 2c and 2c + 1. A float cast (`acc.to(f16)`) converts the f32 registers
    /// before the cast, rounding once.
    ///
    /// A pair takes one `cvt.rn.{f16,bf16}x2.f32`. The hardware's conversion gives a NaN a
    /// canonical payload where Tritium keeps its top bits (`to_storage`), so a pair holding
    /// a NaN takes a block of its own, where its halves are fixed and stored one by one
    /// (with LLVM's own conversions there, LLVM hoisted them out of every pair's block and
    /// ptxas spilled).
    fn stage_pairs(
        &mut self,
        tile: &Swizzled,
        l: FragLayout,
        value: Value,
        regs: &[BasicValueEnum<'ctx>],
        d: DType,
    ) -> Result<()> {
        let sites = self.held_sites(Held::Frag(l))?;
        let rounded = matches!(d, DType::F16 | DType::BF16);
        let regs = match self.defs.get(&value).map(|i| &i.op) {
            Some(Op::Cast(src)) if rounded => match (self.ty(*src).dtype(), self.vals.get(src)) {
                (Some(DType::F32), Some(V::Frag(ls, r))) if *ls == l => r.clone(),
                _ => regs.to_vec(),
            },
            _ => regs.to_vec(),
        };
        if self.stmatrix_applies(l) {
            return self.stage_by_stmatrix(tile, l, &sites, &regs, d);
        }
        if !rounded {
            for (site, xs) in sites.iter().step_by(2).zip(regs.chunks(2)) {
                let word = self.pack_exact(xs, d)?;
                let at = self.swizzled_element(tile, site.row, site.col)?;
                self.when(Some(site.writes), &mut |g| {
                    g.b.build_store(g.shared_byte(at)?, word)?;
                    Ok(())
                })?;
            }
            return Ok(());
        }
        for (site, xs) in sites.iter().step_by(2).zip(regs.chunks(2)) {
            let nan = self.any_nan(xs)?;
            let at = self.swizzled_element(tile, site.row, site.col)?;
            let pair = self.shared_byte(at)?;
            self.two_paths(
                self.b.build_not(nan, "")?,
                &mut |g| {
                    let word = g.pack_rounded(xs, d)?;
                    g.when(Some(site.writes), &mut |g| {
                        g.b.build_store(pair, word)?;
                        Ok(())
                    })?;
                    Ok(vec![])
                },
                // A pair with a NaN: its word fixed in this block (LLVM merges the two
                // paths' stores into one after them; the fix stays behind the branch).
                &mut |g| {
                    g.when(Some(site.writes), &mut |g| g.store_nan_kept(pair, xs, d))?;
                    Ok(vec![])
                },
            )?;
        }
        Ok(())
    }

    /// Whether the pairs of a value held as `l` go to shared memory by `stmatrix`: on
    /// Hopper, where every warp holds tiles of its own (a grid: no lane's registers are
    /// discarded, and the whole warp takes part in each store).
    fn stmatrix_applies(&self, l: FragLayout) -> bool {
        self.wgmma && matches!(self.mma_tiling(l), MmaTiling::Grid { .. })
    }

    /// [`Self::stage_pairs`] by `stmatrix.x4` (Triton's STSM): a round's 16 × 8 tile is two
    /// 8 × 8 matrices (its rows `0..8` from registers 0 and 1, `8..16` from 2 and 3), so
    /// two rounds are one store, lane `l` giving the row `l % 8` of matrix `l / 8`. A lane
    /// whose pairs of a store hold a NaN then rewrites their halves as `to_storage` gives
    /// them (the hardware's conversion gave a canonical NaN), after a warp barrier that
    /// orders its writes after the collective's; store by store, so that each store's
    /// registers die with it.
    fn stage_by_stmatrix(
        &mut self,
        tile: &Swizzled,
        l: FragLayout,
        sites: &[HeldSite<'ctx>],
        regs: &[BasicValueEnum<'ctx>],
        d: DType,
    ) -> Result<()> {
        let b = self.b;
        let rounded = matches!(d, DType::F16 | DType::BF16);
        let (lane, _) = self.lane_and_warp()?;
        let upper = b.build_int_compare(
            IntPredicate::NE,
            b.build_and(lane, self.i32c(16), "")?,
            self.i32c(0),
            "",
        )?;
        // Matrix `lane / 8`'s row `lane % 8`: rows 8 below in odd matrices.
        let row_in = b.build_and(lane, self.i32c(15), "")?;
        let rounds = self.mma_rounds(l);
        for r0 in (0..rounds).step_by(2) {
            let first = self.frag_site(l, r0)?;
            let (tm, tn, count) = match r0 + 1 < rounds {
                true => {
                    let second = self.frag_site(l, r0 + 1)?;
                    let pick = |x: IntValue<'ctx>, y: IntValue<'ctx>| -> Result<IntValue<'ctx>> {
                        Ok(b.build_select(upper, y, x, "")?.into_int_value())
                    };
                    (pick(first.tm, second.tm)?, pick(first.tn, second.tn)?, 4)
                }
                false => (first.tm, first.tn, 2),
            };
            let row = b.build_int_add(b.build_int_mul(tm, self.i32c(16), "")?, row_in, "")?;
            let col = b.build_int_mul(tn, self.i32c(8), "")?;
            let at = self.swizzled_element(tile, row, col)?;
            let regs = &regs[4 * r0..4 * r0 + 2 * count];
            let words = (regs.chunks(2))
                .map(|xs| match rounded {
                    true => self.pack_rounded(xs, d),
                    false => self.pack_exact(xs, d),
                })
                .collect::<Result<Vec<_>>>()?;
            self.stmatrix(at, &words)?;
            if !rounded {
                continue;
            }
            self.warp_sync()?;
            let nan = self.any_nan(regs)?;
            let sites = &sites[4 * r0..4 * r0 + 2 * count];
            self.when(Some(nan), &mut |g| {
                for (site, xs) in sites.iter().step_by(2).zip(regs.chunks(2)) {
                    let at = g.swizzled_element(tile, site.row, site.col)?;
                    let pair = g.shared_byte(at)?;
                    let nan = g.any_nan(xs)?;
                    g.when(Some(nan), &mut |g| g.store_nan_kept(pair, xs, d))?;
                }
                Ok(())
            })?;
        }
        Ok(())
    }

    /// Stores the pair `xs` (f32, at least one a NaN) rounded to `d` at `pair`: the paired
    /// conversion's word with each NaN's half as `to_storage` gives it (sign and top
    /// payload bits kept), in 32-bit operations (taken apart in halves, ptxas would put
    /// every pair's word together again, and LLVM's own conversions would be hoisted out
    /// of the NaN blocks).
    fn store_nan_kept(
        &mut self,
        pair: PointerValue<'ctx>,
        xs: &[BasicValueEnum<'ctx>],
        d: DType,
    ) -> Result<()> {
        let b = self.b;
        let mut word = self.pack_rounded(xs, d)?;
        for (i, x) in (0u64..).zip(xs) {
            let x = x.into_float_value();
            let nan = self.emit().half_nan_bits(x, d)?;
            word = self.half_if_nan(word, i, x, nan)?;
        }
        b.build_store(pair, word)?;
        Ok(())
    }

    /// `word` with its half `i` (0: low) replaced by the 16 bits `half` where `x` is a NaN.
    fn half_if_nan(
        &self,
        word: IntValue<'ctx>,
        i: u64,
        x: FloatValue<'ctx>,
        half: IntValue<'ctx>,
    ) -> Result<IntValue<'ctx>> {
        let b = self.b;
        let half = b.build_left_shift(half, self.i32c(16 * i), "")?;
        let kept = b.build_and(word, self.i32c(!(0xffff << (16 * i)) & 0xffff_ffff), "")?;
        let fixed = b.build_or(kept, half, "")?;
        let is_nan = b.build_float_compare(FloatPredicate::UNO, x, x, "")?;
        Ok(b.build_select(is_nan, fixed, word, "")?.into_int_value())
    }

    /// Whether any of the f32 values `xs` is a NaN.
    fn any_nan(&self, xs: &[BasicValueEnum<'ctx>]) -> Result<IntValue<'ctx>> {
        let b = self.b;
        let mut nan = self.ctx.bool_type().const_zero();
        for x in xs {
            let x = x.into_float_value();
            let is_nan = b.build_float_compare(FloatPredicate::UNO, x, x, "")?;
            nan = b.build_or(nan, is_nan, "")?;
        }
        Ok(nan)
    }

    /// Two compute values as one word of their memory forms (`to_storage`), low first.
    fn pack_exact(&self, xs: &[BasicValueEnum<'ctx>], d: DType) -> Result<IntValue<'ctx>> {
        let (b, i32t) = (self.b, self.ctx.i32_type());
        let bits = |x: BasicValueEnum<'ctx>| -> Result<IntValue<'ctx>> {
            let s = match self.to_storage(x, Elem::Scalar(d))? {
                BasicValueEnum::IntValue(i) => i,
                other => (b.build_bit_cast(other, self.ctx.i16_type(), "")?).into_int_value(),
            };
            Ok(b.build_int_z_extend(s, i32t, "")?)
        };
        let hi = b.build_left_shift(bits(xs[1])?, self.i32c(16), "")?;
        Ok(b.build_or(bits(xs[0])?, hi, "")?)
    }

    /// Two f32 values rounded to `d` (f16 or bf16) as one word, low first, a NaN as the
    /// canonical `0x7fff` (the callers keep NaN payloads).
    /// On the GPU one `cvt.rn.{f16,bf16}x2.f32` in inline PTX: as LLVM's own conversion
    /// it would be shared with the NaN path's element conversions and hoisted above its
    /// test, every pair's halves then live at once (ptxas spilled). The emulator rounds
    /// as `to_storage` does and, as the hardware, gives a NaN the canonical `0x7fff`.
    fn pack_rounded(&self, xs: &[BasicValueEnum<'ctx>], d: DType) -> Result<IntValue<'ctx>> {
        let (b, i32t) = (self.b, self.ctx.i32_type());
        if self.emu.is_some() {
            let mut word = self.pack_exact(xs, d)?;
            for (i, x) in (0u64..).zip(xs) {
                word = self.half_if_nan(word, i, x.into_float_value(), self.i32c(0x7fff))?;
            }
            return Ok(word);
        }
        let f32t = self.ctx.f32_type();
        let fn_ty = i32t.fn_type(&[f32t.into(), f32t.into()], false);
        let to = if d == DType::F16 { "f16x2" } else { "bf16x2" };
        // The first source goes to the upper half.
        let asm = format!("cvt.rn.{to}.f32 $0, $2, $1;");
        let f =
            (self.ctx).create_inline_asm(fn_ty, asm, "=r,f,f".into(), false, false, None, false);
        let args = [xs[0].into(), xs[1].into()];
        let call = b.build_indirect_call(fn_ty, f, &args, "pack")?;
        match call.try_as_basic_value() {
            inkwell::values::ValueKind::Basic(v) => Ok(v.into_int_value()),
            inkwell::values::ValueKind::Instruction(_) => unreachable!("returns a word"),
        }
    }
}
