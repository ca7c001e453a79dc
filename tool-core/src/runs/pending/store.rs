//! Where pending calls are kept: the [`PendingStore`] contract and its [`PendingStoreError`].

use std::fmt;
use std::io;
use std::path::PathBuf;

use super::PendingCall;

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
        /// The parser's error, when the entry is not a pending call's JSON.
        source: Option<serde_json::Error>,
    },
    /// The store's directory is open to other users (Unix): [`FileStore::open`](super::FileStore::open) neither uses
    /// nor changes it.
    Permissions {
        /// The directory.
        dir: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// The record was taken from the store before ([`PendingCall::record_id`]): saved again, or put back where
    /// it was kept, after its call was resolved. A pending call is resolved once: it is not kept (and a record
    /// put back is removed); ask for the call again.
    Consumed {
        /// The call's key.
        key: String,
    },
}

impl fmt::Display for PendingStoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PendingStoreError::Io { context, source } => write!(f, "{context}: {source}"),
            PendingStoreError::Corrupt { entry, message, .. } => write!(f, "{entry} is not a pending call: {message}"),
            PendingStoreError::Permissions { dir, mode } => write!(
                f,
                "{} is open to other users (mode {mode:03o}); pending calls hold their arguments, so the store must \
                 be private to its owner: `chmod 700` it, or choose a new directory (created 0700)",
                dir.display()
            ),
            PendingStoreError::Consumed { key } => write!(
                f,
                "the pending call {key} was taken before: a pending call is resolved once, and its record saved or \
                 put back after it was taken is refused; ask for the call again"
            ),
        }
    }
}

impl std::error::Error for PendingStoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            PendingStoreError::Io { source, .. } => Some(source),
            PendingStoreError::Corrupt { source, .. } => {
                source.as_ref().map(|e| e as &(dyn std::error::Error + 'static))
            }
            PendingStoreError::Permissions { .. } | PendingStoreError::Consumed { .. } => None,
        }
    }
}

/// Where pending calls wait. Implementations must let two processes share one store: of two that
/// [`take`](PendingStore::take) one call, exactly one gets it. A record is taken once: the store keeps what it
/// gave out ([`PendingCall::record_id`]) until the record expires, and refuses that record when it is saved again
/// or found put back where it was kept ([`PendingStoreError::Consumed`]).
///
/// A store need not protect the records from change: a changed record does not verify, and is refused (see
/// [`PendingCall`]). It must keep them from readers who should not see the arguments.
pub trait PendingStore: Send + Sync {
    /// Keeps `pending` under its [`key`](PendingCall::key), replacing what was kept there;
    /// [`PendingStoreError::Consumed`] if it was taken before.
    fn save(&self, pending: &PendingCall) -> Result<(), PendingStoreError>;
    /// Every pending call, in key order.
    fn list(&self) -> Result<Vec<PendingCall>, PendingStoreError>;
    /// Removes the call kept under `key` and returns it, recording it as taken; `None` if there is none (or another
    /// taker got it); [`PendingStoreError::Consumed`] (the record removed) if it was taken before and put back.
    fn take(&self, key: &str) -> Result<Option<PendingCall>, PendingStoreError>;
}
