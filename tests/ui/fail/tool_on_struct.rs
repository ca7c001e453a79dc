use keel_tools_core::tool;

/// An incident.
#[tool(effect = "read", version = "1.0")]
struct Incident {
    id: String,
}

fn main() {}
