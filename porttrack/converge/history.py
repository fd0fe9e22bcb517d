"""What `verify-converged` reads from the history (`porttrack.converge.decide` decides with it):
files and blobs at a commit, where a hunk's lines are at the fork ref, upstream's later commits on
a path, patch-ids, and whether a merge was GitHub's "rebase and merge". Every read goes through
the one git door (`GitRepo.run`)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

from porttrack.common.errors import CannotEvaluate
from porttrack.diff import hunks as hunks_mod
from porttrack.gitrepo import GitRepo

if TYPE_CHECKING:
    from porttrack.diff.hunks import FileDiff

_FULL_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")

# PR file paths are untrusted text: never let git read them as pathspec magic (":(glob)...").
LITERAL = {"GIT_LITERAL_PATHSPECS": "1"}

# One later upstream commit touching a path: (sha, subject, (mode, bytes) of the path there or None).
Later = tuple[str, str, "tuple[str, bytes] | None"]


def locations(repo: GitRepo, merge: str, fork_sha: str, files: Sequence["FileDiff"],
               at_fork: Mapping[str, tuple[str, bytes]]) -> dict[int, tuple[int, int]]:
    """id(hunk) -> where its lines are in the fork ref's file (0-based first and last line): the
    hunk's post-image lines in the merge commit's file, mapped through `git diff -U0 <merge>
    <fork>` of that file (one diff for all the PR's text files). A line the fork changed maps to
    the region it changed. Whether the fork has the hunk or never took it, this is where its
    post- or pre-image must be: the same text elsewhere in the file is not this hunk."""
    texts = [fd for fd in files if fd.path in at_fork and fd.status != "deleted" and any(h.kind == "text" for h in fd.hunks)]
    if not texts:
        return {}
    regions: dict[str, list[tuple[int, int, int, int]]] = {fd.path: [] for fd in texts}
    diff = repo.run("diff", "-U0", "--no-renames", "--no-ext-diff", "--no-textconv", merge, fork_sha, "--",
                    *sorted(regions), env=LITERAL).stdout
    for fd in hunks_mod.parse_diff(diff):
        if fd.path in regions:
            regions[fd.path] = [(h.old_start, h.old_len, h.new_start, h.new_len) for h in fd.hunks if h.kind == "text"]
    out: dict[int, tuple[int, int]] = {}
    for fd in texts:
        for h in fd.hunks:
            if h.kind == "text":
                last = h.new_start + max(h.new_len, 1) - 1
                out[id(h)] = (map_line(regions[fd.path], h.new_start)[0] - 1, map_line(regions[fd.path], last)[1] - 1)
    return out


def map_line(regions: Sequence[tuple[int, int, int, int]], x: int) -> tuple[int, int]:
    """Line `x` (1-based) of the old side of a `-U0` diff on its new side: (first, last) -- one
    line, or the whole region the diff changed when x is inside it."""
    shift = 0
    for a, b, c, d in regions:
        if b == 0:  # lines inserted after old line a
            if x > a:
                shift += d
                continue
            break
        if x < a:
            break
        if x < a + b:  # x was changed: somewhere in the new region (after line c when it is empty)
            return (c, c + d - 1) if d else (c, c + 1)
        shift += d - b
    return x + shift, x + shift


# Options of a `log` step that also lists, with git's rename detection against the first parent,
# everything the commit changed (not only the pathspec): what `renamed_to` would ask diff-tree.
STEP_WITH_RENAMES = ("--full-diff", "--diff-merges=first-parent", "-M", "--name-status", "-z")


def renamed_to(repo: GitRepo, sha: str, path: str) -> str | None:
    """Where commit `sha` moved `path` (git's rename detection against its first parent), if it did."""
    return rename_in(repo.run("diff-tree", "-r", "-M", "--no-commit-id", "--name-status", "-z", f"{sha}^", sha).stdout, path)


def rename_in(name_status: bytes, path: str) -> str | None:
    """Where a `--name-status -z` listing (with rename detection) moved `path`, if it did."""
    out = name_status.split(b"\0")
    i = 0
    while i < len(out) - 1:
        status = out[i].decode()
        if status.startswith(("R", "C")):
            old, new = out[i + 1].decode("utf-8", "surrogateescape"), out[i + 2].decode("utf-8", "surrogateescape")
            if old == path and status.startswith("R"):
                return new
            i += 3
        else:
            i += 2
    return None


def later_upstream(repo: GitRepo, merge: str, base_sha: str, paths: Sequence[str]) -> dict[str, list[Later]]:
    """path -> the commits on the ancestry path from the merge to the base that touched it, oldest
    first, each with the path's content there. `--ancestry-path` keeps out side branches cut
    before the merge (they lack the post-image for want of the merge, not because of churn); a
    merge commit's change is taken against its first parent, as `_change_present` reads it.
    One `log --raw` per path (it gives each commit's mode and blob) and one `cat-file --batch`."""
    found: dict[str, list[tuple[str, str, str, str]]] = {}
    for path in paths:
        log = repo.text("log", "--ancestry-path", "--topo-order", "--reverse", "--no-renames", "--raw", "--no-abbrev",
                        "--diff-merges=first-parent", "--format=commit %H %s", f"{merge}..{base_sha}", "--", path, env=LITERAL)
        commits: list[tuple[str, str, str, str]] = []
        for line in log.splitlines():
            if line.startswith("commit "):
                sha, _, subject = line[len("commit "):].partition(" ")
                commits.append((sha, subject, "", ""))
            elif line.startswith(":") and commits:  # ":<old mode> <new mode> <old blob> <new blob> <status>\t<path>"
                fields = line[1:].split("\t", 1)[0].split()
                commits[-1] = (*commits[-1][:2], fields[1], fields[3])
        found[path] = commits
    blobs = cat_blobs(repo, sorted({blob for commits in found.values() for _, _, mode, blob in commits if mode and set(mode) != {"0"}}))  # a submodule's is a commit: not here
    unread = sorted({path for path, commits in found.items() for _, _, mode, blob in commits
                     if mode and set(mode) != {"0"} and mode not in ("040000", "160000") and blob not in blobs})
    if unread:  # a blob a commit names is never taken for a deletion
        raise CannotEvaluate(unreadable(repo, f"{merge}..{base_sha}", unread))
    out: dict[str, list[Later]] = {}
    for path, commits in found.items():
        out[path] = [(sha, subject, (mode, blobs[blob]) if blob in blobs and set(mode) != {"0"} else None)
                     for sha, subject, mode, blob in commits if mode]  # (no raw line: nothing to read)
    return out


def patch_ids(repo: GitRepo, shas: Iterable[str]) -> dict[str, str]:
    """commit -> `git patch-id --stable` of its change against its first parent (merges: none).
    An item "<commit> <other>" (diff-tree's stdin form) means the commit's change against
    `other`, keyed by the commit."""
    shas = list(shas)
    if not shas:
        return {}
    diffs = repo.run("diff-tree", "--stdin", "-p", "--root", "--binary", "--full-index", input=("\n".join(shas) + "\n").encode()).stdout
    out = repo.run("patch-id", "--stable", input=diffs).stdout.decode()
    return {commit: pid for pid, commit in (line.split() for line in out.splitlines() if line.strip())}


def patch_id_of_change(repo: GitRepo, old: str, new: str) -> str | None:
    diff = repo.run("diff-tree", "-p", "--binary", "--full-index", old, new).stdout
    out = repo.run("patch-id", "--stable", input=diff).stdout.decode().split()
    return out[0] if out else None


def rebase_merged(repo: GitRepo, merge: str, head: str | None) -> tuple[str, tuple[str, ...]] | None:
    """For a merge commit with one parent: was the PR merged by GitHub's "Rebase and merge"? That
    replays each PR commit onto the base, keeping its author (with the date) and message, and
    `merge_commit_sha` is the last copy -- so the merge against its parent is only the PR's last
    commit, not its change. When `merge` has the PR head's author and message, the PR's own
    commits (`head`, not in `merge`'s history) are matched, newest first, with `merge`'s
    first-parent chain: (the commit the change starts from, the upstream copies oldest first).
    None: not a rebase merge (a squash commit has its own message), or `head` is not local or not
    a full hex SHA (it comes from the recorded state or GitHub: untrusted). A rebase merge whose
    copies do not match the PR's commits cannot be read: CannotEvaluate."""
    if not isinstance(head, str) or not _FULL_SHA.fullmatch(head) or head == merge:
        return None
    objects = repo.read_objects([merge, head])
    if objects.get(merge) is None or objects.get(head) is None or _identity(objects[merge][1]) != _identity(objects[head][1]):
        return None
    own = repo.text("rev-list", "--no-merges", "--topo-order", head, "--not", merge).split()  # newest first
    if len(own) < 2:
        return None  # one commit: its copy against its parent is the whole change, as for a squash
    chain = repo.text("rev-list", "--first-parent", f"--max-count={len(own) + 1}", merge).split()
    found = repo.read_objects([*own, *chain])
    if len(chain) <= len(own) or any(found.get(a) is None or found.get(b) is None or _identity(found[a][1]) != _identity(found[b][1])
                                     for a, b in zip(own, chain)):
        raise CannotEvaluate(f"merge commit {merge[:12]} carries the PR head's author and message, as a rebase merge does, but the "
                             f"{len(own)} commits before it on upstream's branch are not copies of the PR's {len(own)} commits: "
                             f"where its change starts cannot be told")
    return chain[len(own)], tuple(reversed(chain[:len(own)]))


def _identity(commit: bytes) -> tuple[bytes, bytes]:
    """A commit's author line (name, email, date) and message: what a rebase keeps."""
    header, _, message = commit.partition(b"\n\n")
    author = next((line for line in header.split(b"\n") if line.startswith(b"author ")), b"")
    return author, message


def read_files(repo: GitRepo, rev: str, paths: Sequence[str]) -> dict[str, tuple[str, bytes]]:
    """path -> (mode, content) at `rev` for the paths that exist there as files (what `git ls-tree`
    lists as blobs): the trees of their folders, then the blobs, from the repository's one reader."""
    entries = {path: e for path, e in repo.tree_entries(rev, paths).items() if e[0] not in ("040000", "160000")}
    blobs = cat_blobs(repo, sorted({sha for _, sha in entries.values()}))
    unread = sorted(path for path, (_, sha) in entries.items() if sha not in blobs)
    if unread:  # named by the tree, so it exists: never taken for an absent file
        raise CannotEvaluate(unreadable(repo, rev, unread))
    return {path: (mode, blobs[sha]) for path, (mode, sha) in entries.items()}


def unreadable(repo: GitRepo, rev: str, paths: Sequence[str]) -> str:
    """Why files a tree names could not be read: their contents are not in the repository (a
    partial clone fetches them on demand, and that fetch failed or, offline, was not allowed)."""
    shown = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
    return (f"{shown} at {str(rev)[:12]}: the contents are not in {repo.path} (a partial clone fetches file contents "
            f"on demand: that fetch failed or, offline, was not allowed); run it again with network access")


def cat_blobs(repo: GitRepo, shas: Sequence[str]) -> dict[str, bytes]:
    """sha -> content, for the objects that exist (the repository's one reader)."""
    return {sha: obj[2] for sha, obj in repo.objects(shas).items() if obj is not None}
