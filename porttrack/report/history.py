"""The previous report, and the record of each run in `state/reports.json` (committed with the
workspace), so the next report counts changes from this one instead of guessing the past.

"The previous report" is, in order: `--since`; the newest run of an earlier week recorded in
`state/reports.json` (committed with the workspace); the creation time of the newest earlier
week's issue (when posting from a fresh CI checkout whose record is older); else the last 7 days.
"""

from __future__ import annotations

import hashlib
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Mapping, Sequence

from porttrack.common import markdown as md
from porttrack.common.clock import parse_moment, stamp
from porttrack.github.records import Issue
from porttrack.report.records import PostOutcome, Since, WeeklyReport
from porttrack.workspace.files import Workspace, atomic_write_text, load_runs, write_json

RECORD_SCHEMA = "porttrack/reports/v1"
RECORDS_KEPT = 104  # two years of weekly runs in state/reports.json
DEFAULT_WINDOW = timedelta(days=7)


def records_path(ws: Workspace) -> Path:
    return ws.state_dir / "reports.json"


def load_records(ws: Workspace) -> list[dict[str, Any]]:
    return load_runs(records_path(ws), RECORD_SCHEMA, key="reports", what="report")


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


def write_outputs(ws: Workspace, report: WeeklyReport, body: str) -> Path:
    """The full markdown under reports/ and this run in state/reports.json. Caller holds the lock."""
    path = ws.root / report.report_file
    atomic_write_text(path, body)
    record_run(ws, report, body)
    return path


def recorded_issue_number(ws: Workspace, week: str, repo: str) -> int | None:
    """The issue number this workspace recorded for `week` in `repo`, if any."""
    for entry in load_records(ws):
        issue = entry.get("issue") if entry.get("week") == week else None
        if isinstance(issue, dict) and issue.get("repo") == repo and isinstance(issue.get("number"), int):
            return issue["number"]
    return None


def record_issue(ws: Workspace, report: WeeklyReport, body: str, repo: str, outcome: PostOutcome) -> None:
    if outcome.number is None:
        return
    record_run(ws, report, body, {"repo": repo, "number": outcome.number, "url": outcome.url, "action": outcome.action})
