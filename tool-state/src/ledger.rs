//! The effect stores as keel-tools-core's [`EffectLedger`]: what an executor built with
//! [`exactly_once`](keel_tools_core::executor::ExecutorBuilder::exactly_once) records its calls in.

use std::time::Duration;

use keel_tools_core::once::{Begin, EffectLedger, Lease, LedgerError, LedgerFuture};
use serde_json::Value;

use crate::effect::{EffectStore, StateFuture};
use crate::error::StateError;

impl From<StateError> for LedgerError {
    fn from(e: StateError) -> LedgerError {
        match e {
            StateError::Conflict { key, .. } => LedgerError::Conflict { key },
            StateError::LeaseLost { key } => LedgerError::LeaseLost { key },
            other => LedgerError::Store {
                code: other.code().into(),
                message: other.to_string(),
                source: Some(Box::new(other)),
            },
        }
    }
}

fn ledger<'a, T: Send + 'a>(f: StateFuture<'a, T>) -> LedgerFuture<'a, T> {
    Box::pin(async move { f.await.map_err(LedgerError::from) })
}

/// Each store is a ledger through its [`EffectStore`] methods.
macro_rules! ledger_for {
    ($($(#[$cfg:meta])* $store:ty;)*) => {$(
        $(#[$cfg])*
        impl EffectLedger for $store {
            fn begin<'a>(&'a self, key: &'a str, fingerprint: &'a str, lease: Duration) -> LedgerFuture<'a, Begin> {
                ledger(EffectStore::begin(self, key, fingerprint, lease))
            }

            fn finish<'a>(&'a self, lease: &'a Lease, result: &'a Value) -> LedgerFuture<'a, ()> {
                ledger(EffectStore::finish(self, lease, result))
            }

            fn abandon<'a>(&'a self, lease: &'a Lease) -> LedgerFuture<'a, ()> {
                ledger(EffectStore::abandon(self, lease))
            }
        }
    )*};
}

ledger_for! {
    #[cfg(feature = "sqlite")]
    crate::sqlite::SqliteEffectStore;
    #[cfg(feature = "postgres")]
    crate::postgres::PostgresEffectStore;
}
