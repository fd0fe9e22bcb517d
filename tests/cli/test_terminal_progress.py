"""Progress of a real `git fetch` (`GitRepo.fetch` with `porttrack.cli.terminal.Progress`): on a
pseudo-terminal one line redrawn in place; piped, a few summary lines, never one per update.

The fetch runs in a child process whose stderr is a pty (python's `pty` module) or a pipe, from a
fixture upstream with a few hundred files: enough objects for git to report many updates."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from porttrack.cli.terminal import Progress
from testing.gitfixtures import Upstream, clone_fork
from testing.ptyrun import run_on_pty

REPO_ROOT = Path(__file__).resolve().parents[2]
FILES = 600

SCRIPT = textwrap.dedent("""
    import sys
    from porttrack.cli.terminal import Progress
    from porttrack.git.repo import GitRepo

    updates = []
    with Progress("fetch") as progress:
        def seen(line):
            updates.append(line)
            progress(line)
        GitRepo(sys.argv[1]).fetch("upstream", ["+refs/pull/1/head:refs/porttrack/pr-1"], seen)
    print(f"updates={len(updates)}", file=sys.stdout)
""")


@pytest.fixture
def fork(tmp_path: Path, git_env) -> Path:
    up = Upstream(tmp_path / "up")
    fork = clone_fork(up, tmp_path / "fork")
    # distinct content per file: hundreds of objects to send, so git reports progress many times
    up.open_pr(1, {f"pkg/m{i:04d}.py": f"value = {i}\n" + "# filler line\n" * (i % 40) for i in range(FILES)}, "many files")
    return fork


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "NO_COLOR", "COLUMNS")}
    env["PYTHONPATH"] = str(REPO_ROOT)
    env.update(extra)
    return env


def _on_pty(fork: Path, env: dict[str, str]) -> tuple[bytes, bytes]:
    """(what the terminal received, stdout) of the fetch with stderr on a pseudo-terminal."""
    received, out, status = run_on_pty([sys.executable, "-c", SCRIPT, str(fork)], stream="stderr", env=env, cwd=REPO_ROOT)
    assert status == 0, received.decode(errors="replace")
    return received, out


def _updates(stdout: bytes) -> int:
    return int(stdout.decode().strip().rpartition("updates=")[2])


def test_on_a_terminal_a_fetch_is_one_line_redrawn_in_place(fork: Path) -> None:
    received, out = _on_pty(fork, _env(TERM="xterm", COLUMNS="80"))
    updates = _updates(out)
    assert updates >= 10, f"the fixture should make git report many updates, it made {updates}"
    # a pty turns "\n" into "\r\n": a line ended is "\r\n", a redraw is a bare "\r"
    newlines = received.count(b"\n")
    redraws = received.count(b"\r") - received.count(b"\r\n")
    assert newlines == 1, received[-600:]
    assert redraws >= updates - 2, (redraws, updates)
    text = received.decode()
    assert "fetch: " in text and "objects" in text
    lines = [seg for seg in text.replace("\r\n", "\r").split("\r") if seg]
    assert all(len(seg.replace("\x1b[0K", "")) < 80 for seg in lines), "each redraw fits the width"


def test_piped_a_fetch_says_a_few_summary_lines(fork: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(fork)], capture_output=True, env=_env(), cwd=REPO_ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert _updates(proc.stdout) >= 10
    lines = proc.stderr.decode().splitlines()
    assert 1 <= len(lines) <= 5, lines
    assert b"\r" not in proc.stderr and b"\x1b" not in proc.stderr
    assert all(line.startswith("  fetch: ") and line.rstrip().endswith("done.") for line in lines), lines


def test_in_ci_a_terminal_gets_summary_lines_too(fork: Path) -> None:
    received, out = _on_pty(fork, _env(TERM="xterm", CI="true"))
    assert _updates(out) >= 10
    assert received.count(b"\r") == received.count(b"\r\n"), "no redraws in CI"
    assert 1 <= received.count(b"\n") <= 5, received


def test_a_poll_counts_in_place_on_a_terminal_and_once_on_a_pipe() -> None:
    """porttrack's own progress ("PRs answered: 2/3") follows the same rules as git's."""
    import io

    piped = io.StringIO()
    with Progress("upstream", stream=piped, environ={}) as progress:
        for done in range(1, 4):
            progress(f"PRs answered: {done}/3")
        progress("warning: a line that is not progress is always shown")
    assert piped.getvalue().splitlines() == ["  upstream: PRs answered: 3/3",
                                              "  upstream: warning: a line that is not progress is always shown"]


def test_status_reports_the_poll_once_when_piped(tmp_path: Path, world) -> None:
    """End to end: observe tells the display each answer (GitHubClient.get_pulls_present's
    `answered`); piped, the count is one summary line, not one line per PR."""
    from testing.text import numbered
    from testing.workspace import make_workspace, track

    world.upstream.commit({"a.py": numbered("a", 9)}, "files")
    for n in (101, 102, 103):
        world.open_pr(n, {f"p{n}.py": numbered(f"p{n}", 3)}, f"PR {n}")
    ws = make_workspace(tmp_path / "ws", {"t": track([101, 102, 103])}, api_url=world.fake.base_url,
                        fork=world.fork, token=world.token)
    out = ws.run("status", "--no-search")
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("PRs answered") == 1 and "PRs answered: 3/3" in out.stderr, out.stderr
