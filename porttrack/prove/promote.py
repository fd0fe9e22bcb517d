"""Decide: a queued patch becomes default-enabled only on evidence that satisfies its gate.

`promote` re-judges the latest non-superseded evidence (`gates.check`) at the moment of promotion
— a stored verdict is never trusted — and refuses unless every required cell passes on every
required target. The promotion is a queue transition carrying the ids of the evidence it rests
on. `demote` reverses it with a reason; the patch's state then says what the current evidence
says. `sync_state` moves a patch between queued / gated-pass / gated-fail after a gate run.

Refusals: an `ungated` patch, a dropped or converged one, a gate with `promote: false`, or one
lacking what the request demands before default enablement → PreconditionError (exit 6); evidence
that fails or is missing → `PromotionRefused` (exit 1, "promotion refused").
"""

from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable

from porttrack.common.errors import CheckFailed, ConfigError, PreconditionError
from porttrack.prove import gates
from porttrack.queue import manifest as queue_mod
from porttrack.workspace.files import Workspace, lock

if TYPE_CHECKING:
    from porttrack.tracks.config import Config

PROMOTABLE_FROM = frozenset({"queued", "gated-pass", "gated-fail"})


class PromotionRefused(CheckFailed):
    """The evidence does not satisfy the gate. `result` holds the verdict cell by cell."""

    def __init__(self, message: str, result: gates.GateCheck):
        super().__init__(message)
        self.result = result


@dataclass(frozen=True)
class Decision:
    patch: str
    before: str
    after: str
    changed: bool
    evidence: tuple[str, ...]
    result: gates.GateCheck | None
    dry_run: bool
    message: str


def promote(ws: Workspace, config: "Config", name: str, *, dry_run: bool = False, at: str | None = None) -> Decision:
    with lock(ws, "promote") if not dry_run else contextlib.nullcontext():
        queue = queue_mod.load(ws, repair=not dry_run)
        patch = queue.get(name)
        if patch.state == "default-enabled":
            since = next((t.at for t in reversed(patch.history) if t.to == "default-enabled"), "?")
            return Decision(patch.name, patch.state, patch.state, False, (), None, dry_run,
                            f"{patch.name} is already default-enabled (since {since}); nothing to do")
        if patch.state == "ungated":
            raise PreconditionError(f"{patch.name} is ungated (its track had no gate when it was imported), so it cannot be promoted; "
                                    + gates.ungated_fix(patch))
        if patch.state not in PROMOTABLE_FROM:
            raise PreconditionError(f"{patch.name} is {patch.state}; only a queued or gated patch can be promoted")
        subject = gates.patch_subject(config, queue, patch)
        if subject.gate is None:
            raise PreconditionError(f"promotion refused: {subject.why_ungated}")
        if not subject.gate.promote:
            raise PreconditionError(f"promotion refused: the gate of track {subject.track} is a measurement only (promote: false)")
        missing = subject.gate.missing_for_promotion()
        if missing:  # config.py refuses this at load; kept so a promotion can never rest on less
            raise ConfigError(f"track {subject.track}'s gate must define {', '.join(missing)} before default enablement")
        blocked = [d for d in patch.depends_on if _state_of(queue, d) != "default-enabled"]
        if blocked:
            raise PreconditionError(f"promotion refused: {patch.name} depends on {', '.join(blocked)}, not default-enabled; promote "
                                    f"{'it' if len(blocked) == 1 else 'them'} first")
        result = gates.judge(ws, config, subject)
        if result.verdict != gates.PASS:
            raise PromotionRefused(_refusal(result), result)
        ids = result.evidence_ids
        why = f"gate of track {subject.track} passed: {result.reason} on {', '.join(result.required.targets) if result.required else '?'}"
        updated = patch.transition("default-enabled", why, evidence=ids, at=at)
        if not dry_run:
            queue_mod.save(ws, queue.replace_patch(updated))
    return Decision(patch.name, patch.state, "default-enabled", True, ids, result, dry_run,
                    f"{patch.name}: {patch.state} -> default-enabled on {len(ids)} evidence records"
                    + (" (dry run: nothing recorded)" if dry_run else "; rebuild the default build with `porttrack apply --default`"))


def demote(ws: Workspace, config: "Config", name: str, reason: str, *, dry_run: bool = False, at: str | None = None) -> Decision:
    reason = " ".join((reason or "").split())
    if not reason:
        raise PreconditionError("demote needs a reason (--reason)")
    with lock(ws, "demote") if not dry_run else contextlib.nullcontext():
        queue = queue_mod.load(ws, repair=not dry_run)
        patch = queue.get(name)
        if patch.state != "default-enabled":
            raise PreconditionError(f"{patch.name} is {patch.state}, not default-enabled; nothing to demote")
        needing = [p.name for p in queue.patches if patch.name in p.depends_on and p.state == "default-enabled"]
        if needing:
            raise PreconditionError(f"{', '.join(needing)} (default-enabled) depend{'s' if len(needing) == 1 else ''} on {patch.name}; demote "
                                    f"{'it' if len(needing) == 1 else 'them'} first")
        subject = gates.patch_subject(config, queue, patch)
        result = gates.judge(ws, config, subject) if subject.gate else None
        after = _state_for(result) or "queued"
        updated = patch.transition(after, f"demoted: {reason}", evidence=result.evidence_ids if result else (), at=at)
        if not dry_run:
            queue_mod.save(ws, queue.replace_patch(updated))
    return Decision(patch.name, "default-enabled", after, True, result.evidence_ids if result else (), result, dry_run,
                    f"{patch.name}: default-enabled -> {after} ({reason})" + (" (dry run: nothing recorded)" if dry_run else ""))


def sync_state(ws: Workspace, config: "Config", name: str, *, at: str | None = None, warn: Callable[[str], None] | None = None) -> Decision | None:
    """After a gate run: queued / gated-pass / gated-fail follow the current verdict. A
    default-enabled patch is never demoted implicitly: a failing verdict is reported instead."""
    return _settle(ws, config, name, at=at, warn=warn, always_judge=False)[0]


def settle(ws: Workspace, config: "Config", subject: gates.GateSubject, *, at: str | None = None,
           warn: Callable[[str], None] | None = None) -> tuple[Decision | None, gates.GateCheck]:
    """After evidence was recorded (`gate run`, `gate ingest`): the subject judged once on it, and
    a patch's state moved to what the verdict says (`sync_state`). The verdict returned is of the
    patch as it now stands (its state after the move)."""
    if subject.kind != "patch":
        return None, gates.judge(ws, config, subject)
    decision, result = _settle(ws, config, subject.name, at=at, warn=warn, always_judge=True)
    assert result is not None  # always_judge
    return decision, result


def _settle(ws: Workspace, config: "Config", name: str, *, at: str | None, warn: Callable[[str], None] | None,
            always_judge: bool) -> tuple[Decision | None, gates.GateCheck | None]:
    with lock(ws, "gate state"):
        queue = queue_mod.load(ws, repair=True)
        patch = queue.get(name)
        subject = gates.patch_subject(config, queue, patch)
        if subject.gate is None or patch.state not in PROMOTABLE_FROM | {"default-enabled"}:
            return None, gates.judge(ws, config, subject) if always_judge else None
        result = gates.judge(ws, config, subject)
        if patch.state == "default-enabled":
            if result.verdict != gates.PASS and warn is not None:
                warn(f"{patch.name} is default-enabled but its gate now says {result.verdict}: {result.reason}; "
                     f"consider `porttrack demote {patch.name} --reason ...`")
            return None, result
        after = _state_for(result) or "queued"
        if after == patch.state:
            return None, result
        updated = patch.transition(after, f"gate run: {result.verdict} ({result.reason})", evidence=result.evidence_ids, at=at)
        queue_mod.save(ws, queue.replace_patch(updated))
    moved = dataclasses.replace(result, subject=dataclasses.replace(subject, state=after))
    return Decision(patch.name, patch.state, after, True, moved.evidence_ids, moved, False, f"{patch.name}: {patch.state} -> {after}"), moved


def _state_for(result: gates.GateCheck | None) -> str | None:
    if result is None:
        return None
    return {gates.PASS: "gated-pass", gates.FAIL: "gated-fail"}.get(result.verdict)


def _state_of(queue: queue_mod.Queue, name: str) -> str | None:
    return next((p.state for p in queue.patches if p.name == name), None)


def _refusal(result: gates.GateCheck) -> str:
    bad = sorted((c for c in result.cells if c.verdict != gates.PASS), key=lambda c: c.verdict != gates.FAIL)  # failures first
    shown = "; ".join(f"{c.label}: {c.verdict} ({c.reason})" for c in bad[:3])
    more = f"; and {len(bad) - 3} more" if len(bad) > 3 else ""
    head = "gate failed" if result.verdict == gates.FAIL else "the gate cannot be evaluated"
    return f"promotion of {result.subject.name} refused: {head}: {result.reason}" + (f": {shown}{more}" if shown else "") \
        + f" (details: `porttrack gate check {result.subject.name}`)"

