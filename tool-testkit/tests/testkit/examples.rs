//! The one-line check over keel's own example tools, and a tool that breaks its own result schema, which the check
//! must catch.

use keel_tools_core::{Registry, ToolView, tool};
use keel_tools_testkit::{CheckError, Problem, Property, ToolCheck, try_check_tools};
use schemars::JsonSchema;
use serde::Serialize;
use serde_json::json;

/// The tools of the `examples` crate.
fn example_tools() -> ToolView {
    let registry = Registry::from_inventory().expect("the tools register");
    let tools = registry
        .all()
        .iter()
        .filter(|d| d.origin().rust_path().is_some_and(|p| p.starts_with("examples::")))
        .cloned()
        .collect();
    ToolView::new(tools)
}

#[test]
fn every_example_tool_passes() {
    let view = example_tools();
    assert!(view.len() >= 8, "the example tools are linked: {:?}", view.names().collect::<Vec<_>>());
    let report = ToolCheck::new(&view).executor(|b| b.state(examples::cards::store(true))).assert();
    assert_eq!(report.tools().len(), view.len());
    assert!(report.is_ok());
    for tool in report.tools() {
        assert!(
            matches!(tool.valid_arguments(), keel_tools_testkit::Outcome::Passed(_)),
            "{}: {:?}",
            tool.name(),
            tool.valid_arguments()
        );
        assert!(
            matches!(tool.invalid_arguments(), keel_tools_testkit::Outcome::Passed(_)),
            "{}: {:?}",
            tool.name(),
            tool.invalid_arguments()
        );
    }
}

#[test]
fn the_card_tools_without_their_state_are_a_setup_error() {
    let view = example_tools();
    let e = try_check_tools(&view).unwrap_err();
    assert!(matches!(e, CheckError::Executor(_)), "{e}");
    assert!(e.to_string().contains("CardStore"), "{e}");
}

/// A count that is at most 10.
#[derive(Serialize, JsonSchema)]
struct Count {
    /// At most 10.
    #[schemars(range(max = 10))]
    count: u32,
}

/// Counts, and always answers 11: its result breaks its own result schema.
#[tool(effect = "read", version = "1.0")]
fn broken_count(n: u8) -> Count {
    let _ = n;
    Count { count: 11 }
}

fn broken_view() -> ToolView {
    Registry::from_inventory().unwrap().view().names(["broken_count"]).build().unwrap()
}

#[test]
fn a_tool_that_breaks_its_result_schema_fails_with_a_seed() {
    let e = ToolCheck::new(&broken_view()).seed(42).cases(16).run().unwrap_err();
    let report = e.report().expect("tools were checked");
    let failures: Vec<_> = report.failures().collect();
    assert_eq!(failures.len(), 1, "{e}");
    let failure = failures[0];
    assert_eq!(failure.tool(), "broken_count");
    assert_eq!(failure.property(), Property::ValidArguments);
    assert_eq!(failure.problem(), Problem::InvalidOutput);
    assert_eq!(failure.code(), Some("invalid_tool_output"));
    assert_eq!(failure.seed(), 42);
    // Shrunk to the smallest arguments.
    assert_eq!(failure.arguments(), &json!({"n": 0}));
    // The hook heard the violation.
    assert!(failure.internal().iter().any(|l| l.contains("invalid_output")), "{:?}", failure.internal());
    let text = e.to_string();
    for expected in ["broken_count", "invalid_tool_output", "{\"n\":0}", "KEEL_TESTKIT_SEED=42"] {
        assert!(text.contains(expected), "{expected:?} in:\n{text}");
    }
    // Invalid arguments are still refused before the handler.
    assert!(matches!(report.tools()[0].invalid_arguments(), keel_tools_testkit::Outcome::Passed(_)));
}

#[test]
fn the_one_line_check_panics_on_it() {
    let panic = std::panic::catch_unwind(|| keel_tools_testkit::check_tools(&broken_view())).unwrap_err();
    let text = panic.downcast_ref::<String>().expect("a message");
    assert!(text.contains("invalid_tool_output") && text.contains("KEEL_TESTKIT_SEED="), "{text}");
}
