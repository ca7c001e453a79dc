use keel_tools_core::tool;

#[tool(effect = "read", version = "1.0", description = "")]
fn lookup_incident(id: String) -> String {
    id
}

fn main() {}
