"""The wheel a user installs: built from a copy of the tracked files with pip, as `pip install .`
builds it (an isolated build environment with the setuptools pip gets from the index), then
listed. PEP 639 metadata with no setuptools deprecation warning; py.typed, templates, schemas
and LICENSE inside; the crash log goes to the platform's cache folder unless PORTTRACK_LOG_DIR
says otherwise.
"""

from __future__ import annotations

import email
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import platformdirs
import pytest

from testing.workspace import make_workspace

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """(the wheel, pip's verbose build output). A copy of the tracked files, so the build's
    in-tree leftovers (build/, *.egg-info) never land in the developer's checkout."""
    src = tmp_path_factory.mktemp("src")
    tracked = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO_ROOT,
                             capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, tracked):
        if (REPO_ROOT / name).is_file():
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(REPO_ROOT / name, src / name)
    out_dir = tmp_path_factory.mktemp("wheel")
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "-w", str(out_dir), str(src)],
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stdout[-4000:] + build.stderr[-4000:]
    [wheel] = out_dir.glob("porttrack-*.whl")
    return wheel, build.stdout + build.stderr


def test_the_build_uses_pep_639_and_warns_about_nothing(built):
    _, log = built
    assert "Successfully built porttrack" in log or "Created wheel for porttrack" in log, log[-2000:]
    assert "SetuptoolsDeprecationWarning" not in log, [line for line in log.splitlines() if "Deprecat" in line]
    assert "license" not in " ".join(line.lower() for line in log.splitlines() if "warning" in line.lower())


def test_the_wheel_carries_license_types_templates_and_schemas(built):
    wheel, _ = built
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        metadata = email.message_from_bytes(zf.read(next(n for n in names if n.endswith(".dist-info/METADATA"))))
        [license_path] = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
        license_text = zf.read(license_path).decode()
    assert "porttrack/py.typed" in names
    assert "porttrack/templates/weekly_status.md.j2" in names
    assert "porttrack/schemas/results.schema.json" in names
    assert "porttrack/jobs/importwatch/sitecustomize.py" in names  # the timed job's import record
    assert "Apache License" in license_text and "Version 2.0, January 2004" in license_text
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata["License-File"] == "LICENSE"
    assert "License" not in metadata  # the deprecated free-text field is gone
    assert any(r.startswith("platformdirs") for r in metadata.get_all("Requires-Dist"))


def test_a_crash_log_goes_to_the_platform_cache_dir_unless_overridden(tmp_path, monkeypatch):
    """A bug's log goes where the platform keeps caches (XDG_CACHE_HOME on Linux is honoured, as
    platformdirs does); PORTTRACK_LOG_DIR still wins."""
    from porttrack.cli import crash_log_dir

    monkeypatch.delenv("PORTTRACK_LOG_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert crash_log_dir() == Path(platformdirs.user_cache_dir("porttrack", appauthor=False))
    if sys.platform.startswith("linux"):
        assert crash_log_dir() == tmp_path / "xdg" / "porttrack"
    monkeypatch.setenv("PORTTRACK_LOG_DIR", str(tmp_path / "logs"))
    assert crash_log_dir() == tmp_path / "logs"


def test_an_internal_error_writes_its_log_in_the_cache_dir(tmp_path, monkeypatch):
    """In a separate process with no PORTTRACK_LOG_DIR: the one-line message names the log it
    wrote under the cache folder (XDG_CACHE_HOME, as on a Linux desktop or runner)."""
    tw = make_workspace(tmp_path / "ws", {})
    env = tw.env(PORTTRACK_LOG_DIR=None, XDG_CACHE_HOME=str(tmp_path / "cache"))
    out = subprocess.run([sys.executable, "-c", "import sys; from porttrack.cli import _report_internal_error;"
                          "sys.exit(_report_internal_error(RuntimeError('boom')))"],
                         cwd=tw.root, env=env, capture_output=True, text=True, timeout=60)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    log = Path(platformdirs.user_cache_dir("porttrack", appauthor=False)) / "crash.log"
    assert out.returncode != 0 and str(log) in out.stderr, out.stderr
    assert "RuntimeError: boom" in log.read_text()


def test_every_package_data_pattern_ships_a_file() -> None:
    """A pattern that matches nothing ships nothing and misleads the reader (issue 35: `data/*`)."""
    import re

    pyproject = (REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8")  # no tomllib before Python 3.11
    line = re.search(r"^\[tool\.setuptools\.package-data\]\n(?:#.*\n)*porttrack = \[(.*)\]$", pyproject, re.M)
    assert line, "porttrack's package-data line"
    patterns = re.findall(r'"([^"]+)"', line.group(1))
    assert patterns
    empty = [p for p in patterns if not any((REPO_ROOT / "porttrack").glob(p))]
    assert not empty, f"package-data patterns matching no file: {empty}"
