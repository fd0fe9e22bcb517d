"""The shipped GitHub Actions workflows pass actionlint (GitHub rejects what it flags at dispatch
time, on the maintainer's runners, which is too late to learn of it).

actionlint comes from a registry package that ships the binary (the `[test]` extra), so nothing is
downloaded when the test runs. Missing, the test fails: it never skips.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((REPO_ROOT / ".github" / "workflows").glob("*.y*ml"))


def actionlint() -> str:
    """The binary the [test] extra installs: beside this Python first (a venv's bin/), then PATH."""
    beside = Path(sys.executable).parent / "actionlint"
    found = str(beside) if beside.is_file() and os.access(beside, os.X_OK) else shutil.which("actionlint")
    assert found, "actionlint is not installed: pip install -e '.[test]' (it ships the binary)"
    return found


def lint(*paths: Path) -> subprocess.CompletedProcess:
    return subprocess.run([actionlint(), "-no-color", *map(str, paths)], capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)


def test_every_shipped_workflow_passes_actionlint():
    names = {p.name for p in WORKFLOWS}
    assert {"porttrack-gate.yml", "porttrack-weekly.yml"} <= names, names
    out = lint(*WORKFLOWS)
    assert out.returncode == 0, out.stdout + out.stderr


def test_actionlint_does_catch_what_github_rejects(tmp_path):
    """The check can fail: `runner.temp` in a job's env (the gate workflow's old mistake) is flagged."""
    bad = tmp_path / ".github" / "workflows" / "bad.yml"
    bad.parent.mkdir(parents=True)
    bad.write_text("on: workflow_dispatch\njobs:\n  j:\n    runs-on: ubuntu-latest\n"
                   "    env:\n      OUT: ${{ runner.temp }}/x\n    steps:\n      - run: echo \"$OUT\"\n")
    out = lint(bad)
    assert out.returncode == 1 and 'context "runner" is not allowed here' in out.stdout, out.stdout + out.stderr


def test_the_gate_workflow_dispatches_the_vllm_job():
    text = (REPO_ROOT / ".github" / "workflows" / "porttrack-gate.yml").read_text()
    assert "porttrack.jobs.vllm" in text and "scenario" not in text
