"""The token never leaves the process: leak vectors tried one by one.

The autouse `secret_guard` (conftest) already checks, after every reliability case, that no known
token appears in anything porttrack printed, any file under the test's folders (workspace, logs,
crash.log, recorded state, evidence, reports), HOME, or what the emulator received. The cases
here go looking for the ways a token could get out: a gate job that prints its environment, a
remote URL with credentials in a git error, GitHub (or a proxy) echoing the token, a token pasted
into tracks.yaml or a PR title, an environment variable holding one where a number belongs, an
internal error whose message carries one.
"""

from __future__ import annotations

import sys

import pytest
import rel_harness as H
from rel_harness import SECRETS, Rig

from testing.gitfixtures import git
from testing.github_emulator import DEFAULT_TOKEN
from testing.workspace import TOKEN

pytestmark = pytest.mark.reliability("secrets")

PRINT_ENV = f"{sys.executable} -c \"import os, sys; print(dict(os.environ)); sys.exit(3)\" {{results}}"
PRINT_TOKEN_THEN_WORK = (f"{sys.executable} -c \"import os, subprocess, sys; print('token', os.environ.get('GITHUB_TOKEN'), os.environ.get('GH_TOKEN'));"
                         f" sys.exit(subprocess.call([sys.executable, '-m', 'testing.scenario_job', '--scenario', 'scenario.json', '--results', sys.argv[1]]))\" {{results}}")


def _no_token(*texts: str) -> None:
    assert not H.leaks(list(texts)), H.leaks(list(texts))


def _gate_rig(tmp_path, world, command: str) -> Rig:
    tracks = {"alpha": H.track([101], "spec-decode warmup", requires={"attention": ["sparse-mla"]}, gate=H.gate_doc(command=command))}
    rig = Rig(tmp_path, world, tracks=tracks)
    rig.ok("import", "101")
    return rig


def test_a_gate_job_that_prints_its_environment_and_fails(tmp_path, world):
    rig = _gate_rig(tmp_path, world, PRINT_ENV)
    out = rig.cli("gate", "run", "101", "--target", "sm_121a")
    assert out.returncode == 7 and "exited 3" in out.stderr, out.stderr[-800:]
    _no_token(out.stdout, out.stderr)


def test_a_gate_job_that_prints_the_token_then_succeeds(tmp_path, world):
    rig = _gate_rig(tmp_path, world, PRINT_TOKEN_THEN_WORK)
    out = rig.cli("gate", "run", "101", "--target", "sm_121a")
    assert out.returncode == 7, out.stderr[-800:]  # recorded; no baseline yet
    _no_token(out.stdout, out.stderr)


def test_gh_token_instead_of_github_token(tmp_path, world):
    rig = _gate_rig(tmp_path, world, PRINT_ENV)
    out = rig.cli("gate", "run", "101", "--target", "gfx1151", GITHUB_TOKEN=None, GH_TOKEN=DEFAULT_TOKEN)
    assert out.returncode == 7
    out = rig.cli("status", GITHUB_TOKEN=None, GH_TOKEN=DEFAULT_TOKEN)
    assert out.returncode == 0 and "live poll" in out.stdout


def test_a_remote_url_with_credentials_in_a_git_error(tmp_path, world):
    rig = Rig(tmp_path, world)
    git(rig.fork, "remote", "set-url", "upstream", f"https://x-access-token:{DEFAULT_TOKEN}@127.0.0.1:9/vllm-project/vllm.git")
    world.append(101, {"a.py": H.edit(H.A, {10: "a_10 = 'ten'", 50: "a_50 = 'fifty'", 77: "a_77 = 'new'"})})
    for args in (("status",), ("import", "101"), ("import", "101", "--json"), ("verify-converged", "103")):
        out = rig.cli(*args)
        assert "Traceback" not in out.stderr
        _no_token(out.stdout, out.stderr)
    git(rig.fork, "remote", "set-url", "upstream", str(world.upstream.path))


def test_github_echoing_the_token_in_every_kind_of_answer(tmp_path, world):
    rig = Rig(tmp_path, world)
    echo = {"message": f"token {DEFAULT_TOKEN} rejected", "documentation_url": f"https://x/{DEFAULT_TOKEN}"}
    for status in (400, 401, 403, 404, 422, 500):
        rig.fake.inject("status", path=r"/pulls/101$", status=status, json=echo, times=10)
        for args in (("status",), ("import", "101"), ("verify-converged", "103")):
            out = rig.cli(*args)
            _no_token(out.stdout, out.stderr)
        with rig.fake._lock:
            rig.fake._faults.clear()
    rig.fake.inject("status", path=r"/issues$", method="POST", status=422, json=echo)
    out = rig.cli("report", "weekly", "--post", "--offline")
    assert out.returncode != 0
    _no_token(out.stdout, out.stderr)


def test_a_token_pasted_into_tracks_yaml(tmp_path, world):
    rig = Rig(tmp_path, world)
    text = (rig.root / "tracks.yaml").read_text()
    for old, new in (("repo: randomvariable/vllm", f"repo: {TOKEN}"), ("title: spec-decode warmup", f"titel: {TOKEN}")):
        (rig.root / "tracks.yaml").write_text(text.replace(old, new, 1))
        out = rig.cli("status")
        assert out.returncode == 2, out.stderr[-800:]
        _no_token(out.stdout, out.stderr)
    (rig.root / "tracks.yaml").write_text(text)


def test_a_token_where_a_number_belongs(tmp_path, world):
    rig = Rig(tmp_path, world)
    for name in ("PORTTRACK_HTTP_TIMEOUT", "PORTTRACK_HTTP_ATTEMPTS", "PORTTRACK_LOCK_WAIT"):
        out = rig.cli("status", **{name: DEFAULT_TOKEN})
        assert out.returncode == 2 and len(out.errors) == 1, out.stderr[-800:]
        _no_token(out.stdout, out.stderr)


def test_a_pr_title_and_body_carrying_the_token(tmp_path, world):
    """A stranger cannot know the token, but a proxy or a bot reflecting headers can put it in
    what GitHub returns: it must not reach the terminal, the recorded state or the issue."""
    rig = Rig(tmp_path, world)
    world.fake.put_pull(H.UPSTREAM_REPO, 101, title=f"leak {DEFAULT_TOKEN} here", body=f"Authorization: token {DEFAULT_TOKEN}",
                        user="octocat")
    for args in (("status",), ("status", "--json"), ("report", "weekly", "--post"), ("report", "weekly", "--json", "--dry-run")):
        out = rig.cli(*args)
        assert out.returncode == 0, out.stderr[-800:]
        _no_token(out.stdout, out.stderr)
    _no_token((rig.root / "state" / "upstream.json").read_text())


def test_an_internal_error_carrying_the_token_is_redacted(tmp_path, world, monkeypatch):
    rig = Rig(tmp_path, world)
    from porttrack.report import status as status_mod

    def boom(*_a, **_k):
        raise RuntimeError(f"unexpected: {DEFAULT_TOKEN}")

    monkeypatch.setattr(status_mod, "poll", boom)
    out = rig.cli("status")
    assert out.returncode == 70 and "full log" in out.stderr
    _no_token(out.stdout, out.stderr)
    log = (rig.root / ".porttrack" / "logs" / "crash.log").read_text()
    assert "RuntimeError" in log
    _no_token(log)


def test_the_secrets_checked_are_the_ones_the_harness_uses():
    assert TOKEN in SECRETS and DEFAULT_TOKEN in SECRETS
