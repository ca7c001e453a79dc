#!/usr/bin/env bash
# The test command: installs the external test peers (npm, pip; under target/, nothing committed), runs the MCP
# conformance suite and the Python SDK client against the example server, runs the installed `keel` in a scratch crate
# (scripts/scratch-crate.sh), installs the providers' Python SDKs and a
# real model server (llama.cpp with a small model), starts a throwaway PostgreSQL server under target/postgres
# (installing Debian's postgresql package with apt-get if the server binaries are missing; stopped on exit), then
# runs every Rust test of the workspace, builds the fuzz targets and runs each on its seed corpus, then the
# schema-lock check of the `keel` binary. Exits non-zero on any failure.
#
#   bash scripts/test-all.sh
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step's heading carries the clock time and the seconds since this script started.
step() { echo "== [$(date +%T) +${SECONDS}s] $*"; }

step "MCP interoperability (conformance suite, Python SDK client)"
# The Rust MCP tests that use these peers run once, with the rest below, where a missing peer is a failure.
MCP_SKIP_RUST_TESTS=1 bash scripts/mcp-conformance.sh

step "the installed keel in a scratch crate of its own (keel list; keel serve under the Python MCP SDK)"
bash scripts/scratch-crate.sh

step "provider SDKs (target/provider-venv, for tests/tests/provider_sdks.rs)"
bash scripts/provider-sdks.sh

step "a real model server (target/model-venv, for tests/tests/agent_llama.rs)"
bash scripts/model-server.sh

step "PostgreSQL (an unprivileged cluster under target/postgres, for the catalogue's PostgreSQL tests)"
# Stopped when this script exits, whether the tests pass or not (stopping is a no-op when nothing is running).
trap 'bash scripts/postgres.sh stop' EXIT
bash scripts/postgres.sh start
# Exports KEEL_TEST_POSTGRES (a libpq connection string) to the tests below.
# shellcheck source=/dev/null
. target/postgres/env

step "cargo test --workspace"
# The steps above installed every peer, so a peer a test cannot find is a failure here, as in CI, never a skip
# (KEEL_REQUIRE_PEERS=1 holds even when the caller has set CI=false).
# Four test threads per binary on any machine (RUST_TEST_THREADS in .cargo/config.toml).
CI="${CI:-true}" KEEL_REQUIRE_PEERS=1 cargo test --workspace

step "the facade with mcp-client alone reaches an https:// MCP server over TLS"
# Only keel-tools selected, so keel-tools-mcp gets the facade's features and no other crate's.
cargo test --quiet -p keel-tools --features mcp-client --test mcp_https

step "OpenTelemetry spans (feature otel, off in the workspace build), against in-memory exporters"
# The same packages and features in each command, so the three share one build of the libraries.
otel=(-p keel-tools-core -p keel-tools-agent -p keel-tools-mcp
    --features keel-tools-core/otel,keel-tools-agent/otel,keel-tools-agent/stub,keel-tools-mcp/otel,keel-tools-mcp/client,keel-tools-mcp/server)
cargo test --quiet "${otel[@]}" --test runtime -- otel::
cargo test --quiet "${otel[@]}" --test agent -- otel::
cargo test --quiet "${otel[@]}" --test otel

step "the fuzz targets: built (stable toolchain, its own lock file) and run once on each seed of its corpus"
# Built into the workspace's target directory, where they share the builds of the dependencies they have in common
# with the workspace (the fuzz crate is a workspace of its own, whose default target directory is fuzz/target).
# Without fuzzing: libFuzzer runs the target on each file given and exits non-zero if any breaks an invariant.
TARGET_DIR=${CARGO_TARGET_DIR:-target}
cargo build --quiet --locked --manifest-path fuzz/Cargo.toml --bins --target-dir "$TARGET_DIR"
mkdir -p "$TARGET_DIR/fuzz-seeds"
for target in executor codecs codec_ollama codec_openai_chat codec_openai_responses codec_anthropic codec_gemini \
    codec_mcp mcp; do
    log="$TARGET_DIR/fuzz-seeds/$target.log"
    "$TARGET_DIR/debug/$target" "fuzz/corpus/$target"/seed-* 2>"$log" \
        || { cat "$log" >&2; echo "test-all: a seed of the fuzz target $target broke an invariant" >&2; exit 1; }
    echo "fuzz target $target: $(grep -c '^Executed ' "$log") seeds run clean"
done

step "schema lock"
# The binary scripts/mcp-conformance.sh built with the workspace's features (`cargo run -p examples` would build it
# again with the examples package's own).
cargo build --quiet --workspace --bin keel-demo
"$TARGET_DIR/debug/keel-demo" lock --check --strict
