//! Pinned remote tools against a real server that changes a tool under its clients (the Python MCP SDK,
//! `tests/mcp/python_drifting.py`): after `tools/list_changed`, the changed tool is withheld, a call to it is refused
//! with `tool_changed` and never reaches the server, the drift names what changed; after approval, the new version is
//! imported and callable. An import with the old pins withholds the changed tool from the start. Over stdio and
//! Streamable HTTP, each in both protocol eras.

use std::time::Duration;

use keel_tools_core::{Executor, Registry};
use keel_tools_mcp::client::{Drift, DriftKind, Era, Pins, RemoteServer, RemoteTools};
use serde_json::{Value, json};

use super::mcp_forwarder::{bounded, clone_def, prerequisite, run, workspace_root};
use keel_tests::peers::{KEEL_DEMO, PYTHON_MCP};

/// Where the drifting server runs: a child over stdio, or a Streamable HTTP server of its own.
#[derive(Clone, Copy, PartialEq)]
enum Transport {
    Stdio,
    Http,
}

/// A drifting server over Streamable HTTP on a free port: the child (killed on drop) and its URL, read from
/// uvicorn's log line on stderr.
async fn http_server(python: &std::path::Path) -> (tokio::process::Child, String) {
    use tokio::io::AsyncBufReadExt;
    let mut cmd = tokio::process::Command::new(python);
    cmd.arg(workspace_root().join("tests/mcp/python_drifting.py")).arg("--http");
    cmd.stderr(std::process::Stdio::piped()).stdout(std::process::Stdio::null()).kill_on_drop(true);
    let mut child = cmd.spawn().expect("python runs");
    let mut lines = tokio::io::BufReader::new(child.stderr.take().unwrap()).lines();
    let url = loop {
        let line = lines.next_line().await.expect("stderr").expect("the server names its port before it ends");
        if let Some(rest) = line.split("Uvicorn running on ").nth(1) {
            break format!("{}/mcp", rest.split_whitespace().next().unwrap());
        }
    };
    // Keep draining stderr, so that the server never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, url)
}

/// In the `initialize` session the server sends `tools/list_changed` unasked; on 2026-07-28 keel listens for it.
async fn connect(python: &std::path::Path, era: Era) -> RemoteServer {
    let mut cmd = tokio::process::Command::new(python);
    cmd.arg(workspace_root().join("tests/mcp/python_drifting.py")).stderr(std::process::Stdio::null());
    let transport = keel_tools_mcp::rmcp::transport::TokioChildProcess::new(cmd).expect("spawn");
    RemoteServer::connect_with("py", transport, era).await.expect("connect")
}

fn executor(remote: &RemoteTools) -> Executor {
    let registry = Registry::builder().tools(remote.definitions().iter().map(clone_def)).build().unwrap();
    let names: Vec<&str> = remote.names().collect();
    Executor::new(registry.view().names(names).build().unwrap()).unwrap()
}

/// The next drift of `add`, within 10 s.
async fn next_drift(drifts: &mut tokio::sync::broadcast::Receiver<Drift>) -> Drift {
    loop {
        let drift = tokio::time::timeout(Duration::from_secs(10), drifts.recv())
            .await
            .expect("a drift within 10 s of tools/list_changed")
            .expect("the drift channel is open");
        if drift.origin == "add" {
            return drift;
        }
    }
}

/// How many calls `add` has received, as the server counts them.
async fn calls_received(executor: &Executor) -> Value {
    run(executor, "py.drift", json!({"step": "count"})).await.data().cloned().expect("drift answers")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_that_changes_under_a_pinned_import_is_withheld_until_approved() {
    let default = workspace_root().join("target/ci-venv/bin/python");
    let Some(python) = prerequisite("KEEL_PYTHON_MCP", Some(default), &PYTHON_MCP) else {
        return;
    };
    bounded(async {
        for transport in [Transport::Stdio, Transport::Http] {
            for era in [Era::Session, Era::Auto] {
                drift_and_approve(&python, transport, era).await;
            }
        }
    })
    .await;
}

async fn drift_and_approve(python: &std::path::Path, transport: Transport, era: Era) {
    {
        let (_server, py) = match transport {
            Transport::Stdio => (None, connect(python, era).await),
            Transport::Http => {
                let (child, url) = http_server(python).await;
                let py = RemoteServer::http(&url).era(era).connect("py").await.expect("connect");
                assert_eq!(py.identity(), url);
                (Some(child), py)
            }
        };
        let expected = if era == Era::Session { "2025-11-25" } else { "2026-07-28" };
        assert_eq!(py.protocol_version().map(|v| v.to_string()).as_deref(), Some(expected));
        let first = Pins::of(&py).await.expect("tools/list");
        assert_eq!(first.tools.keys().collect::<Vec<_>>(), ["add", "drift"]);
        let remote = py.importer().pinned(first.clone()).import().await.expect("import");
        assert!(remote.drift().is_empty(), "{:?}", remote.drift());
        let mut drifts = remote.drifts();
        let exec = executor(&remote);
        assert_eq!(run(&exec, "py.add", json!({"a": 2, "b": 40})).await.data(), Some(&json!({"result": 42})));

        // 1. The description changes: `add` is withheld, its call refused before anything is sent.
        run(&exec, "py.drift", json!({"step": "description"})).await;
        let drift = next_drift(&mut drifts).await;
        assert_eq!((drift.kind, drift.code()), (DriftKind::Changed, "tool_changed"));
        assert_eq!(drift.pinned.as_deref(), Some(first.get("add").unwrap().digest.as_str()));
        assert!(drift.diff.iter().any(|l| l.starts_with("/description: ") && l.contains("<IMPORTANT>")), "{drift}");
        let refused = run(&exec, "py.add", json!({"a": 1, "b": 1})).await;
        assert_eq!(refused.code(), Some("tool_changed"), "{refused:?}");
        assert!(!refused.executed, "{refused:?}");
        assert_eq!(refused.error().unwrap().details.as_ref().unwrap()["current"], json!(drift.current));
        assert_eq!(calls_received(&exec).await, json!({"result": 1}), "the refused call never reached the server");
        assert_eq!(remote.drift().len(), 1);

        // An import with the old pins withholds the changed tool from the start, and says what changed.
        let again = py.importer().pinned(first.clone()).import().await.expect("import");
        assert_eq!(again.names().collect::<Vec<_>>(), ["py.drift"]);
        let [withheld] = again.drift().try_into().expect("one drift");
        assert_eq!((withheld.kind, withheld.current.clone()), (DriftKind::Changed, drift.current.clone()));
        assert!(withheld.diff.iter().any(|l| l.contains("<IMPORTANT>")), "{withheld}");

        // 2. Approved: the new version is imported and callable.
        let mut approved = first.clone();
        approved.approve(&drift);
        let after = py.importer().pinned(approved.clone()).import().await.expect("import");
        assert!(after.drift().is_empty(), "{:?}", after.drift());
        let new_description = after.definitions().iter().find(|d| d.name() == "py.add").unwrap().description();
        assert!(new_description.contains("<IMPORTANT>"), "{new_description}");
        let exec = executor(&after);
        assert_eq!(run(&exec, "py.add", json!({"a": 2, "b": 2})).await.data(), Some(&json!({"result": 4})));

        // 3. The input schema changes: the approved version is withheld in turn.
        let mut drifts = after.drifts();
        run(&exec, "py.drift", json!({"step": "schema"})).await;
        let drift = next_drift(&mut drifts).await;
        assert_eq!(drift.kind, DriftKind::Changed);
        assert!(drift.diff.iter().any(|l| l.starts_with("/inputSchema/")), "{drift}");
        let refused = run(&exec, "py.add", json!({"a": 1, "b": 1})).await;
        assert_eq!(refused.code(), Some("tool_changed"));
        assert_eq!(calls_received(&exec).await, json!({"result": 2}));

        // 4. The tool disappears: reported, and refused as removed.
        run(&exec, "py.drift", json!({"step": "remove"})).await;
        let drift = next_drift(&mut drifts).await;
        assert_eq!((drift.kind, drift.code(), drift.current.as_deref()), (DriftKind::Removed, "tool_removed", None));
        assert_eq!(run(&exec, "py.add", json!({"a": 1, "b": 1})).await.code(), Some("tool_removed"));
        let mut gone = approved.clone();
        gone.approve(&drift);
        assert!(gone.get("add").is_none());
        py.close().await;
    }
}

/// The identity a digest covers: a child's command line.
#[tokio::test(flavor = "multi_thread")]
async fn a_child_servers_identity_is_its_command_line() {
    let default = workspace_root().join("target/ci-venv/bin/python");
    let Some(python) = prerequisite("KEEL_PYTHON_MCP", Some(default), &PYTHON_MCP) else {
        return;
    };
    bounded(async {
        let script = workspace_root().join("tests/mcp/python_drifting.py");
        let mut cmd = tokio::process::Command::new(&python);
        cmd.arg(&script).stderr(std::process::Stdio::null());
        let py = RemoteServer::connect_child("py", cmd).await.expect("connect");
        assert_eq!(py.identity(), format!("{} {}", python.display(), script.display()));
        let over_transport = connect(&python, Era::Session).await;
        assert_eq!(over_transport.identity(), "mcp:drifting-peer");
        let (a, b) = (Pins::of(&py).await.unwrap(), Pins::of(&over_transport).await.unwrap());
        assert_ne!(a.get("add").unwrap().digest, b.get("add").unwrap().digest, "another server, another digest");
        py.close().await;
        over_transport.close().await;
    })
    .await;
}

/// `keel lock --forward` pins a remote server's tools into the lock; `keel lock --check` passes while the server
/// lists them unchanged and fails, naming the tool and what changed, once it does not; `keel serve --forward`
/// withholds a tool that changed before it started, and serves the pinned ones to the Python SDK's client, which
/// sees a tool that changes while it runs leave the list (tests/mcp/python_keel_forward.py).
#[test]
fn keel_lock_and_serve_pin_a_forwarded_python_server() {
    let default = workspace_root().join("target/ci-venv/bin/python");
    let Some(python) = prerequisite("KEEL_PYTHON_MCP", Some(default), &PYTHON_MCP) else {
        return;
    };
    let demo = std::env::current_exe().ok().and_then(|e| Some(e.parent()?.parent()?.join("keel-demo")));
    let Some(keel) = prerequisite("KEEL_DEMO_BIN", demo, &KEEL_DEMO) else {
        return;
    };
    let drifting = workspace_root().join("tests/mcp/python_drifting.py");
    let forward = format!("py={} {}", python.display(), drifting.display());
    let dir = std::env::temp_dir().join(format!("keel-pinning-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let lock = dir.join("keel.lock");
    let lock_arg = lock.to_str().unwrap();
    let run = |args: &[&str], changed: bool| {
        let mut command = std::process::Command::new(&keel);
        command.args(args);
        if changed {
            command.env("KEEL_DRIFT_START", "schema");
        }
        let out = command.output().expect("keel runs");
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        (out.status.code(), text)
    };

    let (code, out) = run(&["lock", "--path", lock_arg, "--forward", &forward], false);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("pinned 2 tool(s) of py"), "{out}");
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&lock).unwrap()).unwrap();
    let section = &written["remote"]["py"];
    assert_eq!(section["connect"]["command"], json!([python.to_str().unwrap(), drifting.to_str().unwrap()]));
    assert!(section["tools"]["add"]["digest"].as_str().is_some_and(|d| d.starts_with("sha256:")), "{section}");

    let (code, out) = run(&["lock", "--check", "--path", lock_arg], false);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("py: 2 pinned tool(s), unchanged"), "{out}");

    // The server now lists `add` with another schema: the check fails and says what changed.
    let (code, out) = run(&["lock", "--check", "--path", lock_arg], true);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("py: tool \"add\" changed") && out.contains("/inputSchema/"), "{out}");
    // Writing the lock again without --forward keeps the pins as they were approved.
    let (code, out) = run(&["lock", "--path", lock_arg], true);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(run(&["lock", "--check", "--path", lock_arg], true).0, Some(1), "the change is still not approved");

    // `keel serve` against the changed server: `add` is withheld from the start, and said so.
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(bounded(async {
        let mut command = tokio::process::Command::new(&keel);
        command.args(["serve", "--stdio", "--lock", lock_arg, "--forward", &forward]).env("KEEL_DRIFT_START", "schema");
        command.stderr(std::process::Stdio::piped());
        let served = RemoteServer::connect_child("keel", command).await.expect("connect");
        let names: Vec<String> = served.list_tools().await.unwrap().iter().map(|t| t.name.to_string()).collect();
        assert!(names.iter().any(|n| n == "py.drift") && !names.iter().any(|n| n == "py.add"), "{names:?}");
        served.close().await;
    }));

    // The Python SDK's client in front of `keel serve --forward`, against the server as pinned.
    let script = workspace_root().join("tests/mcp/python_keel_forward.py");
    let out = std::process::Command::new(&python)
        .arg(&script)
        .args(["--lock", lock_arg, "--forward", &forward, "--"])
        .arg(&keel)
        .output()
        .expect("python runs");
    // The lock was written again above with `add` changed but not approved: pin it as the server starts now.
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{text}");

    // Pinning a poisoned description says so before it approves it.
    let out = std::process::Command::new(&keel)
        .args(["lock", "--path", lock_arg, "--forward", &forward])
        .env("KEEL_DRIFT_START", "description")
        .output()
        .expect("keel runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("warning: py: tool \"add\": the description holds a tag that marks text for the model"),
        "{text}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `keel chat --forward`: the model is shown the pinned tools of the forwarded server and its call reaches it; with
/// a lock that holds no pins for the server, its tools are withheld and the model's call of one is refused.
#[test]
fn keel_chat_forwards_pinned_tools_only() {
    let default = workspace_root().join("target/ci-venv/bin/python");
    let Some(python) = prerequisite("KEEL_PYTHON_MCP", Some(default), &PYTHON_MCP) else {
        return;
    };
    let keel = |args: &[&str]| {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        // No linked tools: the forwarded ones alone.
        let cli = keel_tools_cli::Cli::new().registry(Registry::builder().without_inventory().build().unwrap());
        let code = cli.run(std::iter::once("keel").chain(args.iter().copied()), &mut out, &mut err);
        (code, String::from_utf8(out).unwrap(), String::from_utf8(err).unwrap())
    };
    let forward =
        format!("py={} {}", python.display(), workspace_root().join("tests/mcp/python_drifting.py").display());
    let dir = std::env::temp_dir().join(format!("keel-chat-forward-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (lock, empty_lock, transcript) = (dir.join("keel.lock"), dir.join("empty.lock"), dir.join("replay.jsonl"));
    let call = json!({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant",
        "content": null, "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "py-add", "arguments": "{\"a\": 2, \"b\": 40}"}}]}}]});
    let answer = json!({"choices": [{"index": 0, "finish_reason": "stop",
        "message": {"role": "assistant", "content": "The sum is 42."}}]});
    std::fs::write(&transcript, format!("{call}\n{answer}\n")).unwrap();
    let (lock, empty_lock, transcript) =
        (lock.to_str().unwrap(), empty_lock.to_str().unwrap(), transcript.to_str().unwrap());

    let (code, out, err) = keel(&["lock", "--path", lock, "--forward", &forward]);
    assert_eq!(code, 0, "{out}{err}");
    let chat = |lock: &str| {
        keel(&[
            "chat",
            "--replay",
            transcript,
            "--events",
            "json",
            "--lock",
            lock,
            "--forward",
            &forward,
            "Add 2 and 40.",
        ])
    };
    let (code, out, err) = chat(lock);
    assert_eq!((code, out.as_str()), (0, "The sum is 42.\n"), "{err}");
    let result = err
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["tool_name"] == "py.add" && e["event"] != "tool_requested");
    let result = result.unwrap_or_else(|| panic!("no event of py.add: {err}"));
    assert_eq!((&result["executed"], &result["ok"]), (&json!(true), &json!(true)), "{result}");

    // No pins for the server: its tools are withheld, and the model's call is refused as unknown.
    let (code, out, err) = keel(&["lock", "--path", empty_lock]);
    assert_eq!(code, 0, "{out}{err}");
    let (_, _, err) = chat(empty_lock);
    assert!(err.contains("py has no pins in") && err.contains("withheld"), "{err}");
    assert!(err.contains("unknown_tool"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The description checks on an import: a tool whose description hides instructions for the model is imported with
/// a finding, or withheld by a strict import.
#[tokio::test(flavor = "multi_thread")]
async fn a_strict_import_withholds_a_poisoned_tool() {
    let default = workspace_root().join("target/ci-venv/bin/python");
    let Some(python) = prerequisite("KEEL_PYTHON_MCP", Some(default), &PYTHON_MCP) else {
        return;
    };
    bounded(async {
        let mut cmd = tokio::process::Command::new(&python);
        cmd.arg(workspace_root().join("tests/mcp/python_drifting.py")).env("KEEL_DRIFT_START", "description");
        cmd.stderr(std::process::Stdio::null());
        let py = RemoteServer::connect_child("py", cmd).await.expect("connect");
        let lenient = py.import_unpinned().await.expect("import");
        assert_eq!(lenient.names().collect::<Vec<_>>(), ["py.add", "py.drift"]);
        let findings = lenient.findings();
        assert!(findings.iter().all(|(origin, _)| origin == "add"), "{findings:?}");
        assert!(findings.iter().any(|(_, f)| f.to_string().contains("<IMPORTANT>")), "{findings:?}");
        let strict = py.importer().strict(true).import().await.expect("import");
        assert_eq!(strict.names().collect::<Vec<_>>(), ["py.drift"], "the poisoned tool is withheld");
        assert_eq!(strict.findings(), findings);
        py.close().await;
    })
    .await;
}
