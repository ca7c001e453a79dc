//! The schema lock as a user's test uses it: `keel_tools_contract::lock::check` against a lock's text.

use keel_tools_contract::lock::{self, ChangeLevel, Lock, ToolStatus};
use keel_tools_core::definition::ToolDefinition;
use keel_tools_core::{Registry, ToolError};
use serde_json::{Value, json};

keel_tools_core::link_tools!(examples);

fn tool(name: &'static str, version: &'static str, input: Value, output: Option<Value>) -> ToolDefinition {
    let mut b = ToolDefinition::builder(name)
        .description("A tool.")
        .version(version)
        .input_schema(input)
        .handler(|_a, _c| async { Ok::<_, ToolError>(Value::Null) });
    if let Some(o) = output {
        b = b.output_schema(o);
    }
    b.build().unwrap()
}

fn registry(defs: Vec<ToolDefinition>) -> Registry {
    Registry::builder().without_inventory().tools(defs).build().unwrap()
}

fn args(props: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": props, "required": required, "additionalProperties": false})
}

fn status(report: &lock::LockReport, name: &str) -> ToolStatus {
    report.tools.iter().find(|t| t.name == name).unwrap().status.clone()
}

#[test]
fn the_committed_lock_holds_for_the_keel_binary_tools() {
    // The same tools the `keel` binary links (the examples); what a user's own test looks like.
    let registry = Registry::from_inventory().unwrap();
    lock::assert_lock(&registry, include_str!("../../keel.lock"));
    let report = lock::check(&registry, include_str!("../../keel.lock")).unwrap();
    assert!(report.is_current(), "{report}");
    // Regenerating it changes no byte.
    assert_eq!(Lock::of_registry(&registry).to_json(), include_str!("../../keel.lock"));
}

#[test]
fn a_changed_schema_fails_without_a_bump_and_passes_after_it() {
    let v1 = args(json!({"incident_id": {"type": "string"}, "limit": {"type": "integer"}}), &["incident_id"]);
    let locked = Lock::of_registry(&registry(vec![tool("lookup", "1.0", v1, None)])).to_json();

    // `limit` removed: breaking.
    let v2 = args(json!({"incident_id": {"type": "string"}}), &["incident_id"]);
    let report = lock::check(&registry(vec![tool("lookup", "1.0", v2.clone(), None)]), &locked).unwrap();
    assert!(!report.is_ok());
    let ToolStatus::NeedsBump { level, required, changes, .. } = status(&report, "lookup") else { panic!("{report}") };
    assert_eq!((level, required.as_str()), (ChangeLevel::Breaking, "2.0"));
    assert_eq!(changes[0].message, "argument `limit` was removed");
    let text = report.to_string();
    assert!(text.contains("`lookup`: its schemas changed in a breaking way, but its version is still 1.0"), "{text}");
    let panic = std::panic::catch_unwind(|| {
        lock::assert_lock(&registry(vec![tool("lookup", "1.0", v2.clone(), None)]), &locked)
    });
    assert!(panic.is_err(), "the test helper fails");

    // A minor bump is not enough for a breaking change; a major one is.
    let report = lock::check(&registry(vec![tool("lookup", "1.1", v2.clone(), None)]), &locked).unwrap();
    assert!(!report.is_ok(), "{report}");
    let report = lock::check(&registry(vec![tool("lookup", "2.0", v2, None)]), &locked).unwrap();
    assert!(report.is_ok(), "{report}");
    assert!(!report.is_current());
    assert!(matches!(status(&report, "lookup"), ToolStatus::Bumped { level: ChangeLevel::Breaking, .. }));
}

#[test]
fn additive_changes_need_a_minor_bump() {
    let v1 = args(json!({"incident_id": {"type": "string"}}), &["incident_id"]);
    let out1 = args(json!({"service": {"type": "string"}}), &["service"]);
    let locked = Lock::of_registry(&registry(vec![tool("lookup", "1.2", v1, Some(out1))])).to_json();
    let v2 = args(json!({"incident_id": {"type": "string"}, "verbose": {"type": "boolean"}}), &["incident_id"]);
    let out2 = args(json!({"service": {"type": "string"}, "owner": {"type": "string"}}), &["service"]);

    for (version, ok) in [("1.2", false), ("1.2.1", false), ("1.3", true), ("2.0", true)] {
        let report =
            lock::check(&registry(vec![tool("lookup", version, v2.clone(), Some(out2.clone()))]), &locked).unwrap();
        assert_eq!(report.is_ok(), ok, "{version}: {report}");
    }
    let report = lock::check(&registry(vec![tool("lookup", "1.2", v2, Some(out2))]), &locked).unwrap();
    let text = report.to_string();
    assert!(text.contains("bump it to 1.3 or later (an additive change needs a minor bump)"), "{text}");
    assert!(text.contains("- additive: new optional argument `verbose`"), "{text}");
    assert!(text.contains("- additive: new result field `owner`"), "{text}");
}

#[test]
fn a_description_change_needs_a_patch_bump() {
    let v1 = args(json!({"q": {"type": "string", "description": "Words."}}), &["q"]);
    let v2 = args(json!({"q": {"type": "string", "description": "Words to look for."}}), &["q"]);
    let locked = Lock::of_registry(&registry(vec![tool("find", "1.0", v1, None)])).to_json();
    let report = lock::check(&registry(vec![tool("find", "1.0", v2.clone(), None)]), &locked).unwrap();
    assert!(matches!(status(&report, "find"), ToolStatus::NeedsBump { level: ChangeLevel::Other, .. }), "{report}");
    let report = lock::check(&registry(vec![tool("find", "1.0.1", v2, None)]), &locked).unwrap();
    assert!(report.is_ok(), "{report}");
}

#[test]
fn tools_that_appear_or_vanish_fail_until_the_lock_is_updated() {
    let a = || tool("alpha", "1.0", args(json!({}), &[]), None);
    let b = || tool("beta", "1.0", args(json!({}), &[]), None);
    let locked = Lock::of_registry(&registry(vec![a()])).to_json();
    let report = lock::check(&registry(vec![a(), b()]), &locked).unwrap();
    assert!(!report.is_ok());
    assert!(matches!(status(&report, "beta"), ToolStatus::Added { .. }));
    assert!(report.to_string().contains("error: `beta` 1.0 is not in the lock"), "{report}");
    let report = lock::check(&registry(vec![]), &locked).unwrap();
    assert!(matches!(status(&report, "alpha"), ToolStatus::Removed { .. }));
    // Updated lock: both pass.
    let locked = Lock::of_registry(&registry(vec![a(), b()])).to_json();
    assert!(lock::check(&registry(vec![a(), b()]), &locked).unwrap().is_current());
}

#[test]
fn a_broken_lock_is_an_error_value() {
    let e = lock::check(&registry(vec![]), "{").unwrap_err();
    assert!(e.to_string().starts_with("the lock cannot be read: it is not a keel lock"), "{e}");
    assert!(std::error::Error::source(&e).is_some_and(|s| s.is::<serde_json::Error>()), "{e:?}");
}
