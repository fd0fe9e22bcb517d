"""`gate run --interleaved N`: baseline and candidate timed in turns, not in blocks.

A gate that times the candidate in one block and the baseline in another judges the machine as
much as the patch: a noisy neighbour during the candidate's block fails a good patch, and that
failing record stays current. Here both refs are built, each gets its own work tree, and the
gate's job runs N rounds per target in the order C B B C C B ... (neither role always first),
so a slow stretch of the machine falls on both. Each role's rounds become one evidence record:
every metric is the median over the rounds, with its spread (`spread`: n, min, q1, q3, max) kept
in the cell, and `gate check` judges the medians with the spread in view
(`porttrack.prove.gates`). Local command jobs only; anything that fails in any round records
nothing for that target.
"""

from __future__ import annotations

import copy
import json
import shlex
import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from porttrack.common.errors import CannotEvaluate, InputError, PreconditionError
from porttrack.prove import gaterun
from porttrack.prove.gates import GateSubject
from porttrack.runner import results
from porttrack.runner.local import command_argv, run_job
from porttrack.workspace.files import checkpoint

if TYPE_CHECKING:
    from porttrack.git.repo import GitRepo
    from porttrack.queue.manifest import Queue
    from porttrack.tracks.config import Config
    from porttrack.workspace.files import Workspace

ROLES = ("candidate", "baseline")


def order(rounds: int) -> list[str]:
    """C B, B C, C B, ...: each round runs both roles, the first one alternating."""
    return [role for r in range(rounds) for role in (ROLES if r % 2 == 0 else ROLES[::-1])]


def spread(values: Sequence[float]) -> dict[str, float | int]:
    ordered = sorted(float(v) for v in values)
    q = statistics.quantiles(ordered, n=4, method="inclusive") if len(ordered) > 1 else [ordered[0]] * 3
    return {"n": len(ordered), "min": ordered[0], "q1": q[0], "q3": q[2], "max": ordered[-1]}


def _cell_key(cell: Mapping[str, Any]) -> str:
    return json.dumps({k: v for k, v in cell.items() if k not in ("metrics", "numerics", "duration_s", "spread", "backend_used",
                                                                   "graph_replays", "jit_compiles_after_warmup", "graphed_regions_eager")},
                      sort_keys=True)


def merge(documents: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One results document from several rounds of the same job: the last round's document with
    every cell's metrics replaced by their medians over the rounds and their spread added. A cell
    or metric missing from any round is left out (it was not measured every time). The figures
    the gate counts (JIT after warmup, eager work in a graphed region) are the worst round's."""
    if not documents:
        raise ValueError("no rounds")
    merged = copy.deepcopy(dict(documents[-1]))
    by_round = [{_cell_key(c): c for c in d.get("cells") or []} for d in documents]
    cells = []
    for cell in merged.get("cells") or []:
        key = _cell_key(cell)
        found = [r.get(key) for r in by_round]
        rounds = [r for r in found if r is not None]
        if len(rounds) != len(found):  # a cell some round lacks
            continue
        names = [m for m in cell.get("metrics") or {} if all(m in (r.get("metrics") or {}) for r in rounds)]
        cell["metrics"] = {m: statistics.median(float(r["metrics"][m]) for r in rounds) for m in names}
        cell["spread"] = {m: spread([float(r["metrics"][m]) for r in rounds]) for m in names}
        for worst in ("jit_compiles_after_warmup", "graphed_regions_eager"):
            if all(isinstance(r.get(worst), int) for r in rounds):
                cell[worst] = max(r[worst] for r in rounds)
        if all(isinstance(r.get("graph_replays"), int) for r in rounds):
            cell["graph_replays"] = min(r["graph_replays"] for r in rounds)
        if all(isinstance(r.get("duration_s"), (int, float)) for r in rounds):
            cell["duration_s"] = round(sum(float(r["duration_s"]) for r in rounds), 6)
        cells.append(cell)
    merged["cells"] = cells
    return merged


def run(ws: "Workspace", config: "Config", queue: "Queue", subject: GateSubject, *, repo: "GitRepo", rounds: int,
        targets: Sequence[str] | None = None, say: gaterun.Say | None = None, now: str | None = None,
        force: bool = False) -> list[gaterun.RunOutcome]:
    """Both roles, interleaved, `rounds` rounds per target; one record per role and target."""
    say = say or (lambda _line: None)
    gate = subject.gate
    if gate is None:
        raise PreconditionError(subject.why_ungated or f"{subject.name} has no gate")
    if gate.job.command is None:
        raise PreconditionError("--interleaved runs a local command job; this gate's job is a GitHub Actions workflow")
    if rounds < 2:
        raise InputError("--interleaved needs at least 2 rounds")
    chosen = gaterun._targets(config, subject, targets)
    built = {role: gaterun.build_ref(ws, config, queue, subject, role, repo=repo, say=say, force=force) for role in ROLES}
    for role in ROLES:
        say(f"{role} ref {built[role].sha[:12]}: {built[role].how}")
    outcomes: dict[str, list[gaterun.TargetOutcome]] = {role: [] for role in ROLES}
    plans: list[str] = []
    for target in chosen:
        for role, outcome in _target(ws, config, subject, repo, built, target, rounds, plans, say, now).items():
            outcomes[role].append(outcome)
    checkpoint("gate:recorded")
    result = [gaterun.RunOutcome(subject, role, built[role], tuple(outcomes[role]), tuple(plans), False) for role in ROLES]
    problems = [f"{t.target} ({o.role}): {t.problem}" for o in result for t in o.targets if t.problem]
    if problems:
        raise CannotEvaluate("; ".join(problems))
    return result


def _target(ws: "Workspace", config: "Config", subject: GateSubject, repo: "GitRepo", built: Mapping[str, gaterun.BuiltRef],
            target: str, rounds: int, plans: list[str], say: gaterun.Say, now: str | None) -> dict[str, gaterun.TargetOutcome]:
    gate = subject.gate
    assert gate is not None and gate.job.command is not None
    command, what = gate.job.command, f"gate job command of {subject.track}"
    documents: dict[str, list[dict[str, Any]]] = {role: [] for role in ROLES}
    jobs: dict[str, list[dict[str, Any]]] = {role: [] for role in ROLES}
    with gaterun._job_folder(ws) as tmp_c, gaterun._job_folder(ws) as tmp_b:
        tmp = {"candidate": Path(tmp_c), "baseline": Path(tmp_b)}
        workdir = {role: tmp[role] / "work" for role in ROLES}
        needed = "{workdir}" in command
        with gaterun._workdir(repo, built["candidate"].sha, workdir["candidate"], needed), \
                gaterun._workdir(repo, built["baseline"].sha, workdir["baseline"], needed):
            for i, role in enumerate(order(rounds)):
                results_path = tmp[role] / f"round-{i}-{gaterun.RESULTS_NAME}"
                values = {"ref": built[role].sha, "results": str(results_path), "workdir": str(workdir[role]), "target": target}
                if i < 2:
                    plans.append(f"{target} ({role}): {shlex.join(command_argv(command, values, what))}")
                log = Path(ws.cache_dir) / "logs" / f"gate-{subject.name}-{role}-{target}.log"
                say(f"{target}: round {i // 2 + 1}/{rounds} {role}")
                job_run = run_job(command, values, cwd=Path(ws.root), timeout_s=gate.job.timeout_s, log=log,
                                  env=gaterun.job_environment(subject, role, target, built[role], str(results_path)),
                                  tail_lines=gaterun.LOG_TAIL, what=what)
                jobs[role].append({"exit_code": job_run.exit_code, "duration_s": job_run.duration_s})
                if job_run.exit_code != 0 or not results_path.is_file():
                    why = "timed out" if job_run.timed_out else f"exited {job_run.exit_code}"
                    problem = f"round {i // 2 + 1} of {rounds}: the job {why}; {gaterun._tail(job_run.output_tail, log)}"
                    return {r: gaterun.TargetOutcome(target, None, problem, job_run.exit_code) for r in ROLES}
                try:
                    documents[role].append(results.parse(results_path.read_bytes(), f"{target} {role} round {i // 2 + 1}"))
                except InputError as exc:
                    return {r: gaterun.TargetOutcome(target, None, f"results refused, nothing recorded: {exc}") for r in ROLES}
    out = {}
    for role in ROLES:
        data = json.dumps(merge(documents[role])).encode("utf-8")
        job = {"kind": "command", "command": command, "exit_code": 0, "interleaved_rounds": rounds,
               "duration_s": round(sum(j["duration_s"] for j in jobs[role]), 3)}
        try:
            record = gaterun.ingest(ws, config, subject, role, target, built[role], data, f"{target} {role} (interleaved)", job, now=now)
        except InputError as exc:
            out[role] = gaterun.TargetOutcome(target, None, f"results refused, nothing recorded: {exc}", 0)
            continue
        say(f"{target}: recorded {record.id} ({role}, medians of {rounds} interleaved rounds)")
        out[role] = gaterun.TargetOutcome(target, record, None, 0)
    return out
