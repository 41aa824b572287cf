//! Which tiles stay in registers in a tensor-core `dot`'s accumulator layout.
//!
//! Triton's MMA layout and its slice: the result of a tensor-core `dot` is held as
//! `mma` accumulator fragments ([`Held::Frag`]), and so is every elementwise op over it
//! whose other operands can be had at a fragment's coordinates (scalars, splats, index
//! expressions, other values in the same layout). Where the warps own whole rows
//! ([`FragLayout::by_rows`]: every warp a band of `16`-row tiles across all columns, as
//! Triton deals attention's warps), a reduction along the rows is a few register ops and
//! shuffles within a quad of lanes, and its result is held one value per fragment row
//! ([`Held::Rows`]), which broadcasts back to fragments for free. So attention's scores,
//! their row max and sum, `p` and the rescaled accumulator never go through shared memory.
//!
//! The analysis runs once per kernel before code generation. A loop's carried values start
//! optimistic (a uniform initial value takes any layout) and settle on what the body
//! yields; whatever it decides, code generation converts a value to the layout its use
//! needs (through shared memory), so the analysis only decides speed, never results.

use super::Gen;
use std::collections::HashMap;
use tritium_dsl::ir::{Block, Inst, Op, Value};

/// The `16 × 8` tiles of an `m × n` `mma` accumulator, dealt to the warps by rows
/// (`by_rows`: warp `w` owns tile rows `w · mi ..`, every column) or as `dot` finds best.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct FragLayout {
    pub m: usize,
    pub n: usize,
    pub by_rows: bool,
}

/// How a value is held when not in the blocked layout of slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Held {
    /// This thread's slots (every value by default).
    Slots,
    /// `mma` accumulator fragments: 4 registers per round of `16 × 8` tiles.
    Frag(FragLayout),
    /// A `[m]` or `[m, 1]` tile: the values of the rows this lane's fragments of a
    /// by-rows `m`-row layout cover, two per tile row of its warp (rows `group` and
    /// `group + 8`).
    Rows { m: usize },
}

/// What the analysis knows of a value: a layout, or, for a loop's carried value whose
/// initial value is uniform, not yet (it takes what the other operands have).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Known {
    Open,
    Is(Held),
}

/// The most rounds of a loop's carried layouts before they are taken as they are.
const MAX_ROUNDS: usize = 8;

impl<'ctx, 'f> Gen<'ctx, 'f> {
    /// Whether an `m`-row accumulator can be dealt by rows: whole `16`-row tiles per warp.
    pub(super) fn rows_fit(&self, m: usize) -> bool {
        m.is_multiple_of(16) && (m / 16).is_multiple_of(self.threads / 32)
    }

    /// The layout of every value held other than in slots (see the module docs).
    pub(super) fn held_layouts(&self) -> HashMap<Value, Held> {
        // Warps dealt by rows pay off only where something reads rows: a row reduction or
        // a `dot` whose `a` is another's result (then `a`'s fragments are its A fragments).
        let by_rows = Analysis::run(self, true);
        let uses_rows = by_rows.uses_rows();
        let chosen = if uses_rows {
            by_rows
        } else {
            Analysis::run(self, false)
        };
        (chosen.known.into_iter())
            .filter_map(|(v, k)| match k {
                Known::Is(Held::Slots) | Known::Open => None,
                Known::Is(h) => Some((v, h)),
            })
            .collect()
    }
}

struct Analysis<'a, 'ctx, 'f> {
    gen: &'a Gen<'ctx, 'f>,
    by_rows: bool,
    known: HashMap<Value, Known>,
}

impl<'a, 'ctx, 'f> Analysis<'a, 'ctx, 'f> {
    fn run(gen: &'a Gen<'ctx, 'f>, by_rows: bool) -> Self {
        let mut a = Analysis {
            gen,
            by_rows,
            known: HashMap::new(),
        };
        a.block(&gen.f.body);
        a
    }

    /// Whether a row reduction or a `dot`'s `a` reads fragments.
    fn uses_rows(&self) -> bool {
        fn walk(a: &Analysis, b: &Block) -> bool {
            b.insts.iter().any(|i| {
                let reads = match &i.op {
                    Op::Dot { a: x, .. } if a.gen.mma_shape(i).is_some() => {
                        matches!(a.get(*x), Known::Is(Held::Frag(_)))
                    }
                    _ => i
                        .results
                        .iter()
                        .any(|r| matches!(a.get(*r), Known::Is(Held::Rows { .. }))),
                };
                reads || i.op.regions().iter().any(|r| walk(a, r))
            })
        }
        walk(self, &self.gen.f.body)
    }

    fn get(&self, v: Value) -> Known {
        if self.gen.ty(v).is_scalar() {
            return Known::Is(Held::Slots);
        }
        (self.known.get(&v).copied()).unwrap_or(Known::Is(Held::Slots))
    }

    fn set(&mut self, v: Value, k: Known) {
        self.known.insert(v, k);
    }

    /// Whether every lane of `v` can be had at any coordinate without an exchange: a
    /// scalar, a splat or constant, an index expression.
    fn anywhere(&self, v: Value) -> bool {
        self.gen.ty(v).is_scalar()
            || matches!(
                self.gen.defs.get(&v).map(|i| &i.op),
                Some(Op::Const(_) | Op::Splat(_))
            )
            || self.gen.is_index_value(v)
    }

    fn block(&mut self, b: &Block) {
        for inst in &b.insts {
            self.inst(inst);
        }
    }

    fn inst(&mut self, inst: &Inst) {
        if let Op::For { init, body, .. } = &inst.op {
            return self.for_loop(inst, init, body);
        }
        for region in inst.op.regions() {
            for a in &region.args {
                self.set(*a, Known::Is(Held::Slots));
            }
            self.block(region);
        }
        let Some(&r) = inst.results.first() else {
            return;
        };
        let k = self.result(inst, r);
        self.set(r, k);
    }

    fn result(&self, inst: &Inst, r: Value) -> Known {
        let rt = self.gen.ty(r);
        let slots = Known::Is(Held::Slots);
        match &inst.op {
            Op::Dot { .. } => match self.gen.mma_shape(inst) {
                Some((_, [m, n, _])) => Known::Is(Held::Frag(FragLayout {
                    m,
                    n,
                    by_rows: self.by_rows && self.gen.rows_fit(m),
                })),
                None => slots,
            },
            Op::Reduce { x, axis: 1, .. } if self.gen.ty(*x).rank() == 2 => match self.get(*x) {
                Known::Is(Held::Frag(l)) if l.by_rows => Known::Is(Held::Rows { m: l.m }),
                Known::Open => Known::Open,
                _ => slots,
            },
            // `[m]` ↔ `[m, 1]`.
            Op::ExpandDims { x, .. } | Op::Reshape(x)
                if rt.rank() <= 2 && rt.shape.first() == self.gen.ty(*x).shape.first() =>
            {
                match self.get(*x) {
                    k @ (Known::Open | Known::Is(Held::Rows { .. })) => k,
                    _ => slots,
                }
            }
            Op::Broadcast(x) if rt.rank() == 2 && self.gen.ty(*x).shape == [rt.shape[0], 1] => {
                match self.get(*x) {
                    Known::Is(Held::Rows { m }) if rt.shape[1].is_multiple_of(8) => {
                        Known::Is(Held::Frag(FragLayout {
                            m,
                            n: rt.shape[1],
                            by_rows: true,
                        }))
                    }
                    Known::Open => Known::Open,
                    _ => slots,
                }
            }
            op if op.is_pointwise() && !rt.is_scalar() => self.elementwise(&op.operands()),
            _ => slots,
        }
    }

    /// An elementwise op stays in the one layout its held operands share, when every
    /// other operand can be had anywhere.
    fn elementwise(&self, operands: &[Value]) -> Known {
        let mut layout = None;
        let mut open = false;
        for o in operands {
            match self.get(*o) {
                Known::Open => open = true,
                Known::Is(Held::Slots) if self.anywhere(*o) => {}
                Known::Is(Held::Slots) => return Known::Is(Held::Slots),
                Known::Is(h) => match layout {
                    Some(l) if l != h => return Known::Is(Held::Slots),
                    _ => layout = Some(h),
                },
            }
        }
        match (layout, open) {
            (Some(h), _) => Known::Is(h),
            (None, true) => Known::Open,
            (None, false) => Known::Is(Held::Slots),
        }
    }

    /// A loop's carried values: from their initial values (open where uniform), met with
    /// what the body yields until nothing changes.
    fn for_loop(&mut self, inst: &Inst, init: &[Value], body: &Block) {
        let mut carried: Vec<Known> = init
            .iter()
            .map(|v| match self.get(*v) {
                Known::Is(Held::Slots) if self.anywhere(*v) => Known::Open,
                k => k,
            })
            .collect();
        self.set(body.args[0], Known::Is(Held::Slots));
        for round in 0..=MAX_ROUNDS {
            if round == MAX_ROUNDS {
                carried.iter_mut().for_each(|c| *c = Known::Is(Held::Slots));
            }
            for (a, c) in body.args[1..].iter().zip(&carried) {
                self.set(*a, *c);
            }
            self.block(body);
            let yields = body.yields();
            let next: Vec<Known> = (carried.iter().zip(yields))
                .map(|(c, y)| meet(*c, self.get(*y)))
                .collect();
            if next == carried || round == MAX_ROUNDS {
                break;
            }
            carried = next;
        }
        // What stayed open (yielded only from itself) is held in slots.
        if carried.contains(&Known::Open) {
            for c in carried.iter_mut().filter(|c| **c == Known::Open) {
                *c = Known::Is(Held::Slots);
            }
            for (a, c) in body.args[1..].iter().zip(&carried) {
                self.set(*a, *c);
            }
            self.block(body);
        }
        for (r, c) in inst.results.iter().zip(&carried) {
            self.set(*r, *c);
        }
    }
}

/// The layout two sources of one value agree on: an open one takes the other's; two
/// different layouts settle on slots.
fn meet(a: Known, b: Known) -> Known {
    match (a, b) {
        (Known::Open, x) | (x, Known::Open) => x,
        (Known::Is(x), Known::Is(y)) if x == y => a,
        _ => Known::Is(Held::Slots),
    }
}
