//! `tritium-fuzz`: see `scripts/dev fuzz`.
fn main() {}
