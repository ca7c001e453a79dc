//! Errors as they are written in Rust: a boxed error, `anyhow`, any `std::error::Error`.
use std::error::Error;

use keel_tools_core::{Executor, Registry, ToolCall, tool};

/// Parses a port.
#[tool(effect = "read", version = "1.0")]
fn parse_port(text: String) -> Result<u16, Box<dyn Error + Send + Sync>> {
    Ok(text.parse::<u16>()?)
}

/// Reads a config value.
#[tool(effect = "read", version = "1.0")]
fn read_config(key: String) -> anyhow::Result<String> {
    use anyhow::Context as _;
    let value: Option<String> = None;
    value.with_context(|| format!("no config key {key:?}"))
}

/// Fails with an io error.
#[tool(effect = "read", version = "1.0")]
async fn touch_file(path: String) -> Result<(), std::io::Error> {
    Err(std::io::Error::other(format!("read-only: {path}")))
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let registry = Registry::from_inventory().expect("unique tool names");
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let log = seen.clone();
    let executor = Executor::builder(registry.view().build().unwrap())
        .on_internal_failure(move |f| log.lock().unwrap().push(f.chain().join(": ")))
        .build()
        .unwrap();
    let ok = executor.call(ToolCall::new("c1", "parse_port", serde_json::json!({"text": "8080"}))).await;
    assert_eq!(ok.data(), Some(&serde_json::json!(8080)), "{ok:?}");
    for (name, args) in [
        ("parse_port", serde_json::json!({"text": "eighty"})),
        ("read_config", serde_json::json!({"key": "db.url"})),
        ("touch_file", serde_json::json!({"path": "/etc/x"})),
    ] {
        let r = executor.call(ToolCall::new("c2", name, args)).await;
        assert_eq!(r.code(), Some("tool_internal_error"), "{name}: {r:?}");
    }
    let seen = seen.lock().unwrap();
    assert_eq!(seen[0], "invalid digit found in string");
    assert_eq!(seen[1], "no config key \"db.url\"");
    assert_eq!(seen[2], "read-only: /etc/x");
}
