//! The runtime's integration tests, in one test binary (one link instead of one per file), each file a module
//! (`file::test`): deferred tools, input examples, idempotency keys' scope, a pending call resolved once, and with
//! feature `otel` the OpenTelemetry spans.
//!
//! `cargo test -p keel-tools-core --test runtime`; with the spans: `cargo test -p keel-tools-core --features otel
//! --test runtime`.
//!
//! A binary has one `#[tool]` inventory: `examples::misdated_window` has an example its schema refuses, so every
//! registry built in full from this binary's inventory fails (as `examples` checks); the other modules build theirs
//! without the inventory, or with the schema checks left to the executor of the view they choose.

#[path = "runtime/deferral.rs"]
mod deferral;
#[path = "runtime/examples.rs"]
mod examples;
#[path = "runtime/key_scope.rs"]
mod key_scope;
#[cfg(feature = "otel")]
#[path = "runtime/otel.rs"]
mod otel;
#[path = "runtime/pending_replay.rs"]
mod pending_replay;
