#!/usr/bin/env bash
# The installed `keel` in a crate of a user's own, outside this workspace: writes a scratch crate under
# target/scratch-crate that depends on the facade `keel-tools` (by path, as the crates are not on crates.io yet) and
# declares three tools, runs `keel list` in its folder, then drives `keel serve` there with the official Python MCP
# SDK (tests/mcp/python_keel_serve.py --tools scratch: tools/list, a call, the refusals, and a write approved or
# declined by a person through elicitation; stdio in both eras and Streamable HTTP). Needs the Python SDK: PYTHON
# (default target/ci-venv/bin/python, which scripts/mcp-conformance.sh installs).
#
#   bash scripts/scratch-crate.sh
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PYTHON=${PYTHON:-$ROOT/target/ci-venv/bin/python}
"$PYTHON" -c 'import mcp' 2>/dev/null \
    || { echo "scratch-crate: $PYTHON has no mcp package (run scripts/mcp-conformance.sh first)" >&2; exit 1; }

echo "== scratch crate: the installed keel (keel-tools-cli's binary)"
cargo build --quiet -p keel-tools-cli --bin keel
KEEL=$ROOT/target/debug/keel

CRATE=$ROOT/target/scratch-crate
rm -rf "$CRATE"
mkdir -p "$CRATE/src"
cat >"$CRATE/Cargo.toml" <<TOML
[package]
name = "scratch-tools"
version = "0.1.0"
edition = "2021"
publish = false

[dependencies]
keel-tools = { path = "$ROOT/keel-tools" }

[workspace]
TOML
cat >"$CRATE/src/lib.rs" <<'RUST'
//! A user's tools.
use keel_tools::tool;

/// Adds two numbers.
#[tool(effect = "read", version = "1.0", tags = ["math"])]
pub fn scratch_add(a: i64, b: i64) -> i64 {
    a + b
}

static FORGOTTEN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Forgets a note.
#[tool(effect = "write", version = "1.0")]
pub fn scratch_forget(note: String) -> String {
    FORGOTTEN.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    format!("forgot {note}")
}

/// How many notes were forgotten since the server started.
#[tool(effect = "read", version = "1.0")]
pub fn scratch_forgotten() -> usize {
    FORGOTTEN.load(std::sync::atomic::Ordering::SeqCst)
}
RUST
# Resolved as this workspace is, offline: the same versions, nothing downloaded.
cp Cargo.lock "$CRATE/Cargo.lock"

# keel builds its shim over the crate in this target directory, the one tool-cli's own runner tests use, so the
# dependencies are built once for both (no debug info, as there).
export CARGO_TARGET_DIR=$ROOT/target/tmp/keel-runner CARGO_PROFILE_DEV_DEBUG=false CARGO_NET_OFFLINE=true

echo "== scratch crate: keel list"
out=$(cd "$CRATE" && "$KEEL" list)
echo "$out"
for tool in scratch_add scratch_forget scratch_forgotten; do
    grep -q "^$tool " <<<"$out" || { echo "scratch-crate: keel list does not show $tool" >&2; exit 1; }
done

echo "== scratch crate: keel serve, driven by the Python MCP SDK"
timeout 300 "$PYTHON" tests/mcp/python_keel_serve.py --tools scratch --cwd "$CRATE" -- "$KEEL"
