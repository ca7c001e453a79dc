//! Calls that wait for a human: an `approval_required` answer kept as a [`PendingCall`] (serialisable, in a
//! [`PendingStore`] such as the [`FileStore`]), resolved later, by another process if need be, with
//! [`Executor::resume`].
//!
//! ```
//! # use std::time::Duration;
//! # use tool_core::{tool, Executor, Registry, ToolCall, CallOptions, PendingCall, Resolution};
//! /// Close a ticket.
//! #[tool(effect = "write", version = "1.0")]
//! fn close_ticket(ticket: String) -> String { format!("closed {ticket}") }
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let executor = Executor::new(Registry::from_inventory().unwrap().view().names(["close_ticket"]).build().unwrap()).unwrap();
//! let asked = executor.call(ToolCall::new("c1", "close_ticket", serde_json::json!({"ticket": "T-1"}))).await;
//! assert_eq!(asked.code(), Some("approval_required"));
//!
//! let pending = PendingCall::from_result(&executor, &asked, Some("alice"), Duration::from_secs(3600)).unwrap();
//! let text = serde_json::to_string(&pending).unwrap();      // kept anywhere, read back after a restart
//! let pending: PendingCall = serde_json::from_str(&text).unwrap();
//!
//! let done = executor.resume(&pending, &Resolution::Approve, &CallOptions::new()).await;
//! assert_eq!(done.data(), Some(&serde_json::json!("closed T-1")));
//! # });
//! ```

use std::fmt;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::call::ToolCall;
use crate::canonical::Fnv1a128;
use crate::error::ErrorCode;
use crate::executor::{CallOptions, Executor};
use crate::policy::Approval;
use crate::result::{ErrorBody, ToolResult};

/// A call that waits for an approval: what was asked, of which contract, by whom, until when.
///
/// Made from the `approval_required` result with [`PendingCall::from_result`]; serialises as a flat JSON object
/// (`call_id`, `tool_name`, `tool_version`, `contract`, `arguments`, `requested_by`, `requested_at_ms`,
/// `expires_at_ms`, `reason`, `run_id`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PendingCall {
    /// The call's id, as the model gave it.
    pub call_id: String,
    /// The tool's registered name.
    pub tool_name: String,
    /// The tool's version when the call was made.
    pub tool_version: String,
    /// The fingerprint of the tool's contract then ([`ToolDefinition::contract_fingerprint`](crate::ToolDefinition::contract_fingerprint)).
    pub contract: String,
    /// The validated arguments, exactly those an approval is for.
    pub arguments: Value,
    /// Who asked (the call's tenant, or whoever the host names).
    pub requested_by: Option<String>,
    /// When, in milliseconds since the Unix epoch.
    pub requested_at_ms: u64,
    /// Past this instant (milliseconds since the Unix epoch) an approval is refused as `approval_expired`.
    pub expires_at_ms: u64,
    /// Why the policy asked for an approval.
    pub reason: String,
    /// The run the call belongs to, if the host set it ([`PendingCall::in_run`]).
    pub run_id: Option<String>,
}

/// What a human decided about a [`PendingCall`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// Run the call, with an approval for exactly its arguments.
    Approve,
    /// Do not run it; the model reads `reason` in the `approval_denied` reply.
    Deny {
        /// Why not.
        reason: String,
    },
}

impl Resolution {
    /// A denial with its reason.
    pub fn deny(reason: impl Into<String>) -> Resolution {
        Resolution::Deny { reason: reason.into() }
    }
}

fn now_ms() -> u64 {
    crate::clock::precise_unix_ms()
}

impl PendingCall {
    /// The pending call for `result`, an `approval_required` answer of `executor`, asked by `requested_by` and
    /// expiring `ttl` from now. `None` when `result` is not such an answer or names a tool the view does not hold.
    pub fn from_result(
        executor: &Executor,
        result: &ToolResult,
        requested_by: Option<&str>,
        ttl: Duration,
    ) -> Option<PendingCall> {
        let error = result.error().filter(|e| e.code == ErrorCode::ApprovalRequired)?;
        let arguments = error.details.as_ref()?.pointer("/approve/arguments")?.clone();
        let def = executor.view().get(&result.tool_name)?;
        let requested_at_ms = now_ms();
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        Some(PendingCall {
            call_id: result.call_id.clone(),
            tool_name: def.name().to_owned(),
            tool_version: def.version().to_owned(),
            contract: def.contract_fingerprint(),
            arguments,
            requested_by: requested_by.map(str::to_owned),
            requested_at_ms,
            expires_at_ms: requested_at_ms.saturating_add(ttl_ms),
            reason: error.message.clone(),
            run_id: None,
        })
    }

    /// The same, belonging to run `run_id`.
    #[must_use]
    pub fn in_run(mut self, run_id: impl Into<String>) -> PendingCall {
        self.run_id = Some(run_id.into());
        self
    }

    /// A key for stores, from the run id and the call id: `pc-` and 32 hex digits (safe as a file name whatever
    /// the model wrote as the id).
    pub fn key(&self) -> String {
        let mut h = Fnv1a128::new();
        h.update(self.run_id.as_deref().unwrap_or("").as_bytes());
        h.update(&[0]);
        h.update(self.call_id.as_bytes());
        format!("pc-{:032x}", h.finish())
    }

    /// Whether it has expired at `now_ms` (milliseconds since the Unix epoch).
    pub fn expired_at(&self, now_ms: u64) -> bool {
        now_ms > self.expires_at_ms
    }
}

impl Executor {
    /// Resolves a pending call: runs it with an approval for exactly its arguments, or answers the denial.
    ///
    /// | the pending call | the answer |
    /// |---|---|
    /// | denied | `approval_denied` with the reason, `executed: false` |
    /// | approved, past `expires_at_ms` | `approval_expired`, `executed: false` |
    /// | approved, its tool no longer in the view | `unknown_tool`, `executed: false` |
    /// | approved, its tool's version or contract changed since | `approval_stale` (details: both versions), `executed: false` |
    /// | approved, otherwise | the call, run as any other (arguments validated, the policy asked with the approval) |
    ///
    /// `options` are the call's (tenant, cancellation); the approval is added to them.
    pub async fn resume(&self, pending: &PendingCall, resolution: &Resolution, options: &CallOptions) -> ToolResult {
        let refuse = |version: Option<String>, body: ErrorBody| {
            ToolResult::failure(
                pending.call_id.clone(),
                pending.tool_name.clone(),
                version.map(Into::into),
                false,
                body,
            )
        };
        let approved_version = Some(pending.tool_version.clone());
        if let Resolution::Deny { reason } = resolution {
            let body = ErrorBody::new(ErrorCode::ApprovalDenied, reason.clone());
            return refuse(approved_version, body);
        }
        if pending.expired_at(now_ms()) {
            let body = ErrorBody::new(ErrorCode::ApprovalExpired, "the approval came after the call expired")
                .with_details(json!({"expires_at_ms": pending.expires_at_ms}));
            return refuse(approved_version, body);
        }
        let Some(def) = self.view().get(&pending.tool_name) else {
            let body = ErrorBody::new(ErrorCode::UnknownTool, format!("no tool named {:?}", pending.tool_name))
                .with_details(json!({"name": pending.tool_name}));
            return refuse(None, body);
        };
        if def.version() != pending.tool_version || def.contract_fingerprint() != pending.contract {
            let body = ErrorBody::new(
                ErrorCode::ApprovalStale,
                "the tool changed after the call was made; ask again for the tool as it is now",
            )
            .with_details(json!({"approved_version": pending.tool_version, "current_version": def.version()}));
            return refuse(Some(def.version().to_owned()), body);
        }
        let call = ToolCall::new(pending.call_id.clone(), pending.tool_name.clone(), pending.arguments.clone());
        let options = options.clone().approve(Approval::new(pending.tool_name.clone(), &pending.arguments));
        self.call_with(call, &options).await
    }
}

/// Why a [`PendingStore`] failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum PendingStoreError {
    /// Reading or writing the store failed.
    Io {
        /// What was being done, and where.
        context: String,
        /// The error.
        source: io::Error,
    },
    /// An entry of the store is not a pending call (it is named; the store itself is unchanged).
    Corrupt {
        /// Which entry.
        entry: String,
        /// What is wrong with it.
        message: String,
    },
}

impl fmt::Display for PendingStoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PendingStoreError::Io { context, source } => write!(f, "{context}: {source}"),
            PendingStoreError::Corrupt { entry, message } => write!(f, "{entry} is not a pending call: {message}"),
        }
    }
}

impl std::error::Error for PendingStoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PendingStoreError::Io { source, .. } => Some(source),
            PendingStoreError::Corrupt { .. } => None,
        }
    }
}

/// Where pending calls wait. Implementations must let two processes share one store: of two that
/// [`take`](PendingStore::take) one call, exactly one gets it.
pub trait PendingStore: Send + Sync {
    /// Keeps `pending` under its [`key`](PendingCall::key), replacing what was kept there.
    fn save(&self, pending: &PendingCall) -> Result<(), PendingStoreError>;
    /// Every pending call, in key order.
    fn list(&self) -> Result<Vec<PendingCall>, PendingStoreError>;
    /// Removes the call kept under `key` and returns it; `None` if there is none (or another taker got it).
    fn take(&self, key: &str) -> Result<Option<PendingCall>, PendingStoreError>;
}

/// A [`PendingStore`] in a directory: one JSON file per call (`<key>.json`), written to a temporary file and
/// renamed into place, and taken by renaming it away first, so that a reader never sees half a file and two
/// processes never both take one call.
#[derive(Debug, Clone)]
pub struct FileStore {
    dir: PathBuf,
}

static TEMP: AtomicU64 = AtomicU64::new(0);

impl FileStore {
    /// The store in `dir`, created if missing.
    pub fn open(dir: impl AsRef<Path>) -> Result<FileStore, PendingStoreError> {
        let dir = dir.as_ref().to_path_buf();
        std::fs::create_dir_all(&dir).map_err(|e| io_error(format!("creating {}", dir.display()), e))?;
        Ok(FileStore { dir })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn unique(&self, what: &str, key: &str) -> PathBuf {
        let n = TEMP.fetch_add(1, Ordering::Relaxed);
        self.dir.join(format!(".{what}-{key}-{}-{n}", std::process::id()))
    }
}

fn io_error(context: String, source: io::Error) -> PendingStoreError {
    PendingStoreError::Io { context, source }
}

fn read_entry(path: &Path, entry: &str) -> Result<PendingCall, PendingStoreError> {
    let text = std::fs::read(path).map_err(|e| io_error(format!("reading {}", path.display()), e))?;
    serde_json::from_slice(&text)
        .map_err(|e| PendingStoreError::Corrupt { entry: entry.to_owned(), message: e.to_string() })
}

/// Whether `key` is one [`PendingCall::key`] makes (so that no key names a path outside the store).
fn valid_key(key: &str) -> bool {
    key.strip_prefix("pc-").is_some_and(|hex| hex.len() == 32 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

impl PendingStore for FileStore {
    fn save(&self, pending: &PendingCall) -> Result<(), PendingStoreError> {
        let key = pending.key();
        let text = serde_json::to_vec_pretty(pending).expect("a pending call serialises");
        let temp = self.unique("new", &key);
        let write = || -> io::Result<()> {
            let mut file = std::fs::File::create(&temp)?;
            file.write_all(&text)?;
            file.sync_all()?;
            std::fs::rename(&temp, self.dir.join(format!("{key}.json")))
        };
        write().map_err(|e| {
            let _ = std::fs::remove_file(&temp);
            io_error(format!("saving {key} in {}", self.dir.display()), e)
        })
    }

    fn list(&self) -> Result<Vec<PendingCall>, PendingStoreError> {
        let entries =
            std::fs::read_dir(&self.dir).map_err(|e| io_error(format!("listing {}", self.dir.display()), e))?;
        let mut keys: Vec<String> = entries
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().to_str().and_then(|n| n.strip_suffix(".json")).map(str::to_owned))
            .filter(|k| valid_key(k))
            .collect();
        keys.sort();
        let mut calls = Vec::with_capacity(keys.len());
        for key in keys {
            match read_entry(&self.dir.join(format!("{key}.json")), &key) {
                Ok(call) => calls.push(call),
                // Taken by another process between the listing and the read.
                Err(PendingStoreError::Io { source, .. }) if source.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(calls)
    }

    fn take(&self, key: &str) -> Result<Option<PendingCall>, PendingStoreError> {
        if !valid_key(key) {
            return Ok(None);
        }
        let claimed = self.unique("taken", key);
        match std::fs::rename(self.dir.join(format!("{key}.json")), &claimed) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io_error(format!("taking {key} from {}", self.dir.display()), e)),
        }
        let read = read_entry(&claimed, key);
        match &read {
            Ok(_) => {
                let _ = std::fs::remove_file(&claimed);
            }
            // A corrupt entry goes back where it was, for an operator to see.
            Err(_) => {
                let _ = std::fs::rename(&claimed, self.dir.join(format!("{key}.json")));
            }
        }
        read.map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_file_names_whatever_the_call_id() {
        let pending = PendingCall {
            call_id: "../../etc/passwd\0".into(),
            tool_name: "t".into(),
            tool_version: "1.0".into(),
            contract: "c".into(),
            arguments: json!({}),
            requested_by: None,
            requested_at_ms: 0,
            expires_at_ms: 0,
            reason: String::new(),
            run_id: None,
        };
        let key = pending.key();
        assert!(valid_key(&key), "{key}");
        assert_ne!(key, pending.clone().in_run("run-1").key(), "the run is part of the key");
        assert!(!valid_key("pc-../x") && !valid_key("../pc-0"));
    }
}
