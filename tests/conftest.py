"""Shared fixtures: git isolation (autouse), the GitHub emulator (`fake`) and `world`."""

from __future__ import annotations

import logging
import signal
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from pytest_httpserver import HTTPServer

from testing.gitfixtures import ENV_TO_CLEAR, isolated_git_env, reset_clock
from testing.github_emulator import FakeGitHub
from testing.world import World

# the terminal's size as the shell exports it: a test run from a narrow terminal (or in an xdist
# worker, which has none) must lay out the same text
TERMINAL_SIZE = ("COLUMNS", "LINES")
RELIABILITY = Path(__file__).resolve().parent / "reliability"


def pytest_configure(config: pytest.Config) -> None:
    # A shell starts a background job (`sh setup.sh test &`, a CI step run that way) with SIGINT
    # ignored, and every process started from it inherits that: the tests that interrupt porttrack
    # with SIGINT would see nothing happen. Ctrl-C is Python's KeyboardInterrupt here, as in a terminal.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # pytest-xdist's controller collects nothing, so it never loads tests/reliability/conftest.py:
    # the reliability figures are registered here too, to add up the workers' shares and print them
    if str(RELIABILITY) not in sys.path:
        sys.path.insert(0, str(RELIABILITY))
    import rel_figures

    rel_figures.register(config)


# The suite's longest tests, longest first (`sh setup.sh test --durations=30`; benchmarks/results/
# suite_and_startup_notes.md): collected first, so pytest-xdist hands them out before the short
# ones and no worker is left with a long test after the others ran out of work. Order only: every
# test still runs, and each stands alone (its own tmp_path, emulator, workspace).
LONGEST = (
    "tests/report/test_post.py::test_two_checkouts_posting_the_same_week_at_once_leave_one_open_issue",
    "tests/take/test_importer_processes.py::test_plans_with_one_real_apply_equal_plans_made_with_the_old_checks",
    "tests/reliability/test_rel_hostile_state.py::test_seeded_hostile_values_in_recorded_files",
    "tests/take/test_importer_processes.py::test_one_real_apply_says_what_check_check_v_the_copy_and_stat_said",
    "tests/take/test_importer_processes.py::test_plans_made_from_the_probe_equal_plans_made_with_the_trial_build",
    "tests/take/test_importer_processes.py::test_batched_group_probes_give_the_verdicts_of_the_one_by_one_probes",
    "tests/reliability/test_rel_hostile_state.py::test_every_recorded_file_in_every_whole_file_form",
    "tests/properties/test_probe_log_fuzz.py::test_a_damaged_probe_log_never_passes_where_the_intact_one_fails",
    "tests/reliability/test_rel_boundaries.py::test_gate_run_at_every_boundary",
    "tests/properties/test_collisions_oracle.py::test_no_collision_is_missed_over_seeded_random_cases",
    "tests/properties/test_import_modules_oracle.py::test_the_queues_modules_import_wherever_the_import_takes_hunks",
    "tests/report/test_weekly_budget.py::test_a_scripted_week_without_a_token_costs_at_most_20_counted_requests[1000]",
    "tests/prove/test_gates.py::test_gate_run_with_the_vllm_job_records_evidence_that_passes",
    "tests/test_apply.py::test_interrupted_apply_leaves_refs_and_worktrees_and_a_rerun_completes[SIGINT]",
    "tests/cli/test_queue.py::test_sigint_during_import_exits_130_and_changes_nothing",
    "tests/reliability/test_rel_hostile_answers.py::test_seeded_hostile_pull_request_answers",
    "tests/cli/test_neutral_fork.py::test_a_library_fork_is_followed_proven_promoted_and_reported",
    "tests/jobs/test_vllm.py::test_the_backend_decision_against_an_independent_truth_over_seeded_cases",
    "tests/jobs/test_cells_gate_e2e.py::test_a_planted_compile_after_warmup_fails_the_gate_and_promotion_is_refused",
    "tests/cli/test_terminal.py::test_output_fits_each_width_plain_and_coloured",
    "tests/properties/test_converge_differential.py::test_differential_fast_subset",
    "tests/reliability/test_rel_boundaries.py::test_import_at_every_boundary",
    "tests/properties/test_hostile_upstream.py::test_hostile_upstream_text_never_stops_or_steers_the_tool",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {nodeid: n for n, nodeid in enumerate(LONGEST)}
    items.sort(key=lambda item: rank.get(item.nodeid, len(LONGEST)))  # stable: the rest keep their order


@pytest.fixture(autouse=True)
def git_env(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Every test runs with its own HOME and git config, fixed identities and dates, and no
    GitHub token or API URL, nor terminal size (COLUMNS, LINES), inherited from the developer's
    shell or CI."""
    for name in ENV_TO_CLEAR:
        monkeypatch.delenv(name, raising=False)
    for name in TERMINAL_SIZE:  # a test that wants a width sets it; none inherits the shell's
        monkeypatch.delenv(name, raising=False)
    env = isolated_git_env(tmp_path_factory.mktemp("home"))
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    reset_clock()
    return env


@pytest.fixture(scope="session")
def fake_server() -> Iterator[HTTPServer]:
    """One threaded loopback server for the session (stopping one costs ~0.5 s)."""
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = HTTPServer("127.0.0.1", 0, threaded=True)
    server.start()
    yield server
    server.clear()
    server.stop()


@pytest.fixture
def fake(fake_server: HTTPServer) -> Iterator[FakeGitHub]:
    """A fresh GitHub emulator at `fake.base_url`, with tokens DEFAULT_TOKEN (push) and
    READONLY_TOKEN. The test fails if the emulator raised, if a request reached an endpoint it
    does not implement (set `fake.strict = False` when that is the point), or if the server saw
    a request no handler matched."""
    fake_server.clear()
    emulator = FakeGitHub(fake_server.url_for("/").rstrip("/")).install(fake_server)
    yield emulator
    problems = emulator.problems()
    problems += [str(a) for a in fake_server.assertions]
    problems += [repr(e) for e in fake_server.handler_errors]
    fake_server.clear()
    if problems:
        pytest.fail("GitHub emulator problems:\n" + "\n".join(problems), pytrace=False)


@pytest.fixture
def world(tmp_path: Path, fake: FakeGitHub) -> World:
    """Upstream `vllm-project/vllm` (bare repo with refs/pull/N/head) linked to the emulator,
    and the fork `randomvariable/vllm` cloned at `world.fork`."""
    return World(tmp_path, fake)
