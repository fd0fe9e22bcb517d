"""`porttrack init` and `porttrack doctor`, as a newcomer runs them: a subprocess, a fixture
upstream in real git, the GitHub emulator on loopback, and no other set-up."""

from __future__ import annotations

import json
import os
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
    assert "checkout: ../mine" in (newcomer.ws / "tracks.yaml").read_text()


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
