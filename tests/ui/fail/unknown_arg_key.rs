use keel_tools_core::tool;

/// Looks up an incident.
#[tool(effect = "read", version = "1.0")]
fn lookup_incident(#[arg(desc = "The incident id")] id: String) -> String {
    id
}

fn main() {}
