"""Partial-port coverage: which hunks of an upstream PR the fork already carries, and how we know.

Hand ports are found in the fork's own history (`porttrack.converge.ports`): port markers in commit messages
(cherry-pick -x, "Port: upstream #N through SHA only", Upstream-PR / Backport-of trailers) and, on
their own, fork commits whose diffs carry the PR's hunk ids or near-matches of them. Commits listed
in tracks.yaml (`fork_commits`) still count. Each hunk says which method found it (`FoundBy`); a
"through SHA only" port scopes the PR to its commits up to SHA, the later hunks marked as such.

A fork often ports a PR by hand before (or instead of) importing it — tracks.yaml then lists the
fork commits (`fork_commits`, e.g. a9b1ee711 and 2a6c161ff for #48804). Coverage answers "how much
of the PR is in the fork": every hunk of the PR's diff (its merge commit for a merged PR, else its
head against the merge base with upstream) is looked for at the tip of the fork branch with
`presence.hunk_state` — the post-image found and not the pre-image means *applied*. The result reads
"coverage 7/9 hunks". Hunks whose file is gone or whose state cannot be told apart are counted as
not present and listed as such.

Read-only and offline: it uses what is already in the fork checkout (`porttrack status` and
`porttrack import` fetch PR heads into `refs/porttrack/pull/N/head`), and never fails a caller:
anything missing becomes `Coverage.problem`.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable, Sequence, Union

from porttrack.common.errors import CannotEvaluate, PorttrackError
from porttrack.converge.history import cat_blobs, rebase_merged, unreadable
from porttrack.converge.ports import ForkCommit, Marker, fork_history, markers_for, pr_commits
from porttrack.diff.hunks import SYMLINK_MODE, FileDiff, Hunk, parse_diff
from porttrack.diff.presence import hunk_state
from porttrack.git.repo import NO_FORK_CHECKOUT_BRIEF, GitRepo, missing_branch, pull_ref, qualify_branch, upstream_ref
from porttrack.observe.prdiff import near_match
from porttrack.tracks.config import Config
from porttrack.workspace import state as state_mod
from porttrack.workspace.files import Workspace, atomic_write_text, read_json
from porttrack.workspace.state import UpstreamState


@dataclass(frozen=True)
class FoundBy:
    """How a hunk was found in the fork's history. method: cherry-pick | port-note | trailer |
    backport (a marker in `commit`'s message) | listed (tracks.yaml fork_commits) | content (an
    unmarked commit); match: same (the hunk id) | edited (same file, mostly the same added lines)."""

    method: str
    match: str
    commit: str
    marker: str | None = None  # the marker as written

    @property
    def words(self) -> str:
        how = "" if self.match == "same" else ", edited"
        return f"{self.method} {self.commit[:10]}{how}"


@dataclass(frozen=True)
class PortFound:
    """A fork commit whose message says it ports this PR."""

    commit: str
    kind: str
    text: str
    through: str | None
    only: bool


@dataclass(frozen=True)
class HunkPresence:
    id: str
    path: str
    kind: str
    state: str  # applied | not-applied | file-missing | ambiguous
    found_by: FoundBy | None = None
    after_through: bool = False  # beyond a "through SHA only" port's last commit: not meant to be there


@dataclass(frozen=True)
class Coverage:
    pr: int
    track: str
    fork_commits: tuple[str, ...]
    fork_commits_missing: tuple[str, ...]  # listed in tracks.yaml but not in the fork branch
    branch: str
    tip: str | None
    revision: str | None  # the upstream commit whose diff was looked for (head or merge commit)
    hunks: tuple[HunkPresence, ...] = ()
    problem: str | None = None  # why coverage could not be computed
    ports: tuple[PortFound, ...] = ()  # commits whose messages say they port this PR
    through: str | None = None  # a "through SHA only" port: the last PR commit taken

    @property
    def present(self) -> int:
        return sum(1 for h in self.hunks if h.state == "applied")

    @property
    def total(self) -> int:
        return len(self.hunks)

    @property
    def text(self) -> str:
        if self.problem:
            return f"coverage unknown: {self.problem}"
        has = [c for c in self.fork_commits if c not in self.fork_commits_missing]  # checked against the branch
        carried = f" (fork carries {', '.join(c[:9] for c in has)})" if has else ""
        if self.fork_commits_missing:
            carried += f" (listed, not in {self.branch}: {', '.join(c[:9] for c in self.fork_commits_missing)})"
        # listed commits are already named by "fork carries"; the other methods are news
        methods = sorted({h.found_by.words for h in self.hunks if h.found_by and h.found_by.method != "listed"})
        found = f"; found by {', '.join(methods)}" if methods else ""
        after = sum(1 for h in self.hunks if h.after_through)
        scope = f"; ported through {self.through[:10]} only ({after} later hunk{'s' if after != 1 else ''} not taken)" if self.through else ""
        return f"coverage {self.present}/{self.total} hunks present in the fork{carried}{found}{scope}"

    @property
    def found(self) -> bool:
        """Whether anything ties this PR to the fork: listed commits, port markers, content."""
        return bool(self.fork_commits or self.ports or any(h.found_by for h in self.hunks))

    def to_json(self) -> dict[str, Any]:
        return {
            "pr": self.pr,
            "track": self.track,
            "fork_commits": list(self.fork_commits),
            "fork_commits_missing": list(self.fork_commits_missing),
            "branch": self.branch,
            "tip": self.tip,
            "revision": self.revision,
            "present": None if self.problem else self.present,
            "total": None if self.problem else self.total,
            "text": self.text,
            "problem": self.problem,
            "hunks": [_hunk_json(h) for h in self.hunks],
            "ports": [{"commit": p.commit, "kind": p.kind, "text": p.text, "through": p.through, "only": p.only} for p in self.ports],
            "through": self.through,
        }


def _hunk_json(h: HunkPresence) -> dict[str, Any]:
    found = h.found_by
    return {"id": h.id, "path": h.path, "kind": h.kind, "state": h.state, "after_through": h.after_through,
            "found_by": None if found is None else {"method": found.method, "match": found.match, "commit": found.commit,
                                                    "marker": found.marker}}


def track_coverage(ws: Workspace, config: Config, repo: GitRepo | None, problem: str | None = None) -> tuple[Coverage, ...]:
    """Coverage of every tracked PR the fork ports: one that tracks.yaml lists fork commits for, or
    that the fork's history names (markers) or carries (content), looked for in the fork checkout
    `repo`; None: the listed PRs' coverage is unknown, for `problem` (default:
    `git.repo.NO_FORK_CHECKOUT_BRIEF`)."""
    wanted = [(tid, n, tuple(t.fork_commits)) for tid, t in config.tracks.items() for n in t.prs]
    if not wanted:
        return ()
    if repo is None:
        why = problem or NO_FORK_CHECKOUT_BRIEF
        return tuple(Coverage(n, tid, commits, (), config.fork.branch, None, None, problem=why) for tid, n, commits in wanted if commits)
    state = state_mod.load(ws.upstream_state_file, config.upstream.repo)
    keys = _keys(repo, config, state, wanted)
    kept_file = ws.cache_dir / KEPT_FILE
    kept = _read_kept(kept_file)
    history: Sequence[ForkCommit] | None = None
    out: dict[int, Coverage] = {}
    todo = [n for _, n, _ in wanted if not (n in kept and kept[n][0] == keys[n])]
    diffs: dict[int, _Found] = {}
    outside: frozenset[str] | None = None
    for tid, n, commits in wanted:
        answer = kept.get(n)
        if answer is not None and answer[0] == keys[n]:
            out[n] = answer[1]
            continue
        if history is None:  # the fork's own history: one `git log -p`, read only when a PR must be computed
            try:
                history = fork_history(repo, config)
            except PorttrackError:
                history = ()  # coverage of listed commits still works from the tip
            ref = qualify_branch(repo, config.fork.branch)
            if ref:  # without the branch no PR's diff is read
                diffs = _pr_diffs(repo, config, state, todo, ws.cache_dir / CACHE_FOLDER)  # every PR's in one batch
                tip = repo.rev_parse(ref)
                listed = {c for _, m, cs in wanted if m in todo for c in cs}
                try:
                    outside = _outside_branch(repo, tip, listed) if tip and listed else None
                except PorttrackError:
                    outside = None  # asked PR by PR, where each PR meets its own error
        out[n] = pr_coverage(repo, config, state, n, tid, commits, history, ws.cache_dir / CACHE_FOLDER, diffs.get(n), outside)
    if history is not None:
        _write_kept(kept_file, {n: (keys[n], c) for n, c in out.items() if c.problem is None})
    return tuple(c for c in out.values() if c.found)


# What a PR's coverage is a function of, so a run where nothing moved computes none of it (issue 32,
# item 4: the 50 tracked PRs' coverage was recomputed by every `status`): the fork branch's tip and
# the upstream base (the fork's own history between them: markers, content), the track and its
# listed commits, and the PR's own commits as the checkout has them (merge commit, head, upstream's
# default branch). Every name is resolved in one batch of the reader; only an answer without a
# problem is kept (a problem may be a passing one: a blob a partial clone could not give offline).
KEPT_FILE = "coverage/coverage.json"  # under the workspace's .porttrack/
KEPT_SCHEMA = 1
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def _keys(repo: GitRepo, config: Config, state: UpstreamState, wanted: Sequence[tuple[str, int, tuple[str, ...]]]) -> dict[int, str]:
    branch = qualify_branch(repo, config.fork.branch)
    names = [branch or "", config.fork.upstream_base, upstream_ref(config.upstream.default_branch)]
    for _, n, _ in wanted:
        pr = state.prs.get(n)
        shas = (pr.merge_commit_sha, pr.head_sha) if pr is not None else ()
        names += [pull_ref(n), *(s for s in shas if s and _SHA.fullmatch(s))]
    found = repo.resolve(names)
    common = [KEPT_SCHEMA, config.fork.branch, branch, *(found[name] for name in names[:3])]
    keys = {}
    for tid, n, commits in wanted:
        pr = state.prs.get(n)
        own = [pr.state, pr.merge_commit_sha, pr.head_sha] if pr is not None else []
        present = [found.get(s) if s and _SHA.fullmatch(s) else None for s in own[1:]]
        data = [*common, tid, list(commits), n, own, present, found[pull_ref(n)]]
        keys[n] = hashlib.sha256(json.dumps(data).encode()).hexdigest()
    return keys


def _read_kept(file: Path) -> dict[int, tuple[str, Coverage]]:
    try:
        data = read_json(file)
        if data["schema"] != KEPT_SCHEMA:
            return {}
        return {int(n): (entry["key"], _from_json(entry["coverage"])) for n, entry in data["prs"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError, PorttrackError):
        return {}  # missing, from an older version, or edited: computed again


def _write_kept(file: Path, entries: dict[int, tuple[str, Coverage]]) -> None:
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(file, json.dumps({"schema": KEPT_SCHEMA, "prs": {
            str(n): {"key": key, "coverage": c.to_json()} for n, (key, c) in sorted(entries.items())}}))
    except (OSError, PorttrackError):
        pass  # a read-only workspace computes it every time; that is all it costs


def _from_json(d: dict[str, Any]) -> Coverage:
    """`Coverage.to_json` read back (the kept answers)."""
    hunks = tuple(HunkPresence(h["id"], h["path"], h["kind"], h["state"], None if h["found_by"] is None else FoundBy(**h["found_by"]),
                               bool(h["after_through"])) for h in d["hunks"])
    ports = tuple(PortFound(**p) for p in d["ports"])
    return Coverage(int(d["pr"]), d["track"], tuple(d["fork_commits"]), tuple(d["fork_commits_missing"]), d["branch"], d["tip"],
                    d["revision"], hunks, d["problem"], ports, d["through"])


def pr_coverage(repo: GitRepo, config: Config, state: UpstreamState, number: int, track: str,
                fork_commits: Sequence[str] = (), history: Sequence[ForkCommit] = (), cache: Path | None = None,
                diff: "_Found | None" = None, outside: frozenset[str] | None = None) -> Coverage:
    """`cache`: a folder for each PR's diff and commits, a pure function of SHAs (see `_pr_diffs`);
    `diff`: the PR's, already read with the others'; `outside`: which of the listed `fork_commits`
    the branch lacks, found for every PR at once (`track_coverage`)."""
    branch = config.fork.branch
    ref = qualify_branch(repo, branch)
    tip = repo.rev_parse(ref) if ref else None
    partial = Coverage(number, track, tuple(fork_commits), (), branch, tip, None)
    if tip is None:
        return _with(partial, problem=missing_branch(repo, branch))
    lacks = outside if outside is not None else _outside_branch(repo, tip, fork_commits)
    missing = tuple(c for c in fork_commits if c in lacks)
    partial = _with(partial, fork_commits_missing=missing)
    try:
        found = diff if diff is not None else _pr_diffs(repo, config, state, [number], cache)[number]
        if isinstance(found, PorttrackError):
            raise found
        if isinstance(found, str):
            named = markers_for(history, number, ())
            return _with(partial, problem=found if (fork_commits or named) else None, ports=_ports(named))
        base, revision, files, commits = found
        marked = markers_for(history, number, commits + (revision,))
        through = next((m.upstream_commit for _, m in marked if m.kind == "port-note" and m.upstream_commit), None)
        hunks = _presence(repo, tip, files)
        hunks = _attribute(hunks, files, history, marked, fork_commits)
        through_sha = repo.rev_parse(through) if through else None
        if through_sha:
            scope = {h.id for fd in parse_diff(repo.diff(base, through_sha)) for h in fd.hunks}
            hunks = tuple(replace(h, after_through=h.id not in scope) for h in hunks)
        return _with(partial, revision=revision, hunks=hunks, ports=_ports(marked), through=through_sha)
    except PorttrackError as exc:
        return _with(partial, problem=str(exc))


def _outside_branch(repo: GitRepo, tip: str, commits: Iterable[str]) -> frozenset[str]:
    """The names among `commits` that are no commit of the branch at `tip`: not in the checkout, or
    not an ancestor of `tip` (what `merge-base --is-ancestor` answers one at a time), from one
    `rev-list C... --not TIP`: a commit the tip does not reach is among what that walk lists."""
    asked = sorted(set(commits))
    found = repo.resolve(c for c in asked if repo.has_commit(c))
    present = {c: sha for c, sha in found.items() if sha}
    listed: set[str] = set()
    if present:
        lines = [*sorted(set(present.values())), f"^{tip}"]
        listed = set(repo.run("rev-list", "--stdin", input=("\n".join(lines) + "\n").encode()).stdout.decode("ascii", "replace").split())
    return frozenset(c for c in asked if c not in present or present[c] in listed)


def _ports(marked: Sequence[tuple[ForkCommit, Marker]]) -> tuple[PortFound, ...]:
    return tuple(PortFound(fc.sha, m.kind, m.text, m.upstream_commit if m.kind == "port-note" else None, m.only)
                 for fc, m in marked)


def _attribute(hunks: Sequence[HunkPresence], files: Sequence[FileDiff], history: Sequence[ForkCommit],
               marked: Sequence[tuple[ForkCommit, Marker]], listed: Sequence[str]) -> tuple[HunkPresence, ...]:
    """Each hunk's `found_by`: a marked commit first, then a listed one, then any fork commit; the
    same hunk id before a near-match (a hand port with edits)."""
    by_id = {h.id: h for fd in files for h in fd.hunks}
    marked_shas = {fc.sha for fc, _ in marked}
    sources: list[tuple[ForkCommit, str, str | None]] = [(fc, m.kind, m.text) for fc, m in marked]
    sources += [(fc, "listed", None) for fc in history if fc.sha not in marked_shas and any(fc.sha.startswith(c) for c in listed)]
    taken = {fc.sha for fc, _, _ in sources}
    sources += [(fc, "content", None) for fc in history if fc.sha not in taken]
    out = []
    for hp in hunks:
        hunk = by_id.get(hp.id)
        out.append(replace(hp, found_by=_found_by(hunk, sources)) if hunk is not None and hunk.kind == "text" else hp)
    return tuple(out)


def _found_by(hunk: Hunk, sources: Sequence[tuple[ForkCommit, str, str | None]]) -> FoundBy | None:
    for fc, method, marker in sources:
        if any(h.id == hunk.id for h in fc.hunks):
            return FoundBy(method, "same", fc.sha, marker)
    for fc, method, marker in sources:
        if near_match(hunk, fc.hunks) is not None:
            return FoundBy(method, "edited", fc.sha, marker)
    return None


def _with(c: Coverage, **changes: Any) -> Coverage:
    return replace(c, **changes)


CACHE_FOLDER = "prdiff"  # under the workspace's .porttrack/: one file per PR, the latest key only
CACHE_SCHEMA = 1


# A PR's diff, base and own commits: (base, head, files, commits); or why they cannot be had (str);
# or the error reading them met, raised where that PR's coverage is computed.
_Found = Union[tuple[str, str, tuple[FileDiff, ...], tuple[str, ...]], str, PorttrackError]


@dataclass(frozen=True)
class _Wanted:
    """What a PR's diff is taken between: `base` (None: the merge base of `head` and `default`, an
    open PR's) and `head`; `key` names the SHAs it is a function of (its cache entry's key)."""

    key: str
    head: str
    base: str | None = None
    default: str | None = None


def _pr_diffs(repo: GitRepo, config: Config, state: UpstreamState, numbers: Sequence[int],
              cache: Path | None = None) -> dict[int, _Found]:
    """Each PR's upstream diff and its own commits from local objects, or why they cannot be had.
    Names are resolved by the repository's reader; the rest (merge base, diff, commits) depends
    only on SHAs, so it is kept in `cache` under those SHAs and read back while they stay the same.
    What is not kept is read for every PR at once: the open PRs' merge bases and commits in one
    `rev-list` walk, a merged PR's commits from the reader, every diff in one `diff-tree --stdin`."""
    out: dict[int, _Found] = {}
    todo: dict[int, _Wanted] = {}
    for n in dict.fromkeys(numbers):
        try:
            wanted = _wanted(repo, config, state, n)
        except PorttrackError as exc:
            out[n] = exc
            continue
        if isinstance(wanted, str):
            out[n] = wanted
            continue
        kept = _read_cache(cache / f"{n}.json", wanted.key) if cache is not None else None
        if kept is not None:
            base, diff, commits = kept
            out[n] = _parsed(base, wanted.head, diff, commits)
        else:
            todo[n] = wanted
    found: dict[int, tuple[str, tuple[str, ...]] | str | PorttrackError] = {}
    found.update(_open_bases(repo, {n: w for n, w in todo.items() if w.base is None}))
    for n, w in todo.items():
        if w.base is not None:
            try:
                found[n] = (w.base, _own_commits(repo, w.base, w.head))
            except PorttrackError as exc:
                found[n] = exc
    pairs = {n: (f[0], todo[n].head) for n, f in found.items() if isinstance(f, tuple)}
    try:
        diffs = repo.diffs(list(pairs.values()))
    except PorttrackError:
        diffs = {}  # one unreadable diff fails the batch: each is read on its own below, its error its PR's
    for n, f in found.items():
        if not isinstance(f, tuple):
            out[n] = f
            continue
        base, commits = f
        try:
            diff = diffs[pairs[n]] if pairs[n] in diffs else repo.diff(base, todo[n].head)
        except PorttrackError as exc:
            out[n] = exc
            continue
        if cache is not None:
            _write_cache(cache / f"{n}.json", todo[n].key, base, diff, commits)
        out[n] = _parsed(base, todo[n].head, diff, commits)
    return out


def _parsed(base: str, head: str, diff: bytes, commits: tuple[str, ...]) -> _Found:
    try:
        return base, head, parse_diff(diff), commits
    except PorttrackError as exc:  # a diff the parser refuses: that PR's problem, as before
        return exc


def _wanted(repo: GitRepo, config: Config, state: UpstreamState, number: int) -> _Wanted | str:
    """Which commits PR `number`'s diff is taken between (no process but the reader), or why none."""
    pr = state.prs.get(number)
    if pr is not None and pr.state == "merged" and pr.merge_commit_sha and repo.has_commit(pr.merge_commit_sha):
        mc = repo.rev_parse(pr.merge_commit_sha)
        parent = repo.rev_parse(f"{mc}^1")
        rebased = rebase_merged(repo, mc, pr.head_sha) if mc and parent else None
        if rebased is not None:  # the PR's change starts below its replayed commits
            parent = rebased[0]
        if mc and parent:
            return _Wanted(f"merged {parent} {mc}", mc, base=parent)
    head = repo.rev_parse(pull_ref(number))
    if head is None and pr is not None and pr.head_sha and repo.has_commit(pr.head_sha):
        head = repo.rev_parse(pr.head_sha)
    if head is None:
        return f"#{number}'s head is not in the fork checkout (a live `porttrack status` fetches it)"
    default = next((r for r in (upstream_ref(config.upstream.default_branch), config.fork.upstream_base) if repo.rev_parse(r)), None)
    if default is None:
        return f"upstream's {config.upstream.default_branch} is not in the fork checkout"
    return _Wanted(f"open {head} {repo.rev_parse(default)}", head, default=default)


def _open_bases(repo: GitRepo, wanted: dict[int, _Wanted]) -> dict[int, tuple[str, tuple[str, ...]] | str | PorttrackError]:
    """Each open PR's merge base with upstream's branch and its own commits (`base..head`), what
    `git merge-base` and `git rev-list` give one PR at a time, from one `rev-list --boundary` walk of
    every head not in upstream's branch: a head's commits are those the walk reaches from it, and its
    merge base the one boundary commit they stand on. Two or more (upstream merged into the PR
    branch, criss-cross): asked of `git merge-base` for that PR alone."""
    if not wanted:
        return {}
    out: dict[int, tuple[str, tuple[str, ...]] | str | PorttrackError] = {}
    defaults = {n: repo.rev_parse(w.default) for n, w in wanted.items() if w.default}
    try:
        graph, _ = repo.walk_boundary({w.head for w in wanted.values()}, {d for d in defaults.values() if d})
    except PorttrackError:
        graph = None  # asked one PR at a time below, each with its own error
    order = {sha: i for i, sha in enumerate(graph or ())}  # the walk's order: newest first, as rev-list lists
    for n, w in wanted.items():
        try:
            if graph is None or len(set(defaults.values())) != 1:
                base = repo.merge_base(w.head, w.default or "")
                out[n] = (base, pr_commits(repo, base, w.head)) if base else _NO_HISTORY.format(n=n, default=w.default)
                continue
            if w.head not in graph:  # upstream's branch has the head: it is its own merge base
                out[n] = (w.head, ())
                continue
            own, bases = _reached(graph, w.head)
            if len(bases) == 1:
                out[n] = (bases.pop(), tuple(reversed(sorted(own, key=order.__getitem__)[:MAX_PR_COMMITS])))
            elif not bases:  # no commit upstream has
                out[n] = _NO_HISTORY.format(n=n, default=w.default)
            else:
                base = repo.merge_base(w.head, w.default or "")
                out[n] = (base, pr_commits(repo, base, w.head)) if base else _NO_HISTORY.format(n=n, default=w.default)
        except PorttrackError as exc:
            out[n] = exc
    return out


_NO_HISTORY = "#{n}'s head shares no history with {default}"
MAX_PR_COMMITS = 1000  # as `pr_commits` lists them (`GitRepo.rev_list`'s limit)


def _reached(graph: dict[str, tuple[str, ...]], head: str) -> tuple[set[str], set[str]]:
    """The walk's commits reachable from `head`, and the commits outside it they have as parents."""
    own, bases, todo = {head}, set(), [head]
    while todo:
        for parent in graph[todo.pop()]:
            if parent in graph:
                if parent not in own:
                    own.add(parent)
                    todo.append(parent)
            else:
                bases.add(parent)
    return own, bases


def _own_commits(repo: GitRepo, base: str, head: str) -> tuple[str, ...]:
    """`pr_commits(repo, base, head)` (oldest first): read from the reader while the line from
    `head` down to `base` is one parent each (a squash, a rebase merge's copies), else `rev-list`."""
    line: list[str] = []
    at = head
    while at != base and len(line) < 50:
        obj = repo.read_objects([at]).get(at)
        parents = [row[7:] for row in obj[1].split(b"\n\n", 1)[0].decode("ascii", "replace").split("\n")
                   if row.startswith("parent ")] if obj is not None and obj[0] == "commit" else []
        if len(parents) != 1:
            return pr_commits(repo, base, head)
        line.append(at)
        at = parents[0]
    return tuple(reversed(line)) if at == base else pr_commits(repo, base, head)


def _read_cache(file: Path, key: str) -> tuple[str, bytes, tuple[str, ...]] | None:
    try:
        data = read_json(file)
        if data["schema"] != CACHE_SCHEMA or data["key"] != key:
            return None
        return data["base"], data["diff"].encode("utf-8", "surrogateescape"), tuple(data["commits"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None  # missing, half-written by an older version, or edited: computed again


def _write_cache(file: Path, key: str, base: str, diff: bytes, commits: Sequence[str]) -> None:
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(file, json.dumps({"schema": CACHE_SCHEMA, "key": key, "base": base, "commits": list(commits),
                                            "diff": diff.decode("utf-8", "surrogateescape")}))
    except (OSError, PorttrackError):
        pass  # a read-only workspace computes it every time; that is all it costs


def _presence(repo: GitRepo, tip: str, files: Sequence[FileDiff]) -> tuple[HunkPresence, ...]:
    """Each hunk's state at `tip`: the files' modes and contents from the trees and blobs, read in
    two batches of the repository's one reader."""
    entries = repo.tree_entries(tip, sorted({fd.path for fd in files}))
    files_at = {path: sha for path, (mode, sha) in entries.items() if mode not in ("040000", "160000")}
    blobs = cat_blobs(repo, sorted(set(files_at.values())))
    unread = sorted(path for path, sha in files_at.items() if sha not in blobs)
    if unread:  # named by the tree, so it exists: never taken for an absent file
        raise CannotEvaluate(unreadable(repo, tip, unread))
    contents = {path: blobs[sha] for path, sha in files_at.items()}
    modes = {path: mode for path, (mode, _) in entries.items()}
    out = []
    for fd in files:
        for h in fd.hunks:
            state = hunk_state(h, contents.get(fd.path))
            if h.kind == "meta" and state == "ambiguous" and fd.new_mode and fd.path in modes:
                state = "applied" if modes[fd.path] == fd.new_mode else "not-applied"
            out.append(HunkPresence(h.id, h.path, h.kind, state))
    return tuple(out)


__all__ = ["Coverage", "FoundBy", "HunkPresence", "PortFound", "SYMLINK_MODE", "pr_coverage", "track_coverage"]
