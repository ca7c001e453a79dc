use keel_tools_core::{Registry, tool};

fn declare() {
    /// Says hello.
    #[tool(effect = "read", version = "1.0")]
    fn greet(name: String) -> String {
        format!("hello, {name}")
    }
}

fn main() {
    declare();
    let registry = Registry::from_inventory().expect("unique tool names");
    assert!(registry.get("greet").is_some(), "greet is registered");
}
