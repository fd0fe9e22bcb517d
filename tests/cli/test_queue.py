"""`porttrack import / queue / drop / refresh` through the command line: in-process and as a
subprocess, their --json shapes and exit codes, and what SIGKILL / SIGINT during an import leave."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from porttrack.cli.testhooks import PAUSE_ENV
from porttrack.queue import manifest as queue_mod
from porttrack.workspace.files import Workspace
from testing.gitfixtures import Symlink, git
from testing.text import edit, numbered
from testing.workspace import make_workspace, track, tracks_document

GATE = {"job": {"command": "true"}, "matrix": {"contexts": [1024], "batches": [1]}, "promote": False}


A, B = numbered("a", 100), numbered("b", 60)


class Cli:
    """World + workspace tracking PRs 101 (two files, one hunk later changed) and 102 (one file)."""

    def __init__(self, world, tmp_path: Path):
        self.world = world
        world.upstream.commit({"a.py": A, "b.py": B}, "project files")
        git(world.fork, "pull", "-q", "--ff-only", "upstream", "main")
        world.open_pr(101, {"a.py": edit(A, {10: "a_10 = 'ten'", 60: "a_60 = 'sixty'"}),
                            "b.py": edit(B, {30: "b_30 = 'thirty'"})}, title="Warm \x1b[31mthe\x1b[0m kernels\nsecond line")
        world.open_pr(102, {"b.py": edit(B, {50: "b_50 = 'fifty'"})}, title="Other change")
        self.handle = make_workspace(tmp_path / "ws", {"spec": track([101, 102], gate=GATE)},
                                     api_url=world.fake.base_url, fork=world.fork, token=world.token)
        self.ws = Workspace(self.handle.root)
        assert self.cli("status", "--json").returncode == 0

    def cli(self, *args: str, **env):
        return self.handle.run_in_process(*args, env=self.handle.env(**env))

    def run(self, *args: str, **env):
        return self.handle.run(*args, env=self.handle.env(**env))

    def popen(self, *args: str, **env) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "porttrack", *args], cwd=self.ws.root, env=self.handle.env(**env),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def snapshot(self) -> dict[str, bytes]:
        root = self.ws.patches_dir
        return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def cli(world, tmp_path) -> Cli:
    return Cli(world, tmp_path)


# ---------------------------------------------------------------------------------- shapes


def test_import_json_shape_and_queue_listing(cli: Cli) -> None:
    out = cli.cli("import", "101", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert set(data) == {"schema", "dry_run", "written", "pr", "track", "upstream", "title", "pr_state", "revision",
                         "revisions_compared", "fork", "patch", "taken", "left_out", "left_out_by_reason", "hunks",
                         "selection", "regenerated", "source_check", "notes", "timings"}
    assert data["regenerated"] is None  # the PR applies to the fork as it is: upstream's diff is stored
    assert data["schema"] == "porttrack/import/v1" and data["written"] and not data["dry_run"]
    assert data["title"] == "Warm the kernels second line"  # one line, escape sequences gone
    assert (data["taken"], data["left_out"], data["patch"]["state"], data["patch"]["gate"]) == (3, 0, "queued", "spec")
    assert set(data["hunks"][0]) == {"id", "path", "kind", "where", "group", "stable", "changed_in", "applies", "taken", "reason",
                                     "reason_kind"}
    assert set(data["revision"]) == {"head", "base", "through", "merged", "merge_commit"}

    listing = json.loads(cli.cli("queue", "--json").stdout)
    assert listing["schema"] == "porttrack/queue-list/v1" and listing["coverage"] == []
    (entry,) = listing["patches"]
    assert {k: entry[k] for k in ("name", "state", "pr", "track", "hunks_taken", "hunks_left_out")} == {
        "name": data["patch"]["name"], "state": "queued", "pr": 101, "track": "spec", "hunks_taken": 3, "hunks_left_out": 0}
    human = cli.cli("queue")
    assert human.returncode == 0 and data["patch"]["name"] in human.stdout and "queued" in human.stdout


def test_human_import_output_lists_each_hunk_and_dry_run_writes_nothing(cli: Cli) -> None:
    before = cli.snapshot() if cli.ws.patches_dir.exists() else {}
    out = cli.cli("import", "#101", "--dry-run", "--exclude", "b.py")
    assert out.returncode == 0, out.stderr
    assert "2 of 3 hunks taken, 1 left out; would write patches/0001-pr101-" in out.stdout
    assert "excluded by path rule: b.py matches --exclude 'b.py'" in out.stdout
    assert "dry run: would write" in out.stderr
    assert (cli.snapshot() if cli.ws.patches_dir.exists() else {}) == before


def test_drop_and_refresh_json(cli: Cli) -> None:
    assert cli.cli("import", "101").returncode == 0
    cli.world.append(101, {"b.py": edit(B, {30: "b_30 = 'THIRTY'"})})
    refreshed = json.loads(cli.cli("refresh", "101", "--json").stdout)
    assert refreshed["schema"] == "porttrack/refresh/v1" and refreshed["moved"] and not refreshed["written"]
    assert refreshed["counts"] == {"new": 0, "removed": 0, "changed": 1, "unchanged": 2}
    changed = next(h for h in refreshed["hunks"] if h["change"] == "changed")
    assert changed["was_taken"] and not changed["now_taken"] and changed["reason"].startswith("unstable: changed in revision")
    updated = json.loads(cli.cli("refresh", "101", "--update", "--json").stdout)
    assert updated["written"] and updated["patch_after"]["hunks_taken"] == 2
    dry = json.loads(cli.cli("drop", "101", "--reason", "not needed", "--dry-run", "--json").stdout)
    assert dry == {"schema": "porttrack/drop/v1", "name": updated["patch"], "pr": 101, "from": "queued", "to": "dropped",
                   "reason": "not needed", "dry_run": True, "written": False}
    done = cli.cli("drop", updated["patch"], "--reason", "not needed")
    assert done.returncode == 0 and "dropped" in done.stdout
    assert json.loads(cli.cli("queue", "--json").stdout)["patches"] == []
    assert json.loads(cli.cli("queue", "--all", "--json").stdout)["patches"][0]["state"] == "dropped"


def test_exit_codes(cli: Cli) -> None:
    missing = cli.cli("drop", "nope", "--reason", "x")
    assert missing.returncode == 2 and "no queued patch 'nope'" in missing.stderr
    assert cli.cli("import", "abc").returncode == 2
    ok = cli.run("import", "102", "--json")  # as a user runs it: a separate process
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["written"]
    again = cli.run("import", "102")
    assert again.returncode == 6 and "already queued" in again.stderr
    # everything left out: exit 1, nothing written
    before = cli.snapshot()
    nothing = cli.cli("import", "101", "--paths", "docs/**")
    assert nothing.returncode == 1 and "nothing of #101 can be taken" in nothing.stderr
    assert cli.snapshot() == before


def test_import_falls_back_to_the_recorded_state_when_github_fails(cli: Cli) -> None:
    cli.world.fake.inject("status", path="/pulls/101", status=502, times=5)
    out = cli.cli("import", "101", "--json", PORTTRACK_HTTP_ATTEMPTS="1", PORTTRACK_HTTP_BACKOFF="0")
    assert out.returncode == 0, out.stderr
    assert "using the upstream state recorded at" in out.stderr and json.loads(out.stdout)["written"]
    untracked = cli.cli("import", "555", "--offline")
    assert untracked.returncode == 2 and "#555 is not tracked; tracked: #101, #102" in untracked.stderr
    cli.handle.write_tracks(tracks_document({"spec": track([101, 102, 555], gate=GATE)}, checkout=str(cli.world.fork)))
    never = cli.cli("import", "555", "--offline")
    assert never.returncode == 6 and "has not been observed yet" in never.stderr


def test_hostile_symlink_is_refused_with_exit_6_and_nothing_written(cli: Cli) -> None:
    cli.world.open_pr(103, {"escape": Symlink("../../../../root/.ssh/authorized_keys")}, title="innocent looking")
    cli.handle.write_tracks(__import__("testing.workspace", fromlist=["tracks_document"]).tracks_document(
        {"spec": track([101, 102, 103], gate=GATE)}))
    assert cli.cli("status", "--json").returncode == 0
    assert cli.cli("import", "102").returncode == 0
    before = cli.snapshot()
    out = cli.run("import", "103")
    assert out.returncode == 6, out.stderr
    assert "symlink 'escape': target '../../../../root/.ssh/authorized_keys' points outside the work tree" in out.stderr
    assert cli.snapshot() == before


# ------------------------------------------------------------------------- interruptions


def _wait_for_pause(proc: subprocess.Popen, point: str, timeout: float = 60) -> None:
    assert proc.stderr is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if f"paused at {point}" in line:
            return
        if not line and proc.poll() is not None:
            raise AssertionError(f"exited {proc.returncode} before reaching {point}: {proc.stdout.read()}")
    raise AssertionError(f"never reached {point}")


@pytest.mark.parametrize("point", ["fetched", "classified", "planned", "locked"])
def test_sigkill_during_import_leaves_the_queue_as_it_was(cli: Cli, point: str) -> None:
    assert cli.cli("import", "102").returncode == 0  # a queue that is not empty
    before = cli.snapshot()
    proc = cli.popen("import", "101", **{PAUSE_ENV: point})
    try:
        _wait_for_pause(proc, point)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert cli.snapshot() == before
    assert [p.pr for p in queue_mod.load(cli.ws).patches] == [102]
    rerun = cli.run("import", "101")
    assert rerun.returncode == 0, rerun.stderr
    queue = queue_mod.load(cli.ws)
    assert [p.pr for p in queue.patches] == [102, 101] and not queue.series_stale
    assert queue_mod.read_patch(cli.ws, queue.get(101))
    leftovers = cli.world.fork / ".git" / "porttrack" / "import"
    assert not leftovers.is_dir() or list(leftovers.iterdir()) == []  # the scratch index was swept


def test_sigkill_at_random_moments_never_leaves_a_broken_queue(cli: Cli) -> None:
    assert cli.cli("import", "102").returncode == 0
    manifest = queue_mod.manifest_path(cli.ws).read_bytes()
    for delay in (0.2, 0.5, 0.8, 1.1, 1.4, 1.8, 2.4, 3.0):
        proc = cli.popen("import", "101")
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        queue = queue_mod.load(cli.ws)  # always parseable
        if len(queue.patches) == 2:  # the import got through its commit point (the manifest): whole
            assert queue_mod.read_patch(cli.ws, queue.get(101))
            if queue.series_stale:  # killed between the manifest and `series`: the next write repairs it
                assert not queue_mod.load(cli.ws, repair=True).series_stale
                assert not queue_mod.load(cli.ws).series_stale
            break
        assert queue_mod.manifest_path(cli.ws).read_bytes() == manifest
    else:
        assert cli.run("import", "101").returncode == 0
    assert [p.pr for p in queue_mod.load(cli.ws).patches] == [102, 101]


def test_sigint_during_import_exits_130_and_changes_nothing(cli: Cli) -> None:
    assert cli.cli("import", "102").returncode == 0
    before = cli.snapshot()
    proc = cli.popen("import", "101", **{PAUSE_ENV: "classified"})
    _wait_for_pause(proc, "classified")
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 130
    assert "interrupted" in proc.stderr.read()
    assert cli.snapshot() == before
