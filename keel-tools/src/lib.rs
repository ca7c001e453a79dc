//! keel declares LLM tools at compile time. This crate is what applications depend on: it re-exports
//! [`keel-tools-core`](keel_tools_core) at its root, and the other keel crates as modules behind features.
//!
//! A `#[tool]` fn is the single source of a tool's contract: its name, description, version, effect, argument
//! schema and result schema. The same [`Registry`] produces what the model sees ([`ToolView::ollama_schemas`] and
//! each provider's [`Codec`]) and what the [`Executor`] allows, so the two cannot drift.
//!
//! ```
//! use keel_tools::{tool, Executor, Registry, ToolCall};
//!
//! /// Adds two integers.
//! #[tool(effect = "read", version = "1.0")]
//! fn add(a: i64, b: i64) -> i64 {
//!     a + b
//! }
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let registry = Registry::from_inventory().unwrap();
//! let executor = Executor::new(registry.view().names(["add"]).build().unwrap()).unwrap();
//! let ok = executor.call(ToolCall::new("c1", "add", serde_json::json!({"a": 1, "b": 2}))).await;
//! assert_eq!(ok.data(), Some(&serde_json::json!(3)));
//! let bad = executor.call(ToolCall::new("c2", "add", serde_json::json!({"a": "1", "b": 2}))).await;
//! assert_eq!(bad.code(), Some("invalid_arguments"));
//! # });
//! ```
//!
//! # Crate features
//!
//! | feature | default | what it brings |
//! |---|---|---|
//! | `macros` | yes | the `#[tool]` attribute |
//! | `mcp` | no | [`mcp`]: serve tools as an MCP server over stdio and Streamable HTTP |
//! | `mcp-client` | no | [`mcp`] also imports a remote MCP server's tools, over stdio or HTTP(S) |
//! | `mcp-auth` | no | `mcp::http::auth`: the HTTP server as an OAuth 2.1 protected resource |
//! | `mcp-oauth` | no | `mcp::client::oauth`: forwarders that log in to an OAuth 2.1 protected MCP server |
//! | `mcp-elicitation` | no | tools served over MCP may ask the person for input (elicitation) |
//! | `agent` | no | [`agent`]: the agent loop against a model server (HTTPS included) |
//! | `catalog` | no | [`catalog`]: tools as rows of a SQLite catalogue |
//! | `catalog-postgres` | no | `catalog::postgres`: the catalogue in PostgreSQL, shared by replicas |
//! | `contract` | no | [`contract`]: the schema lock and the provider lint |
//! | `state` | no | [`state`]: pending approvals, exactly-once effect records and tasks in SQLite, shared by replicas |
//! | `state-postgres` | no | the [`state`] stores in PostgreSQL too |
//! | `otel` | no | OpenTelemetry spans per call |
//!
//! `#[tool]` works through this crate as through `keel-tools-core`: the generated code names whichever of the
//! two the calling crate depends on.
#![forbid(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

// Lets `::keel_tools::...` paths in generated code resolve inside this crate's own doc tests.
extern crate self as keel_tools;

#[doc(inline)]
pub use keel_tools_core::*;

/// MCP: serve a tool view as an MCP server, and import a remote server's tools (keel-tools-mcp).
#[cfg(feature = "mcp")]
#[doc(inline)]
pub use keel_tools_mcp as mcp;

/// The agent loop against a model server (keel-tools-agent).
#[cfg(feature = "agent")]
#[doc(inline)]
pub use keel_tools_agent as agent;

/// Tools as rows of a catalogue (keel-tools-catalog).
#[cfg(feature = "catalog")]
#[doc(inline)]
pub use keel_tools_catalog as catalog;

/// The schema lock and the provider lint (keel-tools-contract).
#[cfg(feature = "contract")]
#[doc(inline)]
pub use keel_tools_contract as contract;

/// Call state shared by replicas: pending approvals, exactly-once effect records and tasks (keel-tools-state).
#[cfg(feature = "state")]
#[doc(inline)]
pub use keel_tools_state as state;
