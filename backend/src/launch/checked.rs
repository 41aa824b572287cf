//! Checked mode's fault record, shared by the CPU and CUDA generators and their launchers,
//! so that a fault reads the same on every compiled backend.
//!
//! Generated code compares each access with the byte ranges of the parameters its pointer
//! derives from (`Function::pointer_roots`), skips it when it is outside all of them, and
//! records the first such access into [`FAULT_WORDS`] u64 words:
//! `[site + 1, address, program id x, y, z]` (word 0 is 0 while nothing faulted and is
//! claimed by a compare-exchange, so the first fault wins).

use super::{RawArg, RawBuffer};
use crate::{Error, Result};
use tritium_dsl::ir::{Function, Loc, Op, ViewLayout, ASSERT_KIND};

/// Words of the fault record.
pub(crate) const FAULT_WORDS: usize = 5;

/// The record of a strided view's axes that checked code reads (`llvm::Emit::in_view`):
/// `[lo, rank, (dim, step) × rank]`.
fn view_record(layout: &ViewLayout, lo: u64) -> Vec<u64> {
    let mut words = vec![lo, layout.axes().len() as u64];
    words.extend(layout.axes().flat_map(|(dim, step)| [dim, step]));
    words
}

/// Words checked code reads per parameter: `[lo, hi, view]`.
pub(crate) const PARAM_WORDS: usize = 3;

/// Words per entry of the buffer list: `[lo, hi, writable, view]`.
pub(crate) const LIST_WORDS: usize = 4;

/// What checked code reads about a launch's buffers (byte ranges in the address space the
/// kernel runs in, as `range` gives them): `[lo, hi, view]` per parameter (zeros for
/// scalars), then `extra` words (the CPU's race recorder), then, with `list`, the list of
/// every buffer that pointers made from integers are compared with (`named_buffers`: the
/// arguments, then the pointer tables' entries) `[count, (lo, hi, writable, view) × count]`
/// (`llvm::Emit::in_any_buffer`), then the element records of strided views
/// ([`view_record`]) that nonzero `view` words point at (`llvm::Emit::in_view`).
pub(crate) struct CheckWords {
    /// The words; `view` words hold byte offsets from the first word until [`CheckWords::place`].
    pub words: Vec<u64>,
    /// Where the nonzero `view` words are.
    views: Vec<usize>,
}

impl CheckWords {
    /// The words of a launch (see the type's docs).
    pub(crate) fn new(
        args: &[RawArg],
        buffers: &[(String, RawBuffer)],
        extra: &[u64],
        list: bool,
        range: impl Fn(&RawBuffer) -> (u64, u64),
    ) -> CheckWords {
        let listed = if list { 1 + 4 * buffers.len() } else { 0 };
        let mut words = Vec::with_capacity(PARAM_WORDS * args.len() + extra.len() + listed);
        let mut records = Vec::new();
        let mut buffer = |words: &mut Vec<u64>, b: &RawBuffer, writable: Option<bool>| {
            let (lo, hi) = range(b);
            words.extend([lo, hi]);
            words.extend(writable.map(u64::from));
            words.push(0);
            if let Some(v) = b.view {
                records.push((words.len() - 1, view_record(&v, lo)));
            }
        };
        for a in args {
            match a {
                RawArg::Ptr(b) => buffer(&mut words, b, None),
                RawArg::Scalar { .. } => words.extend([0; PARAM_WORDS]),
            }
        }
        words.extend(extra);
        if list {
            words.push(buffers.len() as u64);
            for (_, b) in buffers {
                buffer(&mut words, b, Some(b.writable));
            }
        }
        let mut views = Vec::with_capacity(records.len());
        for (at, record) in records {
            words[at] = 8 * words.len() as u64;
            views.push(at);
            words.extend(record);
        }
        CheckWords { words, views }
    }

    /// Turns the `view` words into addresses, the words living at address `base`.
    pub(crate) fn place(&mut self, base: u64) {
        for &at in &self.views {
            self.words[at] = self.words[at].wrapping_add(base);
        }
    }
}

/// Every buffer of a launch by name, with its byte range as `range` gives it (in the
/// address space the kernel runs in), for fault messages.
pub(crate) fn named_ranges(
    buffers: &[(String, RawBuffer)],
    range: impl Fn(&RawBuffer) -> (u64, u64),
) -> Vec<(String, (u64, u64))> {
    (buffers.iter())
        .map(|(name, b)| (name.clone(), range(b)))
        .collect()
}

/// The launch's result from its fault record: `Ok` when nothing faulted, else the
/// [`Error::Runtime`] naming the op's source location, its kind, the address, the program
/// and every buffer's range (`buffers` from [`named_ranges`], in the same address space as
/// the address).
pub(crate) fn fault_result(
    f: &Function,
    sites: &[(Loc, &'static str)],
    record: &[u64; FAULT_WORDS],
    buffers: &[(String, (u64, u64))],
) -> Result<()> {
    let [site, addr, x, y, z] = *record;
    if site == 0 {
        return Ok(());
    }
    let (loc, kind) = sites.get(site as usize - 1).cloned().unwrap_or_default();
    if kind == ASSERT_KIND {
        // The address word holds the failing lane's row-major index.
        let (msg, shape) = assert_site(f, site as usize - 1);
        return Err(Error::Runtime {
            kernel: f.name.clone(),
            location: loc.to_string(),
            message: assert_failed(&msg, &unflatten(addr, &shape), [x, y, z].map(|v| v as i64)),
        });
    }
    let buffers: Vec<String> = (buffers.iter())
        .map(|(name, (lo, hi))| format!("`{name}` [{lo:#x}, {hi:#x})"))
        .collect();
    Err(Error::Runtime {
        kernel: f.name.clone(),
        location: loc.to_string(),
        message: format!(
            "out-of-bounds {kind} at address {addr:#x} by program ({x}, {y}, {z}) (buffers: {})",
            buffers.join(", ")
        ),
    })
}

/// The message of a failed `device_assert`, the same on every device: its text, the
/// lane (a multi-index of the condition's shape; `[]` for a scalar) and the program.
pub(crate) fn assert_failed(msg: &str, lane: &[usize], pid: [i64; 3]) -> String {
    let lane: Vec<String> = lane.iter().map(usize::to_string).collect();
    let what = if msg.is_empty() {
        "device_assert failed".to_string()
    } else {
        format!("device_assert failed: {msg}")
    };
    format!(
        "{what} (lane [{}] of program ({}, {}, {}))",
        lane.join(", "),
        pid[0],
        pid[1],
        pid[2]
    )
}

/// The message and condition shape of fault site `site`, a `device_assert`.
fn assert_site(f: &Function, site: usize) -> (String, Vec<usize>) {
    let mut found = None;
    let mut k = 0;
    f.walk(&mut |inst| {
        if inst.op.fault_kind().is_some() {
            if let (true, Op::Assert { cond, msg, .. }) = (k == site, &inst.op) {
                found = Some((msg.clone(), f.ty(*cond).shape.clone()));
            }
            k += 1;
        }
    });
    found.unwrap_or_default()
}

/// The multi-index of row-major index `flat` in `shape`.
fn unflatten(mut flat: u64, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for (i, &d) in shape.iter().enumerate().rev() {
        let d = d.max(1) as u64;
        idx[i] = (flat % d) as usize;
        flat /= d;
    }
    idx
}

/// Which memory accesses generated code compares with the launch's buffers outside
/// checked mode (which compares every one).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum SiteChecks {
    /// None: a launch whose caller promised every access in bounds (`launch_unchecked`),
    /// or a kernel compiled directly.
    #[default]
    None,
    /// The fault sites no launch's bounds proof covers ([`BoundsProof::unprovable`]): what
    /// a default launch runs when its proof covers the others.
    ///
    /// [`BoundsProof::unprovable`]: tritium_dsl::ir::BoundsProof::unprovable
    Unprovable,
    /// These fault sites: those a launch's proof did not cover.
    Listed(SiteBits),
}

impl SiteChecks {
    /// The checked sites, ascending, given the kernel's unprovable ones.
    pub fn resolve(self, unprovable: impl FnOnce() -> Vec<u32>) -> Vec<u32> {
        match self {
            SiteChecks::None => Vec::new(),
            SiteChecks::Unprovable => unprovable(),
            SiteChecks::Listed(bits) => bits.iter().collect(),
        }
    }
}

/// A set of fault sites below [`SiteBits::CAPACITY`] (a launch that must check a site
/// past it runs in checked mode).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct SiteBits([u64; 4]);

impl SiteBits {
    /// One more than the largest site a set holds.
    pub const CAPACITY: u32 = 256;

    /// The set of `sites`, or `None` if one is past [`SiteBits::CAPACITY`].
    pub fn of(sites: &[u32]) -> Option<SiteBits> {
        let mut bits = [0u64; 4];
        for &s in sites {
            if s >= Self::CAPACITY {
                return None;
            }
            bits[s as usize / 64] |= 1 << (s % 64);
        }
        Some(SiteBits(bits))
    }

    /// The sites, ascending.
    pub fn iter(self) -> impl Iterator<Item = u32> {
        (0..Self::CAPACITY).filter(move |s| self.0[*s as usize / 64] >> (s % 64) & 1 == 1)
    }
}
