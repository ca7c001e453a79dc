//! The cache of verified bearer tokens that [`JwtVerifier`](super::JwtVerifier) and
//! [`IntrospectionVerifier`](super::IntrospectionVerifier) share: each token's principal by a keyed 128-bit digest of
//! the token (never the token itself), until a deadline, at most a given number of them.
//!
//! The digest is SipHash-2-4 with 128-bit output under a key drawn at random for each cache: a pseudorandom
//! function, so that without the key nobody can make a token whose digest is another's (the chance that two given
//! tokens share one is 2^-128), and about ten times cheaper than SHA-256 on a token of some hundred bytes, which
//! matters because every request on a protected server computes one.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant, SystemTime};

use siphasher::sip128::{Hasher128, SipHasher24};

/// A token's key in a [`TokenCache`]: its keyed digest under that cache's key.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(super) struct TokenKey(u128);

/// The SHA-256 digest of a document (a JWKS), to tell a changed one from the same.
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
    /// The SipHash key of [`key`](TokenCache::key), random for each cache.
    sip: (u64, u64),
    inner: Mutex<Inner>,
}

struct Inner {
    entries: HashMap<TokenKey, Entry>,
    /// Refused tokens, by the same key: why, and until when the refusal holds without asking again.
    refusals: HashMap<TokenKey, (super::TokenError, Instant)>,
    generation: u64,
}

/// A verified token's principal, and until when it may be used without verifying the token again.
struct Entry {
    principal: Arc<super::Principal>,
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
        let mut seed = [0u8; 16];
        let sip = match getrandom::fill(&mut seed) {
            Ok(()) => (
                u64::from_le_bytes([seed[0], seed[1], seed[2], seed[3], seed[4], seed[5], seed[6], seed[7]]),
                u64::from_le_bytes([seed[8], seed[9], seed[10], seed[11], seed[12], seed[13], seed[14], seed[15]]),
            ),
            // Without the system's randomness (never seen on the platforms served): the standard library's
            // per-process random hash state, still unknown to any client.
            Err(_) => {
                let state = std::collections::hash_map::RandomState::new();
                (state.hash_one(0u8), state.hash_one(1u8))
            }
        };
        let inner = Inner { entries: HashMap::new(), refusals: HashMap::new(), generation: 0 };
        TokenCache { capacity, sip, inner: Mutex::new(inner) }
    }

    /// The key of `token` in this cache.
    pub(super) fn key(&self, token: &str) -> TokenKey {
        let mut hasher = SipHasher24::new_with_keys(self.sip.0, self.sip.1);
        hasher.write(token.as_bytes());
        TokenKey(hasher.finish128().as_u128())
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

    /// The principal cached for the token whose key is `key`, if it is still fresh; a stale entry is dropped.
    pub(super) fn lookup(&self, key: &TokenKey) -> Option<Arc<super::Principal>> {
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

    /// Keeps `principal` for the token whose key is `key` for `keep` from now, and never past `not_after` by
    /// the wall clock; nothing when `keep` is zero, the cache keeps nothing, or the cache was cleared since
    /// `generation`.
    pub(super) fn remember(
        &self,
        generation: u64,
        key: TokenKey,
        principal: &Arc<super::Principal>,
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

    /// Why the token whose key is `key` was refused, while that refusal holds; a stale one is dropped.
    pub(super) fn lookup_refusal(&self, key: &TokenKey) -> Option<super::TokenError> {
        if self.capacity == 0 {
            return None;
        }
        let mut inner = self.lock();
        let (error, until) = inner.refusals.get(key)?;
        if *until > Instant::now() {
            return Some(error.clone());
        }
        inner.refusals.remove(key);
        None
    }

    /// Keeps `error` as the answer for the token whose key is `key` for `keep` from now; nothing when `keep` is
    /// zero or the cache keeps nothing. At most `capacity` refusals are kept (apart from the verified tokens):
    /// when full, stale ones are dropped, then the one that ends first.
    pub(super) fn remember_refusal(&self, key: TokenKey, error: &super::TokenError, keep: Duration) {
        if self.capacity == 0 || keep.is_zero() {
            return;
        }
        let now = Instant::now();
        let mut inner = self.lock();
        let refusals = &mut inner.refusals;
        if refusals.len() >= self.capacity && !refusals.contains_key(&key) {
            refusals.retain(|_, (_, until)| *until > now);
            while refusals.len() >= self.capacity {
                let Some(first) = refusals.iter().min_by_key(|(_, (_, until))| *until).map(|(k, _)| *k) else { break };
                refusals.remove(&first);
            }
        }
        refusals.insert(key, (error.clone(), now + keep));
    }

    /// Refusals kept now (stale ones included until they are dropped).
    pub(super) fn refusals(&self) -> usize {
        self.lock().refusals.len()
    }

    /// Drops every entry and refusal and starts a new generation.
    pub(super) fn clear(&self) {
        let mut inner = self.lock();
        inner.entries.clear();
        inner.refusals.clear();
        inner.generation = inner.generation.wrapping_add(1);
    }
}

#[cfg(test)]
mod tests {
    use super::super::Principal;
    use super::*;

    fn p(subject: &str) -> Arc<Principal> {
        Arc::new(Principal::new(subject, Vec::<String>::new()))
    }

    #[test]
    fn bounded_and_drops_the_first_to_expire() {
        let cache = TokenCache::new(2);
        let g = cache.generation();
        cache.remember(g, cache.key("t1"), &p("a"), Duration::from_secs(10), None);
        cache.remember(g, cache.key("t2"), &p("b"), Duration::from_secs(60), None);
        cache.remember(g, cache.key("t3"), &p("c"), Duration::from_secs(30), None);
        assert_eq!(cache.len(), 2);
        assert!(cache.lookup(&cache.key("t1")).is_none(), "the first to expire went");
        assert_eq!(cache.lookup(&cache.key("t2")).unwrap().subject, "b");
        assert_eq!(cache.lookup(&cache.key("t3")).unwrap().subject, "c");
        cache.remember(g, cache.key("t4"), &p("d"), Duration::ZERO, None);
        assert!(cache.lookup(&cache.key("t4")).is_none(), "nothing kept for no time");
        let none = TokenCache::new(0);
        none.remember(none.generation(), none.key("t1"), &p("a"), Duration::from_secs(10), None);
        assert_eq!(none.len(), 0);
    }

    #[test]
    fn refusals_are_bounded_and_expire() {
        let cache = TokenCache::new(2);
        let refused = super::super::TokenError::new("the token is not active");
        for t in ["r1", "r2", "r3"] {
            cache.remember_refusal(cache.key(t), &refused, Duration::from_secs(60));
        }
        assert_eq!(cache.refusals(), 2);
        assert!(cache.lookup_refusal(&cache.key("r1")).is_none(), "the first to end went");
        assert_eq!(cache.lookup_refusal(&cache.key("r3")), Some(refused.clone()));
        assert!(cache.lookup(&cache.key("r3")).is_none(), "a refusal is no principal");
        cache.remember_refusal(cache.key("r4"), &refused, Duration::from_nanos(1));
        std::thread::sleep(Duration::from_millis(1));
        assert!(cache.lookup_refusal(&cache.key("r4")).is_none());
        cache.clear();
        assert_eq!(cache.refusals(), 0);
    }

    #[test]
    fn the_wall_clock_bound_holds_whatever_the_monotonic_one_says() {
        let cache = TokenCache::new(4);
        let past = SystemTime::now() - Duration::from_secs(1);
        cache.remember(cache.generation(), cache.key("t"), &p("a"), Duration::from_secs(60), Some(past));
        assert!(cache.lookup(&cache.key("t")).is_none());
        assert_eq!(cache.len(), 0, "the stale entry is dropped");
    }

    #[test]
    fn a_clear_drops_everything_and_what_began_before_it() {
        let cache = TokenCache::new(4);
        let before = cache.generation();
        cache.remember(before, cache.key("t1"), &p("a"), Duration::from_secs(60), None);
        cache.clear();
        assert_eq!(cache.len(), 0);
        cache.remember(before, cache.key("t2"), &p("b"), Duration::from_secs(60), None);
        assert!(cache.lookup(&cache.key("t2")).is_none(), "verified against what the clear made obsolete");
        cache.remember(cache.generation(), cache.key("t2"), &p("b"), Duration::from_secs(60), None);
        assert_eq!(cache.lookup(&cache.key("t2")).unwrap().subject, "b");
    }
}
