//! Mutations of printed kernels: the parser and the verifier never panic, abort or hang.
