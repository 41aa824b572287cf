//! Which accesses generated code checks: every one in checked mode; outside it, the fault
//! sites a launch's bounds proof left (`launch::bounds`). Code that reads or writes a
//! tile's memory other than lane by lane through `memory` (runs as vectors, a `dot`
//! operand read in place, packed, transposed or kept across iterations) never does so
//! for a checked access.

use super::Gen;
use std::collections::HashSet;
use tritium_dsl::ir::{Function, Inst, Value};

/// The checked fault sites of a kernel outside checked mode, and what they access.
#[derive(Debug, Default)]
pub(super) struct SiteChecked {
    sites: HashSet<u32>,
    /// The pointer tiles of the checked accesses.
    pointers: HashSet<Value>,
    /// The results of the checked loads.
    loads: HashSet<Value>,
    /// Every pointer value a checked access's pointer may derive from: their `addptr`s
    /// give the address 2^63 where an offset leaves i64, as in checked mode, so that no
    /// address wraps back onto a buffer.
    feeding: HashSet<Value>,
}

impl SiteChecked {
    pub fn new(f: &Function, sites: &[u32]) -> Self {
        let sites: HashSet<u32> = sites.iter().copied().collect();
        let (pointers, loads) = f.site_accesses(&sites);
        let feeding = f.pointer_sources(&pointers);
        SiteChecked {
            sites,
            pointers,
            loads,
            feeding,
        }
    }

    /// Whether any access is checked outside checked mode.
    pub fn any(&self) -> bool {
        !self.sites.is_empty()
    }
}

impl Gen<'_, '_> {
    /// Whether memory op `inst` is compared with the launch's buffers.
    pub(super) fn checks(&self, inst: &Inst) -> bool {
        self.opts.bounds_check
            || (self.site_checked.any())
                && (self.site_ids.get(&(inst as *const Inst)))
                    .is_some_and(|id| self.site_checked.sites.contains(id))
    }

    /// Whether pointer `v` may be what a checked access's pointer derives from.
    pub(super) fn feeds_checked(&self, v: Value) -> bool {
        self.opts.bounds_check || self.site_checked.feeding.contains(&v)
    }

    /// Whether pointer tile `ptr` is accessed by a checked access.
    pub(super) fn checked_pointer(&self, ptr: Value) -> bool {
        self.opts.bounds_check || self.site_checked.pointers.contains(&ptr)
    }

    /// Whether lazy value `v` reads memory through a checked load (so it must be
    /// evaluated lane by lane, each lane's load checked).
    pub(super) fn reads_checked(&self, v: Value) -> bool {
        if self.opts.bounds_check {
            return true;
        }
        if !self.site_checked.any() {
            return false;
        }
        let mut seen = HashSet::new();
        let mut todo = vec![v];
        while let Some(v) = todo.pop() {
            if self.site_checked.loads.contains(&v) {
                return true;
            }
            if !seen.insert(v) || !self.lazy.contains(&v) {
                continue;
            }
            if let Some(inst) = self.defs.get(&v) {
                todo.extend(inst.op.operands());
            }
        }
        false
    }
}
