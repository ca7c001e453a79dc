use keel_tools_core::{Registry, tool};

/// Acknowledges an alert.
#[tool(effect = "write", version = "1.0")]
fn ack_alert(alert_id: String) {
    let _ = alert_id;
}

fn main() {
    let registry = Registry::from_inventory().expect("unique tool names");
    assert!(registry.get("ack_alert").is_some(), "ack_alert is registered");
}
