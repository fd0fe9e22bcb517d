"""From a probe event log to the results fields a gate judges.

`summarize(events)` is pure (events in, a `Summary` out), so it is tested without a GPU. Per
process, a compile counts as *after warmup* when it follows that process's "warmup-done" mark.
It fails closed: when a process compiled but never marked warmup, an instrument an assertion
needs was missing, or another library replaced one of the probe's hooks, the matching field is
None with the reason in `problems`, never 0: a gate then reads the cell as not measured.

Fields (`to_fields`, also the `probe` object a job may keep beside a cell):
- `jit_compiles_after_warmup`: Triton compiles after the mark, autotuning runs after it (an
  autotuned kernel benchmarking its configs for a key it had not seen), and frames dynamo compiled
  after it (from `torch._dynamo.utils.counters`, whatever the logging settings), each offender in
  `jit_after_warmup` (kernel, key or reason, pid, kind);
- `graph_captures`, `graph_replays`, `graphs` (per graph: captures, replays);
- graphed regions after warmup: `graphed_region_entries`, `graphed_regions_not_replayed` (entries
  that replayed no graph: the step ran eagerly, whatever launched its kernels) and
  `eager_triton_launches_in_graphed_regions` with the kernels named. `eager_launches_in_graphed_regions`
  (every CUDA kernel) is None, not measured: only Triton's launches are seen;
- `compiles` (`before_warmup`, `after_warmup`, `seconds`), `cache_entries_written` (disk-cache
  misses: entries this process itself wrote) and `served_from_cache` (compiles that wrote nothing);
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
    eager_triton_launches_in_graphed_regions: int | None = None
    graphed_region_entries: int | None = None
    graphed_regions_not_replayed: int | None = None
    autotunes_before_warmup: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _minus(now: dict[str, int], then: dict[str, int]) -> dict[str, int]:
    return {k: int(v) - int(then.get(k, 0)) for k, v in now.items() if int(v) - int(then.get(k, 0)) > 0}


@dataclass
class _Process:
    """One pid's events, folded."""
    warm: bool = False
    compiled: bool = False
    at_mark: dict[str, Any] | None = None  # the counters when warmup was marked
    final: dict[str, Any] | None = None  # the last counters written
    exited: bool = False
    reasons_after: int = 0


def summarize(events: Iterable[dict[str, Any]]) -> Summary:
    by_pid: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for event in events:
        by_pid[int(event.get("pid") or 0)].append(event)
    instruments: dict[str, str] = {}
    missing: dict[str, str] = {}
    replaced: dict[str, str] = {}
    problems: list[str] = []
    offenders: list[Offender] = []
    before = autotunes_before = 0
    seconds_before = seconds_after = 0.0
    written = 0
    written_ok = True
    replays = captures = 0
    graphs: dict[str, dict[str, int]] = defaultdict(lambda: {"captures": 0, "replays": 0})
    eager: dict[str, int] = {}
    entries = unreplayed = 0
    reasons: list[str] = []
    unmarked = []
    counted = False
    for pid, stream in sorted(by_pid.items()):
        proc = _Process()
        for event in stream:
            kind = event["kind"]
            if kind == "probe-instruments":
                instruments.update(event.get("instruments") or {})
                missing.update(event.get("missing") or {})
            elif kind == "probe-error":
                problems.append(f"pid {pid}: {event.get('where')}: {event.get('error')}")
            elif kind == "probe-hook-replaced":
                replaced.setdefault(str(event.get("instrument")), f"pid {pid}: its {event.get('hook')} was replaced by "
                                    f"{event.get('now')} (not chained to the probe's)")
            elif kind == "mark" and event.get("name") == WARMUP_DONE:
                proc.warm = True
            elif kind == "probe-counts":
                proc.final = event
                proc.exited = event.get("when") == "exit"
                if event.get("when") == f"mark:{WARMUP_DONE}" and proc.at_mark is None:
                    proc.at_mark = event
            elif kind == "triton-compile":
                proc.compiled = True
                secs = float(event.get("seconds") or 0.0)
                if proc.warm:
                    offenders.append(Offender(str(event.get("kernel")), str(event.get("key")), pid, "triton"))
                    seconds_after += secs
                else:
                    before += 1
                    seconds_before += secs
            elif kind == "triton-autotune" and int(event.get("configs") or 0) > 0:
                proc.compiled = True
                if proc.warm:
                    offenders.append(Offender(str(event.get("kernel")), str(event.get("key")), pid, "triton-autotune"))
                    seconds_after += float(event.get("seconds") or 0.0)
                else:
                    autotunes_before += 1
            elif kind == "dynamo-recompile":
                reasons.append(str(event.get("reason")))
                if proc.warm:
                    proc.reasons_after += 1
                    offenders.append(Offender("torch.compile frame", str(event.get("reason"))[:200], pid, "dynamo"))
            elif kind == "graph-capture":
                captures += 1
                graphs[f"{pid}:{event.get('graph')}"]["captures"] += 1
        if proc.compiled and not proc.warm:
            unmarked.append(pid)
        final = proc.final or {}
        if proc.final is not None:
            counted = True
            if not proc.exited:
                problems.append(f"pid {pid}: no exit snapshot (killed?): counts as of its last periodic snapshot")
        for graph, n in (final.get("replays") or {}).items():
            replays += int(n)
            graphs[f"{pid}:{graph}"]["replays"] += int(n)
        written_ok = written_ok and proc.exited
        written += sum(int(n) for n in (final.get("cache_written") or {}).values())
        if proc.warm:
            base = proc.at_mark or {}
            for kernel, n in _minus(final.get("eager_triton") or {}, base.get("eager_triton") or {}).items():
                eager[kernel] = eager.get(kernel, 0) + n
            entries += sum(_minus(final.get("region_entries") or {}, base.get("region_entries") or {}).values())
            unreplayed += sum(_minus(final.get("regions_not_replayed") or {}, base.get("regions_not_replayed") or {}).values())
            frames = _minus(final.get("dynamo") or {}, base.get("dynamo") or {}).get("frames_total", 0)
            if frames > proc.reasons_after:  # compiled after warmup, reason not logged (logging settings)
                offenders.extend(Offender("torch.compile frame", "frame compiled after warmup (torch._dynamo.utils.counters; "
                                          "reason not logged)", pid, "dynamo") for _ in range(frames - proc.reasons_after))
            if "dynamo" in instruments and "dynamo" not in final:
                problems.append(f"pid {pid}: dynamo's counters were not read after warmup")
                replaced.setdefault("dynamo", f"pid {pid}: dynamo's counters were not read")
    if unmarked:
        problems.append(f"process(es) {', '.join(map(str, unmarked))} compiled kernels but never marked {WARMUP_DONE!r}: "
                        "compiles after warmup cannot be told from warmup")
    blind = [name for name in ("triton-jit", "triton-autotune", "dynamo") if name in replaced]
    jit_ok = ("triton-jit" in instruments and "triton-autotune" in instruments and not unmarked and by_pid
              and not blind)
    graphs_ok = "cuda-graphs" in instruments and "cuda-graphs" not in replaced and counted
    regions_ok = graphs_ok and "region-launches" not in replaced
    compiles = before + sum(o.kind == "triton" for o in offenders)
    eager_total = sum(eager.values())
    return Summary(
        processes=len(by_pid),
        instruments=instruments,
        missing=missing,
        jit_compiles_after_warmup=len(offenders) if jit_ok else None,
        jit_after_warmup=tuple(offenders),
        compiles_before_warmup=before,
        compile_seconds_before_warmup=round(seconds_before, 6),
        compile_seconds_after_warmup=round(seconds_after, 6),
        cache_entries_written=written if written_ok and counted and "triton-cache-writes" in instruments
        and "triton-cache-writes" not in replaced else None,
        served_from_cache=max(0, compiles - written) if written_ok and counted and "triton-cache-writes" in instruments
        and "triton-cache-writes" not in replaced else None,
        graph_captures=captures if graphs_ok else None,
        graph_replays=replays if graphs_ok else None,
        graphs=dict(graphs),
        eager_launches_in_graphed_regions=None,
        eager_kernels=tuple(sorted(eager)),
        dynamo_recompile_reasons=tuple(reasons[:20]),
        problems=tuple(problems + [f"{name} not instrumented: {why}" for name, why in sorted(missing.items())]
                       + [f"{name} not measured: {why}" for name, why in sorted(replaced.items())]),
        eager_triton_launches_in_graphed_regions=eager_total if regions_ok and "triton-jit" in instruments else None,
        graphed_region_entries=entries if regions_ok else None,
        graphed_regions_not_replayed=unreplayed if regions_ok else None,
        autotunes_before_warmup=autotunes_before,
    )


def to_fields(summary: Summary) -> dict[str, Any]:
    """The two results-cell fields a gate judges; None where the probe could not measure."""
    return {"graph_replays": summary.graph_replays, "jit_compiles_after_warmup": summary.jit_compiles_after_warmup}
