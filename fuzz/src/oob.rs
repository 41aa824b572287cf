//! Out-of-bounds variants of generated cases (issue 43): the same program launched so that
//! it may touch bytes outside its buffers, a buffer argument shortened by some elements,
//! one more program along an axis of the grid (each program writes its own region of
//! every output: the extra one's lies past their ends), or a buffer given as a strided
//! view, rows of its elements with gaps between them that no access may touch (rows
//! longer than the buffer, so that its elements are the first row's and the launch's
//! proof must find every access on them, or shorter, so that accesses may fall into the
//! gaps; or, where the kernel walks the buffer's rows with a stride parameter
//! ([`crate::case::RowStride`]), rows as long as those with the parameter set to the
//! view's stride, so that the proof must place each row's accesses on a row of its own).
//!
//! The interpreter, which checks every access, is the reference: where it rejects the
//! variant (an access outside every buffer), every compiled target's default launch must
//! return an error too, with every guard around every buffer intact; where it accepts it
//! (the shortened part was never touched), the results must agree as usual. See
//! [`crate::check::check`].
//!
//! A builtin's whole extent (`src + [0, bound)`…) is proven or checked like any access,
//! so variants shorten the buffers builtins are given too. User ops given a pointer run
//! unchecked on every device: what they do with the memory is the caller's to get right
//! (README, "What is checked"), so no variant shortens a buffer a user op is given, and a
//! grid grows only where no user op is given a pointer into an output (whose regions are
//! per program).

use crate::case::{Arg, Case, View};
use crate::info::Memory;
use crate::Rng;
use std::collections::BTreeSet;
use tritium_dsl::ir::{Function, Op};

/// How a variant differs from its case.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Buffer parameter `param` loses its last `elements` elements.
    Shorten {
        /// The parameter.
        param: usize,
        /// Elements cut off its end.
        elements: usize,
    },
    /// One more program along grid axis `axis`.
    Grid {
        /// The axis (0, 1 or 2).
        axis: usize,
    },
    /// A buffer given as a strided view (its bytes extended to the view's last row; the
    /// row stride parameter the kernel walks its rows with, if any, set to the view's).
    View(View),
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Change::Shorten { param, elements } => {
                write!(f, "p{param} shortened by {elements} elements")
            }
            Change::Grid { axis } => write!(f, "one more program along axis {axis}"),
            Change::View(v) => {
                write!(
                    f,
                    "p{} as a view of {} rows of {} elements, {} between rows",
                    v.param, v.rows, v.row, v.gap
                )?;
                match v.stride {
                    Some(s) => write!(f, ", walked with p{s} = {}", v.row + v.gap),
                    None => Ok(()),
                }
            }
        }
    }
}

/// The out-of-bounds variant of a case, with its change.
#[derive(Debug, Clone, PartialEq)]
pub struct Variant {
    /// What was changed.
    pub change: Change,
    /// The variant ([`Case::out_of_bounds`] set).
    pub case: Case,
}

/// One case in this many also runs an out-of-bounds variant.
pub const ONE_IN: u64 = 4;

/// The out-of-bounds variant `case` runs too, one case in [`ONE_IN`] and every case that
/// walks rows with a stride parameter (few do; drawn from its seed alone, so that the case
/// itself is what the seed always gave).
pub fn draw(case: &Case) -> Option<Variant> {
    let mut rng = Rng::new(case.seed ^ 0x00b0_0b5e_ed00_0043);
    if rng.below(ONE_IN as usize) != 0 && case.row_strides.is_empty() {
        return None;
    }
    variant(case, &mut rng)
}

/// A random out-of-bounds variant of `case`, `None` when nothing may change (every
/// buffer given to custom code, and an output among them).
pub fn variant(case: &Case, rng: &mut Rng) -> Option<Variant> {
    let custom = custom_roots(&case.function);
    let buffers: Vec<(usize, usize)> = case
        .args
        .iter()
        .enumerate()
        .filter(|(p, _)| !custom.contains(p))
        .filter_map(|(p, a)| match a {
            Arg::Buffer { bytes, .. } => {
                let size = element_size(case, p);
                Some((p, bytes.len() / size)).filter(|(_, n)| *n > 0)
            }
            Arg::Scalar(_) => None,
        })
        .collect();
    let grid = !custom.iter().any(|p| {
        matches!(
            case.args.get(*p),
            Some(Arg::Buffer {
                memory: Memory::Output,
                ..
            })
        )
    });
    let change = if !case.row_strides.is_empty() && rng.chance(0.5) {
        // Rows as long as those the kernel walks with a stride parameter, set to the
        // view's: every access on a row, on rows 0 to the last (or one element short:
        // each row's last access falls into a gap).
        let walk = *rng.pick(&case.row_strides);
        let len = buffers.iter().find(|(p, _)| *p == walk.buffer).map(|b| b.1);
        let short = walk.row > 1 && rng.chance(0.25);
        let view = View {
            param: walk.buffer,
            rows: len?.div_ceil(walk.row).max(2),
            row: walk.row - usize::from(short),
            gap: 1 + rng.below(8),
            stride: Some(walk.param),
        };
        Change::View(view)
    } else if !buffers.is_empty() && rng.chance(0.25) {
        let &(param, len) = rng.pick(&buffers);
        // Rows that hold the whole buffer (every access on the first row: the proof must
        // find them there), or shorter ones, often a few elements, laid over the buffer's
        // elements (accesses past a row's end fall into a gap).
        let gap = 1 + rng.below(8);
        let (row, rows) = match rng.chance(0.5) || len < 3 {
            true => (len, 2 + rng.below(2)),
            false => {
                let longest = if rng.chance(0.5) { 16 } else { len - 1 };
                let row = 1 + rng.below(longest.min(len - 1));
                (row, len.div_ceil(row + gap).max(2))
            }
        };
        Change::View(View {
            param,
            rows,
            row,
            gap,
            stride: None,
        })
    } else if grid && (buffers.is_empty() || rng.chance(0.25)) {
        // Mostly along x, where grids have the most programs.
        let axis = *rng.pick(&[0, 0, 1, 2]);
        Change::Grid { axis }
    } else if !buffers.is_empty() {
        let &(param, len) = rng.pick(&buffers);
        // Mostly a few elements (the last lanes of a tile, often masked or never
        // touched), sometimes more, now and then the whole buffer.
        let most = match rng.weighted(&[5, 3, 2]) {
            0 => 4,
            1 => 64,
            _ => len,
        };
        let elements = 1 + rng.below(most.min(len));
        Change::Shorten { param, elements }
    } else {
        return None;
    };
    apply(case, change).map(|case| Variant { change, case })
}

/// The parameters whose pointers some user op is given (all of them for a pointer made
/// from an integer); builtins' accesses are checked.
pub fn custom_roots(f: &Function) -> BTreeSet<usize> {
    let roots = f.pointer_roots();
    let mut out = BTreeSet::new();
    f.walk(&mut |inst| {
        if let Op::Custom(c) = &inst.op {
            if c.is_builtin() {
                return;
            }
            for v in &c.ins {
                out.extend(roots.get(v).into_iter().flatten().copied());
            }
        }
    });
    out
}

/// `case` with `change` made ([`Case::out_of_bounds`] set), or `None` when it does not
/// apply (no such buffer, or fewer elements than it cuts).
pub fn apply(case: &Case, change: Change) -> Option<Case> {
    let mut v = case.clone();
    v.out_of_bounds = true;
    v.expect.clear();
    match change {
        Change::Shorten { param, elements } => {
            let size = element_size(case, param);
            let Some(Arg::Buffer { bytes, .. }) = v.args.get_mut(param) else {
                return None;
            };
            let cut = elements.checked_mul(size)?;
            bytes.truncate(bytes.len().checked_sub(cut)?);
        }
        Change::Grid { axis } => *v.grid.get_mut(axis)? += 1,
        Change::View(view) => {
            let size = element_size(case, view.param);
            let Some(Arg::Buffer { bytes, .. }) = v.args.get_mut(view.param) else {
                return None;
            };
            if view.rows < 2 || view.row == 0 || view.gap == 0 {
                return None;
            }
            let extent = view.extent().checked_mul(size)?;
            if bytes.len() < extent {
                bytes.resize(extent, 0);
            }
            if let Some(p) = view.stride {
                let Some(Arg::Scalar(bits)) = v.args.get_mut(p) else {
                    return None;
                };
                *bits = u64::try_from(view.row + view.gap).ok()?;
            }
            v.views.push(view);
        }
    }
    Some(v)
}

/// Bytes per element of parameter `p` (1 for a scalar).
fn element_size(case: &Case, p: usize) -> usize {
    let f = &case.function;
    f.params
        .get(p)
        .and_then(|q| f.ty(q.value).elem.pointee())
        .map_or(1, |d| d.size_bytes())
}
