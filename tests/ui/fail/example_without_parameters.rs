use keel_tools_core::tool;

/// Lists the services.
#[tool(effect = "read", version = "1.0", example = r#"{"all": true}"#)]
fn list_services() -> Vec<String> {
    Vec::new()
}

fn main() {}
