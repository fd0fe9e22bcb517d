"""Import speed on real history without verdict changes (issue 34): the groups probed alone on
copies of their files (`separability.copies_of`), the probe's index holding only the PR's paths
(`separability.only_paths`), the regenerated mail's diffstat made in Python (`mail.apply_stat`),
and the git processes of an import of real vLLM PRs over an older fork base (the slice).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from porttrack.diff.hunks import parse_diff
from porttrack.diff.relations import dependency_groups
from porttrack.git.repo import GitRepo
from porttrack.queue.mail import apply_stat
from porttrack.take import separability
from porttrack.take.separability import apply_all, only_paths, patch_of, probe_groups, probe_one_by_one
from testing.gitcount import GitCounter
from testing.gitfixtures import git

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT.parent / "shared" / "data" / "vllm-slice.bundle"
SQUASH = {46849: "8a3064361a90deee69dcd8100b427a7bd1b594e6", 48407: "aadab92253eec07de8560da322fdfede049bacd5"}


def _repo(tmp_path: Path) -> Path:
    path = tmp_path / "r"
    git(tmp_path, "init", "-q", "-b", "main", str(path))
    return path


def _commit(repo: Path, files: dict[str, bytes | None], message: str = "c") -> str:
    for name, data in files.items():
        target = repo / name
        if data is None:
            git(repo, "rm", "-q", "--", name)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        git(repo, "add", "--", name)
    git(repo, "commit", "-q", "--allow-empty", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def _lines(n: int, tag: str = "x") -> bytes:
    return b"".join(b"%s_%d = %d\n" % (tag.encode(), i, i) for i in range(n))


# -- the diffstat -----------------------------------------------------------------------------------


def test_apply_stat_is_what_git_apply_stat_prints(tmp_path):
    """Names past 50 columns (shortened at a slash, or not), a change larger than the 70-column
    bar, binary files, renames, a mode change, deletions, empty files, one insertion, only
    deletions: each diff's `apply_stat` byte for byte against `git apply --stat` (C locale)."""
    repo = _repo(tmp_path)
    long_dir = "a_rather_long_folder_name/another_quite_long_sub_folder/"
    base = _commit(repo, {
        "small.py": _lines(10), "big.py": _lines(300), f"{long_dir}deep_module_name.py": _lines(40),
        "x" * 60 + ".txt": _lines(5), "gone.py": _lines(30), "moved_from.py": _lines(50), "img.bin": bytes(range(256)) * 4,
        "script.sh": b"echo hi\n",
    })
    diffs = []
    second = _commit(repo, {
        "small.py": _lines(10) + b"one_more = 1\n", "big.py": _lines(300, "y"), f"{long_dir}deep_module_name.py": _lines(38),
        "x" * 60 + ".txt": _lines(6), "gone.py": None, "img.bin": bytes(range(255, -1, -1)) * 4, "empty.txt": b"",
    })
    diffs.append((base, second))
    git(repo, "mv", "moved_from.py", "moved_to.py")
    (repo / "moved_to.py").write_bytes(_lines(50) + b"tail = 1\n")
    git(repo, "add", "moved_to.py")
    (repo / "script.sh").chmod(0o755)
    git(repo, "add", "script.sh")
    git(repo, "commit", "-q", "-m", "rename and mode")
    third = git(repo, "rev-parse", "HEAD")
    diffs += [(second, third), (base, third)]
    only_deletions = _commit(repo, {"small.py": _lines(9)})
    diffs += [(third, only_deletions)]
    compared = 0
    for a, b in diffs:
        diff = subprocess.run(["git", "diff", "--binary", "--full-index", "-M", a, b], cwd=repo, capture_output=True,
                              check=True).stdout
        want = subprocess.run(["git", "apply", "--stat", "-"], cwd=repo, input=diff, capture_output=True, check=True,
                              env={"LC_ALL": "C", "PATH": "/usr/bin:/bin"}).stdout.decode()
        assert apply_stat(parse_diff(diff)) == want, (a, b)
        compared += 1
    assert compared == 4
    # a name git would C-quote is left to git
    assert apply_stat(parse_diff(b'diff --git "a/caf\\303\\251.py" "b/caf\\303\\251.py"\nindex 1..2 100644\n'
                                 b'--- "a/caf\\303\\251.py"\n+++ "b/caf\\303\\251.py"\n@@ -1 +1 @@\n-a\n+b\n')) is None


@pytest.mark.parametrize("pr", [48407, 46849])
def test_apply_stat_on_real_vllm_diffs(tmp_path, pr):
    """The real #48407 and #46849 squashes (the slice) and the diff from the slice's first commit."""
    if not BUNDLE.is_file():
        pytest.fail(f"{BUNDLE} is missing: this test runs on the real vLLM history slice (../shared/data)")
    bare = tmp_path / "slice.git"
    git(tmp_path, "clone", "-q", "--bare", str(BUNDLE), str(bare))
    first = git(bare, "rev-list", "--max-parents=0", "main").split()[-1]
    for a, b in ((f"{SQUASH[pr]}^", SQUASH[pr]), (first, f"{SQUASH[pr]}^")):
        diff = subprocess.run(["git", "diff", "--binary", "--full-index", "-M", a, b], cwd=bare, capture_output=True,
                              check=True).stdout
        want = subprocess.run(["git", "apply", "--stat", "-"], cwd=bare, input=diff, capture_output=True, check=True,
                              env={"LC_ALL": "C", "PATH": "/usr/bin:/bin"}).stdout.decode()
        assert apply_stat(parse_diff(diff)) == want


# -- each group alone, in one check and one merge ----------------------------------------------------


def _counted_applies(monkeypatch, probe) -> list[tuple[str, ...]]:
    calls: list[tuple[str, ...]] = []
    real = probe.apply

    def apply(patch, *flags, index="index"):
        calls.append(flags)
        return real(patch, *flags, index=index)

    monkeypatch.setattr(probe, "apply", apply)
    return calls


def test_groups_probed_alone_on_copies_give_the_one_by_one_verdicts_in_two_git_apply(tmp_path, monkeypatch):
    """One file with a group that goes in as it is, one already in the fork, one that merges
    3-way and one that conflicts, a second file the fork lacks: the verdicts and the files named
    are those of `probe_one_by_one`, and the batched probe asks git twice after the all-at-once
    apply (one `--check --reject` of every group and its reverse, one `--3way`)."""
    repo = _repo(tmp_path)
    text = [b"line_%d = %d\n" % (i, i) for i in range(200)]

    def content(changes: dict[int, bytes]) -> bytes:
        return b"".join(changes.get(i, line) for i, line in enumerate(text))

    base = _commit(repo, {"m.py": content({}), "other.py": _lines(20)})
    upstream = _commit(repo, {"m.py": content({10: b"clean = 1\n", 60: b"present = 1\n", 110: b"merged = 1\n",
                                               160: b"conflicting = 1\n"}), "other.py": _lines(21),
                              "fresh.py": _lines(5)})
    diff = subprocess.run(["git", "diff", "--full-index", base, upstream], cwd=repo, capture_output=True, check=True).stdout
    git(repo, "checkout", "-q", "-b", "fork", base)
    (repo / "fresh.py").unlink(missing_ok=True)
    tip = _commit(repo, {"m.py": content({60: b"present = 1\n", 112: b"line_112 = 'fork'\n", 160: b"fork_side = 1\n"}),
                         "other.py": None})
    files = parse_diff(diff)
    groups = dependency_groups(files)
    candidates = list(range(len(groups)))
    gitrepo = GitRepo.open(repo)
    with gitrepo.scratch_index("import") as probe:
        probe.read_tree(tip)
        first = apply_all(probe, patch_of(files, set().union(*groups)))
        assert not first.ok
        old = probe_one_by_one(probe, files, groups, candidates, first)
        calls = _counted_applies(monkeypatch, probe)
        new = probe_groups(probe, files, groups, candidates, first)
    assert new == old, (old, new)
    assert sorted(how for how, _where in new.values()) == ["3-way", "clean", "clean", "conflict", "conflict", "present"], new
    assert len(calls) == 2 and "--3way" in calls[1], calls


def test_a_folder_meeting_a_file_reads_the_whole_tree(tmp_path):
    """`only_paths` writes the index of the PR's paths alone, except where a path lies under a file
    or symlink of the tip, or is a folder there (git would refuse what a partial index lets pass)."""
    repo = _repo(tmp_path)
    tip = _commit(repo, {"pkg/mod.py": b"a = 1\n", "pkg/sub/deep.py": b"b = 2\n", "top.txt": b"t\n"})
    gitrepo = GitRepo.open(repo)
    with gitrepo.scratch_index("import") as probe:
        assert only_paths(probe, tip, ["pkg/mod.py", "pkg/new.py"])
        listed = subprocess.run(["git", "ls-files", "-s"], cwd=repo, env={**probe.env(), "PATH": "/usr/bin:/bin"},
                                capture_output=True, text=True, check=True).stdout
        assert [line.split("\t")[1] for line in listed.splitlines()] == ["pkg/mod.py"]
        assert not only_paths(probe, tip, ["top.txt/inside.py"])  # under a file of the tip
        assert not only_paths(probe, tip, ["pkg/sub"])  # a folder at the tip
        entries = separability.read_index_file(probe.path("index").read_bytes(), 20)
        assert entries is not None and list(entries) == ["pkg/mod.py"]  # left as the first call wrote it


# -- the git processes of a real import over an older base --------------------------------------------


@pytest.mark.parametrize("pr", [48407, 46849])
def test_importing_real_vllm_prs_over_an_older_base_costs_few_git_processes(tmp_path, pr):
    """#48407 (conflicts) and #46849 (conflicts, 3-way merges, two hunks the source check names)
    over the fork at upstream main as of 2026-07-01, on the slice: at most 11 git processes besides
    the `update-ref` that records a PR head seen for the first time, at most 5 of them `git apply`
    (with a reverse pass and 3-way rounds: 15 and 18, 8 and 11 `git apply`; the full-history
    figures are in proofs/results/import_real.json)."""
    from tests.take.test_importer_vllm_slice import _world

    if not BUNDLE.is_file():
        pytest.fail(f"{BUNDLE} is missing: this test runs on the real vLLM history slice (../shared/data)")
    slice_repo = tmp_path / "slice.git"
    git(tmp_path, "clone", "-q", "--bare", str(BUNDLE), str(slice_repo))
    (tmp_path / "w").mkdir()
    ws, fork, base, head = _world(tmp_path / "w", slice_repo, pr)
    counter = GitCounter(tmp_path / "gitcount")
    env = ws.env()
    out = ws.run("import", str(pr), "--offline", "--json", env={**env, **counter.env(env)})
    assert out.returncode == 0, out.stderr
    plan = json.loads(out.stdout)
    assert plan["source_check"]["ok"]
    calls = counter.summary()
    by = calls["by_command"]
    assert calls["processes"] - by.get("update-ref", 0) <= 11 and by.get("update-ref", 0) <= 1, json.dumps(calls)
    assert by["apply"] <= 5, json.dumps(calls)
    kinds = {h["reason_kind"] for h in plan["hunks"] if not h["taken"]}
    assert "not separable" in kinds, kinds
