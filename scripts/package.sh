#!/usr/bin/env bash
# Packages every published crate (every workspace member but examples, tests, bench and fuzz, which are
# `publish = false`) and checks each from its `.crate` file alone: what `cargo publish` would upload, compiled from
# the package's own files against the other packages (never against this checkout's folders).
#
#   bash scripts/package.sh                  # package, then check each package alone
#   bash scripts/package.sh --allow-dirty    # in a tree with uncommitted changes
#   bash scripts/package.sh --no-verify      # list and package only
#
# Extra arguments go to `cargo package`. The check is `cargo check` of each package by itself (its own features,
# as a user's build would resolve them), in a workspace made of the unpacked `.crate` files under
# target/package/check, in which the packages find each other through `[patch.crates-io]`; the versions of
# everything else are this checkout's Cargo.lock. A file that the package leaves out but the code reads
# (`include_str!`, a module, a README the docs include), a dependency or feature declared only in the workspace,
# fails there. `cargo check` rather than `cargo package`'s own verification (a full build of each package, one after
# another): the same compile errors, without code generation, and with the dependencies checked once where the
# features agree (about 4 minutes less on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."

verify=1
args=()
for arg in "$@"; do
    if [ "$arg" = --no-verify ]; then verify=0; else args+=("$arg"); fi
done

metadata=$(cargo metadata --no-deps --format-version 1)
unpublished=$(python3 -c 'import json, sys; print(" ".join(p["name"] for p in json.load(sys.stdin)["packages"] if p["publish"] == []))' <<<"$metadata")
published=$(python3 -c 'import json, sys; print(" ".join(p["name"] + "-" + p["version"] for p in json.load(sys.stdin)["packages"] if p["publish"] != []))' <<<"$metadata")
exclude=()
for name in $unpublished; do exclude+=(--exclude "$name"); done

# Cargo unpacks the overlay's .crate files under $CARGO_HOME/registry/src/-<hash of the overlay's path>/ and reuses
# an unpacked crate of the same name and version: a second run from the same checkout path would read the sources
# of the first run, not these. Those unpacked copies of our own crates go first (the overlay's directories are the
# ones whose name starts with `-`; crates.io's are left alone).
cargo_home=${CARGO_HOME:-$HOME/.cargo}
for crate in $published; do
    rm -rf "$cargo_home"/registry/src/-*/"$crate"
done
cargo package --workspace "${exclude[@]}" --no-verify "${args[@]+"${args[@]}"}"
[ "$verify" = 1 ] || exit 0

target_dir=$(realpath -m "${CARGO_TARGET_DIR:-target}")
check=$target_dir/package/check
rm -rf "$check"
mkdir -p "$check"
members=()
patches=()
for crate in $published; do
    tar -xzf "$target_dir/package/$crate.crate" -C "$check"
    members+=("\"$crate\"")
    patches+=("${crate%-*} = { path = \"$crate\" }")
done
{
    echo '# Made by scripts/package.sh: the packaged crates, unpacked, each checked by itself.'
    echo '[workspace]'
    echo 'resolver = "3"'
    echo "members = [$(IFS=,; echo "${members[*]}")]"
    echo
    echo '[patch.crates-io]'
    printf '%s\n' "${patches[@]}"
} >"$check/Cargo.toml"
# The versions of everything else: this checkout's lock (cargo drops what the packages do not use).
cp Cargo.lock "$check/Cargo.lock"

failed=()
for crate in $published; do
    name=${crate%-*}
    echo "== package: $name, checked from its .crate file alone"
    if ! cargo check --quiet --manifest-path "$check/Cargo.toml" --target-dir "$target_dir" -p "$name"; then
        failed+=("$name")
    fi
done
if [ "${#failed[@]}" -gt 0 ]; then
    echo "package: ${failed[*]} did not compile from the packaged files alone (in ${check#"$PWD"/})" >&2
    exit 1
fi
echo "package: ${published// /, }: each compiles from its .crate file alone"
