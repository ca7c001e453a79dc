#!/usr/bin/env bash
# The test command: installs the external test peers (npm, pip; under target/, nothing committed), runs the MCP
# conformance suite and the Python SDK client against the example server, installs the providers' Python SDKs, then
# runs every Rust test of the workspace, then the schema-lock check of the `keel` binary. Exits non-zero on any
# failure.
#
#   bash scripts/test-all.sh
set -euo pipefail
cd "$(dirname "$0")/.."

echo "== MCP interoperability (conformance suite, Python SDK client)"
# The Rust MCP tests that use these peers run once, with the rest below, where a missing peer is a failure.
MCP_SKIP_RUST_TESTS=1 bash scripts/mcp-conformance.sh

echo "== provider SDKs (target/provider-venv, for tests/tests/provider_sdks.rs)"
bash scripts/provider-sdks.sh

echo "== cargo test --workspace"
# The steps above installed every peer, so a peer a test cannot find is a failure here, as in CI, never a skip
# (KEEL_REQUIRE_PEERS=1 holds even when the caller has set CI=false).
CI="${CI:-true}" KEEL_REQUIRE_PEERS=1 cargo test --workspace

echo "== schema lock"
cargo run -q -p tool-cli --bin keel -- lock --check --strict
