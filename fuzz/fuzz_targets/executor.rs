//! The executor's entry point under libFuzzer: every input is one call, checked against every invariant of
//! the `keel-fuzz-harness` crate (`fuzz/harness/`; the same checks the property tests run in CI). See
//! `docs/FUZZING.md`.
//!
//! Input layout: the first byte selects the mode (`& 3`: 0 raw name and argument text split at the first NUL,
//! 1 a raw provider message, 2 a valid call generated from a tool's own schema, 3 such a call mutated) and whether
//! the tenant is denied (`& 0x80`); the remaining bytes are the text, the message, or the generator's choices.

#![no_main]

use keel_fuzz_harness::Harness;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    Harness::get().fuzz_one(data);
});
