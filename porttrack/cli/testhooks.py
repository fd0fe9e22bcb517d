"""Kill points for the crash-consistency tests: a no-op unless a test asks for one.

`PORTTRACK_TEST_PAUSE_AT=name[,name...]` makes `checkpoint(name)` say `porttrack-test: paused at
<name>` on stderr and sleep `PORTTRACK_TEST_PAUSE_S` seconds (default 60), so a test can SIGKILL
the process at exactly that moment. A wanted name ending in `*` matches every checkpoint it
prefixes (`write:weekly-*`); `name=SECONDS` sets that name's own pause (`apply:patch=0.05` slows
a build so that a kill at a random moment lands inside it); `name@K` pauses only at the K-th time
the process reaches `name` (1-based), so a test can stop between two writes of the same kind.
`PORTTRACK_TEST_TRACE=FILE` appends the name of every checkpoint reached to FILE, one a line: the
list of step boundaries a test then walks. Unset, a checkpoint costs two environment lookups.

Checkpoints: `write:<file name>` (an atomic write has its temp file on disk and has not renamed
it yet), `wrote:<file name>` (renamed into place, before the command's next step), the import's `fetched|classified|planned|locked|saved`, `status:polled`,
`apply:patch|built|moved` (`apply:patch`: after each patch of a build), `evidence:tmp|linked`,
`gate:job-done|recorded`, `report:written|posted`, `converge:recorded`.
"""

from __future__ import annotations

import os
import sys
import time

PAUSE_ENV = "PORTTRACK_TEST_PAUSE_AT"
PAUSE_SECONDS_ENV = "PORTTRACK_TEST_PAUSE_S"


TRACE_ENV = "PORTTRACK_TEST_TRACE"
_reached: dict[str, int] = {}


def checkpoint(name: str) -> None:
    wanted, trace = os.environ.get(PAUSE_ENV), os.environ.get(TRACE_ENV)
    if not wanted and not trace:
        return
    _reached[name] = _reached.get(name, 0) + 1
    if trace:
        with open(trace, "a", encoding="utf-8") as f:
            f.write(name + "\n")
    if not wanted:
        return
    seconds = _pause_for(name, wanted)
    if seconds is None:
        return
    sys.stderr.write(f"porttrack-test: paused at {name}\n")
    sys.stderr.flush()
    time.sleep(seconds)


def _pause_for(name: str, wanted: str) -> float | None:
    """Seconds to pause at `name`, or None when no wanted name matches it."""
    for item in wanted.split(","):
        want, _, seconds = item.partition("=")
        want, _, nth = want.partition("@")
        if nth and _reached.get(name) != int(nth):
            continue
        if want == name or (want.endswith("*") and name.startswith(want[:-1])):
            return float(seconds or os.environ.get(PAUSE_SECONDS_ENV) or 60)
    return None
