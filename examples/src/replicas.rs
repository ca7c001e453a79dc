//! Replicas of one catalogue, each an MCP server process of its own (`examples/examples/catalogue_replicas.rs`),
//! driven from another process: the demo, and the tests of `tests/tests/catalog_replicas.rs`.
//!
//! A replica is started as `catalogue_replicas replica <name> <conninfo>`. It connects to the PostgreSQL catalogue,
//! serves the shared view over Streamable HTTP on a loopback port (MCP at `/mcp`, its health at `/health`),
//! follows the catalogue's changes, and speaks one JSON object per line:
//!
//! - out: `{"event": "listening", "url": …, "health": …}` once; `{"event": "served", "generation": N, "at_us": T}`
//!   each time it swaps in a view (T: Unix time in microseconds); `{"event": "committed", "op": …, "name": …,
//!   "generation": N, "at_us": T}` after each write it was asked for; `{"event": "error", "message": …}`.
//! - in: `{"op": "put", "name": …, "description": …, "tool": …}` (a row serving the compiled tool `tool`, by
//!   default `get_service_status`, under that name; the description defaults to the tool's),
//!   `{"op": "set_enabled", "name": …, "enabled": bool}`, `{"op": "remove", "name": …}`.
//!
//! Every replica seals the `requestState` of input-required results with the same key ([`request_state_keys`]),
//! so that a client's next round may reach any of them.

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
    served: watch::Receiver<u64>,
    history: Arc<Mutex<BTreeMap<u64, u64>>>,
}

impl Replica {
    /// Starts `exe replica <name> <conninfo>` and waits (up to 60 s) until it listens.
    pub async fn spawn(exe: &Path, name: &str, conninfo: &str) -> Result<Replica, String> {
        let mut child = Command::new(exe)
            .args(["replica", name, conninfo])
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
                    _ => {}
                }
            }
        });
        let (url, health) = tokio::time::timeout(Duration::from_secs(60), listening_rx)
            .await
            .map_err(|_| format!("replica {name} did not listen within 60 s"))?
            .map_err(|_| format!("replica {name} exited before listening"))?;
        Ok(Replica { name: name.to_owned(), url, health, child, stdin, committed, served, history })
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
