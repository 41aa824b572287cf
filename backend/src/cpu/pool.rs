//! The worker pool that runs a grid's programs, and per-thread scratch memory.

use rayon::prelude::*;
use std::cell::RefCell;
use std::sync::OnceLock;

static POOL: OnceLock<rayon::ThreadPool> = OnceLock::new();

/// Worker threads: `TRITIUM_NUM_THREADS` when it is a positive integer (see
/// [`parse_num_threads`]), else all cores. Read when the pool starts (the first launch).
pub fn num_threads() -> usize {
    std::env::var("TRITIUM_NUM_THREADS")
        .ok()
        .and_then(|v| parse_num_threads(&v))
        .unwrap_or_else(|| {
            std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)
        })
}

/// The worker count a `TRITIUM_NUM_THREADS` value asks for: a positive decimal integer,
/// surrounding spaces allowed. `None` (use all cores) for anything else.
pub fn parse_num_threads(value: &str) -> Option<usize> {
    value.trim().parse::<usize>().ok().filter(|n| *n > 0)
}

/// The number of worker threads of the running pool (starting it if needed).
pub fn pool_threads() -> usize {
    pool().current_num_threads()
}

fn pool() -> &'static rayon::ThreadPool {
    POOL.get_or_init(|| {
        rayon::ThreadPoolBuilder::new()
            .num_threads(num_threads())
            .thread_name(|i| format!("tritium-worker-{i}"))
            .build()
            .expect("spawning worker threads")
    })
}

thread_local! {
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// Runs `f` with a 64-byte-aligned scratch area of at least `bytes` bytes owned by this thread.
fn with_scratch<R>(bytes: usize, f: impl FnOnce(*mut u8) -> R) -> R {
    SCRATCH.with(|s| {
        let mut s = s.borrow_mut();
        if s.len() < bytes + 64 {
            s.resize(bytes + 64, 0);
        }
        let base = s.as_mut_ptr();
        let aligned = base.wrapping_add(base.align_offset(64));
        f(aligned)
    })
}

/// Runs programs `0..total` as `run(start, end, scratch)` calls spread over the pool.
pub(crate) fn run_grid(total: u64, scratch_bytes: usize, run: &(dyn Fn(u64, u64, *mut u8) + Sync)) {
    let threads = pool().current_num_threads() as u64;
    if total == 1 || threads == 1 {
        with_scratch(scratch_bytes, |s| run(0, total, s));
        return;
    }
    // Many chunks per thread balance uneven programs and threads slowed by other work on
    // the machine, without per-program overhead.
    let chunks = total.min(threads * 16);
    pool().install(|| {
        (0..chunks).into_par_iter().for_each(|c| {
            // In u128: `c * total` may pass 2^64 for the largest grids.
            let start = (c as u128 * total as u128 / chunks as u128) as u64;
            let end = ((c + 1) as u128 * total as u128 / chunks as u128) as u64;
            with_scratch(scratch_bytes, |s| run(start, end, s));
        })
    });
}
