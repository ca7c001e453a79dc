//! Call state shared by replicas (`keel-tools-state`): one contract, run against a SQLite file (`NAME::sqlite`) and
//! a PostgreSQL database (`NAME::postgres`, in the cluster of `KEEL_TEST_POSTGRES`; skipped without it, a failure
//! with `CI` set).
//!
//! Pending calls: taken exactly once by concurrent takers on several threads and several stores (replicas), listed
//! in key order, replaced on a second save, expired ones refused by `resume` and purged, a record altered in the
//! database refused by `resume`, a corrupt row reported and left in place, the sync methods called from inside
//! Tokio runtimes. Effect records: begin/finish/replay, abandon, exactly one `Run` among concurrent begins on
//! several stores, a lease that expires lets the call run again (and the old runner can no longer finish), a
//! renewed lease holds, another fingerprint conflicts, records past the retention forgotten and purged, a corrupt
//! result reported. Through the executor: a retried write replayed, a caller's key across replicas, concurrent
//! duplicates, in_progress, conflicts, an unreachable ledger, and a handler that commits its effect and its record in
//! one transaction (a retry after the executor failed to record is replayed; a taken-over lease rolls it back).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use std::time::Duration;

use keel_tools_core::definition::{Effect, ToolDefinition};
use keel_tools_core::executor::CallOptions;
use keel_tools_core::once::{EffectLedger, OnceFor};
use keel_tools_core::runs::{ApprovalKey, PendingCall, PendingStore, PendingStoreError, Resolution};
use keel_tools_core::{Executor, Registry, ToolCall, ToolError};
use keel_tools_state::{
    Begin, EffectStore, PostgresEffectStore, PostgresPendingStore, SqliteEffectStore, SqlitePendingStore, StateError,
};
use serde_json::{Value, json};

use crate::state_db::{Db, TempDir, both};

// ---- Helpers ----

/// A pending-call store of either kind (their `purge_expired` is not part of the trait).
enum Pending {
    Sqlite(SqlitePendingStore),
    Postgres(PostgresPendingStore),
}

impl Pending {
    fn store(&self) -> &dyn PendingStore {
        match self {
            Pending::Sqlite(s) => s,
            Pending::Postgres(s) => s,
        }
    }
    fn purge_expired(&self, grace: Duration) -> u64 {
        match self {
            Pending::Sqlite(s) => s.purge_expired(grace),
            Pending::Postgres(s) => s.purge_expired(grace),
        }
        .expect("purge")
    }
}

impl Db {
    /// A pending-call store: its own connection(s), as another process or replica would have.
    fn pending(&self) -> Pending {
        match self {
            Db::Sqlite(dir) => Pending::Sqlite(SqlitePendingStore::open(dir.db()).expect("open")),
            Db::Postgres(pg) => Pending::Postgres(PostgresPendingStore::connect(&pg.conninfo).expect("connect")),
        }
    }

    /// An effect store, results kept for `retention`: its own connection(s).
    fn effects(&self, retention: Duration) -> Arc<dyn EffectStore> {
        match self {
            Db::Sqlite(dir) => {
                Arc::new(SqliteEffectStore::builder(dir.db()).retention(retention).open_effects().expect("open"))
            }
            Db::Postgres(pg) => Arc::new(
                PostgresEffectStore::builder(&pg.conninfo).retention(retention).connect_effects().expect("connect"),
            ),
        }
    }
}

/// The key the replicas share.
fn key() -> ApprovalKey {
    ApprovalKey::new(format!("the approval key the replicas of test run {} share", std::process::id())).unwrap()
}

/// An executor with `ticket.close` (a write: it asks for an approval), which counts its runs in `runs`.
fn executor(runs: Arc<AtomicUsize>) -> Executor {
    let tool = ToolDefinition::builder("ticket.close")
        .description("Close a ticket.")
        .version("1.0")
        .effect(Effect::Write)
        .input_schema(json!({
            "type": "object",
            "properties": {"ticket": {"type": "string"}},
            "required": ["ticket"],
            "additionalProperties": false
        }))
        .handler(move |args: Value, _ctx: keel_tools_core::CallContext| {
            let runs = runs.clone();
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                Ok::<_, ToolError>(json!(format!("closed {}", args["ticket"].as_str().unwrap_or(""))))
            }
        })
        .build()
        .expect("a valid definition");
    let registry = Registry::builder().without_inventory().tools([tool]).build().unwrap();
    Executor::builder(registry.view().names(["ticket.close"]).build().unwrap()).approval_key(key()).build().unwrap()
}

/// The pending call `id` for `ticket`, expiring after `ttl`.
async fn ask(executor: &Executor, id: &str, ticket: &str, ttl: Duration) -> PendingCall {
    let asked = executor.call(ToolCall::new(id, "ticket.close", json!({"ticket": ticket}))).await;
    assert_eq!(asked.code(), Some("approval_required"), "{asked:?}");
    PendingCall::from_result(executor, &asked, Some("alice"), ttl).expect("an approval_required answer")
}

const HOUR: Duration = Duration::from_secs(3600);

fn lease_of(begin: Begin) -> keel_tools_state::Lease {
    match begin {
        Begin::Run(lease) => lease,
        other => panic!("expected Run, got {other:?}"),
    }
}

// ---- Pending calls ----

both!(a_pending_call_is_taken_exactly_once_by_concurrent_takers);
async fn a_pending_call_is_taken_exactly_once_by_concurrent_takers(db: Db) {
    let runs = Arc::new(AtomicUsize::new(0));
    let executor = executor(runs.clone());
    let saver = db.pending();
    let db = Arc::new(db);
    // Two stores of their own (replicas), each shared by several threads.
    let replicas: Vec<Arc<Pending>> = (0..2).map(|_| Arc::new(db.pending())).collect();
    for round in 0..5 {
        let pending = ask(&executor, &format!("call-{round}"), &format!("T-{round}"), HOUR).await;
        saver.store().save(&pending).unwrap();
        let key = pending.key();
        let takers = 8;
        let barrier = Arc::new(Barrier::new(takers));
        let threads: Vec<_> = (0..takers)
            .map(|i| {
                let (store, barrier, key) = (replicas[i % replicas.len()].clone(), barrier.clone(), key.clone());
                std::thread::spawn(move || {
                    barrier.wait();
                    store.store().take(&key).expect("take")
                })
            })
            .collect();
        let got: Vec<PendingCall> = threads.into_iter().filter_map(|t| t.join().unwrap()).collect();
        assert_eq!(got.len(), 1, "round {round}: exactly one taker gets the call");
        assert_eq!(got[0], pending, "the record comes back verbatim");
        let done = executor.resume(&got[0], &Resolution::Approve, &CallOptions::new()).await;
        assert_eq!(done.data(), Some(&json!(format!("closed T-{round}"))), "{done:?}");
    }
    assert_eq!(runs.load(Ordering::SeqCst), 5, "each approved call ran once");
    assert!(saver.store().list().unwrap().is_empty());
}

both!(calls_are_listed_in_key_order_and_a_second_save_replaces_the_first);
async fn calls_are_listed_in_key_order_and_a_second_save_replaces_the_first(db: Db) {
    let executor = executor(Arc::default());
    let store = db.pending();
    let mut saved = Vec::new();
    for i in 0..6 {
        let pending = ask(&executor, &format!("c{i}"), "T-1", HOUR).await;
        store.store().save(&pending).unwrap();
        saved.push(pending);
    }
    let mut keys: Vec<String> = saved.iter().map(PendingCall::key).collect();
    keys.sort();
    let listed = db.pending().store().list().unwrap();
    assert_eq!(listed.iter().map(PendingCall::key).collect::<Vec<_>>(), keys, "in key order, from another store");

    // The same call asked again (a longer expiry): one record, the second.
    let again = ask(&executor, "c0", "T-1", HOUR * 2).await;
    assert_eq!(again.key(), saved[0].key());
    store.store().save(&again).unwrap();
    let listed = store.store().list().unwrap();
    assert_eq!(listed.len(), 6);
    assert_eq!(listed.iter().find(|p| p.key() == again.key()), Some(&again), "replaced");
    assert_eq!(store.store().take(&again.key()).unwrap(), Some(again));
    assert_eq!(store.store().take("pc-nothing-here").unwrap(), None);
}

both!(an_expired_call_is_refused_by_resume_and_purged);
async fn an_expired_call_is_refused_by_resume_and_purged(db: Db) {
    let runs = Arc::new(AtomicUsize::new(0));
    let executor = executor(runs.clone());
    let store = db.pending();
    let expired = ask(&executor, "late", "T-1", Duration::ZERO).await;
    let live = ask(&executor, "on-time", "T-2", HOUR).await;
    let expired_too = ask(&executor, "late-too", "T-3", Duration::ZERO).await;
    for p in [&expired, &live, &expired_too] {
        store.store().save(p).unwrap();
    }
    tokio::time::sleep(Duration::from_millis(20)).await;

    // Listed and taken as any other, so that resume can say why it does not run.
    assert_eq!(store.store().list().unwrap().len(), 3);
    let taken = store.store().take(&expired.key()).unwrap().expect("kept until purged");
    let refused = executor.resume(&taken, &Resolution::Approve, &CallOptions::new()).await;
    assert_eq!((refused.code(), refused.executed), (Some("approval_expired"), false), "{refused:?}");

    assert_eq!(store.purge_expired(HOUR), 0, "not expired for an hour yet");
    assert_eq!(store.purge_expired(Duration::ZERO), 1, "the other expired call");
    assert_eq!(store.store().list().unwrap(), vec![live.clone()], "the live call stays");
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

both!(a_record_altered_in_the_database_is_refused_and_a_corrupt_row_reported);
async fn a_record_altered_in_the_database_is_refused_and_a_corrupt_row_reported(db: Db) {
    let runs = Arc::new(AtomicUsize::new(0));
    let executor = executor(runs.clone());
    let store = db.pending();
    let pending = ask(&executor, "c1", "T-1", HOUR).await;
    store.store().save(&pending).unwrap();

    // Someone with write access to the table points the approved call at another ticket.
    db.exec("UPDATE keel_pending_calls SET record = replace(record, '\"T-1\"', '\"T-2\"')").await;
    let taken = store.store().take(&pending.key()).unwrap().expect("taken as it is");
    assert_eq!(taken.arguments, json!({"ticket": "T-2"}), "the change reached the record");
    let refused = executor.resume(&taken, &Resolution::Approve, &CallOptions::new()).await;
    assert_eq!((refused.code(), refused.executed), (Some("approval_stale"), false), "{refused:?}");
    assert_eq!(refused.error().and_then(|e| e.details.clone()), Some(json!({"verified": false})));
    assert_eq!(runs.load(Ordering::SeqCst), 0, "never ran");

    // A row that is not a pending call: reported, never a panic, and left for an operator.
    let other = ask(&executor, "c2", "T-3", HOUR).await;
    store.store().save(&other).unwrap();
    db.exec("UPDATE keel_pending_calls SET record = '{\"not\": \"a pending call\"'").await;
    for _ in 0..2 {
        let err = store.store().take(&other.key()).unwrap_err();
        assert!(matches!(&err, PendingStoreError::Corrupt { entry, .. } if *entry == other.key()), "{err:?}");
    }
    assert!(matches!(store.store().list(), Err(PendingStoreError::Corrupt { .. })));
    // A valid record kept under another call's key is not that call.
    db.exec(&format!(
        "UPDATE keel_pending_calls SET record = '{}'",
        serde_json::to_string(&pending).unwrap().replace('\'', "''")
    ))
    .await;
    let err = store.store().take(&other.key()).unwrap_err();
    assert!(err.to_string().contains("is the call of key"), "{err}");
}

both!(the_sync_methods_work_from_inside_tokio_runtimes);
async fn the_sync_methods_work_from_inside_tokio_runtimes(db: Db) {
    let executor = executor(Arc::default());
    // Three records: one taken is not saved again (it would be refused as taken before).
    let pending = ask(&executor, "c1", "T-1", HOUR).await;
    let second = ask(&executor, "c2", "T-2", HOUR).await;
    let third = ask(&executor, "c3", "T-3", HOUR).await;
    let db = Arc::new(db);
    // On a worker of this multi-threaded runtime, from a spawned task.
    let (d, p) = (db.clone(), pending.clone());
    tokio::spawn(async move {
        let store = d.pending();
        store.store().save(&p).unwrap();
        assert_eq!(store.store().list().unwrap().len(), 1);
        drop(store); // dropped inside the runtime: no panic
    })
    .await
    .unwrap();
    // From a current-thread runtime's only thread.
    let (d, p, next) = (db.clone(), pending.clone(), second.clone());
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let store = d.pending();
            assert_eq!(store.store().take(&p.key()).unwrap(), Some(p.clone()));
            store.store().save(&next).unwrap();
        });
    })
    .join()
    .unwrap();
    // The async methods of the PostgreSQL store.
    let mut last = second.clone();
    if let Db::Postgres(pg) = &*db {
        let store = PostgresPendingStore::connect(&pg.conninfo).unwrap();
        assert_eq!(store.list_async().await.unwrap(), vec![second.clone()]);
        assert_eq!(store.take_async(&second.key()).await.unwrap(), Some(second.clone()));
        assert_eq!(store.take_async(&second.key()).await.unwrap(), None);
        assert!(matches!(store.save_async(&second).await, Err(PendingStoreError::Consumed { .. })));
        store.save_async(&third).await.unwrap();
        last = third;
    }
    assert_eq!(db.pending().store().take(&last.key()).unwrap(), Some(last));
}

// ---- Effect records ----

const LONG: Duration = Duration::from_secs(60);

both!(an_effect_runs_once_and_its_result_is_replayed);
async fn an_effect_runs_once_and_its_result_is_replayed(db: Db) {
    let store = db.effects(HOUR);
    let lease = lease_of(store.begin("order-1", "f1", LONG).await.unwrap());
    assert_eq!(lease.key(), "order-1");
    assert!(matches!(store.begin("order-1", "f1", LONG).await.unwrap(), Begin::InProgress { .. }));
    store.finish(&lease, &json!({"charged": 42})).await.unwrap();
    for other in [&store, &db.effects(HOUR)] {
        assert_eq!(other.begin("order-1", "f1", LONG).await.unwrap(), Begin::Replay(json!({"charged": 42})));
    }
    // Finishing again under the same lease changes nothing: the first result stands.
    store.finish(&lease, &json!("twice")).await.unwrap();
    assert_eq!(store.begin("order-1", "f1", LONG).await.unwrap(), Begin::Replay(json!({"charged": 42})));

    // Abandoned: the next begin runs it.
    let lease = lease_of(store.begin("order-2", "f2", LONG).await.unwrap());
    store.abandon(&lease).await.unwrap();
    assert_eq!(store.abandon(&lease).await.unwrap_err().code(), "lease_lost");
    let lease = lease_of(store.begin("order-2", "f2", LONG).await.unwrap());
    store.finish(&lease, &Value::Null).await.unwrap();
    assert_eq!(store.begin("order-2", "f2", LONG).await.unwrap(), Begin::Replay(Value::Null));

    let err = store.begin("", "f", LONG).await.unwrap_err();
    assert_eq!(err.code(), "invalid_key");
}

both!(of_concurrent_begins_exactly_one_runs);
async fn of_concurrent_begins_exactly_one_runs(db: Db) {
    // Four replicas, sixteen tasks each, on several keys in turn.
    let stores: Vec<Arc<dyn EffectStore>> = (0..4).map(|_| db.effects(HOUR)).collect();
    for round in 0..3 {
        let key = format!("payment-{round}");
        let start = Arc::new(tokio::sync::Barrier::new(64));
        let tasks: Vec<_> = (0..64)
            .map(|i| {
                let (store, start, key) = (stores[i % stores.len()].clone(), start.clone(), key.clone());
                tokio::spawn(async move {
                    start.wait().await;
                    store.begin(&key, "same-call", LONG).await.expect("begin")
                })
            })
            .collect();
        let mut runs = Vec::new();
        for task in tasks {
            match task.await.unwrap() {
                Begin::Run(lease) => runs.push(lease),
                Begin::InProgress { .. } => {}
                other => panic!("round {round}: {other:?}"),
            }
        }
        assert_eq!(runs.len(), 1, "round {round}: exactly one Run");
        stores[0].finish(&runs[0], &json!(round)).await.unwrap();
        assert_eq!(stores[3].begin(&key, "same-call", LONG).await.unwrap(), Begin::Replay(json!(round)));
    }
}

both!(an_expired_lease_lets_the_call_run_again);
async fn an_expired_lease_lets_the_call_run_again(db: Db) {
    let store = db.effects(HOUR);
    let short = Duration::from_millis(300);
    let crashed = lease_of(store.begin("job", "f", short).await.unwrap());
    let Begin::InProgress { lease_expires_at_ms } = store.begin("job", "f", short).await.unwrap() else {
        panic!("held")
    };
    assert_eq!(lease_expires_at_ms, crashed.expires_at_ms());
    tokio::time::sleep(Duration::from_millis(450)).await;
    let second = lease_of(db.effects(HOUR).begin("job", "f", LONG).await.unwrap());
    assert_ne!(second.token(), crashed.token());
    assert_eq!(store.finish(&crashed, &json!("late")).await.unwrap_err().code(), "lease_lost");
    assert_eq!(store.renew(&crashed, LONG).await.unwrap_err().code(), "lease_lost");
    store.finish(&second, &json!("second")).await.unwrap();
    assert_eq!(store.begin("job", "f", short).await.unwrap(), Begin::Replay(json!("second")));

    // A renewed lease holds past its first expiry.
    let lease = lease_of(store.begin("long-job", "f", short).await.unwrap());
    let renewed = store.renew(&lease, LONG).await.unwrap();
    assert!(renewed.expires_at_ms() > lease.expires_at_ms(), "{renewed:?}");
    tokio::time::sleep(Duration::from_millis(450)).await;
    assert!(matches!(store.begin("long-job", "f", short).await.unwrap(), Begin::InProgress { .. }));
    store.finish(&renewed, &json!(1)).await.unwrap();
}

both!(a_key_reused_with_another_fingerprint_conflicts);
async fn a_key_reused_with_another_fingerprint_conflicts(db: Db) {
    let store = db.effects(HOUR);
    let lease = lease_of(store.begin("k", "charge 10", LONG).await.unwrap());
    let check = |e: StateError| {
        assert_eq!(e.code(), "key_conflict");
        assert!(
            matches!(&e, StateError::Conflict { key, recorded, given } if key == "k" && recorded == "charge 10" && given == "charge 99"),
            "{e}"
        );
    };
    check(store.begin("k", "charge 99", LONG).await.unwrap_err());
    store.finish(&lease, &json!("ok")).await.unwrap();
    check(store.begin("k", "charge 99", LONG).await.unwrap_err());
    assert_eq!(store.begin("k", "charge 10", LONG).await.unwrap(), Begin::Replay(json!("ok")), "unchanged");

    // An expired lease is taken over for the same call only.
    let short = lease_of(store.begin("k2", "a", Duration::from_millis(100)).await.unwrap());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(store.begin("k2", "b", LONG).await.unwrap_err().code(), "key_conflict");
    store.abandon(&short).await.unwrap();
}

both!(records_past_the_retention_are_forgotten_and_purged);
async fn records_past_the_retention_are_forgotten_and_purged(db: Db) {
    let retention = Duration::from_millis(400);
    let store = db.effects(retention);
    let done = lease_of(store.begin("done", "f", LONG).await.unwrap());
    store.finish(&done, &json!(1)).await.unwrap();
    let _crashed = lease_of(store.begin("crashed", "f", Duration::from_millis(10)).await.unwrap());
    let _live = lease_of(store.begin("live", "f", LONG).await.unwrap());
    assert_eq!(store.purge_expired().await.unwrap(), 0, "nothing is past the retention yet");
    assert_eq!(store.begin("done", "f", LONG).await.unwrap(), Begin::Replay(json!(1)));

    tokio::time::sleep(Duration::from_millis(600)).await;
    // Forgotten before any purge: the key is free, for any call.
    let reused = lease_of(store.begin("done", "another call", LONG).await.unwrap());
    store.finish(&reused, &json!(2)).await.unwrap();
    assert_eq!(store.purge_expired().await.unwrap(), 1, "the crashed runner's record");
    assert_eq!(store.purge_expired().await.unwrap(), 0);
    assert!(matches!(store.begin("live", "f", LONG).await.unwrap(), Begin::InProgress { .. }), "a live lease stays");
    assert_eq!(store.begin("done", "another call", LONG).await.unwrap(), Begin::Replay(json!(2)));
    lease_of(store.begin("crashed", "other", LONG).await.unwrap());
}

both!(a_corrupt_effect_record_is_reported);
async fn a_corrupt_effect_record_is_reported(db: Db) {
    let store = db.effects(HOUR);
    let lease = lease_of(store.begin("k", "f", LONG).await.unwrap());
    store.finish(&lease, &json!({"ok": true})).await.unwrap();
    db.exec("UPDATE keel_effects SET result = '{not json' WHERE key = 'k'").await;
    let err = store.begin("k", "f", LONG).await.unwrap_err();
    assert_eq!(err.code(), "corrupt_row", "{err}");
    assert!(std::error::Error::source(&err).is_some(), "the parser's error is kept");
    db.exec("UPDATE keel_effects SET result = NULL WHERE key = 'k'").await;
    assert_eq!(store.begin("k", "f", LONG).await.unwrap_err().code(), "corrupt_row");
}

/// Opens a store on the table it is given.
type Opener = Box<dyn Fn(&str) -> Result<(), StateError>>;

both!(tables_are_named_checked_and_kept_apart);
async fn tables_are_named_checked_and_kept_apart(db: Db) {
    let executor = executor(Arc::default());
    let pending = ask(&executor, "c1", "T-1", HOUR).await;
    let (open_pending, open_effects): (Opener, Opener) = match &db {
        Db::Sqlite(dir) => {
            let (a, b) = (dir.db(), dir.db());
            (
                Box::new(move |t| {
                    let s = SqlitePendingStore::builder(&a).table(t).open_pending()?;
                    s.save(&pending).map_err(|e| StateError::Config { message: e.to_string(), source: None })
                }),
                Box::new(move |t| SqliteEffectStore::builder(&b).table(t).open_effects().map(drop)),
            )
        }
        Db::Postgres(pg) => {
            let (a, b) = (pg.conninfo.clone(), pg.conninfo.clone());
            (
                Box::new(move |t| {
                    let s = PostgresPendingStore::builder(&a).table(t).connect_pending()?;
                    s.save(&pending).map_err(|e| StateError::Config { message: e.to_string(), source: None })
                }),
                Box::new(move |t| PostgresEffectStore::builder(&b).table(t).connect_effects().map(drop)),
            )
        }
    };
    open_pending("tenant_a_pending").unwrap();
    open_pending("tenant_a_pending").unwrap();
    open_effects("tenant_a_effects").unwrap();
    let err = open_effects("tenant_a_pending").unwrap_err();
    assert!(err.code() == "config_error" && err.to_string().contains("holds pending_calls"), "{err}");
    for bad in ["Tenant", "a; DROP TABLE keel_effects", "keel_state_schema", ""] {
        assert_eq!(open_pending(bad).unwrap_err().code(), "config_error", "{bad:?}");
    }
    db.exec("UPDATE keel_state_schema SET version = 99 WHERE table_name = 'tenant_a_effects'").await;
    let err = open_effects("tenant_a_effects").unwrap_err();
    assert!(err.to_string().contains("newer than this build"), "{err}");
}

#[cfg(unix)]
#[test]
fn a_sqlite_file_is_private_to_its_owner() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new("modes");
    let store = SqlitePendingStore::open(dir.db()).unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(store.path()), 0o600);
    drop(store);
    std::fs::set_permissions(dir.db(), std::fs::Permissions::from_mode(0o644)).unwrap();
    let err = SqliteEffectStore::open(dir.db()).unwrap_err();
    assert!(err.code() == "config_error" && err.to_string().contains("chmod 600"), "{err}");
    assert_eq!(mode(&dir.db()), 0o644, "neither used nor changed");
}

// ---- Calls that run once, through the executor ----

impl Db {
    /// The effect store as an executor's ledger: its own connection(s), as a replica's.
    fn ledger(&self) -> Arc<dyn EffectLedger> {
        match self {
            Db::Sqlite(dir) => Arc::new(SqliteEffectStore::open(dir.db()).expect("open")),
            Db::Postgres(pg) => Arc::new(PostgresEffectStore::connect(&pg.conninfo).expect("connect")),
        }
    }
}

/// An executor with `payment.charge` (a write, allowed without approval) running once through `ledger`: the
/// handler counts its runs, takes `delay_ms` and fails as `fail` says (`declined`: a business error; `internal`).
fn charging(ledger: Arc<dyn EffectLedger>, runs: Arc<AtomicUsize>, wait: Duration) -> Executor {
    let tool = ToolDefinition::builder("payment.charge")
        .description("Charge an order.")
        .version("1.0")
        .effect(Effect::Write)
        .input_schema(json!({
            "type": "object",
            "properties": {
                "order": {"type": "string"},
                "amount": {"type": "integer"},
                "delay_ms": {"type": "integer"},
                "fail": {"enum": ["declined", "internal"]}
            },
            "required": ["order", "amount"],
            "additionalProperties": false
        }))
        .handler(move |args: Value, ctx: keel_tools_core::CallContext| {
            let runs = runs.clone();
            async move {
                let run = runs.fetch_add(1, Ordering::SeqCst) + 1;
                tokio::time::sleep(Duration::from_millis(args["delay_ms"].as_u64().unwrap_or(0))).await;
                match args["fail"].as_str() {
                    Some("declined") => Err(ToolError::new(
                        keel_tools_core::results::ToolCode::parse("card_declined".to_owned()).unwrap(),
                        "the card was declined",
                    )),
                    Some("internal") => Err(ToolError::internal(std::io::Error::other("the bank is down"))),
                    _ => Ok(json!({"charged": args["amount"], "run": run, "key": ctx.idempotency_key()})),
                }
            }
        })
        .build()
        .expect("a valid definition");
    let lookup = ToolDefinition::builder("payment.status")
        .description("An order's payment.")
        .version("1.0")
        .effect(Effect::Read)
        .input_schema(json!({"type": "object", "properties": {}, "additionalProperties": false}))
        .handler(|_: Value, _: keel_tools_core::CallContext| async { Ok::<_, ToolError>(json!("paid")) })
        .build()
        .unwrap();
    let registry = Registry::builder().without_inventory().tools([tool, lookup]).build().unwrap();
    Executor::builder(registry.view().build().unwrap())
        .policy(|_: &keel_tools_core::policy::PolicyRequest<'_>| keel_tools_core::policy::PolicyDecision::Allow)
        .exactly_once(ledger, OnceFor::Writes)
        .exactly_once_wait(wait)
        .build()
        .unwrap()
}

fn charge(id: &str, args: Value) -> ToolCall {
    ToolCall::new(id, "payment.charge", args)
}

both!(a_retried_write_runs_once_and_is_answered_with_its_first_result);
async fn a_retried_write_runs_once_and_is_answered_with_its_first_result(db: Db) {
    let runs = Arc::new(AtomicUsize::new(0));
    let executor = charging(db.ledger(), runs.clone(), Duration::from_secs(2));
    let stream = CallOptions::new().principal("alice").stream("conversation-1");
    let first = executor.call_with(charge("c1", json!({"order": "o-1", "amount": 42})), &stream).await;
    assert!(first.is_ok() && first.executed && !first.replayed, "{first:?}");
    // The same call again (a transport's retry, the same stream and call id), arguments spelled with a key order
    // of their own: answered from the record.
    let again = executor.call_with(charge("c1", json!({"amount": 42, "order": "o-1"})), &stream).await;
    assert_eq!(again.data(), first.data());
    assert!(!again.executed && again.replayed, "{again:?}");
    assert_eq!(again.to_json()["replayed"], json!(true));
    assert_eq!(first.to_json().get("replayed"), None, "only a replayed result has the key");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    // Another call id is another call; a read tool is not recorded.
    let other = executor.call_with(charge("c2", json!({"order": "o-1", "amount": 42})), &stream).await;
    assert!(other.executed && !other.replayed);
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    let read = executor.call_with(ToolCall::new("c1", "payment.status", json!({})), &stream).await;
    assert!(read.executed && !read.replayed);
    // A business error is the call's outcome: replayed too.
    let declined =
        executor.call_with(charge("c3", json!({"order": "o-2", "amount": 1, "fail": "declined"})), &stream).await;
    assert_eq!(declined.code(), Some("card_declined"));
    let replayed =
        executor.call_with(charge("c3", json!({"order": "o-2", "amount": 1, "fail": "declined"})), &stream).await;
    assert_eq!((replayed.code(), replayed.executed, replayed.replayed), (Some("card_declined"), false, true));
    assert_eq!(runs.load(Ordering::SeqCst), 3);
}

both!(a_key_given_by_the_caller_names_the_call_across_replicas);
async fn a_key_given_by_the_caller_names_the_call_across_replicas(db: Db) {
    // Three replicas, each with its own executor and connection(s) to the one database; the client retries with
    // its own key, through each, with a new request id each time.
    let runs = Arc::new(AtomicUsize::new(0));
    let replicas: Vec<Executor> = (0..3).map(|_| charging(db.ledger(), runs.clone(), Duration::from_secs(2))).collect();
    let mut answers = Vec::new();
    for (i, replica) in replicas.iter().enumerate() {
        let options = CallOptions::new().principal("alice").stream(format!("request-{i}")).idempotency_key("order-7");
        answers.push(replica.call_with(charge(&format!("{i}"), json!({"order": "o-7", "amount": 7})), &options).await);
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1, "{answers:?}");
    assert!(answers[0].executed);
    assert!(answers[1..].iter().all(|a| a.replayed && a.data() == answers[0].data()), "{answers:?}");
    // The handler saw the key the caller's key names, the same on every replica.
    let seen = answers[0].data().unwrap()["key"].as_str().unwrap().to_owned();
    assert!(seen.starts_with("ik-"), "{seen}");
    // Another principal with the same key is another call.
    let bob = CallOptions::new().principal("bob").idempotency_key("order-7");
    let theirs = replicas[2].call_with(charge("0", json!({"order": "o-7", "amount": 7})), &bob).await;
    assert!(theirs.executed && !theirs.replayed);
    assert_ne!(theirs.data().unwrap()["key"], json!(seen));
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

both!(of_concurrent_duplicates_one_runs_and_the_others_wait_for_its_result);
async fn of_concurrent_duplicates_one_runs_and_the_others_wait_for_its_result(db: Db) {
    let runs = Arc::new(AtomicUsize::new(0));
    let replicas: Vec<Executor> =
        (0..3).map(|_| charging(db.ledger(), runs.clone(), Duration::from_secs(10))).collect();
    let mut calls = tokio::task::JoinSet::new();
    for i in 0..6 {
        let replica = replicas[i % 3].clone();
        calls.spawn(async move {
            let options = CallOptions::new().principal("alice").idempotency_key("order-9");
            replica
                .call_with(charge(&format!("r{i}"), json!({"order": "o-9", "amount": 9, "delay_ms": 300})), &options)
                .await
        });
    }
    let mut answers = Vec::new();
    while let Some(answer) = calls.join_next().await {
        answers.push(answer.unwrap());
    }
    assert_eq!(runs.load(Ordering::SeqCst), 1, "{answers:?}");
    assert_eq!(answers.iter().filter(|a| a.executed).count(), 1);
    assert_eq!(answers.iter().filter(|a| a.replayed).count(), 5);
    assert!(answers.iter().all(|a| a.data() == answers[0].data()));
}

both!(a_duplicate_that_outlasts_the_wait_is_answered_in_progress);
async fn a_duplicate_that_outlasts_the_wait_is_answered_in_progress(db: Db) {
    let runs = Arc::new(AtomicUsize::new(0));
    let executor = charging(db.ledger(), runs.clone(), Duration::from_millis(100));
    let options = CallOptions::new().principal("alice").idempotency_key("order-5");
    let slow = json!({"order": "o-5", "amount": 5, "delay_ms": 1500});
    let running = tokio::spawn({
        let (executor, options, slow) = (executor.clone(), options.clone(), slow.clone());
        async move { executor.call_with(charge("a", slow), &options).await }
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let busy = executor.call_with(charge("b", slow.clone()), &options).await;
    assert_eq!(busy.code(), Some("in_progress"), "{busy:?}");
    assert!(!busy.executed && !busy.replayed);
    let details = busy.error().unwrap().details.clone().unwrap();
    assert!(details["retry_after_ms"].as_u64().unwrap() > 0, "{details}");
    assert!(details["idempotency_key"].as_str().unwrap().starts_with("ik-"));
    let done = running.await.unwrap();
    assert!(done.executed && done.is_ok());
    let later = executor.call_with(charge("c", slow), &options).await;
    assert!(later.replayed && later.data() == done.data());
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

both!(a_key_reused_for_other_arguments_is_refused_and_an_internal_error_runs_again);
async fn a_key_reused_for_other_arguments_is_refused_and_an_internal_error_runs_again(db: Db) {
    let runs = Arc::new(AtomicUsize::new(0));
    let executor = charging(db.ledger(), runs.clone(), Duration::from_secs(2));
    let options = CallOptions::new().principal("alice").idempotency_key("order-3");
    let first = executor.call_with(charge("a", json!({"order": "o-3", "amount": 3})), &options).await;
    assert!(first.executed);
    let other = executor.call_with(charge("b", json!({"order": "o-3", "amount": 300})), &options).await;
    assert_eq!((other.code(), other.executed, other.replayed), (Some("idempotency_conflict"), false, false));
    assert_eq!(runs.load(Ordering::SeqCst), 1);

    // An internal error gives the key up: the retry runs, and its success is what is recorded.
    let options = CallOptions::new().principal("alice").idempotency_key("order-4");
    let failing = json!({"order": "o-4", "amount": 4, "fail": "internal"});
    let failed = executor.call_with(charge("a", failing), &options).await;
    assert_eq!((failed.code(), failed.executed), (Some("tool_internal_error"), true));
    // Nothing was recorded for the failure, so the retry's arguments are free to differ from it.
    let retried = executor.call_with(charge("b", json!({"order": "o-4", "amount": 4})), &options).await;
    assert!(retried.executed && retried.is_ok(), "{retried:?}");
    let replayed = executor.call_with(charge("c", json!({"order": "o-4", "amount": 4})), &options).await;
    assert!(replayed.replayed);
    assert_eq!(runs.load(Ordering::SeqCst), 3);
}

// ---- A handler that records its result in its effect's transaction ----

/// A ledger whose `finish` always fails, as a process that dies between its handler's commit and the executor's
/// record would leave it: its `begin` and `abandon` are the store's.
struct FinishFails(Arc<dyn EffectLedger>);

impl EffectLedger for FinishFails {
    fn begin<'a>(
        &'a self,
        key: &'a str,
        fp: &'a str,
        lease: Duration,
    ) -> keel_tools_core::once::LedgerFuture<'a, Begin> {
        self.0.begin(key, fp, lease)
    }
    fn finish<'a>(
        &'a self,
        _: &'a keel_tools_state::Lease,
        _: &'a Value,
    ) -> keel_tools_core::once::LedgerFuture<'a, ()> {
        Box::pin(async {
            Err(keel_tools_core::once::LedgerError::Store {
                code: "unavailable".into(),
                message: "the process died".into(),
                source: None,
            })
        })
    }
    fn abandon<'a>(&'a self, lease: &'a keel_tools_state::Lease) -> keel_tools_core::once::LedgerFuture<'a, ()> {
        self.0.abandon(lease)
    }
}

/// The effect store a handler joins, with what it needs to open a connection of its own to the same database.
#[derive(Clone)]
enum Joined {
    Sqlite(SqliteEffectStore),
    Postgres(PostgresEffectStore, String),
}

impl Db {
    fn joined(&self) -> Joined {
        match self {
            Db::Sqlite(dir) => Joined::Sqlite(SqliteEffectStore::open(dir.db()).expect("open")),
            Db::Postgres(pg) => {
                Joined::Postgres(PostgresEffectStore::connect(&pg.conninfo).expect("connect"), pg.conninfo.clone())
            }
        }
    }

    async fn count(&self, sql: &str) -> i64 {
        match self {
            Db::Sqlite(dir) => {
                rusqlite::Connection::open(dir.db()).unwrap().query_row(sql, [], |r| r.get(0)).expect(sql)
            }
            Db::Postgres(pg) => pg.client().await.query_one(sql, &[]).await.expect(sql).get(0),
        }
    }
}

impl Joined {
    /// Inserts a charge and records `data` under `lease`, in one transaction: committed when the record is
    /// written, rolled back when it is refused.
    async fn charge(
        &self,
        order: &str,
        lease: &keel_tools_state::Lease,
        data: &Value,
    ) -> Result<(), keel_tools_state::StateError> {
        match self {
            Joined::Sqlite(store) => {
                let mut conn = rusqlite::Connection::open(store.path()).unwrap();
                let tx = conn.transaction().unwrap();
                tx.execute("INSERT INTO charges (order_id) VALUES (?1)", [order]).unwrap();
                store.finish_in(&tx, lease, data)?;
                tx.commit().unwrap();
            }
            Joined::Postgres(store, conninfo) => {
                let mut client = keel_tests::pg::connect(conninfo).await;
                let tx = client.transaction().await.unwrap();
                tx.execute("INSERT INTO charges (order_id) VALUES ($1)", &[&order]).await.unwrap();
                store.finish_in(&tx, lease, data).await?;
                tx.commit().await.unwrap();
            }
        }
        Ok(())
    }
}

/// An executor with `payment.charge` running once through `ledger`, whose handler inserts its charge and records
/// its result in one transaction of `joined`'s database.
fn charging_in_one_transaction(ledger: Arc<dyn EffectLedger>, joined: Joined) -> Executor {
    let tool = ToolDefinition::builder("payment.charge")
        .description("Charge an order.")
        .version("1.0")
        .effect(Effect::Write)
        .input_schema(json!({
            "type": "object",
            "properties": {"order": {"type": "string"}},
            "required": ["order"],
            "additionalProperties": false
        }))
        .handler(move |args: Value, ctx: keel_tools_core::CallContext| {
            let joined = joined.clone();
            async move {
                let lease = ctx.effect_lease().expect("a tool that runs once runs under a lease").clone();
                let data = json!({"charged": args["order"]});
                joined.charge(args["order"].as_str().unwrap(), &lease, &data).await.map_err(ToolError::internal)?;
                Ok::<_, ToolError>(data)
            }
        })
        .build()
        .expect("a valid definition");
    let registry = Registry::builder().without_inventory().tools([tool]).build().unwrap();
    Executor::builder(registry.view().build().unwrap())
        .policy(|_: &keel_tools_core::policy::PolicyRequest<'_>| keel_tools_core::policy::PolicyDecision::Allow)
        .exactly_once(ledger, OnceFor::tools(["payment.charge"]))
        .build()
        .unwrap()
}

both!(a_handler_commits_its_effect_and_its_record_together);
async fn a_handler_commits_its_effect_and_its_record_together(db: Db) {
    let store = db.effects(HOUR); // first: it creates the SQLite file, private to its owner
    db.exec("CREATE TABLE charges (order_id TEXT NOT NULL)").await;
    let options = CallOptions::new().principal("alice").idempotency_key("order-1");

    // The executor's record fails after the handler committed (its process died, say): the record committed with
    // the charge answers the retry, at once, and the charge is not made twice.
    let dying = charging_in_one_transaction(Arc::new(FinishFails(db.ledger())), db.joined());
    let first = dying.call_with(ToolCall::new("c1", "payment.charge", json!({"order": "o-1"})), &options).await;
    assert!(first.is_ok() && first.executed, "{first:?}");
    let replica = charging_in_one_transaction(db.ledger(), db.joined());
    let retried = replica.call_with(ToolCall::new("c2", "payment.charge", json!({"order": "o-1"})), &options).await;
    assert!(retried.replayed && !retried.executed, "{retried:?}");
    assert_eq!(retried.data(), Some(&json!({"charged": "o-1"})));
    assert_eq!(db.count("SELECT count(*) FROM charges").await, 1);

    // Where the executor records too, its finish finds the record done under the same lease: no error, one charge.
    let options = CallOptions::new().principal("alice").idempotency_key("order-2");
    let done = replica.call_with(ToolCall::new("c3", "payment.charge", json!({"order": "o-2"})), &options).await;
    assert!(done.is_ok() && done.executed, "{done:?}");
    let again = replica.call_with(ToolCall::new("c4", "payment.charge", json!({"order": "o-2"})), &options).await;
    assert!(again.replayed, "{again:?}");
    assert_eq!(db.count("SELECT count(*) FROM charges").await, 2);

    // A runner whose lease was taken over cannot record, and its transaction rolls back: no charge of its own.
    let joined = db.joined();
    let stale = lease_of(store.begin("order-3", "f3", Duration::from_millis(50)).await.unwrap());
    tokio::time::sleep(Duration::from_millis(120)).await;
    let current = lease_of(store.begin("order-3", "f3", LONG).await.unwrap());
    let refused = joined.charge("o-3", &stale, &json!("stale")).await.unwrap_err();
    assert_eq!(refused.code(), "lease_lost");
    assert_eq!(db.count("SELECT count(*) FROM charges").await, 2, "rolled back");
    joined.charge("o-3", &current, &json!("current")).await.unwrap();
    assert_eq!(db.count("SELECT count(*) FROM charges").await, 3);
    assert_eq!(
        store.begin("order-3", "f3", LONG).await.unwrap(),
        Begin::Replay(keel_tools_core::once::data_record(&json!("current")))
    );
}

/// A ledger whose database is gone.
struct Unreachable;

impl EffectLedger for Unreachable {
    fn begin<'a>(&'a self, _: &'a str, _: &'a str, _: Duration) -> keel_tools_core::once::LedgerFuture<'a, Begin> {
        Box::pin(async {
            Err(keel_tools_core::once::LedgerError::Store {
                code: "unavailable".into(),
                message: "connection refused (host db.internal:5432)".into(),
                source: None,
            })
        })
    }
    fn finish<'a>(
        &'a self,
        _: &'a keel_tools_state::Lease,
        _: &'a Value,
    ) -> keel_tools_core::once::LedgerFuture<'a, ()> {
        Box::pin(async { Ok(()) })
    }
    fn abandon<'a>(&'a self, _: &'a keel_tools_state::Lease) -> keel_tools_core::once::LedgerFuture<'a, ()> {
        Box::pin(async { Ok(()) })
    }
}

#[tokio::test]
async fn a_ledger_that_cannot_answer_keeps_the_call_from_running_and_its_detail_from_the_model() {
    let runs = Arc::new(AtomicUsize::new(0));
    let executor = charging(Arc::new(Unreachable), runs.clone(), Duration::from_secs(2));
    let refused = executor.call(charge("a", json!({"order": "o-1", "amount": 1}))).await;
    assert_eq!((refused.code(), refused.executed), (Some("state_unavailable"), false));
    assert!(!refused.content_text().contains("db.internal"), "{}", refused.content_text());
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    // Read tools do not ask the ledger.
    assert!(executor.call(ToolCall::new("b", "payment.status", json!({}))).await.is_ok());
}

#[test]
fn exactly_once_names_only_write_tools_of_the_view() {
    let registry = Registry::builder()
        .without_inventory()
        .tools([ToolDefinition::builder("payment.status")
            .description("An order's payment.")
            .effect(Effect::Read)
            .input_schema(json!({"type": "object"}))
            .handler(|_: Value, _: keel_tools_core::CallContext| async { Ok::<_, ToolError>(json!("paid")) })
            .build()
            .unwrap()])
        .build()
        .unwrap();
    let err = Executor::builder(registry.view().build().unwrap())
        .exactly_once(Arc::new(Unreachable), OnceFor::tools(["payment.status", "payment.refund"]))
        .build()
        .unwrap_err();
    let problems: Vec<(String, &str)> = err.problems().iter().map(|p| (p.tool().to_owned(), p.code())).collect();
    assert_eq!(
        problems,
        [("payment.status".to_owned(), "bad_exactly_once"), ("payment.refund".to_owned(), "bad_exactly_once")]
    );
    assert!(err.to_string().contains("it is a read tool"), "{err}");
}
