"""Live reads without a token (issue 13): a public upstream is polled unauthenticated, with
conditional requests, and the budget left (60 an hour per address) is shown from the answers'
headers; writes still need a token and say which variables give one; offline views say how old the
recorded state is. The CLI in-process and the GitHub emulator over loopback."""

from __future__ import annotations

import json
import re
from datetime import datetime, timedelta, timezone

import pytest

from porttrack.common.errors import ExitCode, GitHubAuthError
from porttrack.github.client import GitHubClient
from testing.workspace import make_workspace, track

UPSTREAM = "vllm-project/vllm"
TOKEN_WORDS = ("GITHUB_TOKEN", "GH_TOKEN", "gh auth login")


@pytest.fixture
def anon(tmp_path, world):
    """Two open upstream PRs, tracked from a workspace that has no token at all."""
    world.open_pr(101, {"a.py": "a = 1\n"}, "First")
    world.open_pr(102, {"b.py": "b = 1\n"}, "Second")
    ws = make_workspace(tmp_path / "ws", {"one": track([101]), "two": track([102])},
                        api_url=world.fake.base_url, fork=world.fork, token=None)
    ws.extra_env["PORTTRACK_HTTP_BACKOFF"] = "0.01"
    return ws


def _status(ws, *args):
    out = ws.run_in_process("status", "--json", *args)
    return out, (json.loads(out.stdout) if out.stdout.strip() else None)


def test_unauthenticated_status_polls_conditionally_and_a_second_run_is_all_304s(anon, world):
    fake = world.fake
    first, report = _status(anon)
    assert first.returncode == 0, first.stderr
    assert report["mode"] == "live" and report["authenticated"] is False
    assert {p["number"]: p["state"] for t in report["tracks"] for p in t["prs"]} == {101: "open", 102: "open"}
    polls = [r for r in fake.requests() if "/pulls/" in r.path]
    assert len(polls) == 2 and not [r for r in fake.log if r.auth_present]
    assert fake.anonymous_rate_limit()["remaining"] == 60 - len(fake.requests())
    left = fake.anonymous_rate_limit()["remaining"]
    assert (report["rate_limit"]["limit"], report["rate_limit"]["remaining"]) == (60, left)
    assert f"unauthenticated: {left} of 60 requests left this hour" in first.stderr
    assert "GITHUB_TOKEN" in first.stderr, "it says how to raise the budget"
    assert not [r for r in fake.log if r.path == "/rate_limit"], "the budget comes from the answers' headers"

    fake.clear_log()
    second, report = _status(anon)
    assert second.returncode == 0, second.stderr
    polls = [r for r in fake.log if "/pulls/" in r.path]
    assert len(polls) == 2 and all(r.conditional and r.matched_etag and r.status == 304 for r in polls)
    assert fake.anonymous_rate_limit()["remaining"] == left, "a 304 costs no rate limit"
    assert report["rate_limit"]["remaining"] == left
    assert f"unauthenticated: {left} of 60 requests left this hour" in second.stderr
    assert "live poll, 2 requests, unauthenticated" in anon.run_in_process("status").stdout


def test_a_change_upstream_is_seen_without_a_token(anon, world):
    assert _status(anon)[0].returncode == 0
    world.append(101, {"a.py": "a = 2\n"})
    out, report = _status(anon)
    assert out.returncode == 0, out.stderr
    [pr] = [p for t in report["tracks"] for p in t["prs"] if p["number"] == 101]
    assert pr["head_change"] == "appended" and pr["head_sha"] == world.head(101)


def test_a_spent_budget_falls_back_to_the_recorded_state_and_says_when(anon, world):
    assert _status(anon)[0].returncode == 0
    world.fake.set_anonymous_rate_limit(remaining=0, reset_in=1800)
    out = anon.run_in_process("status")
    assert out.returncode == ExitCode.UNREACHABLE
    assert "rate limit" in out.stderr and "retry after" in out.stderr
    assert re.search(r"showing the state recorded at \S+ \(recorded (just now|\d+ minutes? ago)\) instead", out.stderr)
    assert "#101" in out.stdout and "OFFLINE" in out.stdout


def test_a_private_upstream_without_a_token_says_a_token_is_needed(tmp_path, fake):
    fake.add_repo(UPSTREAM, private=True)
    fake.put_pull(UPSTREAM, 101, title="hidden")
    ws = make_workspace(tmp_path / "ws", {"one": track([101])}, api_url=fake.base_url, token=None)
    out = ws.run_in_process("status")
    assert out.returncode != 0
    assert "only public repositories" in out.stderr and all(word in out.stderr for word in TOKEN_WORDS)
    assert fake.requests() and not [r for r in fake.requests() if r.status == 200]


def test_status_offline_says_how_old_the_recorded_state_is(anon):
    assert _status(anon)[0].returncode == 0
    state = anon.root / "state" / "upstream.json"
    old = (datetime.now(timezone.utc) - timedelta(days=97, hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    data = json.loads(state.read_text())
    data["observed_at"] = old
    state.write_text(json.dumps(data))
    out = anon.run_in_process("status", "--offline")
    assert out.returncode == 0, out.stderr
    assert f"showing the state recorded at {old} (recorded 97 days ago;" in out.stderr
    assert "OFFLINE (recorded state, recorded 97 days ago)" in out.stdout


def test_report_weekly_reads_unauthenticated_and_offline_says_how_old(anon, world):
    live = anon.run_in_process("report", "weekly", "--dry-run")
    assert live.returncode == 0, live.stderr
    left = world.fake.anonymous_rate_limit()["remaining"]
    assert left < 60 and f"unauthenticated: {left} of 60 requests left this hour" in live.stderr
    assert not [r for r in world.fake.log if r.auth_present]

    assert anon.run_in_process("status").returncode == 0
    observed = json.loads((anon.root / "state" / "upstream.json").read_text())["observed_at"]
    later = datetime.fromisoformat(observed.replace("Z", "+00:00")) + timedelta(days=97, minutes=5)
    out = anon.run_in_process("report", "weekly", "--offline", "--dry-run", "--json", "--now", later.strftime("%Y-%m-%dT%H:%M:%SZ"))
    assert out.returncode == 0, out.stderr
    assert "the upstream state shown was recorded 97 days ago" in out.stderr
    [line] = [p["what"] for p in json.loads(out.stdout)["problems"] if p["where"] == "upstream"]
    assert line.startswith(f"offline, showing the state recorded at {observed} (recorded 97 days ago)")


@pytest.mark.parametrize("extra", [(), ("--comment-tracking",)], ids=["post", "comment-tracking"])
def test_a_write_without_a_token_exits_3_naming_the_token_variables(anon, world, extra):
    """--post without a token makes the week's report (its reads are the poll's, conditional), then
    refuses to post: exit 3, nothing written to GitHub (issue 24)."""
    out = anon.run_in_process("report", "weekly", "--post", *extra)
    assert out.returncode == ExitCode.AUTH
    assert all(word in out.stderr for word in TOKEN_WORDS), out.stderr
    assert "not posted" in out.stderr
    assert [r for r in world.fake.log if r.method != "GET"] == [], "nothing is sent that writes"
    assert not [r for r in world.fake.log if "/issues" in r.path and "creator" not in r.query and "timeline" not in r.path], \
        "the report repository's issues are not even listed"
    assert list((anon.root / "reports").glob("weekly-*.md"))


def test_the_client_without_a_token_asks_for_one_when_github_refuses_a_write(world):
    client = GitHubClient(UPSTREAM, None, world.fake.base_url, backoff_s=0.0)
    assert not client.authenticated
    world.open_pr(101, {"a.py": "a = 1\n"}, "First")
    pull, cached = client.get_pull(101)
    assert pull.number == 101 and not cached
    assert (client.rate_seen.limit, client.rate_seen.remaining, client.rate_seen.authenticated) == (60, 59, False)
    with pytest.raises(GitHubAuthError) as refused:
        client.comment_issue(101, "hello")
    assert refused.value.exit_code == ExitCode.AUTH
    assert "requires authentication" in str(refused.value) and all(word in str(refused.value) for word in TOKEN_WORDS)
    assert world.fake.comments(UPSTREAM, 101) == []
