//! A busy catalogue: another connection holding the write lock, readers during a write, the runtime's workers
//! while a write waits.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use keel_tools_catalog::{Catalog, ToolRow};
use keel_tools_core::Registry;
use serde_json::json;

const ORIGIN: &str = "http://127.0.0.1:9";

/// A fresh directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(label: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("keel-catalog-busy-{label}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }
    fn db(&self) -> PathBuf {
        self.0.join("tools.db")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn open(db: &Path) -> Catalog {
    Catalog::builder(&Registry::from_inventory().expect("registry")).allow_http_origin(ORIGIN).open(db).expect("open")
}

fn row(name: &str, description: &str) -> ToolRow {
    ToolRow::remote(
        name,
        description,
        json!({"type": "object", "properties": {"q": {"type": "string"}}}),
        format!("{ORIGIN}/mcp"),
        "search",
    )
}

/// Another connection that holds the write lock (an open `BEGIN IMMEDIATE` with an uncommitted edit).
fn hold_write_lock(db: &Path) -> rusqlite::Connection {
    let other = rusqlite::Connection::open(db).expect("second connection");
    other.execute_batch("BEGIN IMMEDIATE; UPDATE tools SET description = 'uncommitted';").expect("lock");
    other
}

#[test]
fn the_file_is_in_wal_mode() {
    let dir = TempDir::new("wal");
    let _c = open(&dir.db());
    let mode: String =
        rusqlite::Connection::open(dir.db()).unwrap().query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
    assert_eq!(mode, "wal");
}

#[test]
fn a_put_under_a_held_lock_is_busy_within_the_bound() {
    let dir = TempDir::new("put");
    let c = open(&dir.db());
    c.put(&row("a", "first")).unwrap();
    let other = hold_write_lock(&dir.db());
    let start = Instant::now();
    let e = c.put(&row("a", "second")).unwrap_err();
    let waited = start.elapsed();
    eprintln!("busy put returned after {waited:?}: {e}");
    assert_eq!(e.code(), "busy", "{e}");
    assert!(waited < Duration::from_secs(3), "waited {waited:?}");
    drop(other);
    assert_eq!(c.rows().unwrap()[0].row.as_ref().unwrap().description, "first", "nothing was written");
    c.put(&row("a", "second")).expect("the lock is free again");
}

#[test]
fn readers_are_not_blocked_by_a_writer() {
    let dir = TempDir::new("read");
    let c = open(&dir.db());
    c.put(&row("a", "committed")).unwrap();
    let other = rusqlite::Connection::open(dir.db()).unwrap();
    // An exclusive transaction: in rollback-journal mode no reader gets past it.
    other.execute_batch("BEGIN EXCLUSIVE; UPDATE tools SET description = 'uncommitted';").unwrap();
    let start = Instant::now();
    let rows = c.rows().expect("a reader reads the last committed state");
    assert!(start.elapsed() < Duration::from_millis(500), "the reader waited {:?}", start.elapsed());
    assert_eq!(rows[0].row.as_ref().unwrap().description, "committed");
    other.execute_batch("COMMIT").unwrap();
    assert_eq!(c.rows().unwrap()[0].row.as_ref().unwrap().description, "uncommitted");
}

#[test]
fn a_waiting_write_leaves_the_runtime_worker_free() {
    let dir = TempDir::new("worker");
    let c = open(&dir.db());
    c.put(&row("a", "first")).unwrap();
    let other = hold_write_lock(&dir.db());
    // One worker thread: anything that blocks it stops the ticker.
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    let ticks = Arc::new(AtomicUsize::new(0));
    let counted = ticks.clone();
    let (result, waited) = rt.block_on(async {
        let ticker = tokio::spawn(async move {
            let mut every = tokio::time::interval(Duration::from_millis(10));
            loop {
                every.tick().await;
                counted.fetch_add(1, Ordering::Relaxed);
            }
        });
        tokio::task::yield_now().await;
        let start = Instant::now();
        let result = c.put_async(&row("a", "second")).await;
        let waited = start.elapsed();
        ticker.abort();
        (result, waited)
    });
    drop(other);
    let ticks = ticks.load(Ordering::Relaxed);
    eprintln!("ticks while the write waited {waited:?}: {ticks}; {result:?}");
    assert_eq!(result.unwrap_err().code(), "busy");
    // 2 s at one tick per 10 ms: about 200 when the worker is free, 1 when it is not.
    assert!(ticks >= 50, "the worker was blocked: {ticks} ticks in {waited:?}");
    assert_eq!(c.rows().unwrap()[0].row.as_ref().unwrap().description, "first", "nothing was written");
}

#[test]
fn a_short_busy_timeout_is_the_bound_and_zero_tries_once() {
    let dir = TempDir::new("bound");
    let db = dir.db();
    let registry = Registry::from_inventory().unwrap();
    let short = Catalog::builder(&registry).allow_http_origin(ORIGIN).busy_timeout(Duration::from_millis(200));
    let c = short.open(&db).unwrap();
    let other = hold_write_lock(&db);
    let start = Instant::now();
    let e = c.put(&row("a", "x")).unwrap_err();
    let waited = start.elapsed();
    let keel_tools_catalog::CatalogError::Busy { attempts, waited: reported, .. } = &e else { panic!("{e:?}") };
    assert!(*attempts > 1, "{e}");
    assert!(waited >= Duration::from_millis(200) && waited < Duration::from_millis(600), "{waited:?}");
    assert!(*reported >= Duration::from_millis(200), "{e}");
    assert!(e.to_string().starts_with("busy: writing the row \"a\""), "{e}");

    let once = Catalog::builder(&registry).allow_http_origin(ORIGIN).busy_timeout(Duration::ZERO).open(&db).unwrap();
    let start = Instant::now();
    let e = once.set_enabled("a", None, false).unwrap_err();
    assert!(start.elapsed() < Duration::from_millis(100), "{:?}", start.elapsed());
    assert!(matches!(e, keel_tools_catalog::CatalogError::Busy { attempts: 1, .. }), "{e:?}");
    assert!(e.is_busy());
    drop(other);
    assert!(!once.set_enabled("a", None, false).unwrap(), "free again; the row does not exist");
}

#[tokio::test]
async fn async_writes_return_the_token_of_their_state() {
    let dir = TempDir::new("tokens");
    let c = open(&dir.db());
    let t0 = c.change_token_async().await.unwrap();
    assert_eq!(t0.generation(), 0);
    let put = c.put_async(&row("a", "one")).await.unwrap();
    assert!(put.token > t0);
    let same = c.set_enabled_async("missing", None, false).await.unwrap();
    assert_eq!((same.value, same.token), (false, put.token), "a write that changed nothing keeps the token");
    let off = c.set_enabled_async("a", None, false).await.unwrap();
    assert!(off.value && off.token > put.token);
    // Another connection's commit moves the token too (the file counts the change).
    rusqlite::Connection::open(dir.db()).unwrap().execute("UPDATE tools SET description = 'two'", []).unwrap();
    let read = c.rows_async().await.unwrap();
    assert!(read.token > off.token);
    assert_eq!(read.value[0].row.as_ref().unwrap().description, "two");
    assert_eq!(c.change_token().unwrap(), read.token);
    let view = c.shared_view().await.unwrap();
    assert_eq!(view.change_token(), read.token);
    let gone = c.remove_async("a", None).await.unwrap();
    assert!(gone.value && gone.token > read.token);
    assert!(c.rows_async().await.unwrap().value.is_empty());
}

#[test]
fn opening_a_current_file_writes_nothing_so_a_held_lock_does_not_stop_it() {
    let dir = TempDir::new("reopen");
    let c = open(&dir.db());
    c.put(&row("a", "one")).unwrap();
    let other = hold_write_lock(&dir.db());
    let start = Instant::now();
    let again = open(&dir.db());
    assert!(start.elapsed() < Duration::from_millis(500), "{:?}", start.elapsed());
    assert_eq!(again.rows().unwrap().len(), 1);
    drop(other);
}

#[test]
fn a_version_1_file_gains_the_change_counter() {
    let dir = TempDir::new("v1");
    {
        let conn = rusqlite::Connection::open(dir.db()).unwrap();
        conn.execute_batch(
            "CREATE TABLE tools (name TEXT NOT NULL, description TEXT NOT NULL, input_schema TEXT NOT NULL, \
             output_schema TEXT, kind TEXT NOT NULL, locator TEXT NOT NULL, version TEXT NOT NULL DEFAULT '1.0', \
             effect TEXT NOT NULL DEFAULT 'destructive', enabled INTEGER NOT NULL DEFAULT 1, tenant TEXT, \
             extra TEXT NOT NULL DEFAULT '{}');
             CREATE UNIQUE INDEX tools_name_tenant ON tools (name, ifnull(tenant, ''));
             PRAGMA user_version = 1;",
        )
        .unwrap();
    }
    let c = open(&dir.db());
    c.put(&row("a", "one")).unwrap();
    let version: i64 =
        rusqlite::Connection::open(dir.db()).unwrap().query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(version, keel_tools_catalog::SCHEMA_VERSION);
    assert_eq!(c.change_token().unwrap().generation(), 1);
    // A file from a newer build is refused, with a structured error.
    rusqlite::Connection::open(dir.db()).unwrap().execute_batch("PRAGMA user_version = 99").unwrap();
    let e = Catalog::builder(&Registry::from_inventory().unwrap()).open(dir.db()).unwrap_err();
    assert_eq!(e.code(), "store_error");
    assert!(e.to_string().contains("newer than this build"), "{e}");
}

#[test]
fn connections_that_create_one_file_at_once_all_open_it() {
    let dir = TempDir::new("create");
    let db = dir.db();
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let db = db.clone();
            std::thread::spawn(move || {
                let c = open(&db);
                c.put(&row(&format!("t{i}"), "mine")).map(|_| ())
            })
        })
        .collect();
    for t in threads {
        t.join().expect("no panic").expect("opened and written");
    }
    let c = open(&db);
    assert_eq!(c.rows().unwrap().len(), 4);
    assert_eq!(c.change_token().unwrap().generation(), 4);
}

#[test]
fn an_async_method_outside_a_runtime_is_an_error_not_a_panic() {
    let dir = TempDir::new("no-runtime");
    let c = open(&dir.db());
    // A minimal executor that is not Tokio.
    let waker = std::task::Waker::noop();
    let mut cx = std::task::Context::from_waker(waker);
    let row = row("a", "x");
    let mut put = std::pin::pin!(c.put_async(&row));
    let std::task::Poll::Ready(Err(e)) = put.as_mut().poll(&mut cx) else { panic!("ready with an error") };
    assert_eq!(e.code(), "config_error", "{e}");
    assert!(e.to_string().contains("Tokio runtime"), "{e}");
    assert!(c.rows().unwrap().is_empty());
}

#[test]
fn a_change_feed_asked_for_outside_a_runtime_says_why_and_does_not_panic() {
    let dir = std::env::temp_dir().join(format!("keel-feed-no-runtime-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let registry = keel_tools_core::Registry::builder().without_inventory().build().unwrap();
    let catalog = keel_tools_catalog::Catalog::builder(&registry).open(dir.join("tools.db")).unwrap();
    let feed = catalog.changes();
    assert!(feed.health().is_degraded(), "{feed:?}");
    assert_eq!(feed.token(), None);
    // Inside a runtime the same catalogue starts its feed.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let mut feed = catalog.changes();
        let state = tokio::time::timeout(std::time::Duration::from_secs(10), feed.changed()).await.unwrap().unwrap();
        assert_eq!(state.token.map(|t| t.generation()), Some(0));
        assert!(!state.health.is_degraded());
    });
    drop(catalog);
    let _ = std::fs::remove_dir_all(&dir);
}
