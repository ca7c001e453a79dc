//! The effect stores as keel-tools-core's [`EffectLedger`]: what an executor built with
//! [`exactly_once`](keel_tools_core::executor::ExecutorBuilder::exactly_once) records its calls in.

use keel_tools_core::once::{LedgerError, LedgerFuture};

use crate::effect::StateFuture;
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

/// Each store is a ledger through its [`EffectStore`](crate::effect::EffectStore) methods. (Paths in full: without a backend,
/// the macro makes nothing, and imports for it would go unused.)
macro_rules! ledger_for {
    ($($(#[$cfg:meta])* $store:ty;)*) => {$(
        $(#[$cfg])*
        impl keel_tools_core::once::EffectLedger for $store {
            fn begin<'a>(
                &'a self,
                key: &'a str,
                fingerprint: &'a str,
                lease: std::time::Duration,
            ) -> LedgerFuture<'a, keel_tools_core::once::Begin> {
                ledger(crate::effect::EffectStore::begin(self, key, fingerprint, lease))
            }

            fn finish<'a>(
                &'a self,
                lease: &'a keel_tools_core::once::Lease,
                result: &'a serde_json::Value,
            ) -> LedgerFuture<'a, ()> {
                ledger(crate::effect::EffectStore::finish(self, lease, result))
            }

            fn abandon<'a>(&'a self, lease: &'a keel_tools_core::once::Lease) -> LedgerFuture<'a, ()> {
                ledger(crate::effect::EffectStore::abandon(self, lease))
            }

            fn renew<'a>(
                &'a self,
                lease: &'a keel_tools_core::once::Lease,
                lease_for: std::time::Duration,
            ) -> LedgerFuture<'a, keel_tools_core::once::Lease> {
                ledger(crate::effect::EffectStore::renew(self, lease, lease_for))
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
