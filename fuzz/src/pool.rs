//! Long runs in worker processes: a crash, an abort or a hang in a compiler costs one seed,
//! not the run, and compiled kernels (which a process never frees) go with their worker.
//!
//! The parent hands out batches of seeds to `jobs` workers (`tritium-fuzz --worker`), which
//! speak a line protocol on stdout:
//!
//! ```text
//! start SEED                       about to run SEED
//! | TEXT                           a line of SEED's failure report
//! done SEED ok|fail KINDS TIMES [TAGS]
//!                                  KINDS: op kinds, comma-separated; TIMES: target=µs,…;
//!                                  TAGS: what else the seed ran (`launch.default`,
//!                                  `oob.refused`, …), comma-separated
//! ```
//!
//! A worker that exits unsuccessfully, or says nothing for [`PoolConfig::hang`], is blamed
//! on the seed it started last; the batch goes on in a new worker from the next seed.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// How a run is spread over worker processes.
#[derive(Debug, Clone, Copy)]
pub struct PoolConfig {
    /// Workers at once.
    pub jobs: usize,
    /// Seeds per worker process.
    pub batch: u64,
    /// Silence after which a worker is killed and its seed reported as a hang.
    pub hang: Duration,
    /// No batch starts after this time (workers are told it too, and stop between seeds).
    pub deadline: Option<SystemTime>,
}

/// What the workers report.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// A seed ran to the end.
    Done {
        /// The seed.
        seed: u64,
        /// Every target agreed.
        ok: bool,
        /// Op kinds of the program.
        kinds: Vec<String>,
        /// Time per target name.
        times: Vec<(String, Duration)>,
        /// The failure report's lines (empty when `ok`).
        report: Vec<String>,
        /// What else the seed ran (how it was launched, its out-of-bounds variant).
        tags: Vec<String>,
    },
    /// The worker died or hung on a seed.
    Crashed {
        /// The seed.
        seed: u64,
        /// The exit status, or that it hung.
        why: String,
    },
}

/// Builds the command of a worker that runs `count` seeds from `first`.
pub type WorkerCommand = dyn Fn(u64, u64) -> Command + Send + Sync;

/// Runs seeds `first..first + programs` (or until the config's deadline) and calls `on`
/// with every event, in the order they arrive.
pub fn run(
    worker: Arc<WorkerCommand>,
    first: u64,
    programs: u64,
    config: PoolConfig,
    on: &mut dyn FnMut(Event),
) {
    let end = first.saturating_add(programs);
    let next = Arc::new(Mutex::new(first));
    let (tx, rx) = mpsc::channel::<Event>();
    let slots: Vec<Arc<Slot>> = (0..config.jobs.max(1))
        .map(|_| Arc::new(Slot::default()))
        .collect();
    let threads: Vec<_> = slots
        .iter()
        .map(|slot| {
            let (worker, next, tx, slot) = (worker.clone(), next.clone(), tx.clone(), slot.clone());
            std::thread::spawn(move || loop {
                if config.deadline.is_some_and(|d| SystemTime::now() > d) {
                    return;
                }
                let from = {
                    let mut n = next.lock().expect("seed counter");
                    let from = *n;
                    *n = (*n).saturating_add(config.batch).min(end);
                    from
                };
                if from >= end {
                    return;
                }
                let to = from.saturating_add(config.batch).min(end);
                run_batch(&*worker, from, to, &slot, &tx);
            })
        })
        .collect();
    drop(tx);
    loop {
        match rx.recv_timeout(Duration::from_millis(500)) {
            Ok(e) => on(e),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                for s in &slots {
                    s.kill_if_silent(config.hang);
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    for t in threads {
        let _ = t.join();
    }
}

/// One worker thread's current child, for the watchdog.
#[derive(Default)]
struct Slot {
    child: Mutex<Option<(Child, Instant)>>,
    hung: Mutex<bool>,
}

impl Slot {
    fn kill_if_silent(&self, hang: Duration) {
        let mut c = self.child.lock().expect("slot");
        if let Some((child, since)) = c.as_mut() {
            if since.elapsed() > hang {
                *self.hung.lock().expect("slot") = true;
                let _ = child.kill();
            }
        }
    }

    fn heard(&self) {
        if let Some((_, since)) = self.child.lock().expect("slot").as_mut() {
            *since = Instant::now();
        }
    }
}

fn run_batch(
    worker: &WorkerCommand,
    mut from: u64,
    to: u64,
    slot: &Slot,
    tx: &mpsc::Sender<Event>,
) {
    while from < to {
        let mut cmd = worker(from, to - from);
        cmd.stdout(Stdio::piped()).stdin(Stdio::null());
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                let _ = tx.send(Event::Crashed {
                    seed: from,
                    why: format!("cannot start a worker: {e}"),
                });
                return;
            }
        };
        let out = child.stdout.take().expect("piped");
        *slot.hung.lock().expect("slot") = false;
        *slot.child.lock().expect("slot") = Some((child, Instant::now()));
        let mut started: Option<u64> = None;
        let mut report = Vec::new();
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            slot.heard();
            if let Some(rest) = line.strip_prefix("| ") {
                report.push(rest.to_string());
            } else if let Some(s) = line.strip_prefix("start ") {
                started = s.trim().parse().ok();
            } else if let Some(e) = parse_done(&line, &mut report) {
                if let Event::Done { seed, .. } = e {
                    from = seed + 1;
                }
                started = None;
                let _ = tx.send(e);
            }
        }
        let (mut child, _) = slot.child.lock().expect("slot").take().expect("ours");
        let status = child.wait();
        let hung = *slot.hung.lock().expect("slot");
        match (status, started) {
            (Ok(s), None) if s.success() => return,
            (status, started) => {
                let seed = started.unwrap_or(from);
                let why = match status {
                    _ if hung => "hung (killed by the watchdog)".to_string(),
                    Ok(s) => format!("the worker died: {s}"),
                    Err(e) => format!("the worker died: {e}"),
                };
                let _ = tx.send(Event::Crashed { seed, why });
                from = seed + 1;
            }
        }
    }
}

fn parse_done(line: &str, report: &mut Vec<String>) -> Option<Event> {
    let mut w = line.split(' ');
    if w.next()? != "done" {
        return None;
    }
    let seed = w.next()?.parse().ok()?;
    let ok = w.next()? == "ok";
    let list = |s: Option<&str>| -> Vec<String> {
        s.unwrap_or("")
            .split(',')
            .filter(|k| !k.is_empty() && *k != "-")
            .map(str::to_string)
            .collect()
    };
    let kinds = list(w.next());
    let times = list(w.next())
        .iter()
        .filter_map(|t| {
            let (name, us) = t.split_once('=')?;
            Some((name.to_string(), Duration::from_micros(us.parse().ok()?)))
        })
        .collect();
    let tags = list(w.next());
    Some(Event::Done {
        seed,
        ok,
        kinds,
        times,
        report: std::mem::take(report),
        tags,
    })
}

/// The `done` line a worker prints for a seed.
pub fn done_line(
    seed: u64,
    ok: bool,
    kinds: &[String],
    times: &[(String, Duration)],
    tags: &[String],
) -> String {
    let dash = |s: String| if s.is_empty() { "-".to_string() } else { s };
    let times: Vec<String> = times
        .iter()
        .map(|(t, d)| format!("{t}={}", d.as_micros()))
        .collect();
    format!(
        "done {seed} {} {} {} {}",
        if ok { "ok" } else { "fail" },
        dash(kinds.join(",")),
        dash(times.join(",")),
        dash(tags.join(","))
    )
}
