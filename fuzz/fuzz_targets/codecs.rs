//! The provider codecs' parsers under libFuzzer: every input is one provider's message and call item, read by that
//! provider's codec of the harness's view and checked by `keel_fuzz_harness::check_codecs` (layout and invariants
//! there). See `docs/FUZZING.md`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    keel_fuzz_harness::check_codecs(data);
});
