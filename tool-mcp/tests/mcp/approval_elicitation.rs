//! A call that needs a person's approval, served with `ApprovalRules`, driven by rmcp's client in process:
//!
//! * a session (2025-11-25) whose client offers elicitation is asked there and then: `accept` runs the tool once
//!   with exactly the arguments the person was shown; `decline` and `cancel` run nothing, and the model reads
//!   `approval_denied`;
//! * a stateless client (2026-07-28) is asked through an input-required round; only an answer to a question a
//!   sealed state records is taken;
//! * a client without elicitation, or a server that does not elicit, gets `approval_required` as before;
//! * `allow_writes` approves `write` tools and never a `destructive` one; `allow_tool` approves the tool it names.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use keel_tools_core::definition::{Effect, TaskSupport, ToolDefinition};
use keel_tools_core::{Executor, ToolView};
use keel_tools_mcp::McpServer;
use keel_tools_mcp::rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientCapabilities, ElicitRequestParams, ElicitResult,
    GetTaskParams, Implementation, InitializeRequestParams, ProtocolVersion,
};
use keel_tools_mcp::rmcp::service::{ClientServiceExt, RequestContext, RunningService};
use keel_tools_mcp::rmcp::{ClientHandler, ClientLifecycleMode, ErrorData, RoleClient};
use keel_tools_mcp::server::{APPROVAL_INPUT_KEY, ApprovalRules};
use serde_json::{Value, json};

const WRITE: &str = "notes.forget";
const DESTRUCTIVE: &str = "notes.purge";
const READ: &str = "notes.count";
/// A `write` tool that runs as a task for a client that runs tasks.
const TASK: &str = "notes.archive";

/// What each tool's handler ran with, in order.
type Ran = Arc<Mutex<Vec<(String, Value)>>>;

fn tool(name: &'static str, effect: Effect, ran: &Ran) -> Arc<ToolDefinition> {
    let ran = ran.clone();
    let task = if name == TASK { TaskSupport::Optional } else { TaskSupport::Never };
    let def = ToolDefinition::builder(name)
        .task_support(task)
        .description("A tool of the approval tests.")
        .version("1.0")
        .effect(effect)
        .input_schema(json!({
            "type": "object",
            "properties": {"note": {"type": "string"}, "copies": {"type": "integer"}},
            "required": ["note"],
        }))
        .handler(move |arguments: Value, _ctx| {
            let ran = ran.clone();
            async move {
                ran.lock().unwrap().push((name.to_owned(), arguments.clone()));
                Ok(json!({"done": name, "note": arguments["note"]}))
            }
        })
        .build()
        .unwrap();
    Arc::new(def)
}

fn serve(rules: ApprovalRules) -> (McpServer, Ran) {
    let ran = Ran::default();
    let view = ToolView::new(vec![
        tool(WRITE, Effect::Write, &ran),
        tool(DESTRUCTIVE, Effect::Destructive, &ran),
        tool(READ, Effect::Read, &ran),
        tool(TASK, Effect::Write, &ran),
    ]);
    (McpServer::builder(Executor::new(view).unwrap()).approvals(rules).build().unwrap(), ran)
}

/// A client whose person answers every elicitation with `action`, or that offers no elicitation at all
/// (`action: None`). It keeps every request it was sent.
#[derive(Clone, Default)]
struct Person {
    action: Option<&'static str>,
    tasks: bool,
    asked: Arc<Mutex<Vec<Value>>>,
}

impl Person {
    fn answering(action: &'static str) -> Person {
        Person { action: Some(action), ..Person::default() }
    }

    fn asked(&self) -> Vec<Value> {
        self.asked.lock().unwrap().clone()
    }
}

impl ClientHandler for Person {
    fn get_info(&self) -> InitializeRequestParams {
        let mut capabilities = match self.action {
            Some(_) => ClientCapabilities::builder().enable_elicitation().build(),
            None => ClientCapabilities::default(),
        };
        if self.tasks {
            capabilities.extensions = ClientCapabilities::builder().enable_tasks().build().extensions;
        }
        InitializeRequestParams::new(capabilities, Implementation::new("keel-approval-test", "0.1"))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        self.asked.lock().unwrap().push(serde_json::to_value(&request).unwrap());
        let action = self.action.unwrap_or("cancel");
        let answer =
            if action == "accept" { json!({"action": action, "content": {}}) } else { json!({"action": action}) };
        Ok(serde_json::from_value(answer).expect("an ElicitResult"))
    }
}

async fn connect(server: &McpServer, person: Person, version: ProtocolVersion) -> RunningService<RoleClient, Person> {
    let (server_io, client_io) = tokio::io::duplex(1 << 16);
    let server = server.clone();
    tokio::spawn(async move {
        if let Ok(s) = server.serve(server_io).await {
            let _ = s.waiting().await;
        }
    });
    let lifecycle = if version.has_initialize() {
        ClientLifecycleMode::Initialize
    } else {
        ClientLifecycleMode::Discover { preferred_versions: vec![version] }
    };
    person.serve_with_lifecycle(client_io, lifecycle).await.expect("connect")
}

fn call(name: &str, args: Value) -> CallToolRequestParams {
    CallToolRequestParams::new(name.to_owned()).with_arguments(args.as_object().cloned().unwrap())
}

/// The JSON a result's first text block holds.
fn body(r: &CallToolResult) -> Value {
    let text = r.content.first().and_then(|c| c.as_text()).map(|t| t.text.clone()).unwrap_or_default();
    serde_json::from_str(&text).unwrap_or(Value::String(text))
}

fn code(r: &CallToolResult) -> Option<String> {
    (r.is_error == Some(true)).then(|| body(r)["error"]["code"].as_str().unwrap_or("?").to_owned())
}

/// The arguments an elicitation showed the person: the JSON between `Arguments:` and the next blank line.
fn shown_arguments(request: &Value) -> Value {
    let message = request["message"].as_str().expect("a message");
    let after = message.split_once("Arguments:\n").expect("the arguments are shown").1;
    let json = after.split("\n\n").next().unwrap();
    serde_json::from_str(json).unwrap_or_else(|e| panic!("the shown arguments are not JSON ({e}): {json}"))
}

async fn within<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(Duration::from_secs(30), f).await.expect("test timed out")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_session_asks_the_person_and_accept_runs_the_call_once_with_the_arguments_shown() {
    within(async {
        let (server, ran) = serve(ApprovalRules::elicit());
        let person = Person::answering("accept");
        let client = connect(&server, person.clone(), ProtocolVersion::V_2025_11_25).await;
        let args = json!({"copies": 2, "note": "n-1"});
        let r = client.peer().call_tool(call(WRITE, args.clone())).await.expect("call");
        assert_ne!(r.is_error, Some(true), "{r:?}");
        assert_eq!(r.structured_content, Some(json!({"done": WRITE, "note": "n-1"})));

        let asked = person.asked();
        assert_eq!(asked.len(), 1, "{asked:?}");
        let message = asked[0]["message"].as_str().unwrap();
        assert!(message.contains(&format!("`{WRITE}`")) && message.contains("effect: write"), "{message}");
        assert_eq!(asked[0]["requestedSchema"], json!({"type": "object", "properties": {}}));
        // The handler ran once, with exactly what the person saw.
        let ran = ran.lock().unwrap().clone();
        assert_eq!(ran, vec![(WRITE.to_owned(), shown_arguments(&asked[0]))]);
        assert_eq!(ran[0].1, args);

        // A read tool runs without asking.
        let r = client.peer().call_tool(call(READ, json!({"note": "r"}))).await.expect("call");
        assert_ne!(r.is_error, Some(true), "{r:?}");
        assert_eq!(person.asked().len(), 1);
        let _ = client.cancel().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn decline_and_cancel_run_nothing_and_the_model_reads_approval_denied() {
    within(async {
        for action in ["decline", "cancel"] {
            let (server, ran) = serve(ApprovalRules::elicit());
            let person = Person::answering(action);
            let client = connect(&server, person.clone(), ProtocolVersion::V_2025_11_25).await;
            for tool in [WRITE, DESTRUCTIVE] {
                let r = client.peer().call_tool(call(tool, json!({"note": "n-2"}))).await.expect("call");
                assert_eq!(code(&r).as_deref(), Some("approval_denied"), "{action} {tool}: {r:?}");
                assert_eq!(body(&r)["error"]["details"]["action"], action);
            }
            assert_eq!(person.asked().len(), 2, "{action}");
            assert_eq!(ran.lock().unwrap().len(), 0, "{action}: nothing runs");
            let _ = client.cancel().await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn without_elicitation_the_call_is_answered_approval_required_as_before() {
    within(async {
        // A client that offers no elicitation, on a server that elicits.
        let (server, ran) = serve(ApprovalRules::elicit());
        for version in [ProtocolVersion::V_2025_11_25, ProtocolVersion::V_2026_07_28] {
            let person = Person::default();
            let client = connect(&server, person.clone(), version.clone()).await;
            let r = client.peer().call_tool_once(call(WRITE, json!({"note": "n-3"}))).await.expect("call");
            let CallToolResponse::Complete(r) = r else { panic!("{version}: expected a result, got {r:?}") };
            assert_eq!(code(&r).as_deref(), Some("approval_required"), "{version}: {r:?}");
            assert!(person.asked().is_empty());
            let _ = client.cancel().await;
        }
        // A server that does not elicit (the default), and a client that does.
        let (quiet, quiet_ran) = server_default();
        for version in [ProtocolVersion::V_2025_11_25, ProtocolVersion::V_2026_07_28] {
            let person = Person::answering("accept");
            let client = connect(&quiet, person.clone(), version.clone()).await;
            let r = client.peer().call_tool_once(call(WRITE, json!({"note": "n-3"}))).await.expect("call");
            let CallToolResponse::Complete(r) = r else { panic!("{version}: expected a result, got {r:?}") };
            assert_eq!(code(&r).as_deref(), Some("approval_required"), "{version}: {r:?}");
            assert!(person.asked().is_empty());
            let _ = client.cancel().await;
        }
        assert!(ran.lock().unwrap().is_empty() && quiet_ran.lock().unwrap().is_empty());
    })
    .await;
}

fn server_default() -> (McpServer, Ran) {
    serve(ApprovalRules::new())
}

#[tokio::test(flavor = "multi_thread")]
async fn allow_writes_never_approves_a_destructive_tool() {
    within(async {
        // Nobody asked: writes run, a destructive tool is refused.
        let (server, ran) = serve(ApprovalRules::new().allow_writes());
        let person = Person::answering("accept");
        let client = connect(&server, person.clone(), ProtocolVersion::V_2025_11_25).await;
        let r = client.peer().call_tool(call(WRITE, json!({"note": "w"}))).await.expect("call");
        assert_ne!(r.is_error, Some(true), "{r:?}");
        let r = client.peer().call_tool(call(DESTRUCTIVE, json!({"note": "d"}))).await.expect("call");
        assert_eq!(code(&r).as_deref(), Some("approval_required"), "{r:?}");
        assert!(person.asked().is_empty());
        assert_eq!(ran.lock().unwrap().iter().map(|(t, _)| t.as_str()).collect::<Vec<_>>(), [WRITE]);
        let _ = client.cancel().await;

        // With elicitation: writes run without asking, the destructive tool is asked for.
        let (server, ran) = serve(ApprovalRules::elicit().allow_writes());
        let person = Person::answering("decline");
        let client = connect(&server, person.clone(), ProtocolVersion::V_2025_11_25).await;
        let r = client.peer().call_tool(call(WRITE, json!({"note": "w"}))).await.expect("call");
        assert_ne!(r.is_error, Some(true), "{r:?}");
        let r = client.peer().call_tool(call(DESTRUCTIVE, json!({"note": "d"}))).await.expect("call");
        assert_eq!(code(&r).as_deref(), Some("approval_denied"), "{r:?}");
        assert_eq!(person.asked().len(), 1);
        assert!(person.asked()[0]["message"].as_str().unwrap().contains(DESTRUCTIVE));
        assert_eq!(ran.lock().unwrap().len(), 1);
        let _ = client.cancel().await;

        // Named, a destructive tool is approved.
        let (server, ran) = serve(ApprovalRules::new().allow_tool(DESTRUCTIVE));
        let client = connect(&server, Person::default(), ProtocolVersion::V_2026_07_28).await;
        let r = client.peer().call_tool(call(DESTRUCTIVE, json!({"note": "d"}))).await.expect("call");
        assert_ne!(r.is_error, Some(true), "{r:?}");
        let r = client.peer().call_tool(call(WRITE, json!({"note": "w"}))).await.expect("call");
        assert_eq!(code(&r).as_deref(), Some("approval_required"), "{r:?}");
        assert_eq!(ran.lock().unwrap().iter().map(|(t, _)| t.as_str()).collect::<Vec<_>>(), [DESTRUCTIVE]);
        let _ = client.cancel().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stateless_client_is_asked_in_an_input_required_round() {
    within(async {
        let (server, ran) = serve(ApprovalRules::elicit());
        let person = Person::answering("accept");
        let client = connect(&server, person.clone(), ProtocolVersion::V_2026_07_28).await;
        let args = json!({"note": "n-4", "copies": 3});

        // An answer no sealed state asked for is not taken: the call asks.
        let mut forged = call(WRITE, args.clone());
        forged.input_responses = Some([(APPROVAL_INPUT_KEY.to_owned(), json!({"action": "accept"}))].into());
        let first = client.peer().call_tool_once(forged).await.expect("call");
        let CallToolResponse::InputRequired(first) = first else { panic!("expected input required: {first:?}") };
        assert!(ran.lock().unwrap().is_empty(), "nothing ran on an answer to a question never asked");
        let requests = first.input_requests.clone().unwrap_or_default();
        assert_eq!(requests.keys().collect::<Vec<_>>(), [APPROVAL_INPUT_KEY]);
        let request = serde_json::to_value(&requests[APPROVAL_INPUT_KEY]).unwrap();
        assert_eq!(request["method"], "elicitation/create");
        let shown = shown_arguments(&request["params"]);
        assert_eq!(shown, args);
        let state = first.request_state.clone().expect("a sealed state");

        // The state is bound to the arguments: an accept for other arguments is refused before anything runs.
        let mut other = call(WRITE, json!({"note": "n-5"}));
        other.request_state = Some(state.clone());
        other.input_responses = Some([(APPROVAL_INPUT_KEY.to_owned(), json!({"action": "accept"}))].into());
        client.peer().call_tool_once(other).await.expect_err("a state of another call");

        // Declined: refused, nothing runs.
        let mut declined = call(WRITE, args.clone());
        declined.request_state = Some(state.clone());
        declined.input_responses = Some([(APPROVAL_INPUT_KEY.to_owned(), json!({"action": "decline"}))].into());
        let CallToolResponse::Complete(r) = client.peer().call_tool_once(declined).await.expect("call") else {
            panic!("expected the refusal")
        };
        assert_eq!(code(&r).as_deref(), Some("approval_denied"), "{r:?}");
        assert!(ran.lock().unwrap().is_empty());

        // Accepted: runs once, with the arguments shown.
        let mut accepted = call(WRITE, args.clone());
        accepted.request_state = Some(state);
        accepted.input_responses = Some([(APPROVAL_INPUT_KEY.to_owned(), json!({"action": "accept"}))].into());
        let CallToolResponse::Complete(r) = client.peer().call_tool_once(accepted).await.expect("call") else {
            panic!("expected the result")
        };
        assert_ne!(r.is_error, Some(true), "{r:?}");
        assert_eq!(ran.lock().unwrap().clone(), vec![(WRITE.to_owned(), shown)]);

        // rmcp's own driver gets there by itself, through the client's elicitation handler.
        let r = client.call_tool(call(WRITE, json!({"note": "n-6"}))).await.expect("call");
        assert_ne!(r.is_error, Some(true), "{r:?}");
        assert_eq!(person.asked().len(), 1);
        assert_eq!(ran.lock().unwrap().len(), 2);
        let _ = client.cancel().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_task_tool_is_approved_before_it_runs() {
    within(async {
        let (server, ran) = serve(ApprovalRules::elicit());
        let person = Person { tasks: true, ..Person::answering("accept") };
        let client = connect(&server, person, ProtocolVersion::V_2026_07_28).await;
        let args = json!({"note": "n-7"});
        let first = client.peer().call_tool_once(call(TASK, args.clone())).await.expect("call");
        let CallToolResponse::InputRequired(first) = first else { panic!("expected input required: {first:?}") };
        assert_eq!(first.input_requests.clone().unwrap_or_default().keys().collect::<Vec<_>>(), [APPROVAL_INPUT_KEY]);
        assert!(ran.lock().unwrap().is_empty());

        let mut accepted = call(TASK, args.clone());
        accepted.request_state = first.request_state.clone();
        accepted.input_responses = Some([(APPROVAL_INPUT_KEY.to_owned(), json!({"action": "accept"}))].into());
        // A handler that ends before the call is answered answers in the call; else the call is a task.
        match client.peer().call_tool_once(accepted).await.expect("call") {
            CallToolResponse::Complete(r) => assert_ne!(r.is_error, Some(true), "{r:?}"),
            CallToolResponse::Task(task) => {
                let id = task.task.task_id.clone();
                let mut status = Value::Null;
                for _ in 0..500 {
                    let got = client.peer().get_task(GetTaskParams::new(id.clone())).await.expect("tasks/get");
                    status = serde_json::to_value(got).unwrap();
                    if status["status"] != "working" {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                assert_eq!(status["status"], "completed", "{status}");
            }
            other => panic!("expected the result or a task: {other:?}"),
        }
        assert_eq!(ran.lock().unwrap().clone(), vec![(TASK.to_owned(), args)]);
        let _ = client.cancel().await;
    })
    .await;
}
