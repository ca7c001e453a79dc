//! `example` and `defer`: the macro checks an example's keys only where the parameters settle the arguments; the
//! registry's build checks every example against the argument schema.
use keel_tools_core::{Args, CallContext, Provider, Registry, State, tool};
use schemars::JsonSchema;
use serde::Deserialize;

/// Which incidents to search.
#[derive(Deserialize, JsonSchema)]
struct SearchArgs {
    /// Words to look for.
    text: String,
    /// At most this many.
    limit: Option<u32>,
}

/// A lone struct parameter is the whole of the arguments: the example's keys are its fields.
#[tool(effect = "read", version = "1.0", example = r#"{"text": "disk full", "limit": 5}"#)]
fn search_incidents(args: SearchArgs, ctx: CallContext) -> Vec<String> {
    let _ = ctx;
    vec![format!("{} {:?}", args.text, args.limit)]
}

/// The same through `Args<T>`.
#[tool(effect = "read", version = "1.0", example = r#"{"text": "timeouts"}"#, defer)]
fn search_notes(Args(args): Args<SearchArgs>) -> Vec<String> {
    vec![args.text]
}

type Priority = Option<u8>;

struct Notes;

/// Named arguments beside injected ones; an `Option` behind an alias may be left out.
#[tool(
    effect = "write",
    version = "1.0",
    example = r#"{"id": "INC-1", "text": "paged the owner"}"#,
    example = r#"{"id": "INC-2", "text": "rolled back", "priority": 1}"#,
    defer = true
)]
fn add_note(id: String, text: String, priority: Priority, notes: State<Notes>, ctx: CallContext) -> String {
    let _ = (notes, ctx);
    format!("{id}: {text} {priority:?}")
}

/// No parameters: an empty example.
#[tool(effect = "read", version = "1.0", example = "{}", defer = false)]
fn list_services() -> Vec<String> {
    Vec::new()
}

fn main() {
    let registry = Registry::from_inventory().expect("every example matches its schema");
    let add_note = registry.get("add_note").unwrap();
    assert!(add_note.deferred());
    assert_eq!(add_note.examples().len(), 2);
    assert_eq!(add_note.render(Provider::Anthropic)["input_examples"][1]["priority"], 1);
    assert!(registry.get("search_notes").unwrap().deferred());
    assert!(!registry.get("search_incidents").unwrap().deferred());
    assert!(!registry.get("list_services").unwrap().deferred());
    assert_eq!(registry.get("list_services").unwrap().examples(), [serde_json::json!({})]);
}
