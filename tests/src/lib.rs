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

/// The environment variable that marks a process [`in_own_process`] started: it holds the test's name.
const OWN_PROCESS: &str = "KEEL_TEST_OWN_PROCESS";

/// For a test whose figures are the whole process's (peak RSS, a global `tracing` subscriber): `true` in a process
/// that runs this test alone, where the caller goes on with its body. Elsewhere it starts this test binary again for
/// the calling test alone (`--exact`), one such process at a time, relays its output, fails if it failed, and
/// returns `false`: the caller returns.
pub fn in_own_process() -> bool {
    let thread = std::thread::current();
    let test = thread.name().expect("libtest names each test's thread after the test");
    if std::env::var(OWN_PROCESS).is_ok_and(|t| t == test) {
        return true;
    }
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let output = std::process::Command::new(std::env::current_exe().expect("this test binary"))
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(OWN_PROCESS, test)
        .output()
        .expect("this test binary starts again");
    print!("{}", String::from_utf8_lossy(&output.stdout));
    eprint!("{}", String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{test}, run in a process of its own, failed ({})", output.status);
    false
}

pub mod alloc;
pub mod http;
pub mod mcp;
pub mod peers;
pub mod schema_host;
pub mod sockets;
