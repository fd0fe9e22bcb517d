"""Follow a queued PR upstream (`porttrack refresh`): per hunk, what changed since it was imported,
and with `update`, the queued patch replaced by an import of the PR now.

The new revision is planned exactly as `porttrack import` plans it (`take.plan_pr`), on the same
selection, with the refreshed patch keeping its place in the series; `--hunk` ids are carried
over through the diff of diffs (`relations.diff_of_diffs`). The queue is written under the workspace
lock at one commit point (`workspace.commit_point`), as an import is.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from typing import Any, Callable, Sequence

from porttrack.common.errors import NotFound, PreconditionError
from porttrack.diff.hunks import parse_diff
from porttrack.diff.relations import HunkChange, diff_of_diffs
from porttrack.git.repo import GitRepo
from porttrack.github.client import GitHubClient
from porttrack.queue import manifest as queue_mod
from porttrack.queue.manifest import Patch, Queue, Reason, Revision
from porttrack.take.importer import ImportPlan, observe_pr, plan_pr, record_poll
from porttrack.tracks.config import Config
from porttrack.workspace.files import Workspace, commit_point, lock

REFRESH_SCHEMA = "porttrack/refresh/v1"


@dataclass(frozen=True)
class RefreshedHunk:
    change: str  # new | removed | changed | unchanged
    path: str
    old_id: str | None
    new_id: str | None
    was_taken: bool | None  # None for a new hunk
    now_taken: bool | None  # what an import at the new head would do; None for a removed hunk
    why: Reason | None  # why the new hunk would be left out

    @property
    def reason(self) -> str | None:
        return None if self.why is None else self.why.text


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
    config: Config,
    number: int,
    *,
    repo: GitRepo,
    client: GitHubClient | None,
    update: bool = False,
    dry_run: bool = False,
    say: Callable[[str], None] | None = None,
) -> RefreshResult:
    """Per hunk, what changed between the imported revision and the PR now; with `update`,
    replace the queued patch by an import of the PR now (same selection, same name). `repo` is
    the fork checkout; `client` polls the PR first (None: --offline)."""
    say = say or (lambda _m: None)
    queue = queue_mod.load(ws)
    live = [p for p in queue.for_pr(number) if p.live]
    if not live:
        raise NotFound(f"#{number} has no live patch in the queue (see `porttrack queue`)")
    patch = live[0]
    state, new_state, polled = observe_pr(ws, config, repo, client, number, say=say)
    old_tip = patch.revision.through or patch.revision.head
    if not (repo.has_commit(old_tip) and repo.has_commit(patch.revision.base)):
        raise PreconditionError(f"the imported revision {old_tip[:12]} of #{number} is not in {repo.path}; fetch it first")
    old_files = parse_diff(repo.diff(patch.revision.base, old_tip))
    others = replace(queue, patches=tuple(p for p in queue.patches if p.name != patch.name))
    below = _live_before(queue, patch)  # a refreshed patch keeps its place in the series
    probe_sel = replace(patch.selection, hunks=())  # --hunk ids are mapped after the diff of diffs
    planned = plan_pr(ws, repo, config, state, number, others, through=None, selection=probe_sel, say=say,
                    series_below=below)
    changes = diff_of_diffs(old_files, planned.files)
    notes = list(planned.plan.notes)
    if patch.selection.hunks:
        mapped = _map_selection(patch.selection.hunks, changes, notes)
        planned = plan_pr(ws, repo, config, state, number, others, through=None, selection=replace(patch.selection, hunks=mapped),
                        fetch=False, say=say, series_below=below)
    plan = planned.plan
    taken_before = {h.id for h in patch.hunks_taken}
    now = {h.id: h for h in plan.hunks}
    hunks = tuple(
        RefreshedHunk(c.change, c.path, c.old_id, c.new_id,
                      None if c.old_id is None else c.old_id in taken_before,
                      None if c.new_id is None else now[c.new_id].taken,
                      None if c.new_id is None else now[c.new_id].why)
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
        with commit_point("the queue was being written"):
            if new_state is not None:
                record_poll(ws, client, new_state, polled)
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
        hunks_taken=tuple(h.ref() for h in plan.taken),
        hunks_left_out=tuple(h.ref() for h in plan.left_out),
        depends_on=plan.depends_on,
        regenerated=plan.regenerated,
    )
    if taken_now != taken_before:
        gained, lost = len(taken_now - taken_before), len(taken_before - taken_now)
        to = "queued" if patch.gate is not None else "ungated"
        return refreshed.transition(to, f"refreshed to {at[:12]}: {gained} hunk(s) in, {lost} out; gate evidence must be earned again")
    return refreshed.transition(patch.state, f"refreshed to {at[:12]}: the same hunks (only context or position moved)")


def refresh_to_json(result: RefreshResult, dry_run: bool) -> dict[str, Any]:
    return {
        "schema": REFRESH_SCHEMA,
        "pr": result.pr,
        "patch": result.patch,
        "from": result.old.to_json(),
        "to": result.new.to_json(),
        "moved": result.moved,
        "counts": result.counts(),
        "hunks": [
            {"change": h.change, "path": h.path, "old_id": h.old_id, "new_id": h.new_id,
             "was_taken": h.was_taken, "now_taken": h.now_taken, "reason": h.reason,
             "reason_kind": None if h.why is None else h.why.kind}
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

