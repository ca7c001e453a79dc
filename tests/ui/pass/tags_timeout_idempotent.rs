use std::time::Duration;

use keel_tools_core::{Registry, tool};

/// Restarts a service.
#[tool(effect = "write", version = "1.0", idempotent = true, timeout_ms = 5000, tags = ["ops", "oncall"])]
fn restart_service(service: String) -> bool {
    !service.is_empty()
}

/// Reads a metric.
#[tool(effect = "read", version = "1.0", idempotent = false)]
fn sample_metric(metric: String) -> f64 {
    metric.len() as f64
}

fn main() {
    let registry = Registry::from_inventory().expect("unique tool names");
    let restart = registry.get("restart_service").expect("restart_service is registered");
    assert!(restart.idempotent());
    assert_eq!(restart.timeout(), Some(Duration::from_millis(5000)));
    assert_eq!(restart.tags().collect::<Vec<_>>(), ["ops", "oncall"]);
    let sample = registry.get("sample_metric").expect("sample_metric is registered");
    assert!(!sample.idempotent());
    assert_eq!(sample.timeout(), None);
    assert_eq!(sample.tags().len(), 0);
}
