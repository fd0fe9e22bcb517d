"""The figures table of the reliability suite, whole across pytest-xdist workers.

Each process that runs reliability items counts them into `rel_harness.TALLY` (the conftest's
per-item hook). Run alone, that process prints the table. Under xdist (`-n`) the items run in
workers and the table is printed by the controller, which collects nothing: each worker hands its
share over at the end of its session (`workeroutput`), and the controller adds the shares up
before it prints (and writes $PORTTRACK_RELIABILITY_JSON). The controller loads this module
through tests/conftest.py (it never loads tests/reliability/conftest.py, a folder it does not
collect); the conftest here registers it too, so the suite stands alone (tests/test_setup_contract.py
runs it so). Registering is idempotent: one table per run.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import rel_harness as H

PLUGIN_NAME = "porttrack-reliability-figures"
WORKER_KEY = "porttrack_reliability"


def register(config: pytest.Config) -> None:
    if not config.pluginmanager.has_plugin(PLUGIN_NAME):
        config.pluginmanager.register(Figures(), PLUGIN_NAME)


def _worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


class Figures:
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if _worker(session.config):  # this worker's share, for the controller to add up
            session.config.workeroutput[WORKER_KEY] = {"tally": H.TALLY, "failures": H.FAILURES, "kills": H.KILLS}

    @pytest.hookimpl(optionalhook=True)  # an xdist hook: absent without xdist
    def pytest_testnodedown(self, node, error) -> None:
        share = getattr(node, "workeroutput", {}).get(WORKER_KEY)
        if not share:
            return
        for category, row in share["tally"].items():
            mine = H.TALLY.setdefault(category, {"tried": 0, "passed": 0, "failed": 0})
            for key in ("tried", "passed", "failed"):
                mine[key] += row[key]
        H.FAILURES.extend(share["failures"])
        for point, n in share["kills"].items():
            H.KILLS[point] = H.KILLS.get(point, 0) + n

    def pytest_terminal_summary(self, terminalreporter, exitstatus, config) -> None:
        if _worker(config):
            return  # the controller prints the whole table
        # tests/test_regressions.py lies outside this folder, so the per-item hooks never see its
        # items: count them from the session's reports (the controller receives every worker's)
        seen: dict[str, bool] = {}  # an expected failure (xfail: a fix outside this suite's files pending) is a failure here
        for outcome in ("passed", "failed", "error", "xfailed"):
            for report in terminalreporter.stats.get(outcome, ()):
                nodeid = getattr(report, "nodeid", "")
                if nodeid.startswith("tests/test_regressions.py") and (outcome != "passed" or report.when == "call"):
                    seen[nodeid] = seen.get(nodeid, True) and outcome == "passed"
        H.TALLY["regressions"] = {"tried": len(seen), "passed": sum(seen.values()), "failed": len(seen) - sum(seen.values())}
        H.FAILURES.extend(f"regressions: {nodeid}" for nodeid, ok in seen.items() if not ok and f"regressions: {nodeid}" not in H.FAILURES)
        if not any(r["tried"] for r in H.TALLY.values()):
            return
        lines = table()
        terminalreporter.write_sep("=", "porttrack reliability figures")
        for line in lines:
            terminalreporter.write_line(line)
        if H.KILLS:
            terminalreporter.write_line(f"SIGKILL points (process still running when killed): {sum(H.KILLS.values())} "
                                        f"({', '.join(f'{k} {v}' for k, v in sorted(H.KILLS.items()))}); seed {H.SEED}")
        out = os.environ.get("PORTTRACK_RELIABILITY_JSON")
        if out:
            Path(out).write_text(json.dumps({"full": H.FULL, "seed": H.SEED, "tally": H.TALLY, "kill_points": H.KILLS,
                                             "failures": H.FAILURES}, indent=2))


def table() -> list[str]:
    rows = [(name, H.TALLY[name]) for name in H.CATEGORIES if H.TALLY.get(name, {}).get("tried")]
    rows += [(name, row) for name, row in H.TALLY.items() if name not in H.CATEGORIES and row["tried"]]
    total = {k: sum(r[k] for _, r in rows) for k in ("tried", "passed", "failed")}
    width = max(len(n) for n, _ in rows + [("total", total)])
    out = [f"{'category':<{width}}  {'tried':>6}  {'passed':>6}  {'failed':>6}"]
    for name, row in rows + [("total", total)]:
        out.append(f"{name:<{width}}  {row['tried']:>6}  {row['passed']:>6}  {row['failed']:>6}")
    return out
