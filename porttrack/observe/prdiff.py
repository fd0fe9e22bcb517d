"""Hunks of a pull request read from GitHub's file list, and how two hunks compare.

The files endpoint sends each file's hunks without a git header (`PRFile.patch`); wrapped in one
they parse like any diff, so their ids are `porttrack.diff.hunks` ids and agree with ids of the same
change computed from git. Only text hunks are compared: the listing carries no file modes, so a
meta pseudo-hunk from it would not match one computed from git.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Sequence

from porttrack.common.errors import InputError
from porttrack.diff.hunks import Hunk, parse_diff
from porttrack.github.records import PRFile

if TYPE_CHECKING:  # annotations only: coverage's near_match (`status --offline`) loads no GitHub record
    from porttrack.github.records import PRFile

NEAR_MATCH = 0.6  # share of a hunk's added lines another hunk must carry to be "mostly the same"


def file_hunks(files: Sequence[PRFile]) -> tuple[Hunk, ...]:
    """The text hunks of `files`; a file GitHub sent without hunks (binary, too large) or that does
    not parse adds none."""
    out: list[Hunk] = []
    for f in files:
        if not f.patch:
            continue
        try:
            entries = parse_diff(_wrapped(f))
        except InputError:
            continue
        out.extend(h for fd in entries for h in fd.text_hunks)
    return tuple(out)


def _wrapped(f: PRFile) -> bytes:
    old = f.previous_filename or f.filename
    head = [f"diff --git a/{old} b/{f.filename}"]
    if f.status == "added":
        head += ["new file mode 100644", "--- /dev/null", f"+++ b/{f.filename}"]
    elif f.status == "removed":
        head += ["deleted file mode 100644", f"--- a/{old}", "+++ /dev/null"]
    else:
        if f.previous_filename and f.previous_filename != f.filename:
            head += [f"rename from {old}", f"rename to {f.filename}"]
        head += [f"--- a/{old}", f"+++ b/{f.filename}"]
    body = f.patch or ""
    return ("\n".join(head) + "\n" + body + ("" if body.endswith("\n") else "\n")).encode("utf-8", "surrogateescape")


def git_hunks(repo, remote: str, number: int, head: str | None, base: str | None, fetch: bool = True) -> tuple[Hunk, ...] | None:
    """PR `number`'s text hunks from git (its head against the merge-base with `base`), the same
    ids as `file_hunks` gives for GitHub's file list, at no counted request and with no 300-file
    cap; the head fetched from `refs/pull/N/head` when the fork checkout lacks it. None when git
    cannot say (no checkout, head or base not to be had): the caller asks GitHub."""
    import re

    from porttrack.common.errors import PorttrackError
    from porttrack.git.repo import pull_ref

    if repo is None or repo.offline or not head or not base or not all(re.fullmatch(r"[0-9a-f]{40}|[0-9a-f]{64}", s) for s in (head, base)):
        return None
    try:
        if repo.commits_present([head, base]) != {head, base}:
            if not fetch:
                return None
            repo.fetch(remote, [f"+refs/pull/{int(number)}/head*:{pull_ref(int(number))}*"], blobless=repo.partial_clone)
            if repo.commits_present([head, base]) != {head, base}:
                return None
        mb = repo.merge_base(base, head)
        if mb is None:
            return None
        return tuple(h for fd in parse_diff(repo.diff(mb, head)) for h in fd.text_hunks)
    except PorttrackError:
        return None


def added_share(wanted: Hunk, other: Hunk) -> float:
    """How much of `wanted`'s added lines `other` also adds (0..1; whitespace at line ends ignored).
    A hunk that only removes lines compares its removed lines instead."""
    mine = [line.rstrip() for line in (wanted.added_lines() or wanted.removed_lines())]
    theirs = [line.rstrip() for line in (other.added_lines() if wanted.added_lines() else other.removed_lines())]
    if not mine:
        return 0.0
    common = Counter(mine) & Counter(theirs)
    return sum(common.values()) / len(mine)


def near_match(wanted: Hunk, others: Sequence[Hunk]) -> Hunk | None:
    """A hunk of `others` on the same path that carries most of `wanted`'s change, if any."""
    best, share = None, 0.0
    for h in others:
        if h.path == wanted.path and h.kind == "text":
            s = added_share(wanted, h)
            if s > share:
                best, share = h, s
    return best if share >= NEAR_MATCH else None


def old_lines_overlap(a: Hunk, b: Hunk) -> bool:
    """Whether two hunks of the same file change overlapping lines of the file they both start from
    (their `-` ranges; a pure insertion counts as the one line it follows)."""
    if a.path != b.path:
        return False
    a0, a1 = a.old_start, a.old_start + max(a.old_len, 1)
    b0, b1 = b.old_start, b.old_start + max(b.old_len, 1)
    return a0 < b1 and b0 < a1


__all__ = ["NEAR_MATCH", "added_share", "file_hunks", "git_hunks", "near_match", "old_lines_overlap"]
