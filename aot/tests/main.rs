//! AOT operator tests: MindSpore's acceptance cases with our own C++ sources in
//! `tests/data/`, every error path, packages, and backward.
mod common;
mod cuda;
mod env;
mod errors;
mod grad;
mod isolation;
mod ops;
mod package;
