//! The worker pool that runs a grid's programs, and per-thread scratch memory.

use std::cell::RefCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

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

/// A program range runner, with its lifetime erased (see [`Shared::run`]).
type Runner = dyn Fn(u64, u64, *mut u8) + Sync;

/// What the launching thread and its helpers share for one grid.
struct Shared {
    /// The next chunk to claim.
    next: AtomicU64,
    /// Chunks finished (run, or panicked).
    done: AtomicU64,
    chunks: u64,
    /// Lines of `line` programs to share out (a line is a program when lines are not).
    lines: u64,
    line: u64,
    /// Programs at the start that ran before the chunks (chunk 0 starts after them).
    skip: u64,
    scratch_bytes: usize,
    /// The launch's runner. Dereferenced only by a thread that claimed a chunk below
    /// `chunks`; the launching thread returns only once every claimed chunk is done, and
    /// after that no chunk can be claimed, so a helper that starts late never touches it.
    run: *const Runner,
    /// The first panic of a program range, re-raised in the launching thread.
    panic: Mutex<Option<Box<dyn std::any::Any + Send>>>,
    /// The launching thread, woken when the last chunk is done.
    caller: std::thread::Thread,
}

// SAFETY: `run` points to a `Sync` closure, used as the field's docs say; the rest is
// atomics, a mutex and a thread handle.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

impl Shared {
    /// Claims and runs chunks until none is left, or `max` of them ran.
    fn work(&self, max: u64) {
        for _ in 0..max {
            let c = self.next.fetch_add(1, Ordering::Relaxed);
            if c >= self.chunks {
                return;
            }
            // In u128: `c * lines` may pass 2^64 for the largest grids.
            let (lines, chunks) = (self.lines as u128, self.chunks as u128);
            let start = (c as u128 * lines / chunks) as u64 * self.line;
            let end = ((c as u128 + 1) * lines / chunks) as u64 * self.line;
            let start = start.max(self.skip);
            if start >= end {
                self.finish();
                continue;
            }
            // SAFETY: chunk `c` was claimed, so the launching thread is still waiting (see
            // `run`'s docs) and the closure is alive.
            let run = unsafe { &*self.run };
            let r = catch_unwind(AssertUnwindSafe(|| {
                with_scratch(self.scratch_bytes, |s| run(start, end, s))
            }));
            if let Err(p) = r {
                self.panic
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get_or_insert(p);
            }
            self.finish();
        }
    }

    /// Counts a claimed chunk as done, waking the launching thread after the last.
    fn finish(&self) {
        if self.done.fetch_add(1, Ordering::AcqRel) + 1 == self.chunks {
            self.caller.unpark();
        }
    }
}

/// Work below this (estimated from the first chunk) runs on the launching thread alone:
/// waking a worker costs about as much.
const WAKE_WORTH: Duration = Duration::from_micros(20);

/// What one program of a kernel took, measured by a launch that timed its first program
/// or chunk (zero: never measured). A later launch that finds the rest of its grid worth
/// waking helpers for wakes them at once instead of timing again: a helper woken only
/// after the first program starts one program late, and with tutorial 03's few lines of
/// programs per thread the launch then ends a program late (at 1000³ and 1024³, 28 and 22
/// programs per thread, that was 5% of the matmul's time).
#[derive(Debug, Default)]
pub(crate) struct ProgramTime(AtomicU64);

impl ProgramTime {
    fn get(&self) -> Duration {
        Duration::from_nanos(self.0.load(Ordering::Relaxed))
    }

    /// Records `took` for `programs` programs (at least 1 ns each, so it counts as measured).
    fn set_average(&self, took: Duration, programs: u64) {
        let ns = took.as_nanos() / u128::from(programs.max(1));
        self.0.store(
            u64::try_from(ns).unwrap_or(u64::MAX).max(1),
            Ordering::Relaxed,
        );
    }
}

/// True when `programs` programs of `per_program` each are worth waking helpers for.
fn worth_waking(per_program: Duration, programs: u64) -> bool {
    per_program.saturating_mul(programs.min(u64::from(u32::MAX)) as u32) > WAKE_WORTH
}

/// Runs programs `0..total` as `run(start, end, scratch)` calls: the launching thread runs
/// chunks itself from the start, and wakes helpers from the pool when the grid has few
/// chunks, or when the rest of the grid (estimated from its first chunk, or its first
/// program, or from `per_program` as an earlier launch measured it) is worth more than
/// waking them. Helpers claim chunks from a shared counter, so a helper that starts late
/// finds nothing to do and the launch never waits for a thread to wake. A panic in a
/// program range reaches the caller after every other range is done.
///
/// Programs come in lines of `line` (the grid's first axis). When there are two lines or
/// more per thread, a chunk is whole lines: a line's programs run one after another on one
/// worker, which keeps what they share (tutorial 03's column of blocks reads the same `b`
/// tiles, which the worker keeps packed: codegen `panel_cache`). Split across workers, the
/// programs of 1000³'s columns shared nothing: 388–391 against 413–426 GFLOP/s in lines.
pub(crate) fn run_grid(
    total: u64,
    line: u64,
    scratch_bytes: usize,
    per_program: &ProgramTime,
    run: &(dyn Fn(u64, u64, *mut u8) + Sync),
) {
    let threads = pool().current_num_threads() as u64;
    if total == 1 || threads == 1 {
        with_scratch(scratch_bytes, |s| run(0, total, s));
        return;
    }
    let in_lines = line > 1 && total.is_multiple_of(line) && total / line >= 2 * threads;
    let line = if in_lines { line } else { 1 };
    let lines = total / line;
    // Many chunks per thread balance uneven programs and threads slowed by other work on
    // the machine, without per-program overhead.
    let chunks = lines.min(threads * 16);
    let known = per_program.get();
    // Helpers from the start: an earlier launch's programs say this grid is worth them.
    let wake_now = !known.is_zero() && worth_waking(known, total);
    let first_alone = in_lines && !wake_now;
    // SAFETY: only the lifetime is erased; see `Shared::run` for why no use outlives it.
    let erased: *const Runner = unsafe {
        std::mem::transmute::<&(dyn Fn(u64, u64, *mut u8) + Sync + '_), *const Runner>(run)
    };
    let shared = Arc::new(Shared {
        next: AtomicU64::new(0),
        done: AtomicU64::new(0),
        chunks,
        lines,
        line,
        skip: u64::from(first_alone),
        scratch_bytes,
        run: erased,
        panic: Mutex::new(None),
        caller: std::thread::current(),
    });
    let wake = |rest: u64| {
        // One helper per other thread, but no more than the chunks left.
        for _ in 0..(threads - 1).min(rest) {
            let s = shared.clone();
            pool().spawn(move || s.work(u64::MAX));
        }
    };
    if wake_now {
        wake(chunks);
    } else if first_alone {
        // The first program alone, timed: a whole first line would run before any helper.
        let first = Instant::now();
        with_scratch(scratch_bytes, |s| run(0, 1, s));
        let took = first.elapsed();
        per_program.set_average(took, 1);
        if worth_waking(took, total - 1) {
            wake(chunks);
        }
    } else if chunks <= 2 * threads {
        // Few chunks (a persistent kernel's one program per thread): each is likely
        // large, and running the first alone would serialize it.
        wake(chunks);
    } else {
        // The first chunk, timed, tells whether the rest is worth waking threads for.
        let first = Instant::now();
        shared.work(1);
        let took = first.elapsed();
        per_program.set_average(took, total / chunks);
        if worth_waking(took, chunks - 1) {
            wake(chunks - 1);
        }
    }
    shared.work(u64::MAX);
    let spin_until = Instant::now() + Duration::from_micros(30);
    while shared.done.load(Ordering::Acquire) < chunks {
        if Instant::now() < spin_until {
            std::hint::spin_loop();
        } else {
            std::thread::park_timeout(Duration::from_micros(200));
        }
    }
    let panic = shared
        .panic
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .take();
    if let Some(p) = panic {
        std::panic::resume_unwind(p);
    }
}

#[cfg(test)]
mod tests {
    use super::{run_grid, ProgramTime};
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Mutex;
    use std::time::Duration;

    /// Every program runs exactly once, whether the grid runs inline (cheap programs) or
    /// with helpers (slow ones), for grid sizes around the chunking's edges, in lines of
    /// the grid's first axis or not. Chunks of lines end at a line's end.
    #[test]
    fn every_program_runs_once() {
        let grids: [(u64, u64); 12] = [
            (1, 1),
            (2, 1),
            (31, 1),
            (32, 1),
            (33, 1),
            (64, 64),
            (1000, 1),
            (10_007, 1),
            (56, 7),
            (928, 29),
            (64, 2),
            (4096, 1024),
        ];
        // Timed by this launch, or known from an earlier one (helpers woken at once).
        let known = ProgramTime::default();
        known.set_average(Duration::from_millis(1), 1);
        for (slow, before) in [(false, None), (true, None), (false, Some(&known))] {
            for (total, line) in grids {
                let seen = Mutex::new(vec![0u8; total as usize]);
                let in_lines = total / line >= 2 * super::pool_threads() as u64 && line > 1;
                let fresh = ProgramTime::default();
                run_grid(
                    total,
                    line,
                    64,
                    before.unwrap_or(&fresh),
                    &|start, end, scratch| {
                        assert!(!scratch.is_null() && (scratch as usize).is_multiple_of(64));
                        if in_lines && start > 0 {
                            assert!(
                                end.is_multiple_of(line),
                                "{start}..{end} in lines of {line}"
                            );
                        }
                        if slow {
                            std::thread::sleep(std::time::Duration::from_micros(50));
                        }
                        let mut s = seen.lock().unwrap();
                        for p in start..end {
                            s[p as usize] += 1;
                        }
                    },
                );
                let s = seen.into_inner().unwrap();
                assert!(
                    s.iter().all(|&n| n == 1),
                    "total {total}, line {line}, slow {slow}, known {before:?}"
                );
            }
        }
    }

    /// A launch in lines runs its first program alone to time it, and records the time; a
    /// later launch that knows it hands out whole lines from the start.
    #[test]
    fn a_known_program_time_skips_the_timed_first_program() {
        let threads = super::pool_threads() as u64;
        if threads < 2 {
            return; // one thread runs the whole grid as one range
        }
        let (line, lines) = (4, 2 * threads);
        let per_program = ProgramTime::default();
        let mut first_ranges = Vec::new();
        for _ in 0..2 {
            let ranges = Mutex::new(Vec::new());
            run_grid(line * lines, line, 0, &per_program, &|start, end, _| {
                std::thread::sleep(Duration::from_micros(100));
                ranges.lock().unwrap().push((start, end));
            });
            let ranges = ranges.into_inner().unwrap();
            first_ranges.push(ranges.iter().copied().find(|r| r.0 == 0));
            assert!(per_program.get() >= Duration::from_micros(100));
        }
        assert_eq!(first_ranges, [Some((0, 1)), Some((0, line))]);
    }

    /// A panicking program range reaches the caller after the other ranges ran, and the
    /// pool keeps working.
    #[test]
    fn a_panic_reaches_the_caller_and_the_pool_survives() {
        let ran = AtomicU64::new(0);
        let r = std::panic::catch_unwind(|| {
            run_grid(1000, 1, 0, &ProgramTime::default(), &|start, end, _| {
                std::thread::sleep(std::time::Duration::from_micros(20));
                ran.fetch_add(end - start, Ordering::Relaxed);
                if (start..end).contains(&537) {
                    panic!("program 537");
                }
            })
        });
        let p = r.expect_err("the panic reaches the caller");
        assert_eq!(p.downcast_ref::<&str>(), Some(&"program 537"));
        assert_eq!(ran.load(Ordering::Relaxed), 1000, "every range ran");
        let again = AtomicU64::new(0);
        run_grid(5000, 1, 0, &ProgramTime::default(), &|start, end, _| {
            again.fetch_add(end - start, Ordering::Relaxed);
        });
        assert_eq!(again.load(Ordering::Relaxed), 5000);
    }
}
