//! The pauses between the attempts of an operation that found its store busy, or its connection lost.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::error::CatalogError;

/// The first pause between two attempts of a busy operation; each later pause doubles, up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(1);
const MAX_PAUSE: Duration = Duration::from_millis(50);

/// The pauses between the attempts of one busy operation: doubling from [`FIRST_PAUSE`] to [`MAX_PAUSE`] (or the
/// pauses given), each shortened by up to half at random (so that two processes do not retry in step), all within
/// the bound.
pub(crate) struct Backoff {
    start: Instant,
    limit: Duration,
    attempts: u32,
    pause: Duration,
    max: Duration,
    seed: u64,
}

impl Backoff {
    pub(crate) fn new(limit: Duration) -> Backoff {
        Backoff::with_pauses(limit, FIRST_PAUSE, MAX_PAUSE)
    }

    /// Pauses from `first` doubling to `max`, within `limit` (`Duration::MAX`: no bound).
    pub(crate) fn with_pauses(limit: Duration, first: Duration, max: Duration) -> Backoff {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
        let seed = (nanos as u64) ^ (u64::from(std::process::id()) << 32) | 1;
        Backoff { start: Instant::now(), limit, attempts: 0, pause: first, max, seed }
    }

    /// Attempts that failed so far.
    #[cfg(feature = "postgres")]
    pub(crate) fn attempts(&self) -> u32 {
        self.attempts
    }

    /// After a busy attempt: how long to pause before the next one, or `None` when the bound is spent.
    pub(crate) fn next(&mut self) -> Option<Duration> {
        self.attempts += 1;
        let elapsed = self.start.elapsed();
        if elapsed >= self.limit {
            return None;
        }
        // xorshift64: enough to spread retries, no cryptography needed.
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        let full = self.pause.as_micros() as u64;
        let jittered = Duration::from_micros(full / 2 + self.seed % (full / 2 + 1));
        self.pause = self.pause.saturating_mul(2).min(self.max);
        Some(jittered.min(self.limit - elapsed))
    }

    /// `busy`, once the bound is spent; `source` is the error of the last attempt.
    pub(crate) fn error(
        &self,
        context: String,
        source: Option<Arc<dyn std::error::Error + Send + Sync + 'static>>,
    ) -> CatalogError {
        CatalogError::Busy { context, waited: self.start.elapsed(), attempts: self.attempts, source }
    }
}
