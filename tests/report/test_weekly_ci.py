"""The weekly workflow as CI runs it: two scheduled runs a week apart, each job in a fresh clone
of the workspace repository (a bare repo standing in for GitHub), the workflow's own steps read
from .github/workflows/porttrack-weekly.yml and run in order, against the GitHub emulator and a
real upstream and fork. State is carried only by the workflow's mechanism (the porttrack-state
branch, pushed by the keep-state job); the second report counts "since the previous report" from
the first one's week and fills "this week" from what really changed between the runs.

What GitHub's runner provides is stood in for, no more: `actions/checkout` is a `git clone`,
`upload-artifact` / `download-artifact` copy folders, `${{ }}` expressions are looked up in a
table (an unknown one fails the test), and `porttrack` on PATH is this checkout's code with its
clock set to the scheduled time (the only way two runs can be a week apart in one test).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Mapping

import pytest
import yaml

from porttrack.common.clock import iso_week
from testing.gitfixtures import fork_commit, git
from testing.workspace import track, tracks_document

REPO_ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = REPO_ROOT / ".github" / "workflows" / "porttrack-weekly.yml"
SCRIPT = REPO_ROOT / ".github" / "porttrack-weekly.sh"
# The second run a little after the real time (the emulator stamps merges with it), the first a
# week before: two different ISO weeks, whatever day the test runs.


@dataclass(frozen=True)
class Schedule:
    """The two runs' times, taken when a test starts (not when the module is imported: a whole
    suite takes minutes, and the emulator stamps merges with the real time)."""

    first_at: datetime
    second_at: datetime

    @classmethod
    def now(cls) -> "Schedule":
        second = datetime.now(timezone.utc).replace(microsecond=0) + timedelta(minutes=5)
        return cls(second - timedelta(days=7), second)

    @property
    def first_run(self) -> str:
        return self.first_at.isoformat()

    @property
    def second_run(self) -> str:
        return self.second_at.isoformat()

    @property
    def first_week(self) -> str:
        return iso_week(self.first_at)

    @property
    def second_week(self) -> str:
        return iso_week(self.second_at)
EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


def load_workflow() -> dict[str, Any]:
    return yaml.safe_load(WORKFLOW.read_text(encoding="utf-8"))


# --------------------------------------------------------------------------- the stand-in runner


class Runner:
    """Runs the workflow's jobs the way GitHub's runner would, on this machine."""

    def __init__(self, tmp: Path, origin: Path, world, *, now: str) -> None:
        self.tmp, self.origin, self.world, self.now = tmp, origin, world, now
        self.artifacts = tmp / "artifacts"
        self.bin = tmp / "bin"
        self.bin.mkdir(parents=True)
        (self.bin / "python").symlink_to(sys.executable)
        shim = self.bin / "porttrack"
        shim.write_text(
            "#!/bin/sh\n"
            f'exec "{sys.executable}" -c \'import datetime, os, sys\n'
            "import porttrack.common.clock as clock\n"
            'at = datetime.datetime.fromisoformat(os.environ["SIMULATED_NOW"])\n'
            "clock.now = lambda: at\n"
            "from porttrack.cli import main\n"
            "sys.exit(main(sys.argv[1:]))' \"$@\"\n"
        )
        shim.chmod(0o755)
        # GITHUB_SERVER_URL/<owner>/<name>.git: where the runner would clone from github.com.
        self.server = tmp / "server"
        (self.server / world.upstream_repo).parent.mkdir(parents=True)
        (self.server / f"{world.upstream_repo}.git").symlink_to(world.upstream.path)

    def env(self, job: Mapping[str, Any], step: Mapping[str, Any], outputs: Mapping[str, str], output_file: Path) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "GH_", "PORTTRACK_"))}
        env.update({
            "PATH": f"{self.bin}{os.pathsep}{env['PATH']}",
            "PYTHONPATH": str(REPO_ROOT),
            "GITHUB_API_URL": self.world.fake.base_url,  # the runner sets it; porttrack reads it
            "GITHUB_SERVER_URL": self.server.as_uri(),
            "GITHUB_OUTPUT": str(output_file),
            "PORTTRACK_NO_GH_CLI": "1",
            "SIMULATED_NOW": self.now,
        })
        for scope in (job.get("env") or {}, step.get("env") or {}):
            env.update({k: self.expand(str(v), outputs) for k, v in scope.items()})
        return env

    def expand(self, text: str, outputs: Mapping[str, str]) -> str:
        known = {
            "secrets.GITHUB_TOKEN": self.world.token,
            "secrets.PORTTRACK_FORK_TOKEN || github.token": self.world.token,
            "vars.PORTTRACK_COMMENT_TRACKING == 'true' && '--comment-tracking' || ''": "",  # the variable unset
            "runner.temp": str(self.tmp / "runner-temp"),
            **{f"steps.fork.outputs.{k}": v for k, v in outputs.items()},
        }

        def one(match: re.Match[str]) -> str:
            if match.group(1) not in known:
                pytest.fail(f"the stand-in runner does not know the expression {match.group(0)!r}")
            return known[match.group(1)]

        return EXPRESSION.sub(one, text)

    def run_job(self, name: str) -> dict[str, subprocess.CompletedProcess[str]]:
        """One job, in a fresh clone. Returns each `run:` step's result by its name (or command)."""
        job = load_workflow()["jobs"][name]
        work = self.tmp / f"job-{name}"
        assert not work.exists(), "every job starts from a fresh checkout"
        outputs: dict[str, str] = {}
        results: dict[str, subprocess.CompletedProcess[str]] = {}
        for index, step in enumerate(job["steps"]):
            output_file = self.tmp / f"{name}-output-{index}"
            output_file.touch()
            if "uses" in step:
                self.uses(step, work, outputs)
                continue
            if step["run"] == "python -m pip install .":
                continue  # `porttrack` on PATH is this checkout's code (see the module docstring)
            env = self.env(job, step, outputs, output_file)
            done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", self.expand(step["run"], outputs)],
                                  cwd=work, env=env, capture_output=True, text=True, timeout=300)
            results[step.get("name", step["run"])] = done
            assert done.returncode == 0, f"step {step.get('name', step['run'])!r} failed:\n{done.stdout}\n{done.stderr}"
            if step.get("id"):
                outputs.update(line.split("=", 1) for line in output_file.read_text().splitlines() if "=" in line)
        return results

    def uses(self, step: Mapping[str, Any], work: Path, outputs: Mapping[str, str]) -> None:
        action, with_ = step["uses"].split("@")[0], {k: self.expand(str(v), outputs) for k, v in (step.get("with") or {}).items()}
        if action == "actions/checkout" and "repository" not in with_:
            git(self.tmp, "clone", "-q", str(self.origin), str(work))
        elif action == "actions/checkout":
            assert with_["repository"] == self.world.fork_repo, with_
            git(work, "clone", "-q", "--branch", with_["ref"], str(self.world.fork), with_["path"])
        elif action == "actions/setup-python":
            pass
        elif action == "actions/upload-artifact":
            into = self.artifacts / with_["name"]
            for path in filter(None, (p.strip() for p in with_["path"].splitlines())):
                source = work / path
                if source.is_dir():
                    shutil.copytree(source, into / path, dirs_exist_ok=True)
                elif source.is_file():
                    (into / path).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(source, into / path)
                else:
                    assert with_.get("if-no-files-found") == "ignore", f"artifact {with_['name']}: {path} is missing"
        elif action == "actions/download-artifact":
            shutil.copytree(self.artifacts / with_["name"], with_["path"])
        else:
            pytest.fail(f"the stand-in runner does not know {action}")


# --------------------------------------------------------------------------- the workspace repository


@pytest.fixture
def origin(tmp_path: Path, world) -> Path:
    """The workspace repository on "GitHub": tracks.yaml, the workflow and its script, and the
    state a person committed once; a bare repository every job clones."""
    ported = fork_commit(world.fork, {"vllm/warmup.py": "warm = True\n"},
                         "Port: upstream #48804 (warm kernels at startup)")
    tracks = {
        "fused-ar-graph": track([46849], "Fused AR speculator graph"),
        "sparse-indexer-skip": track([48407], "Sparse indexer skip"),
        "spec-kernel-warmup": track([48804], "Spec kernel warmup", fork_commits=[ported]),
    }
    src = tmp_path / "workspace-src"
    (src / ".github" / "workflows").mkdir(parents=True)
    shutil.copy2(WORKFLOW, src / ".github" / "workflows" / WORKFLOW.name)
    shutil.copy2(SCRIPT, src / ".github" / SCRIPT.name)
    text = yaml.safe_dump(tracks_document(tracks, fork=world.fork_repo), sort_keys=False)
    (src / "tracks.yaml").write_text(re.sub(r"^(\s*- )([0-9a-f]{40})$", r'\1"\2"', text, flags=re.M))
    git(tmp_path, "init", "-q", "-b", "main", str(src))
    git(src, "add", "-A")
    git(src, "commit", "-q", "-m", "the fork's tracking workspace")
    bare = tmp_path / "origin.git"
    git(tmp_path, "clone", "-q", "--bare", str(src), str(bare))
    return bare


def open_prs(world) -> None:
    world.open_pr(46849, {"vllm/spec.py": "fused = True\n"}, title="[MRV2][Spec] Fuse AR speculator decodes")
    world.open_pr(48407, {"vllm/indexer.py": "skip = True\n"}, title="[Attention] Skip sparse indexer scoring")
    world.open_pr(48804, {"vllm/warmup.py": "warm = True\n"}, title="[Spec Decode] Warm kernels at startup")


def scheduled_run(tmp_path: Path, origin: Path, world, now: str, label: str) -> dict[str, Any]:
    runner = Runner(tmp_path / label, origin, world, now=now)
    weekly = runner.run_job("weekly")
    runner.run_job("keep-state")
    report_file = max((runner.tmp / "artifacts" / "porttrack-weekly-report").rglob("weekly-*.md"))  # this run's week
    return {"steps": weekly, "report": report_file.read_text(encoding="utf-8"), "workdir": runner.tmp / "job-weekly"}


def branch_file(origin: Path, path: str) -> str:
    return git(origin, "show", f"porttrack-state:{path}")


def _summary_cell(report: str, track_id: str) -> str:
    [line] = [line for line in report.splitlines() if line.startswith(f"| **{track_id}** |")]
    return line.split("|")[3].strip()


# --------------------------------------------------------------------------- the tests


def test_two_scheduled_runs_carry_state_and_the_second_counts_from_the_first(tmp_path, origin, world):
    t = Schedule.now()
    open_prs(world)

    first = scheduled_run(tmp_path, origin, world, t.first_run, "run1")
    assert "no porttrack-state branch yet" in first["steps"]["Restore porttrack's state from the porttrack-state branch"].stdout
    assert f"# porttrack weekly status {t.first_week}" in first["report"] and "(the last 7 days: no previous report is recorded)" in first["report"]
    kept = json.loads(branch_file(origin, "state/reports.json"))
    assert [r["week"] for r in kept["reports"]] == [t.first_week]
    assert git(origin, "ls-tree", "-r", "--name-only", "porttrack-state").split() == [
        f"reports/weekly-{t.first_week}.md", "state/reports.json", "state/upstream.json"]
    assert git(origin, "log", "--format=%s", "main").splitlines() == ["the fork's tracking workspace"]

    world.force_push(46849, {"vllm/spec.py": "fused = 'yes'\n"})
    world.squash_merge(48407)

    second = scheduled_run(tmp_path, origin, world, t.second_run, "run2")
    restore_log = second["steps"]["Restore porttrack's state from the porttrack-state branch"].stdout
    assert "restored state/upstream.json from porttrack-state" in restore_log
    report = second["report"]
    assert f"# porttrack weekly status {t.second_week}" in report
    assert f"Changes since the {t.first_week} report of {t.first_at:%Y-%m-%d} (recorded in state/reports.json)." in report
    assert _summary_cell(report, "fused-ar-graph") == "force-pushed"
    assert _summary_cell(report, "sparse-indexer-skip") == "merged"
    assert _summary_cell(report, "spec-kernel-warmup") == "no change"
    summary = _section(report, "## Summary", "## Upstream")
    assert "(today), not checked on the fork yet" in summary and "waiting 0 days" not in summary
    assert "older than this report's period" not in report
    # The fork is checked out: coverage of the hand port is known, not a weekly problem.
    assert "no fork checkout" not in report and "coverage unknown" not in report
    kept = json.loads(branch_file(origin, "state/reports.json"))
    assert [r["week"] for r in kept["reports"]] == [t.first_week, t.second_week]
    assert git(origin, "rev-list", "--count", "porttrack-state") == "2"
    issues = [i for i in world.fake.issues(world.fork_repo) if (i["body"] or "").startswith("<!-- porttrack:weekly:")]
    assert sorted(md_week(i["body"]) for i in issues) == [t.first_week, t.second_week]


def _section(text: str, start: str, end: str) -> str:
    return text[text.index(start):text.index(end)]


def md_week(body: str) -> str:
    return body.split("porttrack:weekly:", 1)[1].split(" ", 1)[0]


def test_without_the_state_branch_the_second_run_cannot_count_from_the_record(tmp_path, origin, world):
    """The control: the same two runs, but keep-state never pushed (as with the old workflow). The
    second run no longer finds the first in state/reports.json and "this week" misses the
    force-push that happened before the run (it is first observed now, as "first observed")."""
    t = Schedule.now()
    open_prs(world)
    Runner(tmp_path / "run1", origin, world, now=t.first_run).run_job("weekly")
    world.force_push(46849, {"vllm/spec.py": "fused = 'yes'\n"})
    runner = Runner(tmp_path / "run2", origin, world, now=t.second_run)
    runner.run_job("weekly")
    report = (runner.tmp / "job-weekly" / "reports" / f"weekly-{t.second_week}.md").read_text()
    assert "(recorded in state/reports.json)" not in report
    assert _summary_cell(report, "fused-ar-graph") != "force-pushed"


def test_a_state_committed_by_a_person_that_is_newer_wins_over_the_branch(tmp_path, origin, world):
    """restore takes the state branch's copy unless the checked-out branch has a newer record."""
    t = Schedule.now()
    open_prs(world)
    scheduled_run(tmp_path, origin, world, t.first_run, "run1")
    person = tmp_path / "person"
    git(tmp_path, "clone", "-q", str(origin), str(person))
    (person / "state").mkdir()
    # newer than the first run's record, whatever today is (a fixed date went stale on 2026-12-02)
    observed = (t.first_at + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    newer = {"schema": "porttrack/upstream-state/v1", "upstream": world.upstream_repo, "observed_at": observed,
             "source": "a person's live poll", "prs": {}}
    (person / "state" / "upstream.json").write_text(json.dumps(newer))
    git(person, "add", "-A")
    git(person, "commit", "-q", "-m", "state from a local porttrack status")
    git(person, "push", "-q", "origin", "main")
    restore = Runner(tmp_path / "run2", origin, world, now=t.second_run)
    clone = restore.tmp / "clone"
    git(restore.tmp, "clone", "-q", str(origin), str(clone))
    done = subprocess.run([str(SCRIPT), "restore"], cwd=clone, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PATH": f"{restore.bin}{os.pathsep}{os.environ['PATH']}"})
    assert done.returncode == 0, done.stderr
    assert "kept the committed state/upstream.json" in done.stdout and "restored state/reports.json" in done.stdout
    assert json.loads((clone / "state" / "upstream.json").read_text())["source"] == "a person's live poll"


def test_the_workflow_grants_each_job_only_what_it_needs():
    workflow = load_workflow()
    assert workflow["permissions"] == {}
    triggers = workflow[True]  # YAML 1.1 reads the key `on` as true
    assert "schedule" in triggers and "workflow_dispatch" in triggers
    jobs = workflow["jobs"]
    assert set(jobs) == {"weekly", "keep-state"}
    assert jobs["weekly"]["permissions"] == {"contents": "read", "issues": "write"}
    assert jobs["keep-state"]["permissions"] == {"contents": "write"} and jobs["keep-state"]["needs"] == "weekly"
    keep_runs = [s["run"] for s in jobs["keep-state"]["steps"] if "run" in s]
    assert keep_runs == ['.github/porttrack-weekly.sh save "$KEPT"']  # the job that can write runs no porttrack
    runs = [s.get("run", "") for s in jobs["weekly"]["steps"]]
    assert "porttrack status" in runs
    assert any(run.startswith("porttrack report weekly --post") for run in runs)
    fork = next(s for s in jobs["weekly"]["steps"] if s.get("with", {}).get("repository"))
    assert fork["with"]["path"] == jobs["weekly"]["env"]["PORTTRACK_FORK"]
