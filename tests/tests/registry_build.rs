//! A registry's build checks every tool's parameters and schemas and reports every problem, each with the tool
//! and where it is defined, so that a broken tool never reaches its first call. (Its own test binary: these tools
//! make every registry built from this binary's inventory fail.)

use keel_tools_core::executor::ExecutorProblem;
use keel_tools_core::registry::RegistryProblem;
use keel_tools_core::{Args, Executor, Registry, tool};
use schemars::JsonSchema;
use serde::Deserialize;

/// What to search for.
#[derive(Deserialize, JsonSchema)]
struct Query {
    /// Words.
    text: String,
}

/// Takes the whole arguments and a named one besides.
#[tool(effect = "read", version = "1.0")]
fn whole_and_named(Args(query): Args<Query>, limit: u32) -> String {
    format!("{} {limit}", query.text)
}

/// Takes a list as the whole of its arguments, which are always an object.
#[tool(effect = "read", version = "1.0")]
fn whole_list(Args(items): Args<Vec<String>>) -> usize {
    items.len()
}

/// Fine.
#[tool(effect = "read", version = "1.0")]
fn fine(text: String) -> String {
    text
}

#[test]
fn every_broken_tool_is_named_when_the_registry_is_built() {
    let err = Registry::from_inventory().unwrap_err();
    let problems = err.problems();
    assert_eq!(problems.len(), 2, "{err}");
    match &problems[0] {
        RegistryProblem::Parameters { name, site, problem } => {
            assert_eq!(name, "whole_and_named");
            assert!(site.contains("registry_build.rs"), "{site}");
            assert!(problem.contains("parameter 1 takes the whole") && problem.contains("`limit`"), "{problem}");
        }
        other => panic!("{other:?}"),
    }
    match &problems[1] {
        RegistryProblem::Schema { name, problem, .. } => {
            assert_eq!(name, "whole_list");
            assert!(problem.contains("object"), "{problem}");
        }
        other => panic!("{other:?}"),
    }
    let text = err.to_string();
    assert!(text.contains("whole_and_named") && text.contains("whole_list") && !text.contains("`fine`"), "{text}");
}

#[test]
fn deferred_schema_checks_fail_the_executor_of_a_view_that_holds_the_tool() {
    // The parameters are still checked by the registry; the schemas are not.
    let err = Registry::builder().defer_schema_checks().build().unwrap_err();
    assert_eq!(err.problems().len(), 1, "{err}");
    assert!(matches!(&err.problems()[0], RegistryProblem::Parameters { name, .. } if name == "whole_and_named"));

    let registry = Registry::builder().defer_schema_checks().remove("whole_and_named").build().expect("deferred");
    assert_eq!(registry.names().collect::<Vec<_>>(), ["fine", "whole_list"]);
    // A view without the broken tool builds and runs; one with it fails its executor's build, naming it.
    let fine = registry.view().names(["fine"]).build().unwrap();
    Executor::new(fine).expect("a view of sound tools");
    let broken = registry.view().names(["fine", "whole_list"]).build().unwrap();
    let err = Executor::new(broken).unwrap_err();
    let [ExecutorProblem::Schema { tool, problem }] = err.problems() else { panic!("{err}") };
    assert_eq!(tool, "whole_list");
    assert!(problem.contains("object"), "{problem}");
}
