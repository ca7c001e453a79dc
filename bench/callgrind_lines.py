"""How many distinct 64-byte lines of code a call runs through, from a callgrind profile made with `--dump-instr=yes`.

Counts the cache lines holding instructions executed at least once per call on average (a line's own instructions,
not its callees'), in total and by function, so that the code a call's path touches can be compared with the
instruction cache (32 KiB = 512 lines of 64 bytes on the machines of BENCHMARKS.md). Used on the output of
`examples/profile_executor.rs`:

    valgrind --tool=callgrind --dump-instr=yes --dump-line=no --toggle-collect='*profile_executor::timed_poll*' \
      --callgrind-out-file=target/cgi.keel.out target/release/examples/profile_executor keel 2000
    python3 bench/callgrind_lines.py target/cgi.keel.out 2000
"""

from __future__ import annotations

import collections
import re
import signal
import sys

POSITION = re.compile(r"^(0x[0-9a-f]+|[+-]\d+|\*)\s+(\d+)")
COMPRESSED = re.compile(r"^\((\d+)\)(?: (.*))?$")


def lines_by_function(path: str, calls: int) -> dict[str, set[int]]:
    names: dict[str, str] = {}
    cost: collections.Counter[tuple[str, int]] = collections.Counter()
    fn, addr, after_calls = "?", 0, False
    for raw in open(path, encoding="utf-8", errors="replace"):
        line = raw.rstrip("\n")
        for prefix in ("fn=", "cfn="):
            if line.startswith(prefix):
                m = COMPRESSED.match(line[len(prefix):])
                name = line[len(prefix):]
                if m:
                    if m.group(2):
                        names[m.group(1)] = m.group(2)
                    name = names.get(m.group(1), name)
                if prefix == "fn=":
                    fn = name
                break
        else:
            if line.startswith("calls="):
                after_calls = True
                continue
            m = POSITION.match(line)
            if not m:
                continue
            pos = m.group(1)
            if pos.startswith("0x"):
                addr = int(pos, 16)
            elif pos != "*":
                addr += int(pos)
            # The line after `calls=` is the call's inclusive cost, at the call site: not this line's own.
            if not after_calls:
                cost[(fn, addr >> 6)] += int(m.group(2))
            after_calls = False
    per: dict[str, set[int]] = collections.defaultdict(set)
    for (f, line_no), c in cost.items():
        if c >= calls:
            per[f].add(line_no)
    return per


def main() -> None:
    path, calls = sys.argv[1], int(sys.argv[2])
    per = lines_by_function(path, calls)
    print(f"{len(set().union(*per.values()))} lines of 64 bytes run through per call")
    for f, s in sorted(per.items(), key=lambda kv: -len(kv[1]))[:30]:
        print(f"{len(s):6d}  {f[:140]}")


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends the listing quietly
    main()
