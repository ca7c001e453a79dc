use keel_tools_core::tool;

/// Looks up an incident.
#[tool(effect = "read", version = "1.0")]
fn lookup_incident(_id: String, verbose: bool) -> bool {
    verbose
}

fn main() {}
