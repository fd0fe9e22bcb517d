"""What `verify-converged` reads from the history (`porttrack.converge.decide` decides with it):
files and blobs at a commit, where a hunk's lines are at the fork ref, upstream's later commits on
a path, patch-ids, and whether a merge was GitHub's "rebase and merge". Every read goes through
the one git door (`GitRepo.run`)."""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING, Iterable, Mapping, Sequence

from porttrack.common.errors import CannotEvaluate
from porttrack.diff import hunks as hunks_mod
from porttrack.diff import presence
from porttrack.git.repo import GitRepo

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
    post- or pre-image must be: the same text elsewhere in the file is not this hunk. Files whose
    blob at the fork ref is the merge's are not diffed (none: no process)."""
    texts = [fd for fd in files if fd.path in at_fork and fd.status != "deleted" and any(h.kind == "text" for h in fd.hunks)]
    if not texts:
        return {}
    regions: dict[str, list[tuple[int, int, int, int]]] = {fd.path: [] for fd in texts}
    # a file the fork has as the merge left it (same blob: a cherry-pick) maps every line to itself
    at_merge, at_ref = repo.tree_entries(merge, sorted(regions)), repo.tree_entries(fork_sha, sorted(regions))
    changed = sorted(path for path in regions if at_merge.get(path) is None or at_merge.get(path) != at_ref.get(path))
    diff = repo.run("diff", "-U0", "--no-renames", "--no-ext-diff", "--no-textconv", merge, fork_sha, "--",
                    *changed, env=LITERAL).stdout if changed else b""
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
    `other`, keyed by the commit. One `diff-tree` process; the ids are computed here
    (`patch_ids_of`, git's algorithm), not by a `git patch-id` process."""
    shas = list(shas)
    if not shas:
        return {}
    diffs = repo.run("diff-tree", "--stdin", "-p", "--root", "--binary", "--full-index", input=("\n".join(shas) + "\n").encode()).stdout
    algo = "sha256" if len(shas[0].split()[0]) == 64 else "sha1"
    return {commit: pid for pid, commit in patch_ids_of(diffs, algo)}


def patch_id_of_change(repo: GitRepo, old: str, new: str) -> str | None:
    diff = repo.run("diff-tree", "-p", "--binary", "--full-index", old, new).stdout
    out = patch_ids_of(diff, "sha256" if len(old) == 64 else "sha1")
    return out[0][0] if out else None


# -- `git patch-id --stable`, in process

_DIGITS = re.compile(rb"[0-9]*")


def _digits(line: bytes, at: int) -> int:
    return len(_DIGITS.match(line, at).group())  # type: ignore[union-attr]  # [0-9]* matches everywhere, if only ""


def _scan_hunk_header(line: bytes, counts: list[int]) -> None:
    """builtin/patch-id.c's scan_hunk_header: the old and new line counts of an `@@ -a,b +c,d @@`
    line into `counts` (a missing count is 1), set as far as the line reads."""
    q = 4
    n = _digits(line, q)
    if line[q + n:q + n + 1] == b",":
        q += n + 1
        counts[0] = int(line[q:q + _digits(line, q)] or b"0")
        n = _digits(line, q)
    else:
        counts[0] = 1
    if n == 0 or line[q + n:q + n + 2] != b" +":
        return
    r = q + n + 2
    n = _digits(line, r)
    if line[r + n:r + n + 1] == b",":
        r += n + 1
        counts[1] = int(line[r:r + _digits(line, r)] or b"0")
    else:
        counts[1] = 1


def _add(result: bytes, digest: bytes) -> bytes:
    out, carry = bytearray(len(digest)), 0
    for i in range(len(digest)):
        carry += result[i] + digest[i]
        out[i] = carry & 0xFF
        carry >>= 8
    return bytes(out)


def patch_ids_of(stream: bytes, algo: str = "sha1") -> list[tuple[str, str]]:
    """`git patch-id --stable` of `stream` (diffs, each after a line that starts with its commit's
    SHA, as `diff-tree --stdin` prints them): [(patch-id, commit)], as git prints them. A port of
    builtin/patch-id.c (git 2.39, its binary handling and hunk-header counts included), checked
    bit for bit against git on 3,026 real vLLM commits (tests/converge/test_history_patch_id.py): it spares a
    `git patch-id` process per verify."""
    hexlen = hashlib.new(algo).digest_size * 2
    oid_at = re.compile(rb"[0-9a-fA-F]{%d}" % hexlen)
    lines = stream.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    out = []
    i, n = 0, len(lines)
    zero = bytes(hashlib.new(algo).digest_size)
    oid = None
    while i < n:
        patchlen, before, after, binary = 0, -1, -1, False
        pre = post = b""
        ctx = hashlib.new(algo)
        result = zero
        found = None
        while i < n:
            line = lines[i].split(b"\0", 1)[0]
            i += 1
            p = line
            if line.startswith(b"diff-tree "):
                p = line[10:]
            elif line.startswith(b"commit "):
                p = line[7:]
            elif line.startswith(b"From "):
                p = line[5:]
            elif line.startswith(b"\\ ") and 12 < len(line) + 1:
                continue
            if oid_at.match(p):
                found = p[:hexlen].decode().lower()
                break
            if not patchlen and not line.startswith(b"diff "):
                continue
            if before == -1:
                if line.startswith(b"GIT binary patch") or line.startswith(b"Binary files"):
                    binary, before = True, 0
                    ctx.update(pre)
                    ctx.update(post)
                    result = _add(result, ctx.digest())
                    ctx = hashlib.new(algo)
                    continue
                if line.startswith(b"index "):
                    k = line.find(b"..")
                    if k >= 0:
                        e = line.find(b" ", k)
                        pre, post = line[6:k][:64], (line[k + 2:e] if e >= 0 else line[k + 2:])[:64]
                    continue
                if line.startswith(b"--- "):
                    before = after = 1
                elif not line[:1].isalpha():
                    break
            if binary:
                if line.startswith(b"diff "):
                    binary, before = False, -1
                continue
            if before == 0 and after == 0:
                if line.startswith(b"@@ -"):
                    counts = [before, after]
                    _scan_hunk_header(line, counts)
                    before, after = counts
                    continue
                if not line.startswith(b"diff "):
                    break
                result = _add(result, ctx.digest())
                ctx = hashlib.new(algo)
                before = after = -1
            if line[:1] in (b"-", b" "):
                before -= 1
            if line[:1] in (b"+", b" "):
                after -= 1
            stripped = line.translate(None, b" \t\n\r")
            patchlen += len(stripped)
            ctx.update(stripped)
        result = _add(result, ctx.digest())
        if patchlen:
            out.append((result.hex(), oid or zero.hex()))
        oid = found
    return out


def rebase_merged(repo: GitRepo, merge: str, head: str | None, base: str | None = None) -> tuple[str, tuple[str, ...]] | None:
    """For a merge commit with one parent: was the PR merged by GitHub's "Rebase and merge"? That
    replays each PR commit onto the base, keeping its author (with the date) and message, and
    `merge_commit_sha` is the last copy -- so the merge against its parent is only the PR's last
    commit, not its change. The PR's own commits are those of `head` that upstream's `merge` does
    not have, less its merges (a "Merge branch 'main'" is not replayed) and less what `base` (the
    recorded base branch tip: a stacked PR's other PR) has. When `merge` is a copy of one of them
    (same author and message), each copy on `merge`'s first-parent chain is found, newest first, by
    author and message, or by author and patch-id (`patch_ids`: a copy whose message was edited;
    the same change landed by someone else is no copy), until a commit that is none: (the commit the change starts from, the upstream copies oldest first).

    A PR commit with no copy there was dropped by the rebase as already applied: its change must be
    in upstream's tree where the copies start (each of its hunks applied there), and the PR is
    judged on the rest. None: not a rebase merge (a squash commit has its own message), one commit
    to replay, or `head` not local or not a full hex SHA (it comes from the recorded state or
    GitHub: untrusted). A PR commit that has no copy and whose change is not upstream: where the
    change starts cannot be told (CannotEvaluate)."""
    if not isinstance(head, str) or not _FULL_SHA.fullmatch(head) or head == merge:
        return None
    bases = [base] if isinstance(base, str) and _FULL_SHA.fullmatch(base) and base != head else []
    objects = repo.read_objects([merge, head, *bases])
    merge_obj, head_obj = objects.get(merge), objects.get(head)
    if merge_obj is None or head_obj is None:
        return None
    bases = [b for b in bases if (o := objects.get(b)) is not None and o[0] == "commit"]
    if not _on_pr_line(repo, head, head_obj[1], _identity(merge_obj[1])):
        return None  # a squash (its own message): no process asked
    own = repo.text("rev-list", "--no-merges", "--topo-order", head, "--not", merge, *bases).split()  # newest first
    if not own:
        return None
    found = repo.read_objects(own)
    if any(found.get(c) is None for c in own):
        return None
    by_identity = {_identity(o[1]): c for c in own if (o := found.get(c)) is not None}  # every one (checked above)
    if _identity(merge_obj[1]) not in by_identity or len(own) < 2:
        return None  # a squash; or one commit, whose copy against its parent is the whole change
    chain = repo.text("rev-list", "--first-parent", f"--max-count={len(own) + 1}", merge).split()
    found.update(repo.read_objects(chain))
    copies = _copies(chain, lambda c: by_identity.get(_identity(o[1])) if (o := found.get(c)) else None)
    if len(copies) < len(own):  # some have no copy by author and message: ask patch-ids too
        ids = patch_ids(repo, [*own, *chain])
        by_pid = {ids[c]: c for c in reversed(own) if c in ids}
        authors = {c: _identity(o[1])[0] for c in [*own, *chain] if (o := found.get(c))}
        copies = _copies(chain, lambda c: by_identity.get(_identity(o[1])) if (o := found.get(c)) else None,
                         lambda c: m if (m := by_pid.get(ids.get(c, ""))) and authors.get(m) == authors.get(c) else None)
    if len(copies) >= len(chain):
        raise CannotEvaluate(f"merge commit {merge[:12]} and every commit before it on upstream's branch ({len(chain)}) are copies of "
                             f"the PR's commits: where its change starts cannot be told")
    start = chain[len(copies)]
    dropped = [c for c in own if c not in set(copies.values())]
    unapplied = _not_applied_at(repo, dropped, start)
    if unapplied:
        raise CannotEvaluate(f"merge commit {merge[:12]} is a copy of a PR commit, as a rebase merge makes, but "
                             f"{len(unapplied)} of the PR's {len(own)} commits ({', '.join(c[:12] for c in unapplied[:3])}) have no "
                             f"copy on upstream's branch before it (neither by author and message nor by patch-id) and their change "
                             f"is not upstream's at {start[:12]} either: where its change starts cannot be told")
    return start, tuple(reversed(chain[:len(copies)]))


def _on_pr_line(repo: GitRepo, head: str, commit: bytes, wanted: tuple[bytes, bytes], limit: int = 32) -> bool:
    """Whether a commit with author and message `wanted` is among the first `limit` commits of the
    PR's own line: `head` (raw `commit`) and its first parents, through the repository's reader.
    A rebase merge's last copy is the newest PR commit it replayed, so it is there; a squash
    commit's message is its own."""
    for _ in range(limit):
        header = commit.split(b"\n\n", 1)[0]
        parents = [line[7:].decode() for line in header.split(b"\n") if line.startswith(b"parent ")]
        if len(parents) < 2 and _identity(commit) == wanted:
            return True
        if not parents:
            return False
        nxt = repo.read_objects([parents[0]]).get(parents[0])
        if nxt is None:
            return False
        commit = nxt[1]
    return False


def _copies(chain: Sequence[str], *matchers) -> dict[str, str]:
    """upstream copy -> PR commit, for the run of `chain` (newest first) from its first commit
    on whose every commit one of `matchers` names a PR commit not matched yet."""
    copies: dict[str, str] = {}
    for c in chain:
        match = next((m for m in (f(c) for f in matchers) if m is not None and m not in copies.values()), None)
        if match is None:
            break
        copies[c] = match
    return copies


def _not_applied_at(repo: GitRepo, commits: Sequence[str], at: str) -> list[str]:
    """The commits among `commits` whose change (against their first parent) is not in `at`'s
    tree: a hunk not applied there (`presence.hunk_state`), a mode not as the commit left it. Asked
    only of PR commits a rebase merge dropped (rare): one diff per commit."""
    out = []
    for c in commits:
        files = hunks_mod.parse_diff(repo.run("diff-tree", "-p", "--binary", "--full-index", "--no-renames", "--no-ext-diff",
                                              "--no-commit-id", "--root", c).stdout)
        entries = read_files(repo, at, [fd.path for fd in files])
        for fd in files:
            entry = entries.get(fd.path)
            ok = all(presence.hunk_state(h, entry[1] if entry else None) == "applied" for h in fd.hunks if h.kind != "meta")
            if fd.status != "deleted" and fd.new_mode is not None:
                ok = ok and entry is not None and entry[0] == fd.new_mode
            if not ok:
                out.append(c)
                break
    return out


def _identity(commit: bytes) -> tuple[bytes, bytes]:
    """A commit's author line (name, email, date) and message: what a rebase keeps (the message
    but for trailing white space: a message written on GitHub has no final newline, and a replay
    may add one)."""
    header, _, message = commit.partition(b"\n\n")
    author = next((line for line in header.split(b"\n") if line.startswith(b"author ")), b"")
    return author, message.rstrip()


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


# A fork this close to the merge's parent is walked in Python (`fork_since`); further: git's walk.
FORK_WALK_LIMIT = 64


def fork_since(repo: GitRepo, merge: str, parent: str, fork_sha: str, paths: Sequence[str],
               limit: int = FORK_WALK_LIMIT) -> tuple[str, list[tuple[str, str]]] | None:
    """For a merge commit with the one parent `parent` (a squash): the merge base of `merge` and the
    fork ref, and the fork's commits since it that touch `paths` -- `(merge base, [(sha, subject),
    ...] newest first)`, what `git merge-base` and `git log --no-merges <base>..<fork> -- <paths>`
    would say -- read from the repository's reader (no process of its own) when the fork's history
    since the merge's parent is at most `limit` commits: every line of it reaches `parent` or
    `merge`. Otherwise None (the caller asks git).

    Why this is the merge base: `merge`'s ancestors are itself and `parent`'s. A fork that reaches
    `merge` has it as the merge base; one whose every line reaches `parent` but never `merge` has
    `parent` (every other common ancestor is one of `parent`'s)."""
    stops = {merge, parent}
    seen: dict[str, tuple[str, ...]] = {}
    raw: dict[str, bytes] = {}
    frontier = [fork_sha]
    reached: set[str] = set()
    while frontier:
        todo = [c for c in dict.fromkeys(frontier) if c not in seen and c not in stops]
        reached.update(c for c in frontier if c in stops)
        if not todo:
            break
        if len(seen) + len(todo) > limit:
            return None
        objects = repo.read_objects(todo)
        frontier = []
        for c in todo:
            obj = objects.get(c)
            if obj is None or obj[0] != "commit":
                return None
            header = obj[1].split(b"\n\n", 1)[0]
            parents = tuple(line[7:].decode() for line in header.split(b"\n") if line.startswith(b"parent "))
            if not parents:
                return None  # a root commit before the merge's parent: not this fork's shape
            seen[c], raw[c] = parents, obj[1]
            frontier.extend(parents)
    if merge in reached:
        return merge, []
    if parent not in reached:
        return None
    own = [c for c, ps in seen.items() if len(ps) == 1]  # --no-merges
    wanted = sorted(set(paths))
    touched = []
    for c in own:
        if repo.tree_entries(c, wanted) != repo.tree_entries(seen[c][0], wanted):  # not TREESAME on the paths
            touched.append(c)
    touched.sort(key=lambda c: -_committed_at(raw[c]))  # git log's order: newest first
    return parent, [(c, _subject(raw[c])) for c in touched]


def _committed_at(commit: bytes) -> int:
    for line in commit.split(b"\n\n", 1)[0].split(b"\n"):
        if line.startswith(b"committer "):
            return int(line.rsplit(b" ", 2)[1])
    return 0


def _subject(commit: bytes) -> str:
    """`%s` of a raw commit: its message's first paragraph, lines joined by a space."""
    message = commit.split(b"\n\n", 1)[1] if b"\n\n" in commit else b""
    paragraph = message.lstrip(b"\n").split(b"\n\n", 1)[0]
    return " ".join(line.rstrip() for line in paragraph.decode("utf-8", "replace").split("\n") if line.strip())
