"""Small file contents for tests: numbered lines, and edits of chosen lines (1-based)."""

from __future__ import annotations

from collections.abc import Mapping


def numbered(prefix: str, n: int) -> str:
    """`prefix_1 = 1` … `prefix_n = n`, one per line: hunks land exactly where a test says."""
    return "".join(f"{prefix}_{i} = {i}\n" for i in range(1, n + 1))


def edit(text: str, changes: Mapping[int, str]) -> str:
    """`text` with line N replaced by `changes[N]` for each N."""
    lines = text.splitlines(keepends=True)
    for lineno, new in changes.items():
        lines[lineno - 1] = new + "\n"
    return "".join(lines)
