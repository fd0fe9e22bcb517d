"""From a probe event log to the results fields a gate judges.

`summarize(events)` is pure (events in, a `Summary` out), so it is tested without a GPU. Per
process, a compile counts as *after warmup* when it follows that process's "warmup-done" mark.
It fails closed: when a process compiled but never marked warmup, or an instrument an assertion
needs was missing, the matching field is None with the reason in `problems`, never 0 — a gate
then reads the cell as not measured.

Fields (`to_fields`, also the `probe` object a job may keep beside a cell):
- `jit_compiles_after_warmup` (Triton compiles after the mark, plus dynamo recompiles after it)
  and `jit_after_warmup` (each offender: kernel, specialization key, pid);
- `graph_captures`, `graph_replays`, `graphs` (per graph: captures, replays);
- `eager_launches_in_graphed_regions` after warmup, with the kernels named: a region that should
  replay a graph but launched kernels one by one;
- `compiles` (`before_warmup`, `after_warmup`, `seconds`), `cache_entries_written` (disk-cache
  misses: kernels this run compiled and stored) and `served_from_cache` (compiles that wrote
  nothing: a warm cache answered);
- `instruments` used, `missing` instruments, `problems`.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable

from porttrack.probe import WARMUP_DONE


@dataclass(frozen=True)
class Offender:
    kernel: str
    key: str
    pid: int
    kind: str  # "triton" | "dynamo"


@dataclass(frozen=True)
class Summary:
    processes: int
    instruments: dict[str, str]
    missing: dict[str, str]
    jit_compiles_after_warmup: int | None
    jit_after_warmup: tuple[Offender, ...]
    compiles_before_warmup: int
    compile_seconds_before_warmup: float
    compile_seconds_after_warmup: float
    cache_entries_written: int | None
    served_from_cache: int | None
    graph_captures: int | None
    graph_replays: int | None
    graphs: dict[str, dict[str, int]]
    eager_launches_in_graphed_regions: int | None
    eager_kernels: tuple[str, ...]
    dynamo_recompile_reasons: tuple[str, ...]
    problems: tuple[str, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def summarize(events: Iterable[dict[str, Any]]) -> Summary:
    by_pid: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for event in events:
        by_pid[int(event.get("pid") or 0)].append(event)
    instruments: dict[str, str] = {}
    missing: dict[str, str] = {}
    problems: list[str] = []
    offenders: list[Offender] = []
    before = 0
    seconds_before = seconds_after = 0.0
    written = 0
    written_seen = False
    replays = captures = 0
    graphs: dict[str, dict[str, int]] = defaultdict(lambda: {"captures": 0, "replays": 0})
    eager: list[str] = []
    reasons: list[str] = []
    unmarked = []
    for pid, stream in sorted(by_pid.items()):
        warm = False
        compiled = False
        for event in stream:
            kind = event["kind"]
            if kind == "probe-instruments":
                instruments.update(event.get("instruments") or {})
                missing.update(event.get("missing") or {})
            elif kind == "probe-error":
                problems.append(f"pid {pid}: {event.get('where')}: {event.get('error')}")
            elif kind == "mark" and event.get("name") == WARMUP_DONE:
                warm = True
            elif kind == "triton-compile":
                compiled = True
                secs = float(event.get("seconds") or 0.0)
                if warm:
                    offenders.append(Offender(str(event.get("kernel")), str(event.get("key")), pid, "triton"))
                    seconds_after += secs
                else:
                    before += 1
                    seconds_before += secs
            elif kind == "dynamo-recompile":
                reasons.append(str(event.get("reason")))
                if warm:
                    offenders.append(Offender("torch.compile frame", str(event.get("reason"))[:200], pid, "dynamo"))
            elif kind == "triton-cache-files" and event.get("when") == "exit":
                written_seen = True
                written += sum(int(n) for n in (event.get("written") or {}).values())
            elif kind == "graph-capture":
                captures += 1
                graphs[f"{pid}:{event.get('graph')}"]["captures"] += 1
            elif kind == "graph-replay":
                replays += 1
                graphs[f"{pid}:{event.get('graph')}"]["replays"] += 1
            elif kind == "triton-launch" and warm and event.get("region") and not event.get("capturing"):
                eager.append(str(event.get("kernel")))
        if compiled and not warm:
            unmarked.append(pid)
    if unmarked:
        problems.append(f"process(es) {', '.join(map(str, unmarked))} compiled kernels but never marked {WARMUP_DONE!r}: "
                        "compiles after warmup cannot be told from warmup")
    jit_ok = "triton-jit" in instruments and not unmarked and by_pid
    graphs_ok = "cuda-graphs" in instruments
    compiles = before + sum(o.kind == "triton" for o in offenders)
    return Summary(
        processes=len(by_pid),
        instruments=instruments,
        missing=missing,
        jit_compiles_after_warmup=len(offenders) if jit_ok else None,
        jit_after_warmup=tuple(offenders),
        compiles_before_warmup=before,
        compile_seconds_before_warmup=round(seconds_before, 6),
        compile_seconds_after_warmup=round(seconds_after, 6),
        cache_entries_written=written if written_seen else None,
        served_from_cache=max(0, compiles - written) if written_seen else None,
        graph_captures=captures if graphs_ok else None,
        graph_replays=replays if graphs_ok else None,
        graphs=dict(graphs),
        eager_launches_in_graphed_regions=len(eager) if "triton-jit" in instruments else None,
        eager_kernels=tuple(sorted(set(eager))),
        dynamo_recompile_reasons=tuple(reasons[:20]),
        problems=tuple(problems + [f"{name} not instrumented: {why}" for name, why in sorted(missing.items())]),
    )


def to_fields(summary: Summary) -> dict[str, Any]:
    """The two results-cell fields a gate judges; None where the probe could not measure."""
    return {"graph_replays": summary.graph_replays, "jit_compiles_after_warmup": summary.jit_compiles_after_warmup}
