//! The MCP server's and client's integration tests, in one test binary (one compile and link of rmcp, hyper and
//! reqwest instead of one per file). Each file is a module, so its tests are named `file::test`, and each module is
//! compiled only with the features it needs: `cargo test -p keel-tools-mcp --features auth --test mcp` runs what
//! `auth` enables, the workspace's build (every feature but `otel`) runs all of them.
//!
//! A binary has one `#[tool]` inventory: the tools of these files have distinct names, and every server here is
//! built from a view of the tools it names, never from the whole inventory. Each test serves on a port of its own
//! (`127.0.0.1:0`) and sets no environment variable. `tests/otel.rs`, which needs the `otel` feature, is a binary of
//! its own.

#[cfg(all(feature = "server", feature = "http"))]
mod common;

#[cfg(all(feature = "client", feature = "server"))]
mod approval_elicitation;
#[cfg(feature = "auth")]
mod auth;
#[cfg(all(feature = "server", feature = "http"))]
mod deferral;
#[cfg(all(feature = "server", feature = "http"))]
mod exactly_once;
#[cfg(feature = "auth")]
mod introspection;
#[cfg(feature = "auth")]
mod principal_view;
#[cfg(feature = "auth")]
mod rate_limit;
#[cfg(feature = "auth")]
mod task_owners;
#[cfg(all(feature = "client", feature = "server", feature = "http", feature = "rustls"))]
mod tls;
