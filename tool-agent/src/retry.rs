//! [`RetryPolicy`]: which failed model requests the loop tries again, and how long it waits first.

use std::time::Duration;

use crate::model::ModelError;

/// Which failed model requests [`Agent`](crate::Agent) tries again, and how long it waits first.
///
/// Retried: a refused connection, a timeout, a connection that broke before the answer was read, a streamed answer
/// cut short or reporting that the provider is overloaded (Anthropic's `overloaded_error` event), and the statuses
/// 408, 409, 429 and 5xx (Anthropic's 529 `overloaded_error` among them). Nothing else is: a 400 or a 401 would
/// fail again, and a malformed answer is the model's, not the network's.
///
/// The wait before retry `n` (from 1) is the one the server asked for, when it named one (`retry-after-ms`,
/// `Retry-After`, on a 429 OpenAI's and Anthropic's rate-limit reset headers, Gemini's `RetryInfo` in the error
/// body; a wait of more than a day, however large the number, reads as a day, and a negative or unreadable one as none);
/// otherwise `initial_backoff · 2^(n-1)`, at most
/// `max_backoff`, less up to a quarter at random (`jitter`) so that many clients do not come back at once. The waits
/// of one turn add up to at most `max_wait`: a retry that would wait past it is not made, and the turn fails with
/// the last error (which names the wait the server asked for). `max_wait` is thus the ceiling of any wait, whatever
/// a server asks.
///
/// A retry never runs a tool call twice: a turn's calls run only after its whole answer has arrived and been
/// read, and a failed request has none.
///
/// ```
/// use std::time::Duration;
/// use keel_tools_agent::RetryPolicy;
///
/// let patient = RetryPolicy::default().max_retries(5).max_wait(Duration::from_secs(120));
/// assert_eq!((patient.max_retries, patient.max_wait), (5, Duration::from_secs(120)));
/// assert_eq!(RetryPolicy::none().max_retries, 0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct RetryPolicy {
    /// The most retries of one model turn (default 2, as the providers' own SDKs do).
    pub max_retries: u32,
    /// The first backoff when the server names no wait (default 500 ms).
    pub initial_backoff: Duration,
    /// The longest backoff (default 8 s).
    pub max_backoff: Duration,
    /// The most the waits of one turn add up to (default 60 s).
    pub max_wait: Duration,
    /// Whether backoffs are shortened by up to a quarter at random (default on). A wait the server asked for is
    /// kept exactly.
    pub jitter: bool,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 2,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            max_wait: Duration::from_secs(60),
            jitter: true,
        }
    }
}

impl RetryPolicy {
    /// No retries: the first failure ends the turn.
    pub fn none() -> RetryPolicy {
        RetryPolicy { max_retries: 0, ..RetryPolicy::default() }
    }

    /// The most retries of one model turn (0: none).
    #[must_use]
    pub fn max_retries(mut self, retries: u32) -> RetryPolicy {
        self.max_retries = retries;
        self
    }

    /// The first backoff and the longest.
    #[must_use]
    pub fn backoff(mut self, initial: Duration, max: Duration) -> RetryPolicy {
        self.initial_backoff = initial;
        self.max_backoff = max;
        self
    }

    /// The most the waits of one turn add up to.
    #[must_use]
    pub fn max_wait(mut self, max_wait: Duration) -> RetryPolicy {
        self.max_wait = max_wait;
        self
    }

    /// Whether backoffs are shortened by up to a quarter at random.
    #[must_use]
    pub fn jitter(mut self, jitter: bool) -> RetryPolicy {
        self.jitter = jitter;
        self
    }

    /// Whether to retry after `error`, when `attempts` retries were made and `waited` was spent waiting: the
    /// reason (`status 429`, `connect`, ...) and the wait, or `None`.
    pub fn next(&self, error: &ModelError, attempts: u32, waited: Duration) -> Option<(String, Duration)> {
        if attempts >= self.max_retries {
            return None;
        }
        let reason = error.retry_reason()?;
        let wait = match error {
            ModelError::Status { retry_after: Some(wait), .. } => *wait,
            _ => {
                let doubling = 2u32.checked_pow(attempts).unwrap_or(u32::MAX);
                let backoff = self.initial_backoff.saturating_mul(doubling).min(self.max_backoff);
                if self.jitter { backoff.mul_f64(1.0 - 0.25 * unit_random()) } else { backoff }
            }
        };
        (waited.saturating_add(wait) <= self.max_wait).then_some((reason, wait))
    }
}

impl ModelError {
    /// Why this failure is worth trying again (`connect`, `timeout`, `connection`, `status 429`, ...), or `None`
    /// when it is not (see [`RetryPolicy`]).
    pub fn retry_reason(&self) -> Option<String> {
        match self {
            ModelError::Connect { .. } => Some("connect".into()),
            ModelError::Timeout { .. } => Some("timeout".into()),
            ModelError::Http { .. } => Some("connection".into()),
            ModelError::Stream { retryable: true, .. } => Some("stream".into()),
            ModelError::Status { status, .. } if matches!(status, 408 | 409 | 429) || *status >= 500 => {
                Some(format!("status {status}"))
            }
            _ => None,
        }
    }
}

/// A number in `[0, 1)`, different on every call (std's randomly keyed hasher over a counter; no RNG crate).
fn unit_random() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: u16, retry_after: Option<Duration>) -> ModelError {
        ModelError::Status { url: "u".into(), status: code, message: "m".into(), retry_after }
    }

    #[test]
    fn what_is_retried() {
        let p = RetryPolicy { jitter: false, ..RetryPolicy::default() };
        for code in [408, 409, 429, 500, 502, 503, 504, 529] {
            assert_eq!(p.next(&status(code, None), 0, Duration::ZERO).map(|r| r.0), Some(format!("status {code}")));
        }
        for code in [400, 401, 403, 404, 422] {
            assert_eq!(p.next(&status(code, None), 0, Duration::ZERO), None, "{code}");
        }
        assert_eq!(p.next(&ModelError::malformed("x"), 0, Duration::ZERO), None);
        assert_eq!(p.next(&ModelError::Server { message: "m".into() }, 0, Duration::ZERO), None);
        assert_eq!(p.next(&ModelError::config("x"), 0, Duration::ZERO), None);
    }

    #[test]
    fn waits_double_up_to_the_cap_and_honour_the_server() {
        let p = RetryPolicy { jitter: false, max_retries: 10, ..RetryPolicy::default() };
        let e = status(503, None);
        let waits: Vec<u64> = (0..6).map(|n| p.next(&e, n, Duration::ZERO).unwrap().1.as_millis() as u64).collect();
        assert_eq!(waits, [500, 1000, 2000, 4000, 8000, 8000]);
        let asked = status(429, Some(Duration::from_secs(3)));
        assert_eq!(p.next(&asked, 0, Duration::ZERO).unwrap().1, Duration::from_secs(3));
        // Past the budget: no retry.
        assert_eq!(p.next(&asked, 0, Duration::from_secs(58)), None);
        assert_eq!(p.next(&status(429, Some(Duration::from_secs(61))), 0, Duration::ZERO), None);
        assert_eq!(p.next(&e, 10, Duration::ZERO), None, "max_retries");
        assert_eq!(RetryPolicy::none().next(&e, 0, Duration::ZERO), None);
    }

    #[test]
    fn jitter_shortens_by_at_most_a_quarter() {
        let p = RetryPolicy::default();
        let e = status(500, None);
        let waits: Vec<Duration> = (0..200).map(|_| p.next(&e, 1, Duration::ZERO).unwrap().1).collect();
        assert!(
            waits.iter().all(|w| *w > Duration::from_millis(749) && *w <= Duration::from_millis(1000)),
            "{waits:?}"
        );
        assert!(waits.iter().any(|w| *w != waits[0]), "the waits vary");
    }
}
