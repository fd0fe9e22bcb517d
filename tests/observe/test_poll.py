from pathlib import Path

import pytest

from porttrack.observe.poll import stacked_from_text

REPO = "vllm-project/vllm"


@pytest.mark.parametrize(
    "title, body, expected",
    [
        ("[Attention] thing (stacked on #41481)", "", [41481]),
        ("x", "Earlier revisions stacked on #46076; all of that has since landed in main via #46076", [46076]),
        ("x", "Depends on #12 and builds on vllm-project/vllm#34", [12, 34]),
        ("x", "Stacked on top of https://github.com/vllm-project/vllm/pull/77", [77]),
        ("x", "depends on other/repo#5 (another repository)", []),
        ("x", "mentions #99 without any stacking words", []),
        ("x", "stacked on #8, then depends on #8 again", [8]),
    ],
)
def test_stacking_is_read_from_pr_text(title, body, expected):
    assert stacked_from_text(title, body, REPO) == expected


def test_huge_hostile_body_is_scanned_quickly():
    import time

    body = ("stacked on " + " " * 50) * 20000 + "#1"
    started = time.monotonic()
    stacked_from_text("t", body, REPO)
    assert time.monotonic() - started < 1.0


# -- fetching PR heads: one fetch when all are there; a missing refs/pull/N/head fails that PR only --

from porttrack.common.errors import GitError, git_cause  # noqa: E402
from porttrack.git.repo import GitRepo, pull_ref  # noqa: E402
from porttrack.github.client import GitHubClient  # noqa: E402
from porttrack.observe.poll import poll  # noqa: E402
from porttrack.workspace.state import UpstreamState  # noqa: E402
from testing.gitfixtures import git  # noqa: E402

PRS = (101, 102, 103, 104)


def _world_with_prs(world):
    for n in PRS:
        world.open_pr(n, {f"f{n}.py": f"v = {n}\n"}, f"PR {n}")
    client = GitHubClient(world.upstream_repo, world.token, world.fake.base_url, backoff_s=0.01, max_attempts=2)
    return client, GitRepo.open(world.fork)


def _fetches(trace: Path) -> int:
    """`git fetch` processes started, from git's own trace (GIT_TRACE): counted, not intercepted."""
    return sum("built-in: git fetch " in line for line in trace.read_text().splitlines()) if trace.exists() else 0


def _poll_traced(monkeypatch, tmp_path, name, state, client, repo, progress=None):
    trace = tmp_path / f"{name}.trace"
    monkeypatch.setenv("GIT_TRACE", str(trace))
    try:
        return poll(state, PRS, client, repo, progress=progress), _fetches(trace)
    finally:
        monkeypatch.delenv("GIT_TRACE")


def test_every_head_present_upstream_costs_one_fetch(world, tmp_path, monkeypatch):
    client, repo = _world_with_prs(world)
    empty = UpstreamState(world.upstream_repo, None, "test")
    first, fetches = _poll_traced(monkeypatch, tmp_path, "first", empty, client, repo)
    assert fetches == 1 and first.notes == ()
    for n in PRS:
        world.append(n, {f"f{n}.py": f"v = {n} + 1\n"})
    second, fetches = _poll_traced(monkeypatch, tmp_path, "second", first.state, client, repo)
    assert fetches == 1 and second.notes == ()
    assert {n: (c.head_change.kind, c.head_change.method) for n, c in second.changes.items()} == {n: ("appended", "git") for n in PRS}
    assert all(repo.rev_parse(pull_ref(n)) == world.head(n) for n in PRS)


@pytest.mark.parametrize("gone, progress", [((103,), False), ((101, 104), False), ((102,), True)],
                         ids=["one-missing", "two-missing", "one-missing-with-progress"])
def test_missing_pull_head_fails_that_pr_only(world, tmp_path, monkeypatch, gone, progress):
    client, repo = _world_with_prs(world)
    first, _ = _poll_traced(monkeypatch, tmp_path, "first", UpstreamState(world.upstream_repo, None, "test"), client, repo)
    old = {n: world.head(n) for n in PRS}
    world.append(101, {"f101.py": "v = 'appended'\n"})
    world.force_push(102, {"f102.py": "v = 'rewritten'\n"})
    world.append(103, {"f103.py": "v = 'appended'\n"})
    world.force_push(104, {"f104.py": "v = 'rewritten'\n"})
    new = {n: world.head(n) for n in PRS}
    for n in gone:  # the PR's head is gone upstream (GitHub still reports it)
        git(world.upstream.path, "update-ref", "-d", f"refs/pull/{n}/head")
    world.fake.clear_log()

    lines: list[str] = []
    result, fetches = _poll_traced(monkeypatch, tmp_path, "second", first.state, client, repo, lines.append if progress else None)

    assert bool(lines) == progress, "with a progress callback, git's lines are streamed to it"
    assert fetches == len(gone) + 1, "git names one missing ref per failure; the rest is fetched again at once"
    kinds = {n: (c.head_change.kind, c.head_change.method) for n, c in result.changes.items()}
    expected = {101: "appended", 102: "force-pushed", 103: "appended", 104: "force-pushed"}
    assert kinds == {n: (expected[n], "compare" if n in gone else "git") for n in PRS}
    for n in PRS:  # the others' heads were fetched; the missing ones' refs were not moved
        assert repo.rev_parse(pull_ref(n)) == (old[n] if n in gone else new[n])
    assert len(world.fake.requests(path_re="/compare/")) == len(gone)
    assert len(result.notes) == len(gone)
    for n, note in zip(gone, result.notes):
        assert note.startswith(f"#{n}: head {new[n][:12]} could not be fetched from upstream")
        assert f"fatal: couldn't find remote ref refs/pull/{n}/head" in note


def test_unreachable_remote_is_one_note_and_every_moved_pr_goes_to_the_compare(world, tmp_path, monkeypatch):
    client, repo = _world_with_prs(world)
    first, _ = _poll_traced(monkeypatch, tmp_path, "first", UpstreamState(world.upstream_repo, None, "test"), client, repo)
    for n in PRS:
        world.append(n, {f"f{n}.py": "v = 0\n"})
    git(world.fork, "remote", "rename", "upstream", "elsewhere")
    result, fetches = _poll_traced(monkeypatch, tmp_path, "second", first.state, client, repo)
    assert fetches == 1, "a failure of the whole remote is not retried ref by ref"
    assert {c.head_change.method for c in result.changes.values()} == {"compare"}
    (note,) = result.notes
    assert "fatal: 'upstream' does not appear to be a git repository" in note, note
    assert "the repository exists" not in note, "git's advice line is not the cause"


def test_git_cause_keeps_fatal_and_error_lines_bounded_and_without_userinfo():
    stderr = (
        "remote: Repository not found.\n"
        "fatal: repository 'https://porttrack:s3cret@example.invalid/o/r.git/' not found\n"
        + "".join(f"error: line {i} {'x' * 500}\n" for i in range(10))
        + "\nPlease make sure you have the correct access rights\nand the repository exists.\n"
    )
    cause = git_cause(stderr)
    assert cause.startswith("fatal: repository 'https://***@example.invalid/o/r.git/' not found; error: line 0")
    assert "s3cret" not in cause and "porttrack:" not in cause
    assert cause.count("; ") == 2 and len(cause) < 1000, "at most 3 lines of 300 characters"
    assert git_cause("warning: x\nthe last line\n") == "the last line", "no fatal:/error: line: the last line"
    assert git_cause("") == "(no stderr)"


def test_git_error_from_a_real_git_names_neither_userinfo_nor_only_the_advice(tmp_path):
    repo = GitRepo(tmp_path)
    git(tmp_path, "init", "-q")
    with pytest.raises(GitError) as failed:
        repo.run("ls-remote", "http://porttrack:s3cret@127.0.0.1:9/o/r.git")
    assert "s3cret" not in str(failed.value) and "***@127.0.0.1:9" in str(failed.value)
    with pytest.raises(GitError) as failed:
        repo.fetch("upstream", ["+refs/heads/main:refs/x"])
    message = str(failed.value)
    assert "fatal: 'upstream' does not appear to be a git repository" in message
    assert "\n" not in message


def test_remote_given_as_a_url_with_a_password_is_never_quoted(world, tmp_path, monkeypatch):
    client, repo = _world_with_prs(world)
    monkeypatch.setenv("PORTTRACK_GIT_TIMEOUT", "20")
    url = "http://porttrack:s3cret@127.0.0.1:9/vllm-project/vllm.git"  # nothing listens on port 9
    result = poll(UpstreamState(world.upstream_repo, None, "test"), PRS, client, repo, remote=url)
    (note,) = result.notes
    assert note.startswith("git fetch from http://***@127.0.0.1:9/vllm-project/vllm.git failed"), note
    assert "s3cret" not in note
