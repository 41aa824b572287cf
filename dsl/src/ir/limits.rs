//! Documented limits of the IR. The parser and the verifier reject anything beyond them with
//! an error that names the limit, so no later stage sizes memory or loops by an unchecked
//! number.

/// Value numbers are below this (`%16777215` is the largest): the parser's and every
/// backend's tables are indexed by value number.
pub const MAX_VALUES: usize = 1 << 24;

/// The most dims a tile type has.
pub const MAX_RANK: usize = 8;

/// The most elements in one tile (and in one custom-op extra buffer): 64 MiB of f32. Every
/// dim is at least 1, so this also bounds each dim.
pub const MAX_TILE_ELEMS: usize = 1 << 24;

/// How deeply `for`, `if` and `while` regions nest: the parser, the verifier, the printer
/// and the backends recurse once per level.
pub const MAX_NESTING: usize = 64;

/// The longest `device_assert` message or `device_print` prefix, in bytes (CUDA embeds
/// them in the PTX).
pub const MAX_DEBUG_TEXT: usize = 4096;

/// Why `t` is over a limit (rank, a zero dim, elements), or `Ok`.
pub(super) fn check_type(t: &super::Type) -> Result<(), String> {
    if t.rank() > MAX_RANK {
        return Err(format!(
            "a tile type of rank {} is over the limit of {MAX_RANK} dims (MAX_RANK)",
            t.rank()
        ));
    }
    if t.shape.contains(&0) {
        return Err(format!("{t} has a dim of size 0"));
    }
    let numel = t.shape.iter().try_fold(1usize, |n, d| n.checked_mul(*d));
    match numel {
        Some(n) if n <= MAX_TILE_ELEMS => Ok(()),
        _ => Err(format!(
            "{t} has more than {MAX_TILE_ELEMS} elements (MAX_TILE_ELEMS)"
        )),
    }
}
