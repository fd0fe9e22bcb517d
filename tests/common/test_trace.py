"""`porttrack -v/--verbose` (`porttrack.common.trace`, called from the two doors): one stderr line per
git command and per GitHub request, checked against two independent records of what really ran —
the git process counter (testing/gitcount.py, a `git` first on PATH) and the GitHub emulator's own
request log — and never a token or URL credentials."""

from __future__ import annotations

import collections
import re
from urllib.parse import urlsplit

import pytest

from porttrack.common import trace
from porttrack.common.errors import GitError
from porttrack.git.repo import GitRepo
from testing.gitcount import git_counter
from testing.text import numbered
from testing.workspace import make_workspace, track

GIT_LINE = re.compile(r"^porttrack: git (?P<args>.*) -> exit (?P<rc>-?\d+) \((?P<ms>\d+) ms\)$")
READER_LINE = re.compile(r"^porttrack: git cat-file --batch -> started, kept open for this command's objects \((?P<ms>\d+) ms\)$")
HTTP_LINE = re.compile(r"^porttrack: (?P<verb>GET|HEAD|POST|PATCH|PUT|DELETE) (?P<path>\S+) -> (?P<status>\d{3}|failed \(.*\)) \((?P<ms>\d+) ms\)$")


def _door_args(argv: tuple[str, ...]) -> str:
    """An argv without its leading `-c name=value` settings: the git door adds some to every command
    (not logged), a command may carry its own (`fetch` writes the commit-graph; logged)."""
    args = list(argv)
    while args[:1] == ["-c"]:
        args = args[2:]
    return " ".join(args)


@pytest.fixture
def ws(tmp_path, world):
    world.open_pr(100, {"a.py": numbered("a", 5)}, "Warm the kernels")
    world.open_pr(101, {"b.py": numbered("b", 5)}, "Cool the kernels")
    world.close(101)
    return make_workspace(tmp_path / "ws", {"warm": track([100, 101])}, api_url=world.fake.base_url, fork=world.fork, token=world.token)


def test_each_request_and_git_command_is_logged_as_it_ran(ws, world, tmp_path):
    with git_counter(tmp_path / "counter") as counter:
        world.fake.clear_log()
        proc = ws.run("-v", "status", env={**ws.env(), **counter.env(ws.env())})
        assert proc.returncode == 0, proc.stderr
        ran = counter.calls()
    sent = world.fake.requests()
    lines = proc.stderr.splitlines()
    git_lines = [m for m in map(GIT_LINE.match, lines) if m]
    http_lines = [m for m in map(HTTP_LINE.match, lines) if m]

    # git: the same commands with the same exit statuses, as many times as they ran; the object
    # reader (`cat-file --batch`, one process kept open for the command) is logged when it starts
    opened = [m for m in map(READER_LINE.match, lines) if m]
    logged = collections.Counter([(_door_args(tuple(m["args"].split(" "))), int(m["rc"])) for m in git_lines] + [("cat-file --batch", "open")] * len(opened))
    counted = collections.Counter((_door_args(c.argv), "open" if _door_args(c.argv) == "cat-file --batch" else c.rc) for c in ran)
    assert ran and logged == counted, (logged - counted, counted - logged)
    # GitHub: the same method, path and status as the emulator answered, one line per exchange
    logged_http = collections.Counter((m["verb"], urlsplit(m["path"]).path, m["status"]) for m in http_lines)
    answered = collections.Counter((r.method, r.path, str(r.status)) for r in sent)
    assert sent and logged_http == answered, (logged_http - answered, answered - logged_http)
    print(f"\nverbose lines: {len(git_lines)} git (counter: {len(ran)}), {len(http_lines)} HTTP (emulator: {len(sent)})")

    assert world.token not in proc.stderr and "Authorization" not in proc.stderr
    assert "porttrack: git " not in proc.stdout and "porttrack: GET " not in proc.stdout  # talk, not data: stderr only


def test_without_verbose_nothing_is_logged(ws):
    proc = ws.run("status")
    assert proc.returncode == 0, proc.stderr
    assert not [line for line in proc.stderr.splitlines() if GIT_LINE.match(line) or HTTP_LINE.match(line)]


def test_url_credentials_and_tokens_never_reach_the_log(tmp_path):
    seen: list[str] = []
    trace.enable(seen.append)
    try:
        repo = GitRepo(tmp_path)
        # loopback port 9 (discard): refused at once; git's argv carries the URL's user:password
        with pytest.raises(GitError):
            repo.run("ls-remote", "https://someone:s3cretpass@127.0.0.1:9/x.git", timeout=30)
        trace.request("GET", "https://someone:s3cretpass@127.0.0.1:9/repos/o/r?token=ghp_" + "a" * 36, 200, trace.started())
    finally:
        trace.enable(None)
    assert len(seen) == 2 and seen[0].startswith("porttrack: git ls-remote https://127.0.0.1:9/x.git -> exit ")
    assert not [line for line in seen if "s3cretpass" in line or "someone" in line or "ghp_" in line], seen
    assert re.search(r"\(\d+ ms\)$", seen[0])
