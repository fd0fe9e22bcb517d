import json
import multiprocessing
import os
import signal
import time

import pytest

from porttrack.cli import testhooks
from porttrack.common.errors import ConfigError, InputError, UnsafeInput, WorkspaceBusy
from porttrack.workspace.files import (
    Workspace,
    append_run,
    atomic_write_text,
    commit_point,
    dump_json,
    load_runs,
    lock,
    sigterm_as_interrupt,
    write_json,
)


def test_locate_walks_up_to_tracks_yaml(tmp_path):
    (tmp_path / "tracks.yaml").write_text("x: 1\n")
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    assert Workspace.locate(start=deep).root == tmp_path


def test_locate_without_tracks_yaml_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.delenv("PORTTRACK_WORKSPACE", raising=False)
    with pytest.raises(ConfigError, match="no tracks.yaml"):
        Workspace.locate(start=tmp_path)


def test_explicit_workspace_must_hold_tracks_yaml(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        Workspace.locate(tmp_path)


def test_atomic_write_leaves_no_temp_files_and_replaces(tmp_path):
    target = tmp_path / "f.json"
    atomic_write_text(target, "old\n")
    atomic_write_text(target, "new\n")
    assert target.read_text() == "new\n"
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]


def test_json_is_stable_and_refuses_nan(tmp_path):
    assert dump_json({"b": 1, "a": [2]}) == '{\n  "a": [\n    2\n  ],\n  "b": 1\n}\n'
    with pytest.raises(ValueError):
        write_json(tmp_path / "x.json", {"x": float("nan")})
    assert not (tmp_path / "x.json").exists()


def _hold(root, seconds, ready):
    with lock(Workspace(root), "holder"):
        ready.set()
        time.sleep(seconds)


def test_second_process_waits_then_refuses(tmp_path):
    ws = Workspace(tmp_path)
    ready = multiprocessing.Event()
    holder = multiprocessing.Process(target=_hold, args=(tmp_path, 3, ready))
    holder.start()
    try:
        assert ready.wait(10)
        started = time.monotonic()
        with pytest.raises(WorkspaceBusy, match=r"another porttrack process .*pid \d+: holder"):
            with lock(ws, "second", wait_s=0.3):
                pass
        assert time.monotonic() - started < 2
    finally:
        holder.join()
    with lock(ws, "after"):  # released when the holder exited
        pass


def test_lock_released_when_holder_is_killed(tmp_path):
    ready = multiprocessing.Event()
    holder = multiprocessing.Process(target=_hold, args=(tmp_path, 60, ready))
    holder.start()
    assert ready.wait(10)
    os.kill(holder.pid, 9)
    holder.join()
    with lock(Workspace(tmp_path), "after kill", wait_s=1):
        pass


def test_commit_point_holds_sigint_and_sigterm_until_the_commit_is_done(tmp_path, capfd):
    target = tmp_path / "f.txt"
    with commit_point("the test file was being written") as pending:
        os.kill(os.getpid(), signal.SIGINT)  # would raise KeyboardInterrupt here without the hold
        os.kill(os.getpid(), signal.SIGTERM)
        atomic_write_text(target, "done\n")
    assert pending == [signal.SIGINT, signal.SIGTERM]
    assert target.read_text() == "done\n"
    assert "interrupt received while the test file was being written; it completed" in capfd.readouterr().err
    with pytest.raises(KeyboardInterrupt):  # the handlers are back once it is over
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1)


def test_sigterm_unwinds_like_ctrl_c(tmp_path):
    cleaned = []
    with pytest.raises(KeyboardInterrupt):
        with sigterm_as_interrupt():
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(1)
            finally:
                cleaned.append(True)
    assert cleaned == [True]


def test_run_log_keeps_the_last_runs_and_refuses_a_foreign_file(tmp_path):
    path = tmp_path / "state" / "runs.json"
    assert load_runs(path, "test/runs/v1") == []
    for n in range(5):
        append_run(path, "test/runs/v1", {"n": n}, keep=3, branch="b")
    assert load_runs(path, "test/runs/v1") == [{"n": 2}, {"n": 3}, {"n": 4}]
    assert json.loads(path.read_text())["branch"] == "b"
    with pytest.raises(InputError, match="not a other/v1 record"):
        load_runs(path, "other/v1")
    path.write_text("{not json")
    with pytest.raises(InputError, match="malformed run record"):
        load_runs(path, "test/runs/v1")


def test_a_checkpoint_pauses_only_where_asked_and_for_its_own_seconds(monkeypatch, capfd):
    monkeypatch.setenv(testhooks.PAUSE_ENV, "apply:patch=0.2,write:weekly-*")
    monkeypatch.setenv(testhooks.PAUSE_SECONDS_ENV, "0.05")
    started = time.monotonic()
    testhooks.checkpoint("apply:built")  # not asked for: no pause, nothing said
    assert time.monotonic() - started < 0.05 and capfd.readouterr().err == ""
    started = time.monotonic()
    testhooks.checkpoint("apply:patch")
    assert time.monotonic() - started >= 0.2
    started = time.monotonic()
    testhooks.checkpoint("write:weekly-2026-W49.md")  # a prefix: PORTTRACK_TEST_PAUSE_S seconds
    assert 0.05 <= time.monotonic() - started < 0.2
    assert capfd.readouterr().err.splitlines() == ["porttrack-test: paused at apply:patch",
                                                    "porttrack-test: paused at write:weekly-2026-W49.md"]


# -- the workspace is untrusted input: symlinks porttrack did not create -------------------------


def _workspace_with_sentinel(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    (root / "tracks.yaml").write_text("x: 1\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_bytes(b"secret\n")
    return root, outside


def _listing(folder):
    return sorted((p.relative_to(folder).as_posix(), p.read_bytes() if p.is_file() else b"") for p in folder.rglob("*"))


def test_atomic_write_refuses_a_symlinked_parent_leading_out_of_the_workspace(tmp_path):
    root, outside = _workspace_with_sentinel(tmp_path)
    (root / "state").mkdir()
    (root / "state" / "apply").symlink_to(outside, target_is_directory=True)
    before = _listing(outside)
    with pytest.raises(UnsafeInput, match="'state/apply' is a symlink to .*outside the workspace"):
        atomic_write_text(root / "state" / "apply" / "secret.txt", "overwritten\n")
    assert _listing(outside) == before


def test_atomic_write_through_a_symlink_inside_the_workspace_is_allowed(tmp_path):
    root, _ = _workspace_with_sentinel(tmp_path)
    (root / "recorded").mkdir()
    (root / "state").symlink_to("recorded", target_is_directory=True)
    atomic_write_text(root / "state" / "x.json", "{}\n")
    assert (root / "recorded" / "x.json").read_text() == "{}\n"


def test_atomic_write_replaces_a_symlinked_file_instead_of_writing_through_it(tmp_path):
    root, outside = _workspace_with_sentinel(tmp_path)
    (root / "state").mkdir()
    (root / "state" / "upstream.json").symlink_to(outside / "secret.txt")
    atomic_write_text(root / "state" / "upstream.json", "{}\n")
    assert not (root / "state" / "upstream.json").is_symlink()
    assert (outside / "secret.txt").read_bytes() == b"secret\n"


def test_atomic_write_in_a_workspace_puts_its_temp_file_under_porttrack_tmp(tmp_path, monkeypatch):
    root, _ = _workspace_with_sentinel(tmp_path)
    seen = []
    monkeypatch.setattr("porttrack.workspace.files.checkpoint", lambda name: seen.extend(os.listdir(root / ".porttrack" / "tmp")))
    atomic_write_text(root / "state" / "upstream.json", "{}\n")
    assert len(seen) == 1 and seen[0].startswith(".upstream.json.") and seen[0].endswith(".tmp")
    assert sorted(os.listdir(root / "state")) == ["upstream.json"]
    assert os.listdir(root / ".porttrack" / "tmp") == []


def test_dead_writers_temp_files_are_swept_by_the_lock_and_live_ones_kept(tmp_path):
    root, _ = _workspace_with_sentinel(tmp_path)
    temps = root / ".porttrack" / "tmp"
    temps.mkdir(parents=True)
    dead = subprocess_pid_that_exited()
    (temps / f".upstream.json.{dead}.abc123.tmp").write_text("half")
    (temps / f".upstream.json.{os.getpid()}.def456.tmp").write_text("mine")
    with lock(Workspace(root), "test"):
        pass
    assert os.listdir(temps) == [f".upstream.json.{os.getpid()}.def456.tmp"]


def subprocess_pid_that_exited() -> int:
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.mark.parametrize("name", ["state", "reports", "patches", ".porttrack"])
def test_locate_and_lock_refuse_a_written_folder_symlinked_out(tmp_path, name):
    root, outside = _workspace_with_sentinel(tmp_path)
    (root / name).symlink_to(outside, target_is_directory=True)
    before = _listing(outside)
    with pytest.raises(UnsafeInput, match=f"{name} is a symlink to .*Replace it with a folder"):
        Workspace.locate(root)
    with pytest.raises(UnsafeInput, match=f"{name} is a symlink"):
        with lock(Workspace(root), "test"):
            pass
    assert _listing(outside) == before


def test_lock_is_not_opened_through_a_symlink(tmp_path):
    root, outside = _workspace_with_sentinel(tmp_path)
    (root / ".porttrack").mkdir()
    (root / ".porttrack" / "lock").symlink_to(outside / "secret.txt")
    with pytest.raises(UnsafeInput, match="lock is a symlink"):
        with lock(Workspace(root), "test"):
            pass
    assert (outside / "secret.txt").read_bytes() == b"secret\n"
