//! What a launch gives a kernel's bounds proof (`dsl::ir::bounds_proof`): the grid, the
//! integer arguments, each buffer's span as offsets from the pointer the kernel gets, and
//! the memory the proof may read (read-only host arguments, pointer tables' entries). A
//! launch runs with run-time checks at exactly the sites its proof leaves.

use super::checked::{SiteBits, SiteChecks};
use super::{Grid, Memory, Pointee, RawArg};
use crate::{Error, Result};
use std::sync::Mutex;
use tritium_dsl::ir::ViewElements;
use tritium_dsl::ir::{BoundsProof, Entry, Function, LaunchMemory, LaunchValues, Loc};
use tritium_dsl::ir::{ProofWorkspace, Refuted, Verdict};
use tritium_dsl::DType;

/// A compiled kernel's bounds proof, with the verdict of its last launch: launches that
/// repeat their grid, integer arguments and buffer sizes (wherever the buffers lie), and
/// whose memory holds what the proof read, reuse it for the cost of a comparison.
#[derive(Debug)]
pub(crate) struct LaunchProof {
    proof: BoundsProof,
    last: Mutex<Last>,
    /// For the error of a refused launch: the kernel, its parameters' names and its fault
    /// sites' locations and kinds.
    kernel: String,
    params: Vec<String>,
    sites: Vec<(Loc, &'static str)>,
}

/// The last launch's verdict and what it was made from, with the buffers a fresh verdict
/// reuses (a verdict allocates nothing once they have grown).
#[derive(Debug, Default)]
struct Last {
    /// Whether `key` and `verdict` are a launch's.
    valid: bool,
    /// [`key_words`] of that launch.
    key: Vec<i128>,
    verdict: Verdict,
    workspace: ProofWorkspace,
    scalars: Vec<Option<i128>>,
    spans: Vec<Option<(i128, i128)>>,
    views: Vec<Option<ViewElements>>,
}

impl LaunchProof {
    pub fn new(f: &Function) -> Self {
        Self::of(tritium_dsl::ir::bounds_proof(f), f)
    }

    /// `f`'s proof, derived already.
    pub fn of(proof: BoundsProof, f: &Function) -> Self {
        LaunchProof {
            proof,
            last: Mutex::new(Last::default()),
            kernel: f.name.clone(),
            params: f.params.iter().map(|p| p.name.clone()).collect(),
            sites: f.fault_sites(),
        }
    }

    /// The fault sites this launch does not prove in bounds, ascending (those no launch
    /// proves included); an error when an access of every program can only fault.
    pub fn unproven(&self, grid: Grid, args: &[RawArg], pointees: &[Pointee]) -> Result<Vec<u32>> {
        self.with_unproven(grid, args, pointees, <[u32]>::to_vec)
    }

    /// `f` of [`LaunchProof::unproven`]'s sites, without copying them.
    pub fn with_unproven<R>(
        &self,
        grid: Grid,
        args: &[RawArg],
        pointees: &[Pointee],
        f: impl FnOnce(&[u32]) -> R,
    ) -> Result<R> {
        let memory = LaunchArgs { args, pointees };
        let mut guard = self.last.lock().unwrap_or_else(|p| p.into_inner());
        let last = &mut *guard;
        let same = last.valid
            && last.key.iter().copied().eq(key_words(grid, args))
            && last.verdict.reads.iter().all(|r| r.still(&memory));
        if !same {
            last.valid = false;
            launch_verdict(&self.proof, grid, &memory, last);
            last.key.clear();
            last.key.extend(key_words(grid, args));
            last.valid = true;
        }
        match &last.verdict.refuted {
            Some(r) => Err(self.refused(r)),
            None => Ok(f(&last.verdict.unproven)),
        }
    }

    /// The error of a launch refused before it ran.
    fn refused(&self, r: &Refuted) -> Error {
        let (loc, kind) = self.sites.get(r.site as usize).cloned().unwrap_or_default();
        let name = self.params.get(r.root).map_or("?", String::as_str);
        Error::Runtime {
            kernel: self.kernel.clone(),
            location: loc.to_string(),
            message: format!(
                "out-of-bounds {kind} in every program, refused before the launch ran: its \
                 lanes touch bytes [{}, {}) from `{name}`, whose buffer holds bytes [{}, {})",
                r.touched.0, r.touched.1, r.span.0, r.span.1
            ),
        }
    }

    /// The sites no launch proves.
    pub fn unprovable(&self) -> Vec<u32> {
        self.proof.unprovable()
    }
}

/// What a launch's verdict depends on: the grid, then per argument two words (a tag, in
/// the low byte, and the value or the span from the pointer) and a strided view's axes.
fn key_words(grid: Grid, args: &[RawArg]) -> impl Iterator<Item = i128> + '_ {
    let grid = grid.0.map(i128::from);
    grid.into_iter().chain(args.iter().flat_map(|a| {
        let (tag, word, view) = match a {
            RawArg::Scalar { bits, .. } => (0, i128::from(*bits), None),
            RawArg::Ptr(b) => {
                let at = b.ptr as i128;
                let (lo, hi) = ((b.lo as i128 - at) << 64, b.hi as i128 - at);
                match &b.view {
                    // (The rank says where the next argument's words start.)
                    Some(v) => (lo | 1 | (v.axes().len() as i128) << 8, hi, Some(v)),
                    None => (lo | 2, hi, None),
                }
            }
        };
        let axes = view.into_iter().flat_map(|v| v.axes());
        [tag, word]
            .into_iter()
            .chain(axes.map(|(dim, step)| i128::from(dim) | (i128::from(step) << 64)))
    }))
}

/// A launch's arguments as the memory its proof may read: integers of read-only host
/// arguments that are not pointer tables, and pointer tables' entries.
struct LaunchArgs<'a> {
    args: &'a [RawArg],
    pointees: &'a [Pointee],
}

impl LaunchMemory for LaunchArgs<'_> {
    fn read(&self, param: usize, offset: i128, dtype: DType) -> Option<i128> {
        let Some(RawArg::Ptr(b)) = self.args.get(param) else {
            return None;
        };
        // Only bytes nothing may write during the launch: a shared borrow (the kernel
        // writes only exclusively borrowed arguments, `check_args`), in host memory, its
        // own bytes (no view's gaps), and no table (whose entries a GPU launch
        // translates); no buffer the kernel may write overlaps it (`check_overlaps`).
        let table = self.pointees.iter().any(|e| e.arg == param);
        if b.writable || b.memory != Memory::Host || b.view.is_some() || table {
            return None;
        }
        if !dtype.is_int() || dtype.size_bytes() > 8 {
            return None;
        }
        let size = dtype.size_bytes();
        let at = (b.ptr as i128).checked_add(offset)?;
        if at < b.lo as i128 || at + size as i128 > b.hi as i128 {
            return None;
        }
        let mut bytes = [0u8; 16];
        // SAFETY: `[at, at + size)` lies inside the argument's buffer, which the launch
        // borrows (shared) until it returns.
        unsafe {
            std::ptr::copy_nonoverlapping(at as usize as *const u8, bytes.as_mut_ptr(), size)
        };
        let raw = i128::from_le_bytes(bytes);
        Some(dtype.wrap_int(raw))
    }

    fn entry(&self, param: usize, offset: i128) -> Option<Entry> {
        if offset < 0 || offset % 8 != 0 {
            return None;
        }
        let Some(RawArg::Ptr(table)) = self.args.get(param) else {
            return None;
        };
        if table.dtype.size_bytes() != 8 {
            return None;
        }
        let index = usize::try_from(offset / 8).ok()?;
        let e = (self.pointees.iter()).find(|e| e.arg == param && e.entry == index)?;
        let b = e.buffer;
        if b.view.is_some() {
            return None;
        }
        let at = b.ptr as i128;
        Some(Entry {
            span: (b.lo as i128 - at, b.hi as i128 - at),
            writable: b.writable,
        })
    }
}

/// The verdict of `proof` for this launch, into `last.verdict`.
fn launch_verdict(proof: &BoundsProof, grid: Grid, memory: &LaunchArgs<'_>, last: &mut Last) {
    let args = memory.args;
    let (scalars, spans, views) = (&mut last.scalars, &mut last.spans, &mut last.views);
    scalars.clear();
    spans.clear();
    views.clear();
    for a in args {
        let (scalar, span) = match *a {
            RawArg::Scalar { dtype, bits } if dtype.is_int() => {
                (Some(dtype.wrap_int(i128::from(bits))), None)
            }
            RawArg::Scalar { .. } => (None, None),
            RawArg::Ptr(b) => {
                let at = b.ptr as i128;
                (None, Some((b.lo as i128 - at, b.hi as i128 - at)))
            }
        };
        scalars.push(scalar);
        spans.push(span);
        // A strided view's gaps are not its bytes: the proof must land on its elements.
        views.push(match a {
            RawArg::Ptr(b) => b.view.map(|layout| ViewElements {
                lo: b.lo as i128 - b.ptr as i128,
                bytes: b.dtype.size_bytes() as u64,
                layout,
            }),
            RawArg::Scalar { .. } => None,
        });
    }
    let grid = grid.0.map(|n| u32::try_from(n).unwrap_or(u32::MAX));
    let launch = LaunchValues {
        grid,
        scalars,
        spans,
        views,
        memory: Some(memory),
    };
    proof.verdict_with(&launch, &mut last.workspace, &mut last.verdict);
}

/// The fault sites (in [`Function::fault_sites`] order) that a default launch of `f` with
/// these grid and arguments checks at run time, ascending: its bounds proof shows every
/// other access inside its buffers. An error where the launch would be refused before it
/// runs (an access of every program whose every lane is out of bounds). For tests and
/// diagnostics: a launch evaluates the same proof.
pub fn checked_sites(
    f: &Function,
    grid: impl Into<Grid>,
    args: &super::KernelArgs<'_>,
) -> Result<Vec<u32>> {
    LaunchProof::new(f).unproven(grid.into(), &args.args, &args.pointees)
}

/// What a kernel compiled with `bounds_check` and `sites` checks outside checked mode (its
/// sites, ascending), and the proof its launches evaluate: only a default launch's kernel
/// (`SiteChecks::Unprovable`) has one; the variants it picks are found through it.
pub(crate) fn compiled_checks(
    f: &Function,
    bounds_check: bool,
    sites: SiteChecks,
) -> (Option<LaunchProof>, Vec<u32>) {
    if bounds_check {
        return (None, Vec::new());
    }
    let proof = (sites == SiteChecks::Unprovable).then(|| LaunchProof::new(f));
    let checked = sites.resolve(|| {
        proof
            .as_ref()
            .map_or_else(Vec::new, LaunchProof::unprovable)
    });
    (proof, checked)
}

/// What a default launch must check beyond the `checked` sites (ascending) of the kernel
/// it found compiled: `None` when the proof covers every other site for this launch, or
/// the kernel has no proof (not a default launch's); an error, before anything runs, when
/// an access every program makes has every lane out of bounds.
pub(crate) fn more_checks(
    proof: Option<&LaunchProof>,
    checked: &[u32],
    grid: Grid,
    args: &[RawArg],
    pointees: &[Pointee],
) -> Result<Option<MoreChecks>> {
    let Some(proof) = proof else {
        return Ok(None);
    };
    proof.with_unproven(grid, args, pointees, |needed| {
        if needed.iter().all(|s| checked.binary_search(s).is_ok()) {
            return None;
        }
        Some(match SiteBits::of(needed) {
            Some(bits) => MoreChecks::Sites(SiteChecks::Listed(bits)),
            None => MoreChecks::Everything,
        })
    })
}

/// See [`more_checks`].
pub(crate) enum MoreChecks {
    /// Compile with these site checks.
    Sites(SiteChecks),
    /// Compile in checked mode (a site past [`SiteBits::CAPACITY`]).
    Everything,
}

impl MoreChecks {
    /// Sets a kernel's compile options (checked mode, site checks) to this.
    pub fn apply(self, bounds_check: &mut bool, sites: &mut SiteChecks) {
        match self {
            MoreChecks::Sites(s) => *sites = s,
            MoreChecks::Everything => *bounds_check = true,
        }
    }
}
