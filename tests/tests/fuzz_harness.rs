//! The tests that call the fuzz harness's tools (`keel-fuzz-harness`) without a tenant: the MCP seeds of the fuzz
//! corpus, and every provider's round trip of the tools of `tools-rich` (arguments from the harness's generator).
//! The harness counts such calls as untracked, and executor_properties (in the integration binary) checks that the
//! property tests made none, so these run in a process of their own. Each file is a module, its tests named
//! `file::test`.

#[path = "mcp_fuzz_seeds.rs"]
mod mcp_fuzz_seeds;
#[path = "provider_roundtrip.rs"]
mod provider_roundtrip;
