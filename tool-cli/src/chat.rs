//! `keel chat`: the agent loop from the command line, over the linked tools, against a model server of one of five
//! APIs (or a recorded script).

use std::collections::HashSet;
use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use clap::{Args as ClapArgs, ValueEnum};
use keel_tools_agent::{
    Agent, AnthropicClient, AssistantMessage, BoxFuture, ChatModel, ChoicePolicy, GeminiClient, Message, Mode,
    ModelError, OllamaClient, OpenAiClient, Replay, ResponsesClient, RetryPolicy, StreamEvent, ToolChoice, Turn,
};
use keel_tools_core::ToolResult;
use keel_tools_core::events::{Decision, Event, EventKind, EventSink};
use keel_tools_core::results::{ErrorBody, ErrorCode};
use keel_tools_core::runs::{PendingCall, Resolution, Run};
use tokio::sync::mpsc;

use crate::failure::{Failure, Outcome, fail, io};

/// The arguments of `keel chat`.
#[derive(ClapArgs, Debug)]
#[command(after_help = "Examples:\n  keel chat --url http://127.0.0.1:8080/v1 --model smollm2 \
    --tool-choice incident.lookup --then-tool-choice none 'Look up incident INC-001.'\n  \
    keel chat --api ollama --url http://localhost:11434 --model qwen3 --approve ticket.close 'Close T-1.'\n  \
    keel chat --url https://api.openai.com/v1 --model gpt-4.1-mini --api-key-env OPENAI_API_KEY 'Look up INC-001.'\n  \
    keel chat --api anthropic --url https://api.anthropic.com --model claude-sonnet-4-5 'Look up INC-001.'\n  \
    keel chat --api gemini --url https://generativelanguage.googleapis.com/v1beta --model gemini-2.5-flash \
    'Look up INC-001.'\n  \
    keel chat --replay transcript.jsonl 'Look up incident INC-001.'\n  \
    keel chat --url http://127.0.0.1:8080/v1 --model smollm2 --forward files=http://127.0.0.1:9000/mcp \
    'What is in notes.txt?'    # the server's tools as files.*, pinned by keel.lock (keel lock --forward)")]
pub(crate) struct ChatArgs {
    /// What to ask.
    prompt: String,
    /// The server's base URL: OpenAI's (Chat Completions and Responses) end in `/v1`; Ollama's and Anthropic's are
    /// the root; Gemini's ends in `/v1beta`.
    #[arg(long, required_unless_present = "replay")]
    url: Option<String>,
    /// The model's name on that server.
    #[arg(long, required_unless_present = "replay")]
    model: Option<String>,
    /// The server's API.
    #[arg(long, value_enum, default_value = "openai")]
    api: Api,
    /// The environment variable that holds the API key, sent as the API wants it (`Authorization: Bearer`,
    /// `x-api-key`, `x-goog-api-key`). Without it, an `https://` URL gets the API's conventional variable when that
    /// is set (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`, `GEMINI_API_KEY` or else `GOOGLE_API_KEY`, `OLLAMA_API_KEY`
    /// for Ollama's hosted API); a plain `http://` URL gets no key. A key goes only over `https://` or to a
    /// loopback host.
    #[arg(long, value_name = "NAME", conflicts_with = "replay")]
    api_key_env: Option<String>,
    /// The tool choice of the first turn: `auto`, `none`, `required`, or a tool's name.
    #[arg(long, default_value = "auto", value_name = "CHOICE")]
    tool_choice: String,
    /// The tool choice of every later turn (forcing a tool on every turn loops until the turn limit).
    #[arg(long, default_value = "auto", value_name = "CHOICE")]
    then_tool_choice: String,
    /// Sampling temperature.
    #[arg(long)]
    temperature: Option<f64>,
    /// Sampling seed.
    #[arg(long)]
    seed: Option<i64>,
    /// The most tokens of one reply.
    #[arg(long)]
    max_tokens: Option<u32>,
    /// The most model turns.
    #[arg(long, default_value_t = 8)]
    max_turns: u32,
    /// The most retries of a model request that failed with a 429, a 5xx, a broken connection or a timeout
    /// (0: none). Each waits what the server asked for, or backs off exponentially.
    #[arg(long, default_value_t = 2, value_name = "N")]
    retries: u32,
    /// Approve every call of this tool, whatever its arguments (repeat for more tools). Without it, a call that
    /// needs an approval is shown with its exact arguments and asked about when stdin is a terminal; otherwise
    /// the run stops there, `needs_input`.
    #[arg(long = "approve", value_name = "NAME")]
    approve: Vec<String>,
    /// A system message first.
    #[arg(long)]
    system: Option<String>,
    /// Write the model's responses to this file as JSON Lines, which `--replay` (and `keel_tools_agent::Replay`) reads.
    #[arg(long, value_name = "FILE")]
    transcript: Option<PathBuf>,
    /// Stream each answer: text and tool-call deltas are shown as they arrive (a tool still runs only once the
    /// whole answer has arrived).
    #[arg(long, conflicts_with = "replay")]
    stream: bool,
    /// What is shown on stderr around the answer: `text` (the default: a line for each call the model asks for,
    /// its arguments, and how it was answered; retries; a waiting indicator on a terminal), `json` (the run's whole
    /// log as JSON Lines, with the model's turns and retries, and with `--stream` the text and tool-call deltas),
    /// or `none`. The model's answer goes to stdout whatever this is.
    #[arg(long, value_enum, value_name = "FORMAT")]
    events: Option<Events>,
    /// Print the answer alone (`--events none`).
    #[arg(long, short = 'q', conflicts_with = "events")]
    quiet: bool,
    /// How deferred tools (`#[tool(defer)]`) are found, when any is: `native`, the provider's own tool search
    /// where its API has one (Anthropic, OpenAI Responses) and keel's `search_tools` elsewhere; `keel`, keel's
    /// `search_tools` on every API; `off`, every tool sent in full.
    #[arg(long, value_enum, default_value = "native", value_name = "HOW")]
    tool_search: crate::tool_search::ToolSearchArg,
    /// Answer from a recorded script (JSON Lines of responses) instead of a server.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["url", "model"])]
    replay: Option<PathBuf>,
    #[command(flatten)]
    forward: crate::forward::ForwardArgs,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Api {
    /// OpenAI Chat Completions (`/chat/completions` under the URL): OpenAI, llama.cpp, vLLM, Ollama's `/v1`.
    Openai,
    /// OpenAI Responses (`/responses` under the URL).
    OpenaiResponses,
    /// Anthropic Messages (`/v1/messages` under the URL).
    Anthropic,
    /// Gemini `generateContent` (`/models/{model}:generateContent` under the URL).
    Gemini,
    /// Ollama's own `/api/chat`.
    Ollama,
}

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Events {
    /// JSON Lines.
    Json,
    /// Lines for people.
    Text,
    /// Nothing.
    None,
}

fn choice(text: &str) -> ToolChoice {
    match text {
        "auto" => ToolChoice::Auto,
        "none" => ToolChoice::None,
        "required" => ToolChoice::Required,
        name => ToolChoice::tool(name),
    }
}

fn model(args: &ChatArgs) -> Result<Box<dyn ChatModel>, Failure> {
    if let Some(path) = &args.replay {
        return Ok(Box::new(Replay::from_file(path).map_err(|e| fail(1, e.to_string()))?));
    }
    let (url, name) = (args.url.clone().unwrap_or_default(), args.model.clone().unwrap_or_default());
    let policy = ChoicePolicy::first_then(choice(&args.tool_choice), choice(&args.then_tool_choice));
    macro_rules! configure {
        ($builder:expr) => {{
            let mut b = $builder.choice_policy(policy);
            if let Some(t) = args.temperature {
                b = b.temperature(t);
            }
            if let Some(s) = args.seed {
                b = b.seed(s);
            }
            if let Some(m) = args.max_tokens {
                b = b.max_tokens(m);
            }
            b = b.stream(args.stream);
            b.build().map_err(|e| fail(2, e.to_string()))
        }};
    }
    let key = api_key(args.api, args.api_key_env.as_deref(), &url, |name| std::env::var_os(name))?;
    let key = key.unwrap_or_default();
    Ok(match args.api {
        Api::Openai => Box::new(configure!(OpenAiClient::builder(url, name).api_key(key))?),
        Api::OpenaiResponses => Box::new(configure!(
            ResponsesClient::builder(url, name).api_key(key).tool_search(args.tool_search.agent())
        )?),
        Api::Anthropic => Box::new(configure!(
            AnthropicClient::builder(url, name).api_key(key).tool_search(args.tool_search.agent())
        )?),
        Api::Gemini => Box::new(configure!(GeminiClient::builder(url, name).api_key(key))?),
        Api::Ollama => Box::new(configure!(OllamaClient::builder(url, name).api_key(key))?),
    })
}

/// The API key of `keel chat`: the variable named by `--api-key-env` (which must hold one), else the API's
/// conventional variable for an `https://` URL when it is set, else none. `var` reads the environment.
fn api_key(
    api: Api,
    flag: Option<&str>,
    url: &str,
    var: impl Fn(&str) -> Option<std::ffi::OsString>,
) -> Result<Option<String>, Failure> {
    let read = |name: &str, required: bool| -> Result<Option<String>, Failure> {
        match var(name) {
            None if required => Err(fail(2, format!("--api-key-env {name}: the variable is not set"))),
            None => Ok(None),
            Some(value) => match value.into_string() {
                Ok(key) if key.trim().is_empty() && required => {
                    Err(fail(2, format!("--api-key-env {name}: the variable is empty")))
                }
                Ok(key) => Ok(Some(key)),
                Err(_) => Err(fail(2, format!("the variable {name} is not UTF-8, so it is not an API key"))),
            },
        }
    };
    if let Some(name) = flag {
        return read(name, true);
    }
    if !url.trim_start().to_ascii_lowercase().starts_with("https://") {
        return Ok(None);
    }
    use keel_tools_agent::key::vars;
    let conventional: &[&str] = match api {
        Api::Openai | Api::OpenaiResponses => &[vars::OPENAI],
        Api::Anthropic => &[vars::ANTHROPIC],
        Api::Gemini => &[vars::GEMINI, vars::GOOGLE],
        Api::Ollama => &[vars::OLLAMA],
    };
    for name in conventional {
        if let Some(key) = read(name, false)? {
            return Ok(Some(key));
        }
    }
    Ok(None)
}

/// What the printing side is sent: an event of the run's log or of the model's stream, a model's reply, or a
/// call's answer.
enum Shown {
    Run(Box<Event>),
    Stream(StreamEvent),
    /// The model answered a turn: its text, and the calls it asked for (name, arguments as compact JSON).
    Reply {
        text: String,
        calls: Vec<(String, String)>,
    },
    /// The answer to one call.
    Outcome(Box<ToolResult>),
}

/// Sends each event of the run to the printing side as it is appended.
struct Forward(mpsc::UnboundedSender<Shown>);

impl EventSink for Forward {
    fn record(&self, event: &Event) {
        let _ = self.0.send(Shown::Run(Box::new(event.clone())));
    }
}

/// The answers already shown, by call id and outcome (a call that waited for an approval is shown again when it
/// is answered).
type Seen = Arc<Mutex<HashSet<(String, Option<String>)>>>;

/// The model as the command runs it: each reply and each call's answer goes to the printing side as the loop
/// meets it (the answers of a batch when the next turn is sent, or when the loop returns).
struct Watched<'m> {
    inner: &'m dyn ChatModel,
    tx: mpsc::UnboundedSender<Shown>,
    seen: Seen,
}

impl Watched<'_> {
    /// Sends the answers among `messages` not shown yet.
    fn answers(&self, messages: &[Message]) {
        send_answers(&self.tx, &self.seen, messages);
    }
}

fn send_answers(tx: &mpsc::UnboundedSender<Shown>, seen: &Seen, messages: &[Message]) {
    let mut seen = seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    for message in messages {
        if let Message::Tool(result) = message
            && seen.insert((result.call_id.clone(), result.code().map(str::to_owned)))
        {
            let _ = tx.send(Shown::Outcome(Box::new(result.clone())));
        }
    }
}

impl ChatModel for Watched<'_> {
    fn mode(&self) -> Mode {
        self.inner.mode()
    }
    fn label(&self) -> String {
        self.inner.label()
    }
    fn chat<'a>(&'a self, turn: Turn<'a>) -> BoxFuture<'a, Result<AssistantMessage, ModelError>> {
        self.answers(turn.messages);
        Box::pin(async move {
            let reply = self.inner.chat(turn).await?;
            let calls = reply
                .calls
                .iter()
                .map(|c| {
                    let arguments = match c.arguments() {
                        Ok(v) => v.to_string(),
                        Err(e) => format!("<{e}>"),
                    };
                    (c.name().to_owned(), arguments)
                })
                .collect();
            let _ = self.tx.send(Shown::Reply { text: reply.content.clone(), calls });
            Ok(reply)
        })
    }
    fn tool_choice(&self, turn: &Turn<'_>) -> Result<Option<ToolChoice>, ModelError> {
        self.inner.tool_choice(turn)
    }
    fn telemetry(&self) -> Option<(&str, &'static str)> {
        self.inner.telemetry()
    }
}

/// Prints what it is sent. The model's answer goes to stdout, whole, as it streams or when its turn ends; what
/// happens around it goes to stderr, as `--events` says: short lines for people (`text`), JSON Lines (`json`), or
/// nothing (`none`, `--quiet`).
struct Printer {
    events: Events,
    /// Whether stderr is a terminal (the waiting indicator is drawn only there).
    terminal: bool,
    /// Whether the answer's text is streamed (then a reply's text was printed already, delta by delta).
    streamed: bool,
    /// Whether the waiting indicator is showing.
    waiting: bool,
    /// Whether text was printed to stdout since the last newline.
    mid_line: bool,
    /// Whether this turn streamed any text yet.
    streamed_this_turn: bool,
}

/// `text` on one line, cut to about `max` characters: for the activity lines, never for the answer.
fn one_line(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        flat
    } else {
        let mut s: String = flat.chars().take(max).collect();
        s.push('…');
        s
    }
}

/// The line that says how a call was answered.
fn outcome_line(result: &ToolResult) -> String {
    let name = &result.tool_name;
    match result.error() {
        None => format!("← {name}: ok {}", one_line(&result.content_text(), 80)),
        Some(e) if e.code == ErrorCode::ApprovalRequired => format!("← {name}: needs an approval"),
        Some(e) if result.executed => format!("← {name}: error {}: {}", e.code, one_line(&e.message, 160)),
        Some(e) => format!("← {name}: refused {}: {}", e.code, one_line(&e.message, 160)),
    }
}

impl Printer {
    fn show(&mut self, shown: Shown, out: &mut dyn Write, err: &mut dyn Write) {
        if self.waiting {
            let _ = write!(err, "\r\x1b[K");
            self.waiting = false;
        }
        if let Shown::Stream(StreamEvent::TextDelta { delta }) = &shown
            && self.streamed
        {
            let _ = write!(out, "{delta}");
            let _ = out.flush();
            self.streamed_this_turn = true;
            if !delta.is_empty() {
                self.mid_line = !delta.ends_with('\n');
            }
        }
        match shown {
            Shown::Reply { text, calls } => {
                if !self.streamed && !text.trim().is_empty() {
                    let _ = write!(out, "{text}");
                    self.mid_line = !text.ends_with('\n');
                }
                self.end_line(out);
                let _ = out.flush();
                self.streamed_this_turn = false;
                if self.events == Events::Text {
                    for (name, arguments) in calls {
                        let _ = writeln!(err, "→ {name} {}", one_line(&arguments, 200));
                    }
                }
            }
            Shown::Outcome(result) => {
                if self.events == Events::Text {
                    self.end_line(out);
                    let _ = writeln!(err, "{}", outcome_line(&result));
                }
            }
            Shown::Run(e) => match self.events {
                Events::Json => {
                    let _ = serde_json::to_string(&e).map(|l| writeln!(err, "{l}"));
                }
                Events::Text => self.run_line(&e, out, err),
                Events::None => {}
            },
            Shown::Stream(e) => match self.events {
                Events::Json => {
                    let _ = serde_json::to_string(&e).map(|l| writeln!(err, "{l}"));
                }
                Events::Text => self.stream_line(&e, out, err),
                Events::None => {}
            },
        }
        let _ = err.flush();
    }

    /// The run's events that a person wants to see: retries and what a search found.
    fn run_line(&mut self, event: &Event, out: &mut dyn Write, err: &mut dyn Write) {
        match &event.kind {
            EventKind::ModelRetry { attempt, reason, wait_ms, .. } => {
                self.end_line(out);
                let seconds = *wait_ms as f64 / 1000.0;
                let _ = writeln!(err, "… the model request failed ({reason}); retry {attempt} in {seconds:.1} s");
            }
            EventKind::ToolsSurfaced { tools, via, .. } if !tools.is_empty() => {
                self.end_line(out);
                let _ = writeln!(err, "  found {} (by {via})", tools.join(", "));
            }
            _ => {}
        }
    }

    fn stream_line(&mut self, event: &StreamEvent, out: &mut dyn Write, err: &mut dyn Write) {
        if let StreamEvent::Waiting { turn, attempt } = event {
            if *attempt > 1 && self.streamed_this_turn {
                self.end_line(out);
                let _ = writeln!(err, "… the answer above was cut off; asking again");
                self.streamed_this_turn = false;
            }
            if self.terminal {
                let again = if *attempt > 1 { format!(", attempt {attempt}") } else { String::new() };
                let _ = write!(err, "… waiting for the model (turn {turn}{again})");
                self.waiting = true;
            }
        }
    }

    fn end_line(&mut self, out: &mut dyn Write) {
        if self.mid_line {
            let _ = writeln!(out);
            let _ = out.flush();
            self.mid_line = false;
        }
    }
}

/// What to do about a call that needs an approval: from `--approve`, else the prompt on a terminal, else nothing.
fn decide(args: &ChatArgs, pending: &PendingCall, err: &mut dyn Write) -> Option<Resolution> {
    if args.approve.contains(&pending.tool_name) {
        return Some(Resolution::Approve);
    }
    if !std::io::stdin().is_terminal() {
        return None;
    }
    let arguments = serde_json::to_string_pretty(&pending.arguments).unwrap_or_default();
    let _ = write!(
        err,
        "`{}` {} needs an approval ({}):\n{arguments}\napprove? [y/N] ",
        pending.tool_name, pending.tool_version, pending.reason
    );
    let _ = err.flush();
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).ok()?;
    Some(if matches!(line.trim(), "y" | "Y" | "yes") {
        Resolution::Approve
    } else {
        Resolution::deny("the user denied this call")
    })
}

/// Asks the model over `linked` and the forwarded servers' tools; `executor` makes the executor of a view.
pub(crate) fn chat(
    linked: keel_tools_core::ToolView,
    executor: &dyn Fn(keel_tools_core::ToolView) -> Result<keel_tools_core::Executor, crate::failure::Failure>,
    args: ChatArgs,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Outcome {
    let inner = model(&args)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| fail(1, format!("cannot start the runtime: {e}")))?;
    // Forwarded servers are connected on this runtime, which keeps their connections for the whole chat.
    let remote = runtime.block_on(args.forward.import(err))?;
    let executor = executor(args.tool_search.view(crate::forward::with_forwarded(&linked, &remote)?)?)?;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let seen = Seen::default();
    let model = Watched { inner: &*inner, tx: tx.clone(), seen: seen.clone() };
    let mut run = Run::builder(executor.clone()).sink(Arc::new(Forward(tx.clone()))).build();
    let terminal = std::io::stderr().is_terminal();
    let events = if args.quiet { Events::None } else { args.events.unwrap_or(Events::Text) };
    let mut printer =
        Printer { events, terminal, streamed: args.stream, waiting: false, mid_line: false, streamed_this_turn: false };
    if events == Events::Text && model.mode() == Mode::Replay {
        let _ = writeln!(
            err,
            "replaying {}: this shows how keel handles these responses, not how a model behaves",
            model.label()
        );
    }
    let mut messages = Vec::new();
    if let Some(system) = &args.system {
        messages.push(Message::system(system.clone()));
    }
    messages.push(Message::user(args.prompt.clone()));

    let mut turns_left = args.max_turns.max(1);
    let mut turns = 0;
    let outcome = loop {
        let retry = RetryPolicy::default().max_retries(args.retries);
        let stream = tx.clone();
        let agent = Agent::new(&model).max_turns(turns_left).retry(retry).on_stream(move |e: &StreamEvent| {
            let _ = stream.send(Shown::Stream(e.clone()));
        });
        let result = runtime.block_on(async {
            let run_loop = agent.run(&mut run, &mut messages);
            tokio::pin!(run_loop);
            loop {
                tokio::select! {
                    r = &mut run_loop => break r,
                    Some(shown) = rx.recv() => printer.show(shown, out, err),
                }
            }
        });
        send_answers(&tx, &seen, &messages);
        while let Ok(shown) = rx.try_recv() {
            printer.show(shown, out, err);
        }
        let outcome = match result {
            Ok(o) => o,
            Err(e) => {
                write_transcript(&args, &messages)?;
                printer.end_line(out);
                return Err(fail(1, e.to_string()));
            }
        };
        turns += outcome.turns;
        turns_left = turns_left.saturating_sub(outcome.turns);
        if outcome.terminal != Decision::NeedsInput || turns_left == 0 {
            break outcome;
        }
        // The calls that wait for an approval, as the run's last batch left them.
        let waiting: Vec<usize> = messages
            .iter()
            .enumerate()
            .filter(|(_, m)| matches!(m, Message::Tool(r) if r.code() == Some("approval_required")))
            .map(|(i, _)| i)
            .collect();
        let Some(&at) = waiting.last() else { break outcome };
        let Message::Tool(asked) = &messages[at] else { break outcome };
        let Some(pending) = PendingCall::from_result(&executor, asked, None, Duration::from_secs(3600)) else {
            break outcome;
        };
        let Some(resolution) = decide(&args, &pending, err) else { break outcome };
        if events == Events::Text && args.approve.contains(&pending.tool_name) {
            let _ = writeln!(err, "  approved by --approve {}", pending.tool_name);
        }
        let batch = runtime.block_on(run.resume(&pending, &resolution));
        while let Ok(shown) = rx.try_recv() {
            printer.show(shown, out, err);
        }
        let Some(answer) = batch.results.into_iter().next() else { break outcome };
        messages[at] = Message::Tool(answer);
        // The calls of that reply that never started get an answer too: every call id needs one.
        for skipped in &outcome.not_executed {
            let body = ErrorBody::new(ErrorCode::NotExecuted, "the batch stopped before this call; ask again");
            let reply = ToolResult::failure(skipped.call_id.clone(), skipped.tool_name.clone(), None, false, body);
            messages.push(Message::Tool(reply));
        }
        if run.terminal().is_some() {
            send_answers(&tx, &seen, &messages);
            while let Ok(shown) = rx.try_recv() {
                printer.show(shown, out, err);
            }
            break keel_tools_agent::AgentOutcome { terminal: run.terminal().unwrap_or(Decision::Error), ..outcome };
        }
    };
    write_transcript(&args, &messages)?;
    printer.end_line(out);
    out.flush().map_err(io)?;
    if outcome.terminal != Decision::Done && events != Events::Json {
        let what = match outcome.terminal {
            Decision::NeedsInput => {
                "a call needs an approval: run again with --approve NAME, or on a terminal to be asked".to_owned()
            }
            terminal => format!("the run ended {terminal} ({}) after {turns} turn(s)", outcome.reason),
        };
        let _ = writeln!(err, "keel: {what}");
    }
    Ok(if outcome.terminal == Decision::Done { 0 } else { 1 })
}

fn write_transcript(args: &ChatArgs, messages: &[Message]) -> Result<(), Failure> {
    if let Some(path) = &args.transcript {
        std::fs::write(path, Replay::script_of(messages))
            .map_err(|e| fail(1, format!("cannot write the transcript {}: {e}", path.display())))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    fn env(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<OsString> {
        move |name| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| OsString::from(v))
    }

    #[test]
    fn the_named_variable_must_hold_a_key() {
        let vars = env(&[("MY_KEY", "sk-1"), ("EMPTY", " "), ("OPENAI_API_KEY", "sk-conventional")]);
        let key = api_key(Api::Openai, Some("MY_KEY"), "http://127.0.0.1:8080/v1", &vars).unwrap();
        assert_eq!(key.as_deref(), Some("sk-1"));
        let missing = api_key(Api::Openai, Some("NOT_SET"), "https://x/v1", &vars).unwrap_err();
        assert_eq!((missing.code, missing.message.as_str()), (2, "--api-key-env NOT_SET: the variable is not set"));
        let empty = api_key(Api::Openai, Some("EMPTY"), "https://x/v1", &vars).unwrap_err();
        assert_eq!(empty.message, "--api-key-env EMPTY: the variable is empty");
    }

    #[test]
    fn the_conventional_variable_goes_to_https_urls_only() {
        let vars = env(&[("OPENAI_API_KEY", "sk-openai"), ("OLLAMA_API_KEY", "ol-1")]);
        let https = api_key(Api::Openai, None, "https://api.openai.com/v1", &vars).unwrap();
        assert_eq!(https.as_deref(), Some("sk-openai"));
        assert_eq!(api_key(Api::Ollama, None, "HTTPS://ollama.com", &vars).unwrap().as_deref(), Some("ol-1"));
        assert_eq!(api_key(Api::Openai, None, "http://127.0.0.1:8080/v1", &vars).unwrap(), None);
        assert_eq!(api_key(Api::Openai, None, "https://api.openai.com/v1", env(&[])).unwrap(), None);
        let vars = env(&[("ANTHROPIC_API_KEY", "sk-ant"), ("GOOGLE_API_KEY", "g-1"), ("OPENAI_API_KEY", "sk-o")]);
        assert_eq!(
            api_key(Api::Anthropic, None, "https://api.anthropic.com", &vars).unwrap().as_deref(),
            Some("sk-ant")
        );
        assert_eq!(api_key(Api::OpenaiResponses, None, "https://x/v1", &vars).unwrap().as_deref(), Some("sk-o"));
        let gemini = "https://generativelanguage.googleapis.com/v1beta";
        assert_eq!(api_key(Api::Gemini, None, gemini, &vars).unwrap().as_deref(), Some("g-1"), "the second name");
        let both = env(&[("GEMINI_API_KEY", "g-first"), ("GOOGLE_API_KEY", "g-second")]);
        assert_eq!(api_key(Api::Gemini, None, gemini, &both).unwrap().as_deref(), Some("g-first"));
    }
}
