"""Kill points for the crash-consistency tests: a no-op unless a test asks for one.

`PORTTRACK_TEST_PAUSE_AT=name[,name...]` makes `checkpoint(name)` say `porttrack-test: paused at
<name>` on stderr and sleep `PORTTRACK_TEST_PAUSE_S` seconds (default 60), so a test can SIGKILL
the process at exactly that moment. A wanted name ending in `*` matches every checkpoint it
prefixes (`write:weekly-*`). Unset, a checkpoint costs one environment lookup.

Checkpoints: `write:<file name>` (an atomic write has its temp file on disk and has not renamed
it yet), the import's `fetched|classified|planned|locked|saved`, `status:polled`,
`apply:built|moved`, `evidence:tmp|linked`, `gate:job-done|recorded`, `report:written|posted`,
`converge:recorded`.
"""

from __future__ import annotations

import os
import sys
import time

PAUSE_ENV = "PORTTRACK_TEST_PAUSE_AT"
PAUSE_SECONDS_ENV = "PORTTRACK_TEST_PAUSE_S"


def checkpoint(name: str) -> None:
    wanted = os.environ.get(PAUSE_ENV)
    if not wanted or not any(w == name or (w.endswith("*") and name.startswith(w[:-1])) for w in wanted.split(",")):
        return
    sys.stderr.write(f"porttrack-test: paused at {name}\n")
    sys.stderr.flush()
    time.sleep(float(os.environ.get(PAUSE_SECONDS_ENV) or 60))
