use serde::Deserialize;
use keel_tools_core::tool;

#[derive(Deserialize)]
struct Window {
    hours: u32,
}

/// Searches incidents.
#[tool(effect = "read", version = "1.0")]
fn search_incidents(query: String, window: Window) -> Vec<String> {
    let _ = window.hours;
    vec![query]
}

fn main() {}
