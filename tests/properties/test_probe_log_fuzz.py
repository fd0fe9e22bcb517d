"""Fuzz of the probe's event log (issue 31, item 5): a damaged log never passes a gate that the
intact log fails, never crashes the summary or the job's reading of it, and a damaged log leaves
the cell "not measured" with the reason.

The intact logs are written the way processes write them (`EventLog`'s line format, counts through
`events.emit_counts`, several processes, snapshots long enough to be split into parts), from seeded
random programs; the oracle is the verdict of the intact log. Damage is what a short write, a
killed worker, a bad disk or a hand edit makes: a line cut (at the end, or joined to the next), NUL
bytes, invalid UTF-8, a number made inf / nan / 1e999 / negative / a string / a list / a bool, a
line that is a JSON list, a duplicate "kind" key, a kind that is not a string, the exit snapshot or
any other line missing, a line written twice.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from typing import Any

from porttrack.jobs.cells import probe_fields
from porttrack.probe import WARMUP_DONE, events
from porttrack.probe.summary import summarize

CASES = 10_000


class _Process:
    """One process's writer: the line format and ledger of `events.EventLog`, a chosen pid."""

    def __init__(self, pid: int, lines: list[str], clock: list[float]):
        self.pid, self.lines, self.clock = pid, lines, clock
        self.emitted: dict[str, int] = {}

    def emit(self, kind: str, **fields: Any) -> None:
        self.clock[0] += 0.001
        event = {"t": round(self.clock[0], 6), "pid": self.pid, "kind": kind, **fields}
        self.lines.append(json.dumps(event, default=str, ensure_ascii=True, allow_nan=False))
        self.emitted[kind] = self.emitted.get(kind, 0) + 1


INSTRUMENTS = {"triton-jit": "triton.knobs.runtime", "triton-autotune": "Autotuner.run/_bench",
               "triton-cache-writes": "FileCacheManager.put", "cuda-graphs": "torch.cuda.CUDAGraph.replay/capture_end"}


def _program(rng: random.Random) -> list[str]:
    """An intact log of 1-3 processes: warmup compiles and captures, the mark, steady state that
    replays graphs (sometimes thousands), and now and then something the gate must catch."""
    lines: list[str] = []
    clock = [1.7e9 + rng.random()]
    for index in range(rng.randint(1, 3)):
        proc = _Process(1000 + index * 7 + rng.randint(0, 5), lines, clock)
        snap = 0
        counts: dict[str, Any] = {"replays": {}, "eager_triton": {}, "region_entries": {"all": 0},
                                  "regions_not_replayed": {}, "cache_written": {}, "hook_calls": {}}

        def snapshot(when: str) -> None:
            nonlocal snap
            snap += 1
            events.emit_counts(proc, snap, when, {**json.loads(json.dumps(counts)), "emitted": dict(proc.emitted)})  # type: ignore[arg-type]

        proc.emit("probe-start", argv=["prog"], python="3.12.3")
        proc.emit("probe-instruments", module="triton", instruments=dict(INSTRUMENTS), missing={})
        graphs = rng.choice([1, 3, 40, 3000 if rng.random() < 0.05 else 8])
        for g in range(graphs):
            if g < 6:
                proc.emit("triton-compile", kernel=f"k{g}", key=f"fp16,B={g}", seconds=round(rng.random(), 6), manual_warmup=False)
                counts["hook_calls"]["triton_post"] = counts["hook_calls"].get("triton_post", 0) + 1
                counts["hook_calls"]["triton_cache"] = counts["hook_calls"]["triton_post"]
            if g < 20:
                proc.emit("graph-capture", graph=f"graph-{g + 1}", region=None)
        proc.emit("mark", name=WARMUP_DONE)
        snapshot(f"mark:{WARMUP_DONE}")
        for g in range(graphs):
            counts["replays"][f"graph-{g + 1}"] = rng.randint(0 if rng.random() < 0.1 else 1, 40)
        roll = rng.random()
        if roll < 0.15:
            proc.emit("triton-compile", kernel="late_kernel", key="fp32,B=3", seconds=0.5, manual_warmup=False)
            counts["hook_calls"]["triton_post"] = counts["hook_calls"].get("triton_post", 0) + 1
            counts["hook_calls"]["triton_cache"] = counts["hook_calls"]["triton_post"]
        elif roll < 0.25:
            proc.emit("graph-capture", graph=f"graph-{graphs + 1}", region="decode")
        elif roll < 0.32:
            proc.emit("jit-compile", jit=rng.choice(["cupy", "nvrtc-jiterator", "cpp-extension"]), kernel="x", key="k", seconds=0.1)
        elif roll < 0.40:
            counts["regions_not_replayed"]["decode"] = 1
        if rng.random() < 0.3:
            snapshot("periodic")
        snapshot("exit")
        proc.emit("probe-exit")
    return lines


def _verdict(data: bytes, path: Path) -> tuple[bool, bool, str]:
    """(measured, passes the gate's probe checks, why not measured)."""
    path.write_bytes(data)
    fields, why = probe_fields(summarize(events.read(path)))
    if fields is None:
        return False, False, why
    ok = fields["jit_compiles_after_warmup"] == 0 and fields["graph_replays"] >= 1 and fields["graphed_regions_eager"] == 0
    return True, ok, ""


_NUMBER = re.compile(rb'(?<=[:\[,])\s*(-?\d+(?:\.\d+)?(?:e-?\d+)?)(?=[,}\]])')


def _damage(rng: random.Random, lines: list[str]) -> tuple[str, bytes]:
    """One kind of damage, at a random place; returns its name and the damaged file."""
    raw = [line.encode("ascii") for line in lines]
    i = rng.randrange(len(raw))
    kind = rng.choice(["cut-end", "cut-join", "nul", "utf8", "number", "list", "dup-kind", "kind-type",
                       "no-exit", "drop-line", "twice"])
    if kind == "cut-end":
        tail = raw[-1]
        raw[-1] = tail[: rng.randrange(1, len(tail))]
        return kind, b"\n".join(raw)  # no final newline: the short write of the last line
    if kind == "cut-join":
        raw[i] = raw[i][: rng.randrange(1, len(raw[i]))]
    elif kind == "nul":
        at = rng.randrange(len(raw[i]) + 1)
        raw[i] = raw[i][:at] + b"\x00" * rng.randint(1, 4) + raw[i][at:]
    elif kind == "utf8":
        at = rng.randrange(len(raw[i]) + 1)
        raw[i] = raw[i][:at] + rng.choice([b"\xff", b"\xc3\x28", b"\xe2\x82", b"\xed\xa0\x80", "é".encode()]) + raw[i][at:]
    elif kind == "number":
        spots = [(j, m) for j, line in enumerate(raw) for m in _NUMBER.finditer(line)]
        j, m = rng.choice(spots)
        value = rng.choice([b"Infinity", b"-Infinity", b"NaN", b"1e999", b"-1", b"-0.5", b'"12"', b"[1]", b"true",
                            b"{}", b"-" + m.group(1).lstrip(b"-") if m.group(1) != b"0" else b"-3"])
        raw[j] = raw[j][: m.start(1)] + value + raw[j][m.end(1):]
    elif kind == "list":
        raw[i] = b"[" + raw[i] + b"]"
    elif kind == "dup-kind":
        # a second "kind" after the first: json.loads would keep the last one and hide this event
        raw[i] = raw[i][:-1] + b', "kind": "' + rng.choice([b"probe-start", b"mark", b"probe-error", b"graph-capture"]) + b'"}'
    elif kind == "kind-type":
        raw[i] = re.sub(rb'"kind": "[^"]*"', rng.choice([b'"kind": 5', b'"kind": null', b'"kind": ["mark"]', b'"kind": {}']), raw[i], count=1)
    elif kind == "no-exit":
        # one process's exit snapshot (every part of it) never written: killed before exit
        pids = sorted({json.loads(line)["pid"] for line in raw})
        pid = b'"pid": %d,' % rng.choice(pids)
        raw = [line for line in raw if not (b'"when": "exit"' in line and pid in line)]
    elif kind == "drop-line":
        del raw[i]
    elif kind == "twice":
        raw.insert(i, raw[i])
    return kind, b"\n".join(raw) + b"\n"


def test_a_damaged_probe_log_never_passes_where_the_intact_one_fails(tmp_path: Path) -> None:
    rng = random.Random(31)
    path = tmp_path / "events.jsonl"
    seen_kinds: dict[str, int] = {}
    outcomes = {"intact pass": 0, "intact fail": 0, "damaged measured": 0}
    lines: list[str] = []
    intact = (True, True, "")
    for case in range(CASES):
        if case % 20 == 0:  # a new program every 20 cases (writing a 3,000-graph log is the slow part)
            lines = _program(rng)
            intact = _verdict(("\n".join(lines) + "\n").encode(), path)
            assert intact[0], intact[2]  # every intact log is measured
            outcomes["intact pass" if intact[1] else "intact fail"] += 1
        kind, data = _damage(rng, lines)
        seen_kinds[kind] = seen_kinds.get(kind, 0) + 1
        measured, passes, why = _verdict(data, path)  # never raises
        assert not passes or intact[1], f"case {case}: {kind} made a failing log pass"
        if kind != "twice":
            # any damage but a repeated line is caught: the cell is not measured, and says why
            assert not measured and why, f"case {case}: {kind} went unnoticed"
        elif measured:
            outcomes["damaged measured"] += 1
    assert sum(seen_kinds.values()) == CASES and len(seen_kinds) == 11
    assert outcomes["intact pass"] > 50 and outcomes["intact fail"] > 50, outcomes


def test_a_snapshot_of_thousands_of_graphs_is_written_whole_in_parts(tmp_path: Path) -> None:
    lines: list[str] = []
    proc = _Process(4242, lines, [1.7e9])
    replays = {f"graph-{g}": 40 for g in range(1, 5001)}
    proc.emit("probe-start")
    proc.emit("probe-instruments", module="torch", instruments={"cuda-graphs": "x", "triton-jit": "y", "triton-autotune": "z"},
              missing={})
    proc.emit("mark", name=WARMUP_DONE)
    events.emit_counts(proc, 1, "exit", {"replays": replays, "emitted": dict(proc.emitted)})  # type: ignore[arg-type]
    proc.emit("probe-exit")
    assert len(lines) > 4 and max(map(len, lines)) <= events.MAX_LINE
    path = tmp_path / "events.jsonl"
    path.write_text("\n".join(lines) + "\n")
    s = summarize(events.read(path))
    assert s.graph_replays == 5000 * 40 and not s.problems, s.problems
    # one part lost: the snapshot is incomplete, and nothing is measured
    path.write_text("\n".join(lines[:4] + lines[5:]) + "\n")
    s = summarize(events.read(path))
    assert s.graph_replays is None and any("incomplete" in p for p in s.problems)
