"""The probe's event log: JSON lines appended by every process under test, read back by the job.

One file (`PORTTRACK_PROBE=PATH`) is shared by the engine and its workers: each event is one line
written with a single `os.write` on a descriptor opened with O_APPEND, which Linux appends whole
for a regular file, so lines from several processes interleave but never mix. Every event holds
`t` (wall-clock seconds), `pid`, `kind` and its own fields.

Kinds (`fields`):
- `probe-start`, `probe-instruments` (`instruments`: what could be hooked, `missing`: what could
  not, with why), `probe-exit`
- `mark` (`name`: e.g. "warmup-done")
- `triton-compile` (`kernel`, `key`, `seconds`), `triton-autotune` (`kernel`, `key`, `configs`
  benchmarked, `seconds`)
- `graph-capture` (`graph`, `region`)
- `dynamo-recompile` (`reason`, where dynamo's recompiles log is on)
- `probe-counts` (`when`: "mark:NAME" | "periodic" | "exit"; cumulative: `replays` per graph,
  `region_entries`, `regions_not_replayed` and `eager_triton` per region/kernel, `cache_written`
  per kernel, `dynamo` counters)
- `probe-hook-replaced` (`instrument`, `hook`, `now`): another library replaced a probe hook
  without chaining; the summary reports that instrument's figure as not measured
- `probe-error` (`where`, `error`): an instrument that broke; the summary fails closed on it
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Iterator

ENV = "PORTTRACK_PROBE"
MAX_LINE = 64 << 10  # one event; a longer one is cut (a key can be huge) rather than split


class EventLog:
    """Appends events to one file; safe across threads and processes."""

    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
        self._lock = threading.Lock()

    def emit(self, kind: str, **fields: Any) -> None:
        event = {"t": round(time.time(), 6), "pid": os.getpid(), "kind": kind, **fields}
        line = json.dumps(event, default=str, ensure_ascii=True, allow_nan=False)
        if len(line) > MAX_LINE:
            line = json.dumps({**{k: event[k] for k in ("t", "pid", "kind")}, "truncated": True}, ensure_ascii=True)
        with self._lock:
            os.write(self._fd, (line + "\n").encode("ascii"))

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


def read(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """The events of a log, in file order. A line that is not an event (a process killed mid-write
    cannot produce one, but a hand-edited file can) is reported as a `probe-error`, never skipped."""
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, 1):
            raw = raw.strip()
            if not raw:
                continue
            try:
                event = json.loads(raw)
                if not isinstance(event, dict) or not isinstance(event.get("kind"), str):
                    raise ValueError("not an event object")
            except ValueError as exc:
                yield {"t": 0.0, "pid": 0, "kind": "probe-error", "where": f"line {number}", "error": str(exc)[:200]}
                continue
            yield event
