//! IR → LLVM IR for NVPTX: one program is one CTA of `num_warps × 32` threads.
//!
//! **Layout.** A tile of `n` elements (row-major) is spread over the CTA's `T` threads
//! in a blocked layout: each thread holds `S = ceil(n / T)` *slots* as SSA registers,
//! grouped in chunks of `C` consecutive elements (`C` = 4, 2 or 1, the largest dividing
//! `S`). Slot `j` of thread `t` is element `((j / C) · T + t) · C + j % C`, so a warp's
//! chunks are adjacent in memory (coalesced) and each chunk is one vector access. Slots
//! past `n` are *invalid*: they hold junk and never touch memory. The layout depends only
//! on `n` and `T`, so elementwise ops work slot by slot in registers; scalars are held,
//! identically, by every thread.
//!
//! **Data movement.** Ops that change the layout (broadcast, transpose, reductions along
//! an axis, `dot`) go through dynamic shared memory (`tritium_smem`, reused by every such
//! op, fenced by `bar.sync` on both sides). A reduction to a scalar reduces each thread's
//! slots, then a warp with `shfl.sync.bfly`, then across warps in shared memory.
//!
//! Every target-specific operation (thread and CTA ids, barriers, shuffles) lives in
//! `sync.rs`. Control flow is uniform: every branch condition is a scalar, which all
//! threads hold equally, so barriers inside loops and `if`s are reached by every thread.

mod asm;
mod async_copy;
mod cache;
mod control;
mod custom;
mod debug;
mod dot;
mod epilogue;
mod fragments;
mod held;
mod hoisted_tma;
mod ldmatrix;
mod memory;
mod pipeline;
mod recompute;
mod reduce;
mod remat;
mod scalar;
mod scan;
pub(crate) mod swizzle;
mod sync;
mod tma;
mod types;
mod wgmma;

use crate::llvm::{CodegenError, Emitter, Positioned, Result};
pub(crate) use async_copy::EMU_COMMIT;
pub(crate) use swizzle::wavefronts;
pub(crate) use sync::{
    EMU_BARRIER, EMU_CP_ASYNC, EMU_CP_ASYNC_GROUP, EMU_CTAID, EMU_LDMATRIX, EMU_MBARRIER, EMU_MMA,
    EMU_NCTAID, EMU_PRINT, EMU_SHARED, EMU_SHUFFLE, EMU_STATE, EMU_STMATRIX, EMU_TID, EMU_TMA,
    EMU_TMA_STORE, EMU_WGMMA, EMU_WGMMA_WAIT, EMU_WORDS,
};
pub(crate) use tma::{MBARRIER_ARRIVE_EXPECT_TX, MBARRIER_INIT, MBARRIER_INVAL};
pub(crate) use wgmma::{descriptor_element, EMU_WGMMA_COMMIT};

use crate::pipeline::link::CustomEntries;
use inkwell::basic_block::BasicBlock;
use inkwell::builder::Builder;
use inkwell::context::Context;
use inkwell::module::{Linkage, Module};
use inkwell::types::{BasicMetadataTypeEnum, BasicTypeEnum};
use inkwell::values::{BasicValue, BasicValueEnum, FunctionValue, IntValue, PointerValue};
use inkwell::{AddressSpace, IntPredicate};
use std::collections::HashMap;
use tritium_dsl::ir::{Block, DType, Elem, Function, Inst, Op, Type, Value};

/// The most slots (registers per tile) one thread may hold; larger tiles need more warps.
const MAX_SLOTS: usize = 256;

/// The PTX ISA version the emulator's code is generated for: it has no target
/// instructions, only the hooks of `sync.rs`, so nothing depends on it.
pub(crate) const EMULATED_PTX: u32 = 70;

/// The PTX calling convention of kernel entry points (LLVM's `ptx_kernel`).
const PTX_KERNEL_CC: u32 = 71;

/// Options that change the generated code.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CodegenOptions {
    /// Warps per CTA.
    pub num_warps: u32,
    /// Software-pipelining stages of a loop around a tensor-core `dot` where the loop does
    /// not say (Triton's `num_stages`; 1 or less: none; see `pipeline.rs`).
    pub num_stages: u32,
    /// Generate for the host emulator (see `cuda/emulate.rs`) instead of NVPTX: the same
    /// code, except that the target hooks of `sync.rs` call into the emulator and the
    /// `ex2.approx.ftz` instruction becomes the host's `exp2`, flushed.
    pub emulate: bool,
    /// Checked mode: the kernel takes one more parameter (in the emulator, one more
    /// slot), the check buffer, and compares every access with the buffers' ranges (see
    /// `memory.rs`).
    pub bounds_check: bool,
    /// Outside checked mode, the accesses that are checked (see `memory::Checked`).
    pub sites: crate::launch::SiteChecks,
    /// The PTX ISA version the code may use (`74` for 7.4): 7.4 has eviction priorities
    /// (`.L1::evict_first`; without them an `eviction_policy` hint is dropped, see
    /// `cache.rs`), 7.5 `cp.async`'s `ignore-src` predicate (see `async_copy.rs`).
    pub ptx: u32,
    /// Hopper (`sm_90a`): tensor-core `dot`s whose shapes allow it run on `wgmma`
    /// (`wgmma.rs`), their accumulators dealt to warpgroups.
    pub wgmma: bool,
    /// With `wgmma`: the tensor-descriptor loads that `cuda::tensor_map::plan` finds are
    /// copied by TMA where they feed a pipelined `dot`, their maps taken as parameters.
    pub tma: bool,
}

/// What the launcher needs to know about a generated kernel.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Generated {
    /// Bytes of dynamic shared memory the kernel needs.
    pub shared_bytes: usize,
}

/// A value during code generation: a scalar every thread holds, this thread's slots, or,
/// where `held.rs` decides so, a tensor-core `dot`'s layout.
#[derive(Clone)]
enum V<'ctx> {
    Scalar(BasicValueEnum<'ctx>),
    Tile(Vec<BasicValueEnum<'ctx>>),
    /// This lane's `mma` accumulator fragments (see `fragments.rs`): four registers per
    /// round of `16 × 8` tiles. A use that needs slots converts through shared memory.
    Frag(held::FragLayout, Vec<BasicValueEnum<'ctx>>),
    /// The values of the rows of an `m`-row by-rows fragment layout this lane holds.
    Rows(usize, Vec<BasicValueEnum<'ctx>>),
}

pub(crate) struct Gen<'ctx, 'f> {
    ctx: &'ctx Context,
    module: &'f Module<'ctx>,
    b: &'f Builder<'ctx>,
    f: &'f Function,
    func: FunctionValue<'ctx>,
    entry_bb: BasicBlock<'ctx>,
    vals: HashMap<Value, V<'ctx>>,
    /// Threads per CTA.
    threads: usize,
    /// This thread's index in the CTA (i32).
    tid: IntValue<'ctx>,
    pids: [IntValue<'ctx>; 3],
    nprogs: [IntValue<'ctx>; 3],
    /// The dynamic shared memory (`addrspace(3)`).
    smem: PointerValue<'ctx>,
    shared_bytes: usize,
    /// The emulator's per-thread state (`EmuThread`) when generating for the emulator.
    emu: Option<PointerValue<'ctx>>,
    /// The address space of kernel pointers: global (1) on NVPTX, 0 in the emulator.
    global: AddressSpace,
    /// How each custom call is linked (see `pipeline::link`).
    customs: &'f CustomEntries,
    /// The fault record and ranges of checked mode or of the checked sites (`None` when
    /// nothing is checked).
    check: Option<memory::Checked<'ctx>>,
    /// Stores that need no barriers (see `memory::lone_stores`), by address.
    lone_stores: std::collections::HashSet<usize>,
    /// The op defining each value (block arguments have none).
    defs: HashMap<Value, &'f Inst>,
    /// See [`CodegenOptions::ptx`].
    ptx: u32,
    /// See [`CodegenOptions::wgmma`].
    wgmma: bool,
    /// The next `wgmma` accumulator's number (the emulator tracks what is in flight by it).
    wgmma_ids: u32,
    /// On Hopper, the warp index `ptxas` knows to be uniform (see `Gen::uniform_warp`).
    warp_uniform: Option<IntValue<'ctx>>,
    /// The `wgmma` group a loop's `dot` left in flight (see `wgmma.rs`).
    wgmma_in_flight: Option<wgmma::InFlight>,
    /// Values held in a tensor-core `dot`'s layouts (see `held.rs`).
    held: HashMap<Value, held::Held>,
    /// See [`CodegenOptions::num_stages`].
    num_stages: u32,
    /// A fragments of loop-invariant `dot` operands read before their loop, by the `dot`'s
    /// result: per A fragment row, per k step, four words (see `dot::hoist_a_fragments`).
    a_hoisted: HashMap<Value, dot::HoistedA<'ctx>>,
    /// Shared memory below this byte holds tiles kept for the loops being generated (see
    /// `dot::hoist_a_fragments`); a `dot`'s tiles and a pipeline's stages lie above it.
    shared_floor: usize,
    /// Loads that the `dot` using them may copy with `cp.async` (see `async_copy.rs`).
    async_candidates: std::collections::HashSet<Value>,
    /// Loads left for their `dot` to copy.
    deferred: std::collections::HashSet<Value>,
    /// What is known of integer and pointer lanes (`dsl::ir::axis_info`), computed where
    /// a load may be copied.
    axis: HashMap<Value, tritium_dsl::ir::AxisInfo>,
    /// The loop being pipelined, while its body is generated (see `pipeline.rs`).
    pipelined: Option<pipeline::Pipelined<'ctx, 'f>>,
    /// While a later iteration's copies are issued: the counter's value for it, and the
    /// body's scalars computed again (see `Gen::scalar_at`).
    iteration: HashMap<Value, BasicValueEnum<'ctx>>,
    /// The loads TMA may copy, by result (see `tma.rs`).
    tma: HashMap<Value, tma::TmaLoad<'ctx>>,
    /// Loop-invariant `dot` operands copied once by TMA, by value: their tiles, below the
    /// floor (see `hoisted_tma.rs`).
    a_in_shared: HashMap<Value, swizzle::Swizzled>,
}

/// What the GPU code is generated from: `f` with its carried pointer tiles carried as
/// offsets (`dsl::ir::carry_pointer_offsets`), then, in code without checks
/// (`unchecked`), its transposed loads loading the transposed block
/// (`dsl::ir::sink_transposes`: for asynchronous copies, which checked code does not make;
/// a checked load's fault names its lane in the loaded tile); `None` when nothing changes.
pub(crate) fn for_gpu(f: &Function, unchecked: bool) -> Option<Function> {
    let offsets = tritium_dsl::ir::carry_pointer_offsets(f);
    let transposed = unchecked
        .then(|| tritium_dsl::ir::sink_transposes(offsets.as_ref().unwrap_or(f)))
        .flatten();
    transposed.or(offsets)
}

/// Emits the kernel entry `name` for `f` into `module` (triple and data layout set).
pub(crate) fn generate<'ctx>(
    ctx: &'ctx Context,
    module: &Module<'ctx>,
    f: &Function,
    name: &str,
    opts: CodegenOptions,
    customs: &CustomEntries,
) -> Result<Generated> {
    if opts.num_warps == 0 || opts.num_warps > 32 {
        return Err(CodegenError::unsupported(format!(
            "num_warps is {}; a CTA has 1..=32 warps",
            opts.num_warps
        )));
    }
    let threads = opts.num_warps as usize * 32;
    let listed = match opts.bounds_check {
        true => Vec::new(),
        false => opts
            .sites
            .resolve(|| tritium_dsl::ir::bounds_proof(f).unprovable()),
    };
    // The kernel takes the check buffer.
    let checked = opts.bounds_check || !listed.is_empty();
    // Planned on `f` as the launcher sees it, matched below on the rewritten function by
    // site (the rewrite keeps memory ops and their numbers).
    let maps = crate::cuda::tensor_map::planned_for(f, opts.wgmma && opts.tma, opts.bounds_check);
    // Carried pointer tiles become index expressions (`cp.async`, pipelining), and so do
    // the pointers of a transposed load (`kᵀ`); the fault sites keep their numbers, so
    // `listed` (the proof of `f` itself) still names them.
    let rewritten = crate::pipeline::link::rewritten_with(f, customs, |f| for_gpu(f, !checked));
    let (f, customs) = rewritten.as_ref().map_or((f, customs), |(g, c)| (g, c));
    let b = ctx.create_builder();
    let ptr = ctx.ptr_type(AddressSpace::default());
    let global = if opts.emulate {
        AddressSpace::default()
    } else {
        AddressSpace::from(1u16)
    };
    let params: Vec<BasicMetadataTypeEnum> = if opts.emulate {
        // `k(ptr slots, ptr emu)`: one 8-byte slot per parameter, as the CPU entry.
        vec![ptr.into(), ptr.into()]
    } else {
        let check = checked.then(|| ctx.ptr_type(global).into());
        let tensor_maps = maps.iter().map(|_| ptr.into());
        f.params
            .iter()
            .map(|p| param_ty(ctx, f.ty(p.value).elem, global).into())
            .chain(check)
            .chain(tensor_maps)
            .collect()
    };
    let func = module.add_function(
        name,
        ctx.void_type().fn_type(&params, false),
        Some(Linkage::External),
    );
    let entry_bb = ctx.append_basic_block(func, "entry");
    b.position_at_end(entry_bb);
    let smem = if opts.emulate {
        None
    } else {
        func.set_call_conventions(PTX_KERNEL_CC);
        annotate_kernel(ctx, module, func, threads);
        let first = tma::map_param(f.params.len(), checked, 0);
        tma::tensor_map_params(ctx, module, func, first, maps.len());
        let smem = module.add_global(
            ctx.i8_type().array_type(0),
            Some(AddressSpace::from(3u16)),
            "tritium_smem",
        );
        smem.set_linkage(Linkage::External);
        // `wgmma` reads swizzled tiles by absolute address bits (`swizzle.rs`).
        smem.set_alignment(if opts.wgmma { 1024 } else { 16 });
        Some(smem.as_pointer_value())
    };
    let i32t = ctx.i32_type();
    let undef = i32t.get_undef();
    let mut g = Gen {
        ptx: opts.ptx,
        wgmma: opts.wgmma,
        wgmma_ids: 0,
        wgmma_in_flight: None,
        warp_uniform: None,
        ctx,
        module,
        b: &b,
        f,
        func,
        entry_bb,
        vals: HashMap::new(),
        threads,
        tid: undef,
        pids: [undef; 3],
        nprogs: [undef; 3],
        smem: ptr.get_undef(),
        shared_bytes: 0,
        emu: opts.emulate.then(|| {
            func.get_nth_param(1)
                .expect("declared above")
                .into_pointer_value()
        }),
        global,
        customs,
        check: None,
        lone_stores: memory::lone_stores(f),
        defs: definitions(f),
        held: HashMap::new(),
        num_stages: opts.num_stages,
        a_hoisted: HashMap::new(),
        shared_floor: 0,
        async_candidates: Default::default(),
        deferred: Default::default(),
        axis: HashMap::new(),
        pipelined: None,
        iteration: HashMap::new(),
        tma: HashMap::new(),
        a_in_shared: HashMap::new(),
    };
    g.smem = match smem {
        Some(p) => p,
        None => g.emulator_shared_memory()?,
    };
    g.tid = g.special_register("tid.x")?;
    // Read once at the entry: the shuffle is convergent, so LLVM would not hoist it.
    if opts.wgmma {
        g.warp_uniform = Some(g.uniform_warp()?);
    }
    g.pids = [
        g.special_register("ctaid.x")?,
        g.special_register("ctaid.y")?,
        g.special_register("ctaid.z")?,
    ];
    g.nprogs = [
        g.special_register("nctaid.x")?,
        g.special_register("nctaid.y")?,
        g.special_register("nctaid.z")?,
    ];
    // Parameter `i` (the check buffer is number `params.len()`).
    let param = |i: usize, ty: BasicTypeEnum<'ctx>| -> Result<_> {
        if opts.emulate {
            let slots = func
                .get_nth_param(0)
                .expect("declared above")
                .into_pointer_value();
            let i64t = ctx.i64_type();
            // SAFETY (of the generated code): the emulator passes one slot per parameter
            // (and one for the check buffer in checked mode).
            let slot = unsafe { b.build_gep(i64t, slots, &[i64t.const_int(i as u64, false)], "") }?;
            Ok(b.build_load(ty, slot, "")?)
        } else {
            Ok(func.get_nth_param(i as u32).expect("declared above"))
        }
    };
    for (i, p) in f.params.iter().enumerate() {
        let elem = f.ty(p.value).elem;
        let raw = param(i, param_ty(ctx, elem, global))?;
        let v = match elem {
            Elem::Ptr(_) => raw,
            Elem::Scalar(_) => g.decode_storage(raw, elem)?,
        };
        g.vals.insert(p.value, V::Scalar(v));
    }
    if checked {
        let buf = param(f.params.len(), ctx.ptr_type(global).into())?;
        g.check = Some(g.checked_state(buf.into_pointer_value(), opts.bounds_check, &listed)?);
    }
    let sites: Vec<u32> = maps.iter().map(|m| m.site).collect();
    let accesses = g.box_accesses(&sites);
    for (j, m) in maps.iter().enumerate() {
        let i = tma::map_param(f.params.len(), checked, j);
        let map = param(i, ptr.into())?.into_pointer_value();
        let map = b.build_ptr_to_int(map, ctx.i64_type(), "tensor_map")?;
        let map = g.warp_uniform_u64(map)?;
        if let Some((key, load)) = accesses.get(&m.site) {
            let elem = m.dtype.size_bytes();
            g.tma.insert(
                *key,
                tma::TmaLoad {
                    load: *load,
                    map,
                    elem,
                },
            );
        }
    }
    g.held = g.held_layouts();
    g.async_candidates = g.find_async_candidates();
    // What the copies of `dot` operands and the stores of `dot` results can be proven to
    // need no test for (a `dot` result is the only value held in fragments).
    let mut dots = false;
    f.walk(&mut |inst| dots |= matches!(inst.op, Op::Dot { .. }));
    if dots {
        g.axis = tritium_dsl::ir::axis_info(f);
    }
    g.block(&f.body)?;
    b.build_return(None)?;
    Ok(Generated {
        shared_bytes: g.shared_bytes,
    })
}

/// The type a kernel parameter is passed as: global pointers, scalars in storage form.
/// The op defining each value of `f`.
fn definitions(f: &Function) -> HashMap<Value, &Inst> {
    fn walk<'a>(b: &'a Block, defs: &mut HashMap<Value, &'a Inst>) {
        for inst in &b.insts {
            for r in &inst.results {
                defs.insert(*r, inst);
            }
            for region in inst.op.regions() {
                walk(region, defs);
            }
        }
    }
    let mut defs = HashMap::new();
    walk(&f.body, &mut defs);
    defs
}

fn param_ty(ctx: &Context, elem: Elem, global: AddressSpace) -> BasicTypeEnum<'_> {
    match elem {
        Elem::Ptr(_) => ctx.ptr_type(global).into(),
        Elem::Scalar(d) => match d {
            DType::Bool
            | DType::I8
            | DType::U8
            | DType::F8E4M3
            | DType::F8E5M2
            | DType::F8E4B15 => ctx.i8_type().into(),
            DType::I16 | DType::U16 | DType::F16 | DType::BF16 => ctx.i16_type().into(),
            DType::I32 | DType::U32 => ctx.i32_type().into(),
            DType::I64 | DType::U64 => ctx.i64_type().into(),
            DType::F32 => ctx.f32_type().into(),
            DType::F64 => ctx.f64_type().into(),
        },
    }
}

/// Marks `func` as a kernel with at most `threads` threads per CTA (`.maxntid`).
fn annotate_kernel<'ctx>(
    ctx: &'ctx Context,
    module: &Module<'ctx>,
    func: FunctionValue<'ctx>,
    threads: usize,
) {
    let fptr = func.as_global_value().as_pointer_value();
    let i32t = ctx.i32_type();
    for (key, value) in [("kernel", 1), ("maxntidx", threads as u64)] {
        let node = ctx.metadata_node(&[
            fptr.into(),
            ctx.metadata_string(key).into(),
            i32t.const_int(value, false).into(),
        ]);
        module
            .add_global_metadata("nvvm.annotations", &node)
            .expect("nvvm.annotations is a valid named metadata");
    }
}

impl<'ctx, 'f> Gen<'ctx, 'f> {
    fn ty(&self, v: Value) -> &'f Type {
        self.f.ty(v)
    }

    fn i32c(&self, n: u64) -> IntValue<'ctx> {
        self.ctx.i32_type().const_int(n, false)
    }

    /// Slots per thread of a tile of `numel` elements.
    fn slots(&self, numel: usize) -> usize {
        numel.div_ceil(self.threads).max(1)
    }

    /// Elements per chunk of a thread's slots (see the module docs).
    fn chunk(&self, numel: usize) -> usize {
        let s = self.slots(numel);
        [4, 2, 1]
            .into_iter()
            .find(|c| s.is_multiple_of(*c))
            .unwrap_or(1)
    }

    /// The row-major index (i32) of this thread's slot `j` of a tile of `numel` elements.
    fn lin(&self, numel: usize, j: usize) -> Result<IntValue<'ctx>> {
        let c = self.chunk(numel);
        let base = self.b.build_int_mul(self.tid, self.i32c(c as u64), "")?;
        let off = ((j / c) * self.threads * c + j % c) as u64;
        Ok(self.b.build_int_add(base, self.i32c(off), "lin")?)
    }

    /// Whether slot `j` holds an element; `None` when every slot of every thread does.
    fn valid(&self, numel: usize, j: usize) -> Result<Option<IntValue<'ctx>>> {
        if self.slots(numel) * self.threads == numel {
            return Ok(None);
        }
        let lin = self.lin(numel, j)?;
        Ok(Some(self.b.build_int_compare(
            IntPredicate::ULT,
            lin,
            self.i32c(numel as u64),
            "valid",
        )?))
    }

    /// `lin` if the slot is valid, else 0: an index that is always in range.
    fn clamped_lin(&self, numel: usize, j: usize) -> Result<IntValue<'ctx>> {
        let lin = self.lin(numel, j)?;
        Ok(match self.valid(numel, j)? {
            None => lin,
            Some(ok) => self
                .b
                .build_select(ok, lin, self.i32c(0), "")?
                .into_int_value(),
        })
    }

    /// Whether `i < bound` (unsigned), and `i` where it is, else 0: an index that is
    /// always in range, for work that every lane does and only some keep.
    fn below_or_zero(
        &self,
        i: IntValue<'ctx>,
        bound: usize,
    ) -> Result<(IntValue<'ctx>, IntValue<'ctx>)> {
        let ok = self
            .b
            .build_int_compare(IntPredicate::ULT, i, self.i32c(bound as u64), "")?;
        let clamped = self
            .b
            .build_select(ok, i, self.i32c(0), "")?
            .into_int_value();
        Ok((ok, clamped))
    }

    /// The multi-index of row-major index `lin` in `shape`.
    fn unravel(&self, shape: &[usize], lin: IntValue<'ctx>) -> Result<Vec<IntValue<'ctx>>> {
        let mut idx = vec![self.i32c(0); shape.len()];
        let mut rest = lin;
        for k in (0..shape.len()).rev() {
            if shape[k] == 1 {
                continue;
            }
            let d = self.i32c(shape[k] as u64);
            idx[k] = self.b.build_int_unsigned_rem(rest, d, "")?;
            rest = self.b.build_int_unsigned_div(rest, d, "")?;
        }
        Ok(idx)
    }

    /// The row-major index of `idx` in `shape`.
    fn ravel(&self, shape: &[usize], idx: &[IntValue<'ctx>]) -> Result<IntValue<'ctx>> {
        let mut lin = self.i32c(0);
        for (k, i) in idx.iter().enumerate() {
            let stride: usize = shape[k + 1..].iter().product();
            let term = self.b.build_int_mul(*i, self.i32c(stride as u64), "")?;
            lin = self.b.build_int_add(lin, term, "")?;
        }
        Ok(lin)
    }

    /// A placeholder for a result its op left undefined.
    fn placeholder(&self, ty: &Type) -> V<'ctx> {
        let t = self.elem_compute_ty(ty.elem);
        let u = match t {
            BasicTypeEnum::IntType(t) => t.get_undef().as_basic_value_enum(),
            BasicTypeEnum::FloatType(t) => t.get_undef().as_basic_value_enum(),
            BasicTypeEnum::PointerType(t) => t.get_undef().as_basic_value_enum(),
            other => unreachable!("no IR dtype computes as {other:?}"),
        };
        if ty.is_scalar() {
            V::Scalar(u)
        } else {
            V::Tile(vec![u; self.slots(ty.numel())])
        }
    }

    /// The generated form of `v`, accumulator fragments converted to slots.
    fn val(&mut self, v: Value) -> Result<V<'ctx>> {
        match self.raw_val(v)? {
            V::Frag(l, regs) => Ok(V::Tile(self.held_to_slots(
                v,
                held::Held::Frag(l),
                &regs,
            )?)),
            V::Rows(m, regs) => Ok(V::Tile(self.held_to_slots(
                v,
                held::Held::Rows { m },
                &regs,
            )?)),
            x => Ok(x),
        }
    }

    /// The generated form of `v` as it is held (fragments included).
    fn raw_val(&mut self, v: Value) -> Result<V<'ctx>> {
        match self.vals.get(&v) {
            Some(x) => Ok(x.clone()),
            None => Err(CodegenError::internal(format!(
                "{v} used before it was generated"
            ))),
        }
    }

    /// The scalar `v` (every thread holds it).
    fn scalar(&mut self, v: Value) -> Result<BasicValueEnum<'ctx>> {
        match self.val(v)? {
            V::Scalar(s) => Ok(s),
            V::Tile(_) | V::Frag(..) | V::Rows(..) => Err(CodegenError::internal(format!(
                "{v} is a tile where a scalar is needed"
            ))),
        }
    }

    /// This thread's slots of `v` viewed as a tile of `numel` elements (scalars splat).
    fn tile_slots(&mut self, v: Value, numel: usize) -> Result<Vec<BasicValueEnum<'ctx>>> {
        let n = self.slots(numel);
        match self.val(v)? {
            V::Scalar(s) => Ok(vec![s; n]),
            V::Tile(t) if t.len() == n && self.ty(v).numel() == numel => Ok(t),
            V::Tile(_) | V::Frag(..) | V::Rows(..) => Err(CodegenError::internal(format!(
                "{v} has {} elements where {numel} are needed",
                self.ty(v).numel()
            ))),
        }
    }

    /// Binds result `r` to per-slot values (or a scalar for a scalar type).
    fn define(&mut self, r: Value, slots: Vec<BasicValueEnum<'ctx>>) {
        let v = if self.ty(r).is_scalar() {
            V::Scalar(slots[0])
        } else {
            V::Tile(slots)
        };
        self.vals.insert(r, v);
    }

    /// Emits `then` only where `cond` holds (always when `cond` is `None`).
    fn when(
        &mut self,
        cond: Option<IntValue<'ctx>>,
        then: &mut dyn FnMut(&mut Self) -> Result<()>,
    ) -> Result<()> {
        let Some(c) = cond else {
            return then(self);
        };
        let yes = self.ctx.append_basic_block(self.func, "when");
        let done = self.ctx.append_basic_block(self.func, "when.end");
        self.b.build_conditional_branch(c, yes, done)?;
        self.b.position_at_end(yes);
        then(self)?;
        self.b.build_unconditional_branch(done)?;
        self.b.position_at_end(done);
        Ok(())
    }

    /// The value `then` computes where `cond` holds, `otherwise` elsewhere.
    fn when_value(
        &mut self,
        cond: Option<IntValue<'ctx>>,
        otherwise: BasicValueEnum<'ctx>,
        then: &mut dyn FnMut(&mut Self) -> Result<BasicValueEnum<'ctx>>,
    ) -> Result<BasicValueEnum<'ctx>> {
        let Some(c) = cond else {
            return then(self);
        };
        let pre = self.b.current_block()?;
        let yes = self.ctx.append_basic_block(self.func, "when");
        let done = self.ctx.append_basic_block(self.func, "when.end");
        self.b.build_conditional_branch(c, yes, done)?;
        self.b.position_at_end(yes);
        let v = then(self)?;
        let from = self.b.current_block()?;
        self.b.build_unconditional_branch(done)?;
        self.b.position_at_end(done);
        let phi = self.b.build_phi(v.get_type(), "")?;
        phi.add_incoming(&[(&v, from), (&otherwise, pre)]);
        Ok(phi.as_basic_value())
    }

    /// An `alloca` in the entry block (promoted to a register by the optimizer).
    fn entry_alloca(&self, ty: BasicTypeEnum<'ctx>) -> Result<PointerValue<'ctx>> {
        let tmp = self.ctx.create_builder();
        match self.entry_bb.get_first_instruction() {
            Some(i) => tmp.position_before(&i),
            None => tmp.position_at_end(self.entry_bb),
        }
        Ok(tmp.build_alloca(ty, "carried")?)
    }

    /// Generates the ops of a block (not its terminator).
    fn block(&mut self, block: &'f Block) -> Result<()> {
        // What `remat` replaces is defined here, and so dominates only the rest of this
        // block: the enclosing block gets its own back at the end.
        let tid = self.tid;
        let mut replaced = Vec::new();
        for (i, inst) in block.insts.iter().enumerate() {
            #[cfg(test)]
            crate::llvm::inject::before(self.b, inst);
            self.inst(inst).map_err(|e| e.at(inst))?;
            if self.is_mma_loop(inst) {
                let old =
                    (self.rematerialize_after(&block.insts[i + 1..])).map_err(|e| e.at(inst))?;
                replaced.extend(old);
            }
        }
        self.tid = tid;
        for (v, old) in replaced.into_iter().rev() {
            self.vals.insert(v, old);
        }
        Ok(())
    }

    /// Generates one op; its errors are wrapped in the op's context by [`Self::block`].
    fn inst(&mut self, inst: &'f Inst) -> Result<()> {
        let r = inst.results.first().copied();
        if let Some(h) = r.map(|r| self.held(r)) {
            if h != held::Held::Slots && !matches!(inst.op, Op::Dot { .. } | Op::For { .. }) {
                return self.held_op(inst, h);
            }
        }
        if matches!(inst.op, Op::Store { .. }) && self.store_held(inst)? {
            return Ok(());
        }
        let fragments = self.operands_to_slots(inst)?;
        match &inst.op {
            Op::Yield(_) | Op::Condition(_) => {}
            Op::ProgramId(a) => {
                let v = self.pids[*a as usize].into();
                self.vals.insert(inst.results[0], V::Scalar(v));
            }
            Op::NumPrograms(a) => {
                let v = self.nprogs[*a as usize].into();
                self.vals.insert(inst.results[0], V::Scalar(v));
            }
            Op::Const(c) => {
                let r = inst.results[0];
                let d = self.ty(r).dtype().expect("numeric constant");
                let v = self.const_value(*c, d);
                let n = self.slots(self.ty(r).numel());
                self.define(r, vec![v; n]);
            }
            Op::Arange { start, .. } => {
                let r = inst.results[0];
                let numel = self.ty(r).numel();
                let slots = (0..self.slots(numel))
                    .map(|j| {
                        let lin = self.lin(numel, j)?;
                        Ok(self
                            .b
                            .build_int_add(lin, self.i32c(*start as u64), "")?
                            .into())
                    })
                    .collect::<Result<_>>()?;
                self.define(r, slots);
            }
            Op::Splat(x) => {
                let r = inst.results[0];
                let s = self.scalar(*x)?;
                let n = self.slots(self.ty(r).numel());
                self.define(r, vec![s; n]);
            }
            Op::Broadcast(x) => self.broadcast(inst.results[0], *x)?,
            Op::ExpandDims { x, .. } | Op::Reshape(x) => self.relabel(inst.results[0], *x)?,
            Op::Permute { x, dims } => self.permute(inst.results[0], *x, dims)?,
            Op::Gather { src, index, axis } => {
                self.gather(inst.results[0], *src, *index, *axis as usize)?
            }
            Op::Flip { x, axis } => {
                let (a, len) = (*axis as usize, self.ty(*x).shape[*axis as usize]);
                self.exchange(inst.results[0], *x, &mut |g, idx| {
                    let mut src = idx.to_vec();
                    src[a] = g.b.build_int_sub(g.i32c(len as u64 - 1), idx[a], "")?;
                    Ok(src)
                })?;
            }
            Op::Load { .. } if self.defer_load(inst) => {}
            Op::Load { .. } => match self.copied_once(inst) {
                Some(tile) => self.copy_once(inst, tile)?,
                None => self.load(inst)?,
            },
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
            op if op.is_elementwise() => self.elementwise(inst)?,
            op => {
                return Err(CodegenError::internal(format!(
                    "op `{}` has no CUDA lowering",
                    op.mnemonic()
                )))
            }
        }
        // The slots were converted for this op only: a later use may not be dominated by
        // the conversion (it may sit in a loop body that never ran).
        for (v, frag) in fragments {
            self.vals.insert(v, frag);
        }
        if let Some(r) = r {
            let numel = self.ty(r).numel();
            if self.slots(numel) > MAX_SLOTS {
                return Err(CodegenError::unsupported(format!(
                    "a tile of {numel} elements needs {} registers per thread with {} threads per program (at most {MAX_SLOTS}); raise num_warps or use smaller blocks",
                    self.slots(numel),
                    self.threads
                )));
            }
            if !self.vals.contains_key(&r) {
                let p = self.placeholder(self.ty(r));
                self.vals.insert(r, p);
            }
        }
        Ok(())
    }

    /// Converts `inst`'s accumulator-fragment operands to slots before it runs (an op
    /// may write shared memory before it reads an operand, and a conversion uses shared
    /// memory too); returns the fragments to restore afterwards. Loops and branches carry
    /// fragments themselves, and a tensor-core `dot` takes its accumulator as fragments.
    fn operands_to_slots(&mut self, inst: &Inst) -> Result<Vec<(Value, V<'ctx>)>> {
        let operands = match &inst.op {
            Op::For { .. } | Op::If { .. } | Op::While { .. } | Op::Yield(_) | Op::Condition(_) => {
                return Ok(Vec::new())
            }
            // (An `a` whose registers are the `dot`'s A fragments stays as it is.)
            Op::Dot { a, b, .. } if self.mma_shape(inst).is_some() => {
                match self.a_fragments_in_registers(inst) {
                    true => vec![*b],
                    false => vec![*a, *b],
                }
            }
            op => op.operands(),
        };
        let mut saved = Vec::new();
        for v in operands {
            if let Some(frag @ (V::Frag(..) | V::Rows(..))) = self.vals.get(&v).cloned() {
                let slots = self.val(v)?;
                self.vals.insert(v, slots);
                saved.push((v, frag));
            }
        }
        Ok(saved)
    }

    /// Binary, unary, compare, select, fma, cast and addptr: slot by slot.
    fn elementwise(&mut self, inst: &Inst) -> Result<()> {
        let r = inst.results[0];
        let numel = self.ty(r).numel();
        let operands = inst.op.operands();
        let cols: Vec<Vec<BasicValueEnum<'ctx>>> = operands
            .iter()
            .map(|o| self.tile_slots(*o, numel))
            .collect::<Result<_>>()?;
        let slots = (0..self.slots(numel))
            .map(|j| {
                let args: Vec<_> = cols.iter().map(|c| c[j]).collect();
                self.element(inst, &args)
            })
            .collect::<Result<_>>()?;
        self.define(r, slots);
        Ok(())
    }

    /// One element of an elementwise op from one element of each operand.
    fn element(&mut self, inst: &Inst, a: &[BasicValueEnum<'ctx>]) -> Result<BasicValueEnum<'ctx>> {
        let dtype_of = |g: &Self, v: Value| match g.ty(v).elem {
            Elem::Scalar(d) | Elem::Ptr(d) => d,
        };
        match &inst.op {
            Op::Binary(op, x, _) => {
                let d = dtype_of(self, *x);
                Ok(self.binary(*op, d, a[0], a[1])?)
            }
            Op::Unary(op, x) => {
                let d = dtype_of(self, *x);
                Ok(self.unary(*op, d, a[0])?)
            }
            Op::Cmp(p, x, _) => {
                let d = dtype_of(self, *x);
                Ok(self.compare(*p, d, a[0], a[1])?.into())
            }
            Op::Select(..) => Ok(self.b.build_select(a[0].into_int_value(), a[1], a[2], "")?),
            Op::Fma(x, ..) => {
                let d = dtype_of(self, *x);
                let t = self.compute_ty(d);
                let v = self.intrinsic("llvm.fma", &[t], a)?;
                Ok(self.round_to(v, d)?)
            }
            Op::Cast(x) => {
                let from = dtype_of(self, *x);
                let to = self.ty(inst.results[0]).dtype().expect("cast to a number");
                Ok(self.cast(a[0], from, to)?)
            }
            Op::Bitcast(x) => {
                let from = dtype_of(self, *x);
                let to = self
                    .ty(inst.results[0])
                    .dtype()
                    .expect("bitcast to a number");
                Ok(self.emit().bitcast(a[0], from, to)?)
            }
            // A promise the memory accesses read (see `memory.rs`): the value itself.
            Op::Hint { .. } => Ok(a[0]),
            Op::IntToPtr(_) => {
                let ptr = self.ctx.ptr_type(self.global);
                Ok((self.b.build_int_to_ptr(a[0].into_int_value(), ptr, ""))?.into())
            }
            Op::PtrToInt(_) => {
                let i64t = self.ctx.i64_type();
                Ok((self.b.build_ptr_to_int(a[0].into_pointer_value(), i64t, ""))?.into())
            }
            Op::AddPtr(p, o) => {
                let pointee = dtype_of(self, *p);
                let od = dtype_of(self, *o);
                let off = self.b.build_int_cast_sign_flag(
                    a[1].into_int_value(),
                    self.ctx.i64_type(),
                    od.is_signed_int(),
                    "",
                )?;
                if self.feeds_checked(inst.results[0]) {
                    let p = a[0].into_pointer_value();
                    return Ok(self
                        .emit()
                        .checked_offset(p, off, pointee.size_bytes())?
                        .into());
                }
                let st = self.storage_ty(pointee);
                // SAFETY (of the generated code): pointer arithmetic; accesses are trusted
                // as in Triton.
                Ok(unsafe { self.b.build_gep(st, a[0].into_pointer_value(), &[off], "") }?.into())
            }
            op => unreachable!("element() on `{}`", op.mnemonic()),
        }
    }

    /// Expand-dims and reshape keep the row-major order and the element count, hence the
    /// layout: the slots are reused as they are.
    fn relabel(&mut self, r: Value, x: Value) -> Result<()> {
        let numel = self.ty(r).numel();
        if self.ty(x).is_scalar() || self.ty(r).is_scalar() {
            // A scalar to a one-element tile or back: go through the owner of element 0.
            self.exchange(r, x, &mut |_, _| Ok(vec![]))?;
            return Ok(());
        }
        let slots = self.tile_slots(x, numel)?;
        self.define(r, slots);
        Ok(())
    }

    fn broadcast(&mut self, r: Value, x: Value) -> Result<()> {
        let (rs, xs) = (self.ty(r).shape.clone(), self.ty(x).shape.clone());
        if xs.is_empty() {
            let s = self.scalar(x)?;
            let n = self.slots(self.ty(r).numel());
            self.define(r, vec![s; n]);
            return Ok(());
        }
        if rs == xs {
            return self.relabel(r, x);
        }
        if self.broadcast_in_place(r, x)? {
            return Ok(());
        }
        self.exchange(r, x, &mut |g, idx| Ok(g.broadcast_source(&xs, idx)))
    }

    /// Result slot `j` is `src`'s element at the slot's index with its `axis` coordinate
    /// read from `index`'s slot `j` (0 outside the axis), through shared memory.
    fn gather(&mut self, r: Value, src: Value, index: Value, axis: usize) -> Result<()> {
        let (rt, st) = (self.ty(r).clone(), self.ty(src).clone());
        let numel = rt.numel();
        let positions = self.tile_slots(index, numel)?;
        let signed = self.ty(index).dtype().is_some_and(DType::is_signed_int);
        let d = st.dtype().expect("gather of numbers");
        let zero = self.const_value(tritium_dsl::ir::Const::Int(0), d);
        let i64t = self.ctx.i64_type();
        let len = i64t.const_int(st.shape[axis] as u64, false);
        self.spill_to_shared(src, 0)?;
        self.barrier()?;
        let slots = positions
            .iter()
            .enumerate()
            .map(|(j, p)| {
                let lin = self.clamped_lin(numel, j)?;
                let mut idx = self.unravel(&rt.shape, lin)?;
                let b = &self.b;
                let p = b.build_int_cast_sign_flag(p.into_int_value(), i64t, signed, "")?;
                // Unsigned: a negative index is past the end too.
                let inside = b.build_int_compare(IntPredicate::ULT, p, len, "")?;
                let p = b.build_select(inside, p, i64t.const_zero(), "")?;
                idx[axis] = b.build_int_truncate(p.into_int_value(), self.ctx.i32_type(), "")?;
                let src_lin = self.ravel(&st.shape, &idx)?;
                let v = self.shared_load(self.shared_elem(0, st.elem, src_lin)?, st.elem)?;
                Ok(self.b.build_select(inside, v, zero, "")?)
            })
            .collect::<Result<_>>()?;
        self.barrier()?;
        self.define(r, slots);
        Ok(())
    }

    /// Result element `idx` is `x`'s element with `idx[i]` at dim `dims[i]`.
    fn permute(&mut self, r: Value, x: Value, dims: &[u32]) -> Result<()> {
        self.exchange(r, x, &mut |_, idx| {
            let mut mapped = idx.to_vec();
            for (i, &d) in dims.iter().enumerate() {
                mapped[d as usize] = idx[i];
            }
            Ok(mapped)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::{generate, CodegenOptions};
    use crate::llvm::inject;
    use inkwell::context::Context;

    /// `out[i] = 2 * x[i]` for `i < n`, 16 lanes per program.
    const VADD: &str = include_str!("../../../../dsl/tests/pinned/vadd.tir");

    /// On CUDA too, a builder failure (the builder unpositioned before the scalar `mul` of
    /// the program's offset) is an error naming the op and its location, not a panic.
    #[test]
    fn a_builder_failure_names_the_op_and_its_location() {
        let f = tritium_dsl::ir::parse_function(VADD).expect("the pinned IR parses");
        let ctx = Context::create();
        let module = ctx.create_module("inject");
        let opts = CodegenOptions {
            num_warps: 4,
            num_stages: 3,
            emulate: false,
            bounds_check: false,
            sites: Default::default(),
            ptx: 70,
            wgmma: false,
            tma: false,
        };
        inject::unposition_before("mul");
        inject::assert_names_the_mul(generate(
            &ctx,
            &module,
            &f,
            "inject",
            opts,
            &Default::default(),
        ));
        // Without the injection the same function generates.
        let module = ctx.create_module("plain");
        assert!(generate(&ctx, &module, &f, "plain", opts, &Default::default()).is_ok());
    }
}
