"""Collisions ahead: open upstream PRs that change what a queued patch changes.

Before the next rebase, a queued patch conflicts with any upstream change to the lines it edits.
For each live patch, the open PRs upstream (the most recently updated page, bounded) are compared
by content: the same hunk ids, or hunks of the same file whose old line ranges overlap
(`porttrack.prdiff.old_lines_overlap`). A PR that touches only other files, or other lines of the
same file, is no collision. The PRs' file lists come from the GitHub door, conditional and cached.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

from porttrack.budget import Budget, BudgetSpent
from porttrack.errors import PorttrackError
from porttrack.hunks import Hunk
from porttrack.prdiff import file_hunks, old_lines_overlap

if TYPE_CHECKING:
    from porttrack.github import GitHubClient

MAX_OPEN_PRS = 20  # open PRs compared per run (one file-list request each)


@dataclass(frozen=True)
class QueuedHunks:
    """A live queued patch, as the comparison needs it."""

    name: str
    pr: int
    hunks: tuple[Hunk, ...]


@dataclass(frozen=True)
class Overlap:
    """kind: same-hunk (the id of a hunk both change) | overlapping-lines (path and old lines)."""

    kind: str
    path: str
    detail: str

    @property
    def words(self) -> str:
        if self.kind == "same-hunk":
            return f"both change hunk {self.detail} of {self.path}"
        return f"both change {self.path} lines {self.detail}"


@dataclass(frozen=True)
class Collision:
    patch: str
    patch_pr: int
    upstream: int
    title: str
    url: str
    author: str
    updated_at: str | None
    overlaps: tuple[Overlap, ...]

    @property
    def text(self) -> str:
        first = "; ".join(o.words for o in self.overlaps[:3])
        more = f" (+{len(self.overlaps) - 3} more)" if len(self.overlaps) > 3 else ""
        return f"open #{self.upstream} ({self.title}) collides with {self.patch}: {first}{more}"

    def to_json(self) -> dict[str, Any]:
        return {"patch": self.patch, "patch_pr": self.patch_pr, "upstream": self.upstream, "title": self.title,
                "url": self.url, "author": self.author, "updated_at": self.updated_at, "text": self.text,
                "overlaps": [{"kind": o.kind, "path": o.path, "detail": o.detail} for o in self.overlaps]}


@dataclass(frozen=True)
class CollisionSearch:
    collisions: tuple[Collision, ...]
    compared: int  # open PRs whose files were compared
    problem: str | None = None

    def for_patch(self, name: str) -> tuple[Collision, ...]:
        return tuple(c for c in self.collisions if c.patch == name)

    def to_json(self) -> dict[str, Any]:
        return {"compared_open_prs": self.compared, "problem": self.problem, "collisions": [c.to_json() for c in self.collisions]}


def find_collisions(client: "GitHubClient", budget: Budget, queued: Sequence[QueuedHunks], skip: frozenset[int] = frozenset(),
                    max_prs: int = MAX_OPEN_PRS) -> CollisionSearch:
    """Collisions of each queued patch with open upstream PRs (`skip`: the tracked PRs themselves,
    whose later revisions `refresh` already covers). Never raises for GitHub trouble or a spent
    budget: it stops and says why."""
    if not queued:
        return CollisionSearch((), 0)
    found: list[Collision] = []
    compared = 0
    try:
        open_prs = [p for p in budget.call(client.open_pulls, max_prs) if p.number not in skip]
        for pr in open_prs[:max_prs]:
            theirs = file_hunks(budget.call(client.pull_files, pr.number))
            compared += 1
            for patch in queued:
                overlaps = compare(patch.hunks, theirs)
                if overlaps:
                    found.append(Collision(patch.name, patch.pr, pr.number, pr.title, pr.html_url, pr.author,
                                           pr.updated_at, overlaps))
        problem = None
    except BudgetSpent:
        problem = f"request limit reached after comparing {compared} open PRs"
    except PorttrackError as exc:
        problem = f"GitHub: {exc}"
    return CollisionSearch(tuple(found), compared, problem)


def compare(mine: Sequence[Hunk], theirs: Sequence[Hunk]) -> tuple[Overlap, ...]:
    """What `theirs` changes of what `mine` changes: shared hunk ids first, then overlapping lines."""
    ids = {h.id for h in theirs}
    out = [Overlap("same-hunk", h.path, h.id) for h in mine if h.id in ids]
    for h in mine:
        if h.id in ids:
            continue
        for other in theirs:
            if old_lines_overlap(h, other):
                out.append(Overlap("overlapping-lines", h.path, _lines(h, other)))
                break
    return tuple(out)


def _lines(a: Hunk, b: Hunk) -> str:
    start = max(a.old_start, b.old_start)
    end = min(a.old_start + max(a.old_len, 1), b.old_start + max(b.old_len, 1)) - 1
    return f"{start}-{end}" if end > start else str(start)





def render_lines(search: CollisionSearch) -> list[str]:
    """Lines for `status`, `queue` and the weekly issue."""
    head = f"collisions ahead (open upstream PRs compared: {search.compared})"
    lines = [head + (":" if search.collisions else ": none")]
    lines += [f"  {c.text}" for c in search.collisions]
    if search.problem:
        lines.append(f"  (search incomplete: {search.problem})")
    return lines
__all__ = ["Collision", "CollisionSearch", "Overlap", "QueuedHunks", "compare", "find_collisions", "render_lines"]
