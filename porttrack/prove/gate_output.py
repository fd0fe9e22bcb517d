"""How a gate check is shown: `porttrack gate check --json` (schema porttrack/gate-check/v1) and
the human text. The judge itself is `porttrack.prove.gates`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from porttrack.common.text import for_terminal
from porttrack.prove.gates import GPU_AXES, JSON_SCHEMA_ID, PASS, GateCheck, Required, coords_json

if TYPE_CHECKING:
    from porttrack.tracks.config import Gate


def gate_to_json(gate: "Gate | None") -> dict[str, Any] | None:
    if gate is None:
        return None
    job = gate.job
    return {
        "job": {"kind": "command" if job.command else "workflow", "timeout_s": job.timeout_s,
                "command": job.command, "workflow": job.workflow.file if job.workflow else None},
        # a neutral gate has no backend (its FOREIGN_KEYS): the key is left out, not null
        **({} if "reference_backend" in getattr(gate, "FOREIGN_KEYS", {}) else {"reference_backend": gate.reference_backend}),
        "tolerance": None if gate.tolerance is None else {"abs": gate.tolerance.abs, "rel": gate.tolerance.rel},
        "metrics": [
            {"name": m.name, "unit": m.unit, "direction": m.direction,
             "allowed_regression_pct": m.allowed_regression_pct, "allowed_regression_abs": m.allowed_regression_abs}
            for m in gate.metrics
        ],
        "phases": list(gate.phases or []),
        "graph_replay": gate.graph_replay,
        "no_jit_after_warmup": gate.no_jit_after_warmup,
        "promote": gate.promote,
    }


def to_json(result: GateCheck) -> dict[str, Any]:
    """`porttrack gate check --json`: the documented shape, schema porttrack/gate-check/v1.

    {
      "schema": "porttrack/gate-check/v1",
      "subject": {"kind": "patch"|"proof", "name", "track", "state": str|null},
      "verdict": "pass" | "fail" | "cannot-evaluate",
      "exit_code": 0 | 1 | 7,
      "reason": str,
      "gate": null | {"job": {"kind", "timeout_s", "command", "workflow"}, "reference_backend" (vllm-gpu only),
                      "tolerance": {"abs", "rel"}, "metrics": [{"name", "unit", "direction",
                      "allowed_regression_pct", "allowed_regression_abs"}], "phases",
                      "graph_replay", "no_jit_after_warmup", "promote"},
      "required": null | {"models", "contexts", "batches", "targets", "phases"}
                  (a neutral gate: {"axes": {name: [values]}, "targets", "phases"}),
      "not_required": [{"model", "verdict": "ineligible"|"conditional"|"not-in-matrix", "reasons"}],
      "counts": {"pass", "fail", "missing", "baseline-missing", "baseline-other-environment"},
      "cells": [{"model", "context", "batch", "target", "phase",
                 "verdict": "pass"|"fail"|"missing"|"baseline-missing"|"baseline-other-environment",
                 "reason", "evidence": id|null, "baseline": id|null,
                 "backend": str|null (claimed), "backend_used": {layer kind: [backend]}|null (the engine's
                 record; both keys only in GPU cells),
                 "checks": [{"check": "backend"|"numerics"|"graph-replay"|"no-jit-after-warmup"|"metric:<name>",
                             "outcome": "pass"|"fail"|"missing", "detail", "observed", "limit",
                             "baseline", "regression", "regression_pct", "over_by"}]}],
      "evidence": [id, ...],           # every record the verdict rests on, sorted
      "ignored": [{"id", "why"}],      # the subject's records that do not count (superseded, other track, stale)
      "invalid": [{"path", "why"}]     # evidence files that could not be read or were edited
    }
    Cells are ordered model × context × batch × target × phase as the gate lists them. A cell of a
    neutral gate (axes of other names) has no model/context/batch keys but `"axes": {name: value}`,
    and phase null when the gate has no phases; the order is then axes × target × phase.
    """
    req = result.required
    return {
        "schema": JSON_SCHEMA_ID,
        "subject": {"kind": result.subject.kind, "name": result.subject.name, "track": result.subject.track, "state": result.subject.state},
        "verdict": result.verdict,
        "exit_code": result.exit_code,
        "reason": result.reason,
        "gate": gate_to_json(result.subject.gate),
        "required": None if req is None else _required_json(req),
        "not_required": [] if req is None else [{"model": l.model, "verdict": l.verdict, "reasons": list(l.reasons)} for l in req.left_out],
        "counts": result.counts(),
        "cells": [
            {
                **(coords := coords_json(c.coords)), "target": c.target, "phase": c.phase,
                "verdict": c.verdict, "reason": c.reason, "evidence": c.evidence, "baseline": c.baseline,
                # backends are a GPU cell's (model x context x batch); a neutral gate's cells have none
                **({"backend": c.backend, "backend_used": c.backend_used} if "model" in coords else {}),
                "checks": [
                    {"check": k.check, "outcome": k.outcome, "detail": k.detail, "observed": k.observed, "limit": k.limit,
                     "baseline": k.baseline, "regression": k.regression, "regression_pct": k.regression_pct, "over_by": k.over_by}
                    for k in c.checks
                ],
            }
            for c in result.cells
        ],
        "evidence": list(result.evidence_ids),
        "ignored": [{"id": i.id, "why": i.why} for i in result.ignored],
        "invalid": [{"path": p, "why": w} for p, w in result.invalid],
    }


def _required_json(req: Required) -> dict[str, Any]:
    if tuple(name for name, _ in req.axes) != GPU_AXES:
        return {"axes": {name: list(values) for name, values in req.axes}, "targets": list(req.targets), "phases": list(req.phases)}
    return {"models": list(req.models), "contexts": list(req.contexts), "batches": list(req.batches),
            "targets": list(req.targets), "phases": list(req.phases)}


def render(result: GateCheck) -> str:
    s = result.subject
    lines = [f"{s.kind} {s.name}  (track {s.track}{', state ' + s.state if s.state else ''})"]
    req = result.required
    if req is not None:
        if tuple(name for name, _ in req.axes) == GPU_AXES:
            lines.append(f"required: models {', '.join(req.models) or '(none)'} × contexts {', '.join(map(str, req.contexts))} × "
                         f"batches {', '.join(map(str, req.batches))} × targets {', '.join(req.targets)} × phases {', '.join(req.phases)}")
        else:
            axes = "".join(f"{name} {', '.join(map(str, values))} × " for name, values in req.axes)
            lines.append(f"required: {axes}targets {', '.join(req.targets)}" + (f" × phases {', '.join(req.phases)}" if req.phases else ""))
        for left in req.left_out:
            lines.append(f"  not required: {left.model} ({left.verdict}: {for_terminal('; '.join(left.reasons), 160)})")
    for cell in result.cells:
        head = f"  {cell.verdict.upper():<27} {cell.label}" + (f"  [{for_terminal(cell.backend_text, 200)}]" if cell.backend_text else "")
        lines.append(head)
        if cell.verdict != PASS:
            lines.append(f"      {for_terminal(cell.reason, 400)}")
    for ignored in result.ignored:
        lines.append(f"  not counted: {ignored.id}: {for_terminal(ignored.why, 200)}")
    for path, why in result.invalid:
        lines.append(f"  invalid evidence file {path}: {for_terminal(why, 200)}")
    counts = ", ".join(f"{n} {v}" for v, n in result.counts().items() if n)
    lines.append(f"verdict: {result.verdict.upper()} — {result.reason}" + (f" ({counts})" if counts else ""))
    return "\n".join(lines)
