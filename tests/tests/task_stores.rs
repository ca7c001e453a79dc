//! Tasks shared by replicas (`keel-tools-state`'s `TaskStore`): one contract, run against a SQLite file
//! (`NAME::sqlite`) and a PostgreSQL database (`NAME::postgres`, in the cluster of `KEEL_TEST_POSTGRES`; skipped
//! without it, a failure with `CI` set). Two stores over one database are two replicas.
//!
//! Created and read by another replica, created twice refused; read, awaited and cancelled by another replica; a
//! wait woken by the other replica's change long before its timeout (PostgreSQL: by `NOTIFY`, with rechecks set
//! far apart), and by a read again when a change is not pushed; input asked by the owner, answered by another
//! replica, taken once by the owner; an ended task changed by nobody; a lease that expires makes the task `lost`
//! (never completed), and its old owner can no longer finish it; heartbeats keep a task past its first lease; ended
//! tasks gone after their keep time and purged; of a racing finish and cancel exactly one wins; `changes` feeds the
//! other replica's changes; a corrupt row reported; the table recorded as tasks.

use std::sync::Arc;
use std::time::{Duration, Instant};

use keel_tools_state::{
    DynTaskStore, NewTask, PostgresTaskStore, SqliteEffectStore, SqliteTaskStore, StateError, Task, TaskLease,
    TaskStatus, TaskStore, Terminal, WaitFor,
};
use serde_json::json;
use tokio::sync::broadcast;

use crate::state_db::{Db, both};

// ---- Helpers ----

impl Db {
    /// A task store with its own connection(s), as another replica would have.
    pub(crate) fn tasks(&self) -> Arc<DynTaskStore> {
        match self {
            Db::Sqlite(dir) => Arc::new(SqliteTaskStore::open(dir.db()).expect("open")),
            Db::Postgres(pg) => Arc::new(PostgresTaskStore::connect(&pg.conninfo).expect("connect")),
        }
    }

    /// A task store that reads the database again only every minute besides what is pushed to it (PostgreSQL);
    /// SQLite's is polled, at its default interval.
    fn pushed_only(&self) -> Arc<DynTaskStore> {
        match self {
            Db::Sqlite(_) => self.tasks(),
            Db::Postgres(pg) => Arc::new(
                PostgresTaskStore::builder(&pg.conninfo)
                    .recheck(Duration::from_secs(60))
                    .connect_tasks()
                    .expect("connect"),
            ),
        }
    }

    /// A task store that reads its tasks again every `every` besides what is pushed to it.
    fn rechecking(&self, every: Duration) -> Arc<DynTaskStore> {
        match self {
            Db::Sqlite(dir) => Arc::new(SqliteTaskStore::builder(dir.db()).recheck(every).open_tasks().expect("open")),
            Db::Postgres(pg) => {
                Arc::new(PostgresTaskStore::builder(&pg.conninfo).recheck(every).connect_tasks().expect("connect"))
            }
        }
    }
}

fn new(id: &str) -> NewTask {
    NewTask::new(id, "reports.build")
}

async fn create(store: &DynTaskStore, task: NewTask) -> (Task, TaskLease) {
    store.create(&task).await.expect("create")
}

async fn get(store: &DynTaskStore, id: &str) -> Task {
    store.get(id).await.expect("get").expect("the task is kept")
}

fn code<T: std::fmt::Debug>(result: Result<T, StateError>) -> &'static str {
    result.expect_err("refused").code()
}

/// The next change of `id` on `rx`, within `within`.
async fn next_change(
    rx: &mut broadcast::Receiver<keel_tools_state::TaskChange>,
    id: &str,
    within: Duration,
) -> keel_tools_state::TaskChange {
    tokio::time::timeout(within, async {
        loop {
            match rx.recv().await {
                Ok(change) if change.id == id => return change,
                Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => panic!("the feed closed"),
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no change of {id} within {within:?}"))
}

const LONG: Duration = Duration::from_secs(30);

// ---- The contract ----

both!(task_created_is_read_by_another_replica);
async fn task_created_is_read_by_another_replica(db: Db) {
    let (a, b) = (db.tasks(), db.tasks());
    let (task, lease) =
        create(&*a, new("t-1").tenant("acme").principal("alice").poll_interval(Duration::from_millis(500))).await;
    assert_eq!((task.status, task.version, task.id.as_str(), lease.id()), (TaskStatus::Working, 1, "t-1", "t-1"));
    assert!(lease.expires_at_ms() > task.created_ms, "{lease:?} {task:?}");
    let read = get(&*b, "t-1").await;
    assert_eq!(read, task, "the other replica reads what was created");
    assert_eq!((read.tenant.as_deref(), read.principal.as_deref()), (Some("acme"), Some("alice")));
    assert_eq!((read.tool.as_str(), read.poll_interval_ms), ("reports.build", 500));
    assert_eq!((&read.result, &read.error, &read.input_request, read.expires_at_ms()), (&None, &None, &None, None));
    assert_eq!(b.get("t-2").await.unwrap(), None);
    assert_eq!(code(b.get("").await), "invalid_key");
    assert_eq!(code(b.cancel("t-2").await), "unknown_task");
    assert_eq!(code(b.answer("t-2", &json!(1)).await), "unknown_task");
    assert_eq!(code(a.create(&new(&"x".repeat(513))).await), "invalid_key");
}

both!(task_created_twice_is_refused);
async fn task_created_twice_is_refused(db: Db) {
    let (a, b) = (db.tasks(), db.tasks());
    create(&*a, new("t-1")).await;
    let mut again = new("t-1");
    again.tool = "other".to_owned();
    let e = b.create(&again).await.unwrap_err();
    assert!(matches!(&e, StateError::TaskExists { id } if id == "t-1"), "{e}");
    assert_eq!(e.code(), "task_exists");
    assert_eq!(code(a.create(&new("t-1")).await), "task_exists");
    assert_eq!(get(&*b, "t-1").await.tool, "reports.build", "unchanged");
}

both!(task_is_awaited_and_cancelled_by_another_replica);
async fn task_is_awaited_and_cancelled_by_another_replica(db: Db) {
    let (a, b) = (db.tasks(), db.tasks());
    let (task, lease) = create(&*a, new("t-1")).await;
    // Nothing changes: the wait ends at its timeout with the task as it is.
    let started = Instant::now();
    let same = b.wait("t-1", WaitFor::ChangedSince(task.version), Duration::from_millis(300)).await.unwrap();
    assert!(started.elapsed() >= Duration::from_millis(300), "{:?}", started.elapsed());
    assert_eq!(same, Some(task.clone()));
    // Changed already: at once.
    let started = Instant::now();
    assert_eq!(b.wait("t-1", WaitFor::ChangedSince(0), LONG).await.unwrap(), Some(task.clone()));
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(b.wait("none", WaitFor::Terminal, LONG).await.unwrap(), None);

    let cancelled = b.cancel("t-1").await.unwrap();
    assert_eq!((cancelled.status, cancelled.version), (TaskStatus::Cancelled, 2));
    assert_eq!(cancelled.message.as_deref(), Some(keel_tools_state::task::CANCELLED_MESSAGE));
    assert!(cancelled.expires_at_ms().is_some());
    // The owner learns it from its heartbeat, and can no longer change the task.
    let e = a.heartbeat(&lease).await.unwrap_err();
    assert!(matches!(&e, StateError::TaskEnded { status, .. } if status == "cancelled"), "{e}");
    assert_eq!(code(a.finish(&lease, Terminal::Completed(json!(1))).await), "task_ended");
    assert_eq!(code(a.working(&lease, Some("still here")).await), "task_ended");
    assert_eq!(code(a.input_required(&lease, &json!({})).await), "task_ended");
    // Ended: every wait answers at once.
    let started = Instant::now();
    assert_eq!(a.wait("t-1", WaitFor::Terminal, LONG).await.unwrap(), Some(cancelled.clone()));
    assert_eq!(a.wait("t-1", WaitFor::ChangedSince(2), LONG).await.unwrap(), Some(cancelled.clone()));
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(get(&*a, "t-1").await, cancelled);
}

both!(task_wait_wakes_on_the_other_replicas_change);
async fn task_wait_wakes_on_the_other_replicas_change(db: Db) {
    // PostgreSQL's waiter rechecks once a minute: only the notification can wake it in time.
    let (owner, waiter) = (db.tasks(), db.pushed_only());
    let (task, lease) = create(&*owner, new("t-1")).await;
    let wait = {
        let waiter = waiter.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let task = waiter.wait("t-1", WaitFor::Terminal, LONG).await;
            (task, started.elapsed())
        })
    };
    let changed = {
        let waiter = waiter.clone();
        tokio::spawn(async move { waiter.wait("t-1", WaitFor::ChangedSince(task.version), LONG).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let working = owner.working(&lease, Some("half way")).await.unwrap();
    assert_eq!(working.version, 2);
    let seen = changed.await.unwrap().unwrap().unwrap();
    assert_eq!((seen.version, seen.message.as_deref()), (2, Some("half way")));
    assert!(!wait.is_finished(), "still working: the terminal wait goes on");
    let finished_at = Instant::now();
    owner.finish(&lease, Terminal::Completed(json!({"rows": 42}))).await.unwrap();
    let (done, _) = wait.await.unwrap();
    let woke_after = finished_at.elapsed();
    let done = done.unwrap().unwrap();
    assert_eq!((done.status, done.result, done.version), (TaskStatus::Completed, Some(json!({"rows": 42})), 3));
    assert!(woke_after < Duration::from_secs(3), "woke {woke_after:?} after the change, long before its timeout");
}

both!(task_wait_reads_again_when_nothing_is_pushed);
async fn task_wait_reads_again_when_nothing_is_pushed(db: Db) {
    let (owner, waiter) = (db.tasks(), db.rechecking(Duration::from_millis(300)));
    create(&*owner, new("t-1")).await;
    let wait = tokio::spawn(async move { waiter.wait("t-1", WaitFor::Terminal, LONG).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Changed behind the stores' backs, its version kept: no notification, nothing pushed.
    let changed_at = Instant::now();
    db.exec("UPDATE keel_tasks SET status = 'cancelled', lease = NULL, lease_until_ms = NULL WHERE id = 't-1'").await;
    let seen = wait.await.unwrap().unwrap().unwrap();
    assert_eq!(seen.status, TaskStatus::Cancelled);
    assert!(changed_at.elapsed() < Duration::from_secs(5), "read again within its recheck: {:?}", changed_at.elapsed());
}

both!(task_input_is_answered_by_another_replica_and_taken_once);
async fn task_input_is_answered_by_another_replica_and_taken_once(db: Db) {
    let (owner, other) = (db.tasks(), db.tasks());
    let (_, lease) = create(&*owner, new("t-1")).await;
    assert_eq!(owner.take_answers(&lease).await.unwrap(), Vec::<serde_json::Value>::new());
    assert_eq!(code(other.answer("t-1", &json!("early")).await), "input_not_requested");

    let request = json!({"method": "elicitation/create", "params": {"message": "Which quarter?"}});
    let asked = owner.input_required(&lease, &request).await.unwrap();
    assert_eq!(
        (asked.status, asked.version, asked.input_request.as_ref()),
        (TaskStatus::InputRequired, 2, Some(&request))
    );
    let seen = other.wait("t-1", WaitFor::InputOrTerminal, LONG).await.unwrap().unwrap();
    assert_eq!(seen, asked, "at once: it waits for input");

    let answered = other.answer("t-1", &json!({"quarter": "Q3"})).await.unwrap();
    assert_eq!((answered.status, answered.version, answered.input_request), (TaskStatus::Working, 3, None));
    assert_eq!(code(other.answer("t-1", &json!({"quarter": "Q4"})).await), "input_not_requested", "one answer");
    assert_eq!(owner.take_answers(&lease).await.unwrap(), [json!({"quarter": "Q3"})]);
    assert_eq!(owner.take_answers(&lease).await.unwrap(), Vec::<serde_json::Value>::new(), "taken once");
    assert_eq!(get(&*other, "t-1").await.version, 3, "taking the answers changes nothing a reader sees");

    // Two rounds before the owner takes them: both, in order.
    owner.input_required(&lease, &json!({"n": 1})).await.unwrap();
    other.answer("t-1", &json!(1)).await.unwrap();
    owner.input_required(&lease, &json!({"n": 2})).await.unwrap();
    other.answer("t-1", &json!("two")).await.unwrap();
    assert_eq!(owner.take_answers(&lease).await.unwrap(), [json!(1), json!("two")]);

    // The owner may withdraw a request.
    owner.input_required(&lease, &json!({"n": 3})).await.unwrap();
    let withdrawn = owner.working(&lease, None).await.unwrap();
    assert_eq!((withdrawn.status, withdrawn.input_request), (TaskStatus::Working, None));
    let forged = TaskLease::new("t-1", "not the lease", u64::MAX);
    assert_eq!(code(owner.take_answers(&forged).await), "lease_lost");
    assert_eq!(code(owner.input_required(&forged, &json!({})).await), "lease_lost");
}

both!(task_that_ended_is_changed_by_nobody);
async fn task_that_ended_is_changed_by_nobody(db: Db) {
    let (a, b) = (db.tasks(), db.tasks());
    let (_, lease) = create(&*a, new("done")).await;
    let done = a.finish(&lease, Terminal::Failed(json!({"code": "timeout"}))).await.unwrap();
    assert_eq!(
        (done.status, done.error.clone(), done.result.clone()),
        (TaskStatus::Failed, Some(json!({"code": "timeout"})), None)
    );
    let e = b.cancel("done").await.unwrap_err();
    assert!(matches!(&e, StateError::TaskEnded { id, status } if id == "done" && status == "failed"), "{e}");
    assert_eq!(code(a.finish(&lease, Terminal::Completed(json!(1))).await), "task_ended");
    assert_eq!(code(b.answer("done", &json!(1)).await), "task_ended");
    assert_eq!(code(a.heartbeat(&lease).await), "task_ended");
    assert_eq!(get(&*b, "done").await, done, "unchanged");

    let (_, lease) = create(&*a, new("cancelled")).await;
    b.cancel("cancelled").await.unwrap();
    assert_eq!(code(a.finish(&lease, Terminal::Completed(json!(1))).await), "task_ended");
    assert_eq!(code(b.cancel("cancelled").await), "task_ended");
    assert_eq!(get(&*a, "cancelled").await.status, TaskStatus::Cancelled);
}

both!(task_whose_lease_expires_is_lost_never_completed);
async fn task_whose_lease_expires_is_lost_never_completed(db: Db) {
    let (owner, other) = (db.tasks(), db.tasks());
    let (_, lease) = create(&*owner, new("t-1").lease(Duration::from_millis(300))).await;
    tokio::time::sleep(Duration::from_millis(700)).await;
    // The owner's lease expired: it can change nothing, even before anyone read the task.
    assert_eq!(code(owner.heartbeat(&lease).await), "lease_lost");
    let lost = get(&*other, "t-1").await;
    assert_eq!((lost.status, lost.result.clone(), lost.error.clone()), (TaskStatus::Lost, None, None));
    assert!(lost.message.as_deref().is_some_and(|m| m.contains("may have run")), "{lost:?}");
    assert_eq!(lost.version, 2);
    let e = owner.finish(&lease, Terminal::Completed(json!("too late"))).await.unwrap_err();
    assert!(matches!(&e, StateError::LeaseLost { key } if key == "t-1"), "{e}");
    assert_eq!(get(&*owner, "t-1").await, lost, "recorded lost, the same for every replica");
    assert_eq!(code(other.cancel("t-1").await), "task_ended");

    // A wait wakes when the lease expires, and finds the task lost.
    let (_, _abandoned) = create(&*owner, new("t-2").lease(Duration::from_millis(500))).await;
    let started = Instant::now();
    let lost = other.wait("t-2", WaitFor::Terminal, LONG).await.unwrap().unwrap();
    assert_eq!(lost.status, TaskStatus::Lost);
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
}

both!(task_heartbeats_keep_it_past_its_first_lease);
async fn task_heartbeats_keep_it_past_its_first_lease(db: Db) {
    let (owner, other) = (db.tasks(), db.tasks());
    // Heartbeats every fifth of the lease, for longer than the first lease: a slow heartbeat (a loaded machine)
    // has most of the lease to arrive in.
    let first_lease = Duration::from_millis(1500);
    let started = Instant::now();
    let (task, first) = create(&*owner, new("t-1").lease(first_lease)).await;
    let mut lease = first.clone();
    while started.elapsed() < first_lease + Duration::from_millis(300) {
        tokio::time::sleep(first_lease / 5).await;
        lease = owner.heartbeat(&lease).await.unwrap();
    }
    assert!(lease.expires_at_ms() > first.expires_at_ms(), "{lease:?} {first:?}");
    let read = get(&*other, "t-1").await;
    assert_eq!((read.status, read.version), (TaskStatus::Working, task.version), "a heartbeat changes no version");
    let done = owner.finish(&first, Terminal::Completed(json!("ok"))).await.unwrap();
    assert_eq!(done.status, TaskStatus::Completed, "the token is what holds the task");
}

both!(task_that_ended_is_gone_after_its_keep_time_and_purged);
async fn task_that_ended_is_gone_after_its_keep_time_and_purged(db: Db) {
    let (a, b) = (db.tasks(), db.tasks());
    let briefly = |id| new(id).keep_for(Duration::from_millis(300));
    let (_, lease) = create(&*a, briefly("t-1")).await;
    let (_, reused) = create(&*a, briefly("t-2")).await;
    let (_, _kept) = create(&*a, new("kept")).await;
    let (_, _abandoned) = create(&*a, new("abandoned").lease(Duration::from_millis(100))).await;
    let done = a.finish(&lease, Terminal::Completed(json!(1))).await.unwrap();
    assert_eq!(done.keep_for_ms, 300);
    assert!(done.expires_at_ms().is_some_and(|at| at >= done.updated_ms + 300));
    let reused = a.cancel(reused.id()).await.unwrap();
    assert!(b.get("t-1").await.unwrap().is_some());
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(b.get("t-1").await.unwrap(), None, "past its keep time");
    assert_eq!(code(b.cancel("t-1").await), "unknown_task");
    // The id of a task past its keep time is free again, before any purge; its versions go on.
    let (again, _) = create(&*b, new("t-2")).await;
    assert_eq!(again.status, TaskStatus::Working);
    assert!(again.version > reused.version, "versions of an id only grow: {again:?}");
    assert_eq!(b.purge_expired().await.unwrap(), 1, "t-1");
    assert_eq!(b.purge_expired().await.unwrap(), 0);
    assert_eq!(get(&*b, "kept").await.status, TaskStatus::Working);
    assert_eq!(get(&*b, "t-2").await.status, TaskStatus::Working);
    // The purge recorded the abandoned task lost (kept for its keep time from now).
    let abandoned = get(&*a, "abandoned").await;
    assert_eq!((abandoned.status, abandoned.version), (TaskStatus::Lost, 2));
}

both!(task_finish_and_cancel_race_and_exactly_one_wins);
async fn task_finish_and_cancel_race_and_exactly_one_wins(db: Db) {
    let (owner, other) = (db.tasks(), db.tasks());
    let (mut finished, mut cancelled) = (0, 0);
    for i in 0..12 {
        let id = format!("race-{i}");
        let (_, lease) = create(&*owner, new(&id)).await;
        let (o, c) = (owner.clone(), other.clone());
        let finish = tokio::spawn(async move { o.finish(&lease, Terminal::Completed(json!(i))).await });
        let cid = id.clone();
        let cancel = tokio::spawn(async move { c.cancel(&cid).await });
        let (finish, cancel) = (finish.await.unwrap(), cancel.await.unwrap());
        let end = get(&*other, &id).await;
        match (finish, cancel) {
            (Ok(task), Err(e)) => {
                assert_eq!(
                    (e.code(), task.status, end.status),
                    ("task_ended", TaskStatus::Completed, TaskStatus::Completed)
                );
                finished += 1;
            }
            (Err(e), Ok(task)) => {
                assert_eq!(
                    (e.code(), task.status, end.status),
                    ("task_ended", TaskStatus::Cancelled, TaskStatus::Cancelled)
                );
                assert_eq!(end.result, None, "cancelled, never completed");
                cancelled += 1;
            }
            (f, c) => panic!("exactly one wins: finish {f:?}, cancel {c:?}"),
        }
        assert_eq!(end.version, 2);
    }
    assert_eq!(finished + cancelled, 12);
}

both!(task_changes_are_fed_from_the_other_replica);
async fn task_changes_are_fed_from_the_other_replica(db: Db) {
    let (listener, other) = (db.pushed_only(), db.tasks());
    let mut rx = listener.changes();
    let (_, lease) = create(&*other, new("t-1")).await;
    let within = if db.is_postgres() { Duration::from_secs(5) } else { Duration::from_secs(10) };
    let first = next_change(&mut rx, "t-1", within).await;
    assert_eq!((first.status, first.version), (TaskStatus::Working, 1));
    other.input_required(&lease, &json!({"ask": 1})).await.unwrap();
    let asked = next_change(&mut rx, "t-1", within).await;
    assert_eq!((asked.status, asked.version), (TaskStatus::InputRequired, 2));
    other.cancel("t-1").await.unwrap();
    let ended = next_change(&mut rx, "t-1", within).await;
    assert_eq!((ended.status, ended.version), (TaskStatus::Cancelled, 3));
    // Its own changes too, once each.
    listener.create(&new("t-2")).await.unwrap();
    let own = next_change(&mut rx, "t-2", within).await;
    assert_eq!((own.status, own.version), (TaskStatus::Working, 1));
    tokio::time::sleep(Duration::from_millis(500)).await;
    while let Ok(change) = rx.try_recv() {
        assert!(change.id != "t-2" && !(change.id == "t-1" && change.version <= 3), "fed twice: {change:?}");
    }
}

both!(task_row_holding_garbage_is_reported);
async fn task_row_holding_garbage_is_reported(db: Db) {
    let store = db.tasks();
    create(&*store, new("t-1")).await;
    create(&*store, new("t-2")).await;
    db.exec(
        "UPDATE keel_tasks SET status = 'completed', outcome = '{not json', lease = NULL, lease_until_ms = NULL \
         WHERE id = 't-1'",
    )
    .await;
    let e = store.get("t-1").await.unwrap_err();
    assert!(matches!(&e, StateError::Corrupt { key, .. } if key == "t-1"), "{e}");
    assert_eq!(code(store.wait("t-1", WaitFor::Terminal, LONG).await), "corrupt_row");
    db.exec("UPDATE keel_tasks SET status = 'input_required', request = '[', version = version + 1 WHERE id = 't-2'")
        .await;
    assert_eq!(code(store.get("t-2").await), "corrupt_row");
    let (_, lease) = create(&*store, new("t-3")).await;
    db.exec("UPDATE keel_tasks SET answers = '{\"not\": \"a list\"}' WHERE id = 't-3'").await;
    assert_eq!(code(store.take_answers(&lease).await), "corrupt_row");
    assert_eq!(code(store.take_answers(&lease).await), "corrupt_row", "left in place");
}

both!(task_table_is_recorded_as_tasks);
async fn task_table_is_recorded_as_tasks(db: Db) {
    let _store = db.tasks();
    match &db {
        Db::Sqlite(dir) => {
            let conn = rusqlite::Connection::open(dir.db()).unwrap();
            let kind: String = conn
                .query_row("SELECT kind FROM keel_state_schema WHERE table_name = 'keel_tasks'", [], |r| r.get(0))
                .unwrap();
            assert_eq!(kind, "tasks");
            let e = SqliteEffectStore::builder(dir.db()).table("keel_tasks").open_effects().unwrap_err();
            assert_eq!(e.code(), "config_error", "{e}");
        }
        Db::Postgres(pg) => {
            let client = pg.client().await;
            let row = client
                .query_one("SELECT kind FROM keel_state_schema WHERE table_name = 'keel_tasks'", &[])
                .await
                .unwrap();
            assert_eq!(row.get::<_, String>(0), "tasks");
            let e = keel_tools_state::PostgresEffectStore::builder(&pg.conninfo)
                .table("keel_tasks")
                .connect_effects()
                .unwrap_err();
            assert_eq!(e.code(), "config_error", "{e}");
            let named = PostgresTaskStore::builder(&pg.conninfo).table("tenant_a_tasks").connect_tasks().unwrap();
            assert_eq!(named.table(), "tenant_a_tasks");
            named.create(&new("t-1")).await.unwrap();
            assert_eq!(named.get("t-1").await.unwrap().map(|t| t.status), Some(TaskStatus::Working));
        }
    }
}
