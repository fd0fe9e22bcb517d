"""`porttrack init` and `porttrack doctor`, as a newcomer runs them: a subprocess, a fixture
upstream in real git, the GitHub emulator on loopback, and no other set-up."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from testing.gitfixtures import git
from testing.text import edit, numbered
from testing.world import World

FILES = {"a.py": numbered("a", 40), "b.py": numbered("b", 30)}


def porttrack(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "porttrack", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})})


class Newcomer:
    """A fixture upstream with one open PR, the fork as a repository to clone, and an empty folder.

    The upstream is reached through a path ending in its GitHub name (`…/vllm-project/vllm`), as a
    real clone URL ends in it, so `doctor` can check that the remote points at upstream.repo."""

    def __init__(self, world: World, tmp_path: Path):
        self.world = world
        world.upstream.commit(FILES, "project files")
        git(world.fork, "pull", "-q", "--ff-only", "upstream", "main")
        names = tmp_path / "urls"
        (names / "vllm-project").mkdir(parents=True)
        (names / "randomvariable").mkdir(parents=True)
        (names / "vllm-project" / "vllm").symlink_to(world.upstream.path)
        (names / "randomvariable" / "vllm").symlink_to(world.fork)
        self.upstream_url = str(names / "vllm-project" / "vllm")
        self.fork_url = str(names / "randomvariable" / "vllm")
        self.root = tmp_path / "newcomer"
        self.root.mkdir()
        self.env = world.cli_env()

    def init(self, *extra: str, folder: str = "ws") -> subprocess.CompletedProcess[str]:
        return porttrack(self.root, "init", folder, "--upstream", "vllm-project/vllm", "--fork", "randomvariable/vllm",
                         "--upstream-url", self.upstream_url, "--fork-url", self.fork_url, *extra, env=self.env)

    @property
    def ws(self) -> Path:
        return self.root / "ws"

    def run(self, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        return porttrack(self.ws, *args, env={**self.env, **env})

    def track(self, pr: int) -> None:
        tracks = self.ws / "tracks.yaml"
        tracks.write_text(tracks.read_text().replace("prs: [1]", f"prs: [{pr}]"))


@pytest.fixture
def newcomer(world: World, tmp_path: Path) -> Newcomer:
    return Newcomer(world, tmp_path)


def _snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".git/" not in p.as_posix() + "/" and "/.git/" not in "/" + p.relative_to(root).as_posix()}


def test_init_then_doctor_status_import_apply_work_with_no_other_setup(newcomer: Newcomer) -> None:
    newcomer.world.open_pr(101, {"a.py": edit(numbered("a", 40), {7: "a_7 = \"seven\""})}, title="[Core] seven")
    made = newcomer.init()
    assert made.returncode == 0, made.stderr
    for rel in ("tracks.yaml", "patches/series", "patches/manifest.json", "patches/evidence/.gitkeep",
                "templates/README.md", ".gitignore"):
        assert (newcomer.ws / rel).is_file(), rel
    fork = newcomer.root / "vllm"
    assert git(fork, "config", "remote.origin.partialclonefilter") == "blob:none"
    assert git(fork, "rev-parse", "upstream/main") == git(newcomer.world.upstream.path, "rev-parse", "main")
    newcomer.track(101)

    doctor = newcomer.run("doctor", "--json")
    checks = {c["check"]: c["status"] for c in json.loads(doctor.stdout)["checks"]}
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert checks["fork checkout"] == checks["upstream remote"] == checks["upstream base"] == checks["github"] == "ok"

    status = newcomer.run("status")
    assert status.returncode == 0, status.stderr
    assert "#101" in status.stdout
    queue = newcomer.run("queue", "--json")
    assert queue.returncode == 0 and json.loads(queue.stdout)["patches"] == []
    taken = newcomer.run("import", "101")
    assert taken.returncode == 0, taken.stderr
    built = newcomer.run("apply", "--staging", "--json")
    assert built.returncode == 0, built.stderr
    assert "a_7 = \"seven\"" in git(fork, "show", "porttrack/staging:a.py")


def test_a_newcomer_without_a_token_can_init_doctor_status_import_apply(newcomer: Newcomer) -> None:
    """A public upstream needs no token to read: every step reads GitHub unauthenticated."""
    newcomer.env = {k: v for k, v in newcomer.env.items() if k not in ("GITHUB_TOKEN", "GH_TOKEN")}
    newcomer.env["PORTTRACK_NO_GH_CLI"] = "1"
    newcomer.world.open_pr(101, {"a.py": edit(numbered("a", 40), {7: "a_7 = \"seven\""})}, title="[Core] seven")
    assert newcomer.init().returncode == 0
    newcomer.track(101)

    doctor = newcomer.run("doctor", "--json")
    checks = {c["check"]: c for c in json.loads(doctor.stdout)["checks"]}
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    assert "unauthenticated" in checks["token"]["detail"] and checks["github"]["status"] == "ok"

    status = newcomer.run("status")
    assert status.returncode == 0, status.stderr
    assert "#101" in status.stdout and "unauthenticated" in status.stdout
    assert "of 60 requests left this hour" in status.stderr
    taken = newcomer.run("import", "101")
    assert taken.returncode == 0, taken.stderr
    built = newcomer.run("apply", "--staging", "--json")
    assert built.returncode == 0, built.stderr
    assert "a_7 = \"seven\"" in git(newcomer.root / "vllm", "show", "porttrack/staging:a.py")
    log = newcomer.world.fake.log
    assert log and not [r for r in log if r.auth_present], "no request carried a token"
    assert any(r.matched_etag for r in log if "/pulls/101" in r.path), "import's poll after status is a 304"


def test_init_twice_changes_nothing(newcomer: Newcomer) -> None:
    assert newcomer.init().returncode == 0
    before = _snapshot(newcomer.root)
    again = newcomer.init()
    assert again.returncode == 0, again.stderr
    assert "nothing to do" in again.stderr
    assert _snapshot(newcomer.root) == before


def test_init_over_an_existing_workspace_refuses_and_says_what_exists(newcomer: Newcomer) -> None:
    newcomer.ws.mkdir()
    (newcomer.ws / "tracks.yaml").write_text("# mine\n")
    (newcomer.ws / ".gitignore").write_text("build/\n")
    refused = newcomer.init()
    assert refused.returncode == 6
    assert "tracks.yaml" in refused.stderr and ".gitignore" in refused.stderr
    assert (newcomer.ws / "tracks.yaml").read_text() == "# mine\n"
    assert not (newcomer.ws / "patches").exists() and not (newcomer.root / "vllm").exists()


def test_init_dry_run_writes_nothing(newcomer: Newcomer) -> None:
    shown = newcomer.init("--dry-run")
    assert shown.returncode == 0, shown.stderr
    assert "would write: tracks.yaml" in shown.stderr and "would clone" in shown.stderr
    assert not newcomer.ws.exists() and not (newcomer.root / "vllm").exists()


def test_init_uses_an_existing_checkout_and_adds_the_upstream_remote(newcomer: Newcomer) -> None:
    mine = newcomer.root / "mine"
    git(newcomer.root, "clone", "-q", newcomer.fork_url, str(mine))
    made = newcomer.init("--fork-checkout", "../mine")
    assert made.returncode == 0, made.stderr
    assert git(mine, "remote", "get-url", "upstream") == newcomer.upstream_url
    assert "checkout: ../mine " in (newcomer.ws / "tracks.yaml").read_text()


# -- doctor: one test per precondition, each with its own fix line -------------------------------


def _finding(result: subprocess.CompletedProcess[str], check: str) -> dict:
    return next(c for c in json.loads(result.stdout)["checks"] if c["check"] == check)


@pytest.fixture
def ready(newcomer: Newcomer) -> Newcomer:
    assert newcomer.init().returncode == 0
    assert newcomer.run("doctor").returncode == 0
    return newcomer


def test_doctor_without_a_workspace_names_init(ready: Newcomer, tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    result = porttrack(empty, "doctor", "--json", env=ready.env)
    assert result.returncode == 1
    assert _finding(result, "workspace")["status"] == "fail"
    assert _finding(result, "workspace")["fix"].startswith("porttrack init")


def test_doctor_on_a_malformed_tracks_yaml_points_at_the_line(ready: Newcomer) -> None:
    (ready.ws / "tracks.yaml").write_text((ready.ws / "tracks.yaml").read_text().replace("  repo: vllm-project/vllm", "  repo: [x"))
    result = ready.run("doctor", "--json")
    assert result.returncode == 1
    found = _finding(result, "workspace")
    assert found["status"] == "fail" and "tracks.yaml:" in found["detail"]


def test_doctor_without_the_fork_checkout_says_how_to_clone(ready: Newcomer) -> None:
    result = ready.run("doctor", "--json", PORTTRACK_FORK=str(ready.root / "nowhere"))
    found = _finding(result, "fork checkout")
    assert result.returncode == 1 and found["status"] == "fail"
    assert found["fix"].startswith("git clone --filter=blob:none https://github.com/randomvariable/vllm.git")


def test_doctor_without_the_upstream_remote_says_how_to_add_it(ready: Newcomer) -> None:
    git(ready.root / "vllm", "remote", "remove", "upstream")
    result = ready.run("doctor", "--json")
    found = _finding(result, "upstream remote")
    assert result.returncode == 1 and found["status"] == "fail"
    assert found["fix"] == f"git -C {ready.root / 'vllm'} remote add upstream {ready.upstream_url}"  # what init set, not github.com


def test_doctor_with_the_remote_at_another_repository_says_how_to_repoint_it(ready: Newcomer) -> None:
    git(ready.root / "vllm", "remote", "set-url", "upstream", "https://user:hunter2@example.invalid/someone/else.git")
    result = ready.run("doctor", "--json")
    found = _finding(result, "upstream remote")
    assert result.returncode == 1 and found["status"] == "fail"
    assert f"remote set-url upstream {ready.upstream_url}" in found["fix"]
    assert "hunter2" not in result.stdout + result.stderr  # URL credentials are never shown


def test_doctor_without_the_upstream_base_says_how_to_fetch_it(ready: Newcomer) -> None:
    git(ready.root / "vllm", "update-ref", "-d", "refs/remotes/upstream/main")
    result = ready.run("doctor", "--json")
    found = _finding(result, "upstream base")
    assert result.returncode == 1 and found["status"] == "fail"
    assert found["fix"] == f"git -C {ready.root / 'vllm'} fetch upstream main"


def test_doctor_with_a_token_names_its_source_and_the_rate_limit(ready: Newcomer) -> None:
    result = ready.run("doctor", "--json")
    found = _finding(result, "token")
    assert found["status"] == "ok" and found["detail"].startswith("from GITHUB_TOKEN")
    assert "requests left this hour" in found["detail"]
    assert ready.env["GITHUB_TOKEN"] not in result.stdout + result.stderr


def test_doctor_with_github_unreachable_says_what_to_check(ready: Newcomer) -> None:
    result = ready.run("doctor", "--json", GITHUB_API_URL="http://127.0.0.1:9", PORTTRACK_HTTP_ATTEMPTS="1",
                       PORTTRACK_HTTP_TIMEOUT="2")
    found = _finding(result, "github")
    assert result.returncode == 1 and found["status"] == "fail"
    assert "GITHUB_API_URL" in found["fix"]


def test_doctor_with_a_workflow_gate_on_a_target_without_runner_labels_fails(ready: Newcomer) -> None:
    tracks = ready.ws / "tracks.yaml"
    text = tracks.read_text().replace("    runner_labels: [self-hosted]\n", "")
    text = text.replace("    targets: [main-gpu]\n", "    targets: [main-gpu]\n    gate:\n      promote: false\n"
                        "      job: {workflow: {file: gate.yml}}\n      matrix: {contexts: [1], batches: [1]}\n")
    tracks.write_text(text)
    result = ready.run("doctor", "--json")
    found = _finding(result, "runner labels")
    assert result.returncode == 1 and found["status"] == "fail", result.stdout + result.stderr
    assert found["fix"].startswith("add `runner_labels:")


def test_doctor_without_quilt_warns_with_the_install_line(ready: Newcomer, tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "git").symlink_to(subprocess.run(["which", "git"], capture_output=True, text=True).stdout.strip())
    result = ready.run("doctor", "--json", PATH=str(bin_dir))
    found = _finding(result, "quilt")
    assert found["status"] == "warn" and found["fix"].startswith("apt-get install quilt")
    assert result.returncode == 0  # a warning passes


def test_doctor_accepts_the_mirror_init_set_up_and_its_fix_names_that_mirror(newcomer: Newcomer, tmp_path: Path) -> None:
    mirror = tmp_path / "mirrors" / "upstream-mirror.git"  # a URL that does not end in vllm-project/vllm
    mirror.parent.mkdir()
    mirror.symlink_to(newcomer.world.upstream.path)
    newcomer.upstream_url = str(mirror)
    assert newcomer.init().returncode == 0
    result = newcomer.run("doctor", "--json")
    assert result.returncode == 0, result.stdout + result.stderr
    assert _finding(result, "upstream remote")["status"] == "ok"
    git(newcomer.root / "vllm", "remote", "remove", "upstream")
    found = _finding(newcomer.run("doctor", "--json"), "upstream remote")
    assert found["status"] == "fail" and found["fix"].endswith(f"remote add upstream {mirror}")
    assert "github.com" not in found["fix"]


def test_init_resumes_after_a_failed_clone(newcomer: Newcomer) -> None:
    real = newcomer.fork_url
    newcomer.fork_url = str(Path(real).parent / "not-yet")  # a local path that fails: no network is asked
    failed = newcomer.init()
    assert failed.returncode != 0 and (newcomer.ws / "tracks.yaml").is_file()
    assert "run the same `porttrack init` again" in failed.stderr, failed.stderr
    Path(newcomer.fork_url).symlink_to(Path(real).resolve())
    again = newcomer.init()
    assert again.returncode == 0, again.stderr
    assert "keep" not in again.stderr or "tracks.yaml" in again.stderr
    assert newcomer.run("doctor").returncode == 0


# -- issue 33: an interrupted init, hostile --checkout values, tracks.yaml that is no file, a
# checkout owned by another user, a password in upstream.url -------------------------------------

_KILL_IN_CLONE = """#!/bin/sh
# the real git; during `clone`, once the clone has written its .git, SIGKILL porttrack (the parent)
# and this clone: an init killed half-way through cloning, as by the OOM killer or a closed laptop
sub="" skip=""
for arg in "$@"; do
    if [ -n "$skip" ]; then skip=""; continue; fi
    case "$arg" in -c|-C) skip=1 ;; -*) ;; *) sub=$arg; break ;; esac
done
if [ "$sub" != clone ]; then exec "$REAL_GIT" "$@"; fi
for dest in "$@"; do :; done
"$REAL_GIT" "$@" &
while [ ! -e "$dest/.git/config" ] && kill -0 $! 2>/dev/null; do :; done
kill -KILL $PPID
kill -KILL 0
"""


def test_an_init_killed_while_cloning_is_finished_by_one_rerun(newcomer: Newcomer, tmp_path: Path) -> None:
    bin_dir = tmp_path / "killing-bin"
    bin_dir.mkdir()
    (bin_dir / "git").write_text(_KILL_IN_CLONE)
    (bin_dir / "git").chmod(0o755)
    real_git = subprocess.run(["sh", "-c", "command -v git"], capture_output=True, text=True, check=True).stdout.strip()
    env = {**newcomer.env, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "REAL_GIT": real_git}
    killed = subprocess.run([sys.executable, "-m", "porttrack", "init", "ws", "--upstream", "vllm-project/vllm",
                             "--fork", "randomvariable/vllm", "--upstream-url", newcomer.upstream_url,
                             "--fork-url", newcomer.fork_url], cwd=newcomer.root, capture_output=True, text=True,
                            timeout=120, env={**os.environ, **env}, start_new_session=True)  # `kill 0` never reaches pytest
    assert killed.returncode == -9, (killed.returncode, killed.stderr)
    fork = newcomer.root / "vllm"
    assert not fork.exists(), "a half-made clone sits where the checkout belongs"
    # doctor does not call it fine
    assert newcomer.run("doctor").returncode != 0
    again = newcomer.init()
    assert again.returncode == 0, again.stderr
    assert git(fork, "rev-parse", "HEAD") == git(newcomer.world.fork, "rev-parse", "HEAD")
    assert (fork / "a.py").is_file()
    assert not list(newcomer.root.glob(".vllm.porttrack-clone*"))
    assert newcomer.run("doctor").returncode == 0


def _interrupted_clone(newcomer: Newcomer) -> Path:
    """What `git clone` leaves when killed after writing its config and before its first fetch
    (as earlier porttrack versions left it in place): a .git with origin, no HEAD, no files."""
    fork = newcomer.root / "vllm"
    git(newcomer.root, "init", "-q", "-b", "main", str(fork))
    git(fork, "remote", "add", "origin", newcomer.fork_url)
    git(fork, "config", "remote.origin.promisor", "true")
    git(fork, "config", "remote.origin.partialclonefilter", "blob:none")
    return fork


def test_a_checkout_left_with_no_head_is_not_fine_and_the_rerun_finishes_it(newcomer: Newcomer) -> None:
    made = newcomer.init()
    assert made.returncode == 0
    fork = newcomer.root / "vllm"
    subprocess.run(["rm", "-rf", str(fork)], check=True)
    _interrupted_clone(newcomer)
    doctor = newcomer.run("doctor", "--json")
    assert doctor.returncode != 0
    found = _finding(doctor, "fork checkout")
    assert found["status"] == "fail" and "no commit checked out" in found["detail"], found
    assert "fetch origin" in found["fix"]
    again = newcomer.init()
    assert again.returncode == 0, again.stderr
    assert "finish-clone" in again.stderr
    assert git(fork, "rev-parse", "HEAD") == git(newcomer.world.fork, "rev-parse", "HEAD")
    assert (fork / "a.py").is_file()
    assert newcomer.run("doctor").returncode == 0
    assert "nothing to do" in newcomer.init().stderr


def test_an_empty_repository_without_origin_is_named_an_interrupted_clone(newcomer: Newcomer) -> None:
    git(newcomer.root, "init", "-q", str(newcomer.root / "vllm"))
    refused = newcomer.init()
    assert refused.returncode == 6
    assert "interrupted early" in refused.stderr and "remove it" in refused.stderr


def test_checkout_values_read_back_exactly_from_tracks_yaml() -> None:
    """Seeded random folder names (quotes, `: `, `#`, YAML's words and indicators, unicode) in the
    skeleton tracks.yaml: each reads back as exactly the string given, and nothing else changes."""
    import random

    import yaml

    from porttrack.bootstrap import init as init_mod

    rng = random.Random(33)
    alphabet = list("abcXYZ019 ._-/~'\"#:&*!|>%@`{}[],?=+\\") + ["é", "☃", ": ", " #", "- "]
    fixed = ["no", "yes", "null", "~", "0777", "1e3", "a: b", "# c", "'q", '"', "dir with space", "-x", "[a]", "*ref", "&a", "!!str x"]
    for value in fixed + ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 16))) for _ in range(400)]:
        for profile in ("vllm-gpu", "neutral"):
            options = init_mod.checked(init_mod.Options(upstream="vllm-project/vllm", fork="me/vllm", checkout=value, profile=profile))
            doc = yaml.safe_load(init_mod.tracks_skeleton(options))
            assert doc["fork"]["checkout"] == value, value
            assert set(doc["fork"]) >= {"repo", "checkout", "branch"} and doc["fork"]["repo"] == "me/vllm", value


@pytest.mark.parametrize("value", ["a\nupstream: {repo: evil/evil}", "tab\there", "cr\r"])
def test_a_checkout_value_with_a_control_character_is_refused(newcomer: Newcomer, value: str) -> None:
    refused = newcomer.init("--checkout", value)
    assert refused.returncode == 2 and "control character" in refused.stderr
    assert not newcomer.ws.exists() or not (newcomer.ws / "tracks.yaml").exists()


def test_init_with_a_quote_and_a_colon_in_the_checkout_makes_a_working_workspace(newcomer: Newcomer) -> None:
    made = newcomer.init("--checkout", "../it's: here #1")
    assert made.returncode == 0, made.stderr
    assert (newcomer.root / "it's: here #1" / "a.py").is_file()
    assert newcomer.run("doctor").returncode == 0


@pytest.mark.parametrize("kind", ["fifo", "folder", "dev-zero", "dangling"])
def test_a_tracks_yaml_that_is_not_a_file_is_said_as_what_it_is(ready: Newcomer, kind: str) -> None:
    tracks = ready.ws / "tracks.yaml"
    tracks.unlink()
    words = {"fifo": "FIFO", "folder": "folder", "dev-zero": "character device", "dangling": "does not exist"}[kind]
    if kind == "fifo":
        os.mkfifo(tracks)
    elif kind == "folder":
        tracks.mkdir()
    elif kind == "dev-zero":
        tracks.symlink_to("/dev/zero")
    else:
        tracks.symlink_to(ready.ws / "gone.yaml")
    for argv in (("status", "--offline"), ("doctor", "--json"), ("queue",)):
        out = ready.run(*argv)
        assert out.returncode == (1 if argv[0] == "doctor" else 2), (argv, out.returncode, out.stderr)  # doctor: a failed check
        shown = out.stdout + out.stderr
        assert words in shown and "no such file" not in shown, (argv, shown)


def test_a_checkout_owned_by_another_user_is_said_to_be_gits_safe_directory_refusal(ready: Newcomer) -> None:
    fork = ready.root / "vllm"
    env: dict[str, str] = {}
    if os.geteuid() == 0:
        subprocess.run(["chown", "-R", "65534:65534", str(fork)], check=True)
    else:  # git's own switch for the same refusal (setup.c), where no other user can own a folder
        env["GIT_TEST_ASSUME_DIFFERENT_OWNER"] = "1"
    for argv in (("apply", "--dry-run"), ("doctor",)):
        out = ready.run(*argv, **env)
        assert out.returncode == (1 if argv == ("doctor",) else 2), (argv, out.returncode, out.stdout, out.stderr)
        assert "safe.directory" in out.stdout + out.stderr and "not a git repository" not in out.stdout + out.stderr, out.stderr


def test_doctors_fix_lines_never_print_the_password_of_upstream_url(ready: Newcomer) -> None:
    tracks = ready.ws / "tracks.yaml"
    text = tracks.read_text()
    secret_url = "https://porttrack-user:hunter2-Pa55word@127.0.0.1:9/vllm-project/vllm.git"
    tracks.write_text(re.sub(r'(?m)^  url: ".*"', f'  url: "{secret_url}"', text, count=1))
    assert secret_url in tracks.read_text()
    git(ready.root / "vllm", "remote", "remove", "upstream")
    for argv in (("doctor",), ("doctor", "--json")):
        out = ready.run(*argv)
        assert "hunter2-Pa55word" not in out.stdout + out.stderr, out.stdout
    found = _finding(ready.run("doctor", "--json"), "upstream remote")
    assert found["status"] == "fail" and found["fix"].endswith("remote add upstream https://***@127.0.0.1:9/vllm-project/vllm.git"), found
