use keel_tools_core::tool;

/// Pings a host.
#[tool(effect = "read", version = "1.0")]
fn ping(host: String) -> String {
    host
}

fn register() {
    /// Pings a host, declared inside a fn body.
    #[tool(effect = "read", version = "1.0")]
    fn ping(host: String) -> String {
        host
    }
}

fn main() {
    register();
}
