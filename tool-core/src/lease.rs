//! The lease a call that runs once holds on its key (see [`crate::once`]).

/// A runner's claim on a key, from [`Begin::Run`](crate::once::Begin::Run): whoever holds the current lease of a
/// key, and only they, may finish, abandon or renew it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    key: String,
    token: String,
    expires_at_ms: u64,
}

impl Lease {
    /// The lease `token` on `key`, expiring at `expires_at_ms` (for [`EffectLedger`](crate::once::EffectLedger) implementations).
    pub fn new(key: impl Into<String>, token: impl Into<String>, expires_at_ms: u64) -> Lease {
        Lease { key: key.into(), token: token.into(), expires_at_ms }
    }

    /// The key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// What tells this lease from the key's other leases: unique, not secret.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// When it expires, in milliseconds since the Unix epoch (the ledger's clock).
    pub fn expires_at_ms(&self) -> u64 {
        self.expires_at_ms
    }
}
