//! Integration and compile-fail tests of keel live in `tests/`.
