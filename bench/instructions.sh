#!/usr/bin/env bash
# Instructions per call on the executor's paths, counted by valgrind's callgrind: the performance figures of
# record. Counts are deterministic for one binary, so two builds compare without the drift of wall time.
#
#   bench/instructions.sh [CALLS]          # default 20000 calls per contender
#   KEEL_PROFILE_BIN=path bench/instructions.sh   # count a binary built elsewhere (e.g. an earlier commit)
#
# Builds `profile_executor` (bench/examples/profile_executor.rs) in release mode unless KEEL_PROFILE_BIN is given,
# then runs each contender under callgrind with collection switched on only inside `timed_poll`, the frame that
# makes and polls one call's future; building the call's input is left out. The figure per contender is the
# collected total divided by CALLS.
#
# The last two contenders compare with rmcp like for like: rmcp's `ToolRouter::call` renders an MCP
# `CallToolResult`, and so does `keel-mcp` (the inline call, then `keel_tools_mcp::render::into_call_tool_result` with
# the MCP codec, as keel's MCP server answers). The `keel` row stops at a `ToolResult` and is not rmcp's work.
#
# Needs valgrind (Debian: `apt-get install valgrind`).
set -euo pipefail

calls=${1:-20000}
here=$(cd "$(dirname "$0")/.." && pwd)
target=${CARGO_TARGET_DIR:-$here/target}

if ! command -v valgrind >/dev/null; then
  echo "instructions.sh: valgrind is not installed (Debian: apt-get install valgrind)" >&2
  exit 2
fi

bin=${KEEL_PROFILE_BIN:-}
if [[ -z $bin ]]; then
  (cd "$here" && cargo build --quiet --release -p keel-bench --features examples --example profile_executor)
  bin=$target/release/examples/profile_executor
fi
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# contender, label
contenders=(
  "floor|floor: match + serde, no validation"
  "keel|valid call, inline handler"
  "keel-async|valid call, async fn"
  "run|Run::process_batch, one valid call"
  "unknown|unknown_tool"
  "invalid|invalid_arguments (one violation)"
  "approval|approval_required"
  "rmcp|rmcp ToolRouter::call -> CallToolResult"
  "keel-mcp|keel call + MCP CallToolResult"
)

declare -A per_call
for entry in "${contenders[@]}"; do
  c=${entry%%|*}
  valgrind --tool=callgrind --toggle-collect='*profile_executor::timed_poll*' \
    --callgrind-out-file="$out/$c.out" "$bin" "$c" "$calls" >/dev/null 2>"$out/$c.log" || {
    echo "instructions.sh: contender $c failed:" >&2
    cat "$out/$c.log" >&2
    exit 1
  }
  total=$(awk '/^(summary|totals):/ { print $2; exit }' "$out/$c.out")
  if [[ -z $total ]]; then
    echo "instructions.sh: no total in callgrind's output for $c" >&2
    exit 1
  fi
  per_call[$c]=$((total / calls))
done

ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

printf '%-40s %12s  %s\n' "contender ($calls calls each)" "instr/call" "ratio"
for entry in "${contenders[@]}"; do
  c=${entry%%|*}
  label=${entry#*|}
  n=${per_call[$c]}
  case $c in
    floor) r="1.00x floor" ;;
    keel | keel-async | rmcp) r="$(ratio "$n" "${per_call[floor]}")x floor" ;;
    keel-mcp) r="$(ratio "$n" "${per_call[rmcp]}")x rmcp" ;;
    *) r="$(ratio "$n" "${per_call[keel]}")x the inline call" ;;
  esac
  printf '%-40s %12d  %s\n' "$label" "$n" "$r"
done
