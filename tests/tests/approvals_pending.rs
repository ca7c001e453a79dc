//! Approvals that wait: `approval_required` answers kept as pending calls in a `FileStore`, then resolved by a
//! second process (this test binary, started again as a child) with approve and deny decisions, after the tools
//! were "upgraded" in between. Only the approved call of an unchanged contract runs, exactly once.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use serde_json::{Value, json};
use tool_core::{
    Decision, Effect, Executor, FileStore, PendingCall, PendingStore, Registry, Resolution, Run, ToolCall,
    ToolDefinition, ToolError,
};

const ROLE: &str = "KEEL_PENDING_ROLE";
const DIR: &str = "KEEL_PENDING_DIR";

/// `ticket.close` (the same in both processes) and `ticket.reopen` (at `reopen_version`): both append the call to
/// `ran.log` in `dir` when they run.
fn executor(dir: &Path, reopen_version: &'static str) -> Executor {
    let tool = |name: &'static str, version: &'static str| {
        let log = dir.join("ran.log");
        ToolDefinition::builder(name)
            .description("Change a ticket.")
            .version(version)
            .effect(Effect::Write)
            .input_schema(json!({
                "type": "object",
                "properties": {"ticket": {"type": "string"}},
                "required": ["ticket"],
                "additionalProperties": false
            }))
            .handler(move |args: Value, ctx: tool_core::CallContext| {
                let log = log.clone();
                async move {
                    let line = format!("{name} {} {}\n", ctx.call_id(), args["ticket"].as_str().unwrap_or(""));
                    use std::io::Write;
                    let mut f = std::fs::OpenOptions::new().create(true).append(true).open(&log).unwrap();
                    f.write_all(line.as_bytes()).map_err(ToolError::internal)?;
                    Ok(json!("done"))
                }
            })
            .build()
            .expect("a valid definition")
    };
    let registry = Registry::builder()
        .without_inventory()
        .tools([tool("ticket.close", "1.0"), tool("ticket.reopen", reopen_version)])
        .build()
        .unwrap();
    Executor::new(registry.view().names(["ticket.close", "ticket.reopen"]).build().unwrap()).unwrap()
}

fn ran(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("ran.log")).unwrap_or_default().lines().map(str::to_owned).collect()
}

/// The first process: four calls, each answered `approval_required` and kept.
async fn ask(dir: &Path) -> Vec<PendingCall> {
    let store = FileStore::open(dir.join("pending")).unwrap();
    let executor = executor(dir, "1.0");
    let mut kept = Vec::new();
    for (id, tool, ticket, ttl) in [
        ("call-approve", "ticket.close", "T-1", 3600),
        ("call-deny", "ticket.close", "T-2", 3600),
        ("call-expired", "ticket.close", "T-3", 0),
        ("call-stale", "ticket.reopen", "T-4", 3600),
    ] {
        let mut run = Run::builder(executor.clone()).id("run-42").build();
        let batch = run.process_batch(vec![ToolCall::new(id, tool, json!({"ticket": ticket}))]).await;
        assert_eq!(batch.decision, Decision::NeedsInput);
        let result = &batch.results[0];
        assert_eq!(result.code(), Some("approval_required"));
        let pending = PendingCall::from_result(&executor, result, Some("alice"), Duration::from_millis(ttl))
            .expect("an approval_required answer")
            .in_run(run.id());
        store.save(&pending).unwrap();
        kept.push(pending);
    }
    assert!(ran(dir).is_empty(), "nothing ran without an approval");
    kept
}

/// The second process: tools upgraded (`ticket.reopen` is now 1.1), every pending call taken and resolved.
async fn resolve(dir: &Path) -> Value {
    let store = FileStore::open(dir.join("pending")).unwrap();
    let executor = executor(dir, "1.1");
    let mut answers = serde_json::Map::new();
    for pending in store.list().unwrap() {
        let taken = store.take(&pending.key()).unwrap().expect("not taken yet");
        assert_eq!(taken, pending);
        assert!(store.take(&pending.key()).unwrap().is_none(), "a call is taken once");
        let resolution = if pending.call_id == "call-deny" {
            Resolution::deny("T-2 stays open until the customer confirms")
        } else {
            Resolution::Approve
        };
        let mut run = Run::builder(executor.clone()).id(pending.run_id.clone().unwrap()).build();
        let batch = run.resume(&taken, &resolution).await;
        let result = &batch.results[0];
        answers.insert(
            pending.call_id.clone(),
            json!({"code": result.code().unwrap_or("ok"), "executed": result.executed, "version": result.tool_version,
                   "message": result.error().map(|e| e.message.clone()), "decision": batch.decision.to_string()}),
        );
    }
    assert!(store.list().unwrap().is_empty(), "every pending call was taken");
    Value::Object(answers)
}

fn scratch(test: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("approvals-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test]
async fn pending_calls_are_resolved_by_another_process() {
    if std::env::var(ROLE).is_ok() {
        return;
    }
    let dir = scratch("two-processes");
    let kept = ask(&dir).await;
    assert_eq!(kept[0].tool_version, "1.0");
    assert_eq!(kept[0].requested_by.as_deref(), Some("alice"));
    assert_eq!(kept[0].arguments, json!({"ticket": "T-1"}));
    assert!(kept[0].contract.starts_with("fnv1a128:"));
    tokio::time::sleep(Duration::from_millis(5)).await; // past the zero-length expiry

    let child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "resolver", "--nocapture", "--test-threads=1"])
        .env(ROLE, "resolve")
        .env(DIR, &dir)
        .output()
        .expect("the second process runs");
    let stdout = String::from_utf8_lossy(&child.stdout);
    assert!(child.status.success(), "{stdout}{}", String::from_utf8_lossy(&child.stderr));
    let line =
        stdout.lines().find_map(|l| l.split_once("answers: ").map(|(_, a)| a)).unwrap_or_else(|| panic!("{stdout}"));
    let answers: Value = serde_json::from_str(line).unwrap();

    let get = |id: &str, key: &str| answers[id][key].clone();
    assert_eq!((get("call-approve", "code"), get("call-approve", "executed")), (json!("ok"), json!(true)));
    assert_eq!(get("call-approve", "decision"), "continue");
    assert_eq!((get("call-deny", "code"), get("call-deny", "executed")), (json!("approval_denied"), json!(false)));
    assert_eq!(get("call-deny", "message"), "T-2 stays open until the customer confirms", "the model reads why");
    assert_eq!(get("call-deny", "decision"), "continue");
    assert_eq!(
        (get("call-expired", "code"), get("call-expired", "executed")),
        (json!("approval_expired"), json!(false))
    );
    assert_eq!((get("call-stale", "code"), get("call-stale", "executed")), (json!("approval_stale"), json!(false)));
    assert_eq!(get("call-stale", "version"), "1.1");
    assert_eq!(get("call-stale", "decision"), "needs_input");
    assert_eq!(ran(&dir), ["ticket.close call-approve T-1"], "only the approved, unchanged call ran, once");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The second process's side of the test above (does nothing unless started by it).
#[tokio::test]
async fn resolver() {
    if std::env::var(ROLE).as_deref() != Ok("resolve") {
        return;
    }
    let dir = PathBuf::from(std::env::var(DIR).unwrap());
    let answers = resolve(&dir).await;
    println!("answers: {answers}");
}

#[tokio::test]
async fn an_approval_in_the_same_process_resumes_a_waiting_run() {
    if std::env::var(ROLE).is_ok() {
        return;
    }
    let dir = scratch("same-process");
    let executor = executor(&dir, "1.0");
    let mut run = Run::new(executor.clone());
    let batch = run.process_batch(vec![ToolCall::new("c1", "ticket.close", json!({"ticket": "T-9"}))]).await;
    assert_eq!(run.terminal(), Some(Decision::NeedsInput));
    let pending = PendingCall::from_result(&executor, &batch.results[0], None, Duration::from_secs(60)).unwrap();
    let resumed = run.resume(&pending, &Resolution::Approve).await;
    assert!(resumed.results[0].is_ok(), "{:?}", resumed.results[0]);
    assert_eq!(run.terminal(), None, "the run goes on");
    assert_eq!(run.state().steps(), 1);
    assert_eq!(ran(&dir), ["ticket.close c1 T-9"]);
    // An approval is for exactly the arguments asked about: a tampered pending call changes nothing.
    let mut tampered = pending.clone();
    tampered.call_id = "c2".into();
    tampered.arguments = json!({"ticket": "T-10", "extra": true});
    let refused = executor.resume(&tampered, &Resolution::Approve, &tool_core::CallOptions::new()).await;
    assert_eq!(refused.code(), Some("invalid_arguments"));
    assert_eq!(ran(&dir).len(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_corrupt_entry_is_named_and_left_in_place() {
    if std::env::var(ROLE).is_ok() {
        return;
    }
    let dir = scratch("corrupt");
    let store = FileStore::open(&dir).unwrap();
    let key = format!("pc-{}", "0".repeat(32));
    std::fs::write(dir.join(format!("{key}.json")), "{not json").unwrap();
    let err = store.list().unwrap_err();
    assert!(matches!(err, tool_core::PendingStoreError::Corrupt { ref entry, .. } if *entry == key), "{err}");
    assert!(store.take(&key).is_err());
    assert!(dir.join(format!("{key}.json")).exists(), "still there for an operator");
    assert!(store.take("../../etc/passwd").unwrap().is_none(), "a key is never a path");
    let _ = std::fs::remove_dir_all(&dir);
}
