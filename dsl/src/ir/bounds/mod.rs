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
//! An access the proof cannot follow (a pointer loaded from memory or made from an
//! integer, a gather, an offset through a float, a `while` loop's changing values) is
//! [`SiteProof::Unproven`]: generated code checks it at run time.

mod derive;
mod eval;
mod form;
mod scalar;

use crate::ir::{DType, Function};
use form::Form;
use scalar::{ScalarId, Scalars};

/// What every access of a kernel may touch, as a function of its launch.
#[derive(Debug, Clone)]
pub struct BoundsProof {
    scalars: Scalars,
    atoms: Vec<AtomDef>,
    checks: Vec<Check>,
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
    /// The pointer parameter its pointer derives from.
    pub root: usize,
    /// Bytes per element accessed.
    pub bytes: u64,
    offset: Form,
    checks: Vec<CheckId>,
    constraints: Vec<Constraint>,
    /// Runs in every program, every lane (unmasked, in the kernel's own body).
    unconditional: bool,
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
}

/// `form ≤ 0` on every lane the access touches; relies on `checks`, and holds only when
/// `when` (a scalar that must be positive, or negative) does.
#[derive(Debug, Clone, PartialEq)]
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
    /// A value known only through its range, the result of an op on exact forms.
    Range {
        op: RangeOp,
        dtype: DType,
        checks: Vec<CheckId>,
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
}

/// An index into [`BoundsProof::checks`].
type CheckId = u32;

/// "Every lane's `form` lies in `dtype`'s range": then the value is the form exactly.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Check {
    form: Form,
    dtype: DType,
}

/// What a launch gives a proof.
#[derive(Debug, Clone, Copy)]
pub struct LaunchValues<'a> {
    /// Programs along each axis.
    pub grid: [u32; 3],
    /// Per parameter: an integer argument's value (`None` for other parameters).
    pub scalars: &'a [Option<i128>],
    /// Per parameter: the bytes a pointer argument may touch, as offsets from the pointer
    /// the kernel gets (`[lo, hi)`; `None` for other parameters and for buffers whose span
    /// holds bytes that are not theirs, as a strided view's gaps).
    pub spans: &'a [Option<(i128, i128)>],
}

/// Derives the proof of every fault site of `f` (see the module docs).
pub fn bounds_proof(f: &Function) -> BoundsProof {
    derive::derive(f)
}

impl BoundsProof {
    /// The proof of every fault site, in [`Function::fault_sites`] order.
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
        eval::Launch::new(self, launch).unproven()
    }

    /// [`BoundsProof::check`], and the first unconditional access (unmasked, in the
    /// kernel's own body: every program runs it) whose every lane lies outside its
    /// argument: such a launch can only fault, and is refused before it runs.
    pub fn verdict(&self, launch: &LaunchValues<'_>) -> Verdict {
        let mut l = eval::Launch::new(self, launch);
        let unproven = l.unproven();
        let refuted = unproven.iter().find_map(|&s| l.refuted(s));
        Verdict { unproven, refuted }
    }
}
