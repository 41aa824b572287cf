//! The CPU backend: trace → IR text → cache key → (disk cache | LLVM codegen at O3) → JIT →
//! a grid of programs on the worker pool.

mod codegen;
pub(crate) mod deferred;
mod pool;

pub use codegen::LANE_CHUNK;
pub use deferred::{compile_deferred, defer_compiles, deferring, Deferred};
pub use pool::{num_threads, parse_num_threads, pool_threads};

use crate::launch::{bounds, checked, named_buffers, race, Grid, KernelKey, LaunchOptions};
use crate::launch::{Pointee, RawArg, RawBuffer, TraceFn};
use crate::pipeline::dump::Dumps;
use crate::pipeline::link::{BitcodeTarget, CustomEntries};
use crate::pipeline::once::OnceMap;
use crate::pipeline::target::{Target, TargetKind};
pub use crate::pipeline::CompileOptions;
use crate::pipeline::{self, cache, host, jit, version};
use crate::Result;
use inkwell::context::Context;
use inkwell::module::Module;
use inkwell::targets::TargetMachine;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use tritium_dsl::ir::{Function, Loc};
use tritium_dsl::trace::Specialization;

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
    /// `function.written_params()`, computed once (launches check arguments against it).
    written: Vec<usize>,
    /// Compiled to report accesses to a race recorder (see `launch::race`).
    race_check: bool,
    /// Checked code compares pointers made from integers with every buffer of the launch
    /// (`checked::buffer_list`, after the race recorder's word).
    buffer_list: bool,
    /// The kernel's bounds proof, for default launches (`None` in checked mode, for
    /// unchecked launches and for the variants a default launch picks).
    proof: Option<bounds::LaunchProof>,
    /// The fault sites checked outside checked mode.
    checked_sites: Arc<[u32]>,
    /// What one program took in an earlier launch (see [`pool::run_grid`]).
    per_program: pool::ProgramTime,
}

type MemKey = (KernelKey, Specialization, CompileOptions);

/// The compile counters of every target (kept here under their old path).
pub use crate::pipeline::{stats, CompileStats, Stats};

/// The compiled kernel for this key and specialization, compiling it at most once per
/// process even when many threads launch it at the same time.
pub(crate) fn compiled(
    key: &KernelKey,
    spec: &Specialization,
    options: &LaunchOptions,
    trace: TraceFn<'_>,
) -> Result<Arc<Compiled>> {
    let options = options.compile_options();
    compiled_with(key, spec, &options, || compile(trace(spec)?, &options))
}

/// The in-memory cache of compiled CPU kernels: launches and [`compile_deferred`] share it.
static COMPILED: OnceMap<MemKey, Compiled> = OnceMap::new();

/// The kernel cached for (`key`, `spec`, `options`), made by `make` when there is none.
fn compiled_with(
    key: &KernelKey,
    spec: &Specialization,
    options: &CompileOptions,
    make: impl FnOnce() -> Result<Compiled>,
) -> Result<Arc<Compiled>> {
    COMPILED.get_or_make_like(
        &(key, spec, options),
        |k| k.0 == *key && k.1 == *spec && k.2 == *options,
        || (key.clone(), spec.clone(), options.clone()),
        make,
    )
}

/// Compiles (or loads from the disk cache) one traced function. Every call compiles: the
/// in-memory cache (`cpu::compiled`, one slot per kernel) is the launch's.
pub fn compile(f: Function, options: &CompileOptions) -> Result<Compiled> {
    let bounds_check = options.bounds_check || options.race_check;
    let (proof, checked_sites) = bounds::compiled_checks(&f, bounds_check, options.sites);
    let checked_sites: Arc<[u32]> = checked_sites.into();
    let target = HostCpu {
        bounds_check,
        race_check: options.race_check,
        checked_sites: checked_sites.clone(),
    };
    let c = pipeline::compile::compile(&target, f, options)?;
    // SAFETY: `c.code.entry` is the address of the generated entry function, whose
    // signature is exactly `EntryFn` (see codegen::generate).
    let entry = unsafe { std::mem::transmute::<usize, EntryFn>(c.code.entry) };
    let sites = c.function.fault_sites();
    let written = c.function.written_params();
    let buffer_list = (target.bounds_check || !checked_sites.is_empty())
        && !c.function.foreign_pointers().is_empty();
    Ok(Compiled {
        function: c.function,
        key_hash: c.key_hash,
        entry,
        scratch_bytes: c.code.scratch_bytes,
        sites,
        written,
        race_check: options.race_check,
        buffer_list,
        proof,
        checked_sites,
        per_program: pool::ProgramTime::default(),
    })
}

/// The kernel a launch of `compiled` (a default launch's) runs: itself when its bounds
/// proof covers every access it does not check for this launch's grid and arguments,
/// else the kernel that also checks the accesses the proof left (compiled once per such
/// set of sites).
pub(crate) fn proven(
    compiled: Arc<Compiled>,
    key: &KernelKey,
    spec: &Specialization,
    options: &LaunchOptions,
    grid: Grid,
    args: &crate::launch::KernelArgs<'_>,
) -> Result<Arc<Compiled>> {
    let proof = compiled.proof.as_ref();
    let checked = &compiled.checked_sites;
    let Some(more) = bounds::more_checks(proof, checked, grid, &args.args, &args.pointees)? else {
        return Ok(compiled);
    };
    let mut options = options.compile_options();
    more.apply(&mut options.bounds_check, &mut options.sites);
    compiled_with(key, spec, &options, || {
        compile(compiled.function.clone(), &options)
    })
}

/// The host CPU target: this module's code generator at O3 for the host machine, objects
/// in the disk cache, loaded by the JIT.
struct HostCpu {
    bounds_check: bool,
    race_check: bool,
    /// Outside checked mode, the fault sites checked (ascending).
    checked_sites: Arc<[u32]>,
}

/// A loaded CPU kernel: its entry and the scratch bytes per thread its object declares.
struct HostCode {
    entry: usize,
    scratch_bytes: usize,
}

impl Target for HostCpu {
    type Code = HostCode;

    fn kind(&self) -> TargetKind {
        TargetKind::Cpu
    }

    fn key(&self) -> std::result::Result<Vec<String>, String> {
        Ok(vec![
            version::CPU.to_string(),
            host::host_description(),
            format!("bounds_check={}", self.bounds_check),
            format!("race_check={}", self.race_check),
            format!("checked_sites={:?}", self.checked_sites),
        ])
    }

    fn store(&self) -> Option<cache::Store> {
        Some(cache::Store::Cpu)
    }

    fn bitcode(&self) -> BitcodeTarget {
        BitcodeTarget::Host
    }

    fn machine(&self) -> std::result::Result<TargetMachine, String> {
        host::host_machine()
    }

    fn generate<'ctx>(
        &self,
        ctx: &'ctx Context,
        module: &Module<'ctx>,
        f: &Function,
        symbol: &str,
        customs: &CustomEntries,
    ) -> std::result::Result<usize, crate::llvm::CodegenError> {
        let options = codegen::CodegenOptions {
            bounds_check: self.bounds_check,
            race_check: self.race_check,
        };
        let g = codegen::generate(
            ctx,
            module,
            f,
            symbol,
            options,
            &self.checked_sites,
            customs,
        )?;
        Ok(g.scratch_bytes)
    }

    fn emit(
        &self,
        machine: &TargetMachine,
        module: &Module<'_>,
        dumps: &Dumps<'_>,
    ) -> std::result::Result<Vec<u8>, String> {
        pipeline::compile::emit_object(machine, module, dumps)
    }

    fn decode(&self, bytes: &[u8], symbol: &str) -> std::result::Result<HostCode, String> {
        let entry = jit::load(bytes, symbol)?;
        // The object's own number, not the cache entry's `meta`.
        let scratch = jit::loaded_u64(bytes, &codegen::scratch_symbol(symbol))?;
        let scratch_bytes = usize::try_from(scratch)
            .ok()
            .filter(|b| *b <= cache::MAX_META)
            .ok_or_else(|| format!("the object declares {scratch} scratch bytes"))?;
        Ok(HostCode {
            entry,
            scratch_bytes,
        })
    }
}

impl Compiled {
    /// Scratch bytes each worker thread gives the kernel, as its object declares them.
    pub fn scratch_bytes(&self) -> usize {
        self.scratch_bytes
    }

    /// The parameters the kernel may write through (`function.written_params()`).
    pub fn written_params(&self) -> &[usize] {
        &self.written
    }

    /// Runs the grid. Arguments must already be checked against `function`.
    pub fn run(&self, grid: Grid, args: &[RawArg], _bounds_check: bool) -> Result<()> {
        self.run_launch(grid, args, &[])
    }

    /// [`Compiled::run`] for a launch whose pointer tables reach `pointees`.
    pub fn run_launch(&self, grid: Grid, args: &[RawArg], pointees: &[Pointee]) -> Result<()> {
        let slots: Vec<u64> = args.iter().map(RawArg::slot).collect();
        let host = |b: &RawBuffer| (b.lo as u64, b.hi as u64);
        // A race-checking kernel finds its recorder after the parameters' words, and a
        // kernel with pointers made from integers the list of every buffer after that word.
        let recorder = self.race_check.then(|| race::RaceRecorder::new(grid.0));
        let after_params = recorder.is_some() || self.buffer_list;
        let race_word = after_params.then(|| recorder.as_ref().map_or(0, |r| r as *const _ as u64));
        // Named only where needed: a cached launch stays a few hundred nanoseconds.
        let named = || named_buffers(&self.function, args, pointees);
        let buffers = match after_params {
            true => named(),
            false => Vec::new(),
        };
        let extra: Vec<u64> = race_word.into_iter().collect();
        let mut words = checked::CheckWords::new(args, &buffers, &extra, self.buffer_list, host);
        // The vector is not resized from here on: its address is where the words live.
        let base = words.words.as_ptr() as u64;
        words.place(base);
        let ranges = words.words;
        let fault: [AtomicU64; checked::FAULT_WORDS] = Default::default();
        let [nx, ny, nz] = grid.0;
        let (slots_addr, ranges_addr, fault_addr) = (
            slots.as_ptr() as usize,
            ranges.as_ptr() as usize,
            fault.as_ptr() as usize,
        );
        let entry = self.entry;
        pool::run_grid(
            grid.programs(),
            nx,
            self.scratch_bytes,
            &self.per_program,
            &move |start, end, scratch| {
                // SAFETY: the entry function reads `slots` (one per parameter), `ranges` (the
                // check words) and writes `fault` (FAULT_WORDS u64), all alive for this call; the
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
        let record = fault.map(AtomicU64::into_inner);
        if record[0] != 0 {
            let names = checked::named_ranges(&named(), host);
            checked::fault_result(&self.function, &self.sites, &record, &names)?;
        }
        match &recorder {
            Some(r) => r.result(&self.function, &self.sites, &buffers),
            None => Ok(()),
        }
    }
}
