"""The reliability suite's plumbing: slow-case selection, the per-category tally behind the figures
table, and the secrets check applied after every reliability case.

- Items marked `slow` are deselected unless PORTTRACK_FULL=1 (anywhere in the session: the full
  run is `PORTTRACK_FULL=1 python -m pytest`, or `python proofs/reliability.py`).
- Every item under tests/reliability/ or tests/test_regressions.py is counted in its category
  (`pytestmark = pytest.mark.reliability("...")`); a test that runs sub-cases (`cases` fixture)
  counts each sub-case instead. The table is printed at the end of the run and written as JSON to
  $PORTTRACK_RELIABILITY_JSON when set (rel_figures.py; under pytest-xdist, summed over the workers).
- After every reliability item, no known token (testing.workspace.TOKEN, the emulator's tokens)
  may appear in anything porttrack printed, any file under the test's folders (workspace, logs,
  crash.log, recorded state, evidence, reports), HOME, or what the emulator received (issue
  bodies, comments, dispatch inputs).
"""

from __future__ import annotations

import os

import pytest
import rel_figures
import rel_harness as H
from rel_harness import cases, secret_guard  # noqa: F401 - fixtures, registered here


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "reliability(category): a reliability-suite case, counted in the figures table")
    rel_figures.register(config)  # the table at the end of the run (rel_figures.py: whole across xdist workers)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("PORTTRACK_FULL") == "1":
        return
    keep, drop = [], []
    for item in items:
        (drop if item.get_closest_marker("slow") else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


# per item: the phases (setup, call, teardown) it failed in, and whether it was skipped; the item
# is counted once, after its teardown, so a failure in any phase reaches the figures
FAILED_IN = pytest.StashKey[list]()
SKIPPED = pytest.StashKey[bool]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    outcome = yield
    report = outcome.get_result()
    category = H.category(item)
    if category is None:
        return
    failed_in = item.stash.setdefault(FAILED_IN, [])
    expected_failure = report.skipped and hasattr(report, "wasxfail")  # a failure here, as for regressions
    if report.failed or expected_failure:
        failed_in.append(report.when)
    elif report.skipped:
        item.stash[SKIPPED] = True
    if report.when == "teardown":
        count(item, category, failed_in)


def count(item: pytest.Item, category: str, failed_in: list[str]) -> None:
    """One item's share of the figures. A test pytest reports failed is counted failed at least
    once: a failure outside its sub-cases (before the first, after the last, in a fixture's
    teardown such as the secrets check, or a `pytest.fail`, which is no `Exception` and so escapes
    `Cases.case`) once printed `hostile-metadata 1 1 0` for a failed test."""
    sub_cases = (getattr(item, "funcargs", None) or {}).get("cases")
    if isinstance(sub_cases, H.Cases) and sub_cases.count:
        if failed_in and not sub_cases.failures:
            H.record(category, False, f"{item.nodeid} (failed outside its cases, in {'/'.join(failed_in)})")
        return  # otherwise the sub-cases were counted one by one
    if failed_in or not item.stash.get(SKIPPED, False):
        H.record(category, not failed_in, item.nodeid)
