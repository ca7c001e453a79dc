//! Replicas of one catalogue, each an MCP server process of its own (`examples/examples/catalogue_replicas.rs`),
//! driven from another process: the demo, and the tests of `tests/tests/catalog_replicas.rs` and
//! `tests/tests/mcp_replicas.rs`.
//!
//! A replica is started as `catalogue_replicas replica <name> <conninfo> [--own-tools]`. It connects to the
//! PostgreSQL catalogue, and to the call state kept in the same database (tasks, exactly-once effect records, pending approvals: see
//! keel-tools-state), serves the shared view over Streamable HTTP on a loopback port (MCP at `/mcp`, its health at
//! `/health`), follows the catalogue's changes, and speaks one JSON object per line. With `--own-tools`, it first
//! puts a row for each of its own tools the catalogue lacks (`work_a_while` and `ask_whose_order`, tasks;
//! `charge_order`, a write that runs once; `refund_order`, which waits for an approval), so that the first view it
//! serves has them.
//!
//! - out: `{"event": "listening", "url": …, "health": …}` once; `{"event": "served", "generation": N, "at_us": T}`
//!   each time it swaps in a view (T: Unix time in microseconds); `{"event": "committed", "op": …, "name": …,
//!   "generation": N, "at_us": T}` after each write it was asked for; `{"event": "error", "message": …}`;
//!   `{"event": "called", "id": …, "result": R, "pending": K}` after a `call` (R: the call's
//!   [`ToolResult`](keel_tools_core::ToolResult) as JSON; K: the key of the pending call saved for it, or `null`
//!   when it needs no approval); `{"event": "approved", "key": K, "result": R}` after an `approve` (`result` is
//!   `null` when there was nothing to take under K: never saved, or taken already); and, from the replica's
//!   tools, `{"event": "cancelled", "tool": …, "call_id": …, "at_us": T}` when a call of `work_a_while` ends
//!   because its cancellation token fired.
//! - in: `{"op": "put", "name": …, "description": …, "tool": …}` (a row serving the compiled tool `tool`, by
//!   default `get_service_status`, under that name; the description defaults to the tool's),
//!   `{"op": "set_enabled", "name": …, "enabled": bool}`, `{"op": "remove", "name": …}`;
//!   `{"op": "call", "id": …, "tool": …, "arguments": {…}}` (runs the call through the replica's executor; a call
//!   the policy stops with `approval_required` is saved as a signed pending call in the shared pending store),
//!   `{"op": "approve", "key": K}` (takes the pending call K from the store, whichever replica saved it, and resumes
//!   it approved).
//!
//! Every replica seals the `requestState` of input-required results with the same key ([`request_state_keys`]),
//! so that a client's next round may reach any of them, and signs pending calls with the same approval key
//! ([`approval_key`]), so that any of them resumes a call another saved. A task runs on the replica that took its
//! call, under a lease of [`task_lease`] renewed while it runs; any replica answers `tasks/get`, `tasks/update`
//! and `tasks/cancel` for it, and reports it failed (`task_lost`) once its replica stopped renewing the lease.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::{mpsc, watch};

/// The variable holding the replicas' `requestState` key, as `<id>:<key>` (the key: at least 32 random bytes).
pub const REQUEST_STATE_KEY_VAR: &str = "KEEL_REQUEST_STATE_KEY";
/// The variable holding the key [`REQUEST_STATE_KEY_VAR`] replaced, during a rotation, as `<id>:<key>`.
pub const PREVIOUS_REQUEST_STATE_KEY_VAR: &str = "KEEL_REQUEST_STATE_PREVIOUS_KEY";

/// FOR DEVELOPMENT ONLY: the key the demo's replicas share when [`REQUEST_STATE_KEY_VAR`] is not set. It is
/// public, so anyone can forge a `requestState` sealed with it: never deploy it.
pub const DEVELOPMENT_REQUEST_STATE_KEY: (&str, &[u8]) =
    ("development-only", b"keel replicas demo: a PUBLIC development key, never deploy it");

/// A key and its id.
pub type NamedKey = (String, Vec<u8>);

/// An `<id>:<key>` pair read from `var`: `None` when unset or empty.
fn key_from(var: &str) -> Result<Option<NamedKey>, String> {
    let Some(value) = std::env::var(var).ok().filter(|v| !v.is_empty()) else { return Ok(None) };
    let (id, key) = value.split_once(':').ok_or_else(|| format!("{var} must be `<id>:<key>`"))?;
    Ok(Some((id.to_owned(), key.as_bytes().to_vec())))
}

/// The replicas' `requestState` keys, the same in every replica: the current one and, during a rotation, the
/// previous one, from [`REQUEST_STATE_KEY_VAR`] and [`PREVIOUS_REQUEST_STATE_KEY_VAR`]; without them, the
/// public [`DEVELOPMENT_REQUEST_STATE_KEY`], with a warning on stderr.
pub fn request_state_keys() -> Result<(NamedKey, Option<NamedKey>), String> {
    let previous = key_from(PREVIOUS_REQUEST_STATE_KEY_VAR)?;
    match key_from(REQUEST_STATE_KEY_VAR)? {
        Some(current) => Ok((current, previous)),
        None if previous.is_some() => {
            Err(format!("{PREVIOUS_REQUEST_STATE_KEY_VAR} is set without {REQUEST_STATE_KEY_VAR}"))
        }
        None => {
            eprintln!(
                "warning: {REQUEST_STATE_KEY_VAR} is not set; the replicas seal requestState with a PUBLIC \
                 development key"
            );
            let (id, key) = DEVELOPMENT_REQUEST_STATE_KEY;
            Ok(((id.to_owned(), key.to_vec()), None))
        }
    }
}

/// The variable holding the replicas' approval key, which signs and verifies their pending calls (at least 32
/// random bytes).
pub const APPROVAL_KEY_VAR: &str = "KEEL_APPROVAL_KEY";
/// The variable holding the approval key [`APPROVAL_KEY_VAR`] replaced, during a rotation.
pub const PREVIOUS_APPROVAL_KEY_VAR: &str = "KEEL_APPROVAL_PREVIOUS_KEY";

/// FOR DEVELOPMENT ONLY: the approval key the demo's replicas share when [`APPROVAL_KEY_VAR`] is not set. It is
/// public, so anyone can forge a pending call signed with it: never deploy it.
pub const DEVELOPMENT_APPROVAL_KEY: &[u8] = b"keel replicas demo: a PUBLIC development approval key, never deploy it";

/// The replicas' approval key, the same in every replica, so that any of them resumes a pending call another
/// saved: [`APPROVAL_KEY_VAR`], with [`PREVIOUS_APPROVAL_KEY_VAR`] still accepted during a rotation; without
/// them, the public [`DEVELOPMENT_APPROVAL_KEY`], with a warning on stderr.
pub fn approval_key() -> Result<keel_tools_core::runs::ApprovalKey, String> {
    use keel_tools_core::runs::ApprovalKey;
    let read = |var: &str| std::env::var(var).ok().filter(|v| !v.is_empty());
    let key = |var: &str, value: String| ApprovalKey::new(value.as_bytes()).map_err(|e| format!("{var}: {e}"));
    match (read(APPROVAL_KEY_VAR), read(PREVIOUS_APPROVAL_KEY_VAR)) {
        (Some(current), previous) => {
            let current = key(APPROVAL_KEY_VAR, current)?;
            match previous {
                Some(previous) => Ok(current.with_previous(key(PREVIOUS_APPROVAL_KEY_VAR, previous)?)),
                None => Ok(current),
            }
        }
        (None, Some(_)) => Err(format!("{PREVIOUS_APPROVAL_KEY_VAR} is set without {APPROVAL_KEY_VAR}")),
        (None, None) => {
            eprintln!(
                "warning: {APPROVAL_KEY_VAR} is not set; the replicas sign pending calls with a PUBLIC development key"
            );
            ApprovalKey::new(DEVELOPMENT_APPROVAL_KEY).map_err(|e| e.to_string())
        }
    }
}

/// The variable holding how long a replica's task lease lasts, in milliseconds (default [`DEFAULT_TASK_LEASE`]).
pub const TASK_LEASE_VAR: &str = "KEEL_TASK_LEASE_MS";

/// How long a replica's task lease lasts by default: a task whose replica died reads `task_lost` this long (at
/// most) after the replica's last heartbeat.
pub const DEFAULT_TASK_LEASE: Duration = Duration::from_secs(2);

/// The task lease of the replicas: [`TASK_LEASE_VAR`], else [`DEFAULT_TASK_LEASE`].
pub fn task_lease() -> Result<Duration, String> {
    match std::env::var(TASK_LEASE_VAR).ok().filter(|v| !v.is_empty()) {
        None => Ok(DEFAULT_TASK_LEASE),
        Some(ms) => match ms.parse::<u64>() {
            Ok(ms) if ms > 0 => Ok(Duration::from_millis(ms)),
            _ => Err(format!("{TASK_LEASE_VAR} must be a positive number of milliseconds, not {ms:?}")),
        },
    }
}

/// Microseconds since the Unix epoch: the clock replicas stamp their events with (one machine, one clock).
pub fn now_us() -> u64 {
    SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}

/// A write a replica committed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Committed {
    /// `put`, `set_enabled` or `remove`.
    pub op: String,
    /// The row's name.
    pub name: String,
    /// The change token the write committed.
    pub generation: u64,
    /// When the write returned, in Unix microseconds.
    pub at_us: u64,
}

/// One replica process.
pub struct Replica {
    /// Its name (in its MCP server info).
    pub name: String,
    /// Its MCP endpoint.
    pub url: String,
    /// Its health endpoint.
    pub health: String,
    child: Child,
    stdin: Option<ChildStdin>,
    committed: mpsc::UnboundedReceiver<Result<Committed, String>>,
    answers: mpsc::UnboundedReceiver<Value>,
    served: watch::Receiver<u64>,
    history: Arc<Mutex<BTreeMap<u64, u64>>>,
    events: Arc<Mutex<Vec<Value>>>,
}

impl Replica {
    /// Starts `exe replica <name> <conninfo>` and waits (up to 60 s) until it listens.
    pub async fn spawn(exe: &Path, name: &str, conninfo: &str) -> Result<Replica, String> {
        Replica::spawn_with(exe, name, conninfo, &[], &[]).await
    }

    /// [`Replica::spawn`], with `options` after the connection string (`--own-tools`) and these environment
    /// variables set for the replica (e.g. [`TASK_LEASE_VAR`]).
    pub async fn spawn_with(
        exe: &Path,
        name: &str,
        conninfo: &str,
        options: &[&str],
        env: &[(&str, &str)],
    ) -> Result<Replica, String> {
        let mut child = Command::new(exe)
            .args(["replica", name, conninfo])
            .args(options)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("starting {}: {e}", exe.display()))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().ok_or("no stdout")?;
        let (listening_tx, listening_rx) = tokio::sync::oneshot::channel::<(String, String)>();
        let (committed_tx, committed) = mpsc::unbounded_channel();
        let (answers_tx, answers) = mpsc::unbounded_channel();
        let events = Arc::new(Mutex::new(Vec::new()));
        let others = events.clone();
        let (served_tx, served) = watch::channel(0u64);
        let history = Arc::new(Mutex::new(BTreeMap::new()));
        let hist = history.clone();
        tokio::spawn(async move {
            let mut listening_tx = Some(listening_tx);
            let mut lines = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                let Ok(event) = serde_json::from_str::<Value>(&line) else { continue };
                let text = |k: &str| event[k].as_str().unwrap_or_default().to_owned();
                let num = |k: &str| event[k].as_u64().unwrap_or_default();
                match event["event"].as_str() {
                    Some("listening") => {
                        if let Some(tx) = listening_tx.take() {
                            let _ = tx.send((text("url"), text("health")));
                        }
                    }
                    Some("served") => {
                        hist.lock()
                            .unwrap_or_else(std::sync::PoisonError::into_inner)
                            .insert(num("generation"), num("at_us"));
                        served_tx.send_modify(|g| *g = (*g).max(num("generation")));
                    }
                    Some("committed") => {
                        let c = Committed {
                            op: text("op"),
                            name: text("name"),
                            generation: num("generation"),
                            at_us: num("at_us"),
                        };
                        let _ = committed_tx.send(Ok(c));
                    }
                    Some("error") => {
                        let _ = committed_tx.send(Err(text("message")));
                    }
                    Some("called" | "approved") => {
                        let _ = answers_tx.send(event);
                    }
                    _ => others.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(event),
                }
            }
        });
        let (url, health) = tokio::time::timeout(Duration::from_secs(60), listening_rx)
            .await
            .map_err(|_| format!("replica {name} did not listen within 60 s"))?
            .map_err(|_| format!("replica {name} exited before listening"))?;
        Ok(Replica { name: name.to_owned(), url, health, child, stdin, committed, answers, served, history, events })
    }

    /// Sends one command line.
    pub async fn send(&mut self, command: Value) -> Result<(), String> {
        let stdin = self.stdin.as_mut().ok_or("stdin closed")?;
        let mut line = command.to_string();
        line.push('\n');
        stdin.write_all(line.as_bytes()).await.map_err(|e| format!("writing to replica {}: {e}", self.name))?;
        stdin.flush().await.map_err(|e| e.to_string())
    }

    /// Sends a write and waits for its `committed` event (up to 30 s).
    pub async fn write(&mut self, command: Value) -> Result<Committed, String> {
        self.send(command).await?;
        self.next_committed().await
    }

    /// The next `committed` event (up to 30 s).
    pub async fn next_committed(&mut self) -> Result<Committed, String> {
        match tokio::time::timeout(Duration::from_secs(30), self.committed.recv()).await {
            Ok(Some(r)) => r,
            Ok(None) => Err(format!("replica {} closed its output", self.name)),
            Err(_) => Err(format!("replica {}: no commit within 30 s", self.name)),
        }
    }

    /// `put` of a row named `name` (serving `get_service_status`) with `description`.
    pub async fn put(&mut self, name: &str, description: &str) -> Result<Committed, String> {
        self.write(json!({"op": "put", "name": name, "description": description})).await
    }

    /// Runs `tool` with `arguments` through the replica's executor, as call `id` (`op: call`): its `called` event,
    /// with the result and the key of the pending call saved for it, if the call waits for an approval.
    pub async fn call(&mut self, id: &str, tool: &str, arguments: Value) -> Result<Value, String> {
        self.send(json!({"op": "call", "id": id, "tool": tool, "arguments": arguments})).await?;
        self.next_answer().await
    }

    /// Takes the pending call `key` from the shared store and resumes it approved (`op: approve`): its `approved`
    /// event, whose `result` is `null` when there was nothing to take.
    pub async fn approve(&mut self, key: &str) -> Result<Value, String> {
        self.send(json!({"op": "approve", "key": key})).await?;
        self.next_answer().await
    }

    /// The next `called` or `approved` event (up to 30 s).
    async fn next_answer(&mut self) -> Result<Value, String> {
        match tokio::time::timeout(Duration::from_secs(30), self.answers.recv()).await {
            Ok(Some(event)) => Ok(event),
            Ok(None) => Err(format!("replica {} closed its output", self.name)),
            Err(_) => Err(format!("replica {}: no answer within 30 s", self.name)),
        }
    }

    /// The events of the replica's tools so far (`cancelled`, ...), in the order they came.
    pub fn events(&self) -> Vec<Value> {
        self.events.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    /// The first event of the replica's tools that `matches`, waiting for it up to `within`.
    pub async fn event(&self, matches: impl Fn(&Value) -> bool, within: Duration) -> Option<Value> {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(found) = self.events().into_iter().find(|e| matches(e)) {
                return Some(found);
            }
            if tokio::time::Instant::now() >= deadline {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until the replica serves a view of at least `generation` (up to `within`); when it swapped it in.
    pub async fn served_at_least(&mut self, generation: u64, within: Duration) -> Result<u64, String> {
        let name = self.name.clone();
        tokio::time::timeout(within, self.served.wait_for(|g| *g >= generation))
            .await
            .map_err(|_| format!("replica {name} did not serve generation {generation} within {within:?}"))?
            .map_err(|_| format!("replica {name} exited"))?;
        let history = self.history.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        Ok(history.range(generation..).next().map_or(0, |(_, at)| *at))
    }

    /// The newest generation served.
    pub fn served(&self) -> u64 {
        *self.served.borrow()
    }

    /// The process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// Kills the process at once (SIGKILL), mid-whatever it was doing, and reaps it.
    pub async fn kill(&mut self) {
        let _ = self.child.kill().await;
    }
}

/// `quantile` (0..=1) of `values` (sorted here), nearest rank.
pub fn quantile(values: &mut [u64], quantile: f64) -> u64 {
    if values.is_empty() {
        return 0;
    }
    values.sort_unstable();
    let rank = ((quantile * values.len() as f64).ceil() as usize).clamp(1, values.len());
    values[rank - 1]
}

/// `GET url` over HTTP/1.1 on a plain TCP connection (loopback endpoints such as `/health`): the status code and
/// the body.
pub async fn http_get(url: &str) -> Result<(u16, String), String> {
    use tokio::io::AsyncReadExt;
    let rest = url.strip_prefix("http://").ok_or_else(|| format!("not an http:// URL: {url}"))?;
    let (authority, path) = rest.split_once('/').map_or((rest, "/".to_owned()), |(a, p)| (a, format!("/{p}")));
    let mut stream = tokio::net::TcpStream::connect(authority).await.map_err(|e| format!("{url}: {e}"))?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.map_err(|e| e.to_string())?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.map_err(|e| e.to_string())?;
    let status = response.split(' ').nth(1).and_then(|s| s.parse().ok()).ok_or("no status line")?;
    let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_owned();
    Ok((status, body))
}
