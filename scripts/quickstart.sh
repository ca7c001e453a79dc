#!/usr/bin/env bash
# Builds and runs README.md's quick start as a new crate of its own, outside the workspace, from exactly the
# README's two blocks, so that the quick start is what a reader can copy.
#
# The blocks: between the `## Quick start` heading and the next `## ` heading, the first fenced block whose info
# string is `toml` is the `Cargo.toml` (from `[dependencies]` on) and the first whose info string is `rust` (or
# starts with `rust,`, e.g. `rust,standalone_crate`) is `src/main.rs`. The Rust block may not hide lines (`# ...`):
# what builds here is what the reader sees. The TOML block's `keel-tools = { path = "..." }` (the facade) is pointed
# at this checkout's `keel-tools/`.
#
# The crate is written to target/quickstart/ (its Cargo.toml, lock and sources are rewritten on every run; its
# build directory, target/quickstart/target, is kept as a cache). Its lock is seeded from the workspace's
# Cargo.lock, so that it resolves offline to crates already in the local cargo registry; only if that fails does
# cargo go to the network.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$(pwd)"
readme="$root/README.md"
crate="$root/target/quickstart"

# $1: `toml` or `rust`. Prints the block's lines; fails if there is no such block.
block() {
    awk -v want="$1" '
        in_block && /^```[[:space:]]*$/ { found = 1; exit }
        in_block { print; next }
        in_other && /^```[[:space:]]*$/ { in_other = 0; next }
        in_other { next }
        /^## / { if (in_section) exit; if ($0 == "## Quick start") in_section = 1; next }
        !in_section { next }
        /^```/ {
            info = substr($0, 4)
            sub(/[[:space:]]+$/, "", info)
            if (info == want || (want == "rust" && index(info, "rust,") == 1)) in_block = 1
            else in_other = 1
            next
        }
        END { exit found ? 0 : 1 }
    ' "$readme"
}

toml="$(block toml)" || { echo "quickstart: README.md has no \`\`\`toml block under \`## Quick start\`" >&2; exit 1; }
rust="$(block rust)" || { echo "quickstart: README.md has no \`\`\`rust block under \`## Quick start\`" >&2; exit 1; }

if grep -qE '^[[:space:]]*#([[:space:]]|$)' <<<"$rust"; then
    echo "quickstart: the quick start's Rust block hides lines (\`# ...\`); show the whole program" >&2
    exit 1
fi

# Point `keel-tools = { path = "..." }` at this checkout (the path is computed here, never written to the README).
toml="$(ROOT="$root" awk '
    /^keel-tools[[:space:]]*=/ && match($0, /path[[:space:]]*=[[:space:]]*"[^"]*"/) {
        $0 = substr($0, 1, RSTART - 1) "path = \"" ENVIRON["ROOT"] "/keel-tools\"" substr($0, RSTART + RLENGTH)
        done = 1
    }
    { print }
    END { exit done ? 0 : 1 }
' <<<"$toml")" || {
    echo "quickstart: the quick start's TOML block has no \`keel-tools = { path = \"...\" }\` line" >&2
    exit 1
}

rm -rf "$crate/src" "$crate/Cargo.toml" "$crate/Cargo.lock"
mkdir -p "$crate/src"
{
    printf '%s\n' '[package]' 'name = "keel-quickstart"' 'version = "0.0.0"' 'edition = "2024"' 'publish = false' ''
    printf '%s\n' '# A workspace of its own: the crate lives under the keel workspace directory but is not a member.'
    printf '%s\n' '[workspace]' ''
    printf '%s\n' "$toml"
} >"$crate/Cargo.toml"
printf '%s\n' "$rust" >"$crate/src/main.rs"
cp "$root/Cargo.lock" "$crate/Cargo.lock"

export CARGO_TARGET_DIR="$crate/target"
manifest=(--manifest-path "$crate/Cargo.toml")
if ! cargo fetch --offline --quiet "${manifest[@]}" 2>/dev/null; then
    cargo fetch --quiet "${manifest[@]}"
fi
cargo run --quiet --offline "${manifest[@]}"

echo "quickstart: README.md's quick start (its toml and rust blocks) built and ran as a new crate in target/quickstart"
