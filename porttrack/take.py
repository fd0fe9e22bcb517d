"""Take what is stable and separable from an upstream PR into the patch queue, and follow it.

`import_pr` plans everything first and writes nothing until the end, then commits the result with
one `queue.save` under the workspace lock (SIGINT/SIGTERM held for that moment), so an interrupted
or killed import leaves the queue exactly as it was. Side effects before that point are only
porttrack's own refs in the fork checkout (`refs/porttrack/pull/N/{head,seen/*}`,
`refs/porttrack/upstream/<branch>`), scratch indexes under `.git/porttrack/import/` and
`.git/porttrack/apply/` (the trial build of the queue, below), removed on exit and swept by the
next run after a SIGKILL, and the unreferenced objects those builds wrote (for `git gc`).

Where the PR comes from: the recorded state (`state/upstream.json`), refreshed by a poll of this
PR and its stack when a token is at hand (recorded with the import; a failed poll falls back to
the recorded state). Its content always comes from git: `refs/pull/N/head` fetched from the
upstream remote, or the merge commit (diffed against its first parent) once merged. An open PR is
diffed against its merge base with upstream's default branch, or against the imported head of a
queued PR it is stacked on.

What is taken, hunk by hunk (hunk ids: `porttrack.hunks`):

1. *not selected*: `--hunk` named other hunks. A selection that leaves out a hunk its chosen
   hunks depend on (`hunks.dependency_groups`) is refused, listing what is missing.
2. *excluded by path rule*: the file does not match the track's `paths.include`, matches its
   `paths.exclude`, or the `--paths` / `--exclude` flags. A rename is judged on both paths.
3. *unstable*: the hunk's id is missing from one of the PR's recent revisions (the last
   `RECENT_REVISIONS` heads: those recorded in `state/upstream.json`, the head just fetched last),
   i.e. it took its current form in a later one. Only one revision seen: every hunk is stable (a
   note says so). A merged PR is stable. `--force-unstable` takes such hunks anyway. With
   `--through SHA`, the revisions compared are the recorded heads that precede SHA, and SHA.
4. *depends on left-out hunk*: a hunk travels with its dependency group; one member left out
   leaves the group out.
5. *separability*, probed against the fork branch's tip (plus the queued patches a stacked PR
   depends on) in a scratch index (`GIT_INDEX_FILE`, `git apply --cached`; the fork's work tree,
   index and branches are never touched): plain apply, else the change already there (reverse
   apply: *already in the fork*), else a 3-way merge judged by its exit status and the unmerged
   entries it leaves (`apply --check --3way` exits 0 on conflicts, library notes §2.4), else
   *not separable: conflicts with fork at FILE*. All candidate groups are checked at once; when
   that fails, the groups of files git did not name are confirmed with one more check and only
   the named files' groups are probed one by one.

The patch is one `git format-patch` mail: `From <sha> Mon Sep 17 00:00:00 2001`, From / Date /
Subject from the PR (the untrusted title sanitised to one line; the author's login reduced to
`[A-Za-z0-9-]`), provenance trailers in the body (`Upstream-PR`, `Upstream-Head`,
`Upstream-Through` with --through, `Porttrack-Track`, `Porttrack-Hunks` folded over lines), a
diffstat and the diff (`--binary --full-index`).

Context: the queue is applied in `series` order on the build base (`fork.build_base`, default
`fork.branch`), so before it is stored the mail is built exactly as `porttrack apply` will build
it (`apply.build_series`: the base, then the live patches before it, then this mail; skipped
when nothing is queued before it, the base is the fork tip the probe used, and the probe's
`git apply -v` put every hunk exactly where the diff says: `apply` would find it clean). When
upstream's diff goes in there as it is, it is stored unchanged, upstream's context and all. When
it goes in only at an offset, by 3-way merge or with fuzz, the stored diff is regenerated: the
diff from the tree before it to the tree after it, so the mail carries the fork's context, and
the manifest entry's `regenerated` records how, on what, and the new hunks' ids; `hunks_taken`
and the `Porttrack-Hunks` trailer keep upstream's ids. So plain `git am` (no `-3`) and
`quilt push -a` apply the queue on that base and give `porttrack/staging`'s tree, as long as
neither the base nor a patch before it has changed since (the base moved on, a patch below was
refreshed or dropped: then `apply` falls back to 3-way, and `refresh --update` regenerates).
Two limits of the tools themselves: GNU patch (quilt) does not read git's binary patches, and,
like any format-patch mail of a CRLF file, such a patch needs `git am --keep-cr`. When the patch
does not apply on the base plus the queue at all (the probe is made on the fork branch's tip),
it is stored with upstream's context and a note says so; `apply` will report the conflict.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import signal
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from email.header import Header
from email.utils import format_datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator, Mapping, Sequence

from porttrack import apply as apply_mod
from porttrack import queue as queue_mod
from porttrack import state as state_mod
from porttrack.errors import (
    ConfigError,
    ConflictError,
    GitError,
    GitHubAuthError,
    InputError,
    NotFound,
    PreconditionError,
    UnsafeInput,
    UpstreamUnreachable,
)
from porttrack.gitrepo import GitRepo, pull_ref, seen_ref, upstream_ref
from porttrack.hunks import FileDiff, Hunk, HunkChange, build_patch, dependency_groups, diff_of_diffs, missing_dependencies, parse_diff
from porttrack.paths import check_diff_paths, check_symlink_targets, path_matches
from porttrack.queue import HunkRef, Patch, Queue, Regenerated, Revision, Selection, Transition
from porttrack.state import RecordedPR, UpstreamState, utcnow
from porttrack.text import for_terminal
from porttrack.workspace import Workspace, lock

if TYPE_CHECKING:
    from porttrack.config import Config

IMPORT_SCHEMA = "porttrack/import/v1"
REFRESH_SCHEMA = "porttrack/refresh/v1"
QUEUE_SCHEMA = "porttrack/queue-list/v1"
DROP_SCHEMA = "porttrack/drop/v1"
RECENT_REVISIONS = 3  # the current head and the two before it
PAUSE_ENV = "PORTTRACK_TEST_PAUSE_AT"  # tests only: stop at a named checkpoint (see `_checkpoint`)
CANDIDATE = "(planned patch)"  # its name in the trial build (queued names have no parentheses)

# Reasons a hunk is left out; the text after the colon (if any) gives the detail.
NOT_SELECTED = "not selected"
EXCLUDED = "excluded by path rule"
UNSTABLE = "unstable"
DEPENDS = "depends on left-out hunk"
NOT_SEPARABLE = "not separable"
PRESENT = "already in the fork"
REASON_KINDS = (NOT_SELECTED, EXCLUDED, UNSTABLE, DEPENDS, NOT_SEPARABLE, PRESENT)


# --------------------------------------------------------------------------------------------
# Records


@dataclass(frozen=True)
class HunkVerdict:
    """One hunk of the PR and what the import decided about it."""

    id: str
    path: str
    kind: str  # text | binary | meta
    where: str  # "@@ -10,7 +10,8 @@" for a text hunk; "binary" / "rename" / "mode" / ... otherwise
    group: int  # index of its dependency group (hunks of one group are taken or left out together)
    stable: bool
    changed_in: str | None  # the revision in which an unstable hunk took its current form
    applies: str  # clean | 3-way | present | conflict | unchecked (not probed: left out earlier)
    taken: bool
    reason: str | None  # why it was left out (None when taken)


@dataclass(frozen=True)
class ImportPlan:
    """Everything an import would write, computed without writing anything."""

    pr: int
    track: str
    upstream: str
    title: str  # sanitised: one line, no control characters
    author: str
    pr_state: str  # open | merged | closed
    revision: Revision
    fork_branch: str
    fork_tip: str
    revisions_compared: tuple[str, ...]  # oldest first; the last one is the revision imported
    hunks: tuple[HunkVerdict, ...]
    depends_on: tuple[str, ...]  # names of queued patches of the PRs this one is stacked on
    state: str  # queued | ungated
    gate: str | None
    selection: Selection
    notes: tuple[str, ...]
    mail: bytes = b""  # the `git format-patch` mail; empty when nothing is taken
    regenerated: Regenerated | None = None  # the mail holds the fork's context, not upstream's
    timings: Mapping[str, float] = field(default_factory=dict)

    @property
    def taken(self) -> tuple[HunkVerdict, ...]:
        return tuple(h for h in self.hunks if h.taken)

    @property
    def left_out(self) -> tuple[HunkVerdict, ...]:
        return tuple(h for h in self.hunks if not h.taken)


@dataclass(frozen=True)
class ImportOutcome:
    plan: ImportPlan
    patch: Patch | None  # the manifest entry written (or that would be, with --dry-run)
    written: bool


@dataclass(frozen=True)
class _Planned:
    """A plan plus the parsed diff it came from (kept out of the public record: it is large)."""

    plan: ImportPlan
    files: tuple[FileDiff, ...]


# --------------------------------------------------------------------------------------------
# import


def import_pr(
    ws: Workspace,
    config: "Config",
    number: int,
    *,
    through: str | None = None,
    selection: Selection = Selection(),
    dry_run: bool = False,
    offline: bool = False,
    api_url: str | None = None,
    say: Callable[[str], None] | None = None,
) -> ImportOutcome:
    """Plan the import of PR `number` and, unless `dry_run`, add it to the queue."""
    say = say or (lambda _m: None)
    repo = _fork_repo(config)
    recorded, new_state, client, polled = _observe(ws, config, repo, number, offline=offline, api_url=api_url, say=say)
    queue = queue_mod.load(ws)
    if queue.series_stale and not dry_run:  # an earlier run was killed between the manifest and series
        with lock(ws, "repair patches/series"):
            queue = queue_mod.load(ws, repair=True)
    _refuse_if_queued(queue, number)
    planned = _plan(ws, repo, config, recorded, number, queue, through=through, selection=selection, say=say)
    plan = planned.plan
    if not plan.taken:
        return ImportOutcome(plan, None, False)
    if dry_run:
        return ImportOutcome(plan, _patch_entry(plan, queue.next_name(number, plan.title)), False)
    _checkpoint("planned")
    with lock(ws, f"import #{number}"):
        _checkpoint("locked")
        queue = queue_mod.load(ws, repair=True)  # another process may have changed it meanwhile
        _refuse_if_queued(queue, number)
        missing = [d for d in plan.depends_on if not any(p.name == d and p.live for p in queue.patches)]
        if missing:
            raise PreconditionError(f"#{number} depends on {', '.join(missing)}, which left the queue meanwhile; run import again")
        patch = _patch_entry(plan, queue.next_name(number, plan.title))
        with _signals_deferred():
            if new_state is not None:
                state_mod.save(ws.upstream_state_file, new_state, only=polled)
                client.save_cache()
            queue_mod.save(ws, queue.add(patch), {patch.file: plan.mail})
        _checkpoint("saved")
    return ImportOutcome(plan, patch, True)


def plan_import(
    ws: Workspace,
    config: "Config",
    number: int,
    *,
    through: str | None = None,
    selection: Selection = Selection(),
    repo: GitRepo | None = None,
    fetch: bool = True,
) -> ImportPlan:
    """The plan alone, from the recorded state (for benchmarks and tests; `import_pr` for users)."""
    repo = repo or _fork_repo(config)
    recorded = state_mod.load(ws.upstream_state_file, config.upstream.repo)
    return _plan(ws, repo, config, recorded, number, queue_mod.load(ws), through=through, selection=selection,
                 fetch=fetch).plan


def _refuse_if_queued(queue: Queue, number: int) -> None:
    live = [p for p in queue.for_pr(number) if p.live]
    if live:
        raise PreconditionError(
            f"#{number} is already queued as {live[0].name} ({live[0].state}); follow upstream with "
            f"`porttrack refresh {number} --update`, or `porttrack drop {live[0].name} --reason ...` first"
        )


def _patch_entry(plan: ImportPlan, name: str) -> Patch:
    import hashlib

    refs_taken = tuple(HunkRef(h.id, h.path, h.kind) for h in plan.taken)
    refs_out = tuple(HunkRef(h.id, h.path, h.kind, h.reason) for h in plan.left_out)
    step = Transition(
        at=utcnow(),
        to=plan.state,
        why=f"imported {len(plan.taken)} of {len(plan.hunks)} hunks of {plan.upstream}#{plan.pr} at "
        f"{(plan.revision.through or plan.revision.head)[:12]}"
        + ("" if plan.gate else " (the track has no gate: this patch can never be promoted)"),
        by=queue_mod._who(),
    )
    return Patch(
        name=name,
        file=queue_mod.patch_file_name(name, plan.mail),
        sha256=hashlib.sha256(plan.mail).hexdigest(),
        track=plan.track,
        pr=plan.pr,
        upstream=plan.upstream,
        title=plan.title,
        revision=plan.revision,
        hunks_taken=refs_taken,
        hunks_left_out=refs_out,
        depends_on=plan.depends_on,
        state=plan.state,
        gate=plan.gate,
        history=(step,),
        fork_commits=(),
        selection=plan.selection,
        regenerated=plan.regenerated,
    )


# --------------------------------------------------------------------------------------------
# Observing the PR and finding its revision


def _fork_repo(config: "Config") -> GitRepo:
    path = config.fork_checkout()
    if path is None:
        raise ConfigError("no fork checkout: set fork.checkout in tracks.yaml, pass --fork or set PORTTRACK_FORK")
    return GitRepo.open(path)


def _observe(ws, config, repo, number, *, offline, api_url, say):
    """The recorded state, refreshed by a poll of this PR (and its stack) when a token is at hand.

    Returns (state, new state to record or None, client, the PRs polled). Without a token, or
    offline, the recorded state is used as it is, and a PR never observed is refused.
    """
    from porttrack import secrets

    recorded = state_mod.load(ws.upstream_state_file, config.upstream.repo)
    if offline or secrets.resolve_token() is None:
        if number not in recorded.prs:
            raise PreconditionError(
                f"#{number} has not been observed yet and GitHub is not available "
                f"({'--offline' if offline else 'no token'}); run `porttrack status` with a token first"
            )
        say(f"using the upstream state recorded at {recorded.prs[number].observed_at} (no live poll)")
        return recorded, None, None, ()
    from porttrack.github import client_for
    from porttrack.observe import poll

    client = client_for(config.upstream.repo, api_url, ws.cache_dir)
    wanted = {number} | {s.number for s in recorded.prs[number].stacked_on} if number in recorded.prs else {number}
    try:
        result = poll(recorded, sorted(wanted), client, repo, config.upstream.remote)
    except (UpstreamUnreachable, GitHubAuthError) as exc:
        if number not in recorded.prs:
            raise
        say(f"porttrack: warning: {exc}")
        say(f"using the upstream state recorded at {recorded.prs[number].observed_at} instead")
        return recorded, None, None, ()
    for note in result.notes:
        say(f"note: {note}")
    return result.state, result.state, client, tuple(result.changes)


@dataclass(frozen=True)
class _Source:
    pr: RecordedPR
    revision: Revision
    tip: str  # the commit whose tree is the post-image (head, --through commit or merge commit)
    default_ref: str
    stack_heads: tuple[str, ...]  # imported heads of queued PRs this one is stacked on


def _fetch(repo: GitRepo, config: "Config", number: int, notes: list[str], timings: dict[str, float]) -> str:
    """Fetch the PR head and upstream's default branch in one round trip; returns the default ref."""
    branch = config.upstream.default_branch
    specs = [f"+refs/pull/{number}/head:{pull_ref(number)}", f"+refs/heads/{branch}:{upstream_ref(branch)}"]
    started = time.perf_counter()
    try:
        repo.fetch(config.upstream.remote, specs)
    except GitError as exc:
        notes.append(f"fetching from {config.upstream.remote} failed ({exc}); using what the fork checkout already has")
    timings["fetch_s"] = time.perf_counter() - started
    return _default_ref(repo, config)


def _default_ref(repo: GitRepo, config: "Config") -> str:
    for ref in (upstream_ref(config.upstream.default_branch), config.fork.upstream_base):
        if repo.rev_parse(ref):
            return ref
    raise PreconditionError(
        f"neither {upstream_ref(config.upstream.default_branch)} nor {config.fork.upstream_base} exists in "
        f"{repo.path}; fetch upstream first"
    )


def _resolve_source(
    repo: GitRepo, config: "Config", state: UpstreamState, number: int, queue: Queue,
    through: str | None, fetch: bool, notes: list[str], timings: dict[str, float],
) -> tuple[_Source, tuple[str, ...]]:
    pr = state.prs.get(number)
    if pr is None:
        raise PreconditionError(f"#{number} has not been observed yet: run `porttrack status` first")
    default_ref = _fetch(repo, config, number, notes, timings) if fetch else _default_ref(repo, config)
    head = repo.rev_parse(pull_ref(number))
    if head is None and pr.head_sha and repo.has_commit(pr.head_sha):
        head = repo.rev_parse(pr.head_sha)
    merged = pr.state == "merged" and bool(pr.merge_commit_sha)
    if merged and not repo.has_commit(pr.merge_commit_sha or ""):
        raise PreconditionError(
            f"#{number} merged as {pr.merge_commit_sha[:12]}, which is not in {repo.path}; fetch upstream first"
        )
    if head is None and not merged:
        raise PreconditionError(f"#{number}: refs/pull/{number}/head could not be fetched and its head is not in {repo.path}")
    if head is not None:
        repo.update_ref(seen_ref(number, head), head)  # keeps the imported revision reachable
        if pr.head_sha and head != pr.head_sha:
            notes.append(f"upstream head moved since it was recorded ({pr.head_sha[:12]} -> {head[:12]}): counted as a new revision")
    stack_heads, depends_on = _stack(state, pr, queue) if not merged else ((), ())
    if through is not None:
        tip = _check_through(repo, number, through, head, merged, default_ref)
        base = _diff_base(repo, tip, default_ref, stack_heads)
        revision = Revision(head=head or pr.merge_commit_sha or tip, base=base, through=tip, merged=merged,
                            merge_commit=pr.merge_commit_sha if merged else None)
    elif merged:
        mc = repo.rev_parse(pr.merge_commit_sha or "")
        assert mc is not None
        base = repo.rev_parse(f"{mc}^1")
        if base is None:
            raise PreconditionError(f"#{number}'s merge commit {mc[:12]} has no parent")
        tip, revision = mc, Revision(head=mc, base=base, merged=True, merge_commit=mc)
    else:
        assert head is not None
        tip = head
        revision = Revision(head=head, base=_diff_base(repo, head, default_ref, stack_heads))
    if pr.state == "closed":
        notes.append(f"#{number} was closed without merging: this carries an orphaned change")
    return _Source(pr, revision, tip, default_ref, stack_heads), depends_on


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


def _diff_base(repo: GitRepo, tip: str, default_ref: str, stack_heads: Sequence[str]) -> str:
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


def _track_for(config: "Config", state: UpstreamState, number: int) -> str:
    track = config.track_for_pr(number)
    if track is not None:
        return track
    # A PR no track names, that a tracked PR is stacked on: it belongs to that PR's track.
    for tracked, pr in state.prs.items():
        if any(link.number == number for link in pr.stacked_on):
            track = config.track_for_pr(tracked)
            if track is not None:
                return track
    raise PreconditionError(f"#{number} is not in any track of tracks.yaml (nor stacked under one); add it to a track's prs")


# --------------------------------------------------------------------------------------------
# Planning


def _plan(
    ws: Workspace, repo: GitRepo, config: "Config", state: UpstreamState, number: int, queue: Queue, *,
    through: str | None, selection: Selection, fetch: bool = True, say: Callable[[str], None] | None = None,
    series_below: Sequence[Patch] | None = None,
) -> _Planned:
    """The plan; `series_below` are the queued patches `apply` will apply before this one (default:
    every live patch of `queue`, as for a patch added at the end)."""
    timings: dict[str, float] = {"fetch_s": 0.0}
    t0 = time.perf_counter()
    notes: list[str] = []
    track_id = _track_for(config, state, number)
    track = config.tracks[track_id]
    source, depends_on = _resolve_source(repo, config, state, number, queue, through, fetch, notes, timings)
    timings["resolve_s"] = time.perf_counter() - t0 - timings["fetch_s"]  # refs, merge base, stack
    _checkpoint("fetched")

    t1 = time.perf_counter()
    files = parse_diff(repo.diff(source.revision.base, source.tip))
    check_diff_paths(files)  # hostile input stops here, before anything is written
    check_symlink_targets(files)
    if not files:
        raise PreconditionError(f"#{number} changes nothing relative to {source.revision.base[:12]}")
    hunks = [h for fd in files for h in fd.hunks]
    groups = dependency_groups(files)
    group_of = {hid: n for n, group in enumerate(groups) for hid in group}
    wanted = _resolve_wanted(selection.hunks, hunks, number)
    if wanted is not None:
        _refuse_missing_dependencies(wanted, groups, hunks)
        selection = replace(selection, hunks=tuple(h.id for h in hunks if h.id in wanted))  # full ids, file order

    reasons: dict[str, str] = {}
    if wanted is not None:
        reasons.update({h.id: NOT_SELECTED for h in hunks if h.id not in wanted})
    for fd in files:
        why = _path_exclusion(fd, track_id, track.paths.include, track.paths.exclude, selection)
        if why:
            for h in fd.hunks:
                reasons.setdefault(h.id, f"{EXCLUDED}: {why}")
    compared, changed_in = _stability(repo, number, source, {h.id for h in hunks}, notes)
    if source.revision.merged:
        changed_in = {}
    unstable = {h.id: changed_in[h.id] for h in hunks if h.id in changed_in}
    if unstable and selection.force_unstable:
        notes.append(f"--force-unstable: taking {len(unstable)} hunk(s) that changed in recent revisions")
    elif unstable:
        for hid, rev in unstable.items():
            reasons.setdefault(hid, f"{UNSTABLE}: changed in revision {rev[:12]}")
    for group in groups:  # a group travels whole
        out = [h.id for h in hunks if h.id in group and h.id in reasons]
        for hid in group:
            if out and hid not in reasons:
                reasons[hid] = f"{DEPENDS} {out[0]}"
    timings["classify_s"] = time.perf_counter() - t1

    t2 = time.perf_counter()
    fork_tip = repo.rev_parse(f"refs/heads/{config.fork.branch}") or repo.rev_parse(config.fork.branch)
    if fork_tip is None:
        raise PreconditionError(f"the fork branch {config.fork.branch!r} does not exist in {repo.path}")
    candidates = [n for n, group in enumerate(groups) if not any(hid in reasons for hid in group)]
    applies: dict[str, str] = {}
    if candidates:
        # A stacked PR is probed on top of the queued patches it depends on: they travel with it.
        below = [queue_mod.read_patch(ws, queue.get(name)) for name in depends_on]
        with _Probe(repo, fork_tip, below) as probe:
            for n in probe.failed_below:
                notes.append(f"{depends_on[n]} (which this PR is stacked on) does not apply to the fork tip; probed without it")
            verdicts = _probe_groups(probe, files, groups, candidates)
            for n, (how, where) in verdicts.items():
                for hid in groups[n]:
                    applies[hid] = how
                    if how == "present":
                        reasons[hid] = f"{PRESENT}: {where} already has this change"
                    elif how == "conflict":
                        reasons[hid] = f"{NOT_SEPARABLE}: conflicts with fork at {where}"
            taken_ids = {h.id for h in hunks if h.id not in reasons}
            diff = build_patch([(fd, [h for h in fd.hunks if h.id in taken_ids]) for fd in files])
            exact_on_tip = bool(taken_ids) and _check_together(probe, diff, any(applies[h] == "3-way" for h in taken_ids))
    else:
        taken_ids, diff, exact_on_tip = set(), b"", False
    timings["probe_s"] = time.perf_counter() - t2

    t3 = time.perf_counter()
    title = for_terminal(source.pr.title, 200) or f"PR {number}"
    verdicts_out = tuple(
        HunkVerdict(h.id, h.path, h.kind, _where(h, files), group_of[h.id], h.id not in changed_in,
                    changed_in.get(h.id), applies.get(h.id, "unchecked"), h.id in taken_ids, reasons.get(h.id))
        for h in hunks
    )
    plan = ImportPlan(
        pr=number,
        track=track_id,
        upstream=config.upstream.repo,
        title=title,
        author=source.pr.author,
        pr_state=source.pr.state,
        revision=source.revision,
        fork_branch=config.fork.branch,
        fork_tip=fork_tip,
        revisions_compared=compared,
        hunks=verdicts_out,
        depends_on=depends_on,
        state="queued" if track.gate is not None else "ungated",
        gate=track_id if track.gate is not None else None,
        selection=selection,
        notes=tuple(notes),
    )
    mail, regenerated = b"", None
    if taken_ids:
        below = queue.series() if series_below is None else tuple(series_below)
        mail, regenerated, more = _in_fork_context(ws, repo, config, plan, source.pr, diff, below, exact_on_tip)
        plan = replace(plan, notes=plan.notes + more)
    timings["write_patch_s"] = time.perf_counter() - t3
    timings["total_excluding_fetch_s"] = time.perf_counter() - t0 - timings["fetch_s"]
    _checkpoint("classified")
    return _Planned(replace(plan, mail=mail, regenerated=regenerated, timings=timings), files)


def _resolve_wanted(requested: Sequence[str], hunks: Sequence[Hunk], number: int) -> set[str] | None:
    """--hunk ids (a unique prefix of at least 6 characters will do) -> full ids; None: no --hunk."""
    if not requested:
        return None
    wanted: set[str] = set()
    for item in requested:
        key = item.strip().lower()
        matches = [h.id for h in hunks if h.id == key] or ([h.id for h in hunks if h.id.startswith(key)] if len(key) >= 6 else [])
        if len(matches) != 1:
            problem = "matches several hunks" if matches else "is not a hunk of this PR's diff"
            raise InputError(f"--hunk {item}: {problem} (see `porttrack import {number} --dry-run` for the ids)")
        wanted.add(matches[0])
    return wanted


def _refuse_missing_dependencies(wanted: set[str], groups: Sequence[frozenset[str]], hunks: Sequence[Hunk]) -> None:
    missing = missing_dependencies(wanted, groups)
    if missing:
        path = {h.id: h.path for h in hunks}
        listed = ", ".join(f"{hid} ({path[hid]})" for hid in sorted(missing, key=lambda i: (path[i], i)))
        raise PreconditionError(
            f"the selected hunks need {len(missing)} hunk(s) that were not selected: {listed}; "
            f"add them with --hunk, or leave their group out"
        )


def _path_exclusion(fd: FileDiff, track_id: str, include: Sequence[str], exclude: Sequence[str], selection: Selection) -> str | None:
    for path in dict.fromkeys(p for p in (fd.old_path, fd.new_path) if p is not None):
        if not path_matches(path, include, ()):
            return f"{path} is not in tracks.{track_id}.paths.include"
        hit = next((g for g in exclude if path_matches(path, (g,), ())), None)
        if hit:
            return f"{path} matches tracks.{track_id}.paths.exclude {hit!r}"
        if selection.paths and not path_matches(path, selection.paths, ()):
            return f"{path} does not match --paths"
        hit = next((g for g in selection.exclude if path_matches(path, (g,), ())), None)
        if hit:
            return f"{path} matches --exclude {hit!r}"
    return None


def _where(h: Hunk, files: Sequence[FileDiff]) -> str:
    if h.kind == "text":
        return h.body.split(b"\n", 1)[0].decode("utf-8", "replace").split(" @@")[0] + " @@"
    if h.kind == "binary":
        return "binary"
    fd = next(f for f in files if h in f.hunks)
    if fd.status in ("renamed", "copied"):
        return f"{fd.status[:-1] if fd.status.endswith('ed') else fd.status} from {fd.old_path}"
    if fd.status in ("added", "deleted"):
        return f"{fd.status} (empty)"
    return f"mode {fd.old_mode} -> {fd.new_mode}"


# --------------------------------------------------------------------------------------------
# Stability


def _stability(repo: GitRepo, number: int, source: _Source, current_ids: set[str], notes: list[str]) -> tuple[tuple[str, ...], dict[str, str]]:
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
        base = _diff_base(repo, sha, source.default_ref, source.stack_heads)
        id_sets.append({h.id for fd in parse_diff(repo.diff(base, sha)) for h in fd.hunks})
    changed_in: dict[str, str] = {}
    for hid in current_ids:
        missing_at = [n for n, ids in enumerate(id_sets) if hid not in ids]
        if missing_at:
            after = missing_at[-1] + 1  # the first revision after the last one without it
            changed_in[hid] = compared[after]
    return compared, changed_in


# --------------------------------------------------------------------------------------------
# Separability: probing against the fork's tip in a scratch index


_FAILED_AT = re.compile(
    r"^error: (?:patch failed: (?P<a>.+):\d+|(?P<b>.+): (?:does not exist in index|already exists in index|"
    r"patch does not apply|does not match index|wrong type|does not exist))$"
)


class _Probe:
    """A scratch index of the fork tip under `.git/porttrack/import/`; nothing else is touched."""

    def __init__(self, repo: GitRepo, tip: str, below: Sequence[bytes] = ()):
        self.repo, self.tip, self.below = repo, tip, below
        self.dir: Path | None = None
        self.failed_below: list[int] = []

    def __enter__(self) -> "_Probe":
        self.dir = self.repo.scratch_dir("import")
        self.repo.run("read-tree", self.tip, env=self._env("index"))
        for n, patch in enumerate(self.below):  # queued patches this PR is stacked on, as `apply` would
            proc = self.repo.run("apply", "--cached", "--whitespace=nowarn", input=patch, env=self._env("index"), check=False)
            if proc.returncode == 0:
                continue  # a failed `git apply` changes nothing: it is atomic
            if self.threeway(patch)[0]:
                shutil.copyfile(self.dir / "index3", self.dir / "index")
            else:
                self.failed_below.append(n)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)

    def _env(self, name: str) -> dict[str, str]:
        assert self.dir is not None
        return {"GIT_INDEX_FILE": str(self.dir / name)}

    def plain(self, patch: bytes, reverse: bool = False, verbose: bool = False) -> tuple[bool, str]:
        args = ["apply", "--cached", "--check", "--whitespace=nowarn"] + (["--reverse"] if reverse else []) + (["-v"] if verbose else [])
        proc = self.repo.run(*args, input=patch, env=self._env("index"), check=False)
        return proc.returncode == 0, proc.stderr.decode("utf-8", "replace")

    def threeway(self, patch: bytes) -> tuple[bool, list[str]]:
        """A real 3-way apply into a copy of the index: clean only if it exits 0 AND leaves no
        unmerged entries (`apply --check --3way` would exit 0 on conflicts)."""
        assert self.dir is not None
        shutil.copyfile(self.dir / "index", self.dir / "index3")
        proc = self.repo.run("apply", "--cached", "--3way", "--whitespace=nowarn", input=patch, env=self._env("index3"), check=False)
        unmerged = self.repo.text("ls-files", "-u", "-z", env=self._env("index3")).split("\0")
        files = sorted({entry.split("\t", 1)[1] for entry in unmerged if "\t" in entry})
        return proc.returncode == 0 and not files, files


def _probe_groups(probe: _Probe, files: Sequence[FileDiff], groups: Sequence[frozenset[str]], candidates: Sequence[int]) -> dict[int, tuple[str, str]]:
    """(clean | 3-way | present | conflict, file) per candidate group: all at once, then the
    groups of the files git did not complain about, then one by one; so a PR that applies cleanly
    costs one `git apply --check`, and one with a conflict two plus a few per group of its file."""
    chosen = set().union(*(groups[n] for n in candidates))
    ok, stderr = probe.plain(_patch_of(files, chosen))
    if ok:
        return {n: ("clean", "") for n in candidates}
    verdicts: dict[int, tuple[str, str]] = {}
    # git checks every file entry and names each one that fails: the groups of the other files
    # are confirmed with one more check, and only the failing files' groups are probed one by one.
    failed = {m.group("a") or m.group("b") for m in map(_FAILED_AT.match, stderr.splitlines()) if m}
    owner = {h.id: fd for fd in files for h in fd.hunks}
    suspect = [n for n in candidates if any({owner[h].path, owner[h].old_path} & failed for h in groups[n])]
    rest = [n for n in candidates if n not in suspect]
    if failed and rest and probe.plain(_patch_of(files, set().union(*(groups[n] for n in rest))))[0]:
        verdicts.update({n: ("clean", "") for n in rest})
    else:
        suspect = list(candidates)
    for n in suspect:
        verdicts[n] = _probe_one(probe, files, groups[n])
    return verdicts


def _probe_one(probe: _Probe, files: Sequence[FileDiff], group: frozenset[str]) -> tuple[str, str]:
    patch = _patch_of(files, group)
    ok, stderr = probe.plain(patch)
    if ok:
        return "clean", ""
    paths = [fd.path for fd in files if any(h.id in group for h in fd.hunks)]
    if probe.plain(patch, reverse=True)[0]:
        return "present", ", ".join(paths)
    merged, conflicted = probe.threeway(patch)
    if merged:
        return "3-way", ""
    failed = [m.group("a") or m.group("b") for m in map(_FAILED_AT.match, stderr.splitlines()) if m]
    return "conflict", ", ".join(dict.fromkeys(conflicted or failed or paths))


def _check_together(probe: _Probe, diff: bytes, needs_threeway: bool) -> bool:
    """The taken groups applied one by one; make sure they also apply together. True when they go
    in exactly as they are: no merge, no hunk moved (`apply` would call that *clean*)."""
    ok, said = probe.plain(diff, verbose=True)
    if ok:
        return not apply_mod.moved_hunks(said)
    if needs_threeway and probe.threeway(diff)[0]:
        return False
    raise ConflictError("the hunks to take apply to the fork one group at a time but not together; "
                        "take fewer with --hunk or --exclude (a bug report with the PR would help)")


def _patch_of(files: Sequence[FileDiff], ids: set[str] | frozenset[str]) -> bytes:
    return build_patch([(fd, [h for h in fd.hunks if h.id in ids]) for fd in files])


# --------------------------------------------------------------------------------------------
# The fork's context: the mail as `apply`, `git am` and `quilt push -a` will meet it


def _in_fork_context(
    ws: Workspace, repo: GitRepo, config: "Config", plan: ImportPlan, pr: RecordedPR, diff: bytes,
    below: Sequence[Patch], exact_on_tip: bool,
) -> tuple[bytes, Regenerated | None, tuple[str, ...]]:
    """The mail to store, its `regenerated` record, and notes.

    The mail is built in a scratch index as `porttrack apply` builds the queue (one mechanism:
    `apply.build_series`), on the build base plus the live patches `below`. Clean there: stored as
    it is. At an offset, by 3-way or with fuzz: `git am` without `-3` or quilt would fail or fuzz
    (3-way needs the pre-image blobs, offsets and fuzz are judged differently by GNU patch), so the
    stored diff becomes what it did there, the tree before to the tree after.

    `exact_on_tip`: the probe saw the diff go onto the fork tip exactly (no offset, no merge). With
    nothing queued before it and the build base at that tip, `apply`'s plain step is that same
    `git apply` on the same tree, so the trial build (a read-tree, write-tree and commit of the
    whole tree: most of an import's cost on a big fork) would only say "clean" again."""
    mail = format_mail(plan, pr, repo, diff)
    base_ref = config.fork.build_from()
    base = repo.rev_parse(base_ref)
    if base is None:
        return mail, None, (f"the build base {base_ref!r} is not in {repo.path}: the patch keeps upstream's "
                            f"context, not checked against the base",)
    if exact_on_tip and not below and base == plan.fork_tip:
        return mail, None, ()
    try:
        contents = {p.name: queue_mod.read_patch(ws, p) for p in below}
        candidate = _patch_entry(replace(plan, mail=mail), CANDIDATE)
        results, tip = apply_mod.build_series(repo, base, (*below, candidate), {**contents, CANDIDATE: mail})
    except (InputError, UnsafeInput) as exc:  # a queued file edited by hand: `apply` will say so too
        return mail, None, (f"the queue could not be built to check this patch over it ({exc}); "
                            f"it keeps upstream's context",)
    last = results[-1]
    if last.outcome == "clean":
        return mail, None, ()
    if last.outcome == apply_mod.NOT_TRIED:
        blocked = next(r.name for r in results if r.outcome == "conflict")
        return mail, None, (f"{blocked} conflicts on {base_ref}, so this patch was not checked over the queue; "
                            f"it keeps upstream's context (see `porttrack apply`)",)
    if last.outcome == "conflict" or last.empty or tip is None:
        what = f"conflicts at {', '.join(last.conflict_files)}" if last.outcome == "conflict" else "changes nothing"
        return mail, None, (f"on {base_ref} plus the queue this patch {what}; it keeps upstream's context "
                            f"(`porttrack apply` will say the same)",)
    before = results[-2].commit if len(results) > 1 else base
    assert before is not None
    fork_diff = repo.diff(before, tip)
    hunks = tuple(HunkRef(h.id, h.path, h.kind) for fd in parse_diff(fork_diff) for h in fd.hunks)
    regenerated = Regenerated(last.outcome, base, tuple(p.name for p in below), hunks)
    note = (f"upstream's diff goes onto {base_ref} plus the queue only by {last.outcome}: the patch file carries "
            f"the fork's context (regenerated), the manifest keeps upstream's hunk ids")
    return format_mail(plan, pr, repo, fork_diff, regenerated), regenerated, (note,)


# --------------------------------------------------------------------------------------------
# The patch file


def format_mail(plan: ImportPlan, pr: RecordedPR, repo: GitRepo, diff: bytes, regenerated: Regenerated | None = None) -> bytes:
    """One `git format-patch` mail: headers from the PR, provenance trailers, diffstat, diff."""
    from porttrack import __version__

    sha = plan.revision.through or plan.revision.head
    login = re.sub(r"[^A-Za-z0-9-]", "", pr.author or "")[:39] or "unknown"
    subject = f"upstream #{plan.pr}: {plan.title}"
    date = _mail_date(pr, repo, sha)
    taken = [h.id for h in plan.taken]
    trailers = [
        f"Upstream-PR: {plan.upstream}#{plan.pr}",
        f"Upstream-Head: {plan.revision.head}",
    ]
    if plan.revision.through:
        trailers.append(f"Upstream-Through: {plan.revision.through}")
    trailers.append(f"Porttrack-Track: {plan.track}")
    trailers.append("Porttrack-Hunks: " + _fold(taken))
    body = [
        f"Taken by porttrack from {plan.upstream}#{plan.pr} ({pr.state}).",
        f"{len(taken)} of {len(plan.hunks)} hunks taken; "
        + (f"{len(plan.left_out)} left out, with reasons in patches/manifest.json." if plan.left_out else "none left out."),
    ]
    if regenerated is not None:
        body.append(f"The diff is the fork's: upstream's went onto {regenerated.base[:12]} by {regenerated.how}, "
                    "so its context was regenerated; Porttrack-Hunks lists upstream's hunk ids.")
    stat = repo.run("apply", "--stat", "-", input=diff).stdout.decode("utf-8", "replace") if diff else ""
    head = (
        f"From {sha} Mon Sep 17 00:00:00 2001\n"
        f"From: {login} <{login}@users.noreply.github.com>\n"
        f"Date: {date}\n"
        f"Subject: {_header('[PATCH] ' + subject)}\n"
        "MIME-Version: 1.0\n"
        "Content-Type: text/plain; charset=UTF-8\n"
        "Content-Transfer-Encoding: 8bit\n"
        "\n" + "\n".join(body) + "\n\n" + "\n".join(trailers) + "\n---\n" + stat + "\n"
    )
    return head.encode("utf-8") + diff + f"-- \nporttrack {__version__}\n\n".encode()


def _fold(ids: Sequence[str], width: int = 72) -> str:
    """Trailer value over several lines (continuation lines start with a space, as git allows)."""
    lines, line = [], ""
    for hid in ids:
        if line and len(line) + 1 + len(hid) > width:
            lines.append(line)
            line = hid
        else:
            line = f"{line} {hid}" if line else hid
    lines.append(line)
    return "\n ".join(lines)


def _header(text: str) -> str:
    return text if text.isascii() else Header(text, "utf-8", maxlinelen=76).encode()


def _mail_date(pr: RecordedPR, repo: GitRepo, sha: str) -> str:
    for value in (pr.merged_at if pr.state == "merged" else None, pr.created_at):
        if value:
            try:
                return format_datetime(datetime.fromisoformat(value.replace("Z", "+00:00")).astimezone(timezone.utc))
            except ValueError:
                pass
    when = repo.text("show", "-s", "--format=%at", sha)
    return format_datetime(datetime.fromtimestamp(int(when or 0), tz=timezone.utc))


# --------------------------------------------------------------------------------------------
# refresh


@dataclass(frozen=True)
class RefreshedHunk:
    change: str  # new | removed | changed | unchanged
    path: str
    old_id: str | None
    new_id: str | None
    was_taken: bool | None  # None for a new hunk
    now_taken: bool | None  # what an import at the new head would do; None for a removed hunk
    reason: str | None  # why the new hunk would be left out


@dataclass(frozen=True)
class RefreshResult:
    pr: int
    patch: str
    old: Revision
    new: Revision
    moved: bool
    hunks: tuple[RefreshedHunk, ...]
    update: bool
    written: bool
    patch_after: Patch | None
    notes: tuple[str, ...]

    def counts(self) -> dict[str, int]:
        out = {k: 0 for k in ("new", "removed", "changed", "unchanged")}
        for h in self.hunks:
            out[h.change] += 1
        return out


def refresh_pr(
    ws: Workspace,
    config: "Config",
    number: int,
    *,
    update: bool = False,
    dry_run: bool = False,
    offline: bool = False,
    api_url: str | None = None,
    say: Callable[[str], None] | None = None,
) -> RefreshResult:
    """Per hunk, what changed between the imported revision and the PR now; with `update`,
    replace the queued patch by an import of the PR now (same selection, same name)."""
    say = say or (lambda _m: None)
    queue = queue_mod.load(ws)
    live = [p for p in queue.for_pr(number) if p.live]
    if not live:
        raise NotFound(f"#{number} has no live patch in the queue (see `porttrack queue`)")
    patch = live[0]
    repo = _fork_repo(config)
    state, new_state, client, polled = _observe(ws, config, repo, number, offline=offline, api_url=api_url, say=say)
    old_tip = patch.revision.through or patch.revision.head
    if not (repo.has_commit(old_tip) and repo.has_commit(patch.revision.base)):
        raise PreconditionError(f"the imported revision {old_tip[:12]} of #{number} is not in {repo.path}; fetch it first")
    old_files = parse_diff(repo.diff(patch.revision.base, old_tip))
    others = replace(queue, patches=tuple(p for p in queue.patches if p.name != patch.name))
    below = _live_before(queue, patch)  # a refreshed patch keeps its place in the series
    probe_sel = replace(patch.selection, hunks=())  # --hunk ids are mapped after the diff of diffs
    planned = _plan(ws, repo, config, state, number, others, through=None, selection=probe_sel, say=say,
                    series_below=below)
    changes = diff_of_diffs(old_files, planned.files)
    notes = list(planned.plan.notes)
    if patch.selection.hunks:
        mapped = _map_selection(patch.selection.hunks, changes, notes)
        planned = _plan(ws, repo, config, state, number, others, through=None, selection=replace(patch.selection, hunks=mapped),
                        fetch=False, say=say, series_below=below)
    plan = planned.plan
    taken_before = {h.id for h in patch.hunks_taken}
    now = {h.id: h for h in plan.hunks}
    hunks = tuple(
        RefreshedHunk(c.change, c.path, c.old_id, c.new_id,
                      None if c.old_id is None else c.old_id in taken_before,
                      None if c.new_id is None else now[c.new_id].taken,
                      None if c.new_id is None else now[c.new_id].reason)
        for c in changes
    )
    new_rev = plan.revision
    moved = (new_rev.through or new_rev.head) != old_tip or new_rev.base != patch.revision.base
    result = RefreshResult(number, patch.name, patch.revision, new_rev, moved, hunks, update, False, None, tuple(notes))
    if not update:
        return result
    if not plan.taken:
        raise PreconditionError(f"at {new_rev.head[:12]} nothing of #{number} would be taken; drop {patch.name} instead")
    after = _refreshed_patch(patch, plan, taken_before)
    if after is None:
        return replace(result, notes=result.notes + ("the queued patch already matches upstream: nothing to update",))
    if dry_run:
        return replace(result, patch_after=after)
    with lock(ws, f"refresh #{number}"):
        current = queue_mod.load(ws, repair=True)
        if current.get(patch.name) != patch:
            raise PreconditionError(f"{patch.name} changed while refreshing; run refresh again")
        with _signals_deferred():
            if new_state is not None:
                state_mod.save(ws.upstream_state_file, new_state, only=polled)
                client.save_cache()
            queue_mod.save(ws, current.replace_patch(after), {after.file: plan.mail})
    return replace(result, written=True, patch_after=after)


def _live_before(queue: Queue, patch: Patch) -> tuple[Patch, ...]:
    at = next(n for n, p in enumerate(queue.patches) if p.name == patch.name)
    return tuple(p for p in queue.patches[:at] if p.live)


def _map_selection(selected: Sequence[str], changes: Sequence[HunkChange], notes: list[str]) -> tuple[str, ...]:
    out: list[str] = []
    for change in changes:
        if change.old_id in selected and change.new_id is not None:
            out.append(change.new_id)
        elif change.old_id in selected:
            notes.append(f"selected hunk {change.old_id} ({change.path}) is gone from the PR")
    return tuple(out)


def _refreshed_patch(patch: Patch, plan: ImportPlan, taken_before: set[str]) -> Patch | None:
    import hashlib

    sha = hashlib.sha256(plan.mail).hexdigest()
    if sha == patch.sha256 and plan.revision == patch.revision and plan.regenerated == patch.regenerated:
        return None
    taken_now = {h.id for h in plan.taken}
    at = plan.revision.through or plan.revision.head
    refreshed = replace(
        patch,
        file=queue_mod.patch_file_name(patch.name, plan.mail),
        sha256=sha,
        title=plan.title,
        revision=plan.revision,
        hunks_taken=tuple(HunkRef(h.id, h.path, h.kind) for h in plan.taken),
        hunks_left_out=tuple(HunkRef(h.id, h.path, h.kind, h.reason) for h in plan.left_out),
        depends_on=plan.depends_on,
        regenerated=plan.regenerated,
    )
    if taken_now != taken_before:
        gained, lost = len(taken_now - taken_before), len(taken_before - taken_now)
        to = "queued" if patch.gate is not None else "ungated"
        return refreshed.transition(to, f"refreshed to {at[:12]}: {gained} hunk(s) in, {lost} out; gate evidence must be earned again")
    return refreshed.transition(patch.state, f"refreshed to {at[:12]}: the same hunks (only context or position moved)")


# --------------------------------------------------------------------------------------------
# drop


@dataclass(frozen=True)
class DropResult:
    before: Patch
    after: Patch
    written: bool


def drop_patch(ws: Workspace, name: str, reason: str, *, dry_run: bool = False, force: bool = False) -> DropResult:
    """Retire a live patch with a reason; its file moves to patches/retired/, its record stays."""
    reason = " ".join((reason or "").split())
    if not reason:
        raise InputError("--reason must say why the patch is dropped")
    with contextlib.nullcontext() if dry_run else lock(ws, f"drop {name}"):
        queue = queue_mod.load(ws, repair=not dry_run)
        patch = queue.get(name)
        if not patch.live:
            raise PreconditionError(f"{patch.name} is already {patch.state}")
        dependents = [p.name for p in queue.live() if patch.name in p.depends_on]
        if dependents and not force:
            raise PreconditionError(f"{', '.join(dependents)} depend(s) on {patch.name}; drop them first or pass --force")
        after = patch.transition("dropped", reason)
        if not dry_run:
            with _signals_deferred():
                queue_mod.save(ws, queue.replace_patch(after))
    return DropResult(patch, after, not dry_run)


# --------------------------------------------------------------------------------------------
# queue listing


@dataclass(frozen=True)
class QueueEntry:
    patch: Patch
    left_out_by_reason: Mapping[str, int]


def queue_entries(ws: Workspace, include_retired: bool = False) -> tuple[tuple[QueueEntry, ...], bool]:
    queue = queue_mod.load(ws)
    entries = tuple(
        QueueEntry(p, reason_counts(p.hunks_left_out))
        for p in queue.patches
        if include_retired or p.live
    )
    return entries, queue.series_stale


def reason_counts(refs: Iterable[HunkRef]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for ref in refs:
        kind = next((k for k in REASON_KINDS if (ref.reason or "").startswith(k)), "other")
        counts[kind] = counts.get(kind, 0) + 1
    return counts


# --------------------------------------------------------------------------------------------
# JSON shapes (documented in the README; change them only additively)


def plan_to_json(outcome: ImportOutcome, dry_run: bool) -> dict[str, Any]:
    plan = outcome.plan
    return {
        "schema": IMPORT_SCHEMA,
        "dry_run": dry_run,
        "written": outcome.written,
        "pr": plan.pr,
        "track": plan.track,
        "upstream": plan.upstream,
        "title": plan.title,
        "pr_state": plan.pr_state,
        "revision": _revision_json(plan.revision),
        "revisions_compared": list(plan.revisions_compared),
        "fork": {"branch": plan.fork_branch, "tip": plan.fork_tip},
        "patch": None if outcome.patch is None else {
            "name": outcome.patch.name, "file": outcome.patch.file, "sha256": outcome.patch.sha256,
            "state": outcome.patch.state, "gate": outcome.patch.gate, "depends_on": list(outcome.patch.depends_on),
        },
        "taken": len(plan.taken),
        "left_out": len(plan.left_out),
        "left_out_by_reason": reason_counts(HunkRef(h.id, h.path, h.kind, h.reason) for h in plan.left_out),
        "hunks": [
            {"id": h.id, "path": h.path, "kind": h.kind, "where": h.where, "group": h.group, "stable": h.stable,
             "changed_in": h.changed_in, "applies": h.applies, "taken": h.taken, "reason": h.reason}
            for h in plan.hunks
        ],
        "selection": plan.selection.to_json(),
        "regenerated": None if plan.regenerated is None else plan.regenerated.to_json(),
        "notes": list(plan.notes),
        "timings": {k: round(v, 4) for k, v in plan.timings.items()},
    }


def refresh_to_json(result: RefreshResult, dry_run: bool) -> dict[str, Any]:
    return {
        "schema": REFRESH_SCHEMA,
        "pr": result.pr,
        "patch": result.patch,
        "from": _revision_json(result.old),
        "to": _revision_json(result.new),
        "moved": result.moved,
        "counts": result.counts(),
        "hunks": [
            {"change": h.change, "path": h.path, "old_id": h.old_id, "new_id": h.new_id,
             "was_taken": h.was_taken, "now_taken": h.now_taken, "reason": h.reason}
            for h in result.hunks
        ],
        "update": result.update,
        "dry_run": dry_run,
        "written": result.written,
        "patch_after": None if result.patch_after is None else {
            "name": result.patch_after.name, "file": result.patch_after.file, "state": result.patch_after.state,
            "hunks_taken": len(result.patch_after.hunks_taken), "hunks_left_out": len(result.patch_after.hunks_left_out),
        },
        "notes": list(result.notes),
    }


def _revision_json(rev: Revision) -> dict[str, Any]:
    return {"head": rev.head, "base": rev.base, "through": rev.through, "merged": rev.merged, "merge_commit": rev.merge_commit}


# --------------------------------------------------------------------------------------------
# Interrupt safety


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM while the queue is committed: once the commit has begun it completes
    (a signal that arrived meanwhile is reported, not acted on; SIGKILL cannot be held, and
    `queue.save`'s ordering covers it)."""
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    pending: list[int] = []
    saved = {sig: signal.signal(sig, lambda s, _f: pending.append(s)) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
    if pending:
        import sys

        sys.stderr.write("porttrack: interrupt received while the queue was being written; the write completed\n")


def _checkpoint(name: str) -> None:
    """Tests only: with PORTTRACK_TEST_PAUSE_AT=name, say so on stderr and wait to be killed."""
    from porttrack.testhooks import checkpoint

    checkpoint(name)
