//! TMA copies of a pipelined loop's `dot` operands, the `mbarrier`s that wait for them, and
//! TMA stores of a `dot`'s result from the epilogue's tile (Hopper; see
//! `cuda/tensor_map.rs` for which accesses and their tensor maps).
//!
//! Each stage of the loop (`pipeline.rs`) has an `mbarrier` in shared memory after the
//! stages, initialized to one arrival before the loop's prologue (after a
//! `fence.proxy.async`: TMA may overwrite what generic stores wrote) and invalidated after
//! the loop. To fill a stage, one lane of warp 0 arrives with the stage's byte count
//! (`mbarrier.arrive.expect_tx`), and the stage's copies, one `cp.async.bulk.tensor.2d` per
//! 128-byte column block of each operand tile, are dealt to the warps, one lane of each
//! (`elect.sync`, as Triton issues them), each completing its bytes on that barrier (in
//! any order: the phase completes once the arrival and all the bytes are in). Every
//! thread waits for the stage with `mbarrier.try_wait.parity`: iteration `i` waits for
//! phase `i / stages` of barrier `i % stages`, whose parity is `(i / stages) & 1`. The
//! warps refill the buffer the last iteration read only after the barrier every warp
//! passes once done with it (before the `dot`, or after it where its `wgmma` group stays
//! in flight).
//!
//! A store's tile, written by every thread and fenced (`fence.proxy.async`: TMA reads it
//! through the async proxy), goes out the same way after a barrier: a `global.shared::cta`
//! copy per column block, each issuing lane then waiting for its copies to complete.
//!
//! In the emulator each of these is a hook (`cuda/emulate_tma.rs`): a copy reads its box at
//! issue and lands at the first wait that sees its phase complete (its destination holds
//! NaNs until then); a store writes at once.

use super::swizzle::Swizzled;
use super::sync::{EMU_MBARRIER, EMU_TMA, EMU_TMA_STORE};
use super::Gen;
use crate::cuda::tensor_map::{BoxLoad, MAP_BYTES};
use crate::llvm::Result;
use inkwell::attributes::{Attribute, AttributeLoc};
use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::types::AnyType;
use inkwell::values::{BasicValueEnum, FunctionValue, IntValue, PointerValue};
use inkwell::IntPredicate;
use std::collections::HashMap;
use tritium_dsl::ir::{Op, Value};

/// The emulator's `mbarrier` operations (the hook's first argument).
pub(crate) const MBARRIER_INIT: u32 = 0;
pub(crate) const MBARRIER_ARRIVE_EXPECT_TX: u32 = 1;
pub(crate) const MBARRIER_TRY_WAIT: u32 = 2;
pub(crate) const MBARRIER_INVAL: u32 = 3;

/// Bytes of one `mbarrier`.
pub(super) const MBARRIER_BYTES: usize = 8;

/// A load that TMA copies: its box (the kernel's values) and its tensor map's generic
/// address (an i64).
#[derive(Clone, Copy)]
pub(super) struct TmaLoad<'ctx> {
    pub load: BoxLoad,
    pub map: IntValue<'ctx>,
    /// Bytes of an element (2, or 1 for fp8).
    pub elem: usize,
}

/// The stages' barriers of a loop whose copies are all TMA's.
#[derive(Clone, Copy)]
pub(super) struct TmaStages {
    /// Byte offset of stage 0's barrier (the others follow, 8 bytes apart).
    pub barriers: usize,
}

impl<'ctx> Gen<'ctx, '_> {
    /// Whether `x` is copied by TMA into `tile` (`columns`: stored transposed, as TMA lays
    /// out a block whose columns lie contiguous).
    pub(super) fn tma_copies(&self, x: Value, tile: &Swizzled, columns: bool) -> bool {
        self.tma.get(&x).is_some_and(|t| {
            let [outer, inner] = t.load.outer_inner();
            let size = [t.load.rows, t.load.cols];
            columns == (t.load.inner == 0)
                && (size[outer], size[inner]) == (tile.rows, tile.cols)
                && tile.elem == t.elem
        })
    }

    /// The address of stage `stage`'s barrier (an i32 stage).
    fn stage_barrier(&self, t: TmaStages, stage: IntValue<'ctx>) -> Result<PointerValue<'ctx>> {
        let b = self.b;
        let at = b.build_int_mul(stage, self.i32c(MBARRIER_BYTES as u64), "")?;
        let at = b.build_int_add(at, self.i32c(t.barriers as u64), "")?;
        self.shared_byte(at)
    }

    /// Before the loop's prologue: one lane initializes each stage's barrier to one
    /// arrival; the barrier after it makes that visible to every thread.
    pub(super) fn tma_init(&mut self, t: TmaStages, stages: usize) -> Result<()> {
        self.reserve_shared(t.barriers + stages * MBARRIER_BYTES);
        self.fence_proxy_async()?;
        let one = self.lane_of_warp(0)?;
        for s in 0..stages {
            let bar = self.stage_barrier(t, self.i32c(s as u64))?;
            self.mbarrier(MBARRIER_INIT, bar, self.i32c(1), Some(one))?;
        }
        if self.emu.is_none() {
            self.asm_statement("fence.mbarrier_init.release.cluster;")?;
        }
        self.barrier()
    }

    /// After the loop (every copy waited for, every thread past the barrier that follows
    /// it): one lane invalidates the barriers, so their memory may hold anything again.
    pub(super) fn tma_release(&mut self, t: TmaStages, stages: usize) -> Result<()> {
        let one = self.lane_of_warp(0)?;
        for s in 0..stages {
            let bar = self.stage_barrier(t, self.i32c(s as u64))?;
            self.mbarrier(MBARRIER_INVAL, bar, self.i32c(0), Some(one))?;
        }
        Ok(())
    }

    /// Fills stage `stage` (see the module docs): one lane of warp 0 expects the copies'
    /// bytes on the stage's barrier; the copies (`copies`: each load with its tile,
    /// offset by `stage_base` bytes) are dealt to the warps in turn, column block `j` of
    /// a tile to the warp after the last one's, each copy one predicated instruction that
    /// every warp runs (block `(warp − first) mod warps`, one more round per `warps`
    /// blocks), as Triton deals a wide tile's blocks.
    pub(super) fn tma_issue(
        &mut self,
        t: TmaStages,
        stage: IntValue<'ctx>,
        stage_base: IntValue<'ctx>,
        copies: &[(Value, Swizzled)],
    ) -> Result<()> {
        let b = self.b;
        let bytes: usize = copies.iter().map(|(_, tile)| tile.bytes()).sum();
        let bar = self.stage_barrier(t, stage)?;
        let one = self.lane_of_warp(0)?;
        self.mbarrier(
            MBARRIER_ARRIVE_EXPECT_TX,
            bar,
            self.i32c(bytes as u64),
            Some(one),
        )?;
        let warps = self.threads / 32;
        let warp = self.uniform_warp()?;
        let elected = self.elected()?;
        let mut first = 0;
        for (x, tile) in copies {
            let tma = self.tma[x];
            // The box's first line and element, as the load computes them.
            let [outer, inner] = tma.load.outer_inner();
            let row = self.coordinate(tma.load.offsets[outer])?;
            let col = self.coordinate(tma.load.offsets[inner])?;
            let batch = self.batch_coordinate(&tma.load)?;
            let box_cols = match tile.blocked() {
                true => 128 / tile.elem,
                false => tile.cols,
            };
            let blocks = tile.cols / box_cols;
            let shifted = b.build_int_add(warp, self.i32c((warps - first % warps) as u64), "")?;
            let mine = b.build_int_unsigned_rem(shifted, self.i32c(warps as u64), "block")?;
            for round in 0..blocks.div_ceil(warps) {
                let j = b.build_int_add(mine, self.i32c((round * warps) as u64), "")?;
                let ours =
                    b.build_int_compare(IntPredicate::ULT, j, self.i32c(blocks as u64), "")?;
                let pred = b.build_and(ours, elected, "")?;
                let at = b.build_int_mul(j, self.i32c(tile.block_bytes() as u64), "")?;
                let at = b.build_int_add(at, self.i32c(tile.offset as u64), "")?;
                let dst = self.shared_byte(b.build_int_add(stage_base, at, "")?)?;
                let c = b.build_int_mul(j, self.i32c(box_cols as u64), "")?;
                let c = b.build_int_add(col, c, "")?;
                self.bulk_tensor(dst, tma.map, (c, row, batch), Some(bar), pred)?;
            }
            first += blocks;
        }
        Ok(())
    }

    /// Stores the 16-bit `tile` of shared memory (written, fenced and behind a barrier)
    /// to the box of store `t` by TMA: one `cp.async.bulk.tensor.2d.global.shared::cta`
    /// per 128-byte column block, dealt to the warps' elected lanes as a stage's copies,
    /// each of which then waits until its copies are complete (the caller's barrier that
    /// follows frees the tile). The hardware clips the box to the tensor, as the store's
    /// mask does.
    pub(super) fn tma_store(&mut self, t: TmaLoad<'ctx>, tile: Swizzled) -> Result<()> {
        let b = self.b;
        let warps = self.threads / 32;
        let warp = self.uniform_warp()?;
        let elected = self.elected()?;
        let row = self.coordinate(t.load.offsets[0])?;
        let col = self.coordinate(t.load.offsets[1])?;
        let batch = self.batch_coordinate(&t.load)?;
        let box_cols = match tile.blocked() {
            true => 128 / tile.elem,
            false => tile.cols,
        };
        let blocks = tile.cols / box_cols;
        for round in 0..blocks.div_ceil(warps) {
            let j = b.build_int_add(warp, self.i32c((round * warps) as u64), "")?;
            let ours = b.build_int_compare(IntPredicate::ULT, j, self.i32c(blocks as u64), "")?;
            let pred = b.build_and(ours, elected, "")?;
            let at = b.build_int_mul(j, self.i32c(tile.block_bytes() as u64), "")?;
            let at = b.build_int_add(at, self.i32c(tile.offset as u64), "")?;
            let src = self.shared_byte(at)?;
            let c = b.build_int_mul(j, self.i32c(box_cols as u64), "")?;
            let c = b.build_int_add(col, c, "")?;
            self.bulk_tensor(src, t.map, (c, row, batch), None, pred)?;
        }
        if self.emu.is_some() {
            return Ok(());
        }
        let issued = b.build_int_compare(IntPredicate::ULT, warp, self.i32c(blocks as u64), "")?;
        let issued = b.build_and(issued, elected, "")?;
        // Complete, not only read: what the kernel loads later sees the stored values.
        let asm = "@$0 cp.async.bulk.commit_group;\n\t@$0 cp.async.bulk.wait_group 0;\n\t\
                   @$0 fence.proxy.async.global;";
        self.asm_call(asm, &[issued.into()], false)?;
        Ok(())
    }

    /// An i1 true in one lane of warp `warp` (see [`Self::elected`]).
    fn lane_of_warp(&mut self, warp: usize) -> Result<IntValue<'ctx>> {
        let w = self.uniform_warp()?;
        let here = (self.b).build_int_compare(IntPredicate::EQ, w, self.i32c(warp as u64), "")?;
        let one = self.elected()?;
        Ok(self.b.build_and(here, one, "")?)
    }

    /// An i1 true in one lane of each warp: `elect.sync`'s on the GPU (every lane of the
    /// warp runs it; the predicate lets `ptxas` issue a uniform-operand instruction once,
    /// with no loop), lane 0 in the emulator.
    fn elected(&mut self) -> Result<IntValue<'ctx>> {
        if self.emu.is_some() {
            let (lane, _) = self.lane_and_warp()?;
            return Ok((self.b).build_int_compare(
                IntPredicate::EQ,
                lane,
                self.i32c(0),
                "lane0",
            )?);
        }
        let asm = "{ .reg .pred p; elect.sync _|p, -1; selp.u32 $0, 1, 0, p; }";
        let r = self.asm_call(asm, &[], true)?.expect("returns an i32");
        Ok((self.b).build_int_compare(IntPredicate::NE, r, self.i32c(0), "elected")?)
    }

    /// Every thread waits until stage `stage`'s copies have landed: the barrier's phase of
    /// parity `parity` (i32, the loop's carried phase).
    pub(super) fn tma_wait(
        &mut self,
        t: TmaStages,
        stage: IntValue<'ctx>,
        parity: IntValue<'ctx>,
    ) -> Result<()> {
        let b = self.b;
        let bar = self.stage_barrier(t, stage)?;
        let wait = self.ctx.append_basic_block(self.func, "tma.wait");
        let done = self.ctx.append_basic_block(self.func, "tma.done");
        b.build_unconditional_branch(wait)?;
        b.position_at_end(wait);
        let ready = self.mbarrier(MBARRIER_TRY_WAIT, bar, parity, None)?;
        let ready = b.build_int_compare(IntPredicate::NE, ready, self.i32c(0), "")?;
        b.build_conditional_branch(ready, done, wait)?;
        b.position_at_end(done);
        Ok(())
    }

    /// The batch a box lies in (`tensor_map::Batch`): its third coordinate, `None` for a
    /// 2-D map.
    fn batch_coordinate(&mut self, load: &BoxLoad) -> Result<Option<IntValue<'ctx>>> {
        load.batch.map(|t| self.coordinate(t.index)).transpose()
    }

    /// A scalar coordinate of a box as the i32 TMA takes.
    fn coordinate(&mut self, v: Value) -> Result<IntValue<'ctx>> {
        let x = self.scalar_at(v)?.into_int_value();
        let i32t = self.ctx.i32_type();
        Ok(match x.get_type().get_bit_width() {
            32 => x,
            w if w > 32 => self.b.build_int_truncate(x, i32t, "")?,
            _ => self.b.build_int_s_extend(x, i32t, "")?,
        })
    }

    /// `mbarrier` operation `op` (`MBARRIER_*`) on the barrier at `bar` with `arg` (the
    /// arrival count, the expected bytes or the parity), where `pred` (an i1) holds if
    /// given; `try_wait` (never predicated) gives 1 once the phase of that parity is
    /// complete (else 0).
    fn mbarrier(
        &mut self,
        op: u32,
        bar: PointerValue<'ctx>,
        arg: IntValue<'ctx>,
        pred: Option<IntValue<'ctx>>,
    ) -> Result<IntValue<'ctx>> {
        let i32t = self.ctx.i32_type();
        if self.emu.is_some() {
            let mut out = self.i32c(0);
            self.when(pred, &mut |g| {
                let args = [g.i32c(u64::from(op)).into(), bar.into(), arg.into()];
                let r = g.emulator_hook(EMU_MBARRIER, &args, Some(i32t.into()))?;
                out = r.expect("returns an i32").into_int_value();
                Ok(())
            })?;
            return Ok(out);
        }
        let i64t = self.ctx.i64_type();
        let addr: BasicValueEnum<'ctx> = self.b.build_ptr_to_int(bar, i64t, "")?.into();
        let asm = match op {
            MBARRIER_INIT => "@$0 mbarrier.init.shared::cta.b64 [$1], $2;",
            MBARRIER_ARRIVE_EXPECT_TX => {
                "@$0 mbarrier.arrive.expect_tx.shared::cta.b64 _, [$1], $2;"
            }
            MBARRIER_INVAL => "@$0 mbarrier.inval.shared::cta.b64 [$1];",
            _ => {
                let asm = "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [$1], $2; \
                           selp.u32 $0, 1, 0, p; }";
                let r = self.asm_call(asm, &[addr, arg.into()], true)?;
                return Ok(r.expect("returns an i32"));
            }
        };
        let all = self.ctx.bool_type().const_all_ones();
        let args = [pred.unwrap_or(all).into(), addr, arg.into()];
        // `inval` takes no argument: `$2` is left out of its text.
        self.asm_call(asm, &args, false)?;
        Ok(self.i32c(0))
    }

    /// `cp.async.bulk.tensor.{2,3}d` between shared memory at `smem` and the box at
    /// (column, row, and the batch of a 3-D map) of the tensor map at generic address
    /// `map`, where `pred` (an i1) holds: a load completing its bytes on the barrier `to`
    /// names, or (`to` `None`) a store in this thread's bulk group.
    fn bulk_tensor(
        &mut self,
        smem: PointerValue<'ctx>,
        map: IntValue<'ctx>,
        (col, row, batch): (IntValue<'ctx>, IntValue<'ctx>, Option<IntValue<'ctx>>),
        to: Option<PointerValue<'ctx>>,
        pred: IntValue<'ctx>,
    ) -> Result<()> {
        if self.emu.is_some() {
            let batch = batch.unwrap_or(self.i32c(0));
            return self.when(Some(pred), &mut |g| {
                let mut args = vec![
                    smem.into(),
                    g.smem.into(),
                    map.into(),
                    col.into(),
                    row.into(),
                    batch.into(),
                ];
                args.extend(to.map(BasicValueEnum::from));
                let hook = if to.is_some() { EMU_TMA } else { EMU_TMA_STORE };
                g.emulator_hook(hook, &args, None)?;
                Ok(())
            });
        }
        let i64t = self.ctx.i64_type();
        let smem = self.b.build_ptr_to_int(smem, i64t, "")?.into();
        let coords: Vec<BasicValueEnum> = [Some(col), Some(row), batch]
            .into_iter()
            .flatten()
            .map(Into::into)
            .collect();
        let n = coords.len();
        // `{$a, $b(, $c)}`: the coordinates' operands from `first`.
        let braces = |first: usize| {
            let list: Vec<String> = (first..first + n).map(|i| format!("${i}")).collect();
            format!("{{{}}}", list.join(", "))
        };
        let (asm, mut args) = match to {
            Some(_) => (
                format!(
                    "@$0 cp.async.bulk.tensor.{n}d.shared::cluster.global.mbarrier::\
                     complete_tx::bytes [$1], [$2, {}], [${}];",
                    braces(3),
                    3 + n
                ),
                [vec![smem, map.into()], coords].concat(),
            ),
            None => (
                format!(
                    "@$0 cp.async.bulk.tensor.{n}d.global.shared::cta.bulk_group [$1, {}], [${}];",
                    braces(2),
                    2 + n
                ),
                [vec![map.into()], coords, vec![smem]].concat(),
            ),
        };
        if let Some(bar) = to {
            args.push(self.b.build_ptr_to_int(bar, i64t, "")?.into());
        }
        args.insert(0, pred.into());
        self.asm_call(&asm, &args, false)?;
        Ok(())
    }
}

/// The tensor-map parameter of planned map `j` of a kernel with `params` parameters and
/// the check buffer or not (they follow both).
pub(crate) fn map_param(params: usize, checked: bool, j: usize) -> usize {
    params + usize::from(checked) + j
}

impl<'ctx, 'f> Gen<'ctx, 'f> {
    /// The box accesses among the memory ops numbered `sites` (fault-site numbers), where
    /// the function still has them in that form, each by the loaded value or the stored
    /// pointers: one walk for every planned map.
    pub(super) fn box_accesses(&self, sites: &[u32]) -> HashMap<u32, (Value, BoxLoad)> {
        let mut site = 0;
        let mut found = HashMap::new();
        self.f.walk(&mut |inst| {
            if inst.op.fault_kind().is_none() {
                return;
            }
            if sites.contains(&site) {
                let key = match &inst.op {
                    Op::Store { ptr, .. } => *ptr,
                    _ => inst.results[0],
                };
                if let Some(b) = BoxLoad::of(self.f, &self.defs, inst) {
                    found.insert(site, (key, b));
                }
            }
            site += 1;
        });
        found
    }
}

/// Declares parameters `first..first + count` of kernel `func` tensor maps: 128 bytes
/// passed by value, 64-byte aligned, and `grid_constant` (read in place through a
/// generic address, where a plain by-value parameter would be copied to the stack).
pub(super) fn tensor_map_params<'ctx>(
    ctx: &'ctx Context,
    module: &Module<'ctx>,
    func: FunctionValue<'ctx>,
    first: usize,
    count: usize,
) {
    if count == 0 {
        return;
    }
    let map_ty = ctx.i8_type().array_type(MAP_BYTES as u32);
    let byval = Attribute::get_named_enum_kind_id("byval");
    let align = Attribute::get_named_enum_kind_id("align");
    let i32t = ctx.i32_type();
    let mut indices = Vec::new();
    for i in first..first + count {
        let at = AttributeLoc::Param(i as u32);
        func.add_attribute(
            at,
            ctx.create_type_attribute(byval, map_ty.as_any_type_enum()),
        );
        func.add_attribute(at, ctx.create_enum_attribute(align, 64));
        // 1-based, as NVVM numbers parameters.
        indices.push(i32t.const_int(i as u64 + 1, false).into());
    }
    let node = ctx.metadata_node(&[
        func.as_global_value().as_pointer_value().into(),
        ctx.metadata_string("grid_constant").into(),
        ctx.metadata_node(&indices).into(),
    ]);
    module
        .add_global_metadata("nvvm.annotations", &node)
        .expect("nvvm.annotations is a valid named metadata");
}
