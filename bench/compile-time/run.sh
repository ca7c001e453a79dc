#!/usr/bin/env bash
# Compile time of 200 tools: without #[tool] (plain fns; plain fns plus the same glue written by hand), with keel's
# #[tool], and with rmcp's #[tool_router].
#
#   bench/compile-time/run.sh            # TOOLS=200 MODULES=10 RUNS=5 by default
#   TOOLS=200 RUNS=7 bench/compile-time/run.sh
#
# Generates four library crates under target/compile-time/ (see gen.py), each its own workspace sharing one target
# directory, and measures `cargo build` (dev profile) wall time, and CPU time (user + sys of cargo and the rustc
# processes it waits for, which load from other processes disturbs much less than wall time):
#
# - clean build: `cargo clean -p <crate>` then `cargo build` (dependencies stay built; only the crate compiles);
# - incremental rebuild: change one statement in one tool body of one file (module m05), then `cargo build`.
#
# Runs are interleaved (plain, hand, keel, rmcp, plain, ...) so that load changes hit all variants alike; the median
# of RUNS runs is reported. keel-tools-core is copied to target/compile-time/keel-snapshot first, so concurrent edits of the
# repository cannot trigger rebuilds of it mid-measurement. Slow (10+ minutes); run by hand, not in CI.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
OUT="$ROOT/target/compile-time"
TOOLS="${TOOLS:-200}"
MODULES="${MODULES:-10}"
RUNS="${RUNS:-5}"
VARIANTS=(plain hand keel rmcp)
export CARGO_TARGET_DIR="$OUT/target"
export CARGO_TERM_COLOR=never

mkdir -p "$OUT"

# A snapshot of the keel crates (a workspace of their own) so the measurement is immune to concurrent edits.
SNAP="$OUT/keel-snapshot"
rm -rf "$SNAP"
mkdir -p "$SNAP"
cp -r "$ROOT/tool-core" "$ROOT/tool-macros" "$ROOT/tool-names" "$ROOT/tool-schema" "$ROOT/README.md" "$ROOT/Cargo.lock" "$SNAP/"
python3 - "$ROOT/Cargo.toml" "$SNAP/Cargo.toml" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
text = re.sub(r"members = \[[^\]]*\]", 'members = ["tool-names", "tool-schema", "tool-macros", "tool-core"]', text, count=1)
open(sys.argv[2], "w").write(text)
PY

python3 "$ROOT/bench/compile-time/gen.py" "$OUT" "$SNAP" "$ROOT/Cargo.lock" "$TOOLS" "$MODULES"

median() { sort -n | awk '{a[NR]=$1} END {if (NR % 2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'; }
build() { (cd "$OUT/$1" && cargo build --quiet 2>&1) || { echo "build of $1 failed" >&2; exit 1; }; }
measure() { # `cargo build` in variant $1; prints "WALL_MS CPU_MS"
    python3 - "$OUT/$1" <<'PY'
import resource, subprocess, sys, time
before = resource.getrusage(resource.RUSAGE_CHILDREN)
t0 = time.perf_counter()
subprocess.run(["cargo", "build", "--quiet"], cwd=sys.argv[1], check=True)
wall = time.perf_counter() - t0
after = resource.getrusage(resource.RUSAGE_CHILDREN)
cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
print(f"{wall * 1000:.0f} {cpu * 1000:.0f}")
PY
}

echo "== warm-up: dependencies of every variant"
for v in "${VARIANTS[@]}"; do
    build "$v"
done

EDIT_FILE="src/m05.rs"
edit() { # Changes the first `let _edit = N;` of the file to a new N.
    python3 - "$OUT/$1/$EDIT_FILE" "$2" <<'PY'
import re, sys
path, n = sys.argv[1], sys.argv[2]
text = open(path).read()
open(path, "w").write(re.sub(r"let _edit = \d+;", f"let _edit = {n};", text, count=1))
PY
}

declare -A CW CC IW IC
for v in "${VARIANTS[@]}"; do
    CW[$v]="" CC[$v]="" IW[$v]="" IC[$v]=""
done

echo "== clean builds ($RUNS runs, interleaved): wall ms, cpu ms"
for r in $(seq 1 "$RUNS"); do
    for v in "${VARIANTS[@]}"; do
        (cd "$OUT/$v" && cargo clean --quiet -p "ct_$v")
        read -r wall cpu < <(measure "$v")
        CW[$v]+="$wall"$'\n'
        CC[$v]+="$cpu"$'\n'
        echo "  run $r $v: $wall $cpu"
    done
done

echo "== incremental rebuilds after editing $EDIT_FILE ($RUNS runs, interleaved): wall ms, cpu ms"
for r in $(seq 1 "$RUNS"); do
    for v in "${VARIANTS[@]}"; do
        edit "$v" "$r"
        read -r wall cpu < <(measure "$v")
        IW[$v]+="$wall"$'\n'
        IC[$v]+="$cpu"$'\n'
        echo "  run $r $v: $wall $cpu"
    done
done

declare -A MCW MCC MIW MIC
for v in "${VARIANTS[@]}"; do
    MCW[$v]=$(printf '%s' "${CW[$v]}" | median)
    MCC[$v]=$(printf '%s' "${CC[$v]}" | median)
    MIW[$v]=$(printf '%s' "${IW[$v]}" | median)
    MIC[$v]=$(printf '%s' "${IC[$v]}" | median)
done

diff_line() { # LABEL A B: "B - A" in ms, per tool, and in % of A
    awk -v l="$1" -v a="$2" -v b="$3" -v n="$TOOLS" \
        'BEGIN { printf "| %s | %+.0f ms | %+.2f ms | %+.1f%% |\n", l, b - a, (b - a) / n, 100 * (b - a) / a }'
}

{
    echo "# compile time of $TOOLS tools ($MODULES files), cargo build (dev), median of $RUNS interleaved runs"
    echo
    echo "machine: $(nproc) cores, $(rustc -V); load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
    echo
    echo "| variant | clean wall (ms) | clean cpu (ms) | incremental wall (ms) | incremental cpu (ms) |"
    echo "|---|---:|---:|---:|---:|"
    for v in "${VARIANTS[@]}"; do
        echo "| $v | ${MCW[$v]} | ${MCC[$v]} | ${MIW[$v]} | ${MIC[$v]} |"
    done
    echo
    echo "| difference | total | per tool | relative |"
    echo "|---|---:|---:|---:|"
    diff_line "clean wall: keel - hand (the macro's own share)" "${MCW[hand]}" "${MCW[keel]}"
    diff_line "clean cpu: keel - hand (the macro's own share)" "${MCC[hand]}" "${MCC[keel]}"
    diff_line "clean wall: hand - plain (the serde/schemars glue)" "${MCW[plain]}" "${MCW[hand]}"
    diff_line "clean cpu: hand - plain (the serde/schemars glue)" "${MCC[plain]}" "${MCC[hand]}"
    diff_line "clean wall: keel - plain" "${MCW[plain]}" "${MCW[keel]}"
    diff_line "clean wall: rmcp - plain" "${MCW[plain]}" "${MCW[rmcp]}"
    diff_line "incremental wall: keel - hand" "${MIW[hand]}" "${MIW[keel]}"
    diff_line "incremental cpu: keel - hand" "${MIC[hand]}" "${MIC[keel]}"
    diff_line "incremental wall: keel - plain" "${MIW[plain]}" "${MIW[keel]}"
    diff_line "incremental wall: rmcp - plain" "${MIW[plain]}" "${MIW[rmcp]}"
} | tee "$OUT/results.md"
