"""Ports found in the fork's own history: which fork commits carry which upstream PR, and how we
know.

The fork's commits since it last based on upstream (`<fork.upstream_base>..<fork.branch>`) are
read once (`GitRepo.log_patches`). Two independent kinds of evidence:
- markers written in the message: `(cherry picked from commit X)` (git cherry-pick -x),
  `Port: upstream #N [through SHA [only]]` (a port of PR N, possibly only up to PR commit SHA),
  `Upstream-PR: #N` / `Backport of #N`;
- content: a fork commit whose diff carries hunk ids of a tracked PR (or near-matches: same path,
  mostly the same added lines, for a hand port with edits), whatever its message says.
`porttrack.converge.coverage` uses both, plus the commits tracks.yaml lists (`fork_commits`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from porttrack.common.errors import InputError, PorttrackError
from porttrack.diff.hunks import Hunk, parse_diff
from porttrack.git.repo import GitRepo, fork_branch_ref
from porttrack.tracks.config import Config

MAX_FORK_COMMITS = 500  # how far back the fork's history is read

_CHERRY = re.compile(r"\(cherry picked from commit ([0-9a-f]{7,40})\)")
_PORT = re.compile(r"^\W*Port(?:ed)?:?\s+(?:of\s+)?upstream\s+(?:vLLM\s+)?(?:PR\s*)?#(\d+)"
                   r"(?:\s+(?:through|up to)\s+([0-9a-f]{7,40})(\s+only)?)?", re.I | re.M)
_TRAILER = re.compile(r"^Upstream-PR:\s*(?:\S*/pull/|#)?(\d+)\b", re.I | re.M)
_BACKPORT = re.compile(r"\bBackport of (?:\S*/pull/|#)(\d+)\b", re.I)


@dataclass(frozen=True)
class Marker:
    """A port note in a fork commit's message. kind: cherry-pick | port-note | trailer | backport.
    `pr` is None for a cherry-pick until its source commit is matched to a PR; `upstream_commit`
    is the cherry-pick's source or the port note's "through" commit; `only`: "through SHA only"."""

    kind: str
    pr: int | None
    upstream_commit: str | None
    only: bool
    text: str


@dataclass(frozen=True)
class ForkCommit:
    sha: str
    subject: str
    markers: tuple[Marker, ...]
    hunks: tuple[Hunk, ...]  # text hunks of its diff


def read_markers(message: str) -> tuple[Marker, ...]:
    out = [Marker("cherry-pick", None, m.group(1), False, m.group(0)) for m in _CHERRY.finditer(message)]
    out += [Marker("port-note", int(m.group(1)), m.group(2), bool(m.group(3)), m.group(0).strip()) for m in _PORT.finditer(message)]
    out += [Marker("trailer", int(m.group(1)), None, False, m.group(0).strip()) for m in _TRAILER.finditer(message)]
    out += [Marker("backport", int(m.group(1)), None, False, m.group(0).strip()) for m in _BACKPORT.finditer(message)]
    return tuple(out)


def fork_history(repo: GitRepo, config: Config, limit: int = MAX_FORK_COMMITS) -> tuple[ForkCommit, ...]:
    """The fork branch's own commits since upstream_base (all of the branch's history, bounded,
    when upstream_base is not in the checkout), newest first."""
    branch = fork_branch_ref(repo, config.fork.branch)
    base = config.fork.upstream_base
    rev_range = f"{base}..{branch}" if base and repo.rev_parse(base) else branch
    return tuple(_commit(sha, message, patch) for sha, message, patch in repo.log_patches(rev_range, limit))


def _commit(sha: str, message: str, patch: bytes) -> ForkCommit:
    try:
        hunks = tuple(h for fd in parse_diff(patch) for h in fd.text_hunks) if patch.strip() else ()
    except InputError:
        hunks = ()  # a commit whose diff does not parse still counts by its markers
    return ForkCommit(sha, message.split("\n", 1)[0], read_markers(message), hunks)


def pr_commits(repo: GitRepo, base: str, head: str) -> tuple[str, ...]:
    """The PR's own commits (for matching cherry-picks), oldest first."""
    try:
        return tuple(reversed(repo.rev_list(f"{base}..{head}")))
    except PorttrackError:
        return ()


def markers_for(history: Sequence[ForkCommit], pr: int, commits: Sequence[str]) -> tuple[tuple[ForkCommit, Marker], ...]:
    """Fork commits whose markers name PR `pr`, or cherry-pick one of its `commits`."""
    out = []
    for fc in history:
        for m in fc.markers:
            cherry = m.kind == "cherry-pick" and m.upstream_commit and any(c.startswith(m.upstream_commit) for c in commits)
            if m.pr == pr or cherry:
                out.append((fc, m))
    return tuple(out)


__all__ = ["ForkCommit", "MAX_FORK_COMMITS", "Marker", "fork_history", "markers_for", "pr_commits", "read_markers"]
