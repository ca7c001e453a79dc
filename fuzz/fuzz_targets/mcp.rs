//! MCP message handling under libFuzzer: every input is one stdio session of an `McpServer` over the harness's
//! view, checked by `keel_fuzz_harness::check_mcp` (layout and invariants there). See `docs/FUZZING.md`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    keel_fuzz_harness::check_mcp(data);
});
