"""Evidence records and results files, without git: a workspace whose queue holds one patch, and
results documents written with `porttrack.runner.results` (the helper jobs use)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from porttrack.common.errors import InputError, NotFound, PreconditionError
from porttrack.prove import evidence, gaterun, gates
from porttrack.queue import manifest as queue_mod
from porttrack.queue.manifest import Patch, Revision, patch_file_name
from porttrack.runner import results
from porttrack.tracks.file import load_config
from porttrack.workspace.files import Workspace, dump_json
from testing.scenario_job import build
from testing.workspace import make_workspace

SHA_REF, SHA_BASE = "c" * 40, "d" * 40


def gate() -> dict:
    return {"job": {"command": "python3 -m testing.scenario_job --results {results}"},
            "matrix": {"contexts": [1024], "batches": [1]}, "reference_backend": "TRITON_MLA",
            "tolerance": {"abs": 0.01, "rel": 0.05},
            "metrics": [{"name": "ttft_ms", "unit": "ms", "direction": "lower", "allowed_regression_pct": 5.0}],
            "graph_replay": "required", "no_jit_after_warmup": "required"}


MODELS = {"GLM-5.2": {"drafters": ["native-mtp"], "attention": "sparse-mla", "quantization": "fp8",
                      "backends": {"sm_121a": "FLASHMLA_SPARSE", "gfx1151": "ROCM_AITER_MLA_SPARSE"}},
          "Mistral-Small-4": {"attention": "mla", "quantization": "fp8",
                              "backends": {"sm_121a": "TRITON_MLA", "gfx1151": "ROCM_AITER_MLA"},
                              "conditional": [{"proof": "mla-low-rank-accepted", "tracks": ["mla"], "reason": "low-rank attention"}]}}
PROOFS = {"mla-low-rank-accepted": {"description": "accepts low-rank attention",
                                    "gate": {**gate(), "metrics": [], "graph_replay": "not-applicable",
                                             "no_jit_after_warmup": "not-applicable", "promote": False}}}


class Box:
    def __init__(self, root: Path):
        tracks = {"mla": {"title": "mla", "prs": [101], "targets": ["sm_121a", "gfx1151"],
                          "requires": {"attention": ["sparse-mla", "mla"]}, "gate": gate()}}
        self.handle = make_workspace(root / "ws", tracks, models=MODELS, proofs=PROOFS, token=None)
        self.ws = Workspace(self.handle.root)
        data = b"From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\nSubject: [PATCH] x\n\n---\n"
        self.patch = Patch(name="0001-pr101-x", file=patch_file_name("0001-pr101-x", data), sha256=hashlib.sha256(data).hexdigest(),
                           track="mla", pr=101, upstream="vllm-project/vllm", title="x", revision=Revision(head="a" * 40, base="b" * 40),
                           hunks_taken=(), hunks_left_out=(), depends_on=(), state="queued", gate="mla")
        queue_mod.save(self.ws, queue_mod.Queue().add(self.patch), new_files={self.patch.file: data})
        self.config = load_config(self.ws.tracks_file)
        self.subject = gates.patch_subject(self.config, queue_mod.load(self.ws), self.patch)

    def built(self, role: str = "candidate") -> gaterun.BuiltRef:
        patch_set = ((self.patch.name, self.patch.sha256),) if role == "candidate" else ()
        return gaterun.BuiltRef(SHA_REF, SHA_BASE, SHA_BASE, patch_set, "test")

    def document(self, role: str = "candidate", target: str = "sm_121a", subject=None, **scenario) -> dict:
        env = gaterun.job_environment(subject or self.subject, role, target, self.built(role), "unused")
        base = {"cells": {"models": ["GLM-5.2"], "contexts": [1024], "batches": [1]}, "reference_backend": "TRITON_MLA",
                "metrics": {"candidate": {"ttft_ms": 100.0}}, "numerics": {"max_abs_err": 0.0, "max_rel_err": 0.0},
                "graph_replays": 3}
        return build({**base, **scenario}, env).document

    def ingest(self, role: str = "candidate", target: str = "sm_121a", doc: dict | None = None, now: str | None = None):
        doc = doc or self.document(role, target)
        return gaterun.ingest(self.ws, self.config, self.subject, role, target, self.built(role),
                            json.dumps(doc).encode(), "test", {"kind": "command"}, now=now)

    def files(self) -> list[Path]:
        return sorted(self.ws.evidence_dir.glob("*.json")) if self.ws.evidence_dir.is_dir() else []


@pytest.fixture
def box(tmp_path, monkeypatch) -> Box:
    monkeypatch.setenv("PORTTRACK_ACTOR", "tester")
    return Box(tmp_path)


# -- results files -----------------------------------------------------------------------------

def valid(box: Box) -> dict:
    return box.document()


def test_a_valid_results_file_parses(box):
    doc = valid(box)
    assert results.parse(json.dumps(doc).encode(), "r") == doc
    assert results.validation_problems(doc) == []


@pytest.mark.parametrize("text, message", [
    ('{"a": NaN}', "contains NaN"),
    ('{"a": Infinity}', "contains Infinity"),
    ('{"a": -Infinity}', "contains -Infinity"),
    ('{"a": 1, "a": 2}', "repeats the key 'a'"),
    ("[1, 2", "not JSON"),
    ("", "not JSON"),
])
def test_results_that_are_not_strict_json_are_refused(text, message):
    with pytest.raises(InputError, match=message):
        results.parse(text.encode(), "r")


def test_results_that_are_not_utf8_or_too_large_are_refused():
    with pytest.raises(InputError, match="not UTF-8"):
        results.parse(b'{"a": "\xff"}', "r")
    with pytest.raises(InputError, match="larger than"):
        results.parse(b" " * (results.MAX_BYTES + 1), "r")


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d.pop("cells"), "$: 'cells' is missing"),
    (lambda d: d["environment"].pop("triton"), "$.environment: 'triton' is missing"),
    (lambda d: d["commits"].update(ref_under_test="main"), "$.commits.ref_under_test: 'main' does not match"),
    (lambda d: d["cells"][0].update(graph_replays=True), "$.cells[0].graph_replays: expected an integer, got a boolean"),
    (lambda d: d["cells"][0].update(context=1024.5), "$.cells[0].context: expected an integer, got a number"),
    (lambda d: d["cells"][0]["metrics"].update(ttft_ms=-0.1), "$.cells[0].metrics.ttft_ms: -0.1 is negative"),
    (lambda d: d["cells"][0].update(duration_s=-2), "$.cells[0].duration_s: -2 is negative"),
    (lambda d: d["cells"][0]["numerics"].update(max_abs_err="small"), "$.cells[0].numerics.max_abs_err: expected a number, got a string"),
    (lambda d: d["cells"][0].update(phase="hot"), "$.cells[0].phase: 'hot' is not one of ['cold', 'warm']"),
    (lambda d: d.update(surprise=1), "'surprise' is not part of the format"),
    (lambda d: d.update(cells=[]), "$.cells: [] should be non-empty"),
    (lambda d: d["cells"].append(dict(d["cells"][0])), "duplicate cell GLM-5.2 ctx=1024 batch=1 cold"),
    (lambda d: d.update(job={"duration_s": -5}), "$.job.duration_s: -5 is negative"),
])
def test_malformed_results_name_the_problem(box, mutate, message):
    doc = valid(box)
    mutate(doc)
    with pytest.raises(InputError) as err:
        results.parse(json.dumps(doc).encode(), "gfx1151 results")
    assert message in str(err.value)
    assert str(err.value).startswith("gfx1151 results: ")


def test_the_helper_refuses_to_write_what_porttrack_would_refuse(box, tmp_path):
    env = gaterun.job_environment(box.subject, "candidate", "sm_121a", box.built(), str(tmp_path / "r.json"))
    writer = results.Results.from_env(env)
    writer.environment(gpu="NVIDIA GB10", arch="sm_121a", driver="580", cuda="13.0", rocm=None, torch="2.9", triton="3.5")
    writer.add_cell(model="GLM-5.2", context=1024, batch=1, phase="cold", metrics={"ttft_ms": float("nan")},
                    numerics={"reference_backend": "X", "max_abs_err": 0, "max_rel_err": 0}, graph_replays=1, jit_compiles_after_warmup=0)
    with pytest.raises(InputError, match="NaN or infinite"):
        writer.write()
    writer.document["cells"][0]["metrics"]["ttft_ms"] = -1.0
    with pytest.raises(InputError, match="is negative"):
        writer.write()
    writer.document["cells"][0]["metrics"]["ttft_ms"] = 1.0
    path = writer.write()
    assert path == tmp_path / "r.json" and results.parse(path.read_bytes(), "r")["cells"][0]["metrics"] == {"ttft_ms": 1.0}
    with pytest.raises(InputError, match="PORTTRACK_TRACK"):
        results.Results.from_env({})


def test_schema_file_is_valid_json_schema():
    import jsonschema

    jsonschema.Draft202012Validator.check_schema(results.schema())


# -- records -----------------------------------------------------------------------------------

def test_a_record_is_named_by_its_content_and_tied_to_commits_and_environment(box):
    record = box.ingest(now="2026-08-20T10:00:00Z")
    [path] = box.files()
    data = json.loads(path.read_text())
    assert path.stem == record.id == data["id"] == evidence.make_id(data)
    assert record.id.startswith("20260820T100000Z-")
    assert data["commits"] == {"ref_under_test": SHA_REF, "upstream_base": SHA_BASE}
    assert data["environment"]["fork_commit"] == SHA_BASE
    assert data["environment"]["patch_set"] == [{"name": box.patch.name, "sha256": box.patch.sha256}]
    assert data["subject"] == {"kind": "patch", "name": box.patch.name, "sha256": box.patch.sha256}
    assert data["fingerprint"] == evidence.fingerprint(data["environment"])
    assert data["recorded_by"] == "tester" and data["seq"] == 1
    assert data["results_sha256"] == hashlib.sha256(json.dumps(box.document()).encode()).hexdigest()


def test_fingerprint_is_the_machine_only():
    env = {"gpu": "g", "arch": "a", "driver": "d", "cuda": "c", "rocm": None, "torch": "t", "triton": "tr",
           "fork_commit": "x" * 40, "patch_set": [], "extra": {"vllm": "1"}}
    same = {**env, "fork_commit": "y" * 40, "extra": {}}
    assert evidence.fingerprint(env) == evidence.fingerprint(same)
    assert evidence.fingerprint(env) != evidence.fingerprint({**env, "driver": "e"})


def test_an_edited_record_no_longer_counts(box):
    record = box.ingest()
    path = box.ws.evidence_dir / f"{record.id}.json"
    data = json.loads(path.read_text())
    data["cells"][0]["metrics"]["ttft_ms"] = 1.0  # someone "corrects" a number by hand
    path.write_text(dump_json(data))
    log = evidence.load(box.ws)
    assert log.records == ()
    [bad] = log.invalid
    assert "edited by hand" in bad.why and "supersede it instead" in bad.why
    check = gates.check(box.config, box.subject, log, frozenset())
    assert check.invalid and {c.verdict for c in check.cells} == {"missing"}


def test_a_renamed_or_unreadable_record_is_invalid(box):
    record = box.ingest()
    path = box.ws.evidence_dir / f"{record.id}.json"
    path.rename(path.with_name("renamed.json"))
    (box.ws.evidence_dir / "junk.json").write_text("{not json")
    whys = sorted(i.why for i in evidence.load(box.ws).invalid)
    assert whys == ["file name does not match its id " + repr(record.id), "unreadable (JSONDecodeError)"]


def test_records_are_never_overwritten(box):
    first = box.ingest(now="2026-08-20T10:00:00Z")
    with pytest.raises(PreconditionError, match="already exists"):
        evidence._create(box.ws.evidence_dir / f"{first.id}.json", b"{}")
    second = box.ingest(now="2026-08-20T10:00:00Z")  # same second, same results: a new record all the same
    assert second.id != first.id and second.seq == 2
    assert len(box.files()) == 2


def test_supersede(box):
    old = box.ingest(now="2026-08-20T10:00:00Z")
    new = box.ingest(now="2026-08-20T11:00:00Z")
    with pytest.raises(PreconditionError, match="needs a reason"):
        evidence.supersede(box.ws, old.id, "  ")
    with pytest.raises(NotFound):
        evidence.supersede(box.ws, "20990101T000000Z-000000000000", "x")
    entry = evidence.supersede(box.ws, old.id[:20], "measured with the wrong driver", replaced_by=new.id, now="2026-08-21T00:00:00Z")
    assert entry.supersedes == old.id and entry.replaced_by == new.id
    log = evidence.load(box.ws)
    assert log.superseded_by(old.id) == entry and [r.id for r in log.current()] == [new.id]
    assert len(log.records) == 2  # history kept
    with pytest.raises(PreconditionError, match="already superseded"):
        evidence.supersede(box.ws, old.id, "again")
    dry = evidence.supersede(box.ws, new.id, "dry", dry_run=True)
    assert dry.supersedes == new.id and evidence.load(box.ws).superseded_by(new.id) is None


def test_a_supersession_of_an_unknown_record_is_invalid(box):
    record = box.ingest()
    evidence.supersede(box.ws, record.id, "x")
    (box.ws.evidence_dir / f"{record.id}.json").unlink()  # the superseded record was deleted by hand
    log = evidence.load(box.ws)
    assert log.supersessions == () and "which is not a results record here" in log.invalid[0].why


def test_evidence_list_json(box):
    record = box.ingest(now="2026-08-20T10:00:00Z")
    evidence.supersede(box.ws, record.id, "thermal throttling")
    box.ingest(role="baseline", doc=box.document("baseline"))
    out = box.handle.run_in_process("evidence", "list", "--json", env=box.handle.env())
    data = json.loads(out.stdout)
    assert data["schema"] == "porttrack/evidence-list/v1" and data["invalid"] == []
    first, second = data["records"]
    assert first["status"] == "superseded" and first["superseded"]["reason"] == "thermal throttling"
    assert second["status"] == "current" and second["role"] == "baseline"
    assert set(first) == {"id", "recorded_at", "recorded_by", "track", "subject", "role", "target", "ref_under_test",
                          "fork_commit", "fingerprint", "cells", "status", "superseded"}
    current = json.loads(box.handle.run_in_process("evidence", "list", box.patch.name, "--current", "--json", env=box.handle.env()).stdout)
    assert [r["id"] for r in current["records"]] == [second["id"]]


def test_proofs_passed(box):
    assert gates.proofs_passed(box.ws, box.config) == frozenset()
    proof = gates.proof_subject(box.config, "mla-low-rank-accepted")
    built = gaterun.BuiltRef(SHA_REF, SHA_BASE, SHA_BASE, ((box.patch.name, box.patch.sha256),), "test")
    for target in ("sm_121a", "gfx1151"):
        env = gaterun.job_environment(proof, "candidate", target, built, "unused")
        doc = build({"cells": {"models": ["Mistral-Small-4"], "contexts": [1024], "batches": [1]},
                     "reference_backend": "TRITON_MLA", "numerics": {"max_abs_err": 0.0, "max_rel_err": 0.0}}, env).document
        gaterun.ingest(box.ws, box.config, proof, "candidate", target, built, json.dumps(doc).encode(), "proof", {})
        passed = gates.proofs_passed(box.ws, box.config)
        assert passed == (frozenset({"mla-low-rank-accepted"}) if target == "gfx1151" else frozenset())
    # with the proof passed, the mla gate needs Mistral-Small-4 too
    req = gates.required(box.config, box.subject, gates.proofs_passed(box.ws, box.config))
    assert req.models == ("GLM-5.2", "Mistral-Small-4")


def test_a_patch_record_never_counts_for_a_proof(box):
    box.ingest(target="sm_121a")
    proof = gates.proof_subject(box.config, "mla-low-rank-accepted")
    check = gates.check(box.config, proof, evidence.load(box.ws), frozenset())
    assert check.verdict == gates.CANNOT_EVALUATE and check.evidence_ids == ()
