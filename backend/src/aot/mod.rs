//! MindSpore-style AOT operators (issue 4). Owned by the AOT work stream.

/// Errors of AOT operators.
#[derive(Debug, thiserror::Error)]
pub enum AotError {
    /// Placeholder until the AOT runtime lands.
    #[error("AOT operators are not implemented yet")]
    NotImplemented,
}
