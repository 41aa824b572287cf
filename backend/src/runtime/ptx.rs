//! PTX, the unit a device loads.

/// A kernel compiled to PTX.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ptx {
    /// The `.entry` symbol.
    pub entry: String,
    /// The PTX text.
    pub text: String,
    /// Bytes of dynamic shared memory a launch must provide.
    pub shared_bytes: usize,
    /// Threads per CTA (`num_warps × 32`).
    pub threads: u32,
}
