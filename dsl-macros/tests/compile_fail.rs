//! Compile-fail tests: every error of `#[kernel]`/`#[device]` points at the user's code;
//! and a kernel using every kind of control flow compiles with `deny(warnings)`.
//! Regenerate the expected output with `TRYBUILD=overwrite cargo test -p tritium-macros --test compile_fail`.

#[test]
fn ui() {
    let t = trybuild::TestCases::new();
    t.compile_fail("tests/ui/*.rs");
    t.pass("tests/pass/*.rs");
}
