//! Race detection (`TRITIUM_RACE_CHECK=1`, `LaunchOptions::race_check`): every memory
//! access of every program of one launch is recorded per element address, and two
//! programs that touch one element, at least one writing and not both atomically, are a
//! data race. The interpreter records from its memory ops; compiled CPU code calls
//! [`race_hook`] from each checked access (race checking compiles in checked mode).
//!
//! Order does not matter: each access is compared with what other programs did to its
//! element before, so a racing pair is found whichever of the two ran first. Per element
//! the record keeps the first plain writer and up to two readers and two atomic users from
//! different programs, which is enough to find some other program whenever there is one.
//! Accesses are keyed by their start address: two accesses of different sizes that only
//! partly overlap are not compared. Custom-op code is not observed.

use super::super::pipeline::once::lock;
use super::RawBuffer;
use crate::{Error, Result};
use std::collections::HashMap;
use std::sync::Mutex;
use tritium_dsl::ir::{Function, Loc};

/// What an access does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AccessKind {
    /// A plain load.
    Read = 0,
    /// A plain store.
    Write = 1,
    /// An atomic read-modify-write or compare-and-swap.
    Atomic = 2,
}

impl AccessKind {
    fn verb(self) -> &'static str {
        match self {
            AccessKind::Read => "loads",
            AccessKind::Write => "stores",
            AccessKind::Atomic => "updates atomically",
        }
    }

    fn from_code(k: u64) -> AccessKind {
        match k {
            0 => AccessKind::Read,
            1 => AccessKind::Write,
            _ => AccessKind::Atomic,
        }
    }
}

/// Who accessed: the program and the op (its index in `Function::fault_sites`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Who {
    pub pid: [u32; 3],
    pub site: u32,
}

/// A [`Who`] in 8 bytes (the program as its row-major index in the grid, `u32::MAX` for
/// nobody): a launch records an entry per element it touches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Slot {
    program: u32,
    site: u32,
}

impl Slot {
    const NOBODY: Slot = Slot {
        program: u32::MAX,
        site: 0,
    };

    fn is_some(self) -> bool {
        self.program != u32::MAX
    }
}

/// What happened to one element so far.
#[derive(Clone, Copy)]
struct Cell {
    writer: Slot,
    readers: [Slot; 2],
    atomics: [Slot; 2],
}

impl Default for Cell {
    fn default() -> Cell {
        Cell {
            writer: Slot::NOBODY,
            readers: [Slot::NOBODY; 2],
            atomics: [Slot::NOBODY; 2],
        }
    }
}

/// Two conflicting accesses.
#[derive(Debug, Clone, Copy)]
struct Race {
    addr: u64,
    first: (Slot, AccessKind),
    second: (Slot, AccessKind),
}

const SHARDS: usize = 64;

/// Hashes an address with one multiplication (SipHash, the default, costs more than
/// the rest of recording an access).
#[derive(Default, Clone, Copy)]
struct AddrHasher(u64);

impl std::hash::Hasher for AddrHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (v ^ (v >> 29)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    }
}

type Cells = HashMap<u64, Cell, std::hash::BuildHasherDefault<AddrHasher>>;

/// The accesses of one launch (see the module docs). Shared by the worker threads.
pub(crate) struct RaceRecorder {
    shards: Vec<Mutex<Cells>>,
    race: Mutex<Option<Race>>,
    /// The grid, to number programs.
    grid: [u64; 3],
}

impl RaceRecorder {
    /// A recorder for a launch over `grid`.
    pub(crate) fn new(grid: [u64; 3]) -> RaceRecorder {
        RaceRecorder {
            shards: (0..SHARDS).map(|_| Mutex::new(Cells::default())).collect(),
            race: Mutex::new(None),
            grid,
        }
    }

    fn slot(&self, who: Who) -> Slot {
        let [x, y, z] = who.pid.map(u64::from);
        let n = x + self.grid[0] * (y + self.grid[1] * z);
        Slot {
            // Grids past 2^32 - 1 programs share numbers (and may miss races).
            program: n.min(u64::from(u32::MAX - 1)) as u32,
            site: who.site,
        }
    }

    fn pid(&self, s: Slot) -> [u64; 3] {
        let n = u64::from(s.program);
        let (nx, ny) = (self.grid[0].max(1), self.grid[1].max(1));
        [n % nx, n / nx % ny, n / nx / ny]
    }

    /// Records one access of the element at `addr`, and the first race it makes.
    pub(crate) fn access(&self, addr: u64, kind: AccessKind, who: Who) {
        let who = self.slot(who);
        let shard = (addr.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58) as usize % SHARDS;
        let mut cells = lock(&self.shards[shard]);
        let cell = cells.entry(addr).or_default();
        let other = |w: &Slot| (w.is_some() && w.program != who.program).then_some(*w);
        let others = |ws: &[Slot; 2]| ws.iter().find_map(other);
        let conflict = match kind {
            AccessKind::Read => other(&cell.writer)
                .map(|w| (w, AccessKind::Write))
                .or_else(|| others(&cell.atomics).map(|w| (w, AccessKind::Atomic))),
            AccessKind::Write => other(&cell.writer)
                .map(|w| (w, AccessKind::Write))
                .or_else(|| others(&cell.readers).map(|w| (w, AccessKind::Read)))
                .or_else(|| others(&cell.atomics).map(|w| (w, AccessKind::Atomic))),
            AccessKind::Atomic => other(&cell.writer)
                .map(|w| (w, AccessKind::Write))
                .or_else(|| others(&cell.readers).map(|w| (w, AccessKind::Read))),
        };
        let keep = |ws: &mut [Slot; 2]| {
            if !ws[0].is_some() {
                ws[0] = who;
            } else if !ws[1].is_some() && ws[0].program != who.program {
                ws[1] = who;
            }
        };
        match kind {
            AccessKind::Read => keep(&mut cell.readers),
            AccessKind::Write if !cell.writer.is_some() => cell.writer = who,
            AccessKind::Write => {}
            AccessKind::Atomic => keep(&mut cell.atomics),
        }
        drop(cells);
        if let Some(first) = conflict {
            lock(&self.race).get_or_insert(Race {
                addr,
                first,
                second: (who, kind),
            });
        }
    }

    /// `Ok` without a race; else the [`Error::Runtime`] naming the kernel, both programs,
    /// both source lines and the buffer (with the element's index).
    pub(crate) fn result(
        &self,
        f: &Function,
        sites: &[(Loc, &'static str)],
        buffers: &[(String, RawBuffer)],
    ) -> Result<()> {
        let Some(race) = *lock(&self.race) else {
            return Ok(());
        };
        let at = |who: Slot| {
            sites
                .get(who.site as usize)
                .map_or_else(|| "?".to_string(), |(loc, _)| loc.to_string())
        };
        let pid = |who: Slot| {
            let [x, y, z] = self.pid(who);
            format!("({x}, {y}, {z})")
        };
        let element = (buffers.iter())
            .find_map(|(name, b)| {
                let span = b.lo as u64..b.hi.max(b.lo + 1) as u64;
                span.contains(&race.addr).then(|| {
                    let size = b.dtype.size_bytes().max(1) as u64;
                    format!("`{name}` element {}", (race.addr - b.lo as u64) / size)
                })
            })
            .unwrap_or_else(|| format!("address {:#x}", race.addr));
        let ((w1, k1), (w2, k2)) = (race.first, race.second);
        Err(Error::Runtime {
            kernel: f.name.clone(),
            location: at(w2),
            message: format!(
                "data race on {element}: program {} {} it at {} and program {} {} it at {}, without atomics ordering them",
                pid(w2),
                k2.verb(),
                at(w2),
                pid(w1),
                k1.verb(),
                at(w1),
            ),
        })
    }
}

/// The symbol compiled CPU code calls [`race_hook`] by (defined in the JIT).
pub(crate) const RACE_SYMBOL: &str = "tritium_race_access";

/// What race-checked CPU code calls for each access that passed its bounds check.
///
/// # Safety
/// `recorder` is the launch's live [`RaceRecorder`] (its address is passed to the kernel
/// after the parameters' ranges).
pub(crate) unsafe extern "C" fn race_hook(
    recorder: *const RaceRecorder,
    addr: u64,
    kind: u64,
    site: u64,
    x: u64,
    y: u64,
    z: u64,
) {
    // SAFETY: see above; the recorder outlives the launch's programs.
    let r = unsafe { &*recorder };
    let who = Who {
        pid: [x as u32, y as u32, z as u32],
        site: site as u32,
    };
    r.access(addr, AccessKind::from_code(kind), who);
}
