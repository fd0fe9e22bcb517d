"""porttrack.jobs.timed measures the worktree's code: a src-layout fork whose environment has an
installed copy of the package that differs from the worktree's (a real venv, the copy in its
site-packages) is timed on the worktree's copy, or refused; never timed on the installed one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from porttrack.jobs import timed

WORKTREE_LIB = 'WHO = "worktree"\n\ndef add(a, b):\n    return a + b\n'
INSTALLED_LIB = 'WHO = "installed"\n\ndef add(a, b):\n    return a - b  # the released copy, before the fork\'s fix\n'
TESTS = 'import unittest\n\nimport minilib\n\n\nclass T(unittest.TestCase):\n    def test_worktree(self):\n        self.assertEqual(minilib.WHO, "worktree")\n        self.assertEqual(minilib.add(2, 3), 5)\n'


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A real virtual environment with minilib installed in its site-packages (the old copy)."""
    root = tmp_path_factory.mktemp("venv") / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True, timeout=120)
    python = root / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    (Path(purelib) / "minilib").mkdir(parents=True)
    (Path(purelib) / "minilib" / "__init__.py").write_text(INSTALLED_LIB)
    return python


def project(root: Path, layout: str = "src") -> Path:
    tree = root / "fork"
    pkg = tree / layout / "minilib" if layout else tree / "minilib"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(WORKTREE_LIB)
    (tree / "tests").mkdir()
    (tree / "tests" / "test_minilib.py").write_text(TESTS)
    (tree / "pyproject.toml").write_text('[project]\nname = "minilib"\nversion = "1"\n')
    return tree


def run_timed(tmp_path: Path, tree: Path, *program: str, extra: tuple[str, ...] = (),
              path: str | None = None) -> tuple[subprocess.CompletedProcess, dict | None]:
    out = tmp_path / "results.json"
    out.unlink(missing_ok=True)  # a later call in the same test reads only what it wrote
    env = {**os.environ, **({"PATH": path} if path else {}), "PORTTRACK_TRACK": "t", "PORTTRACK_SUBJECT": "0001-x", "PORTTRACK_ROLE": "candidate",
           "PORTTRACK_TARGET": "linux", "PORTTRACK_REF": "a" * 40, "PORTTRACK_UPSTREAM_BASE": "b" * 40,
           "PORTTRACK_FORK_COMMIT": "c" * 40, "PORTTRACK_PATCH_SET": "[]"}
    proc = subprocess.run([sys.executable, "-m", "porttrack.jobs.timed", "--cwd", str(tree), "--results", str(out), *extra, "--", *program],
                          env=env, capture_output=True, text=True, timeout=120)
    return proc, (json.loads(out.read_text()) if out.is_file() else None)


def test_the_installed_copy_differs_from_the_worktree(tmp_path, venv):
    """The premise: run plainly in the worktree, the environment's Python imports the installed copy."""
    tree = project(tmp_path)
    plain = subprocess.run([str(venv), "-m", "unittest", "discover", "-s", "tests", "-q"], cwd=tree, capture_output=True, text=True)
    assert plain.returncode != 0 and "'installed' != 'worktree'" in plain.stderr


def test_a_src_layout_fork_is_timed_on_the_worktrees_copy(tmp_path, venv):
    tree = project(tmp_path)
    proc, doc = run_timed(tmp_path, tree, str(venv), "-m", "unittest", "discover", "-s", "tests", "-q")
    assert proc.returncode == 0, proc.stderr
    assert doc["cells"][0]["metrics"]["wall_time"] > 0
    assert doc["job"]["notes"] == "measured the worktree's code: minilib from src/minilib/__init__.py"


def test_a_package_imported_from_outside_the_worktree_is_refused(tmp_path, venv):
    """A layout porttrack does not put on the path (the package under python/): the program picks
    up the installed copy, and the run is refused rather than timed."""
    tree = project(tmp_path, layout="python")
    proc, doc = run_timed(tmp_path, tree, str(venv), "-c", "import minilib", extra=("--package", "minilib"))
    assert proc.returncode == 6 and doc is None
    assert "refused (imported-outside-worktree): the program imported minilib from" in proc.stderr
    assert "site-packages/minilib/__init__.py" in proc.stderr


def test_a_program_that_drops_the_path_is_refused_not_trusted(tmp_path, venv):
    tree = project(tmp_path)
    proc, doc = run_timed(tmp_path, tree, str(venv), "-I", "-c", "import minilib")
    assert proc.returncode == 6 and doc is None and "refused (process-not-vouched)" in proc.stderr


def test_the_import_record_runs_any_other_sitecustomize(tmp_path, venv):
    """porttrack's sitecustomize.py chains to the environment's own one."""
    tree = project(tmp_path)
    own = tmp_path / "own"
    own.mkdir()
    (own / "sitecustomize.py").write_text(f"open({str(tmp_path / 'ran')!r}, 'w').write('yes')\n")
    env_path = os.environ.get("PYTHONPATH", "")
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(own), env_path) if p)
    try:
        proc, doc = run_timed(tmp_path, tree, str(venv), "-c", "import minilib")
    finally:
        os.environ["PYTHONPATH"] = env_path
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "ran").read_text() == "yes"


def test_the_packages_measured_default_to_the_worktrees_own(tmp_path):
    assert timed.worktree_packages(project(tmp_path)) == ["minilib"]
    flat = project(tmp_path / "flat", layout="")
    assert timed.worktree_packages(flat) == ["minilib"]  # tests/ has no __init__.py, and is never one


def _venv_path(venv: Path) -> str:
    return os.pathsep.join([str(venv.parent), os.environ.get("PATH", "")])


def test_a_clean_child_inside_sh_c_cannot_vouch_and_the_run_is_refused(tmp_path, venv):
    """One process imports the worktree's copy and vouches; a second, `python -I -m unittest`
    started by name inside `sh -c`, imports the installed copy and records nothing: the run is
    refused, not reported as the worktree's code."""
    tree = project(tmp_path)
    script = "python -c 'import minilib' && python -I -m unittest discover -s tests -q || true"
    proc, doc = run_timed(tmp_path, tree, "sh", "-c", script, path=_venv_path(venv))
    assert proc.returncode == 6 and doc is None, proc.stderr
    assert "refused (process-not-vouched): python (pid" in proc.stderr and "python -I" in proc.stderr
    # the same two processes, both vouching: timed on the worktree's copy
    proc, doc = run_timed(tmp_path, tree, "sh", "-c", "python -c 'import minilib' && python3 -m unittest discover -s tests -q",
                          path=_venv_path(venv))
    assert proc.returncode == 0, proc.stderr
    assert doc["job"]["notes"] == "measured the worktree's code: minilib from src/minilib/__init__.py"


def test_a_process_that_ends_without_its_record_cannot_vouch(tmp_path, venv):
    tree = project(tmp_path)
    proc, doc = run_timed(tmp_path, tree, str(venv), "-c", "import minilib, os; os._exit(0)")
    assert proc.returncode == 6 and doc is None and "ended without writing what it imported" in proc.stderr


def test_a_single_module_src_layout_is_watched(tmp_path, venv):
    tree = tmp_path / "fork"
    (tree / "src").mkdir(parents=True)
    (tree / "src" / "minilib.py").write_text(WORKTREE_LIB)
    (tree / "tests").mkdir()
    (tree / "tests" / "test_minilib.py").write_text(TESTS)
    assert timed.worktree_packages(tree) == ["minilib"]
    proc, doc = run_timed(tmp_path, tree, str(venv), "-m", "unittest", "discover", "-s", "tests", "-q")
    assert proc.returncode == 0, proc.stderr
    assert doc["job"]["notes"] == "measured the worktree's code: minilib from src/minilib.py"
    proc, doc = run_timed(tmp_path, tree, "sh", "-c", "python -I -c 'import minilib'", path=_venv_path(venv))
    assert proc.returncode == 6 and doc is None and "process-not-vouched" in proc.stderr


def test_a_namespace_package_with_a_portion_outside_the_worktree_is_refused(tmp_path, venv):
    """`src/nspkg/` has no __init__.py; the environment holds another portion of it: a submodule
    imported from there is code the worktree does not have."""
    purelib = subprocess.run([str(venv), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    (Path(purelib) / "nspkg").mkdir(exist_ok=True)
    (Path(purelib) / "nspkg" / "released.py").write_text("X = 1\n")
    tree = tmp_path / "fork"
    (tree / "src" / "nspkg").mkdir(parents=True)
    (tree / "src" / "nspkg" / "mine.py").write_text("X = 2\n")
    assert timed.worktree_packages(tree) == ["nspkg"]
    proc, doc = run_timed(tmp_path, tree, str(venv), "-c", "import nspkg.mine")
    assert proc.returncode == 0, proc.stderr
    assert doc["job"]["notes"].startswith("measured the worktree's code: nspkg from ") and "src/nspkg/mine.py" in doc["job"]["notes"]
    proc, doc = run_timed(tmp_path, tree, str(venv), "-c", "import nspkg.mine, nspkg.released")
    assert proc.returncode == 6 and doc is None and "refused (imported-outside-worktree)" in proc.stderr
    assert "site-packages/nspkg/released.py" in proc.stderr


def test_with_nothing_to_watch_the_claim_is_not_made(tmp_path):
    tree = tmp_path / "fork"
    (tree / "tools").mkdir(parents=True)
    (tree / "tools" / "run.sh").write_text("true\n")
    proc, doc = run_timed(tmp_path, tree, "true")
    assert proc.returncode == 0, proc.stderr
    assert "worktree's code" not in doc["job"]["notes"] and doc["job"]["notes"].startswith("which code ran was not checked")
