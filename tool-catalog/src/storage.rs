//! [`Storage`]: where a catalogue keeps its rows. Two implementations: a SQLite file (the default, embedded) and,
//! behind the `postgres` feature, a PostgreSQL database shared by replicas ([`crate::postgres`]). Here: the trait
//! and its vocabulary (change tokens, versioned values, the change feed); `sqlite` and `postgres`, the backends;
//! `columns`, the row's columns both build their statements from; `backoff`, the pauses both take between attempts.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, SystemTime};

use tokio::sync::watch;

use crate::error::CatalogError;
use crate::row::{StoredRow, ToolRow};

mod backoff;
mod columns;
#[cfg(feature = "postgres")]
pub mod postgres;
pub(crate) mod sqlite;

/// The schema version this crate writes (`PRAGMA user_version`): 2 adds the `catalog_state` table and the triggers
/// that count every change to `tools`.
pub const SCHEMA_VERSION: i64 = 2;

/// How long an operation waits, in all, for another connection's lock before it fails with `busy`.
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_secs(2);

/// The future a [`Storage`] method returns.
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, CatalogError>> + Send + 'a>>;

/// Where the catalogue's file is in its history of changes; see
/// [`Catalog::change_token`](crate::Catalog::change_token).
///
/// The file counts every row inserted, updated or deleted in `tools`, by any connection (this catalogue, another
/// process, `sqlite3`), in the same transaction as the change (a trigger in the file does it). So tokens are
/// ordered: a later state has a greater token, two reads of the same state have equal tokens, and a token read
/// after a write is at least the write's. They stay so as long as the file is changed in place (a file replaced
/// by an older copy goes back in its history).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ChangeToken {
    generation: u64,
}

impl ChangeToken {
    /// The token of a store that has counted `generation` row changes (for [`Storage`] implementations).
    pub const fn new(generation: u64) -> ChangeToken {
        ChangeToken { generation }
    }

    /// How many row changes the file has counted (`0` for a new file).
    pub fn generation(self) -> u64 {
        self.generation
    }
}

impl fmt::Display for ChangeToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "generation {}", self.generation)
    }
}

/// What an operation returned, with the [`ChangeToken`] of the state it belongs to: the state a read saw, or the
/// state a write committed (a write that changed no row returns the token of the state it found).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Versioned<T> {
    /// What the operation returned.
    pub value: T,
    /// The state it belongs to.
    pub token: ChangeToken,
}

impl<T> Versioned<T> {
    /// `value`, of the state `token` (for [`Storage`] implementations).
    pub fn new(value: T, token: ChangeToken) -> Versioned<T> {
        Versioned { value, token }
    }
}

/// Where a catalogue keeps its rows: the `tools` table, its change counter and its schema version.
///
/// Every implementation keeps the same contract, which the catalogue's resolution rules rely on:
///
/// - **One table.** The columns of the [crate documentation](crate#the-table), `(name, tenant)` unique, rows in
///   insertion order (`rowid` / `id`). Rows come back as stored; [`StoredRow::row`] holds the `bad_row` error of
///   a row whose columns cannot be read, never an error of the whole read.
/// - **Ordered change tokens.** Every row inserted, updated or deleted, by any writer, moves the token forward in
///   the same transaction; a read returns its rows with the token of the state it read, in one transaction.
/// - **Bounded waits.** An operation that cannot get the lock it needs in its bound fails with
///   [`CatalogError::Busy`] having changed nothing; one that cannot reach the store fails with
///   [`CatalogError::Unavailable`].
///
/// Implementations: the SQLite file of [`CatalogBuilder::open`](crate::CatalogBuilder::open) and
/// [`PgStorage`](crate::postgres::PgStorage) (feature `postgres`). A catalogue over any other store is opened with
/// [`CatalogBuilder::storage`](crate::CatalogBuilder::storage).
pub trait Storage: Send + Sync + 'static {
    /// Where the rows are, for messages and logs (`sqlite:tools.db`, `postgresql://127.0.0.1:5432/keel`); never a
    /// password.
    fn describe(&self) -> String;

    /// Every row (`tenant` `None`), or the rows one tenant sees (its own and those of every tenant), in insertion
    /// order, with the token of the state they were read from.
    fn rows<'a>(&'a self, tenant: Option<&'a str>) -> StoreFuture<'a, Versioned<Vec<StoredRow>>>;

    /// Inserts `row`, or replaces the row of the same name and tenant; its id and the token the write committed.
    /// The row has been checked by the catalogue.
    fn put<'a>(&'a self, row: &'a ToolRow) -> StoreFuture<'a, Versioned<i64>>;

    /// Sets `enabled` on the row of that name and tenant: whether it exists, and the token after.
    fn set_enabled<'a>(
        &'a self,
        name: &'a str,
        tenant: Option<&'a str>,
        enabled: bool,
    ) -> StoreFuture<'a, Versioned<bool>>;

    /// Deletes the row of that name and tenant: whether it existed, and the token after.
    fn remove<'a>(&'a self, name: &'a str, tenant: Option<&'a str>) -> StoreFuture<'a, Versioned<bool>>;

    /// The token of the current state.
    fn change_token(&self) -> StoreFuture<'_, ChangeToken>;

    /// Changes pushed by the store (PostgreSQL's `LISTEN`/`NOTIFY`), when it can push them; `None` (the default)
    /// makes [`Catalog::changes`](crate::Catalog::changes) poll [`Storage::change_token`] instead. Called inside a
    /// Tokio runtime.
    fn changes(&self) -> Option<ChangeFeed> {
        None
    }
}

/// Whether a catalogue's store answers, as its [`ChangeFeed`] last saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreHealth {
    /// The feed is connected (or the last poll answered).
    Connected,
    /// The store stopped answering; the feed is reconnecting with backoff. Views built before keep being served.
    Degraded {
        /// When the store was first found unreachable.
        since: SystemTime,
        /// The last error, as text.
        error: String,
        /// Reconnection attempts made so far.
        attempts: u32,
    },
}

impl StoreHealth {
    /// `"connected"` or `"degraded"`.
    pub fn status(&self) -> &'static str {
        match self {
            StoreHealth::Connected => "connected",
            StoreHealth::Degraded { .. } => "degraded",
        }
    }

    /// Whether the store is unreachable now.
    pub fn is_degraded(&self) -> bool {
        matches!(self, StoreHealth::Degraded { .. })
    }
}

/// What a [`ChangeFeed`] holds: the change token last read from the store (`None` before the first read) and the health of the
/// store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeedState {
    /// The change token last read from the store.
    pub token: Option<ChangeToken>,
    /// Whether the store answers.
    pub health: StoreHealth,
}

impl FeedState {
    /// A feed that has seen nothing yet.
    pub fn new() -> FeedState {
        FeedState { token: None, health: StoreHealth::Connected }
    }
}

impl FeedState {
    /// Records a token read from a store that answered; whether anything changed.
    pub(crate) fn read(&mut self, token: ChangeToken) -> bool {
        let changed = self.token != Some(token) || self.health.is_degraded();
        self.token = Some(token);
        self.health = StoreHealth::Connected;
        changed
    }

    /// Records a failed read or connection: degraded since the first failure of this outage.
    pub(crate) fn failed(&mut self, error: String, attempts: u32) {
        let since = match &self.health {
            StoreHealth::Degraded { since, .. } => *since,
            StoreHealth::Connected => SystemTime::now(),
        };
        self.health = StoreHealth::Degraded { since, error, attempts };
    }
}

impl Default for FeedState {
    fn default() -> Self {
        FeedState::new()
    }
}

/// A stream of the catalogue's change tokens, with the store's health: the newest state wins (a slow reader skips
/// to the latest token, it never queues them). Cheap to clone; each clone waits on its own.
#[derive(Clone)]
pub struct ChangeFeed {
    rx: watch::Receiver<FeedState>,
}

impl fmt::Debug for ChangeFeed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ChangeFeed").field("state", &*self.rx.borrow()).finish()
    }
}

impl ChangeFeed {
    /// A feed fed by `rx` (for [`Storage`] implementations that push changes).
    pub fn new(rx: watch::Receiver<FeedState>) -> ChangeFeed {
        ChangeFeed { rx }
    }

    /// The newest token and the health, now.
    pub fn state(&self) -> FeedState {
        self.rx.borrow().clone()
    }

    /// The token last read from the store (`None` before the first read).
    pub fn token(&self) -> Option<ChangeToken> {
        self.rx.borrow().token
    }

    /// The store's health.
    pub fn health(&self) -> StoreHealth {
        self.rx.borrow().health.clone()
    }

    /// Waits until the token or the health changes after the last call (or since the feed was made, for the
    /// first); returns the new state, or `None` when the feed has ended (its store was dropped).
    pub async fn changed(&mut self) -> Option<FeedState> {
        match self.rx.changed().await {
            Ok(()) => Some(self.rx.borrow_and_update().clone()),
            Err(_) => None,
        }
    }
}

/// A feed that never changes and reports `error` as its store's health (nothing is following the store).
pub(crate) fn stopped_feed(error: String) -> ChangeFeed {
    let (_tx, rx) = watch::channel(FeedState {
        token: None,
        health: StoreHealth::Degraded { since: SystemTime::now(), error, attempts: 0 },
    });
    ChangeFeed::new(rx)
}

/// A feed for a store that cannot push: reads [`Storage::change_token`] every `every` until every receiver has
/// gone. A failed read marks the feed degraded until one answers again.
pub(crate) fn polling_feed(storage: std::sync::Arc<dyn Storage>, every: Duration) -> ChangeFeed {
    let (tx, rx) = watch::channel(FeedState::new());
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut attempts = 0u32;
        loop {
            tokio::select! {
                () = tx.closed() => return,
                _ = tick.tick() => {}
            }
            match storage.change_token().await {
                Ok(token) => {
                    attempts = 0;
                    tx.send_if_modified(|s| s.read(token));
                }
                Err(e) => {
                    attempts += 1;
                    tx.send_modify(|s| s.failed(e.to_string(), attempts));
                }
            }
        }
    });
    ChangeFeed::new(rx)
}

/// What a busy write was doing.
pub(crate) fn writing(name: &str) -> String {
    format!("writing the row {name:?}")
}

pub(crate) fn removing(name: &str) -> String {
    format!("deleting the row {name:?}")
}
