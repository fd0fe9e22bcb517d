"""The figures porttrack shows are the emulator's own (issue 24): the requests left are those the
last answer stated, "live poll, N requests" is what was sent, "PRs answered" counts answers, not
attempts; and `report weekly` exits like `status` when it could not poll, still writing the
recorded-state report. Tokenless, against the GitHub emulator's request accounting on loopback."""

from __future__ import annotations

import re

import pytest

from porttrack.common.errors import ExitCode
from testing.workspace import make_workspace, track


@pytest.fixture
def anon(tmp_path, world):
    """An open PR and one closed without merging (its successors are searched), no token."""
    world.open_pr(101, {"a.py": "a = 1\n"}, "First")
    world.open_pr(102, {"b.py": "b = 1\n"}, "Second")
    world.close(102)
    world.open_pr(103, {"b.py": "b = 2\n"}, "Second, again", body="Supersedes #102")
    ws = make_workspace(tmp_path / "ws", {"one": track([101]), "two": track([102])},
                        api_url=world.fake.base_url, fork=world.fork, token=None)
    ws.extra_env["PORTTRACK_HTTP_BACKOFF"] = "0.01"
    return ws


def _figures(out) -> tuple[int, int]:
    left = re.search(r"unauthenticated: (\d+) of 60 requests left this hour", out.stderr)
    sent = re.search(r"live poll, (\d+) requests?", out.stdout)
    assert left and sent, (out.stdout, out.stderr)
    return int(left.group(1)), int(sent.group(1))


@pytest.mark.parametrize("run", ["cold", "warm"])
def test_status_shows_the_budget_after_its_last_request_and_every_request_sent(anon, world, run):
    if run == "warm":
        assert anon.run_in_process("status").returncode == 0
    world.fake.clear_log()
    out = anon.run_in_process("status")
    assert out.returncode == 0, out.stderr
    left, sent = _figures(out)
    searches = [r for r in world.fake.log if "/search/" in r.path or "/timeline" in r.path or "/issues" in r.path]
    assert searches, "the closed PR's successors were searched: the figures must include those requests"
    assert sent == len(world.fake.log), f"'live poll, {sent} requests' but the emulator saw {len(world.fake.log)}"
    assert left == world.fake.anonymous_rate_limit()["remaining"], "the budget shown is the one left after the last request"


def test_prs_answered_counts_answers_not_attempts(anon, world):
    world.fake.inject("status", path=r"/pulls/\d+$", status=502, times=100)
    out = anon.run("status")  # a separate process: progress lines go to a real stderr pipe
    assert out.returncode == ExitCode.UNREACHABLE, out.stderr
    answered = re.findall(r"PRs answered: (\d+)/(\d+)", out.stderr)
    assert all(done == "0" for done, _ in answered), f"every request failed, yet: {answered}"


def test_report_exits_like_status_when_it_could_not_poll_and_still_writes_the_report(anon, world):
    assert anon.run_in_process("status").returncode == 0
    world.fake.inject("status", path=r"/pulls/", status=502, times=1000)
    status = anon.run_in_process("status")
    assert status.returncode == ExitCode.UNREACHABLE, status.stderr
    out = anon.run_in_process("report", "weekly")
    assert out.returncode == status.returncode, out.stderr
    assert list((anon.root / "reports").glob("weekly-*.md")), "the recorded-state report is still written"
    assert "#101" in out.stdout
    assert anon.run_in_process("report", "weekly", "--offline").returncode == 0, "asked offline is no failure"
