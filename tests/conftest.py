"""Shared fixtures: git isolation (autouse), the GitHub emulator (`fake`) and `world`."""

from __future__ import annotations

import logging
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer

from testing.gitfixtures import ENV_TO_CLEAR, isolated_git_env, reset_clock
from testing.github_emulator import FakeGitHub
from testing.world import World

# the terminal's size as the shell exports it: a test run from a narrow terminal (or in an xdist
# worker, which has none) must lay out the same text
TERMINAL_SIZE = ("COLUMNS", "LINES")
RELIABILITY = Path(__file__).resolve().parent / "reliability"


def pytest_configure(config: pytest.Config) -> None:
    # pytest-xdist's controller collects nothing, so it never loads tests/reliability/conftest.py:
    # the reliability figures are registered here too, to add up the workers' shares and print them
    if str(RELIABILITY) not in sys.path:
        sys.path.insert(0, str(RELIABILITY))
    import rel_figures

    rel_figures.register(config)


@pytest.fixture(autouse=True)
def git_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Every test runs with its own HOME and git config, fixed identities and dates, and no
    GitHub token or API URL, nor terminal size (COLUMNS, LINES), inherited from the developer's
    shell or CI."""
    for name in ENV_TO_CLEAR:
        monkeypatch.delenv(name, raising=False)
    for name in TERMINAL_SIZE:  # a test that wants a width sets it; none inherits the shell's
        monkeypatch.delenv(name, raising=False)
    env = isolated_git_env(tmp_path_factory.mktemp("home"))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    reset_clock()
    return env


@pytest.fixture(scope="session")
def fake_server() -> Iterator[HTTPServer]:
    """One threaded loopback server for the session (stopping one costs ~0.5 s)."""
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = HTTPServer("127.0.0.1", 0, threaded=True)
    server.start()
    yield server
    server.clear()
    server.stop()


@pytest.fixture
def fake(fake_server: HTTPServer) -> Iterator[FakeGitHub]:
    """A fresh GitHub emulator at `fake.base_url`, with tokens DEFAULT_TOKEN (push) and
    READONLY_TOKEN. The test fails if the emulator raised, if a request reached an endpoint it
    does not implement (set `fake.strict = False` when that is the point), or if the server saw
    a request no handler matched."""
    fake_server.clear()
    emulator = FakeGitHub(fake_server.url_for("/").rstrip("/")).install(fake_server)
    yield emulator
    problems = emulator.problems()
    problems += [str(a) for a in fake_server.assertions]
    problems += [repr(e) for e in fake_server.handler_errors]
    fake_server.clear()
    if problems:
        pytest.fail("GitHub emulator problems:\n" + "\n".join(problems), pytrace=False)


@pytest.fixture
def world(tmp_path: Path, fake: FakeGitHub) -> World:
    """Upstream `vllm-project/vllm` (bare repo with refs/pull/N/head) linked to the emulator,
    and the fork `randomvariable/vllm` cloned at `world.fork`."""
    return World(tmp_path, fake)
