//! Two OS processes edit and read one catalogue file at the same time.
//!
//! The test re-runs its own binary twice (`two_processes::child_process` alone, told its part by environment
//! variables). For a few
//! seconds each child writes the same six rows at random through the async API (put, enable or disable, remove)
//! with a short busy timeout, reads them back (`rows_async`, and `shared_view`), and one child also holds the
//! write lock now and then from a raw SQLite connection, rolling back what it wrote. Every operation is logged with
//! its change token. The parent then rebuilds the file's history from the writes alone and checks:
//!
//! - the writes that changed a row have the tokens 1, 2, … N, each once (none lost, none counted twice, nothing
//!   committed that no one reported, such as a write that failed `busy`);
//! - every read and every view equals the state the history had at its token;
//! - each task's tokens never go back;
//! - the only error is `busy` (documented: nothing changed; the writer repeats the operation);
//! - the file at the end is the history's last state, at token N.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use keel_tools_catalog::{Catalog, CatalogError, ToolRow};
use keel_tools_core::Registry;
use serde_json::{Value, json};

const ORIGIN: &str = "http://127.0.0.1:9";
const NAMES: [&str; 6] = ["t0", "t1", "t2", "t3", "t4", "t5"];
const RUN_FOR: Duration = Duration::from_secs(3);
const ROLE: &str = "KEEL_CATALOG_CHILD_ROLE";
const DB: &str = "KEEL_CATALOG_CHILD_DB";
const LOG: &str = "KEEL_CATALOG_CHILD_LOG";

fn open(db: &Path, busy_timeout: Duration) -> Catalog {
    Catalog::builder(&Registry::from_inventory().expect("registry"))
        .allow_http_origin(ORIGIN)
        .connect_timeout(Duration::from_millis(200))
        .busy_timeout(busy_timeout)
        .open(db)
        .expect("open")
}

fn row(name: &str, description: &str, enabled: bool) -> ToolRow {
    ToolRow::remote(
        name,
        description,
        json!({"type": "object", "properties": {"q": {"type": "string"}}}),
        format!("{ORIGIN}/mcp"),
        "search",
    )
    .enabled(enabled)
}

/// xorshift64, seeded per process: enough to vary the operations.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

// ---- The children ----

/// One child's log: JSON objects, written to the log file when the child ends.
type Log = Arc<Mutex<Vec<Value>>>;

fn record(log: &Log, entry: Value) {
    log.lock().unwrap().push(entry);
}

/// Logs an error; `busy` is the one that may happen (the operation changed nothing and is repeated).
fn failed(log: &Log, task: &str, e: &CatalogError) {
    record(log, json!({"kind": "error", "task": task, "code": e.code(), "message": e.to_string()}));
}

async fn writer(catalog: Catalog, role: String, log: Log, deadline: Instant) {
    let mut rng = Rng(u64::from(std::process::id()) << 16 | 0x9e37);
    let mut seq = 0u64;
    while Instant::now() < deadline {
        let name = NAMES[rng.below(NAMES.len() as u64) as usize];
        let pick = rng.below(10);
        let enabled = rng.below(2) == 0;
        seq += 1;
        let description = format!("{role}:{seq}");
        // Repeated until it is not busy: a busy attempt changed nothing.
        loop {
            let entry = match pick {
                0..=5 => catalog.put_async(&row(name, &description, enabled)).await.map(|w| {
                    json!({"kind": "write", "role": role, "op": "put", "name": name, "description": description,
                           "enabled": enabled, "changed": true, "gen": w.token.generation()})
                }),
                6..=8 => catalog.set_enabled_async(name, None, enabled).await.map(|w| {
                    json!({"kind": "write", "role": role, "op": "set_enabled", "name": name, "enabled": enabled,
                           "changed": w.value, "gen": w.token.generation()})
                }),
                _ => catalog.remove_async(name, None).await.map(|w| {
                    json!({"kind": "write", "role": role, "op": "remove", "name": name, "changed": w.value,
                           "gen": w.token.generation()})
                }),
            };
            match entry {
                Ok(entry) => {
                    record(&log, entry);
                    break;
                }
                Err(e) => {
                    failed(&log, "writer", &e);
                    if !e.is_busy() {
                        return;
                    }
                }
            }
        }
    }
}

/// Reads every row (one read transaction) and logs the state it saw.
async fn row_reader(catalog: Catalog, log: Log, deadline: Instant) {
    while Instant::now() < deadline {
        match catalog.rows_async().await {
            Ok(read) => {
                let mut rows = BTreeMap::new();
                for stored in &read.value {
                    let Ok(r) = &stored.row else {
                        record(&log, json!({"kind": "error", "task": "rows", "code": "bad_row", "message": ""}));
                        return;
                    };
                    rows.insert(r.name.clone(), json!([r.description, r.enabled]));
                }
                record(&log, json!({"kind": "rows", "gen": read.token.generation(), "rows": rows}));
            }
            Err(e) => failed(&log, "rows", &e),
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

/// Builds views and logs the enabled rows each was built from (resolved or left out: their endpoint is closed).
async fn view_reader(catalog: Catalog, log: Log, deadline: Instant) {
    while Instant::now() < deadline {
        match catalog.shared_view().await {
            Ok(view) => {
                let mut enabled: Vec<String> = view.view().names().map(str::to_owned).collect();
                for p in view.problems() {
                    if p.code() != "endpoint_unreachable" {
                        record(
                            &log,
                            json!({"kind": "error", "task": "view", "code": p.code(), "message": p.to_string()}),
                        );
                    }
                    enabled.push(p.row().name.clone());
                }
                enabled.sort();
                record(&log, json!({"kind": "view", "gen": view.change_token().generation(), "enabled": enabled}));
            }
            Err(e) => failed(&log, "view", &e),
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Holds the write lock from a raw connection for 40 ms at a time, writing and then rolling back.
fn lock_holder(db: &Path, deadline: Instant) -> usize {
    let conn = rusqlite::Connection::open(db).expect("raw connection");
    conn.busy_timeout(Duration::from_secs(2)).unwrap();
    let mut held = 0;
    while Instant::now() < deadline {
        if conn.execute_batch("BEGIN IMMEDIATE; UPDATE tools SET description = 'rolled back';").is_ok() {
            held += 1;
            std::thread::sleep(Duration::from_millis(40));
        }
        let _ = conn.execute_batch("ROLLBACK");
        std::thread::sleep(Duration::from_millis(60));
    }
    held
}

/// The entry point of a child; does nothing (and passes) when the test runs as itself.
#[test]
fn child_process() {
    let (Some(role), Some(db), Some(log_path)) = (std::env::var_os(ROLE), std::env::var_os(DB), std::env::var_os(LOG))
    else {
        return;
    };
    let role = role.to_string_lossy().into_owned();
    let db = PathBuf::from(db);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let log: Log = Arc::new(Mutex::new(Vec::new()));
    let deadline = Instant::now() + RUN_FOR;
    // A short busy timeout, so that waiting out another writer ends in `busy` now and then.
    let catalog = open(&db, Duration::from_millis(20));
    let holder = (role == "b").then(|| {
        let db = db.clone();
        std::thread::spawn(move || lock_holder(&db, deadline))
    });
    rt.block_on(async {
        let tasks = [
            tokio::spawn(writer(catalog.clone(), role.clone(), log.clone(), deadline)),
            tokio::spawn(row_reader(catalog.clone(), log.clone(), deadline)),
            tokio::spawn(view_reader(catalog.clone(), log.clone(), deadline)),
        ];
        for t in tasks {
            t.await.expect("task");
        }
    });
    let held = holder.map_or(0, |h| h.join().expect("lock holder"));
    record(&log, json!({"kind": "done", "role": role, "held": held}));
    let mut out = std::fs::File::create(log_path).expect("log file");
    for entry in log.lock().unwrap().iter() {
        writeln!(out, "{entry}").unwrap();
    }
}

// ---- The parent ----

fn spawn_child(role: &str, db: &Path, log: &Path) -> Child {
    Command::new(std::env::current_exe().expect("test binary"))
        .args(["two_processes::child_process", "--exact", "--nocapture", "--test-threads=1"])
        .env(ROLE, role)
        .env(DB, db)
        .env(LOG, log)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn a child")
}

/// Waits for a child (at most 60 s, then kills it) and returns its output.
fn finish(mut child: Child, role: &str) -> std::process::Output {
    let start = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("output");
    assert!(
        out.status.success(),
        "child {role} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A fresh directory under the system temp dir, removed on drop (the children have ended by then).
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        let dir = std::env::temp_dir().join(format!("keel-catalog-two-processes-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The rows of one state: name → (description, enabled).
type State = BTreeMap<String, (String, bool)>;

#[test]
fn two_processes_edit_and_read_one_catalogue() {
    let dir = TempDir::new();
    let dir = &dir.0;
    let db = dir.join("tools.db");
    drop(open(&db, Duration::from_secs(2))); // a new, empty catalogue at token 0

    let (log_a, log_b) = (dir.join("a.jsonl"), dir.join("b.jsonl"));
    let (a, b) = (spawn_child("a", &db, &log_a), spawn_child("b", &db, &log_b));
    finish(a, "a");
    finish(b, "b");
    let mut entries: Vec<(String, Value)> = Vec::new();
    for (role, path) in [("a", &log_a), ("b", &log_b)] {
        let text = std::fs::read_to_string(path).expect("a child's log");
        for line in text.lines() {
            entries.push((role.to_owned(), serde_json::from_str(line).expect("a log line")));
        }
    }

    // Errors: `busy` only.
    let mut busy = 0;
    for (role, e) in entries.iter().filter(|(_, e)| e["kind"] == "error") {
        assert_eq!(e["code"], "busy", "child {role}: an undocumented error: {e}");
        busy += 1;
    }

    // The history: the writes that changed a row, by token; each token 1..=N exactly once.
    let mut changes: BTreeMap<u64, &Value> = BTreeMap::new();
    for (role, w) in entries.iter().filter(|(_, e)| e["kind"] == "write" && e["changed"] == true) {
        let generation = w["gen"].as_u64().unwrap();
        if let Some(other) = changes.insert(generation, w) {
            panic!("two writes committed token {generation}: {other} and {w} (child {role})");
        }
    }
    let last = changes.len() as u64;
    assert!(
        changes.keys().copied().eq(1..=last),
        "the tokens of the changes have gaps or extras (a lost or unreported commit): {:?}",
        changes.keys().collect::<Vec<_>>()
    );
    let mut states: Vec<State> = vec![State::new()];
    for w in changes.values() {
        let mut next = states.last().unwrap().clone();
        let name = w["name"].as_str().unwrap().to_owned();
        match w["op"].as_str().unwrap() {
            "put" => {
                next.insert(name, (w["description"].as_str().unwrap().to_owned(), w["enabled"] == true));
            }
            "set_enabled" => {
                let row = next.get_mut(&name).unwrap_or_else(|| panic!("{w}: enabled a row that did not exist"));
                row.1 = w["enabled"] == true;
            }
            "remove" => {
                assert!(next.remove(&name).is_some(), "{w}: removed a row that did not exist");
            }
            other => panic!("unknown op {other}"),
        }
        states.push(next);
    }
    // A write that found no row saw a state without it.
    for (_, w) in entries.iter().filter(|(_, e)| e["kind"] == "write" && e["changed"] == false) {
        let state = &states[w["gen"].as_u64().unwrap() as usize];
        assert!(!state.contains_key(w["name"].as_str().unwrap()), "{w} found no row, but the state has it");
    }

    // Every read and every view is a state of the history; a task's tokens never go back.
    let (mut reads, mut views, mut crossed) = (0, 0, 0);
    let mut last_seen: BTreeMap<(String, String), u64> = BTreeMap::new();
    for (role, e) in &entries {
        let kind = e["kind"].as_str().unwrap();
        let Some(generation) = e["gen"].as_u64() else { continue };
        let seen = last_seen.entry((role.clone(), kind.to_owned())).or_insert(0);
        assert!(generation >= *seen, "child {role}'s {kind} token went back from {seen} to {generation}");
        *seen = generation;
        let state = states.get(generation as usize).unwrap_or_else(|| panic!("{e}: no such state (last {last})"));
        match kind {
            "rows" => {
                let rows: State = e["rows"]
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(n, v)| (n.clone(), (v[0].as_str().unwrap().to_owned(), v[1] == true)))
                    .collect();
                assert_eq!(&rows, state, "child {role} read a state that never existed at token {generation}");
                reads += 1;
                if generation > 0 && changes[&generation]["role"] != role.as_str() {
                    crossed += 1;
                }
            }
            "view" => {
                let enabled: Vec<&str> = e["enabled"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
                let expected: Vec<&str> = state.iter().filter(|(_, r)| r.1).map(|(n, _)| n.as_str()).collect();
                assert_eq!(enabled, expected, "child {role}'s view at token {generation} is not that state");
                views += 1;
            }
            _ => {}
        }
    }

    // No lost update: the file is the history's last state.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let end = rt.block_on(open(&db, Duration::from_secs(2)).rows_async()).unwrap();
    assert_eq!(end.token.generation(), last);
    let end_state: State = end
        .value
        .iter()
        .map(|s| s.row.as_ref().unwrap())
        .map(|r| (r.name.clone(), (r.description.clone(), r.enabled)))
        .collect();
    assert_eq!(&end_state, states.last().unwrap(), "the file lost an update");

    let by = |role: &str| changes.values().filter(|w| w["role"] == role).count();
    let held = entries.iter().find(|(_, e)| e["kind"] == "done" && e["role"] == "b").unwrap().1["held"].clone();
    eprintln!(
        "{last} changes ({} by a, {} by b), {reads} reads ({crossed} of the other process's state), {views} views, \
         {busy} busy, write lock held {held} times by b's raw connection",
        by("a"),
        by("b")
    );
    assert!(by("a") >= 20 && by("b") >= 20, "both processes wrote");
    assert!(reads >= 20 && views >= 20 && crossed > 0, "both processes read, and saw each other's writes");
    assert!(busy > 0, "the busy path ran");
}
