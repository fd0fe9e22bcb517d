"""Where an upstream PR's content comes from: the revision taken and the commit its diff starts at.

The PR's record comes from the recorded state (`state/upstream.json`); its content always comes
from git: `refs/pull/N/head` fetched from the upstream remote (with upstream's default branch, in
one round trip), or the merge commit (diffed against its first parent) once merged. An open PR
is diffed against its merge base with upstream's default branch, or against the imported head of
a queued PR it is stacked on; a PR stacked on one that is neither merged nor queued is refused.
`--through SHA` takes the PR only up to one of its commits. Every head seen is kept reachable
under `refs/porttrack/pull/N/seen/`, so `stability` can compare the PR's recent revisions even
after a force-push: a hunk is stable when its id is in each of them (`porttrack.take.importer`, item 3).
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Sequence

from porttrack.common.errors import GitError, InputError, NotTracked, PreconditionError
from porttrack.diff.hunks import parse_diff
from porttrack.git.repo import GitRepo, pull_ref, seen_ref, upstream_ref
from porttrack.queue.manifest import Queue, Revision
from porttrack.tracks.config import Config
from porttrack.workspace.state import RecordedPR, UpstreamState

RECENT_REVISIONS = 3  # the current head and the two before it


@dataclass(frozen=True)
class Source:
    pr: RecordedPR
    revision: Revision
    tip: str  # the commit whose tree is the post-image (head, --through commit or merge commit)
    default_ref: str
    stack_heads: tuple[str, ...]  # imported heads of queued PRs this one is stacked on


def _fetch_pr(repo: GitRepo, config: Config, number: int, notes: list[str], timings: dict[str, float]) -> str:
    """Fetch the PR head and upstream's default branch in one round trip; returns the default ref."""
    branch = config.upstream.default_branch
    specs = [f"+refs/pull/{number}/head:{pull_ref(number)}", f"+refs/heads/{branch}:{upstream_ref(branch)}"]
    started = time.perf_counter()
    try:
        repo.fetch(config.upstream.remote, specs)
    except GitError as exc:
        notes.append(f"fetching from {config.upstream.remote} failed ({exc}); using what the fork checkout already has")
    timings["fetch_s"] = time.perf_counter() - started
    return default_branch_ref(repo, config)


def default_branch_ref(repo: GitRepo, config: Config) -> str:
    for ref in (upstream_ref(config.upstream.default_branch), config.fork.upstream_base):
        if repo.rev_parse(ref):
            return ref
    raise PreconditionError(
        f"neither {upstream_ref(config.upstream.default_branch)} nor {config.fork.upstream_base} exists in "
        f"{repo.path}; fetch upstream first"
    )


def resolve_source(
    repo: GitRepo, config: Config, state: UpstreamState, number: int, queue: Queue,
    through: str | None, fetch: bool, notes: list[str], timings: dict[str, float],
) -> tuple[Source, tuple[str, ...]]:
    pr = state.prs.get(number)
    if pr is None:
        raise PreconditionError(f"#{number} has not been observed yet: run `porttrack status` first")
    default_ref = _fetch_pr(repo, config, number, notes, timings) if fetch else default_branch_ref(repo, config)
    head = repo.rev_parse(pull_ref(number))
    if head is None and pr.head_sha and repo.has_commit(pr.head_sha):
        head = repo.rev_parse(pr.head_sha)
    merged = pr.state == "merged" and bool(pr.merge_commit_sha)
    if merged and not repo.has_commit(pr.merge_commit_sha or ""):
        raise PreconditionError(
            f"#{number} merged as {(pr.merge_commit_sha or '')[:12]}, which is not in {repo.path}; fetch upstream first"
        )
    if head is None and not merged:
        raise PreconditionError(f"#{number}: refs/pull/{number}/head could not be fetched and its head is not in {repo.path}")
    if head is not None:
        if repo.rev_parse(seen_ref(number, head)) != head:  # the reader answers; an import again writes nothing
            repo.update_ref(seen_ref(number, head), head)  # keeps the imported revision reachable
        if pr.head_sha and head != pr.head_sha:
            notes.append(f"upstream head moved since it was recorded ({pr.head_sha[:12]} -> {head[:12]}): counted as a new revision")
    stack_heads, depends_on = _stack(state, pr, queue) if not merged else ((), ())
    if through is not None:
        tip = _check_through(repo, number, through, head, merged, default_ref)
        base = diff_base(repo, tip, default_ref, stack_heads)
        revision = Revision(head=head or pr.merge_commit_sha or tip, base=base, through=tip, merged=merged,
                            merge_commit=pr.merge_commit_sha if merged else None)
    elif merged:
        mc = repo.rev_parse(pr.merge_commit_sha or "")
        assert mc is not None
        parent = repo.rev_parse(f"{mc}^1")
        if parent is None:
            raise PreconditionError(f"#{number}'s merge commit {mc[:12]} has no parent")
        base = parent
        tip, revision = mc, Revision(head=mc, base=base, merged=True, merge_commit=mc)
    else:
        assert head is not None
        tip = head
        revision = Revision(head=head, base=diff_base(repo, head, default_ref, stack_heads))
    if pr.state == "closed":
        notes.append(f"#{number} was closed without merging: this carries an orphaned change")
    return Source(pr, revision, tip, default_ref, stack_heads), depends_on


def _check_through(repo: GitRepo, number: int, through: str, head: str | None, merged: bool, default_ref: str) -> str:
    if not re.fullmatch(r"[0-9a-fA-F]{4,64}", through):
        raise InputError(f"--through {through!r}: expected a commit SHA")
    sha = repo.rev_parse(through.lower())
    if sha is None:
        raise PreconditionError(f"--through {through}: no such commit in the fork checkout (was #{number} fetched?)")
    tips = [head] if head else []
    tips += [line.split()[0] for line in repo.text("for-each-ref", "--format=%(objectname)", f"refs/porttrack/pull/{number}/seen/").splitlines() if line]
    if not any(t == sha or repo.is_ancestor(sha, t) for t in tips):
        raise PreconditionError(f"--through {through}: not a commit of #{number} (not in any of its revisions seen)")
    if not merged and repo.is_ancestor(sha, default_ref):
        raise PreconditionError(f"--through {through}: already on upstream's default branch, not a commit of #{number}")
    return sha


def diff_base(repo: GitRepo, tip: str, default_ref: str, stack_heads: Sequence[str]) -> str:
    """Where the PR's diff starts: a queued PR it is stacked on, else the merge base with upstream."""
    for stacked in stack_heads:
        if repo.has_commit(stacked) and repo.is_ancestor(stacked, tip):
            return stacked
    base = repo.merge_base(tip, default_ref)
    if base is None:
        raise PreconditionError(f"{tip[:12]} shares no history with {default_ref}")
    return base


def _stack(state: UpstreamState, pr: RecordedPR, queue: Queue) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Refuse a PR stacked on one that is neither merged upstream nor queued; else the queued
    base patches' imported heads and names."""
    heads: list[str] = []
    names: list[str] = []
    for link in pr.stacked_on:
        base = state.prs.get(link.number)
        if base is not None and base.state == "merged":
            continue
        queued = [p for p in queue.for_pr(link.number) if p.live]
        if queued:
            heads.append(queued[0].revision.through or queued[0].revision.head)
            names.append(queued[0].name)
            continue
        what = base.state if base is not None else "not observed"
        raise PreconditionError(
            f"#{pr.number} is stacked on #{link.number} ({what}; found in the {link.via.replace('-', ' ')}), which is "
            f"neither merged upstream nor queued: import #{link.number} first (`porttrack import {link.number}`) "
            f"or wait for it to merge"
        )
    return tuple(heads), tuple(names)


def track_for(config: Config, state: UpstreamState, number: int) -> str:
    track = config.track_for_pr(number)
    if track is not None:
        return track
    # A PR no track names, that a tracked PR is stacked on: it belongs to that PR's track.
    for tracked, pr in state.prs.items():
        if any(link.number == number for link in pr.stacked_on):
            track = config.track_for_pr(tracked)
            if track is not None:
                return track
    raise not_tracked(config, state, number)


def known_numbers(config: Config, state: UpstreamState) -> tuple[set[int], set[int]]:
    """The PRs tracks.yaml names, and those the recorded state has them stacked on."""
    tracked = {n for track in config.tracks.values() for n in track.prs}
    stacked = {link.number for n, pr in state.prs.items() if n in tracked for link in pr.stacked_on} - tracked
    return tracked, stacked


def check_tracked(config: Config, state: UpstreamState, number: int) -> None:
    """Refuse a PR number no track names (nor stacked under one) before anything is asked of
    GitHub: `import 4880` for #48804 costs no request and says what was meant."""
    tracked, stacked = known_numbers(config, state)
    if number not in tracked | stacked:
        raise not_tracked(config, state, number)


def not_tracked(config: Config, state: UpstreamState, number: int) -> NotTracked:
    tracked, stacked = known_numbers(config, state)
    listed = ", ".join(f"#{n}" for n in sorted(tracked)) or "none"
    if stacked:
        listed += " (stacked under them: " + ", ".join(f"#{n}" for n in sorted(stacked)) + ")"
    near = near_numbers(number, tracked | stacked)
    guess = f"; did you mean {' or '.join(f'#{n}' for n in near)}?" if near else ""
    return NotTracked(f"#{number} is not tracked; tracked: {listed}{guess} "
                      f"(to follow another PR, add it to a track's prs in tracks.yaml)")


def near_numbers(number: int, known: set[int]) -> list[int]:
    """Known numbers a typo of `number` may have meant: one digit wrong, missing or extra (edit
    distance 1), or the same digits in another order; nearest first."""
    typed = str(number)

    def distance(a: str, b: str) -> int:
        row = list(range(len(b) + 1))
        for i, ca in enumerate(a, 1):
            prev, row[0] = row[0], i
            for j, cb in enumerate(b, 1):
                prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
        return row[-1]

    scored = [(distance(typed, str(n)), n) for n in known]
    near = [(d, n) for d, n in scored if d <= 1 or sorted(str(n)) == sorted(typed)]
    return [n for _, n in sorted(near)][:3]


def stability(repo: GitRepo, number: int, source: Source, current_ids: set[str], notes: list[str]) -> tuple[tuple[str, ...], dict[str, str]]:
    """Revisions compared (oldest first, the imported one last) and, per hunk id that changed, the
    revision in which it took its current form. Only ids of the imported revision matter."""
    current = source.tip
    seen = [h.sha for h in source.pr.heads if h.sha]
    if source.revision.through:
        earlier = [s for s in seen if s != current and repo.has_commit(s) and repo.is_ancestor(s, current)]
    else:
        earlier = [s for s in seen if s != current]
    earlier = earlier[-(RECENT_REVISIONS - 1):] if RECENT_REVISIONS > 1 else []
    usable = []
    for sha in earlier:
        if repo.has_commit(sha):
            usable.append(sha)
        else:
            notes.append(f"revision {sha[:12]} of #{number} is not in the fork checkout (recorded elsewhere?); not compared")
    compared = tuple(usable) + (current,)
    if source.revision.merged:
        return compared, {}
    if not usable:
        notes.append(f"only one revision of #{number} has been seen: every hunk counts as stable")
        return compared, {}
    id_sets = []
    for sha in usable:
        base = diff_base(repo, sha, source.default_ref, source.stack_heads)
        id_sets.append({h.id for fd in parse_diff(repo.diff(base, sha)) for h in fd.hunks})
    changed_in: dict[str, str] = {}
    for hid in current_ids:
        missing_at = [n for n, ids in enumerate(id_sets) if hid not in ids]
        if missing_at:
            after = missing_at[-1] + 1  # the first revision after the last one without it
            changed_in[hid] = compared[after]
    return compared, changed_in
