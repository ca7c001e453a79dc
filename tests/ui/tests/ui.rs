//! Compile-time behaviour of `#[tool]`, checked with trybuild.
//!
//! The compile-fail and pass cases use separate `TestCases`: trybuild only runs `cargo check` for a set without
//! pass cases, which is faster, and a pass case is a full program that must link and run.
//!
//! Regenerate the expected output with `TRYBUILD=overwrite cargo test -p keel-ui-tests --test ui`, then read every
//! changed `.stderr`. Files under `fail/support/` are modules the cases include, not cases themselves.

#[test]
fn ui_fail() {
    let t = trybuild::TestCases::new();
    t.compile_fail("fail/*.rs");
}

#[test]
fn ui_pass() {
    let t = trybuild::TestCases::new();
    t.pass("pass/*.rs");
}
