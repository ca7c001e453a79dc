//! Call state shared through PostgreSQL by three replicas (the example `catalogue_replicas` in replica mode) over
//! one database, each test in a database of its own (`KEEL_TEST_POSTGRES`):
//!
//! - behind a round-robin TCP proxy, the official Python MCP SDK (`tests/mcp/python_replicas.py`, protocol
//!   2026-07-28, stateless: each request on a connection of its own, so on the next replica in turn) starts a task
//!   on one replica, polls it (`tasks/get`) through every replica and cancels it (`tasks/cancel`) through another,
//!   whose cancellation reaches the handler on the first; answers a task's input request (`tasks/update`) through
//!   another replica than the one running it, which completes with the answer; retries one write with one
//!   `_meta["keel/idempotencyKey"]` through all three, which runs once (one row) and answers every retry with the
//!   recorded result; and, after a replica running a task is SIGKILLed, reads that task `failed` with `task_lost`
//!   through the survivors within its lease (plus a margin), while the other tasks and writes are intact;
//! - a call waiting for an approval, saved by one replica, is resolved by another, and taken once.
//!
//! Which replica served each request is read at the proxy: it notes each connection's replica, with the
//! `Mcp-Method` and `Mcp-Name` headers of its request, in a file the script reads.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use examples::replicas::{Replica, TASK_LEASE_VAR};
use keel_tests::pg::PgDatabase;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// The task lease of the replicas under test: a task whose replica died reads `task_lost` at most this long after
/// the replica's last heartbeat.
const LEASE_MS: u64 = 2000;

fn required() -> bool {
    keel_tests::peers_required()
}

fn workspace_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The Python of the venv with the `mcp` SDK: `KEEL_PYTHON_MCP`, else `target/ci-venv/bin/python`.
fn python_mcp() -> Option<PathBuf> {
    let python = std::env::var_os("KEEL_PYTHON_MCP")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target/ci-venv/bin/python"));
    if python.is_file() {
        return Some(python);
    }
    let message = format!("no Python at {} (set KEEL_PYTHON_MCP)", python.display());
    keel_tests::missing_peer(&keel_tests::peers::PYTHON_MCP, &message);
    None
}

async fn bounded<F: std::future::Future<Output = ()>>(f: F) {
    tokio::time::timeout(Duration::from_secs(120), f).await.expect("test timed out");
}

/// A fresh database, three replicas over it (task lease [`LEASE_MS`]), each serving its own tools from its first
/// view on (`--own-tools`: the first puts their rows).
async fn three_replicas(label: &str) -> Option<(PgDatabase, Vec<Replica>)> {
    let exe = keel_tests::peers::replica_exe()?;
    let db = PgDatabase::create(label, required()).await?;
    let lease = LEASE_MS.to_string();
    let env = [(TASK_LEASE_VAR, lease.as_str())];
    let mut replicas = Vec::new();
    for name in ["replica-a", "replica-b", "replica-c"] {
        let replica = Replica::spawn_with(&exe, name, &db.conninfo, &["--own-tools"], &env).await;
        replicas.push(replica.expect("a replica starts"));
    }
    Some((db, replicas))
}

/// How many rows of the charges table each order has, and the sum of their amounts.
async fn charges(db: &PgDatabase) -> BTreeMap<String, (i64, i64)> {
    let client = db.client().await;
    let rows = client
        .query("SELECT order_id, count(*), sum(cents)::bigint FROM replica_charges GROUP BY order_id", &[])
        .await
        .expect("the charges table");
    rows.iter().map(|r| (r.get::<_, String>(0), (r.get::<_, i64>(1), r.get::<_, i64>(2)))).collect()
}

// ---- A round-robin TCP proxy ----

/// Where the proxy sent one connection.
#[derive(Debug, Clone)]
struct Route {
    /// The replica's index.
    replica: usize,
    /// The `Mcp-Method` header of the connection's first request (empty without one).
    method: String,
}

/// A TCP proxy on loopback: each connection goes to the next live replica in turn, bytes copied both ways. It
/// reads the headers of each connection's first request before it connects, and notes where it sent the
/// connection (in memory, and as a JSON line in `routes`, written before the request is forwarded).
struct Proxy {
    addr: SocketAddr,
    alive: Arc<Mutex<Vec<bool>>>,
    routes: Arc<Mutex<Vec<Route>>>,
}

/// The value of header `name` (lowercase) in an HTTP request head.
fn header(head: &str, name: &str) -> String {
    head.lines()
        .find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
        })
        .unwrap_or_default()
}

impl Proxy {
    async fn start(replicas: &[(String, SocketAddr)], routes_file: &Path) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind the proxy");
        let addr = listener.local_addr().unwrap();
        let alive = Arc::new(Mutex::new(vec![true; replicas.len()]));
        let routes = Arc::new(Mutex::new(Vec::new()));
        let backends: Arc<Vec<(String, SocketAddr)>> = Arc::new(replicas.to_vec());
        let next = Arc::new(AtomicUsize::new(0));
        let file = Arc::new(Mutex::new(std::fs::File::create(routes_file).expect("the routes file")));
        let (alive2, routes2) = (alive.clone(), routes.clone());
        tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else { return };
                // The next live replica in turn, chosen as the connection is accepted.
                let chosen = {
                    let alive = alive2.lock().unwrap();
                    (0..backends.len())
                        .map(|_| next.fetch_add(1, Ordering::SeqCst) % backends.len())
                        .find(|i| alive[*i])
                };
                let Some(index) = chosen else { continue };
                let (backends, routes, file) = (backends.clone(), routes2.clone(), file.clone());
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 8192];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 65536 {
                        match inbound.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let text = String::from_utf8_lossy(&head).into_owned();
                    let (method, name) = (header(&text, "mcp-method"), header(&text, "mcp-name"));
                    let (replica_name, target) = &backends[index];
                    {
                        use std::io::Write;
                        let line = json!({"index": index, "replica": replica_name, "method": method, "name": name});
                        let mut file = file.lock().unwrap();
                        let _ = writeln!(file, "{line}");
                        let _ = file.flush();
                        routes.lock().unwrap().push(Route { replica: index, method });
                    }
                    let Ok(mut outbound) = TcpStream::connect(target).await else { return };
                    if outbound.write_all(&head).await.is_err() {
                        return;
                    }
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                });
            }
        });
        Proxy { addr, alive, routes }
    }

    /// Sends no more connections to replica `index`.
    fn remove(&self, index: usize) {
        self.alive.lock().unwrap()[index] = false;
    }

    fn routes(&self) -> Vec<Route> {
        self.routes.lock().unwrap().clone()
    }
}

fn socket_of(url: &str) -> SocketAddr {
    url.trim_start_matches("http://").split('/').next().unwrap().parse().expect("an address")
}

// ---- The tests ----

#[tokio::test(flavor = "multi_thread")]
async fn the_python_sdk_through_a_round_robin_proxy_sees_one_state_on_three_replicas() {
    let Some(python) = python_mcp() else { return };
    bounded(async {
        let began = Instant::now();
        let Some((db, mut replicas)) = three_replicas("mcp_replicas_sdk").await else { return };
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
        let routes_file = dir.join(format!("mcp-replicas-routes-{}.jsonl", std::process::id()));
        let backends: Vec<(String, SocketAddr)> =
            replicas.iter().map(|r| (r.name.clone(), socket_of(&r.url))).collect();
        let proxy = Proxy::start(&backends, &routes_file).await;
        let started = began.elapsed();

        let mut script = tokio::process::Command::new(&python)
            .arg(workspace_root().join("tests/mcp/python_replicas.py"))
            .args(["--routes", routes_file.to_str().unwrap(), "--replicas", "3"])
            .args(["--lease-ms", &LEASE_MS.to_string()])
            .arg(format!("http://{}/mcp", proxy.addr))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("python starts");
        let mut to_script = script.stdin.take().unwrap();
        let mut lines = BufReader::new(script.stdout.take().unwrap()).lines();
        let mut stderr = script.stderr.take().unwrap();
        let stderr_text = tokio::spawn(async move {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text).await;
            text
        });
        let mut output = String::new();
        let mut summary = Value::Null;
        let mut killed = None;
        while let Some(line) = lines.next_line().await.expect("the script's output") {
            output.push_str(&line);
            output.push('\n');
            if let Some(name) = line.strip_prefix("kill ") {
                // The script asks for the replica running its task to die mid-task.
                let index = replicas.iter().position(|r| r.name == name).expect("a replica's name");
                proxy.remove(index);
                replicas[index].kill().await;
                killed = Some((index, proxy.routes().len()));
                to_script.write_all(b"killed\n").await.expect("tell the script");
                to_script.flush().await.unwrap();
            } else if let Some(json) = line.strip_prefix("summary ") {
                summary = serde_json::from_str(json).expect("the summary's JSON");
            }
        }
        let status = script.wait().await.expect("python ran");
        let stderr_text = stderr_text.await.unwrap();
        eprintln!("{output}");
        assert!(status.success(), "python_replicas.py failed:\n{output}\n{stderr_text}");

        // Stateless requests through the proxy landed on every replica (and none on the killed one after it died).
        let routes = proxy.routes();
        let per_replica: BTreeSet<usize> = routes.iter().map(|r| r.replica).collect();
        assert_eq!(per_replica.len(), 3, "every replica served requests: {routes:?}");
        let (killed, routed_before) = killed.expect("the script asked for a replica to be killed");
        assert!(
            routes[routed_before..].iter().all(|r| r.replica != killed),
            "no connection went to the killed replica"
        );
        let methods: BTreeSet<&str> = routes.iter().map(|r| r.method.as_str()).collect();
        for method in ["tools/call", "tasks/get", "tasks/cancel", "tasks/update"] {
            assert!(methods.contains(method), "{method} went through the proxy: {methods:?}");
        }

        // The cancel reached the handler on the replica that ran the task: its cancellation token fired.
        let owner = summary["cancelled_task_owner"].as_str().expect("the summary names the owner");
        let owner = replicas.iter().find(|r| r.name == owner).expect("the owner is a replica");
        let event =
            owner.event(|e| e["event"] == "cancelled" && e["tool"] == "work_a_while", Duration::from_secs(5)).await;
        assert!(event.is_some(), "the handler on {} saw its call cancelled: {:?}", owner.name, owner.events());
        for other in replicas.iter().filter(|r| r.name != owner.name) {
            assert!(other.events().is_empty(), "{} ran no cancelled call: {:?}", other.name, other.events());
        }

        // Each write ran once, whichever replicas its retries reached: one row an order.
        let charged = charges(&db).await;
        let expected: BTreeMap<String, (i64, i64)> =
            [("o-1", (1, 4200)), ("o-2", (1, 1500)), ("o-3", (1, 700))].map(|(o, c)| (o.to_owned(), c)).into();
        assert_eq!(charged, expected, "one charge per order");
        let records = db.client().await.query("SELECT state FROM keel_effects", &[]).await.unwrap();
        assert_eq!(records.len(), 3, "one effect record per key");
        assert!(records.iter().all(|r| r.get::<_, String>(0) == "done"), "every record finished");

        let _ = std::fs::remove_file(&routes_file);
        eprintln!(
            "three replicas up in {started:?}, {} connections through the proxy, replica {} killed; {:?} in all",
            routes.len(),
            replicas[killed].name,
            began.elapsed()
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pending_approval_saved_by_one_replica_is_resolved_by_another_once() {
    bounded(async {
        let Some((db, mut replicas)) = three_replicas("mcp_replicas_approval").await else { return };
        let args = json!({"order": "o-9", "cents": 500});
        let asked = replicas[0].call("refund-o-9", "refund_order", args).await.expect("a call");
        assert_eq!(asked["result"]["error"]["code"], "approval_required", "{asked}");
        assert_eq!(asked["result"]["executed"], false, "{asked}");
        let key = asked["pending"].as_str().unwrap_or_else(|| panic!("a pending call was saved: {asked}")).to_owned();
        assert!(charges(&db).await.is_empty(), "nothing ran before the approval");

        // Another replica takes it from the shared store, verifies it with the shared key and runs it.
        let approved = replicas[1].approve(&key).await.expect("an approval");
        let result = &approved["result"];
        assert_eq!(result["ok"], true, "{approved}");
        assert_eq!(result["executed"], true, "{approved}");
        assert_eq!(result["data"]["replica"], "replica-b", "{approved}");
        assert_eq!(result["data"]["cents"], -500, "{approved}");

        // Taken once: the third replica, and the first, find nothing.
        for r in [2, 0] {
            let again = replicas[r].approve(&key).await.expect("an answer");
            assert_eq!(again["result"], Value::Null, "{} found nothing to take: {again}", replicas[r].name);
        }
        let expected: BTreeMap<String, (i64, i64)> = [("o-9".to_owned(), (1, -500))].into();
        assert_eq!(charges(&db).await, expected, "the refund ran once");
    })
    .await;
}
