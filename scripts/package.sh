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

# Cargo unpacks the overlay's .crate files under $CARGO_HOME/registry/src/-<hash of the overlay's path>/ and reuses
# an unpacked crate of the same name and version: a second run from the same checkout path would build the sources
# of the first run, not these. Those unpacked copies of our own crates go first (the overlay's directories are the
# ones whose name starts with `-`; crates.io's are left alone).
cargo_home=${CARGO_HOME:-$HOME/.cargo}
for name in $(cargo metadata --no-deps --format-version 1 \
    | python3 -c 'import json, sys; print(" ".join(p["name"] + "-" + p["version"] for p in json.load(sys.stdin)["packages"] if p["publish"] != []))'); do
    rm -rf "$cargo_home"/registry/src/-*/"$name"
done
cargo package --workspace "${exclude[@]}" "$@"
