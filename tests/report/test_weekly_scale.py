"""400 queued patches (issue 32, item 11 of the 'why' list): the posted issue fits GitHub's 65,536
characters with the summary, the gates and the problems whole; what was cut is named, with a link
a reader can open; the summary does not repeat a state per patch; `status` has a one-screen
summary."""

from __future__ import annotations

import hashlib
import re

from porttrack.diff.hunks import parse_diff
from porttrack.queue import manifest as queue_mod
from porttrack.queue.manifest import HunkRef, Patch, Revision, patch_file_name
from porttrack.workspace.files import Workspace
from testing.workspace import make_workspace, track

PATCHES = 400


def _mail(i: int) -> bytes:
    body = "".join(f"+line {k} of patch {i}\n" for k in range(12))
    return (f"From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n"
            f"From: Dev <dev@example.invalid>\nDate: Mon, 1 Sep 2026 00:00:00 +0000\n"
            f"Subject: [PATCH] vllm: port change {i}\n\n---\n"
            f"diff --git a/vllm/p/f{i}.py b/vllm/p/f{i}.py\nnew file mode 100644\n--- /dev/null\n+++ b/vllm/p/f{i}.py\n"
            f"@@ -0,0 +1,12 @@\n{body}-- \n2.39.5\n\n").encode()


def _queue_many(root, tracks: list[str]) -> None:
    ws = Workspace(root)
    queue = queue_mod.load(ws)
    files = {}
    for i in range(PATCHES):
        data = _mail(i)
        name = f"{i + 1:04d}-pr{50000 + i}-port-change-{i}"
        patch = Patch(name=name, file=patch_file_name(name, data), sha256=hashlib.sha256(data).hexdigest(),
                      track=tracks[i % len(tracks)], pr=50000 + i, upstream="vllm-project/vllm", title=f"port change {i}",
                      revision=Revision(head=f"{i:040x}", base="b" * 40),
                      hunks_taken=tuple(HunkRef(h.id, h.path, h.kind) for fd in parse_diff(data) for h in fd.hunks),
                      hunks_left_out=tuple(HunkRef(f"{i:08x}{k:04x}", f"docs/design/part{i}-{k}.md", "text",
                                                   "excluded by the track's paths (docs/**): the fork ships no design docs")
                                           for k in range(3)) + (HunkRef(f"{i:08x}ffff", f"vllm/models/m{i}/nvidia/attention.py",
                                                                        "text", "the fork does not carry this NVIDIA model file"),),
                      depends_on=(), state="queued", gate=None)
        queue = queue.add(patch)
        files[patch.file] = data
    queue_mod.save(ws, queue, new_files=files)


def test_four_hundred_patches_fit_the_issue_with_summary_gates_and_problems_whole(tmp_path, monkeypatch):
    from porttrack.report.render import BODY_LIMIT, _sections, body_size, fit_body
    from testing.gfm import cmark

    tracks = {f"t{k}": track([40000 + k], f"track {k}") for k in range(4)}
    ws = make_workspace(tmp_path / "ws", tracks)
    _queue_many(ws.root, list(tracks))
    out = ws.run_in_process("report", "weekly", "--offline", "--now", "2026-12-04T12:00:00Z")
    assert out.returncode == 0, out.stderr
    full = out.stdout
    assert body_size(full) > BODY_LIMIT, "the scene is what the test says: a report longer than an issue"
    summary_rows = [line for line in full.splitlines() if line.startswith("| **t")]
    assert all(line.count("queued") <= 2 for line in summary_rows), summary_rows[0][:300]  # "100 queued", not 100 times
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://github.com")
    monkeypatch.setenv("GITHUB_REPOSITORY", "randomvariable/porttrack-workspace")
    monkeypatch.setenv("GITHUB_RUN_ID", "123")
    from porttrack.report.records import WeeklyReport  # noqa: F401  (the pointer reads only report_file)
    from porttrack.report.render import pointer_to_full

    class _Report:
        report_file = "reports/weekly-2026-W49.md"

    body, cut = fit_body(full, BODY_LIMIT, pointer_to_full(_Report()))  # what `report weekly --post` posts
    assert cut and body_size(body) <= BODY_LIMIT
    whole = dict((name, "".join(lines)) for name, lines in _sections(full))
    posted = dict((name, "".join(lines)) for name, lines in _sections(body))
    for name in ("Summary", "Gates", "Problems"):
        if name in whole:
            assert posted.get(name, "").rstrip() == whole[name].rstrip() or name == "Problems" and \
                whole[name].rstrip() in posted.get(name, ""), f"{name} is not whole"
    assert "Summary" in posted and "Problems" in posted
    assert "what was cut: “" in body and "“Patch queue”" in body
    assert re.search(r"more rows of this section are left out to fit", posted["Patch queue"])
    html = cmark(body)
    assert '<a href="https://github.com/randomvariable/porttrack-workspace/blob/porttrack-state/reports/weekly-2026-W49.md">' in html


def test_status_of_a_hundred_tracks_has_a_one_screen_summary(tmp_path):
    tracks = {f"t{k:03d}": track([40000 + k], f"track {k}") for k in range(100)}
    ws = make_workspace(tmp_path / "ws", tracks)
    out = ws.run_in_process("status", "--offline")
    assert out.returncode == 0, out.stderr
    head = out.stdout.split("\n\n")[1] if "\n\n" in out.stdout else ""
    lines = out.stdout.splitlines()
    summary_at = next(i for i, line in enumerate(lines) if line.startswith("summary:"))
    assert summary_at < 5, lines[:8]
    block = lines[summary_at:summary_at + 8]
    assert any("100 tracks" in line for line in block), block
    assert head is not None


def test_outside_actions_what_was_cut_is_whole_in_the_issues_comments_linked_from_the_body(tmp_path, fake, monkeypatch):
    """`report weekly --post` from a person's machine: the reader of the issue cannot open the
    workspace's reports/ file, so what was cut goes whole into comments of the week's issue and the
    body links them; a second run the same week, nothing changed, writes nothing."""
    from porttrack.report.render import BODY_LIMIT, body_size
    from testing.gfm import cmark
    from testing.github_emulator import DEFAULT_TOKEN

    for name in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID", "GITHUB_ACTIONS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(fake, "html_base", "https://github.com")  # the issue links only GitHub's own pages
    fake.add_repo("randomvariable/vllm")
    fake.add_repo("vllm-project/vllm")
    tracks = {f"t{k}": track([40000 + k], f"track {k}") for k in range(4)}
    ws = make_workspace(tmp_path / "ws", tracks, api_url=fake.base_url, token=DEFAULT_TOKEN)
    _queue_many(ws.root, list(tracks))
    argv = ("report", "weekly", "--offline", "--post", "--now", "2026-12-04T12:00:00Z")
    out = ws.run_in_process(*argv)
    assert out.returncode == 0, out.stderr
    full = (ws.root / "reports" / "weekly-2026-W49.md").read_text(encoding="utf-8")
    [issue] = fake.issues("randomvariable/vllm")
    body = issue["body"]
    assert body_size(body) <= BODY_LIMIT < body_size(full)
    assert "in the workspace" not in body and "reports/weekly-2026-W49.md" not in body.split("what was cut:")[-1]
    comments = fake.comments("randomvariable/vllm", issue["number"])
    assert comments and all(body_size(c["body"]) <= BODY_LIMIT for c in comments)
    first = comments[0]["html_url"]
    assert f'<a href="{first}">in the comments below</a>' in cmark(body), body[-600:]
    queue_rows = [line for line in full.splitlines() if line.startswith("| `")]
    assert len(queue_rows) >= PATCHES
    said = "".join(c["body"] for c in comments)
    assert all(row in said for row in queue_rows if row not in body), "every row the issue left out is in a comment"
    assert all("|---" in c["body"] or "| ---" in c["body"] or "## " in c["body"] for c in comments)
    assert f"comments of #{issue['number']}: {first}" in out.stderr, out.stderr

    fake.clear_log()
    again = ws.run_in_process(*argv)
    assert again.returncode == 0, again.stderr
    writes = [(r.method, r.path) for r in fake.log if r.method != "GET"]
    assert writes == [], writes
    assert fake.issues("randomvariable/vllm")[0]["body"] == body
