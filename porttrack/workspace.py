"""The workspace: where tracks.yaml, recorded state, the queue and caches live, and how they are written.

Invariants kept here:
- every machine-written file is replaced atomically (write a sibling temp file, fsync, rename),
  so a reader sees the old content or the new one, never half of either;
- JSON is written with sorted keys, two-space indent and a trailing newline, so diffs stay small;
- one porttrack process at a time mutates a workspace (`lock`); a second one waits, then refuses;
- a commit (files written, a ref moved) under that lock is not cut short by Ctrl-C or SIGTERM
  (`commit_point`); SIGKILL cannot be held, and each writer's ordering covers it;
- a command's run history is one JSON file per subject holding its last runs (`append_run`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

from porttrack.errors import ConfigError, InputError, WorkspaceBusy
from porttrack.testhooks import checkpoint

TRACKS_FILE = "tracks.yaml"
WORKSPACE_ENV = "PORTTRACK_WORKSPACE"
LOCK_WAIT_ENV = "PORTTRACK_LOCK_WAIT"  # seconds a second process waits for the lock (default 10)


@dataclass(frozen=True)
class Workspace:
    root: Path

    @property
    def tracks_file(self) -> Path:
        return self.root / TRACKS_FILE

    @property
    def state_dir(self) -> Path:
        """Recorded upstream state and run records: text, committed with the repository."""
        return self.root / "state"

    @property
    def upstream_state_file(self) -> Path:
        return self.state_dir / "upstream.json"

    @property
    def patches_dir(self) -> Path:
        return self.root / "patches"

    @property
    def evidence_dir(self) -> Path:
        return self.patches_dir / "evidence"

    @property
    def templates_dir(self) -> Path:
        return self.root / "templates"

    @property
    def reports_dir(self) -> Path:
        return self.root / "reports"

    @property
    def cache_dir(self) -> Path:
        """Machine- and token-local caches (ETags, fetched objects): git-ignored, safe to delete."""
        return self.root / ".porttrack"

    @classmethod
    def locate(cls, explicit: str | os.PathLike[str] | None = None, start: Path | None = None) -> "Workspace":
        """The workspace named by flag or PORTTRACK_WORKSPACE, else the nearest folder up holding tracks.yaml."""
        chosen = explicit or os.environ.get(WORKSPACE_ENV)
        if chosen:
            root = Path(chosen).expanduser().resolve()
            if not (root / TRACKS_FILE).is_file():
                raise ConfigError(f"{root / TRACKS_FILE}: no such file (the workspace must hold {TRACKS_FILE})")
            return cls(root)
        here = (start or Path.cwd()).resolve()
        for candidate in (here, *here.parents):
            if (candidate / TRACKS_FILE).is_file():
                return cls(candidate)
        raise ConfigError(
            f"no {TRACKS_FILE} in {here} or any folder above it; run porttrack inside a workspace "
            f"or pass --workspace / set {WORKSPACE_ENV}"
        )


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace `path` with `data` so that a crash leaves either the old or the new file.

    The temp file is `.<name>.<pid>.<random>.tmp`; one left by a process that was killed (its pid
    no longer runs) is removed by the next write of the same file, so no debris accumulates in
    folders that are committed (state/, patches/).
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    _sweep_dead_temps(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        checkpoint(f"write:{path.name}")
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)


def _sweep_dead_temps(path: Path) -> None:
    prefix = f".{path.name}."
    with contextlib.suppress(OSError):
        for entry in os.scandir(path.parent):
            if not (entry.name.startswith(prefix) and entry.name.endswith(".tmp")):
                continue
            pid = entry.name[len(prefix):].split(".", 1)[0]
            if pid.isdigit() and not _alive(int(pid)):
                with contextlib.suppress(OSError):
                    os.unlink(entry.path)


def sweep_dead_scratch(parent: Path) -> None:
    """Remove scratch folders named `<pid>-…` whose process is gone (killed before cleaning up)."""
    with contextlib.suppress(OSError):
        for entry in parent.iterdir():
            pid = entry.name.split("-", 1)[0]
            if pid.isdigit() and not _alive(int(pid)):
                shutil.rmtree(entry, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode("utf-8"))


def dump_json(obj: Any) -> str:
    """The one JSON spelling for files in the repository: stable, diff-friendly, newline-terminated.

    A path that is not UTF-8 reaches here holding surrogate escapes (`porttrack.hunks`); those are
    written as JSON `\\udcXX` escapes, which read back to the very same string, instead of making
    the text impossible to encode (a UnicodeEncodeError half-way through a queue commit).
    """
    text = json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, dump_json(obj))


def _fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def lock(ws: Workspace, what: str, wait_s: float = 10.0) -> Iterator[None]:
    """Hold the workspace's exclusive lock while mutating it; wait up to `wait_s` (or
    PORTTRACK_LOCK_WAIT seconds), then refuse.

    flock is released by the kernel when the process dies (even by SIGKILL), so a crash never
    leaves a stale lock behind.
    """
    if os.environ.get(LOCK_WAIT_ENV):
        try:
            wait_s = max(0.0, float(os.environ[LOCK_WAIT_ENV]))
        except ValueError:
            raise ConfigError(f"{LOCK_WAIT_ENV}={os.environ[LOCK_WAIT_ENV]!r}: expected a number of seconds") from None
    ws.cache_dir.mkdir(parents=True, exist_ok=True)
    path = ws.cache_dir / "lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    deadline = time.monotonic() + wait_s
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if time.monotonic() >= deadline:
                    holder = _read_holder(path)
                    raise WorkspaceBusy(
                        f"another porttrack process is working on {ws.root} ({holder}); "
                        f"waited {wait_s:.0f}s. Try again when it has finished."
                    ) from None
                time.sleep(0.05)
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()}: {what}".encode())
        yield
    finally:
        os.close(fd)


def _read_holder(path: Path) -> str:
    try:
        return path.read_text(errors="replace").strip() or "unknown holder"
    except OSError:
        return "unknown holder"


# -- the commit point ---------------------------------------------------------------------------


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()  # signal handlers live only there


@contextlib.contextmanager
def commit_point(what: str) -> Iterator[list[int]]:
    """Hold SIGINT/SIGTERM while a commit completes (call it with the workspace `lock` held): once
    begun, it finishes; a signal that arrived meanwhile is reported after it, not acted on.
    `what` finishes "interrupt received while …"; yields the signals received so far."""
    pending: list[int] = []
    if not _in_main_thread():
        yield pending
        return
    held = {s: signal.signal(s, lambda signum, _frame: pending.append(signum)) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield pending
    finally:
        for s, handler in held.items():
            signal.signal(s, handler)
    if pending:
        sys.stderr.write(f"porttrack: interrupt received while {what}; it completed\n")


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, so every `finally` (scratch removal, lock) runs on both."""
    if not _in_main_thread():
        yield
        return

    def interrupt(_signum, _frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


# -- run history ----------------------------------------------------------------------------------


def load_runs(path: Path, schema: str) -> list[dict[str, Any]]:
    """The runs recorded in `path` (oldest first); none when the file does not exist yet."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except ValueError as exc:
        raise InputError(f"{path}: malformed run record ({exc}); restore it from git") from None
    if not isinstance(data, dict) or data.get("schema") != schema or not isinstance(data.get("runs"), list):
        raise InputError(f"{path}: not a {schema} record; restore it from git")
    return data["runs"]


def append_run(path: Path, schema: str, run: Mapping[str, Any], keep: int, **fields: Any) -> None:
    """Add `run` to the record at `path`, keeping the last `keep` runs; `fields` go beside them."""
    runs = (load_runs(path, schema) + [dict(run)])[-keep:]
    write_json(path, {"schema": schema, **fields, "runs": runs})
