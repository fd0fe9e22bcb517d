"""The one door to GitHub (the records it returns: `porttrack.github_records`).

Everything that talks to the GitHub REST API goes through `GitHubClient`, which returns porttrack's
own records (never PyGithub objects). Policy, all of it deliberate (library notes §1):

- PyGithub's own retry and throttle are switched off (its default retry re-sends POSTs on 5xx and
  sleeps until a rate-limit reset); this module retries **only GET/HEAD**, a bounded number of
  times with exponential backoff, on 5xx, connection errors, timeouts and malformed bodies.
- A rate-limit answer (403/429 with `Retry-After`, or `X-RateLimit-Remaining: 0` with
  `X-RateLimit-Reset`) is waited out when the wait is within `max_wait_s`; otherwise `RateLimited`
  says when to retry.
- Writes (POST/PATCH) are sent once. A failed write raises `WriteUncertain` (it may or may not have
  been applied), so the caller can look before trying again instead of creating duplicates.
- GETs are conditional when an ETag is cached: an unchanged poll is answered 304 and costs no rate
  limit. The cache lives in the workspace's git-ignored `.porttrack/` and never holds the token.
- The token is registered with `porttrack.secrets` so no message can carry it.
"""

from __future__ import annotations

import io
import json
import math
import zipfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

from porttrack import github_graphql, secrets
from porttrack.errors import ConfigError, GitHubAuthError, NotFound, PorttrackError, RateLimited, UpstreamUnreachable
from porttrack.github_records import (
    Artifact,
    Comparison,
    Issue,
    IssueComment,
    IssueRef,
    MalformedResponse,
    PRFile,
    PullRequest,
    RateLimit,
    WorkflowRun,
    cross_references,
    int_or_none,
    require_object,
)
from porttrack.workspace import atomic_write_text

DEFAULT_API_URL = "https://api.github.com"
IDEMPOTENT = frozenset({"GET", "HEAD"})
# Where a token comes from, for every message that asks for one (`secrets.resolve_token`'s order).
TOKEN_HINT = "set GITHUB_TOKEN or GH_TOKEN, or log in with `gh auth login`"


class WriteUncertain(UpstreamUnreachable):
    """A write failed in a way that leaves it unknown whether GitHub applied it. Look before retrying."""


def _read_limited(response: Any, max_bytes: int, what: str) -> bytes:
    chunks, size = [], 0
    for chunk in response.iter_content(chunk_size=1 << 16):
        size += len(chunk)
        if size > max_bytes:
            raise PorttrackError(f"{what} is larger than {max_bytes >> 20} MiB; refused")
        chunks.append(chunk)
    return b"".join(chunks)


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
                data = json.loads(path.read_text(encoding="utf-8"))
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

    def save(self) -> None:
        if self.path and self.dirty:
            with self._lock:
                payload = {"schema": "porttrack/etag-cache/v1", "entries": self.entries}
                atomic_write_text(self.path, json.dumps(payload, sort_keys=True))
                self.dirty = False


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    data: Any
    from_cache: bool = False


class GitHubClient:
    def __init__(
        self,
        repo: str,
        token: str | None,
        api_url: str | None = None,
        *,
        timeout_s: float = 15.0,
        max_attempts: int = 4,
        backoff_s: float = 0.5,
        max_wait_s: float = 60.0,
        cache: EtagCache | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.repo = repo
        self.api_url = (api_url or DEFAULT_API_URL).rstrip("/")
        self._token = token
        if token:
            secrets.register(token)
        self.timeout_s = timeout_s
        self.max_attempts = max(1, max_attempts)
        self.backoff_s = backoff_s
        self.max_wait_s = max_wait_s
        self.cache = cache or EtagCache(None)
        self._sleep = sleep
        self._local = threading.local()
        self.requests_sent = 0
        self._count_lock = threading.Lock()
        # The core budget as the last answer stated it (X-RateLimit-* headers, sent with every
        # answer, 304s included): what is left is shown without spending a request on /rate_limit.
        self.rate_seen: RateLimit | None = None

    @property
    def authenticated(self) -> bool:
        """False: no token, so GitHub answers reads of public repositories only, from the
        address's own budget (60 requests an hour), and refuses every write."""
        return bool(self._token)

    # -- transport ----------------------------------------------------------------------------
    def _requester(self):
        """One PyGithub requester per thread: requests' sessions are not documented thread-safe."""
        requester = getattr(self._local, "requester", None)
        if requester is None:
            import logging

            import github

            github.set_log_level(logging.WARNING)
            auth = github.Auth.Token(self._token) if self._token else None
            gh = github.Github(
                base_url=self.api_url,
                auth=auth,
                timeout=max(1, math.ceil(self.timeout_s)),  # PyGithub asserts an int
                retry=None,  # retries are ours: GET only, bounded (see module docstring)
                lazy=True,
                per_page=100,
                seconds_between_requests=None,
                seconds_between_writes=None,
            )
            requester = self._local.requester = gh.requester
        return requester

    def _send(self, verb: str, path: str, params: Mapping[str, Any] | None, headers: dict[str, str] | None, body: Any):
        import requests

        with self._count_lock:
            self.requests_sent += 1
        try:
            status, hdrs, text = self._requester().requestJson(verb, path, parameters=dict(params or {}) or None, headers=headers, input=body)
        except requests.exceptions.Timeout as exc:
            raise _Transient(f"timed out after {self.timeout_s:g}s") from exc
        except requests.exceptions.RequestException as exc:
            raise _Transient(f"connection failed: {type(exc).__name__}") from exc
        except (AssertionError, ValueError) as exc:  # PyGithub asserts on foreign hosts in payload URLs
            raise _Transient(f"unexpected answer: {exc}") from exc
        if text and secrets.contains_secret(text):
            # A token in an answer (a proxy or a bot reflecting a header into a title, a body, an
            # error) is masked at the door: nothing that reads the answer — recorded state, the
            # ETag cache, output, the weekly issue — can carry it. "***" is JSON-safe in a string.
            text = secrets.redact(text)
        hdrs = {str(k).lower(): str(v) for k, v in (hdrs or {}).items()}
        self._note_rate(hdrs)
        return status, hdrs, text

    def _note_rate(self, hdrs: Mapping[str, str]) -> None:
        """Keep the lowest budget stated for the newest window: concurrent answers arrive in any order."""
        if hdrs.get("x-ratelimit-resource", "core") != "core":
            return
        limit, remaining = _header_int(hdrs, "x-ratelimit-limit"), _header_int(hdrs, "x-ratelimit-remaining")
        if limit is None or remaining is None:
            return
        seen = RateLimit(self.authenticated, limit, remaining, _header_int(hdrs, "x-ratelimit-reset"), None)
        with self._count_lock:
            old = self.rate_seen
            if old is None or (seen.reset or 0) > (old.reset or 0) or (
                    seen.reset == old.reset and (seen.remaining or 0) < (old.remaining or 0)):
                self.rate_seen = seen

    def get(self, path: str, params: Mapping[str, Any] | None = None, *, conditional: bool = True,
            shape: Callable[[Any], Any] | None = None) -> Answer:
        """GET with conditional request, bounded retries and rate-limit handling. `shape` checks the
        decoded body (raising MalformedResponse): a body of the wrong shape is retried like a 5xx."""
        key = f"{self.api_url}{path}?{json.dumps(dict(params or {}), sort_keys=True)}"
        cached = self.cache.get(key) if conditional else None
        headers = {}
        if cached:
            if cached.get("etag"):
                headers["If-None-Match"] = cached["etag"]
            elif cached.get("last_modified"):
                headers["If-Modified-Since"] = cached["last_modified"]
        last_problem = "no attempt made"
        for attempt in range(1, self.max_attempts + 1):
            try:
                status, hdrs, text = self._send("GET", path, params, headers or None, None)
            except _Transient as exc:
                last_problem = str(exc)
                self._backoff(attempt)
                continue
            if status == 304 and cached:
                return Answer(200, hdrs, cached["body"], from_cache=True)
            if 200 <= status < 300:
                try:
                    data = json.loads(text) if text else None
                except (ValueError, RecursionError):  # RecursionError: nested too deep to decode
                    last_problem = f"malformed JSON in answer to GET {path}"
                    self._backoff(attempt)
                    continue
                if shape is not None:
                    try:
                        shape(data)
                    except MalformedResponse as exc:
                        last_problem = f"unexpected answer to GET {path}: {exc}"
                        self._backoff(attempt)
                        continue
                if conditional:
                    self.cache.put(key, hdrs.get("etag"), hdrs.get("last-modified"), data)
                return Answer(status, hdrs, data)
            wait = self._rate_limit_wait(status, hdrs, text)
            if wait is not None:
                self._sleep(wait)
                last_problem = f"rate limited (waited {wait:.0f}s)"
                continue
            self._raise_for_status("GET", path, status, text)
            last_problem = f"HTTP {status}"
            self._backoff(attempt)
        raise UpstreamUnreachable(
            f"GitHub at {self.api_url} failed for GET {path} after {self.max_attempts} attempts: {secrets.redact(last_problem)}"
        )

    def write(self, verb: str, path: str, body: Any) -> Answer:
        """POST/PATCH/PUT/DELETE: sent exactly once, never retried blindly."""
        if verb in IDEMPOTENT:
            raise ValueError("use get() for reads")
        try:
            status, hdrs, text = self._send(verb, path, None, None, body)
        except _Transient as exc:
            raise WriteUncertain(
                f"{verb} {path} did not complete ({secrets.redact(str(exc))}); it may or may not have been applied"
            ) from None
        if 200 <= status < 300:
            try:
                return Answer(status, hdrs, json.loads(text) if text else None)
            except (ValueError, RecursionError):
                raise WriteUncertain(f"{verb} {path} answered {status} with an unreadable body") from None
        if status >= 500:
            raise WriteUncertain(f"{verb} {path} answered {status}; it may or may not have been applied")
        if self._rate_limit_wait(status, hdrs, text) is not None or status == 429:
            raise RateLimited(f"{verb} {path} was rate limited; nothing was written", _retry_at(hdrs))
        self._raise_for_status(verb, path, status, text)
        raise UpstreamUnreachable(f"{verb} {path} answered HTTP {status}")

    def _backoff(self, attempt: int) -> None:
        if attempt < self.max_attempts:
            self._sleep(self.backoff_s * (2 ** (attempt - 1)))

    def _rate_limit_wait(self, status: int, hdrs: dict[str, str], text: str) -> float | None:
        """Seconds to wait for a rate-limit answer, None if the answer is not a rate limit.

        Raises RateLimited when GitHub asks for a longer wait than we accept.
        """
        if status not in (403, 429):
            return None
        wait: float | None = None
        if "retry-after" in hdrs:
            try:
                wait = max(0.0, float(hdrs["retry-after"]))
            except ValueError:
                wait = 60.0
        elif hdrs.get("x-ratelimit-remaining") == "0" and "x-ratelimit-reset" in hdrs:
            try:
                wait = max(0.0, float(hdrs["x-ratelimit-reset"]) - time.time()) + 1.0
            except ValueError:
                wait = None
        elif status == 429 or "rate limit" in (text or "").lower():
            wait = 60.0
        if wait is None:
            return None
        if wait > self.max_wait_s:
            raise RateLimited(
                f"GitHub rate limit reached; retry after {_retry_at(hdrs) or f'{wait:.0f}s'}", _retry_at(hdrs)
            )
        return wait

    def _raise_for_status(self, verb: str, path: str, status: int, text: str) -> None:
        message = _message(text)
        if status == 401 and not self._token:
            raise GitHubAuthError(f"GitHub requires authentication for {verb} {path}: {TOKEN_HINT}")
        if status == 401:
            raise GitHubAuthError(f"GitHub refused the token for {verb} {path}: {message or 'bad credentials'}")
        if status == 403:
            raise GitHubAuthError(f"GitHub denied {verb} {path}: {message or 'forbidden'} (check the token's permissions)")
        if status == 404:
            # without a token GitHub answers 404, not 401, for a private repository
            private = "" if self._token else f"; without a token only public repositories can be read ({TOKEN_HINT})"
            raise NotFound(f"GitHub has no {path} (HTTP 404){': ' + message if message else ''}{private}")
        if 400 <= status < 500:
            raise PorttrackError(f"GitHub rejected {verb} {path} (HTTP {status}): {message}")
        # 5xx and anything else: the caller's retry loop continues

    # -- pull requests ------------------------------------------------------------------------
    def get_pull(self, number: int) -> tuple[PullRequest, bool]:
        """The PR and whether the answer came from the cache (304: unchanged since last poll)."""
        answer = self.get(f"/repos/{self.repo}/pulls/{int(number)}", shape=PullRequest.from_json)
        return PullRequest.from_json(answer.data), answer.from_cache

    def get_pulls(self, numbers: Iterable[int], max_workers: int = 8) -> dict[int, tuple[PullRequest, bool]]:
        """Several PRs at once, each with whether it is unchanged since the last poll: concurrent
        REST GETs, or past one wave of them GraphQL (`github_graphql.pays`), REST for what it leaves."""
        numbers = sorted(set(int(n) for n in numbers))
        if not numbers:
            return {}
        pulls = self._pulls_by_graphql(numbers, max_workers) if github_graphql.pays(bool(self._token), len(numbers), max_workers) else {}
        rest = [n for n in numbers if n not in pulls]   # a 404 stays REST's
        with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(rest))), thread_name_prefix="gh") as pool:
            pulls.update(zip(rest, pool.map(self.get_pull, rest)))
        return {n: pulls[n] for n in numbers}

    def find_pull_by_head(self, branch: str) -> int | None:
        """The PR whose head branch is `branch` in the upstream repository (for base-branch stacking)."""
        owner = self.repo.split("/")[0]
        answer = self.get(f"/repos/{self.repo}/pulls", {"state": "all", "head": f"{owner}:{branch}", "per_page": 10},
                          shape=_list_of_numbered)
        items = answer.data or []
        return int(items[0]["number"]) if items else None

    def compare(self, base: str, head: str) -> Comparison | None:
        try:
            answer = self.get(f"/repos/{self.repo}/compare/{base}...{head}", shape=lambda d: require_object(d, "comparison"))
        except NotFound:
            return None  # e.g. the old head was garbage-collected after a force-push
        data = answer.data or {}
        return Comparison(str(data.get("status")), int(data.get("ahead_by") or 0), int(data.get("behind_by") or 0))

    def list_all(self, path: str, params: Mapping[str, Any] | None = None, limit: int = 1000) -> list[Any]:
        """Follow pagination (per_page=100) up to `limit` items."""
        items: list[Any] = []
        page = 1
        while len(items) < limit:
            answer = self.get(path, {**dict(params or {}), "per_page": 100, "page": page}, conditional=False,
                              shape=lambda d: _require_list(d, path))
            batch = answer.data or []
            items.extend(batch)
            if 'rel="next"' not in answer.headers.get("link", "") or not batch:
                break
            page += 1
        return items[:limit]

    def save_cache(self) -> None:
        self.cache.save()

    # -- actions --------------------------------------------------------------------------------
    # Gate jobs on the fork's self-hosted runners: dispatch a workflow, poll its run, download the
    # results artifact. Dispatch is a write (sent once); the rest are GETs (retried, bounded).

    def dispatch_workflow(self, workflow_file: str, ref: str, inputs: Mapping[str, str]) -> int | None:
        """POST a `workflow_dispatch` event. Returns the run id when GitHub says it (it does when
        asked with `return_run_details`), else None: find the run with `find_dispatched_run`."""
        answer = self.write(
            "POST",
            f"/repos/{self.repo}/actions/workflows/{workflow_file}/dispatches",
            {"ref": ref, "inputs": dict(inputs), "return_run_details": True},
        )
        data = answer.data if isinstance(answer.data, dict) else {}
        run_id = data.get("workflow_run_id") or data.get("id")
        return int(run_id) if run_id else None

    def find_dispatched_run(self, workflow_file: str, marker: str, created_since: str | None = None) -> WorkflowRun | None:
        """The newest run of `workflow_file` whose title carries `marker` (the workflow's
        `run-name:` echoes the request id porttrack passed as an input)."""
        params: dict[str, Any] = {"event": "workflow_dispatch", "per_page": 50}
        if created_since:
            params["created"] = f">={created_since}"
        answer = self.get(f"/repos/{self.repo}/actions/workflows/{workflow_file}/runs", params, conditional=False,
                          shape=lambda d: require_object(d, "workflow runs listing"))
        runs = (answer.data or {}).get("workflow_runs") if isinstance(answer.data, dict) else None
        for item in runs or ():
            run = WorkflowRun.from_json(item)
            if marker in run.display_title or marker in run.name:
                return run
        return None

    def get_workflow_run(self, run_id: int) -> WorkflowRun:
        answer = self.get(f"/repos/{self.repo}/actions/runs/{int(run_id)}", conditional=False, shape=WorkflowRun.from_json)
        return WorkflowRun.from_json(answer.data)

    def list_run_artifacts(self, run_id: int) -> list[Artifact]:
        answer = self.get(f"/repos/{self.repo}/actions/runs/{int(run_id)}/artifacts", {"per_page": 100}, conditional=False,
                          shape=_artifacts_listing)
        items = (answer.data or {}).get("artifacts") if isinstance(answer.data, dict) else None
        return [Artifact.from_json(item) for item in items or ()]

    def download_artifact(self, artifact_id: int, max_bytes: int = 64 << 20) -> bytes:
        """The artifact's zip archive, as bytes.

        GitHub answers `/zip` with a 302 to a short-lived signed URL on another host (blob
        storage). PyGithub refuses to follow redirects to hosts it does not know, so both legs are
        sent here with `requests`: the first with the token, the second without it (the URL is
        signed; the token must not travel to another host). GETs: retried like any other.
        """
        import requests

        path = f"/repos/{self.repo}/actions/artifacts/{int(artifact_id)}/zip"
        headers = {"Accept": "application/vnd.github+json", "User-Agent": "porttrack"}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        last_problem = "no attempt made"
        for attempt in range(1, self.max_attempts + 1):
            with self._count_lock:
                self.requests_sent += 1
            try:
                first = requests.get(f"{self.api_url}{path}", headers=headers, allow_redirects=False, timeout=self.timeout_s)
                if first.status_code in (301, 302, 303, 307, 308) and first.headers.get("Location"):
                    with self._count_lock:
                        self.requests_sent += 1
                    final = requests.get(first.headers["Location"], headers={"User-Agent": "porttrack"},
                                         timeout=self.timeout_s, stream=True)
                else:
                    final = first
                if final.status_code == 200:
                    data = _read_limited(final, max_bytes, f"artifact {artifact_id}")
                    if zipfile.is_zipfile(io.BytesIO(data)):
                        return data
                    # an artifact is always a zip: anything else is a download cut short (or an
                    # error page answered 200) and is retried like a 5xx, not refused as results
                    last_problem = "the download was not a whole zip archive"
                    self._backoff(attempt)
                    continue
                status, text = final.status_code, final.text if final is first else ""
            except requests.exceptions.Timeout:
                last_problem = f"timed out after {self.timeout_s:g}s"
                self._backoff(attempt)
                continue
            except requests.exceptions.RequestException as exc:
                last_problem = f"connection failed: {type(exc).__name__}"
                self._backoff(attempt)
                continue
            if status == 410:
                raise NotFound(f"artifact {artifact_id} has expired (HTTP 410)")
            wait = self._rate_limit_wait(status, {k.lower(): v for k, v in final.headers.items()}, text)
            if wait is not None:
                self._sleep(wait)
                last_problem = f"rate limited (waited {wait:.0f}s)"
                continue
            if final is first:
                self._raise_for_status("GET", path, status, text)
            last_problem = f"HTTP {status}"
            self._backoff(attempt)
        raise UpstreamUnreachable(f"downloading artifact {artifact_id} failed after {self.max_attempts} attempts: {secrets.redact(last_problem)}")

    # -- issues ---------------------------------------------------------------------------------
    # The weekly status issue. Reads are GETs (retried, bounded); each write is sent once and a
    # failure raises WriteUncertain: the caller looks (`list_issues`) before trying again.

    def rate_limit(self) -> "RateLimit":
        """The core REST budget left for this client (a token's, or this address's without one),
        and the token's classic scopes where GitHub states them. `GET /rate_limit` itself is free."""
        answer = self.get("/rate_limit", conditional=False)
        data = answer.data if isinstance(answer.data, dict) else {}
        core = (data.get("resources") or {}).get("core") or data.get("rate") or {}
        scopes = answer.headers.get("x-oauth-scopes")
        return RateLimit(
            authenticated=bool(self._token),
            limit=int_or_none(core.get("limit")),
            remaining=int_or_none(core.get("remaining")),
            reset=int_or_none(core.get("reset")),
            scopes=None if scopes is None else tuple(s.strip() for s in scopes.split(",") if s.strip()),
        )

    def can_write_issues(self) -> bool | None:
        """Whether the token may create and edit issues in this repository: from the repository's
        `permissions` (triage, push, maintain or admin). None when GitHub does not say: tokens of
        GitHub Apps, such as Actions' GITHUB_TOKEN, get no `permissions` object."""
        data = self.get(f"/repos/{self.repo}", conditional=False).data
        permissions = data.get("permissions") if isinstance(data, dict) else None
        if not isinstance(permissions, dict):
            return None
        return any(bool(permissions.get(key)) for key in ("triage", "push", "maintain", "admin"))

    def list_issues(self, labels: Sequence[str], state: str = "all", limit: int = 1000) -> list[Issue]:
        """Issues (not pull requests) carrying every one of `labels`, newest first."""
        params = {"labels": ",".join(labels), "state": state, "sort": "created", "direction": "desc"}
        items = self.list_all(f"/repos/{self.repo}/issues", params, limit)
        return [Issue.from_json(item) for item in items if isinstance(item, dict) and "pull_request" not in item]

    def create_issue(self, title: str, body: str, labels: Sequence[str]) -> Issue:
        answer = self.write("POST", f"/repos/{self.repo}/issues", {"title": title, "body": body, "labels": list(labels)})
        return _written(Issue.from_json, answer, "POST /issues")

    def update_issue(self, number: int, *, title: str | None = None, body: str | None = None) -> Issue:
        """PATCH only the fields given (never `state`: porttrack does not reopen or close issues)."""
        payload = {key: value for key, value in (("title", title), ("body", body)) if value is not None}
        answer = self.write("PATCH", f"/repos/{self.repo}/issues/{int(number)}", payload)
        return _written(Issue.from_json, answer, f"PATCH /issues/{int(number)}")

    def list_issue_comments(self, number: int, limit: int = 1000) -> list[IssueComment]:
        items = self.list_all(f"/repos/{self.repo}/issues/{int(number)}/comments", None, limit)
        return [IssueComment.from_json(item) for item in items if isinstance(item, dict)]

    def comment_issue(self, number: int, body: str) -> IssueComment:
        answer = self.write("POST", f"/repos/{self.repo}/issues/{int(number)}/comments", {"body": body})
        return _written(IssueComment.from_json, answer, f"POST /issues/{int(number)}/comments")

    # -- searches -------------------------------------------------------------------------------
    # What successors (porttrack.successors) and collisions (porttrack.collisions) read: one
    # bounded page each, conditional like every poll, so a run that finds nothing new costs 304s.
    # Each returns its records and whether every answer came from the ETag cache.

    def issue_timeline(self, number: int, per_page: int = 100) -> tuple[tuple[IssueRef, ...], bool]:
        """The items that cross-reference issue/PR `number` (its timeline's `cross-referenced`
        events; GitHub is known to leave some out: callers do not rest on these alone)."""
        answer = self.get(f"/repos/{self.repo}/issues/{int(number)}/timeline", {"per_page": per_page}, shape=cross_references)
        return cross_references(answer.data or []), answer.from_cache

    def search_pulls(self, terms: str, per_page: int = 30) -> tuple[tuple[IssueRef, ...], bool]:
        """Pull requests of this repository matching the search `terms` (GitHub's issue search;
        it has its own, smaller rate limit, so callers send one per question)."""
        answer = self.get("/search/issues", {"q": f"repo:{self.repo} is:pr {terms}", "per_page": per_page},
                          shape=_search_listing)
        items = (answer.data or {}).get("items") or []
        return tuple(IssueRef.from_json(i) for i in items), answer.from_cache

    def pulls_by_author(self, author: str, per_page: int = 30) -> tuple[tuple[IssueRef, ...], bool]:
        """`author`'s newest pull requests in this repository, any state (the issues listing's
        `creator` filter: core rate limit, conditional, unlike the search API)."""
        params = {"creator": author, "state": "all", "sort": "created", "direction": "desc", "per_page": per_page}
        answer = self.get(f"/repos/{self.repo}/issues", params, shape=lambda d: _require_list(d, "the issues listing"))
        refs = tuple(IssueRef.from_json(i) for i in answer.data or () if isinstance(i, Mapping))
        return tuple(r for r in refs if r.is_pull), answer.from_cache

    def open_pulls(self, per_page: int = 30) -> tuple[tuple[PullRequest, ...], bool]:
        """The most recently updated open pull requests (one page)."""
        params = {"state": "open", "sort": "updated", "direction": "desc", "per_page": per_page}
        answer = self.get(f"/repos/{self.repo}/pulls", params, shape=_list_of_numbered)
        return tuple(PullRequest.from_json(i) for i in answer.data or ()), answer.from_cache

    def pull_files(self, number: int, max_pages: int = 3) -> tuple[tuple[PRFile, ...], bool]:
        """The files of PR `number` with their hunks (GitHub lists at most 3000; we read at most
        `max_pages` pages of 100). Every page is conditional."""
        files: list[PRFile] = []
        cached = True
        for page in range(1, max_pages + 1):
            answer = self.get(f"/repos/{self.repo}/pulls/{int(number)}/files", {"per_page": 100, "page": page},
                              shape=lambda d: _require_list(d, "a pull request's files"))
            batch = [PRFile.from_json(i) for i in answer.data or ()]
            files.extend(batch)
            cached = cached and answer.from_cache
            # a 304 carries no Link header: a full cached page means there may be another
            more = 'rel="next"' in answer.headers.get("link", "") or (answer.from_cache and len(batch) == 100)
            if not more:
                break
        return tuple(files), cached

    def _pulls_by_graphql(self, numbers: Sequence[int], max_workers: int) -> dict[int, tuple[PullRequest, bool]]:
        """What GraphQL answers, 100 PRs to a query, the queries concurrent (porttrack.github_graphql)."""
        url = github_graphql.graphql_url(self.api_url)

        def batch(part: Sequence[int]) -> dict[int, tuple[PullRequest, bool]]:
            try:
                status, _, text = self._send("POST", url, None, None, {"query": github_graphql.pulls_query(self.repo, part)})
            except _Transient:
                return {}   # its PRs go to REST, which retries
            return github_graphql.read_pulls(status, text, part, self.cache, f"{url}#{self.repo}")
        parts = github_graphql.batches(numbers)
        with ThreadPoolExecutor(max_workers=min(max_workers, len(parts)), thread_name_prefix="gql") as pool:
            return {n: got for answer in pool.map(batch, parts) for n, got in answer.items()}


class _Transient(Exception):
    """A failure worth retrying for an idempotent request."""


def _require_list(data: Any, path: str) -> None:
    if data is not None and not isinstance(data, list):
        raise MalformedResponse(f"expected a list from {path}")


def _list_of_numbered(data: Any) -> None:
    _require_list(data, "the pulls listing")
    if data and not (isinstance(data[0], Mapping) and isinstance(data[0].get("number"), int)):
        raise MalformedResponse("pulls listing item has no number")


def _search_listing(data: Any) -> None:
    require_object(data, "search result")
    if not isinstance(data.get("items"), list):
        raise MalformedResponse("the search result has no list of items")


def _artifacts_listing(data: Any) -> None:
    require_object(data, "artifacts listing")
    if not isinstance(data.get("artifacts"), list):
        raise MalformedResponse("the artifacts listing has no list of artifacts")


def _written(parse: Callable[[Any], Any], answer: Answer, what: str) -> Any:
    """A write's answer that cannot be read leaves it unknown what was written: WriteUncertain."""
    try:
        return parse(answer.data)
    except MalformedResponse as exc:
        raise WriteUncertain(f"{what} answered {answer.status} with an unreadable body ({exc}); it may or may not have been applied") from None


def _message(text: str) -> str:
    try:
        data = json.loads(text or "")
        return secrets.redact(str(data.get("message") or ""))[:200] if isinstance(data, dict) else ""
    except ValueError:
        return ""


def _header_int(hdrs: Mapping[str, str], name: str) -> int | None:
    try:
        return int(hdrs[name])
    except (KeyError, ValueError):
        return None


def _retry_at(hdrs: Mapping[str, str]) -> str | None:
    if "x-ratelimit-reset" in hdrs:
        try:
            return datetime.fromtimestamp(float(hdrs["x-ratelimit-reset"]), tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        except (ValueError, OverflowError, OSError):
            return None
    if "retry-after" in hdrs:
        try:
            at = time.time() + float(hdrs["retry-after"])
            return datetime.fromtimestamp(at, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        except ValueError:
            return None
    return None


def client_for(repo: str, api_url_arg: str | None, cache_dir: Path | None, **kw) -> GitHubClient:
    """The client the commands use: token and API base from the environment, ETags cached on disk.
    Without a token the client is unauthenticated (`GitHubClient.authenticated`): it reads public
    repositories; a write answers 401, which `GitHubAuthError` turns into a request for a token."""
    import os

    token = secrets.resolve_token()
    api_url = api_url_arg or os.environ.get("GITHUB_API_URL") or DEFAULT_API_URL
    cache = EtagCache.load(cache_dir / "etags.json" if cache_dir else None)
    # Operators (and tests) may tune the network policy; the defaults suit a cron job.
    for env_name, key, kind in (
        ("PORTTRACK_HTTP_TIMEOUT", "timeout_s", float),
        ("PORTTRACK_HTTP_ATTEMPTS", "max_attempts", int),
        ("PORTTRACK_HTTP_BACKOFF", "backoff_s", float),
        ("PORTTRACK_RATE_LIMIT_MAX_WAIT", "max_wait_s", float),
    ):
        if os.environ.get(env_name):
            try:
                kw.setdefault(key, kind(os.environ[env_name]))
            except ValueError:
                raise ConfigError(f"{env_name}={os.environ[env_name]!r}: expected a number") from None
    return GitHubClient(repo, token, api_url, cache=cache, **kw)


def has_token() -> bool:
    return secrets.resolve_token() is not None


__all__: Sequence[str] = ("TOKEN_HINT", "EtagCache", "GitHubClient", "WriteUncertain", "client_for", "has_token")
