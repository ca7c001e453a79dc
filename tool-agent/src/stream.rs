//! Streamed answers: the [`StreamEvent`]s a turn shows while its answer arrives, the framing of a response body
//! (server-sent events, or JSON Lines for Ollama), and one accumulator per API that folds the stream into the body
//! the API would have sent whole, so that a streamed answer is read by exactly the parser of a whole one
//! ([`crate::wire::parse`]) and its calls run only once all of it has arrived.

use serde_json::{Map, Value, json};

use keel_tools_core::Codec;

use crate::model::{ModelError, WireFormat, error_message};
use crate::stream_event::{StreamEvent, StreamSink};

/// Where an accumulator sends its events: the turn's sink, with the codec that maps wire names back.
pub(crate) struct Emit<'a> {
    pub(crate) sink: Option<&'a dyn StreamSink>,
    pub(crate) codec: &'a Codec,
}

impl Emit<'_> {
    fn text(&self, delta: &str) {
        if let Some(sink) = self.sink
            && !delta.is_empty()
        {
            sink.event(&StreamEvent::TextDelta { delta: delta.to_owned() });
        }
    }

    fn started(&self, index: usize, id: Option<&str>, shown: &str) {
        if let Some(sink) = self.sink {
            let name = self.codec.registered_name(shown);
            sink.event(&StreamEvent::CallStarted { index, id: id.map(str::to_owned), name });
        }
    }

    fn arguments(&self, index: usize, delta: &str) {
        if let Some(sink) = self.sink
            && !delta.is_empty()
        {
            sink.event(&StreamEvent::CallArgumentsDelta { index, delta: delta.to_owned() });
        }
    }

    fn complete(&self, index: usize) {
        if let Some(sink) = self.sink {
            sink.event(&StreamEvent::CallComplete { index });
        }
    }

    /// A whole call at once (Gemini and Ollama send calls whole): started, its arguments, complete.
    fn whole_call(&self, index: usize, id: Option<&str>, shown: &str, arguments: Option<&Value>) {
        if self.sink.is_some() {
            self.started(index, id, shown);
            if let Some(a) = arguments {
                self.arguments(index, &a.to_string());
            }
            self.complete(index);
        }
    }
}

/// What a [`Framer`] hands each event to: its name (SSE's `event:`, none for JSON Lines) and its data.
pub(crate) type OnEvent<'a> = dyn FnMut(Option<&str>, &str) -> Result<(), ModelError> + 'a;

/// Splits a body into events: server-sent events (`event:` and `data:` fields, an event per blank line) or JSON
/// Lines (each non-blank line one event, without a name).
pub(crate) struct Framer {
    lines: bool,
    buf: Vec<u8>,
    event: Option<String>,
    data: String,
}

impl Framer {
    pub(crate) fn sse() -> Framer {
        Framer { lines: false, buf: Vec::new(), event: None, data: String::new() }
    }

    pub(crate) fn json_lines() -> Framer {
        Framer { lines: true, buf: Vec::new(), event: None, data: String::new() }
    }

    /// Feeds a chunk of the body; `on` gets each complete event (its name, its data).
    pub(crate) fn push(&mut self, chunk: &[u8], on: &mut OnEvent<'_>) -> Result<(), ModelError> {
        self.buf.extend_from_slice(chunk);
        let mut start = 0;
        while let Some(at) = self.buf[start..].iter().position(|b| *b == b'\n') {
            let end = start + at;
            let line = &self.buf[start..end];
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let line = std::str::from_utf8(line)
                .map_err(|_| ModelError::malformed("the stream holds a line that is not UTF-8"))?
                .to_owned();
            start = end + 1;
            self.line(&line, on)?;
        }
        self.buf.drain(..start);
        Ok(())
    }

    /// The end of the body: a last line without its newline, and an event without its blank line.
    pub(crate) fn finish(&mut self, on: &mut OnEvent<'_>) -> Result<(), ModelError> {
        if !self.buf.is_empty() {
            let rest = std::mem::take(&mut self.buf);
            let line = String::from_utf8(rest)
                .map_err(|_| ModelError::malformed("the stream holds a line that is not UTF-8"))?;
            self.line(line.trim_end_matches('\r'), on)?;
        }
        self.line("", on)
    }

    fn line(&mut self, line: &str, on: &mut OnEvent<'_>) -> Result<(), ModelError> {
        if self.lines {
            return if line.trim().is_empty() { Ok(()) } else { on(None, line) };
        }
        if line.is_empty() {
            if !self.data.is_empty() {
                if self.data.ends_with('\n') {
                    self.data.pop();
                }
                let data = std::mem::take(&mut self.data);
                let event = self.event.take();
                return on(event.as_deref(), &data);
            }
            self.event = None;
            return Ok(());
        }
        if line.starts_with(':') {
            return Ok(());
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
            }
            "event" => self.event = Some(value.to_owned()),
            _ => {}
        }
        Ok(())
    }
}

/// Folds one API's stream into the body that API sends whole.
pub(crate) trait Accumulate: Send {
    /// One event: its SSE name (none for JSON Lines) and its data.
    fn feed(&mut self, event: Option<&str>, data: &str, emit: &Emit<'_>) -> Result<(), ModelError>;
    /// Whether the stream said it is complete.
    fn complete(&self) -> bool;
    /// The whole-response body.
    fn body(self: Box<Self>) -> Value;
}

/// The accumulator of `format`'s stream.
pub(crate) fn accumulator(format: WireFormat) -> Box<dyn Accumulate> {
    match format {
        WireFormat::Ollama => Box::<OllamaStream>::default(),
        WireFormat::OpenAiChat => Box::<ChatStream>::default(),
        WireFormat::OpenAiResponses => Box::<ResponsesStream>::default(),
        WireFormat::Anthropic => Box::<AnthropicStream>::default(),
        WireFormat::Gemini => Box::<GeminiStream>::default(),
    }
}

fn json(data: &str) -> Result<Value, ModelError> {
    serde_json::from_str(data).map_err(|e| ModelError::Malformed {
        message: format!("a stream event is not JSON (column {})", e.column()),
        source: Some(std::sync::Arc::new(e)),
    })
}

/// An error the stream reported in one of its events.
fn stream_error(message: String, retryable: bool) -> ModelError {
    ModelError::Stream { message, retryable }
}

/// The error an event reports (`{"error": ...}`), worth a retry when the provider says it is on its side: a type
/// or code `server_error`, `overloaded_error` or `api_error`, a numeric code of 500 or more, or a status
/// `UNAVAILABLE` or `INTERNAL` (Gemini's).
fn reported_error(body: &Value) -> Option<ModelError> {
    let message = error_message(body)?;
    let error = body.get("error").unwrap_or(&Value::Null);
    let said = |key: &str| error.get(key).and_then(Value::as_str).unwrap_or_default();
    let retryable =
        ["type", "code"].iter().any(|k| matches!(said(k), "server_error" | "overloaded_error" | "api_error"))
            || error.get("code").and_then(Value::as_u64).is_some_and(|c| c >= 500)
            || matches!(said("status"), "UNAVAILABLE" | "INTERNAL");
    Some(stream_error(message, retryable))
}

fn str_of<'v>(v: &'v Value, key: &str) -> Option<&'v str> {
    v.get(key).and_then(Value::as_str)
}

/// Chat Completions: `data: {"choices": [{"delta": {"content", "tool_calls": [{"index", "id", "function":
/// {"name", "arguments"}}]}, "finish_reason"}]}` chunks, a usage chunk (`stream_options.include_usage`), `[DONE]`.
#[derive(Default)]
struct ChatStream {
    text: Option<String>,
    calls: Vec<(Option<String>, String, String)>,
    /// The position in `calls` of each streamed `index`.
    indexes: Vec<u64>,
    finish: Option<Value>,
    usage: Option<Value>,
    done: bool,
}

impl Accumulate for ChatStream {
    fn feed(&mut self, _event: Option<&str>, data: &str, emit: &Emit<'_>) -> Result<(), ModelError> {
        if data.trim() == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        let chunk = json(data)?;
        if let Some(error) = reported_error(&chunk) {
            return Err(error);
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(usage.clone());
        }
        let Some(choice) = chunk.get("choices").and_then(Value::as_array).and_then(|c| c.first()) else {
            return Ok(());
        };
        let delta = choice.get("delta").unwrap_or(&Value::Null);
        if let Some(t) = str_of(delta, "content") {
            self.text.get_or_insert_with(String::new).push_str(t);
            emit.text(t);
        }
        for item in delta.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
            let index = item.get("index").and_then(Value::as_u64).unwrap_or(self.indexes.len() as u64);
            let function = item.get("function").unwrap_or(&Value::Null);
            let at = match self.indexes.iter().position(|i| *i == index) {
                Some(at) => at,
                None => {
                    self.indexes.push(index);
                    let name = str_of(function, "name").unwrap_or_default().to_owned();
                    let id = str_of(item, "id").map(str::to_owned);
                    emit.started(self.calls.len(), id.as_deref(), &name);
                    self.calls.push((id, name, String::new()));
                    self.calls.len() - 1
                }
            };
            let call = &mut self.calls[at];
            if call.0.is_none() {
                call.0 = str_of(item, "id").map(str::to_owned);
            }
            if let Some(a) = str_of(function, "arguments") {
                call.2.push_str(a);
                emit.arguments(at, a);
            }
        }
        if let Some(reason) = choice.get("finish_reason").filter(|r| !r.is_null()) {
            self.finish = Some(reason.clone());
            for at in 0..self.calls.len() {
                emit.complete(at);
            }
        }
        Ok(())
    }

    fn complete(&self) -> bool {
        self.done || self.finish.is_some()
    }

    fn body(self: Box<Self>) -> Value {
        let mut message = json!({"role": "assistant", "content": self.text});
        if !self.calls.is_empty() {
            let calls: Vec<Value> = self
                .calls
                .into_iter()
                .map(|(id, name, arguments)| {
                    let mut call = json!({"type": "function", "function": {"name": name, "arguments": arguments}});
                    if let Some(id) = id {
                        call["id"] = Value::String(id);
                    }
                    call
                })
                .collect();
            message["tool_calls"] = Value::Array(calls);
        }
        let mut body = json!({"choices": [{"index": 0, "message": message, "finish_reason": self.finish}]});
        if let Some(usage) = self.usage {
            body["usage"] = usage;
        }
        body
    }
}

/// Responses: typed events; `response.completed` carries the whole response.
#[derive(Default)]
struct ResponsesStream {
    response: Option<Value>,
}

impl Accumulate for ResponsesStream {
    fn feed(&mut self, event: Option<&str>, data: &str, emit: &Emit<'_>) -> Result<(), ModelError> {
        let e = json(data)?;
        let index = || e.get("output_index").and_then(Value::as_u64).unwrap_or(0) as usize;
        match str_of(&e, "type").or(event).unwrap_or_default() {
            "response.output_text.delta" => emit.text(str_of(&e, "delta").unwrap_or_default()),
            "response.output_item.added" => {
                let item = e.get("item").unwrap_or(&Value::Null);
                if str_of(item, "type") == Some("function_call") {
                    let name = str_of(item, "name").unwrap_or_default();
                    // A function of a namespace: named as the codec joins the two.
                    match str_of(item, "namespace").filter(|n| !n.is_empty()) {
                        Some(namespace) => {
                            emit.started(index(), str_of(item, "call_id"), &format!("{namespace}-{name}"))
                        }
                        None => emit.started(index(), str_of(item, "call_id"), name),
                    }
                }
            }
            "response.function_call_arguments.delta" => {
                emit.arguments(index(), str_of(&e, "delta").unwrap_or_default())
            }
            "response.function_call_arguments.done" => emit.complete(index()),
            "response.completed" | "response.incomplete" => self.response = e.get("response").cloned(),
            "response.failed" => {
                let response = e.get("response").unwrap_or(&Value::Null);
                return Err(
                    reported_error(response).unwrap_or_else(|| stream_error("the response failed".into(), false))
                );
            }
            "error" => {
                // `{"type": "error", "code", "message", "param"}`: the error's fields at the top.
                let wrapped = json!({"error": e});
                return Err(reported_error(&wrapped).unwrap_or_else(|| stream_error(e.to_string(), false)));
            }
            _ => {}
        }
        Ok(())
    }

    fn complete(&self) -> bool {
        self.response.is_some()
    }

    fn body(self: Box<Self>) -> Value {
        self.response.unwrap_or(Value::Null)
    }
}

/// Anthropic Messages: `message_start`, then per content block `content_block_start`, its deltas (`text_delta`,
/// `input_json_delta`) and `content_block_stop`, then `message_delta` (stop reason, output tokens) and
/// `message_stop`; `ping`s anywhere; an `error` event ends it.
#[derive(Default)]
struct AnthropicStream {
    message: Map<String, Value>,
    blocks: Vec<(u64, Value, String)>,
    stopped: bool,
}

impl AnthropicStream {
    fn block(&mut self, e: &Value) -> Option<&mut (u64, Value, String)> {
        let index = e.get("index").and_then(Value::as_u64)?;
        self.blocks.iter_mut().find(|b| b.0 == index)
    }
}

impl Accumulate for AnthropicStream {
    fn feed(&mut self, event: Option<&str>, data: &str, emit: &Emit<'_>) -> Result<(), ModelError> {
        let e = json(data)?;
        match str_of(&e, "type").or(event).unwrap_or_default() {
            "message_start" => {
                if let Some(Value::Object(m)) = e.get("message") {
                    self.message = m.clone();
                }
            }
            "content_block_start" => {
                let index = e.get("index").and_then(Value::as_u64).unwrap_or(self.blocks.len() as u64);
                let block = e.get("content_block").cloned().unwrap_or(Value::Null);
                if str_of(&block, "type") == Some("tool_use") {
                    emit.started(index as usize, str_of(&block, "id"), str_of(&block, "name").unwrap_or_default());
                } else if let Some(t) = str_of(&block, "text") {
                    emit.text(t);
                }
                self.blocks.push((index, block, String::new()));
            }
            "content_block_delta" => {
                let delta = e.get("delta").cloned().unwrap_or(Value::Null);
                let Some((index, block, json_text)) = self.block(&e) else {
                    return Err(ModelError::malformed("a content_block_delta for a block that was not started"));
                };
                let index = *index as usize;
                match str_of(&delta, "type") {
                    Some("text_delta") => {
                        let t = str_of(&delta, "text").unwrap_or_default();
                        if let Some(Value::String(text)) = block.get_mut("text") {
                            text.push_str(t);
                        }
                        emit.text(t);
                    }
                    Some("input_json_delta") => {
                        let piece = str_of(&delta, "partial_json").unwrap_or_default();
                        json_text.push_str(piece);
                        emit.arguments(index, piece);
                    }
                    Some("thinking_delta") => {
                        if let (Some(Value::String(t)), Some(piece)) =
                            (block.get_mut("thinking"), str_of(&delta, "thinking"))
                        {
                            t.push_str(piece);
                        }
                    }
                    Some("signature_delta") => {
                        if let (Value::Object(b), Some(s)) = (&mut *block, str_of(&delta, "signature")) {
                            b.insert("signature".into(), Value::String(s.to_owned()));
                        }
                    }
                    _ => {}
                }
            }
            "content_block_stop" => {
                if let Some((index, block, json_text)) = self.block(&e)
                    && str_of(block, "type") == Some("tool_use")
                {
                    // The input as streamed; text that is not JSON stays text, which the executor answers with
                    // invalid_arguments.
                    let input = if json_text.trim().is_empty() {
                        block.get("input").cloned().unwrap_or_else(|| json!({}))
                    } else {
                        serde_json::from_str(json_text).unwrap_or_else(|_| Value::String(json_text.clone()))
                    };
                    block["input"] = input;
                    emit.complete(*index as usize);
                }
            }
            "message_delta" => {
                if let Some(Value::Object(delta)) = e.get("delta") {
                    for (k, v) in delta {
                        self.message.insert(k.clone(), v.clone());
                    }
                }
                if let Some(Value::Object(usage)) = e.get("usage") {
                    let entry = self.message.entry("usage").or_insert_with(|| json!({}));
                    if let Value::Object(total) = entry {
                        for (k, v) in usage.iter().filter(|(_, v)| !v.is_null()) {
                            total.insert(k.clone(), v.clone());
                        }
                    }
                }
            }
            "message_stop" => self.stopped = true,
            "error" => {
                let kind = e.pointer("/error/type").and_then(Value::as_str).unwrap_or_default();
                let message = error_message(&e).unwrap_or_else(|| e.to_string());
                return Err(stream_error(
                    format!("{kind}: {message}"),
                    matches!(kind, "overloaded_error" | "api_error"),
                ));
            }
            _ => {}
        }
        Ok(())
    }

    fn complete(&self) -> bool {
        self.stopped
    }

    fn body(self: Box<Self>) -> Value {
        let mut message = self.message;
        message.insert("type".into(), json!("message"));
        message.entry("role").or_insert_with(|| json!("assistant"));
        let mut blocks = self.blocks;
        blocks.sort_by_key(|b| b.0);
        message.insert("content".into(), Value::Array(blocks.into_iter().map(|b| b.1).collect()));
        Value::Object(message)
    }
}

/// Gemini `streamGenerateContent?alt=sse`: each event a `GenerateContentResponse` with the next parts; the last
/// has `finishReason` and the usage.
#[derive(Default)]
struct GeminiStream {
    parts: Vec<Value>,
    calls: usize,
    finish: Option<Value>,
    usage: Option<Value>,
    feedback: Option<Value>,
}

impl Accumulate for GeminiStream {
    fn feed(&mut self, _event: Option<&str>, data: &str, emit: &Emit<'_>) -> Result<(), ModelError> {
        let chunk = json(data)?;
        if let Some(error) = reported_error(&chunk) {
            return Err(error);
        }
        if let Some(u) = chunk.get("usageMetadata") {
            self.usage = Some(u.clone());
        }
        if let Some(f) = chunk.get("promptFeedback") {
            self.feedback = Some(f.clone());
        }
        let Some(candidate) = chunk.pointer("/candidates/0") else { return Ok(()) };
        for part in candidate.pointer("/content/parts").and_then(Value::as_array).into_iter().flatten() {
            if let Some(call) = part.get("functionCall").or_else(|| part.get("function_call")) {
                emit.whole_call(
                    self.calls,
                    str_of(call, "id"),
                    str_of(call, "name").unwrap_or_default(),
                    call.get("args"),
                );
                self.calls += 1;
                self.parts.push(part.clone());
                continue;
            }
            let thought = part.get("thought").and_then(Value::as_bool) == Some(true);
            if let Some(t) = str_of(part, "text") {
                if !thought {
                    emit.text(t);
                }
                let merge = self.parts.last_mut().filter(|p| {
                    p.get("text").is_some()
                        && p.get("thoughtSignature").is_none()
                        && (p.get("thought").and_then(Value::as_bool) == Some(true)) == thought
                });
                if let Some(Value::Object(prev)) = merge {
                    if let Some(Value::String(s)) = prev.get_mut("text") {
                        s.push_str(t);
                    }
                    if let Some(signature) = part.get("thoughtSignature") {
                        prev.insert("thoughtSignature".into(), signature.clone());
                    }
                    continue;
                }
            }
            self.parts.push(part.clone());
        }
        if let Some(f) = candidate.get("finishReason").filter(|f| !f.is_null()) {
            self.finish = Some(f.clone());
        }
        Ok(())
    }

    fn complete(&self) -> bool {
        self.finish.is_some() || self.feedback.as_ref().is_some_and(|f| f.get("blockReason").is_some())
    }

    fn body(self: Box<Self>) -> Value {
        let mut body = Map::new();
        if self.finish.is_some() || !self.parts.is_empty() {
            let mut candidate = json!({"index": 0, "content": {"role": "model", "parts": self.parts}});
            if let Some(f) = self.finish {
                candidate["finishReason"] = f;
            }
            body.insert("candidates".into(), json!([candidate]));
        }
        if let Some(u) = self.usage {
            body.insert("usageMetadata".into(), u);
        }
        if let Some(f) = self.feedback {
            body.insert("promptFeedback".into(), f);
        }
        Value::Object(body)
    }
}

/// Ollama `/api/chat` with `"stream": true`: JSON Lines of `{"message": {"content", "tool_calls"?}, "done": false}`,
/// the last with `"done": true` and the counts.
#[derive(Default)]
struct OllamaStream {
    text: String,
    thinking: Option<String>,
    calls: Vec<Value>,
    last: Option<Map<String, Value>>,
}

impl Accumulate for OllamaStream {
    fn feed(&mut self, _event: Option<&str>, data: &str, emit: &Emit<'_>) -> Result<(), ModelError> {
        let line = json(data)?;
        if let Some(error) = reported_error(&line) {
            return Err(error);
        }
        let message = line.get("message").unwrap_or(&Value::Null);
        if let Some(t) = str_of(message, "content") {
            self.text.push_str(t);
            emit.text(t);
        }
        if let Some(t) = str_of(message, "thinking") {
            self.thinking.get_or_insert_with(String::new).push_str(t);
        }
        for call in message.get("tool_calls").and_then(Value::as_array).into_iter().flatten() {
            let function = call.get("function").unwrap_or(&Value::Null);
            emit.whole_call(
                self.calls.len(),
                str_of(call, "id"),
                str_of(function, "name").unwrap_or_default(),
                function.get("arguments"),
            );
            self.calls.push(call.clone());
        }
        if line.get("done").and_then(Value::as_bool) == Some(true)
            && let Value::Object(m) = line
        {
            self.last = Some(m);
        }
        Ok(())
    }

    fn complete(&self) -> bool {
        self.last.is_some()
    }

    fn body(self: Box<Self>) -> Value {
        let mut body = self.last.unwrap_or_default();
        let mut message = json!({"role": "assistant", "content": self.text});
        if let Some(t) = self.thinking {
            message["thinking"] = Value::String(t);
        }
        if !self.calls.is_empty() {
            message["tool_calls"] = Value::Array(self.calls);
        }
        body.insert("message".into(), message);
        Value::Object(body)
    }
}

#[cfg(test)]
mod tests {
    use keel_tools_core::{Provider, ToolView};

    use super::*;

    fn frames(framer: &mut Framer, chunks: &[&str]) -> Vec<(Option<String>, String)> {
        let mut out = Vec::new();
        let mut on = |e: Option<&str>, d: &str| {
            out.push((e.map(str::to_owned), d.to_owned()));
            Ok(())
        };
        for c in chunks {
            framer.push(c.as_bytes(), &mut on).unwrap();
        }
        framer.finish(&mut on).unwrap();
        out
    }

    #[test]
    fn server_sent_events_split_anywhere() {
        let text = "event: a\r\ndata: {\"x\":\n: a comment\ndata: 1}\n\ndata: [DONE]\n\n";
        let whole = frames(&mut Framer::sse(), &[text]);
        assert_eq!(whole, [(Some("a".into()), "{\"x\":\n1}".into()), (None, "[DONE]".into())]);
        // Every split of the same bytes gives the same events.
        for at in 0..text.len() {
            let (a, b) = text.split_at(at);
            assert_eq!(frames(&mut Framer::sse(), &[a, b]), whole, "split at {at}");
        }
        // A last event without its blank line still counts.
        assert_eq!(frames(&mut Framer::sse(), &["data: 1"]), [(None, "1".into())]);
    }

    #[test]
    fn json_lines_skip_blank_lines() {
        let out = frames(&mut Framer::json_lines(), &["{\"a\":1}\n\n{\"b\"", ":2}"]);
        assert_eq!(out, [(None, "{\"a\":1}".into()), (None, "{\"b\":2}".into())]);
    }

    fn run(format: WireFormat, events: &[(Option<&str>, &str)]) -> (Result<Value, ModelError>, Vec<StreamEvent>) {
        let seen = std::sync::Mutex::new(Vec::new());
        let sink = |e: &StreamEvent| seen.lock().unwrap().push(e.clone());
        let codec = ToolView::new(Vec::new()).codec(Provider::OpenAiChat);
        let emit = Emit { sink: Some(&sink), codec: &codec };
        let mut acc = accumulator(format);
        let mut result = Ok(());
        for (e, d) in events {
            result = acc.feed(*e, d, &emit);
            if result.is_err() {
                break;
            }
        }
        let body =
            result.and_then(|()| if acc.complete() { Ok(acc.body()) } else { Err(stream_error("cut".into(), true)) });
        (body, seen.into_inner().unwrap())
    }

    #[test]
    fn chat_chunks_fold_into_one_message() {
        let (body, events) = run(
            WireFormat::OpenAiChat,
            &[
                (
                    None,
                    r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"t","arguments":""}}]},"finish_reason":null}]}"#,
                ),
                (
                    None,
                    r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"a\":"}}]},"finish_reason":null}]}"#,
                ),
                (
                    None,
                    r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]},"finish_reason":null}]}"#,
                ),
                (None, r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#),
                (None, r#"{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2}}"#),
                (None, "[DONE]"),
            ],
        );
        let body = body.unwrap();
        assert_eq!(body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"], "{\"a\":1}");
        assert_eq!(body["choices"][0]["message"]["tool_calls"][0]["id"], "call_1");
        assert_eq!(body["usage"]["prompt_tokens"], 5);
        assert_eq!(
            events,
            [
                StreamEvent::CallStarted { index: 0, id: Some("call_1".into()), name: "t".into() },
                StreamEvent::CallArgumentsDelta { index: 0, delta: "{\"a\":".into() },
                StreamEvent::CallArgumentsDelta { index: 0, delta: "1}".into() },
                StreamEvent::CallComplete { index: 0 },
            ]
        );
    }

    #[test]
    fn a_stream_cut_short_is_not_complete() {
        let (body, _) =
            run(WireFormat::OpenAiChat, &[(None, r#"{"choices":[{"index":0,"delta":{"content":"Hel"}}]}"#)]);
        assert!(matches!(body, Err(ModelError::Stream { retryable: true, .. })));
        let (body, _) = run(
            WireFormat::Anthropic,
            &[(
                Some("message_start"),
                r#"{"type":"message_start","message":{"id":"m","role":"assistant","content":[]}}"#,
            )],
        );
        assert!(body.is_err());
    }

    #[test]
    fn anthropic_overloaded_mid_stream_is_worth_a_retry() {
        let (body, _) = run(
            WireFormat::Anthropic,
            &[(Some("error"), r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#)],
        );
        let e = body.unwrap_err();
        assert_eq!(e, ModelError::Stream { message: "overloaded_error: Overloaded".into(), retryable: true });
        let (body, _) = run(
            WireFormat::Anthropic,
            &[(Some("error"), r#"{"type":"error","error":{"type":"invalid_request_error","message":"no"}}"#)],
        );
        assert!(matches!(body, Err(ModelError::Stream { retryable: false, .. })));
    }

    #[test]
    fn anthropic_input_that_is_not_json_stays_text() {
        let (body, _) = run(
            WireFormat::Anthropic,
            &[
                (
                    None,
                    r#"{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"t","input":{}}}"#,
                ),
                (
                    None,
                    r#"{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\": "}}"#,
                ),
                (None, r#"{"type":"content_block_stop","index":0}"#),
                (None, r#"{"type":"message_stop"}"#),
            ],
        );
        assert_eq!(body.unwrap()["content"][0]["input"], "{\"a\": ");
    }
}
