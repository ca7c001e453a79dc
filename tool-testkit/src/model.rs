//! Models for tests of the agent loop: [`TestModel`] calls the tools it is shown with generated arguments, then
//! answers; [`ScriptedModel`] plays given turns. Neither asks a model: both are [`Mode::Replay`].

use std::sync::{Mutex, MutexGuard};

use proptest::strategy::{Strategy, ValueTree};
use serde_json::{Map, Value, json};

use crate::imports::{
    AssistantMessage, BoxFuture, ChatModel, Message, Mode, ModelError, Provider, SeenTurn, ToolDefinition, Turn,
    WireFormat,
};

/// The arguments of one scripted call.
#[derive(Debug, Clone, PartialEq)]
enum Arguments {
    Json(Value),
    /// Sent as the model's text, unparsed: for malformed arguments.
    Text(String),
}

/// One call an assistant message carries: the registered name and the arguments.
type Call = (String, Arguments);

/// What a model of this module recorded.
#[derive(Debug, Default)]
struct Record {
    seen: Vec<SeenTurn>,
    sent: Vec<AssistantMessage>,
    notes: Vec<String>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn seen(turn: &Turn<'_>) -> SeenTurn {
    SeenTurn {
        messages: turn.messages.iter().map(Message::to_json).collect(),
        tools: turn.tools.names().map(str::to_owned).collect(),
    }
}

/// The assistant message carrying `text` and `calls`, written as the provider of `format` writes it (wire names
/// for OpenAI, arguments as JSON text) and read back by the turn's codec, as a response from a server is.
fn reply(turn: &Turn<'_>, format: WireFormat, text: &str, calls: &[Call]) -> Result<AssistantMessage, ModelError> {
    let first = turn.calls_so_far();
    let (provider, wire) = match format {
        WireFormat::Ollama => {
            let codec = turn.tools.codec(Provider::Ollama);
            let calls: Vec<Value> = calls
                .iter()
                .enumerate()
                .map(|(i, (name, arguments))| {
                    let arguments = match arguments {
                        Arguments::Json(v) => v.clone(),
                        Arguments::Text(t) => Value::String(t.clone()),
                    };
                    json!({"id": format!("call_{}", first + i), "function": {"name": codec.shown_name(name), "arguments": arguments}})
                })
                .collect();
            let mut message = json!({"role": "assistant", "content": text});
            if !calls.is_empty() {
                message["tool_calls"] = Value::Array(calls);
            }
            (Provider::Ollama, message)
        }
        _ => {
            let codec = turn.tools.codec(Provider::OpenAiChat);
            let calls: Vec<Value> = calls
                .iter()
                .enumerate()
                .map(|(i, (name, arguments))| {
                    let arguments = match arguments {
                        Arguments::Json(v) => v.to_string(),
                        Arguments::Text(t) => t.clone(),
                    };
                    json!({
                        "id": format!("call_{}", first + i),
                        "type": "function",
                        "function": {"name": codec.shown_name(name), "arguments": arguments},
                    })
                })
                .collect();
            let content =
                if text.is_empty() && !calls.is_empty() { Value::Null } else { Value::String(text.to_owned()) };
            let mut message = json!({"role": "assistant", "content": content});
            if !calls.is_empty() {
                message["tool_calls"] = Value::Array(calls);
            }
            (Provider::OpenAiChat, message)
        }
    };
    // Formats other than Ollama's are written as Chat Completions, and say so.
    let format = if provider == Provider::Ollama { WireFormat::Ollama } else { WireFormat::OpenAiChat };
    let parsed = turn.tools.codec(provider).message(&wire, first).map_err(|e| ModelError::Malformed {
        message: format!("the assistant message: {e}"),
        source: Some(std::sync::Arc::new(e)),
    })?;
    Ok(AssistantMessage {
        content: parsed.text,
        calls: parsed.calls,
        wire: parsed.message,
        format,
        mode: Mode::Replay,
        usage: None,
    })
}

/// A [`ChatModel`] for tests of the loop, like pydantic-ai's `TestModel`: on its first turn it calls every tool it
/// is shown (or the ones chosen with [`TestModel::tools`]) once, with arguments generated from each tool's argument
/// schema ([`schema::arguments`](crate::schema::arguments), deterministic from [`TestModel::seed`]); once the
/// results are back, it answers with a final text: [`TestModel::final_text`], or by default a JSON object of each
/// tool's result (its data, or `{"error": code}`).
///
/// The calls are written as the provider writes them (OpenAI Chat by default: wire names such as `notes-search`,
/// arguments as JSON text; or Ollama's, [`TestModel::format`]) and read back by the codec of the turn's view, so
/// they go through the same path as a real model's. It records what it was given and what it sent.
///
/// ```
/// use keel_tools_agent::{Agent, Message};
/// use keel_tools_core::{tool, Executor, Registry};
/// use keel_tools_core::runs::Run;
/// use keel_tools_testkit::TestModel;
///
/// /// Looks up a user.
/// #[tool(effect = "read", version = "1.0")]
/// fn lookup_user(user_id: u32) -> String {
///     format!("user {user_id}")
/// }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let view = Registry::from_inventory().unwrap().view().names(["lookup_user"]).build().unwrap();
/// let mut run = Run::new(Executor::new(view).unwrap());
/// let model = TestModel::new().seed(1);
/// let mut messages = vec![Message::user("Who is user 7?")];
/// let outcome = Agent::new(&model).run(&mut run, &mut messages).await.unwrap();
/// assert_eq!(outcome.steps, 1);
/// let answer: serde_json::Value = serde_json::from_str(&outcome.answer.unwrap()).unwrap();
/// assert!(answer["lookup_user"].as_str().unwrap().starts_with("user "));
/// assert_eq!(model.sent()[0].calls[0].name(), "lookup_user");
/// # });
/// ```
#[derive(Debug)]
pub struct TestModel {
    seed: u64,
    tools: Option<Vec<String>>,
    final_text: Option<String>,
    format: WireFormat,
    record: Mutex<Record>,
}

impl Default for TestModel {
    fn default() -> TestModel {
        TestModel::new()
    }
}

impl TestModel {
    /// Calls every tool it is shown, seed 0, OpenAI Chat's format, the results as the answer.
    pub fn new() -> TestModel {
        TestModel { seed: 0, tools: None, final_text: None, format: WireFormat::OpenAiChat, record: Mutex::default() }
    }

    /// The seed of the generated arguments (default 0): the same seed, tools and conversation give the same calls.
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Calls only these of the tools it is shown (names it is not shown are ignored).
    #[must_use]
    pub fn tools<I, N>(mut self, names: I) -> Self
    where
        I: IntoIterator<Item = N>,
        N: Into<String>,
    {
        self.tools = Some(names.into_iter().map(Into::into).collect());
        self
    }

    /// The final answer, instead of the JSON of the results.
    #[must_use]
    pub fn final_text(mut self, text: impl Into<String>) -> Self {
        self.final_text = Some(text.into());
        self
    }

    /// The provider format its messages are written in (default [`WireFormat::OpenAiChat`]): Ollama's, or Chat
    /// Completions for any other.
    #[must_use]
    pub fn format(mut self, format: WireFormat) -> Self {
        self.format = format;
        self
    }

    /// What each turn was given.
    pub fn seen(&self) -> Vec<SeenTurn> {
        lock(&self.record).seen.clone()
    }

    /// What it answered, turn by turn.
    pub fn sent(&self) -> Vec<AssistantMessage> {
        lock(&self.record).sent.clone()
    }

    /// What the generated arguments do not cover, tool by tool: a tool called with `{}` because the generator does
    /// not understand its argument schema, a part of a schema left out, a pattern not matched.
    pub fn notes(&self) -> Vec<String> {
        lock(&self.record).notes.clone()
    }

    /// Arguments for `def`, generated from its schema; `{}` (and a note) when the schema is not understood.
    fn arguments(&self, def: &ToolDefinition, turn_index: usize) -> Value {
        let strategy = match crate::schema::lenient_arguments(def.input_schema()) {
            Ok((s, notes)) => {
                let mut record = lock(&self.record);
                record.notes.extend(notes.into_iter().map(|n| format!("tool `{}`: {n}", def.name())));
                s
            }
            Err(e) => {
                lock(&self.record).notes.push(format!("tool `{}` called with {{}}: {e}", def.name()));
                return json!({});
            }
        };
        let mut runner = crate::seed::runner(self.seed, def.name(), 16 + turn_index as u64, 1);
        match strategy.new_tree(&mut runner) {
            Ok(tree) => tree.current(),
            Err(reason) => {
                lock(&self.record).notes.push(format!("tool `{}` called with {{}}: {reason}", def.name()));
                json!({})
            }
        }
    }

    fn answer(&self, turn: &Turn<'_>) -> String {
        if let Some(text) = &self.final_text {
            return text.clone();
        }
        // The results since the last assistant message.
        let mut results = Map::new();
        for message in turn.messages.iter().rev() {
            match message {
                Message::Tool(r) => {
                    let value = match r.error() {
                        None => r.data().cloned().unwrap_or(Value::Null),
                        Some(e) => json!({"error": e.code.as_str()}),
                    };
                    results.entry(r.tool_name.clone()).or_insert(value);
                }
                Message::Assistant(_) => break,
                _ => {}
            }
        }
        if results.is_empty() { "success (no tool calls)".to_owned() } else { Value::Object(results).to_string() }
    }

    fn turn(&self, turn: &Turn<'_>) -> Result<AssistantMessage, ModelError> {
        lock(&self.record).seen.push(seen(turn));
        let answered = matches!(turn.messages.last(), Some(Message::Tool(_)));
        let calls: Vec<Call> = if answered {
            Vec::new()
        } else {
            let turn_index = turn.messages.iter().filter(|m| matches!(m, Message::Assistant(_))).count();
            turn.tools
                .iter()
                .filter(|d| self.tools.as_ref().is_none_or(|only| only.iter().any(|n| n == d.name())))
                .map(|d| (d.name().to_owned(), Arguments::Json(self.arguments(d, turn_index))))
                .collect()
        };
        let text = if calls.is_empty() { self.answer(turn) } else { String::new() };
        let message = reply(turn, self.format, &text, &calls)?;
        lock(&self.record).sent.push(message.clone());
        Ok(message)
    }
}

impl ChatModel for TestModel {
    fn mode(&self) -> Mode {
        Mode::Replay
    }

    fn label(&self) -> String {
        let which = match &self.tools {
            None => "every tool shown".to_owned(),
            Some(names) => names.join(", "),
        };
        format!(
            "test model (seed {}): calls {which} with generated arguments, then answers; no model involved",
            self.seed
        )
    }

    fn chat<'a>(&'a self, turn: Turn<'a>) -> BoxFuture<'a, Result<AssistantMessage, ModelError>> {
        let result = self.turn(&turn);
        Box::pin(async move { result })
    }
}

/// One turn of a [`ScriptedModel`]: a text and the calls it carries.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScriptedTurn {
    text: String,
    calls: Vec<Call>,
}

impl ScriptedTurn {
    /// An empty turn: no text, no calls.
    pub fn new() -> ScriptedTurn {
        ScriptedTurn::default()
    }

    /// The turn's text.
    #[must_use]
    pub fn text(mut self, text: impl Into<String>) -> Self {
        self.text = text.into();
        self
    }

    /// A call of the registered tool `name` with `arguments`.
    #[must_use]
    pub fn call(mut self, name: impl Into<String>, arguments: Value) -> Self {
        self.calls.push((name.into(), Arguments::Json(arguments)));
        self
    }

    /// A call whose arguments are sent as this text, unparsed (say, JSON that does not parse).
    #[must_use]
    pub fn call_text(mut self, name: impl Into<String>, arguments: impl Into<String>) -> Self {
        self.calls.push((name.into(), Arguments::Text(arguments.into())));
        self
    }
}

/// A [`ChatModel`] that plays given turns in order: tool calls by registered name and arguments, then a text.
/// Like [`TestModel`], each turn is written in a provider's format and read back by the turn's codec; past the
/// last turn it fails with [`ModelError::ReplayExhausted`].
///
/// ```
/// use serde_json::json;
/// use keel_tools_agent::{Agent, Message};
/// use keel_tools_core::{tool, Executor, Registry};
/// use keel_tools_core::events::Decision;
/// use keel_tools_core::runs::Run;
/// use keel_tools_testkit::ScriptedModel;
///
/// /// Doubles a number.
/// #[tool(effect = "read", version = "1.0")]
/// fn double(n: i32) -> i64 {
///     i64::from(n) * 2
/// }
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let view = Registry::from_inventory().unwrap().view().names(["double"]).build().unwrap();
/// let mut run = Run::new(Executor::new(view).unwrap());
/// let model = ScriptedModel::new().calls([("double", json!({"n": 21}))]).text("42");
/// let mut messages = vec![Message::user("Double 21.")];
/// let outcome = Agent::new(&model).run(&mut run, &mut messages).await.unwrap();
/// assert_eq!((outcome.terminal, outcome.answer.as_deref()), (Decision::Done, Some("42")));
/// assert!(matches!(&messages[2], Message::Tool(r) if r.data() == Some(&json!(42))));
/// # });
/// ```
#[derive(Debug)]
pub struct ScriptedModel {
    turns: Vec<ScriptedTurn>,
    format: WireFormat,
    next: Mutex<usize>,
    record: Mutex<Record>,
}

impl Default for ScriptedModel {
    fn default() -> ScriptedModel {
        ScriptedModel::new()
    }
}

impl ScriptedModel {
    /// No turns yet; OpenAI Chat's format.
    pub fn new() -> ScriptedModel {
        ScriptedModel {
            turns: Vec::new(),
            format: WireFormat::OpenAiChat,
            next: Mutex::new(0),
            record: Mutex::default(),
        }
    }

    /// A turn of these calls (registered names and arguments), without text.
    #[must_use]
    pub fn calls<I, N>(self, calls: I) -> Self
    where
        I: IntoIterator<Item = (N, Value)>,
        N: Into<String>,
    {
        let turn = calls.into_iter().fold(ScriptedTurn::new(), |t, (name, arguments)| t.call(name, arguments));
        self.turn(turn)
    }

    /// A turn of text only: the model's answer.
    #[must_use]
    pub fn text(self, text: impl Into<String>) -> Self {
        self.turn(ScriptedTurn::new().text(text))
    }

    /// A turn.
    #[must_use]
    pub fn turn(mut self, turn: ScriptedTurn) -> Self {
        self.turns.push(turn);
        self
    }

    /// The provider format its messages are written in (default [`WireFormat::OpenAiChat`]): Ollama's, or Chat
    /// Completions for any other.
    #[must_use]
    pub fn format(mut self, format: WireFormat) -> Self {
        self.format = format;
        self
    }

    /// How many turns have not been played yet.
    pub fn remaining(&self) -> usize {
        self.turns.len().saturating_sub(*lock(&self.next))
    }

    /// What each turn played so far was given.
    pub fn seen(&self) -> Vec<SeenTurn> {
        lock(&self.record).seen.clone()
    }

    /// What it answered, turn by turn.
    pub fn sent(&self) -> Vec<AssistantMessage> {
        lock(&self.record).sent.clone()
    }

    fn turn_reply(&self, turn: &Turn<'_>) -> Result<AssistantMessage, ModelError> {
        lock(&self.record).seen.push(seen(turn));
        let index = {
            let mut next = lock(&self.next);
            let index = *next;
            if index >= self.turns.len() {
                return Err(ModelError::ReplayExhausted { turn: index + 1, responses: self.turns.len() });
            }
            *next += 1;
            index
        };
        let scripted = &self.turns[index];
        let message = reply(turn, self.format, &scripted.text, &scripted.calls)?;
        lock(&self.record).sent.push(message.clone());
        Ok(message)
    }
}

impl ChatModel for ScriptedModel {
    fn mode(&self) -> Mode {
        Mode::Replay
    }

    fn label(&self) -> String {
        format!("scripted model ({} turns; written by hand, no model involved)", self.turns.len())
    }

    fn chat<'a>(&'a self, turn: Turn<'a>) -> BoxFuture<'a, Result<AssistantMessage, ModelError>> {
        let result = self.turn_reply(&turn);
        Box::pin(async move { result })
    }
}
