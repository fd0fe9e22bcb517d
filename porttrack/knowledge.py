"""What the queue, coverage and convergence records know about each PR, for `porttrack status`.

`gather` never fails status: a part that cannot be read (no queue yet, no checkout of the fork, a
malformed record) is simply left out of the `Knowledge` it returns.
"""

from __future__ import annotations

from porttrack import queue as queue_mod
from porttrack.config import Config
from porttrack.converge_record import latest_verdicts
from porttrack.coverage import Coverage, track_coverage
from porttrack.errors import PorttrackError
from porttrack.gitrepo import GitRepo
from porttrack.status import Knowledge
from porttrack.workspace import Workspace


def gather(ws: Workspace, config: Config, fork: GitRepo | None = None, fork_problem: str | None = None) -> Knowledge:
    """`fork`: the fork checkout (coverage is looked for in it, recorded verdicts are bound to its
    branch tip), or None and why (`fork_problem`); neither given: the configured checkout, opened
    here, for callers that hold no door (the command layer hands in `Context.fork_or_problem`)."""
    if fork is None and fork_problem is None:
        fork, fork_problem = open_configured_fork(config)
    live = _live_patches(ws)
    coverage = _coverage(ws, config, fork, fork_problem)
    return Knowledge(
        queued={p.pr: p.state for p in live},
        converged=_converged(ws, config, fork, fork_problem),
        coverage={c.pr: c.text for c in coverage},
        coverage_unknown=frozenset(c.pr for c in coverage if c.problem),
        queued_heads={p.pr: p.revision.head for p in live if not p.revision.merged},
    )


def open_configured_fork(config: Config) -> tuple[GitRepo | None, str | None]:
    """`Context.fork_or_problem` for a caller that holds no door (a library caller, a test)."""
    path = config.fork_checkout()
    if path is None or not path.exists():
        return None, None  # coverage says so in its one-line form
    try:
        return GitRepo.open(path), None
    except PorttrackError as exc:
        return None, str(exc)


def _live_patches(ws: Workspace):
    try:
        return queue_mod.load(ws).live()
    except PorttrackError:
        return ()


def _converged(ws: Workspace, config: Config, fork: GitRepo | None, problem: str | None):
    """PR -> its recorded verdict, bound to fork.branch's tip (`converge_record.RecordedVerdict`)."""
    try:
        return latest_verdicts(ws, config.fork.branch, fork, problem)
    except PorttrackError:
        return {}


def _coverage(ws: Workspace, config: Config, fork: GitRepo | None, problem: str | None) -> tuple[Coverage, ...]:
    try:
        return track_coverage(ws, config, fork, problem)
    except PorttrackError:
        return ()
