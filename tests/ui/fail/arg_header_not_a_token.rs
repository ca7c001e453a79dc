use keel_tools_core::tool;

/// Lists the incidents of one region.
#[tool(effect = "read", version = "1.0")]
fn list_incidents(#[arg(header = "Region Name")] region: String) -> String {
    region
}

fn main() {}
