//! [`Replay`]: recorded model responses, played back in order, for tests and demos without a model server.

use std::path::Path;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::model::{AssistantMessage, BoxFuture, ChatModel, Message, Mode, ModelError, Turn, WireFormat};
use crate::{api, wire};

/// Where a replay script's responses came from, stated in every transcript.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum ReplayOrigin {
    /// Written by hand (a synthetic script): no model produced these responses. The default.
    #[default]
    SyntheticScript,
    /// Captured from a model server earlier and replayed now.
    Recorded,
}

impl ReplayOrigin {
    /// `synthetic_script` or `recorded`.
    pub fn as_str(self) -> &'static str {
        match self {
            ReplayOrigin::SyntheticScript => "synthetic_script",
            ReplayOrigin::Recorded => "recorded",
        }
    }
}

/// A [`ChatModel`] that answers each turn with the next recorded response, marked [`Mode::Replay`].
///
/// The script is JSON Lines: one response body per line, as the server sent it: an Ollama `/api/chat` response
/// (`{"message": {...}, ...}`), a Chat Completions response (`{"choices": [...], ...}`), a Responses response
/// (`{"output": [...], ...}`), an Anthropic message (`{"type": "message", "content": [...], ...}`) or a Gemini
/// `generateContent` response (`{"candidates": [...], ...}`); blank lines are skipped. Each response goes through the same parser as a live one, so ids, wire names and malformed
/// responses behave exactly as they would over HTTP. The same files can be served by [`crate::stub::StubServer`]
/// (feature `stub`).
///
/// A replay never calls a model: what it proves is how the harness handles these responses, not how any model
/// behaves. Everything it produces says so ([`Mode::Replay`], `assistant (replay)` in transcripts), and its label
/// says where the responses came from ([`ReplayOrigin`]: a hand-written `synthetic_script` unless
/// [`with_origin`](Replay::with_origin) says they were recorded from a server).
#[derive(Debug)]
pub struct Replay {
    responses: Vec<(WireFormat, Value)>,
    source: String,
    origin: ReplayOrigin,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    next: usize,
    /// Each turn's request: how many messages, and the tool names offered.
    seen: Vec<SeenTurn>,
}

/// What one replayed turn was given (for tests).
#[derive(Debug, Clone, PartialEq)]
pub struct SeenTurn {
    /// The conversation, provider-neutral ([`Message::to_json`]).
    pub messages: Vec<Value>,
    /// The names of the tools offered.
    pub tools: Vec<String>,
}

impl Replay {
    /// A script from JSON Lines text; `source` names it in transcripts and errors (a file name).
    pub fn from_jsonl(text: &str, source: impl Into<String>) -> Result<Replay, ModelError> {
        let mut responses = Vec::new();
        for (i, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let value: Value = serde_json::from_str(line).map_err(|e| ModelError::Replay {
                line: i + 1,
                message: format!("not JSON (column {})", e.column()),
                source: Some(Arc::new(e)),
            })?;
            let kind = api::detect(&value).ok_or_else(|| ModelError::Replay {
                line: i + 1,
                message: "not a response of a known API: Ollama /api/chat (`message`), Chat Completions \
                          (`choices`), Responses (`output`), Anthropic Messages (`\"type\": \"message\"`) or Gemini \
                          (`candidates`)"
                    .into(),
                source: None,
            })?;
            responses.push((kind, value));
        }
        Ok(Replay {
            responses,
            source: source.into(),
            origin: ReplayOrigin::default(),
            state: Mutex::new(State::default()),
        })
    }

    /// The script that replays `messages`: one response body per assistant message, in its provider's format (a
    /// Chat Completions response around an OpenAI message, an `/api/chat` response around an Ollama one, and so
    /// on), as
    /// [`Replay::from_jsonl`] reads them. A conversation recorded so replays with the same calls, ids and text.
    pub fn script_of(messages: &[Message]) -> String {
        let mut out = String::new();
        for message in messages {
            if let Message::Assistant(a) = message {
                let body = api::of(a.format).recorded_body(a);
                out.push_str(&body.to_string());
                out.push('\n');
            }
        }
        out
    }

    /// A script from a JSON Lines file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Replay, ModelError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| ModelError::Replay {
            line: 0,
            message: format!("cannot read {}: {e}", path.display()),
            source: Some(Arc::new(e)),
        })?;
        Replay::from_jsonl(&text, path.display().to_string())
    }

    /// Says where the responses came from (default [`ReplayOrigin::SyntheticScript`]).
    #[must_use]
    pub fn with_origin(mut self, origin: ReplayOrigin) -> Replay {
        self.origin = origin;
        self
    }

    /// The script's source label.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Where the responses came from.
    pub fn origin(&self) -> ReplayOrigin {
        self.origin
    }

    /// How many recorded responses the script holds.
    pub fn len(&self) -> usize {
        self.responses.len()
    }

    /// Whether the script is empty.
    pub fn is_empty(&self) -> bool {
        self.responses.is_empty()
    }

    /// How many responses have not been played yet.
    pub fn remaining(&self) -> usize {
        self.responses.len().saturating_sub(self.lock().next)
    }

    /// What each turn played so far was given.
    pub fn seen(&self) -> Vec<SeenTurn> {
        self.lock().seen.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl ChatModel for Replay {
    fn mode(&self) -> Mode {
        Mode::Replay
    }

    fn label(&self) -> String {
        let what = match self.origin {
            ReplayOrigin::SyntheticScript => "written by hand, not a model's output",
            ReplayOrigin::Recorded => "captured from a model server earlier, replayed now",
        };
        format!("{} {} ({} responses; {what})", self.origin.as_str(), self.source, self.responses.len())
    }

    fn chat<'a>(&'a self, turn: Turn<'a>) -> BoxFuture<'a, Result<AssistantMessage, ModelError>> {
        let result = (|| {
            let mut state = self.lock();
            state.seen.push(SeenTurn {
                messages: turn.messages.iter().map(Message::to_json).collect(),
                tools: turn.tools.names().map(str::to_owned).collect(),
            });
            let index = state.next;
            let Some((kind, body)) = self.responses.get(index) else {
                return Err(ModelError::ReplayExhausted { turn: index + 1, responses: self.responses.len() });
            };
            state.next += 1;
            drop(state);
            wire::parse(*kind, body, turn.tools, turn.calls_so_far(), Mode::Replay)
        })();
        Box::pin(async move { result })
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[test]
    fn a_line_that_is_not_json_keeps_the_parsers_error() {
        let e = Replay::from_jsonl("{\"message\": {}}\n\nnot json\n", "x").unwrap_err();
        assert_eq!(e.to_string(), "replay script, line 3: not JSON (column 2)");
        let json = e.source().and_then(|s| s.downcast_ref::<serde_json::Error>()).expect("serde_json's error");
        assert_eq!(json.column(), 2);
        // JSON, but no response: nothing else went wrong, so no source.
        let e = Replay::from_jsonl("{\"answer\": 42}", "x").unwrap_err();
        assert!(matches!(&e, ModelError::Replay { line: 1, source: None, .. }), "{e:?}");
        assert!(e.source().is_none());
    }

    #[test]
    fn a_file_that_cannot_be_read_keeps_the_io_error() {
        let e = Replay::from_file("no/such/file.jsonl").unwrap_err();
        let io = e.source().and_then(|s| s.downcast_ref::<std::io::Error>()).expect("the io::Error");
        assert_eq!(io.kind(), std::io::ErrorKind::NotFound);
        assert_eq!(e.to_string(), format!("replay script: cannot read no/such/file.jsonl: {io}"));
    }
}
