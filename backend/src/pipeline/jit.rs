//! Loading compiled objects into the process with LLVM's ORC LLJIT.
//!
//! One LLJIT per process. Objects come from the compiler or from the disk cache; symbols
//! from the process (libm's `expf`, …) resolve through a dynamic-library search generator.

use llvm_sys::error::{LLVMDisposeErrorMessage, LLVMErrorRef, LLVMGetErrorMessage};
use llvm_sys::orc2::lljit::*;
use llvm_sys::orc2::*;
use std::collections::HashMap;
use std::ffi::{CStr, CString};
use std::sync::{Mutex, OnceLock};

/// Whether `object` parses as an object file with a symbol named `symbol`.
fn has_symbol(object: &[u8], symbol: &str) -> bool {
    let buf = inkwell::memory_buffer::MemoryBuffer::create_from_memory_range_copy(object, "entry");
    let Ok(file) = buf.create_object_file() else {
        return false;
    };
    let found = file
        .get_symbols()
        .any(|s| s.get_name().is_some_and(|n| names(n.to_bytes(), symbol)));
    found
}

/// Whether an object's symbol `name` is `symbol`, with or without the platform's `_`
/// prefix.
pub(super) fn names(name: &[u8], symbol: &str) -> bool {
    name == symbol.as_bytes() || name.strip_prefix(b"_") == Some(symbol.as_bytes())
}

struct Jit {
    raw: LLVMOrcLLJITRef,
    /// Symbols already loaded, with their addresses (objects are added once).
    loaded: HashMap<String, usize>,
}

// SAFETY: LLJIT is thread-safe for adding objects and looking up symbols; we also serialize
// every use behind a mutex.
unsafe impl Send for Jit {}

static JIT: OnceLock<Result<Mutex<Jit>, String>> = OnceLock::new();

fn take_error(err: LLVMErrorRef) -> Result<(), String> {
    if err.is_null() {
        return Ok(());
    }
    // SAFETY: `err` is a non-null LLVM error we own; the message is copied then disposed.
    unsafe {
        let msg = LLVMGetErrorMessage(err);
        let s = CStr::from_ptr(msg).to_string_lossy().into_owned();
        LLVMDisposeErrorMessage(msg);
        Err(s)
    }
}

fn jit() -> Result<&'static Mutex<Jit>, String> {
    JIT.get_or_init(|| {
        super::host::initialize();
        // SAFETY: plain LLVM C API calls; ownership follows the C API documentation
        // (the builder is consumed by LLVMOrcCreateLLJIT, the generator by the JITDylib).
        unsafe {
            let mut raw: LLVMOrcLLJITRef = std::ptr::null_mut();
            take_error(LLVMOrcCreateLLJIT(&mut raw, LLVMOrcCreateLLJITBuilder()))?;
            let mut generator: LLVMOrcDefinitionGeneratorRef = std::ptr::null_mut();
            let prefix = LLVMOrcLLJITGetGlobalPrefix(raw);
            take_error(LLVMOrcCreateDynamicLibrarySearchGeneratorForProcess(
                &mut generator,
                prefix,
                None,
                std::ptr::null_mut(),
            ))?;
            LLVMOrcJITDylibAddGenerator(LLVMOrcLLJITGetMainJITDylib(raw), generator);
            define_hooks(raw)?;
            Ok(Mutex::new(Jit {
                raw,
                loaded: HashMap::new(),
            }))
        }
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// Defines the functions of this process that compiled kernels call by name (not found by
/// the dynamic-library search: an executable exports none of its own symbols): the
/// `device_print` and race-checking hooks.
///
/// # Safety
/// `raw` is a live LLJIT.
unsafe fn define_hooks(raw: LLVMOrcLLJITRef) -> Result<(), String> {
    use crate::launch::print::{print_hook, PRINT_SYMBOL};
    use crate::launch::race::{race_hook, RACE_SYMBOL};
    let hooks = [
        (PRINT_SYMBOL, print_hook as *const ()),
        (RACE_SYMBOL, race_hook as *const ()),
    ];
    let flags = LLVMJITSymbolGenericFlags::LLVMJITSymbolGenericFlagsExported as u8
        | LLVMJITSymbolGenericFlags::LLVMJITSymbolGenericFlagsCallable as u8;
    let names: Vec<CString> = hooks
        .iter()
        .map(|(n, _)| CString::new(*n).map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    // SAFETY: the names are interned by the JIT (which owns the references the pairs hand
    // over); the materialization unit is consumed by `LLVMOrcJITDylibDefine`.
    unsafe {
        let mut pairs: Vec<LLVMOrcCSymbolMapPair> = names
            .iter()
            .zip(&hooks)
            .map(|(name, (_, f))| LLVMOrcCSymbolMapPair {
                Name: LLVMOrcLLJITMangleAndIntern(raw, name.as_ptr()),
                Sym: LLVMJITEvaluatedSymbol {
                    Address: *f as usize as LLVMOrcExecutorAddress,
                    Flags: LLVMJITSymbolFlags {
                        GenericFlags: flags,
                        TargetFlags: 0,
                    },
                },
            })
            .collect();
        let unit = LLVMOrcAbsoluteSymbols(pairs.as_mut_ptr(), pairs.len());
        take_error(LLVMOrcJITDylibDefine(
            LLVMOrcLLJITGetMainJITDylib(raw),
            unit,
        ))
    }
}

/// The u64 constant `name` of `object`, which [`load`] has added: a number the code
/// declares about itself (the CPU's scratch bytes).
pub(crate) fn loaded_u64(object: &[u8], name: &str) -> Result<u64, String> {
    if !has_symbol(object, name) {
        return Err(format!("the object does not define `{name}`"));
    }
    let jit = super::once::lock(jit()?);
    let sym = CString::new(name).map_err(|e| e.to_string())?;
    let mut addr: LLVMOrcExecutorAddress = 0;
    // SAFETY: a lookup in the JIT we own, behind its mutex.
    take_error(unsafe { LLVMOrcLLJITLookup(jit.raw, &mut addr, sym.as_ptr()) })?;
    if addr == 0 {
        return Err(format!("symbol {name} resolved to null"));
    }
    // SAFETY: `name` is an 8-byte constant of an object loaded into this process; the JIT
    // keeps its memory for the process's lifetime.
    Ok(unsafe { std::ptr::read_unaligned(addr as *const u64) })
}

/// Adds `object` (unless `symbol` is already loaded) and returns the address of `symbol`.
/// An object that is not an object file or lacks `symbol` (another kernel's, under this
/// kernel's cache key) is refused before the JIT sees it: adding it would define another
/// kernel's symbol in the process, and that kernel's own load would then fail.
pub(crate) fn load(object: &[u8], symbol: &str) -> Result<usize, String> {
    // Checked even when the symbol is loaded: the bytes are what the caller trusts.
    if !has_symbol(object, symbol) {
        return Err(format!("the object does not define `{symbol}`"));
    }
    let mut jit = super::once::lock(jit()?);
    if let Some(addr) = jit.loaded.get(symbol) {
        return Ok(*addr);
    }
    let name = CString::new(format!("{symbol}.o")).map_err(|e| e.to_string())?;
    let sym = CString::new(symbol).map_err(|e| e.to_string())?;
    // SAFETY: the memory buffer copies `object`; LLJIT takes ownership of it.
    let addr = unsafe {
        let buf = llvm_sys::core::LLVMCreateMemoryBufferWithMemoryRangeCopy(
            object.as_ptr() as *const libc::c_char,
            object.len(),
            name.as_ptr(),
        );
        take_error(LLVMOrcLLJITAddObjectFile(
            jit.raw,
            LLVMOrcLLJITGetMainJITDylib(jit.raw),
            buf,
        ))?;
        let mut addr: LLVMOrcExecutorAddress = 0;
        take_error(LLVMOrcLLJITLookup(jit.raw, &mut addr, sym.as_ptr()))?;
        addr as usize
    };
    if addr == 0 {
        return Err(format!("symbol {symbol} resolved to null"));
    }
    jit.loaded.insert(symbol.to_string(), addr);
    if super::perf_map::enabled() {
        super::perf_map::append(&super::perf_map::entries(object, symbol, addr));
    }
    Ok(addr)
}
