use keel_tools_core::tool;

/// Echoes a value.
#[tool(effect = "read", version = "1.0")]
fn echo<T: ToString>(value: T) -> String {
    value.to_string()
}

fn main() {}
