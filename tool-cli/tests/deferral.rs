//! The command line honours `#[tool(defer)]`: `keel list` marks a deferred tool, and what `keel list --format`
//! prints is what a run's first turn sends: the provider's own tool search where its API has one (the deferred tool
//! marked `defer_loading`), keel's `search_tools` in its place elsewhere, every tool in full with
//! `--tool-search off`.

use serde_json::Value;

/// Looks up an invoice by its id: its amount, its customer and whether it is paid.
#[keel_tools_core::tool(effect = "read", version = "1.0", defer, example = r#"{"invoice_id": "I-1"}"#)]
fn lookup_invoice(invoice_id: String) -> String {
    format!("{invoice_id}: 120 EUR, paid")
}

/// Says which day it is.
#[keel_tools_core::tool(effect = "read", version = "1.0")]
fn today() -> String {
    "Monday".into()
}

fn keel(args: &[&str]) -> (u8, String, String) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = keel_tools_cli::Cli::new().run(std::iter::once("keel").chain(args.iter().copied()), &mut out, &mut err);
    (code, String::from_utf8(out).unwrap(), String::from_utf8(err).unwrap())
}

fn listed(args: &[&str]) -> Vec<Value> {
    let (code, out, err) = keel(args);
    assert_eq!(code, 0, "{args:?}: {err}");
    serde_json::from_str(&out).unwrap()
}

fn names(tools: &[Value], key: &str) -> Vec<String> {
    tools.iter().filter_map(|t| t.pointer(key).and_then(Value::as_str)).map(str::to_owned).collect()
}

#[test]
fn anthropic_gets_the_deferred_tool_marked_and_its_own_search() {
    let tools = listed(&["list", "--format", "anthropic"]);
    let invoice = tools.iter().find(|t| t["name"] == "lookup_invoice").expect("listed, marked");
    assert_eq!(invoice["defer_loading"], true, "{invoice}");
    assert!(tools.iter().all(|t| t["name"] != "search_tools"), "the provider's search instead of keel's: {tools:?}");
    assert!(tools.iter().any(|t| t["type"] == "tool_search_tool_bm25_20251119"), "{tools:?}");
    assert_eq!(tools.iter().find(|t| t["name"] == "today").unwrap().get("defer_loading"), None);
}

#[test]
fn ollama_gets_keels_search_in_place_of_the_deferred_tool() {
    let tools = listed(&["list", "--format", "ollama"]);
    let mut shown = names(&tools, "/function/name");
    shown.sort();
    assert_eq!(shown, ["search_tools", "today"], "{tools:?}");
    // `keel` asks for keel's search on every API, Anthropic's included.
    let tools = listed(&["list", "--format", "anthropic", "--tool-search", "keel"]);
    let mut shown = names(&tools, "/name");
    shown.sort();
    assert_eq!(shown, ["search_tools", "today"], "{tools:?}");
}

#[test]
fn off_lists_every_tool_in_full() {
    for format in ["anthropic", "ollama", "openai-responses"] {
        let tools = listed(&["list", "--format", format, "--tool-search", "off"]);
        let text = serde_json::to_string(&tools).unwrap();
        assert!(text.contains("lookup_invoice") && text.contains("today"), "{format}: {text}");
        assert!(!text.contains("defer_loading") && !text.contains("search_tools"), "{format}: {text}");
    }
}

#[test]
fn the_table_marks_the_deferred_tool() {
    let (code, out, err) = keel(&["list"]);
    assert_eq!(code, 0, "{err}");
    let invoice = out.lines().find(|l| l.starts_with("lookup_invoice")).unwrap_or_default();
    assert!(invoice.contains("read (deferred)"), "{out}");
    let today = out.lines().find(|l| l.starts_with("today")).unwrap_or_default();
    assert!(!today.contains("deferred"), "{out}");
    assert!(out.ends_with("(2 tools; 1 deferred, found by tool search)\n"), "{out}");
}
