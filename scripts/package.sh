#!/usr/bin/env bash
# Packages every published crate (every workspace member but examples, tests, bench and fuzz, which are
# `publish = false`) and checks the packages from their `.crate` files: what `cargo publish` would upload, compiled
# from the packages' own files against each other (never against this checkout's folders).
#
#   bash scripts/package.sh                  # package, then check the packages together
#   bash scripts/package.sh --each           # package, then check each package by itself, with its own features
#   bash scripts/package.sh --allow-dirty    # in a tree with uncommitted changes
#   bash scripts/package.sh --no-verify      # list and package only
#
# Extra arguments go to `cargo package`. The packages are unpacked into a workspace under target/package/check, in
# which they find each other through `[patch.crates-io]`; the versions of everything else are this checkout's
# Cargo.lock. A file that a package leaves out but its code reads (`include_str!`, a module, a README the docs
# include) fails the check. By default it is one `cargo check` of that workspace (the features of all the packages
# together: what every CI run does). `--each` checks each package by itself, as a user's build resolves its
# features, which also finds a feature a crate uses without declaring it (another crate of the workspace turning it
# on); `cargo publish` verifies each crate that way too, with a full build, before it uploads it.
set -euo pipefail
cd "$(dirname "$0")/.."

verify=1
each=0
args=()
for arg in "$@"; do
    case $arg in
        --no-verify) verify=0 ;;
        --each) each=1 ;;
        *) args+=("$arg") ;;
    esac
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
    # With the time of unpacking (-m), not the archive's fixed date in 2006: cargo decides what to check
    # again by the files' times, and would otherwise take a check of an earlier run's sources for this one's.
    tar -xzmf "$target_dir/package/$crate.crate" -C "$check"
    members+=("\"$crate\"")
    patches+=("${crate%-*} = { path = \"$crate\" }")
done
{
    echo '# Made by scripts/package.sh: the packaged crates, unpacked.'
    echo '[workspace]'
    echo 'resolver = "3"'
    echo "members = [$(IFS=,; echo "${members[*]}")]"
    echo
    echo '[patch.crates-io]'
    printf '%s\n' "${patches[@]}"
} >"$check/Cargo.toml"
# The versions of everything else: this checkout's lock (cargo drops what the packages do not use).
cp Cargo.lock "$check/Cargo.lock"

if [ "$each" = 0 ]; then
    echo "== package: the packages, checked together from their .crate files"
    if ! cargo check --quiet --manifest-path "$check/Cargo.toml" --target-dir "$target_dir" --workspace; then
        echo "package: the packages did not compile from their packaged files (in ${check#"$PWD"/})" >&2
        exit 1
    fi
    echo "package: ${published// /, }: compile from their .crate files"
    exit 0
fi

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
