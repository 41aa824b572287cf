//! IR → LLVM IR for the host CPU.
//!
//! A tile value is either computed lane by lane where it is consumed (`Lv::Lazy`, see
//! [`plan`]) or materialized in a per-thread scratch buffer (`Lv::Buf`); scalars are SSA
//! registers. Every tile op becomes a loop nest over its static shape whose innermost loop
//! LLVM vectorizes. Each kernel becomes two functions:
//!
//! - `body(ptr noalias p0, …, scalars…, i32 pid_x, pid_y, pid_z, nx, ny, nz, ptr scratch, ptr ranges, ptr err)`
//! - `entry(ptr args, ptr ranges, ptr scratch, ptr err, i64 start, i64 end, i64 nx, i64 ny, i64 nz)`
//!   which unpacks 8-byte argument slots and runs programs `start..end` in order.

mod box_mask;
mod control;
mod custom;
mod debug;
mod dot;
mod lanes;
mod likely;
mod mask;
mod memory;
mod next_iteration;
mod plan;
mod prefetch;

pub use prefetch::CHUNK as LANE_CHUNK;
mod prefix;
mod reduce;
mod runs;
mod scan;
mod scopes;
mod site_checks;
mod staged;
mod types;
mod vector_lanes;

use crate::launch::checked::PARAM_WORDS;
use crate::llvm::{CodegenError, Emitter, Positioned, Result};
use inkwell::basic_block::BasicBlock;
use inkwell::builder::Builder;
use inkwell::context::Context;
use inkwell::module::{Linkage, Module};
use inkwell::values::{BasicValueEnum, FunctionValue, InstructionValue, IntValue, PointerValue};
use inkwell::AddressSpace;
use std::collections::{HashMap, HashSet};
use tritium_dsl::ir::{Block, Elem, Function, Inst, Op, Type, Value};

/// How a value is available during code generation.
#[derive(Clone, Copy)]
enum Lv<'ctx> {
    /// A scalar in a register (compute form).
    Scalar(BasicValueEnum<'ctx>),
    /// A tile in a row-major buffer (storage form).
    Buf(PointerValue<'ctx>),
    /// A tile whose lanes are computed where they are used.
    Lazy,
}

/// Whether LLVM may unroll a generated loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LoopUnroll {
    /// As LLVM decides.
    Free,
    /// Never: a body that gains nothing from unrolling but code to compile.
    Never,
    /// One vector per iteration and never unrolled: a loop over a few vectors' lanes, where
    /// copies of the body would only add code to compile.
    SingleCopy,
    /// One lane per iteration and never unrolled: code that rarely runs, where vector
    /// copies of the body would only add code to compile.
    Scalar,
}

/// Options that change the generated code.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CodegenOptions {
    /// Check every memory access against the argument buffers.
    pub bounds_check: bool,
    /// Report every checked access to the launch's race recorder, whose address follows
    /// the parameters' ranges (needs `bounds_check`).
    pub race_check: bool,
}

/// What the launcher needs to know about a generated kernel.
pub(crate) struct Generated {
    /// Bytes of per-thread scratch memory the kernel needs.
    pub scratch_bytes: usize,
}

pub(crate) struct Gen<'ctx, 'f> {
    ctx: &'ctx Context,
    module: &'f Module<'ctx>,
    b: &'f Builder<'ctx>,
    f: &'f Function,
    func: FunctionValue<'ctx>,
    defs: HashMap<Value, &'f Inst>,
    lv: HashMap<Value, Lv<'ctx>>,
    lazy: HashSet<Value>,
    /// Masks (and bool tiles) known to be all true inside the current fast-path copy (see
    /// `versioned` and `likely`).
    true_masks: HashSet<Value>,
    /// Bool tiles known all false inside the current `likely` copy (see `likely`).
    false_lanes: HashSet<Value>,
    /// Whether the function has a `likely` hint (else no region looks for one).
    has_likely: bool,
    /// The `likely` hints that the chunks of the lane loop being generated test for
    /// themselves (see `likely`).
    chunk_likely: Vec<(Value, bool)>,
    /// Pointer tiles known there to be runs along their last axis (see `runs`).
    runs: HashSet<Value>,
    /// The index mask of the masked copy being generated, true on a prefix of its lanes
    /// (see `prefix`).
    prefix: Option<prefix::PrefixSplit<'ctx>>,
    /// The hint every loop of the region being generated gets instead of its own: one
    /// vector per iteration in the masked copy of a region whose mask is a bounds check of
    /// rank 2 or more (see [`versioned`](Self::versioned)), scalar in rarely run code.
    region_loops: Option<LoopUnroll>,
    roots: HashMap<Value, Vec<usize>>,
    /// Pointers made from integers (`Function::foreign_pointers`): checked against the
    /// launch's list of every buffer, which follows the race recorder's word in `ranges`.
    foreign: HashSet<Value>,
    site_ids: HashMap<*const Inst, u32>,
    /// Outside checked mode, the accesses that are checked (see `site_checks`).
    site_checked: site_checks::SiteChecked,
    scratch: PointerValue<'ctx>,
    scratch_bytes: usize,
    /// The base of every scratch buffer, in allocation order (see `scopes`).
    buffers: Vec<PointerValue<'ctx>>,
    /// Scratch the entry zeroes before each range of programs: `(offset, bytes)`.
    cleared: Vec<(usize, usize)>,
    ranges: PointerValue<'ctx>,
    /// The launch's race recorder (race checking only; see `launch::race`).
    race: Option<PointerValue<'ctx>>,
    err: PointerValue<'ctx>,
    pids: [IntValue<'ctx>; 3],
    nprogs: [IntValue<'ctx>; 3],
    opts: CodegenOptions,
    /// How each custom call is linked (see `pipeline::link`).
    customs: &'f crate::pipeline::link::CustomEntries,
    /// Where the next program's tiles are prefetched (see `prefetch`).
    spread: Vec<prefetch::SpreadPlan>,
    /// The `for` loops around the op being generated, innermost last.
    loops: Vec<next_iteration::LoopFrame<'ctx, 'f>>,
    /// Stores whose values a Simd call may have written in place already: an i1 that
    /// holds when it did (see `custom`).
    stored_in_place: HashMap<*const Inst, IntValue<'ctx>>,
    /// The lanes of lazy pure ops already computed in the body of the lane loop being
    /// generated (see `lane_loop`), by value and index, with the block that computed them:
    /// a value several ops of one loop use is computed once there (and a DAG of them is
    /// emitted in linear, not exponential, size).
    lane_memo: HashMap<(Value, Vec<IntValue<'ctx>>), (BasicBlock<'ctx>, BasicValueEnum<'ctx>)>,
    /// Whether `lane_memo` is in use: inside a lane loop's body only, where no value is
    /// bound to anything else meanwhile (the next iteration's or program's addresses are
    /// computed outside).
    lane_memo_on: bool,
}

/// The object's constant holding the entry's scratch bytes per thread.
pub(crate) fn scratch_symbol(entry_name: &str) -> String {
    format!("{entry_name}.scratch_bytes")
}

/// Emits `body` and `entry` for `f` into `module`; the entry is named `entry_name`.
pub(crate) fn generate<'ctx>(
    ctx: &'ctx Context,
    module: &Module<'ctx>,
    f: &Function,
    entry_name: &str,
    opts: CodegenOptions,
    checked_sites: &[u32],
    customs: &crate::pipeline::link::CustomEntries,
) -> Result<Generated> {
    // Carried pointer tiles as offsets; the fault sites keep their numbers.
    let rewritten = crate::pipeline::link::with_pointer_offsets(f, customs);
    let (f, customs) = rewritten.as_ref().map_or((f, customs), |(g, c)| (g, c));
    let b = ctx.create_builder();
    let ptr = ctx.ptr_type(AddressSpace::default());
    let i32t = ctx.i32_type();
    let i64t = ctx.i64_type();

    // The body function.
    let mut params = Vec::new();
    for p in &f.params {
        let t = f.ty(p.value);
        params.push(match t.elem {
            Elem::Ptr(_) => ptr.into(),
            Elem::Scalar(d) => compute_ty_of(ctx, d).into(),
        });
    }
    params.extend(std::iter::repeat_n(
        inkwell::types::BasicMetadataTypeEnum::from(i32t),
        6,
    ));
    params.extend(std::iter::repeat_n(
        inkwell::types::BasicMetadataTypeEnum::from(ptr),
        3,
    ));
    let body_ty = ctx.void_type().fn_type(&params, false);
    let body_fn = module.add_function(
        &format!("{entry_name}_body"),
        body_ty,
        Some(Linkage::Internal),
    );
    // Called, not inlined, from the entry's program loop. Inlined, the body went through
    // O3's simplification pipeline twice (alone, then again inside the entry): a third of
    // matmul's O3 phase and a quarter of softmax's. Inlined before the function passes
    // instead (`alwaysinline`), its `noalias` parameters became alias-scope metadata and
    // tutorial 03 ran at 0.7 of its speed. The call costs nanoseconds per program.
    let noinline = inkwell::attributes::Attribute::get_named_enum_kind_id("noinline");
    body_fn.add_attribute(
        inkwell::attributes::AttributeLoc::Function,
        ctx.create_enum_attribute(noinline, 0),
    );
    let noalias = inkwell::attributes::Attribute::get_named_enum_kind_id("noalias");
    for (i, p) in f.params.iter().enumerate() {
        if f.ty(p.value).elem.pointee().is_some() {
            body_fn.add_attribute(
                inkwell::attributes::AttributeLoc::Param(i as u32),
                ctx.create_enum_attribute(noalias, 0),
            );
        }
    }
    let n = f.params.len() as u32;
    body_fn.add_attribute(
        inkwell::attributes::AttributeLoc::Param(n + 6),
        ctx.create_enum_attribute(noalias, 0),
    );
    let entry_bb = ctx.append_basic_block(body_fn, "entry");
    b.position_at_end(entry_bb);
    let arg = |k: u32| body_fn.get_nth_param(k).expect("declared above");
    let lazy = plan::lazy_values(
        f,
        &customs
            .iter()
            .filter(|(_, e)| e.per_element)
            .map(|(i, _)| *i)
            .collect(),
    );
    let spread = prefetch::plan_spread(f, &lazy);
    let mut g = Gen {
        ctx,
        module,
        b: &b,
        f,
        func: body_fn,
        defs: HashMap::new(),
        lv: HashMap::new(),
        lazy,
        true_masks: HashSet::new(),
        false_lanes: HashSet::new(),
        has_likely: likely::any_in(f),
        chunk_likely: Vec::new(),
        runs: HashSet::new(),
        prefix: None,
        region_loops: None,
        roots: f.pointer_roots(),
        foreign: f.foreign_pointers(),
        site_ids: HashMap::new(),
        site_checked: Default::default(),
        scratch: arg(n + 6).into_pointer_value(),
        scratch_bytes: 0,
        buffers: Vec::new(),
        cleared: Vec::new(),
        ranges: arg(n + 7).into_pointer_value(),
        race: None,
        err: arg(n + 8).into_pointer_value(),
        pids: [0, 1, 2].map(|k| arg(n + k).into_int_value()),
        nprogs: [3, 4, 5].map(|k| arg(n + k).into_int_value()),
        opts,
        customs,
        spread,
        loops: Vec::new(),
        stored_in_place: HashMap::new(),
        lane_memo: HashMap::new(),
        lane_memo_on: false,
    };
    if opts.race_check {
        // After the check words of every parameter.
        let at = i64t.const_int(PARAM_WORDS as u64 * u64::from(n), false);
        // SAFETY (of the generated code): the launcher passes the race word in race mode.
        let p = unsafe { b.build_gep(i64t, g.ranges, &[at], "") }?;
        let word = b.build_load(i64t, p, "recorder")?.into_int_value();
        g.race = Some(b.build_int_to_ptr(word, ptr, "")?);
    }
    index_insts(&f.body, &mut g.defs, &mut g.site_ids);
    g.site_checked = site_checks::SiteChecked::new(f, checked_sites);
    for (i, p) in f.params.iter().enumerate() {
        g.lv.insert(p.value, Lv::Scalar(arg(i as u32)));
    }
    g.block(&f.body)?;
    b.build_return(None)?;
    scopes::annotate(ctx, body_fn, &g.buffers, entry_name);
    let scratch_bytes = g.scratch_bytes;
    // The scratch size travels inside the object, where the loader reads it: a disk-cache
    // entry's header cannot make this code run with less scratch than it uses.
    let size = module.add_global(i64t, None, &scratch_symbol(entry_name));
    size.set_initializer(&i64t.const_int(scratch_bytes as u64, false));
    size.set_constant(true);
    size.set_linkage(Linkage::External);

    // The entry function: unpack argument slots, loop over programs.
    let entry_ty = ctx.void_type().fn_type(
        &[
            ptr.into(),
            ptr.into(),
            ptr.into(),
            ptr.into(),
            i64t.into(),
            i64t.into(),
            i64t.into(),
            i64t.into(),
            i64t.into(),
        ],
        false,
    );
    let entry = module.add_function(entry_name, entry_ty, Some(Linkage::External));
    let ep = |k: u32| entry.get_nth_param(k).expect("declared above");
    let bb = ctx.append_basic_block(entry, "entry");
    b.position_at_end(bb);
    let args_ptr = ep(0).into_pointer_value();
    let mut call_args: Vec<inkwell::values::BasicMetadataValueEnum> = Vec::new();
    for (k, p) in f.params.iter().enumerate() {
        // SAFETY (of the generated code): `args` holds one 8-byte slot per parameter.
        let slot =
            unsafe { b.build_gep(i64t, args_ptr, &[i64t.const_int(k as u64, false)], "slot") }?;
        let t = f.ty(p.value);
        let v = match t.elem {
            Elem::Ptr(_) => b.build_load(ptr, slot, "p")?,
            Elem::Scalar(_) => {
                let raw = b.build_load(g.elem_storage_ty(t.elem), slot, "s")?;
                g.decode_storage(raw, t.elem)?
            }
        };
        call_args.push(v.into());
    }
    let (start, end) = (ep(4).into_int_value(), ep(5).into_int_value());
    let (nx, ny) = (ep(6).into_int_value(), ep(7).into_int_value());
    let nz = ep(8).into_int_value();
    let err = ep(3).into_pointer_value();
    let header = ctx.append_basic_block(entry, "program");
    let run = ctx.append_basic_block(entry, "run");
    let done = ctx.append_basic_block(entry, "done");
    for &(offset, bytes) in &g.cleared {
        // SAFETY (of the generated code): the launcher allocates `scratch_bytes` per thread.
        let at = unsafe {
            b.build_gep(
                ctx.i8_type(),
                ep(2).into_pointer_value(),
                &[i64t.const_int(offset as u64, false)],
                "cleared",
            )
        }?;
        b.build_memset(
            at,
            64,
            ctx.i8_type().const_zero(),
            i64t.const_int(bytes as u64, false),
        )?;
    }
    let has_work = b.build_int_compare(inkwell::IntPredicate::ULT, start, end, "")?;
    b.build_conditional_branch(has_work, header, done)?;
    b.position_at_end(header);
    let pid = b.build_phi(i64t, "pid")?;
    pid.add_incoming(&[(&start, bb)]);
    let p = pid.as_basic_value().into_int_value();
    let fault = b.build_load(i64t, err, "fault")?.into_int_value();
    let ok = b.build_int_compare(inkwell::IntPredicate::EQ, fault, i64t.const_zero(), "")?;
    b.build_conditional_branch(ok, run, done)?;
    b.position_at_end(run);
    let x = b.build_int_unsigned_rem(p, nx, "")?;
    let q = b.build_int_unsigned_div(p, nx, "")?;
    let y = b.build_int_unsigned_rem(q, ny, "")?;
    let z = b.build_int_unsigned_div(q, ny, "")?;
    let mut all = call_args.clone();
    for v in [x, y, z, nx, ny, nz] {
        all.push(b.build_int_truncate(v, i32t, "")?.into());
    }
    for k in [2, 1, 3] {
        all.push(ep(k).into());
    }
    b.build_call(body_fn, &all, "")?;
    let next = b.build_int_add(p, i64t.const_int(1, false), "")?;
    pid.add_incoming(&[(&next, run)]);
    let more = b.build_int_compare(inkwell::IntPredicate::ULT, next, end, "")?;
    b.build_conditional_branch(more, header, done)?;
    b.position_at_end(done);
    b.build_return(None)?;
    Ok(Generated { scratch_bytes })
}

/// Records each value's defining op and numbers memory ops in walk order.
fn index_insts<'f>(
    b: &'f Block,
    defs: &mut HashMap<Value, &'f Inst>,
    sites: &mut HashMap<*const Inst, u32>,
) {
    for inst in &b.insts {
        for r in &inst.results {
            defs.insert(*r, inst);
        }
        if inst.op.fault_kind().is_some() {
            let id = sites.len() as u32;
            sites.insert(inst as *const Inst, id);
        }
        for r in inst.op.regions() {
            index_insts(r, defs, sites);
        }
    }
}

fn compute_ty_of(ctx: &Context, d: tritium_dsl::DType) -> inkwell::types::BasicTypeEnum<'_> {
    use tritium_dsl::DType::*;
    match d {
        Bool => ctx.bool_type().into(),
        I8 | U8 => ctx.i8_type().into(),
        I16 | U16 => ctx.i16_type().into(),
        I32 | U32 => ctx.i32_type().into(),
        I64 | U64 => ctx.i64_type().into(),
        F16 | BF16 | F32 | F8E4M3 | F8E5M2 | F8E4B15 => ctx.f32_type().into(),
        F64 => ctx.f64_type().into(),
    }
}

impl<'ctx, 'f> Gen<'ctx, 'f> {
    fn ty(&self, v: Value) -> &'f Type {
        self.f.ty(v)
    }

    fn i64c(&self, n: u64) -> IntValue<'ctx> {
        self.ctx.i64_type().const_int(n, false)
    }

    /// Reserves a 64-byte-aligned scratch buffer for a tile of `ty`.
    fn alloc_buf(&mut self, ty: &Type) -> Result<PointerValue<'ctx>> {
        self.alloc_bytes(ty.numel() * self.elem_size(ty.elem))
    }

    /// Reserves a 64-byte-aligned scratch buffer that the entry zeroes before each range
    /// of programs (the body's calls in between keep what it holds).
    fn alloc_cleared(&mut self, bytes: usize) -> Result<PointerValue<'ctx>> {
        let buf = self.alloc_bytes(bytes)?;
        self.cleared.push((self.scratch_bytes - bytes, bytes));
        Ok(buf)
    }

    /// Reserves a 64-byte-aligned scratch buffer of `bytes` bytes.
    fn alloc_bytes(&mut self, bytes: usize) -> Result<PointerValue<'ctx>> {
        let offset = self.scratch_bytes.div_ceil(64) * 64;
        self.scratch_bytes = offset + bytes;
        // SAFETY (of the generated code): the launcher allocates `scratch_bytes` per thread.
        let buf = unsafe {
            self.b.build_gep(
                self.ctx.i8_type(),
                self.scratch,
                &[self.i64c(offset as u64)],
                "buf",
            )
        }?;
        self.buffers.push(buf);
        Ok(buf)
    }

    /// Address of element `idx` (row-major) of a buffer holding a tile of `ty`.
    fn buf_elem(
        &self,
        buf: PointerValue<'ctx>,
        ty: &Type,
        idx: &[IntValue<'ctx>],
    ) -> Result<PointerValue<'ctx>> {
        let lin = self.ravel(&ty.shape, idx)?;
        // SAFETY (of the generated code): `idx` is within `ty.shape`.
        Ok(unsafe {
            self.b
                .build_gep(self.elem_storage_ty(ty.elem), buf, &[lin], "el")
        }?)
    }

    /// Row-major linear index of `idx` in `shape`.
    fn ravel(&self, shape: &[usize], idx: &[IntValue<'ctx>]) -> Result<IntValue<'ctx>> {
        let mut lin = self.i64c(0);
        for (k, i) in idx.iter().enumerate() {
            let stride: usize = shape[k + 1..].iter().product();
            let term = if stride == 1 {
                *i
            } else {
                self.b.build_int_mul(*i, self.i64c(stride as u64), "")?
            };
            lin = if k == 0 {
                term
            } else {
                self.b.build_int_add(lin, term, "")?
            };
        }
        Ok(lin)
    }

    /// Emits a loop nest over `shape` (row-major, innermost last) around `body`.
    fn loop_nest(
        &mut self,
        shape: &[usize],
        body: &mut dyn FnMut(&mut Self, &[IntValue<'ctx>]) -> Result<()>,
    ) -> Result<()> {
        let mut idx = Vec::with_capacity(shape.len());
        self.loop_level(shape, &mut idx, body)
    }

    /// [`loop_nest`](Self::loop_nest) whose outer loops LLVM may not unroll (the last
    /// one it may): for copies whose rows are vectorized already, where unrolling the rows
    /// only adds code to compile.
    fn loop_nest_rows_rolled(
        &mut self,
        shape: &[usize],
        body: &mut dyn FnMut(&mut Self, &[IntValue<'ctx>]) -> Result<()>,
    ) -> Result<()> {
        let mut idx = Vec::with_capacity(shape.len());
        self.loop_level_with(shape, &mut idx, LoopUnroll::Never, body)
    }

    fn loop_level(
        &mut self,
        shape: &[usize],
        idx: &mut Vec<IntValue<'ctx>>,
        body: &mut dyn FnMut(&mut Self, &[IntValue<'ctx>]) -> Result<()>,
    ) -> Result<()> {
        self.loop_level_with(shape, idx, LoopUnroll::Free, body)
    }

    /// One level of a loop nest: `outer` for every loop but the last, which is free.
    fn loop_level_with(
        &mut self,
        shape: &[usize],
        idx: &mut Vec<IntValue<'ctx>>,
        outer: LoopUnroll,
        body: &mut dyn FnMut(&mut Self, &[IntValue<'ctx>]) -> Result<()>,
    ) -> Result<()> {
        if idx.len() == shape.len() {
            return body(self, idx);
        }
        if idx.is_empty() && shape.len() == 1 && self.split_lane_loop(shape[0], body)? {
            return Ok(());
        }
        let n = shape[idx.len()];
        let unroll = match idx.len() + 1 == shape.len() {
            true => LoopUnroll::Free,
            false => outer,
        };
        self.counted_loop(n, unroll, &mut |g, i| {
            idx.push(i);
            g.loop_level_with(shape, idx, outer, body)?;
            idx.pop();
            Ok(())
        })
    }

    /// A loop `i = 0..count` around `body` (no loop for one iteration); `unroll` says
    /// whether LLVM may unroll it.
    fn counted_loop(
        &mut self,
        count: usize,
        unroll: LoopUnroll,
        body: &mut dyn FnMut(&mut Self, IntValue<'ctx>) -> Result<()>,
    ) -> Result<()> {
        if count == 1 {
            return body(self, self.i64c(0));
        }
        let pre = self.b.current_block()?;
        let header = self.ctx.append_basic_block(self.func, "loop");
        let exit = self.ctx.append_basic_block(self.func, "loop.end");
        self.b.build_unconditional_branch(header)?;
        self.b.position_at_end(header);
        let phi = self.b.build_phi(self.ctx.i64_type(), "i")?;
        phi.add_incoming(&[(&self.i64c(0), pre)]);
        let i = phi.as_basic_value().into_int_value();
        body(self, i)?;
        let latch = self.b.current_block()?;
        let next = self.b.build_int_add(i, self.i64c(1), "")?;
        phi.add_incoming(&[(&next, latch)]);
        let more = self.b.build_int_compare(
            inkwell::IntPredicate::ULT,
            next,
            self.i64c(count as u64),
            "",
        )?;
        let back = self.b.build_conditional_branch(more, header, exit)?;
        self.loop_hint(back, unroll);
        self.b.position_at_end(exit);
        Ok(())
    }

    /// Marks the loop whose back edge is `back` with `unroll`, or with the region's hint.
    fn loop_hint(&self, back: InstructionValue<'ctx>, unroll: LoopUnroll) {
        match self.region_loops.unwrap_or(unroll) {
            LoopUnroll::Free => {}
            LoopUnroll::Never => self.emit().unroll_hint(back, 1),
            LoopUnroll::SingleCopy => self.emit().single_copy_hint(back),
            LoopUnroll::Scalar => self.emit().scalar_loop_hint(back),
        }
    }

    /// `body` generated with every loop marked `unroll` (see `region_loops`).
    fn with_region_loops<T>(&mut self, unroll: LoopUnroll, body: impl FnOnce(&mut Self) -> T) -> T {
        let outer = self.region_loops.replace(unroll);
        let r = body(self);
        self.region_loops = outer;
        r
    }

    /// The lane `idx` of value `v` (compute form).
    fn lane(&mut self, v: Value, idx: &[IntValue<'ctx>]) -> Result<BasicValueEnum<'ctx>> {
        if self.true_masks.contains(&v) || self.in_true_prefix(v, idx) {
            return Ok(self.ctx.bool_type().const_all_ones().into());
        }
        if self.false_lanes.contains(&v) || self.in_false_past_prefix(v, idx) {
            return Ok(self.ctx.bool_type().const_zero().into());
        }
        if self.runs.contains(&v) || self.in_prefix_run(v, idx) {
            if let Some(p) = self.run_lane(v, idx)? {
                return Ok(p);
            }
        }
        match self.lv.get(&v).copied() {
            Some(Lv::Scalar(s)) => Ok(s),
            Some(Lv::Buf(buf)) => {
                let ty = self.ty(v);
                let p = self.buf_elem(buf, ty, idx)?;
                let raw = self.b.build_load(self.elem_storage_ty(ty.elem), p, "")?;
                Ok(self.decode_storage(raw, ty.elem)?)
            }
            Some(Lv::Lazy) => {
                // A fused op's code is emitted here, inside the op that uses it: an
                // error names the fused op.
                let inst = self.defs[&v];
                if !self.lane_memo_on || !inst.op.is_pointwise() {
                    return self.op_lane(inst, idx).map_err(|e| e.at(inst));
                }
                // A pure lane computed earlier in this block is reused (a value defined
                // earlier in the same block dominates this use).
                let key = (v, idx.to_vec());
                let here = self.b.current_block()?;
                if let Some((bb, x)) = self.lane_memo.get(&key) {
                    if *bb == here {
                        return Ok(*x);
                    }
                }
                let x = self.op_lane(inst, idx).map_err(|e| e.at(inst))?;
                let bb = self.b.current_block()?;
                self.lane_memo.insert(key, (bb, x));
                Ok(x)
            }
            None => Err(CodegenError::internal(format!(
                "{v} used before it was generated (the verifier forbids this)"
            ))),
        }
    }

    /// Makes `v` available as a buffer (materializing a lazy tile).
    fn as_buf(&mut self, v: Value) -> Result<PointerValue<'ctx>> {
        if let Some(Lv::Buf(p)) = self.lv.get(&v) {
            return Ok(*p);
        }
        let ty = self.ty(v).clone();
        let buf = self.alloc_buf(&ty)?;
        self.fill_buf(buf, &ty, v)?;
        Ok(buf)
    }

    /// Writes every lane of `v` into `buf` (a buffer of `ty`).
    fn fill_buf(&mut self, buf: PointerValue<'ctx>, ty: &Type, v: Value) -> Result<()> {
        self.fill_buf_spread(buf, ty, v, &[])
    }

    /// [`fill_buf`](Self::fill_buf) in a loop that also carries the `spread` prefetches.
    fn fill_buf_spread(
        &mut self,
        buf: PointerValue<'ctx>,
        ty: &Type,
        v: Value,
        spread: &[(Value, bool)],
    ) -> Result<()> {
        let elem = ty.elem;
        let mask = self.load_mask_in(v);
        self.versioned_lane_loop(mask, (&[v], &[]), &ty.shape, &mut |g| {
            g.lane_loop(&ty.shape.clone(), (&[v], &[]), spread, &mut |g, idx| {
                let x = g.lane(v, idx)?;
                let s = g.to_storage(x, elem)?;
                let p = g.buf_elem(buf, ty, idx)?;
                g.b.build_store(p, s)?;
                Ok(None)
            })
        })
    }

    /// Emits `emit` twice behind a test of whether every lane of `mask` is true: the fast
    /// copy treats the mask (and every memory op sharing it) as all-true, so full blocks
    /// get plain vector loads and stores; only partial blocks pay for masked accesses.
    /// `roots` are the values `emit` evaluates and the pointer tiles it accesses itself:
    /// the fast copy also requires their accessed pointer tiles that are runs along the
    /// last axis not to wrap, and computes their lanes as runs (see `runs`).
    ///
    /// The masked copy of a bounds check of rank 2 or more (a `dot` operand's K edge, a
    /// store's edge rows and columns) runs in edge blocks only: its loops stay one vector
    /// per iteration, not interleaved or unrolled (matmul's cold compile took a fifth less
    /// time, its 1000³ run the same).
    ///
    /// An index mask true on a prefix of its lanes (see `prefix`) gets one copy instead, the
    /// masked one, whose loops take the prefix with the mask known true, when its runs
    /// need no run-time check or are offset by the mask's own index (exact below the
    /// prefix): full blocks run as fast, and the kernel has half the code to compile
    /// (softmax's cold compile took a quarter less time).
    ///
    /// Around those copies, the `likely` hints the lanes read get theirs (see `likely`).
    fn versioned(
        &mut self,
        mask: Option<Value>,
        (roots, pointers): (&[Value], &[Value]),
        emit: &mut dyn FnMut(&mut Self) -> Result<()>,
    ) -> Result<()> {
        self.versioned_lanes(mask, (roots, pointers), None, emit)
    }

    /// [`versioned`](Self::versioned) of one [`lane_loop`](Self::lane_loop) over `shape`
    /// per copy: over a rank-1 tile of whole chunks, its chunks test the `likely` hints
    /// for themselves.
    fn versioned_lane_loop(
        &mut self,
        mask: Option<Value>,
        (roots, pointers): (&[Value], &[Value]),
        shape: &[usize],
        emit: &mut dyn FnMut(&mut Self) -> Result<()>,
    ) -> Result<()> {
        self.versioned_lanes(mask, (roots, pointers), Some(shape), emit)
    }

    /// [`versioned`](Self::versioned), or with `lane_loop` its form for one lane loop over
    /// that shape per copy ([`versioned_lane_loop`](Self::versioned_lane_loop)).
    fn versioned_lanes(
        &mut self,
        mask: Option<Value>,
        (roots, pointers): (&[Value], &[Value]),
        lane_loop: Option<&[usize]>,
        emit: &mut dyn FnMut(&mut Self) -> Result<()>,
    ) -> Result<()> {
        let read: Vec<Value> = roots.iter().chain(pointers).chain(&mask).copied().collect();
        self.versioned_likely(&read, lane_loop, &mut |g| {
            g.versioned_masks(mask, (roots, pointers), emit)
        })
    }

    /// [`versioned`](Self::versioned) but for the `likely` hints.
    fn versioned_masks(
        &mut self,
        mask: Option<Value>,
        (roots, pointers): (&[Value], &[Value]),
        emit: &mut dyn FnMut(&mut Self) -> Result<()>,
    ) -> Result<()> {
        let Some(m) = mask.filter(|m| !self.true_masks.contains(m) && !self.ty(*m).is_scalar())
        else {
            return self.versioned_runs((roots, pointers), emit);
        };
        // The mask's own shape: a load found through a reshape has a mask of another
        // shape than the tile being filled (the fuzzer's seed 100106 indexed a [32] mask
        // with [16, 2] lanes).
        let mask_shape = self.ty(m).shape.clone();
        // Every value computing the same lanes as `m` is all true in the fast copy.
        let same = plan::equivalents(self.f, m);
        let runs = self.runs_in(roots, pointers, &same);
        let (runs_hold, checked) = self.runs_hold(&runs)?;
        let split = self.prefix_split(m, &same)?;
        if let Some(s) = split.as_ref() {
            if checked.iter().all(|r| s.exact_below_p(r)) {
                let checked: Vec<Value> = checked.iter().map(|r| r.ptr).collect();
                let split = s.with_runs(checked.clone());
                let (prefix_before, runs_before) = (self.prefix.replace(split), self.runs.clone());
                let fixed = runs.iter().map(|r| r.ptr).filter(|p| !checked.contains(p));
                self.runs.extend(fixed);
                let result = emit(self);
                (self.prefix, self.runs) = (prefix_before, runs_before);
                return result;
            }
        }
        let (all, bounds_check) = self.all_lanes_true_form(m, &mask_shape)?;
        let all = self.b.build_and(all, runs_hold, "")?;
        let fast = self.ctx.append_basic_block(self.func, "mask.full");
        let slow = self.ctx.append_basic_block(self.func, "mask.partial");
        let done = self.ctx.append_basic_block(self.func, "mask.done");
        self.b.build_conditional_branch(all, fast, slow)?;
        self.b.position_at_end(fast);
        let (masks_before, runs_before) = (self.true_masks.clone(), self.runs.clone());
        self.true_masks.extend(same.iter().copied());
        self.runs.extend(runs.iter().map(|r| r.ptr));
        let fast_result = emit(self);
        (self.true_masks, self.runs) = (masks_before, runs_before);
        fast_result?;
        self.b.build_unconditional_branch(done)?;
        self.b.position_at_end(slow);
        let (outer, loops_before) = (self.prefix.clone(), self.region_loops);
        if split.is_some() {
            self.prefix = split;
        } else if bounds_check && mask_shape.len() >= 2 {
            self.region_loops = Some(LoopUnroll::SingleCopy);
        }
        let slow_result = emit(self);
        (self.prefix, self.region_loops) = (outer, loops_before);
        slow_result?;
        self.b.build_unconditional_branch(done)?;
        self.b.position_at_end(done);
        Ok(())
    }

    /// [`versioned`](Self::versioned) for a region under no mask (or one known all true):
    /// its unmasked accesses of pointer tiles that are runs along the last axis would
    /// compute each lane from a sign-extended narrow offset, which LLVM reads and writes
    /// with gathers and scatters (an unmasked `64 × 128` `dot` operand was packed by
    /// 512-bit gathers). Behind the test that the runs hold, the fast copy takes their lanes
    /// as runs; the other copy, for offsets that wrap, runs one lane per iteration.
    fn versioned_runs(
        &mut self,
        (roots, pointers): (&[Value], &[Value]),
        emit: &mut dyn FnMut(&mut Self) -> Result<()>,
    ) -> Result<()> {
        let known: Vec<Value> = self.true_masks.iter().copied().collect();
        let runs: Vec<_> = self
            .runs_in(roots, pointers, &known)
            .into_iter()
            .filter(|r| !self.runs.contains(&r.ptr))
            .collect();
        if runs.is_empty() {
            return emit(self);
        }
        let (hold, checked) = self.runs_hold(&runs)?;
        let unchecked = checked.is_empty();
        let runs_before = self.runs.clone();
        self.runs.extend(runs.iter().map(|r| r.ptr));
        if unchecked {
            let result = emit(self);
            self.runs = runs_before;
            return result;
        }
        let fast = self.ctx.append_basic_block(self.func, "runs.hold");
        let slow = self.ctx.append_basic_block(self.func, "runs.wrap");
        let done = self.ctx.append_basic_block(self.func, "runs.done");
        self.b.build_conditional_branch(hold, fast, slow)?;
        self.b.position_at_end(fast);
        let fast_result = emit(self);
        self.runs = runs_before;
        fast_result?;
        self.b.build_unconditional_branch(done)?;
        self.b.position_at_end(slow);
        self.with_region_loops(LoopUnroll::Scalar, |g| emit(g))?;
        self.b.build_unconditional_branch(done)?;
        self.b.position_at_end(done);
        Ok(())
    }

    /// The i1 that every one of `runs` holds ([`run_holds`](Self::run_holds)), and the runs
    /// whose check is not constant true.
    fn runs_hold<'r>(
        &mut self,
        runs: &'r [custom::Direct],
    ) -> Result<(IntValue<'ctx>, Vec<&'r custom::Direct>)> {
        let mut checked = Vec::new();
        let mut all = self.ctx.bool_type().const_all_ones();
        for r in runs {
            let holds = self.run_holds(r)?;
            if holds.get_zero_extended_constant() != Some(1) {
                checked.push(r);
                all = self.b.build_and(all, holds, "")?;
            }
        }
        Ok((all, checked))
    }

    /// Generates the ops of a block (not its terminator).
    fn block(&mut self, block: &'f Block) -> Result<()> {
        for inst in &block.insts {
            #[cfg(test)]
            crate::llvm::inject::before(self.b, inst);
            self.inst(inst).map_err(|e| e.at(inst))?;
        }
        Ok(())
    }

    /// Generates one op; its errors are wrapped in the op's context by [`Self::block`].
    fn inst(&mut self, inst: &'f Inst) -> Result<()> {
        match &inst.op {
            Op::Yield(_) | Op::Condition(_) => {}
            Op::ProgramId(a) => {
                self.lv
                    .insert(inst.results[0], Lv::Scalar(self.pids[*a as usize].into()));
            }
            Op::NumPrograms(a) => {
                self.lv
                    .insert(inst.results[0], Lv::Scalar(self.nprogs[*a as usize].into()));
            }
            Op::Store { .. } => self.store(inst)?,
            Op::Atomic { .. } | Op::AtomicCas { .. } => self.atomic(inst)?,
            Op::Assert { .. } => self.device_assert(inst)?,
            Op::Print { .. } => self.device_print(inst)?,
            Op::Reduce { .. } => self.reduce(inst)?,
            Op::Scan { .. } => self.scan(inst)?,
            Op::Dot { .. } => self.dot(inst)?,
            Op::For { .. } => self.for_loop(inst)?,
            Op::If { .. } => self.if_else(inst)?,
            Op::While { .. } => self.while_loop(inst)?,
            Op::Custom(_) => self.custom(inst)?,
            op if op.is_elementwise() => {
                if let Op::Load { ptr, .. } = op {
                    self.prefetch_next_load(inst.results[0], *ptr)?;
                }
                let r = inst.results[0];
                let ty = self.ty(r);
                if ty.is_scalar() {
                    let s = self.op_lane(inst, &[])?;
                    self.lv.insert(r, Lv::Scalar(s));
                } else if self.lazy.contains(&r) {
                    self.lv.insert(r, Lv::Lazy);
                } else {
                    let ty = ty.clone();
                    let buf = self.alloc_buf(&ty)?;
                    let elem = ty.elem;
                    let mask = match &inst.op {
                        Op::Load { mask, .. } => *mask,
                        op => op.operands().into_iter().find_map(|o| self.load_mask_in(o)),
                    };
                    let sums = self.fused_sums(r)?;
                    let spread = self.spread_here(inst);
                    let roots = match &inst.op {
                        Op::Load { ptr, .. } => (vec![], vec![*ptr]),
                        op => (op.operands(), vec![]),
                    };
                    // Its chunks test the hints only where each lane reads its operands
                    // at its own index (not a gather's, a flip's… source).
                    let shape = ty.shape.clone();
                    let lanes = likely::reads_own_lanes(&inst.op).then_some(&shape[..]);
                    self.versioned_lanes(mask, (&roots.0, &roots.1), lanes, &mut |g| {
                        // Staged only where the op reads its operands at its own lanes:
                        // a stage's rings hold its chunk's lanes only.
                        let read: Vec<Value> = match lanes {
                            Some(_) => roots.0.iter().chain(&roots.1).copied().collect(),
                            None => Vec::new(),
                        };
                        g.lane_loop(&shape, (&read, &sums), &spread, &mut |g, idx| {
                            let x = g.op_lane(inst, idx)?;
                            let s = g.to_storage(x, elem)?;
                            let p = g.buf_elem(buf, &ty, idx)?;
                            g.b.build_store(p, s)?;
                            Ok(Some(x))
                        })
                    })?;
                    self.fused_sums_finish(&sums)?;
                    self.lv.insert(r, Lv::Buf(buf));
                }
            }
            op => {
                return Err(CodegenError::internal(format!(
                    "op `{}` has no CPU lowering",
                    op.mnemonic()
                )))
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::{generate, CodegenOptions};
    use crate::llvm::inject;
    use inkwell::context::Context;

    /// `out[i] = 2 * x[i]` for `i < n`, 16 lanes per program.
    const VADD: &str = include_str!("../../../../dsl/tests/pinned/vadd.tir");

    /// A builder failure (here: the builder unpositioned before the scalar `mul` of the
    /// program's offset) is an error naming the op and its source location, not a panic.
    #[test]
    fn a_builder_failure_names_the_op_and_its_location() {
        let f = tritium_dsl::ir::parse_function(VADD).expect("the pinned IR parses");
        let ctx = Context::create();
        let module = ctx.create_module("inject");
        let opts = CodegenOptions {
            bounds_check: false,
            race_check: false,
        };
        inject::unposition_before("mul");
        inject::assert_names_the_mul(generate(
            &ctx,
            &module,
            &f,
            "inject",
            opts,
            &[],
            &Default::default(),
        ));
        // Without the injection the same function generates.
        let module = ctx.create_module("plain");
        assert!(generate(&ctx, &module, &f, "plain", opts, &[], &Default::default()).is_ok());
    }
}
