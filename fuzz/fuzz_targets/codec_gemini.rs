//! The Gemini codec's parser alone under libFuzzer: `keel_fuzz_harness::check_codec` with
//! `Provider::Gemini` (layout and invariants in `fuzz/harness/src/codecs.rs`). See `docs/FUZZING.md`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use keel_tools_core::Provider;

fuzz_target!(|data: &[u8]| {
    keel_fuzz_harness::check_codec(Provider::Gemini, data);
});
