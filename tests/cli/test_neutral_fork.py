"""A fork that is not vLLM, end to end: a small generated Python library upstream with three
squash-merged PRs, a fork cut before them, and a tracks.yaml under profile neutral — no models, one
CPU target, a gate whose job is the project's own test command timed by porttrack.jobs.timed.

status, import, apply --staging, gate run (candidate and baseline), gate check, promote,
verify-converged and report weekly all run as a user runs them (`python -m porttrack`, the GitHub
emulator over loopback, real git), and the report has no GPU or model section.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from testing.gitfixtures import git
from testing.workspace import make_workspace, neutral_track
from testing.world import World

UPSTREAM, FORK = "acme/minilib", "me/minilib"
PY = f"{sys.version_info.major}.{sys.version_info.minor}"  # an axis value YAML would read as a number

LIB = '''"""minilib: a tiny library."""


def add(a, b):
    return a + b


def mul(a, b):
    return a * b


def greet(name):
    return "hello " + name
'''
TESTS = '''import unittest

import minilib


class MinilibTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(minilib.add(2, 3), 5)

    def test_mul(self):
        self.assertEqual(minilib.mul(2, 3), 6)

    def test_greet(self):
        self.assertTrue(minilib.greet("you").endswith("you"))
'''
PR_ADD = LIB.replace("def add(a, b):\n    return a + b", 'def add(a, b):\n    """a plus b, for numbers and sequences alike."""\n    return a + b')
PR_GREET = PR_ADD.replace('return "hello " + name', 'return f"hello {name}"')
EXTRA = 'def sub(a, b):\n    return a - b\n'

GATE = {
    "job": {"command": f"{sys.executable} -m porttrack.jobs.timed --cwd {{workdir}} --metric test_time --axis python={PY} "
                       f"-- {sys.executable} -m unittest discover -s tests -q", "timeout_s": 300},
    "matrix": {"axes": {"python": [PY]}},
    # seconds, not percent: a test run of a few milliseconds is too noisy for a relative bound
    "metrics": [{"name": "test_time", "unit": "s", "direction": "lower", "allowed_regression_abs": 5, "key": True}],
}


def build(tmp_path: Path, fake, gate: dict):
    world = World(tmp_path, fake, upstream_repo=UPSTREAM, fork_repo=FORK)
    world.upstream.commit({"minilib/__init__.py": LIB, "tests/test_minilib.py": TESTS, "tests/__init__.py": ""}, "minilib 1.0")
    world.rebase_fork()  # the fork is cut here, before the three PRs
    world.open_pr(11, {"minilib/__init__.py": PR_ADD}, title="Document add")
    world.squash_merge(11)
    world.open_pr(12, {"minilib/extra.py": EXTRA}, title="Add sub")
    world.squash_merge(12)
    world.open_pr(13, {"minilib/__init__.py": PR_GREET}, title="greet with an f-string")
    world.squash_merge(13)
    tracks = {"doc-add": neutral_track([11], "documented add", gate=gate),
              "sub": neutral_track([12], "subtraction"),
              "fstring-greet": neutral_track([13], "f-string greeting")}
    ws = make_workspace(tmp_path / "ws", tracks, api_url=fake.base_url, fork=world.fork, token=world.token,
                        profile="neutral", upstream=UPSTREAM, fork_repo=FORK)
    return world, ws


@pytest.fixture
def lib(tmp_path: Path, fake):
    return build(tmp_path, fake, GATE)


def ok(proc, what: str):
    assert proc.returncode == 0, f"{what}: exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def test_a_library_fork_is_followed_proven_promoted_and_reported(lib) -> None:
    world, ws = lib
    text = ws.tracks_file.read_text()
    assert "profile: neutral" in text and "models" not in text and "report" not in text

    ok(ws.run("status"), "status")
    for pr in (11, 12, 13):
        ok(ws.run("import", str(pr)), f"import {pr}")
    names = {p["pr"]: p["name"] for p in json.loads(ok(ws.run("queue", "--json"), "queue").stdout)["patches"]}
    assert set(names) == {11, 12, 13}
    ok(ws.run("apply", "--staging"), "apply --staging")
    assert "def sub" in git(world.fork, "show", "porttrack/staging:minilib/extra.py")

    patch = names[11]
    candidate = ws.run("gate", "run", patch, "--target", "linux")
    assert candidate.returncode == 7 and "BASELINE-MISSING" in candidate.stdout, candidate.stdout + candidate.stderr  # not yet
    assert "linux: recorded" in candidate.stderr
    ok(ws.run("gate", "run", patch, "--target", "linux", "--baseline"), "gate run --baseline")
    check = ok(ws.run("gate", "check", patch, "--json"), "gate check")
    data = json.loads(check.stdout)
    assert data["verdict"] == "pass" and data["required"]["axes"] == {"python": [PY]}
    (cell,) = data["cells"]
    assert cell["axes"] == {"python": PY} and cell["target"] == "linux" and cell["phase"] is None
    gpu_words = {"model", "models", "context", "contexts", "batch", "batches", "backend"}
    assert not gpu_words & (set(cell) | set(data["required"])), "a fork without models reads nothing of them"
    assert "reference_backend" not in data["gate"], "a neutral gate compares against a baseline, not a backend"
    assert [c["check"] for c in cell["checks"]] == ["metric:test_time"]
    ok(ws.run("promote", patch), "promote")
    assert json.loads(ws.run("queue", "--json").stdout)["patches"][0]["state"] == "default-enabled"

    elig = ok(ws.run("eligibility"), "eligibility")
    assert "not used" in elig.stdout

    world.rebase_fork()  # the fork moves onto upstream, which merged all three
    converged = ok(ws.run("verify-converged", "11", "--json"), "verify-converged")
    assert json.loads(converged.stdout)["verdict"] == "converged"

    report = ok(ws.run("report", "weekly", "--dry-run"), "report weekly")
    body = report.stdout
    assert "## Summary" in body and "## Patch queue" in body and "## Problems" in body
    assert "## Gates" in body and "python=" + PY in body  # a gate was checked, so its section says so
    for gpu_word in ("Eligibility", "eligible", "model", "context", "batch", "graph replay", "JIT", "GPU", "cold", "warm"):
        assert gpu_word not in body, gpu_word
    assert "could not be evaluated" not in body.replace("every part of this report could be evaluated", "")
    as_json = json.loads(ok(ws.run("report", "weekly", "--dry-run", "--json"), "report --json").stdout)
    assert as_json["profile"] == "neutral" and "eligibility" not in as_json["sections"]


def test_a_failing_test_suite_writes_no_results_and_the_gate_stays_unproven(tmp_path: Path, fake) -> None:
    failing = f"{sys.executable} -c 'raise SystemExit(3)'"
    gate = {**GATE, "job": {**GATE["job"], "command": GATE["job"]["command"].split(" -- ")[0] + " -- " + failing}}
    world, ws = build(tmp_path, fake, gate)
    ok(ws.run("status"), "status")
    ok(ws.run("import", "11"), "import")
    patch = json.loads(ws.run("queue", "--json").stdout)["patches"][0]["name"]
    ran = ws.run("gate", "run", patch, "--target", "linux")
    assert ran.returncode != 0
    check = ws.run("gate", "check", patch, "--json")
    assert check.returncode == 7, check.stdout + check.stderr
    assert json.loads(check.stdout)["cells"][0]["verdict"] == "missing"
    assert ws.run("promote", patch).returncode != 0


def test_no_report_section_without_a_gate_checked(lib) -> None:
    world, ws = lib
    ok(ws.run("status"), "status")
    body = ok(ws.run("report", "weekly", "--dry-run"), "report").stdout
    assert "## Gates" not in body and "## Trends" not in body and "## Eligibility" not in body
    assert "None: every part of this report could be evaluated." in body
