//! [`StateError`]: why a store could not be opened, or an operation on it failed.

use std::error::Error;
use std::fmt;

use keel_tools_core::runs::PendingStoreError;

/// The error source a [`StateError`] keeps.
pub type Source = Box<dyn Error + Send + Sync + 'static>;

/// Why a store could not be opened, or an operation on it failed. Each variant has a stable
/// [`code`](StateError::code).
#[derive(Debug)]
#[non_exhaustive]
pub enum StateError {
    /// `config_error`: a setting that cannot work (a table name that is not a plain identifier, a connection string
    /// that does not parse, a schema newer than this build).
    Config {
        /// What is wrong, and what to do about it.
        message: String,
        /// The error it comes from, if any.
        source: Option<Source>,
    },
    /// `store_unavailable`: the database could not be reached, or stopped answering. Nothing was changed, or the
    /// operation's transaction was rolled back.
    Unavailable {
        /// What was being done, and where.
        context: String,
        /// What happened.
        message: String,
        /// The driver's error.
        source: Option<Source>,
    },
    /// `store_error`: the database answered with an error (a lock not granted in time, a constraint, a full disk).
    Store {
        /// What was being done, and where.
        context: String,
        /// What the database said.
        message: String,
        /// The driver's error.
        source: Option<Source>,
    },
    /// `corrupt_row`: a row holds what this crate never writes (a record that is not JSON, a state that does not
    /// exist). The row is left as it is, for an operator to see.
    Corrupt {
        /// The table.
        table: String,
        /// The row's key.
        key: String,
        /// What is wrong with it.
        message: String,
        /// The parser's error, if any.
        source: Option<Source>,
    },
    /// `invalid_key`: a key no store keeps (empty, or longer than [`MAX_KEY_LEN`](crate::effect::MAX_KEY_LEN)
    /// bytes).
    InvalidKey {
        /// What is wrong with it.
        message: String,
    },
    /// `key_conflict`: an effect key already recorded for a call with another fingerprint (the same key reused
    /// with other arguments). Nothing was changed.
    Conflict {
        /// The key.
        key: String,
        /// The fingerprint recorded with the key.
        recorded: String,
        /// The fingerprint given now.
        given: String,
    },
    /// `lease_lost`: [`finish`](crate::EffectStore::finish) or [`abandon`](crate::EffectStore::abandon) with a
    /// lease that is no longer the key's: it expired and another runner claimed the key, or the record was
    /// purged. For a task ([`TaskStore`](crate::TaskStore)): its owner's lease expired before the task ended, so
    /// the task is `lost`, or the lease is not the task's. Nothing was changed.
    LeaseLost {
        /// The key.
        key: String,
    },
    /// `unknown_task`: no task of this id (never created, or removed after its results' keep time). Nothing was
    /// changed.
    UnknownTask {
        /// The task's id.
        id: String,
    },
    /// `task_exists`: [`create`](crate::TaskStore::create) with the id of a task the store still keeps. Nothing was
    /// changed.
    TaskExists {
        /// The task's id.
        id: String,
    },
    /// `task_ended`: the task has a terminal status (completed, failed, cancelled or lost), which nothing changes.
    /// Nothing was changed.
    TaskEnded {
        /// The task's id.
        id: String,
        /// Its terminal status, as [`TaskStatus::as_str`](crate::TaskStatus::as_str) names it.
        status: String,
    },
    /// `input_not_requested`: [`answer`](crate::TaskStore::answer) for a task that is not waiting for input (it is
    /// working: its request was answered already, or none was made). Nothing was changed.
    InputNotRequested {
        /// The task's id.
        id: String,
    },
    /// `pending_consumed`: the pending call's record was taken before (saved again, or put back in the table,
    /// after it was taken). It is not kept; a record put back is deleted.
    Consumed {
        /// The call's key.
        key: String,
    },
}

impl StateError {
    /// The stable code: `config_error`, `store_unavailable`, `store_error`, `corrupt_row`, `invalid_key`,
    /// `key_conflict`, `lease_lost`, `unknown_task`, `task_exists`, `task_ended`, `input_not_requested` or
    /// `pending_consumed`.
    pub fn code(&self) -> &'static str {
        match self {
            StateError::Config { .. } => "config_error",
            StateError::Unavailable { .. } => "store_unavailable",
            StateError::Store { .. } => "store_error",
            StateError::Corrupt { .. } => "corrupt_row",
            StateError::InvalidKey { .. } => "invalid_key",
            StateError::Conflict { .. } => "key_conflict",
            StateError::LeaseLost { .. } => "lease_lost",
            StateError::UnknownTask { .. } => "unknown_task",
            StateError::TaskExists { .. } => "task_exists",
            StateError::TaskEnded { .. } => "task_ended",
            StateError::InputNotRequested { .. } => "input_not_requested",
            StateError::Consumed { .. } => "pending_consumed",
        }
    }

    pub(crate) fn config(message: impl Into<String>) -> StateError {
        StateError::Config { message: message.into(), source: None }
    }

    #[cfg(feature = "sqlite")]
    pub(crate) fn store(context: impl Into<String>, source: impl Error + Send + Sync + 'static) -> StateError {
        StateError::Store { context: context.into(), message: source.to_string(), source: Some(Box::new(source)) }
    }

    pub(crate) fn corrupt(table: &str, key: &str, message: impl Into<String>, source: Option<Source>) -> StateError {
        StateError::Corrupt { table: table.to_owned(), key: key.to_owned(), message: message.into(), source }
    }
}

impl fmt::Display for StateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StateError::Config { message, .. } => write!(f, "config_error: {message}"),
            StateError::Unavailable { context, message, .. } => write!(f, "store_unavailable: {context}: {message}"),
            StateError::Store { context, message, .. } => write!(f, "store_error: {context}: {message}"),
            StateError::Corrupt { table, key, message, .. } => {
                write!(f, "corrupt_row: the row {key:?} of {table} is not one this store writes: {message}")
            }
            StateError::InvalidKey { message } => write!(f, "invalid_key: {message}"),
            StateError::Conflict { key, recorded, given } => write!(
                f,
                "key_conflict: the effect key {key:?} is recorded for a call with fingerprint {recorded}, not \
                 {given}: a key names one call, with one set of arguments"
            ),
            StateError::LeaseLost { key } => write!(
                f,
                "lease_lost: the lease on {key:?} is no longer held (it expired and the key was claimed again or \
                 the task was reported lost, or the record was removed)"
            ),
            StateError::UnknownTask { id } => {
                write!(f, "unknown_task: no task {id:?} (never created, or removed after its results' keep time)")
            }
            StateError::TaskExists { id } => write!(f, "task_exists: a task {id:?} exists already: choose another id"),
            StateError::TaskEnded { id, status } => {
                write!(f, "task_ended: the task {id:?} has ended ({status}); an ended task does not change")
            }
            StateError::InputNotRequested { id } => {
                write!(f, "input_not_requested: the task {id:?} is not waiting for input")
            }
            StateError::Consumed { key } => write!(
                f,
                "pending_consumed: the pending call {key} was taken before: a pending call is resolved once, and its \
                 record saved or put back after it was taken is refused; ask for the call again"
            ),
        }
    }
}

impl Error for StateError {
    fn source(&self) -> Option<&(dyn Error + 'static)> {
        match self {
            StateError::Config { source, .. }
            | StateError::Unavailable { source, .. }
            | StateError::Store { source, .. }
            | StateError::Corrupt { source, .. } => source.as_deref().map(|e| e as &(dyn Error + 'static)),
            StateError::InvalidKey { .. }
            | StateError::Conflict { .. }
            | StateError::LeaseLost { .. }
            | StateError::UnknownTask { .. }
            | StateError::TaskExists { .. }
            | StateError::TaskEnded { .. }
            | StateError::InputNotRequested { .. }
            | StateError::Consumed { .. } => None,
        }
    }
}

/// A [`StateError`] as the [`PendingStore`](keel_tools_core::runs::PendingStore) trait reports it: a corrupt row
/// as [`PendingStoreError::Corrupt`], a record taken before as [`PendingStoreError::Consumed`], anything else as
/// [`PendingStoreError::Io`] whose source is the
/// [`StateError`] (its code and its own source kept).
impl From<StateError> for PendingStoreError {
    fn from(e: StateError) -> PendingStoreError {
        match e {
            StateError::Corrupt { key, message, source, .. } => {
                let source = source.and_then(|s| s.downcast::<serde_json::Error>().ok()).map(|b| *b);
                PendingStoreError::Corrupt { entry: key, message, source }
            }
            StateError::Consumed { key } => PendingStoreError::Consumed { key },
            other => {
                let context = match &other {
                    StateError::Unavailable { context, .. } | StateError::Store { context, .. } => context.clone(),
                    _ => "the pending calls' store".to_owned(),
                };
                PendingStoreError::Io { context, source: std::io::Error::other(other) }
            }
        }
    }
}

/// A task store's error, as keel-tools-core's task vocabulary sees it: its [`code`](StateError::code).
impl keel_tools_core::tasks::TaskStoreError for StateError {
    fn code(&self) -> std::borrow::Cow<'static, str> {
        std::borrow::Cow::Borrowed(StateError::code(self))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_sources_survive_as_pending_store_errors() {
        let parse = serde_json::from_str::<serde_json::Value>("{").unwrap_err();
        let e = StateError::corrupt("t", "pc-1", "not JSON", Some(Box::new(parse)));
        assert_eq!(e.code(), "corrupt_row");
        let p = PendingStoreError::from(e);
        assert!(matches!(&p, PendingStoreError::Corrupt { entry, source: Some(_), .. } if entry == "pc-1"), "{p:?}");

        let e = StateError::Unavailable { context: "taking pc-1".into(), message: "refused".into(), source: None };
        let p = PendingStoreError::from(e);
        let PendingStoreError::Io { context, source } = &p else { panic!("{p:?}") };
        assert_eq!(context, "taking pc-1");
        let inner = source.get_ref().and_then(|s| s.downcast_ref::<StateError>()).expect("the StateError");
        assert_eq!(inner.code(), "store_unavailable");
    }
}
