"""Faults a client must survive, queued with `FakeGitHub.inject()` and consumed in order:
error statuses, primary and secondary rate limits, 429s, delays, malformed or truncated bodies,
connection resets, a slowloris answer trickled byte by byte, 202 "still computing", a redirect
(to another host, say), and an answer computed at once but delivered late (so that a request sent
first can deliver the older answer last). Also the rate-limit messages GitHub sends (transport.py uses the
primary one when a token's budget is spent).
"""

from __future__ import annotations

import json
import re
import socket
import struct
import threading
import time
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from werkzeug import Request, Response

from testing.github_emulator.state import Token, user_id

DOCS = "https://docs.github.com/rest"


PRIMARY_LIMIT_MESSAGE = ("API rate limit exceeded for user ID {uid}. If you reach out to GitHub "
                         "Support for help, please include the request ID {rid}.")
SECONDARY_LIMIT_MESSAGE = ("You have exceeded a secondary rate limit. Please wait a few minutes "
                           "before you try again. If you reach out to GitHub Support for help, "
                           "please include the request ID {rid}.")

FAULT_KINDS: dict[str, set[str]] = {   # kind -> accepted parameters
    "status": {"status", "body", "json", "headers", "content_type"},
    "rate_limit": {"reset_in", "message"},
    "secondary_rate_limit": {"retry_after", "message", "status"},
    "too_many": {"retry_after", "message"},
    "delay": {"seconds"},
    "malformed": {"body", "content_type"},
    "truncated": set(),
    "reset": set(),
    "trickle": {"seconds_per_byte", "body", "status"},
    "accepted": set(),
    "redirect": {"location", "status"},
    "late": {"seconds"},
}


@dataclass
class Fault:
    kind: str
    path: re.Pattern[str] | None
    method: str | None
    times: int
    params: dict[str, Any]

    def matches(self, method: str, path: str) -> bool:
        return ((self.method is None or self.method == method)
                and (self.path is None or bool(self.path.search(path))))


class FaultsMixin:
    """The fault queue of FakeGitHub and the answers faults give instead of the normal one.
    Uses `_rate_headers` and `_request_id` from TransportMixin."""

    _lock: threading.RLock
    _faults: list[Fault]

    def inject(self, kind: str, *, path: str | None = None, method: str | None = None,
               times: int = 1, **params: Any) -> None:
        """Queue a fault for the next `times` requests matching `path` (regex, searched in the
        path) and `method`. Queued faults are consumed in order.

        status (status=502, body= / json=, headers=) · rate_limit (reset_in=60) ·
        secondary_rate_limit (retry_after=60, status=403) · too_many (retry_after=1) ·
        delay (seconds=1.0, then the normal answer) · malformed (body=, content_type=) ·
        truncated (the normal JSON cut in half) · reset (connection dropped, no answer) ·
        trickle (seconds_per_byte=1.0, body=, status=200: the answer one byte at a time) ·
        accepted (202 with an empty object: "still computing") · redirect (location=, status=301) ·
        late (seconds=1.0: the normal answer, computed now, delivered after `seconds`)
        """
        if kind not in FAULT_KINDS:
            raise ValueError(f"unknown fault {kind!r}; one of {sorted(FAULT_KINDS)}")
        unknown = set(params) - FAULT_KINDS[kind]
        if unknown:
            raise TypeError(f"fault {kind!r} takes {sorted(FAULT_KINDS[kind])}, not {sorted(unknown)}")
        with self._lock:
            self._faults.append(Fault(kind, re.compile(path) if path else None,
                                      method.upper() if method else None, times, params))

    def pending_faults(self) -> list[tuple[str, int]]:
        with self._lock:
            return [(f.kind, f.times) for f in self._faults]

    def _take_fault(self, method: str, path: str) -> Fault | None:
        with self._lock:
            for f in self._faults:
                if f.matches(method, path):
                    f.times -= 1
                    if f.times <= 0:
                        self._faults.remove(f)
                    return f
        return None

    @staticmethod
    def _drop_connection(request: Request) -> None:
        # SO_LINGER 0 + shutdown: the client sees the connection die before any status line
        # (requests raises ConnectionError); werkzeug's later write fails and is ignored.
        sock = request.environ.get("werkzeug.socket")
        if sock is None:
            raise RuntimeError("werkzeug.socket missing: cannot emulate a connection reset")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.shutdown(socket.SHUT_RDWR)

    def _fault_response(self, fault: Fault, token: Token | None) -> Response:
        p, rid = fault.params, self._request_id()
        if fault.kind == "status":
            status = int(p.get("status", 502))
            if "body" in p:
                data = p["body"].encode() if isinstance(p["body"], str) else p["body"]
                ctype = p.get("content_type", "text/plain; charset=utf-8")
            else:
                data = json.dumps(p.get("json", {"message": _reason(status)})).encode()
                ctype = p.get("content_type", "application/json; charset=utf-8")
            resp = Response(data, status, content_type=ctype)
            self._rate_headers(resp, token)
            resp.headers.update(p.get("headers", {}))
            return resp
        if fault.kind == "rate_limit":
            login = token.login if token else "anonymous"
            msg = p.get("message", PRIMARY_LIMIT_MESSAGE.format(uid=user_id(login), rid=rid))
            resp = Response(json.dumps({"message": msg, "documentation_url": DOCS}), 403,
                            content_type="application/json; charset=utf-8")
            limit = token.limit if token else 60
            resp.headers.update({"X-RateLimit-Limit": str(limit), "X-RateLimit-Remaining": "0",
                                 "X-RateLimit-Used": str(limit),
                                 "X-RateLimit-Reset": str(int(time.time()) + int(p.get("reset_in", 60))),
                                 "X-RateLimit-Resource": "core", "X-GitHub-Request-Id": rid})
            return resp
        if fault.kind in ("secondary_rate_limit", "too_many"):
            status = 429 if fault.kind == "too_many" else int(p.get("status", 403))
            msg = p.get("message", SECONDARY_LIMIT_MESSAGE.format(rid=rid))
            resp = Response(json.dumps({"message": msg, "documentation_url": DOCS}), status,
                            content_type="application/json; charset=utf-8")
            self._rate_headers(resp, token)
            resp.headers["Retry-After"] = str(p.get("retry_after", 60 if fault.kind != "too_many" else 1))
            return resp
        if fault.kind == "trickle":
            data = p.get("body", json.dumps({"number": 1, "padding": "x" * 200}))
            data = data.encode() if isinstance(data, str) else data
            pace = float(p.get("seconds_per_byte", 1.0))

            def slowly():
                for index in range(len(data)):
                    time.sleep(pace)
                    yield data[index:index + 1]

            resp = Response(slowly(), int(p.get("status", 200)), content_type="application/json; charset=utf-8",
                            direct_passthrough=True)
            resp.headers["Content-Length"] = str(len(data))
            return resp
        if fault.kind == "accepted":
            resp = Response(b"{}", 202, content_type="application/json; charset=utf-8")
            self._rate_headers(resp, token)
            return resp
        if fault.kind == "redirect":
            resp = Response(json.dumps({"message": "Moved Permanently", "url": p["location"],
                                        "documentation_url": DOCS}).encode(), int(p.get("status", 301)),
                            content_type="application/json; charset=utf-8")
            resp.headers["Location"] = p["location"]
            return resp
        if fault.kind == "malformed":
            data = p.get("body", b"<html><body><h1>Unicorn!</h1>This page is taking too long to load.</body></html>")
            resp = Response(data.encode() if isinstance(data, str) else data, 200,
                            content_type=p.get("content_type", "text/html; charset=utf-8"))
            self._rate_headers(resp, token)
            return resp
        raise AssertionError(fault.kind)



def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"
