"""`-v/--verbose`: each git command and each GitHub request, with its outcome and time, to stderr.

The doors (`porttrack.git.repo`, `porttrack.github.client`) call `git()` and `request()` once per
process or exchange; nothing is written unless the command layer called `enable()`. A plain hook,
not `logging`: the doors pay one `None` check when it is off, and nothing is imported for it.
What is written never carries a token: URL credentials are dropped and every known token or
token-shaped string is masked (`porttrack.common.secrets.redact`) before the line leaves.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Callable, Sequence

from porttrack.common.secrets import redact
from porttrack.common.text import for_terminal

_sink: Callable[[str], None] | None = None
_lock = threading.Lock()  # requests run in threads: one line at a time, never interleaved
_USERINFO = re.compile(r"(?<=://)[^/@\s]*@")  # user:password@ in a URL


def enable(write: Callable[[str], None] | None) -> None:
    """Send each trace line to `write` (None: stop)."""
    global _sink
    _sink = write


def enabled() -> bool:
    return _sink is not None


def started() -> float:
    return time.monotonic()


def git(args: Sequence[str], outcome: int | str, since: float) -> None:
    """A git command ended: its argv (without porttrack's own `-c` settings), exit status or what stopped it."""
    if _sink is not None:
        _write(f"git {' '.join(args)} -> exit {outcome}" if isinstance(outcome, int) else f"git {' '.join(args)} -> {outcome}", since)


def request(verb: str, path: str, outcome: int | str, since: float) -> None:
    """An HTTP exchange with GitHub ended: method, path (never the host's credentials), status or failure."""
    if _sink is not None:
        _write(f"{verb} {path} -> {outcome}", since)


def _write(what: str, since: float) -> None:
    line = f"porttrack: {for_terminal(redact(_USERINFO.sub('', what)), 2000)} ({(time.monotonic() - since) * 1000:.0f} ms)"
    sink = _sink
    if sink is not None:
        with _lock:
            sink(line)
