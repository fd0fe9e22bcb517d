"""Successor lines at the terminal's width (`porttrack.cli.status` through `porttrack.cli.terminal`):
a real pseudo-terminal sized 80 and 120 columns (TIOCSWINSZ, COLUMNS unset, so the program asks
the kernel as it does for a person), and a pipe.

On the terminal every line fits; prose wraps between words, never inside one; the tracks.yaml lines
to adopt are never wrapped (a wrapped YAML comment pastes as broken YAML) but cut with "…" when they
do not fit. Piped (no COLUMNS), nothing is cut: README says so."""

from __future__ import annotations

import re
import sys

import pytest

from testing.ptyrun import run_on_pty
from testing.text import numbered
from testing.workspace import make_workspace, track

SGR = re.compile(r"\x1b\[[0-9;]*m")
W = {f"w{i}.py": numbered(f"w{i}", 5) for i in range(1, 5)}
# 16 distinct words: each must come out whole on some line, whatever the width
TITLE_WORDS = [f"kernelword{i:02d}" for i in range(16)]
LONG_TITLE = "Warmup contract " + " ".join(TITLE_WORDS)


def _scene(world):
    world.open_pr(100, W, "Warm the kernels")
    world.fake.put_pull(world.upstream_repo, 100, user="alice")
    world.close(100)
    edited = W["w4.py"].replace("w4_3", "w4_three")
    world.open_pr(201, {**{k: W[k] for k in ("w1.py", "w2.py", "w3.py")}, "w4.py": edited}, LONG_TITLE, body="Supersedes #100.")
    world.fake.put_pull(world.upstream_repo, 201, user="bob")
    world.squash_merge(201)


@pytest.fixture
def ws(tmp_path, world):
    _scene(world)
    tid = "warm-kernels-contract-for-every-speculative-decoding-graph-size"
    ws = make_workspace(tmp_path / "ws", {tid: track([100])}, api_url=world.fake.base_url, fork=world.fork, token=world.token)
    first = ws.run_in_process("status")
    assert first.returncode == 0, first.stderr
    assert "successor candidates for #100:" in first.stdout
    return ws


def _lines(text: str) -> list[str]:
    return [SGR.sub("", line).rstrip("\r") for line in text.replace("\r\n", "\n").split("\n")]


def _successor_block(lines: list[str]) -> list[str]:
    start = next(i for i, line in enumerate(lines) if "successor candidates for #100:" in line)
    return [line for line in lines[start:] if line.strip()]


@pytest.mark.parametrize("columns", [80, 120])
def test_on_a_terminal_every_line_fits_and_no_word_is_broken(ws, columns):
    env = ws.env(COLUMNS=None, TERM="xterm", NO_COLOR=None, CI=None, PAGER="cat")
    received, err, rc = run_on_pty([sys.executable, "-m", "porttrack", "status"], stream="stdout", env=env, cwd=ws.root,
                                   timeout=120, columns=columns)
    assert rc == 0, err.decode()
    lines = _lines(received.decode())
    too_wide = [line for line in lines if len(line) > columns]
    assert not too_wide, f"{len(too_wide)} lines wider than {columns}:\n" + "\n".join(too_wide)
    block = _successor_block(lines)
    words = {w for line in block for w in re.split(r"[\s:]+", line)}
    broken = [w for w in TITLE_WORDS if w not in words]
    assert not broken, f"words broken across lines at {columns} columns: {broken}\n" + "\n".join(block)
    # the tracks.yaml lines to adopt: each on one line, at its indent, cut where it does not fit
    prs = [line for line in block if line.lstrip().startswith("prs: [201]")]
    assert len(prs) == 1, "\n".join(block)
    assert prs[0].endswith("…") == (len("            prs: [201] # #201 succeeds #100 (closed without merging)") > columns)
    assert not any(line.strip().startswith(("(closed", "merging)")) for line in block), "a YAML line was wrapped"


def test_piped_nothing_is_cut(ws):
    proc = ws.run("status", env=ws.env(COLUMNS=None, NO_COLOR=None))
    assert proc.returncode == 0, proc.stderr
    block = _successor_block(_lines(proc.stdout))
    assert not [line for line in block if "…" in line], "\n".join(block)
    candidate = next(line for line in block if line.lstrip().startswith("#201 "))
    assert LONG_TITLE in candidate and len(candidate) > 200, candidate  # one whole line, longer than today's cut
    assert "prs: [201] # #201 succeeds #100 (closed without merging)" in proc.stdout
