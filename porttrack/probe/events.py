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
- `jit-compile` (`jit`: a kind of `jit_kinds.JIT_KINDS` other than Triton's, `kernel`, `key`,
  `seconds`): jiterator/NVRTC, CuPy, cpp_extension, CuTeDSL, TileLang
- `vllm-jit-monitor` (`backend`, `kernel`, `message`): what vLLM's own JIT monitor logged
- `probe-counts` also carry `snap` (numbered from 1 per process), `part`/`parts` (a snapshot too
  long for one line is several records, never cut), `hook_calls` (how often the probe's own
  Triton hooks ran) and `emitted` (the ledger: lines this process wrote per kind so far)
- `probe-hook-chained` (`instrument`, `hook`, `by`): another library set the knob to a hook that
  still reaches the probe's (vLLM's JIT monitor): still measured
- `probe-hook-replaced` (`instrument`, `hook`, `now`): another library replaced a probe hook so
  that the probe's is no longer reached; the summary reports that instrument's figure as not measured
- `probe-error` (`where`, `error`): an instrument that broke; the summary fails closed on it

`read` accepts only well-formed lines (`parse_line`, `validate`); anything else becomes a
`probe-error` with `bad_line`, and the summary then measures nothing from the log.
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
        self.emitted: dict[str, int] = {}  # lines written per kind: the ledger a counts snapshot carries

    def emit(self, kind: str, **fields: Any) -> None:
        event = {"t": round(time.time(), 6), "pid": os.getpid(), "kind": kind, **fields}
        line = json.dumps(event, default=str, ensure_ascii=True, allow_nan=False)
        if len(line) > MAX_LINE:
            line = json.dumps({**{k: event[k] for k in ("t", "pid", "kind")}, "truncated": True}, ensure_ascii=True)
        with self._lock:
            os.write(self._fd, (line + "\n").encode("ascii"))
            self.emitted[kind] = self.emitted.get(kind, 0) + 1

    def close(self) -> None:
        with self._lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1


def emit_counts(log: EventLog, snap: int, when: str, fields: dict[str, Any]) -> None:
    """One cumulative snapshot as `parts` records (`snap`, `part` 1..`parts`): a snapshot too long
    for one line (thousands of graphs) is split by entries, never cut; the reader uses a snapshot
    only when every part of it is there."""
    base = {"when": when, "snap": snap}
    whole = json.dumps({**base, **fields}, default=str, ensure_ascii=True, allow_nan=False)
    if len(whole) + 200 <= MAX_LINE:
        log.emit("probe-counts", part=1, parts=1, **base, **fields)
        return
    budget = MAX_LINE // 2
    parts: list[dict[str, Any]] = [{k: v for k, v in fields.items() if not isinstance(v, dict)}]
    for name, value in fields.items():
        if not isinstance(value, dict):
            continue
        chunk: dict[str, Any] = {}
        size = 0
        for key, n in value.items():
            item = len(json.dumps({key: n}, default=str, ensure_ascii=True))
            if chunk and size + item > budget:
                parts.append({name: chunk})
                chunk, size = {}, 0
            chunk[key] = n
            size += item
        parts.append({name: chunk})
    for number, part in enumerate(parts, 1):
        log.emit("probe-counts", part=number, parts=len(parts), **base, **part)


class BadLine(ValueError):
    """A line of the log that is not a well-formed event."""


def _no_constant(name: str) -> Any:
    raise BadLine(f"non-finite number {name}")


def _finite_float(text: str) -> float:
    value = float(text)
    if value != value or value in (float("inf"), float("-inf")):
        raise BadLine(f"non-finite number {text[:40]}")
    return value


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise BadLine(f"duplicate key {key[:40]!r}")
        out[key] = value
    return out


def parse_line(raw: bytes) -> dict[str, Any]:
    """One line as the probe writes it (ASCII JSON, one object, unique keys, finite numbers, a
    known kind with fields of the right types and ranges), or BadLine saying what is wrong."""
    if b"\x00" in raw:
        raise BadLine("NUL byte in the line")
    try:
        text = raw.decode("ascii")
    except UnicodeDecodeError as exc:
        raise BadLine(f"not ASCII (the probe writes ASCII only): byte {exc.start}") from None
    try:
        event = json.loads(text, object_pairs_hook=_unique_keys, parse_constant=_no_constant, parse_float=_finite_float)
    except BadLine:
        raise
    except (ValueError, RecursionError) as exc:
        raise BadLine(f"not JSON: {exc}"[:200]) from None
    if not isinstance(event, dict):
        raise BadLine(f"a JSON {type(event).__name__}, not an event object")
    problem = validate(event)
    if problem:
        raise BadLine(problem)
    return event


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 1 << 62


def _is_seconds(value: Any) -> bool:
    return value is None or (isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value < 1e9)


def _counts_map(value: Any, nested: bool = False) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and _is_count(v) for k, v in value.items())


def _strings_map(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())


# kind -> (field, check, required)
_TEXT = (lambda v: isinstance(v, str), "a string")
_OPT_TEXT = (lambda v: v is None or isinstance(v, str), "a string or null")
_SECS = (_is_seconds, "finite seconds >= 0 or null")
_COUNT = (_is_count, "a count >= 0")
_COUNTS = (_counts_map, "an object of counts >= 0")
_STRS = (_strings_map, "an object of strings")
_BOOL = (lambda v: isinstance(v, bool), "true or false")
FIELDS: dict[str, dict[str, tuple[Any, str, bool]]] = {
    "probe-start": {},
    "probe-exit": {},
    "probe-instruments": {"module": (*_TEXT, True), "instruments": (*_STRS, True), "missing": (*_STRS, True)},
    "mark": {"name": (*_TEXT, True)},
    "triton-compile": {"kernel": (*_TEXT, True), "key": (*_TEXT, True), "seconds": (*_SECS, False),
                       "manual_warmup": (*_BOOL, False)},
    "triton-autotune": {"kernel": (*_TEXT, True), "key": (*_TEXT, True), "configs": (*_COUNT, True),
                        "seconds": (*_SECS, False)},
    "jit-compile": {"jit": (*_TEXT, True), "kernel": (*_TEXT, True), "key": (*_TEXT, True), "seconds": (*_SECS, False)},
    "vllm-jit-monitor": {"backend": (*_TEXT, True), "kernel": (*_TEXT, True), "message": (*_TEXT, True)},
    "graph-capture": {"graph": (*_TEXT, True), "region": (*_OPT_TEXT, False)},
    "dynamo-recompile": {"reason": (*_TEXT, True)},
    "probe-counts": {"when": (*_TEXT, True), "snap": (*_COUNT, True), "part": (*_COUNT, True), "parts": (*_COUNT, True),
                     "replays": (*_COUNTS, False), "eager_triton": (*_COUNTS, False), "region_entries": (*_COUNTS, False),
                     "regions_not_replayed": (*_COUNTS, False), "cache_written": (*_COUNTS, False),
                     "dynamo": (*_COUNTS, False), "hook_calls": (*_COUNTS, False), "emitted": (*_COUNTS, False)},
    "probe-hook-replaced": {"instrument": (*_TEXT, True), "hook": (*_TEXT, True), "now": (*_TEXT, True)},
    "probe-hook-chained": {"instrument": (*_TEXT, True), "hook": (*_TEXT, True), "by": (*_TEXT, True)},
    "probe-error": {"where": (*_TEXT, True), "error": (*_TEXT, True)},
}


def validate(event: dict[str, Any]) -> str | None:
    """What is wrong with an event object, or None."""
    kind = event.get("kind")
    if not isinstance(kind, str):
        return "no string \"kind\""
    if kind not in FIELDS:
        return f"unknown kind {kind[:40]!r}"
    if event.get("truncated") is not None:
        return f"a {kind} event cut at {MAX_LINE} bytes"
    if not isinstance(event.get("pid"), int) or isinstance(event.get("pid"), bool) or not 0 < event["pid"] < 1 << 31:
        return "no valid pid"
    t = event.get("t")
    if not isinstance(t, (int, float)) or isinstance(t, bool) or not 0 <= t < 1e11:
        return "no valid time"
    for name, (check, what, needed) in FIELDS[kind].items():
        if name not in event:
            if needed:
                return f"{kind}: no {name!r}"
            continue
        if not check(event[name]):
            return f"{kind}: {name!r} is not {what}"
    if kind == "probe-counts" and not 1 <= event["part"] <= event["parts"]:
        return "probe-counts: part out of range"
    return None


def read(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """The events of a log, in file order. A line that is not a well-formed event (cut by a short
    write, NUL bytes, not ASCII, not one JSON object, a duplicate key, a non-finite or negative
    number, a field of the wrong type, a last line with no newline) is reported as a `probe-error`
    with `bad_line: true`, never skipped: the summary then reads nothing from the log (fail closed)."""
    with open(path, "rb") as handle:
        data = handle.read()
    lines = data.split(b"\n")
    cut = lines[-1] != b""
    if not cut:
        lines.pop()
    for number, raw in enumerate(lines, 1):
        if number == len(lines) and cut:
            yield {"t": 0.0, "pid": 0, "kind": "probe-error", "where": f"line {number}", "bad_line": True,
                   "error": "the last line has no newline (a short write: cut)"}
            continue
        if not raw.strip():
            if raw:
                yield {"t": 0.0, "pid": 0, "kind": "probe-error", "where": f"line {number}", "bad_line": True,
                       "error": "a line of blanks"}
            continue
        try:
            event = parse_line(raw)
        except BadLine as exc:
            yield {"t": 0.0, "pid": 0, "kind": "probe-error", "where": f"line {number}", "bad_line": True,
                   "error": str(exc)[:200]}
            continue
        yield event
