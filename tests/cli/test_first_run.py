"""First-run traps (issue 24): a mistyped or untracked PR number is refused before any request,
saying what is tracked and what was probably meant; an ungated patch's messages name the fix (a
gate in tracks.yaml, README "Adding a gate") and following them works; files are written with
the user's umask. The CLI in-process, the GitHub emulator on loopback."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from porttrack.common.errors import ExitCode
from porttrack.take.source import near_numbers
from testing.workspace import make_workspace, track, tracks_document

ROOT = Path(__file__).resolve().parents[2]
TRACKED = [48804, 46849, 48407, 46514]


@pytest.fixture
def vllm_like(tmp_path, world):
    return make_workspace(tmp_path / "ws", {f"t{i}": track([n]) for i, n in enumerate(TRACKED)},
                          api_url=world.fake.base_url, fork=world.fork, token=None)


@pytest.mark.parametrize("argv, meant", [
    (("import", "4880"), "#48804"),
    (("import", "48084"), "#48804"),
    (("verify-converged", "48408"), "#48407"),
    (("verify-converged", "48408"), "#48804"),
    (("import", "12345"), None),
])
def test_an_untracked_pr_number_is_refused_before_any_request_saying_what_was_meant(vllm_like, world, argv, meant):
    world.fake.clear_log()
    out = vllm_like.run_in_process(*argv)
    assert out.returncode == ExitCode.USAGE, out.stderr
    assert f"#{argv[1]} is not tracked; tracked: #46514, #46849, #48407, #48804" in out.stderr
    if meant:
        assert re.search(rf"did you mean [#\d ]*(or )?{meant}\b", out.stderr), out.stderr
    else:
        assert "did you mean" not in out.stderr
    assert world.fake.log == [], "not a single request for a number nobody tracks"
    assert "token" not in out.stderr.lower()


@pytest.mark.parametrize("argv", [("import", "#48408"), ("refresh", "#48408"), ("verify-converged", "#48408"),
                                  ("verify-converged", " #48408 ")])
def test_a_pr_number_written_as_github_shows_it_is_read_as_the_number(vllm_like, world, argv):
    """`#48407` as GitHub and porttrack's own messages write it: read as 48407 by every command that
    takes a PR (here an untracked one, so the refusal names the number it read)."""
    world.fake.clear_log()
    out = vllm_like.run_in_process(*argv)
    assert "is not a valid" not in out.stderr and "is not a pull request number" not in out.stderr, out.stderr
    if argv[0] != "refresh":  # refresh reads the queue, not tracks.yaml: no queued patch for #48408
        assert "#48408 is not tracked" in out.stderr, out.stderr
    else:
        assert "48408" in out.stderr, out.stderr
    assert world.fake.log == []


@pytest.mark.parametrize("typed", ["##48407", "#0", "0", "#-5", "48407a", "#\u0664\u0668", "", "# 48407"])
def test_what_is_not_a_pr_number_is_refused_as_a_usage_error(vllm_like, typed):
    out = vllm_like.run_in_process("verify-converged", typed)
    assert out.returncode == ExitCode.USAGE, out.stderr
    assert "is not a pull request number (write 1234 or #1234)" in out.stderr, out.stderr


def test_near_numbers_against_a_brute_force_oracle():
    """Seeded random typos of known numbers: a number one edit (or a digit swap) away is offered,
    one further away never. Oracle: every single-character edit and every transposition, enumerated."""
    import random

    rng = random.Random(24)
    table = {"offered, meant": 0, "offered, not meant": 0, "not offered, meant": 0, "not offered, not meant": 0}
    for _ in range(400):
        known = {rng.randrange(1000, 60000) for _ in range(6)}
        target = rng.choice(sorted(known))
        typed = _typo(rng, str(target))
        if not typed.isdigit() or typed.startswith("0") or int(typed) in known:
            continue
        meant = {n for n in known if typed in _one_edit(str(n)) or sorted(str(n)) == sorted(typed)}
        offered = set(near_numbers(int(typed), known))
        for n in known:
            key = f"{'offered' if n in offered else 'not offered'}, {'meant' if n in meant else 'not meant'}"
            table[key] += 1
    print("\nnear_numbers vs enumerated edits:", table)
    assert table["offered, not meant"] == 0
    assert table["offered, meant"] > 100
    # at most 3 are offered: a miss is allowed only when more than 3 were near
    assert table["not offered, meant"] <= table["offered, meant"] // 20


def _typo(rng, s: str) -> str:
    kind, i = rng.choice(["drop", "add", "swap", "change", "far"]), rng.randrange(len(s))
    if kind == "drop":
        return s[:i] + s[i + 1:]
    if kind == "add":
        return s[:i] + str(rng.randrange(10)) + s[i:]
    if kind == "swap" and i + 1 < len(s):
        return s[:i] + s[i + 1] + s[i] + s[i + 2:]
    if kind == "far":
        return str(rng.randrange(1000, 60000))
    return s[:i] + str(rng.randrange(10)) + s[i + 1:]


def _one_edit(s: str) -> set[str]:
    digits = "0123456789"
    out = {s[:i] + s[i + 1:] for i in range(len(s))}
    out |= {s[:i] + d + s[i:] for i in range(len(s) + 1) for d in digits}
    out |= {s[:i] + d + s[i + 1:] for i in range(len(s)) for d in digits}
    return out


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o002])
def test_files_are_written_with_the_users_umask(tmp_path, world, mask):
    world.open_pr(101, {"a.py": "a = 1\n"}, "First")
    ws = make_workspace(tmp_path / "ws", {"one": track([101])}, api_url=world.fake.base_url, fork=world.fork, token=None)
    old = os.umask(mask)
    try:
        out = ws.run_in_process("status")
    finally:
        os.umask(old)
    assert out.returncode == 0, out.stderr
    written = [ws.root / "state" / "upstream.json", *(ws.root / ".porttrack").rglob("*.json")]
    assert len(written) > 1
    for path in written:
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask, f"{path}: {oct(path.stat().st_mode)} under umask {oct(mask)}"


GATE = {"job": {"command": "true"}, "matrix": {"contexts": [1024], "batches": [1]}, "promote": False}


def test_an_ungated_patch_says_how_to_add_a_gate_and_following_it_works(tmp_path, world):
    world.open_pr(101, {"a.py": "a = 1\n"}, "First")
    ws = make_workspace(tmp_path / "ws", {"one": track([101])}, api_url=world.fake.base_url, fork=world.fork, token=None)
    imported = ws.run_in_process("import", "101")
    assert imported.returncode == 0, imported.stderr
    fix = ['add a `gate:` to track one in tracks.yaml (README, "Adding a gate")', "porttrack drop 0001-pr101-first", "porttrack import 101"]
    assert all(words in imported.stdout for words in fix), imported.stdout
    assert "ungated; ungated" not in imported.stdout
    for argv in (("gate", "check", "0001-pr101-first"), ("promote", "0001-pr101-first")):
        refused = ws.run_in_process(*argv)
        assert refused.returncode in (ExitCode.PRECONDITION, ExitCode.CANNOT_EVALUATE), refused.stderr
        said = refused.stdout + refused.stderr
        assert all(words in said for words in fix), (argv, said)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "### Adding a gate" in readme
    # the way out, as said
    ws.write_tracks(tracks_document({"one": track([101], gate=GATE)}, checkout=str(world.fork)))
    dropped = ws.run_in_process("drop", "0001-pr101-first", "--reason", "re-import under the new gate")
    assert dropped.returncode == 0, dropped.stderr
    again = ws.run_in_process("import", "101")
    assert again.returncode == 0, again.stderr
    assert "gate: track one" in again.stdout and "queued" in again.stdout


def test_the_init_skeletons_gateless_track_points_at_the_fix():
    from porttrack.bootstrap.init import Options, tracks_skeleton

    text = tracks_skeleton(Options(upstream="vllm-project/vllm", fork="me/vllm"))
    assert "Adding a gate" in text and "ungated" in text
