//! Approvals that wait: `approval_required` answers kept as pending calls in a `FileStore`, then resolved by a
//! second process (this test binary, started again as a child) with approve and deny decisions, after the tools
//! were "upgraded" in between. Only the approved call of an unchanged contract runs, exactly once.
//!
//! Pending calls are signed: a record changed in the store, to valid arguments or in any other field, never runs;
//! a record of the previous key still runs after a rotation, one of an unknown key does not; of two processes
//! taking one call at once, exactly one runs it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use keel_tools_core::definition::{Effect, ToolDefinition};
use keel_tools_core::events::Decision;
use keel_tools_core::executor::CallOptions;
use keel_tools_core::runs::{ApprovalKey, FileStore, PendingCall, PendingStore, PendingStoreError, Resolution, Run};
use keel_tools_core::{Executor, Registry, ToolCall, ToolError, ToolResult};
use serde_json::{Value, json};

const ROLE: &str = "KEEL_PENDING_ROLE";
const DIR: &str = "KEEL_PENDING_DIR";
/// The approval key the processes share (absent: each process has its own random key).
const KEY: &str = "KEEL_PENDING_KEY";
/// When the takers start, in milliseconds since the Unix epoch.
const START: &str = "KEEL_PENDING_START";

/// `ticket.close` (the same in both processes) and `ticket.reopen` (at `reopen_version`): both append the call to
/// `ran.log` in `dir` when they run. Pending calls are signed with `key` (default: the process's random key).
fn executor(dir: &Path, reopen_version: &'static str, key: Option<ApprovalKey>) -> Executor {
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
            .handler(move |args: Value, ctx: keel_tools_core::CallContext| {
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
    let builder = Executor::builder(registry.view().names(["ticket.close", "ticket.reopen"]).build().unwrap());
    match key {
        Some(key) => builder.approval_key(key),
        None => builder,
    }
    .build()
    .unwrap()
}

/// A key for this test run, as the processes read it from their configuration.
fn shared_key() -> String {
    format!("a key the processes of test run {} share", std::process::id())
}

/// The key in the environment, if the parent passed one.
fn key_from_env() -> Option<ApprovalKey> {
    std::env::var(KEY).ok().map(|k| ApprovalKey::new(k).expect("32 bytes or more"))
}

fn unix_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

/// The pending call of `tool` for `ticket`, asked by alice, answered `approval_required` by `executor`.
async fn ask_one(executor: &Executor, id: &str, tool: &str, ticket: &str, ttl: Duration) -> PendingCall {
    let asked = executor.call(ToolCall::new(id, tool, json!({"ticket": ticket}))).await;
    assert_eq!(asked.code(), Some("approval_required"), "{asked:?}");
    PendingCall::from_result(executor, &asked, Some("alice"), ttl).expect("an approval_required answer")
}

/// Whether `result` is the refusal of a record that does not verify: not run, asked for again.
fn refused_unverified(result: &ToolResult) -> bool {
    result.code() == Some("approval_stale")
        && !result.executed
        && result.error().is_some_and(|e| e.details == Some(json!({"verified": false})) && !e.message.contains("mac"))
}

fn ran(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("ran.log")).unwrap_or_default().lines().map(str::to_owned).collect()
}

/// The first process: four calls, each answered `approval_required` and kept.
async fn ask(dir: &Path, key: ApprovalKey) -> Vec<PendingCall> {
    let store = FileStore::open(dir.join("pending")).unwrap();
    let executor = executor(dir, "1.0", Some(key));
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

/// The second process: tools upgraded (`ticket.reopen` is now 1.1), every pending call taken and resolved, with
/// the key in the environment if there is one.
async fn resolve(dir: &Path) -> Value {
    let store = FileStore::open(dir.join("pending")).unwrap();
    let executor = executor(dir, "1.1", key_from_env());
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
                   "message": result.error().map(|e| e.message.clone()), "decision": batch.decision.to_string(),
                   "details": result.error().and_then(|e| e.details.clone())}),
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

/// Starts this binary again as the process `role`, running the test `test` of this module, with the environment
/// `env`.
fn child(test: &str, role: &str, env: &[(&str, &str)]) -> Command {
    // libtest names a test by its module path below the crate: `approvals_pending::resolver` where this file is a
    // module of a binary, `resolver` where it is the binary.
    let test = module_path!().split_once("::").map_or(test.to_owned(), |(_, module)| format!("{module}::{test}"));
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args(["--exact", &test, "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for (name, value) in env {
        command.env(name, value);
    }
    command
}

/// The JSON a child printed after `label`.
fn printed(output: &std::process::Output, label: &str) -> Value {
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{stdout}{}", String::from_utf8_lossy(&output.stderr));
    let line = stdout.lines().find_map(|l| l.split_once(label).map(|(_, a)| a)).unwrap_or_else(|| panic!("{stdout}"));
    serde_json::from_str(line).unwrap()
}

#[tokio::test]
async fn pending_calls_are_resolved_by_another_process() {
    if std::env::var(ROLE).is_ok() {
        return;
    }
    let dir = scratch("two-processes");
    let key = shared_key();
    let kept = ask(&dir, ApprovalKey::new(&key).unwrap()).await;
    assert_eq!(kept[0].tool_version, "1.0");
    assert_eq!(kept[0].requested_by.as_deref(), Some("alice"));
    assert_eq!(kept[0].arguments, json!({"ticket": "T-1"}));
    assert!(kept[0].contract.starts_with("fnv1a128:"));
    tokio::time::sleep(Duration::from_millis(5)).await; // past the zero-length expiry
    let dir_text = dir.to_str().unwrap();

    // Without the shared key, the second process holds a random key of its own: it verifies none of the calls
    // and runs none (a denial included: it is answered as the rest).
    let answers = printed(&child("resolver", "resolve", &[(DIR, dir_text)]).output().unwrap(), "answers: ");
    for id in ["call-approve", "call-deny", "call-expired", "call-stale"] {
        assert_eq!(answers[id]["code"], "approval_stale", "{id}: {answers}");
        assert_eq!((&answers[id]["executed"], &answers[id]["details"]), (&json!(false), &json!({"verified": false})));
        assert_eq!(answers[id]["decision"], "needs_input", "{id}: asked again");
    }
    assert!(ran(&dir).is_empty());

    // A record that was taken is consumed, whatever came of it: saved again, it is refused. So the calls are asked
    // for again, and kept under the shared key.
    let store = FileStore::open(dir.join("pending")).unwrap();
    for pending in &kept {
        let again = store.save(pending);
        assert!(matches!(again, Err(PendingStoreError::Consumed { .. })), "{again:?}");
    }
    ask(&dir, ApprovalKey::new(&key).unwrap()).await;
    tokio::time::sleep(Duration::from_millis(5)).await; // past the zero-length expiry

    // With the key, each is resolved on its merits.
    let answers =
        printed(&child("resolver", "resolve", &[(DIR, dir_text), (KEY, &key)]).output().unwrap(), "answers: ");
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
    assert_eq!(get("call-stale", "details"), json!({"approved_version": "1.0", "current_version": "1.1"}));
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
    let executor = executor(&dir, "1.0", None);
    let mut run = Run::new(executor.clone());
    let batch = run.process_batch(vec![ToolCall::new("c1", "ticket.close", json!({"ticket": "T-9"}))]).await;
    assert_eq!(run.terminal(), Some(Decision::NeedsInput));
    let pending = PendingCall::from_result(&executor, &batch.results[0], None, Duration::from_secs(60)).unwrap();
    let resumed = run.resume(&pending, &Resolution::Approve).await;
    assert!(resumed.results[0].is_ok(), "{:?}", resumed.results[0]);
    assert_eq!(run.terminal(), None, "the run goes on");
    assert_eq!(run.state().steps(), 1);
    assert_eq!(ran(&dir), ["ticket.close c1 T-9"]);
    // An approval is for exactly the record signed: a tampered pending call changes nothing.
    let mut tampered = pending.clone();
    tampered.call_id = "c2".into();
    tampered.arguments = json!({"ticket": "T-10", "extra": true});
    let refused = executor.resume(&tampered, &Resolution::Approve, &CallOptions::new()).await;
    assert!(refused_unverified(&refused), "{refused:?}");
    assert_eq!(ran(&dir).len(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Changes the record kept under `key` in `store` as `change` says, as someone who can write the store would.
fn tamper(store: &FileStore, key: &str, change: impl FnOnce(&mut serde_json::Map<String, Value>)) {
    let path = store.dir().join(format!("{key}.json"));
    let mut record: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    change(record.as_object_mut().unwrap());
    std::fs::write(&path, serde_json::to_vec_pretty(&record).unwrap()).unwrap();
}

#[tokio::test]
async fn a_record_changed_in_the_store_never_runs() {
    if std::env::var(ROLE).is_ok() {
        return;
    }
    let dir = scratch("tampered");
    let key = ApprovalKey::new(shared_key()).unwrap();
    let asker = executor(&dir, "1.0", Some(key.clone()));
    // The resolver runs `ticket.reopen` 1.1: a record of 1.0 is stale unless its version is changed too.
    let resolver = executor(&dir, "1.1", Some(key));
    let reopen_now = resolver.view().get("ticket.reopen").unwrap().contract_fingerprint();
    let store = FileStore::open(dir.join("pending")).unwrap();
    let hour = Duration::from_secs(3600);
    type Change = Box<dyn FnOnce(&mut serde_json::Map<String, Value>)>;
    // Each change would make the call run if the record were believed: the arguments are valid, the expiry is
    // later, the version and contract are those of the tool as it is now.
    let cases: Vec<(&str, &str, Duration, Change)> = vec![
        (
            "other valid arguments",
            "ticket.close",
            hour,
            Box::new(|r| drop(r.insert("arguments".into(), json!({"ticket": "T-666"})))),
        ),
        ("requested_by", "ticket.close", hour, Box::new(|r| drop(r.insert("requested_by".into(), json!("root"))))),
        (
            "requested_by removed",
            "ticket.close",
            hour,
            Box::new(|r| drop(r.insert("requested_by".into(), Value::Null))),
        ),
        ("call_id", "ticket.close", hour, Box::new(|r| drop(r.insert("call_id".into(), json!("another-call"))))),
        ("reason", "ticket.close", hour, Box::new(|r| drop(r.insert("reason".into(), json!("approved already"))))),
        (
            "expires_at_ms",
            "ticket.close",
            Duration::ZERO,
            Box::new(|r| drop(r.insert("expires_at_ms".into(), json!(u64::MAX)))),
        ),
        (
            "tool_version and contract",
            "ticket.reopen",
            hour,
            Box::new(move |r| {
                r.insert("tool_version".into(), json!("1.1"));
                r.insert("contract".into(), json!(reopen_now));
            }),
        ),
        ("mac removed", "ticket.close", hour, Box::new(|r| drop(r.remove("mac")))),
        ("key_id", "ticket.close", hour, Box::new(|r| drop(r.insert("key_id".into(), json!("00000000"))))),
    ];
    tokio::time::sleep(Duration::from_millis(5)).await;
    for (i, (what, tool, ttl, change)) in cases.into_iter().enumerate() {
        let pending = ask_one(&asker, &format!("call-{i}"), tool, &format!("T-{i}"), ttl).await;
        store.save(&pending).unwrap();
        tokio::time::sleep(Duration::from_millis(2)).await; // past a zero-length expiry
        tamper(&store, &pending.key(), change);
        let taken = store.take(&pending.key()).unwrap().expect("kept");
        assert_ne!(taken, pending, "{what}: the record was changed");
        let result = resolver.resume(&taken, &Resolution::Approve, &CallOptions::new()).await;
        assert!(refused_unverified(&result), "{what}: {result:?}");
        assert!(ran(&dir).is_empty(), "{what}: the handler never ran");
    }
    // The same, unchanged, runs.
    let pending = ask_one(&asker, "call-kept", "ticket.close", "T-1", hour).await;
    store.save(&pending).unwrap();
    let taken = store.take(&pending.key()).unwrap().expect("kept");
    let result = resolver.resume(&taken, &Resolution::Approve, &CallOptions::new()).await;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(ran(&dir), ["ticket.close call-kept T-1"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_rotated_key_still_resolves_what_the_previous_one_signed() {
    if std::env::var(ROLE).is_ok() {
        return;
    }
    let dir = scratch("rotation");
    let (old, new, other) = (
        ApprovalKey::new([1u8; 32]).unwrap(),
        ApprovalKey::new([2u8; 32]).unwrap(),
        ApprovalKey::new([3u8; 32]).unwrap(),
    );
    let hour = Duration::from_secs(3600);
    let before = ask_one(&executor(&dir, "1.0", Some(old.clone())), "before", "ticket.close", "T-1", hour).await;
    let unknown = ask_one(&executor(&dir, "1.0", Some(other)), "unknown", "ticket.close", "T-2", hour).await;
    let unkeyed = ask_one(&executor(&dir, "1.0", None), "unkeyed", "ticket.close", "T-3", hour).await;
    let rotated = executor(&dir, "1.0", Some(new.clone().with_previous(old.clone())));
    let after = ask_one(&rotated, "after", "ticket.close", "T-4", hour).await;
    assert_eq!((before.key_id(), after.key_id()), (old.id(), new.id()), "signed with the current key");
    // Read back as from a store.
    let read = |p: &PendingCall| serde_json::from_str::<PendingCall>(&serde_json::to_string(p).unwrap()).unwrap();

    let resume = |e: &Executor, p: &PendingCall| {
        let (e, p) = (e.clone(), read(p));
        async move { e.resume(&p, &Resolution::Approve, &CallOptions::new()).await }
    };
    assert!(resume(&rotated, &before).await.is_ok(), "the previous key still verifies");
    assert!(resume(&rotated, &after).await.is_ok());
    assert!(refused_unverified(&resume(&rotated, &unknown).await), "an unknown key");
    assert!(refused_unverified(&resume(&rotated, &unkeyed).await), "the process's random key is not configured");
    assert!(resume(&executor(&dir, "1.0", None), &unkeyed).await.is_ok(), "another executor of this process");
    // Rotated again: the key before the previous one is no longer accepted.
    let again = executor(&dir, "1.0", Some(ApprovalKey::new([4u8; 32]).unwrap().with_previous(new)));
    assert!(refused_unverified(&resume(&again, &before).await));
    assert!(resume(&again, &after).await.is_ok());
    assert_eq!(
        ran(&dir),
        ["ticket.close before T-1", "ticket.close after T-4", "ticket.close unkeyed T-3", "ticket.close after T-4"]
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// How many calls the takers race for, and how far apart (each taker starts each take at the same instant).
const RACED: usize = 20;
const RACE_SPACING_MS: u64 = 15;

#[tokio::test]
async fn two_processes_taking_one_call_run_it_once() {
    if std::env::var(ROLE).is_ok() {
        return;
    }
    let dir = scratch("race");
    let key = shared_key();
    let executor = executor(&dir, "1.0", Some(ApprovalKey::new(&key).unwrap()));
    let store = FileStore::open(dir.join("pending")).unwrap();
    for i in 0..RACED {
        let pending =
            ask_one(&executor, &format!("race-{i}"), "ticket.close", &format!("T-{i}"), Duration::from_secs(3600))
                .await;
        store.save(&pending).unwrap();
    }
    let start = (unix_ms() + 500).to_string();
    let env = [(DIR, dir.to_str().unwrap()), (KEY, key.as_str()), (START, start.as_str())];
    let takers: Vec<_> = (0..2).map(|_| child("taker", "take", &env).spawn().unwrap()).collect();
    let took: Vec<Value> = takers.into_iter().map(|t| printed(&t.wait_with_output().unwrap(), "took: ")).collect();

    let ran = ran(&dir);
    for i in 0..RACED {
        let id = json!(format!("race-{i}"));
        let takers = took.iter().filter(|t| t.as_array().unwrap().contains(&id)).count();
        assert_eq!(takers, 1, "race-{i} was taken by exactly one process: {took:?}");
        let runs = ran.iter().filter(|l| **l == format!("ticket.close race-{i} T-{i}")).count();
        assert_eq!(runs, 1, "race-{i} ran exactly once: {ran:?}");
    }
    assert_eq!(ran.len(), RACED);
    assert!(store.list().unwrap().is_empty(), "every call was taken");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A taker of the test above (does nothing unless started by it): takes and runs every call it can, each at its
/// instant, and prints the ids of those it took.
#[tokio::test]
async fn taker() {
    if std::env::var(ROLE).as_deref() != Ok("take") {
        return;
    }
    let dir = PathBuf::from(std::env::var(DIR).unwrap());
    let start: u64 = std::env::var(START).unwrap().parse().unwrap();
    let store = FileStore::open(dir.join("pending")).unwrap();
    let executor = executor(&dir, "1.0", key_from_env());
    let calls = store.list().unwrap();
    let mut took = Vec::new();
    for (i, pending) in calls.iter().enumerate() {
        let at = start + i as u64 * RACE_SPACING_MS;
        if let Some(wait) = at.checked_sub(unix_ms() + 2) {
            std::thread::sleep(Duration::from_millis(wait));
        }
        while unix_ms() < at {
            std::hint::spin_loop();
        }
        if let Some(taken) = store.take(&pending.key()).unwrap() {
            let result = executor.resume(&taken, &Resolution::Approve, &CallOptions::new()).await;
            assert!(result.is_ok(), "{result:?}");
            took.push(taken.call_id);
        }
    }
    println!("took: {}", json!(took));
}

#[test]
fn a_corrupt_entry_is_named_and_left_in_place() {
    if std::env::var(ROLE).is_ok() {
        return;
    }
    let dir = scratch("corrupt").join("pending");
    let store = FileStore::open(&dir).unwrap();
    let key = format!("pc-{}", "0".repeat(32));
    std::fs::write(dir.join(format!("{key}.json")), "{not json").unwrap();
    let err = store.list().unwrap_err();
    assert!(
        matches!(err, keel_tools_core::runs::PendingStoreError::Corrupt { ref entry, .. } if *entry == key),
        "{err}"
    );
    assert!(std::error::Error::source(&err).is_some_and(|s| s.is::<serde_json::Error>()), "{err:?}");
    assert!(store.take(&key).is_err());
    assert!(dir.join(format!("{key}.json")).exists(), "still there for an operator");
    assert!(store.take("../../etc/passwd").unwrap().is_none(), "a key is never a path");
    let _ = std::fs::remove_dir_all(dir.parent().unwrap());
}
