"""Human output meets the terminal (`porttrack.cli.terminal`): `status`, `queue` and `eligibility`
at 60, 80 and 200 columns, plain (piped) and coloured (on a pseudo-terminal), against golden files
in tests/golden/terminal/. Regenerate them with
`PORTTRACK_UPDATE_GOLDEN=1 python -m pytest tests/cli/test_terminal.py`, and read the diff.

The workspace is real: PRs opened in the GitHub emulator, polled by a live `status`, imported into
the queue by `porttrack import`; the commands under test then run as separate processes with
COLUMNS set, their stdout a pipe or a pty."""

from __future__ import annotations

import json
import os
import re
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from porttrack.common import clock
from testing.ptyrun import run_on_pty
from testing.workspace import MODELS, make_workspace, track

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "terminal"
WIDTHS = (60, 80, 200)
COMMANDS = {"status": ("status", "--offline"), "queue": ("queue",), "eligibility": ("eligibility",)}
ESC = "\x1b"
SGR = re.compile(r"\x1b\[[0-9;]*m")

LONG_TITLE = ("[MRV2][Spec] Fuse AR speculator multi-step decodes back into one CUDA graph on every backend "
              "that supports graph capture, with a warmup that covers each batch size")
MORE_MODELS = {
    **MODELS,
    "DeepSeek-V4-Flash": {"drafters": [], "attention": "sparse-mla", "quantization": "fp8",
                          "backends": {"sm_121a": "FLASHMLA_SPARSE", "gfx1151": "ROCM_AITER_MLA_SPARSE"}},
    "Step-3.7-Flash-with-a-long-name": {"drafters": ["eagle"], "attention": "gqa", "quantization": "fp8",
                                        "backends": {"sm_121a": "FLASH_ATTN", "gfx1151": "TRITON_ATTN"}},
}


@pytest.fixture
def scenario(tmp_path, world):
    """A workspace with two tracked PRs polled live and both imported into the queue."""
    world.open_pr(46849, {"vllm/spec/fused_graph.py": "fused = True\n", "vllm/spec/warmup.py": "warm = 1\n"}, LONG_TITLE)
    world.open_pr(48407, {"vllm/attention/indexer.py": "skip_dense = True\n"}, "[Attention] Skip sparse indexer scoring for dense short prefills")
    tracks = {
        "fused-ar-speculator-graph-replay-with-warmup": track([46849], "Fused autoregressive-speculator CUDA graph replay, warmed for every batch size",
                                                              requires={"drafter": ["eagle", "native-mtp"]}),
        "sparse-indexer-skip": track([48407], "Skip sparse-indexer scoring for dense short prefills",
                                     requires={"attention": ["sparse-mla"]}),
    }
    ws = make_workspace(tmp_path / "ws", tracks, api_url=world.fake.base_url, fork=world.fork, token=world.token, models=MORE_MODELS)
    for args in (("status", "--no-search"), ("import", "46849"), ("import", "48407")):
        done = ws.run_in_process(*args)
        assert done.returncode == 0, (args, done.stderr)
    # recorded three days ago: "recorded 3 days ago" whatever the time this test takes
    state_file = ws.root / "state" / "upstream.json"
    state = json.loads(state_file.read_text())
    state["observed_at"] = clock.stamp(clock.now() - timedelta(days=3))
    state_file.write_text(json.dumps(state, indent=2) + "\n")
    return ws, state["observed_at"]


def _normalised(text: str, observed: str) -> str:
    """The poll's time and the emulator's stamps vary from run to run; each is replaced by a
    placeholder of the same length, so wrapping stays what it was."""
    text = text.replace(observed, "2026-01-01T00:00:00Z")
    return re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", "2026-01-01T00:00:00Z", text)


def _piped(ws, args, width: int, **env: str):
    proc = ws.run(*args, env=ws.env(**{"COLUMNS": str(width), "NO_COLOR": None, "CI": None, **env}))
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def _on_pty(ws, args, width: int, **env: str) -> str:
    """stdout on a pseudo-terminal (stderr a pipe): what a user sees, escape sequences and all."""
    environ = ws.env(**{"COLUMNS": str(width), "TERM": "xterm", "NO_COLOR": None, "CI": None, "PAGER": "cat", **env})
    received, err, status = run_on_pty([sys.executable, "-m", "porttrack", *args], stream="stdout", env=environ, cwd=ws.root, timeout=60)
    assert status == 0, err
    return received.decode().replace("\r\n", "\n")  # the pty's own line discipline


def _check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("PORTTRACK_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.is_file(), f"no golden file {path}; run with PORTTRACK_UPDATE_GOLDEN=1 to create it"
    assert text == path.read_text(encoding="utf-8"), f"{name} differs from its golden file"


def _longest(text: str) -> int:
    return max(len(SGR.sub("", line)) for line in text.splitlines())


def test_output_fits_each_width_plain_and_coloured(scenario) -> None:
    ws, observed = scenario
    for command, args in COMMANDS.items():
        for width in WIDTHS:
            plain = _normalised(_piped(ws, args, width), observed)
            assert ESC not in plain, f"{command} piped wrote an escape sequence"
            assert _longest(plain) <= width, f"{command} at {width} columns:\n{plain}"
            _check_golden(f"{command}-{width}.txt", plain)
            coloured = _normalised(_on_pty(ws, args, width), observed)
            assert SGR.search(coloured), f"{command} on a terminal is not coloured"
            assert SGR.sub("", coloured) == plain, f"{command} at {width}: colour changed the text"
            _check_golden(f"{command}-{width}-color.txt", coloured)


def test_the_golden_files_show_cut_and_wrapped_text(scenario) -> None:
    """What the width rules are for, in the goldens themselves: the long title cut with an
    ellipsis at 80 columns and whole at 200; the narrow eligibility table turned into lists."""
    ws, observed = scenario
    narrow, wide = (_piped(ws, ("status", "--offline"), w) for w in (80, 200))
    assert LONG_TITLE[:40] in narrow and LONG_TITLE not in narrow and "…" in narrow
    assert LONG_TITLE[:150] in wide
    assert "DeepSeek-V4-Flash" in _piped(ws, ("eligibility",), 60)
    assert "model" not in _piped(ws, ("eligibility",), 60).splitlines()[0]
    assert _piped(ws, ("eligibility",), 200).splitlines()[0].split()[0] == "model"


def test_no_color_and_never_win_on_a_terminal_always_wins_on_a_pipe(scenario) -> None:
    ws, _ = scenario
    assert ESC not in _on_pty(ws, ("status", "--offline"), 80, NO_COLOR="1")
    assert ESC not in _on_pty(ws, ("--color", "never", "queue"), 80)
    assert ESC not in _on_pty(ws, ("eligibility",), 80, TERM="dumb")
    assert SGR.search(_piped(ws, ("--color", "always", "eligibility"), 80))
    assert SGR.search(_piped(ws, ("--color", "always", "queue"), 80, NO_COLOR="1")), "an explicit --color always wins over NO_COLOR"


def test_piped_without_columns_nothing_is_cut(scenario) -> None:
    """Plain, stable text for scripts: no terminal, no COLUMNS, every line whole."""
    ws, _ = scenario
    proc = ws.run("status", "--offline", env=ws.env(COLUMNS=None, NO_COLOR=None))
    assert proc.returncode == 0 and LONG_TITLE in proc.stdout and ESC not in proc.stdout


def test_json_is_untouched_by_width_and_colour(scenario) -> None:
    ws, _ = scenario
    for args in (("status", "--offline", "--json"), ("queue", "--json"), ("eligibility", "--json")):
        outputs = {_piped(ws, args, width) for width in (60, 200)}
        outputs.add(_piped(ws, ("--color", "always", *args), 60))
        assert len(outputs) == 1, args
        assert ESC not in outputs.pop()


def test_long_output_on_a_terminal_goes_through_the_pager(scenario, tmp_path) -> None:
    """As git does: PAGER gets the output when it is taller than the terminal; --no-pager and a
    pipe never page."""
    ws, _ = scenario
    seen = tmp_path / "paged.txt"
    pager = f"{sys.executable} -c \"import sys; open({str(seen)!r}, 'w').write(sys.stdin.read())\""
    # a pty of the default 24 rows (ours has 0: then nothing pages) would page; LINES sets ours
    shown = _on_pty(ws, ("status", "--offline"), 80, PAGER=pager, LINES="10")
    assert "fused-ar-speculator" in seen.read_text() and "fused-ar-speculator" not in shown
    seen.unlink()
    _on_pty(ws, ("--no-pager", "status", "--offline"), 80, PAGER=pager, LINES="10")
    _piped(ws, ("status", "--offline"), 80, PAGER=pager, LINES="10")
    assert not seen.exists()


def test_stderr_lines_fit_the_terminal_at_word_boundaries(tmp_path, world) -> None:
    """Issue 32, item 12: the token-less budget line (139 characters) broke mid-word at 80
    columns. On a terminal, every stderr line now fits, wrapped at words; piped, it is one line."""
    world.open_pr(46849, {"vllm/spec/fused_graph.py": "fused = True\n"}, "Fused graph")
    ws = make_workspace(tmp_path / "ws", {"t": track([46849])}, api_url=world.fake.base_url, fork=world.fork, token=None)
    environ = ws.env(**{"COLUMNS": "80", "TERM": "xterm", "NO_COLOR": None, "CI": None, "PAGER": "cat"})
    received, _out, status = run_on_pty([sys.executable, "-m", "porttrack", "status", "--no-search"], stream="stderr",
                                        env=environ, cwd=ws.root, timeout=60)
    assert status == 0, received
    err = received.decode().replace("\r\n", "\n")
    lines = [SGR.sub("", line) for line in err.splitlines() if line.strip()]
    assert any("requests left this hour" in line for line in lines), err
    assert max(len(line) for line in lines) <= 80, err
    words = set(re.findall(r"[\w.:/-]+", " ".join(lines)))
    piped = ws.run("status", "--no-search", env=ws.env(COLUMNS="80"))
    budget = next(line for line in piped.stderr.splitlines() if "requests left this hour" in line)
    assert len(budget) > 80, "piped, the line keeps its length"
    assert set(re.findall(r"[\w.:/-]+", budget)) <= words, "no word was broken"


def test_report_weekly_is_paged_on_a_terminal_taller_output(tmp_path, world) -> None:
    """Issue 32, item 12: `report weekly` (118 lines) was not paged. On a terminal shorter than
    it, it goes through the pager; piped, it is printed as before."""
    world.open_pr(46849, {"vllm/spec/fused_graph.py": "fused = True\n"}, "Fused graph")
    ws = make_workspace(tmp_path / "ws", {"t": track([46849])}, api_url=world.fake.base_url, fork=world.fork, token=world.token)
    assert ws.run_in_process("status", "--no-search").returncode == 0
    got = tmp_path / "paged.txt"
    environ = ws.env(**{"COLUMNS": "100", "TERM": "xterm", "NO_COLOR": None, "CI": None,
                        "PORTTRACK_PAGER": f"cat > {got}"})
    received, err, status = run_on_pty([sys.executable, "-m", "porttrack", "report", "weekly", "--offline", "--dry-run"],
                                       stream="stdout", env=environ, cwd=ws.root, timeout=60, columns=100, lines=20)
    assert status == 0, err
    assert got.is_file() and "# porttrack weekly status" in got.read_text(), "the pager was given the report"
    assert b"# porttrack weekly status" not in received, "shown by the pager, not printed past it"
    piped = ws.run("report", "weekly", "--offline", "--dry-run")
    assert piped.returncode == 0 and piped.stdout.startswith("<!-- porttrack:weekly:")


def test_verify_converged_is_paged_on_a_terminal_taller_output(tmp_path, world) -> None:
    """Issue 32, item 12: `verify-converged` (70 lines on a real PR) was not paged; it goes through
    the same pager as `report weekly` on a terminal shorter than it; piped, it is printed."""
    world.open_pr(46849, {f"vllm/spec/m{i}.py": f"m{i} = True\n" for i in range(8)}, "Eight modules")
    world.squash_merge(46849)
    world.rebase_fork()
    ws = make_workspace(tmp_path / "ws", {"t": track([46849])}, api_url=world.fake.base_url, fork=world.fork, token=world.token)
    got = tmp_path / "paged.txt"
    environ = ws.env(**{"COLUMNS": "100", "TERM": "xterm", "NO_COLOR": None, "CI": None,
                        "PORTTRACK_PAGER": f"cat > {got}"})
    received, err, status = run_on_pty([sys.executable, "-m", "porttrack", "verify-converged", "46849"],
                                       stream="stdout", env=environ, cwd=ws.root, timeout=60, columns=100, lines=8)
    assert status == 0, err
    assert got.is_file() and "verdict: converged" in got.read_text(), "the pager was given the verdict"
    assert b"verdict: converged" not in received, "shown by the pager, not printed past it"
    piped = ws.run("verify-converged", "46849")
    assert piped.returncode == 0 and "verdict: converged" in piped.stdout
