"""Hostile diffs: what a stranger's pull request (or a hand-edited patch file in the queue) can
hold — `..`, `.git` in its many spellings, empty and backslashed names, symlinks out of the tree or
into `.git`, huge hunks, thousands of files, binary content, NUL bytes, invalid UTF-8 in content
and in names, control characters and direction overrides in names, gitlinks, header injection in
the title.

Through `porttrack import N` each ends in a refusal (exit 6, naming the path; the queue byte for
byte as it was) or in a patch that is taken whole and builds (`porttrack apply --dry-run`).
Through `porttrack apply`, a queued patch file that tries to write outside the index is refused
and nothing moves. Never is anything written outside the workspace and the fork: the folders
around them list the same names before and after, and the fork's work tree is untouched.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from typing import Any, Callable

import pytest
import rel_harness as H
from rel_harness import SUBSETS, Rig, assert_one_line_error, check_consistent, fork_state, half, outside

from testing.gitfixtures import Executable, Symlink, git

pytestmark = pytest.mark.reliability("hostile-diffs")

FIRST = 300


def blob(rig: Rig, data: bytes) -> str:
    return git(rig.world.upstream.path, "hash-object", "-w", "--stdin", input=data)


def tree(rig: Rig, entries: list[str]) -> str:
    return git(rig.world.upstream.path, "mktree", input=("\n".join(entries) + "\n").encode("utf-8", "surrogateescape"))


def with_entries(rig: Rig, number: int, entries: list[str]) -> None:
    """Point refs/pull/N/head at a commit whose root tree also has `entries` (mktree lines): what a
    hostile upstream can serve and `git add` would never make."""
    bare = rig.world.upstream.path
    head = rig.world.head(number)
    listing = git(bare, "ls-tree", f"{head}^{{tree}}").splitlines()
    commit = git(bare, "commit-tree", tree(rig, listing + entries), "-p", head, "-m", "hostile")
    git(bare, "update-ref", f"refs/pull/{number}/head", commit)
    rig.fake.put_pull(H.UPSTREAM_REPO, number, head_sha=commit)


@dataclass(frozen=True)
class Case:
    id: str
    files: dict[str, Any]
    expect: str  # "refuse" | "take" | "nothing"
    says: str = ""
    entries: Callable[[Rig], list[str]] | None = None
    title: str = "hostile change"
    fast: bool = False
    human: bool = False  # import as a subprocess, printing to a real (UTF-8) stdout


def hooks_dir(rig: Rig, name: str = ".git") -> list[str]:
    hook = blob(rig, b"#!/bin/sh\ntouch /tmp/porttrack-owned\n")
    hooks = tree(rig, [f"100755 blob {hook}\tpost-checkout"])
    git_dir = tree(rig, ["040000 tree " + hooks + "\thooks"])
    return [f"040000 tree {git_dir}\t{name}"]


BIG = "".join(f"line {i}\n" for i in range(200_000))
CASES = [
    Case("dotdot-entry", {"a.py": H.edit(H.A, {10: "a_10 = 1"})}, "refuse", "'..'", lambda r: [f"100644 blob {blob(r, b'x')}\t.."], fast=True),
    Case("dotgit-hooks", {"a.py": H.edit(H.A, {10: "a_10 = 1"})}, "refuse", ".git", lambda r: hooks_dir(r), fast=True),
    Case("dotgit-uppercase", {"a.py": H.edit(H.A, {10: "a_10 = 1"})}, "refuse", ".git", lambda r: hooks_dir(r, ".GIT")),
    Case("dotgit-trailing-dot", {"a.py": H.edit(H.A, {10: "a_10 = 1"})}, "refuse", ".git", lambda r: hooks_dir(r, ".git.")),
    Case("dotgit-short-name", {"a.py": H.edit(H.A, {10: "a_10 = 1"})}, "refuse", ".git", lambda r: hooks_dir(r, "git~1")),
    Case("dotgit-hfs-ignorable", {"a.py": H.edit(H.A, {10: "a_10 = 1"})}, "refuse", ".git", lambda r: hooks_dir(r, ".g\u200cit")),
    Case("nested-dotgit", {"a.py": H.edit(H.A, {10: "a_10 = 1"})}, "refuse", ".git",
         lambda r: [f"040000 tree {tree(r, hooks_dir(r))}\tsub"]),
    Case("empty-name-entry", {"a.py": H.edit(H.A, {10: "a_10 = 1"})}, "refuse", "", lambda r: [f"100644 blob {blob(r, b'x')}\t"]),
    Case("backslash-name", {"a.py": H.edit(H.A, {10: "a_10 = 1"})}, "refuse", "backslash",
         lambda r: [f"100644 blob {blob(r, b'x')}\t..\\\\..\\\\evil"]),
    Case("symlink-climbing-out", {"link": Symlink("../../../../etc/passwd")}, "refuse", "outside the work tree", fast=True),
    Case("symlink-absolute", {"link": Symlink("/etc/passwd")}, "refuse", "absolute"),
    Case("symlink-into-dotgit", {"link": Symlink(".git/hooks")}, "refuse", ".git"),
    Case("symlink-dotdot-after-name", {"sub/link": Symlink("x/../../..")}, "refuse", "symlink"),
    Case("symlink-multiline-target", {"link": Symlink("a\n../../etc")}, "refuse", "symlink"),
    Case("newline-in-name", {"a\nb.py": "x\n"}, "refuse", "control character", fast=True),
    Case("tab-in-name", {"a\tb.py": "x\n"}, "refuse", "control character"),
    Case("escape-in-name", {"a\x1b[2Jb.py": "x\n"}, "refuse", "control character"),
    Case("huge-hunk", {"big.txt": BIG}, "take"),
    Case("thousands-of-files", {f"many/f{i:04d}.py": f"v = {i}\n" for i in range(2500)}, "take"),
    Case("binary-file", {"blob.bin": bytes(range(256)) * 64}, "take", fast=True),
    Case("nul-bytes-in-text", {"a.py": H.A.replace("a_10 = 10", "a_10 = '\x00\x00'")}, "take"),
    Case("invalid-utf8-content", {"latin1.txt": b"caf\xe9 na\xefve \xff\xfe\n"}, "take"),
    Case("invalid-utf8-name", {}, "take", entries=lambda r: ["100644 blob " + blob(r, b"x\n") + "\tcaf\udce9.txt"], human=True),
    Case("bidi-override-in-name", {"\u202egnp.py": "x = 1\n"}, "take", human=True),
    Case("option-like-name", {"-rf": "x\n", "--upload-pack=evil": "y\n"}, "take"),
    Case("very-long-name", {"n" * 250 + ".py": "x\n"}, "take"),
    Case("very-deep-path", {"/".join(f"d{i}" for i in range(120)) + "/f.py": "x\n"}, "take"),
    Case("gitlink-entry", {"a.py": H.edit(H.A, {10: "a_10 = 1"})}, "take",
         entries=lambda r: ["160000 commit 1234567890123456789012345678901234567890\tvendored"]),
    Case("mode-change-only", {"README.md": Executable("upstream project\n")}, "take"),
    Case("crlf-file", {"crlf.txt": "one\r\ntwo\r\n"}, "take"),
    Case("deletes-everything", {"a.py": None, "b.py": None, "c.py": None, "README.md": None}, "take"),
    Case("header-injection-title", {"a.py": H.edit(H.A, {10: "a_10 = 'title'"})}, "take",
         title="fix\nFrom: Evil <evil@example.com>\nSubject: [PATCH] owned\n\n\x1b[31mred\u202e"),
]


def _rig(tmp_path, world) -> Rig:
    prs = list(range(FIRST, FIRST + len(CASES) + 1))
    tracks = {"hostile": H.track(prs, "hostile diffs", gate=H.gate_doc())}
    rig = Rig(tmp_path, world, status=False, tracks=tracks)
    rig.save("empty")
    return rig


def _case_file(rig: Rig, number: int, case: Case) -> None:
    git(rig.world.upstream.work, "checkout", "-q", "main")
    files = dict(case.files)
    rig.world.open_pr(number, files or {"placeholder.txt": "p\n"}, case.title)
    if case.entries:
        with_entries(rig, number, case.entries(rig))


@pytest.mark.parametrize("subset", SUBSETS)
def test_hostile_diffs_through_import(tmp_path, world, cases, subset):
    rig = _rig(tmp_path, world)
    chosen = half(CASES, lambda c: c.fast, subset)
    fork_before = fork_state(rig.fork)
    around = outside(rig.around())
    for n, case in enumerate(CASES):
        if case not in chosen:
            continue
        number = FIRST + n
        with cases.case(case.id):
            rig.restore("empty")
            _case_file(rig, number, case)
            before = rig.digest("patches")
            if case.human:
                human = rig.sub("import", str(number), PYTHONIOENCODING="utf-8:strict", LC_ALL="C.UTF-8")
                assert human.returncode == 0, human.stderr[-1500:]
                assert "\u202e" not in human.stdout and "\x1b" not in human.stdout
                rig.restore("empty")
            out = rig.cli("import", str(number), "--json")
            if case.expect == "refuse":
                assert_one_line_error(out, 6)
                assert case.says in out.errors[0], out.errors[0]
                assert rig.digest("patches") == before, "a refused import writes nothing"
            else:
                assert out.returncode == 0, out.stderr[-1500:]
                data = out.json()
                assert data["written"] and data["left_out"] == 0, data["hunks"][:5]
                built = rig.cli("apply", "--dry-run", "--json")
                assert built.returncode == 0, built.stderr[-1500:]
                if case.id == "header-injection-title":
                    mail = next((rig.root / "patches").glob("*.patch")).read_bytes()
                    head = mail.split(b"\n\n", 1)[0]
                    assert head.count(b"\nFrom: ") == 1 and head.count(b"\nSubject: ") == 1, head
                    assert b"\x1b" not in mail and "\u202e".encode() not in mail
                assert "\x1b" not in out.stderr
            check_consistent(rig, fork_before=fork_before, allow_stale_series=False)
            assert outside(rig.around()) == around, "nothing written next to the workspace or the fork"
            assert not os.path.exists("/tmp/porttrack-owned")
    cases.done()


# -- hostile patch files already in the queue (a hand edit, a bad merge of the workspace repo) ---------

APPLY_CASES = {
    "traversal": "diff --git a/../../escape.txt b/../../escape.txt\nnew file mode 100644\n--- /dev/null\n+++ b/../../escape.txt\n@@ -0,0 +1 @@\n+owned\n",
    "absolute": "diff --git a//tmp/porttrack-abs.txt b//tmp/porttrack-abs.txt\nnew file mode 100644\n--- /dev/null\n+++ b//tmp/porttrack-abs.txt\n@@ -0,0 +1 @@\n+owned\n",
    "dotgit-hook": "diff --git a/.git/hooks/post-checkout b/.git/hooks/post-checkout\nnew file mode 100755\n--- /dev/null\n+++ b/.git/hooks/post-checkout\n@@ -0,0 +1,2 @@\n+#!/bin/sh\n+touch /tmp/porttrack-owned\n",
    "symlink-out": "diff --git a/link b/link\nnew file mode 120000\n--- /dev/null\n+++ b/link\n@@ -0,0 +1 @@\n+../../../../tmp\n\\ No newline at end of file\n",
    "two-mails": None,
}


@pytest.mark.parametrize("kind", [k if k == "symlink-out" else pytest.param(k, marks=pytest.mark.slow) for k in sorted(APPLY_CASES)])
def test_hostile_patch_file_in_the_queue_is_refused_by_apply(tmp_path, world, kind):
    from porttrack.queue import manifest as queue_mod
    from porttrack.workspace.files import Workspace

    rig = Rig(tmp_path, world)
    rig.ok("import", "101")
    ws = Workspace(rig.root)
    queue = queue_mod.load(ws)
    patch = queue.get(101)
    data = queue_mod.read_patch(ws, patch)
    head, _, _ = data.partition(b"\ndiff --git ")
    if kind == "two-mails":
        hostile = data + data
    else:
        hostile = head + b"\n" + APPLY_CASES[kind].encode() + b"-- \nporttrack\n"
    name = queue_mod.patch_file_name(patch.name, hostile)
    from dataclasses import replace

    queue_mod.save(ws, queue.replace_patch(replace(patch, file=name, sha256=hashlib.sha256(hostile).hexdigest())), {name: hostile})
    before, around = fork_state(rig.fork), outside(rig.around())
    out = rig.cli("apply")
    assert out.returncode in (2, 4, 6), out.stderr[-1200:]
    assert "Traceback" not in out.stderr and len(out.errors) == 1, out.stderr[-1200:]
    check_consistent(rig, fork_before=before, allow_stale_series=False)
    assert outside(rig.around()) == around
    for sentinel in ("/tmp/porttrack-owned", "/tmp/porttrack-abs.txt", str(tmp_path / "escape.txt")):
        assert not os.path.exists(sentinel), sentinel
