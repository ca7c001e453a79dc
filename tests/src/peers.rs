//! The external peers some tests need (a PostgreSQL cluster, the Python SDKs, Node's server-everything, a model
//! server, an example binary), and what a test does when one is missing.
//!
//! When peers are required ([`peers_required`]: `CI` or `KEEL_REQUIRE_PEERS` set, as `scripts/test-all.sh` sets
//! it), a missing peer fails the test. Otherwise the test returns early and is recorded: the test binary then ends,
//! after libtest's summary, with one line on stderr that names every test that did not run and the peer it lacked,
//! e.g.
//!
//! ```text
//! skipped for lack of a peer (2 tests): catalog_rows::edits::postgres, catalog_rows::scopes::postgres (PostgreSQL:
//! bash scripts/postgres.sh start, then . target/postgres/env)
//! ```
//!
//! The line is written straight to the process's stderr when it exits, so libtest's capture does not hide it.

use std::io::Write;
use std::sync::Mutex;

/// A peer: what it is and how to provide it.
#[derive(Debug, PartialEq, Eq)]
pub struct Peer {
    /// What is missing, e.g. `PostgreSQL`.
    pub what: &'static str,
    /// How to provide it, e.g. the script that installs it.
    pub how: &'static str,
}

/// The PostgreSQL cluster of `KEEL_TEST_POSTGRES`.
pub const POSTGRES: Peer =
    Peer { what: "PostgreSQL", how: "bash scripts/postgres.sh start, then . target/postgres/env" };
/// The venv target/model-venv with llama.cpp's server and a model.
pub const MODEL_SERVER: Peer = Peer { what: "a model server", how: "bash scripts/model-server.sh" };
/// The venv target/provider-venv with the providers' Python SDKs.
pub const PROVIDER_SDKS: Peer = Peer { what: "the providers' Python SDKs", how: "bash scripts/provider-sdks.sh" };
/// The venv target/ci-venv with the Python `mcp` SDK.
pub const PYTHON_MCP: Peer = Peer { what: "the Python mcp SDK", how: "bash scripts/mcp-conformance.sh" };
/// `@modelcontextprotocol/server-everything` under target/ci-node.
pub const SERVER_EVERYTHING: Peer =
    Peer { what: "@modelcontextprotocol/server-everything", how: "bash scripts/mcp-conformance.sh" };
/// `node` on `PATH`.
pub const NODE: Peer = Peer { what: "node", how: "put Node on PATH" };
/// The example binary `conformance_server`, which `cargo test --workspace` builds and `cargo test -p keel-tests`
/// does not.
pub const CONFORMANCE_SERVER: Peer =
    Peer { what: "the example conformance_server", how: "cargo build -p examples --example conformance_server" };
/// The example binary `keel-demo`: the installed `keel` over the example tools (built as the one above).
pub const KEEL_DEMO: Peer =
    Peer { what: "the example binary keel-demo", how: "cargo build -p examples --bin keel-demo" };
/// The example binary `catalogue_replicas` (built as the one above).
pub const CATALOGUE_REPLICAS: Peer =
    Peer { what: "the example catalogue_replicas", how: "cargo build -p examples --example catalogue_replicas" };

/// Whether a missing external peer fails the test: `CI` or `KEEL_REQUIRE_PEERS` is set to anything but empty, `0`
/// or `false` (`scripts/test-all.sh` sets `KEEL_REQUIRE_PEERS=1`).
pub fn peers_required() -> bool {
    let set = |var: &str| std::env::var(var).is_ok_and(|v| !v.is_empty() && v != "0" && v != "false");
    set("CI") || set("KEEL_REQUIRE_PEERS")
}

/// The example binary that runs a catalogue replica (`catalogue_replicas`, built by `cargo test --workspace` with
/// the workspace's examples), next to the test binary's directory; `None` (a skip, or a failure when peers are
/// required) when it is not built.
pub fn replica_exe() -> Option<std::path::PathBuf> {
    let path = std::env::current_exe()
        .ok()?
        .parent()?
        .parent()?
        .join("examples")
        .join(format!("catalogue_replicas{}", std::env::consts::EXE_SUFFIX));
    if path.is_file() {
        return Some(path);
    }
    let message = format!(
        "the example catalogue_replicas is not built at {} (cargo build -p examples --example catalogue_replicas)",
        path.display()
    );
    missing_peer(&CATALOGUE_REPLICAS, &message);
    None
}

/// The calling test lacks `peer` (`detail` says what was looked for): a failure when peers are required
/// ([`peers_required`]), else a skip, recorded for the line the binary ends with (the caller returns).
pub fn missing_peer(peer: &'static Peer, detail: &str) {
    assert!(
        !peers_required(),
        "peers are required (CI or KEEL_REQUIRE_PEERS), so a missing one is a failure: {} ({detail})",
        peer.what
    );
    // Captured by libtest, like any output of a passing test; shown with `--nocapture`.
    eprintln!("skipped for lack of {}: {detail}", peer.what);
    record(current_test(), peer);
}

/// The running test's name: libtest runs each test on a thread named after it.
fn current_test() -> String {
    std::thread::current().name().unwrap_or("(a test)").to_owned()
}

/// Every skip of this process: the test and the peer it lacked.
static SKIPPED: Mutex<Vec<(String, &'static Peer)>> = Mutex::new(Vec::new());

fn record(test: String, peer: &'static Peer) {
    let mut skipped = SKIPPED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    if skipped.is_empty() {
        // SAFETY: `report` is an `extern "C" fn()` that never unwinds (it catches nothing, and panics nowhere: every
        // failure is ignored).
        let registered = unsafe { atexit(report) };
        if registered != 0 {
            eprintln!("keel-tests: could not register the report of skipped tests");
        }
    }
    if !skipped.iter().any(|(t, p)| *t == test && *p == peer) {
        skipped.push((test, peer));
    }
}

unsafe extern "C" {
    /// The C library's `atexit`: `f` runs when the process exits, after `main` returns or at `process::exit`.
    fn atexit(f: extern "C" fn()) -> std::ffi::c_int;
}

/// Writes the line of skipped tests to stderr: libtest has printed its summary by then.
extern "C" fn report() {
    let Ok(skipped) = SKIPPED.try_lock() else { return };
    if let Some(line) = summary(&skipped) {
        let _ = writeln!(std::io::stderr().lock(), "{line}");
    }
}

/// `skipped for lack of a peer (N tests): a, b (peer: how); c (other peer: how)`, the tests grouped by peer in
/// the order the peers were first missed, each group's tests sorted; `None` when nothing was skipped.
pub fn summary(skipped: &[(String, &'static Peer)]) -> Option<String> {
    if skipped.is_empty() {
        return None;
    }
    let mut peers: Vec<&'static Peer> = Vec::new();
    for (_, peer) in skipped {
        if !peers.contains(peer) {
            peers.push(peer);
        }
    }
    let groups: Vec<String> = peers
        .iter()
        .map(|peer| {
            let mut tests: Vec<&str> = skipped.iter().filter(|(_, p)| p == peer).map(|(t, _)| t.as_str()).collect();
            tests.sort_unstable();
            format!("{} ({}: {})", tests.join(", "), peer.what, peer.how)
        })
        .collect();
    let n = skipped.len();
    Some(format!("skipped for lack of a peer ({n} test{}): {}", if n == 1 { "" } else { "s" }, groups.join("; ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_each_test_and_its_peer() {
        assert_eq!(summary(&[]), None);
        let skipped = vec![
            ("b::postgres".to_owned(), &POSTGRES),
            ("llama".to_owned(), &MODEL_SERVER),
            ("a::postgres".to_owned(), &POSTGRES),
        ];
        assert_eq!(
            summary(&skipped).unwrap(),
            "skipped for lack of a peer (3 tests): a::postgres, b::postgres (PostgreSQL: bash scripts/postgres.sh \
             start, then . target/postgres/env); llama (a model server: bash scripts/model-server.sh)"
        );
    }
}
