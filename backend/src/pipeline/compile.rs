//! The one compile every target goes through: print the IR, hash it with the target's
//! key and the linked bitcode, dump, look up the disk cache, else set up the module,
//! link, generate, verify, run the passes, emit and cache; then decode and count.

use super::cache::{self, Entry};
use super::dump::{self, Dumps};
use super::link;
use super::stats::{self, timed, CompileStats, Phase};
use super::target::Target;
use super::CompileOptions;
use crate::{Error, Result};
use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{FileType, TargetMachine};
use std::collections::BTreeSet;
use tritium_dsl::ir::{print_function, Function};

/// A kernel compiled for one target.
pub(crate) struct Compiled<C> {
    /// The traced IR.
    pub function: Function,
    /// SHA-256 of the cache key (target key, linked bitcode, IR text).
    pub key_hash: String,
    /// The entry symbol (`dump::symbol`).
    pub symbol: String,
    /// The cache entry's `meta` (scratch or shared-memory bytes).
    pub meta: usize,
    /// The loaded code.
    pub code: C,
}

/// Compiles `f` for `target`, or loads it from the disk cache. Every call compiles: the
/// in-memory caches (one slot per key, `once::OnceMap`) sit above this.
pub(crate) fn compile<T: Target>(
    target: &T,
    f: Function,
    options: &CompileOptions,
) -> Result<Compiled<T::Code>> {
    let err = |message: String| Error::Compile {
        kernel: f.name.clone(),
        message,
    };
    let key_start = std::time::Instant::now();
    let text = print_function(&f);
    let mut parts = target.key().map_err(err)?;
    // Linked bitcode is part of what is compiled: its content hash joins the key.
    let libs: BTreeSet<String> = link::bitcodes_for(&f, target.bitcode())
        .map_err(err)?
        .iter()
        .map(|(_, _, bytes)| cache::hash_bytes(bytes))
        .collect();
    parts.push(libs.into_iter().collect::<Vec<_>>().join(","));
    parts.push(text);
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    let key_hash = cache::hash_key(&parts);
    let text = parts[parts.len() - 1];
    let symbol = dump::symbol(&f.name, &key_hash);
    let dumps = Dumps::new(options.dump_root(), &symbol);
    dumps.write("tir", text.as_bytes());
    let root = options.cache_root();
    let mut counted = CompileStats {
        compiles: 1,
        ..Default::default()
    };
    // A dump needs LLVM's output, so it never takes the cached entry.
    let lookup = match target.store() {
        Some(store) if !dumps.enabled() => cache::read(root.as_deref(), store, &key_hash),
        _ => cache::Lookup::Missing,
    };
    stats::add(Phase::Key, key_start.elapsed());
    let cached = match lookup {
        cache::Lookup::Hit(e) => match timed(Phase::Load, || target.decode(&e.bytes, &symbol)) {
            Ok(code) => Some((code, e.meta)),
            Err(_) => {
                counted.disk_rejected += 1;
                None
            }
        },
        cache::Lookup::Missing => None,
        cache::Lookup::Corrupt => {
            counted.disk_rejected += 1;
            None
        }
    };
    let (code, meta) = match cached {
        Some(hit) => {
            counted.disk_hits += 1;
            hit
        }
        None => {
            counted.codegen += 1;
            let entry = generate(target, &f, &symbol, &dumps).map_err(err)?;
            let code = timed(Phase::Load, || {
                if let Some(store) = target.store() {
                    cache::write(root.as_deref(), store, &key_hash, &entry);
                }
                target.decode(&entry.bytes, &symbol)
            });
            (code.map_err(err)?, entry.meta)
        }
    };
    stats::count(target.kind(), &f.name, counted);
    Ok(Compiled {
        function: f,
        key_hash,
        symbol,
        meta,
        code,
    })
}

/// IR → LLVM (linked, verified) → the target's passes → emitted bytes, with the `.ll`
/// and `.opt.ll` dumps (and the target's assembly dump) on the way.
pub(crate) fn generate<T: Target>(
    target: &T,
    f: &Function,
    symbol: &str,
    dumps: &Dumps<'_>,
) -> std::result::Result<Entry, String> {
    // Declared before the context, so it outlives every diagnostic the context reports.
    let errors = std::cell::RefCell::new(Vec::<String>::new());
    let ctx = Context::create();
    diagnostics_into(&ctx, &errors);
    let module = ctx.create_module(symbol);
    let (machine, customs) = timed(Phase::Link, || {
        let machine = target.machine()?;
        module.set_triple(&machine.get_triple());
        module.set_data_layout(&machine.get_target_data().get_data_layout());
        let customs =
            link::link_custom_code(&ctx, &module, f, &machine, target.bitcode(), &|lib| {
                target.prepare_library(lib)
            })?;
        Ok::<_, String>((machine, customs))
    })?;
    // The code generator's error becomes `Error::Compile`'s message: it names the op
    // that failed and where it was written.
    let meta = timed(Phase::Codegen, || {
        target.generate(&ctx, &module, f, symbol, &customs)
    })
    .map_err(|e| e.to_string())?;
    dumps.write_with("ll", || module.print_to_string().to_bytes().to_vec());
    timed(Phase::Verify, || module.verify())
        .map_err(|e| format!("generated {} LLVM IR is invalid: {e}", target.kind().name()))?;
    timed(Phase::Optimize, || {
        module.run_passes(target.passes(), &machine, PassBuilderOptions::create())
    })
    .map_err(|e| e.to_string())?;
    dumps.write_with("opt.ll", || module.print_to_string().to_bytes().to_vec());
    let bytes = timed(Phase::Emit, || target.emit(&machine, &module, dumps))?;
    let errors = errors.borrow();
    if !errors.is_empty() {
        return Err(format!("LLVM reported: {}", errors.join("; ")));
    }
    Ok(Entry { meta, bytes })
}

/// Routes `ctx`'s diagnostics into `errors` (errors only): LLVM's default handler prints
/// warnings and remarks to stderr (an unroll factor LLVM could not honour, as Triton's
/// `loop_unroll_factor` may be), which are not the user's to read, and exits the process on
/// an error, which must be this compile's `Err` instead.
fn diagnostics_into(ctx: &Context, errors: &std::cell::RefCell<Vec<String>>) {
    use llvm_sys::core::{LLVMContextSetDiagnosticHandler, LLVMGetDiagInfoDescription};
    use llvm_sys::core::{LLVMDisposeMessage, LLVMGetDiagInfoSeverity};
    use llvm_sys::prelude::LLVMDiagnosticInfoRef;
    extern "C" fn handler(info: LLVMDiagnosticInfoRef, sink: *mut std::ffi::c_void) {
        // SAFETY: LLVM passes a live diagnostic; `sink` is the `RefCell` registered below,
        // alive while the context is (it is declared before it), used on this thread only.
        unsafe {
            if LLVMGetDiagInfoSeverity(info) != llvm_sys::LLVMDiagnosticSeverity::LLVMDSError {
                return;
            }
            let text = LLVMGetDiagInfoDescription(info);
            let message = std::ffi::CStr::from_ptr(text)
                .to_string_lossy()
                .into_owned();
            LLVMDisposeMessage(text);
            let errors = &*(sink as *const std::cell::RefCell<Vec<String>>);
            if let Ok(mut e) = errors.try_borrow_mut() {
                e.push(message);
            }
        }
    }
    let sink = errors as *const std::cell::RefCell<Vec<String>> as *mut std::ffi::c_void;
    // SAFETY: `ctx` is live; the handler only reads `sink` as documented above.
    unsafe { LLVMContextSetDiagnosticHandler(ctx.raw(), Some(handler), sink) };
}

/// A host object file, with the `.s` dump: how both host targets emit.
pub(crate) fn emit_object(
    machine: &TargetMachine,
    module: &Module<'_>,
    dumps: &Dumps<'_>,
) -> std::result::Result<Vec<u8>, String> {
    if dumps.enabled() {
        if let Ok(asm) = machine.write_to_memory_buffer(module, FileType::Assembly) {
            dumps.write("s", asm.as_slice());
        }
    }
    let obj = machine
        .write_to_memory_buffer(module, FileType::Object)
        .map_err(|e| e.to_string())?;
    Ok(obj.as_slice().to_vec())
}
