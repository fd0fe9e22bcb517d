"""A stateful GitHub REST v3 emulator, answering over real HTTP on loopback.

`FakeGitHub` is one werkzeug handler installed behind a catch-all matcher of a pytest-httpserver
`HTTPServer(threaded=True)`; the `fake` fixture (tests/conftest.py) and `running_emulator()`
(benchmarks, scripts) do that. State lives in plain dataclasses guarded by one lock; JSON is
rendered from it per request, so every `url` and `Link` points at `base_url` (PyGithub asserts
the host of URLs it follows).

Behaviour that clients must cope with is built in: ETags and 304s that cost no rate limit, Link
pagination, a per-token rate limit, permissions, and faults queued with `inject()`. Requests are
logged without credentials. An exception inside the emulator, or a request for an endpoint it
does not implement, is recorded and reported by `check()` (the fixture fails the test with it).
Only the endpoints porttrack calls (porttrack/github/client.py) are implemented.

The package, by idea:
- `state`: the records (repositories, issues and PRs, workflows, runs, tokens) and time helpers.
- `seeding`: what tests call directly: seed state, move the clock, read back, `problems()`.
- `transport`: serving one request: logging, auth, rate limit, routing, ETag/304, pagination.
- `faults`: `inject()` and the answers faults give (statuses, rate limits, delays, resets).
- `payloads`: GitHub's JSON shapes rendered from the records.
- `gitdata`: commits and files read from linked git repositories.
- `handlers/`: the routes, by area: meta (/rate_limit), repos (repository, compare), pulls,
  issues, actions, graphql (`POST /graphql`: pull requests by number, its own points budget).
- `emulator`: `FakeGitHub` assembled from the above, and `running_emulator()`.
"""

from testing.github_emulator.emulator import DEFAULT_TOKEN, READONLY_TOKEN, FakeGitHub, running_emulator
from testing.github_emulator.faults import FAULT_KINDS
from testing.github_emulator.gitdata import commits_from_git, files_from_git
from testing.github_emulator.payloads import make_zip
from testing.github_emulator.transport import LoggedRequest

__all__ = [
    "DEFAULT_TOKEN",
    "READONLY_TOKEN",
    "FAULT_KINDS",
    "FakeGitHub",
    "LoggedRequest",
    "commits_from_git",
    "files_from_git",
    "make_zip",
    "running_emulator",
]
