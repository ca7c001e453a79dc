//! A pending call is resolved once: its record, taken, then saved again or put back in the table, is refused,
//! against both databases.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use keel_tools_core::definition::{Effect, ToolDefinition};
use keel_tools_core::executor::CallOptions;
use keel_tools_core::runs::{ApprovalKey, PendingCall, PendingStore, Resolution};
use keel_tools_core::{Executor, Registry, ToolCall, ToolError};
use keel_tools_state::{PostgresPendingStore, SqlitePendingStore};
use serde_json::{Value, json};

use crate::Db;

impl Db {
    fn pending_table(&self) -> String {
        match self {
            Db::Sqlite(_) => "keel_pending_calls".to_owned(),
            Db::Postgres { prefix, .. } => format!("{prefix}_pending"),
        }
    }

    /// A pending-call store: its own connection(s), as another process or replica would have.
    fn pending(&self) -> Box<dyn PendingStore> {
        match self {
            Db::Sqlite(path) => Box::new(SqlitePendingStore::open(path).unwrap()),
            Db::Postgres { conninfo, .. } => {
                Box::new(PostgresPendingStore::builder(conninfo).table(self.pending_table()).connect_pending().unwrap())
            }
        }
    }

    /// Runs `sql` over a connection of its own (an operator's `sqlite3` or `psql`).
    async fn exec(&self, sql: &str) {
        match self {
            Db::Sqlite(path) => rusqlite::Connection::open(path).unwrap().execute_batch(sql).expect(sql),
            Db::Postgres { conninfo, .. } => {
                let (client, connection) = tokio_postgres::connect(conninfo, tokio_postgres::NoTls).await.unwrap();
                let driver = tokio::spawn(connection);
                client.batch_execute(sql).await.expect(sql);
                drop(client);
                let _ = driver.await;
            }
        }
    }
}

// ---- A pending call taken, then put back ----

/// An executor with `ticket.close` (a write: it asks for an approval), which counts its runs in `runs`.
fn closing(runs: Arc<AtomicUsize>) -> Executor {
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
    let key = ApprovalKey::new([9u8; 32]).unwrap();
    Executor::builder(registry.view().build().unwrap()).approval_key(key).build().unwrap()
}

async fn ask(executor: &Executor, id: &str) -> PendingCall {
    let asked = executor.call(ToolCall::new(id, "ticket.close", json!({"ticket": "T-1"}))).await;
    assert_eq!(asked.code(), Some("approval_required"), "{asked:?}");
    PendingCall::from_result(executor, &asked, Some("alice"), Duration::from_secs(3600)).unwrap()
}

both!(a_taken_pending_call_put_back_is_refused);
async fn a_taken_pending_call_put_back_is_refused(db: Db) {
    let runs = Arc::new(AtomicUsize::new(0));
    let executor = closing(runs.clone());
    let store = db.pending();
    let pending = ask(&executor, "c1").await;
    store.save(&pending).unwrap();
    let taken = store.take(&pending.key()).unwrap().expect("saved");
    assert!(executor.resume(&taken, &Resolution::Approve, &CallOptions::new()).await.is_ok());

    // Saved again through the store (by a replica, or by whoever kept a copy): refused, and nothing to take.
    let again = db.pending().save(&pending);
    assert!(again.is_err(), "a taken record saved again: {again:?}");
    assert!(again.unwrap_err().to_string().contains("taken before"));
    assert_eq!(store.take(&pending.key()).unwrap(), None);

    // Put back behind the store's back, in the table itself: taken, and refused as taken before; gone after that.
    db.exec(&format!(
        "INSERT INTO {} (key, record, expires_at_ms, saved_at_ms) VALUES ('{}', '{}', {}, 0)",
        db.pending_table(),
        pending.key(),
        serde_json::to_string(&pending).unwrap().replace('\'', "''"),
        pending.expires_at_ms
    ))
    .await;
    let replayed = db.pending().take(&pending.key());
    assert!(
        matches!(&replayed, Err(e) if e.to_string().contains("taken before")),
        "a taken record put back in the table: {replayed:?}"
    );
    assert_eq!(store.take(&pending.key()).unwrap(), None);
    assert_eq!(runs.load(Ordering::SeqCst), 1, "it ran once");

    // The same call asked again is a new record: saved, taken and run as any other.
    let asked_again = ask(&executor, "c1").await;
    assert_eq!(asked_again.key(), pending.key());
    store.save(&asked_again).unwrap();
    let taken = store.take(&asked_again.key()).unwrap().expect("a new record");
    assert!(executor.resume(&taken, &Resolution::Approve, &CallOptions::new()).await.is_ok());
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}
