"""Issue 32, item 10: first-run and branch traps, as a new user meets them. `fork.branch` is read
one way by every command (`gitrepo.qualify_branch`): doctor, apply, status and verify-converged
agree on one fully qualified ref and say which; a missing branch is refused in words; `init
--branch` is the fork's branch only; a re-run of init repairs; a local upstream URL is never
written into tracks.yaml as this machine's absolute path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from porttrack.converge.verify import resolve_refs
from porttrack.common.errors import PreconditionError
from porttrack.gitrepo import GitRepo, qualify_branch
from testing.gitfixtures import git
from testing.text import numbered
from tests.test_init_doctor import Newcomer, _finding, newcomer  # noqa: F401  (the fixture)


@pytest.fixture
def only_remote(newcomer: Newcomer) -> tuple[Newcomer, str, str]:
    """An init'ed workspace whose fork.branch `dev` exists in the checkout only as `origin/dev`
    (a fresh clone of a fork whose branch is not its default), beside an older tag `dev`."""
    assert newcomer.init().returncode == 0
    fork = newcomer.world.fork
    older = git(fork, "rev-parse", "HEAD")
    git(fork, "checkout", "-q", "-b", "dev")
    (fork / "dev.py").write_text(numbered("dev", 5))
    git(fork, "add", "dev.py")
    git(fork, "commit", "-q", "-m", "the fork's own work")
    tip = git(fork, "rev-parse", "HEAD")
    git(fork, "checkout", "-q", "main")
    checkout = newcomer.root / "vllm"
    git(checkout, "fetch", "-q", "origin")
    git(checkout, "tag", "dev", older)  # git's own order would take this tag for `dev`
    assert git(checkout, "rev-parse", "refs/remotes/origin/dev") == tip
    tracks = newcomer.ws / "tracks.yaml"
    tracks.write_text(tracks.read_text().replace("  branch: main\n", "  branch: dev\n", 1))
    return newcomer, tip, older


def test_a_branch_only_at_origin_is_one_ref_for_doctor_apply_status_and_verify(only_remote) -> None:
    newcomer, tip, older = only_remote
    ref = "refs/remotes/origin/dev"
    repo = GitRepo.open(newcomer.root / "vllm")
    assert qualify_branch(repo, "dev") == ref

    doctor = newcomer.run("doctor", "--json")
    found = _finding(doctor, "fork branch")
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert found["status"] == "warn" and ref in found["detail"], found
    assert found["fix"].endswith("branch --track dev origin/dev"), found

    built = newcomer.run("apply", "--staging", "--json")
    assert built.returncode == 0, built.stderr
    run = json.loads(built.stdout)
    assert run["base"] == {"ref": ref, "sha": tip} and tip != older, run

    status = newcomer.run("status", "--offline")
    assert f"fork.branch dev read as {ref}" in status.stderr, status.stderr

    assert resolve_refs(repo, None, "dev", "upstream/main")[0] == ref


def test_a_local_branch_beats_the_remote_and_a_tag(only_remote) -> None:
    newcomer, tip, older = only_remote
    checkout = newcomer.root / "vllm"
    git(checkout, "branch", "dev", "origin/dev")
    repo = GitRepo.open(checkout)
    assert qualify_branch(repo, "dev") == "refs/heads/dev"
    assert _finding(newcomer.run("doctor", "--json"), "fork branch")["status"] == "ok"
    run = json.loads(newcomer.run("apply", "--staging", "--json").stdout)
    assert run["base"] == {"ref": "refs/heads/dev", "sha": tip}
    assert "read as" not in newcomer.run("status", "--offline").stderr


def test_a_missing_branch_is_refused_in_words_by_every_command(only_remote) -> None:
    newcomer, _, _ = only_remote
    tracks = newcomer.ws / "tracks.yaml"
    tracks.write_text(tracks.read_text().replace("  branch: dev\n", "  branch: nope\n", 1))
    git(newcomer.root / "vllm", "tag", "nope")  # a tag is never the branch
    repo = GitRepo.open(newcomer.root / "vllm")
    assert qualify_branch(repo, "nope") is None

    doctor = newcomer.run("doctor", "--json")
    found = _finding(doctor, "fork branch")
    assert doctor.returncode != 0 and found["status"] == "fail", found
    assert "'nope' is not a branch" in found["detail"] and "fetch origin nope" in found["fix"], found

    built = newcomer.run("apply", "--staging")
    assert built.returncode == 6, built.stderr
    assert "fork.branch 'nope' is not a branch of the fork checkout" in built.stderr, built.stderr

    status = newcomer.run("status", "--offline")
    assert "fork.branch 'nope' is not a branch" in status.stderr, status.stderr

    with pytest.raises(PreconditionError, match="not a branch of the fork checkout"):
        resolve_refs(repo, None, "nope", "upstream/main")
