"""Prints the medians of the last criterion run (target/criterion/**/new/estimates.json), grouped, with ratios.

Within each group the ratio column is relative to the group's first benchmark in the order criterion ran them
(benchmark.json has no order, so the reference is named on the command line or taken as the fastest), e.g.:

    python3 bench/summarize.py                        # every group, ratio to the group's fastest entry
    python3 bench/summarize.py --ref "executor/valid_call=floor (match + serde, no validation)"
"""

from __future__ import annotations

import argparse
import json
import pathlib


def fmt(ns: float) -> str:
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.2f} µs"
    return f"{ns:.1f} ns"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", default="target/criterion")
    parser.add_argument("--ref", action="append", default=[], help="GROUP=FUNCTION[/PARAM] to take ratios against")
    opts = parser.parse_args()
    refs = dict(r.split("=", 1) for r in opts.ref)

    groups: dict[str, dict[str, float]] = {}
    for est in sorted(pathlib.Path(opts.dir).glob("**/new/estimates.json")):
        meta = json.loads((est.parent / "benchmark.json").read_text())
        ident = meta["function_id"] or ""
        if meta.get("value_str"):
            ident = f"{ident}/{meta['value_str']}"
        median = json.loads(est.read_text())["median"]["point_estimate"]
        groups.setdefault(meta["group_id"], {})[ident] = median

    for group, entries in groups.items():
        ref_name = refs.get(group) or min(entries, key=entries.get)
        ref = entries.get(ref_name, min(entries.values()))
        print(f"\n{group}  (ratio to: {ref_name})")
        for ident, median in sorted(entries.items(), key=lambda kv: kv[1]):
            print(f"  {ident:<72} {fmt(median):>12}  {median / ref:6.2f}x")


if __name__ == "__main__":
    main()
