use keel_tools_core::tool;

const EFFECT: &str = "read";

/// Looks up an incident.
#[tool(effect = EFFECT, version = "1.0")]
fn lookup_incident(id: String) -> String {
    id
}

fn main() {}
