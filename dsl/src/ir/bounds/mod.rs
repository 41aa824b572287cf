//! Launch-time bounds proofs: for every load, store and atomic of a kernel, the bytes it
//! may touch as a function of the launch (the grid, the integer arguments), so that a
//! launch whose every access lies inside its buffers runs without per-access checks.
//!
//! [`bounds_proof`] derives, once per compiled kernel, each access's byte offset from the
//! parameter its pointer comes from as a linear [form](form::Form) of lane indices,
//! program ids, loop iterations and values known only by their range (`x % m`, `min`…),
//! with launch-time coefficients (constants, integer arguments, the grid). Its mask and
//! the loops and `if`s around it add linear constraints (`offs < n`, `iv < hi`). At a
//! launch, [`BoundsProof::check`] evaluates each access's lowest and highest byte by
//! interval arithmetic, tightened by the constraints whose variables it shares (a mask
//! `i + k·BK < K` bounds `stride·(i + k·BK)` by `stride·(K − 1)`: exact for boxes and
//! for a carried pointer advanced with its loop), and compares them with the argument's
//! span: a few operations per access site, nothing per element.
//!
//! Soundness: integer ops wrap, so a form equals its value only modulo the width; where a
//! value is used by something that is not a ring operation (a compare, a widening, a
//! division, a loop bound), the launch checks that the form's range fits the value's
//! dtype ([`Check`]), and a constraint or access relying on a failed check is dropped or
//! unproven. Every range is a sound enclosure over all lanes, masked-off ones included.
//! An access the proof cannot follow (a pointer made from an integer that is not a
//! pointer table's entry, a gather, an offset through a float) is
//! [`SiteProof::Unproven`]: generated code checks it at run time.
//!
//! Memory read at launch: a scalar integer loaded from a uniform address of a pointer
//! argument is a launch-time scalar, and a pointer cast from an entry of a
//! [pointer table](LaunchMemory::entry) points into that entry's buffer. The launch reads
//! them through [`LaunchMemory`], which gives only bytes no access of the launch may
//! write (read-only host arguments), so what the proof reads is what the kernel reads. A
//! `for` loop with launch-time bounds whose body loads scalars at addresses made from its
//! counter (tutorial 08's groups) is also derived a second time with the counter as a
//! launch-time scalar, and a launch that cannot prove one of its sites the usual way
//! enumerates its iterations ([`MAX_ENUMERATED`] at most), each with its own values, so
//! that a group's pointer, sizes and strides stay together. A `while` loop's changing
//! values are any values of their dtype that satisfy its condition inside its body; a
//! check and a range (`/`, `%`…) made inside loops and `if`s is evaluated under their
//! constraints.

mod derive;
mod eval;
mod form;
mod scalar;

use crate::ir::{DType, Function, ViewLayout};
pub use eval::ProofWorkspace;
use form::Form;
pub use scalar::machine;
use scalar::{ScalarId, Scalars};

/// The most iterations a launch enumerates for one loop (see the module docs); a loop
/// that runs more leaves its sites to run-time checks.
pub const MAX_ENUMERATED: i128 = 4096;

/// What every access of a kernel may touch, as a function of its launch.
#[derive(Debug, Clone)]
pub struct BoundsProof {
    scalars: Scalars,
    atoms: Vec<AtomDef>,
    checks: Vec<Check>,
    /// Every site as the walk over the whole kernel gives it.
    walked: Vec<SiteProof>,
    /// Loops derived again with their counter a launch-time scalar.
    enumerations: Vec<Enumeration>,
    /// `walked`, where a site is unproven there, its proof in an enumeration if it has
    /// one (what [`BoundsProof::sites`] shows).
    sites: Vec<SiteProof>,
}

/// A `for` loop whose iterations a launch may enumerate: its body derived with counter
/// `counter` (a [`Scalar::Enum`](scalar::Scalar)) and the uniform integers it carries as
/// launch-time scalars, set iteration by iteration.
#[derive(Debug, Clone)]
struct Enumeration {
    lo: ScalarId,
    hi: ScalarId,
    step: ScalarId,
    counter: ScalarId,
    /// Per carried integer: its scalar (a `Scalar::Carried`), its value before the first
    /// iteration, and the value an iteration yields (both machine values).
    carried: Vec<(ScalarId, ScalarId, ScalarId)>,
    /// The scalars that depend on the counter or a carried value, ascending.
    scalars: Vec<ScalarId>,
    /// The atoms and checks made in the body's walk (recomputed per iteration).
    atoms: std::ops::Range<u32>,
    checks: std::ops::Range<u32>,
    /// The body's sites: the first one's index, and their proofs.
    first_site: u32,
    sites: Vec<SiteProof>,
}

/// The proof of one fault site ([`Function::fault_sites`]).
#[derive(Debug, Clone)]
pub enum SiteProof {
    /// The site's bytes as a function of the launch.
    Proof(Access),
    /// The proof cannot follow this access: it is checked at run time.
    Unproven(&'static str),
    /// Not a memory access (`device_assert`).
    NotAccess,
}

/// A load, store or atomic: which parameter's buffer it reads or writes, and where.
#[derive(Debug, Clone)]
pub struct Access {
    /// The pointer parameter its pointer derives from (for a table's entry: the table).
    pub root: usize,
    /// Bytes per element accessed.
    pub bytes: u64,
    /// The pointer comes from the entry of table `root` at this byte offset of the table,
    /// not from `root` itself.
    entry: Option<ScalarId>,
    /// It may write (an entry must be writable).
    writes: bool,
    offset: Form,
    checks: Vec<CheckId>,
    constraints: Vec<Constraint>,
    /// Runs in every program, every lane (unmasked, in the kernel's own body).
    unconditional: bool,
    /// A builtin's extent (every element of it, which the builtin may touch as one range):
    /// never proven on a strided view, whose gaps lie between its elements (the
    /// interpreter and checked code take one element of a view at most).
    extent: bool,
}

/// An access that touches only bytes outside its argument in every launch with these
/// values: the launch is refused before it runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refuted {
    /// The fault site ([`Function::fault_sites`] order).
    pub site: u32,
    /// The pointer parameter its pointer derives from.
    pub root: usize,
    /// The bytes its lanes touch, `[lo, hi)` from the argument's pointer (an enclosure).
    pub touched: (i128, i128),
    /// The argument's span, `[lo, hi)` from its pointer.
    pub span: (i128, i128),
}

/// A launch's verdict: the sites to check, and an access every lane of which is out of
/// bounds (the first such), if any.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verdict {
    /// The sites this launch does not prove in bounds, ascending.
    pub unproven: Vec<u32>,
    /// An access that can only fault.
    pub refuted: Option<Refuted>,
    /// The memory the proof read, in order: a launch whose grid, scalars and spans are
    /// this one's and whose memory still reads the same gets the same verdict.
    pub reads: Vec<MemoryRead>,
}

/// One read of launch memory ([`LaunchMemory`]) and what it gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemoryRead {
    /// [`LaunchMemory::read`].
    Int {
        /// The pointer argument.
        param: usize,
        /// The bytes' offset from its pointer.
        offset: i128,
        /// The integer's dtype.
        dtype: DType,
        /// The result.
        value: Option<i128>,
    },
    /// [`LaunchMemory::entry`].
    Entry {
        /// The pointer-table argument.
        param: usize,
        /// The entry's byte offset in the table.
        offset: i128,
        /// The result.
        entry: Option<Entry>,
    },
}

impl MemoryRead {
    /// Whether `memory` gives what this read gave.
    pub fn still(&self, memory: &dyn LaunchMemory) -> bool {
        match *self {
            MemoryRead::Int {
                param,
                offset,
                dtype,
                value,
            } => memory.read(param, offset, dtype) == value,
            MemoryRead::Entry {
                param,
                offset,
                entry,
            } => memory.entry(param, offset) == entry,
        }
    }
}

/// The memory of a launch that its proof may read: only bytes that nothing may write
/// while the launch runs, so that the kernel reads what the proof read.
pub trait LaunchMemory {
    /// The integer of `dtype` whose bytes start `offset` bytes from pointer argument
    /// `param`'s pointer, sign- or zero-extended as `dtype` is; `None` unless those bytes
    /// are the argument's, the argument is not a pointer table, and no access of the
    /// launch may write them (the kernel never writes the argument and no buffer it may
    /// write overlaps it).
    fn read(&self, param: usize, offset: i128, dtype: DType) -> Option<i128>;

    /// The buffer whose address the 8-byte entry `offset` bytes into pointer-table
    /// argument `param` holds, as the kernel sees it (on a GPU, the entry of the staged
    /// copy); `None` when `param` is no table, `offset` is not an entry's, or the
    /// buffer's span holds bytes that are not its (a strided view's gaps).
    fn entry(&self, param: usize, offset: i128) -> Option<Entry>;
}

/// A pointer table's entry ([`LaunchMemory::entry`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// The bytes an access may touch, `[lo, hi)` from the entry's pointer.
    pub span: (i128, i128),
    /// Whether the kernel may write them.
    pub writable: bool,
}

/// `form ≤ 0` on every lane the access touches; relies on `checks`, and holds only when
/// `when` (a scalar that must be positive, or negative) does.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Constraint {
    form: Form,
    checks: Vec<CheckId>,
    when: Option<(ScalarId, bool)>,
}

/// A variable other than a lane index.
#[derive(Debug, Clone)]
enum AtomDef {
    /// `program_id(axis)`: `0..grid[axis]`.
    ProgramId(u32),
    /// The iteration index of a `for` loop: `0..trips`.
    Iter(LoopBounds),
    /// How many iterations a `for` loop ran: `0..=trips`.
    Trips(LoopBounds),
    /// A value known only through its range, the result of an op on exact forms; its
    /// operands' ranges are taken where `context` (the constraints of the loops and `if`s
    /// around the op) holds.
    Range {
        op: RangeOp,
        dtype: DType,
        checks: Vec<CheckId>,
        context: Vec<Constraint>,
    },
    /// A loop-carried value while its step is worked out; never evaluated.
    Placeholder,
}

#[derive(Debug, Clone)]
struct LoopBounds {
    lo: Form,
    hi: Form,
    step: ScalarId,
    checks: Vec<CheckId>,
}

#[derive(Debug, Clone)]
enum RangeOp {
    Div(Form, Form),
    Rem(Form, Form),
    Min(Form, Form),
    Max(Form, Form),
    Mul(Form, Form),
    /// One of several values, each where its constraints hold (a `select`'s, an `if`'s).
    Hull(Vec<(Form, Vec<Constraint>)>),
    Bool,
    /// Any value of the dtype (a `while` loop's changing value).
    Any,
}

/// An index into [`BoundsProof::checks`].
type CheckId = u32;

/// "Every lane's `form` lies in `dtype`'s range where `context` holds" (the constraints of
/// the loops and `if`s around the value): then the value is the form exactly.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Check {
    form: Form,
    dtype: DType,
    context: Vec<Constraint>,
}

/// What a launch gives a proof.
#[derive(Clone, Copy)]
pub struct LaunchValues<'a> {
    /// Programs along each axis.
    pub grid: [u32; 3],
    /// Per parameter: an integer argument's value (`None` for other parameters).
    pub scalars: &'a [Option<i128>],
    /// Per parameter: the bytes a pointer argument may touch, as offsets from the pointer
    /// the kernel gets (`[lo, hi)`; `None` for other parameters). For a strided view this
    /// is its whole extent, gaps included: its `views` entry says which bytes are its own.
    pub spans: &'a [Option<(i128, i128)>],
    /// Per parameter (missing entries are `None`): the elements of a pointer argument whose
    /// span holds bytes that are not its own (a strided view's gaps), so that an access
    /// through it is proven only where every lane lands on one of its elements.
    pub views: &'a [Option<ViewElements>],
    /// The memory the proof may read (`None`: none).
    pub memory: Option<&'a dyn LaunchMemory>,
}

/// The elements of a strided view as a launch's bounds proof takes them: element `(i_0,
/// …)` of `layout` starts `lo + Σ i_k · step_k` bytes from the pointer the kernel gets, each
/// `bytes` long; the steps decrease, each above the farthest offset the axes after it reach
/// (so that an offset is an element's in one way at most), and no axis has one element.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ViewElements {
    /// The lowest element's offset from the pointer, in bytes.
    pub lo: i128,
    /// Bytes per element.
    pub bytes: u64,
    /// The view's axes.
    pub layout: ViewLayout,
}

impl std::fmt::Debug for LaunchValues<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        (f.debug_struct("LaunchValues"))
            .field("grid", &self.grid)
            .field("scalars", &self.scalars)
            .field("spans", &self.spans)
            .field("views", &self.views)
            .field("memory", &self.memory.is_some())
            .finish()
    }
}

/// Derives the proof of every fault site of `f` (see the module docs).
pub fn bounds_proof(f: &Function) -> BoundsProof {
    derive::derive(f)
}

impl BoundsProof {
    /// The proof of every fault site, in [`Function::fault_sites`] order (a site that
    /// only an enumeration of its loop's iterations proves shows that proof).
    pub fn sites(&self) -> &[SiteProof] {
        &self.sites
    }

    /// The sites no launch can prove (checked in every launch).
    pub fn unprovable(&self) -> Vec<u32> {
        (self.sites.iter().enumerate())
            .filter(|(_, s)| matches!(s, SiteProof::Unproven(_)))
            .map(|(i, _)| i as u32)
            .collect()
    }

    /// The access sites this launch does not prove in bounds, ascending (the unprovable
    /// ones included): generated code must check those.
    pub fn check(&self, launch: &LaunchValues<'_>) -> Vec<u32> {
        self.verdict(launch).unproven
    }

    /// [`BoundsProof::check`], and the first unconditional access (unmasked, in the
    /// kernel's own body: every program runs it) whose every lane lies outside its
    /// argument: such a launch can only fault, and is refused before it runs.
    pub fn verdict(&self, launch: &LaunchValues<'_>) -> Verdict {
        let mut out = Verdict::default();
        self.verdict_with(launch, &mut ProofWorkspace::default(), &mut out);
        out
    }

    /// [`BoundsProof::verdict`] into `out`, with the tables of `workspace`: kept from one
    /// launch to the next, they make a verdict allocate nothing once `out` and
    /// `workspace` have grown to this proof's sizes (enumerating a loop's iterations
    /// allocates a few small lists).
    pub fn verdict_with(
        &self,
        launch: &LaunchValues<'_>,
        workspace: &mut ProofWorkspace,
        out: &mut Verdict,
    ) {
        eval::verdict(self, launch, workspace, out);
    }
}
