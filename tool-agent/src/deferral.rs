//! Deferred tools on the wire ([`keel_tools_core::deferral`]): the provider's own tool search where its API has one,
//! keel's `search_tools` tool ([`SEARCH_TOOL`](keel_tools_core::deferral::SEARCH_TOOL)) elsewhere.
//!
//! With [`ToolSearch::Native`] (the default), a run whose view defers tools is sent, on the two APIs that have a
//! tool search of their own:
//!
//! - **Anthropic Messages**: every tool, the deferred ones with `"defer_loading": true`, and the server tool
//!   `{"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}` in place of keel's search. The
//!   tools a search loaded come back as `tool_reference`s in a `tool_search_tool_result` block.
//! - **OpenAI Responses**: every function tool, the deferred ones with `"defer_loading": true` and grouped in
//!   namespaces by the first part of their names (`billing.invoice.refund` is `invoice-refund` in namespace
//!   `billing`), and the hosted `{"type": "tool_search"}` in place of keel's search. The tools it loaded come back in
//!   a `tool_search_output` item, and their calls with `namespace` and `name`, which the codec joins again.
//!
//! The full list is the same on every turn, so the provider's prompt cache holds. What the provider's search
//! loaded is surfaced in the run ([`Run::surface`](keel_tools_core::runs::Run::surface), logged `via` the
//! provider) before the turn's calls run, so the allowlist is still exactly what the model has been shown: a call
//! of a deferred tool no search loaded is refused `unknown_tool`. On the other APIs, and with [`ToolSearch::Keel`],
//! the turn lists the tools shown so far and keel's `search_tools`.

use keel_tools_core::deferral::is_search_tool;
use keel_tools_core::{Provider, ToolView};
use serde_json::{Value, json};

use crate::model::{AssistantMessage, Turn};

/// How a client lets the model find deferred tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ToolSearch {
    /// The provider's own tool search where its API has one (Anthropic Messages, OpenAI Responses); keel's
    /// `search_tools` tool elsewhere.
    #[default]
    Native,
    /// keel's `search_tools` tool, on every API: the model's search runs in keel's executor, like any call.
    Keel,
}

/// Whether `provider`'s API has a tool search of its own.
pub(crate) fn has_native(provider: Provider) -> bool {
    matches!(provider, Provider::Anthropic | Provider::OpenAiResponses)
}

/// The turn a client sends: with the provider's own search, over the run's whole view (the deferred tools
/// marked), else as it is.
pub(crate) fn prepare<'a>(turn: Turn<'a>, search: ToolSearch, provider: Provider) -> Turn<'a> {
    match turn.deferred {
        Some(all) if search == ToolSearch::Native && has_native(provider) => {
            Turn { tools: all, native_search: true, ..turn }
        }
        _ => turn,
    }
}

/// The tool list the first turn of a run over `view` sends `provider`, with `search`: with the provider's own tool
/// search where `search` is [`ToolSearch::Native`] and its API has one (every tool, the deferred ones marked, and
/// the provider's search tool), else the tools shown before any search (those not deferred, and keel's
/// `search_tools` when `view` has it; see [`ToolView::with_tool_search`]). A view that defers nothing is listed as
/// it is. This is what `keel list --format` prints.
pub fn first_turn_tools(view: &ToolView, provider: Provider, search: ToolSearch) -> Vec<Value> {
    if !view.has_deferred() {
        return view.schemas(provider).to_vec();
    }
    if search == ToolSearch::Native && has_native(provider) {
        return native_entries(view, view.schemas(provider).to_vec(), provider);
    }
    view.shown(&keel_tools_core::deferral::Surfaced::new()).schemas(provider).to_vec()
}

/// The tool entries of a turn with the provider's own search: each deferred tool's entry marked `"defer_loading":
/// true`, keel's search tool replaced by the provider's.
pub(crate) fn native_entries(view: &ToolView, entries: Vec<Value>, provider: Provider) -> Vec<Value> {
    let mut out = Vec::with_capacity(entries.len() + 1);
    for mut entry in entries {
        let def =
            entry.get("name").and_then(Value::as_str).and_then(|n| view.get_by_wire_name(n).or_else(|| view.get(n)));
        match def {
            Some(d) if is_search_tool(d) => continue,
            Some(d) if d.deferred() => {
                if let Some(object) = entry.as_object_mut() {
                    object.insert("defer_loading".into(), Value::Bool(true));
                }
            }
            _ => {}
        }
        out.push(entry);
    }
    if provider == Provider::OpenAiResponses {
        out = namespaced(out);
    }
    out.push(match provider {
        Provider::Anthropic => json!({"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}),
        _ => json!({"type": "tool_search"}),
    });
    out
}

/// OpenAI Responses' entries with the deferred functions grouped in namespaces by the first part of their name
/// (`billing.invoice.refund` is `invoice-refund` in namespace `billing`; its calls come back with `namespace` and
/// `name`, which the codec joins again). A deferred tool whose name has one part stays a function of its own.
fn namespaced(entries: Vec<Value>) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::with_capacity(entries.len());
    let mut groups: Vec<(String, Vec<Value>)> = Vec::new();
    for mut entry in entries {
        let deferred = entry.get("defer_loading").and_then(Value::as_bool) == Some(true);
        let split = entry
            .get("name")
            .and_then(Value::as_str)
            .and_then(|n| n.split_once('-'))
            .map(|(a, b)| (a.to_owned(), b.to_owned()));
        match split {
            Some((namespace, rest)) if deferred => {
                entry["name"] = Value::from(rest);
                match groups.iter_mut().find(|(n, _)| *n == namespace) {
                    Some((_, tools)) => tools.push(entry),
                    None => groups.push((namespace, vec![entry])),
                }
            }
            _ => out.push(entry),
        }
    }
    for (namespace, tools) in groups {
        let names: Vec<&str> = tools.iter().filter_map(|t| t.get("name").and_then(Value::as_str)).collect();
        let description = format!("{} tools of {namespace}, loaded by tool search: {}.", tools.len(), names.join(", "));
        out.push(json!({"type": "namespace", "name": namespace, "description": description, "tools": tools}));
    }
    out
}

/// The tools the provider's own search loaded in `reply` (names as the provider was sent them): Anthropic's
/// `tool_reference`s, OpenAI Responses' `tool_search_output` tools. Empty for the other formats.
pub fn loaded_by_provider(reply: &AssistantMessage) -> Vec<String> {
    crate::api::of(reply.format).loaded_by_search(&reply.wire)
}
