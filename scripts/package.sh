#!/usr/bin/env bash
# Packages every published crate (every workspace member but examples, tests, bench and fuzz, which are
# `publish = false`) and builds each from its `.crate` file, against the others through cargo's local overlay: what
# `cargo publish` would upload, checked to build from the registry alone. Extra arguments go to `cargo package`
# (`--no-verify` to list the files only, `--allow-dirty` in a tree with uncommitted changes).
#
#   bash scripts/package.sh
set -euo pipefail
cd "$(dirname "$0")/.."

unpublished=$(cargo metadata --no-deps --format-version 1 \
    | python3 -c 'import json, sys; print(" ".join(p["name"] for p in json.load(sys.stdin)["packages"] if p["publish"] == []))')
exclude=()
for name in $unpublished; do exclude+=(--exclude "$name"); done
cargo package --workspace "${exclude[@]}" "$@"
