"""`porttrack verify-converged`: prove that a merged upstream PR is present in the fork.

The merge commit comes from GitHub, once: a merge is final, so a PR the recorded state (written
by `status`) already has merged is not asked about again (`resolve_merged_pr`).

The fork ref defaults to `fork.branch` of tracks.yaml in the fork checkout (`refs/heads/B`,
`refs/remotes/B` for a branch given as `origin/X`, else `refs/remotes/origin/B`: `git.repo.qualify_branch`,
the one reading doctor, apply and status share; none: refused, never HEAD in its place); the
upstream base is `fork.upstream_base` (default `upstream/main`). Both are resolved once, fully
qualified (`resolve_refs`: a tag named like the branch is never taken for it), printed, and
recorded with the verdict. When the base has the merge but
the fork ref does not, the fork has not rebased yet: the steps above decide what the fork has
now, and the reasons say so.

Copies the fork carries (live queue patches for the PR, the track's `fork_commits` that duplicate
the change by patch-id or by hunk ids) are **droppable** only when the verdict is `converged`, the
change reaches the fork from upstream (the merge commit is in the fork ref or its upstream base)
-- or, for a queued patch only, through the fork's own port of the whole change (a fork commit
with the merged change's patch-id, e.g. a `cherry-pick -x`; one whose message says "Port:
upstream #N through SHA only" carries part of it and keeps the queued copy) --, the verdict is for
the configured `fork.branch` (at the tip it was just computed on), and -- for a queued patch --
every hunk the patch carries is a hunk of the merged change that is present or
present-after-churn. `--apply-drops` retires droppable queue patches (state `converged`, evidence
kept); the retirement names the verdict it relied on (`state/convergence/<PR>.json#<index>` and
the fork commit). `fork_commits` are only listed: tracks.yaml and the fork's history belong to
humans.

How a PR is decided, the hunk states, the verdict and the `--json` shape: `porttrack.converge.decide`.
Each run's record, and the verdicts `status` reads back: `porttrack.converge.record`.
"""

from __future__ import annotations

import re
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from porttrack.common.errors import (
    CannotEvaluate,
    CheckFailed,
    ConfigError,
    GitError,
    GitHubAuthError,
    PorttrackError,
    PreconditionError,
    UnsafeInput,
    UpstreamUnreachable,
)
from porttrack.converge import ports as ports_mod
from porttrack.converge.decide import (  # noqa: F401  (MergedPR, decide, summary, counts_words, to_json: this command's API)
    Drop,
    HunkResult,
    MergedPR,
    Regression,
    Verdict,
    counts_words,
    decide,
    patch_id_of_change,
    patch_ids,
    summary,
    to_json,
)
from porttrack.converge.record import _load_history, _same_as_last, names_branch, record, record_path
from porttrack.diff import hunks as hunks_mod
from porttrack.git.repo import GitRepo, branch_words, fork_branch_ref, upstream_ref
from porttrack.queue import manifest as queue_mod
from porttrack.runner.local import run_job
from porttrack.tracks.config import Config, Job
from porttrack.workspace import state as state_mod
from porttrack.workspace.files import Workspace

if TYPE_CHECKING:
    from porttrack.github.client import GitHubClient
    from porttrack.workspace.state import UpstreamState

OUTPUT_TAIL_LINES = 40
OUTPUT_TAIL_CHARS = 4000
TIMED_OUT = 124  # the exit code a timed-out regression is recorded with (as timeout(1) exits)
_FULL_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


# --------------------------------------------------------------------------------------------
# The command, end to end


def verify_converged(
    ws: Workspace,
    config: Config,
    number: int,
    *,
    repo: GitRepo,
    github: Callable[[], "GitHubClient"],
    fork_ref: str | None = None,
    run_regression: bool = False,
    apply_drops: bool = False,
    dry_run: bool = False,
    say: Callable[[str], None] | None = None,
) -> Verdict:
    """Decide, list drops, optionally run the regression and retire drops, record. Never raises
    for a negative verdict: the caller turns `verdict`/`regression` into an exit code (`outcome`).

    `repo`: the fork checkout; `github`: gives the upstream's GitHub client, called only when the
    recorded state does not already have the PR merged (a merge is final: `resolve_merged_pr`)."""
    track_id = config.track_for_pr(number)
    job = _regression_job(config, track_id, number) if run_regression else None
    pr = resolve_merged_pr(ws, config, number, github)
    ensure_commit(repo, pr.merge_commit, config.upstream.remote, config.upstream.default_branch, say)
    ref, base = resolve_refs(repo, fork_ref, config.fork.branch, config.fork.upstream_base)
    if say:
        given = f"--fork-ref {fork_ref}" if fork_ref else f"fork.branch {config.fork.branch}"
        shown = ref if fork_ref else branch_words(ref, config.fork.branch)
        say(f"fork ref {shown} ({given}); upstream base {base} (fork.upstream_base {config.fork.upstream_base})")
    verdict = decide(repo, pr, fork_ref=ref, upstream_base=base, track=track_id)
    fork_commits = tuple(config.tracks[track_id].fork_commits) if track_id else ()
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


def resolve_refs(repo: GitRepo, fork_ref: str | None, branch: str, upstream_base: str) -> tuple[str, str]:
    """The fork ref and the upstream base, each resolved once and fully qualified, so that git never
    picks another object of the same name (a tag `X` beside the branch `X`: git's own order takes
    the tag). The fork ref: `--fork-ref` as given (a branch, then a remote-tracking branch, then a
    tag of that name; else a commit name such as a SHA or `HEAD`, as it is), else `fork.branch`
    (`git.repo.qualify_branch`, the reading every command shares; none: refused, never HEAD in its
    place). The base: `refs/remotes/B`, else `refs/heads/B`, else as given."""
    if fork_ref is not None:
        ref = _qualified(repo, fork_ref, ("refs/heads/", "refs/remotes/", "refs/tags/")) or fork_ref
    else:
        try:
            ref = fork_branch_ref(repo, branch)
        except PreconditionError as exc:
            raise PreconditionError(f"{exc}; or name the commit to check with --fork-ref") from None
    base = _qualified(repo, upstream_base, ("refs/remotes/", "refs/heads/")) or upstream_base
    return ref, base


def _qualified(repo: GitRepo, name: str, prefixes: Sequence[str]) -> str | None:
    if name.startswith("refs/") or name.startswith("-"):
        return None
    found = repo.resolve([prefix + name for prefix in prefixes])
    return next((prefix + name for prefix in prefixes if found[prefix + name]), None)


def _regression_job(config: Config, track_id: str | None, number: int) -> Job:
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


def resolve_merged_pr(ws: Workspace, config: Config, number: int, github: Callable[[], "GitHubClient"]) -> MergedPR:
    """The PR's merge commit, as GitHub reported it.

    A merge is final: once the recorded state (written by `status`, from GitHub) has the PR merged
    with its merge commit, that is used as it is, without a request (and without importing
    PyGithub, 0.4 s): `github` is not called. Otherwise GitHub is asked (with a token or, for a
    public upstream, without); when it cannot be, the command stops with GitHub's error and what the
    recorded state last saw.
    """
    recorded = state_mod.load(ws.upstream_state_file, config.upstream.repo)
    known = recorded.prs.get(number)
    if known is not None and known.state == "merged" and known.merge_commit_sha:
        sha = _checked_sha(known.merge_commit_sha, ws.upstream_state_file.name)
        return MergedPR(number, known.title, sha, known.merged_at, "recorded",
                        f"merges are final: the merge commit as recorded at {known.observed_at} ({recorded.source}); GitHub not asked",
                        known.head_sha, known.base_sha)
    try:
        pull, _ = github().get_pull(number)
    except (UpstreamUnreachable, GitHubAuthError) as exc:  # its exit code (5 or 3), with what was recorded
        raise type(exc)(f"{exc}; {_last_seen(ws, number, known)}") from None
    if pull.state != "merged" or not pull.merge_commit_sha:
        raise PreconditionError(_not_merged(number, pull.state, pull.closed_at, "on GitHub"))
    return MergedPR(number, pull.title, _checked_sha(pull.merge_commit_sha, "GitHub"), pull.merged_at, "github",
                    head_sha=pull.head_sha, base_sha=pull.base_sha)


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
            repo.fetch(remote, [refspec])  # the one fetch policy (and its bounds) of porttrack.git.repo
        except GitError as exc:
            problems.append(str(exc))
        if repo.has_commit(sha):
            return
    detail = f" ({problems[-1]})" if problems else ""
    raise CannotEvaluate(f"merge commit {sha[:12]} is not in the fork checkout, and fetching {branch} from remote {remote!r} did not bring it{detail}")


# --------------------------------------------------------------------------------------------
# 5. Drops


def find_drops(repo: GitRepo, v: Verdict, queued: Sequence[Any], fork_commits: Sequence[str],
               fork_branch: str | None = None) -> tuple[Drop, ...]:
    """Copies the fork carries of the merged change, and whether each can go now: only on a
    converged verdict for `fork_branch` (the configured fork branch) and, for a queued patch, only
    when every hunk it carries is one of the merged change's hunks that counts."""
    by_id = {h.id: h for h in v.hunks}
    wrong_ref = _not_for_branch(v, fork_branch)
    live = [patch for patch in queued if patch.live]
    carrier = _carried_by_fork(repo, v) if live and v.converged and not v.upstream_has_it else None
    drops: list[Drop] = []
    for patch in live:
        taken = [h.id for h in patch.hunks_taken]
        as_is = sum(i in by_id for i in taken)
        unproven = [i for i in taken if i not in by_id or not by_id[i].counts]
        how = f"a queued patch for #{v.pr} ({as_is} of its {len(taken)} hunk(s) are in the merged change as-is)"
        blocker = wrong_ref or _unproven_words(unproven, by_id)
        drops.append(_drop("queued-patch", patch.name, None, True, v, how, blocker, carrier))
    change_pid = v.patch_id.change if v.patch_id else None
    for written in fork_commits:
        sha = repo.rev_parse(written)
        if sha is None:
            drops.append(Drop("fork-commit", written, None, False, False, "not found in the fork checkout"))
            continue
        if change_pid is None and v.commits.merge_parent:
            change_pid = patch_id_of_change(repo, v.commits.merge_parent, v.commits.merge_commit)
        duplicate, how = _duplicates(repo, sha, change_pid, set(by_id))
        drops.append(_drop("fork-commit", written, sha, duplicate, v, how, wrong_ref))
    return tuple(drops)


def _not_for_branch(v: Verdict, fork_branch: str | None) -> str | None:
    """Why this verdict may not drive a drop: it was computed on another ref than fork.branch."""
    if fork_branch is None or names_branch(v.commits.fork_ref, fork_branch):
        return None
    return f"this verdict is for {v.commits.fork_ref}, not the fork branch {fork_branch}: verify-converged {v.pr} on {fork_branch} first"


def _unproven_words(unproven: Sequence[str], by_id: Mapping[str, HunkResult]) -> str | None:
    if not unproven:
        return None
    words = [f"{i} ({by_id[i].state})" if i in by_id else f"{i} (not in the merged change)" for i in unproven[:5]]
    more = f" and {len(unproven) - 5} more" if len(unproven) > 5 else ""
    return f"{len(unproven)} of its hunk(s) are not proven present at the fork ref: {', '.join(words)}{more}"


def _drop(kind: str, ref: str, sha: str | None, duplicate: bool, v: Verdict, how: str, blocker: str | None = None,
          carrier: "_Carrier | None" = None) -> Drop:
    if not duplicate:
        return Drop(kind, ref, sha, False, False, f"does not duplicate #{v.pr}: {how}")
    if not v.converged:
        return Drop(kind, ref, sha, True, False, f"{how}; keep it: #{v.pr} is {v.verdict} at {v.commits.fork_ref}")
    has = f"upstream has #{v.pr}"
    if not v.upstream_has_it:
        if carrier is None or carrier.partial:  # only a queued copy may go for a port the fork carries
            why = f"; {carrier.words}" if carrier is not None else ""
            return Drop(kind, ref, sha, True, False, f"{how}; keep it until the fork's upstream base contains {v.commits.merge_commit[:12]}{why}")
        has = carrier.words
    if blocker is not None:
        return Drop(kind, ref, sha, True, False, f"{how}; keep it: {blocker}")
    action = "retire it with --apply-drops" if kind == "queued-patch" else "drop it at the next rebase and remove it from fork_commits"
    return Drop(kind, ref, sha, True, True, f"{how}; {has}: {action}")


@dataclass(frozen=True)
class _Carrier:
    """A port of the PR in the fork's own history that carries the whole change (`words`), or
    that says it carries only part ("Port: upstream #N through SHA only": `partial`)."""

    words: str
    partial: bool


def _carried_by_fork(repo: GitRepo, v: Verdict) -> _Carrier | None:
    """On a converged verdict whose change reached the fork through its own commits (patch-id:
    a cherry-pick, with or without -x, of the merged change or of every PR commit), that port,
    as `status` finds ports (`porttrack.converge.ports.read_markers`); a "through SHA only" note keeps it
    partial. A verdict by content names no carrying commit: None (the queued copy stays until
    upstream's base has the merge)."""
    if v.method != "patch-id" or v.patch_id is None or not v.patch_id.matched:
        return None
    commits = [m.commit for m in v.patch_id.matched]
    for sha in commits:
        message = repo.text("show", "-s", "--format=%B", sha)
        only = [m for m in ports_mod.read_markers(message) if m.only and m.pr in (None, v.pr)]
        if only:
            return _Carrier(f"fork commit {sha[:12]} ports #{v.pr} only in part ({only[0].text})", True)
    named = ", ".join(c[:12] for c in commits)
    return _Carrier(f"the fork carries #{v.pr} in its own commit(s) {named} (same patch-id as the merged change)", False)


def _duplicates(repo: GitRepo, sha: str, change_pid: str | None, merged_ids: set[str]) -> tuple[bool, str]:
    """Does fork commit `sha` duplicate the merged change: same patch-id, or only its hunks?"""
    if change_pid is not None and patch_ids(repo, [sha]).get(sha) == change_pid:
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


def regression(repo: GitRepo, job: Job, fork_sha: str) -> Regression:
    """Run the track's regression command on the fork ref through the one job runner
    (`porttrack.runner.local`: split into arguments, placeholders filled per argument, no shell):
    in the checkout when it is exactly that commit and clean, else in a temporary worktree (the
    checkout is never touched). The command gets no GitHub token: it has no need of one, and its
    output is kept in the record."""
    assert job.command is not None
    if repo.rev_parse("HEAD") == fork_sha and repo.is_clean():
        return _run_regression(job, fork_sha, repo.path, "checkout")
    with repo.temporary_worktree(fork_sha) as tree:
        return _run_regression(job, fork_sha, tree.path, "temporary worktree")


def _run_regression(job: Job, fork_sha: str, workdir: Path, where: str) -> Regression:
    assert job.command is not None
    with tempfile.TemporaryDirectory(prefix="porttrack-results-") as results:
        values = {"ref": fork_sha, "workdir": str(workdir), "results": str(Path(results) / "results.json"), "target": ""}
        run = run_job(job.command, values, cwd=workdir, timeout_s=job.timeout_s, tail_lines=OUTPUT_TAIL_LINES,
                      what="regression command")
    lines = list(run.output_tail)
    if run.timed_out:
        lines.append(f"(timed out after {job.timeout_s}s)")
    code = TIMED_OUT if run.exit_code is None else run.exit_code
    return Regression(job.command, where, code == 0, code, run.duration_s, "\n".join(lines)[-OUTPUT_TAIL_CHARS:])


def already_in_fork(repo: GitRepo, config: Config, state: UpstreamState, number: int, merge: str,
                    notes: list[str]) -> dict[str, str]:
    """Hunk id -> where, for the hunks of merged PR `number` that the fork branch already has, as
    `verify-converged` decides it (`porttrack.converge.decide`: present, or present after upstream
    churn -- the fork holds upstream's later form of the lines, which no `git apply` of the PR's
    own diff recognises: it reads as a conflict, or worse, merges 3-way a second copy)."""
    known = state.prs.get(number)
    try:
        ref, base = resolve_refs(repo, None, config.fork.branch, config.fork.upstream_base)
        verdict = decide(repo, MergedPR(number, known.title if known else "", merge, known.merged_at if known else None, "recorded",
                                        head_sha=known.head_sha if known else None, base_sha=known.base_sha if known else None),
                         fork_ref=ref, upstream_base=base)
    except PorttrackError as exc:
        notes.append(f"could not tell which hunks the fork already has as verify-converged would: {exc}")
        return {}
    out: dict[str, str] = {}
    for h in verdict.hunks:
        if h.state == "present":
            out[h.id] = ref
        elif h.state == "present-after-churn" and h.changed_by is not None:
            out[h.id] = f"{ref} (as upstream {h.changed_by.commit[:12]} later changed it)"
    if out:
        notes.append(f"{len(out)} of #{number}'s {len(verdict.hunks)} hunk(s) are already in {ref} "
                     f"(verify-converged: {verdict.verdict}); they are not taken")
    return out
