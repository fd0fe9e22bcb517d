import json
import multiprocessing
import os
import time

import pytest

from porttrack.errors import ConfigError, WorkspaceBusy
from porttrack.workspace import Workspace, atomic_write_text, dump_json, lock, write_json


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
