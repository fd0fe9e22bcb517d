"""How the hunks of a diff relate: which must travel together, and how a PR's hunks changed
between two of its revisions.

- `dependency_groups(files)`: hunks that overlap or sit within `DEFAULT_ADJACENCY` lines on the
  pre-image, a whole added or deleted file, a header change and the hunks of its file, and a hunk
  building on lines another adds, are taken together or not at all (`missing_dependencies`).
  A hunk that uses a name only another hunk brings (`porttrack.diff.pycheck.name_uses`) joins it.
- `diff_of_diffs(old, new)`: per hunk, unchanged (same id), new, removed, or changed in place.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from porttrack.diff.hunks import FileDiff, Hunk

ChangeKind = Literal["unchanged", "new", "removed", "changed"]
DEFAULT_ADJACENCY = 3  # hunks this close on the pre-image travel together
_SIGNIFICANT = re.compile(rb"[0-9A-Za-z\x80-\xff]")  # a line that says something (not only punctuation)


@dataclass(frozen=True)
class Dependency:
    """Hunk `a` and hunk `b` must travel together, because of `reason`."""

    a: str
    b: str
    reason: Literal["adjacent", "whole-file", "header", "builds-on", "uses-name"]


@dataclass(frozen=True)
class HunkChange:
    """How one hunk moved between two revisions of a diff (see `diff_of_diffs`)."""

    change: ChangeKind
    path: str
    old: Hunk | None
    new: Hunk | None

    @property
    def old_id(self) -> str | None:
        return self.old.id if self.old else None

    @property
    def new_id(self) -> str | None:
        return self.new.id if self.new else None


def dependency_edges(
    files: Sequence[FileDiff], adjacency: int = DEFAULT_ADJACENCY
) -> list[Dependency]:
    """Why hunks must travel together (the edges behind `dependency_groups`).

    * ``whole-file``: every hunk of an added or deleted file;
    * ``header``: a meta pseudo-hunk (rename, copy, mode change) with the entry's text hunks;
    * ``adjacent``: text hunks of one entry whose pre-image ranges (context included) overlap,
      touch, or have at most `adjacency` lines between them;
    * ``builds-on``: a text hunk whose context or removed lines include a line that a hunk of an
      *earlier* entry for the same file adds (pass per-commit diffs in commit order). Lines with no
      letter or digit (``}``, blank) are ignored so that they do not tie everything together.
    """
    edges: list[Dependency] = []
    for fd in files:
        ids = [h.id for h in fd.hunks]
        if fd.status in ("added", "deleted"):
            edges += [Dependency(ids[0], other, "whole-file") for other in ids[1:]]
        elif fd.meta_hunk is not None:
            edges += [Dependency(fd.meta_hunk.id, h.id, "header") for h in fd.text_hunks]
        ranked = sorted(fd.text_hunks, key=lambda h: _pre_range(h)[0])
        for prev, nxt in zip(ranked, ranked[1:]):
            if _pre_range(nxt)[0] - _pre_range(prev)[1] - 1 <= adjacency:
                edges.append(Dependency(prev.id, nxt.id, "adjacent"))
    edges += _builds_on_edges(files)
    return edges


def _pre_range(h: Hunk) -> tuple[int, int]:
    """First and last pre-image line; an insertion without context sits after `old_start`."""
    first = h.old_start if h.old_len else h.old_start + 1
    return first, first + h.old_len - 1


def _builds_on_edges(files: Sequence[FileDiff]) -> list[Dependency]:
    added_by: dict[tuple[str, bytes], list[tuple[int, str]]] = defaultdict(list)
    edges: list[Dependency] = []
    # Only an entry whose old path a later entry has can give an edge, and only to such a later
    # entry: a single diff (one entry per path, the import's case) reads no line at all.
    last_as_old = {fd.old_path: n for n, fd in enumerate(files) if fd.old_path is not None}
    added_to: set[str] = set()
    for n, fd in enumerate(files):
        if fd.old_path is not None and fd.old_path in added_to:
            for h in fd.text_hunks:
                seen: set[str] = set()
                for line in {ln.rstrip() for ln in h.pre_image()}:
                    for m, source in added_by.get((fd.old_path, line), ()):
                        if m < n and source not in seen:
                            seen.add(source)
                            edges.append(Dependency(source, h.id, "builds-on"))
        if fd.new_path is not None and last_as_old.get(fd.new_path, -1) > n:
            added_to.add(fd.new_path)
            for h in fd.text_hunks:
                for line in {ln.rstrip() for ln in h.added_lines()}:
                    if _SIGNIFICANT.search(line):
                        added_by[(fd.new_path, line)].append((n, h.id))
    return edges


def dependency_groups(
    files: Sequence[FileDiff], adjacency: int = DEFAULT_ADJACENCY, more: Iterable[Dependency] = ()
) -> list[frozenset[str]]:
    """Partition of every hunk id into groups that must be taken (or left out) together.

    Singletons are included; groups come in order of their first hunk. See `dependency_edges`;
    `more`: edges found from outside the diff (``uses-name``: `porttrack.diff.pycheck`, which reads the
    whole files).
    """
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    order: list[str] = []
    for fd in files:
        for h in fd.hunks:
            if h.id not in parent:
                parent[h.id] = h.id
                order.append(h.id)
    for edge in [*dependency_edges(files, adjacency), *more]:
        if edge.a not in parent or edge.b not in parent:
            continue
        ra, rb = find(edge.a), find(edge.b)
        if ra != rb:
            parent[rb] = ra
    members: dict[str, set[str]] = {}
    for hid in order:
        members.setdefault(find(hid), set()).add(hid)
    return [frozenset(g) for g in members.values()]


def missing_dependencies(selected_ids: Iterable[str], groups: Iterable[frozenset[str]]) -> set[str]:
    """Ids that must join `selected_ids` because they share a group with a selected one."""
    selected = set(selected_ids)
    missing: set[str] = set()
    for group in groups:
        if group & selected:
            missing |= group - selected
    return missing


# --------------------------------------------------------------------------------------------
# Comparing two revisions of a diff (refresh)


def diff_of_diffs(old: Sequence[FileDiff], new: Sequence[FileDiff]) -> list[HunkChange]:
    """Per hunk: ``unchanged`` (same id in both), ``removed`` / ``new`` (only in one), or
    ``changed`` (a removed and a new hunk at the same location: same path and kind, and for text
    hunks overlapping pre-image ranges; paired one-to-one, first match in file order).

    Sorted by path, then pre-image position (pseudo-hunks first).
    """
    old_hunks = [h for fd in old for h in fd.hunks]
    new_by_id = {h.id: h for fd in new for h in fd.hunks}
    old_ids = {h.id for h in old_hunks}
    changes = [HunkChange("unchanged", h.path, h, new_by_id[h.id])
               for h in old_hunks if h.id in new_by_id]
    added = [h for h in new_by_id.values() if h.id not in old_ids]
    for h in old_hunks:
        if h.id in new_by_id:
            continue
        match = next((n for n in added if _same_place(h, n)), None)
        if match is None:
            changes.append(HunkChange("removed", h.path, h, None))
        else:
            added.remove(match)
            changes.append(HunkChange("changed", h.path, h, match))
    changes += [HunkChange("new", h.path, None, h) for h in added]

    def key(c: HunkChange) -> tuple[str, int]:
        h = c.new or c.old
        assert h is not None
        return c.path, _pre_range(h)[0] if h.kind == "text" else -1

    return sorted(changes, key=key)


def _same_place(a: Hunk, b: Hunk) -> bool:
    if a.path != b.path or a.kind != b.kind:
        return False
    if a.kind != "text":
        return True
    (a0, a1), (b0, b1) = _pre_range(a), _pre_range(b)
    return a0 <= max(b1, b0) and b0 <= max(a1, a0)
