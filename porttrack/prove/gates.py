"""Gates: what a queued patch (or a proof) must show, and the verdict of the evidence, cell by cell.

A gate (tracks.yaml, per track; `porttrack.tracks.config.Gate`) defines a matrix of named axes — under
profile vllm-gpu: models (by default the track's eligible models), contexts, batches; under profile
neutral: whatever axes the gate names — and targets, and per cell the checks below. The matrix is
multiplied by the gate's phases: `cold` and `warm` are separate cells, judged separately (a
neutral gate without phases has one measurement per cell). A cell's coordinates are
(axis, value) pairs; a results cell carries them as model/context/batch (results v1 GPU cells)
or as `axes` (neutral cells), and `cell_coords` reads either.

Checks on one cell (candidate = the latest non-superseded evidence for the subject on that target
containing the cell):
- numerics   the outputs were compared against the gate's *named* reference backend, and
             `max_abs_err <= tolerance.abs` or `max_rel_err <= tolerance.rel` — each is a
             sufficient condition for the documented `|a-b| <= abs + rel*|b|` on every element
             (conservative: fails closed when neither bound holds);
- graph-replay          (when `graph_replay: required`) at least one graph replay was observed;
- no-jit-after-warmup   (when required) zero JIT compiles after warmup;
- metric:<name>         against the baseline: the same job on the fork without the subject, on
             the same environment (every machine field, the fork commit and the upstream base
             equal; the patch set equal to the candidate's without the subject and the patches
             that depend on it). The regression (positive = worse, in the metric's direction) must
             be within every allowed bound the metric defines (percent and/or absolute).

Cell verdicts: `pass`; `fail` (a check failed: which threshold, by how much); `missing` (no
evidence for the cell, or it lacks a required measurement — fails closed); `baseline-missing`;
`baseline-other-environment` (a baseline exists, but not on this environment: never a silent
fallback). The gate passes only when every required cell passes. `check()` never raises for
missing data: it says so per cell; the CLI maps fail → exit 1, anything not evaluable → exit 7.

This module only judges; running a gate job and ingesting its results is `porttrack.prove.gaterun`.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from porttrack.common.errors import NotFound
from porttrack.prove import evidence
from porttrack.prove.evidence import MACHINE_FIELDS, EvidenceLog, Record
from porttrack.tracks import eligibility
from porttrack.workspace.files import Workspace

if TYPE_CHECKING:
    from porttrack.queue.manifest import Patch, Queue
    from porttrack.tracks.config import Config, Gate, Metric

JSON_SCHEMA_ID = "porttrack/gate-check/v1"

PASS = "pass"
FAIL = "fail"
MISSING = "missing"
BASELINE_MISSING = "baseline-missing"
BASELINE_OTHER_ENV = "baseline-other-environment"
CELL_VERDICTS = (PASS, FAIL, MISSING, BASELINE_MISSING, BASELINE_OTHER_ENV)
CANNOT_EVALUATE = "cannot-evaluate"
EPSILON = 1e-9  # float noise allowance when comparing against a limit


# -- what is being gated -----------------------------------------------------------------------

@dataclass(frozen=True)
class GateSubject:
    """A queued patch or a proof, with the gate that proves it."""

    kind: str  # "patch" | "proof"
    name: str  # patch name or proof id
    track: str  # the track whose gate proves a patch; the proof id for a proof
    gate: "Gate | None"
    sha256: str | None = None  # the patch file's content hash: evidence for other content is stale
    state: str | None = None  # the patch's lifecycle state
    dependents: frozenset[str] = frozenset()  # queued patches that need this one (not in a baseline)
    why_ungated: str | None = None


def ungated_fix(patch: "Patch") -> str:
    """How an ungated patch becomes promotable (README, "Adding a gate"): its track gets a gate,
    then the patch is taken again under it (a patch's gate is fixed when it is imported)."""
    return (f"to make it promotable, add a `gate:` to track {patch.track} in tracks.yaml (README, \"Adding a gate\"), "
            f"then `porttrack drop {patch.name} --reason \"re-import under the new gate\"` and `porttrack import {patch.pr}`")


def patch_subject(config: "Config", queue: "Queue", patch: "Patch") -> GateSubject:
    dependents = _dependents(queue, patch.name)
    if patch.gate is None or patch.state == "ungated":
        return GateSubject("patch", patch.name, patch.track, None, patch.sha256, patch.state, dependents,
                           f"patch {patch.name} is ungated: track {patch.track} had no gate when it was imported; {ungated_fix(patch)}")
    track = config.tracks.get(patch.gate)
    if track is None or track.gate is None:
        return GateSubject("patch", patch.name, patch.gate, None, patch.sha256, patch.state, dependents,
                           f"track {patch.gate} (the gate of {patch.name}) has no gate in tracks.yaml")
    return GateSubject("patch", patch.name, patch.gate, track.gate, patch.sha256, patch.state, dependents)


def proof_subject(config: "Config", proof_id: str) -> GateSubject:
    proof = config.proofs.get(proof_id)
    if proof is None:
        raise NotFound(f"no proof {proof_id!r} in tracks.yaml (proofs: {', '.join(config.proofs) or 'none'})")
    why = None if proof.gate is not None else f"proof {proof_id} defines no gate"
    return GateSubject("proof", proof_id, proof_id, proof.gate, why_ungated=why)


def _dependents(queue: "Queue", name: str) -> frozenset[str]:
    found: set[str] = set()
    frontier = {name}
    while frontier:
        step = {p.name for p in queue.patches if set(p.depends_on) & frontier and p.name not in found}
        found |= step
        frontier = step
    return frozenset(found)


# -- the required matrix -----------------------------------------------------------------------

@dataclass(frozen=True)
class LeftOut:
    model: str
    verdict: str  # ineligible | conditional | not-in-matrix
    reasons: tuple[str, ...]


Coords = tuple[tuple[str, Any], ...]  # ((axis, value), ...) in the matrix's order
GPU_AXES = ("model", "context", "batch")  # how a results v1 GPU cell names its coordinates


@dataclass(frozen=True)
class CellKey:
    coords: Coords
    target: str
    phase: str | None  # None: the gate has no phases


@dataclass(frozen=True)
class Required:
    axes: tuple[tuple[str, tuple[Any, ...]], ...]  # (axis name, values) in the matrix's order
    targets: tuple[str, ...]
    phases: tuple[str, ...]  # empty: no phases, one measurement per cell
    left_out: tuple[LeftOut, ...] = ()

    def axis(self, name: str) -> tuple[Any, ...]:
        return dict(self.axes).get(name, ())

    @property
    def models(self) -> tuple[str, ...]:
        return self.axis("model")

    @property
    def contexts(self) -> tuple[int, ...]:
        return self.axis("context")

    @property
    def batches(self) -> tuple[int, ...]:
        return self.axis("batch")

    def cells(self) -> Iterable[CellKey]:
        names = [name for name, _ in self.axes]
        for values in itertools.product(*(values for _, values in self.axes)):
            for target in self.targets:
                for phase in self.phases or (None,):
                    yield CellKey(tuple(zip(names, values)), target, phase)


def cell_coords(cell: Mapping[str, Any]) -> dict[str, Any]:
    """A results cell's coordinates, whichever shape it has (neutral `axes`, or the GPU triple)."""
    if "axes" in cell:
        return dict(cell["axes"])
    return {name: cell.get(name) for name in GPU_AXES}


def find_cell(record: Record, coords: Coords, phase: str | None) -> Mapping[str, Any] | None:
    wanted = dict(coords)
    return next((c for c in record.cells if c.get("phase") == phase and cell_coords(c) == wanted), None)


def describe_coords(coords: Coords) -> str:
    """`GLM-5.2 ctx=1024 batch=1` for the GPU axes, `python=3.12 os=linux` for any others."""
    named = dict(coords)
    if tuple(named) == GPU_AXES:
        return f"{named['model']} ctx={named['context']} batch={named['batch']}"
    return " ".join(f"{name}={value}" for name, value in coords) or "(one cell)"


def coords_json(coords: Coords) -> dict[str, Any]:
    """As the results file writes them: the GPU triple as fields, other axes under `axes` (and
    then no model/context/batch keys at all: a fork without models reads nothing of them)."""
    named = dict(coords)
    if tuple(named) == GPU_AXES:
        return named
    return {"axes": named}


def required(config: "Config", subject: GateSubject, proofs_passed: frozenset[str]) -> Required:
    """The cells the gate must pass now. Eligibility decides the models of a track's gate."""
    gate = subject.gate
    assert gate is not None
    matrix = gate.matrix
    phases = tuple(gate.phases or ())
    if not config.rules.uses_models:
        targets = list(matrix.targets or config.targets) if subject.kind == "proof" else config.gate_targets(subject.track)
        return Required(matrix.required_axes(()), tuple(targets), phases)
    if subject.kind == "proof":
        if matrix.models == "eligible":
            models = [m for m, model in config.models.items() if any(c.proof == subject.name for c in model.conditional)]
        else:
            models = list(matrix.models)
        targets = list(matrix.targets or config.targets)
        left_out: list[LeftOut] = []
    else:
        models = eligibility.required_models(config, subject.track, proofs_passed)
        targets = config.gate_targets(subject.track)
        left_out = []
        for cell in eligibility.evaluate(config, proofs_passed).track(subject.track).cells:
            if cell.model in models:
                continue
            if cell.verdict == eligibility.ELIGIBLE:
                left_out.append(LeftOut(cell.model, "not-in-matrix", ("not listed in the gate's matrix.models",)))
            else:
                left_out.append(LeftOut(cell.model, cell.verdict, tuple(cell.reasons)))
    return Required(matrix.required_axes(models), tuple(targets), phases, tuple(left_out))


# -- the verdict -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Check:
    check: str  # numerics | graph-replay | no-jit-after-warmup | metric:<name>
    outcome: str  # pass | fail | missing
    detail: str
    observed: Any = None
    limit: Any = None
    baseline: Any = None
    regression: float | None = None  # metrics: how much worse than the baseline (negative: better)
    regression_pct: float | None = None
    over_by: float | None = None  # how far past the limit (in the limit's unit); None when within


@dataclass(frozen=True)
class CellVerdict:
    coords: Coords
    target: str
    phase: str | None
    verdict: str  # one of CELL_VERDICTS
    reason: str
    evidence: str | None = None
    baseline: str | None = None
    checks: tuple[Check, ...] = ()
    backend: str | None = None  # the attention backend the evidence claims
    backend_used: Mapping[str, Any] | None = None  # layer kind -> backends the engine recorded running

    # The GPU axes by name (None where the matrix has no such axis).
    @property
    def model(self) -> Any:
        return dict(self.coords).get("model")

    @property
    def context(self) -> Any:
        return dict(self.coords).get("context")

    @property
    def batch(self) -> Any:
        return dict(self.coords).get("batch")

    @property
    def label(self) -> str:
        return " ".join(part for part in (describe_coords(self.coords), self.target, self.phase) if part)

    @property
    def backend_text(self) -> str:
        """"backend X (ran Kind=X)" for a cell that names one; "" otherwise."""
        if self.backend is None and self.backend_used is None:
            return ""
        ran = ", ".join(f"{kind}={'+'.join(names)}" for kind, names in (self.backend_used or {}).items())
        return f"backend {self.backend or '(none claimed)'} ({'ran ' + ran if ran else 'not recorded'})"


@dataclass(frozen=True)
class Ignored:
    id: str
    why: str


@dataclass(frozen=True)
class GateCheck:
    subject: GateSubject
    verdict: str  # pass | fail | cannot-evaluate
    required: Required | None
    cells: tuple[CellVerdict, ...] = ()
    ignored: tuple[Ignored, ...] = ()
    invalid: tuple[tuple[str, str], ...] = ()
    reason: str = ""

    @property
    def evidence_ids(self) -> tuple[str, ...]:
        """Every record the verdict rests on (candidates and baselines), sorted."""
        ids = {c.evidence for c in self.cells if c.evidence} | {c.baseline for c in self.cells if c.baseline}
        return tuple(sorted(ids))

    def counts(self) -> dict[str, int]:
        counts = {verdict: 0 for verdict in CELL_VERDICTS}
        for cell in self.cells:
            counts[cell.verdict] += 1
        return counts

    @property
    def exit_code(self) -> int:
        return {PASS: 0, FAIL: 1}.get(self.verdict, 7)


def check(config: "Config", subject: GateSubject, log: EvidenceLog, proofs_passed: frozenset[str]) -> GateCheck:
    """Judge the latest non-superseded evidence for `subject` against its gate, cell by cell."""
    invalid = tuple((i.path, i.why) for i in log.invalid)
    if subject.gate is None:
        return GateCheck(subject, CANNOT_EVALUATE, None, invalid=invalid, reason=subject.why_ungated or "no gate")
    req = required(config, subject, proofs_passed)
    candidates, baselines, ignored = _usable(subject, log, req.targets)
    cells = tuple(_judge_cell(subject, key, candidates, baselines) for key in req.cells())
    if not cells:
        verdict, reason = CANNOT_EVALUATE, "the gate requires no cells now (no model is eligible), so nothing can be proven"
    elif any(c.verdict == FAIL for c in cells):
        verdict, reason = FAIL, f"{sum(c.verdict == FAIL for c in cells)} of {len(cells)} cells failed"
    elif all(c.verdict == PASS for c in cells):
        verdict, reason = PASS, f"all {len(cells)} cells pass"
    else:
        verdict, reason = CANNOT_EVALUATE, f"{sum(c.verdict != PASS for c in cells)} of {len(cells)} cells cannot be evaluated (missing evidence or baseline)"
    return GateCheck(subject, verdict, req, cells, tuple(ignored), invalid, reason)


def _usable(subject: GateSubject, log: EvidenceLog, targets: Sequence[str]) -> tuple[list[Record], list[Record], list[Ignored]]:
    """The subject's records that count, newest last; and those that do not, with why."""
    candidates: list[Record] = []
    baselines: list[Record] = []
    ignored: list[Ignored] = []
    for record in log.for_subject(subject.kind, subject.name):
        why = _why_not_counted(subject, record, log)
        if why:
            ignored.append(Ignored(record.id, why))
        elif record.target in targets:
            (candidates if record.role == "candidate" else baselines).append(record)
    return candidates, baselines, ignored


def _why_not_counted(subject: GateSubject, record: Record, log: EvidenceLog) -> str | None:
    sup = log.superseded_by(record.id)
    if sup is not None:
        return f"superseded by {sup.id} ({sup.recorded_at}): {sup.reason}"
    if record.track != subject.track:
        return f"recorded for track {record.track}, not {subject.track}: evidence never counts for another track"
    if subject.kind == "patch" and record.subject.sha256 != subject.sha256:
        return f"made for another version of the patch (sha256 {str(record.subject.sha256)[:12]}, now {str(subject.sha256)[:12]})"
    names = {name for name, _ in record.patch_set}
    if subject.kind == "patch" and record.role == "candidate" and (subject.name, subject.sha256) not in record.patch_set:
        return "a candidate record whose patch set does not contain the patch"
    if subject.kind == "patch" and record.role == "baseline" and subject.name in names:
        return "a baseline record whose patch set contains the patch"
    return None


def _judge_cell(subject: GateSubject, key: CellKey,
                candidates: Sequence[Record], baselines: Sequence[Record]) -> CellVerdict:
    coords, target, phase = key.coords, key.target, key.phase
    gate = subject.gate
    assert gate is not None
    holding = [r for r in candidates if r.target == target and find_cell(r, coords, phase) is not None]
    if not holding:
        wanted = dict(coords)
        other_phase = any(r.target == target and any(cell_coords(c) == wanted for c in r.cells) for r in candidates)
        reason = f"no {phase or 'phase-less'} measurement for this cell" if other_phase else "no evidence for this cell"
        return CellVerdict(coords=coords, target=target, phase=phase, verdict=MISSING, reason=reason)
    record = holding[-1]
    cell = find_cell(record, coords, phase)
    assert cell is not None
    checks = list(_backend_checks(gate, cell)) + list(_absolute_checks(gate, cell))

    baseline_id, baseline_problem = None, None
    judged_metrics = [m for m in gate.metrics if m.allowed_regression_pct is not None or m.allowed_regression_abs is not None]
    if judged_metrics:
        base_record, baseline_problem = _baseline_for(subject, record, baselines, coords, phase)
        if base_record is not None:
            baseline_id = base_record.id
            base_cell = find_cell(base_record, coords, phase)
            assert base_cell is not None
            checks += [_metric_check(m, cell, base_cell) for m in judged_metrics]
    for metric in gate.metrics:
        if metric not in judged_metrics:
            checks.append(_measured_only(metric, cell))

    failed = [c for c in checks if c.outcome == FAIL]
    lacking = [c for c in checks if c.outcome == MISSING]
    if failed:
        verdict, reason = FAIL, "; ".join(c.detail for c in failed)
    elif lacking:
        verdict, reason = MISSING, "; ".join(c.detail for c in lacking)
    elif baseline_problem is not None:
        verdict, reason = baseline_problem
    else:
        verdict, reason = PASS, "every check passed"
    return CellVerdict(coords=coords, target=target, phase=phase, verdict=verdict, reason=reason, evidence=record.id, baseline=baseline_id, checks=tuple(checks),
                       backend=cell.get("backend"), backend_used=_attention_used(cell))


def _attention_used(cell: Mapping[str, Any]) -> dict[str, list[str]] | None:
    used = cell.get("backend_used")
    return None if not isinstance(used, Mapping) else {str(k): list(v) for k, v in dict(used.get("attention") or {}).items()}


def _backend_checks(gate: "Gate", cell: Mapping[str, Any]) -> Iterable[Check]:
    """A claimed backend the engine's own record does not show, and numerics that compared a
    backend with itself, are not evidence (the vLLM job refuses both; this catches other writers)."""
    claimed, used = cell.get("backend"), _attention_used(cell)
    if claimed is not None and used is None:
        yield Check("backend", MISSING, f"the cell claims {claimed}, but what the engine ran was not recorded: an unverified claim",
                    limit=claimed)
    if claimed is not None and used is not None:
        ran = {name for names in used.values() for name in names}
        if claimed in ran:
            yield Check("backend", PASS, f"the engine ran {claimed}", observed=sorted(ran), limit=claimed)
        else:
            yield Check("backend", MISSING, f"the cell claims {claimed}, but the engine recorded running {', '.join(sorted(ran))}",
                        observed=sorted(ran), limit=claimed)
    both = (cell.get("numerics") or {}).get("backends_used")
    if isinstance(both, Mapping) and both.get("candidate") == both.get("reference") and claimed != gate.reference_backend:
        yield Check("numerics", MISSING, f"both numerics runs ran the same backends ({both.get('candidate')}), but the gate's "
                                         f"reference is {gate.reference_backend}: a backend compared with itself", limit=gate.reference_backend)


def _absolute_checks(gate: "Gate", cell: Mapping[str, Any]) -> Iterable[Check]:
    """The checks that need no baseline."""
    numerics = cell.get("numerics") or {}
    if gate.reference_backend is not None:
        used = numerics.get("reference_backend")
        if used != gate.reference_backend:
            yield Check("numerics", MISSING, f"numerics were compared against {used}, but the gate names {gate.reference_backend} as the reference backend",
                        observed=used, limit=gate.reference_backend)
        elif gate.tolerance is not None:
            yield _tolerance_check(gate, numerics)
        else:
            yield Check("numerics", PASS, f"compared against {used} (no tolerance defined)", observed=used)
    elif gate.tolerance is not None:
        yield _tolerance_check(gate, numerics)
    if gate.graph_replay == "required":
        replays = cell.get("graph_replays", 0)
        if replays >= 1:
            yield Check("graph-replay", PASS, f"{replays} graph replays observed", observed=replays, limit=1)
        else:
            yield Check("graph-replay", FAIL, "graph replay not observed (0 replays; the gate requires at least 1)", observed=replays, limit=1, over_by=1)
        if "graphed_regions_eager" in cell:  # written by the probe's jobs: eager work where a replay was expected
            eager = cell.get("graphed_regions_eager")
            if not isinstance(eager, int) or isinstance(eager, bool):
                yield Check("graph-replay", MISSING, "eager launches in graphed regions were not measured", limit=0)
            elif eager > 0:
                yield Check("graph-replay", FAIL, f"{eager} eager step{'s' if eager != 1 else ''} or launch{'es' if eager != 1 else ''} "
                            "in graphed regions after warmup (the gate allows 0)", observed=eager, limit=0, over_by=eager)
    if gate.no_jit_after_warmup == "required":
        compiles = cell.get("jit_compiles_after_warmup")
        if compiles is None:
            yield Check("no-jit-after-warmup", MISSING, "JIT compiles after warmup were not reported", limit=0)
            return
        if compiles == 0:
            yield Check("no-jit-after-warmup", PASS, "no JIT compile after warmup", observed=0, limit=0)
        else:
            yield Check("no-jit-after-warmup", FAIL, f"{compiles} JIT compile{'s' if compiles != 1 else ''} after warmup (the gate allows 0)",
                        observed=compiles, limit=0, over_by=compiles)


def _tolerance_check(gate: "Gate", numerics: Mapping[str, Any]) -> Check:
    tol = gate.tolerance
    assert tol is not None
    if "max_abs_err" not in numerics or "max_rel_err" not in numerics:  # optional in a neutral cell
        return Check("numerics", MISSING, "numerics were not reported (the gate defines a tolerance)", limit={"abs": tol.abs, "rel": tol.rel})
    abs_err, rel_err = numerics["max_abs_err"], numerics["max_rel_err"]
    limit = {"abs": tol.abs, "rel": tol.rel}
    observed = {"max_abs_err": abs_err, "max_rel_err": rel_err}
    backend = numerics.get("reference_backend")
    if abs_err <= tol.abs + EPSILON or rel_err <= tol.rel + EPSILON:
        return Check("numerics", PASS, f"within tolerance against {backend} (max abs {_num(abs_err)}, max rel {_num(rel_err)})",
                     observed=observed, limit=limit)
    return Check(
        "numerics", FAIL,
        f"numerics outside tolerance against {backend}: max abs error {_num(abs_err)} > {_num(tol.abs)} "
        f"(over by {_num(abs_err - tol.abs)}) and max rel error {_num(rel_err)} > {_num(tol.rel)} (over by {_num(rel_err - tol.rel)})",
        observed=observed, limit=limit, over_by=_round(abs_err - tol.abs),
    )


def _metric_check(metric: "Metric", cell: Mapping[str, Any], base_cell: Mapping[str, Any]) -> Check:
    name = f"metric:{metric.name}"
    value = cell["metrics"].get(metric.name)
    base = base_cell["metrics"].get(metric.name)
    limit = {"pct": metric.allowed_regression_pct, "abs": metric.allowed_regression_abs}
    if value is None:
        return Check(name, MISSING, f"{metric.name} was not reported", limit=limit, baseline=base)
    if base is None:
        return Check(name, MISSING, f"{metric.name} was not reported by the baseline", observed=value, limit=limit)
    worse = value - base if metric.direction == "lower" else base - value
    pct = (worse / base * 100.0) if base else (0.0 if worse <= 0 else math.inf)
    better = "lower" if metric.direction == "lower" else "higher"
    change = f"{metric.name} {_num(value)} {metric.unit} vs baseline {_num(base)} {metric.unit} ({_describe_change(worse, pct)}; {better} is better)"
    problems, over = [], None
    if metric.allowed_regression_pct is not None and pct > metric.allowed_regression_pct + EPSILON:
        over = pct - metric.allowed_regression_pct
        problems.append(f"over the allowed regression of {_num(metric.allowed_regression_pct)}% by {_num(over)} points"
                        if math.isfinite(pct) else "a regression from a baseline of 0 cannot be within a percentage")
    if metric.allowed_regression_abs is not None and worse > metric.allowed_regression_abs + EPSILON:
        over_abs = worse - metric.allowed_regression_abs
        over = over if over is not None else over_abs
        problems.append(f"over the allowed regression of {_num(metric.allowed_regression_abs)} {metric.unit} by {_num(over_abs)} {metric.unit}")
    pct_out = _round(pct) if math.isfinite(pct) else None
    noise = _spread_note(metric, cell, base_cell)
    if noise is not None:
        change += f" ({noise[0]})"
    if problems and noise is not None and not noise[1]:
        return Check(name, MISSING, f"{change}: over the allowed regression on medians, but within the rounds' spread "
                                    "(a quarter or more of the candidate's rounds are within it): too noisy to judge; run it again",
                     observed=value, limit=limit, baseline=base, regression=_round(worse), regression_pct=pct_out)
    if problems:
        return Check(name, FAIL, f"{change}: {' and '.join(problems)}", observed=value, limit=limit, baseline=base,
                     regression=_round(worse), regression_pct=pct_out, over_by=_round(over) if over is not None and math.isfinite(over) else None)
    return Check(name, PASS, f"{change}: within the allowed regression", observed=value, limit=limit, baseline=base,
                 regression=_round(worse), regression_pct=pct_out)


def _spread_note(metric: "Metric", cell: Mapping[str, Any], base_cell: Mapping[str, Any]) -> tuple[str, bool] | None:
    """For medians of interleaved rounds (`spread` in both cells): the spread to show, and whether
    the regression holds for most of the candidate's rounds too (its better quartile worse than the
    baseline's median by more than the allowance), not only for its median. None when either cell
    has no spread."""
    mine, theirs = (cell.get("spread") or {}).get(metric.name), (base_cell.get("spread") or {}).get(metric.name)
    if not isinstance(mine, Mapping) or not isinstance(theirs, Mapping):
        return None
    try:
        c1, c3, b1, b3 = (float(mine["q1"]), float(mine["q3"]), float(theirs["q1"]), float(theirs["q3"]))
        n, typical = min(int(mine["n"]), int(theirs["n"])), float(base_cell["metrics"][metric.name])
    except (KeyError, TypeError, ValueError):
        return None
    gap = c1 - typical if metric.direction == "lower" else typical - c3
    beyond = False
    if metric.allowed_regression_pct is not None:
        beyond = beyond or (gap / typical * 100.0 > metric.allowed_regression_pct + EPSILON if typical else gap > 0)
    if metric.allowed_regression_abs is not None:
        beyond = beyond or gap > metric.allowed_regression_abs + EPSILON
    return f"medians of {n} interleaved rounds; IQR {_num(c1)}-{_num(c3)} vs {_num(b1)}-{_num(b3)}", beyond


def _measured_only(metric: "Metric", cell: Mapping[str, Any]) -> Check:
    value = cell["metrics"].get(metric.name)
    if value is None:
        return Check(f"metric:{metric.name}", MISSING, f"{metric.name} was not reported")
    return Check(f"metric:{metric.name}", PASS, f"{metric.name} {_num(value)} {metric.unit} (measured only: no allowed regression defined)", observed=value)


def _describe_change(worse: float, pct: float) -> str:
    if worse > 0:
        return f"{_num(pct)}% worse" if math.isfinite(pct) else "worse than a baseline of 0"
    if worse < 0:
        return f"{_num(-pct)}% better"
    return "unchanged"


def _baseline_for(subject: GateSubject, record: Record, baselines: Sequence[Record],
                  coords: Coords, phase: str | None) -> tuple[Record | None, tuple[str, str] | None]:
    """The latest baseline on the candidate's exact environment; never another one."""
    holding = [b for b in baselines if b.target == record.target and find_cell(b, coords, phase) is not None]
    if not holding:
        return None, (BASELINE_MISSING, f"no baseline measured on {record.target} for this cell (run `porttrack gate run {subject.name} --baseline --target {record.target}`)")
    matching = [b for b in holding if not baseline_differences(subject, record, b)]
    if matching:
        return matching[-1], None
    latest = holding[-1]
    diffs = baseline_differences(subject, record, latest)
    return None, (BASELINE_OTHER_ENV, f"the baseline {latest.id} was measured on another environment ({'; '.join(diffs)}); "
                                      "not used — measure the baseline again on this one")


def baseline_differences(subject: GateSubject, candidate: Record, baseline: Record) -> list[str]:
    """Why `baseline` is not a baseline for `candidate` (empty: it is)."""
    diffs = []
    for name in MACHINE_FIELDS:
        if candidate.environment.get(name) != baseline.environment.get(name):
            diffs.append(f"{name} {baseline.environment.get(name)} vs {candidate.environment.get(name)}")
    # A neutral results file (v2) fingerprints its machine under `machine`: every entry must match.
    ours, theirs = candidate.environment.get("machine") or {}, baseline.environment.get("machine") or {}
    for name in sorted(set(ours) | set(theirs)):
        if ours.get(name) != theirs.get(name):
            diffs.append(f"machine {name} {theirs.get(name)} vs {ours.get(name)}")
    if candidate.environment.get("fork_commit") != baseline.environment.get("fork_commit"):
        diffs.append(f"fork commit {str(baseline.environment.get('fork_commit'))[:12]} vs {str(candidate.environment.get('fork_commit'))[:12]}")
    if candidate.commits.get("upstream_base") != baseline.commits.get("upstream_base"):
        diffs.append(f"upstream base {str(baseline.commits.get('upstream_base'))[:12]} vs {str(candidate.commits.get('upstream_base'))[:12]}")
    expected = expected_baseline_patch_set(subject, candidate.patch_set)
    if baseline.patch_set != expected:
        diffs.append(f"patch set [{', '.join(n for n, _ in baseline.patch_set)}] vs expected [{', '.join(n for n, _ in expected)}]")
    return diffs


def expected_baseline_patch_set(subject: GateSubject, candidate_set: Sequence[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """The fork without the subject: the candidate's patch set less the patch and what needs it.
    A proof's baseline is the fork with no queued patch."""
    if subject.kind == "proof":
        return ()
    leave_out = {subject.name} | set(subject.dependents)
    return tuple((name, sha) for name, sha in candidate_set if name not in leave_out)


def _num(value: float) -> str:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return f"{value:.6g}"


def _round(value: float) -> float:
    return round(float(value), 6)


def judge(ws: Workspace, config: "Config", subject: GateSubject, log: EvidenceLog | None = None) -> GateCheck:
    """The one way a subject is judged: its gate on the workspace's current evidence (`log`, when
    the caller already holds it), with the proofs that evidence passes. A stored verdict is never
    trusted: every command that needs one (`gate run|ingest|check`, promote, demote) asks here."""
    log = evidence.load(ws) if log is None else log
    return check(config, subject, log, proofs_passed(ws, config, log))


def proofs_passed(ws: Workspace, config: "Config", log: EvidenceLog | None = None) -> frozenset[str]:
    """The proofs (e.g. `mla-low-rank-accepted`) whose gate is satisfied by current evidence."""
    log = evidence.load(ws) if log is None else log
    passed = set()
    for proof_id, proof in config.proofs.items():
        if proof.gate is None:
            continue
        if check(config, proof_subject(config, proof_id), log, frozenset()).verdict == PASS:
            passed.add(proof_id)
    return frozenset(passed)
