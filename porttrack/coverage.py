"""Partial-port coverage: which hunks of an upstream PR the fork already carries.

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

from dataclasses import dataclass, replace
from typing import Any, Sequence

from porttrack import state as state_mod
from porttrack.config import Config
from porttrack.errors import PorttrackError
from porttrack.gitrepo import NO_FORK_CHECKOUT_BRIEF, GitRepo, pull_ref, upstream_ref
from porttrack.hunks import SYMLINK_MODE, FileDiff, parse_diff
from porttrack.presence import hunk_state
from porttrack.state import UpstreamState
from porttrack.workspace import Workspace


@dataclass(frozen=True)
class HunkPresence:
    id: str
    path: str
    kind: str
    state: str  # applied | not-applied | file-missing | ambiguous


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
        carried = f" (fork carries {', '.join(c[:9] for c in self.fork_commits)})" if self.fork_commits else ""
        return f"coverage {self.present}/{self.total} hunks present in the fork{carried}"

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
            "hunks": [{"id": h.id, "path": h.path, "kind": h.kind, "state": h.state} for h in self.hunks],
        }


def track_coverage(ws: Workspace, config: Config, repo: GitRepo | None, problem: str | None = None) -> tuple[Coverage, ...]:
    """Coverage of every PR of every track that lists fork commits (hand ports), looked for in the
    fork checkout `repo`; None: every such PR's coverage is unknown, for `problem` (default:
    `gitrepo.NO_FORK_CHECKOUT_BRIEF`)."""
    wanted = [(tid, n, tuple(t.fork_commits)) for tid, t in config.tracks.items() if t.fork_commits for n in t.prs]
    if not wanted:
        return ()
    state = state_mod.load(ws.upstream_state_file, config.upstream.repo)
    if repo is None:
        why = problem or NO_FORK_CHECKOUT_BRIEF
        return tuple(Coverage(n, tid, commits, (), config.fork.branch, None, None, problem=why) for tid, n, commits in wanted)
    return tuple(pr_coverage(repo, config, state, n, tid, commits) for tid, n, commits in wanted)


def pr_coverage(repo: GitRepo, config: Config, state: UpstreamState, number: int, track: str,
                fork_commits: Sequence[str] = ()) -> Coverage:
    branch = config.fork.branch
    tip = repo.rev_parse(f"refs/heads/{branch}") or repo.rev_parse(branch)
    partial = Coverage(number, track, tuple(fork_commits), (), branch, tip, None)
    if tip is None:
        return _with(partial, problem=f"the fork branch {branch!r} does not exist")
    missing = tuple(c for c in fork_commits if not (repo.has_commit(c) and repo.is_ancestor(c, tip)))
    partial = _with(partial, fork_commits_missing=missing)
    try:
        found = _pr_diff(repo, config, state, number)
        if isinstance(found, str):
            return _with(partial, problem=found)
        revision, files = found
        return _with(partial, revision=revision, hunks=_presence(repo, tip, files))
    except PorttrackError as exc:
        return _with(partial, problem=str(exc))


def _with(c: Coverage, **changes: Any) -> Coverage:
    return replace(c, **changes)


def _pr_diff(repo: GitRepo, config: Config, state: UpstreamState, number: int) -> tuple[str, tuple[FileDiff, ...]] | str:
    """The PR's upstream diff from local objects, or why it cannot be had."""
    pr = state.prs.get(number)
    if pr is not None and pr.state == "merged" and pr.merge_commit_sha and repo.has_commit(pr.merge_commit_sha):
        mc = repo.rev_parse(pr.merge_commit_sha)
        parent = repo.rev_parse(f"{mc}^1")
        if mc and parent:
            return mc, parse_diff(repo.diff(parent, mc))
    head = repo.rev_parse(pull_ref(number))
    if head is None and pr is not None and pr.head_sha and repo.has_commit(pr.head_sha):
        head = repo.rev_parse(pr.head_sha)
    if head is None:
        return f"#{number}'s head is not in the fork checkout (a live `porttrack status` fetches it)"
    default = next((r for r in (upstream_ref(config.upstream.default_branch), config.fork.upstream_base) if repo.rev_parse(r)), None)
    if default is None:
        return f"upstream's {config.upstream.default_branch} is not in the fork checkout"
    base = repo.merge_base(head, default)
    if base is None:
        return f"#{number}'s head shares no history with {default}"
    return head, parse_diff(repo.diff(base, head))


def _presence(repo: GitRepo, tip: str, files: Sequence[FileDiff]) -> tuple[HunkPresence, ...]:
    paths = sorted({fd.path for fd in files})
    contents = read_blobs(repo, tip, paths)
    modes = _modes(repo, tip, paths)
    out = []
    for fd in files:
        for h in fd.hunks:
            state = hunk_state(h, contents.get(fd.path))
            if h.kind == "meta" and state == "ambiguous" and fd.new_mode and fd.path in modes:
                state = "applied" if modes[fd.path] == fd.new_mode else "not-applied"
            out.append(HunkPresence(h.id, h.path, h.kind, state))
    return tuple(out)


def read_blobs(repo: GitRepo, rev: str, paths: Sequence[str]) -> dict[str, bytes]:
    """Contents of `paths` at `rev` in one `git cat-file --batch` (missing paths are left out)."""
    batchable = [p for p in paths if "\n" not in p]
    out: dict[str, bytes] = {}
    if batchable:
        request = "".join(f"{rev}:{p}\n" for p in batchable).encode("utf-8", "surrogateescape")
        data = repo.run("cat-file", "--batch", input=request).stdout
        pos = 0
        for path in batchable:
            end = data.index(b"\n", pos)
            line = data[pos:end]
            pos = end + 1
            if line.endswith((b" missing", b" ambiguous")):
                continue  # git echoes the request: "<rev>:<path> missing"
            _oid, kind, size = line.split(b" ")
            if kind == b"blob":
                out[path] = data[pos:pos + int(size)]
            pos += int(size) + 1
    for path in paths:
        if path not in batchable:
            blob = repo.show_file(rev, path)
            if blob is not None:
                out[path] = blob
    return out


def _modes(repo: GitRepo, rev: str, paths: Sequence[str]) -> dict[str, str]:
    if not paths:
        return {}
    text = repo.run("ls-tree", "-z", rev, "--", *paths).stdout.decode("utf-8", "surrogateescape")
    modes = {}
    for entry in text.split("\0"):
        if "\t" in entry:
            meta, path = entry.split("\t", 1)
            modes[path] = meta.split(" ")[0]
    return modes


__all__ = ["Coverage", "HunkPresence", "SYMLINK_MODE", "pr_coverage", "read_blobs", "track_coverage"]
