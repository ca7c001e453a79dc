#!/usr/bin/env bash
# The providers' own Python SDKs, for tests/provider_sdks/check.py (run by tests/tests/provider_sdks.rs) and
# streams.py (tests/tests/provider_streams.rs), with the MCP SDK and PyJWT for tests/mcp/python_auth.py
# (tests/tests/mcp_auth_peers.rs): creates
# the venv target/provider-venv (nothing committed) and installs the pinned versions below, or reuses the venv
# when it already has exactly them. Run from anywhere; exits non-zero on any failure.
#
#   bash scripts/provider-sdks.sh
#
# Needs: python3 >= 3.10 with venv.
set -euo pipefail
cd "$(dirname "$0")/.."

PINS=(
    "ollama==0.6.3"
    "openai==3.57.0"
    "anthropic==2.14.0"
    "google-genai==3.6.1"
    "mcp==2.3.0"
    "jsonschema==4.26.0"
    "PyJWT==2.15.1"
    "cryptography==51.0.1"
)
VENV=target/provider-venv
STAMP=$VENV/keel-pins.txt
WANTED=$(printf '%s\n' "${PINS[@]}")

if [ -x "$VENV/bin/python" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANTED" ]; then
    echo "provider-sdks: $VENV already has the pinned versions"
    exit 0
fi

command -v python3 >/dev/null || { echo "provider-sdks: python3 is required" >&2; exit 1; }
echo "== provider SDKs: pip install into $VENV"
rm -f "$STAMP"
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
timeout 900 "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${PINS[@]}"
# Every pin is what is installed (a resolver that picked another version would fail here).
"$VENV/bin/python" - "${PINS[@]}" <<'PY'
import sys
from importlib.metadata import version

pins = [p.split("==") for p in sys.argv[1:]]
wrong = [f"{name}=={pinned} (installed {version(name)})" for name, pinned in pins if version(name) != pinned]
if wrong:
    sys.exit("provider-sdks: not the pinned versions: " + ", ".join(wrong))
PY
printf '%s\n' "$WANTED" >"$STAMP"
echo "provider-sdks: ok ($(tr '\n' ' ' <"$STAMP"))"
