"""Issue 32, item 10: first-run and branch traps, as a new user meets them. `fork.branch` is read
one way by every command (`git.repo.qualify_branch`): doctor, apply, status and verify-converged
agree on one fully qualified ref and say which; a missing branch is refused in words; `init
--branch` is the fork's branch only; a re-run of init repairs; a local upstream URL is never
written into tracks.yaml as this machine's absolute path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from porttrack.common.errors import GitError, PreconditionError
from porttrack.converge.verify import resolve_refs
from porttrack.git.repo import GitRepo, qualify_branch
from testing.gitfixtures import git
from testing.text import numbered
from testing.world import World
from tests.bootstrap.test_doctor import Newcomer, _finding


@pytest.fixture
def newcomer(world: World, tmp_path: Path) -> Newcomer:
    return Newcomer(world, tmp_path)


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
    as_data = newcomer.run("status", "--offline", "--json")
    assert json.loads(as_data.stdout)["fork_branch"] == {"name": "dev", "ref": ref, "sha": tip}, as_data.stdout[:500]

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
    assert json.loads(newcomer.run("status", "--offline", "--json").stdout)["fork_branch"] == {
        "name": "dev", "ref": "refs/heads/dev", "sha": tip}


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
    assert json.loads(newcomer.run("status", "--offline", "--json").stdout)["fork_branch"] == {
        "name": "nope", "ref": None, "sha": None}

    with pytest.raises(PreconditionError, match="not a branch of the fork checkout"):
        resolve_refs(repo, None, "nope", "upstream/main")


# -- init: --branch is the fork's only; a re-run repairs; no machine path in tracks.yaml ----------


def test_init_branch_is_the_forks_only_and_upstream_has_its_own_option(newcomer: Newcomer) -> None:
    fork = newcomer.world.fork
    git(fork, "branch", "dev")  # the fork's branch, not its default; upstream has no `dev`
    made = newcomer.init("--branch", "dev")
    assert made.returncode == 0, made.stderr
    doc = yaml.safe_load((newcomer.ws / "tracks.yaml").read_text())
    assert doc["fork"]["branch"] == "dev"
    assert doc["upstream"]["default_branch"] == "main" and doc["fork"]["upstream_base"] == "upstream/main"
    checkout = newcomer.root / "vllm"
    assert git(checkout, "rev-parse", "refs/heads/dev") == git(fork, "rev-parse", "dev")  # a local branch, not origin/dev only
    assert newcomer.run("doctor").returncode == 0

    other = newcomer.root / "other"
    git(newcomer.world.upstream.path, "branch", "trunk")
    made = porttrack_init(newcomer, "--upstream-branch", "trunk", "--checkout", "../vllm2", folder="other")
    assert made.returncode == 0, made.stderr
    doc = yaml.safe_load((other / "tracks.yaml").read_text())
    assert (doc["fork"]["branch"], doc["upstream"]["default_branch"], doc["fork"]["upstream_base"]) == ("main", "trunk", "upstream/trunk")
    assert git(newcomer.root / "vllm2", "rev-parse", "upstream/trunk")


def porttrack_init(newcomer: Newcomer, *extra: str, folder: str = "ws"):
    return newcomer.init(*extra, folder=folder)


def test_init_re_run_after_a_fix_to_tracks_yaml_repairs_and_keeps_it(newcomer: Newcomer) -> None:
    """The first run fails (upstream has no `main`: its branch is `trunk`); the user fixes
    tracks.yaml and runs the same init again: it reads the fix, keeps the file, fetches."""
    up = newcomer.world.upstream.path
    git(up, "branch", "-m", "main", "trunk")
    failed = newcomer.init()
    assert failed.returncode != 0 and (newcomer.ws / "tracks.yaml").is_file(), failed.stderr
    tracks = newcomer.ws / "tracks.yaml"
    fixed = (tracks.read_text().replace("default_branch: main", "default_branch: trunk")
             .replace("upstream_base: upstream/main", "upstream_base: upstream/trunk")
             .replace("prs: [1]", "prs: [7]"))
    tracks.write_text(fixed)
    (newcomer.ws / "patches" / "series").write_text("# kept\n")  # state the re-run must not lose
    again = newcomer.init()
    assert again.returncode == 0, again.stderr
    assert tracks.read_text() == fixed and (newcomer.ws / "patches" / "series").read_text() == "# kept\n"
    assert git(newcomer.root / "vllm", "rev-parse", "upstream/trunk") == git(up, "rev-parse", "trunk")
    assert newcomer.run("doctor").returncode == 0
    contradicted = newcomer.init("--upstream-branch", "main")
    assert contradicted.returncode == 6 and "tracks.yaml says trunk" in contradicted.stderr
    assert tracks.read_text() == fixed


def test_init_re_run_can_switch_to_an_existing_checkout(newcomer: Newcomer) -> None:
    assert newcomer.init().returncode == 0
    tracks = newcomer.ws / "tracks.yaml"
    tracks.write_text(tracks.read_text().replace("prs: [1]", "prs: [7]"))
    mine = newcomer.root / "mine"
    git(newcomer.root, "clone", "-q", newcomer.fork_url, str(mine))
    switched = newcomer.init("--fork-checkout", "../mine")
    assert switched.returncode == 0, switched.stderr
    text = tracks.read_text()
    assert "checkout: ../mine " in text and "prs: [7]" in text, text
    assert "edit: tracks.yaml" in switched.stderr
    assert git(mine, "remote", "get-url", "upstream") == newcomer.upstream_url
    assert newcomer.run("doctor").returncode == 0


def test_a_local_upstream_url_is_written_relative_to_the_workspace(newcomer: Newcomer) -> None:
    made = newcomer.init()
    assert made.returncode == 0, made.stderr
    text = (newcomer.ws / "tracks.yaml").read_text()
    url = yaml.safe_load(text)["upstream"].get("url")
    assert url is not None and not Path(url).is_absolute() and str(newcomer.root) not in text, text
    assert (newcomer.ws / url).absolute().as_posix().endswith("vllm-project/vllm")
    doctor = newcomer.run("doctor", "--json")
    assert _finding(doctor, "upstream remote")["status"] == "ok", doctor.stdout
    assert newcomer.init().returncode == 0  # and a re-run reads it back as the same place


def test_a_git_failure_is_reported_not_taken_for_an_answer(newcomer: Newcomer) -> None:
    """`git merge-base` exits 128 on an object the store cannot give: that was read as "no common
    ancestor" (a merge then looked absent from the fork), without a word."""
    assert newcomer.init().returncode == 0
    repo = GitRepo.open(newcomer.root / "vllm")
    head = repo.rev_parse("HEAD")
    assert head is not None and repo.merge_base(head, head) == head
    with pytest.raises(GitError, match="exited 128"):
        repo.merge_base(head, "f" * 40)
    with pytest.raises(GitError):
        GitRepo(newcomer.root).remote_url("origin")  # not a repository: 128, not "no remote"
    assert repo.remote_url("nope") is None
