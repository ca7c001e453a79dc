//! [`Format`]: one provider's side of the wire, implemented once per provider (each in its own module of
//! `codec`), and reached from a [`Provider`](crate::Provider) through [`format`](super::format).

use serde_json::Value;

use super::{Codec, LossKind, MessageError, ParsedMessage};
use crate::call::ToolCall;
use crate::result::ToolResult;
use crate::tool_definition::ToolDefinition;

/// Where a [`Format`] reports a loss: `(at, kind, message)`; the caller fills in the provider and the tool.
pub(super) type Push<'a> = dyn FnMut(String, LossKind, String) + 'a;

/// What a provider's codec does, with one signature for every provider: the [`Codec`] front calls these and
/// nothing else per provider. In order: the tool list entry, the calls read, the messages written.
pub(super) trait Format: Sync {
    /// Whether the model is shown [`wire_name`](ToolDefinition::wire_name)s (`incident-search`), mapped back to
    /// the registered names on the way in, as most providers refuse dots in a name; otherwise (`false`) it is
    /// shown the registered names themselves.
    fn wire_names(&self) -> bool {
        true
    }

    /// Whether the provider takes a tool whose arguments are not one object schema at the top. Most do not: the
    /// registry reports such a tool, and [`Format::entry_losses`] is not asked about it.
    fn takes_any_input(&self) -> bool {
        false
    }

    /// The tool list entry of `def`, rendered afresh: [`ToolDefinition::render`] caches it.
    fn tool(&self, def: &ToolDefinition) -> Value;

    /// What `entry`, this provider's entry for `def`, does not carry (see [`Codec::losses`]).
    fn entry_losses(&self, def: &ToolDefinition, entry: &Value, push: &mut Push<'_>);

    /// One call item as the provider's response carries it (see [`Codec::call`]).
    fn call(&self, codec: &Codec, item: &Value, index: usize) -> ToolCall;

    /// A whole assistant message (see [`Codec::message`]).
    fn message(&self, codec: &Codec, message: &Value, first_index: usize) -> Result<ParsedMessage, MessageError>;

    /// The assistant message carrying `text` and `calls` (see [`Codec::assistant_message`]).
    fn assistant(&self, codec: &Codec, text: &str, calls: &[ToolCall]) -> Value;

    /// The reply to one result (see [`Codec::reply`]).
    fn reply(&self, codec: &Codec, result: &ToolResult) -> Value;

    /// The messages answering one turn's results, at least one (see [`Codec::replies`]): a reply each, unless
    /// the provider gathers them in one message.
    fn replies(&self, codec: &Codec, results: &[ToolResult]) -> Vec<Value> {
        results.iter().map(|r| self.reply(codec, r)).collect()
    }

    /// What the provider's replies do not carry (tool `*`); nothing unless the provider says otherwise.
    fn reply_losses(&self, _push: &mut Push<'_>) {}
}
