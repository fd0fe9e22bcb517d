"""Every kind of change judged by its bytes and mode (issue 30): what a file's tree entry -- its
mode and blob id, as `git ls-tree` lists it -- says of a merged change's hunks, before their
lines are looked for (`porttrack.converge.decide`).

Lines alone cannot tell a symlink from a regular file holding the target's name (the same blob,
another mode), an empty added file from any other file, a submodule at one commit from another
(a gitlink has no blob to read), a rename from a copy (the old path must be gone too), or a file
whose text repeats so much that the pre- and post-image both occur near a hunk. Git's own entries
can: the merged change's file before (at the old path in the commit the change is taken against)
and after (at the new path in the merge), against the fork ref's entry where the hunk is now.

- the fork's entry is the merge's (same mode, same blob or commit): every hunk of that file is
  **present** -- except a rename's own meta hunk while the old path is still there (a copy);
- the fork's entry is the one before the change, and nothing is at the new path: **missing**;
- a symlink, a submodule or a regular file where the change has another kind of entry, a
  submodule at a third commit, a non-empty file (or another mode) where the change adds an empty
  file: none of its hunks is there, and the pre-image is not either: **unknown**, saying which;
- anything else: the lines decide (None).

The entries come from the repository's one object reader (`GitRepo.tree_entries`): no git
process of their own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping, Sequence

from porttrack.converge.history import LITERAL, rename_in
from porttrack.diff import presence
from porttrack.git.repo import GitRepo

if TYPE_CHECKING:
    from porttrack.diff.hunks import FileDiff, Hunk

Entry = tuple[str, str]  # (mode, object id) as `git ls-tree` lists it
GITLINK, SYMLINK, TREE = "160000", "120000", "040000"


@dataclass(frozen=True)
class Sides:
    """One file of the merged change: its entry before (at the old path) and after (at the new
    path); None where there is none (an added or a deleted file)."""

    before: Entry | None
    after: Entry | None


def sides(repo: GitRepo, start: str | None, merge: str, files: Sequence["FileDiff"]) -> dict[int, Sides]:
    """id(file diff) -> its `Sides`, read from the trees of the commit the change is taken
    against (`start`; None: a root commit) and of the merge. A type change (a symlink become a
    regular file) is two entries of one path, a deletion and an addition: each gets both sides of
    that path, so the deletion knows what replaced the old entry and the addition what it replaced."""
    before = repo.tree_entries(start, [fd.old_path or fd.path for fd in files]) if start and files else {}
    after = repo.tree_entries(merge, [fd.new_path or fd.path for fd in files]) if files else {}
    return {id(fd): Sides(before.get(fd.old_path or fd.path), after.get(fd.new_path or fd.path)) for fd in files}


def kind_of(mode: str) -> str:
    return {GITLINK: "submodule", SYMLINK: "symlink", TREE: "folder"}.get(mode, "regular file")


def left_behind(h: "Hunk", fd: "FileDiff", fork: Mapping[str, Entry], base: Mapping[str, Entry] | None = None) -> str | None:
    """A rename's meta hunk whose old path is still at the fork ref (and not as the upstream base
    has it there, which would be upstream's own file): the words for it, else None."""
    if fd.status != "renamed" or h.kind != "meta" or fd.old_path is None:
        return None
    old = fork.get(fd.old_path)
    if old is None or (base is not None and base.get(fd.old_path) == old):
        return None
    return f"{fd.old_path} is still at the fork ref: a copy, not the rename (the old path must be gone too)"


def judge(h: "Hunk", fd: "FileDiff", s: Sides, path: str, fork: Mapping[str, Entry], number: int,
          base: Mapping[str, Entry] | None = None) -> tuple[str, str] | None:
    """(state, detail) of hunk `h` of file `fd` by the fork ref's tree entries (`fork`: path ->
    entry), the hunk's file now being at `path` (where a later upstream rename moved it); None:
    the entries do not decide, the lines do. `base`: the upstream base's entries, when known (an
    old path the base has too is upstream's, not a leftover copy)."""
    at = fork.get(path)
    if at is None and path != fd.path:
        path, at = fd.path, fork.get(fd.path)
    old = fork.get(fd.old_path) if fd.old_path not in (None, fd.path) else None
    if fd.status == "deleted":  # gone or still there: the callers know; a type change's new entry is the merge's
        if at is not None and s.after is not None and at == s.after:
            return "present", f"the {kind_of(s.before[0]) if s.before else 'old entry'} is gone: the fork ref's {path} is the merge's ({_words(at)})"
        return None
    copy = left_behind(h, fd, fork, base)
    if copy is not None and at is not None:
        return "missing", f"{path} is at the fork ref, but {copy}"
    if at is not None and s.after is not None and at == s.after:
        return "present", f"the fork ref's {path} is the merge's, byte for byte ({_words(at)})"
    if at is None:
        if s.before is not None and old == s.before and fd.status == "renamed":
            return "missing", f"not renamed at the fork ref: {fd.old_path} is still there as it was before #{number}"
        return None  # absent: an added file missing, or a file upstream moved; the callers know
    if s.before is not None and (fd.old_path or fd.path) == fd.path and at == s.before:
        return "missing", f"pre-image still at the fork ref: its {path} is the one before #{number}, byte for byte ({_words(at)})"
    if s.after is None:
        return None
    if kind_of(at[0]) != kind_of(s.after[0]):
        return "unknown", (f"the fork ref has a {kind_of(at[0])} at {path} where #{number} has a {kind_of(s.after[0])} "
                           f"({_words(at)}, not {_words(s.after)}): its bytes alone are not the change")
    if at[0] == GITLINK:
        was = f", nor its old {s.before[1][:12]}" if s.before is not None and s.before[0] == GITLINK else ""
        return "unknown", f"the submodule {path} is at {at[1][:12]} at the fork ref: not #{number}'s {s.after[1][:12]}{was}"
    if fd.status == "added" and h.kind == "meta":  # an empty file added: its entry is all there is
        return "unknown", f"the fork ref's {path} is {_words(at)}, where #{number} adds an empty file ({_words(s.after)})"
    return None


def _words(e: Entry) -> str:
    if e[0] == GITLINK:
        return f"submodule at {e[1][:12]}"
    return f"mode {e[0]}, blob {e[1][:12]}"



def renamed_in(repo: GitRepo, old: str, new: str, paths: Sequence[str]) -> dict[str, str]:
    """path -> where git's rename detection (`-M`) finds it between commits `old` and `new`, for
    the `paths` it moved. One `git diff` of the two trees (the pathspec cannot be narrowed to
    `paths`: a rename's other side is anywhere)."""
    out = repo.run("diff", "-M", "--name-status", "-z", "--no-ext-diff", "--no-textconv", "--diff-filter=R", old, new,
                   env=LITERAL).stdout
    found = {path: rename_in(out, path) for path in paths}
    return {path: to for path, to in found.items() if to is not None}


def moved(h: "Hunk", fd: "FileDiff", s: Sides, to: str, entries: Mapping[str, Entry],
          files: Mapping[str, tuple[str, bytes]]) -> tuple[str, str]:
    """(state, words) of hunk `h` of the added file `fd`, which the fork ref has at `to`: present
    when the entry there is the merge's or the hunk's lines are there, else unknown (moved and
    changed since: whose change, the fork's or upstream's, its own history does not say)."""
    at = entries.get(to)
    where = f"the fork ref has {fd.path} moved to {to} (git's rename detection)"
    if at is not None and s.after is not None and at == s.after:
        return "present", f"{where}, byte for byte as merged ({_words(at)})"
    if at is not None and s.after is not None and kind_of(at[0]) != kind_of(s.after[0]):
        return "unknown", f"{where}, but as a {kind_of(at[0])}, not a {kind_of(s.after[0])}"
    data = files.get(to)
    if h.kind == "text" and data is not None and presence.hunk_state(h, data[1]) == "applied":
        return "present", f"{where}, with this hunk's lines"
    return "unknown", f"{where}, and changed there since: the hunk's lines as merged are not all there"
