//! Rate limits of the Streamable HTTP server: token buckets (GCRA) per client, and per client and tool.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::hash::Hash;
use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use governor::clock::{Clock, MonotonicClock};
use governor::nanos::Nanos;
use governor::state::StateStore;
use governor::state::keyed::{HashMapStateStore, ShrinkableKeyedStateStore};

use super::admission::client_key;

/// The JSON-RPC error code of a request refused by a rate limit (keel's, in the range JSON-RPC leaves to servers).
pub const RATE_LIMITED: i32 = -32029;

/// The default cap on the clients one limit tracks at once. See [`RateLimits::max_clients`].
pub const DEFAULT_MAX_RATE_LIMITED_CLIENTS: usize = 65_536;

/// How many checks of one limit pass between two sweeps of the entries whose bucket has refilled.
const SWEEP_EVERY: u64 = 4096;

/// The longest a full limit waits between two sweeps made for a client it cannot track; it sweeps more often only
/// when its buckets refill faster (its quota's replenish interval).
const FULL_SWEEP_INTERVAL: Duration = Duration::from_secs(1);

/// How many requests a client may make, and how fast it gets them back: a bucket of `burst` requests (by default
/// the count given to the constructor), refilled by one request each [`Quota::replenish_interval`].
///
/// ```
/// use std::num::NonZeroU32;
/// use std::time::Duration;
/// use keel_tools_mcp::http::Quota;
///
/// // 600 requests a minute, at most 20 at once.
/// let quota = Quota::per_minute(NonZeroU32::new(600).unwrap()).burst(NonZeroU32::new(20).unwrap());
/// assert_eq!(quota.replenish_interval(), Duration::from_millis(100));
/// // One request every 10 seconds.
/// let slow = Quota::with_period(Duration::from_secs(10)).unwrap();
/// assert_eq!(slow.burst_size().get(), 1);
/// ```
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Quota(governor::Quota);

impl fmt::Debug for Quota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Quota")
            .field("burst", &self.burst_size())
            .field("replenish_interval", &self.replenish_interval())
            .finish()
    }
}

impl Quota {
    /// `n` requests a second, all of them at once if need be.
    pub const fn per_second(n: NonZeroU32) -> Quota {
        Quota(governor::Quota::per_second(n))
    }

    /// `n` requests a minute, all of them at once if need be.
    pub const fn per_minute(n: NonZeroU32) -> Quota {
        Quota(governor::Quota::per_minute(n))
    }

    /// `n` requests an hour, all of them at once if need be.
    pub const fn per_hour(n: NonZeroU32) -> Quota {
        Quota(governor::Quota::per_hour(n))
    }

    /// One request each `every`, one at a time; `None` when `every` is zero.
    pub fn with_period(every: Duration) -> Option<Quota> {
        governor::Quota::with_period(every).map(Quota)
    }

    /// The most requests a client may make at once, the refill rate unchanged.
    #[must_use]
    pub const fn burst(self, burst: NonZeroU32) -> Quota {
        Quota(self.0.allow_burst(burst))
    }

    /// The most requests a client may make at once.
    pub const fn burst_size(&self) -> NonZeroU32 {
        self.0.burst_size()
    }

    /// How long the bucket takes to get one request back.
    pub const fn replenish_interval(&self) -> Duration {
        self.0.replenish_interval()
    }
}

/// The rate limits of an MCP HTTP server ([`HttpConfig::rate_limits`](super::HttpConfig::rate_limits)): one for
/// every request of a client, and one for each limited tool's calls by a client.
///
/// A client is the principal's subject on a protected server ([`HttpConfig::auth`](super::HttpConfig::auth)), and
/// the client's IP address on another. [`RateLimits::per_principal`] counts every JSON-RPC request a client sends
/// (`initialize`, `tools/list`, `tools/call`, ...); [`RateLimits::per_tool`] counts the `tools/call` requests of one
/// tool, per client. A request past a limit is answered `429 Too Many Requests` with `Retry-After` (whole seconds,
/// rounded up, at least 1) and a JSON-RPC error [`RATE_LIMITED`] carrying the request's id, before anything of it is
/// done: no session is opened, no slot is taken, no handler runs. A client's answers to the server's own requests,
/// its notifications, and `GET`/`DELETE` requests are never counted. A request refused by the tool's limit has
/// counted against the client's own; one refused by the client's limit has not counted against the tool's.
///
/// The state kept is one small entry per client seen recently: an entry whose bucket has refilled is dropped, and
/// at most [`RateLimits::max_clients`] are kept per limit. Past that cap (a flood of distinct clients, none of them
/// idle for long), a request of a client not yet tracked is answered `503 Service Unavailable` with `Retry-After`
/// until entries expire, so that no flood of keys grows the server's memory without bound.
///
/// Behind a reverse proxy every client has the proxy's address: there, protect the server (each principal is then
/// counted apart) or limit clients at the proxy. A service mounted in another HTTP stack is given the client's
/// address as a [`SocketAddr`] or [`IpAddr`] in each request's extensions; requests without one share one bucket.
///
/// ```
/// use std::num::NonZeroU32;
/// use keel_tools_mcp::HttpConfig;
/// use keel_tools_mcp::http::{Quota, RateLimits};
///
/// let n = |n| NonZeroU32::new(n).unwrap();
/// let config = HttpConfig::default().rate_limits(
///     RateLimits::new()
///         .per_principal(Quota::per_minute(n(600)).burst(n(30)))
///         .per_tool("reports.generate", Quota::per_minute(n(2))),
/// );
/// # let _ = config;
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub struct RateLimits {
    per_principal: Option<Quota>,
    per_tool: BTreeMap<String, Quota>,
    max_clients: usize,
}

impl Default for RateLimits {
    fn default() -> Self {
        RateLimits::new()
    }
}

impl RateLimits {
    /// No limits.
    pub fn new() -> RateLimits {
        RateLimits { per_principal: None, per_tool: BTreeMap::new(), max_clients: DEFAULT_MAX_RATE_LIMITED_CLIENTS }
    }

    /// Every JSON-RPC request of one client (its principal's subject, or its IP address on a server that is not
    /// protected) counts against `quota`.
    pub fn per_principal(mut self, quota: Quota) -> Self {
        self.per_principal = Some(quota);
        self
    }

    /// Each client's `tools/call` requests of the tool named `tool` (as the client calls it) count against
    /// `quota`, on top of [`RateLimits::per_principal`]. Setting a tool twice keeps the last quota. A call of a
    /// tool that the client may not call is refused as it would be without the limit, and not counted.
    pub fn per_tool(mut self, tool: impl Into<String>, quota: Quota) -> Self {
        self.per_tool.insert(tool.into(), quota);
        self
    }

    /// The most clients each limit tracks at once (default [`DEFAULT_MAX_RATE_LIMITED_CLIENTS`], at least 1). A
    /// client stops being tracked once its bucket has refilled; past the cap, a request of a client not tracked
    /// is answered `503` with `Retry-After`.
    pub fn max_clients(mut self, max: usize) -> Self {
        self.max_clients = max.max(1);
        self
    }

    /// The quota of every request of a client, if set.
    pub fn get_per_principal(&self) -> Option<Quota> {
        self.per_principal
    }

    /// The quota of the calls of `tool`, if set.
    pub fn get_per_tool(&self, tool: &str) -> Option<Quota> {
        self.per_tool.get(tool).copied()
    }

    /// Whether no limit is set.
    pub fn is_empty(&self) -> bool {
        self.per_principal.is_none() && self.per_tool.is_empty()
    }
}

/// Whom a request is counted for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) enum Client {
    /// A principal, by its subject (a protected server).
    #[cfg_attr(not(feature = "auth"), allow(dead_code))]
    Subject(Arc<str>),
    /// A client address (a server that is not protected): an IPv4 address, or an IPv6 /64
    /// ([`client_key`](super::admission::client_key)).
    Address(IpAddr),
    /// A request whose client is unknown (a service mounted in a stack that gives no address): all such requests
    /// share one bucket.
    Unknown,
}

impl Client {
    /// The client of a request: its principal's subject, else the address the connection came from
    /// ([`SocketAddr`] or [`IpAddr`] in the request's extensions), an IPv6 one by its /64.
    pub(super) fn of(parts: &hyper::http::request::Parts) -> Client {
        #[cfg(feature = "auth")]
        if let Some(principal) = parts.extensions.get::<std::sync::Arc<crate::caller::Principal>>() {
            return Client::Subject(Arc::from(principal.subject.as_str()));
        }
        if let Some(addr) = parts.extensions.get::<SocketAddr>() {
            return Client::Address(client_key(addr.ip()));
        }
        match parts.extensions.get::<IpAddr>() {
            Some(ip) => Client::Address(client_key(*ip)),
            None => Client::Unknown,
        }
    }
}

/// A governor state store the limit shares with its limiter, so that it can tell a client tracked from a new one.
struct Shared<K: Hash + Eq + Clone>(Arc<HashMapStateStore<K>>);

impl<K: Hash + Eq + Clone> StateStore for Shared<K> {
    type Key = K;

    fn measure_and_replace<T, F, E>(&self, key: &K, f: F) -> Result<T, E>
    where
        F: Fn(Option<Nanos>) -> Result<(T, Nanos), E>,
    {
        self.0.measure_and_replace(key, f)
    }
}

impl<K: Hash + Eq + Clone> ShrinkableKeyedStateStore<K> for Shared<K> {
    fn retain_recent(&self, drop_below: Nanos) {
        self.0.retain_recent(drop_below);
    }

    fn shrink_to_fit(&self) {
        self.0.shrink_to_fit();
    }

    fn len(&self) -> usize {
        ShrinkableKeyedStateStore::len(&*self.0)
    }

    fn is_empty(&self) -> bool {
        ShrinkableKeyedStateStore::is_empty(&*self.0)
    }
}

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Refusal {
    /// The client's bucket is empty: it gets a request back after this long.
    Wait(Duration),
    /// The limit tracks as many clients as it may, and this one is not among them.
    Full,
}

/// One limit: a bucket per client, at most `max` clients.
struct Limit {
    limiter: governor::RateLimiter<Client, Shared<Client>, MonotonicClock>,
    store: Arc<HashMapStateStore<Client>>,
    max: usize,
    checks: AtomicU64,
    /// When the last sweep for a client that found the limit full began, in nanoseconds since `start`;
    /// `u64::MAX` before the first.
    last_full_sweep: AtomicU64,
    /// The least time between two such sweeps.
    full_sweep_interval: Duration,
    start: Instant,
    #[cfg(test)]
    full_sweeps: AtomicU64,
}

impl Limit {
    fn new(quota: Quota, max: usize) -> Limit {
        let store: Arc<HashMapStateStore<Client>> = Arc::new(HashMapStateStore::new(HashMap::default()));
        let limiter = governor::RateLimiter::new(quota.0, Shared(store.clone()), MonotonicClock);
        let start = Instant::now();
        Limit {
            limiter,
            store,
            max,
            checks: AtomicU64::new(0),
            last_full_sweep: AtomicU64::new(u64::MAX),
            full_sweep_interval: quota.replenish_interval().min(FULL_SWEEP_INTERVAL),
            start,
            #[cfg(test)]
            full_sweeps: AtomicU64::new(0),
        }
    }

    /// Whether a sweep for a client that found the limit full may run now: at most one each
    /// `full_sweep_interval`, so that a flood of new clients against a full table costs one sweep of it per
    /// interval, not one per request.
    fn full_sweep_due(&self) -> bool {
        let now = u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX - 1);
        let last = self.last_full_sweep.load(Ordering::Acquire);
        let interval = u64::try_from(self.full_sweep_interval.as_nanos()).unwrap_or(u64::MAX);
        if last != u64::MAX && now.saturating_sub(last) < interval {
            return false;
        }
        // One of the requests that find it due sweeps; the others go on without.
        self.last_full_sweep.compare_exchange(last, now, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }

    /// Takes one request from `client`'s bucket, or says why not.
    fn check(&self, client: &Client) -> Result<(), Refusal> {
        if self.checks.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
            self.limiter.retain_recent();
        }
        let full = {
            let map = self.store.lock();
            map.len() >= self.max && !map.contains_key(client)
        };
        if full {
            if !self.full_sweep_due() {
                return Err(Refusal::Full);
            }
            #[cfg(test)]
            self.full_sweeps.fetch_add(1, Ordering::Relaxed);
            self.limiter.retain_recent();
            self.limiter.shrink_to_fit();
            let map = self.store.lock();
            if map.len() >= self.max && !map.contains_key(client) {
                return Err(Refusal::Full);
            }
        }
        self.limiter
            .check_key(client)
            .map_err(|not_until| Refusal::Wait(not_until.wait_time_from(self.limiter.clock().now())))
    }

    #[cfg(test)]
    fn tracked(&self) -> usize {
        self.store.lock().len()
    }
}

/// The limits of one service, ready to check.
pub(super) struct Limiters {
    per_principal: Option<Limit>,
    per_tool: HashMap<Box<str>, Limit>,
}

impl fmt::Debug for Limiters {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Limiters")
            .field("per_principal", &self.per_principal.is_some())
            .field("per_tool", &self.per_tool.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl Limiters {
    /// The limiters of `limits`, or `None` when it sets none.
    pub(super) fn new(limits: &RateLimits) -> Option<Limiters> {
        if limits.is_empty() {
            return None;
        }
        Some(Limiters {
            per_principal: limits.per_principal.map(|q| Limit::new(q, limits.max_clients)),
            per_tool: limits
                .per_tool
                .iter()
                .map(|(tool, q)| (Box::from(tool.as_str()), Limit::new(*q, limits.max_clients)))
                .collect(),
        })
    }

    /// Takes one request of `client` from its principal limit, if there is one.
    pub(super) fn check_principal(&self, client: &Client) -> Result<(), Refusal> {
        self.per_principal.as_ref().map_or(Ok(()), |limit| limit.check(client))
    }

    /// Whether `tool` has a limit of its own.
    pub(super) fn limits_tool(&self, tool: &str) -> bool {
        self.per_tool.contains_key(tool)
    }

    /// Takes one call of `tool` by `client` from the tool's limit, if it has one.
    pub(super) fn check_tool(&self, tool: &str, client: &Client) -> Result<(), Refusal> {
        self.per_tool.get(tool).map_or(Ok(()), |limit| limit.check(client))
    }
}

/// A wait as `Retry-After` seconds: rounded up, at least 1.
pub(super) fn retry_after_secs(wait: Duration) -> u64 {
    (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(n: u32) -> NonZeroU32 {
        NonZeroU32::new(n).unwrap()
    }

    #[test]
    fn retry_after_is_whole_seconds_rounded_up_and_at_least_one() {
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1000)), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1001)), 2);
        assert_eq!(retry_after_secs(Duration::from_secs(59)), 59);
    }

    #[test]
    fn each_client_has_its_own_bucket() {
        let limit = Limit::new(Quota::per_minute(n(2)), 16);
        let (a, b) = (Client::Subject("alice".into()), Client::Address("127.0.0.1".parse().unwrap()));
        assert_eq!(limit.check(&a), Ok(()));
        assert_eq!(limit.check(&a), Ok(()));
        match limit.check(&a) {
            Err(Refusal::Wait(wait)) => assert!(wait > Duration::from_secs(25) && wait <= Duration::from_secs(30)),
            other => panic!("alice's third request in a minute: {other:?}"),
        }
        assert_eq!(limit.check(&b), Ok(()), "another client is not affected");
        assert_eq!(limit.check(&Client::Subject("127.0.0.1".into())), Ok(()), "a subject is never an address");
    }

    #[test]
    fn the_clients_tracked_are_capped_and_refilled_buckets_are_dropped() {
        // A bucket of one, refilled every 20 ms: an entry is indistinguishable from a new one 20 ms after its use.
        let limit = Limit::new(Quota::with_period(Duration::from_millis(20)).unwrap(), 3);
        let ip = |i: u8| Client::Address(IpAddr::from([10, 0, 0, i]));
        for i in 0..3 {
            assert_eq!(limit.check(&ip(i)), Ok(()));
        }
        assert_eq!(limit.check(&ip(3)), Err(Refusal::Full), "a fourth client is not tracked");
        assert!(matches!(limit.check(&ip(0)), Err(Refusal::Wait(_))), "a tracked one is still limited");
        assert_eq!(limit.tracked(), 3);
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(limit.check(&ip(3)), Ok(()), "the refilled entries made room");
        assert_eq!(limit.tracked(), 1, "only the new client is tracked");
        for i in 100..=255 {
            let _ = limit.check(&ip(i));
        }
        assert!(limit.tracked() <= 3);
    }

    #[test]
    fn a_full_table_is_swept_at_most_once_an_interval_however_many_new_clients_come() {
        // Buckets that take a minute to refill: nothing can be dropped within this test.
        let limit = Limit::new(Quota::per_minute(n(1)), 64);
        let ip = |i: u32| Client::Address(IpAddr::from((0x0a00_0000 + i).to_be_bytes()));
        for i in 0..64 {
            assert_eq!(limit.check(&ip(i)), Ok(()));
        }
        for i in 64..10_064 {
            assert_eq!(limit.check(&ip(i)), Err(Refusal::Full));
        }
        let sweeps = limit.full_sweeps.load(Ordering::Relaxed);
        assert!((1..=2).contains(&sweeps), "10,000 new clients against a full table: {sweeps} sweeps");
    }

    #[test]
    fn an_ipv6_client_is_limited_by_its_64() {
        let limit = Limit::new(Quota::per_minute(n(1)), 16);
        let client = |ip: &str| {
            let mut parts = hyper::Request::new(()).into_parts().0;
            parts.extensions.insert(SocketAddr::new(ip.parse().unwrap(), 443));
            Client::of(&parts)
        };
        assert_eq!(client("2001:db8::1"), client("2001:db8::ffff:1"));
        assert_eq!(limit.check(&client("2001:db8::1")), Ok(()));
        assert!(
            matches!(limit.check(&client("2001:db8::abcd:1")), Err(Refusal::Wait(_))),
            "a new address of the same /64 shares its bucket"
        );
        assert_eq!(limit.check(&client("2001:db8:0:1::1")), Ok(()), "another /64 has its own");
        assert_eq!(client("::ffff:10.0.0.1"), Client::Address(IpAddr::from([10, 0, 0, 1])));
    }

    #[test]
    fn limits_are_only_built_when_set() {
        assert!(Limiters::new(&RateLimits::new()).is_none());
        let limits = RateLimits::new().per_tool("slow", Quota::per_second(n(1))).max_clients(0);
        let limiters = Limiters::new(&limits).unwrap();
        assert!(limiters.limits_tool("slow") && !limiters.limits_tool("fast"));
        let alice = Client::Subject("alice".into());
        assert_eq!(limiters.check_principal(&alice), Ok(()), "no principal limit");
        assert_eq!(limiters.check_tool("fast", &alice), Ok(()));
        assert_eq!(limiters.check_tool("slow", &alice), Ok(()));
        assert!(matches!(limiters.check_tool("slow", &alice), Err(Refusal::Wait(_))));
    }
}
