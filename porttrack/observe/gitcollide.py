"""Open upstream PRs compared with the queue through git: no counted request, no file cap.

An open PR's head is a git ref upstream serves (`refs/pull/N/head`). The listing of open PRs
(`collisions.list_open`, conditional) gives each PR's head and base; the heads the fork checkout
lacks come in one fetch (blobless when the checkout is a partial clone), each refspec a glob
(`refs/pull/N/head*`) so that a ref the host does not serve is left out without failing the rest.
Then, all in git:

1. each PR's merge-base with its base, for every PR at once from one `rev-list --boundary` walk
   (a PR whose walk meets its base in more than one place asks `git merge-base`);
2. which files each PR changes, one `diff-tree --stdin` for every PR not seen before (trees only:
   no file contents, no rename detection);
3. only for a PR that changes a path some queued patch changes: its changed lines (`git diff -U0
   -M`, rename detection on) and the queued hunks carried onto its merge-base (`LineMap`).

Every verdict of a PR that changes a queued path is kept in `.porttrack/collisions.json`, keyed
by (queued patch, PR head, PR merge-base); a PR's merge-base and files by (head, base) (a PR that
changes no queued path needs no verdict: its files say so). A run where nothing moved starts no git
process past the presence check; a moved PR is compared again, alone.

A PR whose head git cannot give (the host serves no pull refs, the ref is gone, the remote is
unreachable) is returned to the caller, which compares it from GitHub's file lists instead.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from porttrack.common.errors import GitError, PorttrackError, without_userinfo
from porttrack.diff.hunks import Hunk, parse_diff
from porttrack.git.repo import GitRepo, upstream_ref
from porttrack.workspace.files import atomic_write_text

CACHE_VERSION = 1
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
OPEN_REF = "refs/porttrack/open/"  # where fetched open-PR heads are kept (refs/porttrack/open/N)


@dataclass(frozen=True)
class Verdicts:
    """What the git path decided: per open PR it compared, per queued patch, the overlaps
    (`found[pr][patch]`, only the non-empty ones); the PRs it could not compare, and why."""

    found: dict[int, dict[str, tuple]]
    compared: frozenset[int]
    unserved: dict[int, str]
    fetched: int  # heads fetched this run (0: all were in the checkout)
    note: str | None = None  # a failure of the whole remote, said once


def scan(repo: GitRepo, remote: str, prs: Sequence[Any], queued: Sequence[Any], cache: Path | None,
         compare_one: Callable[..., tuple], line_map: Callable[..., Any], default_branch: str = "main",
         progress: Callable[[str], None] | None = None, fetch: bool = True) -> Verdicts:
    """Compare each of `prs` (listing records: number, head_sha, base_sha) with each `queued`
    patch through git. `compare_one(patch, pr_hunks, pr_files, lines)` and `line_map(repo, old,
    new, paths)` are the comparison's own (collisions.py), handed in so both paths judge alike.
    `fetch` False (`status --no-fetch`): only heads already in the checkout are compared here."""
    memo = _load(cache)
    unserved: dict[int, str] = {}
    prs = [pr for pr in prs if _SHA.fullmatch(pr.head_sha or "")]
    wanted = {pr.number: pr for pr in prs}
    heads, note, fetched = _heads(repo, remote, prs, default_branch, unserved, progress, fetch)
    bases = _bases(repo, wanted, heads, default_branch, unserved)
    ready = {n: (heads[n], bases[n]) for n in wanted if n in heads and n in bases}
    info = _pr_info(repo, ready, memo, unserved)
    ready = {n: pair for n, pair in ready.items() if n in info}
    patch_keys = {q.name: _patch_key(q) for q in queued}
    found: dict[int, dict[str, tuple]] = {}
    verdicts: dict[str, Any] = memo.setdefault("verdicts", {})
    used: set[str] = set()
    diffs: dict[int, tuple[tuple[Hunk, ...], dict[str, tuple[str, str | None]]]] = {}
    maps: dict[tuple[str, str], Any] = {}
    all_paths = sorted({h.path for q in queued for h in q.hunks})
    by_path: dict[str, list[Any]] = {}  # queued path -> the patches changing it, in queue order
    for q in queued:
        for path in dict.fromkeys(h.path for h in q.hunks):
            by_path.setdefault(path, []).append(q)
    order = {q.name: i for i, q in enumerate(queued)}
    for number in sorted(ready):
        head, mb, files = info[number]["head"], info[number]["mb"], info[number]["files"]
        # only a patch changing a path the PR changes can collide with it: the rest need no verdict
        relevant = sorted({q.name: q for path, _status in files for q in by_path.get(path, ())}.values(),
                          key=lambda q: order[q.name])
        for patch in relevant:
            key = f"{patch_keys[patch.name]}:{head}:{mb}"
            used.add(key)
            if key in verdicts:
                overlaps = tuple(tuple(o) for o in verdicts[key])
            else:
                if number not in diffs:
                    diffs[number] = _pr_diff(repo, mb, head, files, all_paths)
                hunks, changed = diffs[number]
                lines = None
                if patch.base is not None:
                    pair = (patch.base, mb)
                    if pair not in maps:
                        known = repo.commits_present(pair) == set(pair)
                        maps[pair] = line_map(repo, patch.base, mb, all_paths) if known else None
                    lines = maps[pair]
                overlaps = compare_one(patch, hunks, changed, lines)
            verdicts[key] = [list(o) for o in overlaps]
            if overlaps:
                found.setdefault(number, {})[patch.name] = overlaps
    memo["verdicts"] = {k: v for k, v in verdicts.items() if k in used}  # what no longer applies goes
    memo["prs"] = {str(n): info[n] for n in ready}
    _save(cache, memo)
    return Verdicts(found, frozenset(ready), unserved, fetched, note)


def _heads(repo: GitRepo, remote: str, prs: Sequence[Any], default_branch: str, unserved: dict[int, str],
           progress, fetch: bool = True) -> tuple[dict[int, str], str | None, int]:
    """{PR: the head commit to compare}, fetching what the checkout lacks (one fetch)."""
    local = repo.commits_present([pr.head_sha for pr in prs] + [pr.base_sha for pr in prs if pr.base_sha])
    absent = [pr for pr in prs if pr.head_sha not in local]
    bases_absent = any(pr.base_sha and pr.base_sha not in local for pr in prs)
    note = None
    if not fetch:
        for pr in absent:
            unserved[pr.number] = "its head is not in the fork checkout (--no-fetch)"
        return {pr.number: pr.head_sha for pr in prs if pr.head_sha in local}, None, 0
    if absent or bases_absent:
        # a glob refspec whose source the host does not serve matches nothing: no failure, no retry
        specs = [f"+refs/pull/{pr.number}/head*:{OPEN_REF}{pr.number}*" for pr in absent]
        specs.append(f"+refs/heads/{default_branch}:{upstream_ref(default_branch)}")
        try:
            repo.fetch(remote, specs, progress, blobless=repo.partial_clone)
        except GitError as exc:
            note = f"git fetch of the open PRs' heads from {without_userinfo(remote)} failed ({exc.stderr.strip()[:200] or exc})"
            for pr in absent:
                unserved[pr.number] = "its head could not be fetched"
            return {pr.number: pr.head_sha for pr in prs if pr.head_sha in local}, note, 0
        got = repo.commits_present(pr.head_sha for pr in absent)
        refs = repo.resolve(f"{OPEN_REF}{pr.number}" for pr in absent if pr.head_sha not in got)
        heads = {pr.number: pr.head_sha for pr in prs if pr.head_sha in local or pr.head_sha in got}
        for pr in absent:
            if pr.number in heads:
                continue
            moved = refs.get(f"{OPEN_REF}{pr.number}")
            if moved:  # pushed again since the listing: compare what the ref holds now
                heads[pr.number] = moved
            else:
                unserved[pr.number] = f"{remote} serves no refs/pull/{pr.number}/head"
        return heads, note, len(absent) - sum(1 for pr in absent if pr.number in unserved)
    return {pr.number: pr.head_sha for pr in prs}, None, 0


def _bases(repo: GitRepo, wanted: dict[int, Any], heads: dict[int, str], default_branch: str,
           unserved: dict[int, str]) -> dict[int, str]:
    """{PR: the base commit}: the listing's base SHA, or upstream's default branch when that one
    is not here (a base branch GitHub moved past, a fork's own base)."""
    asked = [wanted[n].base_sha for n in heads if wanted[n].base_sha]
    present = repo.commits_present(asked)
    tip = None
    out: dict[int, str] = {}
    for n in heads:
        base = wanted[n].base_sha
        if base in present:
            out[n] = base
            continue
        if tip is None:
            tip = repo.rev_parse(upstream_ref(default_branch)) or ""
        if tip:
            out[n] = tip
        else:
            unserved[n] = "its base is not in the fork checkout"
    return out


def _pr_info(repo: GitRepo, ready: dict[int, tuple[str, str]], memo: dict, unserved: dict[int, str]) -> dict[int, dict]:
    """{PR: {head, base, mb, files: [(path, status)]}}: remembered for an unmoved (head, base),
    else from one walk and one diff-tree for all the PRs that moved."""
    known = memo.get("prs", {})
    info: dict[int, dict] = {}
    todo: dict[int, tuple[str, str]] = {}
    for n, (head, base) in ready.items():
        old = known.get(str(n))
        if isinstance(old, dict) and old.get("head") == head and old.get("base") == base and "mb" in old:
            info[n] = {**old, "files": [tuple(f) for f in old.get("files", ())]}
        else:
            todo[n] = (head, base)
    if not todo:
        return info
    mbs = merge_bases(repo, todo)
    for n in [n for n in todo if mbs.get(n) is None]:  # git found none (unrelated histories): said, not guessed
        unserved[n] = "git finds no merge-base of its head and base"
        del todo[n]
    pairs = {n: (mb, todo[n][0]) for n in todo if (mb := mbs.get(n)) is not None}  # every one left has one
    files = repo.changed_files_many(list(pairs.values()))
    for n, (head, base) in todo.items():
        info[n] = {"head": head, "base": base, "mb": mbs[n], "files": files.get(pairs[n], [])}
    return info


def merge_bases(repo: GitRepo, pairs: dict[int, tuple[str, str]]) -> dict[int, str | None]:
    """{PR: merge-base of its (head, base)}: one `rev-list --boundary` walk from every head, every
    base excluded; a head that meets the bases in exactly one commit has that one. The rest (a PR
    that merged its base branch in, one whose walk is ambiguous) ask `git merge-base` each."""
    graph, boundary = repo.walk_boundary({h for h, _ in pairs.values()}, {b for _, b in pairs.values()})
    out: dict[int, str | None] = {}
    for n, (head, base) in pairs.items():
        if head not in graph:  # the head is reachable from a base: nothing of its own
            out[n] = head
            continue
        met: set[str] = set()
        stack, seen = [head], {head}
        while stack:
            for parent in graph.get(stack.pop(), ()):
                if parent in graph:
                    if parent not in seen:
                        seen.add(parent)
                        stack.append(parent)
                elif parent in boundary:
                    met.add(parent)
        out[n] = next(iter(met)) if len(met) == 1 else repo.merge_base(head, base)
    return out


def _pr_diff(repo: GitRepo, mb: str, head: str, files: Sequence[tuple[str, str]], queued_paths: Sequence[str]):
    """The PR's changed lines in the paths that matter (the queued ones it changes, and the files it
    adds, where a rename of a queued file lands), and per path what became of the file:
    {old path: (status, new path or None)}."""
    mine = set(queued_paths)
    paths = sorted({p for p, s in files if p in mine or s == "A"} if len([p for p, s in files if s == "A"]) < 2000
                   else {p for p, _s in files if p in mine})
    raw = repo.diff_lines_renamed(mb, head, paths)
    entries = parse_diff(raw)
    changed: dict[str, tuple[str, str | None]] = {}
    hunks: list[Hunk] = []
    for fd in entries:
        old, new = (str(fd.old_path) if fd.old_path else None), (str(fd.new_path) if fd.new_path else None)
        if old and new and old != new:
            changed[old] = ("renamed", new)
        elif old and not new:
            changed[old] = ("removed", None)
        elif new and not old:
            changed[new] = ("added", new)
        hunks.extend(fd.text_hunks)
    return tuple(hunks), changed


def _patch_key(q: Any) -> str:
    text = "\n".join(f"{h.path}\0{h.old_start},{h.old_len},{h.new_start},{h.new_len}\0{h.id}" for h in q.hunks)
    return hashlib.sha256(f"v{CACHE_VERSION}\0{q.base}\0{text}".encode("utf-8", "surrogateescape")).hexdigest()[:24]


def _load(path: Path | None) -> dict:
    if path is None:
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) and data.get("version") == CACHE_VERSION else {}


def _save(path: Path | None, memo: dict) -> None:
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps({**memo, "version": CACHE_VERSION}, separators=(",", ":")))
    except (OSError, PorttrackError):
        pass  # a cache that cannot be written is only a slower next run


__all__ = ["OPEN_REF", "Verdicts", "merge_bases", "scan"]
