//! The cache of verified bearer tokens that [`JwtVerifier`](super::JwtVerifier) and
//! [`IntrospectionVerifier`](super::IntrospectionVerifier) share: each token's principal by the SHA-256 digest of
//! the token (never the token itself), until a deadline, at most a given number of them.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime};

/// The SHA-256 digest of a token: the cache's key.
pub(super) fn digest(token: &str) -> [u8; 32] {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, token.as_bytes());
    let mut key = [0u8; 32];
    key.copy_from_slice(digest.as_ref());
    key
}

/// Verified tokens' principals, bounded. When full, expired entries are dropped, then the one that expires first.
///
/// Every entry is bounded twice: by the monotonic clock (`keep` from when it was stored, which also orders
/// eviction) and, when the token has an expiry, by the wall clock (`not_after`), so that a wall clock set forward
/// past the token's `exp` stops the cached token as it would stop the token itself.
///
/// A [`clear`](TokenCache::clear) starts a new generation: a verification that began before it (with what the
/// clear made obsolete, such as a key set since rotated) stores nothing after it.
pub(super) struct TokenCache {
    capacity: usize,
    inner: Mutex<Inner>,
}

struct Inner {
    entries: HashMap<[u8; 32], Entry>,
    generation: u64,
}

/// A verified token's principal, and until when it may be used without verifying the token again.
struct Entry {
    principal: super::Principal,
    until: Instant,
    not_after: Option<SystemTime>,
}

impl Entry {
    fn fresh(&self, now: Instant) -> bool {
        self.until > now && self.not_after.is_none_or(|t| SystemTime::now() < t)
    }
}

impl TokenCache {
    /// An empty cache that keeps at most `capacity` tokens (`0`: none).
    pub(super) fn new(capacity: usize) -> TokenCache {
        TokenCache { capacity, inner: Mutex::new(Inner { entries: HashMap::new(), generation: 0 }) }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The most tokens kept at once.
    pub(super) fn capacity(&self) -> usize {
        self.capacity
    }

    /// Tokens in the cache now (expired ones included until they are dropped).
    pub(super) fn len(&self) -> usize {
        self.lock().entries.len()
    }

    /// The current generation, to pass to [`remember`](TokenCache::remember) once the token has verified.
    pub(super) fn generation(&self) -> u64 {
        self.lock().generation
    }

    /// The principal cached for the token whose digest is `key`, if it is still fresh; a stale entry is dropped.
    pub(super) fn lookup(&self, key: &[u8; 32]) -> Option<super::Principal> {
        if self.capacity == 0 {
            return None;
        }
        let mut inner = self.lock();
        let entry = inner.entries.get(key)?;
        if entry.fresh(Instant::now()) {
            return Some(entry.principal.clone());
        }
        inner.entries.remove(key);
        None
    }

    /// Keeps `principal` for the token whose digest is `key` for `keep` from now, and never past `not_after` by
    /// the wall clock; nothing when `keep` is zero, the cache keeps nothing, or the cache was cleared since
    /// `generation`.
    pub(super) fn remember(
        &self,
        generation: u64,
        key: [u8; 32],
        principal: &super::Principal,
        keep: Duration,
        not_after: Option<SystemTime>,
    ) {
        if self.capacity == 0 || keep.is_zero() {
            return;
        }
        let now = Instant::now();
        let mut inner = self.lock();
        if inner.generation != generation {
            return;
        }
        let entries = &mut inner.entries;
        if entries.len() >= self.capacity && !entries.contains_key(&key) {
            entries.retain(|_, entry| entry.fresh(now));
            while entries.len() >= self.capacity {
                let Some(first) = entries.iter().min_by_key(|(_, entry)| entry.until).map(|(k, _)| *k) else { break };
                entries.remove(&first);
            }
        }
        entries.insert(key, Entry { principal: principal.clone(), until: now + keep, not_after });
    }

    /// Drops every entry and starts a new generation.
    pub(super) fn clear(&self) {
        let mut inner = self.lock();
        inner.entries.clear();
        inner.generation = inner.generation.wrapping_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::super::Principal;
    use super::*;

    fn p(subject: &str) -> Principal {
        Principal::new(subject, Vec::<String>::new())
    }

    #[test]
    fn bounded_and_drops_the_first_to_expire() {
        let cache = TokenCache::new(2);
        let g = cache.generation();
        cache.remember(g, digest("t1"), &p("a"), Duration::from_secs(10), None);
        cache.remember(g, digest("t2"), &p("b"), Duration::from_secs(60), None);
        cache.remember(g, digest("t3"), &p("c"), Duration::from_secs(30), None);
        assert_eq!(cache.len(), 2);
        assert!(cache.lookup(&digest("t1")).is_none(), "the first to expire went");
        assert_eq!(cache.lookup(&digest("t2")).unwrap().subject, "b");
        assert_eq!(cache.lookup(&digest("t3")).unwrap().subject, "c");
        cache.remember(g, digest("t4"), &p("d"), Duration::ZERO, None);
        assert!(cache.lookup(&digest("t4")).is_none(), "nothing kept for no time");
        let none = TokenCache::new(0);
        none.remember(none.generation(), digest("t1"), &p("a"), Duration::from_secs(10), None);
        assert_eq!(none.len(), 0);
    }

    #[test]
    fn the_wall_clock_bound_holds_whatever_the_monotonic_one_says() {
        let cache = TokenCache::new(4);
        let past = SystemTime::now() - Duration::from_secs(1);
        cache.remember(cache.generation(), digest("t"), &p("a"), Duration::from_secs(60), Some(past));
        assert!(cache.lookup(&digest("t")).is_none());
        assert_eq!(cache.len(), 0, "the stale entry is dropped");
    }

    #[test]
    fn a_clear_drops_everything_and_what_began_before_it() {
        let cache = TokenCache::new(4);
        let before = cache.generation();
        cache.remember(before, digest("t1"), &p("a"), Duration::from_secs(60), None);
        cache.clear();
        assert_eq!(cache.len(), 0);
        cache.remember(before, digest("t2"), &p("b"), Duration::from_secs(60), None);
        assert!(cache.lookup(&digest("t2")).is_none(), "verified against what the clear made obsolete");
        cache.remember(cache.generation(), digest("t2"), &p("b"), Duration::from_secs(60), None);
        assert_eq!(cache.lookup(&digest("t2")).unwrap().subject, "b");
    }
}
