//! Options of an operator that are not part of its meaning (a package does not carry them).

use crate::compile::CompileOptions;
use crate::whitelist::Whitelist;

/// Options of an operator that are not part of its meaning.
#[derive(Clone, Debug, Default)]
pub struct AotOptions {
    /// Checked mode: guard bytes after every output and workspace, and an error when the kernel
    /// overwrites them. Also on when `TRITIUM_BOUNDS_CHECK=1`.
    pub checked: bool,
    /// How sources are compiled and where the cache lives.
    pub compile: CompileOptions,
    /// The library whitelist; `None` reads `TRITIUM_AOT_WHITELIST` when the operator is built.
    pub whitelist: Option<Whitelist>,
}

/// `TRITIUM_BOUNDS_CHECK=1` (or `true`, `on`): checked mode for every operator built.
pub(super) fn env_checked() -> bool {
    matches!(
        std::env::var("TRITIUM_BOUNDS_CHECK").as_deref(),
        Ok("1") | Ok("true") | Ok("on")
    )
}
