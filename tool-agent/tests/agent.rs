//! The model clients' and the agent loop's integration tests, in one test binary (one link instead of one per
//! file), each file a module (`file::test`): what a hostile or broken model server can make of the clients, HTTPS
//! with feature `rustls` (on by default), and with features `otel` and `stub` the OpenTelemetry spans.
//!
//! `cargo test -p keel-tools-agent --test agent`; with the spans: `cargo test -p keel-tools-agent --features
//! otel,stub --test agent`.

use keel_tools_agent::{ChatModel, Message, ModelError, Turn};
use keel_tools_core::{Registry, ToolView};

#[cfg(all(feature = "otel", feature = "stub"))]
#[path = "agent/otel.rs"]
mod otel;
#[path = "agent/server_faults.rs"]
mod server_faults;
#[cfg(feature = "rustls")]
#[path = "agent/tls.rs"]
mod tls;

/// Every tool of this binary.
fn view() -> ToolView {
    Registry::builder().build().unwrap().view().build().unwrap()
}

/// Asks `model` one turn ("hello", with [`view`]'s tools) and returns its answer's text.
async fn ask(model: &impl ChatModel) -> Result<String, ModelError> {
    let tools = view();
    let messages = [Message::user("hello")];
    Ok(model.chat(Turn::new(&messages, &tools)).await?.content)
}
