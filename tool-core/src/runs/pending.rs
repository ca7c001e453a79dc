//! Calls that wait for a human: an `approval_required` answer kept as a [`PendingCall`] (serialisable, in a
//! [`PendingStore`] such as the [`FileStore`]), resolved later, by another process if need be, with
//! [`Executor::resume`].
//!
//! A pending call is signed: an HMAC-SHA256 over the whole record, under the executor's [`ApprovalKey`]. A record
//! changed where it was kept, to valid arguments or to anything else, never runs: [`Executor::resume`] checks the
//! MAC before anything else. The MAC does not hide the record: its arguments are readable by whoever can read the
//! store.
//!
//! ```
//! # use std::time::Duration;
//! # use keel_tools_core::{tool, Executor, Registry, ToolCall};
//! # use keel_tools_core::runs::{ApprovalKey, PendingCall, Resolution};
//! # use keel_tools_core::executor::CallOptions;
//! /// Close a ticket.
//! #[tool(effect = "write", version = "1.0")]
//! fn close_ticket(ticket: String) -> String { format!("closed {ticket}") }
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! // Every process that resolves pending calls holds the same key (32 or more secret bytes).
//! let key = ApprovalKey::new(b"thirty-two bytes or more, kept secret").unwrap();
//! let view = Registry::from_inventory().unwrap().view().names(["close_ticket"]).build().unwrap();
//! let executor = Executor::builder(view).approval_key(key).build().unwrap();
//! let asked = executor.call(ToolCall::new("c1", "close_ticket", serde_json::json!({"ticket": "T-1"}))).await;
//! assert_eq!(asked.code(), Some("approval_required"));
//!
//! let pending = PendingCall::from_result(&executor, &asked, Some("alice"), Duration::from_secs(3600)).unwrap();
//! let text = serde_json::to_string(&pending).unwrap();      // kept anywhere, read back after a restart
//! let pending: PendingCall = serde_json::from_str(&text).unwrap();
//!
//! // Changed where it was kept, even to arguments the tool accepts: refused, not run.
//! let mut changed = pending.clone();
//! changed.arguments = serde_json::json!({"ticket": "T-2"});
//! let refused = executor.resume(&changed, &Resolution::Approve, &CallOptions::new()).await;
//! assert_eq!((refused.code(), refused.executed), (Some("approval_stale"), false));
//!
//! let done = executor.resume(&pending, &Resolution::Approve, &CallOptions::new()).await;
//! assert_eq!(done.data(), Some(&serde_json::json!("closed T-1")));
//! # });
//! ```

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::call::ToolCall;
use crate::call_policy::Approval;
use crate::error::ErrorCode;
use crate::executor::flow::Executor;
use crate::executor::{CallOptions, ExecutorBuilder};
use crate::result::{ErrorBody, ToolResult};
use keel_tools_schema::canonical::{Fnv1a128, canonical_json};

mod file;
mod store;

pub use file::FileStore;
use file::os_random;
pub use store::{PendingStore, PendingStoreError};

/// A call that waits for an approval: what was asked, of which contract, by whom, until when, signed.
///
/// Made from the `approval_required` result with [`PendingCall::from_result`], which signs it with the
/// executor's [`ApprovalKey`]; serialises as a flat JSON object (`call_id`, `tool_name`, `tool_version`,
/// `contract`, `arguments`, `requested_by`, `requested_at_ms`, `expires_at_ms`, `reason`, `run_id`, `key_id`,
/// `mac`).
///
/// The MAC covers every other field (the arguments in their canonical form, so their key order does not
/// matter). A change of any of them, through these public fields or in the store, makes the record fail
/// verification, and [`Executor::resume`] then refuses it without running it. The record is not encrypted:
/// whoever can read the store reads the arguments.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct PendingCall {
    /// The call's id, as the model gave it.
    pub call_id: String,
    /// The tool's registered name.
    pub tool_name: String,
    /// The tool's version when the call was made.
    pub tool_version: String,
    /// The fingerprint of the tool's contract then
    /// ([`ToolDefinition::contract_fingerprint`](crate::definition::ToolDefinition::contract_fingerprint)).
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
    /// The id of the key that signed the record ([`ApprovalKey::id`]); empty in a record kept before records
    /// were signed.
    #[serde(default)]
    key_id: String,
    /// The HMAC-SHA256 of the record, 64 hex digits; empty in a record kept before records were signed.
    #[serde(default)]
    mac: String,
    #[serde(skip)]
    signer: Signer,
}

impl fmt::Debug for PendingCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let PendingCall {
            call_id,
            tool_name,
            tool_version,
            contract,
            arguments,
            requested_by,
            requested_at_ms,
            expires_at_ms,
            reason,
            run_id,
            key_id,
            mac,
            signer: _,
        } = self;
        f.debug_struct("PendingCall")
            .field("call_id", call_id)
            .field("tool_name", tool_name)
            .field("tool_version", tool_version)
            .field("contract", contract)
            .field("arguments", arguments)
            .field("requested_by", requested_by)
            .field("requested_at_ms", requested_at_ms)
            .field("expires_at_ms", expires_at_ms)
            .field("reason", reason)
            .field("run_id", run_id)
            .field("key_id", key_id)
            .field("mac", mac)
            .finish()
    }
}

/// The key a record was signed with in this process, so that [`PendingCall::in_run`] can sign it again. Not part
/// of the record: never serialised, printed or compared (any two are equal).
#[derive(Clone, Default)]
struct Signer(Option<ApprovalKey>);

impl PartialEq for Signer {
    fn eq(&self, _: &Signer) -> bool {
        true
    }
}

/// What a human decided about a [`PendingCall`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
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

/// The secret that signs and verifies [`PendingCall`]s (HMAC-SHA256), set with
/// [`ExecutorBuilder::approval_key`].
///
/// Records are signed with the current key; verification accepts the current key and, after a rotation, the
/// previous one ([`ApprovalKey::with_previous`]), so that calls kept before the rotation can still be resolved.
/// Each key has a short [`id`](ApprovalKey::id), recorded in the records it signs.
///
/// An executor built without a key uses one made at random once per process: its records resolve in that
/// process only, and a record from another process is refused. That is the safe default; processes that share a
/// store share a configured key.
///
/// Its `Debug` shows the key ids, never the key.
#[derive(Clone)]
pub struct ApprovalKey {
    current: Arc<Secret>,
    previous: Option<Arc<Secret>>,
}

struct Secret {
    /// HMAC-SHA256 already keyed with the secret.
    mac: Hmac<Sha256>,
    /// The first 8 hex digits of the SHA-256 of the secret.
    id: String,
}

impl ApprovalKey {
    /// The fewest secret bytes a key is made from.
    pub const MIN_LEN: usize = 32;

    /// The key made from `secret`: at least [`MIN_LEN`](ApprovalKey::MIN_LEN) bytes, random and kept secret
    /// (e.g. from a secret store, made there with `openssl rand 32`).
    ///
    /// # Errors
    ///
    /// A shorter `secret`.
    pub fn new(secret: impl AsRef<[u8]>) -> Result<ApprovalKey, ApprovalKeyError> {
        let secret = secret.as_ref();
        if secret.len() < ApprovalKey::MIN_LEN {
            return Err(ApprovalKeyError { len: secret.len() });
        }
        let id = hex(&Sha256::digest(secret)[..4]);
        let mac = <Hmac<Sha256> as KeyInit>::new_from_slice(secret).expect("HMAC takes keys of any length");
        Ok(ApprovalKey { current: Arc::new(Secret { mac, id }), previous: None })
    }

    /// A key of 32 random bytes from the operating system's generator, for records that stay in one process.
    pub fn random() -> ApprovalKey {
        let mut secret = [0u8; 32];
        os_random(&mut secret);
        let key = ApprovalKey::new(secret).expect("32 bytes are enough");
        secret.fill(0);
        key
    }

    /// This key, also accepting records signed with `previous` (its current key; a key `previous` itself
    /// accepted is dropped): rotate by configuring the new key with the old one as previous, until the records
    /// the old one signed are resolved or expired. Records are signed with this key only.
    #[must_use]
    pub fn with_previous(self, previous: ApprovalKey) -> ApprovalKey {
        ApprovalKey { current: self.current, previous: Some(previous.current) }
    }

    /// The key's id: the first 8 hex digits of the SHA-256 of the secret (it tells keys apart, and reveals
    /// nothing usable about a secret of 32 random bytes).
    pub fn id(&self) -> &str {
        &self.current.id
    }

    /// The previous key's id, if one is accepted.
    pub fn previous_id(&self) -> Option<&str> {
        self.previous.as_deref().map(|s| s.id.as_str())
    }

    fn secrets(&self) -> impl Iterator<Item = &Secret> {
        std::iter::once(&*self.current).chain(self.previous.as_deref())
    }

    /// The key of executors built without one: random, made once per process.
    fn process() -> &'static ApprovalKey {
        static KEY: OnceLock<ApprovalKey> = OnceLock::new();
        KEY.get_or_init(ApprovalKey::random)
    }
}

impl fmt::Debug for ApprovalKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApprovalKey").field("id", &self.id()).field("previous", &self.previous_id()).finish()
    }
}

/// Why bytes are not an [`ApprovalKey`]: too few.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalKeyError {
    len: usize,
}

impl ApprovalKeyError {
    /// How many bytes were given.
    pub fn given(&self) -> usize {
        self.len
    }
}

impl fmt::Display for ApprovalKeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "an approval key needs at least {} secret bytes, found {}: use 32 random bytes from your secret store \
             (made with e.g. `openssl rand 32`)",
            ApprovalKey::MIN_LEN,
            self.len
        )
    }
}

impl std::error::Error for ApprovalKeyError {}

/// The executor's key, kept in its state map (handlers cannot name the type, so cannot read it).
struct SigningKey(ApprovalKey);

impl ExecutorBuilder {
    /// The key that signs the executor's [`PendingCall`]s and verifies them in [`Executor::resume`] (default: a
    /// random key per process, so that a record from another process is refused). Processes that share a
    /// [`PendingStore`] are built with the same key; rotate with [`ApprovalKey::with_previous`].
    ///
    /// ```
    /// # use keel_tools_core::{Executor, Registry};
    /// # use keel_tools_core::runs::ApprovalKey;
    /// # let view = Registry::builder().without_inventory().build().unwrap().view().build().unwrap();
    /// let old = ApprovalKey::new([1u8; 32]).unwrap(); // both from the secret store
    /// let new = ApprovalKey::new([2u8; 32]).unwrap();
    /// let executor = Executor::builder(view).approval_key(new.with_previous(old)).build().unwrap();
    /// ```
    pub fn approval_key(self, key: ApprovalKey) -> Self {
        self.state(SigningKey(key))
    }
}

/// The key `executor` signs and verifies with.
fn key_of(executor: &Executor) -> ApprovalKey {
    match executor.state_map().get::<SigningKey>() {
        Some(key) => key.0.clone(),
        None => ApprovalKey::process().clone(),
    }
}

/// Why a record does not verify (for the operator's log; the model is told only that it does not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Unverified {
    /// No MAC: a record kept before records were signed, or one with its MAC removed.
    Missing,
    /// Signed with a key the verifier does not hold (another process's random key, a retired key).
    UnknownKey,
    /// The MAC does not match: the record changed after it was signed.
    Mismatch,
}

impl Unverified {
    fn as_str(self) -> &'static str {
        match self {
            Unverified::Missing => "no MAC",
            Unverified::UnknownKey => "unknown key id",
            Unverified::Mismatch => "MAC mismatch",
        }
    }
}

/// Feeds a record's fields to a MAC, each unambiguously (length-prefixed, options tagged).
struct Fields<'a>(&'a mut Hmac<Sha256>);

impl Fields<'_> {
    fn bytes(&mut self, bytes: &[u8]) {
        self.0.update(&(bytes.len() as u64).to_be_bytes());
        self.0.update(bytes);
    }
    fn opt(&mut self, s: Option<&str>) {
        match s {
            None => self.0.update(&[0]),
            Some(s) => {
                self.0.update(&[1]);
                self.bytes(s.as_bytes());
            }
        }
    }
    fn u64(&mut self, n: u64) {
        self.0.update(&n.to_be_bytes());
    }
}

impl PendingCall {
    /// The pending call for `result`, an `approval_required` answer of `executor`, asked by `requested_by` and
    /// expiring `ttl` from now, signed with the executor's key. `None` when `result` is not such an answer or
    /// names a tool the view does not hold.
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
        let mut pending = PendingCall {
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
            key_id: String::new(),
            mac: String::new(),
            signer: Signer(None),
        };
        pending.sign(&key_of(executor));
        Some(pending)
    }

    /// The same, belonging to run `run_id`, signed again with the key that signed it. Only a record signed in
    /// this process, and unchanged since, is signed again: a record read back from a store, or one whose fields
    /// were changed, keeps its MAC and so no longer verifies.
    #[must_use]
    pub fn in_run(mut self, run_id: impl Into<String>) -> PendingCall {
        let signer = self.signer.0.take().filter(|key| self.verify(key).is_ok());
        self.run_id = Some(run_id.into());
        if let Some(key) = signer {
            self.sign(&key);
        }
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

    /// What tells this record from every other, another ask of the same call (same [`key`](PendingCall::key))
    /// included: `pr-` and 64 hex digits, the SHA-256 of its MAC (of its whole JSON, for a record without one). A
    /// [`PendingStore`] keeps the ids of the records it gave out, so that a record taken once is refused when it
    /// comes back ([`PendingStoreError::Consumed`]).
    pub fn record_id(&self) -> String {
        let mut h = Sha256::new();
        if self.mac.is_empty() {
            h.update(b"keel pending record, unsigned: ");
            h.update(canonical_json(&serde_json::to_value(self).unwrap_or_default()).as_bytes());
        } else {
            h.update(b"keel pending record: ");
            h.update(self.mac.as_bytes());
        }
        format!("pr-{}", hex(&h.finalize()))
    }

    /// Whether it has expired at `now_ms` (milliseconds since the Unix epoch).
    pub fn expired_at(&self, now_ms: u64) -> bool {
        now_ms > self.expires_at_ms
    }

    /// The id of the key that signed it ([`ApprovalKey::id`]); empty if it is not signed.
    pub fn key_id(&self) -> &str {
        &self.key_id
    }

    /// Whether it is signed by `key` (its current or previous key) and unchanged since, as
    /// [`Executor::resume`] checks: for a host that lists pending calls before a human decides on them.
    pub fn verified_by(&self, key: &ApprovalKey) -> bool {
        self.verify(key).is_ok()
    }

    fn sign(&mut self, key: &ApprovalKey) {
        self.key_id = key.id().to_owned();
        let mut mac = key.current.mac.clone();
        self.feed(&mut mac);
        self.mac = hex(&mac.finalize().into_bytes());
        self.signer = Signer(Some(key.clone()));
    }

    fn verify(&self, key: &ApprovalKey) -> Result<(), Unverified> {
        if self.mac.is_empty() {
            return Err(Unverified::Missing);
        }
        let mut known = false;
        for secret in key.secrets().filter(|s| s.id == self.key_id) {
            known = true;
            let Some(tag) = unhex(&self.mac) else { break };
            let mut mac = secret.mac.clone();
            self.feed(&mut mac);
            // Constant-time comparison.
            if mac.verify_slice(&tag).is_ok() {
                return Ok(());
            }
        }
        Err(if known { Unverified::Mismatch } else { Unverified::UnknownKey })
    }

    /// Feeds every field but the MAC to `mac` (a new field fails to compile here until it is covered).
    fn feed(&self, mac: &mut Hmac<Sha256>) {
        let PendingCall {
            call_id,
            tool_name,
            tool_version,
            contract,
            arguments,
            requested_by,
            requested_at_ms,
            expires_at_ms,
            reason,
            run_id,
            key_id,
            mac: _,
            signer: _,
        } = self;
        let mut fields = Fields(mac);
        fields.bytes(b"keel pending call v1");
        fields.bytes(key_id.as_bytes());
        fields.bytes(call_id.as_bytes());
        fields.bytes(tool_name.as_bytes());
        fields.bytes(tool_version.as_bytes());
        fields.bytes(contract.as_bytes());
        fields.bytes(canonical_json(arguments).as_bytes());
        fields.opt(requested_by.as_deref());
        fields.u64(*requested_at_ms);
        fields.u64(*expires_at_ms);
        fields.bytes(reason.as_bytes());
        fields.opt(run_id.as_deref());
    }
}

fn hex(bytes: &[u8]) -> String {
    use fmt::Write as _;
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// The bytes of lowercase hex digits, as [`hex`] writes them (nothing else is read, not even a sign).
fn unhex(text: &str) -> Option<Vec<u8>> {
    let digit = |b: u8| match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        _ => None,
    };
    let text = text.as_bytes();
    if !text.len().is_multiple_of(2) {
        return None;
    }
    text.chunks(2).map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?)).collect()
}

impl Executor {
    /// Resolves a pending call: runs it with an approval for exactly its arguments, or answers the denial.
    ///
    /// | the pending call | the answer |
    /// |---|---|
    /// | not verified by the executor's [`ApprovalKey`] (changed since it was signed, unsigned, or signed with another key) | `approval_stale` (details: `"verified": false`), `executed: false`, whatever the resolution |
    /// | denied | `approval_denied` with the reason, `executed: false` |
    /// | approved, past `expires_at_ms` | `approval_expired`, `executed: false` |
    /// | approved, its tool no longer in the view | `unknown_tool`, `executed: false` |
    /// | approved, its tool's version or contract changed since | `approval_stale` (details: both versions), `executed: false` |
    /// | approved, otherwise | the call, run as any other (arguments validated, the policy asked with the approval) |
    ///
    /// An unverified record is refused as a stale one is: a human must approve the call again. Why it failed
    /// (no MAC, an unknown key id, a MAC that does not match) goes to a `tracing` warning with the call id, not
    /// to the model.
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
        if let Err(problem) = pending.verify(&key_of(self)) {
            tracing::warn!(
                call_id = ?pending.call_id,
                tool_name = ?pending.tool_name,
                key_id = ?pending.key_id,
                problem = problem.as_str(),
                "pending call refused: it does not verify"
            );
            let body = ErrorBody::new(
                ErrorCode::ApprovalStale,
                "the pending call does not verify: it was changed after it was made, or made under another key; \
                 ask for the call again",
            )
            .with_details(json!({"verified": false}));
            return refuse(self.view().get(&pending.tool_name).map(|d| d.version().to_owned()), body);
        }
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

#[cfg(test)]
mod tests {
    use std::io;
    use std::path::{Path, PathBuf};

    use super::file::{create_private, random_suffix, valid_key};
    use super::*;

    fn record() -> PendingCall {
        PendingCall {
            call_id: "c1".into(),
            tool_name: "t".into(),
            tool_version: "1.0".into(),
            contract: "c".into(),
            arguments: json!({"a": 1, "b": [true, null]}),
            requested_by: Some("alice".into()),
            requested_at_ms: 1,
            expires_at_ms: 2,
            reason: "why".into(),
            run_id: None,
            key_id: String::new(),
            mac: String::new(),
            signer: Signer(None),
        }
    }

    fn key(byte: u8) -> ApprovalKey {
        ApprovalKey::new([byte; 32]).unwrap()
    }

    fn signed(key: &ApprovalKey) -> PendingCall {
        let mut pending = record();
        pending.sign(key);
        pending
    }

    #[test]
    fn keys_are_file_names_whatever_the_call_id() {
        let pending = PendingCall { call_id: "../../etc/passwd\0".into(), ..record() };
        let key = pending.key();
        assert!(valid_key(&key), "{key}");
        assert_ne!(key, pending.clone().in_run("run-1").key(), "the run is part of the key");
        assert!(!valid_key("pc-../x") && !valid_key("../pc-0"));
    }

    #[test]
    fn a_key_has_32_bytes_or_more_and_never_prints_them() {
        let err = ApprovalKey::new([7u8; 31]).unwrap_err();
        assert_eq!(err.given(), 31);
        assert!(err.to_string().starts_with("an approval key needs at least 32 secret bytes, found 31"), "{err}");
        let k = ApprovalKey::new(b"0123456789abcdef0123456789abcdef").unwrap();
        assert_eq!(k.id(), ApprovalKey::new(b"0123456789abcdef0123456789abcdef").unwrap().id(), "ids are stable");
        assert!(k.id().len() == 8 && k.id().bytes().all(|b| b.is_ascii_hexdigit()), "{}", k.id());
        let shown = format!("{:?}", k.clone().with_previous(key(1)));
        assert_eq!(shown, format!("ApprovalKey {{ id: {:?}, previous: Some({:?}) }}", k.id(), key(1).id()));
        assert!(!shown.contains("0123456789"), "{shown}");
        assert_ne!(ApprovalKey::random().id(), ApprovalKey::random().id());
    }

    #[test]
    fn a_signed_record_verifies_whatever_its_key_order_and_round_trip() {
        let k = key(1);
        let pending = signed(&k);
        assert_eq!(pending.key_id(), k.id());
        assert_eq!(pending.mac.len(), 64);
        assert!(pending.verified_by(&k));
        let mut reordered = pending.clone();
        reordered.arguments = serde_json::from_str(r#"{"b": [true, null], "a": 1}"#).unwrap();
        assert!(reordered.verified_by(&k), "the arguments are signed in canonical form");
        let back: PendingCall = serde_json::from_str(&serde_json::to_string(&pending).unwrap()).unwrap();
        assert_eq!(back, pending);
        assert!(back.verified_by(&k));
    }

    #[test]
    fn a_change_of_any_field_fails_verification() {
        let k = key(1);
        let pending = signed(&k);
        type Change = fn(&mut PendingCall);
        let changes: &[(&str, Change)] = &[
            ("call_id", |p| p.call_id.push('x')),
            ("tool_name", |p| p.tool_name.push('x')),
            ("tool_version", |p| p.tool_version = "1.1".into()),
            ("contract", |p| p.contract.push('x')),
            ("arguments", |p| p.arguments["a"] = json!(2)),
            ("arguments, a key added", |p| p.arguments["c"] = json!(null)),
            ("requested_by", |p| p.requested_by = Some("mallory".into())),
            ("requested_by, removed", |p| p.requested_by = None),
            ("requested_at_ms", |p| p.requested_at_ms += 1),
            ("expires_at_ms", |p| p.expires_at_ms = u64::MAX),
            ("reason", |p| p.reason.clear()),
            ("run_id", |p| p.run_id = Some("r".into())),
            ("key_id", |p| p.key_id = key(2).id().to_owned()),
            ("mac", |p| p.mac.replace_range(..2, if p.mac.starts_with("00") { "01" } else { "00" })),
            ("mac, uppercase", |p| p.mac = p.mac.to_uppercase()),
            ("mac, removed", |p| p.mac.clear()),
            // The field boundaries are part of the MAC: moving a byte from one field to the next is a change.
            ("call_id into tool_name", |p| {
                p.call_id = "c".into();
                p.tool_name = "1t".into();
            }),
        ];
        for (what, change) in changes {
            let mut changed = pending.clone();
            change(&mut changed);
            assert_ne!(changed, pending, "{what} changes the record");
            assert!(!changed.verified_by(&k), "{what}: a changed record must not verify");
        }
        let mut missing = pending.clone();
        missing.mac.clear();
        assert_eq!(missing.verify(&k), Err(Unverified::Missing));
        let mut unknown = pending.clone();
        unknown.key_id = "00000000".into();
        assert_eq!(unknown.verify(&k), Err(Unverified::UnknownKey));
        let mut wrong = pending.clone();
        wrong.reason.push('!');
        assert_eq!(wrong.verify(&k), Err(Unverified::Mismatch));
    }

    #[test]
    fn a_record_without_a_mac_reads_but_does_not_verify() {
        let mut text = serde_json::to_value(signed(&key(1))).unwrap();
        let object = text.as_object_mut().unwrap();
        object.remove("mac");
        object.remove("key_id");
        let old: PendingCall = serde_json::from_value(text).unwrap();
        assert_eq!(old.verify(&key(1)), Err(Unverified::Missing));
    }

    #[test]
    fn the_previous_key_verifies_and_the_current_one_signs() {
        let (old, new) = (key(1), key(2));
        let rotated = new.clone().with_previous(old.clone());
        assert_eq!(rotated.previous_id(), Some(old.id()));
        assert!(signed(&old).verified_by(&rotated), "a record of the previous key");
        assert!(signed(&new).verified_by(&rotated));
        assert_eq!(signed(&rotated).key_id(), new.id(), "signed with the current key");
        assert!(!signed(&rotated).verified_by(&old));
        assert!(!signed(&key(3)).verified_by(&rotated), "an unknown key");
        // Only one previous key: the one before it is dropped.
        let again = key(3).with_previous(rotated);
        assert!(signed(&new).verified_by(&again) && !signed(&old).verified_by(&again));
    }

    #[test]
    fn in_run_signs_again_only_an_unchanged_record_of_this_process() {
        let k = key(1);
        let moved = signed(&k).in_run("run-1");
        assert_eq!(moved.run_id.as_deref(), Some("run-1"));
        assert!(moved.verified_by(&k), "signed again");
        let mut changed = signed(&k);
        changed.arguments = json!({"a": 2});
        assert!(!changed.in_run("run-1").verified_by(&k), "a change is not signed over");
        let read: PendingCall = serde_json::from_str(&serde_json::to_string(&signed(&k)).unwrap()).unwrap();
        assert!(!read.in_run("run-1").verified_by(&k), "a record read back holds no key to sign with");
    }

    #[test]
    fn hex_reads_only_what_it_writes() {
        let bytes = [0u8, 1, 0xab, 0xff];
        assert_eq!(unhex(&hex(&bytes)).as_deref(), Some(&bytes[..]));
        for bad in ["+f", "AB", "0", "0g", "é0"] {
            assert_eq!(unhex(bad), None, "{bad}");
        }
    }

    #[test]
    fn temporary_names_are_unpredictable_and_distinct() {
        let (a, b) = (random_suffix(), random_suffix());
        assert_ne!(a, b);
        assert!(a.len() == 32 && a.bytes().all(|c| c.is_ascii_hexdigit()), "{a}");
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("keel-pending-{name}-{}-{}", std::process::id(), random_suffix()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn create_private_never_opens_what_is_already_there() {
        let dir = scratch("exclusive");
        let existing = dir.join("existing");
        std::fs::write(&existing, "kept").unwrap();
        assert_eq!(create_private(&existing).unwrap_err().kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read_to_string(&existing).unwrap(), "kept");
        #[cfg(unix)]
        {
            let target = dir.join("target");
            let link = dir.join("link");
            std::os::unix::fs::symlink(&target, &link).unwrap();
            assert_eq!(create_private(&link).unwrap_err().kind(), io::ErrorKind::AlreadyExists);
            assert!(!target.exists(), "the link was not followed");
            std::fs::write(&target, "theirs").unwrap();
            assert_eq!(create_private(&link).unwrap_err().kind(), io::ErrorKind::AlreadyExists);
            assert_eq!(std::fs::read_to_string(&target).unwrap(), "theirs");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[cfg(unix)]
    #[test]
    fn the_store_is_private_to_its_owner() {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let dir = scratch("modes");
        let store = FileStore::open(dir.join("store")).unwrap();
        assert_eq!(mode(store.dir()), 0o700);
        let pending = signed(&key(1));
        store.save(&pending).unwrap();
        assert_eq!(mode(&store.dir().join(format!("{}.json", pending.key()))), 0o600);
        let names: Vec<_> = std::fs::read_dir(store.dir()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert_eq!(names.len(), 1, "no temporary file is left: {names:?}");

        std::fs::set_permissions(store.dir(), std::fs::Permissions::from_mode(0o750)).unwrap();
        let err = FileStore::open(store.dir()).unwrap_err();
        assert!(matches!(err, PendingStoreError::Permissions { mode: 0o750, .. }), "{err}");
        assert!(err.to_string().contains("(mode 750)") && err.to_string().contains("chmod 700"), "{err}");
        assert_eq!(mode(store.dir()), 0o750, "neither used nor changed");
        std::fs::set_permissions(store.dir(), std::fs::Permissions::from_mode(0o700)).unwrap();
        assert_eq!(FileStore::open(store.dir()).unwrap().take(&pending.key()).unwrap(), Some(pending));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
