//! The `keel` command over the example tools (the same tools the `keel` binary links), through `keel_tools_cli::Cli`.

use std::path::PathBuf;

use keel_tools_cli::Cli;
use keel_tools_core::definition::ToolDefinition;
use keel_tools_core::{Provider, Registry, ToolError};
use serde_json::{Value, json};

keel_tools_core::link_tools!(examples);

fn keel(cli: &Cli, args: &[&str]) -> (u8, String, String) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = cli.run(std::iter::once("keel").chain(args.iter().copied()), &mut out, &mut err);
    (code, String::from_utf8(out).unwrap(), String::from_utf8(err).unwrap())
}

fn demo() -> Cli {
    Cli::new().executor(|b| b.state(examples::cards::store(true)))
}

fn registry() -> Registry {
    Registry::from_inventory().unwrap()
}

#[test]
fn list_format_is_the_provider_rendering_itself() {
    let cli = demo();
    let (code, out, _) = keel(&cli, &["list", "--format", "ollama"]);
    assert_eq!(code, 0);
    let printed: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(printed, Value::Array(registry().ollama_schemas().to_vec()), "one source: ollama_schemas()");

    for (format, provider) in [
        ("openai", Provider::OpenAiChat),
        ("openai-responses", Provider::OpenAiResponses),
        ("anthropic", Provider::Anthropic),
        ("gemini", Provider::Gemini),
        ("mcp", Provider::Mcp),
    ] {
        let (code, out, _) = keel(&cli, &["list", "--format", format]);
        assert_eq!(code, 0, "{format}");
        let printed: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(printed, Value::Array(registry().schemas(provider).to_vec()), "{format}");
    }

    let (code, out, _) = keel(&cli, &["list", "--format", "ollama", "--tag", "incident"]);
    assert_eq!(code, 0);
    let view = registry().view().tag("incident").build().unwrap();
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap(), Value::Array(view.ollama_schemas().to_vec()));
}

#[test]
fn list_table_and_tags() {
    let (code, out, _) = keel(&demo(), &["list", "--tag", "cards"]);
    assert_eq!(code, 0);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("NAME") && lines[0].contains("DESCRIPTION"), "{out}");
    assert!(lines.iter().any(|l| l.starts_with("read_task_cards") && l.contains("Read every task card")), "{out}");
    assert!(!out.contains("lookup_incident"), "{out}");
    assert_eq!(*lines.last().unwrap(), "(4 tools)");
}

#[test]
fn schema_prints_the_canonical_contract() {
    let (code, out, _) = keel(&demo(), &["schema", "lookup_incident"]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    let reg = registry();
    let def = reg.get("lookup_incident").unwrap();
    assert_eq!(v["version"], "1.0");
    assert_eq!(v["effect"], "read");
    assert_eq!(&v["input"], def.input_schema());
    assert_eq!(v["output"], *def.output_schema().unwrap());
    assert_eq!(v["openai_strict"], true);
    assert_eq!(v["anthropic_strict"], true);
    assert_eq!(v["fingerprints"]["input"], keel_tools_contract::lock::fingerprint(def.input_schema()));

    let (code, _, err) = keel(&demo(), &["schema", "nope"]);
    assert_eq!(code, 1);
    assert!(err.contains("no tool named \"nope\"") && err.contains("lookup_incident"), "{err}");
}

#[test]
fn call_prints_the_tool_result() {
    let cli = demo();
    let (code, out, _) = keel(&cli, &["call", "lookup_incident", "--args", r#"{"incident_id": "INC-001"}"#]);
    assert_eq!(code, 0);
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        (r["ok"].clone(), r["executed"].clone(), r["tool_version"].clone()),
        (json!(true), json!(true), json!("1.0"))
    );
    assert_eq!(r["data"]["service"], "auth-api");

    // A write tool without --approve is refused before its handler; with it, it runs.
    let args = r#"{"incident_id": "INC-001", "title": "auth-api 502"}"#;
    let (code, out, _) = keel(&cli, &["call", "create_ticket", "--args", args]);
    assert_eq!(code, 1);
    let r: Value = serde_json::from_str(&out).unwrap();
    assert_eq!((r["error"]["code"].clone(), r["executed"].clone()), (json!("approval_required"), json!(false)));
    let (code, out, _) = keel(&cli, &["call", "create_ticket", "--args", args, "--approve"]);
    assert_eq!(code, 0, "{out}");
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["data"]["ticket_id"], "TCK-001");

    // State is given by the binary's main; bad input is an answer, not a crash.
    let (code, out, _) = keel(&cli, &["call", "read_task_cards"]);
    assert_eq!(code, 0, "{out}");
    let (code, out, _) = keel(&cli, &["call", "lookup_incident", "--args", "{not json"]);
    assert_eq!(code, 1);
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["error"]["code"], "invalid_arguments");
    let (code, out, _) = keel(&cli, &["call", "delete_everything"]);
    assert_eq!(code, 1);
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap()["error"]["code"], "unknown_tool");
}

#[test]
fn check_passes_on_the_examples_and_fails_on_errors() {
    let (code, out, _) = keel(&demo(), &["check"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.trim_end().ends_with("0 error(s), 0 warning(s), 14 note(s)"), "{out}");
    // create_ticket's example, which every format but Anthropic's reads in the description.
    assert!(
        out.contains(
            "info     gemini            the format has no field for input examples, so the tool's example is \
                      stated at the end of the description"
        ),
        "{out}"
    );
    // The codecs' losses are part of the report: here, the ollama Python client's replies.
    assert!(
        out.contains("info     ollama            the ollama Python client's `Message` has no `tool_call_id`"),
        "{out}"
    );

    let (code, out, _) = keel(&demo(), &["check", "--json"]);
    assert_eq!(code, 0);
    let findings: Vec<Value> = serde_json::from_str(&out).unwrap();
    assert!(findings.iter().all(|f| f["severity"] == "info"), "{findings:#?}");

    // A tool Ollama and Gemini lose something of: warnings; --deny-warnings turns them into a failure.
    let lossy = ToolDefinition::builder("ticket.search")
        .description("Searches tickets.")
        .input_schema(json!({"type": "object", "properties": {
            "query": {"type": "string", "not": {"const": ""}}
        }, "required": ["query"], "additionalProperties": false}))
        .handler(|_a, _c| async { Ok::<_, ToolError>(json!([])) })
        .build()
        .unwrap();
    let cli = Cli::new().registry(Registry::builder().without_inventory().tool(lossy).build().unwrap());
    let (code, out, _) = keel(&cli, &["check"]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("warning  ollama            `query`: Ollama drops `not`"), "{out}");
    assert!(out.contains("info     openai-chat       OpenAI is sent the wire name `ticket-search`"), "{out}");
    let (code, _, _) = keel(&cli, &["check", "--deny-warnings"]);
    assert_eq!(code, 1);
}

fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("keel-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn search(version: &'static str, input: Value) -> ToolDefinition {
    ToolDefinition::builder("incident.search")
        .description("Searches incidents.")
        .version(version)
        .input_schema(input)
        .handler(|_a, _c| async { Ok::<_, ToolError>(json!([])) })
        .build()
        .unwrap()
}

fn cli_with(defs: Vec<ToolDefinition>) -> Cli {
    Cli::new().registry(Registry::builder().without_inventory().tools(defs).build().unwrap())
}

#[test]
fn lock_write_check_and_the_version_rule() {
    let dir = temp_dir("lock");
    let path = dir.join("keel.lock");
    let path = path.to_str().unwrap();
    let v1 = json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]});
    let v2 = json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]});

    let (code, out, _) = keel(&cli_with(vec![search("1.0", v1.clone())]), &["lock", "--path", path]);
    assert_eq!((code, out.trim()), (0, format!("wrote {path} (1 tools)").as_str()));
    let (code, out, _) = keel(&cli_with(vec![search("1.0", v1)]), &["lock", "--check", "--path", path]);
    assert_eq!(code, 0);
    assert!(out.contains("the lock is current"), "{out}");

    // `query` renamed to `text`, version unchanged: the check fails and says what changed.
    let changed = cli_with(vec![search("1.0", v2.clone())]);
    let (code, out, _) = keel(&changed, &["lock", "--check", "--path", path]);
    assert_eq!(code, 1);
    assert!(out.contains("error: `incident.search`: its schemas changed in a breaking way, but its version is still 1.0; bump it to 2.0 or later"), "{out}");
    assert!(out.contains("- breaking: argument `query` was removed"), "{out}");
    assert!(out.contains("- breaking: new required argument `text`"), "{out}");
    // ... and regenerating the lock does not launder it.
    let (code, _, err) = keel(&changed, &["lock", "--path", path]);
    assert_eq!(code, 1);
    assert!(err.contains("bump the versions first"), "{err}");

    // After the bump the check passes; --strict still wants the lock regenerated.
    let bumped = cli_with(vec![search("2.0", v2)]);
    let (code, out, _) = keel(&bumped, &["lock", "--check", "--path", path]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("outdated: `incident.search` 1.0 -> 2.0: breaking change with a sufficient bump"), "{out}");
    let (code, _, _) = keel(&bumped, &["lock", "--check", "--strict", "--path", path]);
    assert_eq!(code, 1);
    let (code, _, _) = keel(&bumped, &["lock", "--path", path]);
    assert_eq!(code, 0);
    let (code, _, _) = keel(&bumped, &["lock", "--check", "--strict", "--path", path]);
    assert_eq!(code, 0);

    // A tool that vanished fails the check.
    let (code, out, _) = keel(&cli_with(vec![]), &["lock", "--check", "--path", path]);
    assert_eq!(code, 1);
    assert!(out.contains("error: `incident.search` 2.0 is in the lock but no longer exists"), "{out}");

    let missing = dir.join("missing.lock");
    let (code, _, err) = keel(&bumped, &["lock", "--check", "--path", missing.to_str().unwrap()]);
    assert_eq!(code, 1);
    assert!(err.contains("run `keel lock` to write one"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_committed_lock_matches_the_linked_tools() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../keel.lock");
    let (code, out, _) = keel(&demo(), &["lock", "--check", "--strict", "--path", path]);
    assert_eq!(code, 0, "run `cargo run -p examples --bin keel-demo -- lock` and commit keel.lock:\n{out}");
}

#[test]
fn usage_errors_exit_2_and_help_goes_to_stdout() {
    let (code, _, err) = keel(&demo(), &["list", "--format", "cohere"]);
    assert_eq!(code, 2);
    assert!(err.contains("invalid value 'cohere'"), "{err}");
    let (code, _, _) = keel(&demo(), &["lock", "--strict"]);
    assert_eq!(code, 2, "--strict needs --check");
    let (code, out, _) = keel(&demo(), &["--help"]);
    assert_eq!(code, 0);
    for command in ["list", "schema", "call", "check", "lock"] {
        assert!(out.contains(command), "{out}");
    }
}

/// A dotted read tool and a write tool, each echoing its arguments.
fn replay_cli() -> Cli {
    let echo = |name: &'static str, effect: keel_tools_core::definition::Effect| {
        ToolDefinition::builder(name)
            .description("Echoes its query.")
            .effect(effect)
            .input_schema(json!({"type": "object", "properties": {"query": {"type": "string"}},
                "required": ["query"], "additionalProperties": false}))
            .handler(|a, _c| async move { Ok::<_, ToolError>(json!({"echo": a})) })
            .build()
            .unwrap()
    };
    cli_with(vec![
        echo("notes.search", keel_tools_core::definition::Effect::Read),
        echo("notes.write", keel_tools_core::definition::Effect::Write),
    ])
}

#[test]
fn call_from_replays_each_providers_tool_call_and_answers_in_its_format() {
    let cli = replay_cli();
    let args = json!({"query": "disks"});
    let text = args.to_string();
    let cases = [
        ("ollama", json!({"id": "c-1", "function": {"name": "notes.search", "arguments": args}}), "/tool_call_id"),
        (
            "openai",
            json!({"id": "c-1", "type": "function", "function": {"name": "notes-search", "arguments": text}}),
            "/tool_call_id",
        ),
        (
            "openai-responses",
            json!({"type": "function_call", "id": "fc_1", "call_id": "c-1", "name": "notes-search", "arguments": text}),
            "/call_id",
        ),
        ("anthropic", json!({"type": "tool_use", "id": "c-1", "name": "notes-search", "input": args}), "/tool_use_id"),
        (
            "gemini",
            json!({"functionCall": {"id": "c-1", "name": "notes-search", "args": args}}),
            "/functionResponse/id",
        ),
        (
            "mcp",
            json!({"jsonrpc": "2.0", "id": "c-1", "method": "tools/call", "params": {"name": "notes.search", "arguments": args}}),
            "",
        ),
    ];
    for (provider, item, id_at) in cases {
        let (code, out, err) = keel(&cli, &["call", "--from", provider, &item.to_string()]);
        assert_eq!(code, 0, "{provider}: {out}{err}");
        let reply: Value = serde_json::from_str(&out).unwrap();
        if !id_at.is_empty() {
            assert_eq!(reply.pointer(id_at), Some(&json!("c-1")), "{provider}: {reply}");
        }
        assert!(out.contains("disks"), "{provider}: {out}");
        match provider {
            "anthropic" => assert_eq!(reply["is_error"], false),
            "gemini" => assert_eq!(reply["functionResponse"]["name"], "notes-search"),
            "mcp" => assert_eq!(reply["structuredContent"], json!({"echo": {"query": "disks"}})),
            _ => {}
        }
    }
}

#[test]
fn call_from_fails_on_what_does_not_succeed() {
    let cli = replay_cli();
    // A name no tool has (no case folding, no nearest name): unknown_tool, answered in OpenAI's format, exit 1.
    let item = json!({"id": "c-2", "type": "function", "function": {"name": "Notes-Search", "arguments": "{}"}});
    let (code, out, _) = keel(&cli, &["call", "--from", "openai", &item.to_string()]);
    assert_eq!(code, 1, "{out}");
    let reply: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(reply["role"], "tool");
    assert!(reply["content"].as_str().unwrap().contains("unknown_tool"), "{reply}");

    // A write tool needs --approve.
    let item = json!({"type": "tool_use", "id": "c-3", "name": "notes-write", "input": {"query": "x"}});
    let (code, out, _) = keel(&cli, &["call", "--from", "anthropic", &item.to_string()]);
    assert_eq!(code, 1);
    assert!(out.contains("approval_required") && out.contains("\"is_error\": true"), "{out}");
    let (code, out, _) = keel(&cli, &["call", "--from", "anthropic", &item.to_string(), "--approve"]);
    assert_eq!(code, 0, "{out}");

    // Text that is not JSON is a usage error; so is --args beside --from.
    let (code, _, err) = keel(&cli, &["call", "--from", "gemini", "{not json"]);
    assert_eq!(code, 2);
    assert!(err.contains("the message is not JSON (line 1, column 2)"), "{err}");
    let (code, _, _) = keel(&cli, &["call", "--from", "gemini", "{}", "--args", "{}"]);
    assert_eq!(code, 2);
    // A well-formed JSON value that is no call: the empty name, unknown_tool.
    let (code, out, _) = keel(&cli, &["call", "--from", "mcp", "[]"]);
    assert_eq!(code, 1);
    assert!(out.contains("unknown_tool"), "{out}");
}
