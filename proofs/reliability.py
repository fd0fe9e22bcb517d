"""The full reliability run: every case of tests/reliability/ and tests/test_regressions.py, slow
ones included, then the figures table (cases tried per category, passed, failed).

    python proofs/reliability.py            # the full run (under 30 minutes on 2 cores)
    python proofs/reliability.py --fast     # only what `pytest` runs by default (.ci/run)
    python proofs/reliability.py -- -x -k crash   # extra pytest arguments after --

The same table ends every pytest run that collects the suite; PORTTRACK_FULL=1 python -m pytest
is the full run with the rest of the test suite. The random kill points are seeded
(PORTTRACK_RELIABILITY_SEED, printed); a failure lists the case it was.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CATEGORY_ORDER = ["github-faults", "github-bounds", "crash", "concurrency", "hostile-yaml", "hostile-diffs",
                  "hostile-metadata", "hostile-upstream", "hostile-workspace", "hostile-results", "secrets", "regressions"]


def main(argv: list[str]) -> int:
    fast = "--fast" in argv
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    with tempfile.TemporaryDirectory(prefix="porttrack-reliability-") as tmp:
        out = Path(tmp) / "figures.json"
        env = {**os.environ, "PORTTRACK_RELIABILITY_JSON": str(out)}
        if fast:
            env.pop("PORTTRACK_FULL", None)
        else:
            env["PORTTRACK_FULL"] = "1"
        started = time.monotonic()
        code = subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                                "tests/reliability", "tests/test_regressions.py", *extra], cwd=ROOT, env=env)
        took = time.monotonic() - started
        if not out.exists():
            print("no figures were written (did the run collect the suite?)", file=sys.stderr)
            return code or 1
        data = json.loads(out.read_text())
    print()
    print(f"porttrack reliability figures ({'fast subset' if fast else 'full run'}, seed {data['seed']}, {took / 60:.1f} min)")
    print()
    print(table(data["tally"]))
    kills = data.get("kill_points") or {}
    if kills:
        print()
        print(f"SIGKILL points with the process still running: {sum(kills.values())} "
              f"({', '.join(f'{k} {v}' for k, v in sorted(kills.items()))})")
    for failure in data.get("failures") or ():
        print(f"FAILED {failure}")
    failed = sum(row.get("failed", 0) for row in data["tally"].values())
    if code == 1 and not failed:
        # pytest's word wins: figures that count no failure for a failed run would be a lie
        print("pytest reported failed tests that the figures above do not count: they are incomplete", file=sys.stderr)
    return code


def table(tally: dict[str, dict[str, int]]) -> str:
    rows = [(name, tally[name]) for name in CATEGORY_ORDER if tally.get(name, {}).get("tried")]
    rows += [(name, row) for name, row in tally.items() if name not in CATEGORY_ORDER and row.get("tried")]
    total = {k: sum(r[k] for _, r in rows) for k in ("tried", "passed", "failed")}
    lines = ["| category | tried | passed | failed |", "|---|---:|---:|---:|"]
    lines += [f"| {name} | {row['tried']} | {row['passed']} | {row['failed']} |" for name, row in rows]
    lines.append(f"| **total** | **{total['tried']}** | **{total['passed']}** | **{total['failed']}** |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
