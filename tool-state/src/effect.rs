//! Exactly-once effect records: the [`EffectStore`] trait and its vocabulary ([`Begin`], [`Lease`]).
//!
//! A call that changes something outside (charges a card, sends a message) must not do it twice when it is
//! retried: by the model, by a client whose connection broke, by a replica that took over. The caller names the
//! effect with a key (an idempotency key) and a fingerprint of the call (what it does: the tool and its
//! arguments), and asks the store before running it:
//!
//! | the key's record | [`begin`](EffectStore::begin) answers | the caller |
//! |---|---|---|
//! | none, or forgotten (past the retention) | [`Begin::Run`]: a lease on the key, recorded as running | runs the call, then [`finish`](EffectStore::finish)es with its result (or [`abandon`](EffectStore::abandon)s it) |
//! | finished, same fingerprint | [`Begin::Replay`] with the recorded result | answers the recorded result, does not run |
//! | running under a lease that has not expired, same fingerprint | [`Begin::InProgress`] | waits and asks again, or answers that the call is in progress |
//! | running under an expired lease (its runner crashed or hung), same fingerprint | [`Begin::Run`]: the lease taken over | runs the call again |
//! | any, another fingerprint | [`StateError::Conflict`] (`key_conflict`) | refuses the call: the key was reused for other arguments |
//!
//! Of any number of concurrent `begin`s of one key, by any number of processes sharing the store, exactly one gets
//! [`Begin::Run`] (one statement decides, under the database's lock on the key's row). A lease is held until it
//! expires: a runner that needs longer [`renew`](EffectStore::renew)s it. A runner whose lease expired and was
//! taken over can no longer finish ([`StateError::LeaseLost`]), so a record holds the result of the run that owns
//! it.
//!
//! A record is kept for the store's retention after it finished (or after its lease expired, if it never
//! finished), then forgotten: [`begin`](EffectStore::begin) treats it as absent at once, and
//! [`purge_expired`](EffectStore::purge_expired) deletes it.
//!
//! What the store cannot do by itself: make the effect atomic with the record. A runner that crashes after the
//! effect and before `finish` leaves a running record whose lease expires, and the call runs again. An effect
//! that is a write to the store's own database closes the gap: the runner records its result in the transaction
//! that does the effect, with `finish_in` ([`SqliteEffectStore::finish_in`](crate::SqliteEffectStore::finish_in),
//! [`PostgresEffectStore::finish_in`](crate::PostgresEffectStore::finish_in)), so that both are committed or
//! neither is. Any other effect closes it with its own idempotency (the key passed on to the payment API, say);
//! the lease bounds how soon the call may run again.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use serde_json::Value;

use crate::error::StateError;

/// The longest key a store keeps, in bytes.
pub const MAX_KEY_LEN: usize = 512;

/// How long a finished record is kept by default: one day.
pub const DEFAULT_RETENTION: Duration = Duration::from_secs(24 * 60 * 60);

/// The future an [`EffectStore`] method returns.
pub type StateFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StateError>> + Send + 'a>>;

#[doc(no_inline)]
pub use keel_tools_core::once::{Begin, Lease};

/// Where effect records are kept, shared by every process that may run the same calls. See the
/// [module documentation](self) for the protocol.
///
/// Implementations: [`SqliteEffectStore`](crate::SqliteEffectStore) (feature `sqlite`) and
/// [`PostgresEffectStore`](crate::PostgresEffectStore) (feature `postgres`); the contract tests of the workspace
/// run against both.
pub trait EffectStore: Send + Sync {
    /// Claims `key` for a call with `fingerprint`, for `lease` (see the table of the
    /// [module documentation](self)).
    ///
    /// # Errors
    ///
    /// `key_conflict` when the key is recorded with another fingerprint; `invalid_key` for an empty key or one
    /// longer than [`MAX_KEY_LEN`]; `corrupt_row` when the recorded result is not JSON; the store's errors.
    fn begin<'a>(&'a self, key: &'a str, fingerprint: &'a str, lease: Duration) -> StateFuture<'a, Begin>;

    /// Records `result` as the outcome of the call `lease` was for: later `begin`s of the key replay it. Once a
    /// result is recorded under a lease, finishing under that lease again succeeds and changes nothing: the first
    /// result stands (the executor finishes a call whose handler recorded its result itself, with `finish_in`).
    ///
    /// # Errors
    ///
    /// `lease_lost` when the lease is no longer the key's (nothing is recorded); the store's errors.
    fn finish<'a>(&'a self, lease: &'a Lease, result: &'a Value) -> StateFuture<'a, ()>;

    /// Gives the key up without a result (the call did not run, or failed before any effect): the next `begin`
    /// runs it.
    ///
    /// # Errors
    ///
    /// `lease_lost` when the lease is no longer the key's (nothing is changed); the store's errors.
    fn abandon<'a>(&'a self, lease: &'a Lease) -> StateFuture<'a, ()>;

    /// Extends the lease to `lease` from now (the store's clock), for a runner that needs longer; the lease with
    /// its new expiry. A lease that expired can be renewed as long as no `begin` took the key over.
    ///
    /// # Errors
    ///
    /// `lease_lost` when the lease is no longer the key's; the store's errors.
    fn renew<'a>(&'a self, lease: &'a Lease, lease_for: Duration) -> StateFuture<'a, Lease>;

    /// Deletes the records past the retention: finished longer ago than the retention, or running with a lease
    /// that expired longer ago. How many were deleted.
    fn purge_expired(&self) -> StateFuture<'_, u64>;
}

/// Checks a key before it reaches a store.
pub(crate) fn check_key(key: &str) -> Result<(), StateError> {
    if key.is_empty() {
        return Err(StateError::InvalidKey { message: "an effect key is empty".into() });
    }
    if key.len() > MAX_KEY_LEN {
        return Err(StateError::InvalidKey {
            message: format!("an effect key has {} bytes, more than {MAX_KEY_LEN}", key.len()),
        });
    }
    Ok(())
}

/// A duration in milliseconds, as the stores' integer columns hold it (saturating, at least 1 ms).
pub(crate) fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 4).clamp(1, i64::MAX / 4)
}

/// A new lease token: 32 hex digits, unique across processes (a per-process random seed, the clock and a
/// counter, hashed by `std`'s randomly keyed hasher). Not secret: it tells leases apart, it proves nothing.
pub(crate) fn lease_token() -> String {
    use std::collections::hash_map::RandomState;
    use std::hash::{BuildHasher, Hasher};
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicU64, Ordering};
    static SEED: OnceLock<RandomState> = OnceLock::new();
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let seed = SEED.get_or_init(RandomState::new);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or_default();
    let mut parts = [0u64; 2];
    for (i, part) in parts.iter_mut().enumerate() {
        let mut h = seed.build_hasher();
        h.write_u64(i as u64);
        h.write_u64(n);
        h.write_u128(nanos);
        h.write_u32(std::process::id());
        *part = h.finish();
    }
    format!("{:016x}{:016x}", parts[0], parts[1])
}

/// The outcome of `begin` from the key's record as a store read it after its claim was refused. `None` when the
/// record turns out claimable (time passed, or it changed, between the claim and the read): the caller tries
/// again.
pub(crate) fn decide(
    table: &str,
    key: &str,
    fingerprint: &str,
    record: Recorded,
    retention_ms: i64,
) -> Result<Option<Begin>, StateError> {
    let Recorded { fingerprint: recorded, state, lease_until_ms, result, updated_ms, now_ms } = record;
    let forgotten = match state.as_str() {
        "done" => updated_ms.saturating_add(retention_ms) < now_ms,
        _ => lease_until_ms.is_some_and(|until| until.saturating_add(retention_ms) < now_ms),
    };
    if forgotten {
        return Ok(None);
    }
    if recorded != fingerprint {
        return Err(StateError::Conflict { key: key.to_owned(), recorded, given: fingerprint.to_owned() });
    }
    match state.as_str() {
        "done" => {
            let text =
                result.ok_or_else(|| StateError::corrupt(table, key, "a finished record without a result", None))?;
            let value = serde_json::from_str(&text).map_err(|e| {
                StateError::corrupt(table, key, format!("the recorded result is not JSON: {e}"), Some(Box::new(e)))
            })?;
            Ok(Some(Begin::Replay(value)))
        }
        "running" => {
            let until = lease_until_ms
                .ok_or_else(|| StateError::corrupt(table, key, "a running record without a lease expiry", None))?;
            if until < now_ms {
                return Ok(None);
            }
            Ok(Some(Begin::InProgress { lease_expires_at_ms: u64::try_from(until).unwrap_or(0) }))
        }
        other => Err(StateError::corrupt(table, key, format!("the state {other:?} is neither running nor done"), None)),
    }
}

/// How many times `begin` claims a key whose record changes under it before it gives up.
pub(crate) const CLAIM_ATTEMPTS: usize = 8;

/// The error of a `begin` that gave up after [`CLAIM_ATTEMPTS`].
pub(crate) fn unsettled(context: String) -> StateError {
    StateError::Store {
        context,
        message: format!("the key's record changed under each of {CLAIM_ATTEMPTS} attempts to claim it"),
        source: None,
    }
}

/// A key's record as a store read it, with the store's clock when it did.
pub(crate) struct Recorded {
    pub(crate) fingerprint: String,
    pub(crate) state: String,
    pub(crate) lease_until_ms: Option<i64>,
    pub(crate) result: Option<String>,
    pub(crate) updated_ms: i64,
    pub(crate) now_ms: i64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_bounded_and_tokens_distinct() {
        assert_eq!(check_key("").unwrap_err().code(), "invalid_key");
        assert_eq!(check_key(&"k".repeat(MAX_KEY_LEN + 1)).unwrap_err().code(), "invalid_key");
        check_key(&"k".repeat(MAX_KEY_LEN)).unwrap();
        let (a, b) = (lease_token(), lease_token());
        assert_ne!(a, b);
        assert!(a.len() == 32 && a.bytes().all(|c| c.is_ascii_hexdigit()), "{a}");
        assert_eq!(millis(Duration::ZERO), 1);
        assert_eq!(millis(Duration::MAX), i64::MAX / 4);
    }

    fn recorded(state: &str, until: Option<i64>, result: Option<&str>) -> Recorded {
        Recorded {
            fingerprint: "f".into(),
            state: state.into(),
            lease_until_ms: until,
            result: result.map(Into::into),
            updated_ms: 90,
            now_ms: 100,
        }
    }

    #[test]
    fn a_record_read_back_decides_the_answer() {
        let d = |r| decide("t", "k", "f", r, 1000);
        let forgotten = |r| decide("t", "k", "other", r, 5);
        assert_eq!(forgotten(recorded("done", None, Some("1"))).unwrap(), None, "past the retention");
        assert_eq!(forgotten(recorded("running", Some(94), None)).unwrap(), None, "lease long expired");
        assert_eq!(d(recorded("done", None, Some("[1]"))).unwrap(), Some(Begin::Replay(serde_json::json!([1]))));
        assert_eq!(
            d(recorded("running", Some(100), None)).unwrap(),
            Some(Begin::InProgress { lease_expires_at_ms: 100 })
        );
        assert_eq!(d(recorded("running", Some(99), None)).unwrap(), None, "expired: claim again");
        for bad in [
            recorded("done", None, Some("{")),
            recorded("done", None, None),
            recorded("running", None, None),
            recorded("gone", None, None),
        ] {
            assert_eq!(d(bad).unwrap_err().code(), "corrupt_row");
        }
        let e = decide("t", "k", "g", recorded("done", None, Some("1")), 1000).unwrap_err();
        assert!(matches!(&e, StateError::Conflict { recorded, given, .. } if recorded == "f" && given == "g"), "{e}");
    }
}
