#!/usr/bin/env bash
# The offline tokenizer for bench/python/deferral_tokens.py: creates the venv target/tokens-venv (nothing committed)
# with tiktoken and bpe-openai (which ships the o200k_base and cl100k_base encoding files, so nothing is downloaded
# when counting), or reuses the venv when it already has exactly the pinned versions. Run from anywhere; exits
# non-zero on any failure.
#
#   bash scripts/tokens-venv.sh
#
# Needs: python3 >= 3.9 with venv; bpe-openai's wheel is for Linux x86-64.
set -euo pipefail
cd "$(dirname "$0")/.."

PINS=(
    "tiktoken==0.14.0"
    "bpe-openai==0.1.4"
    "regex==2026.12.2"
    "requests==2.34.2"
    "typing_extensions==4.16.0"
)
VENV=target/tokens-venv
STAMP=$VENV/keel-pins.txt
WANTED=$(printf '%s\n' "${PINS[@]}")

if [ -x "$VENV/bin/python" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANTED" ]; then
    echo "tokens-venv: $VENV already has the pinned versions"
    exit 0
fi

command -v python3 >/dev/null || { echo "tokens-venv: python3 is required" >&2; exit 1; }
echo "== tokenizer: pip install into $VENV"
rm -f "$STAMP"
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
timeout 900 "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${PINS[@]}"
# Every pin is what is installed, and both encodings load from the package's files alone.
"$VENV/bin/python" - "${PINS[@]}" <<'PY'
import pathlib
import sys
import tempfile
from importlib.metadata import version

pins = [p.split("==") for p in sys.argv[1:]]
wrong = [f"{name}=={pinned} (installed {version(name)})" for name, pinned in pins if version(name) != pinned]
if wrong:
    sys.exit("tokens-venv: not the pinned versions: " + ", ".join(wrong))

sys.path.insert(0, "bench/python")
import deferral_tokens

with tempfile.TemporaryDirectory() as cache:
    for name in ("o200k_base", "cl100k_base"):
        count, _ = deferral_tokens.tiktoken_counter(name, pathlib.Path(cache))
        if count('{"name":"billing-invoice-refund"}') <= 0:
            sys.exit(f"tokens-venv: {name} counted no tokens")
PY
printf '%s\n' "$WANTED" >"$STAMP"
echo "tokens-venv: ok ($(tr '\n' ' ' <"$STAMP"))"
