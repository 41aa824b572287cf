//! Launch-time scalars: the values a bounds proof is made of that are the same for every
//! program and lane (constants, integer arguments, the grid), as a hash-consed arena.

use crate::ir::{BinOp, DType};
use std::collections::HashMap;

/// An index into [`Scalars`].
pub(crate) type ScalarId = u32;

/// One launch-time scalar.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Scalar {
    /// A constant.
    Const(i128),
    /// The value of integer parameter `i`.
    Param(u32),
    /// The grid's size along an axis.
    NumPrograms(u32),
    /// An IR op on two uniform values, computed as generated code computes it (operands
    /// and result wrapped to `dtype`, `x / 0 == 0`, shift amounts modulo the width).
    Machine(BinOp, ScalarId, ScalarId, DType),
    /// An integer cast as generated code does it (the low bits, sign by `dtype`).
    Cast(ScalarId, DType),
    /// The exact sum (the proof's own arithmetic; unknown if it leaves i128).
    Add(ScalarId, ScalarId),
    /// The exact product.
    Mul(ScalarId, ScalarId),
    /// The counter of enumerated loop `.0` in the iteration being evaluated.
    Enum(u32),
    /// The value of uniform integer `.1` that enumerated loop `.0` carries, in that
    /// iteration.
    Carried(u32, u32),
    /// The integer of `dtype` a load reads `offset` bytes from pointer parameter
    /// `param`'s pointer, read at launch (`LaunchMemory::read`).
    Load {
        param: u32,
        offset: ScalarId,
        dtype: DType,
    },
}

/// Every scalar of a proof; equal scalars share an id, constants are folded.
#[derive(Debug, Clone, Default)]
pub(crate) struct Scalars {
    pub nodes: Vec<Scalar>,
    ids: HashMap<Scalar, ScalarId>,
}

impl Scalars {
    pub fn get(&mut self, s: Scalar) -> ScalarId {
        let s = self.fold(s);
        if let Some(&id) = self.ids.get(&s) {
            return id;
        }
        let id = self.nodes.len() as ScalarId;
        self.nodes.push(s);
        self.ids.insert(s, id);
        id
    }

    pub fn constant(&mut self, c: i128) -> ScalarId {
        self.get(Scalar::Const(c))
    }

    pub fn as_const(&self, id: ScalarId) -> Option<i128> {
        match self.nodes[id as usize] {
            Scalar::Const(c) => Some(c),
            _ => None,
        }
    }

    pub fn add(&mut self, a: ScalarId, b: ScalarId) -> ScalarId {
        self.get(Scalar::Add(a, b))
    }

    pub fn mul(&mut self, a: ScalarId, b: ScalarId) -> ScalarId {
        self.get(Scalar::Mul(a, b))
    }

    /// Constant folding and the identities of `0` and `1`.
    fn fold(&self, s: Scalar) -> Scalar {
        let c = |id: ScalarId| self.as_const(id);
        match s {
            Scalar::Add(a, b) => match (c(a), c(b)) {
                (Some(x), Some(y)) => x.checked_add(y).map_or(s, Scalar::Const),
                (Some(0), _) => self.nodes[b as usize],
                (_, Some(0)) => self.nodes[a as usize],
                _ => s,
            },
            Scalar::Mul(a, b) => match (c(a), c(b)) {
                (Some(x), Some(y)) => x.checked_mul(y).map_or(s, Scalar::Const),
                (Some(0), _) | (_, Some(0)) => Scalar::Const(0),
                (Some(1), _) => self.nodes[b as usize],
                (_, Some(1)) => self.nodes[a as usize],
                _ => s,
            },
            Scalar::Machine(op, a, b, d) => match (c(a), c(b)) {
                (Some(x), Some(y)) => machine(op, x, y, d).map_or(s, Scalar::Const),
                _ => s,
            },
            Scalar::Cast(a, d) => c(a).map_or(s, |x| Scalar::Const(d.wrap_int(x))),
            _ => s,
        }
    }

    /// Every scalar's value for one launch into `v` (`None`: unknown, as a float
    /// argument's, or an enumerated loop's counter); `read` reads launch memory
    /// (`Scalar::Load`).
    pub fn evaluate_into(
        &self,
        v: &mut Vec<Option<i128>>,
        params: &[Option<i128>],
        grid: [u32; 3],
        read: &mut dyn FnMut(u32, i128, DType) -> Option<i128>,
    ) {
        v.clear();
        v.reserve(self.nodes.len());
        for id in 0..self.nodes.len() {
            let x = self.value(id as ScalarId, v, params, grid, read);
            v.push(x);
        }
    }

    /// Scalar `id`'s value given every earlier scalar's in `v`.
    pub fn value(
        &self,
        id: ScalarId,
        v: &[Option<i128>],
        params: &[Option<i128>],
        grid: [u32; 3],
        read: &mut dyn FnMut(u32, i128, DType) -> Option<i128>,
    ) -> Option<i128> {
        match self.nodes[id as usize] {
            Scalar::Const(c) => Some(c),
            Scalar::Param(i) => params.get(i as usize).copied().flatten(),
            Scalar::NumPrograms(a) => Some(i128::from(grid[a as usize])),
            Scalar::Machine(op, a, b, d) => {
                (v[a as usize].zip(v[b as usize])).and_then(|(x, y)| machine(op, x, y, d))
            }
            Scalar::Cast(a, d) => v[a as usize].map(|x| d.wrap_int(x)),
            Scalar::Add(a, b) => {
                (v[a as usize].zip(v[b as usize])).and_then(|(x, y)| x.checked_add(y))
            }
            Scalar::Mul(a, b) => {
                (v[a as usize].zip(v[b as usize])).and_then(|(x, y)| x.checked_mul(y))
            }
            Scalar::Enum(_) | Scalar::Carried(..) => None,
            Scalar::Load {
                param,
                offset,
                dtype,
            } => read(param, v[offset as usize]?, dtype),
        }
    }

    /// The scalars that depend on any of `roots`, themselves included, ascending.
    pub fn dependents(&self, roots: &[ScalarId]) -> Vec<ScalarId> {
        let Some(&first) = roots.iter().min() else {
            return Vec::new();
        };
        let mut on = vec![false; self.nodes.len()];
        let mut out = Vec::new();
        for id in first as usize..self.nodes.len() {
            let d = roots.contains(&(id as ScalarId))
                || match self.nodes[id] {
                    Scalar::Machine(_, a, b, _) | Scalar::Add(a, b) | Scalar::Mul(a, b) => {
                        on[a as usize] || on[b as usize]
                    }
                    Scalar::Cast(a, _) | Scalar::Load { offset: a, .. } => on[a as usize],
                    _ => false,
                };
            if d {
                on[id] = true;
                out.push(id as ScalarId);
            }
        }
        out
    }
}

/// Integer op `op` of dtype `d` as generated code computes it on `x` and `y` (each first
/// taken modulo the width, as the value it stands for); `None` for ops on no integers.
pub fn machine(op: BinOp, x: i128, y: i128, d: DType) -> Option<i128> {
    if !d.is_int() {
        return None;
    }
    let (x, y) = (d.wrap_int(x), d.wrap_int(y));
    let bits = d.bits() as i128;
    let r = match op {
        BinOp::Add => x + y,
        BinOp::Sub => x - y,
        BinOp::Mul => x.checked_mul(y)?,
        BinOp::Div if y == 0 => 0,
        BinOp::Div => x / y,
        BinOp::Rem if y == 0 => 0,
        BinOp::Rem => x % y,
        BinOp::And => x & y,
        BinOp::Or => x | y,
        BinOp::Xor => x ^ y,
        BinOp::Shl => x << y.rem_euclid(bits),
        // `x` is non-negative for unsigned dtypes, so `>>` is the logical shift there.
        BinOp::Shr => x >> y.rem_euclid(bits),
        BinOp::Max => x.max(y),
        BinOp::Min => x.min(y),
    };
    Some(d.wrap_int(r))
}
