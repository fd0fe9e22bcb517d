"""Which models each track must be proven on, and why the others are left out.

A model is eligible for a track only when every requirement of the track matches the model's
attributes (drafter, attention layout, quantization, and the backend selected on each of the
track's targets) and no proof it is conditional on is still pending. Tracks are independent:
nothing here carries a verdict from one track to another.

Verdicts per (model, track):
- `ineligible`: a requirement does not match (`reasons` says which); a proof cannot change that;
- `conditional`: every requirement matches but a proof named in the model's `conditional` for
  this track has not passed yet (`reasons`: "pending proof <id>");

Each reason is kept as data (`Reason`: kind, value, and the sentence), so what shows it shorter
(the weekly report's table) reads the kind instead of parsing the sentence.
- `eligible`: everything matches (`reasons` is empty).

Under a profile without models (tracks.yaml `profile: neutral`) eligibility is not used: a track
applies everywhere, `used` is false, and the command and the weekly report say so (NOT_USED).

This module only reads the typed config; it imports neither pydantic nor click.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from porttrack.common.errors import NotFound
from porttrack.tracks.config import Config, Model, Track

ELIGIBLE = "eligible"
INELIGIBLE = "ineligible"
CONDITIONAL = "conditional"
VERDICTS = (ELIGIBLE, CONDITIONAL, INELIGIBLE)

JSON_SCHEMA_ID = "porttrack/eligibility/v1"
NOT_USED = "eligibility is not used: this tracks.yaml's profile has no models, so every track applies on all its targets"


@dataclass(frozen=True)
class ProofCondition:
    proof: str
    passed: bool
    reason: str  # why the model waits on this proof (from tracks.yaml)


@dataclass(frozen=True)
class Reason:
    """Why a model is not eligible, as data: `kind` is drafter | attention | quantization (the
    model's value does not match), backend (the backend selected on a target does not), no-backend
    (none is selected on a target) or pending-proof; `value` is the model's value, the target, or
    the proof id; `text` the sentence `porttrack eligibility` prints."""

    kind: str
    value: str
    text: str

    @property
    def summary(self) -> str:
        """What fits in a table cell: "attention: hybrid", "proof mla-low-rank-accepted", "backend"."""
        if self.kind in ("drafter", "attention", "quantization"):
            return f"{self.kind}: {self.value}"
        if self.kind == "pending-proof":
            return f"proof {self.value}"
        return "backend"


@dataclass(frozen=True)
class Cell:
    model: str
    track: str
    verdict: str  # one of VERDICTS
    why: tuple[Reason, ...]  # failed requirements (ineligible) or pending proofs (conditional)
    conditions: tuple[ProofCondition, ...] = ()  # every proof this cell depends on, passed or not

    @property
    def reasons(self) -> tuple[str, ...]:
        """The reasons as sentences (the JSON's `reasons`)."""
        return tuple(r.text for r in self.why)


@dataclass(frozen=True)
class TrackEligibility:
    track: str
    targets: tuple[str, ...]  # where the track's gate must pass: its matrix's targets, else the track's
    cells: tuple[Cell, ...]  # one per model, in tracks.yaml order

    def models(self, verdict: str) -> tuple[str, ...]:
        return tuple(cell.model for cell in self.cells if cell.verdict == verdict)

    @property
    def eligible(self) -> tuple[str, ...]:
        return self.models(ELIGIBLE)

    @property
    def conditional(self) -> tuple[str, ...]:
        return self.models(CONDITIONAL)

    @property
    def ineligible(self) -> tuple[str, ...]:
        return self.models(INELIGIBLE)


@dataclass(frozen=True)
class Eligibility:
    tracks: tuple[TrackEligibility, ...]  # in tracks.yaml order
    proofs_passed: frozenset[str]
    used: bool = True  # False: the profile has no models (every track applies everywhere)

    def track(self, track_id: str) -> TrackEligibility:
        for entry in self.tracks:
            if entry.track == track_id:
                return entry
        raise NotFound(f"no track {track_id!r} in tracks.yaml (tracks: {', '.join(t.track for t in self.tracks)})")

    def cell(self, model: str, track_id: str) -> Cell:
        for cell in self.track(track_id).cells:
            if cell.model == model:
                return cell
        raise NotFound(f"no model {model!r} in tracks.yaml")

    def tracks_for(self, model: str, verdict: str = ELIGIBLE) -> tuple[str, ...]:
        """The tracks in which `model` has `verdict`."""
        return tuple(t.track for t in self.tracks for c in t.cells if c.model == model and c.verdict == verdict)


def requirement_failures(model: Model, track: Track) -> list[str]:
    """Why `model` does not match `track`'s requirements, one sentence per failed requirement
    (`unmet_requirements` as text). An empty list means every requirement matches."""
    return [r.text for r in unmet_requirements(model, track)]


def unmet_requirements(model: Model, track: Track) -> list[Reason]:
    """Why `model` does not match `track`'s requirements: one reason per failed requirement.

    An empty list means every requirement matches (proofs are not considered here).
    """
    req = track.requires
    reasons = []
    if req.drafter is not None and not set(model.drafters) & set(req.drafter):
        have = ", ".join(model.drafters) if model.drafters else "none"
        reasons.append(Reason("drafter", have, f"drafter {have} not in [{', '.join(req.drafter)}]"))
    if req.attention is not None and model.attention not in req.attention:
        reasons.append(Reason("attention", model.attention, f"attention {model.attention} not in [{', '.join(req.attention)}]"))
    if req.quantization is not None and model.quantization not in req.quantization:
        reasons.append(Reason("quantization", model.quantization,
                              f"quantization {model.quantization} not in [{', '.join(req.quantization)}]"))
    for target in track.targets:
        backend = model.backends.get(target)
        if backend is None:
            reasons.append(Reason("no-backend", target, f"no backend selected on {target}"))
            continue
        allowed = (req.backend or {}).get(target)
        if allowed is not None and backend not in allowed:
            reasons.append(Reason("backend", target, f"backend {backend} on {target} not in [{', '.join(allowed)}]"))
    return reasons


def evaluate(config: Config, proofs_passed: Iterable[str] = frozenset()) -> Eligibility:
    """The verdict of every (model, track) pair, given the proofs that have passed."""
    passed = frozenset(proofs_passed)
    tracks = []
    for track_id, track in config.tracks.items():
        cells = tuple(_cell(model_id, model, track_id, track, passed) for model_id, model in config.models.items())
        tracks.append(TrackEligibility(track_id, tuple(config.gate_targets(track_id)), cells))
    return Eligibility(tuple(tracks), passed, used=config.rules.uses_models)


def _cell(model_id: str, model: Model, track_id: str, track: Track, passed: frozenset[str]) -> Cell:
    conditions = tuple(
        ProofCondition(cond.proof, cond.proof in passed, cond.reason)
        for cond in model.conditional
        if track_id in cond.tracks
    )
    failures = unmet_requirements(model, track)
    if failures:
        return Cell(model_id, track_id, INELIGIBLE, tuple(failures), conditions)
    pending = tuple(Reason("pending-proof", c.proof, f"pending proof {c.proof}") for c in conditions if not c.passed)
    if pending:
        return Cell(model_id, track_id, CONDITIONAL, pending, conditions)
    return Cell(model_id, track_id, ELIGIBLE, (), conditions)


def required_models(config: Config, track_id: str, proofs_passed: Iterable[str] = frozenset()) -> list[str]:
    """The models a track's gate must cover now.

    With `matrix.models: eligible` (or no gate): every eligible model, in tracks.yaml order. With
    an explicit list: the listed models that are eligible, in the gate's order; a listed
    conditional model joins once its proof passes (tracks.yaml refuses a listed model that fails
    a requirement).
    """
    if track_id not in config.tracks:
        raise NotFound(f"no track {track_id!r} in tracks.yaml (tracks: {', '.join(config.tracks)})")
    eligible = evaluate(config, proofs_passed).track(track_id).eligible
    gate = config.tracks[track_id].gate
    if gate is None or gate.matrix.models == "eligible":
        return list(eligible)
    return [model for model in gate.matrix.models if model in eligible]


def to_json(result: Eligibility) -> dict[str, Any]:
    """The documented, stable JSON shape (`porttrack eligibility --json`).

    {
      "schema": "porttrack/eligibility/v1",
      "proofs_passed": ["<proof id>", ...],                       # sorted
      "used": false,                                              # only under a profile without models
      "note": "<NOT_USED>",                                       # (then tracks' cells are [])
      "tracks": [                                                 # tracks.yaml order
        {"track": "<track id>",
         "targets": ["<target id>", ...],                         # where its gate must pass
         "eligible": [...], "conditional": [...], "ineligible": [...],   # model ids, file order
         "cells": [                                               # one per model, file order
           {"model": "<model id>",
            "verdict": "eligible" | "conditional" | "ineligible",
            "reasons": ["<why not eligible>", ...],               # [] when eligible
            "proofs": [{"proof": "<id>", "passed": bool, "reason": "<text>"}, ...]}]}]
    }
    """
    not_used = {} if result.used else {"used": False, "note": NOT_USED}
    return {
        "schema": JSON_SCHEMA_ID,
        "proofs_passed": sorted(result.proofs_passed),
        **not_used,
        "tracks": [
            {
                "track": entry.track,
                "targets": list(entry.targets),
                "eligible": list(entry.eligible),
                "conditional": list(entry.conditional),
                "ineligible": list(entry.ineligible),
                "cells": [
                    {
                        "model": cell.model,
                        "verdict": cell.verdict,
                        "reasons": list(cell.reasons),
                        "proofs": [{"proof": c.proof, "passed": c.passed, "reason": c.reason} for c in cell.conditions],
                    }
                    for cell in entry.cells
                ],
            }
            for entry in result.tracks
        ],
    }


def render_text(result: Eligibility) -> str:
    """A plain models × tracks table, then one line per verdict that is not `eligible` (why)."""
    if not result.used:
        targets = [f"{entry.track}: required on {', '.join(entry.targets)}" for entry in result.tracks]
        return "\n".join([NOT_USED, "", *targets]) + "\n"
    tracks = [entry.track for entry in result.tracks]
    models = [cell.model for cell in result.tracks[0].cells] if result.tracks else []
    rows = [["model", *tracks]]
    rows += [[model, *(result.cell(model, track).verdict for track in tracks)] for model in models]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(value.ljust(width) for value, width in zip(row, widths)).rstrip() for row in rows]
    lines.append("")
    for entry in result.tracks:
        lines.append(f"{entry.track}: required on {', '.join(entry.targets)}")
    passed = ", ".join(sorted(result.proofs_passed)) or "none"
    lines.append(f"proofs passed: {passed}")
    why = [f"  {c.model} / {c.track}: {'; '.join(c.reasons)}" for e in result.tracks for c in e.cells if c.reasons]
    if why:
        lines += ["", "not eligible (why):", *why]
    return "\n".join(lines) + "\n"
