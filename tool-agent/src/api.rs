//! [`WireApi`]: one HTTP API's side of a turn, implemented once per API (each in its own module of `api`), and
//! reached from a [`WireFormat`] through [`of`]. The codec of the turn's view reads and writes the tool calls and
//! their replies; the API says where a response body holds the assistant message and its tokens, how a
//! conversation is written around the codec's messages, what a replay records, and how a streamed answer is framed
//! and folded into the body the API would have sent whole.

mod anthropic;
mod gemini;
mod ollama;
mod openai_chat;
mod responses;
#[cfg(test)]
mod tests;

use keel_tools_core::events::Usage;
use serde_json::{Value, json};

use crate::model::{AssistantMessage, ModelError, WireFormat, error_message};
use crate::stream::{Accumulate, Framing};

/// The API of `format`: the one place a [`WireFormat`] meets the module that speaks it.
pub(crate) fn of(format: WireFormat) -> &'static dyn WireApi {
    match format {
        WireFormat::Ollama => &ollama::Ollama,
        WireFormat::OpenAiChat => &openai_chat::Chat,
        WireFormat::OpenAiResponses => &responses::Responses,
        WireFormat::Anthropic => &anthropic::Anthropic,
        WireFormat::Gemini => &gemini::Gemini,
    }
}

/// The APIs in the order [`detect`] tries them: the first whose [`WireApi::recognizes`] takes a body names its
/// format. Ollama's shape (`message`, or an error) is the loosest, so it goes last.
const DETECTION: [WireFormat; 5] = [
    WireFormat::OpenAiChat,
    WireFormat::OpenAiResponses,
    WireFormat::Gemini,
    WireFormat::Anthropic,
    WireFormat::Ollama,
];

/// The format a recorded response body is in, from its shape.
pub(crate) fn detect(body: &Value) -> Option<WireFormat> {
    DETECTION.into_iter().find(|format| of(*format).recognizes(body))
}

/// What one HTTP API does, with one signature for every API: the wire, the replay and the clients call these and
/// nothing else per API. In order: the response read, the replay's recording, the conversation written, the
/// stream read, the provider's own tool search.
pub(crate) trait WireApi: Sync {
    /// Whether `body` has this API's response shape. Asked in [`DETECTION`]'s order, so only of bodies the APIs
    /// before it did not take.
    fn recognizes(&self, body: &Value) -> bool;

    /// The assistant message in a response body, as the codec reads it. A body that reports an error, or whatever
    /// the API says instead of a message (a failed response, a blocked prompt), is [`ModelError::Server`]; a body
    /// without the message is [`ModelError::Malformed`].
    fn message<'b>(&self, body: &'b Value) -> Result<&'b Value, ModelError>;

    /// The tokens a response body reports, when it reports them.
    fn usage(&self, body: &Value) -> Option<Usage>;

    /// A response body that [`WireApi::message`] finds `a`, an assistant message of this API, in again: for a
    /// replay script recorded from a conversation.
    fn recorded_body(&self, a: &AssistantMessage) -> Value;

    /// A system message of the conversation, or `None` when the API takes the system messages apart from the
    /// messages (Anthropic's `system`, Gemini's `systemInstruction`).
    fn system_message(&self, text: &str) -> Option<Value> {
        Some(json!({"role": "system", "content": text}))
    }

    /// A user message of the conversation.
    fn user_message(&self, text: &str) -> Value {
        json!({"role": "user", "content": text})
    }

    /// Whether an assistant turn is several items of the conversation (Responses' output items) rather than one
    /// message: its array is sent item by item.
    fn assistant_items(&self) -> bool {
        false
    }

    /// How a streamed answer is framed (and so what the request accepts): server-sent events unless the API says
    /// otherwise.
    fn framing(&self) -> Framing {
        Framing::Sse
    }

    /// A fresh accumulator for a streamed answer: it folds the events into the body [`WireApi::message`] reads.
    fn accumulator(&self) -> Box<dyn Accumulate>;

    /// The tools the provider's own tool search loaded in `wire`, an assistant message of this API (names as the
    /// provider was sent them, see [`crate::deferral`]); none for an API without a search of its own.
    fn loaded_by_search(&self, wire: &Value) -> Vec<String> {
        let _ = wire;
        Vec::new()
    }
}

/// Checks that a response body is a JSON object that reports no error (`{"error": ...}` is the server's).
fn checked(body: &Value) -> Result<(), ModelError> {
    if !body.is_object() {
        return Err(ModelError::malformed("the response is not a JSON object"));
    }
    match error_message(body) {
        Some(message) => Err(ModelError::Server { message }),
        None => Ok(()),
    }
}

/// The assistant message object at `pointer` of a [`checked`] response body; `what` names the place in the error.
fn object_at<'b>(body: &'b Value, pointer: &str, what: &str) -> Result<&'b Value, ModelError> {
    checked(body)?;
    match body.pointer(pointer) {
        Some(message @ Value::Object(_)) => Ok(message),
        _ => Err(ModelError::malformed(format!("the response has no {what} object"))),
    }
}

/// The count at `pointer` of a response body.
fn count(body: &Value, pointer: &str) -> Option<u64> {
    body.pointer(pointer).and_then(Value::as_u64)
}
