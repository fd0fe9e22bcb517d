""".github/porttrack-weekly.sh save, on its own: a workspace whose main branch has state/
committed (as soon as a person commits a local `porttrack status` run), weeks in a row, and a
kill at every git step of a save.

The kill comes from a `git` on PATH that runs the real one and SIGKILLs the whole process group
(the script and every git it started) before or after a named subcommand: each boundary between
two of save's steps is walked, not a random moment. The push is save's commit point; a killed
save leaves origin as it was (or, killed after the push, already right), and one re-run makes
the state branch hold exactly the week's files.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from testing.gitfixtures import git

SCRIPT = Path(__file__).resolve().parents[2] / ".github" / "porttrack-weekly.sh"
BRANCH = "porttrack-state"

# Every git subcommand save runs, in order; `push` is the commit point.
SAVE_STEPS = ("ls-remote", "fetch", "rev-parse", "read-tree", "rm", "hash-object", "update-index",
              "write-tree", "commit-tree", "push")

_KILLING_GIT = """#!/bin/sh
# the real git, but SIGKILL the process group before/after the subcommand named by the test
sub=""
for arg in "$@"; do case "$arg" in -*) ;; *) sub=$arg; break ;; esac; done
if [ "$sub" = "$KILL_BEFORE" ]; then kill -KILL 0; fi
"$REAL_GIT" "$@"
rc=$?
if [ "$sub" = "$KILL_AFTER" ]; then kill -KILL 0; fi
exit $rc
"""


@pytest.fixture
def workspace(tmp_path: Path) -> tuple[Path, Path]:
    """(origin, checkout): a bare origin whose main has state/ and reports/ committed, and the
    keep-state job's clone of it."""
    src = tmp_path / "src"
    (src / "state").mkdir(parents=True)
    (src / "reports").mkdir()
    (src / "state" / "upstream.json").write_text(json.dumps({"observed_at": "2026-01-01T00:00:00Z", "by": "a person"}))
    (src / "state" / "reports.json").write_text(json.dumps({"reports": []}))
    (src / "reports" / "weekly-2026-W01.md").write_text("# a person's report\n")
    (src / "tracks.yaml").write_text("upstream: {repo: vllm-project/vllm}\n")
    git(tmp_path, "init", "-q", "-b", "main", str(src))
    git(src, "add", "-A")
    git(src, "commit", "-q", "-m", "the workspace, with state a person committed")
    origin = tmp_path / "origin.git"
    git(tmp_path, "clone", "-q", "--bare", str(src), str(origin))
    checkout = tmp_path / "checkout"
    git(tmp_path, "clone", "-q", str(origin), str(checkout))
    return origin, checkout


def week_files(tmp_path: Path, week: int) -> Path:
    """The artifact the weekly job hands to keep-state in week `week`."""
    kept = tmp_path / f"kept-{week}"
    (kept / "state").mkdir(parents=True)
    (kept / "reports").mkdir()
    (kept / "state" / "upstream.json").write_text(json.dumps({"observed_at": f"2026-02-{week:02d}T06:17:00Z"}))
    (kept / "state" / "reports.json").write_text(json.dumps({"reports": [{"week": f"2026-W{w:02d}"} for w in range(1, week + 1)]}))
    for w in range(1, week + 1):
        (kept / "reports" / f"weekly-2026-W{w:02d}.md").write_text(f"# week {w}\n")
    return kept


def save(checkout: Path, kept: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SCRIPT), "save", str(kept)], cwd=checkout, capture_output=True, text=True,
                          timeout=60, env=env or dict(os.environ), start_new_session=True)


def branch_tree(origin: Path) -> dict[str, str]:
    names = git(origin, "ls-tree", "-r", "--name-only", BRANCH).split()
    return {name: git(origin, "show", f"{BRANCH}:{name}") for name in names}


def files_of(kept: Path) -> dict[str, str]:
    return {p.relative_to(kept).as_posix(): p.read_text().rstrip("\n") for p in sorted(kept.rglob("*")) if p.is_file()}


def test_consecutive_saves_with_state_committed_on_main_each_keep_their_week(tmp_path, workspace):
    origin, checkout = workspace
    for week in (1, 2, 3):
        kept = week_files(tmp_path, week)
        done = save(checkout, kept)
        assert done.returncode == 0, done.stderr
        assert f"kept porttrack's state on {BRANCH}" in done.stdout
        assert branch_tree(origin) == files_of(kept)
    assert git(origin, "rev-list", "--count", BRANCH) == "3"
    # main, and its committed state/, are untouched
    assert json.loads(git(origin, "show", "main:state/upstream.json"))["by"] == "a person"
    assert git(origin, "rev-list", "--count", "main") == "1"


def test_a_save_with_nothing_new_says_so_and_adds_no_commit(tmp_path, workspace):
    origin, checkout = workspace
    kept = week_files(tmp_path, 1)
    assert save(checkout, kept).returncode == 0
    again = save(checkout, kept)
    assert again.returncode == 0, again.stderr
    assert f"{BRANCH} is unchanged" in again.stdout
    assert git(origin, "rev-list", "--count", BRANCH) == "1"


@pytest.mark.parametrize("when", ["before", "after"])
@pytest.mark.parametrize("step", SAVE_STEPS)
def test_a_kill_at_every_step_of_the_second_save_is_repaired_by_one_rerun(tmp_path, workspace, step, when):
    origin, checkout = workspace
    assert save(checkout, week_files(tmp_path, 1)).returncode == 0
    week1 = branch_tree(origin)
    kept = week_files(tmp_path, 2)

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "git").write_text(_KILLING_GIT)
    (bin_dir / "git").chmod(0o755)
    real_git = subprocess.run(["sh", "-c", "command -v git"], capture_output=True, text=True, check=True).stdout.strip()
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "REAL_GIT": real_git,
           "KILL_BEFORE": step if when == "before" else "", "KILL_AFTER": step if when == "after" else ""}
    killed = save(checkout, kept, env)
    assert killed.returncode == -signal.SIGKILL, (killed.returncode, killed.stderr)

    pushed = when == "after" and step == "push"
    assert branch_tree(origin) == (files_of(kept) if pushed else week1)  # never a half-written branch
    rerun = save(checkout, kept)
    assert rerun.returncode == 0, rerun.stderr
    assert branch_tree(origin) == files_of(kept)
    assert git(origin, "rev-list", "--count", BRANCH) == "2"


def test_restore_over_a_state_branch_file_nested_past_jsons_limit_keeps_the_committed_state(tmp_path, workspace):
    """A damaged record on the state branch is the oldest, not a traceback that stops the job."""
    origin, checkout = workspace
    kept = week_files(tmp_path, 1)
    (kept / "state" / "upstream.json").write_text("[" * 100_000 + "]" * 100_000)
    assert save(checkout, kept).returncode == 0
    fresh = tmp_path / "fresh"
    git(tmp_path, "clone", "-q", str(origin), str(fresh))
    done = subprocess.run([str(SCRIPT), "restore"], cwd=fresh, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "kept the committed state/upstream.json" in done.stdout
    assert json.loads((fresh / "state" / "upstream.json").read_text())["by"] == "a person"
