//! Streamed answers: the [`StreamEvent`]s a turn shows while its answer arrives, the framing of a response body
//! (server-sent events, or JSON Lines for Ollama), and what the accumulators of the APIs ([`crate::api`]) share:
//! the [`Accumulate`] trait and the reading of an event. An accumulator folds a stream into the body its API would
//! have sent whole, so that a streamed answer is read by exactly the parser of a whole one ([`crate::wire::parse`])
//! and its calls run only once all of it has arrived.

use serde_json::Value;

use keel_tools_core::Codec;

use crate::model::{ModelError, error_message};
use crate::stream_event::{StreamEvent, StreamSink};

/// Where an accumulator sends its events: the turn's sink, with the codec that maps wire names back.
pub(crate) struct Emit<'a> {
    pub(crate) sink: Option<&'a dyn StreamSink>,
    pub(crate) codec: &'a Codec,
}

impl Emit<'_> {
    pub(crate) fn text(&self, delta: &str) {
        if let Some(sink) = self.sink
            && !delta.is_empty()
        {
            sink.event(&StreamEvent::TextDelta { delta: delta.to_owned() });
        }
    }

    pub(crate) fn started(&self, index: usize, id: Option<&str>, shown: &str) {
        if let Some(sink) = self.sink {
            let name = self.codec.registered_name(shown);
            sink.event(&StreamEvent::CallStarted { index, id: id.map(str::to_owned), name });
        }
    }

    pub(crate) fn arguments(&self, index: usize, delta: &str) {
        if let Some(sink) = self.sink
            && !delta.is_empty()
        {
            sink.event(&StreamEvent::CallArgumentsDelta { index, delta: delta.to_owned() });
        }
    }

    pub(crate) fn complete(&self, index: usize) {
        if let Some(sink) = self.sink {
            sink.event(&StreamEvent::CallComplete { index });
        }
    }

    /// A whole call at once (Gemini and Ollama send calls whole): started, its arguments, complete.
    pub(crate) fn whole_call(&self, index: usize, id: Option<&str>, shown: &str, arguments: Option<&Value>) {
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

/// How an API frames a streamed answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// Server-sent events: `event:` and `data:` fields, an event per blank line.
    Sse,
    /// JSON Lines: each non-blank line one event, without a name (Ollama's).
    JsonLines,
}

impl Framing {
    /// The `Accept` header of a request answered so.
    pub(crate) fn accept(self) -> &'static str {
        match self {
            Framing::Sse => "text/event-stream",
            Framing::JsonLines => "application/x-ndjson",
        }
    }

    /// A [`Framer`] for a body framed so.
    pub(crate) fn framer(self) -> Framer {
        Framer { lines: self == Framing::JsonLines, buf: Vec::new(), event: None, data: String::new() }
    }
}

/// Splits a body into events, as its [`Framing`] says.
pub(crate) struct Framer {
    lines: bool,
    buf: Vec<u8>,
    event: Option<String>,
    data: String,
}

impl Framer {
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

/// The JSON of an event's data.
pub(crate) fn json(data: &str) -> Result<Value, ModelError> {
    serde_json::from_str(data).map_err(|e| ModelError::Malformed {
        message: format!("a stream event is not JSON (column {})", e.column()),
        source: Some(std::sync::Arc::new(e)),
    })
}

/// An error the stream reported in one of its events.
pub(crate) fn stream_error(message: String, retryable: bool) -> ModelError {
    ModelError::Stream { message, retryable }
}

/// The error an event reports (`{"error": ...}`), worth a retry when the provider says it is on its side: a type
/// or code `server_error`, `overloaded_error` or `api_error`, a numeric code of 500 or more, or a status
/// `UNAVAILABLE` or `INTERNAL` (Gemini's).
pub(crate) fn reported_error(body: &Value) -> Option<ModelError> {
    let message = error_message(body)?;
    let error = body.get("error").unwrap_or(&Value::Null);
    let said = |key: &str| error.get(key).and_then(Value::as_str).unwrap_or_default();
    let retryable =
        ["type", "code"].iter().any(|k| matches!(said(k), "server_error" | "overloaded_error" | "api_error"))
            || error.get("code").and_then(Value::as_u64).is_some_and(|c| c >= 500)
            || matches!(said("status"), "UNAVAILABLE" | "INTERNAL");
    Some(stream_error(message, retryable))
}

/// The string at `key` of an object.
pub(crate) fn str_of<'v>(v: &'v Value, key: &str) -> Option<&'v str> {
    v.get(key).and_then(Value::as_str)
}

#[cfg(test)]
mod tests {
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
        let whole = frames(&mut Framing::Sse.framer(), &[text]);
        assert_eq!(whole, [(Some("a".into()), "{\"x\":\n1}".into()), (None, "[DONE]".into())]);
        // Every split of the same bytes gives the same events.
        for at in 0..text.len() {
            let (a, b) = text.split_at(at);
            assert_eq!(frames(&mut Framing::Sse.framer(), &[a, b]), whole, "split at {at}");
        }
        // A last event without its blank line still counts.
        assert_eq!(frames(&mut Framing::Sse.framer(), &["data: 1"]), [(None, "1".into())]);
    }

    #[test]
    fn json_lines_skip_blank_lines() {
        let out = frames(&mut Framing::JsonLines.framer(), &["{\"a\":1}\n\n{\"b\"", ":2}"]);
        assert_eq!(out, [(None, "{\"a\":1}".into()), (None, "{\"b\":2}".into())]);
    }
}
