"""`porttrack status` end to end: real git repositories, the GitHub emulator over loopback, the CLI
run in-process and as a subprocess."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from testing.workspace import make_workspace, track

REPO_ROOT = Path(__file__).resolve().parents[2]


def _workspace(tmp_path, world, *, with_fork=True, tracks=None, **env):
    tracks = tracks or {
        "appends": track([101], "gets commits appended"),
        "rewrites": track([102], "gets force-pushed"),
        "lands": track([103], "gets squash-merged"),
        "dies": track([104], "gets closed"),
    }
    ws = make_workspace(tmp_path / "ws", tracks, api_url=world.fake.base_url, fork=world.fork if with_fork else None, token=world.token)
    ws.extra_env.update({"PORTTRACK_HTTP_BACKOFF": "0.01", **env})
    return ws


def _open_four(world):
    world.open_pr(101, {"a.py": "a = 1\n"}, "Append target")
    world.open_pr(102, {"b.py": "b = 1\n"}, "Force-push target")
    world.open_pr(103, {"c.py": "c = 1\n"}, "Merge target")
    world.open_pr(104, {"d.py": "d = 1\n"}, "Close target")


def _status_json(ws, *args, in_process=True):
    result = ws.run_in_process("status", "--json", *args) if in_process else ws.run("status", "--json", *args)
    return result, (json.loads(result.stdout) if result.stdout.strip() else None)


def _prs(report):
    return {pr["number"]: pr for t in report["tracks"] for pr in t["prs"]}


@pytest.mark.parametrize("with_fork", [True, False], ids=["local-git", "compare-endpoint"])
def test_each_transition_is_detected_and_recorded(tmp_path, world, with_fork):
    _open_four(world)
    ws = _workspace(tmp_path, world, with_fork=with_fork)
    first, report = _status_json(ws)
    assert first.returncode == 0, first.stderr
    assert report["mode"] == "live"
    assert {n: p["state"] for n, p in _prs(report).items()} == {101: "open", 102: "open", 103: "open", 104: "open"}

    old_102 = world.head(102)
    world.append(101, {"a.py": "a = 2\n"})
    world.force_push(102, {"b.py": "b = 'rewritten'\n"})
    merge_sha = world.squash_merge(103)
    world.close(104)

    second, report = _status_json(ws)
    assert second.returncode == 0, second.stderr
    prs = _prs(report)
    assert (prs[101]["head_change"], prs[101]["head_change_commits"]) == ("appended", 1)
    assert prs[102]["head_change"] == "force-pushed"
    assert (prs[103]["state"], prs[103]["merge_commit_sha"]) == ("merged", merge_sha)
    assert prs[104]["state"] == "closed"
    actions = {t["id"]: t["next_action"] for t in report["tracks"]}
    assert actions["lands"]["command"] == "porttrack verify-converged 103"
    assert actions["dies"]["kind"] == "orphaned"
    assert actions["appends"]["command"] == "porttrack import 101"

    recorded = json.loads((ws.root / "state" / "upstream.json").read_text())["prs"]
    assert [h["change"] for h in recorded["102"]["heads"]] == ["initial", "force-pushed"]
    assert recorded["102"]["heads"][0]["sha"] == old_102
    assert [e["kind"] for e in recorded["101"]["events"]] == ["observed", "appended"]
    assert [e["kind"] for e in recorded["103"]["events"]] == ["observed", "merged"]
    assert [e["kind"] for e in recorded["104"]["events"]] == ["observed", "closed"]
    compares = world.fake.requests(path_re="/compare/")
    if with_fork:
        assert compares == [], "with a fork checkout, head changes are classified by local git"
    else:
        assert len(compares) == 2  # one per moved head (101 and 102)


def test_stacked_pr_waits_for_its_base_then_becomes_a_port_candidate(tmp_path, world):
    world.open_pr(201, {"base.py": "x = 1\n"}, "Bottom of the stack")
    world.open_pr(202, {"top.py": "y = 1\n"}, "Top (stacked on #201)", stacked_on=201)
    ws = _workspace(tmp_path, world, tracks={"stack": track([202], "stacked")})
    result, report = _status_json(ws)
    assert result.returncode == 0, result.stderr
    prs = _prs(report)
    assert [s["number"] for s in prs[202]["stacked_on"]] == [201]
    assert prs[201]["state"] == "open", "the PR a tracked PR is stacked on is polled too"
    assert report["tracks"][0]["next_action"]["kind"] == "wait-for-stack"

    world.squash_merge(201)
    result, report = _status_json(ws)
    prs = _prs(report)
    assert prs[202]["stacked_on"][0]["state"] == "merged"
    assert report["tracks"][0]["next_action"]["kind"] == "port-candidate"


def test_unchanged_second_poll_sends_only_conditional_requests_answered_304(tmp_path, world):
    _open_four(world)
    ws = _workspace(tmp_path, world)
    assert ws.run_in_process("status").returncode == 0
    world.fake.clear_log()
    result = ws.run_in_process("status")
    assert result.returncode == 0, result.stderr
    log = world.fake.requests()
    assert len(log) == 4
    assert all(r.conditional and r.status == 304 for r in log), [(r.path, r.status, r.conditional) for r in log]


def test_subprocess_run_matches_in_process_run(tmp_path, world):
    _open_four(world)
    ws = _workspace(tmp_path, world)
    proc = ws.run("status", "--json", "--dry-run")
    assert proc.returncode == 0, proc.stderr
    assert "dry run: nothing was recorded" in proc.stderr
    assert not (ws.root / "state" / "upstream.json").exists()
    assert {p["number"] for t in json.loads(proc.stdout)["tracks"] for p in t["prs"]} == {101, 102, 103, 104}


# -- faults: bounded retries, then success or a one-line error; the recorded state never changes --

def _recorded_bytes(ws):
    path = ws.root / "state" / "upstream.json"
    return path.read_bytes() if path.exists() else None


@pytest.mark.parametrize(
    "fault, params, env",
    [
        ("status", {"status": 502, "times": 2}, {}),
        ("malformed", {"times": 1}, {}),
        ("truncated", {"times": 1}, {}),
        ("reset", {"times": 1}, {}),
        ("delay", {"seconds": 2.5, "times": 1}, {"PORTTRACK_HTTP_TIMEOUT": "1"}),
        ("rate_limit", {"reset_in": 1, "times": 1}, {"PORTTRACK_RATE_LIMIT_MAX_WAIT": "5"}),
        ("secondary_rate_limit", {"retry_after": 1, "times": 1}, {}),
        ("too_many", {"retry_after": 1, "times": 1}, {}),
    ],
)
def test_transient_faults_end_in_success_after_bounded_retries(tmp_path, world, fault, params, env):
    _open_four(world)
    ws = _workspace(tmp_path, world, **env)
    world.fake.inject(fault, path=r"/pulls/101$", **params)
    result = ws.run_in_process("status")
    assert result.returncode == 0, result.stderr
    assert len(world.fake.requests(path_re=r"/pulls/101$")) <= 4


@pytest.mark.parametrize(
    "fault, params, env, words",
    [
        ("status", {"status": 500, "times": 50}, {}, "after 4 attempts"),
        ("status", {"status": 503, "times": 50}, {}, "after 4 attempts"),
        ("delay", {"seconds": 2.5, "times": 50}, {"PORTTRACK_HTTP_TIMEOUT": "1", "PORTTRACK_HTTP_ATTEMPTS": "2"}, "timed out"),
        ("malformed", {"times": 50}, {}, "malformed JSON"),
    ],
)
def test_one_pr_that_keeps_failing_is_one_pr_from_the_recorded_state_the_rest_live(tmp_path, world, fault, params, env, words):
    """Issue 32, item 3: one PR answering 500 was the whole poll offline (exit 5, four fresh
    answers thrown away). Now that PR alone is shown as recorded, with its reason; the rest are
    live and recorded; exit 5 (GitHub failing after bounded retries), as the table says."""
    _open_four(world)
    ws = _workspace(tmp_path, world, **env)
    assert ws.run_in_process("status").returncode == 0
    recorded = json.loads(_recorded_bytes(ws))
    world.append(101, {"a.py": "appended\n"})
    world.fake.inject(fault, path=r"/pulls/102$", **params)
    result = ws.run_in_process("status", "--json")
    assert result.returncode == 5, result.stderr
    assert "Traceback" not in result.stderr and "porttrack: error:" not in result.stderr
    assert "#102 not polled" in result.stderr and words in result.stderr
    shown = json.loads(result.stdout)
    assert shown["mode"] == "live" and list(shown["failed"]) == ["102"]
    prs = {p["number"]: p for t in shown["tracks"] for p in t["prs"]}
    assert any("not polled" in n and words in n for n in prs[102]["notes"]), prs[102]
    assert prs[101]["head_change"] == "appended", "the others' fresh answers are kept"
    after = json.loads(_recorded_bytes(ws))
    old102 = next(p for p in _prs_of(recorded) if p["number"] == 102)
    new102 = next(p for p in _prs_of(after) if p["number"] == 102)
    assert new102 == old102, "the failing PR's recorded state stands"
    new101 = next(p for p in _prs_of(after) if p["number"] == 101)
    assert new101["head_sha"] == world.head(101)
    text = ws.run_in_process("status")
    assert text.returncode == 5 and "OFFLINE" not in text.stdout and "not polled" in text.stdout


def _prs_of(recorded) -> list:
    prs = recorded["prs"]
    return list(prs.values()) if isinstance(prs, dict) else prs


@pytest.mark.parametrize(
    "fault, params, env, code, words",
    [
        ("status", {"status": 503, "times": 200}, {}, 5, "after 4 attempts"),
        ("rate_limit", {"reset_in": 3600, "times": 50}, {}, 5, "retry after"),
        ("status", {"status": 401, "json": {"message": "Bad credentials"}, "times": 50}, {}, 3, "refused the token"),
    ],
)
def test_persistent_faults_give_one_line_error_and_leave_state_alone(tmp_path, world, fault, params, env, code, words):
    _open_four(world)
    ws = _workspace(tmp_path, world, **env)
    assert ws.run_in_process("status").returncode == 0
    before = _recorded_bytes(ws)
    # a rate limit or a refused token is the whole poll's; so is a failure of every PR
    world.fake.inject(fault, path=r"/pulls/102$" if fault != "status" or code != 5 else r"/pulls/10\d$", **params)
    result = ws.run_in_process("status")
    assert result.returncode == code, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("porttrack: error:")]
    assert len(errors) == 1 and words in errors[0], result.stderr
    assert "Traceback" not in result.stderr
    assert _recorded_bytes(ws) == before
    assert "OFFLINE" in result.stdout, "the recorded state is still shown"
    assert len(world.fake.requests(path_re=r"/pulls/102$")) <= 5, "retries are bounded"


def test_token_never_appears_in_output_files_or_logs(tmp_path, world):
    _open_four(world)
    ws = _workspace(tmp_path, world)
    outputs = [ws.run_in_process("status"), ws.run_in_process("status", "--json")]
    world.fake.inject("status", status=500, times=50, json={"message": f"echo {world.token}"})
    outputs.append(ws.run_in_process("status"))
    proc = ws.run("status", env=ws.env(PORTTRACK_HTTP_ATTEMPTS="1"))
    texts = [o.stdout + o.stderr for o in outputs] + [proc.stdout + proc.stderr]
    for path in ws.root.rglob("*"):
        if path.is_file():
            texts.append(path.read_bytes().decode("utf-8", "replace"))
    texts += [repr(r) for r in world.fake.log]
    assert not [t for t in texts if world.token in t]


def test_no_token_polls_the_public_upstream_unauthenticated_and_says_so(tmp_path, world):
    _open_four(world)
    ws = _workspace(tmp_path, world)
    assert ws.run_in_process("status").returncode == 0
    world.fake.clear_log()
    result = ws.run_in_process("status", env=ws.env(GITHUB_TOKEN=None))
    assert result.returncode == 0, result.stderr
    assert "live poll, 4 requests, unauthenticated" in result.stdout
    left = world.fake.anonymous_rate_limit()["remaining"]
    assert f"unauthenticated: {left} of 60 requests left this hour" in result.stderr
    assert world.fake.log and not [r for r in world.fake.log if r.auth_present]


def _fresh_checkout(tmp_path):
    copy = tmp_path / "checkout"
    shutil.copytree(REPO_ROOT, copy, ignore=shutil.ignore_patterns(".git", ".porttrack", "*.egg-info", ".venv*", "__pycache__", ".pytest_cache"))
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_TOKEN", "GH_TOKEN", "PORTTRACK_WORKSPACE", "PORTTRACK_FORK")}
    env["PORTTRACK_NO_GH_CLI"] = "1"
    env["PORTTRACK_HTTP_ATTEMPTS"] = "1"
    env["GITHUB_API_URL"] = "http://127.0.0.1:9"  # a machine with no way to GitHub
    env["PYTHONPATH"] = str(copy)
    return copy, env


def _days_since(stamp: str) -> int:
    return (datetime.now(timezone.utc) - datetime.fromisoformat(stamp.replace("Z", "+00:00"))).days


def test_fresh_checkout_status_offline_shows_the_shipped_state_and_its_age(tmp_path):
    """README's first command (`setup.sh tool` runs `status --offline`) on a machine with no token and no network."""
    copy, env = _fresh_checkout(tmp_path)
    before = (copy / "state" / "upstream.json").read_bytes()
    proc = subprocess.run([sys.executable, "-m", "porttrack", "status", "--offline"], cwd=copy, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    days = _days_since("2026-08-25T00:00:00Z")
    assert f"showing the state recorded at 2026-08-25T00:00:00Z (recorded {days} days ago;" in proc.stderr
    assert f"OFFLINE (recorded state, recorded {days} days ago)" in proc.stdout
    for track_id in ("spec-kernel-warmup", "fused-ar-graph", "fp8-ds-mla-sparse-mtp", "sparse-indexer-skip"):
        assert track_id in proc.stdout
    for number in ("48804", "46514", "46076", "46849", "48407"):
        assert f"#{number}" in proc.stdout
    assert "closed without merging" in proc.stdout and "orphaned" in proc.stdout
    assert proc.stdout.count("now a convergence check") == 3
    assert (copy / "state" / "upstream.json").read_bytes() == before


def test_fresh_checkout_status_with_github_unreachable_falls_back_saying_how_old(tmp_path):
    copy, env = _fresh_checkout(tmp_path)
    before = (copy / "state" / "upstream.json").read_bytes()
    proc = subprocess.run([sys.executable, "-m", "porttrack", "status"], cwd=copy, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 5, proc.stderr
    days = _days_since("2026-08-25T00:00:00Z")
    assert "127.0.0.1:9" in proc.stderr
    assert f"showing the state recorded at 2026-08-25T00:00:00Z (recorded {days} days ago) instead" in proc.stderr
    assert "#48407" in proc.stdout
    assert (copy / "state" / "upstream.json").read_bytes() == before


def test_queued_pr_that_moved_upstream_asks_for_a_refresh():
    from porttrack.report.status import Knowledge, next_action
    from porttrack.workspace.state import RecordedPR

    pr = RecordedPR(
        number=7, title="t", author="a", state="open", html_url="", created_at=None, updated_at=None,
        merged_at=None, closed_at=None, merge_commit_sha=None, head_sha="b" * 40, head_ref="x",
        base_ref="main", base_sha=None, default_branch="main", observed_at="2026-11-30T00:00:00Z",
    )
    moved = next_action(pr, {7: pr}, (), Knowledge(queued={7: "queued"}, queued_heads={7: "a" * 40}))
    assert (moved.kind, moved.command) == ("refresh", "porttrack refresh 7")
    assert "aaaaaaaaaaaa" in moved.text and "bbbbbbbbbbbb" in moved.text
    steady = next_action(pr, {7: pr}, (), Knowledge(queued={7: "gated-pass"}, queued_heads={7: "b" * 40}))
    assert steady.kind == "queued"


# -- issue 11: one missing PR head; the first observation; git's cause line -----------------------

def _git(repo, *args):
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()


@pytest.mark.parametrize("in_process", [True, False], ids=["in-process", "subprocess"])
def test_one_missing_pr_head_leaves_the_others_fetched_and_classified(tmp_path, world, in_process):
    _open_four(world)
    ws = _workspace(tmp_path, world)
    assert ws.run_in_process("status").returncode == 0
    world.append(101, {"a.py": "a = 2\n"})
    world.force_push(102, {"b.py": "b = 'rewritten'\n"})
    gone_head = world.append(103, {"c.py": "c = 2\n"})
    _git(world.upstream.path, "update-ref", "-d", "refs/pull/103/head")  # the head is gone upstream
    world.fake.clear_log()

    result, report = _status_json(ws, in_process=in_process)

    assert result.returncode == 0, "a head that cannot be fetched is a note, not a failed poll: " + result.stderr
    prs = _prs(report)
    assert (prs[101]["head_change"], prs[101]["head_change_commits"]) == ("appended", 1)
    assert prs[102]["head_change"] == "force-pushed"
    assert prs[103]["head_change"] == "appended", "the missing head is still classified, by GitHub's compare"
    assert prs[104]["head_change"] == "unchanged"
    for n in (101, 102):
        assert _git(world.fork, "rev-parse", f"refs/porttrack/pull/{n}/head") == world.head(n), "fetched into the fork"
    assert len(world.fake.requests(path_re="/compare/")) == 1, "only #103 needed GitHub's compare"
    (note,) = report["notes"]
    assert note.startswith(f"#103: head {gone_head[:12]} could not be fetched from upstream"), note
    assert "couldn't find remote ref refs/pull/103/head" in note
    recorded = json.loads((ws.root / "state" / "upstream.json").read_text())["prs"]
    assert [h["change"] for h in recorded["103"]["heads"]] == ["initial", "appended"]


def test_first_observation_has_no_head_change_and_says_first_seen(tmp_path, world):
    _open_four(world)
    ws = _workspace(tmp_path, world)
    dry = ws.run_in_process("status", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.count("(first seen)") == 4, dry.stdout
    first, report = _status_json(ws)
    assert first.returncode == 0, first.stderr
    assert {n: p["head_change"] for n, p in _prs(report).items()} == {101: None, 102: None, 103: None, 104: None}
    assert {n: p["head_change_commits"] for n, p in _prs(report).items()} == {101: None, 102: None, 103: None, 104: None}
    second, report = _status_json(ws)
    assert {p["head_change"] for p in _prs(report).values()} == {"unchanged"}
    text = ws.run_in_process("status")
    assert "(first seen)" not in text.stdout and text.stdout.count("(unchanged)") == 4, text.stdout
    offline = ws.run_in_process("status", "--offline")
    assert "(first seen)" not in offline.stdout, "offline, nothing was seen: null is not 'first seen' there"


def test_wrong_upstream_remote_note_names_gits_cause(tmp_path, world):
    _open_four(world)
    ws = _workspace(tmp_path, world)
    _git(world.fork, "remote", "rename", "upstream", "not-upstream")
    result = ws.run_in_process("status")
    assert result.returncode == 0, result.stderr
    notes = [line for line in result.stdout.splitlines() if line.startswith("note: git fetch from upstream failed")]
    assert len(notes) == 1, result.stdout
    assert "fatal: 'upstream' does not appear to be a git repository" in notes[0]
    assert "the repository exists" not in notes[0]
