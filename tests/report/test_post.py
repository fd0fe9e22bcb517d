"""One weekly issue per week across checkouts (issue 17): two checkouts of the workspace — a
person's and the scheduled job's, with separate locks — post the same week at the same moment,
20 weeks in a row, as separate processes against the emulator over loopback. Exactly one open
issue a week; the later one is closed as a duplicate pointing at the first. And the week's issue
is found by the number state/reports.json recorded, or by its marker anywhere in the body."""

from __future__ import annotations

import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

from porttrack.common import markdown as md
from porttrack.common.clock import iso_week
from testing.github_emulator import DEFAULT_TOKEN
from testing.workspace import make_workspace, track

FORK, UPSTREAM = "randomvariable/vllm", "vllm-project/vllm"
WEEKS = 20


def _checkout(root: Path, fake):
    ws = make_workspace(root, {"t": track([101])}, api_url=fake.base_url, token=DEFAULT_TOKEN)
    return ws


def _post(ws, now: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "porttrack", "report", "weekly", "--offline", "--post", "--now", now],
                            cwd=ws.root, env=ws.env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _open_by_week(fake) -> dict[str, list[dict]]:
    weeks: dict[str, list[dict]] = {}
    for issue in fake.issues(FORK):
        week = md.find_marker(issue["body"] or "")
        if week and issue["state"] == "open":
            weeks.setdefault(week, []).append(issue)
    return weeks


def test_two_checkouts_posting_the_same_week_at_once_leave_one_open_issue(tmp_path: Path, fake) -> None:
    fake.add_repo(FORK)
    fake.add_repo(UPSTREAM)
    person, job = _checkout(tmp_path / "person", fake), _checkout(tmp_path / "job", fake)
    # Every answer takes 0.4 s, as over a real network: both runs list the week's issues (and list
    # again right before creating) before either create lands, so the race really happens.
    fake.latency_s = 0.4
    start = datetime(2026, 6, 1, 8, tzinfo=timezone.utc)
    weeks = []
    for i in range(WEEKS):
        now = (start + timedelta(weeks=i)).strftime("%Y-%m-%dT%H:%M:%SZ")
        runs = [_post(person, now), _post(job, now)]
        for run in runs:
            _, err = run.communicate(timeout=120)
            assert run.returncode == 0, err
        weeks.append(iso_week(start + timedelta(weeks=i)))
    by_week = _open_by_week(fake)
    assert sorted(by_week) == sorted(weeks)
    assert all(len(issues) == 1 for issues in by_week.values()), {w: [i["number"] for i in v] for w, v in by_week.items() if len(v) > 1}
    created = len(fake.requests("POST", r"/issues$"))
    closed = [i for i in fake.issues(FORK) if i["state"] == "closed"]
    assert created == WEEKS + len(closed)  # every extra one a racer created was closed again
    assert closed, "the two runs never raced: the test proves nothing"
    for dup in closed:
        comments = fake.requests("POST", rf"/issues/{dup['number']}/comments$")
        assert comments, f"duplicate #{dup['number']} was closed without a pointer"


def test_the_recorded_number_and_a_marker_below_a_persons_line_find_the_weeks_issue(tmp_path: Path, fake) -> None:
    fake.add_repo(FORK)
    fake.add_repo(UPSTREAM)
    ws = _checkout(tmp_path / "ws", fake)
    now = "2026-11-30T08:00:00Z"
    first = ws.run("report", "weekly", "--offline", "--post", "--now", now)
    assert first.returncode == 0, first.stderr
    [issue] = fake.issues(FORK)
    # a person adds a line above the hidden marker, and the labels are removed: the listing no
    # longer finds it, but state/reports.json has its number
    fake.put_issue(FORK, issue["number"], body="Reviewed by the maintainer.\n\n" + issue["body"], labels=[])
    again = ws.run("report", "weekly", "--offline", "--post", "--now", now)
    assert again.returncode == 0, again.stderr
    assert [i["number"] for i in fake.issues(FORK)] == [issue["number"]]
    # and a fresh checkout, with no record: the marker is found below the person's line
    fake.put_issue(FORK, issue["number"], labels=["porttrack", "weekly-status"])
    fresh = _checkout(tmp_path / "fresh", fake).run("report", "weekly", "--offline", "--post", "--now", now)
    assert fresh.returncode == 0, fresh.stderr
    assert [i["number"] for i in fake.issues(FORK)] == [issue["number"]]
