"""`FakeGitHub`, assembled from the package's parts, and `running_emulator()` for use outside
pytest fixtures. The attributes set in `__init__` are the whole of the emulator's state; the
mixins only read and change them, under `_lock`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import itertools
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from testing.github_emulator.faults import Fault, FaultsMixin
from testing.github_emulator.gitdata import GitMixin
from testing.github_emulator.handlers import actions, graphql, issues, meta, pulls, repos, searches
from testing.github_emulator.payloads import PayloadsMixin
from testing.github_emulator.seeding import SeedingMixin
from testing.github_emulator.state import Artifact, Repo, Run, Token
from testing.github_emulator.transport import LoggedRequest, Reply, TransportMixin

# Token-shaped on purpose (the redactor must catch them), split so no secret scanner flags the file.
DEFAULT_TOKEN = "ghp" + "_porttrackTestRW000000000000000000001"   # push access, login porttrack-bot
READONLY_TOKEN = "ghp" + "_porttrackTestRO000000000000000000002"  # pull only, login reader

_HANDLER_AREAS = (meta, repos, pulls, issues, actions, searches, graphql)


class FakeGitHub(SeedingMixin, FaultsMixin, TransportMixin, GitMixin, PayloadsMixin,
                 meta.MetaHandlers, repos.ReposHandlers, pulls.PullsHandlers, issues.IssuesHandlers,
                 actions.ActionsHandlers, searches.SearchesHandlers, graphql.GraphQLHandlers):
    """Stateful GitHub REST emulator; call it with a werkzeug Request.

    Seed state with add_repo / add_token / put_pull / put_issue / add_workflow / link_git;
    shape answers with latency_s, inject(), on_request, on_dispatch, run_schedule; inspect with
    log / requests() / pull() / issue() / runs() / dispatches; call check() at the end.
    """

    def __init__(self, base_url: str, *, latency_s: float = 0.0, seed_tokens: bool = True) -> None:
        self.base_url = base_url.rstrip("/")
        self.html_base = self.base_url
        self.latency_s = latency_s
        self.on_request: Callable[[str, str, dict[str, str]], None] | None = None
        # on_dispatch(repo, workflow_file, ref, inputs) -> {conclusion, artifacts: {name: zip
        # bytes or {file: content}}, polls: (queued, in_progress), display_title} or None.
        # It runs inside the emulator's lock: it must not call the emulator over HTTP.
        self.on_dispatch: Callable[[str, str, str, dict], Mapping[str, Any] | None] | None = None
        self.run_schedule: tuple[int, int] = (1, 1)   # polls seen queued, then in_progress
        self.strict = True        # report requests for endpoints the emulator lacks
        # (repo, target, source): cross-references left off #target's timeline, as GitHub may do
        self.hidden_cross_references: set[tuple[str, int, int]] = set()
        self.log: list[LoggedRequest] = []
        self.errors: list[str] = []
        self.unrouted: list[str] = []
        self.dispatches: list[dict] = []
        self.server: Any = None
        self._lock = threading.RLock()
        self._ids = itertools.count(1001)          # object ids: depend only on what was created
        self._request_ids = itertools.count(1)     # kept apart so request counts don't shift ids
        self._repos: dict[str, Repo] = {}
        self._tokens: dict[str, Token] = {}
        self._anon = Token("", False, False, 60, 60, int(time.time()) + 3600)
        self._anon_budgets: dict[str, Token] = {}   # client address -> its budget without a token
        self._graphql_budgets: dict[int, graphql.GraphQLBudget] = {}   # id(token) -> its GraphQL points
        self._faults: list[Fault] = []
        self._runs: dict[int, Run] = {}
        self._artifacts: dict[int, Artifact] = {}
        self._git_cache: dict[tuple, Any] = {}
        self._offset = dt.timedelta(0)
        self._frozen: dt.datetime | None = None
        self._started = self.now()
        self._routes = self._build_routes()
        if seed_tokens:
            self.add_token(DEFAULT_TOKEN, push=True, login="porttrack-bot")
            self.add_token(READONLY_TOKEN, push=False, login="reader")

    # ---------------------------------------------------------------------------- installation

    def install(self, server: Any) -> FakeGitHub:
        """Answer every request `server` (a pytest_httpserver HTTPServer) receives."""
        server.expect_request(re.compile(".*")).respond_with_handler(self)
        self.server = server
        return self

    def _build_routes(self) -> list[tuple[str, re.Pattern[str], Callable[..., Reply]]]:
        return [(method, re.compile(pattern), getattr(self, handler))
                for area in _HANDLER_AREAS for method, pattern, handler in area.ROUTES]


@contextlib.contextmanager
def running_emulator(latency_s: float = 0.0, *, host: str = "127.0.0.1", port: int = 0,
                     seed_tokens: bool = True) -> Iterator[FakeGitHub]:
    """Start a threaded loopback server answering as a fresh FakeGitHub; stop it on exit.

    For benchmarks and scripts. Emulator problems are raised as AssertionError on a clean exit.
    """
    from pytest_httpserver import HTTPServer

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = HTTPServer(host, port, threaded=True)
    server.start()
    try:
        fake = FakeGitHub(server.url_for("/").rstrip("/"), latency_s=latency_s, seed_tokens=seed_tokens)
        fake.install(server)
        yield fake
        fake.check()
    finally:
        server.clear()
        server.stop()

