//! Tritium procedural macros.
