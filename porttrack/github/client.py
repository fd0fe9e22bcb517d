"""The one door to GitHub (the records it returns: `porttrack.github.records`).

Everything that talks to the GitHub API goes through `GitHubClient`, which returns porttrack's own
records. It speaks HTTP with `requests` directly: PyGithub (used here until this round) re-sends a
GET answered 202 every 2 s for ever, turns a redirect to another host into a RuntimeError, and has
no total deadline for one request, and each of those stopped the tool (the hostile-upstream issue).
Policy, all of it deliberate (library notes §1):

- Only **GET/HEAD** are retried, a bounded number of times with exponential backoff, on 5xx,
  connection errors, timeouts and malformed bodies; every attempt has a total deadline (connect and
  all reads), a 202 is retried a bounded number of times, and one command's GitHub traffic has a
  deadline of its own (`PORTTRACK_DEADLINE`).
- A rate-limit answer (403/429 with `Retry-After`, or `X-RateLimit-Remaining: 0` with
  `X-RateLimit-Reset`) is waited out, before a retry that will be sent, when the wait is within
  `max_wait_s`; otherwise `RateLimited` says when to retry.
- Writes (POST/PATCH) are sent once. A failed write raises `WriteUncertain` (it may or may not have
  been applied), so the caller can look before trying again instead of creating duplicates.
- GETs are conditional when an ETag is cached: an unchanged poll is answered 304 and costs no rate
  limit. The cache lives in the workspace's git-ignored `.porttrack/` and never holds the token.
- The token is registered with `porttrack.common.secrets` so no message can carry it; URLs are kept and
  shown without user:password.
"""
from __future__ import annotations

import io
import json
import math
import threading
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence, TypeVar

from porttrack.common import secrets, trace
from porttrack.common.errors import GitHubAuthError, NotFound, PorttrackError, RateLimited, UpstreamUnreachable
from porttrack.common.text import for_terminal
from porttrack.github import graphql as github_graphql
from porttrack.github.policy import (
    DEFAULT_DEADLINE_S,
    KNOBS,
    MAX_ANSWER_BYTES,
    AnswerTooLarge,
    Budget,
    EtagCache,
    artifacts_listing,
    error_message,
    header_int,
    header_seconds,
    knob_value,
    list_of_numbered,
    read_limited,
    require_list,
    retry_at,
    search_listing,
    short_path,
    split_userinfo,
)
from porttrack.github.records import (
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
    pull_as_read,
    require_object,
)

if TYPE_CHECKING:  # imported where a request is sent: `--help` and offline commands load none of it
    import requests

_T = TypeVar("_T")

DEFAULT_API_URL = "https://api.github.com"
IDEMPOTENT = frozenset({"GET", "HEAD"})
_MAX_REDIRECTS = 3


class Rejected(PorttrackError):
    """GitHub refused the request itself (a 4xx other than 401/403/404/410): asked wrongly, not
    unreachable. A caller that can do without the answer says so and goes on."""


# Where a token comes from, for every message that asks for one (`secrets.resolve_token`'s order).
TOKEN_HINT = "set GITHUB_TOKEN or GH_TOKEN, or log in with `gh auth login`"


class WriteUncertain(UpstreamUnreachable):
    """A write failed in a way that leaves it unknown whether GitHub applied it. Look before retrying."""


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
        deadline_s: float = DEFAULT_DEADLINE_S,
        max_accepted: int = 3,
        cache: EtagCache | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.repo = repo
        # `api_url` is what is shown and stored (messages, recorded state, ETag cache keys): never
        # the user:password a URL may carry. The credentials are kept apart and sent only as
        # basic auth where there is no token.
        self.api_url, self._url_auth = split_userinfo((api_url or DEFAULT_API_URL).rstrip("/"))
        self._token = token
        if token:
            secrets.register(token)
        self.timeout_s = timeout_s
        self.max_attempts = max(1, max_attempts)
        self.backoff_s = backoff_s
        self.max_wait_s = max_wait_s
        self.max_accepted = max(0, max_accepted)
        self.cache = cache or EtagCache(None)
        self._sleep = sleep
        self._sessions: list[requests.Session] = []  # idle requests sessions (keep-alive), one per request in flight
        self.requests_sent = 0
        self.answered_304 = 0  # of requests_sent, answered 304 (no rate limit spent)
        self.not_modified: set[str] = set()  # paths answered 304 by this client (unchanged since the last run)
        self._count_lock = threading.Lock()
        self._budget = Budget(deadline_s)
        # The core budget as the last answer stated it (X-RateLimit-* headers, sent with every
        # answer, 304s included): what is left is shown without spending a request on /rate_limit.
        self.rate_seen: RateLimit | None = None

    @property
    def authenticated(self) -> bool:
        """False: no token, so GitHub answers reads of public repositories only, from the
        address's own budget (60 requests an hour), and refuses every write."""
        return bool(self._token)

    # -- transport ----------------------------------------------------------------------------
    # Plain `requests`, not PyGithub's requester: PyGithub re-sends a GET answered 202 every 2 s
    # without end, follows a 301 only to raise RuntimeError, and its timeout bounds each socket
    # read, not the answer (a server trickling a byte a second held one attempt 25 s at 2 s).
    # Each exchange runs in a worker thread joined with the attempt's deadline, so connect + every
    # read is bounded whatever the server does; a worker left behind is a daemon and ends with
    # the server's connection or the process.

    def _send(self, verb: str, path: str, params: Mapping[str, Any] | None, headers: dict[str, str] | None,
              body: Any) -> tuple[int, dict[str, str], str]:
        limit = self._budget.attempt_limit(self.timeout_s, self.api_url)
        with self._count_lock:
            self.requests_sent += 1
        since = trace.started()
        try:
            status, hdrs, text = self._within(limit, lambda: self._exchange(verb, path, params, headers, body, limit))
        except Exception as exc:
            trace.request(verb, path, f"failed ({exc})", since)
            raise
        trace.request(verb, path, status, since)
        if text and secrets.contains_secret(text):
            # A token in an answer (a proxy or a bot reflecting a header into a title, a body, an
            # error) is masked at the door: nothing that reads the answer — recorded state, the
            # ETag cache, output, the weekly issue — can carry it. "***" is JSON-safe in a string.
            text = secrets.redact(text)
        self._note_rate(hdrs)
        return status, hdrs, text

    def _within(self, limit: float, exchange: Callable[[], _T]) -> _T:
        """`exchange()`'s result, or _Transient when it has none within `limit` seconds."""
        answers: list[_T] = []
        errors: list[BaseException] = []

        def run() -> None:
            try:
                answers.append(exchange())
            except BaseException as exc:  # handed to the caller's thread below
                errors.append(exc)

        worker = threading.Thread(target=run, name="gh-request", daemon=True)
        with self._budget.busy():
            worker.start()
            worker.join(limit)
        if worker.is_alive():
            raise _Transient(f"timed out: no complete answer within {limit:g}s")
        if errors:
            raise errors[0]
        return answers[0]

    def _exchange(self, verb: str, path: str, params: Mapping[str, Any] | None, headers: dict[str, str] | None,
                  body: Any, limit: float) -> tuple[int, dict[str, str], str]:
        """One request and its whole answer; a redirect is followed only within the API's own host."""
        import requests

        session = self._session()
        # an absolute URL only from this module itself (GraphQL's endpoint is not under a GHE API base)
        url = path if path.startswith(("https://", "http://")) else f"{self.api_url}{path}"
        sent_headers = {"Accept": "application/vnd.github+json", "User-Agent": "porttrack", **(headers or {})}
        if self._token:
            sent_headers["Authorization"] = f"token {self._token}"
        data = None
        if body is not None:
            data, sent_headers["Content-Type"] = json.dumps(body).encode("utf-8"), "application/json"
        auth = self._url_auth if not self._token else None
        try:
            for _hop in range(_MAX_REDIRECTS + 1):
                resp = session.request(verb, url, params=dict(params or {}) or None, headers=sent_headers, data=data,
                                       auth=auth, timeout=(limit, limit), allow_redirects=False, stream=True)
                location = resp.headers.get("Location")
                if resp.status_code not in (301, 302, 307, 308) or not location or verb not in IDEMPOTENT:
                    break
                resp.close()
                url, params = self._redirect_target(url, location, path), None
            else:
                raise UpstreamUnreachable(f"GitHub at {self.api_url} redirected GET {path} more than {_MAX_REDIRECTS} times")
            # streamed and bounded: `resp.content` would decompress a gzip bomb whole into memory
            body = read_limited(resp, MAX_ANSWER_BYTES, f"GitHub's answer to {verb} {short_path(path)}", AnswerTooLarge)
            text = body.decode("utf-8", "replace")
        except requests.exceptions.Timeout as exc:
            raise _Transient(f"timed out after {limit:g}s") from exc
        except requests.exceptions.RequestException as exc:
            raise _Transient(f"connection failed: {type(exc).__name__}") from exc
        except (UnicodeError, ValueError) as exc:  # a path or parameter made of text no URL can carry
            raise Rejected(f"{verb} {short_path(path)} cannot be sent ({type(exc).__name__})") from None
        self._sessions.append(session)  # list.append is atomic: a finished exchange gives its session back
        return resp.status_code, {str(k).lower(): str(v) for k, v in resp.headers.items()}, text

    def _session(self) -> requests.Session:
        import requests

        try:
            return self._sessions.pop()
        except IndexError:
            session = requests.Session()
            session.trust_env = False  # no ~/.netrc credentials, no proxy settings picked up behind our back
            return session

    def _redirect_target(self, url: str, location: str, path: str) -> str:
        """Where a redirect of a GET leads, when that is the API's own scheme and host (a renamed
        repository answers 301 to its new URL); anywhere else is refused: the token must not go
        to another host, and porttrack does not follow GitHub elsewhere."""
        from urllib.parse import urljoin, urlsplit

        target = urljoin(url, location)
        here, there = urlsplit(self.api_url), urlsplit(target)
        if (there.scheme, there.hostname, there.port) != (here.scheme, here.hostname, here.port):
            shown = f"{there.scheme}://{there.hostname or '?'}{f':{there.port}' if there.port else ''}"
            raise UpstreamUnreachable(
                f"GitHub at {self.api_url} redirected GET {path} to another host ({for_terminal(shown, 120)}); not followed")
        return target

    def _note_rate(self, hdrs: Mapping[str, str]) -> None:
        """Keep the lowest budget stated for the newest window: concurrent answers arrive in any order."""
        if hdrs.get("x-ratelimit-resource", "core") != "core":
            return
        limit, remaining = header_int(hdrs, "x-ratelimit-limit"), header_int(hdrs, "x-ratelimit-remaining")
        if limit is None or remaining is None:
            return
        seen = RateLimit(self.authenticated, limit, remaining, header_int(hdrs, "x-ratelimit-reset"), None)
        with self._count_lock:
            old = self.rate_seen
            if old is None or (seen.reset or 0) > (old.reset or 0) or (
                    seen.reset == old.reset and (seen.remaining or 0) < (old.remaining or 0)):
                self.rate_seen = seen

    def get(self, path: str, params: Mapping[str, Any] | None = None, *, conditional: bool = True,
            shape: Callable[[Any], Any] | None = None, keep: Callable[[Any], Any] | None = None) -> Answer:
        """GET with conditional request, bounded retries and rate-limit handling. `shape` checks the
        decoded body (raising MalformedResponse): a body of the wrong shape is retried like a 5xx.
        `keep`: what of a (checked) body is returned and kept in the ETag cache, so that an answer
        and a 304 from the cache read alike."""
        key = f"{self.api_url}{path}?{json.dumps(dict(params or {}), sort_keys=True)}"
        cached = self.cache.get(key) if conditional else None
        headers = {}
        if cached:
            if cached.get("etag"):
                headers["If-None-Match"] = cached["etag"]
            elif cached.get("last_modified"):
                headers["If-Modified-Since"] = cached["last_modified"]
        last_problem = "no attempt made"
        accepted = 0
        attempt = 0
        while attempt < self.max_attempts:
            attempt += 1
            try:
                status, hdrs, text = self._send("GET", path, params, headers or None, None)
            except _Transient as exc:
                last_problem = str(exc)
                self._backoff(attempt)
                continue
            if status == 304 and cached:
                with self._count_lock:
                    self.not_modified.add(path)
                    self.answered_304 += 1
                return Answer(200, hdrs, cached["body"], from_cache=True)
            if status == 202 and accepted < self.max_accepted:
                # "Accepted: still computing" (statistics endpoints): asked again a bounded number
                # of times, each an attempt of its own; then given up like any failure.
                accepted += 1
                last_problem = "GitHub answered 202 (still computing)"
                self._backoff(attempt)
                continue
            if 200 <= status < 300 and status != 202:
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
                if keep is not None:
                    data = keep(data)
                if conditional:
                    self.cache.put(key, hdrs.get("etag"), hdrs.get("last-modified"), data)
                return Answer(status, hdrs, data)
            wait = self._rate_limit_wait(status, hdrs, text)
            if wait is not None:
                if attempt >= self.max_attempts:
                    # no retry will be sent: waiting now would only delay the failure
                    last_problem = f"rate limited (asked to wait {wait:.0f}s; no attempt left)"
                    break
                self._pause(wait, f"GET {path} (rate limited)")
                last_problem = f"rate limited (waited {wait:.0f}s)"
                continue
            self._raise_for_status("GET", path, status, text)
            last_problem = f"HTTP {status}"
            self._backoff(attempt)
        # the attempts ran out on a rate limit: the whole budget's, never one request's trouble
        failure = RateLimited if last_problem.startswith("rate limited") else UpstreamUnreachable
        raise failure(
            f"GitHub at {self.api_url} failed for GET {path} after {attempt} attempt{'s' if attempt != 1 else ''}: {secrets.redact(last_problem)}"
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
            raise RateLimited(f"{verb} {path} was rate limited; nothing was written", retry_at(hdrs))
        self._raise_for_status(verb, path, status, text)
        raise UpstreamUnreachable(f"{verb} {path} answered HTTP {status}")

    def _backoff(self, attempt: int) -> None:
        """Sleep before the next attempt; none after the last one."""
        if attempt < self.max_attempts:
            self._pause(self.backoff_s * (2 ** (attempt - 1)), "a retry")

    def _pause(self, seconds: float, what: str) -> None:
        """Sleep `seconds`, unless that would pass the command's deadline: then give up now."""
        self._budget.check_wait(seconds, what, self.api_url)
        self._sleep(seconds)

    def _rate_limit_wait(self, status: int, hdrs: dict[str, str], text: str) -> float | None:
        """Seconds to wait for a rate-limit answer, None if the answer is not a rate limit.

        Raises RateLimited when GitHub asks for a longer wait than we accept.
        """
        if status not in (403, 429):
            return None
        wait: float | None = None
        if "retry-after" in hdrs:
            after = header_seconds(hdrs, "retry-after")  # `1e20` or `inf` is a wait we never take
            wait = 60.0 if after is None else max(0.0, after)
        elif hdrs.get("x-ratelimit-remaining") == "0" and header_seconds(hdrs, "x-ratelimit-reset") is not None:
            wait = max(0.0, (header_seconds(hdrs, "x-ratelimit-reset") or 0.0) - time.time()) + 1.0
        elif status == 429 or "rate limit" in (text or "").lower():
            wait = 60.0
        if wait is None:
            return None
        if wait > self.max_wait_s:
            when = retry_at(hdrs) or (f"{wait:.0f}s" if math.isfinite(wait) else "a wait beyond any date")
            raise RateLimited(f"GitHub rate limit reached; retry after {when}", retry_at(hdrs))
        return wait

    def _raise_for_status(self, verb: str, path: str, status: int, text: str) -> None:
        message = error_message(text)
        if status == 401 and not self._token:
            raise GitHubAuthError(f"GitHub requires authentication for {verb} {path}: {TOKEN_HINT}")
        if status == 401:
            raise GitHubAuthError(f"GitHub refused the token for {verb} {path}: {message or 'bad credentials'}")
        if status == 403:
            raise GitHubAuthError(f"GitHub denied {verb} {path}: {message or 'forbidden'} (check the token's permissions)")
        if status in (404, 410):
            # without a token GitHub answers 404, not 401, for a private repository
            private = "" if self._token or status != 404 else f"; without a token only public repositories can be read ({TOKEN_HINT})"
            gone = NotFound(f"GitHub has no {path} (HTTP {status}){': ' + message if message else ''}{private}")
            gone.status = status  # what `absent_pull` reports, as data
            raise gone
        if 400 <= status < 500:
            raise Rejected(f"GitHub rejected {verb} {short_path(path)} (HTTP {status}): {message}")
        # 5xx and anything else: the caller's retry loop continues

    # -- pull requests ------------------------------------------------------------------------
    def get_pull(self, number: int) -> tuple[PullRequest, bool]:
        """The PR and whether the answer came from the cache (304: unchanged since last poll)."""
        answer = self.get(f"/repos/{self.repo}/pulls/{int(number)}", shape=PullRequest.from_json)
        return PullRequest.from_json(answer.data), answer.from_cache

    def get_pulls_present(self, numbers: Iterable[int], max_workers: int = 8,
                          answered: Callable[[int, int], None] | None = None,
                          failed: dict[int, str] | None = None) -> tuple[dict[int, tuple[PullRequest, bool]], dict[int, str]]:
        """Several PRs at once, each with whether it is unchanged since the last poll: concurrent
        REST GETs, or past one wave of them GraphQL (`github_graphql.pays`), REST for what it leaves.
        A number GitHub has no PR for is not a failure of the rest: it comes back in the second
        mapping with why ("is an issue, not a PR", "answered 404"). `answered(done, total)` is told
        as the answers come in (progress). `failed` (given): a PR GitHub kept failing for (5xx after
        the retries) goes there with why, and the rest are answered; only when every PR failed does
        the failure stand for the whole poll (raised). A rate limit is never one PR's."""
        done = [0]

        def one(number: int) -> tuple[PullRequest, bool] | str | UpstreamUnreachable:
            result: tuple[PullRequest, bool] | str
            try:
                result = self.get_pull(number)
            except NotFound as exc:
                result = self.absent_pull(number, getattr(exc, "status", 404))
            except UpstreamUnreachable as exc:
                if failed is None or isinstance(exc, RateLimited):
                    raise
                return exc
            # told only of answers: a request that failed is no PR answered (nor is it counted)
            if answered is not None:
                with self._count_lock:
                    done[0] += 1
                    answered(done[0], len(wanted))
            return result

        wanted = sorted(set(int(n) for n in numbers))
        if not wanted:
            return {}, {}
        # Many PRs with a token: GraphQL batches first (see `get_pulls`); what it does not answer,
        # a PR it reports missing included, goes to REST one by one, as today.
        batched = self._pulls_by_graphql(wanted, max_workers)
        done[0] = len(batched)
        if batched and answered is not None:
            answered(done[0], len(wanted))
        rest = [n for n in wanted if n not in batched]
        with ThreadPoolExecutor(max_workers=max(1, min(max_workers, len(rest))), thread_name_prefix="gh") as pool:
            results = dict(zip(rest, pool.map(one, rest)))
        errors = {n: r for n, r in results.items() if isinstance(r, UpstreamUnreachable)}
        if errors and len(errors) == len(wanted):
            raise next(iter(errors.values()))
        if failed is not None:
            failed.update({n: str(exc) for n, exc in errors.items()})
        found = {**batched, **{n: r for n, r in results.items() if not isinstance(r, (str, UpstreamUnreachable))}}
        found = {n: found[n] for n in wanted if n in found}
        absent = {n: r for n, r in results.items() if isinstance(r, str)}
        if absent and not self._token:
            # Without a token a private repository answers 404 for everything: that is no note
            # on a PR but the whole poll failing, saying a token is needed.
            self.get(f"/repos/{self.repo}", conditional=False)
        return found, absent

    def absent_pull(self, number: int, status: int) -> str:
        """Why GitHub has no PR `number`: an issue of that number (one more GET, only in this
        case) is the usual reason, from text such as "requires #1"."""
        if status == 404:
            try:
                data = self.get(f"/repos/{self.repo}/issues/{int(number)}", conditional=False).data
            except NotFound:
                data = None
            if isinstance(data, dict) and "pull_request" not in data:
                return f"#{int(number)} is an issue, not a PR"
        return f"#{int(number)} answered {status}" + (" (gone)" if status == 410 else " (no such PR, or not visible to this token)")

    def find_pull_by_head(self, branch: str) -> int | None:
        """The PR whose head branch is `branch` in the upstream repository (for base-branch stacking)."""
        owner = self.repo.split("/")[0]
        answer = self.get(f"/repos/{self.repo}/pulls", {"state": "all", "head": f"{owner}:{branch}", "per_page": 10},
                          shape=list_of_numbered)
        items = answer.data or []
        return items[0]["number"] if items else None  # list_of_numbered checked it is an int

    def compare(self, base: str, head: str) -> Comparison | None:
        try:
            answer = self.get(f"/repos/{self.repo}/compare/{base}...{head}", shape=lambda d: require_object(d, "comparison"))
        except (NotFound, Rejected):
            return None  # e.g. the old head was garbage-collected after a force-push
        return Comparison.from_json(answer.data or {})

    def list_all(self, path: str, params: Mapping[str, Any] | None = None, limit: int = 1000) -> list[Any]:
        """Follow pagination (per_page=100) up to `limit` items."""
        items: list[Any] = []
        page = 1
        while len(items) < limit:
            answer = self.get(path, {**dict(params or {}), "per_page": 100, "page": page}, conditional=False,
                              shape=lambda d: require_list(d, path))
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
        return int_or_none(data.get("workflow_run_id")) or int_or_none(data.get("id"))  # anything else: found by marker

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
                          shape=artifacts_listing)
        items = (answer.data or {}).get("artifacts") if isinstance(answer.data, dict) else None
        return [Artifact.from_json(item) for item in items or ()]

    def download_artifact(self, artifact_id: int, max_bytes: int = 64 << 20) -> bytes:
        """The artifact's zip archive, as bytes.

        GitHub answers `/zip` with a 302 to a short-lived signed URL on another host (blob
        storage): both legs are sent here, the first with the token, the second without it (the
        URL is signed; the token must not travel to another host). GETs: retried like any other,
        each attempt (both legs and the whole body) within the request timeout.
        """
        path = f"/repos/{self.repo}/actions/artifacts/{int(artifact_id)}/zip"
        last_problem = "no attempt made"
        for attempt in range(1, self.max_attempts + 1):
            limit = self._budget.attempt_limit(self.timeout_s, self.api_url)
            try:
                status, hdrs, text, data, direct = self._within(limit, lambda: self._artifact_legs(path, limit, max_bytes, artifact_id))
            except _Transient as exc:
                last_problem = str(exc)
                self._backoff(attempt)
                continue
            if status == 200:
                if zipfile.is_zipfile(io.BytesIO(data)):
                    return data
                # an artifact is always a zip: anything else is a download cut short (or an
                # error page answered 200) and is retried like a 5xx, not refused as results
                last_problem = "the download was not a whole zip archive"
                self._backoff(attempt)
                continue
            if status == 410:
                raise NotFound(f"artifact {artifact_id} has expired (HTTP 410)")
            wait = self._rate_limit_wait(status, hdrs, text)
            if wait is not None:
                if attempt >= self.max_attempts:
                    last_problem = f"rate limited (asked to wait {wait:.0f}s; no attempt left)"
                    break
                self._pause(wait, f"artifact {artifact_id} (rate limited)")
                last_problem = f"rate limited (waited {wait:.0f}s)"
                continue
            if direct:
                self._raise_for_status("GET", path, status, text)
            last_problem = f"HTTP {status}"
            self._backoff(attempt)
        raise UpstreamUnreachable(f"downloading artifact {artifact_id} failed after {self.max_attempts} attempts: {secrets.redact(last_problem)}")

    def _artifact_legs(self, path: str, limit: float, max_bytes: int,
                       artifact_id: int) -> tuple[int, dict[str, str], str, bytes, bool]:
        """Both legs of one download attempt: (status, headers, error text, body, answered by the
        API itself rather than the storage host)."""
        import requests

        headers = {"Accept": "application/vnd.github+json", "User-Agent": "porttrack"}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        with self._count_lock:
            self.requests_sent += 1
        try:
            first = final = requests.get(f"{self.api_url}{path}", headers=headers, allow_redirects=False,
                                         timeout=(limit, limit), stream=True)
            if first.status_code in (301, 302, 303, 307, 308) and first.headers.get("Location"):
                first.close()
                with self._count_lock:
                    self.requests_sent += 1
                final = requests.get(first.headers["Location"], headers={"User-Agent": "porttrack"},
                                     timeout=(limit, limit), stream=True)
            data = read_limited(final, max_bytes, f"artifact {artifact_id}") if final.status_code == 200 else b""
            text = (read_limited(final, MAX_ANSWER_BYTES, f"GitHub's answer to GET {short_path(path)}", AnswerTooLarge)
                    .decode("utf-8", "replace") if final is first and final.status_code != 200 else "")
        except requests.exceptions.Timeout as exc:
            raise _Transient(f"timed out after {limit:g}s") from exc
        except requests.exceptions.RequestException as exc:
            raise _Transient(f"connection failed: {type(exc).__name__}") from exc
        return final.status_code, {k.lower(): v for k, v in final.headers.items()}, text, data, final is first

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

    def get_issue(self, number: int) -> Issue:
        return Issue.from_json(self.get(f"/repos/{self.repo}/issues/{int(number)}", conditional=False).data)

    def update_issue(self, number: int, *, title: str | None = None, body: str | None = None, state: str | None = None) -> Issue:
        """PATCH only the fields given. `state="closed"` only for a duplicate porttrack itself just
        created (`report.post`); porttrack never reopens an issue or closes a person's."""
        payload = {key: value for key, value in (("title", title), ("body", body), ("state", state)) if value is not None}
        answer = self.write("PATCH", f"/repos/{self.repo}/issues/{int(number)}", payload)
        return _written(Issue.from_json, answer, f"PATCH /issues/{int(number)}")

    def list_issue_comments(self, number: int, limit: int = 1000) -> list[IssueComment]:
        items = self.list_all(f"/repos/{self.repo}/issues/{int(number)}/comments", None, limit)
        return [IssueComment.from_json(item) for item in items if isinstance(item, dict)]

    def comment_issue(self, number: int, body: str) -> IssueComment:
        answer = self.write("POST", f"/repos/{self.repo}/issues/{int(number)}/comments", {"body": body})
        return _written(IssueComment.from_json, answer, f"POST /issues/{int(number)}/comments")

    def edit_comment(self, comment_id: int, body: str) -> IssueComment:
        answer = self.write("PATCH", f"/repos/{self.repo}/issues/comments/{int(comment_id)}", {"body": body})
        return _written(IssueComment.from_json, answer, f"PATCH /issues/comments/{int(comment_id)}")

    # -- searches -------------------------------------------------------------------------------
    # What successors (porttrack.observe.successors) and collisions (porttrack.observe.collisions) read: one
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
                          shape=search_listing)
        items = (answer.data or {}).get("items") or []
        return tuple(IssueRef.from_json(i) for i in items), answer.from_cache

    def pulls_by_author(self, author: str, per_page: int = 30) -> tuple[tuple[IssueRef, ...], bool]:
        """`author`'s newest pull requests in this repository, any state (the issues listing's
        `creator` filter: core rate limit, conditional, unlike the search API)."""
        params = {"creator": author, "state": "all", "sort": "created", "direction": "desc", "per_page": per_page}
        answer = self.get(f"/repos/{self.repo}/issues", params, shape=lambda d: require_list(d, "the issues listing"))
        refs = tuple(IssueRef.from_json(i) for i in answer.data or () if isinstance(i, Mapping))
        return tuple(r for r in refs if r.is_pull), answer.from_cache

    def open_pulls(self, page: int = 1, per_page: int = 100) -> tuple[tuple[tuple[PullRequest, ...], bool], bool]:
        """One page of the open pull requests, most recently updated first: ((records, whether
        another page may follow), answered from the ETag cache)."""
        params = {"state": "open", "sort": "updated", "direction": "desc", "per_page": per_page, "page": page}
        answer = self.get(f"/repos/{self.repo}/pulls", params, shape=list_of_numbered,
                          keep=lambda items: [pull_as_read(item) for item in items])
        prs = tuple(PullRequest.from_json(i) for i in answer.data or ())
        # a 304 carries no Link header: a full cached page means there may be another
        more = 'rel="next"' in answer.headers.get("link", "") or (answer.from_cache and len(prs) == per_page)
        return (prs, more), answer.from_cache

    def answered_unchanged(self, number: int) -> bool:
        """Whether this client's GET of PR `number` was answered 304 (nothing changed since the last run)."""
        return f"/repos/{self.repo}/pulls/{int(number)}" in self.not_modified

    def remembered_pull_files(self, number: int, max_pages: int = 3) -> tuple[PRFile, ...] | None:
        """PR `number`'s files as the ETag cache last had them, without a request (None: not all cached)."""
        files: list[PRFile] = []
        for page in range(1, max_pages + 1):
            params = {"per_page": 100, "page": page}
            entry = self.cache.get(f"{self.api_url}/repos/{self.repo}/pulls/{int(number)}/files?{json.dumps(params, sort_keys=True)}")
            if entry is None or not isinstance(entry.get("body"), list):
                return None
            batch = [PRFile.from_json(i) for i in entry["body"]]
            files.extend(batch)
            if len(batch) < 100:
                return tuple(files)
        return tuple(files)

    def pull_files(self, number: int, max_pages: int = 3) -> tuple[tuple[PRFile, ...], bool]:
        """The files of PR `number` with their hunks (GitHub lists at most 3000; we read at most
        `max_pages` pages of 100). Every page is conditional."""
        files: list[PRFile] = []
        cached = True
        for page in range(1, max_pages + 1):
            answer = self.get(f"/repos/{self.repo}/pulls/{int(number)}/files", {"per_page": 100, "page": page},
                              shape=lambda d: require_list(d, "a pull request's files"))
            batch = [PRFile.from_json(i) for i in answer.data or ()]
            files.extend(batch)
            cached = cached and answer.from_cache
            # a 304 carries no Link header: a full cached page means there may be another
            more = 'rel="next"' in answer.headers.get("link", "") or (answer.from_cache and len(batch) == 100)
            if not more:
                break
        return tuple(files), cached

    def _pulls_by_graphql(self, numbers: Sequence[int], max_workers: int) -> dict[int, tuple[PullRequest, bool]]:
        """What GraphQL answers when batching pays (`github_graphql.pays`), else nothing: REST asks for the rest."""
        if not github_graphql.pays(bool(self._token), len(numbers), max_workers):
            return {}
        return github_graphql.fetch_pulls(self._send, _Transient, self.api_url, self.repo, numbers, self.cache, max_workers)


class _Transient(Exception):
    """A failure worth retrying for an idempotent request."""


def _written(parse: Callable[[Any], _T], answer: Answer, what: str) -> _T:
    """A write's answer that cannot be read leaves it unknown what was written: WriteUncertain."""
    try:
        return parse(answer.data)
    except MalformedResponse as exc:
        raise WriteUncertain(f"{what} answered {answer.status} with an unreadable body ({exc}); it may or may not have been applied") from None


def client_for(repo: str, api_url_arg: str | None, cache_dir: Path | None, **kw: Any) -> GitHubClient:
    """The client the commands use: token and API base from the environment, ETags cached on disk.
    Without a token the client is unauthenticated (`GitHubClient.authenticated`): it reads public
    repositories; a write answers 401, which `GitHubAuthError` turns into a request for a token."""
    import os

    token = secrets.resolve_token()
    api_url = api_url_arg or os.environ.get("GITHUB_API_URL") or DEFAULT_API_URL
    cache = EtagCache.load(cache_dir / "etags.json" if cache_dir else None)
    # Operators (and tests) may tune the network policy; the defaults suit a cron job.
    for env_name, key, kind, least in KNOBS:
        if os.environ.get(env_name):
            kw.setdefault(key, knob_value(env_name, os.environ[env_name], kind, least))
    return GitHubClient(repo, token, api_url, cache=cache, **kw)


def has_token() -> bool:
    return secrets.resolve_token() is not None


__all__: Sequence[str] = ("TOKEN_HINT", "EtagCache", "GitHubClient", "Rejected", "WriteUncertain", "client_for", "has_token")
