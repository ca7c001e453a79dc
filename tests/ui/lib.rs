//! The compile-time cases of `#[tool]`: `fail/` holds one mistake per file with its reviewed `.stderr` (trybuild,
//! `tests/ui.rs`); `pass/` every accepted form, each a test target of its own that must build and run cleanly.
