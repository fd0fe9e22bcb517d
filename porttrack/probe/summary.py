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
from porttrack.probe.jit_kinds import JIT_KINDS, JIT_NOT_COVERED


@dataclass(frozen=True)
class Offender:
    kernel: str
    key: str
    pid: int
    kind: str  # "triton" | "triton-autotune" | "dynamo" | "cuda-graph-capture" | a JIT_KINDS kind | "vllm-jit-monitor"


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
    graph_captures_after_warmup: int | None = None
    log_problems: tuple[str, ...] = field(default=())  # the log itself is damaged: nothing in it is a figure
    hooks_chained: dict[str, str] = field(default_factory=dict)  # instrument -> who chains to the probe's hook
    jit_kinds: dict[str, str] = field(default_factory=dict)  # each JIT kind -> how it was watched, or why not
    jit_not_covered: tuple[str, ...] = field(default=JIT_NOT_COVERED)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _minus(now: dict[str, int], then: dict[str, int]) -> dict[str, int]:
    return {k: int(v) - int(then.get(k, 0)) for k, v in now.items() if int(v) - int(then.get(k, 0)) > 0}


@dataclass
class _Process:
    """One pid's events, folded."""
    warm: bool = False
    compiled: bool = False
    started: bool = False
    at_mark: dict[str, Any] | None = None  # the counters when warmup was marked
    final: dict[str, Any] | None = None  # the last counters written
    exited: bool = False
    reasons_after: int = 0
    snaps: dict[int, dict[str, Any]] = field(default_factory=dict)  # snap -> {"parts": n, "got": {part: event}}


# the instruments behind each JIT kind: a kind whose instrument could not be installed (or was
# replaced without chaining) leaves "JIT after warmup" not measured
_KIND_INSTRUMENTS = {
    "triton": "triton-jit", "triton-autotune": "triton-autotune", "inductor": "inductor-kernels", "dynamo": "dynamo",
    "cuda-graph-capture": "cuda-graphs", "nvrtc-jiterator": "jit-nvrtc-jiterator", "cupy": "jit-cupy",
    "cpp-extension": "jit-cpp-extension", "cutedsl": "jit-cutedsl", "tilelang": "jit-tilelang",
    "vllm-jit-monitor": "vllm-jit-monitor",
}
_IMPORT_WATCHED = set(_KIND_INSTRUMENTS)  # every instrument is installed when its module is imported


def _merge_snapshot(parts: dict[int, dict[str, Any]]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for number in sorted(parts):
        for name, value in parts[number].items():
            if isinstance(value, dict) and isinstance(merged.get(name), dict):
                merged[name] = {**merged[name], **value}
            else:
                merged[name] = value
    return merged


def summarize(events: Iterable[dict[str, Any]]) -> Summary:
    by_pid: dict[int, list[dict[str, Any]]] = defaultdict(list)
    log_problems: list[str] = []
    for event in events:
        if event.get("bad_line"):
            log_problems.append(f"{event.get('where')}: {event.get('error')}")
            continue
        pid = event.get("pid")
        by_pid[pid if isinstance(pid, int) and not isinstance(pid, bool) else 0].append(event)
    instruments_used: dict[str, str] = {}
    missing: dict[str, str] = {}
    replaced: dict[str, str] = {}
    chained: dict[str, str] = {}
    problems: list[str] = []
    offenders: list[Offender] = []
    before = autotunes_before = 0
    seconds_before = seconds_after = 0.0
    written = 0
    written_ok = True
    replays = captures = captures_after = 0
    graphs: dict[str, dict[str, int]] = defaultdict(lambda: {"captures": 0, "replays": 0})
    eager: dict[str, int] = {}
    entries = unreplayed = 0
    reasons: list[str] = []
    unmarked = []
    counted = False
    for pid, stream in sorted(by_pid.items()):
        proc = _Process()
        monitor: list[tuple[str, str]] = []
        seen: dict[str, int] = defaultdict(int)
        ended = False
        for event in stream:
            kind = event.get("kind")
            seen[str(kind)] += 1
            if kind == "probe-exit":
                ended = True
            if kind == "probe-start":
                proc.started = True
            elif kind == "probe-instruments":
                instruments_used.update(event.get("instruments") or {})
                missing.update(event.get("missing") or {})
            elif kind == "probe-error":
                log_problems.append(f"pid {pid}: probe error at {event.get('where')}: {event.get('error')}")
            elif kind == "probe-hook-replaced":
                replaced.setdefault(str(event.get("instrument")), f"pid {pid}: its {event.get('hook')} was replaced by "
                                    f"{event.get('now')}, which does not reach the probe's hook")
            elif kind == "probe-hook-chained":
                chained.setdefault(str(event.get("instrument")), f"pid {pid}: {event.get('hook')} now {event.get('by')}, "
                                   "which still calls the probe's hook")
            elif kind == "mark" and event.get("name") == WARMUP_DONE:
                proc.warm = True
            elif kind == "probe-counts":
                snap = proc.snaps.setdefault(int(event["snap"]), {"parts": int(event["parts"]), "got": {}, "when": event["when"]})
                if snap["parts"] != event["parts"] or snap["when"] != event["when"] or event["part"] in snap["got"]:
                    log_problems.append(f"pid {pid}: counts snapshot {event['snap']} has inconsistent parts")
                    continue
                snap["got"][int(event["part"])] = {k: v for k, v in event.items()
                                                   if k not in ("t", "pid", "kind", "snap", "part", "parts")}
                if len(snap["got"]) == snap["parts"]:
                    whole = _merge_snapshot(snap["got"])
                    proc.final = whole
                    proc.exited = whole.get("when") == "exit"
                    if whole.get("when") == f"mark:{WARMUP_DONE}" and proc.at_mark is None:
                        proc.at_mark = whole
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
            elif kind == "jit-compile":
                proc.compiled = True
                if proc.warm:
                    offenders.append(Offender(str(event.get("kernel")), str(event.get("key")), pid, str(event.get("jit"))))
                    seconds_after += float(event.get("seconds") or 0.0)
                else:
                    seconds_before += float(event.get("seconds") or 0.0)
            elif kind == "vllm-jit-monitor":
                if proc.warm:
                    monitor.append((str(event.get("backend")), str(event.get("kernel"))))
            elif kind == "dynamo-recompile":
                reasons.append(str(event.get("reason")))
                if proc.warm:
                    proc.reasons_after += 1
                    offenders.append(Offender("torch.compile frame", str(event.get("reason"))[:200], pid, "dynamo"))
            elif kind == "graph-capture":
                captures += 1
                graphs[f"{pid}:{event.get('graph')}"]["captures"] += 1
                if proc.warm:
                    captures_after += 1
                    offenders.append(Offender(str(event.get("graph")), f"captured after warmup (region {event.get('region')})",
                                              pid, "cuda-graph-capture"))
        # vLLM's monitor as a second source: a finding the probe's own instruments did not name
        mine = {(o.kind, o.kernel) for o in offenders if o.pid == pid}
        for backend, kernel in monitor:
            ours = {"Triton": ("triton", "triton-autotune"), "CuTeDSL": ("cutedsl",), "TileLang": ("tilelang",)}.get(backend, ())
            if not any((k, kernel) in mine for k in ours):
                offenders.append(Offender(kernel, f"reported by vLLM's JIT monitor ({backend})", pid, "vllm-jit-monitor"))
        incomplete = sorted(n for n, snap in proc.snaps.items() if len(snap["got"]) != snap["parts"])
        if proc.snaps and sorted(proc.snaps) != list(range(1, max(proc.snaps) + 1)):
            log_problems.append(f"pid {pid}: counts snapshot(s) missing from the log (numbers {sorted(proc.snaps)[:8]})")
        if incomplete:
            log_problems.append(f"pid {pid}: counts snapshot(s) {incomplete[:5]} incomplete (a part is missing)")
        if proc.compiled and not proc.warm:
            unmarked.append(pid)
        final = proc.final or {}
        if proc.final is not None:
            counted = True
        if (proc.started or proc.final is not None) and not (proc.exited and ended):
            log_problems.append(f"pid {pid}: no exit snapshot (killed?): its counts are not final")
        lost = {k: n - seen.get(k, 0) for k, n in (final.get("emitted") or {}).items()
                if k != "probe-counts" and n > seen.get(k, 0)}
        if lost:
            log_problems.append(f"pid {pid}: the log lacks lines the process wrote: "
                                + ", ".join(f"{n} {k}" for k, n in sorted(lost.items())))
        calls = final.get("hook_calls") or {}
        if int(calls.get("triton_cache", 0)) > int(calls.get("triton_post", 0)):
            replaced.setdefault("triton-jit", f"pid {pid}: Triton's post-compile hook chain reached the probe's hook for "
                                f"{calls.get('triton_post', 0)} of {calls.get('triton_cache', 0)} compiles")
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
            if "dynamo" in instruments_used and "dynamo" not in final:
                problems.append(f"pid {pid}: dynamo's counters were not read after warmup")
                replaced.setdefault("dynamo", f"pid {pid}: dynamo's counters were not read")
    marked = any(e.get("kind") == "mark" and e.get("name") == WARMUP_DONE for stream in by_pid.values() for e in stream)
    if by_pid and not marked:
        problems.append(f"no process marked {WARMUP_DONE!r}: there is no 'after warmup' to measure")
    if unmarked:
        problems.append(f"process(es) {', '.join(map(str, unmarked))} compiled kernels but never marked {WARMUP_DONE!r}: "
                        "compiles after warmup cannot be told from warmup")
    jit_kinds = _jit_kinds(instruments_used, missing, replaced)
    blind: list[str] = [name for name in ("triton-jit", "triton-autotune", "dynamo", "cuda-graphs") if name in replaced]
    blind += [name for name in replaced if name.startswith("jit-")]
    blind += [name for name in missing if name.startswith("jit-") or name == "vllm-jit-monitor"]
    intact = not log_problems
    jit_ok = intact and ("triton-jit" in instruments_used and "triton-autotune" in instruments_used and not unmarked
                         and bool(by_pid) and marked and not blind)
    graphs_ok = intact and "cuda-graphs" in instruments_used and "cuda-graphs" not in replaced and counted
    regions_ok = graphs_ok and "region-launches" not in replaced
    compiles = before + sum(o.kind == "triton" for o in offenders)
    eager_total = sum(eager.values())
    cache_ok = intact and written_ok and counted and "triton-cache-writes" in instruments_used and "triton-cache-writes" not in replaced
    return Summary(
        processes=len([p for p in by_pid if p]),
        instruments=instruments_used,
        missing=missing,
        jit_compiles_after_warmup=len(offenders) if jit_ok else None,
        jit_after_warmup=tuple(offenders),
        compiles_before_warmup=before,
        compile_seconds_before_warmup=round(seconds_before, 6),
        compile_seconds_after_warmup=round(seconds_after, 6),
        cache_entries_written=written if cache_ok else None,
        served_from_cache=max(0, compiles - written) if cache_ok else None,
        graph_captures=captures if graphs_ok else None,
        graph_replays=replays if graphs_ok else None,
        graphs=dict(graphs),
        eager_launches_in_graphed_regions=None,
        eager_kernels=tuple(sorted(eager)),
        dynamo_recompile_reasons=tuple(reasons[:20]),
        problems=tuple([f"the probe log is damaged, nothing in it is measured: {p}" for p in log_problems[:20]] + problems
                       + [f"{name} not instrumented: {why}" for name, why in sorted(missing.items())]
                       + [f"{name} not measured: {why}" for name, why in sorted(replaced.items())]),
        eager_triton_launches_in_graphed_regions=eager_total if regions_ok and "triton-jit" in instruments_used else None,
        graphed_region_entries=entries if regions_ok else None,
        graphed_regions_not_replayed=unreplayed if regions_ok else None,
        autotunes_before_warmup=autotunes_before,
        graph_captures_after_warmup=captures_after if graphs_ok else None,
        log_problems=tuple(log_problems),
        hooks_chained=chained,
        jit_kinds=jit_kinds,
    )


def _jit_kinds(used: dict[str, str], missing: dict[str, str], replaced: dict[str, str]) -> dict[str, str]:
    """Each JIT kind that "no JIT after warmup" covers, and how it was watched in this log."""
    out = {}
    for kind, what in JIT_KINDS.items():
        name = _KIND_INSTRUMENTS[kind]
        if name in replaced:
            out[kind] = f"not measured: {replaced[name]}"
        elif name in missing:
            out[kind] = f"not measured: {missing[name]}"
        elif name in used:
            out[kind] = f"watched: {used[name]}"
        elif kind in _IMPORT_WATCHED:
            out[kind] = "watched: not imported by the program (its import would have been instrumented)"
        else:
            out[kind] = "not measured: its instrument was never installed"
    return out


def to_fields(summary: Summary) -> dict[str, Any]:
    """The two results-cell fields a gate judges; None where the probe could not measure."""
    return {"graph_replays": summary.graph_replays, "jit_compiles_after_warmup": summary.jit_compiles_after_warmup}
