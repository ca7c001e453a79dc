//! Two linked library crates declare the same tool name: the macro cannot see across crates, so building the
//! registry fails with an error that names every definition site.

use keel_tools_core::Registry;
use keel_tools_core::registry::RegistryProblem;

keel_tools_core::link_tools!(tools_alpha, tools_dup);

#[test]
fn registry_build_names_both_definition_sites() {
    let err = Registry::from_inventory().unwrap_err();
    let dup = err
        .problems()
        .iter()
        .find_map(|p| match p {
            RegistryProblem::Duplicate { name, sites } if name == "service_status" => Some(sites.clone()),
            _ => None,
        })
        .expect("a duplicate problem for service_status");
    assert_eq!(dup.len(), 2, "{dup:?}");
    assert!(dup.iter().any(|s| s.contains("fn service_status") && s.contains("tools_alpha")), "{dup:?}");
    assert!(dup.iter().any(|s| s.contains("fn status_again") && s.contains("tools_dup")), "{dup:?}");
    let text = err.to_string();
    assert!(text.contains("tool name `service_status` is defined 2 times"), "{text}");
    assert!(text.contains(".replace("), "the message says how to override on purpose: {text}");
}

#[test]
fn an_explicit_override_settles_the_conflict() {
    let winner = keel_tools_core::definition::ToolDefinition::builder("service_status")
        .description("The one status tool this binary keeps.")
        .source("binary override")
        .handler(|_args, _ctx| async { Ok(serde_json::json!("up")) })
        .build()
        .unwrap();
    let registry = Registry::builder().replace(winner).build().expect("the override resolves the duplicate");
    let origin = registry.get("service_status").unwrap().origin().to_string();
    assert_eq!(origin, "dynamic definition from binary override");
    assert!(registry.get("alpha.page_oncall").is_some(), "other tools of the crates stay");
}
