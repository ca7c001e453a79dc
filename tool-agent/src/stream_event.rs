//! [`StreamEvent`]: what a turn shows while its answer arrives, and the [`StreamSink`] that receives it.

use serde::Serialize;

/// What a turn shows while its answer arrives (see [`Agent::on_stream`](crate::Agent::on_stream)).
///
/// A call's events say what the model is writing, not what will run: a call runs only once the whole answer has
/// arrived and its arguments pass validation, exactly as with an answer read whole. Serialized with an `event`
/// tag: `{"event": "call_started", "index": 0, "id": "call_1", "name": "incident.lookup"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum StreamEvent {
    /// A model request is about to be sent: the 1-based turn, and the attempt (1, then 2 for its first retry). A
    /// waiting indicator starts here; a later attempt discards what an earlier one streamed.
    Waiting {
        /// The 1-based model turn.
        turn: u32,
        /// The 1-based attempt of that turn.
        attempt: u32,
    },
    /// Text arrived.
    TextDelta {
        /// The new text.
        delta: String,
    },
    /// A tool call began.
    CallStarted {
        /// Its position among the answer's calls (as the provider numbers them: an output or block index for
        /// some).
        index: usize,
        /// Its id, when the provider sent one at the start.
        #[serde(skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// The tool's registered name (a wire name mapped back; kept as sent when no tool has it).
        name: String,
    },
    /// A piece of a call's arguments, JSON text as the model writes it.
    CallArgumentsDelta {
        /// The call's index, as in [`StreamEvent::CallStarted`].
        index: usize,
        /// The new text.
        delta: String,
    },
    /// A call's arguments are complete.
    CallComplete {
        /// The call's index, as in [`StreamEvent::CallStarted`].
        index: usize,
    },
}

/// Receives the [`StreamEvent`]s of a run. Implementations must not panic and should return quickly: they run
/// on the task that reads the stream.
pub trait StreamSink: Send + Sync {
    /// Receives one event.
    fn event(&self, event: &StreamEvent);
}

impl<F: Fn(&StreamEvent) + Send + Sync> StreamSink for F {
    fn event(&self, event: &StreamEvent) {
        self(event);
    }
}
