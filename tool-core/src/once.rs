//! Exactly-once effects: a write tool's call that is retried (by the model, by a client whose connection broke, on
//! another replica) runs its handler once, and every retry is answered with the first run's result.
//!
//! Opt in on the executor, for every tool that is not a read ([`OnceFor::Writes`]) or for tools named one by one
//! ([`OnceFor::Tools`]), with an [`EffectLedger`]: where the executor records what each call did, shared by every
//! process that may run the same calls (keel-tools-state's `SqliteEffectStore` and `PostgresEffectStore`).
//!
//! ```
//! # use std::sync::Arc;
//! # use keel_tools_core::once::{EffectLedger, OnceFor};
//! # use keel_tools_core::{Executor, Registry, ToolView};
//! # fn build(view: ToolView, ledger: Arc<dyn EffectLedger>) -> Result<Executor, Box<dyn std::error::Error>> {
//! let executor = Executor::builder(view).exactly_once(ledger, OnceFor::Writes).build()?;
//! # Ok(executor) }
//! ```
//!
//! A call of such a tool takes one more step in the fixed order, after the policy and before the handler: the
//! ledger is asked about the call's idempotency key
//! ([`CallContext::idempotency_key`](crate::CallContext::idempotency_key), or the key the caller gave with
//! [`CallOptions::idempotency_key`](crate::executor::CallOptions::idempotency_key)) and its fingerprint (the tool's
//! name and its canonical arguments):
//!
//! | the key's record | the call |
//! |---|---|
//! | none | runs, under a lease on the key; its outcome is recorded |
//! | finished | answered with the recorded result, `executed: false`, `replayed: true`; the handler does not run |
//! | running under another caller's lease | waits (at most [`ExecutorBuilder::exactly_once_wait`](crate::executor::ExecutorBuilder::exactly_once_wait)) for it to finish, then is answered as above, or `in_progress` |
//! | recorded with other arguments | `idempotency_conflict`, not run: the key was reused for another call |
//! | the ledger cannot be read | `state_unavailable`, not run |
//!
//! What is recorded, and so replayed, is the outcome of a handler that ended: its data, its business error
//! (a [`ToolError`](crate::ToolError) with the tool's own code, `retry` included) or `invalid_tool_output`. A
//! handler that did not start (an extractor refused the call) or failed with an internal error gives the key up:
//! a retry runs again, so a handler whose effect may have happened when it fails should say so with a business
//! error.
//!
//! A call that timed out or was cancelled while its handler ran is answered `timeout` or `cancelled` at once, and
//! keeps its claim: the handler is not dropped but runs on to its end, the executor renews its lease meanwhile
//! ([`EffectLedger::renew`], every third of the lease: a heartbeat), and what the handler finally returns is
//! recorded as any outcome is (a handler that ended past its deadline, too late for its call, likewise). Until
//! then retries are answered `in_progress`, after it with the recorded result: the handler never runs beside
//! itself, however long it outlives its call. An `in_progress` answer's `retry_after_ms` is half of what is left
//! of the lease that holds the key, a time within it (the lease is renewed before it ends). A process that dies
//! stops its heartbeat: its lease then ends within one lease time (the tool's timeout and grace, plus
//! [`LEASE_MARGIN`]).
//!
//! The guarantee, and its limit: of any number of calls with one key, on any number of replicas sharing the
//! ledger, one handler runs at a time, and once one has finished, none runs again. A process that dies after its
//! handler's effect and before the record is written leaves a lease that expires, and then the call runs again.
//! A handler that writes to the ledger's own database closes that gap: it records its result in the transaction
//! that does its effect, under the lease it runs with ([`CallContext::effect_lease`](crate::CallContext::effect_lease);
//! keel-tools-state's `finish_in`), so that both are committed or neither is, and the executor's own record of the
//! call then finds it done. Any other handler closes the gap with its own idempotency: the call's key
//! ([`CallContext::idempotency_key`](crate::CallContext::idempotency_key)) passed on to the API it calls.

use std::borrow::Cow;
use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::error::ErrorCode;
use crate::result::{ErrorBody, Outcome, ToolResult};

/// The target of this module's events: the executor's, whose step this is.
const TARGET: &str = "keel_tools_core::executor";

/// How much longer than a tool's timeout and grace a lease lasts.
pub const LEASE_MARGIN: Duration = Duration::from_secs(5);

/// How long a call waits by default for a duplicate that is running to finish, before it answers `in_progress`.
pub const DEFAULT_WAIT: Duration = Duration::from_secs(2);

/// The future an [`EffectLedger`] method returns.
pub type LedgerFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, LedgerError>> + Send + 'a>>;

/// What [`EffectLedger::begin`] decided.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Begin {
    /// The caller holds the key: run the call, then [`finish`](EffectLedger::finish) or
    /// [`abandon`](EffectLedger::abandon) with this lease.
    Run(Lease),
    /// The call ran and finished: this is its result, as [`finish`](EffectLedger::finish) recorded it. Do not run
    /// it again.
    Replay(Value),
    /// Another runner holds the key, its lease not yet expired.
    InProgress {
        /// When its lease expires, in milliseconds since the Unix epoch (the ledger's clock): the earliest a
        /// `begin` can take the key over, unless the runner finishes first.
        lease_expires_at_ms: u64,
    },
}

#[doc(inline)]
pub use crate::lease::Lease;

/// Why a ledger could not answer.
#[derive(Debug)]
#[non_exhaustive]
pub enum LedgerError {
    /// The key is recorded for a call with another fingerprint.
    Conflict {
        /// The key.
        key: String,
    },
    /// The lease is no longer the key's: it expired and another runner took the key over.
    LeaseLost {
        /// The key.
        key: String,
    },
    /// The ledger failed (its database unreachable, a row it cannot read).
    Store {
        /// The ledger's stable code for it (keel-tools-state's `StateError::code`).
        code: Cow<'static, str>,
        /// What happened, for the operator.
        message: String,
        /// The underlying error.
        source: Option<Box<dyn StdError + Send + Sync>>,
    },
}

impl fmt::Display for LedgerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LedgerError::Conflict { key } => write!(f, "the key {key:?} is recorded for a call with other arguments"),
            LedgerError::LeaseLost { key } => write!(f, "the lease on {key:?} expired and was taken over"),
            LedgerError::Store { code, message, .. } => write!(f, "{code}: {message}"),
        }
    }
}

impl StdError for LedgerError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            LedgerError::Store { source: Some(source), .. } => Some(&**source),
            _ => None,
        }
    }
}

/// Where an executor records the outcome of each call that must run once, shared by every process that may run
/// the same calls. Of any number of concurrent [`begin`](EffectLedger::begin)s of one key, by any number of
/// processes, exactly one gets [`Begin::Run`].
///
/// Implemented by keel-tools-state's `SqliteEffectStore` (one machine) and `PostgresEffectStore` (replicas).
pub trait EffectLedger: Send + Sync {
    /// Claims `key` for a call with `fingerprint`, for `lease`: [`Begin::Run`] when there is no record (or the
    /// record's lease expired), [`Begin::Replay`] when the call finished, [`Begin::InProgress`] while another
    /// runner's lease holds.
    ///
    /// # Errors
    ///
    /// [`LedgerError::Conflict`] when the key is recorded with another fingerprint; [`LedgerError::Store`].
    fn begin<'a>(&'a self, key: &'a str, fingerprint: &'a str, lease: Duration) -> LedgerFuture<'a, Begin>;

    /// Records `result` as the outcome of the call `lease` was for: later `begin`s of the key replay it.
    ///
    /// # Errors
    ///
    /// [`LedgerError::LeaseLost`] when the lease is no longer the key's (nothing is recorded);
    /// [`LedgerError::Store`].
    fn finish<'a>(&'a self, lease: &'a Lease, result: &'a Value) -> LedgerFuture<'a, ()>;

    /// Gives the key up without a result: the next `begin` runs the call.
    ///
    /// # Errors
    ///
    /// [`LedgerError::LeaseLost`]; [`LedgerError::Store`].
    fn abandon<'a>(&'a self, lease: &'a Lease) -> LedgerFuture<'a, ()>;

    /// Extends `lease` to `lease_for` from now (the ledger's clock); the lease with its new expiry. The executor
    /// renews the lease of a call whose handler outlived it (timed out or cancelled, and still running) until the
    /// handler ends, so that no `begin` takes the key over meanwhile.
    ///
    /// The default renews nothing: it answers [`LedgerError::Store`] with the code [`RENEW_UNSUPPORTED`], and the
    /// lease ends when it was set to (a handler that outlives it may then run again beside itself).
    /// keel-tools-state's stores renew.
    ///
    /// # Errors
    ///
    /// [`LedgerError::LeaseLost`] when the lease is no longer the key's; [`LedgerError::Store`].
    fn renew<'a>(&'a self, lease: &'a Lease, lease_for: Duration) -> LedgerFuture<'a, Lease> {
        let _ = lease_for;
        let message = format!("this ledger cannot renew the lease on {:?}", lease.key());
        Box::pin(async move { Err(LedgerError::Store { code: RENEW_UNSUPPORTED.into(), message, source: None }) })
    }
}

/// The code of the [`LedgerError::Store`] that a ledger which cannot renew leases answers
/// [`EffectLedger::renew`] with (its default).
pub const RENEW_UNSUPPORTED: &str = "renew_unsupported";

/// Which tools of an executor run once (see [`ExecutorBuilder::exactly_once`](crate::executor::ExecutorBuilder::exactly_once)).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum OnceFor {
    /// Every tool whose effect is `write` or `destructive`.
    Writes,
    /// These tools, by name; each must be in the executor's view and not a `read` tool.
    Tools(Vec<String>),
}

impl OnceFor {
    /// These tools, by name.
    pub fn tools(names: impl IntoIterator<Item = impl Into<String>>) -> OnceFor {
        OnceFor::Tools(names.into_iter().map(Into::into).collect())
    }
}

/// An executor's ledger and which of its tools it covers.
pub(crate) struct Once {
    pub(crate) ledger: Arc<dyn EffectLedger>,
    /// Per tool of the view, in the view's order: its lease, when the tool runs once.
    pub(crate) leases: Box<[Option<Duration>]>,
    pub(crate) wait: Duration,
}

/// What the claim step decided.
pub(crate) enum Claim {
    /// Run the handler under this lease.
    Run(Lease),
    /// Do not run: answer this (a replayed result, or a refusal).
    Answer(Answered),
}

/// An answer given without running the handler.
pub(crate) enum Answered {
    /// The recorded outcome.
    Replay(Outcome),
    /// A refusal: `in_progress`, `idempotency_conflict`, `state_unavailable`.
    Refused(ErrorBody),
}

/// The record of a call that returned `data`, as the executor writes it with [`EffectLedger::finish`]: what a
/// handler that records its own result in its effect's transaction writes (see
/// [`CallContext::effect_lease`](crate::CallContext::effect_lease)), so that a retry replays it as the executor
/// would.
pub fn data_record(data: &Value) -> Value {
    json!({"ok": true, "data": data})
}

/// The fingerprint of a call: its tool and its canonical arguments (keys sorted), hashed. The version is left out:
/// a tool upgraded between two attempts of one call is still asked to do the same thing.
pub(crate) fn fingerprint(tool: &str, arguments: &Value) -> String {
    let mut h = keel_tools_schema::canonical::Fnv1a128::new();
    h.update(keel_tools_schema::canonical::canonical_json(arguments).as_bytes());
    format!("{tool}/{:032x}", h.finish())
}

fn now_ms() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

impl Once {
    /// The claim step: begins the key, waiting (bounded) while another runner holds it.
    pub(crate) async fn claim(
        &self,
        key: String,
        fingerprint: String,
        lease: Duration,
        cancelled: Option<&tokio_util::sync::CancellationToken>,
    ) -> Claim {
        let give_up = tokio::time::Instant::now() + self.wait;
        let mut pause = Duration::from_millis(10);
        loop {
            match self.ledger.begin(&key, &fingerprint, lease).await {
                Ok(Begin::Run(lease)) => return Claim::Run(lease),
                Ok(Begin::Replay(recorded)) => return Claim::Answer(replayed(&key, recorded)),
                Ok(Begin::InProgress { lease_expires_at_ms }) => {
                    let now = tokio::time::Instant::now();
                    if now >= give_up || cancelled.is_some_and(|c| c.is_cancelled()) {
                        // A time within the lease that holds the key, never its end: its runner renews it while
                        // the handler runs, and a retry at its end could find it just expired.
                        let retry_after_ms = (lease_expires_at_ms.saturating_sub(now_ms()) / 2).clamp(50, 30_000);
                        return Claim::Answer(Answered::Refused(in_progress(&key, retry_after_ms)));
                    }
                    let sleep = tokio::time::sleep_until((now + pause).min(give_up));
                    match cancelled {
                        Some(token) => {
                            tokio::select! {
                                () = sleep => {}
                                () = token.cancelled() => {}
                            }
                        }
                        None => sleep.await,
                    }
                    pause = (pause * 2).min(Duration::from_millis(200));
                }
                Err(LedgerError::Conflict { .. }) => {
                    let message = "this call's idempotency key was used before for a call with other arguments; it \
                                   was not run";
                    let body = ErrorBody::new(ErrorCode::IdempotencyConflict, message)
                        .with_details(json!({"idempotency_key": key}));
                    return Claim::Answer(Answered::Refused(body));
                }
                Err(e) => return Claim::Answer(Answered::Refused(unavailable(&key, &e))),
            }
        }
    }

    /// Records what the call did, or gives the key up (see the module's rules). A failure to record is logged:
    /// the caller still gets the true answer of the run.
    pub(crate) async fn settle(&self, lease: Lease, result: &ToolResult) {
        let record = match (&result.outcome, result.executed) {
            (Outcome::Data(data), _) => Some(data_record(data)),
            (Outcome::Error(error), true)
                if !matches!(error.code, ErrorCode::ToolInternalError | ErrorCode::Timeout | ErrorCode::Cancelled) =>
            {
                Some(json!({"ok": false, "error": crate::result::error_body_json(error)}))
            }
            (Outcome::Error(error), true) if matches!(error.code, ErrorCode::Timeout | ErrorCode::Cancelled) => {
                // Not reached: the outcome of a handler that outlived its call is recorded when it ends
                // (`Executor::outlive`). Were it reached, the lease would stand until it expires.
                return;
            }
            _ => None,
        };
        let done = match &record {
            Some(record) => self.ledger.finish(&lease, record).await,
            None => self.ledger.abandon(&lease).await,
        };
        if let Err(e) = done {
            tracing::error!(
                target: TARGET,
                call_id = %result.call_id,
                tool_name = %result.tool_name,
                idempotency_key = lease.key(),
                error = %e,
                "the outcome of a call that runs once could not be recorded; a retry may run it again"
            );
        }
    }
}

impl Once {
    /// Awaits `running`, a handler that outlived its call, renewing `lease` (for `lease_for` each time, every third
    /// of it) until it ends: the heartbeat that keeps retries answered `in_progress` meanwhile.
    pub(crate) async fn outlive<F: Future>(&self, lease: &Lease, lease_for: Duration, running: F) -> F::Output {
        let beat = tokio::spawn(heartbeat(Arc::clone(&self.ledger), lease.clone(), lease_for));
        let ended = running.await;
        beat.abort();
        let _ = beat.await;
        ended
    }
}

/// Renews `lease` at once, then every third of `lease_for`, until it is aborted, the lease is lost or the ledger
/// cannot renew. A failure of the ledger is tried again sooner.
async fn heartbeat(ledger: Arc<dyn EffectLedger>, lease: Lease, lease_for: Duration) {
    let period = (lease_for / 3).max(Duration::from_millis(10));
    loop {
        let pause = match ledger.renew(&lease, lease_for).await {
            Ok(_) => period,
            Err(LedgerError::LeaseLost { .. }) => {
                tracing::error!(
                    target: TARGET,
                    idempotency_key = lease.key(),
                    "the lease of a call whose handler still runs was lost; a retry may run it again"
                );
                return;
            }
            Err(LedgerError::Store { code, .. }) if code == RENEW_UNSUPPORTED => {
                tracing::warn!(
                    target: TARGET,
                    idempotency_key = lease.key(),
                    "the effect ledger cannot renew leases; a retry after the lease ends may run the call beside \
                     its handler, which still runs"
                );
                return;
            }
            Err(e) => {
                tracing::warn!(target: TARGET, idempotency_key = lease.key(), error = %e, "a lease could not be renewed; trying again");
                period / 4
            }
        };
        tokio::time::sleep(pause).await;
    }
}

/// The recorded outcome, or `state_unavailable` when the record is not one the executor wrote.
fn replayed(key: &str, recorded: Value) -> Answered {
    let Value::Object(mut record) = recorded else {
        return Answered::Refused(unreadable(key));
    };
    match record.remove("ok") {
        Some(Value::Bool(true)) => Answered::Replay(Outcome::Data(record.remove("data").unwrap_or(Value::Null))),
        Some(Value::Bool(false)) => match record.remove("error").map(serde_json::from_value::<ErrorBody>) {
            Some(Ok(error)) => Answered::Replay(Outcome::Error(error)),
            _ => Answered::Refused(unreadable(key)),
        },
        _ => Answered::Refused(unreadable(key)),
    }
}

#[cold]
fn in_progress(key: &str, retry_after_ms: u64) -> ErrorBody {
    ErrorBody::new(
        ErrorCode::InProgress,
        "the same call is running now, started by an earlier attempt; ask again later for its result",
    )
    .with_details(json!({"idempotency_key": key, "retry_after_ms": retry_after_ms}))
}

#[cold]
fn unavailable(key: &str, e: &LedgerError) -> ErrorBody {
    tracing::error!(target: TARGET, idempotency_key = key, error = %e, "the effect ledger failed; the call was not run");
    ErrorBody::new(ErrorCode::StateUnavailable, "the record of this call's effect could not be read; it was not run")
        .with_details(json!({"idempotency_key": key}))
}

#[cold]
fn unreadable(key: &str) -> ErrorBody {
    tracing::error!(target: TARGET, idempotency_key = key, "an effect record is not one the executor wrote; the call was not run");
    ErrorBody::new(ErrorCode::StateUnavailable, "the record of this call's effect could not be read; it was not run")
        .with_details(json!({"idempotency_key": key}))
}
