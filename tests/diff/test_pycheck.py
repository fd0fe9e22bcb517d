"""Hostile Python in a PR (issue 33, items 6 and 8): deeply nested expressions that make Python's
parser, compiler or pyflakes run out of recursion or memory, and a 30 MB Python file. Each is a
clear refusal naming the file (exit 6, nothing written), never an internal error (exit 70), and
the 30 MB file is refused within 500 MB of peak memory (measured: the CLI as a subprocess)."""

from __future__ import annotations

import resource
import subprocess
import sys

import pytest

from porttrack.diff.hunks import parse_diff
from porttrack.diff.pycheck import MAX_PYTHON_BYTES, NotCheckable, check_sources, name_uses
from testing.workspace import make_workspace, track

NESTED = {
    "parentheses": lambda n: "x = " + "(" * n + "1" + ")" * n + "\n",
    "unary minus": lambda n: "x = " + "-" * n + "1\n",
    "additions": lambda n: "x = " + "1 + " * n + "1\n",
    "calls": lambda n: "x = " + "f(" * n + "1" + ")" * n + "\n",
    "lambdas": lambda n: "x = " + "lambda: " * n + "1\n",
}


@pytest.mark.parametrize("kind", sorted(NESTED))
def test_deep_nesting_is_a_refusal_or_a_finding_never_a_crash(kind):
    """Whatever the depth: a finding (does not compile) or NotCheckable, never RecursionError /
    MemoryError out of the check."""
    for depth in (50, 500, 5000, 100_000):
        source = NESTED[kind](depth).encode()
        try:
            check = check_sources({"m.py": b"x = 1\n"}, {"m.py": source})
        except NotCheckable as exc:
            assert "m.py" in str(exc) and "--exclude" in str(exc) and exc.exit_code == 6
            continue
        assert all(f.kind in ("does-not-compile", "undefined-name") for f in check.failed), (kind, depth, check)


def test_the_name_analysis_adds_no_edge_for_a_file_it_cannot_read():
    deep = NESTED["additions"](100_000)
    diff = ("diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n@@ -1,2 +1,2 @@\n-a = 1\n+a = 2\n b = 1\n"
            "@@ -9,1 +9,1 @@\n-c = 1\n+c = a\n").encode()
    files = parse_diff(diff)
    assert name_uses(files, {"m.py": deep.encode()}, {"m.py": deep.encode()}) == []


def _pr_world(world, tmp_path, path: str, text: str):
    world.upstream.commit({"pkg/__init__.py": "", "pkg/keep.py": "VALUE = 1\n"}, "the package")
    subprocess.run(["git", "pull", "-q", "--ff-only", "upstream", "main"], cwd=world.fork, check=True, capture_output=True)
    world.open_pr(4701, {path: text, "pkg/keep.py": "VALUE = 2\n"}, "hostile python")
    ws = make_workspace(tmp_path / "ws", {"t": track([4701])}, api_url=world.fake.base_url, fork=world.fork, token=world.token)
    assert ws.run_in_process("status", "--no-search").returncode == 0
    return ws


def test_importing_deeply_nested_python_is_a_clear_refusal(tmp_path, world):
    ws = _pr_world(world, tmp_path, "pkg/deep.py", NESTED["additions"](100_000))
    out = ws.run("import", "4701")
    assert out.returncode == 6, (out.returncode, out.stderr[-2000:])
    assert "pkg/deep.py" in out.stderr and "nested too deeply" in out.stderr and "--exclude" in out.stderr, out.stderr
    assert "Traceback" not in out.stderr
    assert not (ws.root / "patches" / "manifest.json").exists()
    # the way out it names works: the rest is taken
    rest = ws.run("import", "4701", "--exclude", "pkg/deep.py")
    assert rest.returncode == 0, rest.stderr


def test_a_30_mb_python_file_is_refused_within_500_mb(tmp_path, world):
    line = "value_{} = 'a line of a generated table, long enough to make thirty megabytes'\n"
    text = "".join(line.format(i) for i in range(30 * 1024 * 1024 // len(line.format(0))))
    assert len(text) > 29 * 1024 * 1024 > MAX_PYTHON_BYTES
    ws = _pr_world(world, tmp_path, "pkg/table.py", text)
    probe = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
             "sys.stdout.write(p.stderr[-3000:]); "
             "print('PEAK_KB', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, 'RC', p.returncode)")
    proc = subprocess.run([sys.executable, "-c", probe, sys.executable, "-m", "porttrack", "import", "4701"],
                          cwd=ws.root, env=ws.env(), capture_output=True, text=True, timeout=300)
    said = proc.stdout
    peak_kb, rc = int(said.split("PEAK_KB ")[1].split()[0]), int(said.split("RC ")[1].split()[0])
    print(f"import of a {len(text) / 2**20:.1f} MiB Python file: exit {rc}, peak {peak_kb / 1024:.0f} MB")
    assert rc == 6, said
    assert "pkg/table.py" in said and "more than the source check reads" in said and "--exclude" in said, said
    assert peak_kb < 500 * 1024, f"peak {peak_kb / 1024:.0f} MB"
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss > 0
