//! Checked access to the host buffers of a launch.
//!
//! Every lane's byte range `[addr, addr + size)` must lie inside one pointer argument's
//! `[lo, hi)`, and that buffer must be writable for stores and atomics. All active lanes
//! of an op are checked before the first byte is read or written, so a faulting op has
//! no effect. Masked-off lanes are neither checked nor touched. Reads and writes are
//! unaligned (buffers may be views with any alignment); a bool is one byte, 0 or 1.

use super::cell::{load_cells, rmw, with_cell, Cell, Wide};
use super::value::Data;
use crate::launch::RawBuffer;
use ndarray::{ArrayD, Dimension, Zip};
use tritium_dsl::ir::{AtomicOp, DType};

/// What an access does, for checks and messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Access {
    Load,
    Store,
    Atomic,
}

impl Access {
    fn name(self) -> &'static str {
        match self {
            Access::Load => "load",
            Access::Store => "store",
            Access::Atomic => "atomic",
        }
    }
}

/// The buffers a launch may touch, named after their parameters.
pub(crate) struct Memory {
    buffers: Vec<(String, RawBuffer)>,
}

impl Memory {
    /// Memory over named buffers (a launch's `named_buffers`, or the interpreter's
    /// staging buffers for custom calls).
    pub(crate) fn from_buffers(buffers: Vec<(String, RawBuffer)>) -> Memory {
        Memory { buffers }
    }

    /// The launch buffer that contains byte `addr`.
    pub(crate) fn buffer_containing(&self, addr: usize) -> Option<RawBuffer> {
        self.buffers
            .iter()
            .map(|(_, b)| *b)
            .find(|b| b.contains(addr, 1) || (b.lo == b.hi && addr == b.ptr))
    }

    fn describe(&self) -> String {
        if self.buffers.is_empty() {
            return "the kernel has no buffers".into();
        }
        let list: Vec<String> = self
            .buffers
            .iter()
            .map(|(name, b)| {
                let rw = if b.writable { "writable" } else { "read-only" };
                format!("`{name}` [{:#x}, {:#x}) {rw}", b.lo, b.hi)
            })
            .collect();
        format!("buffers: {}", list.join(", "))
    }

    fn allows(b: &RawBuffer, kind: Access, lo: usize, len: usize) -> bool {
        b.contains(lo, len) && (kind == Access::Load || b.writable)
    }

    /// [`Memory::allows`] for one lane, which must also land on an element of a strided view.
    fn allows_lane(b: &RawBuffer, kind: Access, addr: usize, size: usize) -> bool {
        Self::allows(b, kind, addr, size) && b.view.is_none_or(|v| v.contains(b.lo, addr))
    }

    /// Checks one lane; the message says what went wrong.
    fn check_lane(
        &self,
        kind: Access,
        d: DType,
        addr: usize,
        lane: &[usize],
    ) -> Result<(), String> {
        let size = d.size_bytes();
        if self
            .buffers
            .iter()
            .any(|(_, b)| Self::allows_lane(b, kind, addr, size))
        {
            return Ok(());
        }
        let what = format!(
            "{} of {d} ({size} bytes) at address {addr:#x} (lane {lane:?})",
            kind.name()
        );
        let why = match self.buffers.iter().find(|(_, b)| b.contains(addr, size)) {
            Some((name, b)) if b.view.is_some_and(|v| !v.contains(b.lo, addr)) => format!(
                "buffer `{name}` is a strided view and the address falls between its elements"
            ),
            Some((name, _)) => {
                format!("buffer `{name}` is read-only (pass it as `&mut` to write it)")
            }
            None => "the address is outside every buffer".into(),
        };
        Err(format!("{what}: {why}; {}", self.describe()))
    }

    /// Checks that the `len` bytes at `addr` that builtin call `what` may touch (elements of
    /// `elem` bytes) lie inside one buffer, a writable one for `write`; in a strided view,
    /// whose gaps are not its bytes, only one element on it may be.
    pub(crate) fn check_extent(
        &self,
        what: &str,
        write: bool,
        addr: usize,
        len: usize,
        elem: usize,
    ) -> Result<(), String> {
        let kind = if write { Access::Atomic } else { Access::Load };
        let fits = |b: &RawBuffer| {
            Self::allows(b, kind, addr, len)
                && b.view.is_none_or(|v| len <= elem && v.contains(b.lo, addr))
        };
        if self.buffers.iter().any(|(_, b)| fits(b)) {
            return Ok(());
        }
        let why = match self.buffers.iter().find(|(_, b)| b.contains(addr, len)) {
            Some((name, b)) if b.view.is_some() => {
                format!("buffer `{name}` is a strided view, whose gaps are not its elements")
            }
            Some((name, _)) => {
                format!("buffer `{name}` is read-only (pass it as `&mut` to write it)")
            }
            None => "the range is outside every buffer".into(),
        };
        Err(format!(
            "{what} ({len} bytes at address {addr:#x}): {why}; {}",
            self.describe()
        ))
    }

    /// Checks every active lane. The common case (all lanes inside one buffer) costs one
    /// pass for the address range; otherwise lanes are checked one by one in row-major
    /// order and the first bad one is reported.
    fn check(
        &self,
        kind: Access,
        d: DType,
        addrs: &ArrayD<usize>,
        mask: Option<&ArrayD<bool>>,
    ) -> Result<(), String> {
        let size = d.size_bytes();
        let mut range: Option<(usize, usize)> = None;
        let mut note = |a: usize| {
            range = Some(range.map_or((a, a), |(lo, hi)| (lo.min(a), hi.max(a))));
        };
        match mask {
            None => addrs.iter().for_each(|&a| note(a)),
            Some(m) => Zip::from(addrs).and(m).for_each(|&a, &on| {
                if on {
                    note(a)
                }
            }),
        }
        let Some((lo, hi)) = range else { return Ok(()) };
        if let Some(len) = (hi - lo).checked_add(size) {
            if self
                .buffers
                .iter()
                .any(|(_, b)| b.view.is_none() && Self::allows(b, kind, lo, len))
            {
                return Ok(());
            }
        }
        for (idx, &a) in addrs.indexed_iter() {
            if mask.is_none_or(|m| m[idx.slice()]) {
                self.check_lane(kind, d, a, idx.slice())?;
            }
        }
        Ok(())
    }

    /// Loads lanes of dtype `d`; masked-off lanes read nothing and give `other` (or zero).
    pub(crate) fn load(
        &self,
        d: DType,
        addrs: &ArrayD<usize>,
        mask: Option<&ArrayD<bool>>,
        other: Option<&Data>,
    ) -> Result<Data, String> {
        check_shapes(addrs, mask)?;
        self.check(Access::Load, d, addrs, mask)?;
        macro_rules! go {
            ($t:ty) => {{
                let other = match other {
                    Some(o) => Some(
                        <<$t as Cell>::Wide as Wide>::view(o)
                            .ok_or("load `other` has the wrong dtype")?,
                    ),
                    None => None,
                };
                // SAFETY: `check` proved every active lane lies inside a live buffer.
                Ok(Wide::wrap(unsafe { load_cells::<$t>(addrs, mask, other)? }))
            }};
        }
        with_cell!(d, go)
    }

    /// Stores lanes of dtype `d`; masked-off lanes write nothing. Lanes are written in
    /// row-major order, so of two lanes with one address the later one wins.
    pub(crate) fn store(
        &self,
        d: DType,
        addrs: &ArrayD<usize>,
        value: &Data,
        mask: Option<&ArrayD<bool>>,
    ) -> Result<(), String> {
        check_shapes(addrs, mask)?;
        if value.shape() != addrs.shape() {
            return Err("stored value and pointers have different shapes".into());
        }
        self.check(Access::Store, d, addrs, mask)?;
        macro_rules! go {
            ($t:ty) => {{
                let v = <<$t as Cell>::Wide as Wide>::view(value)
                    .ok_or("stored value has the wrong dtype")?;
                // SAFETY: `check` proved every active lane lies inside a writable live buffer.
                unsafe { rmw::<$t, _>(addrs, v, mask, |_, v| Some(v)) };
                Ok(())
            }};
        }
        with_cell!(d, go)
    }

    /// Atomic read-modify-write of lanes of dtype `d`, in row-major order; returns the old
    /// values (zero for masked-off lanes).
    pub(crate) fn atomic(
        &self,
        op: AtomicOp,
        d: DType,
        addrs: &ArrayD<usize>,
        value: &Data,
        mask: Option<&ArrayD<bool>>,
    ) -> Result<Data, String> {
        check_shapes(addrs, mask)?;
        if value.shape() != addrs.shape() {
            return Err("atomic operand and pointers have different shapes".into());
        }
        self.check(Access::Atomic, d, addrs, mask)?;
        let bits = d.bits();
        macro_rules! go {
            ($t:ty) => {{
                let v = <<$t as Cell>::Wide as Wide>::view(value)
                    .ok_or("atomic operand has the wrong dtype")?;
                let f = <<$t as Cell>::Wide as Wide>::combine(op, d, bits);
                // SAFETY: `check` proved every active lane lies inside a writable live buffer.
                Ok(Wide::wrap(unsafe {
                    rmw::<$t, _>(addrs, v, mask, |old, v| Some(f(old, v)))
                }))
            }};
        }
        with_cell!(d, go)
    }

    /// Atomic compare-and-swap, lane by lane in row-major order; returns the old values.
    pub(crate) fn atomic_cas(
        &self,
        d: DType,
        addrs: &ArrayD<usize>,
        cmp: &Data,
        value: &Data,
    ) -> Result<Data, String> {
        if cmp.shape() != addrs.shape() || value.shape() != addrs.shape() {
            return Err("atomic_cas operands and pointers have different shapes".into());
        }
        self.check(Access::Atomic, d, addrs, None)?;
        macro_rules! go {
            ($t:ty) => {{
                type W = <$t as Cell>::Wide;
                let c = W::view(cmp).ok_or("atomic_cas compare value has the wrong dtype")?;
                let v = W::view(value).ok_or("atomic_cas new value has the wrong dtype")?;
                let pairs = Zip::from(c).and(v).map_collect(|&c, &v| (c, v));
                // SAFETY: `check` proved every lane lies inside a writable live buffer.
                let old = unsafe {
                    rmw::<$t, _>(addrs, &pairs, None, |old, (c, v)| (old == c).then_some(v))
                };
                Ok(Wide::wrap(old))
            }};
        }
        with_cell!(d, go)
    }
}

fn check_shapes(addrs: &ArrayD<usize>, mask: Option<&ArrayD<bool>>) -> Result<(), String> {
    match mask {
        Some(m) if m.shape() != addrs.shape() => {
            Err("mask and pointers have different shapes".into())
        }
        _ => Ok(()),
    }
}
