"""The weekly report as plain frozen records, and its JSON form: `--json` prints it and the
template renders it, so the two always carry the same content.

JSON shape (`--json`, schema `porttrack/weekly/v1`; additive changes only)::

    {"schema": "porttrack/weekly/v1", "week": "2026-W49", "title": str, "generated_at": ISO,
     "upstream_repo": str, "fork_repo": str, "report_file": "reports/weekly-2026-W49.md",
     "since": {"at": ISO, "source": "flag"|"record"|"issue"|"default", "detail": str, "week": str|null},
     "upstream": {"mode": "live"|"offline", "offline_reason", "observed_at", "source", "requests", "poll_exit_code",
                 "not_polled": {PR: why},   # GitHub kept failing for these in a live poll: shown as recorded
                 "recorded_before_period": bool},   # the state predates `since`: "this week" cannot be known
     "tracks": [{"id", "title", "changed": bool, "fork_commits": [sha], "next_action": {"kind", "text", "command"},
                 "prs": [{"number", "title", "author", "state": "open"|"merged"|"closed"|"unobserved", "url",
                          "tracked": bool, "merged_at", "closed_at", "merge_commit_sha", "head_sha", "base_ref",
                          "stacked_on": [{"number", "via", "state"}], "convergence": str|null, "notes": [str],
                          "waiting_days": int|null,   # merged, with no current convergence verdict, for this many days
                          "changes": [{"at", "kind", "detail"}], "next_action": {...}}]}],
     "queue": [{"name", "track", "pr", "title", "state", "live", "state_at", "state_why", "changed", "through",
                "hunks_taken": int, "hunks_left_out": [{"path", "kind", "reason"}], "coverage": str, "gate"}],
     "gates": [{"track", "subject", "subject_kind": "patch"|"proof",
                "verdict": "pass"|"fail"|"cannot-evaluate"|"no-evidence", "reference_backend", "key_metric",
                "key_metric_allowed", "notes": [str],
                "cells": [{"model", "context", "batch", "target", "cold", "warm", "reference", "regression",
                           "graph_replay", "jit", "notes"}],      # cold/warm: a gates cell verdict or "not-measured"
                "superseded": [{"id", "target", "role", "recorded_at", "superseded_at", "reason", "replaced_by"}]}],
     "eligibility_tracks": [track id], "eligibility": [{"model", "cells": [{"track", "verdict", "reasons", "summary"}]}],
     "trends": [{"track", "metric", "unit", "direction", "cell", "weeks": [week],
                 "series": [{"target", "phase": "cold"|"warm", "values": [number|null]}]}],
     "problems": [{"where", "what"}],
     "issue_body_truncated": bool,                                 # added by the CLI
     "post": null | {"action": "created"|"updated"|"unchanged"|"closed-by-person"|"would-create"|"would-update",
                     "number", "url", "message", "comment"}}       # added by the CLI
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, Mapping

from porttrack.report.status import PRStatus

SCHEMA = "porttrack/weekly/v1"


@dataclass(frozen=True)
class Since:
    at: str  # UTC stamp: changes strictly after this are "since the previous report"
    source: str  # "flag" | "record" | "issue" | "default"
    detail: str  # human words: "the 2026-W47 report, as recorded in state/reports.json"
    week: str | None = None  # the previous report's week, when known


@dataclass(frozen=True)
class Change:
    at: str | None
    kind: str  # observed | appended | force-pushed | merged | closed | reopened | retitled | rebased-onto
    detail: str


@dataclass(frozen=True)
class PRSection:
    """One PR in the weekly report: the PR as `status` reports it (embedded, not copied), with
    what changed since the previous report and the last convergence verdict."""

    status: PRStatus
    tracked: bool  # listed by the track (False: a PR it is stacked on)
    changes: tuple[Change, ...]  # since the previous report, oldest first
    convergence: str | None  # the last verify-converged verdict in words ("converged at main <sha>", or "... — stale: ...")
    # Merged, and no verdict is current for the fork branch's tip: whole days since the merge.
    waiting_days: int | None = None

    # What the template and the JSON read, through the embedded status.
    number = property(lambda self: self.status.number)
    title = property(lambda self: self.status.title)
    author = property(lambda self: self.status.author)
    state = property(lambda self: self.status.state)  # open | merged | closed | unobserved
    url = property(lambda self: self.status.url)
    merged_at = property(lambda self: self.status.merged_at)
    closed_at = property(lambda self: self.status.closed_at)
    merge_commit_sha = property(lambda self: self.status.merge_commit_sha)
    head_sha = property(lambda self: self.status.head_sha)
    base_ref = property(lambda self: self.status.base_ref)
    stacked_on = property(lambda self: self.status.stacked_on)

    @property
    def notes(self) -> tuple[str, ...]:
        """What else porttrack knows (coverage of a hand port), as sentences."""
        return tuple(n.text for n in self.status.notes)

    def to_json(self) -> dict[str, Any]:
        return {
            **{name: getattr(self, name) for name in _PR_SHOWN},
            "stacked_on": [dict(s) for s in self.stacked_on],
            "tracked": self.tracked,
            "changes": [asdict(c) for c in self.changes],
            "convergence": self.convergence,
            "waiting_days": self.waiting_days,
            "notes": list(self.notes),
            "next_action": asdict(self.status.next_action),
        }


_PR_SHOWN = ("number", "title", "author", "state", "url", "merged_at", "closed_at", "merge_commit_sha", "head_sha", "base_ref")


@dataclass(frozen=True)
class TrackSection:
    id: str
    title: str
    prs: tuple[PRSection, ...]
    fork_commits: tuple[str, ...]
    changed: bool  # anything upstream changed since the previous report
    next_action: Mapping[str, Any]


@dataclass(frozen=True)
class LeftOut:
    path: str
    kind: str
    reason: str | None


@dataclass(frozen=True)
class QueueRow:
    name: str
    track: str
    pr: int
    title: str
    state: str
    live: bool
    state_at: str | None  # when it entered its state
    state_why: str | None
    changed: bool  # it moved since the previous report
    through: str | None  # taken only up to this upstream commit
    hunks_taken: int
    hunks_left_out: tuple[LeftOut, ...]
    coverage: str | None
    gate: str | None
    source_check: str | None = None  # `pycheck.SourceCheck.text` recorded at import (None: not recorded)
    source_check_ok: bool | None = None  # False: the patched files have new undefined names or do not compile


@dataclass(frozen=True)
class GateCell:
    model: str | None  # None (and context, batch) where the axes are others: `where` names the cell
    context: int | None
    batch: int | None
    target: str
    cold: str  # pass | fail | missing | baseline-missing | baseline-other-environment | not-measured
    warm: str
    reference: str  # numerics against the reference backend: pass | fail | missing
    regression: str  # key metric against the baseline, words ("+1.2% (allowed 3%)") or a verdict
    graph_replay: str  # pass | fail | missing | n/a
    jit: str  # pass | fail | missing | n/a
    notes: tuple[str, ...] = ()
    where: str = ""  # the cell's coordinates when its axes are not model/context/batch ("python=3.12")
    verdict: str = ""  # the cell's verdict when the gate has no phases


@dataclass(frozen=True)
class GateSection:
    track: str
    subject: str  # the patch (or proof) the gate proves
    subject_kind: str  # patch | proof
    verdict: str  # pass | fail | missing | cannot-evaluate | no-evidence
    reference_backend: str | None
    key_metric: str | None
    key_metric_allowed: str | None  # "2% worse": the allowed regression against the baseline
    cells: tuple[GateCell, ...]
    superseded: tuple[Mapping[str, Any], ...]  # evidence that no longer counts, and why
    notes: tuple[str, ...]
    gpu_axes: bool = True  # cells are model × context × batch (profile vllm-gpu); else `where`
    phases: tuple[str, ...] = ("cold", "warm")  # () when the gate has none


@dataclass(frozen=True)
class TrendSeries:
    target: str
    phase: str  # cold | warm: never averaged together
    values: tuple[float | None, ...]  # one per week of the trend; None: no evidence that week


@dataclass(frozen=True)
class Trend:
    track: str
    metric: str
    unit: str
    direction: str  # lower | higher: which way is better
    cell: str  # the matrix cell charted, the same every week
    weeks: tuple[str, ...]  # ISO weeks with evidence, oldest first
    series: tuple[TrendSeries, ...]


@dataclass(frozen=True)
class EligibilityCell:
    track: str
    verdict: str  # eligible | conditional | ineligible
    reasons: tuple[str, ...]  # in full, as `porttrack eligibility` gives them
    summary: str  # what fits in a table cell: "attention: hybrid", "proof mla-low-rank-accepted"


@dataclass(frozen=True)
class EligibilityRow:
    model: str
    cells: tuple[EligibilityCell, ...]


@dataclass(frozen=True)
class Problem:
    where: str
    what: str


@dataclass(frozen=True)
class WeeklyReport:
    week: str
    title: str
    generated_at: str
    upstream_repo: str
    fork_repo: str
    since: Since
    upstream: Mapping[str, Any]  # mode, offline_reason, observed_at, source, requests
    tracks: tuple[TrackSection, ...]
    queue: tuple[QueueRow, ...]
    gates: tuple[GateSection, ...]
    eligibility: tuple[EligibilityRow, ...]
    eligibility_tracks: tuple[str, ...]
    trends: tuple[Trend, ...]
    problems: tuple[Problem, ...]
    report_file: str  # where the full markdown is written, relative to the workspace
    profile: str = "vllm-gpu"  # tracks.yaml's profile
    sections: tuple[str, ...] = ()  # the sections that apply, in order (the template shows only these)
    # What a live run's searches found (None offline, or searches off): {"successors": {PR: [line]},
    # "follow": {PR: {"candidates": [{number, title, why}], "tracks_yaml": str|None, "problem"}},
    # "collisions": [line], "cost": str}; the lines are `status`'s, from porttrack.observe.successors / .collisions;
    # the issue shows "follow" (links, a yaml block) and leaves the request accounting ("cost") to --json
    found: Mapping[str, Any] | None = None


def report_to_json(report: WeeklyReport) -> dict[str, Any]:
    data = {"schema": SCHEMA, **asdict(replace(report, tracks=()))}
    data["tracks"] = [{**asdict(replace(t, prs=())), "prs": [p.to_json() for p in t.prs]} for t in report.tracks]
    return data


@dataclass(frozen=True)
class PostOutcome:
    action: str  # created | updated | unchanged | closed-by-person | would-create | would-update
    number: int | None
    url: str | None
    message: str
    comment: str | None = None  # what happened on the tracking issue, if asked

    def to_json(self) -> dict[str, Any]:
        return asdict(self)
