//! A pending call is resolved once: its record, taken from a [`FileStore`], then saved again or copied back, is
//! refused.
//!
//! `cargo test -p keel-tools-core --test runtime -- pending_replay::`

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use keel_tools_core::definition::{Effect, ToolDefinition};
use keel_tools_core::executor::CallOptions;
use keel_tools_core::runs::{ApprovalKey, FileStore, PendingCall, PendingStore, Resolution};
use keel_tools_core::{Executor, Registry, ToolCall, ToolError};
use serde_json::{Value, json};

fn scratch(name: &str) -> std::path::PathBuf {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    std::env::temp_dir().join(format!("keel-call-state-{name}-{}-{nanos}", std::process::id()))
}

/// An executor with `ticket.close`, a write that asks for an approval; its runs counted in `runs`.
fn closer(runs: Arc<AtomicUsize>) -> Executor {
    let tool = ToolDefinition::builder("ticket.close")
        .description("Close a ticket.")
        .version("1.0")
        .effect(Effect::Write)
        .input_schema(json!({"type": "object", "properties": {"ticket": {"type": "string"}}, "required": ["ticket"]}))
        .handler(move |args: Value, _ctx: keel_tools_core::CallContext| {
            let runs = runs.clone();
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok::<_, ToolError>(json!(format!("closed {}", args["ticket"].as_str().unwrap_or(""))))
            }
        })
        .build()
        .unwrap();
    let registry = Registry::builder().without_inventory().tools([tool]).build().unwrap();
    let key = ApprovalKey::new([7u8; 32]).unwrap();
    Executor::builder(registry.view().build().unwrap()).approval_key(key).build().unwrap()
}

async fn ask(executor: &Executor, id: &str) -> PendingCall {
    let asked = executor.call(ToolCall::new(id, "ticket.close", json!({"ticket": "T-1"}))).await;
    assert_eq!(asked.code(), Some("approval_required"), "{asked:?}");
    PendingCall::from_result(executor, &asked, Some("alice"), Duration::from_secs(3600)).unwrap()
}

#[tokio::test]
async fn a_taken_pending_call_put_back_in_a_file_store_is_refused() {
    let runs = Arc::new(AtomicUsize::new(0));
    let executor = closer(runs.clone());
    let dir = scratch("replay");
    let store = FileStore::open(&dir).unwrap();
    let pending = ask(&executor, "c1").await;
    store.save(&pending).unwrap();
    let file = dir.join(format!("{}.json", pending.key()));
    let copy = std::fs::read(&file).unwrap();
    let taken = store.take(&pending.key()).unwrap().expect("saved");
    assert!(executor.resume(&taken, &Resolution::Approve, &CallOptions::new()).await.is_ok());

    // Saved again through the store: refused.
    let again = store.save(&pending);
    assert!(again.is_err(), "a taken record saved again: {again:?}");
    assert!(again.unwrap_err().to_string().contains("taken before"));
    assert_eq!(store.take(&pending.key()).unwrap(), None);

    // Copied back into the directory: taken, and refused as consumed; gone after that.
    std::fs::write(&file, &copy).unwrap();
    let replayed = FileStore::open(&dir).unwrap().take(&pending.key());
    assert!(
        matches!(&replayed, Err(e) if e.to_string().contains("taken before")),
        "a taken record copied back: {replayed:?}"
    );
    assert!(!file.exists());
    assert!(store.list().unwrap().is_empty());
    assert_eq!(runs.load(Ordering::SeqCst), 1);

    // The same call asked again is a new record: saved, taken and run as any other.
    let asked_again = ask(&executor, "c1").await;
    assert_eq!(asked_again.key(), pending.key());
    store.save(&asked_again).unwrap();
    let taken = store.take(&asked_again.key()).unwrap().expect("a new record");
    assert!(executor.resume(&taken, &Resolution::Approve, &CallOptions::new()).await.is_ok());
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    let _ = std::fs::remove_dir_all(&dir);
}
