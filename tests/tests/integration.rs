//! Most of the integration tests, in one test binary (one link instead of one per file): the executor and its
//! properties, runs and approvals, the MCP server, its transports and clients, limits and hostile HTTP, schema
//! references, the workspace's layers. Each file is a module, so its tests are named `file::test`.
//!
//! A binary has one `#[tool]` inventory: the tools of these files have distinct names, and no test here reads the
//! whole inventory but description_lint's, which needs no tool in particular (none may be flagged). The files that
//! need an inventory of their own, a process of their own or an external peer are in the other binaries listed in
//! tests/Cargo.toml.

// Counts what each thread holds, for limits_before_allocation and mcp_hostile_http (per thread, so the other tests
// running beside them do not disturb their figures).
#[global_allocator]
static ALLOCATOR: keel_tests::alloc::Counting = keel_tests::alloc::Counting;

#[path = "approvals_pending.rs"]
mod approvals_pending;
#[path = "description_lint.rs"]
mod description_lint;
#[path = "doc_references.rs"]
mod doc_references;
#[path = "executor_calls.rs"]
mod executor_calls;
#[path = "executor_canonical.rs"]
mod executor_canonical;
#[path = "executor_observability.rs"]
mod executor_observability;
#[path = "executor_properties.rs"]
mod executor_properties;
#[path = "executor_timeouts.rs"]
mod executor_timeouts;
#[path = "layers.rs"]
mod layers;
#[path = "limits_before_allocation.rs"]
mod limits_before_allocation;
#[path = "mcp_call_binding.rs"]
mod mcp_call_binding;
#[path = "mcp_cancel.rs"]
mod mcp_cancel;
#[path = "mcp_compose.rs"]
mod mcp_compose;
#[path = "mcp_eras.rs"]
mod mcp_eras;
#[path = "mcp_hostile_http.rs"]
mod mcp_hostile_http;
#[path = "mcp_http.rs"]
mod mcp_http;
#[path = "mcp_server.rs"]
mod mcp_server;
#[path = "run_parallel.rs"]
mod run_parallel;
#[path = "run_repair.rs"]
mod run_repair;
#[path = "schema_refs.rs"]
mod schema_refs;
