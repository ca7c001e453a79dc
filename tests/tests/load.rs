//! The load tests, whose figures are the whole process's (peak RSS, a global `tracing` subscriber): each runs in a
//! process of its own, one at a time (`keel_tests::in_own_process`). Each file is a module, its tests named
//! `file::test`.

#[path = "executor_load.rs"]
mod executor_load;
#[path = "mcp_http_load.rs"]
mod mcp_http_load;
#[path = "mcp_http_sessions.rs"]
mod mcp_http_sessions;
