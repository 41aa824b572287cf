//! The tile IR: one concept per file.
