//! Kernels written in the Tritium DSL.
