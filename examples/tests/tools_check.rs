//! The example tools under keel-tools-testkit's property check, as a user checks their own: arguments generated
//! from each tool's schema never end in `invalid_tool_output` or `tool_internal_error`, and arguments that break the
//! schema end in `invalid_arguments` without running the handler.

use keel_tools_core::Registry;
use keel_tools_testkit::ToolCheck;

#[test]
fn every_example_tool_passes_the_property_check() {
    let registry = Registry::from_inventory().expect("the example tools register");
    // The card tools read a `State<CardStore>`: the check's executor gets the demo store, as `keel-demo` does.
    let report = ToolCheck::new(&registry).executor(|b| b.state(examples::cards::store(true))).assert();
    assert!(report.tools().len() >= 8, "every example tool was checked: {report}");
}
