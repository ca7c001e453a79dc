//! The provider codecs' parsers under arbitrary input: [`check_codecs`] reads one provider message (or call item)
//! with the codec of the harness's view and asserts what every codec promises, whatever it is given.
//!
//! Input layout: the first byte selects the provider (`% 6`, in [`Provider::ALL`] order; [`check_codec`] takes it
//! as an argument instead, for the targets of one provider each) and, with bit 3, tight
//! argument limits (nesting 8, 512 bytes) instead of the defaults; the rest is parsed as JSON, else taken as a
//! string.
//!
//! Invariants, for every input:
//!
//! 1. reading never panics: a call item always becomes a call, a message a call list or a `MessageError`;
//! 2. every call has a non-empty id;
//! 3. a call whose name is a tool of the view carries that tool's registered name, and a name shown to the
//!    provider maps back to exactly one tool;
//! 4. arguments that were read from JSON text are an object, no deeper than the codec's depth limit and from text
//!    no longer than its byte limit (the value's own size may still exceed it: `1e9` is read as `1000000000.0`,
//!    which the executor's check of the value then refuses);
//! 5. the message a codec returns for the transcript reads back as the same calls, in the same order, with the
//!    same ids, names and arguments, and the same text;
//! 6. a reply to each call (success and failure) is written without panicking, and a batch of replies too.

use keel_tools_core::results::{ErrorBody, ErrorCode};
use keel_tools_core::schema::Limits;
use keel_tools_core::{Codec, Provider, ToolCall, ToolResult};
use serde_json::{Value, json};

use crate::{Harness, depth};

/// Reads `data` as one provider's message and call item, asserting the invariants above.
pub fn check_codecs(data: &[u8]) {
    let Some(&mode) = data.first() else { return };
    check_codec(Provider::ALL[usize::from(mode) % Provider::ALL.len()], data);
}

/// Reads `data` as `provider`'s message and call item, asserting the invariants above: the per-provider targets'
/// entry point (the first byte's bit 3 still selects tight limits; its provider bits are ignored).
pub fn check_codec(provider: Provider, data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else { return };
    let limits = if mode & 0x08 != 0 { Limits { max_depth: 8, max_bytes: 512 } } else { Limits::DEFAULT };
    let value = serde_json::from_slice::<Value>(rest)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(rest).into_owned()));
    let codec = Harness::get().executor.view().codec(provider).with_limits(limits);

    check_call(&codec, &codec.call(&value, 3), text_arguments(provider, &value));
    if let Ok(parsed) = codec.message(&value, 5) {
        for call in &parsed.calls {
            check_call(&codec, call, None);
        }
        let again = codec.message(&parsed.message, 5).unwrap_or_else(|e| {
            panic!("{provider:?}: the transcript message does not read back ({e}): {}", parsed.message)
        });
        assert_eq!(again.text, parsed.text, "{provider:?}: the text changed on reading back");
        assert_eq!(again.calls.len(), parsed.calls.len(), "{provider:?}: calls changed on reading back");
        for (a, b) in again.calls.iter().zip(&parsed.calls) {
            assert_eq!((a.id(), a.name()), (b.id(), b.name()), "{provider:?}: a call changed on reading back");
            assert_eq!(a.arguments().ok(), b.arguments().ok(), "{provider:?}: arguments changed on reading back");
        }
        let results: Vec<ToolResult> = parsed.calls.iter().flat_map(results_for).collect();
        let _ = codec.replies(&results);
    }
}

/// The argument text of a call item, for the providers that send arguments as text.
fn text_arguments(provider: Provider, item: &Value) -> Option<&str> {
    let text = match provider {
        Provider::OpenAiChat => item.pointer("/function/arguments"),
        Provider::OpenAiResponses => item.get("arguments"),
        _ => None,
    };
    text.and_then(Value::as_str)
}

fn check_call(codec: &Codec, call: &ToolCall, text: Option<&str>) {
    let provider = codec.provider();
    assert!(!call.id().is_empty(), "{provider:?}: a call without an id");
    let view = codec.view();
    if let Some(def) = view.get(call.name()) {
        assert_eq!(codec.registered_name(&codec.shown_name(def.name())), def.name(), "{provider:?}");
    }
    let shown_by: Vec<&str> =
        view.iter().filter(|d| codec.shown_name(d.name()) == call.name()).map(|d| d.name()).collect();
    assert!(shown_by.len() <= 1, "{provider:?}: `{}` is shown for {shown_by:?}", call.name());
    if let (Some(text), Ok(arguments)) = (text, call.arguments())
        && !text.trim().is_empty()
    {
        assert!(arguments.is_object(), "{provider:?}: arguments that are not an object: {arguments}");
        let limits = codec.limits();
        assert!(text.len() <= limits.max_bytes, "{provider:?}: {} bytes of text read past {limits:?}", text.len());
        assert!(depth(arguments) <= limits.max_depth, "{provider:?}: arguments deeper than {limits:?}");
    }
    for result in results_for(call) {
        let _ = codec.reply(&result);
    }
}

/// A success and a failure answering `call`.
fn results_for(call: &ToolCall) -> [ToolResult; 2] {
    [
        ToolResult::success(call.id(), call.name(), Some("1.0".into()), json!({"echo": call.arguments().ok()})),
        ToolResult::failure(
            call.id(),
            call.name(),
            None,
            false,
            ErrorBody::new(ErrorCode::UnknownTool, "no such tool").with_details(json!({"name": call.name()})),
        ),
    ]
}
