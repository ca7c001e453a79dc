//! One compile-time source: tools declared in two modules of this crate and in two library crates end up in one
//! registry, and the model-visible list, the executor allowlist and the inventory agree.

use std::collections::BTreeSet;

use keel_tools_core::definition::{Effect, ToolDefinition};
use keel_tools_core::{Executor, Provider, Registry, ToolError, tool};

keel_tools_core::link_tools!(tools_alpha, tools_beta);

mod incidents {
    use keel_tools_core::{ToolError, tool};
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    /// Arguments of `lookup_incident`.
    #[derive(Debug, Deserialize, JsonSchema)]
    pub struct LookupArgs {
        /// The incident id, e.g. INC-001.
        pub incident_id: String,
    }

    /// One incident.
    #[derive(Debug, Serialize, JsonSchema)]
    pub struct Incident {
        /// The id.
        pub incident_id: String,
        /// The affected service.
        pub service: String,
    }

    /// Look up one incident by its id.
    #[tool(effect = "read", version = "1.0", tags = ["incident"])]
    pub async fn lookup_incident(args: LookupArgs) -> Result<Incident, ToolError> {
        Ok(Incident { incident_id: args.incident_id, service: "auth-api".into() })
    }
}

mod tickets {
    use keel_tools_core::tool;

    /// Open a ticket for an incident.
    #[tool(effect = "write", version = "1.2", name = "ticket.create", tags = ["incident", "ticket"])]
    pub fn create_ticket(
        #[arg(description = "The incident the ticket is about")] incident_id: String,
        title: String,
    ) -> String {
        format!("{incident_id}: {title}")
    }
}

/// Deletes everything. Exists to be excluded from views.
#[tool(effect = "destructive", version = "0.1")]
fn wipe_all() -> Result<(), ToolError> {
    Ok(())
}

fn inventory_names() -> BTreeSet<String> {
    Registry::from_inventory().unwrap().names().map(str::to_owned).collect()
}

#[test]
fn tools_from_two_modules_and_two_crates_are_registered() {
    let names = inventory_names();
    for expected in
        ["lookup_incident", "ticket.create", "wipe_all", "service_status", "alpha.page_oncall", "beta.word_count"]
    {
        assert!(names.contains(expected), "{expected} missing from {names:?}");
    }
}

#[test]
fn model_list_equals_allowlist_equals_inventory() {
    let registry = Registry::from_inventory().unwrap();
    let view = registry.all();
    let ollama: BTreeSet<String> =
        view.ollama_schemas().iter().map(|t| t["function"]["name"].as_str().unwrap().to_owned()).collect();
    let executor = Executor::new(view.clone()).unwrap();
    let allow: BTreeSet<String> = executor.view().names().map(str::to_owned).collect();
    assert_eq!(ollama, allow);
    assert_eq!(allow, inventory_names());

    let d = view.describe_tools();
    let model: BTreeSet<&str> = d.model_names().into_iter().collect();
    let exec: BTreeSet<&str> = d.executor_names().into_iter().collect();
    assert_eq!(model, exec);
}

#[test]
fn removing_a_tool_removes_it_from_both_views() {
    let full = Registry::from_inventory().unwrap();
    let reduced = Registry::builder().remove("wipe_all").build().unwrap();
    assert_eq!(reduced.len(), full.len() - 1);
    let d = reduced.all().describe_tools();
    assert!(!d.model_names().contains(&"wipe_all"));
    assert!(!d.executor_names().contains(&"wipe_all"));
    assert_eq!(d.model_names(), d.executor_names());

    // The same holds for a view chosen by tags.
    let view = full.view().tag("incident").build().unwrap();
    let d = view.describe_tools();
    assert_eq!(d.model_names(), vec!["lookup_incident", "ticket.create"]);
    assert_eq!(d.model_names(), d.executor_names());
}

#[test]
fn views_by_names_tags_and_effect() {
    let registry = Registry::from_inventory().unwrap();
    let reads = registry.view().effects([Effect::Read]).build().unwrap();
    assert!(reads.iter().all(|d| d.effect() == Effect::Read));
    assert!(reads.contains("lookup_incident") && !reads.contains("wipe_all"));

    let chosen = registry.view().names(["ticket.create", "lookup_incident"]).build().unwrap();
    assert_eq!(chosen.names().collect::<Vec<_>>(), ["lookup_incident", "ticket.create"]);

    let err = registry.view().names(["lookup_incident", "no_such_tool"]).build().unwrap_err();
    assert_eq!(err.0, vec!["no_such_tool".to_owned()]);

    let combined = registry.view().tag("incident").effects([Effect::Write]).build().unwrap();
    assert_eq!(combined.names().collect::<Vec<_>>(), ["ticket.create"]);
}

#[test]
fn definitions_carry_the_declared_contract() {
    let registry = Registry::from_inventory().unwrap();
    let t = registry.get("ticket.create").unwrap();
    assert_eq!(t.description(), "Open a ticket for an incident.");
    assert_eq!(t.version(), "1.2");
    assert_eq!(t.effect(), Effect::Write);
    assert!(!t.idempotent(), "write tools default to non-idempotent");
    assert_eq!(t.tags().collect::<Vec<_>>(), ["incident", "ticket"]);
    let schema = t.input_schema();
    assert_eq!(schema["properties"]["incident_id"]["description"], "The incident the ticket is about");
    assert_eq!(schema["additionalProperties"], false);
    let origin = t.origin().to_string();
    assert!(origin.contains("create_ticket") && origin.contains("registry_inventory::tickets"), "{origin}");

    let l = registry.get("lookup_incident").unwrap();
    assert!(l.idempotent(), "read tools default to idempotent");
    assert_eq!(l.input_schema()["properties"]["incident_id"]["description"], "The incident id, e.g. INC-001.");
    assert_eq!(l.output_schema().unwrap()["properties"]["service"]["type"], "string");

    let w = registry.get("wipe_all").unwrap();
    assert_eq!(w.input_schema()["properties"], serde_json::json!({}));
}

#[test]
fn dotted_names_round_trip_through_wire_names() {
    let registry = Registry::from_inventory().unwrap();
    let t = registry.get("ticket.create").unwrap();
    assert_eq!(t.wire_name(), "ticket-create");
    assert_eq!(registry.get_by_wire_name("ticket-create").unwrap().name(), "ticket.create");
    assert_eq!(registry.all().get_by_wire_name("alpha-page_oncall").unwrap().name(), "alpha.page_oncall");
    let openai = registry.all().schemas(Provider::OpenAiChat);
    let entry = openai.iter().find(|e| e["function"]["name"] == "ticket-create").expect("wire name in openai list");
    let back = keel_tools_core::name::from_wire(entry["function"]["name"].as_str().unwrap()).unwrap();
    assert_eq!(back, "ticket.create");
    for e in openai {
        let n = e["function"]["name"].as_str().unwrap();
        assert!(n.len() <= 64 && n.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'), "{n}");
    }
}

fn dynamic(name: &'static str) -> ToolDefinition {
    ToolDefinition::builder(name)
        .description("A run-time tool.")
        .source("test")
        .handler(|_args, _ctx| async { Ok(serde_json::json!("dynamic")) })
        .build()
        .unwrap()
}

#[test]
fn duplicates_fail_unless_replaced_explicitly() {
    let err = Registry::builder().tool(dynamic("lookup_incident")).build().unwrap_err();
    let text = err.to_string();
    assert!(text.contains("`lookup_incident` is defined 2 times"), "{text}");
    assert!(text.contains("fn lookup_incident at") && text.contains("dynamic definition from test"), "{text}");

    let replaced = Registry::builder().replace(dynamic("lookup_incident")).build().unwrap();
    assert!(matches!(
        replaced.get("lookup_incident").unwrap().origin(),
        keel_tools_core::definition::Origin::Dynamic { .. }
    ));

    let err = Registry::builder().replace(dynamic("not_there")).build().unwrap_err();
    assert!(err.to_string().contains("no tool of that name exists"), "{err}");
}

#[test]
fn registry_is_send_sync_and_cheap_to_share() {
    fn assert_send_sync<T: Send + Sync + Clone>() {}
    assert_send_sync::<Registry>();
    assert_send_sync::<keel_tools_core::ToolView>();
    assert_send_sync::<Executor>();
}
