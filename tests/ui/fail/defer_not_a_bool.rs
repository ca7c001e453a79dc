use keel_tools_core::tool;

/// Shows the whole runbook of a service.
#[tool(effect = "read", version = "1.0", defer = "yes")]
fn show_runbook(service: String) -> String {
    service
}

fn main() {}
