"""One poll a week's work shares (issue 24): `status`, `report weekly --dry-run` and
`report weekly --post`, tokenless, against the GitHub emulator's accounting with GitHub's
unauthenticated rule (60 requests an hour per address; a 304 costs none), for five tracked PRs
(one closed without merging, with a successor), one queued patch and ~270 open upstream PRs."""

from __future__ import annotations

import re

import pytest

from porttrack.common.errors import ExitCode
from porttrack.observe.collisions import RESERVE
from testing.weekly_budget import build, critical_path

RITUAL = (("status",), ("report", "weekly", "--dry-run"), ("report", "weekly", "--post"))


@pytest.fixture
def ritual(tmp_path, fake):
    ws, world = build(tmp_path, fake)
    fake.set_anonymous_rate_limit(remaining=60)  # the import spent some: a fresh hour starts here
    return ws, world


def _run(ws, fake, *args):
    fake.clear_log()
    out = ws.run_in_process(*args)
    return out, list(fake.log)


def test_cold_and_warm_rituals_fit_the_tokenless_hour(ritual, fake):
    ws, _ = ritual
    cold = []
    for args in RITUAL:
        out, log = _run(ws, fake, *args)
        cold.append((args, out.returncode, counted_of(log)))
    assert [rc for _, rc, _ in cold] == [0, 0, ExitCode.AUTH], cold
    assert sum(n for *_, n in cold) <= 20, cold
    warm = []
    for args in RITUAL:
        out, log = _run(ws, fake, *args)
        warm.append((args, out.returncode, counted_of(log)))
    assert sum(n for *_, n in warm) <= 3, warm
    assert fake.anonymous_rate_limit()["remaining"] >= RESERVE - 3, "the hour keeps its reserve for polls"


def counted_of(log) -> int:
    return sum(1 for r in log if r.status is not None and r.status != 304)


def test_post_without_a_token_reads_writes_the_report_then_refuses_with_exit_3(ritual, fake):
    ws, _ = ritual
    out, log = _run(ws, fake, "report", "weekly", "--post")
    assert out.returncode == ExitCode.AUTH, out.stderr
    assert "not posted" in out.stderr and "GITHUB_TOKEN" in out.stderr
    assert any("/pulls/" in r.path for r in log), "the reads happened before the refusal"
    assert not [r for r in log if r.method != "GET"], "nothing was sent that writes"
    assert list((ws.root / "reports").glob("weekly-*.md")), "the week's report is written all the same"
    assert "#48804" in out.stdout


def test_the_report_asks_what_status_asked_and_its_304s_cost_nothing(ritual, fake):
    ws, _ = ritual
    status, status_log = _run(ws, fake, "status")
    assert status.returncode == 0, status.stderr
    out, log = _run(ws, fake, "report", "weekly", "--dry-run")
    assert out.returncode == 0, out.stderr
    assert log and all(r.status == 304 for r in log), [(r.path, r.status) for r in log if r.status != 304]
    assert {r.path for r in log} <= {r.path for r in status_log}


def test_successor_searches_are_skipped_when_the_orphan_and_its_timeline_answer_304(ritual, fake):
    ws, _ = ritual
    _, cold = _run(ws, fake, "status")
    assert any(r.path == "/search/issues" for r in cold) and any("creator" in r.query for r in cold)
    out, warm = _run(ws, fake, "status")
    assert out.returncode == 0, out.stderr
    assert not [r for r in warm if r.path == "/search/issues" or "creator" in r.query]
    timeline = [r for r in warm if r.path.endswith("/issues/48804/timeline")]
    assert timeline and timeline[0].status == 304
    assert "follow #56323?" in out.stdout, "the remembered search still says what to do"


def test_a_changed_timeline_asks_the_searches_again(ritual, fake):
    ws, world = ritual
    _run(ws, fake, "status")
    world.open_pr(56999, {"vllm/model_executor/warmup/w1.py": "x\n"}, "Takes over", body="Supersedes #48804")
    _, log = _run(ws, fake, "status")
    assert any(r.path == "/search/issues" for r in log)


def test_searches_run_concurrently(ritual, fake):
    """Round trips on the critical path from the emulator's log (not timed). Cold: the poll's wave;
    the successors' sources together, then each candidate's two reads, while the listing's pages
    are read; one wave of file lists. Warm: the poll, then the timeline (304) with the listing's
    pages (304) at once."""
    ws, _ = ritual
    fake.latency_s = 0.05  # at 0 ms the log cannot tell requests in flight together from a chain
    _, cold = _run(ws, fake, "status")
    assert critical_path(cold) <= 6, sorted((round(r.time, 3), r.path) for r in cold)
    _, warm = _run(ws, fake, "status")
    assert critical_path(warm) <= 3, sorted((round(r.time, 3), r.path) for r in warm)


def test_the_scan_goes_on_hour_by_hour_repeats_nothing_and_never_says_none_while_cut(tmp_path, fake):
    ws, world = build(tmp_path, fake, open_prs=60, git_heads=False)  # a host that serves no pull refs
    asked: set[str] = set()
    checked = []
    for hour in range(10):
        fake.set_anonymous_rate_limit(remaining=60)
        out, log = _run(ws, fake, "status")
        assert out.returncode == 0, out.stderr
        files = [r.path for r in log if r.path.endswith("/files") and r.status == 200 and "/pulls/6" in r.path]
        assert not set(files) & asked, "a PR whose head did not move is not asked for again"
        asked |= set(files)
        report = ws.run_in_process("report", "weekly", "--dry-run")
        m = re.search(r"(\d+) of (\d+) open PRs checked so far", report.stdout)
        if m is None:
            break
        checked.append(int(m.group(1)))
        assert "none." not in report.stdout.split(m.group(0))[1].split("\n")[0], "a cut scan never says none"
        assert "without a token" in report.stdout
    assert checked == sorted(checked) and len(checked) >= 2, checked
    assert re.search(r"\(all \d+ open PRs checked\):", report.stdout), report.stdout
    assert re.search(r"^- \[#60007\]\(https://[\w.]*github\.com/vllm-project/vllm/pull/60007\) open 60007 — with `0001-", report.stdout, re.M), \
        report.stdout.split("## Patch queue")[1][:1500]
    assert "open upstream PRs compared" not in report.stdout


def test_the_issue_says_it_as_a_colleague_would(ritual, fake):
    """No request accounting or internal labels in the weekly issue: the collision scan in words with
    its reason, a merge of today not "waiting 0 days", the successor's yaml as a block only."""
    from testing.gfm import cmark

    ws, _ = ritual
    assert ws.run_in_process("status").returncode == 0
    out = ws.run_in_process("report", "weekly", "--dry-run")
    assert out.returncode == 0, out.stderr
    body = out.stdout
    for internal in ("collisions ahead", "open upstream PRs compared", "compared)", "searches cost", "answered 304",
                     "waiting 0 days", "tracks.yaml: warm: prs:", "request limit"):
        assert internal not in body, internal
    # every open PR compared through git in the first run: the whole scan, in words, no accounting
    assert re.search(r"would conflict with the queue at the next rebase \(all \d+ open PRs checked\):", body), body
    assert "merged " in body and "(today), not checked on the fork yet" in body
    html = cmark(body)
    assert "follow <a href=" in html and '<pre><code class="language-yaml">tracks:' in html


# -- issue 32, item 2: the token-less week within 20 counted requests, all open PRs compared ------

WEEK = (("status",),) * 7 + (("report", "weekly", "--dry-run"), ("report", "weekly", "--post"))


@pytest.mark.parametrize("open_prs", [244, 1000])
def test_a_scripted_week_without_a_token_costs_at_most_20_counted_requests(tmp_path, fake, open_prs):
    """Seven daily `status`, `report weekly --dry-run`, `report weekly`: counted by the emulator's
    own log (answered, not 304). Every open PR is compared in the first run (through git: their
    refs/pull/N/head), the colliding #60007 found; the old file-list scan cost 141 for 244."""
    ws, _ = build(tmp_path, fake, open_prs=open_prs)
    fake.set_anonymous_rate_limit(remaining=60)
    costs = []
    for args in WEEK:
        out, log = _run(ws, fake, *args)
        assert out.returncode == (ExitCode.AUTH if "--post" in args else 0), out.stderr
        costs.append(counted_of(log))
        if args == ("status",) and len(costs) == 1:
            assert f"collisions ahead ({open_prs} of {open_prs} open PRs compared):" in out.stdout, out.stdout
            assert "open #60007" in out.stdout and f"compared {open_prs} through git" in out.stdout
    print(f"\n{open_prs} open PRs: counted per run {costs}, total {sum(costs)}")
    assert sum(costs) <= 20, costs
    assert not [r for r in fake.log if r.path.endswith("/files") and "/pulls/6" in r.path], "no open PR's file list"
