//! Linking custom-op bitcode into a kernel module, as Triton's `link_extern_libs`: parse in
//! the kernel's context, adopt its triple and data layout, keep only what the kernel needs,
//! make it internal, then the O3 pipeline inlines and optimizes across the boundary.

use inkwell::attributes::AttributeLoc;
use inkwell::context::Context;
use inkwell::memory_buffer::MemoryBuffer;
use inkwell::module::{Linkage, Module};
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::TargetMachine;
use std::collections::{BTreeMap, HashMap};
use tritium_dsl::ir::{Bitcode, Block, CustomCall, Function, Inst, Mode, Op};

/// How one custom call is lowered: the LLVM function it calls and its convention.
#[derive(Debug, Clone)]
pub(crate) struct CustomEntry {
    /// The defined function to call.
    pub function: String,
    /// Per element (Simt) or once per program with memref descriptors (Simd).
    pub per_element: bool,
    /// A Simd entry that uses the thread helpers of `custom_op.h` ([`THREAD_HOOKS`]) or
    /// NVVM thread intrinsics: on CUDA every thread of the CTA calls it.
    pub cooperative: bool,
}

/// The thread helpers `custom_op.h` defines weakly: `int64_t tritium_thread_index()`,
/// `int64_t tritium_thread_count()` and `void tritium_barrier()`. A Simd entry reaching
/// any of them is cooperative; the CUDA emulator replaces their bodies.
pub(crate) const THREAD_HOOKS: [&str; 3] = [
    "tritium_thread_index",
    "tritium_thread_count",
    "tritium_barrier",
];

/// Whether `entry` (or any function of `lib` it calls, transitively) calls a thread
/// helper or reads the CTA's thread index, size or barrier through NVVM intrinsics.
fn is_cooperative(lib: &Module<'_>, entry: &str) -> bool {
    let thread_intrinsic = |name: &str| {
        THREAD_HOOKS.contains(&name)
            || [
                "llvm.nvvm.read.ptx.sreg.tid.",
                "llvm.nvvm.read.ptx.sreg.ntid.",
                "llvm.nvvm.barrier",
                "llvm.nvvm.bar.",
            ]
            .iter()
            .any(|p| name.starts_with(p))
    };
    let mut seen: Vec<String> = Vec::new();
    let mut todo: Vec<String> = vec![entry.to_string()];
    while let Some(name) = todo.pop() {
        if seen.contains(&name) {
            continue;
        }
        let Some(func) = lib.get_function(&name) else {
            continue;
        };
        seen.push(name);
        for bb in func.get_basic_blocks() {
            for inst in bb.get_instructions() {
                let Ok(call) = inkwell::values::CallSiteValue::try_from(inst) else {
                    continue;
                };
                let Some(callee) = call.get_called_fn_value() else {
                    continue;
                };
                let callee = callee.get_name().to_string_lossy().into_owned();
                if thread_intrinsic(&callee) {
                    return true;
                }
                todo.push(callee);
            }
        }
    }
    false
}

/// The entry of every custom call in `f`, keyed by instruction address.
pub(crate) type CustomEntries = HashMap<*const Inst, CustomEntry>;

/// `f` with its carried pointer tiles carried as offsets
/// ([`tritium_dsl::ir::carry_pointer_offsets`]: what the code generators generate from, so
/// that a tile advanced by a scalar is an index expression), and `entries` keyed by its
/// custom calls, the same calls in the same order; `None` when `f` has no such tile.
pub(crate) fn with_pointer_offsets(
    f: &Function,
    entries: &CustomEntries,
) -> Option<(Function, CustomEntries)> {
    rewritten_with(f, entries, tritium_dsl::ir::carry_pointer_offsets)
}

/// `f` rewritten by `rewrite` (which neither adds, removes nor reorders custom calls), and
/// `entries` keyed by the rewritten function's calls; `None` when `rewrite` changes
/// nothing.
pub(crate) fn rewritten_with(
    f: &Function,
    entries: &CustomEntries,
    rewrite: impl FnOnce(&Function) -> Option<Function>,
) -> Option<(Function, CustomEntries)> {
    let rewritten = rewrite(f)?;
    let calls = |f: &Function| {
        let mut calls = Vec::new();
        f.walk(&mut |i| {
            if matches!(i.op, Op::Custom(_)) {
                calls.push(i as *const Inst);
            }
        });
        calls
    };
    let rekeyed = (calls(f).into_iter().zip(calls(&rewritten)))
        .filter_map(|(old, new)| Some((new, entries.get(&old)?.clone())))
        .collect();
    Some((rewritten, rekeyed))
}

/// A custom call with the bitcode bytes that implement it.
pub(crate) type CallBitcode<'f> = (&'f Inst, &'f CustomCall, &'f [u8]);

/// Which compilation of each library is linked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BitcodeTarget {
    /// The host CPU (and the CUDA emulator).
    Host,
    /// `nvptx64-nvidia-cuda`: the NVPTX builtins, and user bitcode's NVPTX variant
    /// ([`Bitcode::with_nvptx`]) when it has one.
    Nvptx,
}

/// Bitcode contents of every custom call in `f` for `target` (the builtin library for
/// `__builtin_*`), with an error naming the op and call site when contents are missing.
pub(crate) fn bitcodes_for(
    f: &Function,
    target: BitcodeTarget,
) -> Result<Vec<CallBitcode<'_>>, String> {
    fn go<'f>(
        b: &'f Block,
        target: BitcodeTarget,
        out: &mut Vec<(&'f Inst, &'f CustomCall, &'f [u8])>,
    ) -> Result<(), String> {
        for inst in &b.insts {
            for r in inst.op.regions() {
                go(r, target, out)?;
            }
            let Op::Custom(c) = &inst.op else { continue };
            // CUDA hardware runs an `inline_asm_elementwise` call's asm, not its fallback
            // (which may be host bitcode only).
            if target == BitcodeTarget::Nvptx && c.inline_asm.is_some() {
                continue;
            }
            let b: &Bitcode = &c.attrs.bitcode;
            let bytes: Option<&'f [u8]> = match (target, b.is_builtin()) {
                (BitcodeTarget::Host, true) => Some(crate::builtins::BUILTINS_BC),
                (BitcodeTarget::Nvptx, true) => Some(crate::builtins::BUILTINS_NVPTX_BC),
                (BitcodeTarget::Host, false) => b.bytes(),
                // The NVPTX variant when there is one; else the bytes, which must then be
                // NVPTX bitcode themselves (linking checks the triple).
                (BitcodeTarget::Nvptx, false) => b.nvptx_bytes().or(b.bytes()),
            };
            match bytes {
                Some(bytes) if !bytes.is_empty() => out.push((inst, &**c, bytes)),
                _ => {
                    return Err(format!(
                        "custom op `{}` at {}: bitcode `{}` has no contents (IR read back from text cannot be compiled; trace the kernel instead)",
                        c.name,
                        inst.loc,
                        b.label()
                    ))
                }
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    go(&f.body, target, &mut out)?;
    Ok(out)
}

/// What the link step does to each library before linking it, besides [`prepare`].
pub(crate) type LibHook<'a, 'ctx> = &'a dyn Fn(&Module<'ctx>) -> Result<(), String>;

/// Links the bitcode the custom calls of `f` need into `module` (the compilation for
/// `target`: linking into an NVPTX module requires NVPTX bitcode) and says how to call
/// each; `each_lib` runs on every library after its entries are resolved (the CUDA
/// emulator defines the thread helpers there).
pub(crate) fn link_custom_code<'ctx>(
    ctx: &'ctx Context,
    module: &Module<'ctx>,
    f: &Function,
    machine: &TargetMachine,
    target: BitcodeTarget,
    each_lib: LibHook<'_, 'ctx>,
) -> Result<CustomEntries, String> {
    // Group calls by library so each is parsed and linked once.
    let mut libs: BTreeMap<&[u8], Vec<(&Inst, &CustomCall)>> = BTreeMap::new();
    for (inst, c, bytes) in bitcodes_for(f, target)? {
        libs.entry(bytes).or_default().push((inst, c));
    }
    let mut entries = CustomEntries::new();
    for (bytes, calls) in libs {
        let label = calls[0].1.attrs.bitcode.label().to_string();
        let at = |inst: &Inst, c: &CustomCall| format!("custom op `{}` at {}", c.name, inst.loc);
        let buf = MemoryBuffer::create_from_memory_range_copy(bytes, &label);
        let lib = Module::parse_bitcode_from_buffer(&buf, ctx).map_err(|e| {
            format!(
                "{}: invalid bitcode `{label}`: {}",
                at(calls[0].0, calls[0].1),
                e.to_string().trim()
            )
        })?;
        let kernel_triple = module.get_triple();
        let kernel_triple = kernel_triple.as_str().to_string_lossy();
        let lib_triple = lib.get_triple();
        let lib_triple = lib_triple.as_str().to_string_lossy();
        if kernel_triple.starts_with("nvptx") && !lib_triple.starts_with("nvptx") {
            return Err(format!(
                "{}: bitcode `{label}` is for `{lib_triple}`; CUDA needs bitcode compiled for nvptx64-nvidia-cuda (tritium-build's Target::Nvptx, attached with Bitcode::with_nvptx)",
                at(calls[0].0, calls[0].1)
            ));
        }
        let defined = |name: &str| {
            lib.get_function(name)
                .is_some_and(|f| f.count_basic_blocks() > 0)
        };
        let mut needed: Vec<String> = Vec::new();
        for (inst, c) in &calls {
            let sym = &c.attrs.symbol;
            let simd = format!("_mlir_ciface_{sym}");
            let (function, per_element) = match (c.is_builtin(), c.attrs.effective_mode()) {
                // The builtin library has whole-tile entries only.
                (true, _) | (false, Mode::Simd) => (simd, false),
                (false, Mode::Simt) => (sym.clone(), true),
                (false, Mode::Mix) if defined(sym) => (sym.clone(), true),
                (false, Mode::Mix) => (simd, false),
            };
            if !defined(&function) {
                let mut have: Vec<String> = lib
                    .get_functions()
                    .filter(|f| f.count_basic_blocks() > 0 && f.get_linkage() != Linkage::Internal)
                    .map(|f| f.get_name().to_string_lossy().into_owned())
                    .collect();
                have.sort();
                let mix = if c.attrs.effective_mode() == Mode::Mix {
                    format!(" (Mix mode looks for `{sym}`, then `_mlir_ciface_{sym}`)")
                } else {
                    String::new()
                };
                return Err(format!(
                    "{}: symbol `{function}` is not defined in bitcode `{label}`{mix}; it defines: {}",
                    at(inst, c),
                    if have.is_empty() { "nothing".to_string() } else { have.join(", ") }
                ));
            }
            if let Some(record) = super::signature::record(&lib, &function) {
                super::signature::check(f, c, &function, per_element, &record)
                    .map_err(|e| format!("{}: {e}", at(inst, c)))?;
            }
            needed.push(function.clone());
            let cooperative = !per_element && is_cooperative(&lib, &function);
            entries.insert(
                *inst as *const Inst,
                CustomEntry {
                    function,
                    per_element,
                    cooperative,
                },
            );
        }
        each_lib(&lib).map_err(|e| format!("{}: {e}", at(calls[0].0, calls[0].1)))?;
        prepare(&lib, module, &needed, machine)?;
        module.link_in_module(lib).map_err(|e| {
            format!(
                "{}: linking bitcode `{label}` failed: {}",
                at(calls[0].0, calls[0].1),
                e.to_string().trim()
            )
        })?;
        for name in &needed {
            let func = module.get_function(name).expect("linked above");
            func.set_linkage(Linkage::Internal);
        }
    }
    // Simt entries run per element: inline them so the element loop vectorizes.
    for e in entries.values().filter(|e| e.per_element) {
        let func = module.get_function(&e.function).expect("linked above");
        for kind in ["noinline", "optnone"] {
            func.remove_enum_attribute(
                AttributeLoc::Function,
                inkwell::attributes::Attribute::get_named_enum_kind_id(kind),
            );
        }
        let always = inkwell::attributes::Attribute::get_named_enum_kind_id("alwaysinline");
        func.add_attribute(AttributeLoc::Function, ctx.create_enum_attribute(always, 0));
    }
    Ok(entries)
}

/// Gives `lib` the kernel's triple and data layout, drops CPU-specific attributes (the
/// kernel is compiled for the host CPU), and deletes what `needed` does not reach.
fn prepare(
    lib: &Module<'_>,
    kernel: &Module<'_>,
    needed: &[String],
    machine: &TargetMachine,
) -> Result<(), String> {
    lib.set_triple(&kernel.get_triple());
    lib.set_data_layout(&kernel.get_data_layout());
    for func in lib.get_functions() {
        for attr in ["target-cpu", "target-features", "tune-cpu"] {
            func.remove_string_attribute(AttributeLoc::Function, attr);
        }
        if func.count_basic_blocks() == 0 {
            continue;
        }
        let name = func.get_name().to_string_lossy();
        if !needed.iter().any(|n| *n == name) {
            func.set_linkage(Linkage::Internal);
        }
    }
    for g in lib.get_globals() {
        if g.get_initializer().is_some() {
            g.set_linkage(Linkage::Internal);
        }
    }
    lib.run_passes("globaldce", machine, PassBuilderOptions::create())
        .map_err(|e| format!("cleaning bitcode failed: {e}"))
}
