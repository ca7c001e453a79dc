//! The `keel` binary itself, run from the repository root the way CI runs it.

use std::path::Path;
use std::process::Command;

fn keel(args: &[&str]) -> (i32, String, String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root");
    let out = Command::new(env!("CARGO_BIN_EXE_keel")).args(args).current_dir(root).output().expect("keel runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn lock_check_passes_on_the_committed_lock() {
    let (code, out, err) = keel(&["lock", "--check", "--strict"]);
    assert_eq!(code, 0, "{out}{err}");
    assert_eq!(out.trim(), "keel.lock: 8 tool(s), the lock is current");
}

#[test]
fn list_format_ollama_is_ollama_schemas() {
    let (code, out, err) = keel(&["list", "--format", "ollama"]);
    assert_eq!(code, 0, "{err}");
    let printed: serde_json::Value = serde_json::from_str(&out).unwrap();
    let registry = tool_core::Registry::from_inventory().unwrap();
    // This test binary links the same tools as `keel`.
    assert_eq!(printed, serde_json::Value::Array(registry.ollama_schemas().to_vec()));
    assert_eq!(registry.len(), 8);
}

#[test]
fn check_has_no_errors_on_the_demo_tools() {
    let (code, out, _) = keel(&["check"]);
    assert_eq!(code, 0, "{out}");
    let (code, _, _) = keel(&["check", "--deny-warnings"]);
    assert_eq!(code, 0);
}

tool_core::link_tools!(examples);
