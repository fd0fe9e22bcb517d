"""The record of `porttrack verify-converged` runs, and the recorded verdicts `status` and
`report weekly` read back.

Each run appends its verdict to `state/convergence/<PR>.json` (schema
`porttrack/convergence-record/v1`: `{"schema", "pr", "history": [<verdict>, ...]}`, oldest
first, never edited), with the commits it was computed on and the time; a verdict that finds
exactly what the last entry found (same commits, hunks, drops and no new regression run) is not
appended again: it reports `unchanged_since`, the time of that entry, so a daily check after
every rebase does not grow a committed file by one copy a day.

A recorded verdict is bound to what it was computed on: `latest_verdicts` (for `status` and
`report weekly`) takes, per PR, the newest entry for the configured `fork.branch` and says whether
it is **current** (its `fork_sha` is the branch's tip in the fork checkout now), **stale** (the
branch has moved), **unconfirmed** (no checkout of the fork to read the tip from), or, when no entry is
for that branch, **other-ref**. Only a current verdict may say "in the fork"; any other keeps the
next action "verify convergence".
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from porttrack.common.errors import GitError, InputError
from porttrack.converge.decide import VERDICTS, Verdict, counts_words, summary, to_json
from porttrack.git.repo import FORK_REMOTE, GitRepo, qualify_branch
from porttrack.queue import manifest as queue_mod
from porttrack.workspace.files import Workspace, checkpoint, lock, read_json, write_json

RECORD_SCHEMA = "porttrack/convergence-record/v1"


# --------------------------------------------------------------------------------------------
# 7. The record, and retiring drops


def record_path(ws: Workspace, number: int) -> Path:
    return ws.state_dir / "convergence" / f"{int(number)}.json"


def record(ws: Workspace, v: Verdict, *, apply_drops: bool = False) -> Verdict:
    """Append the verdict to its record, then retire droppable queue patches, under the lock.

    The record is written first and the queue's manifest (its commit point) last, so a retired
    patch always has its evidence. A kill in between leaves the last entry saying "retired" over
    a queue that still carries the patch; the re-run finds the same verdict (not appended again)
    and finishes that retirement on that entry's evidence, so one re-run repairs it.
    """
    path = record_path(ws, v.pr)
    rel = path.relative_to(ws.root).as_posix()
    with lock(ws, f"verify-converged #{v.pr}"):
        history = _load_history(path)
        retire = [d for d in v.drops if d.droppable and d.kind == "queued-patch"] if apply_drops else []
        # loaded with repair even when nothing is left to retire: a kill after the manifest and
        # before `series` is put right by the re-run of this command
        queue = queue_mod.load(ws, repair=True) if apply_drops else None
        live = {d.ref for d in retire if queue is not None and queue.get(d.ref).live}
        v = replace(v, recorded=rel, drops=tuple(replace(d, retired=True) if d in retire and d.ref in live else d
                                                 for d in v.drops))
        since = _same_as_last(history, v)  # a retirement changes the drops: "the same" only on a repair
        evidence = f"{rel}#{len(history) - 1 if since is not None else len(history)}"
        why = (f"upstream #{v.pr} merged as {v.commits.merge_commit[:12]}; verify-converged verdict {evidence}: "
               f"{v.verdict} by {v.method} at {v.commits.fork_ref} {v.commits.fork_sha} ({counts_words(summary(v.hunks))})")
        for ref in sorted(live):
            assert queue is not None
            queue = queue.replace_patch(queue.get(ref).transition("converged", why, evidence=(evidence,)))
        if since is None:
            write_json(path, {"schema": RECORD_SCHEMA, "pr": v.pr, "history": [*history, to_json(v)]})
            checkpoint("converge:recorded")
        if queue is not None and live:
            queue_mod.save(ws, queue)
    return v if since is None else replace(v, unchanged_since=since)


def _same_as_last(history: list[dict[str, Any]], v: Verdict) -> str | None:
    """When the record's last entry found exactly what `v` finds, the time it was computed."""
    if history and _finding(history[-1]) == _finding(to_json(v)):
        return history[-1].get("computed_at")
    return None


def _finding(entry: dict[str, Any]) -> dict[str, Any]:
    """A recorded verdict without when it was computed and where: what a new entry must differ in."""
    return {key: value for key, value in entry.items() if key not in ("computed_at", "recorded", "unchanged_since")}


def _load_history(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    try:
        data = read_json(path)
        if data.get("schema") != RECORD_SCHEMA or not isinstance(data.get("history"), list):
            raise ValueError(f"expected schema {RECORD_SCHEMA} with a history list")
    except (ValueError, AttributeError) as exc:
        raise InputError(f"{path}: malformed convergence record ({exc}); restore it from git") from None
    history: list[dict[str, Any]] = data["history"]
    return history


@dataclass(frozen=True)
class RecordedVerdict:
    """A recorded verdict as `status` and `report weekly` may use it: bound to the ref and commit
    it was computed on, and how that stands against the configured fork branch now."""

    pr: int
    verdict: str
    fork_ref: str
    fork_sha: str
    computed_at: str | None
    evidence: str  # "state/convergence/<PR>.json#<index>"
    standing: str  # current | stale | unconfirmed | other-ref (see the module docstring)
    why: str = ""  # for any standing but current: what it is not, in words

    @property
    def current(self) -> bool:
        """For fork.branch at its tip now: the only standing that may say "in the fork"."""
        return self.standing == "current"

    @property
    def words(self) -> str:
        at = f"{self.verdict} at {self.fork_ref} {self.fork_sha[:12]}"
        return at if self.current else f"{at} — {self.why}"


def fork_tip(repo: GitRepo | None, branch: str, problem: str | None = None) -> tuple[str | None, str]:
    """`branch`'s tip in the fork checkout `repo`, or None and why it cannot be read (`problem`:
    why there is no `repo`, when the checkout is configured but cannot be opened)."""
    if repo is None:
        return None, f"the fork checkout cannot be read ({problem})" if problem else "no checkout of the fork to read its tip from"
    try:
        ref = qualify_branch(repo, branch)
        sha = repo.rev_parse(ref) if ref else None
    except GitError as exc:
        return None, f"the fork checkout cannot be read ({exc})"
    return (sha, "") if sha else (None, f"branch {branch} does not exist in the fork checkout")


def latest_verdicts(ws: Workspace, branch: str, repo: GitRepo | None, problem: str | None = None) -> dict[int, RecordedVerdict]:
    """PR -> its newest recorded verdict for the fork branch `branch` (else its newest for any
    ref), with its standing against the branch's tip in `repo` now (for `status` and `report
    weekly`); `repo` None: no checkout to read the tip from (`problem`: why, when one is configured)."""
    tip, no_tip = fork_tip(repo, branch, problem)
    folder = ws.state_dir / "convergence"
    verdicts: dict[int, RecordedVerdict] = {}
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else ():
        if not path.stem.isdigit():
            continue
        rel = path.relative_to(ws.root).as_posix()
        found = _bound(int(path.stem), rel, _load_history(path), branch, tip, no_tip)
        if found is not None:
            verdicts[found.pr] = found
    return verdicts


def names_branch(ref: str, branch: str) -> bool:
    """`ref` (as a verdict records it) names the fork branch `branch`."""
    return ref in (branch, f"refs/heads/{branch}", f"refs/remotes/{branch}", f"refs/remotes/{FORK_REMOTE}/{branch}")


def _bound(pr: int, rel: str, history: list[dict[str, Any]], branch: str, tip: str | None, no_tip: str) -> RecordedVerdict | None:
    usable = [(i, e) for i, e in enumerate(history)
              if isinstance(e, dict) and e.get("verdict") in VERDICTS and isinstance(e.get("commits"), dict)]
    if not usable:
        return None
    ours = [(i, e) for i, e in usable if names_branch(str(e["commits"].get("fork_ref")), branch)]
    index, entry = (ours or usable)[-1]
    ref, sha = str(entry["commits"].get("fork_ref")), str(entry["commits"].get("fork_sha") or "")
    if not ours:
        standing, why = "other-ref", f"for another ref, not the fork branch {branch}"
    elif tip is None:
        standing, why = "unconfirmed", f"cannot be confirmed current: {no_tip}"
    elif sha != tip:
        standing, why = "stale", f"stale: {branch} is now {tip[:12]}"
    else:
        standing, why = "current", ""
    return RecordedVerdict(pr, entry["verdict"], ref, sha, entry.get("computed_at"), f"{rel}#{index}", standing, why)
