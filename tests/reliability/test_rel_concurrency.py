"""Two porttrack processes on one workspace: the second waits for the workspace lock, or refuses
clearly (exit 8, naming the holder) when it waited PORTTRACK_LOCK_WAIT seconds; either way the
queue, the recorded state, the evidence and the fork's branches stay consistent, and no weekly
issue is ever created twice.
"""

from __future__ import annotations

import json
import time

import pytest
import rel_harness as H
from rel_harness import Rig, check_consistent, finish, fork_state, wait_for_pause

pytestmark = pytest.mark.reliability("concurrency")


def both(rig: Rig, first: tuple[str, ...], second: tuple[str, ...], *, stagger: float = 0.0, **env: str) -> tuple[H.Result, H.Result]:
    a = rig.popen(*first, **env)
    if stagger:
        time.sleep(stagger)
    b = rig.popen(*second, **env)
    return finish(a), finish(b)


def test_two_imports_of_different_prs_both_land(tmp_path, world):
    rig = Rig(tmp_path, world)
    a, b = both(rig, ("import", "101"), ("import", "102"))
    assert (a.returncode, b.returncode) == (0, 0), a.stderr[-800:] + b.stderr[-800:]
    listing = rig.queue_json()
    assert sorted(p["pr"] for p in listing["patches"]) == [101, 102] and not listing["series_stale"]
    names = [p["name"][:4] for p in listing["patches"]]
    assert len(set(names)) == 2, f"two patches, two sequence numbers: {names}"
    check_consistent(rig, allow_stale_series=False)


def test_two_imports_of_the_same_pr_queue_it_once(tmp_path, world):
    rig = Rig(tmp_path, world)
    a, b = both(rig, ("import", "101"), ("import", "101"))
    assert sorted((a.returncode, b.returncode)) == [0, 6], a.stderr[-800:] + b.stderr[-800:]
    loser = a if a.returncode == 6 else b
    H.assert_one_line_error(loser, 6, "already queued")
    assert [p["pr"] for p in rig.queue_json()["patches"]] == [101]
    check_consistent(rig, allow_stale_series=False)


def test_import_and_apply_at_once(tmp_path, world):
    rig = Rig(tmp_path, world)
    rig.ok("import", "102")
    before = fork_state(rig.fork)
    one = rig.ok("apply", "--dry-run", "--json").json()["new"]
    a, b = both(rig, ("import", "101"), ("apply",), stagger=0.3)
    assert (a.returncode, b.returncode) == (0, 0), a.stderr[-800:] + b.stderr[-800:]
    two = rig.ok("apply", "--dry-run", "--json").json()["new"]
    # the build saw the queue before or after the import, never half of it
    check_consistent(rig, fork_before=before, branch_may_become={"refs/heads/porttrack/staging": {one, two}},
                     allow_stale_series=False)
    rig.ok("apply")
    assert fork_state(rig.fork)["refs"]["refs/heads/porttrack/staging"] == two


def test_two_status_polls_record_one_whole_state(tmp_path, world):
    rig = Rig(tmp_path, world)
    world.append(101, {"a.py": H.edit(H.A, {10: "a_10 = 'ten'", 50: "a_50 = 'fifty'", 70: "a_70 = 'x'"})})
    a, b = both(rig, ("status", "--json"), ("status", "--json"))
    assert (a.returncode, b.returncode) == (0, 0), a.stderr[-800:] + b.stderr[-800:]
    state = json.loads((rig.root / "state" / "upstream.json").read_text())
    assert state["prs"]["101"]["head_sha"] == world.head(101)
    check_consistent(rig, allow_stale_series=False)


def test_status_and_import_at_once_keep_each_others_observations(tmp_path, world):
    """Both poll, then record under the lock: what one learnt about a PR the other did not poll
    must not be lost when the other writes its (older) picture of the whole state."""
    rig = Rig(tmp_path, world)
    world.append(101, {"a.py": H.edit(H.A, {10: "a_10 = 'ten'", 50: "a_50 = 'fifty'", 70: "a_70 = 'x'"})})
    world.append(102, {"b.py": H.edit(H.B, {30: "b_30 = 'thirty'", 40: "b_40 = 'forty'"})})
    holder = rig.popen("import", "101", PORTTRACK_TEST_PAUSE_AT="planned", PORTTRACK_TEST_PAUSE_S="2")
    wait_for_pause(holder, "planned")  # it has polled #101; it records when it wakes up
    assert rig.cli("status").returncode == 0  # polls and records #101 and #102 meanwhile
    assert finish(holder).returncode == 0
    prs = json.loads((rig.root / "state" / "upstream.json").read_text())["prs"]
    assert prs["102"]["head_sha"] == world.head(102), "status's observation of #102 survived the import's write"
    assert [h["sha"] for h in prs["102"]["heads"]][-1] == world.head(102)
    assert prs["101"]["head_sha"] == world.head(101)
    check_consistent(rig, allow_stale_series=False)


def test_two_weekly_posts_at_once_make_one_issue(tmp_path, world):
    rig = Rig(tmp_path, world)
    runs = 2
    for n in range(runs):
        now = f"2027-0{2 + n}-01T08:00:00Z"
        week = H.report_week(now)
        a, b = both(rig, ("report", "weekly", "--post", "--offline", "--now", now),
                    ("report", "weekly", "--post", "--offline", "--now", now))
        assert (a.returncode, b.returncode) == (0, 0), a.stderr[-800:] + b.stderr[-800:]
        assert len(rig.weekly_issues(week)) == 1, f"{week}: one issue, not {len(rig.weekly_issues(week))}"
        assert len(rig.fake.requests("POST", r"/issues$")) == n + 1
    check_consistent(rig)


@pytest.mark.slow
def test_two_gate_runs_at_once_record_distinct_evidence(tmp_path, world):
    rig = Rig(tmp_path, world)
    rig.ok("import", "101")
    a, b = both(rig, ("gate", "run", "101", "--baseline"), ("gate", "run", "101"))
    assert a.returncode in (0, 7) and b.returncode in (0, 7), a.stderr[-800:] + b.stderr[-800:]
    from porttrack.prove import evidence
    from porttrack.workspace.files import Workspace

    log = evidence.load(Workspace(rig.root))
    assert len(log.records) == 4 and not log.invalid
    assert len({r.seq for r in log.records}) == 4, "every record has its own sequence number"
    assert rig.cli("gate", "check", "101").returncode == 0
    check_consistent(rig, allow_stale_series=False)


@pytest.mark.slow
def test_promote_and_drop_at_once_end_in_one_state(tmp_path, world):
    rig = Rig(tmp_path, world)
    rig.ok("import", "101")
    rig.ok("gate", "run", "101", "--baseline", codes=(7,))
    rig.ok("gate", "run", "101")
    a, b = both(rig, ("promote", "101"), ("drop", "101", "--reason", "superseded upstream"))
    assert a.returncode in (0, 6) and b.returncode in (0, 6), a.stderr[-800:] + b.stderr[-800:]
    [patch] = rig.queue_json()["patches"]
    assert patch["state"] in ("default-enabled", "dropped")
    check_consistent(rig, allow_stale_series=False)


@pytest.mark.slow
def test_two_applies_at_once_leave_the_branch_at_the_build(tmp_path, world):
    rig = Rig(tmp_path, world)
    rig.ok("import", "101")
    before = fork_state(rig.fork)
    new = rig.ok("apply", "--dry-run", "--json").json()["new"]
    a, b = both(rig, ("apply",), ("apply",))
    assert (a.returncode, b.returncode) == (0, 0), a.stderr[-800:] + b.stderr[-800:]
    check_consistent(rig, fork_before=before, branch_may_become={"refs/heads/porttrack/staging": {new}})
    assert fork_state(rig.fork)["refs"]["refs/heads/porttrack/staging"] == new


SECOND = {
    "import": ("import", "102"),
    "drop": ("drop", "101", "--reason", "busy test"),
    "apply": ("apply",),
    "status": ("status",),
    "promote": ("promote", "101"),
    "gate-run": ("gate", "run", "101", "--baseline"),
    "evidence-supersede": ("evidence", "supersede", "2026", "--reason", "busy test"),
    "verify-converged": ("verify-converged", "103"),
    "report": ("report", "weekly", "--offline"),
    "refresh": ("refresh", "101", "--update"),
}


FAST_SECOND = ("import", "status", "report")


@pytest.mark.parametrize("command", [c if c in FAST_SECOND else pytest.param(c, marks=pytest.mark.slow) for c in sorted(SECOND)])
def test_a_second_process_refuses_with_exit_8_when_the_lock_stays_held(tmp_path, world, command):
    rig = Rig(tmp_path, world)
    rig.ok("import", "101")
    if command == "refresh":
        world.append(101, {"c.py": H.edit(H.C, {20: "c_20 = 'x'"})})
    holder = rig.popen("import", "102", PORTTRACK_TEST_PAUSE_AT="locked")
    try:
        wait_for_pause(holder, "locked")
        before = rig.digest()
        out = rig.cli(*SECOND[command], PORTTRACK_LOCK_WAIT="0.3")
        if command == "evidence-supersede" and out.returncode == 2:
            pytest.fail(out.stderr)
        H.assert_one_line_error(out, 8, "another porttrack process is working on")
        assert f"pid {holder.pid}" in out.errors[0], "the message names the holder"
        assert rig.digest() == before, "the refused command changed nothing"
    finally:
        holder.kill()
        finish(holder)
    check_consistent(rig)


def test_a_second_process_waits_for_a_short_holder_and_then_succeeds(tmp_path, world):
    rig = Rig(tmp_path, world)
    holder = rig.popen("import", "102", PORTTRACK_TEST_PAUSE_AT="locked", PORTTRACK_TEST_PAUSE_S="1.5")
    wait_for_pause(holder, "locked")
    started = time.monotonic()
    out = rig.cli("import", "101")
    waited = time.monotonic() - started
    assert out.returncode == 0, out.stderr[-800:]
    assert finish(holder).returncode == 0
    assert waited >= 0.5, "it waited for the holder"
    assert sorted(p["pr"] for p in rig.queue_json()["patches"]) == [101, 102]
    check_consistent(rig, allow_stale_series=False)
