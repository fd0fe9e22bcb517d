"""CPU seconds per test of the suite (issue 34: `pytest` on 2 cores in 5 minutes).

Wall time on a shared machine says little; CPU time (user + system, the test process and every
child it waited for: git, `python -m porttrack`) is what two idle cores must get through. Two uses:

  as a pytest plugin, per test (any -n; each xdist worker writes its own file):
    PYTHONPATH=benchmarks SUITE_CPU_OUT=/tmp/cpu .venv/bin/python -m pytest -p suite_cpu -n 2 -q
    -> /tmp/cpu.gw0, /tmp/cpu.gw1: "cpu_s<TAB>wall_s<TAB>porttrack_launches<TAB>nodeid" per test

  to sum those files up (world: this repository's own suite):
    python benchmarks/suite_cpu.py /tmp/cpu.gw* [--top 30] [--json benchmarks/results/x.json]

`porttrack_launches` counts `python -m porttrack` processes the test itself started (each costs
~0.5 s of CPU, mostly imports); a launch from inside porttrack (a job, a gate) is not counted.
Children not waited for (a killed process reaped by nobody) are not in cpu_s.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

_rows: list[tuple[float, float, int, str]] = []
_launches = [0]


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _count_launches() -> None:
    original = subprocess.Popen.__init__

    def init(self, args, *rest, **kw):  # type: ignore[no-untyped-def]
        if isinstance(args, (list, tuple)) and list(args[1:3]) == ["-m", "porttrack"]:
            _launches[0] += 1
        return original(self, args, *rest, **kw)

    subprocess.Popen.__init__ = init  # type: ignore[method-assign]


try:  # loaded by pytest (-p suite_cpu): hooks
    import pytest

    def pytest_configure(config) -> None:  # type: ignore[no-untyped-def]
        _count_launches()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):  # type: ignore[no-untyped-def]
        cpu, wall, launches = _cpu(), time.monotonic(), _launches[0]
        yield
        _rows.append((_cpu() - cpu, time.monotonic() - wall, _launches[0] - launches, item.nodeid))

    def pytest_sessionfinish(session) -> None:  # type: ignore[no-untyped-def]
        out = os.environ.get("SUITE_CPU_OUT")
        if out and _rows:
            worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
            with open(f"{out}.{worker}", "w", encoding="utf-8") as f:
                f.writelines(f"{c:.3f}\t{w:.3f}\t{n}\t{nodeid}\n" for c, w, n, nodeid in _rows)
except ImportError:  # run as a script without pytest installed
    pass


def read(paths: list[Path]) -> list[tuple[float, float, int | None, str]]:
    rows = []
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            cells = line.split("\t")
            launches = int(cells[2]) if len(cells) == 4 else None  # 3 columns: written before launches were counted
            rows.append((float(cells[0]), float(cells[1]), launches, cells[-1]))
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    rows = sorted(read(args.files), key=lambda r: r[0], reverse=True)
    total = sum(r[0] for r in rows)
    counted = [r[2] for r in rows if r[2] is not None]
    launched = sum(counted) if counted else None
    print(f"world: this repository's suite; {len(rows)} tests, {total:.1f} CPU-s summed per test, "
          f"{'not counted' if launched is None else launched} `python -m porttrack` launches by tests")
    for cpu, wall, launches, nodeid in rows[: args.top]:
        print(f"{cpu:7.2f} cpu-s {wall:7.2f} wall-s {'-' if launches is None else launches:>3} launches  {nodeid}")
    if args.json:
        args.json.write_text(json.dumps({
            "world": "this repository's own test suite", "tests": len(rows), "cpu_s": round(total, 1),
            "launches": launched,
            "slowest": [{"cpu_s": c, "wall_s": w, "launches": n, "test": t} for c, w, n, t in rows[: args.top]],
        }, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
