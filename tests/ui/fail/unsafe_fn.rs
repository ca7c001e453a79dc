use keel_tools_core::tool;

/// Counts incidents.
#[tool(effect = "read", version = "1.0")]
unsafe fn count_incidents() -> u32 {
    0
}

fn main() {}
