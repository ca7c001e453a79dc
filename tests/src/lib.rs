//! Integration and compile-fail tests of keel live in `tests/`; this library holds what several of them share.

pub mod pg;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// `(peak, current)` resident memory of this process in KiB (`VmHWM`, `VmRSS` of `/proc/self/status`); zeros
/// where that file does not exist.
pub fn memory_kib() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// Aborts the process if it is still running `limit` after this call, unless the returned [`Watchdog`] was
/// dropped first: a hung runtime must fail a test, not hang the CI job.
#[must_use = "the watchdog stands down when dropped"]
pub fn watchdog(label: &'static str, limit: Duration) -> Watchdog {
    let done = Arc::new(AtomicBool::new(false));
    let flag = done.clone();
    std::thread::spawn(move || {
        let began = Instant::now();
        while began.elapsed() < limit {
            std::thread::sleep(Duration::from_millis(200));
            if flag.load(Ordering::SeqCst) {
                return;
            }
        }
        eprintln!("{label}: still running after {limit:?}; aborting");
        std::process::abort();
    });
    Watchdog { done }
}

/// See [`watchdog`].
pub struct Watchdog {
    done: Arc<AtomicBool>,
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.done.store(true, Ordering::SeqCst);
    }
}

pub use peers::{missing_peer, peers_required};

pub mod alloc;
pub mod http;
pub mod mcp;
pub mod peers;
pub mod schema_host;
pub mod sockets;
