//! Input examples (`#[tool(example = "...")]`) and deferred tools (`#[tool(defer)]`): what a definition carries,
//! how each provider is shown the examples, and the registry's build refusing an example its tool's argument schema
//! does not accept. (`misdated_window` makes every registry built in full from this test binary's inventory fail: the
//! other modules of the binary build none.)

use keel_tools_core::codecs::LossKind;
use keel_tools_core::definition::ToolDefinition;
use keel_tools_core::registry::RegistryProblem;
use keel_tools_core::{CallContext, Provider, Registry, tool};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

/// Creates a ticket for an incident.
#[tool(
    name = "ticket.create",
    effect = "write",
    version = "1.0",
    example = r#"{"incident_id": "INC-001", "title": "Logins fail"}"#,
    example = r#"{"incident_id": "INC-002", "title": "Checkout is slow", "priority": 2}"#
)]
fn create_ticket(incident_id: String, title: String, priority: Option<u8>, ctx: CallContext) -> String {
    let _ = ctx;
    format!("{incident_id}: {title} (p{})", priority.unwrap_or(3))
}

/// Shows the whole runbook of a service.
#[tool(name = "runbook.show", effect = "read", version = "1.0", defer)]
fn show_runbook(service: String) -> String {
    service
}

/// Lists the services.
#[tool(name = "services.list", effect = "read", version = "1.0", defer = false)]
fn list_services() -> Vec<String> {
    Vec::new()
}

/// A window of time.
#[derive(Deserialize, JsonSchema)]
struct Window {
    /// Hours back from now.
    hours: u32,
}

/// What to report on.
#[derive(Deserialize, JsonSchema)]
struct ReportArgs {
    /// The service.
    service: String,
    /// Which hours.
    window: Window,
}

/// Reports on a service. Its example gives the hours as text, which only the argument schema can tell.
#[tool(
    name = "report.misdated",
    effect = "read",
    version = "1.0",
    example = r#"{"service": "auth-api", "window": {"hours": 24}}"#,
    example = r#"{"service": "auth-api", "window": {"hours": "twelve"}}"#
)]
fn misdated_window(args: ReportArgs) -> String {
    format!("{} over {}h", args.service, args.window.hours)
}

/// The registry without the broken tool.
fn registry() -> Registry {
    Registry::builder().remove("report.misdated").build().expect("every other tool is fine")
}

#[test]
fn a_tool_carries_its_examples_in_order_and_its_deferral() {
    let registry = registry();
    let ticket = registry.get("ticket.create").expect("registered");
    assert_eq!(
        ticket.examples(),
        [
            json!({"incident_id": "INC-001", "title": "Logins fail"}),
            json!({"incident_id": "INC-002", "title": "Checkout is slow", "priority": 2}),
        ]
    );
    // Keys stay in the order written.
    let keys: Vec<&String> = ticket.examples()[1].as_object().map(|o| o.keys().collect()).unwrap_or_default();
    assert_eq!(keys, ["incident_id", "title", "priority"]);
    assert!(!ticket.deferred());
    assert!(registry.get("runbook.show").is_some_and(|d| d.deferred()));
    assert!(registry.get("runbook.show").is_some_and(|d| d.examples().is_empty()));
    assert!(registry.get("services.list").is_some_and(|d| !d.deferred()));
}

#[test]
fn anthropic_takes_the_examples_natively_and_the_others_read_them_in_the_description() {
    let registry = registry();
    let ticket = registry.get("ticket.create").expect("registered");
    let anthropic = ticket.render(Provider::Anthropic);
    assert_eq!(anthropic["input_examples"], json!(ticket.examples()));
    assert_eq!(anthropic["description"], "Creates a ticket for an incident.");
    assert!(ticket.losses(Provider::Anthropic).iter().all(|l| !l.message.contains("example")));

    let folded = "Creates a ticket for an incident.\n\nExample arguments:\n\
                  {\"incident_id\":\"INC-001\",\"title\":\"Logins fail\"}\n\
                  {\"incident_id\":\"INC-002\",\"title\":\"Checkout is slow\",\"priority\":2}";
    for (provider, at) in [
        (Provider::OpenAiChat, "/function/description"),
        (Provider::OpenAiResponses, "/description"),
        (Provider::Gemini, "/description"),
        (Provider::Ollama, "/function/description"),
        (Provider::Mcp, "/description"),
    ] {
        let entry = ticket.render(provider);
        assert_eq!(entry.pointer(at).and_then(Value::as_str), Some(folded), "{}: {entry}", provider.as_str());
        assert!(!entry.to_string().contains("input_examples"), "{}: {entry}", provider.as_str());
        let losses: Vec<_> =
            ticket.losses(provider).into_iter().filter(|l| l.message.contains("Example arguments")).collect();
        assert_eq!(losses.len(), 1, "{}: {losses:?}", provider.as_str());
        assert_eq!(losses[0].kind, LossKind::Adapted);
        assert_eq!(losses[0].at, at);
        assert!(losses[0].message.contains("2 examples are"), "{}", losses[0].message);
    }
}

#[test]
fn a_tool_without_examples_shows_no_trace_of_them() {
    let registry = registry();
    let runbook = registry.get("runbook.show").expect("registered");
    for provider in Provider::ALL {
        let entry = runbook.render(provider).to_string();
        assert!(!entry.contains("Example") && !entry.contains("input_examples"), "{}: {entry}", provider.as_str());
        assert!(runbook.losses(provider).iter().all(|l| !l.message.contains("example")), "{}", provider.as_str());
    }
    assert_eq!(runbook.render(Provider::Anthropic)["description"], "Shows the whole runbook of a service.");
}

#[test]
fn an_example_the_schema_refuses_fails_the_build_with_the_tool_the_index_and_the_place() {
    let err = Registry::from_inventory().expect_err("report.misdated has a bad example");
    let [problem] = err.problems() else { panic!("one problem expected: {err}") };
    match problem {
        RegistryProblem::Example { name, site, index, pointer, message } => {
            assert_eq!(name, "report.misdated");
            assert!(site.contains("examples.rs"), "{site}");
            assert_eq!(*index, 1);
            assert_eq!(pointer, "/window/hours");
            assert!(message.contains("integer") && message.contains("\"twelve\""), "{message}");
        }
        other => panic!("{other:?}"),
    }
    let text = err.to_string();
    assert!(text.contains("report.misdated") && text.contains("index 1") && text.contains("/window/hours"), "{text}");
}

#[test]
fn run_time_definitions_take_examples_and_deferral_from_the_builder() {
    let build = |example: Value| {
        ToolDefinition::builder("notes.add")
            .description("Adds a note.")
            .input_schema(json!({
                "type": "object",
                "properties": {"text": {"type": "string"}, "pinned": {"type": "boolean"}},
                "required": ["text"],
                "additionalProperties": false
            }))
            .example(json!({"text": "Call back"}))
            .example(example)
            .defer(true)
            .handler(|_args, _ctx| async { Ok(Value::Null) })
            .build()
            .expect("a valid definition")
    };
    let def = build(json!({"text": "Ship it", "pinned": true}));
    assert!(def.deferred());
    assert_eq!(def.examples().len(), 2);
    let registry = Registry::builder().without_inventory().tool(def).build().expect("valid examples");
    assert_eq!(
        registry.get("notes.add").map(|d| d.render(Provider::Anthropic)["input_examples"][1].clone()),
        Some(json!({"text": "Ship it", "pinned": true}))
    );

    // An unknown key and a missing required one: one problem each, at the place of each.
    let err = Registry::builder()
        .without_inventory()
        .tool(build(json!({"pinnd": true})))
        .build()
        .expect_err("the second example is refused");
    let places: Vec<(usize, &str)> = err
        .problems()
        .iter()
        .filter_map(|p| match p {
            RegistryProblem::Example { index, pointer, .. } => Some((*index, pointer.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(places.len(), err.problems().len(), "{err}");
    assert!(places.contains(&(1, "/text")), "{err}");
    assert!(places.contains(&(1, "/pinnd")), "{err}");
}

#[test]
fn deferring_the_schema_checks_defers_the_examples_check_too() {
    assert!(Registry::builder().defer_schema_checks().build().is_ok());
}
