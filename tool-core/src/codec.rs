//! [`Codec`]: one provider's side of a conversation, bound to a view: the tool list the model is shown, the
//! calls it sends back, and the replies it reads.

use std::fmt;

use serde_json::Value;

use crate::call::ToolCall;
use crate::registry::view::ToolView;
use crate::result::ToolResult;
use crate::tool_definition::ToolDefinition;
use crate::tool_schemas::Provider;
use keel_tools_schema::Limits;

pub use crate::tool_schemas::Strict;
use format::Format;
pub use loss::{Loss, LossKind};
pub use mcp::{McpContent, McpReply};

mod anthropic;
mod entry;
mod format;
mod gemini;
mod loss;
mod mcp;
mod message;
mod ollama;
mod openai;
mod strict;

/// The format of `provider`: the one place a [`Provider`] meets the module that speaks it.
fn format(provider: Provider) -> &'static dyn Format {
    match provider {
        Provider::Ollama => &ollama::Ollama,
        Provider::OpenAiChat => &openai::Chat,
        Provider::OpenAiResponses => &openai::Responses,
        Provider::Anthropic => &anthropic::Anthropic,
        Provider::Gemini => &gemini::Gemini,
        Provider::Mcp => &mcp::Mcp,
    }
}

/// One provider's side of a conversation, bound to a [`ToolView`]: what the model is shown and what it sends back
/// go through the same object, so a call made from the list reaches exactly the tool it names.
///
/// A codec owns, for its [`Provider`]:
///
/// - the tool list ([`Codec::tools`]), rendered from the view's definitions;
/// - the calls the model sends ([`Codec::call`] for one item, [`Codec::message`] for a whole assistant message):
///   wire names are mapped back to the registered names through the view, arguments are read as that provider
///   sends them (JSON text or an object), missing ids are generated;
/// - the reply to each result ([`Codec::reply`], [`Codec::replies`]);
/// - the assistant message that carries given calls, for a transcript kept in another format
///   ([`Codec::assistant_message`]).
///
/// | provider | a call item | names | arguments | a reply |
/// |---|---|---|---|---|
/// | [`Provider::Ollama`] | `message.tool_calls[i]` | registered | object | `{"role": "tool", ...}` message |
/// | [`Provider::OpenAiChat`] | `message.tool_calls[i]` | wire, mapped back | JSON text | `{"role": "tool", ...}` message |
/// | [`Provider::OpenAiResponses`] | an `output` item of type `function_call` | wire, mapped back | JSON text | a `function_call_output` item |
/// | [`Provider::Anthropic`] | a `tool_use` content block | wire, mapped back | object | a `tool_result` block, all of a turn's in one `user` message |
/// | [`Provider::Gemini`] | a `functionCall` part | wire, mapped back | object | a `functionResponse` part, all of a turn's in one `user` content |
/// | [`Provider::Mcp`] | a `tools/call` request (or its `params`) | registered | object | a `CallToolResult` |
///
/// Everything a model sends is untrusted: no method here panics or fails on a call item. What cannot be read
/// becomes something the executor answers cleanly (see [`ToolCall`]); a name that maps to no tool of the view is
/// kept as sent, and the executor answers `unknown_tool`. A codec of an empty view ([`ToolView::new`]`(vec![])`)
/// is the raw, view-less parse: it maps no name.
///
/// ```
/// use serde_json::json;
/// use keel_tools_core::{tool, Executor, Provider, Registry};
///
/// /// Searches the notes.
/// #[tool(name = "notes.search", effect = "read", version = "1.0")]
/// fn notes_search(query: String) -> Vec<String> {
///     vec![format!("a note about {query}")]
/// }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let registry = Registry::from_inventory().unwrap();
/// let view = registry.view().names(["notes.search"]).build().unwrap();
/// let codec = view.codec(Provider::OpenAiChat);
/// // OpenAI is shown the wire name...
/// assert_eq!(codec.tools()[0]["function"]["name"], "notes-search");
///
/// // ...and its call, exactly as the response carries it, reaches the registered tool.
/// let message = json!({"role": "assistant", "content": null, "tool_calls": [{
///     "id": "call_1", "type": "function",
///     "function": {"name": "notes-search", "arguments": "{\"query\": \"disks\"}"}
/// }]});
/// let parsed = codec.message(&message, 0).unwrap();
/// let executor = Executor::new(view.clone()).unwrap();
/// let result = executor.call(parsed.calls[0].clone()).await;
/// assert!(result.is_ok());
/// let reply = codec.reply(&result);
/// assert_eq!(reply, json!({"role": "tool", "tool_call_id": "call_1", "content": "[\"a note about disks\"]"}));
/// # });
/// ```
#[derive(Clone)]
pub struct Codec {
    view: ToolView,
    provider: Provider,
    limits: Limits,
    strict: Strict,
}

impl fmt::Debug for Codec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Codec")
            .field("provider", &self.provider)
            .field("strict", &self.strict)
            .field("view", &self.view)
            .finish()
    }
}

/// An assistant message read by [`Codec::message`].
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedMessage {
    /// The message's text (its text parts joined), empty when it has none.
    pub text: String,
    /// Its tool calls, in order, names mapped back to registered names.
    pub calls: Vec<ToolCall>,
    /// The message as it goes back into the conversation: as received, with every generated call id written in
    /// where the provider carries ids (so the replies' ids match), and the assistant role filled in when missing.
    pub message: Value,
}

/// A message whose shape is not the provider's assistant message (for example `tool_calls` that is not an array).
/// Its text says what is wrong, never what a parser said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageError {
    message: String,
}

impl MessageError {
    pub(crate) fn new(message: impl Into<String>) -> MessageError {
        MessageError { message: message.into() }
    }

    /// What is wrong, e.g. "`tool_calls` is not an array".
    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for MessageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for MessageError {}

impl ToolView {
    /// The codec of `provider` bound to this view: the tool list it is shown, and the reading of its calls and
    /// the writing of its replies, for exactly these tools.
    pub fn codec(&self, provider: Provider) -> Codec {
        Codec { view: self.clone(), provider, limits: Limits::DEFAULT, strict: Strict::Auto }
    }
}

impl Codec {
    /// The codec of `provider` bound to `view` (the same as [`ToolView::codec`]).
    pub fn new(view: ToolView, provider: Provider) -> Codec {
        Codec { view, provider, limits: Limits::DEFAULT, strict: Strict::Auto }
    }

    /// The same codec, refusing argument text beyond `limits` before it is parsed (see
    /// [`ToolCall::from_json_text_with_limits`]); the default is [`Limits::DEFAULT`], the executor's default.
    /// [`Executor::codec`](crate::Executor::codec) gives the executor's own limits.
    pub fn with_limits(mut self, limits: Limits) -> Codec {
        self.limits = limits;
        self
    }

    /// The limits argument text is held to before it is parsed.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The provider.
    pub fn provider(&self) -> Provider {
        self.provider
    }

    fn format(&self) -> &'static dyn Format {
        format(self.provider)
    }

    /// The view: the tools listed, and the only tools a call can name.
    pub fn view(&self) -> &ToolView {
        &self.view
    }

    /// The tool list in this provider's format, in name order, as a list of the view's own (copied from the
    /// tools' cached renderings on the first call, then cached on the view): [`ToolView::schemas`]. For a list
    /// that copies nothing, see [`Codec::tool_list`].
    pub fn tools(&self) -> &[Value] {
        self.view.schemas_strict(self.provider, self.strict)
    }

    /// The same list as [`Codec::tools`], borrowed: each entry is the tool's own cached rendering, shared by every
    /// view of the tool, so getting it costs nothing (see [`ToolList`](crate::registry::ToolList)).
    pub fn tool_list(&self) -> crate::registry::view::ToolList<'_> {
        self.view.tool_list(self.provider).with_strict(self.strict)
    }

    /// The entry of the registered tool `name` in [`Codec::tools`], if the view holds it.
    pub fn tool(&self, name: &str) -> Option<&Value> {
        self.view.get(name).map(|d| d.render_strict(self.provider, self.strict))
    }

    /// What this provider's format does not carry of the view's tools, as data: for each tool, what its entry
    /// adapts, drops or cannot carry, and what the provider's replies lose. `keel check` and
    /// `keel_tools_contract::lint` report these.
    pub fn losses(&self) -> Vec<Loss> {
        let mut out: Vec<Loss> = Vec::new();
        for def in self.view.iter() {
            out.extend(entry_losses(self.provider, def));
            self.strict_losses(def, &mut out);
        }
        out.extend(format_losses(self.provider));
        out
    }

    /// The name this provider is shown for the registered tool `name`: its wire name for OpenAI, Anthropic and
    /// Gemini (`incident.search` as `incident-search`), the name itself for Ollama and MCP.
    pub fn shown_name(&self, name: &str) -> String {
        if self.format().wire_names() { crate::name::to_wire(name) } else { name.to_owned() }
    }

    /// The registered name of the tool the model called by `shown`: the tool of this view whose
    /// [`Codec::shown_name`] is exactly `shown`, or `shown` itself when there is none (the executor then looks it
    /// up as it is: exactly, without case folding or a nearest name, and answers `unknown_tool` if no tool of the
    /// view has that name).
    pub fn registered_name(&self, shown: &str) -> String {
        if !self.format().wire_names() {
            return shown.to_owned();
        }
        match self.view.get_by_wire_name(shown) {
            Some(def) => def.name().to_owned(),
            None => shown.to_owned(),
        }
    }

    /// One tool-call item exactly as the provider's response carries it (see the table above); `index` is the
    /// call's position in the conversation, used only to generate an id when the item has none
    /// ([`ToolCall::generated_id`]).
    pub fn call(&self, item: &Value, index: usize) -> ToolCall {
        self.format().call(self, item, index)
    }

    /// A whole assistant message (or, for OpenAI Responses, the response's `output` items; for MCP, one
    /// `tools/call` request): its text, its calls, and the message to keep in the conversation. Calls without an
    /// id get [`ToolCall::generated_id`] at `first_index + i`, so ids stay unique across a conversation's turns.
    ///
    /// | provider | the message |
    /// |---|---|
    /// | Ollama, OpenAI Chat | `{"role": "assistant", "content": ..., "tool_calls": [...]}` |
    /// | OpenAI Responses | the `output` array, or the response object holding it |
    /// | Anthropic | `{"role": "assistant", "content": [blocks]}` (a Messages response has this shape) |
    /// | Gemini | a candidate's `content`: `{"role": "model", "parts": [...]}` |
    /// | MCP | a `tools/call` request |
    pub fn message(&self, message: &Value, first_index: usize) -> Result<ParsedMessage, MessageError> {
        self.format().message(self, message, first_index)
    }

    /// The reply to one result, in this provider's format: a message (Ollama, OpenAI Chat), an input item (OpenAI
    /// Responses), a content block (Anthropic), a part (Gemini) or a `CallToolResult` (MCP). Names go back as
    /// the model was shown them.
    pub fn reply(&self, result: &ToolResult) -> Value {
        self.format().reply(self, result)
    }

    /// The messages that answer one turn's results, to append to the conversation: one message per result for
    /// Ollama and OpenAI Chat, one item per result for OpenAI Responses, one `CallToolResult` per result for MCP,
    /// and a single `user` message (Anthropic) or content (Gemini) holding every reply. No results, no messages.
    pub fn replies(&self, results: &[ToolResult]) -> Vec<Value> {
        if results.is_empty() {
            return Vec::new();
        }
        self.format().replies(self, results)
    }

    /// The assistant message carrying `text` and `calls` in this provider's format, names as the model is shown
    /// them: for a transcript that was read in another format. For OpenAI Responses, the output items (an array);
    /// for MCP, the `tools/call` requests (an array).
    pub fn assistant_message(&self, text: &str, calls: &[ToolCall]) -> Value {
        self.format().assistant(self, text, calls)
    }
}

impl ToolDefinition {
    /// What `provider`'s tool-list entry for this tool adapts, drops or cannot carry: the part of
    /// [`Codec::losses`] about this tool, without building a view.
    pub fn losses(&self, provider: Provider) -> Vec<Loss> {
        entry_losses(provider, self)
    }
}

impl Provider {
    /// What this provider's reply format does not carry, whatever the tools (the entries of tool `*` in
    /// [`Codec::losses`]).
    pub fn reply_losses(self) -> Vec<Loss> {
        format_losses(self)
    }
}

/// What `provider`'s entry for `def` does not carry (the part of [`Codec::losses`] about that tool).
fn entry_losses(provider: Provider, def: &ToolDefinition) -> Vec<Loss> {
    let mut out = Vec::new();
    let entry = def.render(provider);
    let mut push = |at: String, kind: LossKind, message: String| {
        out.push(Loss { provider, tool: def.name().to_owned(), at, kind, message });
    };
    let format = format(provider);
    // Most providers need one object schema at the top; the registry reports a tool whose arguments are not.
    let object = def.input_schema().get("type").and_then(Value::as_str) == Some("object");
    if object || format.takes_any_input() {
        format.entry_losses(def, entry, &mut push);
    }
    out
}

/// What `provider`'s reply format does not carry (tool `*`).
fn format_losses(provider: Provider) -> Vec<Loss> {
    let mut out = Vec::new();
    let mut push = |at: String, kind: LossKind, message: String| {
        out.push(Loss { provider, tool: "*".to_owned(), at, kind, message });
    };
    format(provider).reply_losses(&mut push);
    out
}

#[cfg(test)]
mod tests;
