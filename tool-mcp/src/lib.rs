//! keel over MCP.
//!
//! * [`server`] (feature `server`, default): serve a [`ToolView`](keel_tools_core::ToolView) as an MCP server over stdio,
//!   and with the `http` feature over Streamable HTTP. `tools/list` is the view rendered for MCP, `tools/call` goes
//!   through the [`Executor`](keel_tools_core::Executor), so what clients see and what may run stay one thing.
//! * [`client`] (feature `client`): import a remote MCP server's tools into a registry as `<server>.<tool>`
//!   definitions, each with its own forwarder; arguments are validated locally before forwarding.
//! * [`names`]: the deterministic mapping from MCP tool names to keel names.
//! * [`render`]: between executor results and MCP `CallToolResult`s.
//!
//! Built on [`rmcp`], the official Rust SDK (re-exported), so transports and protocol revisions are the SDK's.
//!
//! | feature | default | what it brings |
//! |---|---|---|
//! | `server` | yes | [`server::McpServer`], stdio transport |
//! | `client` | no | [`client::RemoteServer`], child-process (stdio) transport |
//! | `http` | no | Streamable HTTP: [`server::McpServer::serve_http`] and [`http::McpHttpService`] (session cap, idle expiry, `TCP_NODELAY`, rate limits) with `server`, `RemoteServer::connect_http` and `RemoteServer::http` with `client` |
//! | `rustls` | yes | `https://` for the Streamable HTTP client: rustls with the `aws-lc-rs` provider given to each client (nothing installed process-wide), webpki-roots' Mozilla roots and `HttpConnect::add_root_certificate`; without it the client speaks plain `http://` only |
//! | `auth` | no | the Streamable HTTP server as an OAuth protected resource: [`http::auth`]'s bearer validation (JWTs against a JWKS, or token introspection), scopes per tool, the resource metadata; implies `http` and `server` |
//! | `oauth` | no | the client's OAuth login (`client::oauth`: metadata discovery, registration, PKCE, token refresh) for servers that ask for it; implies `http` and `client` |
//! | `otel` | no | W3C trace context over MCP: a forwarded call carries the current span as `_meta.traceparent`, and the server runs a call under the `traceparent` it was sent (with keel-tools-core's `otel`) |
//! | `elicitation` | no | rmcp's typed elicitation API on the session ([`server::current_request`]); `CallContext::elicit` needs none |
#![cfg_attr(docsrs, feature(doc_cfg))]
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub use rmcp;

#[cfg(feature = "auth")]
mod caller;
#[cfg(feature = "client")]
pub mod client;
#[cfg(feature = "server")]
mod compose;
#[cfg(all(feature = "http", feature = "server"))]
pub mod http;
#[cfg(feature = "server")]
mod input;
pub mod names;
#[cfg(feature = "otel")]
mod otel;
pub mod render;
#[cfg(feature = "server")]
pub mod server;
#[cfg(feature = "server")]
mod task;

#[cfg(all(feature = "client", feature = "http"))]
pub use client::HttpConnect;
#[cfg(feature = "client")]
pub use client::{Era, Forwarder, RemoteServer, RemoteTools};
#[cfg(all(feature = "http", feature = "server"))]
pub use http::{HealthReport, HttpConfig, McpHttpService};
#[cfg(feature = "server")]
pub use server::{ApprovalRules, McpRequest, McpServer, McpSession, current_request};
