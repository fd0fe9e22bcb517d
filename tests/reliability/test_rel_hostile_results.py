"""Hostile results files through `porttrack gate run` ingest: NaN, infinities, numbers that
overflow a float or have thousands of digits, negative times and counts, missing fields, wrong
types, unknown fields, duplicate keys and cells, nesting deep enough to exhaust a recursive
parser, files over the size limit, empty files, invalid UTF-8, a BOM, lone surrogates, documents
that are not objects, and results that describe another run than the one asked for.

The gate job is a small script that builds the valid document porttrack's own example job would
write (identity from the PORTTRACK_* environment) and then spoils it as the case says, so every
case gets past the checks before the one it targets. Each ends in a refusal (exit 2, one line,
"nothing recorded", no evidence file, the patch's state unchanged) or, for an odd but valid file,
in a normal record.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest
import rel_harness as H
from rel_harness import SCENARIO, SUBSETS, Rig, check_consistent, half, outside

pytestmark = pytest.mark.reliability("hostile-results")

JOB = r'''
import json, os, sys
from testing.scenario_job import build
case = json.load(open("hostile-case.json"))
scenario = json.load(open("scenario.json"))
doc = build(scenario, dict(os.environ)).document
SENTINEL = 424242.125
for path, value in case.get("set", []):
    *parents, last = path
    node = doc
    for key in parents:
        node = node[key]
    if value == "<delete>":
        del node[last]
    else:
        node[last] = value
if case.get("dup_cell"):
    doc["cells"].append(dict(doc["cells"][0]))
if case.get("cells") is not None:
    doc["cells"] = [dict(doc["cells"][0], context=1 + i) for i in range(case["cells"])]
text = json.dumps(doc, indent=None if case.get("compact") else 2)
for old, new in case.get("replace", []):
    assert old in text, old
    text = text.replace(old, new, 1)
data = text.encode("utf-8", "surrogatepass")
if case.get("raw") is not None:
    data = case["raw"].encode("latin-1")
data = case.get("prefix", "").encode("latin-1") + data
with open(sys.argv[1], "wb") as out:
    out.write(data)
'''

S = "424242.125"  # a metric value the job writes, for text substitutions
METRIC = ["cells", 0, "metrics", "ttft_ms"]


@dataclass(frozen=True)
class Case:
    id: str
    spec: dict
    code: int = 2
    says: str = ""
    fast: bool = False


CASES = [
    Case("nan", {"set": [(METRIC, 424242.125)], "replace": [(S, "NaN")]}, says="NaN", fast=True),
    Case("infinity", {"set": [(METRIC, 424242.125)], "replace": [(S, "Infinity")]}, says="Infinity"),
    Case("minus-infinity", {"set": [(METRIC, 424242.125)], "replace": [(S, "-Infinity")]}, says="Infinity"),
    Case("float-overflow-1e400", {"set": [(METRIC, 424242.125)], "replace": [(S, "1e400")]}, fast=True),
    Case("five-thousand-digit-integer", {"set": [(["cells", 0, "graph_replays"], 7)],
                                         "replace": [('"graph_replays": 7', '"graph_replays": 1' + "0" * 5000)]}),
    Case("negative-time", {"set": [(METRIC, -3.5)]}, says="negative", fast=True),
    Case("negative-duration", {"set": [(["cells", 0, "duration_s"], -1)]}, says="negative"),
    Case("negative-graph-replays", {"set": [(["cells", 0, "graph_replays"], -2)]}),
    Case("negative-error", {"set": [(["cells", 0, "numerics", "max_abs_err"], -0.5)]}),
    Case("missing-cells", {"set": [(["cells"], "<delete>")]}, says="missing"),
    Case("missing-commits", {"set": [(["commits"], "<delete>")]}, says="missing"),
    Case("missing-environment-arch", {"set": [(["environment", "arch"], "<delete>")]}, says="missing"),
    Case("missing-numerics", {"set": [(["cells", 0, "numerics"], "<delete>")]}, says="missing", fast=True),
    Case("missing-metrics", {"set": [(["cells", 0, "metrics"], "<delete>")]}, says="missing"),
    Case("graph-replays-as-string", {"set": [(["cells", 0, "graph_replays"], "many")]}, says="expected an integer"),
    Case("context-as-string", {"set": [(["cells", 0, "context"], "1024")]}),
    Case("batch-as-boolean", {"set": [(["cells", 0, "batch"], True)]}),
    Case("metric-as-string", {"set": [(METRIC, "fast")]}, says="expected a number"),
    Case("metric-as-null", {"set": [(METRIC, None)]}),
    Case("cells-as-object", {"set": [(["cells"], {"a": 1})]}),
    Case("metrics-as-list", {"set": [(["cells", 0, "metrics"], [1, 2])]}),
    Case("environment-null", {"set": [(["environment"], None)]}),
    Case("unknown-top-level-field", {"set": [(["verdict"], "pass")]}),
    Case("duplicate-key", {"set": [(METRIC, 424242.125)], "replace": [(f'"ttft_ms": {S}', f'"ttft_ms": {S}, "ttft_ms": 1.0')]}, says="repeats the key"),
    Case("duplicate-cell", {"dup_cell": True}, says="duplicate cell"),
    Case("deeply-nested", {"raw": "[" * 100_000 + "]" * 100_000}, fast=True),
    Case("over-the-size-limit", {"raw": " " * (17 << 20) + "{}"}, says="larger than"),
    Case("empty-file", {"raw": ""}, says="not JSON"),
    Case("invalid-utf8", {"prefix": "\xff"}, says="not UTF-8"),
    Case("utf8-bom", {"prefix": "\xef\xbb\xbf"}),
    Case("lone-surrogate-escape", {"set": [(["environment", "gpu"], "X")], "replace": [('"gpu": "X"', '"gpu": "\\ud800"')]}),
    Case("nul-in-string", {"set": [(["environment", "gpu"], "a\u0000b")]}, code=7),
    Case("null-document", {"raw": "null"}),
    Case("list-document", {"raw": "[]"}),
    Case("number-document", {"raw": "42"}),
    Case("other-track", {"set": [(["track"], "beta")]}, says="evidence never crosses tracks"),
    Case("other-ref", {"set": [(["commits", "ref_under_test"], "f" * 40)]}, says="ref_under_test"),
    Case("other-arch", {"set": [(["environment", "arch"], "gfx1151")]}, says="arch"),
    Case("other-subject", {"set": [(["subject"], "0009-pr999-other")]}, says="subject"),
    Case("too-many-cells", {"cells": 20000, "compact": True}, says="20000 items; expected at most 10000"),
    Case("many-cells-within-the-limit", {"cells": 9000, "compact": True}, code=7),
    Case("odd-but-valid-float-context", {"set": [(["cells", 0, "context"], 1024.0), (["cells", 1, "context"], 1024.0)]}, code=7),
]


@pytest.mark.parametrize("subset", SUBSETS)
def test_hostile_results_files_through_gate_run(tmp_path, world, cases, subset):
    command = "{python} hostile_job.py {{results}}".format(python=__import__("sys").executable)
    tracks = {"alpha": H.track([101], "spec-decode warmup", requires={"attention": ["sparse-mla"]},
                               gate=H.gate_doc(command=command))}
    rig = Rig(tmp_path, world, tracks=tracks)
    (rig.root / "hostile_job.py").write_text(JOB)
    (rig.root / "scenario.json").write_text(json.dumps(SCENARIO))
    rig.ok("import", "101")
    rig.save("base")
    around = outside(rig.around())
    for case in half(CASES, lambda c: c.fast, subset):
        with cases.case(case.id):
            rig.restore("base")
            (rig.root / "hostile-case.json").write_text(json.dumps(case.spec))
            before = rig.digest("patches")
            out = rig.cli("gate", "run", "101", "--target", "sm_121a")
            evidence = sorted((rig.root / "patches" / "evidence").glob("*.json"))
            assert "Traceback" not in out.stderr and "internal error" not in out.stderr, out.stderr[-1500:]
            if case.code == 2:
                assert out.returncode == 2, f"exit {out.returncode}: {out.stderr[-1500:]}"
                assert len(out.errors) == 1 and "nothing recorded" in out.errors[0], out.stderr[-1500:]
                if case.says:
                    assert case.says in out.errors[0], out.errors[0][:600]
                assert len(out.errors[0]) < 4000, "the error does not quote the whole file"
                assert evidence == [] and rig.digest("patches") == before
            else:  # recorded (no baseline yet: the gate cannot be evaluated, exit 7)
                assert out.returncode == case.code, f"exit {out.returncode}: {out.stderr[-1500:]}"
                assert len(evidence) == 1
            assert [p["state"] for p in rig.queue_json()["patches"]] == ["queued"]
            assert outside(rig.around()) == around, "nothing written next to the workspace or the fork"
            check_consistent(rig)
    cases.done()


# -- results that arrive as a workflow artifact ---------------------------------------------------------

def _zip(entries: dict[str, bytes], *, compress: bool = True) -> bytes:
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED) as archive:
        for name, data in entries.items():
            archive.writestr(zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0)), data)
    return buf.getvalue()


ARTIFACTS = {
    # what the artifact holds -> (exit code, words of the error)
    "zip-bomb": (lambda good: _zip({"results.json": b" " * (64 << 20) + good}), 2, "larger than"),
    "two-json-files": (lambda good: _zip({"results.json": good, "other/results.json": good}), 2, "expected one results.json"),
    "traversal-names": (lambda good: _zip({"../../../escape/results.json": good}), 7, ""),
    "no-json": (lambda good: _zip({"notes.txt": b"measured nothing"}), 2, "expected one results.json"),
    "not-a-zip": (lambda good: b"PK\x03\x04 not really a zip", 5, "not a whole zip archive"),
}


@pytest.mark.parametrize("kind", [k if k in ("zip-bomb", "traversal-names") else pytest.param(k, marks=pytest.mark.slow)
                                  for k in sorted(ARTIFACTS)])
def test_hostile_artifact_archives_from_a_workflow_gate(tmp_path, world, kind):
    """Nothing in an artifact is extracted to disk: the one results file is read in memory, within
    the size limit, whatever the archive claims; an archive that is not one is a failed download."""
    from testing.scenario_job import build

    rig = Rig(tmp_path, world, gate="workflow")
    rig.ok("import", "101")
    make, code, words = ARTIFACTS[kind]

    def runner(repo, file, ref, inputs):
        context = json.loads(inputs["context"])
        env = {f"PORTTRACK_{k.upper()}": (json.dumps(v) if k == "patch_set" else str(v)) for k, v in context.items()}
        return {"artifacts": {"porttrack-results": make(build(SCENARIO, env).to_json().encode())}, "polls": (0, 1)}

    rig.fake.on_dispatch = runner
    around = outside(rig.around())
    out = rig.cli("gate", "run", "101", "--target", "sm_121a", "--poll-interval", "0.01", "--wait", "20")
    assert out.returncode == code, out.stderr[-1500:]
    assert "Traceback" not in out.stderr
    if words:
        assert len(out.errors) == 1 and words in out.errors[0], out.stderr[-1500:]
    evidence = sorted((rig.root / "patches" / "evidence").glob("*.json"))
    assert len(evidence) == (1 if code == 7 else 0)
    assert outside(rig.around()) == around and not (tmp_path / "escape").exists()
    check_consistent(rig)
