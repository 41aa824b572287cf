//! One alias scope per scratch buffer: every load and store whose address is a buffer's
//! base plus GEPs is marked as accessing that buffer's scope and no other buffer's.
//!
//! All buffers are carved from the one `scratch` parameter at constant offsets
//! (`Gen::alloc_buf`), so LLVM sees one underlying object and cannot tell `p[i][j]` (a
//! buffer written in a loop) from `m[i]` (another buffer read in it) once the indices
//! vary: loop-access analysis reports an unknown dependence, the read is not hoisted and
//! the loop is not vectorized (attention's `p = exp2(qk - m_ij[:, None])`). Buffers never
//! overlap and each access stays inside its own buffer's tile, so the scopes are exact.
//! Accesses whose address is not traced back to one buffer (selects, phis, calls, user
//! memory) get no scope of ours and stay may-alias with everything.

use inkwell::context::Context;
use inkwell::values::{
    BasicValueEnum, FunctionValue, InstructionOpcode, InstructionValue, MetadataValue, Operand,
    PointerValue,
};
use std::collections::HashMap;

/// Buffers beyond this many get no scopes: each buffer's `noalias` list names all the
/// others, and the metadata grows with the square of their number.
const MAX_SCOPED_BUFFERS: usize = 512;

/// Marks the loads and stores of `func` that address one of `buffers` (`name` keeps the
/// scopes' identities unique in the module).
pub(super) fn annotate<'ctx>(
    ctx: &'ctx Context,
    func: FunctionValue<'ctx>,
    buffers: &[PointerValue<'ctx>],
    name: &str,
) {
    if buffers.len() < 2 || buffers.len() > MAX_SCOPED_BUFFERS {
        return;
    }
    let index: HashMap<_, _> = buffers.iter().enumerate().map(|(k, b)| (*b, k)).collect();
    if index.len() != buffers.len() {
        return;
    }
    let domain = ctx.metadata_node(&[ctx.metadata_string(&format!("{name}.scratch")).into()]);
    let scopes: Vec<MetadataValue> = (0..buffers.len())
        .map(|k| {
            ctx.metadata_node(&[
                ctx.metadata_string(&format!("{name}.scratch.{k}")).into(),
                domain.into(),
            ])
        })
        .collect();
    let mut lists: HashMap<usize, (MetadataValue, MetadataValue)> = HashMap::new();
    let (scope_kind, noalias_kind) = (ctx.get_kind_id("alias.scope"), ctx.get_kind_id("noalias"));
    for bb in func.get_basic_block_iter() {
        for inst in bb.get_instructions() {
            let Some(k) = accessed_buffer(inst, &index) else {
                continue;
            };
            let (own, others) = *lists.entry(k).or_insert_with(|| {
                let others: Vec<_> = (0..scopes.len())
                    .filter(|&j| j != k)
                    .map(|j| scopes[j].into())
                    .collect();
                (
                    ctx.metadata_node(&[scopes[k].into()]),
                    ctx.metadata_node(&others),
                )
            });
            // Loads and stores take both kinds; the calls cannot fail.
            let _ = inst.set_metadata(own, scope_kind);
            let _ = inst.set_metadata(others, noalias_kind);
        }
    }
}

/// The buffer a load or store addresses: its pointer operand followed back through GEPs.
fn accessed_buffer<'ctx>(
    inst: InstructionValue<'ctx>,
    index: &HashMap<PointerValue<'ctx>, usize>,
) -> Option<usize> {
    let address = match inst.get_opcode() {
        InstructionOpcode::Load => 0,
        InstructionOpcode::Store => 1,
        _ => return None,
    };
    let mut ptr = pointer_operand(inst, address)?;
    loop {
        if let Some(&k) = index.get(&ptr) {
            return Some(k);
        }
        let gep = ptr.as_instruction()?;
        if gep.get_opcode() != InstructionOpcode::GetElementPtr {
            return None;
        }
        ptr = pointer_operand(gep, 0)?;
    }
}

fn pointer_operand(inst: InstructionValue, k: u32) -> Option<PointerValue> {
    match inst.get_operand(k)? {
        Operand::Value(BasicValueEnum::PointerValue(p)) => Some(p),
        _ => None,
    }
}
