//! Checked mode's fault record, shared by the CPU and CUDA generators and their launchers,
//! so that a fault reads the same on every compiled backend.
//!
//! Generated code compares each access with the byte ranges of the parameters its pointer
//! derives from (`Function::pointer_roots`), skips it when it is outside all of them, and
//! records the first such access into [`FAULT_WORDS`] u64 words:
//! `[site + 1, address, program id x, y, z]` (word 0 is 0 while nothing faulted and is
//! claimed by a compare-exchange, so the first fault wins).

use super::RawArg;
use crate::{Error, Result};
use tritium_dsl::ir::{Function, Loc};

/// Words of the fault record.
pub(crate) const FAULT_WORDS: usize = 5;

/// `[lo, hi]` of every parameter (`[0, 0]` for scalars) as generated code reads them:
/// `range` gives a buffer's byte range in the address space the kernel runs in.
pub(crate) fn ranges(args: &[RawArg], range: impl Fn(&super::RawBuffer) -> (u64, u64)) -> Vec<u64> {
    args.iter()
        .flat_map(|a| match a {
            RawArg::Ptr(b) => {
                let (lo, hi) = range(b);
                [lo, hi]
            }
            RawArg::Scalar { .. } => [0, 0],
        })
        .collect()
}

/// The launch's result from its fault record: `Ok` when nothing faulted, else the
/// [`Error::Runtime`] naming the op's source location, its kind, the address, the program
/// and every buffer's range (`ranges` as passed to the kernel, so in the same address
/// space as the address).
pub(crate) fn fault_result(
    f: &Function,
    sites: &[(Loc, &'static str)],
    record: &[u64; FAULT_WORDS],
    args: &[RawArg],
    ranges: &[u64],
) -> Result<()> {
    let [site, addr, x, y, z] = *record;
    if site == 0 {
        return Ok(());
    }
    let (loc, kind) = sites.get(site as usize - 1).cloned().unwrap_or_default();
    let buffers: Vec<String> = f
        .params
        .iter()
        .zip(args)
        .enumerate()
        .filter_map(|(i, (p, a))| match a {
            RawArg::Ptr(_) => Some(format!(
                "`{}` [{:#x}, {:#x})",
                p.name,
                ranges.get(2 * i).copied().unwrap_or(0),
                ranges.get(2 * i + 1).copied().unwrap_or(0)
            )),
            RawArg::Scalar { .. } => None,
        })
        .collect();
    Err(Error::Runtime {
        kernel: f.name.clone(),
        location: loc.to_string(),
        message: format!(
            "out-of-bounds {kind} at address {addr:#x} by program ({x}, {y}, {z}) (buffers: {})",
            buffers.join(", ")
        ),
    })
}
