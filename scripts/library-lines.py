#!/usr/bin/env python3
"""Lines of each library crate, the measure of how the library's weight is spread.

    python3 scripts/library-lines.py [CRATE_DIR ...]

Three columns per crate, each with its share of the library: every line of `src/`; the lines without unit tests
(`#[cfg(test)] mod name { ... }` blocks, and files declared `#[cfg(test)] mod name;`), which is what a reader of the
crate reads; and of those, the code lines (no blank lines, no comments). The library crates are the `tool-*`
folders with a `src/lib.rs`.
"""

import os
import re
import sys

TEST_BLOCK = re.compile(r"\s*(pub(\([a-z]+\))? )?mod \w+ \{")
TEST_FILE = re.compile(r"#\[cfg\(test\)\]\s*(?:pub(?:\([a-z]+\))? )?mod (\w+);")


def without_test_blocks(text):
    """`text` without each `#[cfg(test)]` module written inline (braces counted from its `mod` line)."""
    lines = text.split("\n")
    kept = []
    i = 0
    while i < len(lines):
        if lines[i].strip() == "#[cfg(test)]" and i + 1 < len(lines) and TEST_BLOCK.match(lines[i + 1]):
            depth = 0
            j = i + 1
            while j < len(lines):
                depth += lines[j].count("{") - lines[j].count("}")
                j += 1
                if depth <= 0:
                    break
            i = j
            continue
        kept.append(lines[i])
        i += 1
    return "\n".join(kept)


def rust_files(src):
    for folder, _, files in os.walk(src):
        for name in files:
            if name.endswith(".rs"):
                yield os.path.normpath(os.path.join(folder, name))


def test_files(src):
    """Files that are test modules of their parent (`#[cfg(test)] mod tests;`)."""
    found = set()
    for path in rust_files(src):
        text = open(path, encoding="utf-8").read()
        for m in TEST_FILE.finditer(text):
            name = os.path.basename(path)
            folder = os.path.dirname(path) if name in ("lib.rs", "main.rs") else path[: -len(".rs")]
            found.add(os.path.normpath(os.path.join(folder, m.group(1) + ".rs")))
    return found


def measure(crate):
    src = os.path.join(crate, "src")
    tests = test_files(src)
    every = no_tests = code = 0
    for path in rust_files(src):
        text = open(path, encoding="utf-8").read()
        every += text.count("\n")
        if path in tests:
            continue
        kept = without_test_blocks(text)
        no_tests += kept.count("\n")
        code += sum(1 for line in kept.split("\n") if line.strip() and not line.strip().startswith("//"))
    return every, no_tests, code


def main():
    os.chdir(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    crates = sys.argv[1:] or sorted(
        d for d in os.listdir(".") if d.startswith("tool-") and os.path.isfile(os.path.join(d, "src", "lib.rs"))
    )
    figures = {crate: measure(crate) for crate in crates}
    totals = [sum(f[i] for f in figures.values()) for i in range(3)]
    print(f"{'crate':14} {'lines':>7} {'%':>5} {'no tests':>9} {'%':>5} {'code':>7} {'%':>5}")
    for crate, f in figures.items():
        shares = [100 * f[i] / totals[i] for i in range(3)]
        print(
            f"{crate:14} {f[0]:7} {shares[0]:5.1f} {f[1]:9} {shares[1]:5.1f} {f[2]:7} {shares[2]:5.1f}"
        )
    print(f"{'total':14} {totals[0]:7} {'':5} {totals[1]:9} {'':5} {totals[2]:7}")


if __name__ == "__main__":
    main()
