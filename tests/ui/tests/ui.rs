//! The mistakes `#[tool]` refuses, checked with trybuild: each file of `fail/` must fail to compile with exactly its
//! reviewed `.stderr`. The accepted forms (`pass/`) are test targets of their own (see Cargo.toml), built with the
//! workspace: a program each, which must build and run cleanly.
//!
//! Regenerate the expected output with `TRYBUILD=overwrite cargo test -p keel-ui-tests --test ui`, then read every
//! changed `.stderr`. Files under `fail/support/` are modules the cases include, not cases themselves.

#[test]
fn ui_fail() {
    let t = trybuild::TestCases::new();
    t.compile_fail("fail/*.rs");
}
