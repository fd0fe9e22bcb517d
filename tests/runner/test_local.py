"""The one job runner (porttrack.runner.local): real subprocesses, real process groups, real git."""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path

import pytest

from porttrack.common import secrets
from porttrack.common.errors import ConfigError
from porttrack.git.repo import GitRepo
from porttrack.runner.local import command_argv, run_job
from testing.gitfixtures import git

PY = shlex.quote(sys.executable)
# A child that writes its argv and environment as JSON to the file named by its first argument.
DUMP = ("import json, os, sys; open(sys.argv[1], 'w').write(json.dumps("
        "{'argv': sys.argv[2:], 'env': dict(os.environ), 'cwd': os.getcwd()}))")
NASTY = "it's a \"quoted\" value; echo pwned && rm -rf / | cat > x $HOME * `id`"


def _dump(tmp_path: Path, command_tail: str, values: dict[str, str], **kw):
    out, script = tmp_path / "dump.json", tmp_path / "dump.py"
    script.write_text(DUMP)  # a file: braces in the command itself would be placeholders
    run = run_job(f"{PY} {shlex.quote(str(script))} {shlex.quote(str(out))} {command_tail}", values,
                  cwd=tmp_path, timeout_s=30, **kw)
    assert run.exit_code == 0, run.output_tail
    return run, json.loads(out.read_text())


def test_a_placeholder_value_is_one_argument_whatever_it_holds(tmp_path):
    run, seen = _dump(tmp_path, "--ref {ref} --results {results} x{target}y", {"ref": NASTY, "results": "a b", "target": " "})
    assert seen["argv"] == ["--ref", NASTY, "--results", "a b", "x y"]
    assert list(run.argv[-5:]) == seen["argv"]


def test_quotes_in_the_command_group_before_values_are_filled(tmp_path):
    _run, seen = _dump(tmp_path, "\"{workdir}/out dir\" 'lit {{braces}}' {{ref}}", {"workdir": "/w k"})
    assert seen["argv"] == ["/w k/out dir", "lit {braces}", "{ref}"]


def test_shell_syntax_in_the_command_is_passed_literally_without_a_shell(tmp_path):
    _run, seen = _dump(tmp_path, "; echo hi && false | cat > file $HOME '*'", {})
    assert seen["argv"] == [";", "echo", "hi", "&&", "false", "|", "cat", ">", "file", "$HOME", "*"]
    assert not (tmp_path / "file").exists()


def test_an_explicit_shell_reads_values_from_the_environment_quoted(tmp_path):
    target = tmp_path / "out; rm -rf x" / "r.json"
    target.parent.mkdir()
    run = run_job("sh -c 'printf %s \"$PORTTRACK_REF\" > \"$PORTTRACK_RESULTS\"'", {"ref": NASTY, "results": str(target)},
                  cwd=tmp_path, timeout_s=30)
    assert run.exit_code == 0 and target.read_text() == NASTY


def test_the_environment_holds_no_token_and_every_value(tmp_path, monkeypatch):
    monkeypatch.setenv("GITHUB_TOKEN", "ghp_" + "a" * 36)
    monkeypatch.setenv("GH_TOKEN", "tok-from-gh-cli-123")
    _run, seen = _dump(tmp_path, "", {"ref": "abc", "workdir": "/w"}, env={"GH_TOKEN": "passed-in-456", "EXTRA": "1"})
    env = seen["env"]
    assert not {"GITHUB_TOKEN", "GH_TOKEN", "GH_ENTERPRISE_TOKEN", "GITHUB_ENTERPRISE_TOKEN"} & set(env)
    assert not any(v in json.dumps(env) for v in ("ghp_" + "a" * 36, "tok-from-gh-cli-123", "passed-in-456"))
    assert env["PORTTRACK_REF"] == "abc" and env["PORTTRACK_WORKDIR"] == "/w" and env["EXTRA"] == "1"
    assert seen["cwd"] == str(tmp_path)


def test_output_is_redacted_in_the_kept_log_and_the_tail(tmp_path):
    secrets.register("registered-secret-value-789")
    shaped = "ghp_" + "Z" * 36
    script = f"print('line one'); print('token {shaped}'); print('also registered-secret-value-789'); print('last')"
    log = tmp_path / "logs" / "job.log"
    run = run_job(f"{PY} -c {shlex.quote(script)}", {}, cwd=tmp_path, timeout_s=30, log=log, tail_lines=3)
    text = log.read_text()
    assert shaped not in text and "registered-secret-value-789" not in text and text.count("***") == 2
    assert run.output_tail == ("token ***", "also ***", "last")
    assert run.exit_code == 0 and run.log == log


def test_exit_status_and_tail_without_a_log(tmp_path):
    run = run_job(f"{PY} -c {shlex.quote('import sys; [print(i) for i in range(50)]; sys.exit(3)')}", {},
                  cwd=tmp_path, timeout_s=30, tail_lines=4)
    assert (run.exit_code, run.timed_out, run.output_tail, run.log) == (3, False, ("46", "47", "48", "49"), None)


def _gone(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in status  # a zombie is dead, only not yet reaped by its new parent


def test_a_timeout_stops_the_whole_process_group(tmp_path):
    pids = tmp_path / "pids"
    # the leader starts a grandchild that ignores SIGTERM, then both wait for ever
    child = "import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
    leader = (f"import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', {child!r}]); "
              f"open({str(pids)!r}, 'w').write(str(p.pid)); time.sleep(600)")
    started = time.monotonic()
    run = run_job(f"{PY} -c {shlex.quote(leader)}", {}, cwd=tmp_path, timeout_s=1.5, grace_s=0.5)
    assert run.timed_out and run.exit_code is None
    assert time.monotonic() - started < 20
    grandchild = int(pids.read_text())
    deadline = time.monotonic() + 5
    while not _gone(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _gone(grandchild), f"pid {grandchild} survived the timeout"


@pytest.mark.parametrize("command, message", [
    ("run {nope}", "unknown placeholder {nope}"),
    ("run {ref!r}", "unknown placeholder {ref}"),
    ("run 'unbalanced", "cannot be split into arguments"),
    ("run {", "malformed placeholder"),
    ("   ", "is empty"),
])
def test_a_bad_command_is_a_config_error(command, message):
    with pytest.raises(ConfigError, match=message):
        command_argv(command, {"ref": "x"}, "gate job command of t")


def test_a_program_that_cannot_start_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot start the job command 'no-such-program-xyz'"):
        run_job("no-such-program-xyz {ref}", {"ref": "x"}, cwd=tmp_path, timeout_s=5)


def test_temporary_worktree_is_the_commit_and_is_removed_whatever_happens(tmp_path):
    repo_path = tmp_path / "repo"
    repo_path.mkdir()
    git(repo_path, "init", "-q", "-b", "main")
    (repo_path / "f.txt").write_text("one\n")
    git(repo_path, "add", "f.txt")
    git(repo_path, "commit", "-q", "-m", "one")
    first = git(repo_path, "rev-parse", "HEAD").strip()
    (repo_path / "f.txt").write_text("two\n")
    git(repo_path, "commit", "-q", "-am", "two")
    repo = GitRepo.open(repo_path)
    with repo.temporary_worktree(first) as tree:
        assert (tree.path / "f.txt").read_text() == "one\n" and tree.rev_parse("HEAD") == first
        made = tree.path
    assert not made.exists() and not made.parent.exists()
    chosen = tmp_path / "chosen" / "tree"
    with pytest.raises(RuntimeError):
        with repo.temporary_worktree(first, chosen):
            raise RuntimeError("job failed")
    assert not chosen.exists()
    assert len(git(repo_path, "worktree", "list").splitlines()) == 1
    assert (repo_path / "f.txt").read_text() == "two\n" and repo.is_clean()
