//! What models and MCP clients see of the example tools, checked byte for byte against files under
//! `tests/golden/`: `keel list --format F` for every format, MCP `tools/list` and `tools/call`, and every
//! rendering of the results of a fixed set of calls (success, each executor stop, business and internal errors).
//!
//! A change to any of these files is a change of the wire contract. To accept one on purpose, run the test with
//! `KEEL_BLESS=1` and review the diff.

use std::path::PathBuf;

use keel_tests::http::{RawClient, SESSION_REVISION, call_request};
use keel_tools_cli::Cli;
use keel_tools_core::executor::CallOptions;
use keel_tools_core::{Approval, Executor, Provider, Registry, ToolCall, ToolResult};
use keel_tools_mcp::{HttpConfig, McpServer};
use serde_json::{Value, json};

keel_tools_core::link_tools!(examples);

fn golden(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("golden").join(name);
    if std::env::var_os("KEEL_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; run with KEEL_BLESS=1 to write it", path.display()));
    if expected != actual {
        let line = expected.lines().zip(actual.lines()).position(|(a, b)| a != b).unwrap_or(0);
        panic!(
            "{name} differs from the golden file at line {}:\n  expected: {:?}\n  actual:   {:?}",
            line + 1,
            expected.lines().nth(line),
            actual.lines().nth(line)
        );
    }
}

fn cli() -> Cli {
    Cli::new().executor(|b| b.state(examples::cards::store(true)))
}

#[test]
fn keel_list_prints_the_same_bytes_for_every_format() {
    let cli = cli();
    for format in ["ollama", "openai", "openai-responses", "anthropic", "gemini", "mcp"] {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = cli.run(["keel", "list", "--format", format], &mut out, &mut err);
        assert_eq!(code, 0, "{format}: {}", String::from_utf8_lossy(&err));
        golden(&format!("list-{format}.json"), &String::from_utf8(out).unwrap());
    }
}

/// Every rendering of one result, one line each: each codec's reply, bound to the example tools.
fn renderings(r: &ToolResult) -> String {
    let registry = Registry::from_inventory().unwrap();
    let reply = |p: Provider| registry.codec(p).reply(r).to_string();
    let lines = [
        ("json", serde_json::to_string(r).unwrap()),
        ("to_json", r.to_json().to_string()),
        ("content_text", r.content_text()),
        ("ollama", reply(Provider::Ollama)),
        ("openai", reply(Provider::OpenAiChat)),
        ("openai_responses", reply(Provider::OpenAiResponses)),
        ("anthropic", reply(Provider::Anthropic)),
        ("gemini", reply(Provider::Gemini)),
        ("mcp", reply(Provider::Mcp)),
    ];
    lines.iter().map(|(k, v)| format!("{k}: {v}\n")).collect()
}

/// (call id, tool name, arguments, options) of each call.
fn calls() -> Vec<(&'static str, &'static str, Value, CallOptions)> {
    let plain = CallOptions::new;
    let create = json!({"incident_id": "INC-001", "title": "auth-api 502"});
    let approved = CallOptions::new().approve(Approval::new("create_ticket", &create));
    vec![
        ("c-ok", "lookup_incident", json!({"incident_id": "INC-001"}), plain()),
        ("c-missing", "lookup_incident", json!({"incident_id": "INC-404"}), plain()),
        ("c-unknown", "delete_prod", json!({"confirm": true}), plain()),
        ("c-invalid", "lookup_incident", json!({"incident": 1}), plain()),
        ("c-approval", "create_ticket", create.clone(), plain()),
        ("c-approved", "create_ticket", create, approved),
        ("c-cards", "read_task_cards", json!({}), plain()),
        ("c-card-404", "validate_task_card", json!({"task_id": "T-404"}), plain()),
        ("c-report", "build_status_report", json!({"include_done": true}), plain()),
        ("c-status", "get_service_status", json!({"service_name": "auth-api"}), plain()),
        ("c-search", "search_incidents", json!({"service": "auth-api", "limit": 2}), plain()),
        ("c-propose", "propose_status_update", json!({"task_id": "T-1", "status": "done"}), plain()),
        ("c-not-object", "lookup_incident", json!([1]), plain()),
    ]
}

#[tokio::test]
async fn results_render_the_same_bytes_for_every_provider() {
    let registry = Registry::from_inventory().unwrap();
    let executor =
        Executor::builder(registry.view().build().unwrap()).state(examples::cards::store(true)).build().unwrap();
    let unavailable =
        Executor::builder(registry.view().build().unwrap()).state(examples::cards::store(false)).build().unwrap();
    let mut out = String::new();
    for (id, name, arguments, options) in calls() {
        let r = executor.call_with(ToolCall::new(id, name, arguments), &options).await;
        out.push_str(&format!("# {id}\n{}\n", renderings(&r)));
    }
    let r = unavailable.call(ToolCall::new("c-internal", "read_task_cards", json!({}))).await;
    out.push_str(&format!("# c-internal\n{}", renderings(&r)));
    golden("results.txt", &out);
}

/// Serves `executor` over Streamable HTTP on a loopback port, opens a session and asks `tools/list`: the client,
/// the session, the server's shutdown token and the answer's messages (exactly one).
async fn serve_and_list(executor: Executor) -> (RawClient, String, tokio_util::sync::CancellationToken, Vec<Value>) {
    let service = McpServer::new(executor).unwrap().http_service(HttpConfig::default());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let shutdown = tokio_util::sync::CancellationToken::new();
    let stop = shutdown.clone();
    tokio::spawn(async move { service.serve(listener, "/mcp", stop).await });
    let mut raw = RawClient::connect(addr, "/mcp").await.unwrap();
    let session = raw.open_session("golden").await.unwrap();
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}});
    let answer = raw.post(Some(&session), Some(SESSION_REVISION), &list).await.unwrap();
    assert_eq!(answer.status, 200);
    let messages = answer.messages();
    assert_eq!(messages.len(), 1, "{messages:?}");
    (raw, session, shutdown, messages)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_tools_list_and_calls_answer_the_same_messages() {
    let registry = Registry::from_inventory().unwrap();
    let executor =
        Executor::builder(registry.view().build().unwrap()).state(examples::cards::store(true)).build().unwrap();
    let (mut raw, session, shutdown, messages) = serve_and_list(executor).await;
    golden("mcp-tools-list.json", &format!("{}\n", serde_json::to_string_pretty(&messages[0]).unwrap()));

    let mut out = String::new();
    for (i, (id, name, arguments, _)) in calls().into_iter().enumerate() {
        let body = call_request(10 + i as u64, name, arguments, None);
        let answer = raw.post(Some(&session), Some(SESSION_REVISION), &body).await.unwrap();
        let text: Vec<String> = answer.messages().iter().map(Value::to_string).collect();
        out.push_str(&format!("# {id}\n{}\n", text.join("\n")));
    }
    golden("mcp-calls.txt", &out);
    shutdown.cancel();
}

/// A tool whose argument schema uses JSON Schema 2020-12 beyond what schemars writes: `$anchor`, `$defs` and `$ref`,
/// `allOf`, `if`/`then`/`else`.
fn json_schema_2020_12_tool() -> keel_tools_core::definition::ToolDefinition {
    keel_tools_core::definition::ToolDefinition::builder("incident.escalate")
        .description("Escalate an incident to the team that owns it.")
        .effect(keel_tools_core::definition::Effect::Write)
        .input_schema(json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {
                "incident_id": {"$ref": "#/$defs/IncidentId"},
                "severity": {"enum": ["low", "high"]},
                "team": {"type": "string"},
                "pager": {"type": "string", "description": "Who is paged; only for a high severity."}
            },
            "required": ["incident_id", "severity"],
            "allOf": [{"$ref": "#/$defs/Owned"}],
            "if": {"properties": {"severity": {"const": "high"}}, "required": ["severity"]},
            "then": {"required": ["pager"]},
            "else": {"not": {"required": ["pager"]}},
            "$defs": {
                "IncidentId": {"$anchor": "incident-id", "type": "string", "pattern": "^INC-[0-9]+$"},
                "Owned": {"required": ["team"]}
            }
        }))
        .handler(|_args, _ctx| async { Ok::<_, keel_tools_core::ToolError>(json!({"escalated": true})) })
        .build()
        .unwrap()
}

/// MCP takes JSON Schema 2020-12 as it is: its entry keeps every keyword of the tool's schema, in `tools/list` too.
/// The golden file also pins what every other provider is sent instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_keeps_json_schema_2020_12_and_the_others_get_their_subsets() {
    let registry = Registry::builder().without_inventory().tool(json_schema_2020_12_tool()).build().unwrap();
    let def = registry.get("incident.escalate").unwrap();
    let mut out = String::new();
    for provider in keel_tools_core::Provider::ALL {
        let rendered = serde_json::to_string_pretty(def.render(provider)).unwrap();
        out.push_str(&format!("# {}\n{rendered}\n", provider.as_str()));
    }
    golden("render-json-schema-2020-12.txt", &out);

    let input = &def.render(keel_tools_core::Provider::Mcp)["inputSchema"];
    for pointer in
        ["/allOf/0/$ref", "/if", "/then", "/else/not", "/$defs/IncidentId/$anchor", "/properties/incident_id/$ref"]
    {
        assert!(input.pointer(pointer).is_some(), "{pointer} is missing: {input}");
    }

    let executor = Executor::builder(registry.view().build().unwrap()).build().unwrap();
    let (_raw, _session, shutdown, messages) = serve_and_list(executor).await;
    assert_eq!(&messages[0]["result"]["tools"][0]["inputSchema"], input, "tools/list sends the entry as rendered");
    shutdown.cancel();
}
