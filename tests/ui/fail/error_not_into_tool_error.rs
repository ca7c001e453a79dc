use keel_tools_core::tool;

#[derive(Debug)]
struct NotFound;

/// Looks up an incident.
#[tool(effect = "read", version = "1.0")]
fn lookup_incident(id: String) -> Result<String, NotFound> {
    if id.is_empty() { Err(NotFound) } else { Ok(id) }
}

fn main() {}
