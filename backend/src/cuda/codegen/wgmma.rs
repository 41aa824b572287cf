//! `wgmma` (Hopper, `sm_90a`): a warpgroup (4 warps) multiplies a `64 × 16` slab of `a`
//! by a `16 × N` slab of `b` (`N ≤ 256`) into its `64 × N` accumulator, asynchronously,
//! reading `b` (and `a`, unless `a` is given in registers) straight from shared memory
//! through 64-bit matrix descriptors.
//!
//! The tensor-core `dot` (`dot.rs`) takes this path where the accumulator is dealt to
//! warpgroups (`WarpRows::Interleaved`: warp `4g + q` owns rows `16 (4g + q) + 16 · warps
//! · i`, all columns, so band `i` of warpgroup `g` is one `m64nN` instruction and the
//! registers are the `m16n8` fragments the rest of the generator knows) and both
//! operands' shared tiles are in a hardware swizzle mode at an aligned offset
//! (`swizzle.rs`); otherwise it stays on `mma.sync`. Per `dot`: `wgmma.fence`, then per k
//! step and band one `wgmma.mma_async` per `N ≤ 256` columns, `commit_group` and
//! `wait_group 0`, the accumulators tied through the asm statements so LLVM cannot read
//! them early. A pipelined loop's only `dot`, accumulating into a carried value
//! (tutorial 03), waits with `wait_group 1` instead: its group stays in flight across the
//! back edge, chained onto by the next iteration's, and is waited for after the loop; the
//! next stage's copies are issued only after that wait and a barrier (`dot.rs`), as the
//! buffer they overwrite was read by the group the wait completed. The writers of the shared tiles run `fence.proxy.async` before their
//! barrier (`wgmma` reads through the async proxy).
//!
//! Descriptors (PTX ISA, "matrix descriptor"): start address `>> 4` (bits 0–13), leading
//! byte offset `>> 4` (16–29) = the distance between 128-byte column blocks, stride
//! byte offset `>> 4` (32–45) = 8 rows of the swizzle's width, swizzle mode (62–63:
//! 128 B → 1, 64 B → 2, 32 B → 3). `a` is K-major (row-major `m × k`); `b` is MN-major
//! (row-major `k × n`, `imm-trans-b = 1`) or, copied by columns, K-major. fp8 operands
//! (`m64nNk32`, no transpose immediates) are K-major both.
//!
//! In the emulator (`cuda/emulate.rs`) each thread's `wgmma` is recorded at issue (its
//! accumulators poisoned), and computed at `wait_group` from shared memory as it is
//! then, decoding the descriptors and swizzle as the hardware does.

use super::dot::MmaInputs;
use super::fragments::{MmaTiling, WarpRows};
use super::held::FragLayout;
use super::swizzle::Swizzled;
use super::sync::{EMU_WGMMA, EMU_WGMMA_WAIT};
use super::Gen;
use crate::llvm::Result;
use inkwell::types::BasicTypeEnum;
use inkwell::values::{BasicMetadataValueEnum, BasicValueEnum, IntValue};
use inkwell::AddressSpace;
use tritium_dsl::ir::DType;

/// The most columns one `wgmma` computes.
const MAX_N: usize = 256;

/// `wait_group`'s pending count that means `commit_group` to the emulator's hook.
pub(crate) const EMU_WGMMA_COMMIT: u32 = u32::MAX;

/// Where a `wgmma` `dot` finds `a`.
pub(super) enum WgmmaA<'ctx> {
    /// Its tile in shared memory, `base` bytes on (a pipeline stage, or 0).
    Shared(Swizzled, IntValue<'ctx>),
    /// Its A fragments in registers: per band, per k step, four words.
    Registers(Vec<Vec<Vec<IntValue<'ctx>>>>),
}

/// The operands of one `wgmma` `dot`.
pub(super) struct WgmmaDot<'ctx> {
    pub from: MmaInputs,
    pub layout: FragLayout,
    pub k: usize,
    pub a: WgmmaA<'ctx>,
    pub b: Swizzled,
    /// `b` stored by columns (`n × k`, K-major).
    pub b_columns: bool,
    /// Bytes on from `b`'s offset (a pipeline stage, or 0).
    pub b_base: IntValue<'ctx>,
}

impl<'ctx> Gen<'ctx, '_> {
    /// Whether a tensor-core `dot` with accumulator `layout`, `a` in `a_tile` (or, `None`,
    /// in registers) and `b` in `b_tile` runs on `wgmma`: accumulators dealt to
    /// warpgroups, swizzled tiles at aligned offsets (a pipeline's stages, `stage_bytes`
    /// apart, too).
    pub(super) fn wgmma_fits(
        &self,
        layout: FragLayout,
        a_tile: Option<&Swizzled>,
        b_tile: &Swizzled,
        stage_bytes: usize,
    ) -> bool {
        let interleaved = matches!(
            self.mma_tiling(layout),
            MmaTiling::Grid {
                rows: WarpRows::Interleaved,
                ..
            }
        );
        let fits = |t: &Swizzled| {
            t.swizzle_bytes() > 0
                && t.offset.is_multiple_of(t.alignment())
                && stage_bytes.is_multiple_of(t.alignment())
        };
        self.wgmma && interleaved && fits(b_tile) && a_tile.is_none_or(fits)
    }

    /// `fence.proxy.async.shared::cta`: this thread's shared-memory writes before it are
    /// visible to the `wgmma`s after the barrier that follows (nothing in the emulator).
    pub(super) fn fence_proxy_async(&self) -> Result<()> {
        if self.wgmma && self.emu.is_none() {
            self.asm_statement("fence.proxy.async.shared::cta;")?;
        }
        Ok(())
    }

    /// A `wgmma` `dot` (see the module docs): the accumulators `init`, in round order,
    /// after `a · b`; with `in_flight`, the `dot`'s group is left in flight (`wait_group
    /// 1`: the last one is complete) and its accumulators are waited for after the loop
    /// ([`Gen::wgmma_drain`]). `scale_d` (i32), where given, says whether the first k
    /// step adds to `init` (0: it ignores them, as they are undefined).
    pub(super) fn wgmma_dot(
        &mut self,
        d: &WgmmaDot<'ctx>,
        init: Vec<BasicValueEnum<'ctx>>,
        in_flight: bool,
        scale_d: Option<IntValue<'ctx>>,
    ) -> Result<Vec<BasicValueEnum<'ctx>>> {
        let MmaTiling::Grid { mi, ni, .. } = self.mma_tiling(d.layout) else {
            unreachable!("wgmma_fits checked the tiling")
        };
        let chunks: Vec<(usize, usize)> = (0..d.layout.n)
            .step_by(MAX_N)
            .map(|n0| (n0, MAX_N.min(d.layout.n - n0)))
            .collect();
        let count = (mi * chunks.len()) as u32;
        let ids: Vec<u32> = (self.wgmma_ids..self.wgmma_ids + count).collect();
        self.wgmma_ids += count;
        let (b, c) = (self.b, |v: u64| self.i32c(v));
        let warps = self.threads / 32;
        let warp = self.uniform_warp()?;
        let group = b.build_right_shift(warp, c(2), false, "warpgroup")?;
        // Warpgroup g's band i starts at row 64 (g + (warps / 4) i).
        let band_row = |i: usize| -> Result<IntValue<'ctx>> {
            let first = b.build_int_add(group, c((warps / 4 * i) as u64), "")?;
            Ok(b.build_int_mul(first, c(64), "")?)
        };
        let mut accs = init;
        let mut a_words = match &d.a {
            WgmmaA::Registers(words) => words.clone(),
            WgmmaA::Shared(..) => Vec::new(),
        };
        self.wgmma_fence(&mut accs, &mut a_words)?;
        // `step` also places the k slab in the descriptors, not only `a`'s words.
        let ks = d.from.k_step();
        #[allow(clippy::needless_range_loop)]
        for step in 0..d.k / ks {
            for i in 0..mi {
                let a = match &d.a {
                    WgmmaA::Shared(tile, base) => {
                        let row = band_row(i)?;
                        let desc = self.descriptor(tile, *base, Some(row), 0, ks * step)?;
                        WgmmaOperand::Descriptor(desc)
                    }
                    WgmmaA::Registers(_) => WgmmaOperand::Words(a_words[i][step].clone()),
                };
                for (ci, &(n0, n)) in chunks.iter().enumerate() {
                    let desc_b = match d.b_columns {
                        true => self.descriptor(&d.b, d.b_base, None, n0, ks * step)?,
                        false => self.descriptor(&d.b, d.b_base, None, ks * step, n0)?,
                    };
                    let first = 4 * (i * ni + n0 / 8);
                    let regs = &accs[first..first + n / 2];
                    let shape = Shape {
                        from: d.from,
                        n,
                        trans_b: !d.b_columns,
                    };
                    let scale = match (step, scale_d) {
                        (0, Some(s)) => s,
                        _ => c(1),
                    };
                    let id = ids[i * chunks.len() + ci];
                    let out = self.mma_async(shape, &a, desc_b, regs, scale, id)?;
                    accs.splice(first..first + n / 2, out);
                }
            }
        }
        self.wgmma_commit()?;
        let waited = InFlight {
            ids,
            chunks,
            mi,
            ni,
        };
        match in_flight {
            true => {
                self.wgmma_wait(1, &mut accs, &waited)?;
                self.wgmma_in_flight = Some(waited);
            }
            false => self.wgmma_wait(0, &mut accs, &waited)?,
        }
        Ok(accs)
    }

    /// After a loop whose `dot` left its group in flight: waits for it, its accumulators
    /// `accs` (the loop's result) tied through the wait.
    pub(super) fn wgmma_drain(&mut self, accs: &mut [BasicValueEnum<'ctx>]) -> Result<()> {
        match self.wgmma_in_flight.take() {
            Some(waited) => self.wgmma_wait(0, accs, &waited),
            None => Ok(()),
        }
    }

    /// The matrix descriptor of the slab of `tile` (stage `base` bytes on, a multiple of
    /// 16) at row `row_dyn + row` (slow dimension) and column `col` (fast, a multiple of
    /// 8): see the module docs. As Triton does, the start field is added to a base
    /// descriptor (addresses stay below 2^18, so it never carries out of its 14 bits): the
    /// run-time part once per stage and band, every k step's a constant.
    fn descriptor(
        &self,
        tile: &Swizzled,
        base: IntValue<'ctx>,
        row_dyn: Option<IntValue<'ctx>>,
        row: usize,
        col: usize,
    ) -> Result<IntValue<'ctx>> {
        let (b, i64t) = (self.b, self.ctx.i64_type());
        let c = |v: usize| self.i32c(v as u64);
        let col_bytes = col * tile.elem;
        let fixed = tile.offset
            + row * tile.row_stride()
            + (col_bytes / 128) * tile.block_bytes()
            + col_bytes % 128;
        let dynamic = match row_dyn {
            Some(r) => b.build_int_add(base, b.build_int_mul(r, c(tile.row_stride()), "")?, "")?,
            None => base,
        };
        // On the GPU the start is an address in the shared window; the emulator's hook
        // adds its shared memory's.
        let mut desc = i64t.const_int(descriptor_bits(tile), false);
        if self.emu.is_none() {
            let window = b.build_ptr_to_int(self.smem, i64t, "")?;
            let start = b.build_right_shift(
                b.build_and(window, i64t.const_int(0x3ffff, false), "")?,
                i64t.const_int(4, false),
                false,
                "",
            )?;
            desc = b.build_or(desc, start, "")?;
        }
        let dynamic = b.build_right_shift(dynamic, c(4), false, "")?;
        let dynamic = b.build_int_z_extend(dynamic, i64t, "")?;
        let desc = b.build_int_add(desc, dynamic, "")?;
        Ok(b.build_int_add(desc, i64t.const_int((fixed >> 4) as u64, false), "desc")?)
    }

    /// One `wgmma.mma_async` on the accumulator registers `regs` (`n / 2` floats).
    /// `scale_d` (i32): 0 to ignore the registers' values (`D = A · B`).
    fn mma_async(
        &self,
        shape: Shape,
        a: &WgmmaOperand<'ctx>,
        desc_b: IntValue<'ctx>,
        regs: &[BasicValueEnum<'ctx>],
        scale_d: IntValue<'ctx>,
        id: u32,
    ) -> Result<Vec<BasicValueEnum<'ctx>>> {
        if self.emu.is_some() {
            return self.emulator_mma_async(shape, a, desc_b, regs, scale_d, id);
        }
        let count = regs.len();
        let name = |d: DType| match d {
            DType::BF16 => "bf16",
            DType::F8E4M3 => "e4m3",
            DType::F8E5M2 => "e5m2",
            _ => "f16",
        };
        let (ta, tb) = (name(shape.from.a), name(shape.from.b));
        let outs: Vec<String> = (0..count).map(|r| format!("${r}")).collect();
        let (a_text, mut args): (String, Vec<BasicMetadataValueEnum<'ctx>>) = match a {
            WgmmaOperand::Descriptor(x) => (format!("${count}"), vec![(*x).into()]),
            WgmmaOperand::Words(w) => (
                format!(
                    "{{${}, ${}, ${}, ${}}}",
                    count,
                    count + 1,
                    count + 2,
                    count + 3
                ),
                w.iter().map(|x| (*x).into()).collect(),
            ),
        };
        let at_b = count + args.len();
        let at_scale = at_b + 1;
        // fp8 operands are K-major: the instruction takes no transpose immediates.
        let trans = match (a, shape.from.is_fp8()) {
            (_, true) => String::new(),
            (WgmmaOperand::Descriptor(_), false) => format!(", 0, {}", u8::from(shape.trans_b)),
            (WgmmaOperand::Words(_), false) => format!(", {}", u8::from(shape.trans_b)),
        };
        let asm = format!(
            "{{\n.reg .pred p;\nsetp.ne.b32 p, ${at_scale}, 0;\n\
             wgmma.mma_async.sync.aligned.m64n{n}k{k}.f32.{ta}.{tb} {{{outs}}}, {a_text}, ${at_b}, p, 1, 1{trans};\n}}",
            n = shape.n,
            k = shape.from.k_step(),
            outs = outs.join(", "),
        );
        let a_kind = match a {
            WgmmaOperand::Descriptor(_) => "l".to_string(),
            WgmmaOperand::Words(_) => "r,r,r,r".to_string(),
        };
        let tied: Vec<String> = (0..count).map(|r| r.to_string()).collect();
        let constraints = format!(
            "{},{a_kind},l,r,{},~{{memory}}",
            vec!["=f"; count].join(","),
            tied.join(",")
        );
        args.push(desc_b.into());
        args.push(scale_d.into());
        args.extend(regs.iter().map(|v| BasicMetadataValueEnum::from(*v)));
        self.tied_asm(&asm, &constraints, &args, count)
    }

    /// `wgmma.fence`, the registers the `wgmma`s read (accumulators `accs`, and `a`'s
    /// words) tied through it, so that every instruction defining them stays before it
    /// (else `ptxas` injects waits and serializes the `wgmma`s). Nothing in the emulator.
    fn wgmma_fence(
        &self,
        accs: &mut [BasicValueEnum<'ctx>],
        words: &mut [Vec<Vec<IntValue<'ctx>>>],
    ) -> Result<()> {
        if self.emu.is_some() {
            return Ok(());
        }
        let flat: Vec<IntValue<'ctx>> = words.iter().flatten().flatten().copied().collect();
        let count = accs.len() + flat.len();
        let outs: Vec<&str> = (accs.iter().map(|_| "=f"))
            .chain(flat.iter().map(|_| "=r"))
            .collect();
        let tied: Vec<String> = (0..count).map(|r| r.to_string()).collect();
        let constraints = format!("{},{},~{{memory}}", outs.join(","), tied.join(","));
        let args: Vec<BasicMetadataValueEnum<'ctx>> = (accs.iter().map(|v| (*v).into()))
            .chain(flat.iter().map(|w| (*w).into()))
            .collect();
        let fields: Vec<BasicTypeEnum<'ctx>> = (accs.iter().map(|v| v.get_type()))
            .chain(flat.iter().map(|w| w.get_type().into()))
            .collect();
        let out =
            self.asm_with_outputs("wgmma.fence.sync.aligned;", &constraints, &args, &fields)?;
        let (new_accs, new_words) = out.split_at(accs.len());
        accs.copy_from_slice(new_accs);
        let mut rest = new_words.iter();
        for w in words.iter_mut().flatten().flatten() {
            *w = rest.next().expect("one output per word").into_int_value();
        }
        Ok(())
    }

    /// `wgmma.commit_group`: this thread's `wgmma`s since the last one form a group.
    fn wgmma_commit(&self) -> Result<()> {
        match self.emu {
            Some(_) => self
                .emulator_wgmma_group(EMU_WGMMA_COMMIT, None)
                .map(|_| ()),
            None => self.asm_statement("wgmma.commit_group.sync.aligned;"),
        }
    }

    /// `wgmma.wait_group pending`: all groups but the newest `pending` complete, the
    /// accumulators `accs` of the `dot` `waited` describes tied through the wait.
    fn wgmma_wait(
        &self,
        pending: u32,
        accs: &mut [BasicValueEnum<'ctx>],
        waited: &InFlight,
    ) -> Result<()> {
        let InFlight {
            ids,
            chunks,
            mi,
            ni,
        } = waited;
        if self.emu.is_some() {
            for i in 0..*mi {
                for (ci, &(n0, n)) in chunks.iter().enumerate() {
                    let first = 4 * (i * ni + n0 / 8);
                    let range = first..first + n / 2;
                    let id = ids[i * chunks.len() + ci];
                    let regs = Some((id, &accs[range.clone()]));
                    let out = self.emulator_wgmma_group(pending, regs)?;
                    for (slot, v) in accs[range].iter_mut().zip(out) {
                        *slot = v;
                    }
                }
            }
            return Ok(());
        }
        let count = accs.len();
        let tied: Vec<String> = (0..count).map(|r| r.to_string()).collect();
        let constraints = format!(
            "{},{},~{{memory}}",
            vec!["=f"; count].join(","),
            tied.join(",")
        );
        let args: Vec<BasicMetadataValueEnum<'ctx>> = accs.iter().map(|v| (*v).into()).collect();
        let out = self.tied_asm(
            &format!("wgmma.wait_group.sync.aligned {pending};"),
            &constraints,
            &args,
            count,
        )?;
        accs.copy_from_slice(&out);
        Ok(())
    }

    /// An asm statement with side effects returning `count` floats (the outputs) from
    /// `args`.
    fn tied_asm(
        &self,
        asm: &str,
        constraints: &str,
        args: &[BasicMetadataValueEnum<'ctx>],
        count: usize,
    ) -> Result<Vec<BasicValueEnum<'ctx>>> {
        let f32t = self.ctx.f32_type();
        self.asm_with_outputs(asm, constraints, args, &vec![f32t.into(); count])
    }

    /// An asm statement with side effects and a memory clobber returning values of
    /// `fields` (the outputs) from `args`.
    fn asm_with_outputs(
        &self,
        asm: &str,
        constraints: &str,
        args: &[BasicMetadataValueEnum<'ctx>],
        fields: &[BasicTypeEnum<'ctx>],
    ) -> Result<Vec<BasicValueEnum<'ctx>>> {
        let count = fields.len();
        let ret = self.ctx.struct_type(fields, false);
        let params: Vec<inkwell::types::BasicMetadataTypeEnum<'ctx>> = args
            .iter()
            .map(|a| match a {
                BasicMetadataValueEnum::IntValue(v) => v.get_type().into(),
                BasicMetadataValueEnum::FloatValue(v) => v.get_type().into(),
                _ => unreachable!("wgmma operands are integers and floats"),
            })
            .collect();
        let fn_ty = ret.fn_type(&params, false);
        let f = self.ctx.create_inline_asm(
            fn_ty,
            asm.to_string(),
            constraints.to_string(),
            true,
            false,
            None,
            false,
        );
        let call = self.b.build_indirect_call(fn_ty, f, args, "wgmma")?;
        let st = match call.try_as_basic_value() {
            inkwell::values::ValueKind::Basic(v) => v.into_struct_value(),
            inkwell::values::ValueKind::Instruction(_) => unreachable!("returns the floats"),
        };
        (0..count as u32)
            .map(|i| Ok(self.b.build_extract_value(st, i, "")?))
            .collect()
    }

    /// The emulator's `wgmma.mma_async` (see `cuda/emulate.rs`): the accumulators go in
    /// through memory and come back poisoned.
    fn emulator_mma_async(
        &self,
        shape: Shape,
        a: &WgmmaOperand<'ctx>,
        desc_b: IntValue<'ctx>,
        regs: &[BasicValueEnum<'ctx>],
        scale_d: IntValue<'ctx>,
        id: u32,
    ) -> Result<Vec<BasicValueEnum<'ctx>>> {
        let (i32t, i64t) = (self.ctx.i32_type(), self.ctx.i64_type());
        let words = self.entry_alloca(i32t.array_type(4).into())?;
        let (desc_a, registers) = match a {
            WgmmaOperand::Descriptor(x) => (*x, false),
            WgmmaOperand::Words(w) => {
                for (i, x) in w.iter().enumerate() {
                    // SAFETY (of the generated code): within the 4 words above.
                    let p = unsafe { self.b.build_gep(i32t, words, &[self.i32c(i as u64)], "") }?;
                    self.b.build_store(p, *x)?;
                }
                (i64t.const_zero(), true)
            }
        };
        let fp8 = |d: DType| match d {
            DType::F8E4M3 => 1,
            DType::F8E5M2 => 2,
            _ => 0,
        };
        let code = u32::from(shape.from.a == DType::BF16)
            | (u32::from(shape.trans_b) << 1)
            | (u32::from(registers) << 2)
            | (fp8(shape.from.a) << 4)
            | (fp8(shape.from.b) << 6)
            | (((shape.n / 8) as u32) << 8);
        // Bit 3: scale-d is 0.
        let ignore =
            self.b
                .build_int_compare(inkwell::IntPredicate::EQ, scale_d, self.i32c(0), "")?;
        let ignore = self.b.build_int_z_extend(ignore, i32t, "")?;
        let ignore = self.b.build_left_shift(ignore, self.i32c(3), "")?;
        let code = self.b.build_or(self.i32c(u64::from(code)), ignore, "")?;
        let acc = self.accumulators_in_memory(regs)?;
        let args = [
            code.into(),
            self.i32c(u64::from(id)).into(),
            self.smem.into(),
            desc_a.into(),
            words.into(),
            desc_b.into(),
            acc.into(),
        ];
        self.emulator_hook(EMU_WGMMA, &args, None)?;
        self.accumulators_from_memory(acc, regs.len())
    }

    /// The emulator's `commit_group` (`pending` = [`EMU_WGMMA_COMMIT`]) or `wait_group
    /// pending`, which gives accumulator `id`'s registers `regs` back.
    fn emulator_wgmma_group(
        &self,
        pending: u32,
        acc: Option<(u32, &[BasicValueEnum<'ctx>])>,
    ) -> Result<Vec<BasicValueEnum<'ctx>>> {
        let ptr = self.ctx.ptr_type(AddressSpace::default());
        let (id, count, mem) = match acc {
            Some((id, regs)) => (id, regs.len(), self.accumulators_in_memory(regs)?),
            None => (0, 0, ptr.const_null()),
        };
        let args = [
            self.i32c(u64::from(pending)).into(),
            self.i32c(u64::from(id)).into(),
            self.i32c(count as u64).into(),
            mem.into(),
        ];
        self.emulator_hook(EMU_WGMMA_WAIT, &args, None)?;
        match acc {
            Some(_) => self.accumulators_from_memory(mem, count),
            None => Ok(Vec::new()),
        }
    }

    /// `regs` stored in an array of floats (in the entry block, one per size).
    fn accumulators_in_memory(
        &self,
        regs: &[BasicValueEnum<'ctx>],
    ) -> Result<inkwell::values::PointerValue<'ctx>> {
        let f32t = self.ctx.f32_type();
        let mem = self.entry_alloca(f32t.array_type(regs.len() as u32).into())?;
        for (i, v) in regs.iter().enumerate() {
            // SAFETY (of the generated code): within the array above.
            let p = unsafe { self.b.build_gep(f32t, mem, &[self.i32c(i as u64)], "") }?;
            self.b.build_store(p, *v)?;
        }
        Ok(mem)
    }

    fn accumulators_from_memory(
        &self,
        mem: inkwell::values::PointerValue<'ctx>,
        count: usize,
    ) -> Result<Vec<BasicValueEnum<'ctx>>> {
        let f32t = self.ctx.f32_type();
        (0..count)
            .map(|i| {
                // SAFETY (of the generated code): within the array of `count` floats.
                let p = unsafe { self.b.build_gep(f32t, mem, &[self.i32c(i as u64)], "") }?;
                Ok(self.b.build_load(f32t, p, "")?)
            })
            .collect()
    }
}

/// The accumulators of a `wgmma` `dot` as its waits see them: per band and column chunk
/// (`chunks`: first column, width) the emulator's number, over `mi × ni` fragment rounds.
pub(super) struct InFlight {
    ids: Vec<u32>,
    chunks: Vec<(usize, usize)>,
    mi: usize,
    ni: usize,
}

/// One `wgmma` instruction's shape.
#[derive(Clone, Copy)]
struct Shape {
    from: MmaInputs,
    n: usize,
    /// `b` is MN-major (`imm-trans-b = 1`).
    trans_b: bool,
}

/// `a` of one `wgmma`: a descriptor, or four registers.
enum WgmmaOperand<'ctx> {
    Descriptor(IntValue<'ctx>),
    Words(Vec<IntValue<'ctx>>),
}

/// A descriptor of `tile` but its start address: swizzle mode, stride byte offset (8 rows
/// of the swizzle's width) and leading byte offset (from one 128-byte column block to the
/// next).
fn descriptor_bits(tile: &Swizzled) -> u64 {
    let mode: u64 = match tile.swizzle_bytes() {
        128 => 1,
        64 => 2,
        _ => 3,
    };
    let lbo = (tile.block_bytes() as u64 >> 4) & 0x3fff;
    let sbo = ((8 * tile.row_stride()) as u64 >> 4) & 0x3fff;
    (mode << 62) | (sbo << 32) | (lbo << 16)
}

/// What the emulator's `wgmma` hook decodes (the tests' reference too): the byte offset
/// in shared memory of element `(mn, k)` (of `elem` bytes) of an operand whose
/// descriptor is `desc`, K-major (`mn` the row, `k` the column) or MN-major, after the
/// swizzle; `None` for a descriptor without a swizzle (Tritium makes none).
pub(crate) fn descriptor_element(
    desc: u64,
    mn: usize,
    k: usize,
    k_major: bool,
    elem: usize,
) -> Option<usize> {
    let field = |at: u32| (((desc >> at) & 0x3fff) << 4) as usize;
    let (start, lbo, sbo) = (field(0), field(16), field(32));
    let width = match desc >> 62 {
        1 => 128,
        2 => 64,
        3 => 32,
        _ => return None,
    };
    let per_row = width / elem;
    let plain = match k_major {
        true => {
            start + (mn / 8) * sbo + (mn % 8) * width + (k / per_row) * lbo + (k % per_row) * elem
        }
        false => {
            start + (mn / per_row) * lbo + (mn % per_row) * elem + (k / 8) * sbo + (k % 8) * width
        }
    };
    let mask = width / 16 - 1;
    Some(plain ^ (((plain >> 7) & mask) << 4))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The descriptor of a tile slab, as `Gen::descriptor` makes it for the slab at row
    /// `row` and column `col` (shared memory at 0).
    fn slab(tile: &Swizzled, row: usize, col: usize) -> u64 {
        let bytes = col * tile.elem;
        let at = tile.offset + (bytes / 128) * tile.block_bytes() + bytes % 128;
        let at = at + row * tile.row_stride();
        descriptor_bits(tile) | ((at as u64 & 0x3ffff) >> 4)
    }

    /// What the hardware reads through each descriptor (decoded as the PTX ISA says, the
    /// emulator's reference) is the element the writers of the swizzled layout put there:
    /// `a` K-major, `b` MN-major (row-major `k × n`) and K-major (by columns), in all three
    /// swizzle modes, column blocks included, at every k step and band; fp8 tiles (K-major
    /// bytes, 32-column k steps) too.
    #[test]
    fn descriptors_read_the_swizzled_layout() {
        // (rows, cols, K-major, element bytes): a `m × k` / a `b` by columns `n × k`, or
        // `b` `k × n`.
        for (rows, cols, k_major, elem) in [
            (128, 64, true, 2),
            (64, 16, true, 2),
            (64, 32, true, 2),
            (64, 192, true, 2),
            (64, 256, false, 2),
            (32, 32, false, 2),
            (16, 16, false, 2),
            (64, 128, false, 2),
            (128, 128, true, 1),
            (64, 32, true, 1),
            (64, 64, true, 1),
            (256, 256, true, 1),
        ] {
            let tile = Swizzled::of_bytes(2048, rows, cols, elem);
            assert!(tile.offset.is_multiple_of(tile.alignment()));
            // K-major: 64-row bands × 32-byte k steps; MN-major: 16-row k steps × n chunks.
            let (band, step) = match k_major {
                true => (64.min(rows), 32 / elem),
                false => (16, cols.min(256)),
            };
            for r0 in (0..rows).step_by(band) {
                for c0 in (0..cols).step_by(step) {
                    let desc = slab(&tile, r0, c0);
                    for r in 0..band {
                        for c in 0..step {
                            let (mn, k) = match k_major {
                                true => (r, c),
                                false => (c, r),
                            };
                            let got = descriptor_element(desc, mn, k, k_major, elem);
                            let want = tile.element_address(r0 + r, c0 + c);
                            assert_eq!(
                                got,
                                Some(want),
                                "{rows}×{cols} at ({r0}, {c0}) + ({r}, {c})"
                            );
                        }
                    }
                }
            }
        }
    }
}
