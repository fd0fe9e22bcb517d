"""The workspace: where tracks.yaml, recorded state, the queue and caches live, and how they are written.

Invariants kept here:
- every machine-written file is replaced atomically (write a sibling temp file, fsync, rename),
  so a reader sees the old content or the new one, never half of either;
- JSON is written with sorted keys, two-space indent and a trailing newline, so diffs stay small;
- one porttrack process at a time mutates a workspace (`lock`); a second one waits, then refuses;
- a commit (files written, a ref moved) under that lock is not cut short by Ctrl-C or SIGTERM
  (`commit_point`); SIGKILL cannot be held, and each writer's ordering covers it;
- a command's run history is one JSON file per subject holding its last runs (`append_run`);
- the workspace is a git repository others commit to, so porttrack never writes through a symlink
  it did not create: the folders it writes (`state/`, `reports/`, `patches/`, `.porttrack/`) are
  refused when they are symlinks leading out of the workspace (`.porttrack/` as any symlink), an
  atomic write refuses a symlinked parent that leads out, and the lock is opened without
  following a symlink (`check_folders`, `atomic_write_bytes`, `lock`);
- temp files of atomic writes live in `.porttrack/tmp/` (git-ignored, same file system), so one
  left by a killed process is never picked up by `git add -A`; dead ones are swept on the next
  lock and the next write.
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
import stat
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from porttrack.common.errors import ConfigError, InputError, UnsafeInput, WorkspaceBusy
from porttrack.diff.paths import check_no_symlinked_parent, is_inside

# Pause points (`checkpoint(name)` at each step a crash test may kill): a no-op unless the command
# layer installed a pause (porttrack.cli.testhooks, when a test sets PORTTRACK_TEST_PAUSE_AT), so
# the core never reads a test's environment and the test hooks stay out of its import graph.
_pause: Callable[[str], None] | None = None


def install_pause(hook: Callable[[str], None] | None) -> None:
    global _pause
    _pause = hook


def checkpoint(name: str) -> None:
    if _pause is not None:
        _pause(name)


TRACKS_FILE = "tracks.yaml"
CACHE_DIR = ".porttrack"
# The folders porttrack writes into. `.porttrack/` is refused as a symlink of any kind: the
# `.porttrack/` line in .gitignore does not match a symlink, so even one pointing inside the
# workspace would send the lock and the caches into a committed folder.
WRITTEN_FOLDERS = ("state", "reports", "patches", CACHE_DIR)
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
        return self.root / CACHE_DIR

    @classmethod
    def locate(cls, explicit: str | os.PathLike[str] | None = None, start: Path | None = None) -> "Workspace":
        """The workspace named by flag or PORTTRACK_WORKSPACE, else the nearest folder up holding tracks.yaml."""
        chosen = explicit or os.environ.get(WORKSPACE_ENV)
        if chosen:
            root = Path(chosen).expanduser().resolve()
            if not _plain_tracks_file(root):
                raise ConfigError(f"{root / TRACKS_FILE}: no such file (the workspace must hold {TRACKS_FILE})")
            return check_folders(cls(root))
        here = (start or Path.cwd()).resolve()
        for candidate in (here, *here.parents):
            if _plain_tracks_file(candidate):
                return check_folders(cls(candidate))
        raise ConfigError(
            f"no {TRACKS_FILE} in {here} or any folder above it; run porttrack inside a workspace "
            f"or pass --workspace / set {WORKSPACE_ENV}"
        )


def _plain_tracks_file(folder: Path) -> bool:
    """Whether `folder` holds tracks.yaml as a regular file (or a link to one). Anything else by
    that name (a folder, a FIFO, a link to /dev/zero or to nothing) is said as what it is: it is
    the workspace's file gone wrong, not a reason to look further up or to say "no such file"."""
    path = folder / TRACKS_FILE
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        if path.is_symlink():
            raise ConfigError(f"{path}: a symlink to {os.readlink(path)!r}, which does not exist") from None
        return False
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if stat.S_ISREG(mode):
        return True
    link = f" (a symlink to {os.readlink(path)!r})" if path.is_symlink() else ""
    raise ConfigError(f"{path}: is {_kind(mode)}{link}, not a file; {TRACKS_FILE} must be a regular file")


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def check_folders(ws: Workspace) -> Workspace:
    """`ws`, once none of the folders porttrack writes is a symlink leading out of it (and
    `.porttrack/` no symlink at all); else `UnsafeInput` naming the folder and where it leads."""
    for name in WRITTEN_FOLDERS:
        folder = ws.root / name
        if folder.is_symlink() and (name == CACHE_DIR or not is_inside(folder, ws.root)):
            raise UnsafeInput(
                f"{folder} is a symlink to {str(folder.resolve())!r}"
                f"{'' if name == CACHE_DIR else ', outside the workspace'}; porttrack does not write "
                f"through a symlink it did not create. Replace it with a folder (`git rm {name}`)"
            )
    return ws


def workspace_of(path: Path) -> Path | None:
    """The workspace holding `path` (the nearest folder above it, spelled as given, holding
    tracks.yaml), or None when it is in none."""
    for folder in Path(os.path.abspath(path)).parents:
        if (folder / TRACKS_FILE).is_file():
            return folder
    return None


def _refuse_symlinked_parents(root: Path, path: Path) -> None:
    """Refuse to write `path` when a folder between the workspace `root` and it is a symlink that
    leads out of the workspace (a committed `state -> /somewhere` or `patches/retired -> ~/.ssh`)."""
    check_no_symlinked_parent(root, path.relative_to(root).as_posix(), "the workspace")


def _temp_dir(root: Path | None, beside: Path) -> Path:
    """Where the temp file of a write to a file in `beside` goes: the workspace's `.porttrack/tmp`
    (git-ignored, so a killed write leaves nothing `git add -A` would commit), else `beside`."""
    if root is None:
        return beside
    folder = root / CACHE_DIR / "tmp"
    for link in (folder.parent, folder):
        if link.is_symlink():
            raise UnsafeInput(f"{link} is a symlink; porttrack does not write its temp files through one. Remove it")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Replace `path` with `data` so that a crash leaves either the old or the new file.

    The temp file is `.<name>.<pid>.<random>.tmp` in the workspace's `.porttrack/tmp/` (beside
    `path` outside a workspace, or when `.porttrack/` is on another file system); one left by a
    process that was killed (its pid no longer runs) is removed by the next write.
    """
    path = Path(os.path.abspath(path))
    tmp = write_temp(path, data)
    try:
        checkpoint(f"write:{path.name}")
        try:
            os.replace(tmp, path)
        except OSError as exc:
            if exc.errno != errno.EXDEV:
                raise
            os.unlink(tmp)  # .porttrack/ is another file system: the rename needs a sibling
            tmp = _write_temp(path.parent, path.name, data)
            os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    _fsync_dir(path.parent)
    checkpoint(f"wrote:{path.name}")  # the boundary after this file, before the command's next step


def write_temp(path: Path, data: bytes) -> str:
    """The first half of writing `path` safely: refuse a symlinked parent leading out of the
    workspace, create the parent, and write `data` to a fresh temp file (see `atomic_write_bytes`
    for where); returns the temp file's path, for the caller to rename or link into place."""
    path = Path(os.path.abspath(path))
    root = workspace_of(path)
    if root is not None:
        _refuse_symlinked_parents(root, path)
    path.parent.mkdir(parents=True, exist_ok=True)
    _sweep_dead_temps(path.parent, f".{path.name}.")  # left beside the file by older versions
    temps = _temp_dir(root, path.parent)
    _sweep_dead_temps(temps)
    return _write_temp(temps, path.name, data)


def _write_temp(folder: Path, name: str, data: bytes) -> str:
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.{os.getpid()}.", suffix=".tmp", dir=folder)
    try:
        # mkstemp makes the file 0600; porttrack writes no secret, so the file gets the mode any
        # tool writing it would (0644 under the usual umask 022): a teammate's checkout can read it
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return tmp


_UMASK_LOCK = threading.Lock()


def _umask() -> int:
    """The process's umask (reading it means setting it: done under a lock, set straight back)."""
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def _sweep_dead_temps(folder: Path, prefix: str = ".") -> None:
    """Remove `<prefix>….<pid>.<random>.tmp` files in `folder` whose writer is gone."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            if not (entry.name.startswith(prefix) and entry.name.endswith(".tmp")):
                continue
            fields = entry.name[: -len(".tmp")].rsplit(".", 2)
            pid = fields[1] if len(fields) == 3 else ""
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

    A path that is not UTF-8 reaches here holding surrogate escapes (`porttrack.diff.hunks`); those are
    written as JSON `\\udcXX` escapes, which read back to the very same string, instead of making
    the text impossible to encode (a UnicodeEncodeError half-way through a queue commit).
    """
    text = json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False, allow_nan=False) + "\n"
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def write_json(path: Path, obj: Any) -> None:
    atomic_write_text(path, dump_json(obj))


# What porttrack writes nests a dozen levels at most; a file nested deeper was not written by it.
# The bound keeps what a person, a merge or an attacker committed from reaching code that walks it
# recursively, and json's own RecursionError (100,000 `[`) is a malformed file like any other.
MAX_JSON_DEPTH = 64


def read_json(path: Path, **options: Any) -> Any:
    """The JSON in a file porttrack wrote and someone may have damaged since. Raises ValueError
    (malformed, not UTF-8, nested deeper than MAX_JSON_DEPTH) or OSError, which every caller
    already turns into its own clear refusal; never RecursionError."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"), **options)
    except RecursionError:
        raise ValueError("nested too deeply to read") from None
    check_depth(data)
    return data


def check_depth(data: Any, limit: int = MAX_JSON_DEPTH) -> None:
    """ValueError when `data` nests lists and objects deeper than `limit` (walked without recursion,
    one level at a time, holding only the lists and objects: scalars, most of a file, are looked at
    once and kept nowhere; the 2.7 MB ETag cache of 400 open PRs took 26 ms walked node by node)."""
    containers = (dict, list)
    level = [data] if isinstance(data, containers) else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            raise ValueError(f"nested deeper than {limit} levels")
        below: list[Any] = []
        for node in level:
            below += [child for child in (node.values() if isinstance(node, dict) else node) if isinstance(child, containers)]
        level = below


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
    check_folders(ws)
    ws.cache_dir.mkdir(parents=True, exist_ok=True)
    path = ws.cache_dir / "lock"
    fd = _open_lock(path)
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
                    holder = _read_holder(fd)
                    raise WorkspaceBusy(
                        f"another porttrack process is working on {ws.root} ({holder}); "
                        f"waited {wait_s:.0f}s. Try again when it has finished."
                    ) from None
                time.sleep(0.05)
        os.ftruncate(fd, 0)
        os.write(fd, f"pid {os.getpid()}: {what}".encode())
        _sweep_dead_temps(ws.cache_dir / "tmp")  # what writers killed before this run left
        yield
    finally:
        os.close(fd)


def _open_lock(path: Path) -> int:
    """The lock file, opened without following a symlink: a committed `.porttrack/lock` link
    would otherwise have its target truncated and overwritten. Only a regular file is accepted."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO, errno.EOPNOTSUPP):
            kind = "a symlink" if path.is_symlink() else "not a regular file"
            raise UnsafeInput(f"{path} is {kind}; porttrack opens its lock only as a regular file. Remove it") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UnsafeInput(f"{path} is not a regular file; porttrack opens its lock only as one. Remove it")
    return fd


def _read_holder(fd: int) -> str:
    try:
        return os.pread(fd, 500, 0).decode(errors="replace").strip() or "unknown holder"
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


def load_runs(path: Path, schema: str, key: str = "runs", what: str = "run") -> list[dict[str, Any]]:
    """The runs recorded in `path` under `key` (oldest first); none when the file does not exist
    yet. The one reader of a run history: apply's per branch, the weekly report's (`what` names it
    in an error)."""
    try:
        data = read_json(path)
    except FileNotFoundError:
        return []
    except ValueError as exc:
        raise InputError(f"{path}: malformed {what} record ({exc}); restore it from git") from None
    if not isinstance(data, dict) or data.get("schema") != schema or not isinstance(data.get(key), list):
        raise InputError(f"{path}: not a {schema} record; restore it from git")
    return [run for run in data[key] if isinstance(run, dict)]


def actor() -> str:
    """Who is recording (a queue transition, an evidence record): the CI actor or the user."""
    return os.environ.get("PORTTRACK_ACTOR") or os.environ.get("GITHUB_ACTOR") or os.environ.get("USER") or "unknown"


def append_run(path: Path, schema: str, run: Mapping[str, Any], keep: int, **fields: Any) -> None:
    """Add `run` to the record at `path`, keeping the last `keep` runs; `fields` go beside them."""
    runs = (load_runs(path, schema) + [dict(run)])[-keep:]
    write_json(path, {"schema": schema, **fields, "runs": runs})
