//! AOT operator tests.
