"""Take what is stable and separable from an upstream PR into the patch queue, and follow it.

`import_pr` plans everything first and writes nothing until the end, then commits the result with
one `queue.save` under the workspace lock (`workspace.commit_point`), so an interrupted or killed
import leaves the queue exactly as it was. Side effects before that point are only porttrack's
own refs in the fork checkout (`refs/porttrack/pull/N/{head,seen/*}`,
`refs/porttrack/upstream/<branch>`), scratch indexes (`git.repo.ScratchIndex`) under
`.git/porttrack/import/` and `.git/porttrack/apply/` (the trial build of the queue, below),
removed on exit and swept by the next run after a SIGKILL, and the unreferenced objects those
builds wrote (for `git gc`). `porttrack.take.refresh` follows a queued PR; `porttrack.queue.manifest` lists
and drops.

Where the PR comes from: the recorded state (`state/upstream.json`), refreshed by a poll of this
PR and its stack when a client is handed in, with a token or, for a public upstream, without one
(recorded with the import; a failed poll falls back to the recorded state). Which revision is taken and what its diff starts at:
`porttrack.take.source`.

What is taken, hunk by hunk (hunk ids: `porttrack.diff.hunks`):

1. *not selected*: `--hunk` named other hunks. A selection that leaves out a hunk its chosen
   hunks depend on (`relations.dependency_groups`) is refused, listing what is missing.
2. *excluded by path rule*: the file does not match the track's `paths.include`, matches its
   `paths.exclude`, or the `--paths` / `--exclude` flags. A rename is judged on both paths.
3. *unstable*: the hunk's id is missing from one of the PR's recent revisions (the last
   `source.RECENT_REVISIONS` heads: those recorded in `state/upstream.json`, the one just fetched),
   i.e. it took its current form in a later one. Only one revision seen: every hunk is stable (a
   note says so). A merged PR is stable. `--force-unstable` takes such hunks anyway. With
   `--through SHA`, the revisions compared are the recorded heads that precede SHA, and SHA.
4. *depends on left-out hunk*: a hunk travels with its dependency group; one member left out
   leaves the group out.
5. *separability*, probed against the fork branch's tip (plus the queued patches a stacked PR
   depends on) in a scratch index (`git.repo.ScratchIndex`; the fork's work tree, index and
   branches are never touched): plain apply, else the change already there (reverse
   apply: *already in the fork*), else a 3-way merge judged by its exit status and the unmerged
   entries it leaves (`apply --check --3way` exits 0 on conflicts, library notes §2.4), else
   *not separable: conflicts with fork at FILE* (`porttrack.take.separability`). All candidate
   groups are applied at once, for real, into a copy of the probe's index: when that goes in, the
   one `git apply` is also the together check, the patched files `checks.check_taken` reads and the
   mail's diffstat; when it fails, each group is probed alone on copies of its files in one index
   file (`separability.copies_of`): one `git apply --check --reject` of every group and its
   reverse, one `--3way` of those that need it, which also merges the taken diff when it can.
   With nothing stacked below, the probe's index holds only the tip's entries at the PR's paths
   (`separability.only_paths`: no `read-tree` of the whole tree).

The patch is one `git format-patch` mail (`porttrack.queue.mail`) with provenance trailers.

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

import hashlib
import re
import time
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from porttrack.common.clock import utcnow
from porttrack.common.errors import GitHubAuthError, InputError, PreconditionError, UnsafeInput, UpstreamUnreachable
from porttrack.common.text import for_terminal
from porttrack.diff.hunks import FileDiff, Hunk, parse_diff
from porttrack.diff.paths import check_diff_paths, check_symlink_targets, path_matches
from porttrack.diff.pycheck import MAX_PYTHON_BYTES, NotCheckable, SourceCheck, as_edges, describe, is_python
from porttrack.diff.relations import dependency_groups, missing_dependencies
from porttrack.git.repo import GitRepo, fork_branch_ref, missing_branch
from porttrack.queue import manifest as queue_mod
from porttrack.queue import series as series_mod
from porttrack.queue.mail import Provenance, format_mail
from porttrack.queue.manifest import (
    DEPENDS,
    EXCLUDED,
    NOT_SELECTED,
    NOT_SEPARABLE,
    PRESENT,
    UNSTABLE,
    HunkRef,
    Patch,
    Queue,
    Reason,
    Regenerated,
    Revision,
    Selection,
    Transition,
    reason_counts,
)
from porttrack.take.checks import facts_cache, name_dependencies, take_what_passes
from porttrack.take.separability import apply_all, only_paths, patch_of, probe_base, probe_groups
from porttrack.take.source import resolve_source, stability, track_for
from porttrack.tracks.config import Config
from porttrack.workspace import state as state_mod
from porttrack.workspace.files import Workspace, actor, checkpoint, commit_point, lock
from porttrack.workspace.state import RecordedPR, UpstreamState

if TYPE_CHECKING:  # the GitHub client and the poll are for online imports only: not imported by --offline ones
    from porttrack.github.client import GitHubClient

IMPORT_SCHEMA = "porttrack/import/v1"
CANDIDATE = "(planned patch)"  # its name in the trial build (queued names have no parentheses)

# (repo, config, state, number, merge commit, notes) -> hunk id -> where the fork has it
InFork = Callable[[GitRepo, Config, UpstreamState, int, str, list[str]], dict[str, str]]


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
    why: Reason | None  # why it was left out (None when taken)

    @property
    def reason(self) -> str | None:
        return None if self.why is None else self.why.text

    def ref(self) -> HunkRef:
        """Its entry in the manifest's hunks_taken / hunks_left_out."""
        if self.why is None:
            return HunkRef(self.id, self.path, self.kind)
        return HunkRef.left_out(self.id, self.path, self.kind, self.why)


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
    source_check: SourceCheck | None = None  # the patched files against the fork tip (`porttrack.diff.pycheck`)
    timings: Mapping[str, float] = field(default_factory=dict)

    @property
    def taken(self) -> tuple[HunkVerdict, ...]:
        return tuple(h for h in self.hunks if h.taken)

    @property
    def left_out(self) -> tuple[HunkVerdict, ...]:
        return tuple(h for h in self.hunks if not h.taken)

    def provenance(self) -> Provenance:
        return Provenance(self.upstream, self.pr, self.title, self.track, self.revision,
                          tuple(h.id for h in self.taken), len(self.hunks))


@dataclass(frozen=True)
class ImportOutcome:
    plan: ImportPlan
    patch: Patch | None  # the manifest entry written (or that would be, with --dry-run)
    written: bool


@dataclass(frozen=True)
class Planned:
    """A plan plus the parsed diff it came from (kept out of the public record: it is large)."""

    plan: ImportPlan
    files: tuple[FileDiff, ...]


# --------------------------------------------------------------------------------------------
# import


def import_pr(
    ws: Workspace,
    config: Config,
    number: int,
    *,
    repo: GitRepo,
    client: GitHubClient | None,
    through: str | None = None,
    selection: Selection = Selection(),
    dry_run: bool = False,
    say: Callable[[str], None] | None = None,
    in_fork: InFork | None = None,
) -> ImportOutcome:
    """Plan the import of PR `number` into the fork checkout `repo` and, unless `dry_run`, add it
    to the queue. `client` polls the PR first (None: --offline, the recorded state is used).
    `in_fork` tells which hunks of a merged PR the fork already has (the command layer hands in
    `porttrack.converge.verify.already_in_fork`: a later step, so take never imports it)."""
    say = say or (lambda _m: None)
    recorded, new_state, polled = observe_pr(ws, config, repo, client, number, say=say)
    queue = queue_mod.load(ws)
    if queue.series_stale and not dry_run:  # an earlier run was killed between the manifest and series
        with lock(ws, "repair patches/series"):
            queue = queue_mod.load(ws, repair=True)
    _refuse_if_queued(queue, number)
    planned = plan_pr(ws, repo, config, recorded, number, queue, through=through, selection=selection, say=say,
                      in_fork=in_fork)
    plan = planned.plan
    if not plan.taken:
        return ImportOutcome(plan, None, False)
    if dry_run:
        return ImportOutcome(plan, _patch_entry(plan, queue.next_name(number, plan.title)), False)
    checkpoint("planned")
    with lock(ws, f"import #{number}"):
        checkpoint("locked")
        queue = queue_mod.load(ws, repair=True)  # another process may have changed it meanwhile
        _refuse_if_queued(queue, number)
        missing = [d for d in plan.depends_on if not any(p.name == d and p.live for p in queue.patches)]
        if missing:
            raise PreconditionError(f"#{number} depends on {', '.join(missing)}, which left the queue meanwhile; run import again")
        patch = _patch_entry(plan, queue.next_name(number, plan.title))
        with commit_point("the queue was being written"):
            if new_state is not None:
                record_poll(ws, client, new_state, polled)
            queue_mod.save(ws, queue.add(patch), {patch.file: plan.mail})
        checkpoint("saved")
    return ImportOutcome(plan, patch, True)


def plan_import(
    ws: Workspace,
    config: Config,
    number: int,
    *,
    repo: GitRepo,
    through: str | None = None,
    selection: Selection = Selection(),
    fetch: bool = True,
) -> ImportPlan:
    """The plan alone, from the recorded state (for benchmarks and tests; `import_pr` for users)."""
    recorded = state_mod.load(ws.upstream_state_file, config.upstream.repo)
    return plan_pr(ws, repo, config, recorded, number, queue_mod.load(ws), through=through, selection=selection,
                 fetch=fetch).plan


def _refuse_if_queued(queue: Queue, number: int) -> None:
    live = [p for p in queue.for_pr(number) if p.live]
    if live:
        raise PreconditionError(
            f"#{number} is already queued as {live[0].name} ({live[0].state}); follow upstream with "
            f"`porttrack refresh {number} --update`, or `porttrack drop {live[0].name} --reason ...` first"
        )


def _patch_entry(plan: ImportPlan, name: str) -> Patch:
    refs_taken = tuple(h.ref() for h in plan.taken)
    refs_out = tuple(h.ref() for h in plan.left_out)
    step = Transition(
        at=utcnow(),
        to=plan.state,
        why=f"imported {len(plan.taken)} of {len(plan.hunks)} hunks of {plan.upstream}#{plan.pr} at "
        f"{(plan.revision.through or plan.revision.head)[:12]}"
        + ("" if plan.gate else " (the track has no gate: this patch can never be promoted)"),
        by=actor(),
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
        source_check=plan.source_check,
    )


# --------------------------------------------------------------------------------------------
# Observing the PR


def observe_pr(ws: Workspace, config: Config, repo: GitRepo, client: GitHubClient | None, number: int, *,
               say: Callable[[str], None]) -> tuple[UpstreamState, UpstreamState | None, tuple]:
    """The recorded state, refreshed by a poll of this PR (and its stack) when a client is at hand
    (with a token, or unauthenticated for a public upstream). Returns (state, new state to record
    or None, the PRs polled). Without one (--offline) the recorded state is used as it is, and a
    PR never observed is refused."""
    recorded = state_mod.load(ws.upstream_state_file, config.upstream.repo)
    if client is None:
        if number not in recorded.prs:
            raise PreconditionError(
                f"#{number} has not been observed yet and --offline was given; run `porttrack status` first"
            )
        say(f"using the upstream state recorded at {recorded.prs[number].observed_at} (no live poll)")
        return recorded, None, ()
    from porttrack.observe.poll import poll

    wanted = {number} | {s.number for s in recorded.prs[number].stacked_on} if number in recorded.prs else {number}
    try:
        result = poll(recorded, sorted(wanted), client, repo, config.upstream.remote)
    except (UpstreamUnreachable, GitHubAuthError) as exc:
        if number not in recorded.prs:
            raise
        say(f"porttrack: warning: {exc}")
        say(f"using the upstream state recorded at {recorded.prs[number].observed_at} instead")
        return recorded, None, ()
    for note in result.notes:
        say(f"note: {note}")
    return result.state, result.state, tuple(result.changes)


def record_poll(ws: Workspace, client: GitHubClient | None, state: UpstreamState, polled: tuple) -> None:
    """Write what the poll saw (inside the caller's commit point)."""
    state_mod.save(ws.upstream_state_file, state, only=polled)
    if client is not None:
        client.save_cache()


# --------------------------------------------------------------------------------------------
# Planning


def plan_pr(
    ws: Workspace, repo: GitRepo, config: Config, state: UpstreamState, number: int, queue: Queue, *,
    through: str | None, selection: Selection, fetch: bool = True, say: Callable[[str], None] | None = None,
    series_below: Sequence[Patch] | None = None, in_fork: InFork | None = None,
) -> Planned:
    """The plan; `series_below` are the queued patches `apply` will apply before this one (default:
    every live patch of `queue`, as for a patch added at the end)."""
    timings: dict[str, float] = {"fetch_s": 0.0}
    t0 = time.perf_counter()
    notes: list[str] = []
    track_id = track_for(config, state, number)
    track = config.tracks[track_id]
    source, depends_on = resolve_source(repo, config, state, number, queue, through, fetch, notes, timings)
    timings["resolve_s"] = time.perf_counter() - t0 - timings["fetch_s"]  # refs, merge base, stack
    checkpoint("fetched")

    t1 = time.perf_counter()
    raw = repo.diff(source.revision.base, source.tip)
    _refuse_python_too_large(raw, track_id, track.paths.include, track.paths.exclude, selection)  # before it is parsed
    files = parse_diff(raw)
    del raw
    check_diff_paths(files)  # hostile input stops here, before anything is written
    check_symlink_targets(files)
    if not files:
        raise PreconditionError(f"#{number} changes nothing relative to {source.revision.base[:12]}")
    hunks = [h for fd in files for h in fd.hunks]
    cache = facts_cache(repo)  # what each Python blob binds, uses, imports, and pyflakes finds: once per blob
    uses = name_dependencies(repo, files, source.revision.base, source.tip, cache)  # a hunk using what only another brings
    groups = dependency_groups(files, more=as_edges(uses))
    notes += describe(uses)
    group_of = {hid: n for n, group in enumerate(groups) for hid in group}
    wanted = _resolve_wanted(selection.hunks, hunks, number)
    if wanted is not None:
        _refuse_missing_dependencies(wanted, groups, hunks)
        selection = replace(selection, hunks=tuple(h.id for h in hunks if h.id in wanted))  # full ids, file order

    reasons: dict[str, Reason] = {}
    if wanted is not None:
        reasons.update({h.id: Reason(NOT_SELECTED) for h in hunks if h.id not in wanted})
    for fd in files:
        why = _path_exclusion(fd, track_id, track.paths.include, track.paths.exclude, selection)
        if why:
            for h in fd.hunks:
                reasons.setdefault(h.id, Reason(EXCLUDED, why))
    compared, changed_in = stability(repo, number, source, {h.id for h in hunks}, notes)
    if source.revision.merged:
        changed_in = {}
    unstable = {h.id: changed_in[h.id] for h in hunks if h.id in changed_in}
    if unstable and selection.force_unstable:
        notes.append(f"--force-unstable: taking {len(unstable)} hunk(s) that changed in recent revisions")
    elif unstable:
        for hid, rev in unstable.items():
            reasons.setdefault(hid, Reason(UNSTABLE, rev[:12]))
    order = {h.id: k for k, h in enumerate(hunks)}
    for group in groups:  # a group travels whole
        out = sorted((hid for hid in group if hid in reasons), key=order.__getitem__)
        for hid in group:
            if out and hid not in reasons:
                reasons[hid] = Reason(DEPENDS, out[0])
    timings["classify_s"] = time.perf_counter() - t1

    t2 = time.perf_counter()
    fork_tip = repo.rev_parse(fork_branch_ref(repo, config.fork.branch))
    if fork_tip is None:  # the ref was there a moment ago
        raise PreconditionError(missing_branch(repo, config.fork.branch))
    applies: dict[str, str] = {}
    if in_fork is not None and source.revision.merged and source.revision.merge_commit:
        for hid, where in in_fork(repo, config, state, number, source.revision.merge_commit, notes).items():
            if hid not in reasons:
                reasons[hid], applies[hid] = Reason(PRESENT, where), "present"
    candidates = [n for n, group in enumerate(groups) if not any(hid in reasons for hid in group)]
    built: tuple[str, bytes] | None = None  # (how, diff from the fork tip): the trial build's answer, from the probe
    series = queue.series() if series_below is None else tuple(series_below)  # what `apply` puts before this patch
    if candidates:
        # A stacked PR is probed on top of the queued patches it depends on: they travel with it.
        below = [queue_mod.read_patch(ws, queue.get(name)) for name in depends_on]
        with repo.scratch_index("import") as probe:
            named = sorted({p for fd in files for p in (fd.old_path, fd.new_path) if p})
            only = not below and only_paths(probe, fork_tip, named)  # the index holds the tip's entries at `named` alone
            for n in [] if only else probe_base(probe, fork_tip, below):
                notes.append(f"{depends_on[n]} (which this PR is stacked on) does not apply to the fork tip; probed without it")
            first = apply_all(probe, patch_of(files, set().union(*(groups[n] for n in candidates))))
            merged: list[tuple[bytes, str]] = []
            verdicts = probe_groups(probe, files, groups, candidates, first, merged if only else None)
            if merged:
                first = replace(first, merged=merged[0])
            for n, (how, where) in verdicts.items():
                for hid in groups[n]:
                    applies[hid] = how
                    if how == "present":
                        reasons[hid] = Reason(PRESENT, where)
                    elif how == "conflict":
                        reasons[hid] = Reason(NOT_SEPARABLE, where)
            diff, taken, checked = take_what_passes(
                probe, files, hunks, groups, reasons, applies, first, wanted, None if below else fork_tip, cache, notes)
            taken_ids = {h.id for h in hunks if h.id not in reasons}
            exact_on_tip = taken is not None and taken.exact
            stat = first.stat if first.holds(diff) else None  # the mail's diffstat, printed by that same apply
            if REUSE_PROBE and taken is not None and not taken.exact and not below and not series \
                    and repo.rev_parse(series_mod.build_base(repo, config)) == fork_tip:
                # the trial build would put this same diff on this same tree the same way: its tree is here
                # (the pathspec: the probe's index may hold only the PR's paths, `separability.only_paths`)
                fork_diff = repo.run("diff-index", "--cached", "-p", "--no-ext-diff", "--no-textconv", "--binary",
                                     "--full-index", "-M", fork_tip, *(["--", *named] if only else []),
                                     env={**probe.env(taken.index), "GIT_LITERAL_PATHSPECS": "1"}).stdout
                built = (taken.how, fork_diff)
    else:
        taken_ids, diff, exact_on_tip, checked, stat = set(), b"", False, None, None
    cache.save()
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
        source_check=checked,
    )
    mail, regenerated = b"", None
    if taken_ids:
        mail, regenerated, more = _in_fork_context(ws, repo, config, plan, source.pr, diff, series, exact_on_tip, stat, built)
        plan = replace(plan, notes=plan.notes + more)
    timings["write_patch_s"] = time.perf_counter() - t3
    timings["total_excluding_fetch_s"] = time.perf_counter() - t0 - timings["fetch_s"]
    checkpoint("classified")
    return Planned(replace(plan, mail=mail, regenerated=regenerated, timings=timings), files)


REUSE_PROBE = True  # the probe's patched index stands in for the trial build (tests turn it off to compare)


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


_ENTRY = re.compile(rb"^diff --git a/(\S+) b/(\S+)$", re.M)


def _refuse_python_too_large(raw: bytes, track_id: str, include: Sequence[str], exclude: Sequence[str], selection: Selection) -> None:
    """A Python file whose diff alone exceeds what the source check reads (`pycheck.MAX_PYTHON_BYTES`)
    is refused before the diff is parsed, unless a path rule leaves it out: the check could not
    read it, and parsing it whole costs memory in proportion (a 30 MB file, gigabytes)."""
    starts = [(m.start(), m.group(1), m.group(2)) for m in _ENTRY.finditer(raw)]
    for n, (at, old, new) in enumerate(starts):
        size = (starts[n + 1][0] if n + 1 < len(starts) else len(raw)) - at
        if size <= MAX_PYTHON_BYTES:
            continue
        path = new.decode("utf-8", "surrogateescape")
        if not is_python(path):
            continue
        fd = FileDiff(old.decode("utf-8", "surrogateescape"), path, "modified", None, None, False, b"", b"", ())
        if _path_exclusion(fd, track_id, include, exclude, selection) is None:
            raise NotCheckable(path, f"its diff alone is {size:,} bytes, more than the source check reads ({MAX_PYTHON_BYTES:,})")


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
# The fork's context: the mail as `apply`, `git am` and `quilt push -a` will meet it


def _in_fork_context(
    ws: Workspace, repo: GitRepo, config: Config, plan: ImportPlan, pr: RecordedPR, diff: bytes,
    below: Sequence[Patch], exact_on_tip: bool, stat: str | None = None, built: tuple[str, bytes] | None = None,
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
    whole tree: most of an import's cost on a big fork) would only say "clean" again. `stat`: the
    diffstat of `diff`, when the probe's apply printed it. `built`: with nothing queued before it
    and the build base at the fork tip, how the probe put the diff on that tip (offset | 3-way: the
    trial build's own steps, `git apply` then `--3way`, on the same tree) and the diff from the tip
    to what it made, which is the trial build's answer without the build."""
    base_ref = series_mod.build_base(repo, config)
    base = repo.rev_parse(base_ref)
    if base is None:
        return format_mail(plan.provenance(), pr, repo, diff, stat=stat), None, (
            f"the build base {base_ref!r} is not in {repo.path}: the patch keeps upstream's context, not checked against the base",)
    if exact_on_tip and not below and base == plan.fork_tip:
        return format_mail(plan.provenance(), pr, repo, diff, stat=stat), None, ()
    if built is not None and built[1] and not below and base == plan.fork_tip:
        how, fork_diff = built
        return _regenerated(plan, pr, repo, base, base_ref, below, how, fork_diff)
    mail = format_mail(plan.provenance(), pr, repo, diff, stat=stat)
    try:
        contents = {p.name: queue_mod.read_patch(ws, p) for p in below}
        candidate = _patch_entry(replace(plan, mail=mail), CANDIDATE)
        results, tip = series_mod.build_series(repo, base, (*below, candidate), {**contents, CANDIDATE: mail})
    except (InputError, UnsafeInput) as exc:  # a queued file edited by hand: `apply` will say so too
        return mail, None, (f"the queue could not be built to check this patch over it ({exc}); "
                            f"it keeps upstream's context",)
    last = results[-1]
    if last.outcome == "clean":
        return mail, None, ()
    if last.outcome == series_mod.NOT_TRIED:
        blocked = next(r.name for r in results if r.outcome == "conflict")
        return mail, None, (f"{blocked} conflicts on {base_ref}, so this patch was not checked over the queue; "
                            f"it keeps upstream's context (see `porttrack apply`)",)
    if last.outcome == "conflict" or last.empty or tip is None:
        what = f"conflicts at {', '.join(last.conflict_files)}" if last.outcome == "conflict" else "changes nothing"
        return mail, None, (f"on {base_ref} plus the queue this patch {what}; it keeps upstream's context "
                            f"(`porttrack apply` will say the same)",)
    before = results[-2].commit if len(results) > 1 else base
    assert before is not None
    return _regenerated(plan, pr, repo, base, base_ref, below, last.outcome, repo.diff(before, tip))


def _regenerated(plan: ImportPlan, pr: RecordedPR, repo: GitRepo, base: str, base_ref: str, below: Sequence[Patch], how: str,
                 fork_diff: bytes) -> tuple[bytes, Regenerated, tuple[str, ...]]:
    parsed = parse_diff(fork_diff)
    hunks = tuple(HunkRef(h.id, h.path, h.kind) for fd in parsed for h in fd.hunks)
    regenerated = Regenerated(how, base, tuple(p.name for p in below), hunks)
    note = (f"upstream's diff goes onto {base_ref} plus the queue only by {how}: the patch file carries "
            f"the fork's context (regenerated), the manifest keeps upstream's hunk ids")
    return format_mail(plan.provenance(), pr, repo, fork_diff, regenerated, files=parsed), regenerated, (note,)


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
        "revision": plan.revision.to_json(),
        "revisions_compared": list(plan.revisions_compared),
        "fork": {"branch": plan.fork_branch, "tip": plan.fork_tip},
        "patch": None if outcome.patch is None else {
            "name": outcome.patch.name, "file": outcome.patch.file, "sha256": outcome.patch.sha256,
            "state": outcome.patch.state, "gate": outcome.patch.gate, "depends_on": list(outcome.patch.depends_on),
        },
        "taken": len(plan.taken),
        "left_out": len(plan.left_out),
        "left_out_by_reason": reason_counts(h.ref() for h in plan.left_out),
        "hunks": [
            {"id": h.id, "path": h.path, "kind": h.kind, "where": h.where, "group": h.group, "stable": h.stable,
             "changed_in": h.changed_in, "applies": h.applies, "taken": h.taken, "reason": h.reason,
             "reason_kind": None if h.why is None else h.why.kind}
            for h in plan.hunks
        ],
        "selection": plan.selection.to_json(),
        "regenerated": None if plan.regenerated is None else plan.regenerated.to_json(),
        "source_check": None if plan.source_check is None else plan.source_check.to_json(),
        "notes": list(plan.notes),
        "timings": {k: round(v, 4) for k, v in plan.timings.items()},
    }

