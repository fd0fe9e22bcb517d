"""Evidence: what gate jobs measured, as append-only records in `patches/evidence/`.

One JSON file per record, named `<id>.json`, written once and never edited. Two kinds:

- `results`: one gate job run on one target, for one subject (a queued patch, or a proof), in one
  role (`candidate`: the ref with the subject; `baseline`: the same job on the fork without it).
  It carries the exact commits (ref under test, upstream base), the environment fingerprint (GPU,
  arch, driver, CUDA/ROCm, torch, triton, fork commit, patch set) and the cells verbatim from the
  validated results file. Verdicts are *not* stored: `gate check` judges the raw measurements
  against the gate as tracks.yaml defines it now.
- `supersession`: a correction. It names the record it supersedes and why (and optionally the
  record that replaces it). A superseded record no longer counts anywhere but stays in history.

Invariants kept here:
- a record's id is `<recorded_at as YYYYMMDDTHHMMSSZ>-<first 12 hex of the sha256 of its canonical
  JSON without the id>`, so an edited record no longer matches its id and is refused on load
  (listed as invalid, never counted);
- records are created with O_EXCL semantics under the workspace lock: nothing is overwritten;
- `seq` counts records at the time of writing and breaks ties between records of the same second.

Record shape (schema `porttrack/evidence/v1`, keys sorted on disk):
  results:      schema id kind seq recorded_at recorded_by track subject{kind,name,sha256} role
                target commits{ref_under_test,upstream_base} environment{gpu,arch,driver,cuda,rocm,
                torch,triton,fork_commit,patch_set[{name,sha256}],extra?} fingerprint job{kind,
                exit_code,run_id,run_url,command,duration_s,reported} results_sha256 cells[...]
  supersession: schema id kind seq recorded_at recorded_by supersedes reason replaced_by
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

from porttrack.common.clock import utcnow
from porttrack.common.errors import InputError, NotFound, PreconditionError
from porttrack.workspace.files import Workspace, actor, checkpoint, dump_json, lock, read_json, write_temp

SCHEMA = "porttrack/evidence/v1"
MACHINE_FIELDS = ("gpu", "arch", "driver", "cuda", "rocm", "torch", "triton")  # the hardware/software part


@dataclass(frozen=True)
class Subject:
    kind: str  # "patch" | "proof"
    name: str  # patch name or proof id
    sha256: str | None = None  # the patch file's content hash when the evidence was made (patches only)


@dataclass(frozen=True)
class Record:
    """A `results` record. `cells` are the results file's cells, verbatim."""

    id: str
    seq: int
    recorded_at: str
    recorded_by: str
    track: str
    subject: Subject
    role: str
    target: str
    commits: Mapping[str, str]
    environment: Mapping[str, Any]
    fingerprint: str
    job: Mapping[str, Any]
    results_sha256: str
    cells: tuple[Mapping[str, Any], ...]

    @property
    def order(self) -> tuple[str, int, str]:
        return (self.recorded_at, self.seq, self.id)

    @property
    def patch_set(self) -> tuple[tuple[str, str], ...]:
        return tuple((p["name"], p["sha256"]) for p in self.environment.get("patch_set") or ())

    def cell(self, model: str, context: int, batch: int, phase: str) -> Mapping[str, Any] | None:
        for cell in self.cells:
            if (cell["model"], cell["context"], cell["batch"], cell["phase"]) == (model, context, batch, phase):
                return cell
        return None


@dataclass(frozen=True)
class Supersession:
    id: str
    seq: int
    recorded_at: str
    recorded_by: str
    supersedes: str
    reason: str
    replaced_by: str | None = None


@dataclass(frozen=True)
class Invalid:
    path: str
    why: str


@dataclass(frozen=True)
class EvidenceLog:
    """Every record in the workspace, read once."""

    records: tuple[Record, ...] = ()
    supersessions: tuple[Supersession, ...] = ()
    invalid: tuple[Invalid, ...] = ()
    _superseded: dict[str, Supersession] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def build(cls, records: Iterable[Record], supersessions: Iterable[Supersession], invalid: Iterable[Invalid]) -> "EvidenceLog":
        records = tuple(sorted(records, key=lambda r: r.order))
        supersessions = tuple(sorted(supersessions, key=lambda s: (s.recorded_at, s.seq, s.id)))
        superseded: dict[str, Supersession] = {}
        for entry in supersessions:
            superseded.setdefault(entry.supersedes, entry)  # the first correction is the one that counts
        return cls(records, supersessions, tuple(invalid), superseded)

    def get(self, record_id: str) -> Record:
        for record in self.records:
            if record.id == record_id:
                return record
        matches = [r for r in self.records if r.id.startswith(record_id)] if len(record_id) >= 6 else []
        if len(matches) == 1:
            return matches[0]
        raise NotFound(f"no evidence record {record_id!r} (see `porttrack evidence list`)")

    def superseded_by(self, record_id: str) -> Supersession | None:
        return self._superseded.get(record_id)

    def current(self) -> tuple[Record, ...]:
        """Records that still count: not superseded."""
        return tuple(r for r in self.records if r.id not in self._superseded)

    def for_subject(self, kind: str, name: str) -> tuple[Record, ...]:
        return tuple(r for r in self.records if r.subject.kind == kind and r.subject.name == name)


# -- reading -------------------------------------------------------------------------------------

def load(ws: Workspace) -> EvidenceLog:
    records: list[Record] = []
    supersessions: list[Supersession] = []
    invalid: list[Invalid] = []
    folder = ws.evidence_dir
    if not folder.is_dir():
        return EvidenceLog()
    for path in sorted(folder.glob("*.json")):
        try:
            entry = _read(path)
        except _Bad as exc:
            invalid.append(Invalid(str(path.relative_to(ws.root)), str(exc)))
            continue
        if isinstance(entry, Record):
            records.append(entry)
        else:
            supersessions.append(entry)
    known = {r.id for r in records}
    kept = []
    for entry in supersessions:
        if entry.supersedes not in known:
            invalid.append(Invalid(f"{entry.id}.json", f"supersedes {entry.supersedes}, which is not a results record here"))
        else:
            kept.append(entry)
    return EvidenceLog.build(records, kept, invalid)


class _Bad(Exception):
    pass


def _read(path: Path) -> Record | Supersession:
    try:
        data = read_json(path, parse_constant=_no_constant)
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise _Bad(f"unreadable ({type(exc).__name__})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise _Bad(f"not a {SCHEMA} record")
    record_id = data.get("id")
    if path.stem != record_id:
        raise _Bad(f"file name does not match its id {record_id!r}")
    if record_id != make_id(data):
        raise _Bad("content does not match its id (edited by hand? evidence is append-only: supersede it instead)")
    return _from_data(data)


def _from_data(data: Mapping[str, Any]) -> Record | Supersession:
    record_id = str(data["id"])
    try:
        if data["kind"] == "supersession":
            return Supersession(
                id=record_id, seq=int(data["seq"]), recorded_at=str(data["recorded_at"]),
                recorded_by=str(data.get("recorded_by") or ""), supersedes=str(data["supersedes"]),
                reason=str(data["reason"]), replaced_by=data.get("replaced_by"),
            )
        if data["kind"] != "results":
            raise _Bad(f"unknown kind {data['kind']!r}")
        subject = data["subject"]
        return Record(
            id=record_id, seq=int(data["seq"]), recorded_at=str(data["recorded_at"]),
            recorded_by=str(data.get("recorded_by") or ""), track=str(data["track"]),
            subject=Subject(str(subject["kind"]), str(subject["name"]), subject.get("sha256")),
            role=str(data["role"]), target=str(data["target"]), commits=dict(data["commits"]),
            environment=dict(data["environment"]), fingerprint=str(data["fingerprint"]),
            job=dict(data.get("job") or {}), results_sha256=str(data["results_sha256"]),
            cells=tuple(dict(c) for c in data["cells"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise _Bad(f"malformed record ({type(exc).__name__}: {exc})") from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def make_id(data: Mapping[str, Any]) -> str:
    body = {k: v for k, v in data.items() if k != "id"}
    digest = hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()).hexdigest()
    stamp = str(data.get("recorded_at", "")).replace("-", "").replace(":", "")
    return f"{stamp}-{digest[:12]}"


def fingerprint(environment: Mapping[str, Any]) -> str:
    """The digest of the machine part of an environment (what a baseline must share exactly)."""
    machine = {k: environment.get(k) for k in MACHINE_FIELDS}
    return hashlib.sha256(json.dumps(machine, sort_keys=True).encode()).hexdigest()[:16]


# -- writing -------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Expected:
    """What porttrack asked the job to test; a results file that says otherwise is refused."""

    track: str
    subject: Subject
    role: str
    target: str
    ref_under_test: str
    upstream_base: str
    fork_commit: str
    patch_set: tuple[tuple[str, str], ...]


def record_results(
    ws: Workspace,
    document: Mapping[str, Any],
    expected: Expected,
    *,
    job: Mapping[str, Any],
    results_sha256: str,
    now: str | None = None,
    dry_run: bool = False,
) -> Record:
    """Turn a validated results document into a record, after checking it is what was asked for."""
    mismatches = _mismatches(document, expected)
    if mismatches:
        raise InputError("the results do not describe the run porttrack asked for, so nothing was recorded: " + "; ".join(mismatches))
    environment = dict(document["environment"])
    data: dict[str, Any] = {
        "schema": SCHEMA,
        "kind": "results",
        "recorded_by": actor(),
        "track": expected.track,
        "subject": {"kind": expected.subject.kind, "name": expected.subject.name, "sha256": expected.subject.sha256},
        "role": expected.role,
        "target": expected.target,
        "commits": dict(document["commits"]),
        "environment": environment,
        "fingerprint": fingerprint(environment),
        "job": {**dict(job), "reported": dict(document.get("job") or {})},
        "results_sha256": results_sha256,
        "cells": [dict(c) for c in document["cells"]],
    }
    entry = _append(ws, data, now, dry_run)
    assert isinstance(entry, Record)
    return entry


def supersede(ws: Workspace, record_id: str, reason: str, *, replaced_by: str | None = None,
              now: str | None = None, dry_run: bool = False) -> Supersession:
    reason = " ".join((reason or "").split())
    if not reason:
        raise PreconditionError("a correction needs a reason (--reason)")
    with lock(ws, "evidence supersede") if not dry_run else contextlib.nullcontext():
        log = load(ws)
        target = log.get(record_id)
        earlier = log.superseded_by(target.id)
        if earlier is not None:
            raise PreconditionError(f"evidence {target.id} was already superseded by {earlier.id} on {earlier.recorded_at}: {earlier.reason}")
        if replaced_by is not None:
            replacement = log.get(replaced_by)
            if replacement.id == target.id:
                raise PreconditionError("a record cannot replace itself")
            replaced_by = replacement.id
        data = {"schema": SCHEMA, "kind": "supersession", "recorded_by": actor(), "supersedes": target.id,
                "reason": reason, "replaced_by": replaced_by}
        entry = _append(ws, data, now, dry_run, locked=True)
    assert isinstance(entry, Supersession)
    return entry


def _append(ws: Workspace, data: dict[str, Any], now: str | None, dry_run: bool, locked: bool = False) -> Record | Supersession:
    with (contextlib.nullcontext() if (locked or dry_run) else lock(ws, "record evidence")):
        data = {**data, "recorded_at": now or utcnow(), "seq": _next_seq(ws)}
        data["id"] = make_id(data)
        path = ws.evidence_dir / f"{data['id']}.json"
        if not dry_run:
            _create(path, dump_json(data).encode("utf-8"))
        return _from_data(json.loads(dump_json(data)))


def _create(path: Path, content: bytes) -> None:
    """Write a new file, refusing to replace one: write a temp file, then hard-link it into place.

    The temp file is `workspace.write_temp`'s: in the git-ignored `.porttrack/tmp/`, after refusing
    a symlinked folder that leads out of the workspace. The caller holds the workspace lock, so a
    `.<id>.json.tmp` beside the records is debris an older version left when killed: removed.
    """
    tmp = Path(write_temp(path, content))
    for debris in path.parent.glob(".*.json.tmp"):
        debris.unlink(missing_ok=True)
    checkpoint("evidence:tmp")
    try:
        os.link(tmp, path)  # fails if the record exists: evidence is never overwritten
        checkpoint("evidence:linked")
    except FileExistsError:
        raise PreconditionError(f"evidence record {path.name} already exists; nothing was overwritten") from None
    finally:
        tmp.unlink(missing_ok=True)


def _next_seq(ws: Workspace) -> int:
    highest = 0
    if ws.evidence_dir.is_dir():
        for path in ws.evidence_dir.glob("*.json"):
            try:
                highest = max(highest, int(read_json(path).get("seq") or 0))
            except (OSError, ValueError, TypeError, AttributeError):
                continue
    return highest + 1


def _mismatches(document: Mapping[str, Any], expected: Expected) -> list[str]:
    found = {
        "track": document["track"],
        "subject": document["subject"],
        "role": document["role"],
        "target": document["target"],
        "ref_under_test": document["commits"]["ref_under_test"],
        "upstream_base": document["commits"]["upstream_base"],
        "fork_commit": document["environment"]["fork_commit"],
    }
    wanted = {
        "track": expected.track,
        "subject": expected.subject.name,
        "role": expected.role,
        "target": expected.target,
        "ref_under_test": expected.ref_under_test,
        "upstream_base": expected.upstream_base,
        "fork_commit": expected.fork_commit,
    }
    problems = []
    for key, value in wanted.items():
        if found[key] != value:
            if key == "track":
                problems.append(f"they are for track {found[key]!r}, but {expected.subject.name} is proven by track {value!r}'s gate (evidence never crosses tracks)")
            else:
                problems.append(f"{key} is {found[key]!r}, expected {value!r}")
    patch_set = tuple((p["name"], p["sha256"]) for p in document["environment"]["patch_set"])
    if patch_set != expected.patch_set:
        problems.append(f"patch_set is {_names(patch_set)}, expected {_names(expected.patch_set)}")
    return problems


def _names(patch_set: Iterable[tuple[str, str]]) -> str:
    return "[" + ", ".join(f"{name}@{sha[:8]}" for name, sha in patch_set) + "]"


def results_digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def record_to_json(record: Record, log: EvidenceLog) -> dict[str, Any]:
    sup = log.superseded_by(record.id)
    return {
        "id": record.id,
        "recorded_at": record.recorded_at,
        "recorded_by": record.recorded_by,
        "track": record.track,
        "subject": {"kind": record.subject.kind, "name": record.subject.name, "sha256": record.subject.sha256},
        "role": record.role,
        "target": record.target,
        "ref_under_test": record.commits.get("ref_under_test"),
        "fork_commit": record.environment.get("fork_commit"),
        "fingerprint": record.fingerprint,
        "cells": len(record.cells),
        "status": "superseded" if sup else "current",
        "superseded": None if sup is None else {"by": sup.id, "at": sup.recorded_at, "reason": sup.reason, "replaced_by": sup.replaced_by},
    }


def list_to_json(log: EvidenceLog, records: Iterable[Record]) -> dict[str, Any]:
    """`porttrack evidence list --json` (schema porttrack/evidence-list/v1)."""
    return {
        "schema": "porttrack/evidence-list/v1",
        "records": [record_to_json(r, log) for r in records],
        "invalid": [{"path": i.path, "why": i.why} for i in log.invalid],
    }
