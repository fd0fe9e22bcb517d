"""Upstream text is data, never control (issue 17), as a property.

Anyone can write a PR's title, body, branch names and login, and a queued patch's file names come
from the PR. Hypothesis generates them — control characters, escape sequences (CSI, OSC 8 links,
clear-screen, C1), bidi overrides, zero-width characters and BOMs, lone surrogates, huge sizes,
"requires #1" (an issue), references to numbers that are no PR, stacking cycles — and serves them
from the GitHub emulator over loopback. Through `status`, `status --json`, `report weekly` and
`queue` (the real CLI, in-process), whatever comes:

- the exit code is never 70 (an internal error);
- nothing printed carries an escape sequence or a control character, and the human output carries
  no direction override or invisible character;
- there is always a table (every track listed) and a report (its summary, queue and gates sections).

A fast subset runs in every `pytest`; PORTTRACK_FULL=1 (as for the reliability suite) runs the
full 1,000 cases.
"""

from __future__ import annotations

import json
import os
import re

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from porttrack.queue import manifest as queue_mod
from porttrack.workspace.files import Workspace, atomic_write_text, dump_json
from testing.workspace import make_workspace, track

FULL = os.environ.get("PORTTRACK_FULL") == "1"
CASES = 1000 if FULL else 12
NOW = "2027-02-01T08:00:00Z"

# Pieces a hostile author reaches for; hypothesis mixes them with arbitrary text.
PIECES = (
    "\x1b[2J", "\x1b[31m", "\x1b]8;;http://evil.invalid\x07link\x1b]8;;\x07", "\x1b]0;title\x07", "\x9b2J",
    "\x9d0;t\x9c", "\x07", "\x00", "\r", "\x7f", "\u202e", "\u202d", "\u2066", "\u2069", "\u200b", "\u200d",
    "\u2060", "\ufeff", "\u061c", "\u2028", "\ud800", "\udcff", "\udce9", "@team", "#1", "GH-2",
    "<script>", "[x](http://e)", "| --- |", "```", "requires #1", "depends on #999999", "`", "$$", "\\",
)
SAFE_SHA = "0123456789abcdef0123456789abcdef01234567"
# On a terminal: escape sequences and controls never; in the human output also no direction
# override or invisible character (JSON output may carry those, escaped or as the data they are).
NEVER = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
NOT_IN_TABLES = re.compile(r"[\u061c\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")


def hostile_text(max_pieces: int = 12) -> st.SearchStrategy[str]:
    piece = st.one_of(st.sampled_from(PIECES), st.text(max_size=20),
                      st.text(st.characters(min_codepoint=0, max_codepoint=0x10FFFF), max_size=8))
    small = st.lists(piece, max_size=max_pieces).map("".join)
    return st.one_of(small, small.map(lambda s: s + "x" * 70000), st.just(""))


@st.composite
def cases(draw):
    reference = st.sampled_from(["", "requires #1", "depends on #999999", "stacked on #102", "depends on #101",
                                 "based on https://github.com/vllm-project/vllm/pull/7", "requires #0"])
    return {
        "title": draw(hostile_text()),
        "body": draw(hostile_text()) + "\n" + draw(reference),
        "other_body": draw(reference),
        "base_ref": draw(st.one_of(st.just("main"), hostile_text(4))),
        "head_ref": draw(hostile_text(4)),
        "login": draw(hostile_text(4)),
        "head_sha": draw(st.one_of(st.just(SAFE_SHA), hostile_text(3))),
        "files": draw(st.lists(hostile_text(3), min_size=1, max_size=3)),
        "tracked_missing": draw(st.booleans()),
    }


def _serve(world, case) -> None:
    repo = world.upstream_repo
    world.fake.put_pull(repo, 101, title=case["title"] or "untitled", body=case["body"], base_ref=case["base_ref"] or "main",
                        head_ref=case["head_ref"] or "branch", user=_login(case["login"]), head_sha=case["head_sha"])
    world.fake.put_pull(repo, 102, title="the other one", body=case["other_body"], head_sha="1" * 40, base_sha="2" * 40)


def _login(text: str) -> str:
    """The emulator derives a user id from the login's UTF-8 bytes; GitHub's logins are ASCII
    anyway. Lone surrogates reach porttrack through titles, bodies and branch names instead."""
    return text.encode("utf-8", "replace").decode("utf-8") or "someone"


def _queue(ws_root, case) -> None:
    """A queued patch of #101 whose title and hunk file names are the hostile ones."""
    ws = Workspace(ws_root)
    patch = queue_mod.Patch(
        name="0001-pr101-hostile", file="0001-pr101-hostile.0.patch", sha256="0" * 64, track="one", pr=101,
        upstream="vllm-project/vllm", title=case["title"][:5000], revision=queue_mod.Revision(SAFE_SHA, "b" * 40),
        hunks_taken=tuple(queue_mod.HunkRef(f"h{i}", name[:5000] or "f") for i, name in enumerate(case["files"])),
        hunks_left_out=(), depends_on=(), state="queued", gate=None)
    (ws_root / "patches").mkdir(exist_ok=True)
    atomic_write_text(queue_mod.manifest_path(ws), dump_json({"schema": queue_mod.SCHEMA, "patches": [patch.to_json()]}))


def _short(text: str) -> str:
    return repr(re.sub(r"x{20,}", "x…x", text))[-600:]


def _check(out, *, table: bool) -> None:
    assert out.returncode != 70, _short(out.stderr)
    for text in (out.stdout, out.stderr):
        found = NEVER.search(text.replace("\n", "").replace("\t", ""))
        assert found is None, _short(text[max(0, found.start() - 80): found.end() + 80])
    if table:
        for text in (out.stdout, out.stderr):
            found = NOT_IN_TABLES.search(text)
            assert found is None, _short(text[max(0, found.start() - 80): found.end() + 80])


def test_hostile_upstream_text_never_stops_or_steers_the_tool(tmp_path, world):
    world.open_pr(101, {"a.py": "a = 1\n"}, "first", message="first")
    world.open_pr(102, {"b.py": "b = 1\n"}, "second", message="second")
    world.fake.put_issue(world.upstream_repo, 1, title="an issue")
    tracks = {"one": track([101], "one"), "two": track([102], "two"), "gone": track([103], "missing")}
    handle = make_workspace(tmp_path / "ws", tracks, api_url=world.fake.base_url, fork=None, token=world.token)
    handle.extra_env.update({"PORTTRACK_HTTP_BACKOFF": "0.01", "PORTTRACK_HTTP_TIMEOUT": "5", "PORTTRACK_HTTP_ATTEMPTS": "2"})
    seen = {"cases": 0}

    @settings(max_examples=CASES, deadline=None, database=None, derandomize=not FULL,
              suppress_health_check=list(HealthCheck))
    @given(case=cases())
    def check(case):
        seen["cases"] += 1
        _serve(world, case)
        _queue(handle.root, case)
        status = handle.run_in_process("status", "--no-fetch")
        _check(status, table=True)
        assert status.returncode in (0, 5), _short(status.stderr)
        assert all(f"{tid}  " in status.stdout for tid in tracks), _short(status.stdout)  # always a table
        as_json = handle.run_in_process("status", "--json", "--offline")
        _check(as_json, table=True)
        assert as_json.returncode == 0 and [t["id"] for t in json.loads(as_json.stdout)["tracks"]] == list(tracks)
        report = handle.run_in_process("report", "weekly", "--now", NOW)
        _check(report, table=True)
        assert report.returncode in (0, 5), _short(report.stderr)
        for section in ("## Summary", "## Patch queue", "## Gates"):
            assert section in report.stdout, (section, _short(report.stderr))  # always a report
        queue = handle.run_in_process("queue")
        _check(queue, table=True)
        assert queue.returncode == 0 and "0001-pr101-hostile" in queue.stdout, _short(queue.stderr)

    check()
    assert seen["cases"] >= CASES
    world.fake.check()
