"""`porttrack import` of real vLLM PRs over an older fork (issue 30, item 13 and the import
acceptance), on the slice of real upstream history in ../shared/data/vllm-slice.bundle.

#48407 and #46849 are opened as they were (refs/pull/N/head = the squash's tree on its first
parent, upstream main at that parent) and imported into a fork whose base is upstream main as of
2026-07-01, older than both PRs. Today's queue must be one whose modules import: the queue is
applied with `git am` on a clone of the fork, and an oracle that is not porttrack's checks each
Python file the PR touches: pyflakes straight on the file (no new undefined name against the
fork's base; it still compiles), and every `from vllm... import name` resolved with pyflakes' own
module scope of the imported module (no import that resolved at the fork's base, or that names a
module of the PR's tree, stops resolving). Or the import refuses (exit 1), naming the hunks, and
writes nothing. An exit 0 with a failing source check is never allowed.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
from collections import Counter
from pathlib import Path

import pytest
from pyflakes import checker, messages

from testing.gitfixtures import git
from testing.workspace import make_workspace, track

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT.parent / "shared" / "data" / "vllm-slice.bundle"
SQUASH = {46849: "8a3064361a90deee69dcd8100b427a7bd1b594e6", 48407: "aadab92253eec07de8560da322fdfede049bacd5"}
FORK_BASE_DATE = "2026-07-01T00:00:00Z"  # upstream main then: older than both PRs


@pytest.fixture(scope="module")
def slice_repo(tmp_path_factory):
    if not BUNDLE.is_file():
        pytest.fail(f"{BUNDLE} is missing: these tests run on the real vLLM history slice beside the clone (../shared/data)")
    root = tmp_path_factory.mktemp("vllm-slice")
    git(root, "clone", "-q", "--bare", str(BUNDLE), str(root / "slice.git"))
    return root / "slice.git"


def _world(tmp_path: Path, slice_repo: Path, pr: int):
    """upstream (the PR open, main at its parent), the fork at main as of FORK_BASE_DATE, a workspace."""
    up = tmp_path / "upstream.git"
    git(tmp_path, "clone", "-q", "--bare", "--shared", str(slice_repo), str(up))
    squash = SQUASH[pr]
    head = git(up, "commit-tree", f"{squash}^{{tree}}", "-p", f"{squash}^", "-m", f"#{pr} as its head", env={
        "GIT_AUTHOR_NAME": "contributor", "GIT_AUTHOR_EMAIL": "c@example.invalid", "GIT_COMMITTER_NAME": "github",
        "GIT_COMMITTER_EMAIL": "g@example.invalid", "GIT_AUTHOR_DATE": "1785000000 +0000", "GIT_COMMITTER_DATE": "1785000000 +0000"})
    git(up, "update-ref", f"refs/pull/{pr}/head", head)
    git(up, "update-ref", "refs/heads/main", f"{squash}^")
    git(up, "symbolic-ref", "HEAD", "refs/heads/main")
    fork = tmp_path / "fork"
    git(tmp_path, "clone", "-q", "--no-checkout", "--origin", "upstream", str(up), str(fork))
    base = git(fork, "rev-list", "-1", "--first-parent", f"--before={FORK_BASE_DATE}", f"{squash}^")
    git(fork, "update-ref", "refs/heads/main", base)
    git(fork, "symbolic-ref", "HEAD", "refs/heads/main")
    git(fork, "read-tree", "main")
    ws = make_workspace(tmp_path / "ws", {"t": track([pr])}, fork=fork, token=None)
    record = {"number": pr, "title": f"vLLM #{pr}", "author": "contributor", "state": "open", "html_url": "",
              "created_at": "2026-07-01T00:00:00Z", "updated_at": None, "merged_at": None, "closed_at": None,
              "merge_commit_sha": None, "head_sha": head, "head_ref": f"pr{pr}", "base_ref": "main", "base_sha": None,
              "default_branch": "main", "observed_at": "2026-08-25T00:00:00Z"}
    (ws.root / "state").mkdir()
    (ws.root / "state" / "upstream.json").write_text(json.dumps({
        "schema": "porttrack/upstream-state/v1", "upstream": "vllm-project/vllm", "observed_at": "2026-08-25T00:00:00Z",
        "source": "test", "prs": {str(pr): record}}))
    return ws, fork, base, head


# -- the oracle: pyflakes on the files, and pyflakes' module scopes for imports ------------------------

def _undefined(source: bytes, path: str) -> Counter:
    compile(source, path, "exec")
    found = checker.Checker(ast.parse(source), filename=path).messages
    return Counter(m.message_args[0] for m in found if isinstance(m, (messages.UndefinedName, messages.UndefinedLocal)))


def _module_names(source: bytes, path: str) -> set[str] | None:
    """The names pyflakes binds in the module's own scope (None: a star import or __getattr__)."""
    found = checker.Checker(ast.parse(source), filename=path)
    scope = next(s for s in found.deadScopes if type(s).__name__ == "ModuleScope")
    if scope.importStarred or "__getattr__" in scope:
        return None
    return set(scope)


class Tree:
    def __init__(self, repo: Path, rev: str) -> None:
        self.repo, self.rev = repo, rev
        listing = git(repo, "ls-tree", "-r", "--name-only", rev).splitlines()
        self.files = set(listing)
        self.dirs = {p.rsplit("/", 1)[0] for p in listing if "/" in p}
        self.dirs |= {d.rsplit("/", k)[0] for d in list(self.dirs) for k in range(1, d.count("/") + 1)}

    def read(self, path: str) -> bytes:
        return subprocess.run(["git", "cat-file", "blob", f"{self.rev}:{path}"], cwd=self.repo, capture_output=True, check=True).stdout

    def unresolved(self, path: str) -> set[tuple[str, str]]:
        """(module, name) of each unguarded `from M import n` of a module of this tree that does not resolve."""
        tree = ast.parse(self.read(path))
        guarded = {id(n) for t in ast.walk(tree) if isinstance(t, ast.Try) for b in t.body for n in ast.walk(b)}
        out = set()
        package = path.split("/")[:-1]
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or id(node) in guarded:
                continue
            parts = (package[:len(package) - node.level + 1] if node.level else []) + (node.module.split(".") if node.module else [])
            base = "/".join(parts)
            file = next((p for p in (base + ".py", base + "/__init__.py") if p in self.files), None)
            if file is None and base not in self.dirs:
                if parts and parts[0] in ("vllm", "tests"):
                    out.add((".".join(parts), ""))
                continue
            names = _module_names(self.read(file), file) if file else set()
            for alias in node.names:
                sub = f"{base}/{alias.name}"
                if alias.name == "*" or names is None or alias.name in names or sub + ".py" in self.files or sub in self.dirs:
                    continue
                out.add((".".join(parts), alias.name))
        return out


def _check_queue(ws, fork: Path, base: str, head: str, tmp_path: Path) -> dict:
    applied = tmp_path / "applied"
    git(tmp_path, "clone", "-q", "--no-checkout", str(fork), str(applied))
    git(applied, "checkout", "-q", "-B", "work", base)
    series = [ln for ln in (ws.root / "patches" / "series").read_text().splitlines() if ln.strip() and not ln.startswith("#")]
    for name in series:
        subprocess.run(["git", "am", "-q", str(ws.root / "patches" / name)], cwd=applied, check=True,
                       env={**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
                            "GIT_COMMITTER_EMAIL": "t@e"})
    before, after = Tree(applied, base), Tree(applied, "HEAD")
    pr_paths = [p for p in git(fork, "diff", "--name-only", f"{head}^", head).splitlines() if p.endswith(".py")]
    pr_tree = Tree(fork, head)
    problems = []
    for path in pr_paths:
        if path not in after.files:
            continue
        new = after.read(path)
        old = before.read(path) if path in before.files else None
        if new == old:
            continue
        worse = _undefined(new, path) - (_undefined(old, path) if old is not None else Counter())
        problems += [f"{path}: new undefined name {n}" for n in worse]
        was = before.unresolved(path) if old is not None else set()
        for module, name in sorted(after.unresolved(path) - was):
            if not name and not any(f"{module.replace('.', '/')}{s}" in pr_tree.files for s in (".py", "/__init__.py")):
                continue  # a module neither tree has (compiled, generated): not the queue's doing
            problems.append(f"{path}: cannot import {name or '(module)'} from {module}")
    return {"problems": problems, "series": series}


@pytest.mark.parametrize("pr", [48407, 46849])
def test_import_over_an_older_fork_gives_a_queue_whose_modules_import(tmp_path, slice_repo, pr):
    ws, fork, base, head = _world(tmp_path, slice_repo, pr)
    out = ws.run("import", str(pr), "--offline", "--json")
    if out.returncode != 0:  # a refusal: exit 1, the hunks named, nothing written
        assert out.returncode == 1, out.stderr
        assert "Nothing was written" in out.stderr, out.stderr
        assert not (ws.root / "patches" / "series").exists()
        return
    plan = json.loads(out.stdout)
    assert plan["source_check"]["ok"], plan["source_check"]
    found = _check_queue(ws, fork, base, head, tmp_path)
    assert found["series"] and not found["problems"], found
    by_kind = Counter(h["reason_kind"] for h in plan["hunks"] if not h["taken"])
    print(f"#{pr} over {base[:12]}: {len(plan['hunks']) - sum(by_kind.values())} of {len(plan['hunks'])} taken; "
          f"left out {dict(by_kind)}; {plan['source_check']['checked']}")
    if pr == 46849:  # `Mapping` in vllm/v1/worker/utils.py: the hunk leaves, with the reason, as the issue saw it
        utils = [h for h in plan["hunks"] if h["path"] == "vllm/v1/worker/utils.py"]
        assert utils and not any(h["taken"] for h in utils), utils
        assert any("'Mapping'" in (h["reason"] or "") for h in utils), utils
    queue = ws.run("queue", "--json")
    assert queue.returncode == 0, queue.stderr


def test_the_old_verdict_is_what_the_oracle_calls_broken(tmp_path, slice_repo):
    """The oracle can fail: the hunk the source check leaves out of #46849, taken anyway (--hunk
    of every hunk the import takes, plus it), would be a queue with `Mapping` undefined. Asked for
    by --hunk, the import refuses it (exit 1) and writes nothing."""
    ws, fork, base, head = _world(tmp_path, slice_repo, 46849)
    plan = json.loads(ws.run("import", "46849", "--offline", "--dry-run", "--json").stdout)
    wanted = [h["id"] for h in plan["hunks"] if h["taken"] or h["reason_kind"] == "fails the source check"]
    out = ws.run("import", "46849", "--offline", *[a for hid in wanted for a in ("--hunk", hid)])
    assert out.returncode == 1 and "Mapping" in out.stderr and "Nothing was written" in out.stderr, (out.returncode, out.stderr)
    assert not (ws.root / "patches" / "series").exists()
    # and git applies those hunks cleanly: the oracle on that diff finds the broken module
    utils = "vllm/v1/worker/utils.py"
    diff = git(fork, "diff", f"{head}^", head, "--", utils)
    applied = tmp_path / "by-hand"
    git(tmp_path, "clone", "-q", "--no-checkout", str(fork), str(applied))
    git(applied, "checkout", "-q", "-B", "work", base)
    subprocess.run(["git", "apply", "--3way", "-"], cwd=applied, input=diff.encode() + b"\n", check=True, capture_output=True)
    new = (applied / utils).read_bytes()
    assert "Mapping" in _undefined(new, utils) - _undefined(Tree(applied, base).read(utils), utils)
