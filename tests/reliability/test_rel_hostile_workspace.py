"""The workspace is a git repository others commit to: what they commit is untrusted input.

Each test is one attack, named after the defect it found: a path read from the queue manifest
that climbs out, a committed symlink where porttrack writes (`patches/retired/`, `state/`,
`reports/`, `patches/`, `.porttrack/`, `.porttrack/lock`), a queued patch writing beyond a symlink
in the fork's tree, and the temp file of a killed write that `git add -A` would commit.

Every attack runs the CLI as a user runs it (a separate process) against a real workspace, fork
and emulator (`Rig`), with a sentinel folder outside the workspace: after it, the sentinel file
has the same bytes and mtime and nothing new appeared beside it; porttrack exits 6 (unsafe) with
one error line saying what it refused.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
import yaml
from rel_harness import Rig, assert_one_line_error, git, kill, wait_for_pause

pytestmark = pytest.mark.reliability("hostile-workspace")

SECRET = b"the attacker wants this file read or overwritten\n"


class Outside:
    """A folder beside the workspace holding `secret.txt`; `unchanged()` asserts the attack left
    it exactly as it was (bytes, mtime, and no new entry anywhere below the folder)."""

    def __init__(self, tmp_path: Path):
        self.root = tmp_path / "outside"
        self.root.mkdir()
        self.secret = self.root / "secret.txt"
        self.secret.write_bytes(SECRET)
        os.utime(self.secret, ns=(1_700_000_000_000_000_000, 1_700_000_000_000_000_000))
        self.before = self.snapshot()

    def snapshot(self) -> dict[str, tuple[str, int]]:
        out = {}
        for path in sorted(self.root.rglob("*")):
            data = path.read_bytes() if path.is_file() and not path.is_symlink() else b""
            out[path.relative_to(self.root).as_posix()] = (hashlib.sha256(data).hexdigest(), path.lstat().st_mtime_ns)
        return out

    def unchanged(self) -> None:
        assert self.secret.read_bytes() == SECRET
        assert self.secret.stat().st_mtime_ns == 1_700_000_000_000_000_000
        assert self.snapshot() == self.before, "something outside the workspace was written"


@pytest.fixture
def outside(tmp_path) -> Outside:
    return Outside(tmp_path)


def _refused(out, *words: str) -> None:
    assert_one_line_error(out, 6)
    for word in words:
        assert word in out.errors[0], f"{word!r} not in {out.errors[0]!r}"


def _symlink_out(rig: Rig, name: str, target: Path) -> None:
    """Replace the workspace folder `name` by a symlink to `target` (a copy of its content)."""
    folder = rig.root / name
    if folder.exists():
        shutil.copytree(folder, target, symlinks=True)
        shutil.rmtree(folder)
    else:
        target.mkdir()
    folder.symlink_to(target, target_is_directory=True)


def _manifest(rig: Rig) -> dict:
    return json.loads((rig.root / "patches" / "manifest.json").read_text())


def _write_manifest(rig: Rig, data: dict) -> None:
    (rig.root / "patches" / "manifest.json").write_text(json.dumps(data, indent=2))


# -- paths read from the manifest ------------------------------------------------------------------

@pytest.mark.parametrize("file", ["../../outside/secret.txt", "retired/../../../outside/secret.txt",
                                  "{outside}/secret.txt", "sub/x.patch", ".hidden.patch"])
def test_manifest_file_climbing_out_is_refused_not_copied_into_the_workspace_on_drop(tmp_path, world, outside, file):
    rig = Rig(tmp_path, world)
    rig.ok("import", "101")
    data = _manifest(rig)
    data["patches"][0]["file"] = file.format(outside=outside.root)
    data["patches"][0]["sha256"] = hashlib.sha256(SECRET).hexdigest()  # as if it were the patch
    _write_manifest(rig, data)
    before = sorted(p.relative_to(rig.root).as_posix() for p in (rig.root / "patches").rglob("*"))
    _refused(rig.sub("drop", "101", "--reason", "attack"), "patches/manifest.json", "not a plain file name")
    for argv in (("queue",), ("apply", "--dry-run")):
        _refused(rig.sub(*argv), "patches/manifest.json")
    after = sorted(p.relative_to(rig.root).as_posix() for p in (rig.root / "patches").rglob("*"))
    assert after == before  # nothing copied into patches/retired/
    assert not any(SECRET in p.read_bytes() for p in rig.root.rglob("*") if p.is_file() and ".git" not in p.parts)
    outside.unchanged()


def test_manifest_patch_name_with_a_folder_is_refused(tmp_path, world, outside):
    rig = Rig(tmp_path, world)
    rig.ok("import", "101")
    data = _manifest(rig)
    data["patches"][0]["name"] = "../../outside/0001-evil"
    _write_manifest(rig, data)
    _refused(rig.sub("refresh", "101", "--update"), "patches/manifest.json", "patch name")
    outside.unchanged()


def test_committed_symlink_under_patches_retired_is_not_written_through_on_drop(tmp_path, world, outside):
    rig = Rig(tmp_path, world)
    rig.ok("import", "101")
    (rig.root / "patches" / "retired").symlink_to(outside.root, target_is_directory=True)
    out = rig.sub("drop", "101", "--reason", "attack")
    _refused(out, "patches/retired", "outside")
    assert _manifest(rig)["patches"][0]["state"] != "dropped"  # refused before the commit point
    outside.unchanged()


def test_committed_symlinked_patch_file_pointing_out_is_not_read(tmp_path, world, outside):
    rig = Rig(tmp_path, world)
    rig.ok("import", "101")
    data = _manifest(rig)
    patch = rig.root / "patches" / data["patches"][0]["file"]
    patch.unlink()
    patch.symlink_to(outside.secret)
    data["patches"][0]["sha256"] = hashlib.sha256(SECRET).hexdigest()
    _write_manifest(rig, data)
    _refused(rig.sub("apply", "--dry-run"), "outside")
    outside.unchanged()


# -- symlinked folders and the lock --------------------------------------------------------------

def test_committed_lock_symlink_is_not_truncated_on_status(tmp_path, world, outside):
    rig = Rig(tmp_path, world)
    lock = rig.root / ".porttrack" / "lock"
    lock.unlink(missing_ok=True)
    lock.symlink_to(outside.secret)
    _refused(rig.sub("status"), "lock", "symlink")
    assert lock.is_symlink()
    outside.unchanged()


def test_lock_that_is_a_fifo_or_folder_is_refused(tmp_path, world, outside):
    rig = Rig(tmp_path, world)
    lock = rig.root / ".porttrack" / "lock"
    lock.unlink(missing_ok=True)
    os.mkfifo(lock)
    _refused(rig.sub("status"), "lock", "not a regular file")
    lock.unlink()
    lock.mkdir()
    _refused(rig.sub("status"), "lock", "not a regular file")
    outside.unchanged()


@pytest.mark.parametrize("inside", [False, True], ids=["out", "in"])
def test_porttrack_folder_committed_as_a_symlink_is_refused(tmp_path, world, outside, inside):
    """`.porttrack/` in .gitignore does not match a symlink, so even one leading inside the
    workspace would commit the lock and the caches."""
    rig = Rig(tmp_path, world)
    shutil.rmtree(rig.root / ".porttrack")
    target = rig.root / "state" / "cache" if inside else outside.root / "cache"
    target.mkdir()
    outside.before = outside.snapshot()
    (rig.root / ".porttrack").symlink_to(target, target_is_directory=True)
    _refused(rig.sub("status"), ".porttrack", "symlink")
    assert list(target.iterdir()) == []
    outside.unchanged()


@pytest.mark.parametrize("folder", ["state", "reports", "patches"])
@pytest.mark.parametrize("argv", [("status",), ("report", "weekly", "--offline")], ids=["status", "report"])
def test_written_folder_committed_as_a_symlink_out_is_not_written_through(tmp_path, world, outside, folder, argv):
    rig = Rig(tmp_path, world)
    world.force_push(101, {"a.py": "rewritten\n"})  # so that status has something to record
    _symlink_out(rig, folder, outside.root / folder)
    outside.before = outside.snapshot()
    _refused(rig.sub(*argv), folder, "symlink", "outside the workspace")
    outside.unchanged()


def test_written_folder_symlinked_inside_the_workspace_still_works(tmp_path, world, outside):
    rig = Rig(tmp_path, world)
    (rig.root / "state").rename(rig.root / "recorded")
    (rig.root / "state").symlink_to("recorded", target_is_directory=True)
    world.force_push(101, {"a.py": "rewritten\n"})
    rig.ok("status")
    assert world.head(101) in (rig.root / "recorded" / "upstream.json").read_text()
    outside.unchanged()


def test_symlinked_subfolder_of_state_out_is_not_written_through(tmp_path, world, outside):
    """The folder check covers state/ itself; an atomic write covers every folder below it."""
    rig = Rig(tmp_path, world)
    rig.ok("import", "101")
    (rig.root / "state" / "apply").symlink_to(outside.root, target_is_directory=True)
    _refused(rig.sub("apply"), "state/apply", "outside the workspace")
    outside.unchanged()


def test_symlinked_evidence_folder_out_is_not_written_through_by_a_gate_run(tmp_path, world, outside):
    rig = Rig(tmp_path, world)
    rig.ok("import", "101")
    (rig.root / "patches" / "evidence").symlink_to(outside.root, target_is_directory=True)
    _refused(rig.sub("gate", "run", "101"), "patches/evidence", "outside the workspace")
    outside.unchanged()


# -- a patch beyond a symlink in the fork's tree -----------------------------------------------------

def test_patch_beyond_an_in_tree_symlink_is_unsafe_not_a_conflict(tmp_path, world, outside):
    rig = Rig(tmp_path, world, status=False)
    world.open_pr(104, {"ext/evil.py": "print('hello')\n"}, "Add an extension")
    doc = yaml.safe_load(rig.handle.tracks_file.read_text())
    doc["tracks"]["gamma"]["prs"] = [103, 104]
    rig.handle.write_tracks(doc)
    rig.ok("status")
    rig.ok("import", "104")
    (rig.fork / "ext").symlink_to(outside.root, target_is_directory=True)
    git(rig.fork, "add", "ext")
    git(rig.fork, "commit", "-q", "-m", "ext lives elsewhere")
    out = rig.sub("apply")
    _refused(out, "beyond the symlink", "'ext'")  # was: CONFLICT, exit 4
    assert "CONFLICT" not in out.stdout + out.stderr
    outside.unchanged()


# -- temp files of a killed write ------------------------------------------------------------------

def test_killed_write_leaves_no_temp_file_that_git_add_would_commit(tmp_path, world, outside):
    rig = Rig(tmp_path, world)
    (rig.root / ".gitignore").write_text(".porttrack/\n")  # what `porttrack init` writes
    git(rig.root, "init", "-q")
    git(rig.root, "add", "-A")
    git(rig.root, "commit", "-q", "-m", "workspace")
    world.force_push(101, {"a.py": "rewritten\n"})
    proc = rig.popen("status", PORTTRACK_TEST_PAUSE_AT="write:upstream.json")
    wait_for_pause(proc, "write:upstream.json")
    assert kill(proc)
    porcelain = git(rig.root, "status", "--porcelain", "--untracked-files=all")
    assert porcelain == "", f"a killed write left debris git would commit: {porcelain}"
    assert list((rig.root / ".porttrack" / "tmp").glob("*.tmp"))  # the temp file was there, ignored
    rig.ok("status")
    assert not list((rig.root / ".porttrack" / "tmp").glob("*.tmp"))  # swept by the next run
    assert world.head(101) in (rig.root / "state" / "upstream.json").read_text()
    outside.unchanged()
