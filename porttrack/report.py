"""`porttrack report weekly`: the one issue a week the team reads — gathered, neutralised,
rendered from a template, and posted without ever making a second one.

Four steps, each a plain function the CLI calls in order:

1. **gather** (`gather`): upstream state (a fresh poll, or the recorded state when offline — the
   report says which), what changed since the previous report (from the per-PR event history in
   `state/upstream.json`, never from a machine-local cache), the queue, gate verdicts, eligibility,
   convergence verdicts, trends of each track's key metric, and every problem met on the way.
   A part porttrack cannot evaluate (a module missing from this version, an unreadable file)
   becomes a line in `problems`, never a crash and never a silent gap.
2. **render** (`render`): the report's JSON form is the template's context, so `--json` and the
   issue carry the same content. The template is data (`templates/weekly_status.md.j2` in the
   workspace overrides the packaged one); jinja2 runs with StrictUndefined, and every value it
   prints passes through `porttrack.markdown.text` unless it is already safe markdown (`Md`), so
   an overriding template cannot forget to neutralise a PR title.
3. **fit** (`fit_body`): GitHub refuses issue bodies over 65,536 characters; a longer report is cut
   at a section boundary (or a line, closing an open code block), with a pointer to the full file.
4. **post** (`post`): the week's issue is found by a hidden marker among issues with the
   configured labels; created if absent, updated only if its body or title changed, left alone if
   a person closed it. A create that fails uncertainly is never retried blindly: porttrack looks
   for the marker first, and if it is not there yet, stops and says so.

"The previous report" is, in order: `--since`; the newest run of an earlier week recorded in
`state/reports.json` (committed with the workspace); the creation time of the newest earlier
week's issue (when posting from a fresh CI checkout whose record is older); else the last 7 days.

JSON shape (`--json`, schema `porttrack/weekly/v1`; additive changes only)::

    {"schema": "porttrack/weekly/v1", "week": "2026-W49", "title": str, "generated_at": ISO,
     "upstream_repo": str, "fork_repo": str, "report_file": "reports/weekly-2026-W49.md",
     "since": {"at": ISO, "source": "flag"|"record"|"issue"|"default", "detail": str, "week": str|null},
     "upstream": {"mode": "live"|"offline", "offline_reason", "observed_at", "source", "requests"},
     "tracks": [{"id", "title", "changed": bool, "fork_commits": [sha], "next_action": {"kind", "text", "command"},
                 "prs": [{"number", "title", "author", "state": "open"|"merged"|"closed"|"unobserved", "url",
                          "tracked": bool, "merged_at", "closed_at", "merge_commit_sha", "head_sha", "base_ref",
                          "stacked_on": [{"number", "via", "state"}], "convergence": str|null, "notes": [str],
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

import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence

from porttrack import markdown as md
from porttrack.errors import GitHubAuthError, InputError, NotFound, PorttrackError
from porttrack.workspace import Workspace, atomic_write_text, dump_json, write_json

if TYPE_CHECKING:
    from porttrack.config import Config
    from porttrack.github import GitHubClient, Issue
    from porttrack.status import StatusReport

SCHEMA = "porttrack/weekly/v1"
RECORD_SCHEMA = "porttrack/reports/v1"
TEMPLATE_NAME = "weekly_status.md.j2"
BODY_LIMIT = 65536  # GitHub's limit on an issue body, in characters
TREND_WEEKS = 12  # how many past weeks the trend charts show
RECORDS_KEPT = 104  # two years of weekly runs in state/reports.json
DEFAULT_WINDOW = timedelta(days=7)


# --------------------------------------------------------------------------- time


def iso_week(moment: datetime) -> str:
    year, week, _ = moment.isocalendar()
    return f"{year}-W{week:02d}"


def stamp(moment: datetime) -> str:
    return moment.astimezone(timezone.utc).replace(microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_moment(text: str, what: str = "time") -> datetime:
    """A date (`2026-11-23`, midnight UTC) or an ISO 8601 time; naive times are UTC."""
    value = (text or "").strip()
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
            return datetime.strptime(value, "%Y-%m-%d").replace(tzinfo=timezone.utc)
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise InputError(f"{what}: expected a date (2026-11-23) or an ISO 8601 time (2026-11-23T08:00:00Z), got {text!r}") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def _after(at: str | None, since: str) -> bool:
    return bool(at) and at > since  # both are UTC `...Z` stamps: string order is time order


# --------------------------------------------------------------------------- records


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
    number: int
    title: str
    author: str
    state: str  # open | merged | closed | unobserved
    url: str
    tracked: bool  # listed by the track (False: a PR it is stacked on)
    merged_at: str | None
    closed_at: str | None
    merge_commit_sha: str | None
    head_sha: str | None
    base_ref: str | None
    stacked_on: tuple[Mapping[str, Any], ...]
    changes: tuple[Change, ...]  # since the previous report, oldest first
    convergence: str | None  # verdict of the last verify-converged, if any
    notes: tuple[str, ...]  # what else porttrack knows (coverage of a hand port)
    next_action: Mapping[str, Any]


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


@dataclass(frozen=True)
class GateCell:
    model: str
    context: int
    batch: int
    target: str
    cold: str  # pass | fail | missing | baseline-missing | baseline-other-environment | not-measured
    warm: str
    reference: str  # numerics against the reference backend: pass | fail | missing
    regression: str  # key metric against the baseline, words ("+1.2% (allowed 3%)") or a verdict
    graph_replay: str  # pass | fail | missing | n/a
    jit: str  # pass | fail | missing | n/a
    notes: tuple[str, ...] = ()


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


def report_to_json(report: WeeklyReport) -> dict[str, Any]:
    return {"schema": SCHEMA, **asdict(report)}


# --------------------------------------------------------------------------- the previous report


def records_path(ws: Workspace) -> Path:
    return ws.state_dir / "reports.json"


def load_records(ws: Workspace) -> list[dict[str, Any]]:
    path = records_path(ws)
    if not path.is_file():
        return []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        if data.get("schema") != RECORD_SCHEMA or not isinstance(data.get("reports"), list):
            raise ValueError(f"expected schema {RECORD_SCHEMA} with a reports list")
    except (ValueError, AttributeError) as exc:
        raise InputError(f"{path}: malformed report record ({exc}); restore it from git") from None
    return [r for r in data["reports"] if isinstance(r, dict)]


def previous_report(
    ws: Workspace,
    week: str,
    now: datetime,
    *,
    since_arg: str | None = None,
    issues: Sequence["Issue"] = (),
) -> Since:
    """When the previous report was made (see the module docstring for the order)."""
    if since_arg:
        at = stamp(parse_moment(since_arg, "--since"))
        return Since(at, "flag", f"{at[:10]} (--since)")
    earlier = [r for r in load_records(ws) if str(r.get("week", "")) < week and r.get("generated_at")]
    from_record = max(earlier, key=lambda r: str(r["generated_at"])) if earlier else None
    from_issue = _newest_earlier_issue(issues, week)
    if from_record and (from_issue is None or str(from_record["week"]) >= from_issue[0]):
        at = str(from_record["generated_at"])
        return Since(at, "record", f"the {from_record['week']} report of {at[:10]} (recorded in state/reports.json)", str(from_record["week"]))
    if from_issue:
        issue_week, issue = from_issue
        at = str(issue.created_at)
        return Since(at, "issue", f"the {issue_week} report of {at[:10]} (when its issue #{issue.number} was opened)", issue_week)
    at = stamp(now - DEFAULT_WINDOW)
    return Since(at, "default", f"{at[:10]} (the last 7 days: no previous report is recorded)")


def _newest_earlier_issue(issues: Sequence["Issue"], week: str):
    found = []
    for issue in issues:
        issue_week = md.find_marker(issue.body)
        if issue_week and issue_week < week and getattr(issue, "created_at", None):
            found.append((issue_week, issue))
    return max(found, key=lambda pair: pair[0]) if found else None


def record_run(ws: Workspace, report: WeeklyReport, body: str, issue: Mapping[str, Any] | None = None) -> None:
    """Append (or, for a re-run in the same week, replace) this week's entry. Caller holds the lock."""
    entries = [r for r in load_records(ws) if r.get("week") != report.week]
    previous = next((r for r in load_records(ws) if r.get("week") == report.week), None)
    entry = {
        "week": report.week,
        "generated_at": report.generated_at,
        "since": report.since.at,
        "mode": report.upstream.get("mode"),
        "observed_at": report.upstream.get("observed_at"),
        "file": report.report_file,
        "body_sha256": hashlib.sha256(body.encode("utf-8")).hexdigest(),
        "issue": issue if issue is not None else (previous or {}).get("issue"),
    }
    entries.append(entry)
    entries.sort(key=lambda r: (str(r.get("week")), str(r.get("generated_at"))))
    write_json(records_path(ws), {"schema": RECORD_SCHEMA, "reports": entries[-RECORDS_KEPT:]})


# --------------------------------------------------------------------------- gather


@dataclass
class _Problems:
    items: list[Problem] = field(default_factory=list)

    def add(self, where: str, what: str) -> None:
        problem = Problem(where, " ".join(str(what).split()))
        if problem not in self.items:
            self.items.append(problem)

    def unavailable(self, part: str, module: str) -> None:
        self.add(part, f"not available: this version of porttrack has no {module}")


def gather(
    ws: Workspace,
    config: "Config",
    *,
    now: datetime,
    since: Since,
    offline: bool = False,
    api_url: str | None = None,
    dry_run: bool = False,
    progress: Callable[[str], None] | None = None,
) -> WeeklyReport:
    """Everything the weekly issue says, as plain records. Never raises for a part it cannot
    evaluate: that part becomes a problem line instead."""
    problems = _Problems()
    know = _knowledge(ws, config, problems)
    status_report = _status(ws, config, offline, api_url, dry_run, progress, know, problems)
    upstream_state = _recorded_state(ws, config, problems)
    verdicts = _convergence(ws, problems)
    queue = _queue(ws, problems)
    log = _evidence(ws, problems)
    proofs = _proofs(ws, config, problems)
    week = iso_week(now)
    now_s = stamp(now)
    report = WeeklyReport(
        week=week,
        title=config.report.title.format(week=week),
        generated_at=now_s,
        upstream_repo=config.upstream.repo,
        fork_repo=config.fork.repo,
        since=since,
        upstream={
            "mode": status_report.mode,
            "offline_reason": status_report.offline_reason,
            "observed_at": status_report.observed_at,
            "source": status_report.source,
            "requests": status_report.requests,
        },
        tracks=_tracks(config, status_report, upstream_state, since.at, now_s, verdicts),
        queue=_queue_rows(queue, since.at),
        gates=_gates(config, queue, log, proofs, problems),
        eligibility=(elig := _eligibility(config, proofs, problems))[0],
        eligibility_tracks=elig[1],
        trends=_trends(config, log, now),
        problems=(),
        report_file=report_file(ws, config, week),
    )
    for track in report.tracks:
        for pr in track.prs:
            if pr.state == "unobserved":
                problems.add(f"#{pr.number}", "never observed: run a live `porttrack status` (needs a token)")
            for note in pr.notes:
                if note.startswith("coverage unknown:"):
                    problems.add(f"#{pr.number}", note)
    if status_report.mode == "offline":
        problems.add("upstream", f"offline, showing the state recorded at {status_report.observed_at or 'never'}: {status_report.offline_reason}")
    return replace(report, problems=tuple(problems.items))


def report_file(ws: Workspace, config: "Config", week: str) -> str:
    return f"{config.report.output_dir.rstrip('/')}/weekly-{week}.md"


def _knowledge(ws: Workspace, config: "Config", problems: _Problems):
    from porttrack.status import Knowledge

    try:
        from porttrack.knowledge import gather as gather_knowledge
    except ImportError:
        problems.unavailable("coverage", "porttrack.knowledge (queue and convergence facts in next actions, hunk coverage)")
        return Knowledge()
    try:
        return gather_knowledge(ws, config)
    except PorttrackError as exc:
        problems.add("coverage", str(exc))
        return Knowledge()


def _status(ws, config, offline, api_url, dry_run, progress, know, problems) -> "StatusReport":
    from porttrack.status import refresh

    report, problem = refresh(ws, config, offline=offline, api_url=api_url, dry_run=dry_run, progress=progress, know=know, use_git=False)
    if problem is not None:
        problems.add("upstream", f"the poll failed ({problem}); this report shows the recorded state")
    return report


def _recorded_state(ws: Workspace, config: "Config", problems: _Problems):
    from porttrack import state as state_mod

    try:
        return state_mod.load(ws.upstream_state_file, config.upstream.repo)
    except PorttrackError as exc:
        problems.add("upstream", str(exc))
        return state_mod.UpstreamState(config.upstream.repo, None, "unreadable")


def _convergence(ws: Workspace, problems: _Problems) -> dict[int, str]:
    try:
        from porttrack.converge import latest_verdicts
    except ImportError:
        problems.unavailable("convergence", "porttrack.converge")
        return {}
    try:
        return latest_verdicts(ws)
    except PorttrackError as exc:
        problems.add("convergence", str(exc))
        return {}


def _queue(ws: Workspace, problems: _Problems):
    from porttrack import queue as queue_mod

    try:
        queue = queue_mod.load(ws)
    except PorttrackError as exc:
        problems.add("queue", str(exc))
        return queue_mod.Queue()
    if queue.series_stale:
        problems.add("queue", "patches/series does not match manifest.json; the next queue change rewrites it")
    return queue


def _evidence(ws: Workspace, problems: _Problems):
    try:
        from porttrack import evidence
    except ImportError:
        problems.unavailable("evidence", "porttrack.evidence")
        return None
    try:
        log = evidence.load(ws)
    except PorttrackError as exc:
        problems.add("evidence", str(exc))
        return None
    for bad in log.invalid:
        problems.add("evidence", f"{bad.path} does not count: {bad.why}")
    return log


def _proofs(ws: Workspace, config: "Config", problems: _Problems) -> frozenset[str]:
    if not config.proofs:
        return frozenset()
    try:
        from porttrack.evidence import proofs_passed
    except ImportError:
        return frozenset()
    try:
        return proofs_passed(ws, config)
    except ImportError:
        problems.unavailable("proofs", "porttrack.gates (so no proof can pass yet)")
    except PorttrackError as exc:
        problems.add("proofs", str(exc))
    return frozenset()


# -- upstream, per track ----------------------------------------------------------------------


def _tracks(config, status_report, upstream_state, since: str, now: str, verdicts: Mapping[int, str]) -> tuple[TrackSection, ...]:
    sections = []
    for track in status_report.tracks:
        listed = set(config.tracks[track.id].prs)
        prs = tuple(_pr_section(pr, pr.number in listed, upstream_state, since, now, verdicts, status_report.observed_at) for pr in track.prs)
        primary = [p for p in prs if p.tracked]
        fork_commits = next((pr.fork_commits for pr in track.prs if pr.fork_commits), ())
        sections.append(
            TrackSection(
                id=track.id,
                title=track.title,
                prs=prs,
                fork_commits=tuple(fork_commits),
                changed=any(p.changes for p in primary),
                next_action=asdict(track.next_action),
            )
        )
    return tuple(sections)


def _pr_section(pr, tracked: bool, upstream_state, since: str, now: str, verdicts: Mapping[int, str], observed_at: str | None) -> PRSection:
    recorded = upstream_state.prs.get(pr.number)
    changes: list[Change] = []
    for event in recorded.events if recorded else ():
        if _after(event.at, since) and event.at <= now:
            changes.append(Change(event.at, event.kind, event.detail))
    # A dry run does not record the poll, so its fresh events are only in the status report.
    seen = {(c.kind, c.detail) for c in changes}
    for text in pr.changes:
        kind, _, detail = text.partition(": ")
        if (kind, detail) not in seen:
            changes.append(Change(observed_at, kind, detail))
    changes.sort(key=lambda c: c.at or "")
    return PRSection(
        number=pr.number,
        title=pr.title,
        author=pr.author,
        state=pr.state,
        url=pr.url,
        tracked=tracked,
        merged_at=pr.merged_at,
        closed_at=pr.closed_at,
        merge_commit_sha=pr.merge_commit_sha,
        head_sha=pr.head_sha,
        base_ref=pr.base_ref,
        stacked_on=tuple(dict(s) for s in pr.stacked_on),
        changes=tuple(changes),
        convergence=verdicts.get(pr.number),
        notes=tuple(pr.notes),
        next_action=asdict(pr.next_action),
    )


# -- the queue --------------------------------------------------------------------------------


def _queue_rows(queue, since: str) -> tuple[QueueRow, ...]:
    rows = []
    for patch in queue.patches:
        last = patch.history[-1] if patch.history else None
        changed = any(_after(t.at, since) for t in patch.history)
        if not patch.live and not changed:
            continue  # retired before the previous report: history, not news
        rows.append(
            QueueRow(
                name=patch.name,
                track=patch.track,
                pr=patch.pr,
                title=patch.title,
                state=patch.state,
                live=patch.live,
                state_at=last.at if last else None,
                state_why=last.why if last else None,
                changed=changed,
                through=patch.revision.through,
                hunks_taken=len(patch.hunks_taken),
                hunks_left_out=tuple(LeftOut(h.path, h.kind, h.reason) for h in patch.hunks_left_out),
                coverage=_queue_coverage(patch),
                gate=patch.gate,
            )
        )
    return tuple(rows)


def _queue_coverage(patch) -> str:
    total = len(patch.hunks_taken) + len(patch.hunks_left_out)
    if total == 0:
        return "no hunks"
    return f"{len(patch.hunks_taken)} of {total} hunks ({100 * len(patch.hunks_taken) // total}%)"


# -- gates ------------------------------------------------------------------------------------


def _gates(config: "Config", queue, log, proofs: frozenset[str], problems: _Problems) -> tuple[GateSection, ...]:
    patches = [p for p in queue.live() if p.gate is not None and p.state != "ungated"]
    proof_ids = [pid for pid, proof in config.proofs.items() if proof.gate is not None]
    if not patches and not proof_ids:
        return ()
    try:
        from porttrack import gates
    except ImportError:
        problems.unavailable("gates", "porttrack.gates (gate verdicts cannot be evaluated)")
        return tuple(_no_gate_module(config, p.gate, p.name, "patch") for p in patches)
    if log is None:
        from porttrack.evidence import EvidenceLog

        log = EvidenceLog()
    sections = []
    subjects = [gates.patch_subject(config, queue, p) for p in patches] + [gates.proof_subject(config, pid) for pid in proof_ids]
    for subject in subjects:
        try:
            result = gates.check(config, subject, log, proofs)
        except PorttrackError as exc:
            problems.add(f"gate {subject.name}", str(exc))
            sections.append(GateSection(subject.track, subject.name, subject.kind, "cannot-evaluate", None, None, None, (), (), (str(exc),)))
            continue
        sections.append(_from_check(subject, result, log))
        if result.verdict == gates.CANNOT_EVALUATE and result.required is None:
            problems.add(f"gate {subject.name}", result.reason)
    return tuple(sections)


def _no_gate_module(config: "Config", track: str, name: str, kind: str) -> GateSection:
    gate = config.tracks[track].gate if track in config.tracks else None
    key = gate.key_metric.name if gate is not None and gate.key_metric is not None else None
    backend = gate.reference_backend if gate is not None else None
    return GateSection(track, name, kind, "cannot-evaluate", backend, key, None, (), (), ("gate checks are not available in this version",))


_WORST = {"fail": 3, "missing": 2, "pass": 1}


def _worst(outcomes: Iterable[str]) -> str:
    found = [o for o in outcomes if o in _WORST]
    return max(found, key=_WORST.__getitem__) if found else "missing"


def _from_check(subject, result, log) -> GateSection:
    """One row per model x context x batch x target; cold and warm side by side, never merged."""
    gate = subject.gate
    key_metric = gate.key_metric if gate is not None else None
    rows: dict[tuple[str, int, int, str], dict[str, Any]] = {}
    for cell in result.cells:
        row = rows.setdefault((cell.model, cell.context, cell.batch, cell.target), {})
        row[cell.phase] = cell
    cells = tuple(_gate_row(key, phases, gate, key_metric) for key, phases in rows.items())
    superseded = []
    for record in log.for_subject(subject.kind, subject.name):
        sup = log.superseded_by(record.id)
        if sup is not None:
            superseded.append({"id": record.id, "target": record.target, "role": record.role, "recorded_at": record.recorded_at,
                               "superseded_at": sup.recorded_at, "reason": sup.reason, "replaced_by": sup.replaced_by})
    no_evidence = bool(result.cells) and all(c.evidence is None and c.verdict == "missing" for c in result.cells)
    notes = _cell_notes(result.cells)
    if result.required is not None:
        for left in result.required.left_out:
            notes.append(f"not required: {left.model} ({left.verdict}: {'; '.join(left.reasons)})")
    if result.required is None and result.reason:
        notes.append(result.reason)
    if no_evidence:  # a table of "no evidence" rows says less than one sentence
        cells = ()
        notes = [f"no evidence yet for any of the {len(result.cells)} required cells"] + [n for n in notes if n.startswith("not required")]
    return GateSection(
        track=subject.track,
        subject=subject.name,
        subject_kind=subject.kind,
        verdict="no-evidence" if no_evidence else result.verdict,
        reference_backend=gate.reference_backend if gate is not None else None,
        key_metric=key_metric.name if key_metric is not None else None,
        key_metric_allowed=_allowed(key_metric),
        cells=cells,
        superseded=tuple(superseded),
        notes=tuple(notes),
    )


def _allowed(metric) -> str | None:
    if metric is None:
        return None
    parts = []
    if metric.allowed_regression_pct is not None:
        parts.append(f"{metric.allowed_regression_pct:g}%")
    if metric.allowed_regression_abs is not None:
        parts.append(f"{metric.allowed_regression_abs:g} {metric.unit}")
    return ("at most " + " and ".join(parts) + " worse") if parts else None


def _cell_notes(cells) -> list[str]:
    """Why cells did not pass, one line per distinct reason, naming the cells it applies to."""
    grouped: dict[tuple[str, str], list[str]] = {}
    for cell in cells:
        if cell.verdict == "pass" or (cell.verdict == "missing" and cell.evidence is None):
            continue
        where = f"{cell.model} ctx {cell.context} batch {cell.batch} {cell.target} {cell.phase}"
        grouped.setdefault((cell.verdict, cell.reason), []).append(where)
    words = {"fail": "fails", "missing": "incomplete", "baseline-missing": "no baseline",
             "baseline-other-environment": "baseline from another environment"}
    return [f"{words.get(verdict, verdict)} — {', '.join(where)}: {reason}" for (verdict, reason), where in grouped.items()]


def _gate_row(key, phases: Mapping[str, Any], gate, key_metric) -> GateCell:
    model, context, batch, target = key

    def phase_verdict(phase: str) -> str:
        cell = phases.get(phase)
        if cell is None:
            return "not-measured"
        return cell.verdict

    def outcome(check_name: str, required: bool = True) -> str:
        if not required:
            return "n/a"
        found = [k.outcome for cell in phases.values() for k in cell.checks if k.check == check_name]
        return _worst(found) if found else "missing"

    regression = "—"
    if key_metric is not None:
        parts = []
        for phase in ("cold", "warm"):
            cell = phases.get(phase)
            check = next((k for k in cell.checks if k.check == f"metric:{key_metric.name}"), None) if cell else None
            if check is not None and check.regression_pct is not None:
                pct = check.regression_pct
                words = "unchanged" if abs(pct) < 0.05 else f"{abs(pct):.1f}% {'worse' if pct > 0 else 'better'}"
                parts.append(f"{phase} {words}" + (" ❌" if check.outcome == "fail" else ""))
            elif cell is not None and cell.verdict in ("baseline-missing", "baseline-other-environment"):
                parts.append(f"{phase}: {'no baseline' if cell.verdict == 'baseline-missing' else 'baseline from another environment'}")
        if parts:
            regression = ", ".join(parts)
    return GateCell(
        model=model,
        context=context,
        batch=batch,
        target=target,
        cold=phase_verdict("cold"),
        warm=phase_verdict("warm"),
        reference=outcome("numerics", gate is not None and (gate.reference_backend is not None or gate.tolerance is not None)),
        regression=regression,
        graph_replay=outcome("graph-replay", gate is not None and gate.graph_replay == "required"),
        jit=outcome("no-jit-after-warmup", gate is not None and gate.no_jit_after_warmup == "required"),
    )


# -- eligibility ------------------------------------------------------------------------------


def _eligibility(config: "Config", proofs: frozenset[str], problems: _Problems):
    try:
        from porttrack import eligibility
    except ImportError:
        problems.unavailable("eligibility", "porttrack.eligibility")
        return (), ()
    result = eligibility.evaluate(config, proofs)
    tracks = tuple(t.track for t in result.tracks)
    rows = []
    for model in config.models:
        cells = tuple(EligibilityCell(t.track, c.verdict, tuple(c.reasons), _short_reasons(c.reasons))
                      for t in result.tracks for c in t.cells if c.model == model)
        rows.append(EligibilityRow(model, cells))
    return tuple(rows), tracks


_REASON = re.compile(r"^(drafter|attention|quantization) (\S+) not in|^backend \S+ on|^no backend selected|^pending (proof \S+)")


def _short_reasons(reasons: Iterable[str]) -> str:
    """"attention hybrid not in [...]" -> "attention: hybrid"; the full sentence stays in the JSON."""
    short: list[str] = []
    for reason in reasons:
        match = _REASON.match(reason)
        if match is None:
            item = reason
        elif match.group(1):
            item = f"{match.group(1)}: {match.group(2)}"
        elif match.group(3):
            item = match.group(3)
        else:
            item = "backend"
        if item not in short:
            short.append(item)
    return "; ".join(short)


# -- trends -----------------------------------------------------------------------------------


def _trends(config: "Config", log, now: datetime) -> tuple[Trend, ...]:
    """Each track's key metric, one value per ISO week, target and phase: the newest current
    candidate record of that week, always at the same matrix cell (the first one measured, in the
    gate's order), so the weeks compare like with like."""
    if log is None:
        return ()
    recent = {iso_week(now - timedelta(weeks=n)) for n in range(TREND_WEEKS)}
    trends = []
    for track_id, track in config.tracks.items():
        metric = track.gate.key_metric if track.gate is not None else None
        if metric is None:
            continue
        records = [r for r in log.current() if r.track == track_id and r.role == "candidate" and r.subject.kind == "patch"
                   and _week_of(r.recorded_at) in recent]
        cell = _trend_cell(track.gate, records, metric.name)
        if cell is None:
            continue
        newest: dict[tuple[str, str], Any] = {}  # (week, target) -> record
        for record in sorted(records, key=lambda r: r.order):
            newest[_week_of(record.recorded_at), record.target] = record
        weeks = tuple(sorted({week for week, _ in newest}))
        series = []
        for target in config.gate_targets(track_id):
            for phase in ("cold", "warm"):
                values = tuple(_metric(newest[w, target], cell, phase, metric.name) if (w, target) in newest else None for w in weeks)
                if any(v is not None for v in values):
                    series.append(TrendSeries(target, phase, values))
        if series:
            model, context, batch = cell
            trends.append(Trend(track_id, metric.name, metric.unit, metric.direction,
                                f"{model}, context {context}, batch {batch}", weeks, tuple(series)))
    return tuple(trends)


def _trend_cell(gate, records, metric: str) -> tuple[str, int, int] | None:
    order_models = gate.matrix.models if isinstance(gate.matrix.models, list) else []
    seen = sorted(
        {(c["model"], c["context"], c["batch"]) for r in records for c in r.cells if metric in (c.get("metrics") or {})},
        key=lambda k: (order_models.index(k[0]) if k[0] in order_models else len(order_models), k[0], k[1], k[2]),
    )
    return seen[0] if seen else None


def _metric(record, cell: tuple[str, int, int], phase: str, metric: str) -> float | None:
    found = record.cell(cell[0], cell[1], cell[2], phase)
    value = (found or {}).get("metrics", {}).get(metric)
    return float(value) if isinstance(value, (int, float)) else None


def _week_of(at: str) -> str:
    try:
        return iso_week(parse_moment(at))
    except InputError:
        return ""


# --------------------------------------------------------------------------- render


def template_source(ws: Workspace | None) -> tuple[str, str]:
    """The template text and where it came from: the workspace's templates/ first, else the wheel's."""
    if ws is not None:
        own = ws.templates_dir / TEMPLATE_NAME
        if own.is_file():
            return own.read_text(encoding="utf-8"), str(own)
    from importlib import resources

    packaged = resources.files("porttrack").joinpath("templates", TEMPLATE_NAME)
    return packaged.read_text(encoding="utf-8"), f"porttrack/templates/{TEMPLATE_NAME} (packaged)"


def render(report: WeeklyReport, ws: Workspace | None = None) -> str:
    """The issue body in full (before `fit_body`)."""
    import jinja2

    source, origin = template_source(ws)
    env = jinja2.Environment(
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,  # markdown, not HTML: `finalize` below is the escaping
        finalize=_finalize,
    )
    env.filters.update(_filters(report))
    env.globals.update(_globals(report))
    try:
        template = env.from_string(source)
        text = template.render(r=report_to_json(report))
    except jinja2.TemplateError as exc:
        raise InputError(f"{origin}:{_template_line(exc)}: {exc}") from None
    except (TypeError, ValueError, AttributeError, KeyError, IndexError) as exc:  # a template is data a person edits
        raise InputError(f"{origin}:{_template_line(exc)}: {type(exc).__name__}: {exc}") from None
    return _tidy(text)


def _template_line(exc: BaseException) -> str:
    """The template line an error happened on: syntax errors carry it, runtime errors (an
    undefined value) only in the traceback jinja2 rewrites to point into the template."""
    line = getattr(exc, "lineno", None)
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return str(line) if line else "?"


def _finalize(value: Any) -> Any:
    """Every `{{ … }}` output: safe markdown passes, numbers print, anything else is neutralised."""
    if isinstance(value, md.Md):
        return value
    if value is None:
        return md.Md("—")
    if isinstance(value, bool):
        return md.Md("yes" if value else "no")
    if isinstance(value, (int, float)):
        return md.Md(_number(value))
    return md.text(value)


def _number(value: float | int) -> str:
    if isinstance(value, int):
        return str(value)
    if value != value:  # NaN never reaches here from evidence; be safe anyway
        return "—"
    return f"{value:.4g}" if abs(value) < 1e6 else f"{value:.0f}"


_VERDICT_WORDS = {
    "pass": "✅ pass",
    "fail": "❌ fail",
    "missing": "⚪ no evidence",
    "no-evidence": "⚪ no evidence",
    "baseline-missing": "⚠️ no baseline",
    "baseline-other-environment": "⚠️ baseline from another environment",
    "cannot-evaluate": "⚠️ cannot evaluate",
    "superseded": "🚫 superseded",
    "n/a": "n/a",
    "not-measured": "—",
}

_STATE_WORDS = {
    "open": "🟢 open",
    "merged": "🟣 merged",
    "closed": "🔴 closed, not merged",
    "unobserved": "❔ not observed",
    "queued": "queued",
    "ungated": "ungated",
    "gated-pass": "✅ gated: pass",
    "gated-fail": "❌ gated: fail",
    "default-enabled": "🚀 default-enabled",
    "dropped": "dropped",
    "converged": "converged",
    "eligible": "✅",
    "conditional": "⏳",
    "ineligible": "—",
}

_NEXT_WORDS = {
    "orphaned": "decide: carry, follow a successor, or drop",
    "convergence-check": "verify convergence",
    "converged": "drop the carried copy",
    "queued": "prove the queued patch with its gate",
    "refresh": "upstream moved: refresh the queued patch",
    "port-candidate": "import its stable hunks",
    "wait-for-stack": "wait for the PR it is stacked on",
    "unknown": "observe upstream",
}

_EVENT_WORDS = {
    "observed": "first observed",
    "appended": "new commits",
    "force-pushed": "force-pushed",
    "merged": "merged",
    "closed": "closed without merging",
    "reopened": "reopened",
    "retitled": "retitled",
    "rebased-onto": "base branch changed",
}

# Event details porttrack writes itself (SHAs, counts, states); a retitle quotes the PR's new title.
_OWN_DETAIL_KINDS = frozenset({"observed", "appended", "force-pushed", "merged", "closed", "reopened", "rebased-onto"})


def _filters(report: WeeklyReport) -> dict[str, Callable[..., Any]]:
    upstream = report.upstream_repo

    def verdict(value: Any) -> md.Md:
        return md.Md(_VERDICT_WORDS.get(str(value), str(md.text(value))))

    def state(value: Any) -> md.Md:
        return md.Md(_STATE_WORDS.get(str(value), str(md.text(value))))

    def event(change: Mapping[str, Any]) -> md.Md:
        words = _EVENT_WORDS.get(change["kind"], str(md.text(change["kind"])))
        detail = change.get("detail") or ""
        if detail.strip().lower() == words.lower():
            detail = ""
        if change["kind"] in _OWN_DETAIL_KINDS:
            detail = re.sub(r"\b([0-9a-f]{12})[0-9a-f]{28}\b", r"\1", detail)
            shown = md.ours(detail, upstream, 160)
        else:
            shown = md.text(detail, 120)
        when = f" ({change['at'][:10]})" if change.get("at") else ""
        return md.Md(f"**{words}**{when}" + (f": {shown}" if shown else ""))

    return {
        "t": lambda v, limit=200: md.text(v, limit),
        "code": lambda v, limit=120: md.code(v, limit),
        "ours": lambda v, limit=400: md.ours(v, upstream, limit),
        "ours_plain": lambda v, limit=400: md.ours(v, None, limit),
        "sha": lambda v: md.code((v or "")[:12]) if v else md.Md("—"),
        "date": lambda v: md.Md(str(v)[:10]) if v and re.match(r"^\d{4}-\d{2}-\d{2}", str(v)) else md.Md("—"),
        "verdict": verdict,
        "state": state,
        "event": event,
        "next_short": lambda action: md.Md(_NEXT_WORDS.get(str(action.get("kind")), str(md.text(action.get("text"), 80)))),
        "event_kind": lambda kind: md.Md(_EVENT_WORDS.get(str(kind), str(md.text(kind)))),
        "join_md": lambda items, sep=", ": md.join(items, sep),
        "num": lambda v: md.Md(_number(v)) if isinstance(v, (int, float)) and not isinstance(v, bool) else md.Md("—"),
    }


def _globals(report: WeeklyReport) -> dict[str, Any]:
    upstream, fork = report.upstream_repo, report.fork_repo

    def upstream_pr(number: int) -> md.Md:
        return md.pr_link(upstream, int(number))

    def marker() -> md.Md:
        return md.marker(report.week)

    def chart(trend: Mapping[str, Any]) -> md.Md:
        return md.Md(_mermaid(trend))

    def legend(trend: Mapping[str, Any]) -> md.Md:
        return md.join([md.Md(f"{name}: {md.text(series['target'])} {series['phase']}") for series, _, name in chart_lines(trend)], " · ")

    return {
        "upstream_pr": upstream_pr,
        "fork_issue": lambda n: md.link(md.issue_url(fork, int(n)), md.Md(f"#{int(n)}")),
        "marker": marker,
        "chart": chart,
        "legend": legend,
        "plural": lambda n, one, many=None: one if n == 1 else (many or one + "s"),
    }


_PALETTE = {("sm_121a", "cold"): ("#0969da", "dark blue"), ("sm_121a", "warm"): ("#54aeff", "light blue"),
            ("gfx1151", "cold"): ("#bc4c00", "dark orange"), ("gfx1151", "warm"): ("#fb8f44", "light orange")}
_SPARE = [("#1a7f37", "dark green"), ("#4ac26b", "light green"), ("#8250df", "dark purple"), ("#c297ff", "light purple")]


def chart_lines(trend: Mapping[str, Any]) -> list[tuple[Mapping[str, Any], str, str]]:
    """The series a chart can draw (a value every week), each with its colour and colour name."""
    spare = iter(_SPARE * 4)
    drawn = []
    for series in trend["series"]:
        if len(trend["weeks"]) < 2 or any(v is None for v in series["values"]):
            continue
        colour, name = _PALETTE.get((series["target"], series["phase"])) or next(spare)
        drawn.append((series, colour, name))
    return drawn


def _mermaid(trend: Mapping[str, Any]) -> str:
    """A GitHub-rendered line chart (mermaid xychart) of each series' change, in percent, since the
    first week shown: the two machines measure on very different scales, and a 2% move must be
    visible. The absolute values are in the table under the chart.

    Only numbers, ISO weeks and porttrack's own identifiers, filtered to a safe alphabet, go into
    the block: nothing untrusted reaches it."""
    drawn = chart_lines(trend)
    if not drawn:
        return ""
    lines = []
    for series, _, _ in drawn:
        first = float(series["values"][0])
        lines.append([round((float(v) / first - 1.0) * 100.0, 2) if first else 0.0 for v in series["values"]])
    values = [v for line in lines for v in line] + [0.0]
    low, high = min(values), max(values)
    pad = max((high - low) * 0.15, 0.5)
    metric = re.sub(r"[^A-Za-z0-9_.-]", "", str(trend["metric"]))[:64]
    weeks = [w for w in trend["weeks"] if re.fullmatch(r"\d{4}-W\d{2}", w)]
    out = [
        "```mermaid",
        '%%{init: {"themeVariables": {"xyChart": {"plotColorPalette": "' + ", ".join(c for _, c, _ in drawn) + '"}}}}%%',
        "xychart-beta",
        f'    title "{metric}, % change since {weeks[0]}"',
        "    x-axis [" + ", ".join(f'"{w[2:]}"' for w in weeks) + "]",
        f'    y-axis "% vs {weeks[0]}" {low - pad:.1f} --> {high + pad:.1f}',
    ]
    out += ["    line [" + ", ".join(f"{v:g}" for v in line) + "]" for line in lines]
    out.append("```")
    return "\n".join(out)


def _tidy(text: str) -> str:
    """At most one blank line in a row and exactly one newline at the end (templates are easier to
    write with generous spacing)."""
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip("\n") + "\n"


# --------------------------------------------------------------------------- fit


def body_size(body: str) -> int:
    """Characters as GitHub may count them: the larger of code points and UTF-16 units."""
    return max(len(body), len(body.encode("utf-16-le")) // 2)


def fit_body(body: str, limit: int, pointer: str) -> tuple[str, bool]:
    """`body` if it fits; otherwise its longest prefix that ends at a section boundary (or, when
    one section alone is too long, at a line, closing an open code block), then `pointer`."""
    if body_size(body) <= limit:
        return body, False
    notice = f"\n---\n\n**This report was cut to fit GitHub's limit on an issue's length.** {pointer}\n"
    budget = limit - body_size(notice) - 16
    lines = body.splitlines(keepends=True)
    kept: list[str] = []
    size = 0
    fence = False
    boundary = 0  # lines kept up to the last "## " heading seen outside a code block
    for line in lines:
        if not fence and line.startswith("## "):
            boundary = len(kept)
        if size + body_size(line) > budget:
            break
        kept.append(line)
        size += body_size(line)
        if line.lstrip().startswith("```"):
            fence = not fence
    if boundary > 0 and boundary >= len(kept) // 2:
        kept = kept[:boundary]  # prefer cutting between sections when that keeps most of the text
    text = "".join(kept).rstrip("\n") + "\n"
    if _fence_open(text):
        text += "```\n"
    return text + notice, True


def _fence_open(text: str) -> bool:
    return sum(1 for line in text.splitlines() if line.lstrip().startswith("```")) % 2 == 1


def pointer_to_full(report: WeeklyReport) -> str:
    where = f"The full report is `{report.report_file}` in the workspace"
    server, repo, run = (os.environ.get(k, "") for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID"))
    if server == "https://github.com" and re.fullmatch(r"[\w.-]+/[\w.-]+", repo) and run.isdigit():
        url = f"https://github.com/{repo}/actions/runs/{run}"
        where += f", and in the artifact of {md.link(url, md.Md('the workflow run'))}"
    return where + "; `porttrack report weekly --json` gives the same content as data."


# --------------------------------------------------------------------------- post


@dataclass(frozen=True)
class PostOutcome:
    action: str  # created | updated | unchanged | closed-by-person | would-create | would-update
    number: int | None
    url: str | None
    message: str
    comment: str | None = None  # what happened on the tracking issue, if asked

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def check_permission(client: "GitHubClient") -> str | None:
    """Fail before any work when the token cannot write issues; a note when GitHub does not say."""
    try:
        allowed = client.can_write_issues()
    except NotFound:
        raise GitHubAuthError(f"GitHub has no repository {client.repo}, or the token cannot see it") from None
    if allowed is False:
        raise GitHubAuthError(
            f"the token may not create or edit issues in {client.repo} (it needs triage or write access; "
            "in GitHub Actions grant `permissions: issues: write`)"
        )
    if allowed is None:
        return f"GitHub does not say what this token may do in {client.repo}; a refused write will be reported"
    return None


def labelled_issues(client: "GitHubClient", labels: Sequence[str]) -> list["Issue"]:
    return client.list_issues(labels, state="all")


def find_week_issue(issues: Iterable["Issue"], week: str) -> "Issue | None":
    """The week's issue by its marker; the oldest when a person copied the marker into another."""
    found = [i for i in issues if md.find_marker(i.body) == week]
    return min(found, key=lambda i: i.number) if found else None


def post(
    client: "GitHubClient",
    *,
    week: str,
    title: str,
    body: str,
    labels: Sequence[str],
    issues: Sequence["Issue"] | None = None,
    dry_run: bool = False,
) -> PostOutcome:
    """Create or update the week's issue; never a second one, never reopen a closed one."""
    from porttrack.github import WriteUncertain

    existing = find_week_issue(issues if issues is not None else labelled_issues(client, labels), week)
    if existing is None and not dry_run:
        # Look again, fresh, right before creating: the listing may be minutes old, and GitHub's
        # pagination is no snapshot (an issue unlabelled on page 1 while page 2 was read shifts
        # the week's issue onto the page already read). One more walk keeps a second issue away.
        existing = find_week_issue(labelled_issues(client, labels), week)
    if existing is not None:
        return _update(client, existing, title, body, dry_run)
    if dry_run:
        return PostOutcome("would-create", None, None, f"would create the {week} issue in {client.repo} (labels: {', '.join(labels)})")
    try:
        created = client.create_issue(title, body, labels)
    except WriteUncertain as exc:
        # The POST may have been applied: look before anything else, and never send it again blindly.
        again = find_week_issue(labelled_issues(client, labels), week)
        if again is None:
            raise WriteUncertain(
                f"creating the {week} issue did not complete ({exc}), and no issue with its marker exists yet; "
                "nothing was retried, so no duplicate can appear. Run again: porttrack looks for the marker before creating."
            ) from None
        outcome = _update(client, again, title, body, dry_run)
        return PostOutcome(outcome.action if outcome.action != "unchanged" else "created", again.number, again.html_url,
                           f"the create answered uncertainly, but issue #{again.number} carries the {week} marker: " + outcome.message)
    return PostOutcome("created", created.number, created.html_url, f"created issue #{created.number} for {week}")


def _update(client: "GitHubClient", issue: "Issue", title: str, body: str, dry_run: bool) -> PostOutcome:
    if issue.state == "closed":
        return PostOutcome(
            "closed-by-person", issue.number, issue.html_url,
            f"issue #{issue.number} for this week was closed by a person; porttrack leaves it closed and did not "
            "update it (reopen it to let porttrack update it again)",
        )
    if issue.body == body and issue.title == title:
        return PostOutcome("unchanged", issue.number, issue.html_url, f"issue #{issue.number} is already up to date")
    if dry_run:
        return PostOutcome("would-update", issue.number, issue.html_url, f"would update issue #{issue.number} (its body changed)")
    updated = client.update_issue(issue.number, title=title if issue.title != title else None, body=body if issue.body != body else None)
    return PostOutcome("updated", updated.number, updated.html_url or issue.html_url, f"updated issue #{issue.number}")


LINK_MARKER = "porttrack:weekly-link:"


def comment_tracking(client: "GitHubClient", tracking_issue: int, week: str, outcome: PostOutcome, *, dry_run: bool = False) -> str:
    """One comment per week on the fork's tracking issue, linking the week's issue (idempotent)."""
    from porttrack.github import WriteUncertain

    if outcome.number is None:
        return "no weekly issue to link"
    marker = f"<!-- {LINK_MARKER}{week} -->"
    if any(c.body.startswith(marker) for c in client.list_issue_comments(tracking_issue)):
        return f"#{tracking_issue} already links the {week} report"
    if dry_run:
        return f"would comment on #{tracking_issue} with a link to #{outcome.number}"
    body = f"{marker}\nWeekly status for {week}: #{outcome.number}\n"
    try:
        client.comment_issue(tracking_issue, body)
    except WriteUncertain:
        if any(c.body.startswith(marker) for c in client.list_issue_comments(tracking_issue)):
            return f"commented on #{tracking_issue} (confirmed after an uncertain answer)"
        raise
    return f"commented on #{tracking_issue} with a link to #{outcome.number}"


# --------------------------------------------------------------------------- write


def write_outputs(ws: Workspace, report: WeeklyReport, body: str) -> Path:
    """The full markdown under reports/ and this run in state/reports.json. Caller holds the lock."""
    path = ws.root / report.report_file
    atomic_write_text(path, body)
    record_run(ws, report, body)
    return path


def record_issue(ws: Workspace, report: WeeklyReport, body: str, repo: str, outcome: PostOutcome) -> None:
    if outcome.number is None:
        return
    record_run(ws, report, body, {"repo": repo, "number": outcome.number, "url": outcome.url, "action": outcome.action})


def to_json_text(report: WeeklyReport) -> str:
    return dump_json(report_to_json(report))


__all__ = [
    "BODY_LIMIT",
    "PostOutcome",
    "Since",
    "WeeklyReport",
    "check_permission",
    "comment_tracking",
    "fit_body",
    "gather",
    "iso_week",
    "post",
    "previous_report",
    "render",
    "report_to_json",
]
