//! A loop-invariant `dot` operand copied once by TMA before its loops (Hopper): attention's
//! `q` (`desc_q.load(..)` at the top of the kernel, the `a` of `q·kᵀ` in each loop), as
//! Triton copies it.
//!
//! Where such a load (planned for TMA: `cuda/tensor_map.rs`) is at the kernel's top level
//! and every use is the `a` of a tensor-core `dot` directly in a later top-level loop
//! that keeps it in shared memory (`dot::hoist_a_fragments`), nothing is loaded into
//! registers: the box is copied where the load stands into a swizzled tile below the
//! floor of the shared memory that later tiles take (`shared_floor`, raised past it for
//! the rest of the kernel), through one `mbarrier` waited for at once (and invalidated
//! after a barrier, its bytes above the floor). What follows takes shared memory above it
//! (scratch arrays from `scratch_floor`, later loops' tiles from the floor). The loops'
//! `dot`s read that tile instead of a copy staged from registers at each loop.

use super::swizzle::Swizzled;
use super::tma::{TmaStages, MBARRIER_BYTES};
use super::Gen;
use crate::llvm::Result;
use tritium_dsl::ir::{Inst, Op};

impl<'ctx> Gen<'ctx, '_> {
    /// The tile the load `inst` is copied into once by TMA (see the module docs), at the
    /// floor; `None` where it is loaded as any other load.
    pub(super) fn copied_once(&self, inst: &Inst) -> Option<Swizzled> {
        let r = inst.results[0];
        let t = self.tma.get(&r)?;
        let top = &self.f.body.insts;
        let at = top.iter().position(|i| std::ptr::eq(i, inst))?;
        // Every use the `a` of a hoisted tensor-core `dot` in a later top-level loop.
        let mut uses = 0;
        let mut shape = None;
        for l in &top[at + 1..] {
            if uses == self.f.uses(r) {
                break;
            }
            let Op::For { body, .. } = &l.op else {
                continue;
            };
            let quiet = self.uses_no_shared_memory(body);
            for dot in &body.insts {
                let Op::Dot { a, b, .. } = &dot.op else {
                    continue;
                };
                if *a != r || *b == r {
                    continue;
                }
                // Kept in shared memory (else the tile would hold the floor up for nothing).
                self.a_hoisting(dot, body, quiet).filter(|kept| *kept)?;
                let (from, [_, _, k]) = self.mma_shape(dot)?;
                shape = Some((self.ty(r).shape[0], k, from.elem_bytes()));
                uses += 1;
            }
        }
        let (m, k, elem) = shape?;
        let offset = self.shared_floor.next_multiple_of(self.tile_alignment());
        let tile = Swizzled::of_bytes(offset, m, k, elem);
        (uses == self.f.uses(r) && t.load.inner == 1 && self.tma_copies(r, &tile, false))
            .then_some(tile)
    }

    /// Copies the load `inst` into `tile` by TMA and waits for it (see the module docs).
    pub(super) fn copy_once(&mut self, inst: &Inst, tile: Swizzled) -> Result<()> {
        let r = inst.results[0];
        let end = tile.offset + tile.bytes();
        let t = TmaStages {
            barriers: end.next_multiple_of(MBARRIER_BYTES),
        };
        self.reserve_shared(end);
        self.tma_init(t, 1)?;
        let zero = self.i32c(0);
        self.tma_issue(t, zero, zero, &[(r, tile)])?;
        self.tma_wait(t, zero, zero)?;
        // Every thread past its wait before the barrier's bytes may be reused.
        self.barrier()?;
        self.tma_release(t, 1)?;
        self.shared_floor = end.next_multiple_of(self.tile_alignment());
        self.a_in_shared.insert(r, tile);
        Ok(())
    }
}
