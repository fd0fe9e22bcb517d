"""The GitHub door's policy that is no request: the command's deadline (`Budget`), the operator's
knobs (`KNOBS`, validated by `knob_value`), credentials kept out of the API URL
(`split_userinfo`), the ETag cache, and the reading of answers (shapes, GitHub's error
message, rate-limit headers). `porttrack.github.client` sends the requests.
"""

from __future__ import annotations

import json
import math
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Mapping

from porttrack.common import secrets
from porttrack.common.errors import ConfigError, PorttrackError, UpstreamUnreachable
from porttrack.common.text import for_terminal
from porttrack.github.records import MalformedResponse, require_object
from porttrack.workspace.files import atomic_write_text, read_json

# The most time one command spends talking to GitHub (requests, backoffs, rate-limit waits
# together; time between requests, such as a gate's poll interval, does not count).
DEFAULT_DEADLINE_S = 600.0


@dataclass
class EtagCache:
    """url -> (etag, last-modified, decoded body). Loaded once, saved once, atomically."""

    path: Path | None
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    dirty: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @classmethod
    def load(cls, path: Path | None) -> "EtagCache":
        cache = cls(path)
        if path and path.is_file():
            try:
                data = read_json(path)
                if isinstance(data, dict) and data.get("schema") == "porttrack/etag-cache/v1":
                    cache.entries = dict(data.get("entries") or {})
            except (OSError, ValueError):
                pass  # a broken cache only costs a full request
        return cache

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            return self.entries.get(key)

    def put(self, key: str, etag: str | None, last_modified: str | None, body: Any) -> None:
        if not etag and not last_modified:
            return
        with self._lock:
            self.entries[key] = {"etag": etag, "last_modified": last_modified, "body": body}
            self.dirty = True

    def remember(self, key: str, body: Any) -> None:
        """Keep `body` under `key` with no validator: what a search concluded (`recall` reads it),
        so a run whose inputs all answered 304 need not ask again."""
        with self._lock:
            self.entries[key] = {"etag": None, "last_modified": None, "body": body}
            self.dirty = True

    def recall(self, key: str) -> Any:
        entry = self.get(key)
        return entry.get("body") if entry else None

    def save(self) -> None:
        if self.path and self.dirty:
            with self._lock:
                payload = {"schema": "porttrack/etag-cache/v1", "entries": self.entries}
                atomic_write_text(self.path, json.dumps(payload, sort_keys=True))
                self.dirty = False


class Budget:
    """The command's deadline: the time spent inside requests and the waits between them, counted
    once however many requests are in flight at the same time (`get_pulls` sends them together)."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self._spent = 0.0
        self._active = 0
        self._since = 0.0
        self._lock = threading.Lock()

    def used(self) -> float:
        with self._lock:
            return self._spent + (time.monotonic() - self._since if self._active else 0.0)

    def left(self) -> float:
        return self.seconds - self.used()

    @contextmanager
    def busy(self) -> Iterator[None]:
        with self._lock:
            if self._active == 0:
                self._since = time.monotonic()
            self._active += 1
        try:
            yield
        finally:
            with self._lock:
                self._active -= 1
                if self._active == 0:
                    self._spent += time.monotonic() - self._since

    def attempt_limit(self, timeout_s: float, where: str) -> float:
        left = self.left()
        if left <= 0:
            raise UpstreamUnreachable(self._spent_words(where))
        return min(timeout_s, left)

    def check_wait(self, seconds: float, what: str, where: str) -> None:
        if seconds >= self.left():
            raise UpstreamUnreachable(self._spent_words(where) + f" (not waiting {seconds:.0f}s more for {what})")

    def _spent_words(self, where: str) -> str:
        return (f"gave up on GitHub at {where}: this command's requests reached their deadline of "
                f"{self.seconds:g}s (PORTTRACK_DEADLINE)")


def split_userinfo(url: str) -> tuple[str, tuple[str, str] | None]:
    """(the URL without user:password@, the credentials or None). The password is registered as a
    secret, so a message quoting the URL some other way cannot carry it either."""
    from urllib.parse import unquote, urlsplit, urlunsplit

    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, hostport = parts.netloc.rpartition("@")
    user, _, password = userinfo.partition(":")
    for value in (userinfo, password, unquote(password)):
        secrets.register(value)
    return urlunsplit((parts.scheme, hostport, parts.path, parts.query, parts.fragment)), (unquote(user), unquote(password))


# (environment variable, GitHubClient argument, type, smallest value allowed)
KNOBS: tuple[tuple[str, str, type, float], ...] = (
    ("PORTTRACK_HTTP_TIMEOUT", "timeout_s", float, 0.001),
    ("PORTTRACK_HTTP_ATTEMPTS", "max_attempts", int, 1),
    ("PORTTRACK_HTTP_BACKOFF", "backoff_s", float, 0.0),
    ("PORTTRACK_RATE_LIMIT_MAX_WAIT", "max_wait_s", float, 0.0),
    ("PORTTRACK_DEADLINE", "deadline_s", float, 0.001),
)
_KNOB_MOST = 86400.0  # a day: anything longer is a typo, not a policy


def knob_value(name: str, raw: str, kind: type[int] | type[float], least: float) -> float | int:
    """A knob's value, or a usage error (exit 2) naming what is accepted: finite, within bounds."""
    shown = for_terminal(raw, 40)
    try:
        value = kind(raw.strip())
    except ValueError:
        raise ConfigError(f"{name}={shown!r}: expected {'a whole number' if kind is int else 'a number of seconds'}") from None
    if not math.isfinite(value) or value < least or value > _KNOB_MOST:
        raise ConfigError(f"{name}={shown!r}: expected a finite number from {least:g} to {_KNOB_MOST:g}")
    return value


# The most of one API answer porttrack reads, decompressed: GitHub's largest (a page of 100 PR
# files with their patches) is a few MiB. A gzip bomb (1 GB of zeros in 1 MB) is refused here,
# after reading 32 MiB of it in 64 KiB pieces, not decompressed whole into memory.
MAX_ANSWER_BYTES = 32 << 20


class AnswerTooLarge(UpstreamUnreachable):
    """An answer larger than porttrack reads; refused, not retried (it would be as large again)."""


def read_limited(response: Any, max_bytes: int, what: str, error: type[PorttrackError] = PorttrackError) -> bytes:
    """The body of a streamed `requests` response, decompressed piece by piece; `error` past
    `max_bytes` (the connection is closed, the rest never read)."""
    chunks, size = [], 0
    for chunk in response.iter_content(chunk_size=1 << 16):
        size += len(chunk)
        if size > max_bytes:
            response.close()
            raise error(f"{what} is larger than {max_bytes >> 20} MiB (decompressed); refused")
        chunks.append(chunk)
    return b"".join(chunks)


def require_list(data: Any, path: str) -> None:
    if data is not None and not isinstance(data, list):
        raise MalformedResponse(f"expected a list from {path}")


def list_of_numbered(data: Any) -> None:
    require_list(data, "the pulls listing")
    if data and not (isinstance(data[0], Mapping) and isinstance(data[0].get("number"), int)):
        raise MalformedResponse("pulls listing item has no number")


def search_listing(data: Any) -> None:
    require_object(data, "search result")
    if not isinstance(data.get("items"), list):
        raise MalformedResponse("the search result has no list of items")


def artifacts_listing(data: Any) -> None:
    require_object(data, "artifacts listing")
    if not isinstance(data.get("artifacts"), list):
        raise MalformedResponse("the artifacts listing has no list of artifacts")


def error_message(text: str) -> str:
    try:
        data = json.loads(text or "")
        # GitHub's words are server-controlled text: cleaned of escapes and controls like a title
        return for_terminal(secrets.redact(str(data.get("message") or "")), 200) if isinstance(data, dict) else ""
    except (ValueError, RecursionError):
        return ""


def short_path(path: str) -> str:
    """A request path as messages quote it: parts of it (a SHA, a branch) come from GitHub."""
    return for_terminal(path, 160)


def header_int(hdrs: Mapping[str, str], name: str) -> int | None:
    try:
        return int(hdrs[name])
    except (KeyError, ValueError):
        return None


def header_seconds(hdrs: Mapping[str, str], name: str) -> float | None:
    """A header that holds seconds (Retry-After) or a Unix time (X-RateLimit-Reset), as the
    server sent it: None when it is no number; `inf` when it is beyond any wait we would take
    (a server may send `1e20`, `inf` or a thousand digits: a wait that long means "not today")."""
    try:
        value = float(hdrs[name])
    except (KeyError, ValueError, OverflowError):
        return None
    if math.isnan(value):
        return None
    return value if abs(value) < _FAR else math.inf


_FAR = 1e11  # seconds: ~3000 years, beyond any date `datetime` renders


def retry_at(hdrs: Mapping[str, str]) -> str | None:
    reset, after = header_seconds(hdrs, "x-ratelimit-reset"), header_seconds(hdrs, "retry-after")
    at = reset if reset is not None else (time.time() + after if after is not None else None)
    if at is None or not math.isfinite(at):
        return None
    try:
        return datetime.fromtimestamp(at, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (ValueError, OverflowError, OSError):
        return None
