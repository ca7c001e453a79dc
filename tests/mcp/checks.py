"""The check list of the Python peer scripts: one line a check, and the failures counted."""

from __future__ import annotations

from typing import Any


class Checks:
    def __init__(self) -> None:
        self.failed: list[str] = []
        self.passed = 0

    def check(self, name: str, ok: bool, detail: Any = "") -> None:
        if ok:
            self.passed += 1
            print(f"ok    {name}")
        else:
            self.failed.append(name)
            print(f"FAIL  {name}: {detail}")
