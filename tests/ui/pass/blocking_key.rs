use keel_tools_core::definition::Handler;
use keel_tools_core::{Registry, tool};

/// Adds two numbers.
#[tool(effect = "read", version = "1.0")]
fn add(a: i64, b: i64) -> i64 {
    a + b
}

/// Subtracts two numbers.
#[tool(effect = "read", version = "1.0", blocking = false)]
fn sub(a: i64, b: i64) -> i64 {
    a - b
}

/// Reads a file.
#[tool(effect = "read", version = "1.0", blocking = true)]
fn read_file(path: String) -> Result<String, std::io::Error> {
    std::fs::read_to_string(path)
}

fn main() {
    let registry = Registry::from_inventory().expect("unique tool names");
    let kind = |name: &str| format!("{:?}", registry.get(name).expect("registered").handler());
    // A plain fn runs inline unless it says `blocking = true`.
    assert_eq!(kind("add"), "Handler::Inline");
    assert_eq!(kind("sub"), "Handler::Inline");
    assert!(matches!(registry.get("read_file").unwrap().handler(), Handler::Blocking(_)));
}
