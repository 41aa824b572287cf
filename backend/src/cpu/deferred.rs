//! Compiling several CPU kernels in parallel: launches made inside [`defer_compiles`] trace
//! their kernel and return without compiling or running it; [`compile_deferred`] then
//! compiles what they traced on as many threads as launches use, into the cache the
//! next launches find. The autotuner does this with its configs before timing them (a
//! cold autotuned launch compiled one config after another).

use super::{compile, compiled_with, CompileOptions};
use crate::launch::{KernelKey, LaunchOptions, TraceFn};
use crate::{Device, Result};
use std::cell::RefCell;
use std::sync::atomic::{AtomicUsize, Ordering};
use tritium_dsl::ir::Function;
use tritium_dsl::trace::Specialization;

/// A kernel a launch inside [`defer_compiles`] traced and did not compile.
#[derive(Debug)]
pub struct Deferred {
    key: KernelKey,
    spec: Specialization,
    options: CompileOptions,
    function: Function,
}

thread_local! {
    /// While [`defer_compiles`] runs on this thread: what its launches traced.
    static DEFERRING: RefCell<Option<Vec<Deferred>>> = const { RefCell::new(None) };
}

/// Runs `f`; every CPU launch it makes on this thread only traces its kernel (a tracing
/// error is the launch's error) and returns `Ok` without compiling or running it, leaving
/// every buffer untouched (launches on the interpreter and the emulator return without
/// running too; CUDA launches run). Returns `f`'s result and the kernels traced.
pub fn defer_compiles<R>(f: impl FnOnce() -> R) -> (R, Vec<Deferred>) {
    /// Puts back the enclosing state (`None` outside any `defer_compiles`) when dropped,
    /// also when `f` panics: a thread left deferring would skip every later launch.
    struct Restore(Option<Vec<Deferred>>);
    impl Drop for Restore {
        fn drop(&mut self) {
            let outer = self.0.take();
            DEFERRING.with(|d| *d.borrow_mut() = outer);
        }
    }
    let restore = Restore(DEFERRING.with(|d| d.borrow_mut().replace(Vec::new())));
    let r = f();
    let traced = DEFERRING.with(|d| d.borrow_mut().take());
    drop(restore);
    (r, traced.unwrap_or_default())
}

/// True inside [`defer_compiles`] on this thread: CPU launches only trace.
pub fn deferring() -> bool {
    DEFERRING.with(|d| d.borrow().is_some())
}

/// Compiles `kernels` (from [`defer_compiles`]) on as many threads as launches use
/// ([`super::num_threads`]: `TRITIUM_NUM_THREADS`, else every core) into the in-memory cache; the next launch of each finds it there. A kernel that fails
/// to compile is left out: its launch compiles it again and reports the error.
pub fn compile_deferred(kernels: Vec<Deferred>) {
    let threads = super::num_threads();
    let next = AtomicUsize::new(0);
    let work = || loop {
        let Some(d) = kernels.get(next.fetch_add(1, Ordering::Relaxed)) else {
            return;
        };
        // A panic in one compile must not take the others (or the caller) with it.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            compiled_with(&d.key, &d.spec, &d.options, || {
                compile(d.function.clone(), &d.options)
            })
        }));
    };
    std::thread::scope(|s| {
        for _ in 1..threads.min(kernels.len()) {
            s.spawn(work);
        }
        work();
    });
}

/// In [`defer_compiles`], traces the kernel of a CPU launch, records it and returns true:
/// the launch returns without running (a launch on the interpreter or the emulator
/// returns too, recording nothing). Else false.
pub(crate) fn deferred(
    device: &Device,
    key: &KernelKey,
    spec: &Specialization,
    options: &LaunchOptions,
    trace: TraceFn<'_>,
) -> Result<bool> {
    if !deferring() {
        return Ok(false);
    }
    if *device != Device::Cpu || options.interpret() {
        return Ok(true);
    }
    let d = Deferred {
        key: key.clone(),
        spec: spec.clone(),
        options: options.compile_options(),
        function: trace(spec)?,
    };
    DEFERRING.with(|list| list.borrow_mut().as_mut().map(|l| l.push(d)));
    Ok(true)
}
