use keel_tools_core::tool;

/// Lists incident ids.
#[tool(effect = "read", version = "1.0")]
fn list_incidents() -> impl serde::Serialize {
    vec!["INC-1"]
}

fn main() {}
