"""A maintainer's own git config must not change what porttrack decides (porttrack.git.config).

Each setting below is one a real `~/.gitconfig` may hold; each changes the text of `git diff` or
`git log` that porttrack parses. The same commands run twice on the same repositories, with a clean
config and with all of them, must print the same JSON. Before the pins (measured one setting at a
time on this PR): `diff.noprefix=true` made every diff unreadable (import and verify-converged
failed, and so did `color.diff=always`, which outranks `color.ui=false`); `diff.context=8`, `diff.interHunkContext=12`, a `diff.orderFile` and `core.quotePath=false`
each made import write another patch; `GIT_DIFF_OPTS=--unified=9` in the environment turns even
`git diff -U0` into a 9-line context diff."""

from __future__ import annotations

import json

import pytest

from porttrack.git import config as gitconfig
from testing.gitfixtures import git
from testing.workspace import make_workspace, track

HOSTILE = {
    "diff.noprefix": "true",
    "diff.mnemonicPrefix": "true",
    "diff.relative": "true",
    "diff.context": "8",
    "diff.interHunkContext": "12",
    "diff.algorithm": "histogram",
    "diff.indentHeuristic": "false",
    "diff.suppressBlankEmpty": "true",
    "diff.submodule": "log",
    "log.follow": "true",
    "log.showSignature": "true",
    "core.quotePath": "false",
    "mailinfo.scissors": "true",
    "color.ui": "always",
    "color.diff": "always",
    "i18n.logOutputEncoding": "ISO-8859-1",
    "apply.whitespace": "fix",
    "apply.ignoreWhitespace": "change",
    "i18n.commitEncoding": "ISO-8859-1",
    "diff.renames": "false",
}


def _config_env(settings: dict[str, str]) -> dict[str, str]:
    """`settings` as GIT_CONFIG_COUNT entries: above the user's global config, as strong as it gets
    short of `git -c` (so what beats these beats any ~/.gitconfig)."""
    env = {"GIT_CONFIG_COUNT": str(len(settings))}
    for n, (key, value) in enumerate(settings.items()):
        env[f"GIT_CONFIG_KEY_{n}"] = key
        env[f"GIT_CONFIG_VALUE_{n}"] = value
    return env


def _order_file(tmp_path) -> str:
    path = tmp_path / "order"
    path.write_text("z.py\nrenamed.py\n")  # the PR's files backwards
    return str(path)


def _json(proc) -> dict:
    assert proc.returncode in (0, 1), proc.stderr
    data = json.loads(proc.stdout)
    data.pop("computed_at", None)
    data.pop("timings", None)
    return data


# what a shell may export that git obeys over config and options alike
HOSTILE_ENV = {"GIT_DIFF_OPTS": "--unified=9", "GIT_EXTERNAL_DIFF": "false", "GIT_ICASE_PATHSPECS": "1"}


def _hooks(tmp_path) -> str:
    """A hooks folder whose every hook fails (core.hooksPath): git's post-checkout and
    reference-transaction hooks would fail porttrack's worktrees and refs."""
    folder = tmp_path / "hooks"
    folder.mkdir(exist_ok=True)
    for name in ("post-checkout", "reference-transaction", "pre-commit", "commit-msg", "post-commit"):
        (folder / name).write_text("#!/bin/sh\necho hook ran >&2\nexit 3\n")
        (folder / name).chmod(0o755)
    return str(folder)


def _hostile_env(ws, tmp_path) -> dict[str, str]:
    settings = {**HOSTILE, "diff.orderFile": _order_file(tmp_path), "core.hooksPath": _hooks(tmp_path)}
    return {**ws.env(), **HOSTILE_ENV, **_config_env(settings)}


def _twice(ws, tmp_path, *argv) -> tuple[dict, dict]:
    clean = _json(ws.run(*argv))
    hostile = _json(ws.run(*argv, env=_hostile_env(ws, tmp_path)))
    return clean, hostile


@pytest.fixture
def pr_world(tmp_path, world):
    """PR 101: two hunks 10 lines apart in m.py (one hunk at diff.context=8), a renamed and edited
    file, a file whose name is not ASCII, and z.py, last in git's order."""
    m = "".join(f"line {j}\n" for j in range(40))
    r = "".join(f"kept {j}\n" for j in range(30))
    world.upstream.commit({"m.py": m, "r.py": r, "z.py": "z = 1\n", "ü.py": "u = 1\n"}, "project files")
    git(world.fork, "pull", "-q", "--ff-only", "upstream", "main")
    world.open_pr(101, {
        "m.py": m.replace("line 5\n", "line 5 changed\n").replace("line 15\n", "line 15 changed  \n"),  # trailing blanks
        "r.py": None,
        "renamed.py": r.replace("kept 3\n", "kept 3 edited\n"),
        "ü.py": "u = 2\n",
        "z.py": "z = 2\n",
    }, "Spread a change", message="Spread a change — to ü.py too")
    ws = make_workspace(tmp_path / "ws", {"t": track([101])}, api_url=world.fake.base_url, fork=world.fork, token=world.token)
    assert (polled := ws.run("status")).returncode == 0, polled.stderr
    return ws


def test_import_and_apply_are_the_same_under_a_hostile_git_config(tmp_path, world, pr_world):
    clean, hostile = _twice(pr_world, tmp_path, "import", "101", "--dry-run", "--json")
    assert len(clean["hunks"]) == 6, [h["id"] for h in clean["hunks"]]  # 2 in m.py, rename + edit, ü.py, z.py
    assert hostile == clean
    assert pr_world.run("import", "101").returncode == 0
    built = {}
    for how, env in (("clean", pr_world.env()), ("hostile", _hostile_env(pr_world, tmp_path))):
        proc = pr_world.run("apply", "--staging", "--json", env=env)
        assert proc.returncode == 0, (how, proc.stderr)
        tip = git(world.fork, "rev-parse", "refs/heads/porttrack/staging")
        raw = git(world.fork, "cat-file", "commit", tip)
        built[how] = (git(world.fork, "rev-parse", f"{tip}^{{tree}}"), [line for line in raw.splitlines() if line.startswith(("author ", "encoding "))])
        git(world.fork, "update-ref", "-d", "refs/heads/porttrack/staging")
    assert built["hostile"] == built["clean"]


def test_verify_and_status_are_the_same_under_a_hostile_git_config(tmp_path, world, pr_world):
    world.squash_merge(101)
    world.upstream.commit({"renamed.py": None, "moved.py": "".join(f"kept {j}\n" for j in range(30)).replace("kept 3\n", "kept 3 edited\n")},
                          "Move renamed.py again")  # log.follow would follow it
    git(world.fork, "pull", "-q", "--ff-only", "upstream", "main")
    assert pr_world.run("status").returncode == 0
    clean, hostile = _twice(pr_world, tmp_path, "verify-converged", "101", "--dry-run", "--json")
    assert clean["verdict"] == "converged", clean["reasons"]
    assert hostile == clean
    clean, hostile = _twice(pr_world, tmp_path, "status", "--offline", "--json")
    assert hostile == clean


def test_the_pins_are_git_options_that_git_accepts(tmp_path):
    """Every pinned value is one this git takes (a typo would be ignored, or fail every command)."""
    repo = tmp_path / "r"
    git(tmp_path, "init", "-q", str(repo))
    for key, value in gitconfig.PINNED.items():
        if key in ("diff.srcPrefix", "diff.dstPrefix"):
            continue  # git 2.45+; an older git ignores them, as it ignores any unknown key
        shown = git(repo, *gitconfig.ARGS, "config", "--get", key)
        assert shown == value, key
    git(repo, *gitconfig.ARGS, "diff", "--stat")  # an unreadable diff.orderFile would stop git here
