//! How long a handler ran, for the check that it ended past its deadline and grace period.
//!
//! Where the system has one (Linux), and the deadline is at least [`COARSE_FACTOR`] times its resolution (4 ms on
//! most kernels: deadlines of 4 s and more, the default ones among them), the coarse monotonic clock is read: about
//! 5 ns a read against about 25 ns for `Instant::now` on a virtual machine, twice per call, for an error of at most
//! one resolution step, a thousandth of the deadline or less. Shorter deadlines, and other systems, use `Instant`.
//!
//! The events of a run are stamped the same way: [`unix_ms`] reads the coarse wall clock on Linux (an event's
//! `at_ms` is then within one resolution step, 4 ms on most kernels, of the moment it was logged).

use std::time::{Duration, Instant};

/// A deadline at least this many times the coarse clock's resolution is timed with the coarse clock.
pub(crate) const COARSE_FACTOR: u32 = 1000;

/// Started when a handler starts; says how long it has run, and whether past its deadline.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stopwatch(Start);

#[derive(Debug, Clone, Copy)]
enum Start {
    Precise {
        at: Instant,
        deadline: Duration,
    },
    /// The coarse clock's reading and the deadline, in nanoseconds (the deadline saturated).
    #[cfg(target_os = "linux")]
    Coarse {
        at: u64,
        deadline: u64,
    },
}

/// How a handler with a given deadline is timed (the clock, and the deadline in its unit): worked out once, when
/// the deadline is known, rather than each time a handler starts.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Timing(Clock);

#[derive(Debug, Clone, Copy)]
enum Clock {
    Precise(Duration),
    /// The deadline in nanoseconds, saturated.
    #[cfg(target_os = "linux")]
    Coarse(u64),
}

impl Timing {
    /// The timing of a handler whose deadline (timeout plus grace) is `deadline`.
    pub(crate) fn new(deadline: Duration) -> Timing {
        #[cfg(target_os = "linux")]
        if let Some(shortest) = coarse::shortest_deadline()
            && deadline >= shortest
        {
            let nanos =
                deadline.as_secs().saturating_mul(1_000_000_000).saturating_add(u64::from(deadline.subsec_nanos()));
            return Timing(Clock::Coarse(nanos));
        }
        Timing(Clock::Precise(deadline))
    }
}

impl Stopwatch {
    /// Starts timing a handler whose deadline (timeout plus grace) is `deadline`.
    #[cfg(test)]
    pub(crate) fn start(deadline: Duration) -> Stopwatch {
        Stopwatch::started(Timing::new(deadline))
    }

    /// Starts timing a handler timed as `timing` says.
    #[inline]
    pub(crate) fn started(timing: Timing) -> Stopwatch {
        match timing.0 {
            #[cfg(target_os = "linux")]
            Clock::Coarse(deadline) => Stopwatch(Start::Coarse { at: coarse::now(), deadline }),
            Clock::Precise(deadline) => Stopwatch(Start::Precise { at: Instant::now(), deadline }),
        }
    }

    /// How long since [`started`](Self::started).
    #[inline]
    pub(crate) fn elapsed(&self) -> Duration {
        match self.0 {
            Start::Precise { at, .. } => at.elapsed(),
            #[cfg(target_os = "linux")]
            Start::Coarse { at, .. } => Duration::from_nanos(coarse::now().saturating_sub(at)),
        }
    }

    /// Whether more than the deadline has passed since [`started`](Self::started).
    #[inline]
    pub(crate) fn past_deadline(&self) -> bool {
        match self.0 {
            Start::Precise { at, deadline } => at.elapsed() > deadline,
            #[cfg(target_os = "linux")]
            Start::Coarse { at, deadline } => coarse::now().saturating_sub(at) > deadline,
        }
    }

    /// Whether the coarse clock times this handler.
    #[cfg(test)]
    fn is_coarse(&self) -> bool {
        !matches!(self.0, Start::Precise { .. })
    }
}

/// Milliseconds since the Unix epoch, from the coarse wall clock where there is one (0 before the epoch).
pub(crate) fn unix_ms() -> u64 {
    #[cfg(target_os = "linux")]
    if let Some(now) = coarse::wall_ms() {
        return now;
    }
    precise_unix_ms()
}

/// Milliseconds since the Unix epoch, from the precise wall clock (0 before the epoch).
pub(crate) fn precise_unix_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(target_os = "linux")]
mod coarse {
    use std::sync::OnceLock;
    use std::time::Duration;

    use nix::sys::time::TimeSpec;
    use nix::time::{ClockId, clock_getres, clock_gettime};

    fn duration(t: TimeSpec) -> Option<Duration> {
        Some(Duration::new(u64::try_from(t.tv_sec()).ok()?, u32::try_from(t.tv_nsec()).ok()?))
    }

    /// The shortest deadline timed with the coarse clock: [`COARSE_FACTOR`](super::COARSE_FACTOR) times its
    /// resolution; `None` when the system does not report a usable one.
    #[inline]
    pub(super) fn shortest_deadline() -> Option<Duration> {
        static SHORTEST: OnceLock<Option<Duration>> = OnceLock::new();
        *SHORTEST.get_or_init(|| resolution().map(|r| r.saturating_mul(super::COARSE_FACTOR)))
    }

    /// The coarse clock's resolution; `None` when the system does not report a usable one.
    pub(super) fn resolution() -> Option<Duration> {
        static RESOLUTION: OnceLock<Option<Duration>> = OnceLock::new();
        *RESOLUTION.get_or_init(|| {
            clock_getres(ClockId::CLOCK_MONOTONIC_COARSE).ok().and_then(duration).filter(|r| !r.is_zero())
        })
    }

    /// The coarse wall clock, in milliseconds since the Unix epoch; `None` when it cannot be read or is before
    /// the epoch.
    #[inline]
    pub(super) fn wall_ms() -> Option<u64> {
        let t = clock_gettime(ClockId::CLOCK_REALTIME_COARSE).ok()?;
        let (secs, nanos) = (u64::try_from(t.tv_sec()).ok()?, u64::try_from(t.tv_nsec()).ok()?);
        Some(secs.saturating_mul(1000).saturating_add(nanos / 1_000_000))
    }

    /// The coarse monotonic clock, in nanoseconds (0 when it cannot be read).
    #[inline]
    pub(super) fn now() -> u64 {
        let Ok(t) = clock_gettime(ClockId::CLOCK_MONOTONIC_COARSE) else { return 0 };
        let (secs, nanos) = (u64::try_from(t.tv_sec()).unwrap_or(0), u64::try_from(t.tv_nsec()).unwrap_or(0));
        secs.saturating_mul(1_000_000_000).saturating_add(nanos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_deadlines_are_timed_precisely_and_long_ones_may_be_coarse() {
        let short = Stopwatch::start(Duration::from_millis(50));
        assert!(!short.is_coarse());
        let long = Stopwatch::start(Duration::from_secs(30));
        #[cfg(target_os = "linux")]
        assert_eq!(long.is_coarse(), coarse::resolution().is_some_and(|r| r <= Duration::from_millis(30)));
        std::thread::sleep(Duration::from_millis(30));
        assert!(short.elapsed() >= Duration::from_millis(30));
        // The coarse clock is within one resolution step of the truth.
        #[cfg(target_os = "linux")]
        let step = if long.is_coarse() { coarse::resolution().unwrap_or_default() } else { Duration::ZERO };
        #[cfg(not(target_os = "linux"))]
        let step = Duration::ZERO;
        assert!(long.elapsed() + step >= Duration::from_millis(30), "{:?}", long.elapsed());
        assert!(long.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn event_times_are_within_a_tick_of_the_wall_clock() {
        let before = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
        let at = unix_ms();
        let after = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as u64;
        // The coarse clock lags by at most one step (4 ms on most kernels; allow 50).
        assert!(at <= after && at + 50 >= before, "{before} {at} {after}");
    }

    #[test]
    fn a_deadline_beyond_any_clock_is_timed_too() {
        let w = Stopwatch::start(Duration::MAX);
        assert!(w.elapsed() < Duration::from_secs(5));
    }
}
