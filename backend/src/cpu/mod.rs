//! The CPU backend: trace → IR text → cache key → (disk cache | LLVM codegen at O3) → JIT →
//! a grid of programs on the worker pool.

pub mod cache;
mod codegen;
mod jit;
mod link;
mod pool;
mod target;

pub use pool::num_threads;

use crate::launch::{Grid, KernelKey, LaunchOptions, RawArg, TraceFn};
use crate::{Error, Result};
use inkwell::context::Context;
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::FileType;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use tritium_dsl::ir::{print_function, Function, Loc};
use tritium_dsl::trace::Specialization;

/// Bumped whenever generated code changes meaning; part of every cache key.
const CODEGEN_VERSION: &str = concat!("tritium-", env!("CARGO_PKG_VERSION"), "-llvm19-cg3-custom");

type EntryFn =
    unsafe extern "C" fn(*const u64, *const u64, *mut u8, *mut u64, u64, u64, u64, u64, u64);

/// A kernel compiled for the host CPU and loaded into the process.
pub struct Compiled {
    /// The traced IR.
    pub function: Function,
    /// SHA-256 of the cache key (compiler version, target, options, IR text).
    pub key_hash: String,
    entry: EntryFn,
    scratch_bytes: usize,
    sites: Vec<(Loc, &'static str)>,
}

type Slot = Arc<Mutex<Option<Arc<Compiled>>>>;
type MemKey = (KernelKey, Specialization, bool);

fn memory_cache() -> &'static Mutex<HashMap<MemKey, Slot>> {
    static CACHE: OnceLock<Mutex<HashMap<MemKey, Slot>>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// The compiled kernel for this key and specialization, compiling it at most once per
/// process even when many threads launch it at the same time.
pub(crate) fn compiled(
    key: &KernelKey,
    spec: &Specialization,
    options: &LaunchOptions,
    trace: TraceFn<'_>,
) -> Result<Arc<Compiled>> {
    let bounds_check = options.bounds_check();
    let slot = {
        let mut map = memory_cache().lock().map_err(|_| poisoned(key.name))?;
        map.entry((key.clone(), spec.clone(), bounds_check))
            .or_default()
            .clone()
    };
    let mut entry = slot.lock().map_err(|_| poisoned(key.name))?;
    if let Some(c) = entry.as_ref() {
        return Ok(c.clone());
    }
    let f = trace(spec)?;
    let c = Arc::new(compile(f, bounds_check)?);
    *entry = Some(c.clone());
    Ok(c)
}

fn poisoned(kernel: &str) -> Error {
    Error::Compile {
        kernel: kernel.to_string(),
        message: "a previous compilation panicked".into(),
    }
}

/// Compiles (or loads from the disk cache) one traced function.
pub fn compile(f: Function, bounds_check: bool) -> Result<Compiled> {
    let text = print_function(&f);
    let target = target::host_description();
    let opts = format!("bounds_check={bounds_check}");
    let err = |message: String| Error::Compile {
        kernel: f.name.clone(),
        message,
    };
    // Linked bitcode is part of what is compiled: its content hash joins the key.
    let libs: Vec<String> = link::bitcodes(&f)
        .map_err(err)?
        .iter()
        .map(|(_, _, bytes)| cache::hash_bytes(bytes))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let libs = libs.join(",");
    let key_hash = cache::hash_key(&[CODEGEN_VERSION, &target, &opts, &libs, &text]);
    let symbol = format!("tritium_{}_{}", sanitize(&f.name), &key_hash[..16]);
    let dump = dump_dir();
    if let Some(d) = &dump {
        write_dump(d, &symbol, "tir", text.as_bytes());
    }
    let loaded = cache::read(&key_hash).and_then(|e| {
        let addr = jit::load(&e.object, &symbol).ok()?;
        Some((addr, e.scratch_bytes))
    });
    let (addr, scratch_bytes) = match loaded {
        Some(hit) => hit,
        None => {
            let entry = generate_object(&f, &symbol, bounds_check, dump.as_deref()).map_err(err)?;
            cache::write(&key_hash, &entry);
            (
                jit::load(&entry.object, &symbol).map_err(err)?,
                entry.scratch_bytes,
            )
        }
    };
    // SAFETY: `addr` is the address of the generated entry function, whose signature is
    // exactly `EntryFn` (see codegen::generate).
    let entry = unsafe { std::mem::transmute::<usize, EntryFn>(addr) };
    let sites = codegen::memory_sites(&f);
    Ok(Compiled {
        function: f,
        key_hash,
        entry,
        scratch_bytes,
        sites,
    })
}

fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

fn dump_dir() -> Option<std::path::PathBuf> {
    std::env::var_os("TRITIUM_DUMP")
        .filter(|d| !d.is_empty())
        .map(std::path::PathBuf::from)
}

fn write_dump(dir: &std::path::Path, symbol: &str, ext: &str, bytes: &[u8]) {
    let _ = std::fs::create_dir_all(dir);
    let _ = std::fs::write(dir.join(format!("{symbol}.{ext}")), bytes);
}

/// IR → LLVM → O3 → object code (and the dumps on the way).
fn generate_object(
    f: &Function,
    symbol: &str,
    bounds_check: bool,
    dump: Option<&std::path::Path>,
) -> std::result::Result<cache::Entry, String> {
    let machine = target::host_machine()?;
    let ctx = Context::create();
    let module = ctx.create_module(symbol);
    module.set_triple(&machine.get_triple());
    module.set_data_layout(&machine.get_target_data().get_data_layout());
    let customs = link::link_custom_code(&ctx, &module, f, &machine)?;
    let g = codegen::generate(
        &ctx,
        &module,
        f,
        symbol,
        codegen::CodegenOptions { bounds_check },
        &customs,
    )?;
    if let Some(d) = dump {
        write_dump(d, symbol, "ll", module.print_to_string().to_bytes());
    }
    module
        .verify()
        .map_err(|e| format!("generated LLVM IR is invalid: {e}"))?;
    module
        .run_passes("default<O3>", &machine, PassBuilderOptions::create())
        .map_err(|e| e.to_string())?;
    if let Some(d) = dump {
        write_dump(d, symbol, "opt.ll", module.print_to_string().to_bytes());
        if let Ok(asm) = machine.write_to_memory_buffer(&module, FileType::Assembly) {
            write_dump(d, symbol, "s", asm.as_slice());
        }
    }
    let obj = machine
        .write_to_memory_buffer(&module, FileType::Object)
        .map_err(|e| e.to_string())?;
    Ok(cache::Entry {
        scratch_bytes: g.scratch_bytes,
        object: obj.as_slice().to_vec(),
    })
}

impl Compiled {
    /// Runs the grid. Arguments must already be checked against `function`.
    pub fn run(&self, grid: Grid, args: &[RawArg], _bounds_check: bool) -> Result<()> {
        let slots: Vec<u64> = args
            .iter()
            .map(|a| match a {
                RawArg::Ptr(b) => b.ptr as u64,
                RawArg::Scalar { bits, .. } => *bits,
            })
            .collect();
        let ranges: Vec<u64> = args
            .iter()
            .flat_map(|a| match a {
                RawArg::Ptr(b) => [b.lo as u64, b.hi as u64],
                RawArg::Scalar { .. } => [0, 0],
            })
            .collect();
        let fault = [
            std::sync::atomic::AtomicU64::new(0),
            std::sync::atomic::AtomicU64::new(0),
        ];
        let [nx, ny, nz] = grid.0;
        let (slots_addr, ranges_addr, fault_addr) = (
            slots.as_ptr() as usize,
            ranges.as_ptr() as usize,
            fault.as_ptr() as usize,
        );
        let entry = self.entry;
        pool::run_grid(
            grid.programs(),
            self.scratch_bytes,
            &move |start, end, scratch| {
                // SAFETY: the entry function reads `slots` (one per parameter), `ranges` (two
                // per parameter) and writes `fault` (two u64), all alive for this call; the
                // borrowed buffers in the slots outlive the launch (KernelArgs' lifetime);
                // scratch holds `scratch_bytes` bytes owned by this thread.
                unsafe {
                    entry(
                        slots_addr as *const u64,
                        ranges_addr as *const u64,
                        scratch,
                        fault_addr as *mut u64,
                        start,
                        end,
                        nx,
                        ny,
                        nz,
                    )
                }
            },
        );
        let site = fault[0].load(std::sync::atomic::Ordering::SeqCst);
        if site == 0 {
            return Ok(());
        }
        let addr = fault[1].load(std::sync::atomic::Ordering::SeqCst);
        let (loc, kind) = self
            .sites
            .get(site as usize - 1)
            .cloned()
            .unwrap_or_default();
        let buffers: Vec<String> = self
            .function
            .params
            .iter()
            .zip(args)
            .filter_map(|(p, a)| match a {
                RawArg::Ptr(b) => Some(format!("`{}` [{:#x}, {:#x})", p.name, b.lo, b.hi)),
                RawArg::Scalar { .. } => None,
            })
            .collect();
        Err(Error::Runtime {
            kernel: self.function.name.clone(),
            location: loc.to_string(),
            message: format!(
                "out-of-bounds {kind} at address {addr:#x} (buffers: {})",
                buffers.join(", ")
            ),
        })
    }
}
