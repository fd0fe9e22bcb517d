"""Gather: everything the weekly issue says, as plain records (`WeeklyReport`).

Upstream state (a fresh poll, or the recorded state when offline — the report says which), what
changed since the previous report (from the per-PR event history in `state/upstream.json`, never
from a machine-local cache), the queue, gate verdicts, eligibility, convergence verdicts, trends
of each track's key metric, and every problem met on the way. A part porttrack cannot evaluate
(an unreadable or malformed record) becomes a line in `problems`, never a crash and never a
silent gap.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from porttrack.common.clock import iso_week, parse_moment, stamp
from porttrack.common.errors import InputError, PorttrackError
from porttrack.converge.record import RecordedVerdict, latest_verdicts
from porttrack.git.repo import GitRepo
from porttrack.observe.collisions import render_lines as render_collisions
from porttrack.observe.successors import SHOWN as SUCCESSORS_SHOWN
from porttrack.observe.successors import render_lines as render_successors
from porttrack.prove import evidence, gates
from porttrack.prove.evidence import EvidenceLog
from porttrack.queue import manifest as queue_mod
from porttrack.report.knowledge import Findings, record_findings, recorded_findings, search_upstream, with_findings
from porttrack.report.knowledge import gather as gather_knowledge
from porttrack.report.records import (
    Change,
    EligibilityCell,
    EligibilityRow,
    GateCell,
    GateSection,
    LeftOut,
    Problem,
    PRSection,
    QueueRow,
    Since,
    TrackSection,
    Trend,
    TrendSeries,
    WeeklyReport,
)
from porttrack.report.status import Knowledge, PRStatus, StatusReport, recorded_ago, refresh
from porttrack.tracks import eligibility
from porttrack.tracks.config import Config
from porttrack.workspace import state as state_mod
from porttrack.workspace.files import Workspace

if TYPE_CHECKING:
    from porttrack.github.client import GitHubClient

TREND_WEEKS = 12  # how many past weeks the trend charts show


def _after(at: str | None, since: str) -> bool:
    return bool(at and at > since)  # both are UTC `...Z` stamps: string order is time order


@dataclass
class _Problems:
    items: list[Problem] = field(default_factory=list)

    def add(self, where: str, what: str) -> None:
        problem = Problem(where, " ".join(str(what).split()))
        if problem not in self.items:
            self.items.append(problem)


def gather(
    ws: Workspace,
    config: "Config",
    *,
    now: datetime,
    since: Since,
    client: "GitHubClient | None",
    fork: GitRepo | None = None,
    fork_problem: str | None = None,
    dry_run: bool = False,
    progress: Callable[[str], None] | None = None,
) -> WeeklyReport:
    """Everything the weekly issue says, as plain records. Never raises for a part it cannot
    evaluate: that part becomes a problem line instead.

    `client`: the upstream's GitHub client, None for --offline (the recorded state is shown);
    `fork`: the fork checkout (hand-port coverage, convergence verdicts bound to its branch tip),
    or None and why (`fork_problem`)."""
    problems = _Problems()
    know = _knowledge(ws, config, fork, fork_problem, problems)
    status_report, poll_problem = _status(ws, config, client, dry_run, progress, know, problems)
    findings = _search(ws, config, client, status_report, dry_run, fork) if status_report.mode == "live" and client is not None else None
    if findings is not None and not dry_run:
        record_findings(ws, findings, status_report.observed_at)
    if findings is None and status_report.mode == "offline":  # the last live run's successors, said as such
        findings = recorded_findings(ws, config, status_report)
    if findings is not None:
        # "follow #N?" for an orphan with a successor; the issue shows the tracks.yaml change as a block
        status_report = with_findings(status_report, findings, yaml_hint=False)
    found = _found(findings)
    upstream_state = _recorded_state(ws, config, problems)
    verdicts = _convergence(ws, config, fork, fork_problem, problems)
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
            # the exit code `status` gives for the failed poll (null: polled, or offline by choice)
            # (a PR GitHub kept failing for, shown as recorded: 5, as `status` gives)
            "poll_exit_code": int(poll_problem.exit_code) if poll_problem is not None else (5 if status_report.failed else None),
            "not_polled": {str(n): why for n, why in sorted(status_report.failed.items())},
            "recorded_before_period": _recorded_before(status_report.observed_at, since.at),
        },
        tracks=_tracks(config, status_report, upstream_state, since.at, now, verdicts),
        queue=_queue_rows(queue, since.at),
        gates=_gates(config, queue, log, proofs, problems),
        eligibility=(elig := _eligibility(config, proofs))[0],
        eligibility_tracks=elig[1],
        trends=_trends(config, log, now),
        problems=(),
        report_file=report_file(ws, config, week),
        profile=config.rules.name,
        found=found,
    )
    for track in report.tracks:
        for pr in track.prs:
            if pr.state == "unobserved":
                problems.add(f"#{pr.number}", "never observed: run a live `porttrack status`")
            for note in pr.status.notes:
                if note.kind == "coverage-unknown":
                    problems.add(f"#{pr.number}", note.text)
    if status_report.mode == "offline":
        age = recorded_ago(status_report.observed_at, now)
        problems.add("upstream", f"offline, showing the state recorded at {status_report.observed_at or 'never'} ({age}): {status_report.offline_reason}")
    return replace(report, problems=tuple(problems.items), sections=sections_that_apply(config, report))


def sections_that_apply(config: "Config", report: WeeklyReport) -> tuple[str, ...]:
    """The profile's sections, less those shown only "when-filled" that have nothing to show: a
    report never carries an empty section that means nothing for the project."""
    filled = {"gates": bool(report.gates), "trends": bool(report.trends), "eligibility": bool(report.eligibility)}
    return tuple(name for name, rule in config.rules.report_sections if rule == "always" or filled.get(name, True))


def report_file(ws: Workspace, config: "Config", week: str) -> str:
    return f"{config.report.output_dir.rstrip('/')}/weekly-{week}.md"


def _search(ws: Workspace, config: "Config", client: "GitHubClient", status_report: "StatusReport",
            dry_run: bool, fork: GitRepo | None) -> Findings:
    """The searches (they never fail a report: a cut-short search says why in its own lines). Their
    answers' ETags are kept like the poll's, so next week's searches are conditional."""
    findings = search_upstream(ws, config, client, status_report, fork)
    if not dry_run:
        client.save_cache()
    return findings


def _found(findings: Findings | None) -> Mapping[str, Any] | None:
    """Successor candidates of orphaned PRs and collisions ahead, as `status` shows them."""
    if findings is None or findings.skipped:
        return None
    return {"successors": {str(s.pr): render_successors(s) for s in findings.successors},
            "follow": {str(s.pr): _follow(s) for s in findings.successors},
            "collisions": render_collisions(findings.collisions) if findings.collisions is not None else [],
            "collisions_ahead": _ahead(findings.collisions) if findings.collisions is not None else None,
            "cost": findings.cost.text if findings.cost else "",
            "recorded_at": findings.recorded_at}


def _ahead(search) -> Mapping[str, Any]:
    """Collisions ahead as the weekly issue says them: how many open PRs were checked of how many,
    why the rest were not, and each collision (PR, title, the queued patch, what both change)."""
    return {"checked": search.compared, "open_prs": search.open_prs, "complete": search.complete,
            "why_not_all": search.problem,
            "items": [{"number": c.upstream, "title": c.title, "patch": c.patch,
                       "what": "; ".join(o.words for o in c.overlaps[:3])} for c in search.collisions]}


def _follow(search) -> Mapping[str, Any]:
    """A successor search as the weekly issue shows it: the best candidates (number, title, why)
    and the tracks.yaml change that follows the one `status` proposes (a candidate sharing at least
    half the hunks, `SuccessorSearch.follow`), as text to paste (`status`'s lines are kept in
    "successors" for --json)."""
    shown = search.candidates[:SUCCESSORS_SHOWN]
    best = search.follow()
    adopt = "\n".join(("tracks:", *search.adopt_lines(best))) + "\n" if best is not None else None
    return {"candidates": [{"number": c.number, "title": c.title, "why": c.text, "draft": c.draft, "warning": c.warning,
                            "reasons": [{"kind": r.kind, "detail": r.detail} for r in c.reasons]} for c in shown],
            "pr": search.pr,
            "tracks_yaml": adopt, "problem": search.problem}


def _knowledge(ws: Workspace, config: "Config", fork: GitRepo | None, fork_problem: str | None, problems: _Problems):
    try:
        return gather_knowledge(ws, config, fork, fork_problem)
    except PorttrackError as exc:
        problems.add("coverage", str(exc))
        return Knowledge()


def _status(ws, config, client, dry_run, progress, know, problems) -> "tuple[StatusReport, PorttrackError | None]":
    report, problem = refresh(ws, config, client=client, repo=None, dry_run=dry_run, progress=progress, know=know)
    if problem is not None:
        problems.add("upstream", f"the poll failed ({problem}); this report shows the recorded state")
    for number, why in sorted(report.failed.items()):
        problems.add("upstream", f"#{number} was not polled ({why}); it is shown as recorded, the rest live")
    return report, problem


def _recorded_state(ws: Workspace, config: "Config", problems: _Problems):
    try:
        return state_mod.load(ws.upstream_state_file, config.upstream.repo)
    except PorttrackError as exc:
        problems.add("upstream", str(exc))
        return state_mod.UpstreamState(config.upstream.repo, None, "unreadable")


def _recorded_before(observed_at: str | None, since: str) -> bool:
    """The upstream state was recorded before the report's period began (or never): changes in
    the period cannot be known, and the report must say so rather than show "no change"."""
    return not observed_at or observed_at <= since


def _convergence(ws: Workspace, config: "Config", fork: GitRepo | None, fork_problem: str | None,
                 problems: _Problems) -> dict[int, RecordedVerdict]:
    """PR -> its last convergence verdict in words; one not for fork.branch at its tip now says
    so (stale, for another ref, or unconfirmed) instead of passing for current."""
    try:
        return latest_verdicts(ws, config.fork.branch, fork, fork_problem)
    except PorttrackError as exc:
        problems.add("convergence", str(exc))
        return {}


def _queue(ws: Workspace, problems: _Problems):
    try:
        queue = queue_mod.load(ws)
    except PorttrackError as exc:
        problems.add("queue", str(exc))
        return queue_mod.Queue()
    if queue.series_stale:
        problems.add("queue", "patches/series does not match manifest.json; the next queue change rewrites it")
    for patch in queue.live():  # a patch that applies but cannot run is not healthy (issue 21, class 8)
        if patch.source_check is not None and not patch.source_check.ok:
            problems.add("queue", f"{patch.name}: {patch.source_check.text}")
    return queue


def _evidence(ws: Workspace, problems: _Problems):
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
        return gates.proofs_passed(ws, config)
    except PorttrackError as exc:
        problems.add("proofs", str(exc))
    return frozenset()


# -- upstream, per track ----------------------------------------------------------------------


def _tracks(config, status_report, upstream_state, since: str, now: datetime,
            verdicts: Mapping[int, RecordedVerdict]) -> tuple[TrackSection, ...]:
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


def _pr_section(pr: PRStatus, tracked: bool, upstream_state, since: str, moment: datetime,
                verdicts: Mapping[int, RecordedVerdict], observed_at: str | None) -> PRSection:
    now = stamp(moment)
    recorded = upstream_state.prs.get(pr.number)
    changes: list[Change] = []
    for event in recorded.events if recorded else ():
        if _after(event.at, since) and event.at <= now:
            changes.append(Change(event.at, event.kind, event.detail))
    # A dry run does not record the poll, so its fresh events are only in the status report.
    seen = {(c.kind, c.detail) for c in changes}
    for event in pr.changes:
        if (event.kind, event.detail) not in seen:
            changes.append(Change(observed_at, event.kind, event.detail))
    changes.sort(key=lambda c: c.at or "")
    verdict = verdicts.get(pr.number)
    return PRSection(pr, tracked, tuple(changes), verdict.words if verdict else None,
                     _waiting_days(pr, verdict, moment))


def _waiting_days(pr: PRStatus, verdict: RecordedVerdict | None, moment: datetime) -> int | None:
    """Whole days a merged PR has waited for a convergence verdict that holds for the fork
    branch's tip now (a stale or unconfirmed one does not end the wait); None when not waiting."""
    if pr.state != "merged" or not pr.merged_at or (verdict is not None and verdict.current):
        return None
    try:
        return max(0, (moment - parse_moment(pr.merged_at)).days)
    except InputError:
        return None


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
                source_check=None if patch.source_check is None else patch.source_check.text,
                source_check_ok=None if patch.source_check is None else patch.source_check.ok,
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
    if log is None:
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


_WORST = {"fail": 3, "missing": 2, "pass": 1}


def _worst(outcomes: Iterable[str]) -> str:
    found = [o for o in outcomes if o in _WORST]
    return max(found, key=_WORST.__getitem__) if found else "missing"


def _from_check(subject, result, log) -> GateSection:
    """One row per model x context x batch x target; cold and warm side by side, never merged."""
    gate = subject.gate
    key_metric = gate.key_metric if gate is not None else None
    rows: dict[tuple[Any, str], dict[str | None, Any]] = {}
    for cell in result.cells:
        row = rows.setdefault((cell.coords, cell.target), {})
        row[cell.phase] = cell
    cells = tuple(_gate_row(key, phases, gate, key_metric) for key, phases in rows.items())
    superseded = []
    for record in log.for_subject(subject.kind, subject.name):
        sup = log.superseded_by(record.id)
        if sup is not None:
            superseded.append({"id": record.id, "target": record.target, "role": record.role, "recorded_at": record.recorded_at,
                               "superseded_at": sup.recorded_at, "reason": sup.reason, "replaced_by": sup.replaced_by})
    no_evidence = bool(result.cells) and all(c.evidence is None and c.verdict == "missing" for c in result.cells)
    left_out = [f"not required: {left.model} ({left.verdict}: {'; '.join(left.reasons)})"
                for left in (result.required.left_out if result.required is not None else ())]
    notes = _cell_notes(result.cells) + left_out
    if result.required is None and result.reason:
        notes.append(result.reason)
    if no_evidence:  # a table of "no evidence" rows says less than one sentence
        cells = ()
        notes = [f"no evidence yet for any of the {len(result.cells)} required cells"] + left_out
    gpu_axes = result.required is None or tuple(name for name, _ in result.required.axes) == gates.GPU_AXES
    return GateSection(
        gpu_axes=gpu_axes,
        phases=tuple(gate.phases or ()) if gate is not None else (),
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
        if tuple(name for name, _ in cell.coords) == gates.GPU_AXES:
            where = f"{cell.model} ctx {cell.context} batch {cell.batch} {cell.target} {cell.phase}"
        else:
            where = cell.label
        grouped.setdefault((cell.verdict, cell.reason), []).append(where)
    words = {"fail": "fails", "missing": "incomplete", "baseline-missing": "no baseline",
             "baseline-other-environment": "baseline from another environment"}
    return [f"{words.get(verdict, verdict)} — {', '.join(where)}: {reason}" for (verdict, reason), where in grouped.items()]


def _gate_row(key, phases: Mapping[str | None, Any], gate, key_metric) -> GateCell:
    coords, target = key
    named = dict(coords)

    def phase_verdict(phase: str | None) -> str:
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
        for phase in ("cold", "warm", None):
            cell = phases.get(phase)
            check = next((k for k in cell.checks if k.check == f"metric:{key_metric.name}"), None) if cell else None
            said = f"{phase} " if phase else ""
            if check is not None and check.regression_pct is not None:
                pct = check.regression_pct
                words = "unchanged" if abs(pct) < 0.05 else f"{abs(pct):.1f}% {'worse' if pct > 0 else 'better'}"
                parts.append(f"{said}{words}" + (" ❌" if check.outcome == "fail" else ""))
            elif cell is not None and cell.verdict in ("baseline-missing", "baseline-other-environment"):
                parts.append(f"{said.strip() + ': ' if said else ''}{'no baseline' if cell.verdict == 'baseline-missing' else 'baseline from another environment'}")
        if parts:
            regression = ", ".join(parts)
    gpu = tuple(named) == gates.GPU_AXES
    return GateCell(
        model=named.get("model"),
        context=named.get("context"),
        batch=named.get("batch"),
        where="" if gpu else gates.describe_coords(coords),
        verdict=phase_verdict(None) if None in phases else "",
        target=target,
        cold=phase_verdict("cold"),
        warm=phase_verdict("warm"),
        reference=outcome("numerics", gate is not None and (gate.reference_backend is not None or gate.tolerance is not None)),
        regression=regression,
        graph_replay=outcome("graph-replay", gate is not None and gate.graph_replay == "required"),
        jit=outcome("no-jit-after-warmup", gate is not None and gate.no_jit_after_warmup == "required"),
    )


# -- eligibility ------------------------------------------------------------------------------


def _eligibility(config: "Config", proofs: frozenset[str]):
    result = eligibility.evaluate(config, proofs)
    tracks = tuple(t.track for t in result.tracks)
    rows = []
    for model in config.models:
        cells = tuple(EligibilityCell(t.track, c.verdict, tuple(c.reasons), _short_reasons(c.why))
                      for t in result.tracks for c in t.cells if c.model == model)
        rows.append(EligibilityRow(model, cells))
    return tuple(rows), tracks


def _short_reasons(reasons: Iterable[eligibility.Reason]) -> str:
    """"attention: hybrid; proof x" for a table cell; the full sentences stay in the JSON."""
    short: list[str] = []
    for reason in reasons:
        if reason.summary not in short:
            short.append(reason.summary)
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
            for phase in ("cold", "warm", None):
                values = tuple(_metric(newest[w, target], cell, phase, metric.name) if (w, target) in newest else None for w in weeks)
                if any(v is not None for v in values):
                    series.append(TrendSeries(target, phase or "", values))
        if series:
            trends.append(Trend(track_id, metric.name, metric.unit, metric.direction, _trend_where(cell), weeks, tuple(series)))
    return tuple(trends)


def _trend_where(coords: tuple[tuple[str, Any], ...]) -> str:
    named = dict(coords)
    if tuple(named) == gates.GPU_AXES:
        return f"{named['model']}, context {named['context']}, batch {named['batch']}"
    return ", ".join(f"{name} {value}" for name, value in coords) or "the gate's one cell"


def _trend_cell(gate, records, metric: str) -> tuple[tuple[str, Any], ...] | None:
    models = getattr(gate.matrix, "models", None)
    order_models = models if isinstance(models, list) else []

    def order(coords: tuple[tuple[str, Any], ...]) -> tuple:
        model = dict(coords).get("model")
        rank = order_models.index(model) if model in order_models else len(order_models)
        return (rank, *((0, v, "") if isinstance(v, int) else (1, 0, str(v)) for _, v in coords))

    seen = sorted({tuple(gates.cell_coords(c).items()) for r in records for c in r.cells if metric in (c.get("metrics") or {})}, key=order)
    return seen[0] if seen else None


def _metric(record, cell: tuple[tuple[str, Any], ...], phase: str | None, metric: str) -> float | None:
    found = gates.find_cell(record, cell, phase)
    value = (found or {}).get("metrics", {}).get(metric)
    return float(value) if isinstance(value, (int, float)) else None


def _week_of(at: str) -> str:
    try:
        return iso_week(parse_moment(at))
    except InputError:
        return ""
