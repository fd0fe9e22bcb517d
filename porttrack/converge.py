"""`porttrack verify-converged`: prove that a merged upstream PR is present in the fork.

The merge commit comes from GitHub, once: a merge is final, so a PR the recorded state (written
by `status`) already has merged is not asked about again (`resolve_merged_pr`).

A PR is decided in three steps, cheapest first, and each hunk records the step that decided it.
Every hunk ends in one of four states, and only the first two count toward converged:

- **present** -- the hunk's post-image is at the fork ref (directly, by patch-id, or by ancestry
  of the merge commit with the post-image still there);
- **present-after-churn** -- the post-image is gone from the fork ref, but the fork ref contains
  the later upstream change C that rewrote or deleted those lines (C is an ancestor of the fork
  ref, or C's own change on that file is present at the fork ref), so the fork matches upstream's
  later state; `changed_by` names C;
- **missing** -- the hunk's pre-image is still at the fork ref, whatever upstream did later (for a
  deleted file: the file is still there; for an added file: it is absent and upstream never
  deleted it);
- **unknown** -- none of those could be shown; `detail` says why.

1. **ancestry** -- the merge commit (GitHub's `merge_commit_sha`: a true merge or the squash
   commit) is an ancestor of the fork ref: one `git merge-base <merge> <fork>`, which also gives
   the merge base the later steps start from. Every hunk is present; one whose post-image is no
   longer at the fork ref is present-after-churn, by the newest later commit touching that path
   (in the fork ref's own history, so the fork has it by construction; upstream's or the fork's)
   -- unless its pre-image is back there (a revert): then it is missing.
2. **patch-id** -- `git patch-id --stable` of the merged change (merge commit vs its first parent),
   and of each PR commit for a true merge, against the fork commits since the merge base that touch
   the PR's paths (`git log <merge-base>..<fork> -- <paths>`), so the cost follows the fork's own
   commits on those files, not the length of history. A cherry-pick (new SHA, same change) is found
   here.
3. **content** -- each hunk is looked for at the fork ref (`porttrack.hunks.hunk_state`, which
   anchors a hunk at the start or end of the file as `git apply` does): post-image found and not
   the pre-image -> present; pre-image found and not the post-image -> missing. A hunk with
   neither is looked up in upstream's later history, only when the fork's upstream base contains
   the merge: C is the first commit on the ancestry path from the merge to the base
   (`git log --ancestry-path <merge>..<base> -- <path>`) whose content of the path lacks the
   post-image. It is present-after-churn when C is an ancestor of the fork ref, or every hunk of
   C's change to the path (against its first parent) is applied at the fork ref; a deletion by C
   counts only by ancestry (absence alone does not show the fork ever had the PR's version).
   Anything else is unknown, with the reason.

Verdict: `converged` when every hunk is present or present-after-churn (an empty change is
converged), `partially-converged` when some are and some are not, `not-converged` when none is.
Counts (`summary`) say present / present-after-churn / missing / unknown separately and add up to
`hunks`. The command exits 0 only for `converged` (and, with `--run-regression`, a passing
regression); otherwise `CheckFailed` (exit 1), after recording.

Applying the diff in reverse at the tip is deliberately not a method: once upstream has moved on
(#48407's `vllm/models/deepseek_v32/nvidia/attention.py` was deleted two days after it merged),
it fails on upstream's own main.

The fork ref defaults to `fork.branch` of tracks.yaml (else HEAD) in the fork checkout; the
upstream base is `fork.upstream_base` (default `upstream/main`). When the base has the merge but
the fork ref does not, the fork has not rebased yet: the steps above decide what the fork has
now, and the reasons say so.

Copies the fork carries (live queue patches for the PR, the track's `fork_commits` that duplicate
the change by patch-id or by hunk ids) are **droppable** only when the verdict is `converged`, the
change reaches the fork from upstream (the merge commit is in the fork ref or its upstream base),
the verdict is for the configured `fork.branch` (at the tip it was just computed on), and -- for a
queued patch -- every hunk the patch carries is a hunk of the merged change that is present or
present-after-churn. `--apply-drops` retires droppable queue patches (state `converged`, evidence
kept); the retirement names the verdict it relied on (`state/convergence/<PR>.json#<index>` and
the fork commit). `fork_commits` are only listed: tracks.yaml and the fork's history belong to
humans.

Each run appends its verdict to `state/convergence/<PR>.json` (schema
`porttrack/convergence-record/v1`: `{"schema", "pr", "history": [<verdict>, ...]}`, oldest
first, never edited), with the commits it was computed on and the time; a verdict that finds
exactly what the last entry found (same commits, hunks, drops and no new regression run) is not
appended again: it reports `unchanged_since`, the time of that entry, so a daily check after
every rebase does not grow a committed file by one copy a day.

A recorded verdict is bound to what it was computed on: `latest_verdicts` (for `status` and
`report weekly`) takes, per PR, the newest entry for the configured `fork.branch` and says whether
it is **current** (its `fork_sha` is the branch's tip in the fork checkout now), **stale** (the
branch has moved), **unconfirmed** (no fork checkout to read the tip from), or, when no entry is
for that branch, **other-ref**. Only a current verdict may say "in the fork"; any other keeps the
next action "verify convergence".

JSON shape (`--json`, schema `porttrack/convergence/v2`; additive changes only). v2 replaced v1's
hunk state `changed-since` (which counted a hunk as present on the strength of upstream churn alone)
by `present-after-churn` (proven) and added `unknown`; `summary` went from
`{hunks, present, changed_since, missing}` to `{hunks, present, present_after_churn, missing,
unknown}`. A state whose meaning changed is not an additive change, hence the new name::

    {
      "schema": "porttrack/convergence/v2",
      "pr": 48407, "title": "...", "track": "sparse-indexer-skip" | null,
      "verdict": "converged" | "partially-converged" | "not-converged",
      "method": "ancestry" | "patch-id" | "content",   # the step that settled the verdict
      "reasons": ["...", ...],                          # human sentences, in order
      "computed_at": "2026-08-25T10:00:00Z",
      "source": {"pr_state": "github" | "recorded", "note": str | null},
      "commits": {"merge_commit": sha, "merge_parent": sha | null, "merge_kind": "squash" | "merge",
                  "fork_ref": "main", "fork_sha": sha,
                  "upstream_base": "upstream/main", "upstream_base_sha": sha | null,
                  "merge_base": sha | null},
      "ancestry": {"fork_ref": bool, "upstream_base": bool | null},   # null: not checked (the
                                                                      # fork ref has the merge)
      "patch_id": null | {"change": hex, "candidates": int,
                          "matched": [{"commit": sha, "subject": str, "matches": "change" | pr-commit sha}]},
      "hunks": [{"id": "1a2b3c4d5e6f", "path": "...", "kind": "text" | "binary" | "meta",
                 "header": "@@ -10,7 +10,9 @@ def f",
                 "state": "present" | "present-after-churn" | "missing" | "unknown",
                 "method": "ancestry" | "patch-id" | "content" | "churn",
                 "changed_by": null | {"commit": sha, "subject": str, "upstream": bool},
                 "detail": str}],
      "summary": {"hunks": int, "present": int, "present_after_churn": int, "missing": int,
                  "unknown": int},                      # the four add up to hunks
      "drops": [{"kind": "queued-patch" | "fork-commit", "ref": name-or-sha, "commit": sha | null,
                 "duplicate": bool, "droppable": bool, "retired": bool, "reason": str}],
      "regression": null | {"command": str, "workdir": "checkout" | "temporary worktree",
                            "passed": bool, "exit_code": int, "duration_s": float,
                            "output_tail": str},
      "recorded": "state/convergence/48407.json" | null,     # null: --dry-run
      "unchanged_since": null | "2026-08-24T10:00:00Z"       # the last entry found the same; not appended
    }
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import string
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from porttrack.errors import (
    CannotEvaluate,
    CheckFailed,
    ConfigError,
    GitError,
    GitHubAuthError,
    InputError,
    NotFound,
    PreconditionError,
    UnsafeInput,
    UpstreamUnreachable,
)
from porttrack.gitrepo import GitRepo, upstream_ref
from porttrack.state import utcnow
from porttrack.testhooks import checkpoint
from porttrack.workspace import Workspace, lock, write_json

if TYPE_CHECKING:
    from porttrack.config import Config, Job
    from porttrack.hunks import FileDiff, Hunk

SCHEMA = "porttrack/convergence/v2"
RECORD_SCHEMA = "porttrack/convergence-record/v1"
VERDICTS = ("converged", "partially-converged", "not-converged")
STATES = ("present", "present-after-churn", "missing", "unknown")
COUNTED = frozenset({"present", "present-after-churn"})  # the states that count toward converged
OUTPUT_TAIL_LINES = 40
OUTPUT_TAIL_CHARS = 4000
# PR file paths are untrusted text: never let git read them as pathspec magic (":(glob)...").
_LITERAL = {"GIT_LITERAL_PATHSPECS": "1"}
_FULL_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


# --------------------------------------------------------------------------------------------
# Records


@dataclass(frozen=True)
class MergedPR:
    number: int
    title: str
    merge_commit: str
    merged_at: str | None
    source: str  # "github" | "recorded"
    note: str | None = None


@dataclass(frozen=True)
class Commits:
    merge_commit: str
    merge_parent: str | None
    merge_kind: str  # "squash" (one parent) | "merge"
    fork_ref: str
    fork_sha: str
    upstream_base: str
    upstream_base_sha: str | None
    merge_base: str | None


@dataclass(frozen=True)
class ChangedBy:
    commit: str
    subject: str
    upstream: bool  # the commit is in the fork's upstream base (else the fork made it)


@dataclass(frozen=True)
class HunkResult:
    id: str
    path: str
    kind: str
    header: str
    state: str  # present | present-after-churn | missing | unknown (see the module docstring)
    method: str  # ancestry | patch-id | content | churn
    changed_by: ChangedBy | None = None
    detail: str = ""

    @property
    def counts(self) -> bool:
        """Counts toward converged: present, or present after (proven) upstream churn."""
        return self.state in COUNTED


@dataclass(frozen=True)
class PatchIdMatch:
    commit: str
    subject: str
    matches: str  # "change", or the PR commit whose patch-id it has


@dataclass(frozen=True)
class PatchIdResult:
    change: str | None  # patch-id of the whole merged change (None: an empty diff)
    candidates: int
    matched: tuple[PatchIdMatch, ...]


@dataclass(frozen=True)
class Drop:
    kind: str  # queued-patch | fork-commit
    ref: str  # patch name, or the SHA as tracks.yaml writes it
    commit: str | None
    duplicate: bool
    droppable: bool
    reason: str
    retired: bool = False


@dataclass(frozen=True)
class Regression:
    command: str
    workdir: str  # "checkout" | "temporary worktree"
    passed: bool
    exit_code: int
    duration_s: float
    output_tail: str


@dataclass(frozen=True)
class Verdict:
    pr: int
    title: str
    track: str | None
    verdict: str
    method: str
    reasons: tuple[str, ...]
    computed_at: str
    source: str
    source_note: str | None
    commits: Commits
    ancestry_fork: bool
    ancestry_base: bool | None
    patch_id: PatchIdResult | None
    hunks: tuple[HunkResult, ...]
    drops: tuple[Drop, ...] = ()
    regression: Regression | None = None
    recorded: str | None = None
    unchanged_since: str | None = None  # the record's last entry found the same: not appended again

    @property
    def converged(self) -> bool:
        return self.verdict == "converged"

    @property
    def upstream_has_it(self) -> bool:
        """The change reaches the fork from upstream (not only from a copy the fork carries)."""
        return self.ancestry_fork or bool(self.ancestry_base)


def to_json(v: Verdict) -> dict[str, Any]:
    """The documented `porttrack/convergence/v2` shape (see the module docstring)."""
    return {
        "schema": SCHEMA,
        "pr": v.pr,
        "title": v.title,
        "track": v.track,
        "verdict": v.verdict,
        "method": v.method,
        "reasons": list(v.reasons),
        "computed_at": v.computed_at,
        "source": {"pr_state": v.source, "note": v.source_note},
        "commits": asdict(v.commits),
        "ancestry": {"fork_ref": v.ancestry_fork, "upstream_base": v.ancestry_base},
        "patch_id": None if v.patch_id is None else {
            "change": v.patch_id.change,
            "candidates": v.patch_id.candidates,
            "matched": [asdict(m) for m in v.patch_id.matched],
        },
        "hunks": [asdict(h) for h in v.hunks],  # in diff order
        "summary": summary(v.hunks),
        "drops": [asdict(d) for d in v.drops],
        "regression": None if v.regression is None else asdict(v.regression),
        "recorded": v.recorded,
        "unchanged_since": v.unchanged_since,
    }


def summary(hunks: Sequence[HunkResult]) -> dict[str, int]:
    """Per state, and in all: every hunk is in exactly one state, so the four add up."""
    return {
        "hunks": len(hunks),
        "present": sum(h.state == "present" for h in hunks),
        "present_after_churn": sum(h.state == "present-after-churn" for h in hunks),
        "missing": sum(h.state == "missing" for h in hunks),
        "unknown": sum(h.state == "unknown" for h in hunks),
    }


def counts_words(s: Mapping[str, int]) -> str:
    """'11 present, 2 present after churn, 3 missing, 1 unknown of 17 hunks': exact, adds up."""
    return (f"{s['present']} present, {s['present_after_churn']} present after churn, "
            f"{s['missing']} missing, {s['unknown']} unknown of {s['hunks']} hunk(s)")


# --------------------------------------------------------------------------------------------
# The command, end to end


def verify_converged(
    ws: Workspace,
    config: "Config",
    number: int,
    *,
    fork_ref: str | None = None,
    run_regression: bool = False,
    apply_drops: bool = False,
    dry_run: bool = False,
    api_url: str | None = None,
    say: Callable[[str], None] | None = None,
) -> Verdict:
    """Decide, list drops, optionally run the regression and retire drops, record. Never raises
    for a negative verdict: the caller turns `verdict`/`regression` into an exit code (`outcome`)."""
    track_id = config.track_for_pr(number)
    job = _regression_job(config, track_id, number) if run_regression else None
    repo = _fork_repo(config)
    pr = resolve_merged_pr(ws, config, number, api_url)
    ensure_commit(repo, pr.merge_commit, config.upstream.remote, config.upstream.default_branch, say)
    ref = fork_ref or _default_fork_ref(repo, config.fork.branch)
    verdict = decide(repo, pr, fork_ref=ref, upstream_base=config.fork.upstream_base, track=track_id)
    fork_commits = tuple(config.tracks[track_id].fork_commits) if track_id else ()
    from porttrack import queue as queue_mod

    queued = queue_mod.load(ws).for_pr(number)
    verdict = replace(verdict, drops=find_drops(repo, verdict, queued, fork_commits, config.fork.branch))
    if job is not None:
        verdict = replace(verdict, regression=regression(repo, job, verdict.commits.fork_sha))
    if dry_run:
        return replace(verdict, unchanged_since=_same_as_last(_load_history(record_path(ws, number)), verdict))
    return record(ws, verdict, apply_drops=apply_drops)


def outcome(v: Verdict) -> CheckFailed | None:
    """The error the command exits with, or None for success (converged, regression passed)."""
    problems = []
    if not v.converged:
        s = summary(v.hunks)
        problems.append(f"#{v.pr} is {v.verdict} at {v.commits.fork_ref} ({counts_words(s)})")
    if v.regression is not None and not v.regression.passed:
        problems.append(f"the regression command failed (exit {v.regression.exit_code})")
    return CheckFailed("; ".join(problems)) if problems else None


def _fork_repo(config: "Config") -> GitRepo:
    path = config.fork_checkout()
    if path is None:
        raise ConfigError("verify-converged needs the fork checkout: set fork.checkout in tracks.yaml, --fork or PORTTRACK_FORK")
    return GitRepo.open(path)


def _default_fork_ref(repo: GitRepo, branch: str) -> str:
    return branch if repo.rev_parse(f"refs/heads/{branch}") else "HEAD"


def _regression_job(config: "Config", track_id: str | None, number: int) -> "Job":
    if track_id is None:
        raise ConfigError(f"#{number} belongs to no track in tracks.yaml, so it has no regression command")
    job = config.tracks[track_id].regression
    if job is None:
        raise ConfigError(f"track {track_id} has no regression job in tracks.yaml (tracks.{track_id}.regression.command)")
    if job.command is None:
        raise CannotEvaluate(f"track {track_id}'s regression is a workflow job; verify-converged runs local commands only")
    return job


# --------------------------------------------------------------------------------------------
# 1. The merge commit


def resolve_merged_pr(ws: Workspace, config: "Config", number: int, api_url: str | None) -> MergedPR:
    """The PR's merge commit, as GitHub reported it.

    A merge is final: once the recorded state (written by `status`, from GitHub) has the PR merged
    with its merge commit, that is used as it is, without a request (and without importing
    PyGithub, 0.4 s). Otherwise GitHub is asked; when it cannot be, the command stops with GitHub's
    error (or the missing token) and what the recorded state last saw.
    """
    from porttrack import secrets
    from porttrack import state as state_mod

    recorded = state_mod.load(ws.upstream_state_file, config.upstream.repo)
    known = recorded.prs.get(number)
    if known is not None and known.state == "merged" and known.merge_commit_sha:
        sha = _checked_sha(known.merge_commit_sha, ws.upstream_state_file.name)
        return MergedPR(number, known.title, sha, known.merged_at, "recorded",
                        f"merges are final: the merge commit as recorded at {known.observed_at} ({recorded.source}); GitHub not asked")
    if secrets.resolve_token() is None:
        why = "no GitHub token (set GITHUB_TOKEN or GH_TOKEN)"
        if known is not None and known.state != "merged":  # the best knowledge says not merged
            raise PreconditionError(f"{why}; {_last_seen(ws, number, known)}")
        raise CannotEvaluate(f"{why}; {_last_seen(ws, number, known)}")
    from porttrack.github import client_for

    client = client_for(config.upstream.repo, api_url, ws.cache_dir)
    try:
        pull, _ = client.get_pull(number)
    except (UpstreamUnreachable, GitHubAuthError) as exc:  # its exit code (5 or 3), with what was recorded
        raise type(exc)(f"{exc}; {_last_seen(ws, number, known)}") from None
    if pull.state != "merged" or not pull.merge_commit_sha:
        raise PreconditionError(_not_merged(number, pull.state, pull.closed_at, "on GitHub"))
    return MergedPR(number, pull.title, _checked_sha(pull.merge_commit_sha, "GitHub"), pull.merged_at, "github")


def _last_seen(ws: Workspace, number: int, known: Any) -> str:
    """What the recorded state says of a PR it does not have merged with a merge commit."""
    name = ws.upstream_state_file.name
    if known is None:
        return f"#{number} is not in the recorded state {name}; run `porttrack status` with GitHub access"
    if known.state != "merged":
        return _not_merged(number, known.state, known.closed_at, f"as recorded at {known.observed_at}")
    return f"the recorded state {name} has #{number} merged but no merge commit"


def _checked_sha(sha: str, where: str) -> str:
    """The merge commit goes on git command lines (fetch, diff): only a full hex SHA may."""
    if not _FULL_SHA.fullmatch(sha):
        raise UnsafeInput(f"{where} gave a malformed merge commit SHA {sha[:80]!r}; refusing to pass it to git")
    return sha


def _not_merged(number: int, state: str, closed_at: str | None, where: str) -> str:
    if state == "closed":
        return f"#{number} was closed without merging ({where}{', ' + closed_at[:10] if closed_at else ''}): there is nothing to converge; see `porttrack status`"
    return f"#{number} is {state} ({where}), not merged: verify-converged checks merged PRs only"


def ensure_commit(repo: GitRepo, sha: str, remote: str, branch: str, say: Callable[[str], None] | None = None) -> None:
    """Make `sha` (and its parents) local: fetch upstream's default branch into porttrack's ref
    namespace, then the SHA itself (GitHub serves reachable SHAs).

    `--refmap=` keeps git from also moving the remote-tracking branch (`upstream/main`): that ref
    is the fork's upstream base, an input of the verdict, and it is the user's to move.
    """
    if repo.has_commit(sha):
        return
    if say:
        say(f"merge commit {sha[:12]} is not in the fork checkout: fetching {branch} from {remote}")
    problems = []
    for refspec in (f"+refs/heads/{branch}:{upstream_ref(branch)}", sha):
        try:
            repo.fetch(remote, [refspec])  # the one fetch policy (and its bounds) of porttrack.gitrepo
        except GitError as exc:
            problems.append(str(exc))
        if repo.has_commit(sha):
            return
    detail = f" ({problems[-1]})" if problems else ""
    raise CannotEvaluate(f"merge commit {sha[:12]} is not in the fork checkout, and fetching {branch} from remote {remote!r} did not bring it{detail}")


# --------------------------------------------------------------------------------------------
# 2-4. Deciding


def decide(repo: GitRepo, pr: MergedPR, *, fork_ref: str, upstream_base: str, track: str | None = None, now: str | None = None) -> Verdict:
    """Ancestry, then patch-id, then per-hunk content with churn: see the module docstring.

    History walks are what cost on a big repository (without a commit-graph each one reads every
    commit back to the merge), so there are as few as the answer needs: one merge-base answers
    both "ancestor?" and "since where?", and the path-limited logs run only for paths whose
    content is absent.
    """
    from porttrack import hunks as hunks_mod

    merge = pr.merge_commit
    fork_sha = None if fork_ref.startswith("-") else repo.rev_parse(fork_ref)
    if fork_sha is None:
        raise NotFound(f"fork ref {fork_ref!r} does not exist in the fork checkout {repo.path}")
    parents = repo.text("rev-list", "--parents", "-n", "1", merge).split()[1:]
    base_sha = repo.rev_parse(upstream_base)
    if parents:
        files = hunks_mod.parse_diff(repo.diff(parents[0], merge))
    else:  # a root commit: everything it has is its change
        files = hunks_mod.parse_diff(repo.run("diff-tree", "-p", "--root", "--binary", "--full-index", "-M", merge).stdout)
    merge_base = repo.merge_base(merge, fork_sha)
    in_fork = merge_base == merge
    # Only needed when the fork ref lacks the merge (null in the JSON: not checked).
    in_base = None if in_fork else (repo.is_ancestor(merge, base_sha) if base_sha else False)
    reasons: list[str] = []
    where = f"{fork_ref} ({fork_sha[:12]})"
    base_where = f"{upstream_base} ({base_sha[:12]})" if base_sha else repr(upstream_base)

    def finish(method: str, results: list[HunkResult], patch_id: PatchIdResult | None = None) -> Verdict:
        if not results:
            reasons.append("the merged change is empty: nothing to carry")
        commits = Commits(merge, parents[0] if parents else None, "merge" if len(parents) > 1 else "squash",
                          fork_ref, fork_sha, upstream_base, base_sha, merge_base)
        return Verdict(
            pr=pr.number, title=pr.title, track=track, verdict=_verdict_of(results), method=method,
            reasons=tuple(reasons), computed_at=now or utcnow(), source=pr.source, source_note=pr.note,
            commits=commits, ancestry_fork=in_fork, ancestry_base=in_base, patch_id=patch_id, hunks=tuple(results),
        )

    if in_fork:
        reasons.append(f"merge commit {merge[:12]} is an ancestor of {where}")
        results = _by_ancestry(repo, files, merge, fork_sha, base_sha)
        churned = sorted({h.path for h in results if h.state == "present-after-churn"})
        if churned:
            reasons.append(f"changed since the merge, so no longer at the fork ref as merged: {', '.join(churned)}")
        return finish("ancestry", results)

    reasons.append(f"merge commit {merge[:12]} is not an ancestor of {where}")
    if in_base:
        reasons.append(f"{base_where} contains it: the fork has not been rebased onto its upstream base since")
    elif base_sha:
        reasons.append(f"{base_where} does not contain it either: the fork's upstream base predates the merge")
    else:
        reasons.append(f"upstream base {base_where} does not exist in the fork checkout")

    paths = sorted({p for fd in files for p in (fd.old_path, fd.new_path) if p is not None})
    patch_id, decided = _patch_id_step(repo, merge, parents, merge_base, fork_sha, paths)
    if patch_id is not None and decided:
        m = patch_id.matched[0]
        if m.matches == "change":
            reasons.append(f"fork commit {m.commit[:12]} ({m.subject[:60]}) has the merged change's patch-id")
        else:
            reasons.append(f"every commit of the PR has a fork commit with its patch-id: {', '.join(x.commit[:12] for x in patch_id.matched)}")
        return finish("patch-id", _by_patch_id(repo, files, fork_sha, m.commit), patch_id)
    if patch_id is not None:
        since = f"since {merge_base[:12]}" if merge_base else ""
        reasons.append(f"none of the {patch_id.candidates} fork commit(s) {since} touching the PR's files has its patch-id")

    results = _by_content(repo, files, pr.number, merge, fork_sha, base_sha if in_base else None)
    reasons.append(f"by content at {fork_ref}: {counts_words(summary(results))}")
    return finish("content", results, patch_id)


def _verdict_of(results: Sequence[HunkResult]) -> str:
    """Converged only when every hunk counts (present, or present after proven churn): a missing
    or unknown hunk fails closed. Churn alone proves nothing -- it is counted only with proof that
    the fork has the later change."""
    found = sum(h.counts for h in results)
    if found == len(results):
        return "converged"
    return "partially-converged" if found else "not-converged"


def _result(h: "Hunk", state: str, method: str, changed_by: ChangedBy | None = None, detail: str = "") -> HunkResult:
    return HunkResult(h.id, h.path, h.kind, _header(h), state, method, changed_by, detail)


def _header(h: "Hunk") -> str:
    if h.kind == "text":
        return h.body.split(b"\n", 1)[0].decode("utf-8", "replace")
    if h.kind == "binary":
        return "binary"
    # meta: a rename or copy, an empty file added or deleted, or (status "modified") a mode change
    return "mode change" if h.file_status == "modified" else h.file_status


# -- ancestry

def _by_ancestry(repo: GitRepo, files: Sequence["FileDiff"], merge: str, fork_sha: str, base_sha: str | None) -> list[HunkResult]:
    """Every hunk is present by ancestry. Where its post-image is no longer at the fork ref, it is
    present after churn by the newest commit since the merge that touched the path: that commit
    is in `merge..fork`, so the fork ref contains it by construction (the proof the contract
    asks for); say whether upstream made it. With no such commit the path is as merged. One
    exception: where the pre-image is back (a revert, upstream's or the fork's), it is missing."""
    contents = _read_files(repo, fork_sha, [fd.path for fd in files])
    checks = [(fd, h, _present(h, fd, contents.get(fd.path))) for fd in files for h in fd.hunks]
    gone = sorted({fd.path for fd, _, ok in checks if not ok})
    later = _later_commits(repo, merge, fork_sha, gone)
    fork_only = set()
    if later and base_sha:  # commits the fork ref has and its upstream base lacks: the fork's own
        fork_only = set(repo.text("log", "--format=%H", f"{base_sha}..{fork_sha}", "--", *gone, env=_LITERAL).split())
    results = []
    for fd, h, ok in checks:
        by = None if ok else later.get(fd.path)
        if by is None:
            results.append(_result(h, "present", "ancestry"))
            continue
        changed = ChangedBy(by[0], by[1], bool(base_sha) and by[0] not in fork_only)
        where = "upstream" if changed.upstream else "in the fork"
        if _pre_image_back(h, fd, contents.get(fd.path), changed.upstream):
            results.append(_result(h, "missing", "ancestry", changed,
                                   f"the pre-image is back at the fork ref: undone {where} by {by[0][:12]} ({by[1][:60]})"))
            continue
        results.append(_result(h, "present-after-churn", "ancestry", changed,
                               f"no longer at the fork ref as merged: changed {where} by {by[0][:12]} ({by[1][:60]}), which the fork ref contains"))
    return results


def _pre_image_back(h: "Hunk", fd: "FileDiff", entry: tuple[str, bytes] | None, by_upstream: bool) -> bool:
    """After the merge, is the hunk's pre-image at the fork ref again: a deleted file back, an
    added file removed by the fork itself (upstream may delete it: that is its later state), an
    old mode back, or the pre-image's lines back and not the post-image's?"""
    from porttrack import hunks as hunks_mod

    if fd.status == "deleted":
        return entry is not None
    if entry is None:
        return fd.status == "added" and not by_upstream
    if h.kind == "meta":  # only a mode change can be undone in place (a rename's pseudo-hunk: no)
        return None not in (fd.old_mode, fd.new_mode) and fd.old_mode != fd.new_mode and entry[0] == fd.old_mode
    return hunks_mod.hunk_state(h, entry[1]) == "not-applied"


# -- patch-id

def _patch_id_step(repo: GitRepo, merge: str, parents: list[str], merge_base: str | None,
                   fork_sha: str, paths: list[str]) -> tuple[PatchIdResult | None, bool]:
    """Patch-ids of fork commits since the merge base that touch the PR's paths, against the
    merged change (and, for a true merge, each PR commit). Decides when the whole change matched
    or every PR commit did."""
    if merge_base is None or not parents or not paths:
        return None, False
    log = repo.text("log", "--no-merges", "--format=%H %s", f"{merge_base}..{fork_sha}", "--", *paths, env=_LITERAL)
    subjects = dict(line.partition(" ")[::2] for line in log.splitlines() if line)
    change = _patch_id_of_change(repo, parents[0], merge)
    pr_commits = repo.text("rev-list", "--no-merges", f"{parents[0]}..{parents[1]}").split() if len(parents) > 1 else []
    wanted = {change: "change"} if change else {}
    for sha, pid in _patch_ids(repo, pr_commits).items():
        wanted.setdefault(pid, sha)
    found = _patch_ids(repo, subjects)
    matched = sorted(
        (PatchIdMatch(sha, subject, wanted[found[sha]]) for sha, subject in subjects.items() if found.get(sha) in wanted),
        key=lambda m: m.matches != "change",
    )
    matches = {m.matches for m in matched}
    decided = "change" in matches or (bool(pr_commits) and set(pr_commits) <= matches)
    return PatchIdResult(change, len(subjects), tuple(matched)), decided


def _by_patch_id(repo: GitRepo, files: Sequence["FileDiff"], fork_sha: str, commit: str) -> list[HunkResult]:
    """Every hunk is present by patch-id of `commit`, except one whose pre-image is back at the
    fork ref (the copy was reverted since): that one is missing. One read of the PR's files."""
    contents = _read_files(repo, fork_sha, [fd.path for fd in files])
    results = []
    for fd, h in ((fd, h) for fd in files for h in fd.hunks):
        if _pre_image_back(h, fd, contents.get(fd.path), by_upstream=False):
            results.append(_result(h, "missing", "patch-id", detail=f"same patch-id as {commit[:12]}, but the pre-image is back at the fork ref"))
        else:
            results.append(_result(h, "present", "patch-id", detail=f"same patch-id as {commit[:12]}"))
    return results


def _patch_ids(repo: GitRepo, shas: Iterable[str]) -> dict[str, str]:
    """commit -> `git patch-id --stable` of its change against its first parent (merges: none)."""
    shas = list(shas)
    if not shas:
        return {}
    diffs = repo.run("diff-tree", "--stdin", "-p", "--root", "--binary", "--full-index", input=("\n".join(shas) + "\n").encode()).stdout
    out = repo.run("patch-id", "--stable", input=diffs).stdout.decode()
    return {commit: pid for pid, commit in (line.split() for line in out.splitlines() if line.strip())}


def _patch_id_of_change(repo: GitRepo, old: str, new: str) -> str | None:
    diff = repo.run("diff-tree", "-p", "--binary", "--full-index", old, new).stdout
    out = repo.run("patch-id", "--stable", input=diff).stdout.decode().split()
    return out[0] if out else None


# -- content and churn

@dataclass(frozen=True)
class _Look:
    """What the fork ref's content alone says of one hunk: a state, or None (neither image there:
    upstream's later history decides), and the words for it."""

    state: str | None
    detail: str
    absent_added: bool = False  # an added file that is absent: missing unless upstream deleted it


def _by_content(repo: GitRepo, files: Sequence["FileDiff"], number: int, merge: str, fork_sha: str,
                base_sha: str | None) -> list[HunkResult]:
    """Each hunk by the fork ref's content, then, for a hunk with neither image there, by the
    later upstream change that rewrote it (`base_sha` is given only when the upstream base
    contains the merge). Upstream's history is read only for those hunks' paths."""
    paths = sorted({p for fd in files for p in (fd.path, fd.old_path) if p is not None})
    at_fork = _read_files(repo, fork_sha, paths)
    looks = [(fd, h, _look(h, fd, at_fork)) for fd in files for h in fd.hunks]
    open_paths = sorted({fd.path for fd, _, look in looks if look.state is None})
    later = _later_upstream(repo, merge, base_sha, open_paths) if base_sha and open_paths else {}
    missing_paths = sorted({fd.path for fd, _, look in looks if look.state == "missing" and fd.status != "deleted"})
    at_base = _read_files(repo, base_sha, missing_paths) if base_sha and missing_paths else {}
    results = []
    for fd, h, look in looks:
        if look.state == "present":
            results.append(_result(h, "present", "content", detail=look.detail))
        elif look.state is not None:
            words = _upstream_words(h, fd, base_sha, at_base) if look.state == "missing" else ""
            results.append(_result(h, look.state, "content", detail=look.detail + words))
        else:
            results.append(_after_churn(repo, h, fd, look, number, fork_sha, base_sha, later.get(fd.path, ()), at_fork.get(fd.path)))
    return results


def _look(h: "Hunk", fd: "FileDiff", at_fork: Mapping[str, tuple[str, bytes]]) -> _Look:
    """The hunk by the fork ref's content alone (`at_fork`: path -> (mode, bytes))."""
    from porttrack import hunks as hunks_mod

    entry = at_fork.get(fd.path)
    if fd.status == "deleted":
        return _Look("present", f"{fd.path} is gone at the fork ref") if entry is None else _Look("missing", f"{fd.path} still exists at the fork ref")
    if entry is None:
        old = at_fork.get(fd.old_path) if fd.old_path not in (None, fd.path) else None
        if old is not None and (h.kind != "text" or hunks_mod.pre_image_present(h, old[1])):
            return _Look("missing", f"not renamed at the fork ref: {fd.old_path} is still there" + (" with the pre-image" if h.kind == "text" else ""))
        if fd.status == "added":
            return _Look(None, f"{fd.path} does not exist at the fork ref", absent_added=True)
        return _Look(None, f"{fd.path} does not exist at the fork ref")
    if h.kind == "meta":
        if fd.new_mode is None or entry[0] == fd.new_mode:
            return _Look("present", "found at the fork ref")
        if entry[0] == fd.old_mode:
            return _Look("missing", f"mode still {fd.old_mode} at the fork ref")
        return _Look(None, f"mode {entry[0]} at the fork ref: neither {fd.old_mode} nor {fd.new_mode}")
    state = hunks_mod.hunk_state(h, entry[1])
    if state == "applied":
        return _Look("present", "post-image found at the fork ref")
    if state == "not-applied":
        return _Look("missing", "pre-image still at the fork ref")
    if h.kind == "text" and hunks_mod.post_image_present(h, entry[1]) and hunks_mod.pre_image_present(h, entry[1]):
        return _Look("unknown", "both the pre-image and the post-image occur at the fork ref")
    return _Look(None, "neither the pre-image nor the post-image is at the fork ref")


def _upstream_words(h: "Hunk", fd: "FileDiff", base_sha: str | None, at_base: Mapping[str, tuple[str, bytes]]) -> str:
    """For a missing hunk: whether upstream still has it (a hint for the reader, not a proof)."""
    if base_sha is None or fd.status == "deleted":
        return ""
    return "; upstream still has it" if _present(h, fd, at_base.get(fd.path)) else "; upstream has since changed it, and the fork never took this change"


# One later upstream commit touching a path: (sha, subject, (mode, bytes) of the path there or None).
_Later = tuple[str, str, "tuple[str, bytes] | None"]


def _after_churn(repo: GitRepo, h: "Hunk", fd: "FileDiff", look: _Look, number: int, fork_sha: str,
                 base_sha: str | None, later: Sequence[_Later], entry: tuple[str, bytes] | None) -> HunkResult:
    """A hunk with neither image at the fork ref: present after churn when the fork ref contains
    the upstream change C that took the post-image away (see the module docstring), else unknown
    -- or, for an added file that is absent and that upstream never deleted, missing."""
    if base_sha is None:
        if look.absent_added:
            return _result(h, "missing", "content", detail=look.detail)
        return _result(h, "unknown", "content", detail=f"{look.detail}; the upstream base does not contain the merge, so there is no later upstream state to compare")
    c = next((c for c in later if not _present(h, fd, c[2])), None)
    if c is None:
        if look.absent_added:
            return _result(h, "missing", "content", detail=f"{look.detail}; upstream still has it")
        return _result(h, "unknown", "content", detail=f"{look.detail}; upstream still has the post-image, so this is the fork's own version")
    changed = ChangedBy(c[0], c[1], True)
    what = "deleted" if c[2] is None else "rewrote"
    if repo.is_ancestor(c[0], fork_sha):
        return _result(h, "present-after-churn", "churn", changed,
                       f"{look.detail}; upstream {c[0][:12]} ({c[1][:60]}) {what} it, and the fork ref contains that commit")
    if c[2] is None:
        return _result(h, "unknown", "churn", changed,
                       f"{look.detail}; upstream {c[0][:12]} ({c[1][:60]}) deleted the file, which the fork ref does not contain: "
                       f"absence alone does not show the fork ever had #{number}'s version")
    if entry is not None and _change_present(repo, c[0], fd.path, entry):
        return _result(h, "present-after-churn", "churn", changed,
                       f"{look.detail}; upstream {c[0][:12]} ({c[1][:60]}) rewrote it, and its change to {fd.path} is at the fork ref")
    return _result(h, "unknown", "churn", changed,
                   f"{look.detail}; upstream {c[0][:12]} ({c[1][:60]}) rewrote it, but the fork ref has neither that commit nor its change to {fd.path}")


def _change_present(repo: GitRepo, sha: str, path: str, entry: tuple[str, bytes]) -> bool:
    """Every hunk of commit `sha`'s change to `path` (against its first parent) is applied in the
    fork's `entry`: the fork has upstream's later state of that file, not just its absence."""
    from porttrack import hunks as hunks_mod

    changes = [fd for fd in hunks_mod.parse_diff(repo.run("diff", "--no-ext-diff", "--no-textconv", "--no-renames", "--binary", "--full-index",
                                                          f"{sha}^", sha, "--", path, env=_LITERAL).stdout) if fd.path == path]
    checks = [(fd, h) for fd in changes for h in fd.hunks]
    return bool(checks) and all(_applied(h, fd, entry) for fd, h in checks)


def _applied(h: "Hunk", fd: "FileDiff", entry: tuple[str, bytes] | None) -> bool:
    """Stricter than `_present`: the post-image is there and the pre-image is not."""
    from porttrack import hunks as hunks_mod

    if fd.status == "deleted" or entry is None or h.kind == "meta":
        return _present(h, fd, entry)
    return hunks_mod.hunk_state(h, entry[1]) == "applied"


def _later_upstream(repo: GitRepo, merge: str, base_sha: str, paths: Sequence[str]) -> dict[str, list[_Later]]:
    """path -> the commits on the ancestry path from the merge to the base that touched it, oldest
    first, each with the path's content there. `--ancestry-path` keeps out side branches cut
    before the merge (they lack the post-image for want of the merge, not because of churn); a
    merge commit's change is taken against its first parent, as `_change_present` reads it.
    One `log --raw` per path (it gives each commit's mode and blob) and one `cat-file --batch`."""
    found: dict[str, list[tuple[str, str, str, str]]] = {}
    for path in paths:
        log = repo.text("log", "--ancestry-path", "--topo-order", "--reverse", "--no-renames", "--raw", "--no-abbrev",
                        "--diff-merges=first-parent", "--format=commit %H %s", f"{merge}..{base_sha}", "--", path, env=_LITERAL)
        commits: list[tuple[str, str, str, str]] = []
        for line in log.splitlines():
            if line.startswith("commit "):
                sha, _, subject = line[len("commit "):].partition(" ")
                commits.append((sha, subject, "", ""))
            elif line.startswith(":") and commits:  # ":<old mode> <new mode> <old blob> <new blob> <status>\t<path>"
                fields = line[1:].split("\t", 1)[0].split()
                commits[-1] = (*commits[-1][:2], fields[1], fields[3])
        found[path] = commits
    blobs = _cat_blobs(repo, sorted({blob for commits in found.values() for _, _, mode, blob in commits if mode and set(mode) != {"0"}}))
    out: dict[str, list[_Later]] = {}
    for path, commits in found.items():
        out[path] = [(sha, subject, (mode, blobs[blob]) if blob in blobs and set(mode) != {"0"} else None)
                     for sha, subject, mode, blob in commits if mode]  # (no raw line: nothing to read)
    return out


def _present(h: "Hunk", fd: "FileDiff", entry: tuple[str, bytes] | None) -> bool:
    """Is hunk `h` of entry `fd` applied in a tree whose `fd.path` is `entry` ((mode, bytes) or None)?"""
    from porttrack import hunks as hunks_mod

    if fd.status == "deleted" or entry is None:
        return hunks_mod.hunk_state(h, entry[1] if entry else None) == "applied"
    if h.kind == "meta":
        return fd.new_mode is None or entry[0] == fd.new_mode
    return hunks_mod.post_image_present(h, entry[1])


def _later_commits(repo: GitRepo, since: str, until: str, paths: Sequence[str]) -> dict[str, tuple[str, str]]:
    """path -> (commit, subject): the newest commit in since..until that touched it.

    One `log -1` per path (only paths whose content is absent get here, usually one or none):
    each walk stops at the newest change, where one log over all the paths would read the whole
    range.
    """
    newest: dict[str, tuple[str, str]] = {}
    for path in paths:
        line = repo.text("log", "-1", "--no-renames", "--format=%H %s", f"{since}..{until}", "--", path, env=_LITERAL)
        if line:
            sha, _, subject = line.partition(" ")
            newest[path] = (sha, subject)
    return newest


def _read_files(repo: GitRepo, rev: str, paths: Sequence[str]) -> dict[str, tuple[str, bytes]]:
    """path -> (mode, content) at `rev` for the paths that exist there: two git calls in all."""
    paths = sorted(set(paths))
    if not paths:
        return {}
    listing = repo.run("ls-tree", "-z", "--full-tree", rev, "--", *paths, env=_LITERAL).stdout
    entries: dict[str, tuple[str, str]] = {}
    for record in listing.split(b"\0"):
        if not record:
            continue
        meta, _, name = record.partition(b"\t")
        mode, kind, sha = meta.decode().split()
        if kind == "blob":
            entries[name.decode("utf-8", "surrogateescape")] = (mode, sha)
    blobs = _cat_blobs(repo, sorted({sha for _, sha in entries.values()}))
    return {path: (mode, blobs[sha]) for path, (mode, sha) in entries.items() if sha in blobs}


def _cat_blobs(repo: GitRepo, shas: Sequence[str]) -> dict[str, bytes]:
    if not shas:
        return {}
    out = repo.run("cat-file", "--batch", input=("\n".join(shas) + "\n").encode()).stdout
    blobs: dict[str, bytes] = {}
    pos = 0
    while pos < len(out):
        end = out.index(b"\n", pos)
        head = out[pos:end].decode().split()
        pos = end + 1
        if len(head) < 3 or head[1] == "missing":
            continue
        size = int(head[2])
        blobs[head[0]] = out[pos:pos + size]
        pos += size + 1  # the content is followed by one LF
    return blobs


# --------------------------------------------------------------------------------------------
# 5. Drops


def find_drops(repo: GitRepo, v: Verdict, queued: Sequence[Any], fork_commits: Sequence[str],
               fork_branch: str | None = None) -> tuple[Drop, ...]:
    """Copies the fork carries of the merged change, and whether each can go now: only on a
    converged verdict for `fork_branch` (the configured fork branch) and, for a queued patch, only
    when every hunk it carries is one of the merged change's hunks that counts."""
    by_id = {h.id: h for h in v.hunks}
    wrong_ref = _not_for_branch(v, fork_branch)
    drops: list[Drop] = []
    for patch in queued:
        if patch.live:
            taken = [h.id for h in patch.hunks_taken]
            as_is = sum(i in by_id for i in taken)
            unproven = [i for i in taken if i not in by_id or not by_id[i].counts]
            how = f"a queued patch for #{v.pr} ({as_is} of its {len(taken)} hunk(s) are in the merged change as-is)"
            blocker = wrong_ref or _unproven_words(unproven, by_id)
            drops.append(_drop("queued-patch", patch.name, None, True, v, how, blocker))
    change_pid = v.patch_id.change if v.patch_id else None
    for written in fork_commits:
        sha = repo.rev_parse(written)
        if sha is None:
            drops.append(Drop("fork-commit", written, None, False, False, "not found in the fork checkout"))
            continue
        if change_pid is None and v.commits.merge_parent:
            change_pid = _patch_id_of_change(repo, v.commits.merge_parent, v.commits.merge_commit)
        duplicate, how = _duplicates(repo, sha, change_pid, set(by_id))
        drops.append(_drop("fork-commit", written, sha, duplicate, v, how, wrong_ref))
    return tuple(drops)


def _not_for_branch(v: Verdict, fork_branch: str | None) -> str | None:
    """Why this verdict may not drive a drop: it was computed on another ref than fork.branch."""
    if fork_branch is None or _names_branch(v.commits.fork_ref, fork_branch):
        return None
    return f"this verdict is for {v.commits.fork_ref}, not the fork branch {fork_branch}: verify-converged {v.pr} on {fork_branch} first"


def _names_branch(ref: str, branch: str) -> bool:
    return ref in (branch, f"refs/heads/{branch}")


def _unproven_words(unproven: Sequence[str], by_id: Mapping[str, HunkResult]) -> str | None:
    if not unproven:
        return None
    words = [f"{i} ({by_id[i].state})" if i in by_id else f"{i} (not in the merged change)" for i in unproven[:5]]
    more = f" and {len(unproven) - 5} more" if len(unproven) > 5 else ""
    return f"{len(unproven)} of its hunk(s) are not proven present at the fork ref: {', '.join(words)}{more}"


def _drop(kind: str, ref: str, sha: str | None, duplicate: bool, v: Verdict, how: str, blocker: str | None = None) -> Drop:
    if not duplicate:
        return Drop(kind, ref, sha, False, False, f"does not duplicate #{v.pr}: {how}")
    if not v.converged:
        return Drop(kind, ref, sha, True, False, f"{how}; keep it: #{v.pr} is {v.verdict} at {v.commits.fork_ref}")
    if not v.upstream_has_it:
        return Drop(kind, ref, sha, True, False, f"{how}; keep it until the fork's upstream base contains {v.commits.merge_commit[:12]}")
    if blocker is not None:
        return Drop(kind, ref, sha, True, False, f"{how}; keep it: {blocker}")
    action = "retire it with --apply-drops" if kind == "queued-patch" else "drop it at the next rebase and remove it from fork_commits"
    return Drop(kind, ref, sha, True, True, f"{how}; upstream has #{v.pr}: {action}")


def _duplicates(repo: GitRepo, sha: str, change_pid: str | None, merged_ids: set[str]) -> tuple[bool, str]:
    """Does fork commit `sha` duplicate the merged change: same patch-id, or only its hunks?"""
    from porttrack import hunks as hunks_mod

    if change_pid is not None and _patch_ids(repo, [sha]).get(sha) == change_pid:
        return True, "same patch-id as the merged change"
    parents = repo.text("rev-list", "--parents", "-n", "1", sha).split()[1:]
    if not parents:
        return False, "a root commit"
    ids = [h.id for fd in hunks_mod.parse_diff(repo.diff(parents[0], sha)) for h in fd.hunks]
    shared = sum(i in merged_ids for i in ids)
    if ids and shared == len(ids):
        return True, f"all {len(ids)} of its hunk(s) are hunks of the merged change"
    return False, f"{shared} of its {len(ids)} hunk(s) are hunks of the merged change"


# --------------------------------------------------------------------------------------------
# 6. Regression


def regression(repo: GitRepo, job: "Job", fork_sha: str) -> Regression:
    """Run the track's regression command on the fork ref: in the checkout when it is exactly that
    commit and clean, else in a temporary worktree (the checkout is never touched). The command
    gets no GitHub token: it has no need of one, and its output is kept in the record."""
    assert job.command is not None
    head = repo.rev_parse("HEAD")
    with contextlib.ExitStack() as stack:
        if head == fork_sha and repo.is_clean():
            workdir, where = repo.path, "checkout"
        else:
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="porttrack-converge-")))
            workdir, where = tmp / "tree", "temporary worktree"
            repo.run("worktree", "add", "--detach", "--quiet", str(workdir), fork_sha)
            stack.callback(lambda: repo.run("worktree", "remove", "--force", str(workdir), check=False))
        results = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="porttrack-results-"))) / "results.json"
        command = render_command(job.command, {"ref": fork_sha, "workdir": str(workdir), "results": str(results), "target": ""})
        started = time.monotonic()
        try:
            proc = subprocess.run(command, shell=True, cwd=workdir, capture_output=True, timeout=job.timeout_s,
                                  env=_job_env(fork_sha, workdir))
            code, output = proc.returncode, proc.stdout + proc.stderr
        except subprocess.TimeoutExpired as exc:
            code, output = 124, (exc.stdout or b"") + (exc.stderr or b"") + f"\n(timed out after {job.timeout_s}s)\n".encode()
        duration = round(time.monotonic() - started, 3)
    return Regression(job.command, where, code == 0, code, duration, _tail(output))


def _job_env(fork_sha: str, workdir: Path) -> dict[str, str]:
    from porttrack.secrets import without_tokens

    env = without_tokens(os.environ)
    return {**env, "PORTTRACK_REF": fork_sha, "PORTTRACK_WORKDIR": str(workdir)}


def render_command(template: str, values: Mapping[str, str]) -> str:
    """Fill {name} placeholders with shell-quoted values; `{{`/`}}` are literal braces."""
    out = []
    for literal, name, _spec, _conv in string.Formatter().parse(template):
        out.append(literal)
        if name is not None:
            if name not in values:
                raise ConfigError(f"unknown placeholder {{{name}}} in regression command")
            out.append(shlex.quote(values[name]))
    return "".join(out)


def _tail(output: bytes) -> str:
    from porttrack.secrets import redact

    text = output.decode("utf-8", "replace")
    lines = text.rstrip("\n").splitlines()[-OUTPUT_TAIL_LINES:]
    return redact("\n".join(lines))[-OUTPUT_TAIL_CHARS:]


# --------------------------------------------------------------------------------------------
# 7. The record, and retiring drops


def record_path(ws: Workspace, number: int) -> Path:
    return ws.state_dir / "convergence" / f"{int(number)}.json"


def record(ws: Workspace, v: Verdict, *, apply_drops: bool = False) -> Verdict:
    """Append the verdict to its record, then retire droppable queue patches, under the lock.

    The record is written first: a crash in between leaves a verdict saying "retired" and a queue
    that still carries the patch (the next run retires it), never a retired patch whose evidence
    does not exist.
    """
    from porttrack import queue as queue_mod

    path = record_path(ws, v.pr)
    rel = path.relative_to(ws.root).as_posix()
    with lock(ws, f"verify-converged #{v.pr}"):
        history = _load_history(path)
        evidence = f"{rel}#{len(history)}"
        retire = [d for d in v.drops if d.droppable and d.kind == "queued-patch"] if apply_drops else []
        queue = queue_mod.load(ws, repair=True) if retire else None
        why = (f"upstream #{v.pr} merged as {v.commits.merge_commit[:12]}; verify-converged verdict {evidence}: "
               f"{v.verdict} by {v.method} at {v.commits.fork_ref} {v.commits.fork_sha} ({counts_words(summary(v.hunks))})")
        for drop in retire:
            patch = queue.get(drop.ref)
            if patch.live:
                queue = queue.replace_patch(patch.transition("converged", why, evidence=(evidence,)))
                v = replace(v, drops=tuple(replace(d, retired=True) if d is drop else d for d in v.drops))
        v = replace(v, recorded=rel)
        since = _same_as_last(history, v)  # a retirement changes the drops: never "the same"
        if since is not None:
            return replace(v, unchanged_since=since)
        write_json(path, {"schema": RECORD_SCHEMA, "pr": v.pr, "history": [*history, to_json(v)]})
        checkpoint("converge:recorded")
        if queue is not None:
            queue_mod.save(ws, queue)
    return v


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
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("schema") != RECORD_SCHEMA or not isinstance(data.get("history"), list):
            raise ValueError(f"expected schema {RECORD_SCHEMA} with a history list")
    except (ValueError, AttributeError) as exc:
        raise InputError(f"{path}: malformed convergence record ({exc}); restore it from git") from None
    return data["history"]


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


def fork_tip(config: "Config") -> tuple[str | None, str]:
    """The configured fork branch's tip in the fork checkout, or None and why it cannot be read."""
    branch = config.fork.branch
    path = config.fork_checkout()
    if path is None:
        return None, "no fork checkout to read its tip from"
    try:
        sha = GitRepo.open(path).rev_parse(f"refs/heads/{branch}")
    except (ConfigError, GitError) as exc:
        return None, f"the fork checkout cannot be read ({exc})"
    return (sha, "") if sha else (None, f"branch {branch} does not exist in the fork checkout")


def latest_verdicts(ws: Workspace, config: "Config") -> dict[int, RecordedVerdict]:
    """PR -> its newest recorded verdict for `fork.branch` (else its newest for any ref), with its
    standing against the branch's tip now (for `status` and `report weekly`)."""
    branch = config.fork.branch
    tip, no_tip = fork_tip(config)
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


def _bound(pr: int, rel: str, history: list[dict[str, Any]], branch: str, tip: str | None, no_tip: str) -> RecordedVerdict | None:
    usable = [(i, e) for i, e in enumerate(history)
              if isinstance(e, dict) and e.get("verdict") in VERDICTS and isinstance(e.get("commits"), dict)]
    if not usable:
        return None
    ours = [(i, e) for i, e in usable if _names_branch(str(e["commits"].get("fork_ref")), branch)]
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
