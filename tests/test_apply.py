"""`porttrack apply` against real git repositories: an upstream with PRs, a fork cloned from it,
and a workspace whose queue holds `git format-patch` files of those PRs."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from porttrack import apply as apply_mod
from porttrack.cli import testhooks
from porttrack.diff.hunks import parse_diff
from porttrack.queue import manifest as queue_mod
from porttrack.queue import series as series_mod
from porttrack.queue.manifest import HunkRef, Patch, Revision, patch_file_name
from porttrack.workspace.files import Workspace
from testing.gitfixtures import Executable, Upstream, clone_fork, fork_commit, git, git_bytes
from testing.workspace import make_workspace, track

REPO_ROOT = Path(__file__).resolve().parents[1]
STAGING = "refs/heads/porttrack/staging"
DEFAULT = "refs/heads/porttrack/default"
UPSTREAM_DEV = {"GIT_AUTHOR_NAME": "Upstream Dev", "GIT_AUTHOR_EMAIL": "dev@upstream.invalid",
                "GIT_AUTHOR_DATE": "1767300000 +0000"}


@pytest.fixture(autouse=True)
def no_pause(monkeypatch):
    """Git isolation comes from conftest's autouse `git_env`; builds never pause unless asked."""
    monkeypatch.delenv(testhooks.PAUSE_ENV, raising=False)


def numbered(prefix: str, n: int) -> str:
    return "".join(f"{prefix}_{i} = {i}\n" for i in range(1, n + 1))


def edit(text: str, changes: dict[int, str], insert_top: int = 0) -> str:
    lines = text.splitlines(keepends=True)
    for lineno, new in changes.items():
        lines[lineno - 1] = new + "\n"
    return "".join([f"# header {i}\n" for i in range(insert_top)] + lines)


A, B, C = numbered("a", 100), numbered("b", 60), numbered("c", 40)


class ApplyWorld:
    """Upstream with PRs 101 (a.py), 102 (b.py, two hunks) and 103 (c.py + a new file); a fork;
    a workspace whose queue is filled by `queue()`."""

    def __init__(self, root: Path):
        self.root = root
        self.up = Upstream(root / "upstream", initial_files={"a.py": A, "b.py": B, "c.py": C})
        self.up.open_pr(101, {"a.py": edit(A, {50: "a_50 = 'fifty'"})}, title="Warm up the drafter kernels")
        self.up.open_pr(102, {"b.py": edit(B, {5: "b_5 = 'five'", 40: "b_40 = 'forty'"})}, title="Fuse the speculator graph")
        self.up.open_pr(103, {"c.py": edit(C, {20: "c_20 = 'twenty'"}), "docs/new.md": "# new\n"}, title="Skip sparse indexer")
        self.fork = clone_fork(self.up, root / "fork")
        # These tests build from the upstream base (a quilt-style fork); the default base, the
        # fork's own branch, has its own test below.
        self.ws_handle = make_workspace(root / "ws", {"spec": track([101, 102, 103])}, fork=self.fork, token=None,
                                        fork_options={"build_base": "upstream/main"})
        self.ws = Workspace(self.ws_handle.root)
        self.seq = 0

    def upstream_moves(self, files: dict[str, str]) -> str:
        """Upstream's default branch moves on and the fork fetches it (its upstream base moves)."""
        sha = self.up.commit(files, "upstream moves on")
        git(self.fork, "fetch", "-q", "upstream")
        return sha

    def patch(self, pr: int) -> bytes:
        """The PR as one `git format-patch` mail carrying porttrack's provenance trailers."""
        head = self.up.head(pr)
        message = (f"{self.up.pr(pr).title}\n\nTaken from upstream PR #{pr}.\n\n"
                   f"Porttrack-PR: {pr}\nPorttrack-Upstream-Head: {head}\n")
        commit = git(self.up.work, "commit-tree", f"{head}^{{tree}}", "-p", f"{head}^", "-m", message, env=UPSTREAM_DEV)
        return git_bytes(self.up.work, "format-patch", "-1", "--stdout", commit)

    def queue(self, pr: int, data: bytes | None = None, state: str = "queued", depends_on: tuple[str, ...] = ()) -> Patch:
        data = self.patch(pr) if data is None else data
        self.seq += 1
        name = f"{self.seq:04d}-pr{pr}"
        hunks = tuple(HunkRef(h.id, h.path, h.kind) for fd in parse_diff(data) for h in fd.hunks)
        patch = Patch(name=name, file=patch_file_name(name, data), sha256=hashlib.sha256(data).hexdigest(),
                      track="spec", pr=pr, upstream="vllm-project/vllm", title=f"PR {pr}",
                      revision=Revision(head=self.up.head(pr), base=self.up.tip()), hunks_taken=hunks,
                      hunks_left_out=(), depends_on=depends_on, state=state, gate="spec")
        queue_mod.save(self.ws, queue_mod.load(self.ws).add(patch), new_files={patch.file: data})
        return patch

    def cli(self, *args: str, **env: str):
        return self.ws_handle.run_in_process(*args, env=self.ws_handle.env(**env))

    def subprocess_env(self, **env: str) -> dict[str, str]:
        """The CLI's environment as a separate process; finds this checkout even when not installed."""
        full = self.ws_handle.env(**env)
        full["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), full.get("PYTHONPATH")]))
        return full

    def run(self, *args: str, **env: str):
        return self.ws_handle.run(*args, env=self.subprocess_env(**env))

    def popen(self, *args: str, **env: str) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "porttrack", *args], cwd=self.ws.root,
                                env=self.subprocess_env(**env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def scratch_dirs(self) -> list[Path]:
        where = self.fork / ".git" / "porttrack" / "apply"
        return sorted(where.iterdir()) if where.is_dir() else []


@pytest.fixture
def aw(tmp_path) -> ApplyWorld:
    """An ApplyWorld (conftest's `world` also brings the GitHub emulator, which apply never uses)."""
    return ApplyWorld(tmp_path)


def snapshot(fork: Path) -> dict[str, object]:
    """Everything a failed or interrupted apply must leave exactly as it was."""
    index = (fork / ".git" / "index").read_bytes()  # before any status call could refresh it
    quiet = {"GIT_OPTIONAL_LOCKS": "0"}
    files = {str(p.relative_to(fork)): p.read_bytes() for p in sorted(fork.rglob("*"))
             if p.is_file() and ".git" not in p.relative_to(fork).parts}
    return {
        "refs": git(fork, "for-each-ref", "--format=%(refname) %(objectname)"),
        "HEAD": (git(fork, "symbolic-ref", "HEAD"), git(fork, "rev-parse", "HEAD")),
        "status": git(fork, "status", "--porcelain=v1", "--untracked-files=all", env=quiet),
        "index": index,
        "worktrees": git(fork, "worktree", "list", "--porcelain"),
        "files": files,
    }


def subjects(fork: Path, rev_range: str) -> list[str]:
    return git(fork, "log", "--reverse", "--format=%s", rev_range).splitlines()


# -- building -------------------------------------------------------------------------------------


def test_staging_build_has_one_commit_per_patch_with_provenance(aw):
    patches = [aw.queue(101), aw.queue(102), aw.queue(103)]
    before = snapshot(aw.fork)

    out = aw.cli("apply", "--staging")

    assert out.returncode == 0, out.stderr
    assert subjects(aw.fork, f"upstream/main..{STAGING}") == [
        "Warm up the drafter kernels", "Fuse the speculator graph", "Skip sparse indexer"]
    body = git(aw.fork, "log", "-1", "--format=%B", f"{STAGING}~2")
    assert "Porttrack-PR: 101" in body and f"Porttrack-Upstream-Head: {aw.up.head(101)}" in body
    assert git(aw.fork, "log", "-1", "--format=%an <%ae> %at|%cn <%ce>", STAGING) == \
        "Upstream Dev <dev@upstream.invalid> 1767300000|porttrack <porttrack@localhost>"
    assert git(aw.fork, "show", f"{STAGING}:a.py") == edit(A, {50: "a_50 = 'fifty'"}).rstrip("\n")
    assert git(aw.fork, "show", f"{STAGING}:docs/new.md") == "# new"
    # the fork's own branch, HEAD, index and files were not touched; no worktree was left
    after = snapshot(aw.fork)
    assert {k: v for k, v in after.items() if k != "refs"} == {k: v for k, v in before.items() if k != "refs"}
    assert set(after["refs"].splitlines()) == set(before["refs"].splitlines()) | {f"{STAGING} {git(aw.fork, 'rev-parse', STAGING)}"}
    assert aw.scratch_dirs() == []
    # the run is recorded
    runs = apply_mod.load_runs(aw.ws, "porttrack/staging")
    assert [r["outcome"] for r in runs] == ["created"]
    assert runs[0]["new"] == git(aw.fork, "rev-parse", STAGING) and runs[0]["old"] is None
    assert [p["name"] for p in runs[0]["patches"]] == [p.name for p in patches]
    assert aw.ws.state_dir.joinpath("apply", "porttrack", "staging.json").is_file()
    assert "porttrack/staging: upstream/main" in out.stdout and "created refs/heads/porttrack/staging" in out.stdout


def test_rebuilding_an_unchanged_queue_gives_the_same_commits(aw):
    aw.queue(101)
    aw.queue(102)
    assert aw.cli("apply").returncode == 0
    first = git(aw.fork, "rev-parse", STAGING)

    again = aw.cli("apply", "--json")

    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert report["outcome"] == "unchanged" and report["new"] == first and report["moved"] is False
    assert git(aw.fork, "rev-parse", STAGING) == first
    # a new patch rebuilds from the base: the first two commits stay identical
    aw.queue(103)
    assert aw.cli("apply").returncode == 0
    assert git(aw.fork, "rev-parse", f"{STAGING}~1") == first


def test_an_unchanged_apply_answers_without_applying_again(aw):
    """Issue 32: `apply --staging` with nothing changed re-applied every patch (805 git processes at
    200 patches) before saying "unchanged". Same base, same patches, the branch still at the last
    build: the recorded build answers, no `git apply` runs; anything that moved builds again."""
    aw.queue(101)
    aw.queue(102)
    assert aw.cli("apply").returncode == 0
    first = apply_mod.load_runs(aw.ws, "porttrack/staging")[-1]

    again = aw.cli("-v", "apply", "--json")
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert report["outcome"] == "unchanged" and report["new"] == first["new"]
    assert [p["outcome"] for p in report["patches"]] == [p["outcome"] for p in first["patches"]]
    applies = [line for line in again.stderr.splitlines() if line.startswith("porttrack: git apply")]
    assert applies == [], applies
    # the branch moved by hand: built again (and found to differ)
    git(aw.fork, "branch", "-f", "porttrack/staging", "upstream/main")
    moved = aw.cli("-v", "apply", "--json")
    assert moved.returncode == 0, moved.stderr
    assert json.loads(moved.stdout)["outcome"] == "updated"
    assert [line for line in moved.stderr.splitlines() if line.startswith("porttrack: git apply")]


def test_default_build_carries_promoted_patches_only(aw):
    aw.queue(101, state="default-enabled")
    aw.queue(102, state="gated-pass")
    aw.queue(103, state="queued")

    out = aw.cli("apply", "--default", "--json")

    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["branch"] == "porttrack/default" and [p["pr"] for p in report["patches"]] == [101]
    assert subjects(aw.fork, f"upstream/main..{DEFAULT}") == ["Warm up the drafter kernels"]
    assert git(aw.fork, "rev-parse", "--verify", "--quiet", STAGING, check=False) == ""
    assert aw.cli("apply", "--staging").returncode == 0
    assert len(subjects(aw.fork, f"upstream/main..{STAGING}")) == 3


def test_promoted_patch_missing_its_dependency_is_noted(aw):
    first = aw.queue(101)
    aw.queue(102, state="default-enabled", depends_on=(first.name,))

    report = json.loads(aw.cli("apply", "--default", "--json").stdout)

    assert report["patches"][0]["notes"] == [f"depends on {first.name}, which is not in this build"]


def test_queue_applies_with_git_am_and_quilt_like_the_staging_build(aw, tmp_path):
    for pr in (101, 102, 103):
        aw.queue(pr)
    assert aw.cli("apply").returncode == 0
    series = [aw.ws.root / "patches" / line for line in
              (aw.ws.root / "patches" / "series").read_text().splitlines() if line and not line.startswith("#")]
    assert len(series) == 3

    am = tmp_path / "am"
    shutil.copytree(aw.fork, am, symlinks=True)
    git(am, "checkout", "-q", "-B", "am-test", "upstream/main")
    git(am, "am", "-q", *map(str, series))
    assert git(am, "rev-parse", "HEAD^{tree}") == git(aw.fork, "rev-parse", f"{STAGING}^{{tree}}")
    assert subjects(am, "upstream/main..HEAD") == subjects(aw.fork, f"upstream/main..{STAGING}")

    if shutil.which("quilt") is None:
        pytest.fail("quilt is not installed (apt-get install quilt; .ci/run does it)")
    qu = tmp_path / "quilt"
    shutil.copytree(aw.fork, qu, symlinks=True)
    git(qu, "checkout", "-q", "-B", "quilt-test", "upstream/main")
    env = {**os.environ, "QUILT_PATCHES": str(aw.ws.root / "patches"), "QUILTRC": "/dev/null"}
    pushed = subprocess.run(["quilt", "push", "-a"], cwd=qu, env=env, capture_output=True, text=True)
    assert pushed.returncode == 0, pushed.stdout + pushed.stderr
    assert "FAILED" not in pushed.stdout and "fuzz" not in pushed.stdout
    for path in ("a.py", "b.py", "c.py", "docs/new.md"):
        assert (qu / path).read_text() == git(aw.fork, "show", f"{STAGING}:{path}") + "\n"


# -- outcomes per patch and per hunk --------------------------------------------------------------


def test_moved_context_is_reported_as_offset_per_hunk(aw):
    aw.upstream_moves({"a.py": edit(A, {}, insert_top=5)})
    aw.queue(101)
    aw.queue(102)

    report = json.loads(aw.cli("apply", "--json").stdout)

    first, second = report["patches"]
    assert first["outcome"] == "offset"
    assert [(h["path"], h["outcome"], h["offset"]) for h in first["hunks"]] == [("a.py", "offset", 5)]
    assert first["hunks"][0]["header"].startswith("@@ -47,7 +47,7 @@")
    assert second["outcome"] == "clean" and [h["outcome"] for h in second["hunks"]] == ["clean", "clean"]
    assert report["summary"]["offset"] == 1 and report["summary"]["clean"] == 1
    assert "a_50 = 'fifty'" in git(aw.fork, "show", f"{STAGING}:a.py")


def test_nearby_upstream_change_is_merged_three_way(aw):
    aw.upstream_moves({"b.py": edit(B, {42: "b_42 = 'upstream'"})})
    aw.queue(102)

    report = json.loads(aw.cli("apply", "--json").stdout)

    patch = report["patches"][0]
    assert patch["outcome"] == "3-way"
    assert [h["outcome"] for h in patch["hunks"]] == ["clean", "3-way"]
    built = git(aw.fork, "show", f"{STAGING}:b.py")
    assert "b_40 = 'forty'" in built and "b_42 = 'upstream'" in built and "b_5 = 'five'" in built


def test_patch_without_preimage_blobs_applies_with_fuzz(aw):
    # A hand-made patch: its index line names blobs the fork never had, and the context line
    # farthest from the change no longer matches (upstream renamed it), so only fuzz applies it.
    aw.upstream_moves({"a.py": edit(A, {47: "a_47 = 'renamed'"})})
    data = (b"From 1111111111111111111111111111111111111111 Mon Sep 17 00:00:00 2001\n"
            b"From: Hand Maker <hand@example.invalid>\nDate: Thu, 1 Jan 2026 10:00:00 +0000\n"
            b"Subject: [PATCH] hand-made change\n\nPorttrack-PR: 101\n---\n"
            b"diff --git a/a.py b/a.py\nindex 1234567..89abcde 100644\n--- a/a.py\n+++ b/a.py\n"
            b"@@ -47,7 +47,7 @@\n a_47 = 47\n a_48 = 48\n a_49 = 49\n-a_50 = 50\n+a_50 = 'hand'\n"
            b" a_51 = 51\n a_52 = 52\n a_53 = 53\n-- \n2.39.5\n\n")
    aw.queue(101, data=data)

    report = json.loads(aw.cli("apply", "--json").stdout)

    patch = report["patches"][0]
    assert patch["outcome"] == "fuzz", patch
    # git reduced the context to (2/2): one line ignored at each end, patch(1)'s fuzz 1
    assert [(h["outcome"], h["fuzz"]) for h in patch["hunks"]] == [("fuzz", 1)]
    assert "a_50 = 'hand'" in git(aw.fork, "show", f"{STAGING}:a.py")
    assert git(aw.fork, "log", "-1", "--format=%s|%an", STAGING) == "hand-made change|Hand Maker"


def test_conflict_exits_4_and_leaves_everything_as_it_was(aw):
    aw.queue(101)
    aw.queue(102)
    aw.queue(103)
    assert aw.cli("apply").returncode == 0
    aw.upstream_moves({"b.py": edit(B, {40: "b_40 = 'upstream disagrees'"})})
    before = snapshot(aw.fork)

    out = aw.cli("apply", "--json")

    assert out.returncode == 4, out.stderr
    assert snapshot(aw.fork) == before
    assert aw.scratch_dirs() == []
    report = json.loads(out.stdout)
    assert report["outcome"] == "conflict" and report["new"] is None and report["moved"] is False
    clean, bad, untried = report["patches"]
    assert clean["outcome"] == "clean" and clean["commit"]
    assert bad["outcome"] == "conflict" and bad["conflict_files"] == ["b.py"] and bad["commit"] is None
    assert [h["outcome"] for h in bad["hunks"]] == ["clean", "conflict"]
    assert untried["outcome"] == "not-tried" and {h["outcome"] for h in untried["hunks"]} == {"not-tried"}
    conflicting = bad["hunks"][1]["id"]
    message = out.stderr.strip().splitlines()[-1]
    assert message.startswith("porttrack: error: patch 0002-pr102 (PR #102) conflicts")
    assert "b.py" in message and conflicting in message and "left as they were" in message
    assert [r["outcome"] for r in apply_mod.load_runs(aw.ws, "porttrack/staging")] == ["created", "conflict"]
    # the human report names the patch, the hunk and the file too
    human = aw.cli("apply")
    assert human.returncode == 4 and conflicting in human.stdout and "conflict in b.py" in human.stdout


def test_dirty_work_tree_is_refused_unless_forced(aw):
    aw.queue(101)
    (aw.fork / "a.py").write_text("local edit\n")
    before = snapshot(aw.fork)

    refused = aw.cli("apply")

    assert refused.returncode == 6
    assert "local changes" in refused.stderr and "--force" in refused.stderr
    assert snapshot(aw.fork) == before
    forced = aw.cli("apply", "--force", "--json")
    assert forced.returncode == 0, forced.stderr
    assert json.loads(forced.stdout)["forced"] is True
    assert (aw.fork / "a.py").read_text() == "local edit\n"
    assert "a_50 = 'fifty'" in git(aw.fork, "show", f"{STAGING}:a.py")


def test_checked_out_target_moves_with_its_files_or_is_refused_when_dirty(aw):
    aw.queue(101)
    assert aw.cli("apply").returncode == 0
    git(aw.fork, "checkout", "-q", "porttrack/staging")
    aw.queue(102)

    assert aw.cli("apply").returncode == 0

    assert git(aw.fork, "rev-parse", "HEAD") == git(aw.fork, "rev-parse", STAGING)
    assert git(aw.fork, "status", "--porcelain") == ""
    assert "b_5 = 'five'" in (aw.fork / "b.py").read_text()
    aw.queue(103)
    (aw.fork / "b.py").write_text("local edit\n")
    refused = aw.cli("apply")
    assert refused.returncode == 6 and "local changes" in refused.stderr
    assert len(subjects(aw.fork, f"upstream/main..{STAGING}")) == 2


def test_dry_run_builds_and_reports_but_moves_and_records_nothing(aw):
    aw.queue(101)
    before = snapshot(aw.fork)

    out = aw.cli("apply", "--dry-run", "--json")

    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["outcome"] == "dry-run" and report["dry_run"] is True and report["new"]
    assert report["patches"][0]["commit"] == report["new"]
    assert snapshot(aw.fork) == before
    assert apply_mod.load_runs(aw.ws, "porttrack/staging") == []
    assert aw.cli("apply").returncode == 0
    assert git(aw.fork, "rev-parse", STAGING) == report["new"]  # reproducible: the same build


def test_record_keeps_the_last_runs(aw, monkeypatch):
    monkeypatch.setattr(apply_mod, "KEEP_RUNS", 3)
    aw.queue(101)
    for _ in range(5):
        assert aw.cli("apply").returncode == 0
    runs = apply_mod.load_runs(aw.ws, "porttrack/staging")
    assert [r["outcome"] for r in runs] == ["unchanged"] * 3


def test_json_shape(aw):
    aw.queue(101)

    report = json.loads(aw.cli("apply", "--json").stdout)

    assert set(report) == {"schema", "target", "branch", "ref", "fork", "base", "old", "new", "outcome", "moved",
                           "dry_run", "forced", "started_at", "finished_at", "duration_ms", "summary", "patches",
                           "inputs"}  # issue 32: what the build is a function of (additive)
    assert report["schema"] == "porttrack/apply/v1" and report["target"] == "staging"
    assert report["base"] == {"ref": "upstream/main", "sha": git(aw.fork, "rev-parse", "upstream/main")}
    assert report["summary"] == {"clean": 1, "offset": 0, "3-way": 0, "fuzz": 0, "conflict": 0, "not-tried": 0}
    (patch,) = report["patches"]
    assert set(patch) == {"name", "file", "pr", "track", "state", "outcome", "commit", "empty", "conflict_files",
                          "errors", "notes", "hunks"}
    assert patch["hunks"] == [{"id": parse_diff(aw.patch(101))[0].hunks[0].id, "path": "a.py", "kind": "text",
                               "index": 1, "header": "@@ -47,7 +47,7 @@", "outcome": "clean", "offset": None,
                               "fuzz": None}]


def test_cli_as_a_subprocess(aw):
    aw.queue(101)
    aw.queue(103)

    out = aw.run("apply", "--json")

    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["outcome"] == "created" and report["new"] == git(aw.fork, "rev-parse", STAGING)
    assert out.stderr == ""  # --json: data only
    human = aw.run("apply", "--staging")
    assert human.returncode == 0 and "already this build" in human.stdout
    # the same base and patches as the recorded build: answered without building again (issue 32)
    assert "the same 2 patches: nothing to do" in human.stderr and "building" not in human.stderr


def test_empty_queue_builds_the_upstream_base(aw):
    out = aw.cli("apply", "--json")
    assert out.returncode == 0, out.stderr
    assert git(aw.fork, "rev-parse", STAGING) == git(aw.fork, "rev-parse", "upstream/main")


def test_a_branch_moved_during_the_build_is_left_alone(aw, monkeypatch):
    aw.queue(101)
    assert aw.cli("apply").returncode == 0
    aw.queue(102)
    intruder = git(aw.fork, "rev-parse", "upstream/main")
    real_build = series_mod._build

    def build_while_someone_moves_the_branch(*args, **kwargs):
        result = real_build(*args, **kwargs)
        git(aw.fork, "update-ref", STAGING, intruder)
        return result

    monkeypatch.setattr(apply_mod, "_build", build_while_someone_moves_the_branch)
    out = aw.cli("apply")
    assert out.returncode == 6 and "moved during the build" in out.stderr
    assert git(aw.fork, "rev-parse", STAGING) == intruder


# -- interruption ---------------------------------------------------------------------------------


def _start_paused_apply(aw: ApplyWorld) -> subprocess.Popen:
    proc = aw.popen("apply", "--staging", **{testhooks.PAUSE_ENV: "apply:patch=60"})
    assert proc.stderr is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        if line.strip().startswith("applied "):
            return proc
    proc.kill()
    raise AssertionError(f"apply never reported a patch: {proc.communicate()}")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGKILL], ids=["SIGINT", "SIGTERM", "SIGKILL"])
def test_interrupted_apply_leaves_refs_and_worktrees_and_a_rerun_completes(aw, sig):
    aw.queue(101)
    assert aw.cli("apply").returncode == 0
    aw.queue(102)
    aw.queue(103)
    before = snapshot(aw.fork)

    proc = _start_paused_apply(aw)
    assert len(aw.scratch_dirs()) == 1  # mid-build: the scratch index exists
    proc.send_signal(sig)
    _out, err = proc.communicate(timeout=30)

    if sig == signal.SIGKILL:
        assert proc.returncode == -signal.SIGKILL
        assert len(aw.scratch_dirs()) == 1  # nothing could clean up; the next run sweeps it
    else:
        assert proc.returncode == 130, err
        assert "interrupted; nothing was changed" in err
        assert aw.scratch_dirs() == []
    assert snapshot(aw.fork) == before
    assert git(aw.fork, "worktree", "list").count("\n") == 0  # only the fork's own work tree
    assert [r["outcome"] for r in apply_mod.load_runs(aw.ws, "porttrack/staging")] == ["created"]

    rerun = aw.cli("apply", "--json")
    assert rerun.returncode == 0, rerun.stderr
    assert json.loads(rerun.stdout)["outcome"] == "updated"
    assert len(subjects(aw.fork, f"upstream/main..{STAGING}")) == 3
    assert aw.scratch_dirs() == []


def test_binary_rename_and_mode_change_entries(aw):
    png = bytes(range(256)) * 4
    aw.up.open_pr(104, {"c.py": None, "lib/c.py": C + "c_41 = 41\n", "logo.png": png, "a.py": Executable(A)},
                     title="Move c, add a logo")
    git(aw.fork, "fetch", "-q", "upstream")  # the preimage blobs of a PR are fetched before apply
    data = aw.patch(104)
    assert b"GIT binary patch" in data and b"rename from c.py" in data and b"new mode 100755" in data
    aw.queue(104, data=data)
    aw.queue(103)  # edits c.py, which 104 moved away: a conflict after a binary/rename patch

    out = aw.cli("apply", "--json")

    assert out.returncode == 4, out.stderr
    first, second = json.loads(out.stdout)["patches"]
    assert first["outcome"] == "clean"
    assert sorted((h["path"], h["kind"]) for h in first["hunks"]) == [
        ("a.py", "meta"), ("lib/c.py", "meta"), ("lib/c.py", "text"), ("logo.png", "binary")]
    assert second["outcome"] == "conflict" and "c.py" in second["conflict_files"]
    assert {h["outcome"] for h in second["hunks"] if h["path"] == "c.py"} == {"conflict"}
    assert {h["outcome"] for h in second["hunks"] if h["path"] == "docs/new.md"} == {"clean"}
    assert git(aw.fork, "rev-parse", "--verify", "--quiet", STAGING, check=False) == ""


# -- end to end: what `porttrack import` queues, `porttrack apply` builds ---------------------------


def test_imported_pr_builds_into_staging_with_its_provenance(world, tmp_path):
    """The shared world (upstream + GitHub emulator + fork): status, import, apply, via the CLI."""
    world.upstream.commit({"a.py": A, "b.py": B}, "project files")
    git(world.fork, "pull", "-q", "--ff-only", "upstream", "main")
    world.open_pr(201, {"a.py": edit(A, {10: "a_10 = 'ten'", 60: "a_60 = 'sixty'"}), "b.py": edit(B, {7: "b_7 = 7.0"})},
                  title="[Spec] warm up kernels")
    gate = {"job": {"command": "true"}, "matrix": {"contexts": [1024], "batches": [1]}, "promote": False}
    handle = make_workspace(tmp_path / "ws", {"spec": track([201], gate=gate)}, api_url=world.fake.base_url,
                            fork=world.fork, token=world.token)
    run = lambda *args: handle.run_in_process(*args, env=handle.env())  # noqa: E731
    assert run("status", "--json").returncode == 0
    imported = run("import", "201")
    assert imported.returncode == 0, imported.stderr

    out = run("apply", "--json")

    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    (patch,) = report["patches"]
    assert patch["pr"] == 201 and patch["outcome"] == "clean" and len(patch["hunks"]) == 3
    body = git(world.fork, "log", "-1", "--format=%B", STAGING)
    assert "Upstream-PR: vllm-project/vllm#201" in body and "Porttrack-Hunks:" in body
    assert git(world.fork, "log", "-1", "--format=%s", STAGING) == "upstream #201: [Spec] warm up kernels"
    assert "a_60 = 'sixty'" in git(world.fork, "show", f"{STAGING}:a.py")
    # the file in the queue is what `git am` applies, to the same tree
    am = tmp_path / "am"
    shutil.copytree(world.fork, am, symlinks=True)
    git(am, "checkout", "-q", "-B", "am-test", "upstream/main")
    git(am, "am", "-q", *sorted(str(p) for p in (handle.root / "patches").glob("*.patch")))
    assert git(am, "rev-parse", "HEAD^{tree}") == git(world.fork, "rev-parse", f"{STAGING}^{{tree}}")


def test_default_build_base_is_the_fork_branch_with_its_own_commits(aw):
    """The queue is applied over the fork: by default the build starts from fork.branch, so the
    fork's own commits (hand ports) are in staging, as `import` assumed when it probed."""
    doc = yaml.safe_load(aw.ws_handle.tracks_file.read_text())
    del doc["fork"]["build_base"]
    aw.ws_handle.write_tracks(doc)
    own = fork_commit(aw.fork, {"fork_only.txt": "carried by the fork\n"}, "fork: a hand port")
    for pr in (101, 102, 103):
        aw.queue(pr)
    out = aw.cli("apply", "--staging")
    assert out.returncode == 0, out.stderr
    assert "porttrack/staging: refs/heads/main" in out.stdout  # fork.branch, fully qualified (issue 32, item 10)
    assert git(aw.fork, "merge-base", "--is-ancestor", own, STAGING) == ""
    assert len(subjects(aw.fork, f"{own}..{STAGING}")) == 3


def test_a_three_way_apply_of_a_new_file_the_base_already_has_leaves_the_fork_work_tree_alone(aw):
    """git writes the merged file of such an entry into the current directory even with --cached
    (seen with git 2.39: the fork then had an untracked docs/new.md and the next apply refused it as
    dirty); the door runs 3-way applies from a scratch folder of its own."""
    aw.upstream_moves({"docs/new.md": "# new\n", "c.py": edit(C, {22: "c_22 = 'upstream moved here'"})})
    aw.queue(103)
    before = git(aw.fork, "status", "--porcelain=v1", "--untracked-files=all")
    first = aw.run("apply", "--staging", "--json")
    assert first.returncode == 0, first.stderr
    (patch,) = json.loads(first.stdout)["patches"]
    assert patch["outcome"] == "3-way", patch  # the path this test is about was taken
    assert git(aw.fork, "status", "--porcelain=v1", "--untracked-files=all") == before == ""
    again = aw.run("apply", "--staging", "--json")
    assert again.returncode == 0, again.stderr
    assert git(aw.fork, "show", "porttrack/staging:docs/new.md") == "# new"
    assert "c_20 = 'twenty'" in git(aw.fork, "show", "porttrack/staging:c.py")
