"""`porttrack.take.importer` and `porttrack.converge.coverage`: importing a PR's stable, separable hunks, refreshing
and dropping it, and hand-port coverage — on real git repositories (an upstream with
refs/pull/N/head, a fork clone) and the GitHub emulator."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from porttrack.common.errors import InputError, NotFound, PreconditionError, UnsafeInput
from porttrack.converge.coverage import track_coverage
from porttrack.git.repo import GitRepo
from porttrack.github.client import client_for
from porttrack.queue import manifest as queue_mod
from porttrack.queue.manifest import Selection, drop_patch
from porttrack.report.knowledge import gather
from porttrack.take.importer import import_pr
from porttrack.take.refresh import refresh_pr
from porttrack.tracks.file import load_config
from porttrack.workspace.files import Workspace
from testing.gitfixtures import Executable, Symlink, git, git_bytes
from testing.text import edit, numbered
from testing.workspace import make_workspace, track, tracks_document

GATE = {"job": {"command": "true"}, "matrix": {"contexts": [1024], "batches": [1]}, "promote": False}


A, B, C = numbered("a", 100), numbered("b", 60), numbered("c", 40)
INITIAL = {"a.py": A, "b.py": B, "c.py": C, "README.md": "upstream project\n"}


class Env:
    """The world (upstream + emulator + fork) plus a workspace whose tracks.yaml follows it."""

    def __init__(self, world, tmp_path: Path):
        self.world = world
        self.up = world.upstream
        self.up.commit(INITIAL, "project files")
        git(world.fork, "pull", "-q", "--ff-only", "upstream", "main")
        self.handle = make_workspace(tmp_path / "ws", {"spec": self.spec([101])},
                                     api_url=world.fake.base_url, fork=world.fork, token=world.token)
        self.ws = Workspace(self.handle.root)

    @staticmethod
    def spec(prs, gate: bool = True, **extra) -> dict:
        extra.setdefault("paths", {"exclude": ["docs/**"]})
        return track(prs, title="spec decode", **({"gate": GATE} if gate else {}), **extra)

    def tracks(self, tracks: dict) -> None:
        self.handle.write_tracks(tracks_document(tracks))
        text = self.ws.tracks_file.read_text()
        for t in tracks.values():  # tracks.yaml wants SHAs quoted; safe_dump leaves them bare
            for sha in t.get("fork_commits", ()):
                text = text.replace(f"- {sha}\n", f"- '{sha}'\n")
        self.ws.tracks_file.write_text(text)

    @property
    def config(self):
        return load_config(self.ws.tracks_file, fork_override=str(self.world.fork))

    def cli(self, *args: str, **env):
        return self.handle.run_in_process(*args, env=self.handle.env(**env))

    def status(self) -> None:
        out = self.cli("status", "--json")
        assert out.returncode == 0, out.stderr

    @property
    def repo(self) -> GitRepo:
        return GitRepo.open(self.world.fork)

    @property
    def client(self):
        return client_for(self.config.upstream.repo, self.world.fake.base_url, self.ws.cache_dir)

    def import_(self, number: int, **kw):
        return import_pr(self.ws, self.config, number, repo=self.repo, client=self.client, **kw)

    def queue(self):
        return queue_mod.load(self.ws)

    def patch_bytes(self, number: int) -> bytes:
        return queue_mod.read_patch(self.ws, self.queue().get(number))

    def files_state(self) -> dict[str, bytes]:
        """Every file under patches/ (what a refused or interrupted import must leave alone)."""
        root = self.ws.patches_dir
        return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()} if root.is_dir() else {}


@pytest.fixture
def env(world, tmp_path, monkeypatch) -> Env:
    e = Env(world, tmp_path)
    for key, value in e.handle.env().items():
        monkeypatch.setenv(key, value)
    return e


def changed_line(h) -> int:
    """The first changed line of a 3-line-context text hunk, from its '@@ -N,' header."""
    return int(re.match(r"@@ -(\d+)", h.where).group(1)) + 3


def table(plan) -> dict[tuple[str, int], tuple[bool, str | None]]:
    return {(h.path, changed_line(h)): (h.taken, h.reason) for h in plan.hunks if h.kind == "text"}


def mixed_pr(env: Env) -> None:
    """PR 101 over four files, recorded, then force-pushed changing two of its hunks; the fork
    carries a conflicting edit of b.py line 5."""
    w = env.world
    w.open_pr(101, {
        "a.py": edit(A, {10: "a_10 = 'ten'", 50: "a_50 = 'fifty'", 80: "a_80 = 'eighty'"}),
        "b.py": edit(B, {5: "b_5 = 'five'", 40: "b_40 = 'forty'"}),
        "c.py": edit(C, {20: "c_20 = 'twenty'", 30: "c_30 = 'thirty'"}),
        "docs/new.md": "# new\n",
    }, title="[Spec][V1] Fuse the speculator graph")
    env.status()
    w.force_push(101, {"a.py": edit(A, {10: "a_10 = 'ten'", 50: "a_50 = 'FIFTY'", 80: "a_80 = 'eighty'"}),
                       "c.py": edit(C, {20: "c_20 = 'twenty'", 30: "c_30 = 'THIRTY'"})})
    w.fork_commit({"b.py": edit(B, {5: "b_5 = 'fork five'"})}, "fork: local b.py tweak")


# ------------------------------------------------------------------------------ what is taken


def test_mixed_pr_takes_exactly_the_stable_separable_hunks(env: Env) -> None:
    mixed_pr(env)
    outcome = env.import_(101)
    plan = outcome.plan
    head = env.world.head(101)
    rows = table(plan)
    c30 = next(h.id for h in plan.hunks if (h.path, changed_line(h)) == ("c.py", 30))
    assert rows == {
        ("a.py", 10): (True, None),
        ("a.py", 50): (False, f"unstable: changed in revision {head[:12]}"),
        ("a.py", 80): (True, None),
        ("b.py", 5): (False, "not separable: conflicts with fork at b.py"),
        ("b.py", 40): (True, None),
        ("c.py", 20): (False, f"depends on left-out hunk {c30}"),
        ("c.py", 30): (False, f"unstable: changed in revision {head[:12]}"),
        ("docs/new.md", 3): (False, "excluded by path rule: docs/new.md matches tracks.spec.paths.exclude 'docs/**'"),
    }
    assert len(plan.revisions_compared) == 2 and plan.revisions_compared[-1] == head
    # the manifest says the same, hunk by hunk
    patch = env.queue().get(101)
    assert outcome.written and patch.state == "queued" and patch.gate == "spec"
    assert [h.id for h in patch.hunks_taken] == [h.id for h in plan.taken]
    assert {h.id: h.reason for h in patch.hunks_left_out} == {h.id: h.reason for h in plan.left_out}
    assert patch.revision.head == head and patch.revision.base == git(env.world.fork, "merge-base", head, "upstream/main")
    assert (env.ws.patches_dir / "series").read_text().splitlines()[1:] == [patch.file]


def test_patch_is_a_format_patch_mail_that_git_am_applies(env: Env, tmp_path: Path) -> None:
    mixed_pr(env)
    env.import_(101)
    data = env.patch_bytes(101)
    head = env.world.head(101)
    assert data.startswith(f"From {head} Mon Sep 17 00:00:00 2001\n".encode())
    text = data.decode()
    assert "\nFrom: contributor <contributor@users.noreply.github.com>\n" in text
    assert "\nSubject: [PATCH] upstream #101: [Spec][V1] Fuse the speculator graph\n" in text
    clone = tmp_path / "am"
    git(tmp_path, "clone", "-q", str(env.world.fork), str(clone))
    (tmp_path / "p.patch").write_bytes(data)
    git(clone, "am", "-q", str(tmp_path / "p.patch"))
    assert (clone / "a.py").read_text() == edit(A, {10: "a_10 = 'ten'", 80: "a_80 = 'eighty'"})
    assert (clone / "b.py").read_text() == edit(B, {5: "b_5 = 'fork five'", 40: "b_40 = 'forty'"})
    assert (clone / "c.py").read_text() == C and not (clone / "docs").exists()
    assert git(clone, "log", "-1", "--format=%s") == "upstream #101: [Spec][V1] Fuse the speculator graph"
    trailers = git(clone, "log", "-1", "--format=%(trailers:unfold)")
    patch = env.queue().get(101)
    assert f"Upstream-PR: vllm-project/vllm#101\nUpstream-Head: {head}\nPorttrack-Track: spec\n" in trailers + "\n"
    assert "Porttrack-Hunks: " + " ".join(h.id for h in patch.hunks_taken) in trailers


def test_quilt_push_applies_the_queue(env: Env, tmp_path: Path) -> None:
    if shutil.which("quilt") is None:
        pytest.fail("quilt is not installed (apt-get install quilt; .ci/run installs it)")
    w = env.world
    w.open_pr(101, {"a.py": edit(A, {10: "a_10 = 'ten'"})}, title="first")
    w.open_pr(103, {"c.py": edit(C, {20: "c_20 = 'twenty'"}), "d.py": "new = 1\n"}, title="second")
    env.tracks({"spec": env.spec([101, 103])})
    env.status()
    env.import_(101)
    env.import_(103)
    tree = tmp_path / "tree"
    tree.mkdir()
    archive = git_bytes(w.fork, "archive", "--format=tar", "main")
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    proc = subprocess.run(["quilt", "push", "-a"], cwd=tree, capture_output=True, text=True,
                          env={**env.handle.env(), "QUILT_PATCHES": str(env.ws.patches_dir)})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tree / "a.py").read_text() == edit(A, {10: "a_10 = 'ten'"})
    assert (tree / "c.py").read_text() == edit(C, {20: "c_20 = 'twenty'"}) and (tree / "d.py").read_text() == "new = 1\n"


def test_merged_pr_is_taken_from_its_merge_commit_and_is_stable(env: Env) -> None:
    w = env.world
    w.open_pr(101, {"a.py": edit(A, {10: "a_10 = 'ten'"})}, title="merged one")
    env.status()
    w.force_push(101, {"a.py": edit(A, {10: "a_10 = 'TEN'", 60: "a_60 = 'sixty'"})})
    merge = w.squash_merge(101)
    env.status()
    plan = env.import_(101).plan
    assert plan.revision.merged and plan.revision.head == merge == plan.revision.merge_commit
    assert plan.revision.base == git(w.fork, "rev-parse", f"{merge}^1")
    assert [(h.path, changed_line(h), h.taken, h.stable) for h in plan.hunks] == [("a.py", 10, True, True), ("a.py", 60, True, True)]


def test_already_present_hunk_is_left_out_with_its_reason(env: Env) -> None:
    w = env.world
    w.open_pr(101, {"a.py": edit(A, {10: "a_10 = 'ten'", 50: "a_50 = 'fifty'"})}, title="half ported")
    w.fork_commit({"a.py": edit(A, {10: "a_10 = 'ten'"})}, "fork: port a_10 by hand")
    env.status()
    rows = table(env.import_(101).plan)
    assert rows == {("a.py", 10): (False, "already in the fork: a.py already has this change"), ("a.py", 50): (True, None)}


def test_three_way_merge_makes_a_hunk_separable(env: Env) -> None:
    w = env.world
    # the fork changed the lines around a.py line 10 (the hunk's context) but not line 10 itself
    w.fork_commit({"a.py": edit(A, {8: "a_8 = 'fork'", 12: "a_12 = 'fork'"})}, "fork: nearby edits")
    w.open_pr(101, {"a.py": edit(A, {10: "a_10 = 'ten'"})}, title="needs a merge")
    env.status()
    plan = env.import_(101).plan
    assert [(h.taken, h.applies) for h in plan.hunks] == [(True, "3-way")]


def test_ungated_track_records_the_patch_as_ungated(env: Env) -> None:
    env.world.open_pr(101, {"a.py": edit(A, {10: "a_10 = 'ten'"})}, title="no gate")
    env.tracks({"spec": env.spec([101], gate=False)})
    env.status()
    outcome = env.import_(101)
    assert (outcome.patch.state, outcome.patch.gate) == ("ungated", None)
    assert "can never be promoted" in outcome.patch.history[0].why


def test_dry_run_writes_nothing(env: Env) -> None:
    env.world.open_pr(101, {"a.py": edit(A, {10: "a_10 = 'ten'"})}, title="dry")
    env.status()
    before = env.files_state()
    outcome = env.import_(101, dry_run=True)
    assert not outcome.written and outcome.patch.name == "0001-pr101-dry" and outcome.plan.mail
    assert env.files_state() == before


def test_second_import_of_a_queued_pr_is_refused(env: Env) -> None:
    env.world.open_pr(101, {"a.py": edit(A, {10: "a_10 = 'ten'"})}, title="once")
    env.status()
    name = env.import_(101).patch.name
    with pytest.raises(PreconditionError, match=f"already queued as {name}"):
        env.import_(101)


def test_flags_exclude_paths(env: Env) -> None:
    env.world.open_pr(101, {"a.py": edit(A, {10: "a_10 = 'ten'"}), "b.py": edit(B, {5: "b_5 = 'five'"}),
                            "c.py": edit(C, {5: "c_5 = 'five'"})}, title="three files")
    env.status()
    plan = env.import_(101, selection=Selection(paths=("a.py", "b.py"), exclude=("b.*",)), dry_run=True).plan
    assert table(plan) == {
        ("a.py", 5 + 5): (True, None),
        ("b.py", 2 + 3): (False, "excluded by path rule: b.py matches --exclude 'b.*'"),
        ("c.py", 2 + 3): (False, "excluded by path rule: c.py does not match --paths"),
    }


# -------------------------------------------------------------------------------- selection


def test_hunk_subset_missing_its_dependencies_is_refused(env: Env) -> None:
    env.world.open_pr(101, {"a.py": edit(A, {10: "a_10 = 'ten'"}),
                            "c.py": edit(C, {20: "c_20 = 'twenty'", 30: "c_30 = 'thirty'"})}, title="pairs")
    env.status()
    plan = env.import_(101, dry_run=True).plan
    ids = {(h.path, changed_line(h)): h.id for h in plan.hunks}
    assert plan.hunks[1].group == plan.hunks[2].group  # c.py's two hunks are adjacent: one group
    with pytest.raises(PreconditionError) as refused:
        env.import_(101, selection=Selection(hunks=(ids[("c.py", 20)],)))
    assert f"{ids[('c.py', 30)]} (c.py)" in str(refused.value)
    assert env.files_state() == {}
    with pytest.raises(InputError, match="is not a hunk"):
        env.import_(101, selection=Selection(hunks=("ffffffffffff",)), dry_run=True)
    # a subset with its dependencies is fine (a unique prefix will do); the rest is "not selected"
    outcome = env.import_(101, selection=Selection(hunks=(ids[("c.py", 30)], ids[("c.py", 20)][:8])))
    assert table(outcome.plan) == {("a.py", 10): (False, "not selected"), ("c.py", 20): (True, None), ("c.py", 30): (True, None)}
    assert outcome.patch.selection.hunks == (ids[("c.py", 20)], ids[("c.py", 30)])


def test_through_takes_the_pr_only_up_to_a_commit(env: Env) -> None:
    w = env.world
    first = w.open_pr(101, {"a.py": edit(A, {10: "a_10 = 'ten'"})}, title="two steps")
    env.status()
    second = w.append(101, {"b.py": edit(B, {40: "b_40 = 'forty'"})})
    with pytest.raises(PreconditionError, match="not a commit of #101"):
        env.import_(101, through=git(w.fork, "rev-parse", "upstream/main"), dry_run=True)
    outcome = env.import_(101, through=first[:10])
    rev = outcome.patch.revision
    assert (rev.head, rev.through) == (second, first)
    assert table(outcome.plan) == {("a.py", 10): (True, None)}
    data = env.patch_bytes(101).decode()
    assert data.startswith(f"From {first} ") and f"Upstream-Through: {first}\n" in data and f"Upstream-Head: {second}\n" in data


# ----------------------------------------------------------------------------------- stacks


def test_stacked_pr_waits_for_its_base_to_be_queued_or_merged(env: Env) -> None:
    w = env.world
    w.open_pr(101, {"a.py": edit(A, {10: "a_10 = 'ten'"})}, title="bottom")
    w.open_pr(102, {"b.py": edit(B, {40: "b_40 = 'forty'"})}, title="top", stacked_on=101)
    env.tracks({"spec": env.spec([101, 102])})
    env.status()
    with pytest.raises(PreconditionError) as refused:
        env.import_(102)
    assert "#102 is stacked on #101 (open" in str(refused.value) and "porttrack import 101" in str(refused.value)
    assert env.files_state() == {}
    bottom = env.import_(101).patch
    top = env.import_(102)
    assert top.patch.depends_on == (bottom.name,)
    assert top.patch.revision.base == bottom.revision.head  # only #102's own changes
    assert [h.path for h in top.plan.hunks] == ["b.py"]


def test_stacked_pr_is_probed_on_top_of_its_queued_base(env: Env) -> None:
    w = env.world
    w.open_pr(101, {"a.py": edit(A, {10: "a_10 = 'ten'"})}, title="bottom")
    w.open_pr(102, {"a.py": edit(A, {10: "a_10 = 'TEN'", 11: "a_11 = 'eleven'"})}, title="top", stacked_on=101)
    env.tracks({"spec": env.spec([101, 102])})
    env.status()
    env.import_(101)
    top = env.import_(102).plan
    assert [(h.taken, h.applies) for h in top.hunks] == [(True, "clean")]  # its pre-image is #101's post-image


def test_stacked_pr_is_importable_once_its_base_merged(env: Env) -> None:
    w = env.world
    w.open_pr(101, {"a.py": edit(A, {10: "a_10 = 'ten'"})}, title="bottom")
    w.open_pr(102, {"b.py": edit(B, {40: "b_40 = 'forty'"})}, title="top", stacked_on=101)
    env.tracks({"spec": env.spec([101, 102])})
    env.status()
    w.squash_merge(101)
    env.status()
    outcome = env.import_(102)
    assert outcome.written and outcome.patch.depends_on == ()


# ---------------------------------------------------------------------------------- bad input


def _replace_pr_head(env: Env, number: int, add_tree_entries: list[str]) -> str:
    """Point refs/pull/N/head at a commit whose root tree has extra raw entries (mktree lines):
    what a hostile upstream could serve, and what `git add` would never make."""
    bare = env.up.path
    head = env.world.head(number)
    listing = git(bare, "ls-tree", f"{head}^{{tree}}").splitlines()
    tree = git(bare, "mktree", input=("\n".join(listing + add_tree_entries) + "\n").encode())
    commit = git(bare, "commit-tree", tree, "-p", head, "-m", "hostile")
    git(bare, "update-ref", f"refs/pull/{number}/head", commit)
    env.world.fake.put_pull(env.world.upstream_repo, number, head_sha=commit)
    return commit


def _blob(env: Env, data: bytes) -> str:
    return git(env.up.path, "hash-object", "-w", "--stdin", input=data)


@pytest.mark.parametrize("hostile", ["dotgit", "dotdot", "symlink-out", "symlink-abs"])
def test_hostile_paths_are_refused_and_nothing_is_written(env: Env, hostile: str) -> None:
    w = env.world
    w.open_pr(102, {"b.py": edit(B, {5: "b_5 = 'five'"})}, title="innocent")
    w.open_pr(101, {"a.py": edit(A, {10: "a_10 = 'ten'"})} if not hostile.startswith("symlink") else
              {"a.py": edit(A, {10: "a_10 = 'ten'"}),
               "link": Symlink("../../../etc/passwd" if hostile == "symlink-out" else "/etc/passwd")},
              title="hostile")
    env.tracks({"spec": env.spec([101, 102])})
    if hostile == "dotgit":
        hook = _blob(env, b"#!/bin/sh\necho owned\n")
        hooks = git(env.up.path, "mktree", input=f"100755 blob {hook}\tpost-checkout\n".encode())
        dotgit = git(env.up.path, "mktree", input=f"040000 tree {hooks}\thooks\n".encode())
        _replace_pr_head(env, 101, [f"040000 tree {dotgit}\t.git"])
    elif hostile == "dotdot":
        blob = _blob(env, b"x\n")
        _replace_pr_head(env, 101, [f"100644 blob {blob}\t.."])
    env.status()
    env.import_(102)
    before = env.files_state()
    with pytest.raises(UnsafeInput) as refused:
        env.import_(101)
    message = str(refused.value)
    assert {"dotgit": ".git", "dotdot": "'..'", "symlink-out": "outside the work tree", "symlink-abs": "absolute"}[hostile] in message
    assert env.files_state() == before
    assert not (env.world.fork / ".git" / "hooks" / "post-checkout").exists()


BINARY_OLD = bytes(range(256)) * 4
BAD_INPUT_FILES = {
    "data.bin": BINARY_OLD,
    "old_name.py": numbered("r", 30),
    "run.sh": "#!/bin/sh\necho run\n",
    "gone.txt": "to be deleted\n",
    "noeol.txt": "one\ntwo\nthree",
    "crlf.txt": "l1\r\nl2\r\nl3\r\nl4\r\n",
    "latin1.txt": b"caf\xe9\nna\xefve\n",
    "caf\u00e9 menu.txt": "soup\nbread\n",
    'quo"te.txt': "q\n",
}


def test_awkward_diffs_are_taken_whole_and_git_am_reproduces_the_pr(env: Env, tmp_path: Path) -> None:
    w = env.world
    env.up.commit(BAD_INPUT_FILES, "awkward files")
    git(w.fork, "pull", "-q", "--ff-only", "upstream", "main")
    head = w.open_pr(101, {
        "data.bin": BINARY_OLD[::-1],
        "img.bin": b"\x89PNG\r\n\x1a\n\x00\x00binary",
        "old_name.py": None,
        "new_name.py": edit(numbered("r", 30), {15: "r_15 = 'moved'"}),
        "run.sh": Executable("#!/bin/sh\necho run\n"),
        "gone.txt": None,
        "noeol.txt": "one\ntwo\nTHREE",
        "crlf.txt": "l1\r\nL2\r\nl3\r\nl4\r\n",
        "latin1.txt": b"caf\xe9\nna\xefve!\n",
        "caf\u00e9 menu.txt": "soup\nbread\ncheese\n",
        'quo"te.txt': "q\nQ\n",
    }, title="awkward")
    env.status()
    outcome = env.import_(101)
    assert not outcome.plan.left_out, [(h.path, h.reason) for h in outcome.plan.left_out]
    kinds = {(h.path, h.kind) for h in outcome.plan.hunks}
    assert {("data.bin", "binary"), ("img.bin", "binary"), ("new_name.py", "meta"), ("run.sh", "meta")} <= kinds
    clone = tmp_path / "am"
    git(tmp_path, "clone", "-q", str(w.fork), str(clone))
    (tmp_path / "p.patch").write_bytes(env.patch_bytes(101))
    # --keep-cr: without it `git am` strips the CR of every mail line, crlf.txt's included (the
    # same holds for `git format-patch` output of a CRLF file)
    git(clone, "am", "-q", "--keep-cr", str(tmp_path / "p.patch"))
    assert git(clone, "rev-parse", "HEAD^{tree}") == git(w.fork, "rev-parse", f"{head}^{{tree}}")


# ------------------------------------------------------------------------------------ refresh


def test_refresh_reports_per_hunk_changes_and_updates_only_when_asked(env: Env) -> None:
    w = env.world
    w.open_pr(101, {"a.py": edit(A, {10: "a_10 = 'ten'", 50: "a_50 = 'fifty'"}), "b.py": edit(B, {40: "b_40 = 'forty'"})},
              title="moving")
    env.status()
    patch = env.import_(101).patch
    assert len(patch.hunks_taken) == 3
    w.force_push(101, {"a.py": edit(A, {10: "a_10 = 'ten'", 50: "a_50 = 'FIFTY'", 90: "a_90 = 'ninety'"}), "b.py": B})
    before = env.files_state()
    result = refresh_pr(env.ws, env.config, 101, repo=env.repo, client=env.client)
    assert result.moved and result.counts() == {"new": 1, "removed": 1, "changed": 1, "unchanged": 1}
    rows = {(h.change, h.path): (h.was_taken, h.now_taken) for h in result.hunks}
    assert rows == {("unchanged", "a.py"): (True, True), ("changed", "a.py"): (True, False),
                    ("new", "a.py"): (None, False), ("removed", "b.py"): (True, None)}
    assert env.files_state() == before  # no --update: nothing written
    updated = refresh_pr(env.ws, env.config, 101, update=True, repo=env.repo, client=env.client)
    after = env.queue().get(patch.name)
    assert updated.written and after == updated.patch_after
    assert after.revision.head == w.head(101) and [h.id for h in after.hunks_taken] == [patch.hunks_taken[0].id]
    assert after.state == "queued" and "gate evidence must be earned again" in after.history[-1].why
    assert not (env.ws.patches_dir / patch.file).exists() and (env.ws.patches_dir / after.file).exists()
    again = refresh_pr(env.ws, env.config, 101, update=True, repo=env.repo, client=env.client)
    assert not again.moved and not again.written
    with pytest.raises(NotFound):
        refresh_pr(env.ws, env.config, 555, repo=env.repo, client=env.client)


# --------------------------------------------------------------------------------------- drop


def test_drop_retires_the_patch_with_its_reason(env: Env) -> None:
    env.world.open_pr(101, {"a.py": edit(A, {10: "a_10 = 'ten'"})}, title="to drop")
    env.status()
    patch = env.import_(101).patch
    before = env.files_state()
    dry = drop_patch(env.ws, "101", "superseded by #200", dry_run=True)
    assert dry.after.state == "dropped" and not dry.written and env.files_state() == before
    with pytest.raises(InputError):
        drop_patch(env.ws, patch.name, "   ")
    result = drop_patch(env.ws, patch.name[:6], "superseded by #200")
    dropped = env.queue().get(patch.name)
    assert result.written and dropped.state == "dropped" and dropped.history[-1].why == "superseded by #200"
    assert (env.ws.patches_dir / "retired" / patch.file).exists() and not (env.ws.patches_dir / patch.file).exists()
    assert (env.ws.patches_dir / "series").read_text().splitlines()[1:] == []
    with pytest.raises(PreconditionError, match="already dropped"):
        drop_patch(env.ws, patch.name, "again")
    # once dropped, the PR can be imported afresh
    assert env.import_(101).patch.name.startswith("0002-pr101-")


# ----------------------------------------------------------------------------------- coverage


def test_coverage_of_a_hand_port_shows_in_queue_and_status(env: Env) -> None:
    w = env.world
    w.open_pr(106, {"a.py": edit(A, {10: "a_10 = 'ten'", 50: "a_50 = 'fifty'", 90: "a_90 = 'ninety'"})}, title="warmup")
    port = w.fork_commit({"a.py": edit(A, {10: "a_10 = 'ten'", 50: "a_50 = 'fifty'"})}, "fork: port warmup (partial)")
    env.tracks({"warmup": env.spec([106], fork_commits=[port[:9]])})
    env.status()
    (cov,) = track_coverage(env.ws, env.config, env.repo)
    assert (cov.pr, cov.present, cov.total, cov.fork_commits_missing) == (106, 2, 3, ())
    assert [h.state for h in cov.hunks] == ["applied", "applied", "not-applied"]
    assert cov.text == f"coverage 2/3 hunks present in the fork (fork carries {port[:9]})"
    assert gather(env.ws, env.config, env.repo).coverage == {106: cov.text}
    status = json.loads(env.cli("status", "--offline", "--json").stdout)
    assert cov.text in status["tracks"][0]["prs"][0]["notes"]
    listing = json.loads(env.cli("queue", "--json").stdout)
    assert listing["coverage"][0]["present"] == 2 and listing["coverage"][0]["total"] == 3


def test_coverage_says_why_it_is_unknown(env: Env) -> None:
    env.world.open_pr(106, {"a.py": edit(A, {10: "a_10 = 'ten'"})}, title="never fetched")
    env.tracks({"warmup": env.spec([106], fork_commits=["abcdef1"])})
    (cov,) = track_coverage(env.ws, env.config, env.repo)
    assert cov.problem and "not in the fork checkout" in cov.problem and cov.fork_commits_missing == ("abcdef1",)
    assert cov.text.startswith("coverage unknown: ")


def test_knowledge_lists_queued_prs_for_status(env: Env) -> None:
    env.world.open_pr(101, {"a.py": edit(A, {10: "a_10 = 'ten'"})}, title="queued one")
    env.status()
    env.import_(101)
    know = gather(env.ws, env.config, env.repo)
    assert know.queued == {101: "queued"}
    status = json.loads(env.cli("status", "--offline", "--json").stdout)
    assert status["tracks"][0]["next_action"]["kind"] == "queued"


def test_refresh_keeps_the_hunk_selection_of_the_import(env: Env) -> None:
    w = env.world
    w.open_pr(101, {"a.py": edit(A, {10: "a_10 = 'ten'", 50: "a_50 = 'fifty'"})}, title="pick one")
    env.status()
    first = env.import_(101, dry_run=True).plan.hunks[0].id
    patch = env.import_(101, selection=Selection(hunks=(first,))).patch
    w.append(101, {"b.py": edit(B, {40: "b_40 = 'forty'"})})
    result = refresh_pr(env.ws, env.config, 101, update=True, repo=env.repo, client=env.client)
    after = result.patch_after
    assert result.written and [h.id for h in after.hunks_taken] == [first]
    assert {h.path: h.reason for h in after.hunks_left_out} == {"a.py": "not selected", "b.py": "not selected"}
    assert after.state == "queued" and "the same hunks" in after.history[-1].why
    assert after.revision.head == w.head(101) != patch.revision.head
