#!/usr/bin/env bash
# Builds the guide (docs/guide, an mdBook) into target/guide. Fails on a chapter SUMMARY.md names but that is
# missing, on any warning mdBook prints, and on a link between chapters to a file or heading that is not there. The Rust blocks of the chapters are compiled
# and run elsewhere: `cargo test -p keel-guide` (they use keel, which `mdbook test` cannot link).
#
#   bash scripts/guide.sh
#
# Installs mdBook first if it is missing: version MDBOOK_VERSION from crates.io, without its default features (the
# live-reload server, the file watcher and the search index, none of which a build needs), kept in
# KEEL_TOOL_CACHE (default ~/.cache/keel/tools) under its version, so a fresh clone reuses it. The first install
# compiles mdBook: a few minutes on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."

MDBOOK_VERSION=0.5.4
CACHE="${KEEL_TOOL_CACHE:-$HOME/.cache/keel/tools}"
ROOT="$CACHE/mdbook-$MDBOOK_VERSION"
MDBOOK="$ROOT/bin/mdbook"

if [ ! -x "$MDBOOK" ]; then
    echo "== guide: installing mdBook $MDBOOK_VERSION (kept in $ROOT)"
    mkdir -p "$CACHE"
    # Into a directory of its own, renamed when whole: an interrupted install leaves no half a binary behind.
    BUILD=$(mktemp -d "$CACHE/mdbook-build.XXXXXX")
    cargo install --quiet --locked --no-default-features --version "=$MDBOOK_VERSION" --root "$BUILD/root" \
        --target-dir "$BUILD/target" mdbook
    rm -rf "$ROOT"
    mv "$BUILD/root" "$ROOT"
    rm -rf "$BUILD"
fi

# mdBook reports a missing chapter or a broken link on stderr and may still exit 0: any such line fails here.
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$MDBOOK" build docs/guide 2>"$log" || { cat "$log" >&2; echo "guide: mdBook failed" >&2; exit 1; }
if grep -E 'WARN|ERROR' "$log" >&2; then
    echo "guide: mdBook warned (above)" >&2
    exit 1
fi
# Links between chapters, `[text](file.md)` and `[text](file.md#heading)`, checked against the files and their
# headings (mdBook's anchor for a heading: lower case, punctuation dropped, spaces as hyphens); links to the
# repository's other files (`../../../README.md`), against the files.
python3 - <<'PY'
import pathlib, re, sys
src = pathlib.Path("docs/guide/src")
def anchors(text):
    heads = re.findall(r"^#+ +(.+?) *$", re.sub(r"```.*?```", "", text, flags=re.S), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in heads}
pages = {p.name: anchors(p.read_text()) for p in src.glob("*.md")}
broken = []
for page in src.glob("*.md"):
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+?\.md(?:#[^)\s]*)?)\)", text):
        if "://" in target:
            continue
        if target.startswith("../"):  # a file of the repository outside the book
            if not (src / target.partition("#")[0]).exists():
                broken.append(f"{page.name}: ({target})")
            continue
        file, _, anchor = target.partition("#")
        file = file or page.name
        if file not in pages or (anchor and anchor not in pages[file]):
            broken.append(f"{page.name}: ({target})")
if broken:
    sys.exit("guide: links to no chapter or heading:\n  " + "\n  ".join(broken))
PY
echo "guide: built into target/guide ($(find target/guide -name '*.html' | wc -l) pages)"
