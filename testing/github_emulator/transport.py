"""How the emulator meets HTTP: one werkzeug handler (`__call__`) that logs each request without
credentials, applies queued faults, checks the token and its rate limit, routes to a handler,
and shapes the answer (ETag and 304, Link pagination, rate-limit headers).

A request without a token is anonymous, as on GitHub: it may read public repositories, from a
budget of 60 requests an hour per client address (a 304 costs nothing, as with a token); a
private repository is 404 to it and any write is 401 "Requires authentication".

Handlers return a `Reply` or raise `HTTPError`; an exception of any other kind is recorded in
`errors`, and a request no route matches in `unrouted` (both reported by `problems()`).
"""

from __future__ import annotations

import datetime as dt
import email.utils
import hashlib
import json
import re
import threading
import time
import traceback
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from werkzeug import Request, Response

from testing.github_emulator.faults import DOCS, PRIMARY_LIMIT_MESSAGE
from testing.github_emulator.state import Item, Repo, Token, user_id

REPO = r"/repos/(?P<owner>[^/]+)/(?P<name>[^/]+)"   # the prefix of every repository route
# GitHub's words when an address has spent its unauthenticated budget
ANONYMOUS_LIMIT_MESSAGE = ("API rate limit exceeded for {address}. (But here's the good news: Authenticated requests "
                           "get a higher rate limit. Check out the documentation for more details.)")


class HTTPError(Exception):
    def __init__(self, status: int, message: str, **extra: Any) -> None:
        super().__init__(message)
        self.status, self.message, self.extra = status, message, extra


def not_found() -> HTTPError:
    return HTTPError(404, "Not Found")


def validation(resource: str, field_: str, code: str = "missing_field") -> HTTPError:
    return HTTPError(422, "Validation Failed",
                     errors=[{"resource": resource, "code": code, "field": field_}])


@dataclass(frozen=True)
class LoggedRequest:
    """One request as the emulator saw it. Credentials are never stored."""
    method: str
    path: str
    query: dict[str, str]
    status: int | None          # None: the connection was reset without an answer
    conditional: bool           # If-None-Match was sent
    matched_etag: bool          # ...and it matched (answered 304)
    auth_present: bool
    login: str | None           # the token's user, when the token was valid
    time: float
    duration: float
    json: Any                   # parsed body of writes (POST/PATCH/PUT/DELETE), else None
    fault: str | None           # the injected fault kind that shaped this answer
    headers: dict[str, str]     # request headers minus Authorization/Cookie


@dataclass
class Reply:
    status: int = 200
    payload: Any = None                       # JSON-able, or bytes/str for raw bodies
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json; charset=utf-8"
    last_modified: dt.datetime | None = None


@dataclass
class Ctx:
    request: Request
    token: Token | None
    args: Mapping[str, str]
    body: Any
    budget: Token | None = None   # the rate-limit budget this request spends (an anonymous one: its address's)

    @property
    def login(self) -> str | None:
        return self.token.login if self.token else None


class TransportMixin:
    """Serving, answer shaping, routing and the rules every handler applies, for FakeGitHub."""

    base_url: str
    latency_s: float
    on_request: Callable[[str, str, dict[str, str]], None] | None
    log: list[LoggedRequest]
    errors: list[str]
    unrouted: list[str]
    _lock: threading.RLock
    _repos: dict[str, Repo]
    _tokens: dict[str, Token]
    _anon: Token
    _anon_budgets: dict[str, Token]
    _request_ids: Iterator[int]
    _started: dt.datetime
    _routes: list[tuple[str, re.Pattern[str], Callable[..., Reply]]]

    def __call__(self, request: Request) -> Response:
        started = time.time()
        try:
            return self._serve(request, started)
        except Exception:
            with self._lock:
                self.errors.append(f"{request.method} {request.path}: {traceback.format_exc()}")
                self.log.append(LoggedRequest(
                    request.method.upper(), request.path, {}, 500, "If-None-Match" in request.headers,
                    False, "Authorization" in request.headers, None, started, time.time() - started,
                    None, None, {}))
            body = json.dumps({"message": "GitHub emulator error (see fake.errors)"}).encode()
            return Response(body, 500, content_type="application/json; charset=utf-8")

    def _serve(self, request: Request, started: float) -> Response:
        if self.latency_s:
            time.sleep(self.latency_s)
        method, path = request.method.upper(), request.path
        query = {k: ("REDACTED" if k.lower() in ("access_token", "token") else v)
                 for k, v in request.args.items()}
        if self.on_request is not None:
            self.on_request(method, path, dict(query))
        inm = request.headers.get("If-None-Match")
        auth = request.headers.get("Authorization")
        raw = request.get_data()
        body = None
        body_error = False
        if method in ("POST", "PATCH", "PUT", "DELETE") and raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body_error = True
        headers = {k: v for k, v in request.headers.items()
                   if k.lower() not in ("authorization", "proxy-authorization", "cookie")}
        fault = self._take_fault(method, path)

        def record(status: int | None, token: Token | None, matched: bool = False) -> None:
            rec = LoggedRequest(method, path, query, status, inm is not None, matched, auth is not None,
                                token.login if token else None, started, time.time() - started,
                                body if method != "GET" else None, fault.kind if fault else None, headers)
            with self._lock:
                self.log.append(rec)

        if fault is not None and fault.kind == "delay":
            time.sleep(float(fault.params.get("seconds", 1.0)))
        elif fault is not None and fault.kind == "reset":
            # Log before the socket dies: the client sees the reset at once and a test may read
            # the log before this thread would get to a later line.
            record(None, None)
            self._drop_connection(request)
            return Response(b"", 200)
        elif fault is not None and fault.kind not in ("truncated", "late"):
            resp = self._fault_response(fault, self._token_for(auth))
            record(resp.status_code, None)
            return resp

        token = self._token_for(auth)
        if path.startswith("/_blobs/"):          # signed storage URLs need no credentials
            reply = self._route(method, path, Ctx(request, None, request.args, body))
            resp = self._respond(reply, None, counted=False)
            record(resp.status_code, None)
            return resp
        if token is None and auth:
            resp = self._respond(Reply(401, {"message": "Bad credentials", "documentation_url": DOCS}),
                                 None, counted=False)
            record(401, None)
            return resp
        if token is None and method not in ("GET", "HEAD"):
            resp = self._respond(Reply(401, {"message": "Requires authentication", "documentation_url": DOCS}),
                                 None, counted=False)
            record(401, None)
            return resp
        address = request.remote_addr or "unknown"
        budget = token or self._anonymous_budget(address)
        graphql = token is not None and path == "/graphql"
        if graphql:   # its own points budget (handlers/graphql.py)
            budget = self._graphql_budget(token)  # type: ignore[attr-defined]
        with self._lock:
            self._refill(budget)
            exhausted = budget.remaining <= 0 and path != "/rate_limit"
        if exhausted and graphql:
            resp = self._respond(self._graphql_rate_limited(budget), budget, counted=False)  # type: ignore[attr-defined]
            record(resp.status_code, token)
            return resp
        if exhausted:
            message = (PRIMARY_LIMIT_MESSAGE.format(uid=user_id(token.login), rid=self._request_id()) if token
                       else ANONYMOUS_LIMIT_MESSAGE.format(address=address))
            resp = self._respond(Reply(403, {"message": message, "documentation_url": DOCS}), budget, counted=False)
            record(403, token)
            return resp
        if body_error:
            reply = Reply(400, {"message": "Problems parsing JSON", "documentation_url": DOCS})
        elif token is None and self._private_repo(path):
            reply = Reply(404, {"message": "Not Found", "documentation_url": DOCS})
        else:
            reply = self._route(method, path, Ctx(request, token, request.args, body, budget))
        matched = False
        if method == "GET" and reply.status == 200 and inm is not None:
            # weak comparison (RFC 9110): W/"x" and "x" match each other
            etag = self._etag(self._encode(reply)[0]).removeprefix("W/")
            sent = {t.strip().removeprefix("W/") for t in inm.split(",")}
            matched = etag in sent or "*" in sent
        resp = self._respond(reply, budget, counted=not matched and path != "/rate_limit",
                             not_modified=matched)
        if fault is not None and fault.kind == "truncated":
            data = resp.get_data()
            resp.set_data(data[: len(data) // 2])
        elif fault is not None and fault.kind == "late":  # the answer is as of now; it arrives later
            time.sleep(float(fault.params.get("seconds", 1.0)))
        record(resp.status_code, token, matched)
        return resp

    # ------------------------------------------------------------------- response shaping

    def _token_for(self, auth: str | None) -> Token | None:
        if not auth:
            return None
        scheme, _, value = auth.partition(" ")
        if scheme.lower() not in ("token", "bearer"):
            return None
        with self._lock:
            return self._tokens.get(value.strip())

    def _anonymous_budget(self, address: str) -> Token:
        with self._lock:
            if address not in self._anon_budgets:
                self._anon_budgets[address] = Token("", False, False, self._anon.limit, self._anon.limit,
                                                    int(time.time()) + 3600)
            return self._anon_budgets[address]

    def _private_repo(self, path: str) -> bool:
        match = re.match(REPO + "(?:/|$)", path)
        if not match:
            return False
        repo = self._repos.get(f"{match['owner']}/{match['name']}".lower())
        return repo is not None and repo.private

    def anonymous_rate_limit(self, address: str = "127.0.0.1") -> dict[str, int]:
        """The budget requests without a token from `address` have left (60 an hour, as on GitHub)."""
        with self._lock:
            t = self._refill(self._anonymous_budget(address))
            return {"limit": t.limit, "remaining": t.remaining, "used": t.limit - t.remaining, "reset": t.reset}

    def set_anonymous_rate_limit(self, address: str = "127.0.0.1", *, remaining: int | None = None,
                                 reset_in: int | None = None) -> None:
        with self._lock:
            t = self._anonymous_budget(address)
            if remaining is not None:
                t.remaining = remaining
            if reset_in is not None:
                t.reset = int(time.time()) + reset_in

    @staticmethod
    def _refill(t: Token) -> Token:
        if time.time() >= t.reset:
            t.remaining, t.reset = t.limit, int(time.time()) + 3600
        return t

    def _request_id(self) -> str:
        return f"EMU:{next(self._request_ids):08X}"

    @staticmethod
    def _etag(data: bytes) -> str:
        return f'W/"{hashlib.sha1(data).hexdigest()}"'

    @staticmethod
    def _encode(reply: Reply) -> tuple[bytes, str]:
        if reply.payload is None:
            return b"", reply.content_type
        if isinstance(reply.payload, bytes):
            return reply.payload, reply.content_type
        if isinstance(reply.payload, str):
            return reply.payload.encode(), reply.content_type
        return json.dumps(reply.payload, separators=(",", ":")).encode(), reply.content_type

    def _rate_headers(self, resp: Response, token: Token | None) -> None:
        t = token or self._anon
        resp.headers.update({"X-RateLimit-Limit": str(t.limit), "X-RateLimit-Remaining": str(t.remaining),
                             "X-RateLimit-Used": str(t.limit - t.remaining),
                             "X-RateLimit-Reset": str(t.reset),
                             "X-RateLimit-Resource": getattr(t, "resource", "core")})

    def _respond(self, reply: Reply, token: Token | None, *, counted: bool,
                 not_modified: bool = False) -> Response:
        if counted and token is not None:
            with self._lock:
                token.remaining = max(0, token.remaining - 1)
        data, ctype = self._encode(reply)
        etag = self._etag(data) if reply.status == 200 and data else None
        if not_modified:
            resp = Response(status=304)
        elif reply.status in (204, 304) or (reply.payload is None and reply.status in (301, 302)):
            resp = Response(status=reply.status)
        else:
            resp = Response(data, reply.status, content_type=ctype)
        resp.headers["X-GitHub-Request-Id"] = self._request_id()
        resp.headers["X-GitHub-Api-Version-Selected"] = "2022-11-28"
        if etag:
            resp.headers["ETag"] = etag
            resp.headers["Last-Modified"] = email.utils.format_datetime(
                reply.last_modified or self._started, usegmt=True)
            resp.headers["Cache-Control"] = "private, max-age=60, s-maxage=60"
            resp.headers["Vary"] = "Accept, Authorization, Cookie, X-GitHub-OTP"
        self._rate_headers(resp, token)
        resp.headers.update(reply.headers)
        return resp

    def _route(self, method: str, path: str, ctx: Ctx) -> Reply:
        path_matched = False
        for m, pattern, handler in self._routes:
            match = pattern.fullmatch(path)
            if not match:
                continue
            path_matched = True
            if m != method:
                continue
            try:
                with self._lock:
                    return handler(ctx, **match.groupdict())
            except HTTPError as e:
                return Reply(e.status, {"message": e.message, **e.extra, "documentation_url": DOCS})
        with self._lock:
            self.unrouted.append(f"unrouted request: {method} {path}"
                                 + (" (path known, method not)" if path_matched else ""))
        return Reply(404, {"message": "Not Found", "documentation_url": DOCS})

    def _repo_for(self, owner: str, name: str) -> Repo:
        r = self._repos.get(f"{owner}/{name}".lower())
        if r is None:
            raise not_found()
        return r

    @staticmethod
    def _require_push(ctx: Ctx) -> None:
        if ctx.token is None or not ctx.token.push:
            raise HTTPError(403, "Resource not accessible by integration")

    def _item(self, r: Repo, n: str | int) -> Item:
        item = r.items.get(int(n))
        if item is None:
            raise not_found()
        return item


    def _arg_int(self, ctx: Ctx, name: str, default: int) -> int:
        try:
            return int(ctx.args.get(name, default))
        except ValueError:
            return default

    def _paginate(self, ctx: Ctx, items: Sequence[Any], *, default: int = 30,
                  maximum: int = 100) -> tuple[list[Any], dict[str, str]]:
        per_page = self._arg_int(ctx, "per_page", default)
        per_page = default if per_page <= 0 else min(per_page, maximum)
        page = max(1, self._arg_int(ctx, "page", 1))
        last = max(1, -(-len(items) // per_page))
        chunk = list(items[(page - 1) * per_page: page * per_page])
        req = ctx.request

        def url(p: int) -> str:
            params = [(k, v) for k, v in req.args.items(multi=True) if k != "page"] + [("page", str(p))]
            return f"{self.base_url}{urllib.parse.quote(req.path)}?{urllib.parse.urlencode(params)}"

        links = []
        if page < last:
            links += [f'<{url(page + 1)}>; rel="next"', f'<{url(last)}>; rel="last"']
        if page > 1:
            links += [f'<{url(min(page - 1, last))}>; rel="prev"', f'<{url(1)}>; rel="first"']
        return chunk, ({"Link": ", ".join(links)} if links else {})

