"""A SIGKILL at every step boundary of the writing commands, then one re-run: the workspace is
consistent.

The boundaries are not a list kept by hand: an uninterrupted run of the command with
PORTTRACK_TEST_TRACE set writes down every checkpoint it reaches (`porttrack.cli.testhooks`:
`write:<file>` with the temp file on disk before its rename, `wrote:<file>` after it, and the
commands' own steps), and each occurrence of each is walked (`name@K`: the K-th time the process
gets there). After the kill the workspace passes `check_consistent` (a stale series is allowed
only when flagged); one re-run must succeed and leave it exactly consistent, with no temporary
file behind, and coherent across files: a convergence record that says a patch was retired has
that patch retired in the manifest (issue 33 item 2: the record said "retired", the manifest
still carried the patch, and every re-run said "unchanged" and never repaired it).

The weekly `save` (a shell script: its boundaries are its git steps) is walked the same way in
tests/report/test_weekly_save.py.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Callable

import pytest
import rel_harness as H
from rel_harness import Rig, check_consistent, fork_state, kill, temp_leftovers, wait_for_pause

pytestmark = pytest.mark.reliability("crash")


def boundaries(rig: Rig, argv: tuple[str, ...], codes: tuple[int, ...] = (0,)) -> list[str]:
    """Every checkpoint an uninterrupted run of `argv` reaches, as `name@K` (K-th occurrence)."""
    trace = rig.tmp / "trace"
    trace.unlink(missing_ok=True)
    out = rig.sub(*argv, PORTTRACK_TEST_TRACE=str(trace))
    assert out.returncode in codes, f"uninterrupted {argv} exited {out.returncode}: {out.stderr[-1200:]}"
    seen: Counter[str] = Counter()
    points = []
    for name in trace.read_text(encoding="utf-8").split("\n"):
        if name:
            seen[name] += 1
            points.append(f"{name}@{seen[name]}")
    return points


def coherent(rig: Rig) -> None:
    """What one file says of another holds: every retirement a convergence record claims is in
    the manifest, and the patch's retirement names an entry that claims it."""
    manifest_file = rig.root / "patches" / "manifest.json"
    manifest = {p["name"]: p for p in json.loads(manifest_file.read_text())["patches"]} if manifest_file.exists() else {}
    for path in sorted((rig.root / "state" / "convergence").glob("*.json")):
        rel = path.relative_to(rig.root).as_posix()
        history = json.loads(path.read_text(encoding="utf-8"))["history"]
        claims: dict[str, set[str]] = {}
        for index, entry in enumerate(history):
            for drop in entry.get("drops", []):
                if drop.get("kind") == "queued-patch" and drop.get("retired"):
                    claims.setdefault(drop["ref"], set()).add(f"{rel}#{index}")
        for ref, entries in claims.items():
            patch = manifest[ref]
            assert patch["state"] == "converged", f"{rel} says {ref} was retired; the manifest has it {patch['state']}"
            assert set(patch["history"][-1]["evidence"]) <= entries, (patch["history"][-1], entries)
    # every transition rests on evidence that exists: a record of the log, or an entry of a record
    for patch in manifest.values():
        for step in patch["history"]:
            for ref in step["evidence"]:
                if "#" in ref:
                    path, index = ref.split("#")
                    history = json.loads((rig.root / path).read_text(encoding="utf-8"))["history"]
                    assert int(index) < len(history), f"{patch['name']} -> {step['to']} rests on {ref}, which does not exist"
                else:
                    assert (rig.root / "patches" / "evidence" / f"{ref}.json").is_file(), \
                        f"{patch['name']} -> {step['to']} rests on evidence {ref}, which does not exist"


def walk(rig: Rig, argv: tuple[str, ...], *, rerun_codes: tuple[int, ...] = (0,),
         final: Callable[[Rig], None], may: dict[str, set[str]] | None = None, cases) -> int:
    """Kill `argv` at each of its boundaries from the saved "base"; returns how many were walked."""
    rig.save("base")
    points = boundaries(rig, argv)
    assert points, f"{argv} reached no checkpoint"
    for point in points:
        with cases.case(f"{' '.join(argv)} killed at {point}"):
            rig.restore("base")
            before = fork_state(rig.fork)
            proc = rig.popen(*argv, PORTTRACK_TEST_PAUSE_AT=point)
            wait_for_pause(proc, point)
            assert kill(proc), f"{point}: the process was gone before the kill"
            check_consistent(rig, fork_before=before, branch_may_become=may)
            rerun = rig.cli(*argv)
            assert rerun.returncode in rerun_codes, f"{point}: rerun exited {rerun.returncode}: {rerun.stderr[-1200:]}"
            check_consistent(rig, fork_before=before, branch_may_become=may, allow_stale_series=False)
            coherent(rig)
            final(rig)
            assert temp_leftovers(rig.root) == [], f"{point}: temporary files left behind: {temp_leftovers(rig.root)}"
    cases.done()
    return len(points)


def state_of(rig: Rig, pr: int) -> str:
    return [p for p in rig.queue_json()["patches"] if p["pr"] == pr][0]["state"]


def test_verify_converged_apply_drops_at_every_boundary(tmp_path, world, cases):
    rig = Rig(tmp_path, world)
    rig.ok("import", "101")
    world.squash_merge(101)
    world.rebase_fork()
    rig.ok("status", "--json")
    argv = ("verify-converged", "101", "--apply-drops")

    def final(rig: Rig) -> None:
        assert state_of(rig, 101) == "converged"
        history = json.loads((rig.root / "state" / "convergence" / "101.json").read_text())["history"]
        # the retiring verdict once (a re-run after the retirement records that nothing is left to drop)
        assert [e["drops"][0]["retired"] for e in history if e["drops"]] == [True]
        assert not list((rig.root / "patches").glob("*.patch")) and len(list((rig.root / "patches" / "retired").glob("*.patch"))) == 1

    assert walk(rig, argv, final=final, cases=cases) >= 9


def test_import_at_every_boundary(tmp_path, world, cases):
    rig = Rig(tmp_path, world)
    rig.ok("import", "102")

    def final(rig: Rig) -> None:
        listing = rig.queue_json()
        assert [p["pr"] for p in listing["patches"]] == [102, 101] and not listing["series_stale"]

    assert walk(rig, ("import", "101"), rerun_codes=(0, 6), final=final, cases=cases) >= 12


def test_gate_run_at_every_boundary(tmp_path, world, cases):
    rig = Rig(tmp_path, world)
    rig.ok("import", "101")
    rig.ok("gate", "run", "101", "--baseline", codes=(7,))
    staging = rig.ok("apply", "--dry-run", "--json").json()["new"]

    def final(rig: Rig) -> None:
        assert state_of(rig, 101) == "gated-pass"
        assert rig.cli("gate", "check", "101").returncode == 0

    assert walk(rig, ("gate", "run", "101"), final=final, may={"refs/heads/porttrack/staging": {staging}}, cases=cases) >= 12


def test_promote_at_every_boundary(tmp_path, world, cases):
    rig = Rig(tmp_path, world)
    rig.ok("import", "101")
    rig.ok("gate", "run", "101", "--baseline", codes=(7,))
    rig.ok("gate", "run", "101")

    def final(rig: Rig) -> None:
        assert state_of(rig, 101) == "default-enabled"

    assert walk(rig, ("promote", "101"), rerun_codes=(0, 6), final=final, cases=cases) >= 4


# apply and report posting are walked in the full run (PORTTRACK_FULL=1; test_rel_crash kills them
# at their telling checkpoints in every run): ~2 minutes more on two shared cores


@pytest.mark.slow
def test_apply_at_every_boundary(tmp_path, world, cases):
    rig = Rig(tmp_path, world)
    rig.ok("import", "101")
    rig.ok("apply")
    rig.ok("import", "102")
    new = rig.ok("apply", "--dry-run", "--json").json()["new"]  # builds are reproducible

    def final(rig: Rig) -> None:
        assert fork_state(rig.fork)["refs"]["refs/heads/porttrack/staging"] == new

    assert walk(rig, ("apply",), final=final, may={"refs/heads/porttrack/staging": {new}}, cases=cases) >= 6


@pytest.mark.slow
def test_report_weekly_post_at_every_boundary(tmp_path, world, cases):
    rig = Rig(tmp_path, world)
    now = "2027-01-04T08:00:00Z"
    week = H.report_week(now)

    def final(rig: Rig) -> None:
        assert len(rig.weekly_issues(week)) == 1, "exactly one issue for the week"
        records = json.loads((rig.root / "state" / "reports.json").read_text())["reports"]
        assert [r["week"] for r in records if r["issue"]] == [week]

    argv = ("report", "weekly", "--post", "--offline", "--now", now)
    # the walk restores the workspace, not the emulator: an issue a killed run created stays, as it would on GitHub
    assert walk(rig, argv, final=final, cases=cases) >= 4
