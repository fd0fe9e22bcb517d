"""The set-up contract (README, "Set up"): exactly two commands, the second the test command that
`.ci/run` runs verbatim; `setup.sh` says what to install where it cannot install it; a failed
reliability test is counted failed in the printed figures."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RELIABILITY = ROOT / "tests" / "reliability"


def setup_commands() -> list[str]:
    """The shell blocks of README's "Set up" section, each as its one line."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = re.search(r"^## Set up\n(.*?)^## ", readme, re.S | re.M).group(1)
    return [block.strip() for block in re.findall(r"^```sh\n(.*?)^```", section, re.S | re.M)]


def test_readme_holds_exactly_two_one_line_set_up_commands():
    commands = setup_commands()
    assert len(commands) == 2, commands
    assert all("\n" not in c for c in commands), "each command is one line, to copy and paste"
    tool, tests = commands
    assert "tool" in tool and "test" in tests


def test_ci_runs_exactly_readmes_test_command():
    test_command = setup_commands()[1]
    run = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    executed = [line.strip() for line in run.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert test_command in executed, f"{test_command!r} is not a command of .ci/run: {executed}"
    assert executed[-1] == test_command, "README's test command is the last thing .ci/run does (its status is CI's)"
    assert os.access(ROOT / ".ci" / "run", os.X_OK)


def test_the_test_command_runs_the_suite_on_every_core():
    """Five minutes on two cores (issue 34) needs both: pytest-xdist installed by the [test] extra,
    and `sh setup.sh test` asking for a worker per core before the caller's arguments (so `-n 0`
    among them still wins)."""
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")  # no tomllib before Python 3.11
    extra = re.search(r"^test = \[\n(.*?)^\]", pyproject, re.S | re.M).group(1)
    assert re.search(r'^\s*"pytest-xdist[>=~]', extra, re.M), extra
    runs = [line.strip() for line in (ROOT / "setup.sh").read_text().splitlines() if "-m pytest" in line and not line.lstrip().startswith("#")]
    assert runs == ['exec python -m pytest -q -n auto "$@"'], runs


def test_the_test_command_runs_ruff_and_mypy_before_the_suite_and_fails_with_them():
    """Issue 35: the linter and the type checker run in CI before the tests (README's test command,
    which `.ci/run` runs), each failing the run, and the [test] extra installs both."""
    pyproject = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    extra = re.search(r"^test = \[\n(.*?)^\]", pyproject, re.S | re.M).group(1)
    for tool in ("ruff", "mypy"):
        assert re.search(rf'^\s*"{tool}[>=~]', extra, re.M), f"{tool} is not in the [test] extra"
    lines = [line.strip() for line in (ROOT / "setup.sh").read_text().splitlines() if not line.lstrip().startswith("#")]
    test_case = lines[lines.index("test)"):]
    test_case = test_case[:test_case.index(";;")]
    runs = [i for i, line in enumerate(test_case) if line.startswith(("python -m ruff", "python -m mypy", "exec python -m pytest"))]
    assert [test_case[i].split("python -m ")[1].split()[0] for i in runs] == ["ruff", "mypy", "pytest"], test_case
    for i in runs[:2]:
        assert "|| {" in test_case[i] and "exit 1" in test_case[i], f"a failure must fail the run: {test_case[i]}"


def test_setup_says_what_to_install_when_quilt_is_missing_and_cannot_be_installed(tmp_path):
    # a PATH with python3 and the shell's few tools, but neither quilt nor apt-get
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    for tool in ("dirname", "id", "printf"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    work = tmp_path / "clone"
    work.mkdir()
    shutil.copy(ROOT / "setup.sh", work / "setup.sh")
    out = subprocess.run(["/bin/sh", str(work / "setup.sh"), "test"], cwd=work, capture_output=True, text=True,
                         env={"PATH": str(bin_dir), "HOME": str(tmp_path)}, timeout=60)
    assert out.returncode == 2, out.stderr
    assert "quilt" in out.stderr and "brew install quilt" in out.stderr and "dnf install quilt" in out.stderr
    assert "apt-get install quilt" in out.stderr
    assert not (work / ".venv").exists(), "it stops before installing anything"


def test_setup_tool_runs_status_offline_and_says_how_to_poll_live(tmp_path):
    """README's first command on a fresh machine with no way to GitHub: the recorded state, its age,
    and one line on polling live. pip is the one thing stood in for (it would need PyPI): the venv's
    `porttrack` runs this checkout's copy for real."""
    copy = tmp_path / "checkout"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(".git", ".porttrack", "*.egg-info", ".venv*", "__pycache__", ".pytest_cache"))
    venv_bin = copy / ".venv" / "bin"
    venv_bin.mkdir(parents=True)
    (venv_bin / "python").write_text("#!/bin/sh\n# stands in for pip: `-m pip --version` and `-m pip install` succeed\nexit 0\n")
    (venv_bin / "porttrack").write_text(f'#!/bin/sh\nPYTHONPATH="{copy}" exec "{sys.executable}" -m porttrack "$@"\n')
    for stub in venv_bin.iterdir():
        stub.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_TOKEN", "GH_TOKEN", "PORTTRACK_WORKSPACE", "PORTTRACK_FORK")}
    env.update(PORTTRACK_NO_GH_CLI="1", GITHUB_API_URL="http://127.0.0.1:9")  # nothing may be asked
    before = (copy / "state" / "upstream.json").read_bytes()
    observed = json.loads(before)["observed_at"]
    days = (datetime.now(timezone.utc) - datetime.fromisoformat(observed.replace("Z", "+00:00"))).days

    out = subprocess.run(["/bin/sh", str(copy / "setup.sh"), "tool"], cwd=copy, env=env, capture_output=True, text=True, timeout=120)

    assert out.returncode == 0, out.stderr
    assert "OFFLINE (recorded state" in out.stdout and "#48407" in out.stdout
    assert f"offline: --offline was given; showing the state recorded at {observed} (recorded {days} day" in out.stderr
    live = [line for line in out.stderr.splitlines() if "to poll GitHub live" in line]
    assert live == ["setup.sh: to poll GitHub live: .venv/bin/porttrack status (no token needed for a public upstream: "
                    "60 requests an hour; GITHUB_TOKEN or GH_TOKEN raises it)"]
    assert (copy / "state" / "upstream.json").read_bytes() == before


def test_setup_refuses_an_unknown_mode(tmp_path):
    out = subprocess.run(["/bin/sh", str(ROOT / "setup.sh"), "install"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2 and "usage: sh setup.sh tool | sh setup.sh test" in out.stderr


FIGURE_CASES = '''
import pytest

pytestmark = pytest.mark.reliability("hostile-metadata")


def test_passes():
    pass


def test_fails():
    assert False


def test_fails_in_a_case_with_pytest_fail(cases):
    with cases.case("one"):
        pytest.fail("a tool is missing")  # not an Exception: it escapes the case
    cases.done()


def test_fails_after_its_cases_passed(cases):
    with cases.case("one"):
        pass
    assert False


def test_one_of_two_cases_fails(cases):
    with cases.case("good"):
        pass
    with cases.case("bad"):
        assert False
    cases.done()


@pytest.fixture
def breaks_on_teardown():
    yield
    raise AssertionError("found a token")


def test_fails_in_teardown(breaks_on_teardown):
    pass


@pytest.mark.skip(reason="not counted")
def test_skipped():
    pass
'''


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_a_failed_reliability_test_is_counted_failed_in_the_printed_figures(tmp_path, workers):
    # The suite's own conftest and harness, over tests made to fail in every way a test can; under
    # pytest-xdist the items run in two workers and the controller prints the sum of their shares.
    suite = tmp_path / "reliability"
    suite.mkdir()
    for name in ("conftest.py", "rel_harness.py", "rel_figures.py"):
        shutil.copy(RELIABILITY / name, suite / name)
    (suite / "test_figures.py").write_text(FIGURE_CASES)
    figures = tmp_path / "figures.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PORTTRACK_RELIABILITY_JSON": str(figures)}
    env.pop("PORTTRACK_FULL", None)
    out = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path),
                          *workers, str(suite)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 1, out.stdout[-3000:]
    assert re.search(r"\b4 failed, 2 passed, 1 skipped, 1 error\b", out.stdout), out.stdout[-3000:]
    # passed: test_passes, case "one" of the test that failed after it, case "good"; failed: the
    # four failed tests (one of them through its case "bad") and the one whose teardown failed
    printed = re.search(r"^hostile-metadata\s+(\d+)\s+(\d+)\s+(\d+)$", out.stdout, re.M)
    assert printed, out.stdout[-3000:]
    tried, passed, failed = map(int, printed.groups())
    assert (tried, passed, failed) == (8, 3, 5), out.stdout[-3000:]
    tally = json.loads(figures.read_text())["tally"]["hostile-metadata"]
    assert tally == {"tried": 8, "passed": 3, "failed": 5}
