"""What the queue, coverage and convergence records know about each PR, for `porttrack status`.

`gather` never fails status: a part that cannot be read (no queue yet, no fork checkout, a
malformed record) is simply left out of the `Knowledge` it returns.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from porttrack.converge import latest_verdicts
from porttrack.errors import PorttrackError
from porttrack.status import Knowledge
from porttrack.workspace import Workspace

if TYPE_CHECKING:
    from porttrack.config import Config


def gather(ws: Workspace, config: "Config") -> Knowledge:
    live = _live_patches(ws)
    return Knowledge(
        queued={p.pr: p.state for p in live},
        converged=_converged(ws, config),
        coverage=_coverage(ws, config),
        queued_heads={p.pr: p.revision.head for p in live if not p.revision.merged},
    )


def _live_patches(ws: Workspace):
    from porttrack import queue as queue_mod

    try:
        return queue_mod.load(ws).live()
    except PorttrackError:
        return ()


def _converged(ws: Workspace, config: "Config"):
    """PR -> its recorded verdict, bound to fork.branch's tip (`converge.RecordedVerdict`)."""
    try:
        return latest_verdicts(ws, config)
    except PorttrackError:
        return {}


def _coverage(ws: Workspace, config: "Config") -> dict[int, str]:
    from porttrack.coverage import track_coverage

    try:
        return {c.pr: c.text for c in track_coverage(ws, config)}
    except PorttrackError:
        return {}
