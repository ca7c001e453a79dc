"""Per-call instruction counts from a callgrind profile, by function, with inlined code folded into its function.

callgrind_annotate splits a function whose code was inlined from several files into several entries; this reads
the raw profile (name compression, `fi=`/`fe=` switches, `calls=` edges) and attributes every cost to the function
it was executed in. Prints the direct callees of FUNCTION (a substring of a symbol), with inclusive instructions per
call, then its self cost. Used on the output of `examples/profile_executor.rs`:

    python3 bench/callgrind_tree.py target/callgrind.keel.out 20000 'Executor::call_with::{{closure}}'
"""

from __future__ import annotations

import collections
import re
import sys


def parse(path: str):
    names: dict[str, str] = {}
    self_cost: collections.Counter[str] = collections.Counter()
    edges: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    calls: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    fn = callee = None
    pending_call = 0
    comp = re.compile(r"^\((\d+)\)(?: (.*))?$")

    def name(raw: str) -> str:
        m = comp.match(raw)
        if not m:
            return raw
        ident, text = m.groups()
        if text is not None:
            names[ident] = text
        return names.get(ident, raw)

    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("fn="):
                fn = name(line[3:])
            elif line.startswith(("cfn=", "cfi=", "cfl=")):
                if line.startswith("cfn="):
                    callee = name(line[4:])
                else:
                    name(line[4:])
            elif line.startswith(("fl=", "fi=", "fe=", "ob=", "cob=")):
                name(line.split("=", 1)[1])
            elif line.startswith("calls="):
                pending_call = int(line[6:].split()[0])
            elif line and (line[0].isdigit() or line[0] in "+-*"):
                parts = line.split()
                cost = int(parts[1]) if len(parts) > 1 else 0
                if pending_call:
                    edges[fn][callee] += cost
                    calls[fn][callee] += pending_call
                    pending_call = 0
                else:
                    self_cost[fn] += cost
    return self_cost, edges, calls


def main() -> None:
    path, per, pattern = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    self_cost, edges, calls = parse(path)
    matches = [f for f in set(self_cost) | set(edges) if pattern in f]
    if not matches:
        sys.exit(f"no function matches {pattern!r}")
    for fn in sorted(matches, key=lambda f: -(self_cost[f] + sum(edges[f].values()))):
        total = self_cost[fn] + sum(edges[fn].values())
        print(f"{total / per:9.0f}  {fn}")
        for callee, cost in edges[fn].most_common():
            if cost / per >= 5:
                print(f"{cost / per:9.0f}    > {callee[:150]}  ({calls[fn][callee] / per:g}x)")
        print(f"{self_cost[fn] / per:9.0f}    (self)")
        print()


if __name__ == "__main__":
    main()
