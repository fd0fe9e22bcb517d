"""The queue under the standard tools: `import` stores patches that plain `git am` (no `-3`) and
`quilt push -a` apply, in `series` order, on the build base, giving `porttrack/staging`'s tree —
also when upstream's diff needed an offset or a 3-way merge to go on (issue 11, Build item 4).

Real repositories (an upstream with refs/pull/N/head, a fork clone), the GitHub emulator, the
CLI in-process, and the real `git am` and `quilt` (a missing quilt fails the test)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from porttrack.diff.hunks import parse_diff
from porttrack.queue import manifest as queue_mod
from porttrack.workspace.files import Workspace
from testing.gitfixtures import git, git_bytes
from testing.text import edit, numbered
from testing.workspace import make_workspace, track

A, B, C = numbered("a", 100), numbered("b", 60), numbered("c", 40)
STAGING = "refs/heads/porttrack/staging"


class Tools:
    """Upstream a.py / b.py / c.py, a fork of it, and a workspace with one track for PRs 101-105."""

    def __init__(self, world, tmp_path: Path, **fork_options: str):
        self.world, self.tmp = world, tmp_path
        world.upstream.commit({"a.py": A, "b.py": B, "c.py": C}, "project files")
        git(world.fork, "pull", "-q", "--ff-only", "upstream", "main")
        self.handle = make_workspace(tmp_path / "ws", {"spec": track([101, 102, 103, 104, 105], title="spec")},
                                     api_url=world.fake.base_url, fork=world.fork, token=world.token,
                                     **({"fork_options": fork_options} if fork_options else {}))
        self.ws = Workspace(self.handle.root)

    def cli(self, *args: str):
        out = self.handle.run_in_process(*args, env=self.handle.env())
        assert out.returncode == 0, f"porttrack {' '.join(args)}: {out.stdout}{out.stderr}"
        return out

    def import_(self, number: int) -> dict:
        return json.loads(self.cli("import", str(number), "--json").stdout)

    def queue(self):
        return queue_mod.load(self.ws)

    def series_files(self) -> list[Path]:
        lines = (self.ws.patches_dir / "series").read_text().splitlines()
        return [self.ws.patches_dir / line for line in lines if line and not line.startswith("#")]

    def upstream_ids(self, number: int) -> list[str]:
        """The PR's hunk ids, from upstream's own diff (merge base with main .. head)."""
        head = self.world.head(number)
        base = git(self.world.fork, "merge-base", head, "upstream/main")
        return [h.id for fd in parse_diff(git_bytes(self.world.fork, "diff", "--binary", "--full-index", "-M", base, head))
                for h in fd.hunks]

    def upstream_diff(self, number: int) -> bytes:
        head = self.world.head(number)
        base = git(self.world.fork, "merge-base", head, "upstream/main")
        return git_bytes(self.world.fork, "diff", "--binary", "--full-index", "-M", base, head)

    def git_am_tree(self, base: str) -> str:
        """Plain `git am` (no -3) of the series on a fresh checkout of `base`; the tree it gives."""
        am = self.tmp / "am"
        shutil.copytree(self.world.fork, am, symlinks=True)
        git(am, "checkout", "-q", "-B", "am-test", base)
        proc = subprocess.run(["git", "-C", str(am), "am", *map(str, self.series_files())], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return git(am, "rev-parse", "HEAD^{tree}")

    def quilt_tree(self, base: str) -> tuple[str, str]:
        """`quilt push -a` of the series on a fresh checkout of `base`; (the tree, quilt's output)."""
        if shutil.which("quilt") is None:
            pytest.fail("quilt is not installed (apt-get install quilt; .ci/run installs it)")
        qu = self.tmp / "quilt"
        shutil.copytree(self.world.fork, qu, symlinks=True)
        git(qu, "checkout", "-q", "-B", "quilt-test", base)
        env = {**os.environ, "QUILT_PATCHES": str(self.ws.patches_dir), "QUILTRC": "/dev/null"}
        pushed = subprocess.run(["quilt", "push", "-a"], cwd=qu, env=env, capture_output=True, text=True)
        assert pushed.returncode == 0, pushed.stdout + pushed.stderr
        git(qu, "add", "-A", "--", ".", ":(exclude).pc")
        return git(qu, "write-tree"), pushed.stdout


@pytest.fixture
def tools(world, tmp_path, monkeypatch) -> Tools:
    t = Tools(world, tmp_path)
    for key, value in t.handle.env().items():
        monkeypatch.setenv(key, value)
    return t


def diff_part(mail: bytes) -> bytes:
    """The diff of a format-patch mail: from the first `diff --git` to the signature."""
    start = mail.index(b"diff --git ")
    return mail[start:mail.rindex(b"-- \nporttrack ")]


def five_prs(t: Tools) -> None:
    """The fork edits a.py lines 8 and 12 and inserts five lines atop c.py; then
    101 a.py:10 (context moved under it: 3-way), 102 b.py:5,40 (clean), 103 c.py:30 (offset),
    104 a.py:60 (clean), 105 b.py:43 (clean on the fork, but its context holds b.py:40, which
    102 changes before it in the series: 3-way over the queue)."""
    w = t.world
    w.fork_commit({"a.py": edit(A, {8: "a_8 = 'fork'", 12: "a_12 = 'fork'"}),
                   "c.py": "".join(f"# fork header {i}\n" for i in range(5)) + C}, "fork: local edits")
    w.open_pr(101, {"a.py": edit(A, {10: "a_10 = 'ten'"})}, title="needs a merge")
    w.open_pr(102, {"b.py": edit(B, {5: "b_5 = 'five'", 40: "b_40 = 'forty'"})}, title="clean one")
    w.open_pr(103, {"c.py": edit(C, {30: "c_30 = 'thirty'"})}, title="moved context")
    w.open_pr(104, {"a.py": edit(A, {60: "a_60 = 'sixty'"})}, title="clean in a merged file")
    w.open_pr(105, {"b.py": edit(B, {43: "b_43 = 'forty-three'"})}, title="over the queue")
    t.cli("status", "--json")


def test_queue_needing_3way_and_offset_applies_with_plain_git_am_and_quilt(tools: Tools) -> None:
    five_prs(tools)
    plans = {n: tools.import_(n) for n in (101, 102, 103, 104, 105)}
    report = json.loads(tools.cli("apply", "--staging", "--json").stdout)
    assert [p["outcome"] for p in report["patches"]] == ["clean"] * 5  # the stored files go on as they are
    staging = git(tools.world.fork, "rev-parse", f"{STAGING}^{{tree}}")

    assert tools.git_am_tree("main") == staging
    quilt_tree, said = tools.quilt_tree("main")
    assert quilt_tree == staging
    assert "FAILED" not in said and "fuzz" not in said and "offset" not in said, said
    # and the result is the fork plus each PR's change
    built = git(tools.world.fork, "show", f"{STAGING}:a.py") + "\n"
    assert built == edit(A, {8: "a_8 = 'fork'", 10: "a_10 = 'ten'", 12: "a_12 = 'fork'", 60: "a_60 = 'sixty'"})
    assert git(tools.world.fork, "show", f"{STAGING}:b.py") + "\n" == edit(B, {5: "b_5 = 'five'", 40: "b_40 = 'forty'", 43: "b_43 = 'forty-three'"})

    queue = tools.queue()
    how = {n: (queue.get(n).regenerated.how if queue.get(n).regenerated else None) for n in plans}
    assert how == {101: "3-way", 102: None, 103: "offset", 104: None, 105: "3-way"}
    assert [plans[n]["hunks"][0]["applies"] for n in (101, 103, 105)] == ["3-way", "clean", "clean"]  # the fork tip's probe
    assert queue.get(105).regenerated.below == tuple(queue.get(n).name for n in (101, 102, 103, 104))
    for n in plans:
        patch, mail = queue.get(n), queue_mod.read_patch(tools.ws, queue.get(n))
        # upstream's ids stay the record (refresh, coverage and convergence compare them) ...
        assert [h.id for h in patch.hunks_taken] == tools.upstream_ids(n) == [h["id"] for h in plans[n]["hunks"]]
        assert b"Porttrack-Hunks: " + " ".join(tools.upstream_ids(n)).encode() in mail
        assert plans[n]["regenerated"] == (None if patch.regenerated is None else patch.regenerated.to_json())
        if patch.regenerated is None:  # ... a patch that applied as it is was stored unchanged ...
            assert diff_part(mail) == tools.upstream_diff(n)
        else:  # ... and a regenerated one lists its own hunks too
            assert [h.id for h in patch.regenerated.hunks] == [h.id for fd in parse_diff(mail) for h in fd.hunks]
            assert diff_part(mail) != tools.upstream_diff(n)
            assert patch.regenerated.base == git(tools.world.fork, "rev-parse", "main")
    # the 3-way patch carries the fork's context; the offset one the fork's line numbers
    assert b" a_8 = 'fork'\n" in queue_mod.read_patch(tools.ws, queue.get(101))
    assert b"@@ -32,7 +32,7 @@" in queue_mod.read_patch(tools.ws, queue.get(103))
    assert b" b_40 = 'forty'\n" in queue_mod.read_patch(tools.ws, queue.get(105))


def test_unregenerated_queue_fails_plain_git_am(tools: Tools) -> None:
    """The fixture needs what the change provides: upstream's own diff of #101 does not go on
    with plain `git am` (so the test above would fail without regeneration)."""
    five_prs(tools)
    tools.import_(101)
    mail = queue_mod.read_patch(tools.ws, tools.queue().get(101))
    upstream_mail = mail[:mail.index(b"diff --git ")] + tools.upstream_diff(101) + b"-- \nporttrack x\n\n"
    am = tools.tmp / "am-upstream"
    shutil.copytree(tools.world.fork, am, symlinks=True)
    proc = subprocess.run(["git", "-C", str(am), "am"], input=upstream_mail, capture_output=True)
    assert proc.returncode != 0 and b"patch does not apply" in proc.stderr


def test_refresh_still_matches_upstream_after_regeneration(tools: Tools) -> None:
    five_prs(tools)
    for n in (101, 102, 103, 104, 105):
        tools.import_(n)
    before = tools.queue()
    out = json.loads(tools.cli("refresh", "105", "--json").stdout)
    assert out["counts"] == {"new": 0, "removed": 0, "changed": 0, "unchanged": 1}
    assert [(h["was_taken"], h["now_taken"]) for h in out["hunks"]] == [(True, True)]
    # nothing moved: the same regenerated mail (its place in the series kept), nothing to write
    updated = json.loads(tools.cli("refresh", "101", "--update", "--json").stdout)
    assert not updated["written"] and "already matches upstream" in " ".join(updated["notes"])
    assert tools.queue() == before


def test_clean_on_the_build_base_is_stored_as_upstream_made_it(world, tmp_path, monkeypatch) -> None:
    """The queue is built on fork.build_base: a hunk that needs a merge only on fork.branch (the
    probe's ref) but goes on cleanly at the build base keeps upstream's diff."""
    t = Tools(world, tmp_path, build_base="upstream/main")
    for key, value in t.handle.env().items():
        monkeypatch.setenv(key, value)
    five_prs(t)
    plan = t.import_(101)
    patch = t.queue().get(101)
    assert plan["hunks"][0]["applies"] == "3-way" and patch.regenerated is None
    assert diff_part(queue_mod.read_patch(t.ws, patch)) == t.upstream_diff(101)
    assert t.cli("apply", "--staging").returncode == 0
    assert t.git_am_tree("upstream/main") == git(world.fork, "rev-parse", f"{STAGING}^{{tree}}")


def test_manifest_without_regenerated_still_loads(tools: Tools) -> None:
    five_prs(tools)
    tools.import_(101)
    path = queue_mod.manifest_path(tools.ws)
    data = json.loads(path.read_text())
    assert data["patches"][0]["regenerated"]["how"] == "3-way"
    del data["patches"][0]["regenerated"]  # as every manifest written before the field existed
    path.write_text(json.dumps(data))
    patch = tools.queue().get(101)
    assert patch.regenerated is None and patch.hunks_taken
    assert queue_mod.Patch.from_json(patch.to_json()) == patch


def test_refresh_update_regenerates_after_a_patch_below_is_dropped(tools: Tools) -> None:
    """#105's stored context holds #102's change; once #102 is dropped the file no longer goes on
    with plain `git am` (the documented limit), and `refresh --update` stores upstream's own diff
    again, because that now applies as it is."""
    five_prs(tools)
    for n in (101, 102, 103, 104, 105):
        tools.import_(n)
    tools.cli("drop", tools.queue().get(102).name, "--reason", "not wanted after all")
    am = tools.tmp / "am-stale"
    shutil.copytree(tools.world.fork, am, symlinks=True)
    stale = subprocess.run(["git", "-C", str(am), "am", *map(str, tools.series_files())], capture_output=True, text=True)
    assert stale.returncode != 0 and "upstream #105: over the queue" in stale.stdout.split("Patch failed at")[-1]
    assert "error: b.py: patch does not apply" in stale.stderr

    updated = json.loads(tools.cli("refresh", "105", "--update", "--json").stdout)
    assert updated["written"]
    patch = tools.queue().get(105)
    assert patch.regenerated is None and [h.id for h in patch.hunks_taken] == tools.upstream_ids(105)
    assert diff_part(queue_mod.read_patch(tools.ws, patch)) == tools.upstream_diff(105)
    assert tools.cli("apply", "--staging").returncode == 0
    staging = git(tools.world.fork, "rev-parse", f"{STAGING}^{{tree}}")
    assert tools.git_am_tree("main") == staging and tools.quilt_tree("main")[0] == staging


@pytest.mark.parametrize("number, how", [(101, "3-way"), (103, "offset"), (102, None)])
def test_first_patch_of_the_queue_is_checked_too(tools: Tools, number: int, how: str | None) -> None:
    """Alone in the queue (no trial build needed when the probe saw it go on exactly), each kind
    is still told apart, and the queue goes on with plain `git am` and quilt."""
    five_prs(tools)
    tools.import_(number)
    patch = tools.queue().get(number)
    assert (patch.regenerated.how if patch.regenerated else None) == how
    assert tools.cli("apply", "--staging").returncode == 0
    report = json.loads(tools.cli("apply", "--staging", "--json").stdout)
    assert report["patches"][0]["outcome"] == "clean"  # what `apply` meets is the stored file
    staging = git(tools.world.fork, "rev-parse", f"{STAGING}^{{tree}}")
    tree, said = tools.quilt_tree("main")
    assert tools.git_am_tree("main") == staging and tree == staging and "offset" not in said
