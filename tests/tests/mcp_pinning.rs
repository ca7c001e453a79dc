//! Pinned remote tools against a real server that changes a tool under its clients (the Python MCP SDK,
//! `tests/mcp/python_drifting.py`): after `tools/list_changed`, the changed tool is withheld, a call to it is refused
//! with `tool_changed` and never reaches the server, the drift names what changed; after approval, the new version is
//! imported and callable. An import with the old pins withholds the changed tool from the start.

use std::time::Duration;

use keel_tools_core::{Executor, Registry};
use keel_tools_mcp::client::{Drift, DriftKind, Era, Pins, RemoteServer, RemoteTools};
use serde_json::{Value, json};

use super::mcp_forwarder::{bounded, clone_def, prerequisite, run, workspace_root};
use keel_tests::peers::PYTHON_MCP;

async fn connect(python: &std::path::Path) -> RemoteServer {
    let mut cmd = tokio::process::Command::new(python);
    cmd.arg(workspace_root().join("tests/mcp/python_drifting.py")).stderr(std::process::Stdio::null());
    let transport = keel_tools_mcp::rmcp::transport::TokioChildProcess::new(cmd).expect("spawn");
    // `tools/list_changed` reaches a client in the `initialize` session.
    RemoteServer::connect_with("py", transport, Era::Session).await.expect("connect")
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
        let py = connect(&python).await;
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
    })
    .await;
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
        let over_transport = connect(&python).await;
        assert_eq!(over_transport.identity(), "mcp:drifting-peer");
        let (a, b) = (Pins::of(&py).await.unwrap(), Pins::of(&over_transport).await.unwrap());
        assert_ne!(a.get("add").unwrap().digest, b.get("add").unwrap().digest, "another server, another digest");
        py.close().await;
        over_transport.close().await;
    })
    .await;
}
