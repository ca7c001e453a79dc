use tool_core::tool;

/// An incident.
#[tool(effect = "read", version = "1.0")]
struct Incident {
    id: String,
}

fn main() {}
