use keel_tools_core::tool;

/// Adds two numbers.
#[tool(effect = "read", version = "1.0")]
fn add((a, b): (i64, i64), scale: i64) -> i64 {
    (a + b) * scale
}

fn main() {}
