"""Gates end to end: a real local job (testing.scenario_job, run as a subprocess) measures the
staging build of a real fork, its results become evidence, and `gate check` / `promote` judge it.

The workspace has two tracks with gates and a proof:
  mla  requires attention sparse-mla or mla: GLM-5.2 eligible, Qwen3.6 ineligible,
       Mistral-Small-4 conditional on proof `mla-low-rank-accepted`
  mtp  requires a native-mtp drafter: GLM-5.2 and Qwen3.6
Patches: 0001-pr101 (track mla), 0002-pr102 (track mtp).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from porttrack.common.errors import InputError
from porttrack.git.repo import GitRepo
from porttrack.prove import evidence, gaterun, gates
from porttrack.queue import manifest as queue_mod
from porttrack.queue.manifest import Patch, Revision, patch_file_name
from porttrack.runner import results
from porttrack.tracks.file import load_config
from porttrack.workspace.files import Workspace, dump_json
from testing.gitfixtures import Upstream, clone_fork, git, git_bytes
from testing.queueing import queue_mail
from testing.scenario_job import build
from testing.workspace import make_workspace

REPO_ROOT = Path(__file__).resolve().parents[2]
GOLDEN = Path(__file__).resolve().parents[1] / "golden"
UPSTREAM_DEV = {"GIT_AUTHOR_NAME": "Upstream Dev", "GIT_AUTHOR_EMAIL": "dev@upstream.invalid",
                "GIT_AUTHOR_DATE": "1767300000 +0000"}
PROOF = "mla-low-rank-accepted"

MODELS = {
    "GLM-5.2": {"drafters": ["native-mtp"], "attention": "sparse-mla", "quantization": "fp8",
                "backends": {"sm_121a": "FLASHMLA_SPARSE", "gfx1151": "ROCM_AITER_MLA_SPARSE"}},
    "Qwen3.6": {"drafters": ["native-mtp", "eagle"], "attention": "mha", "quantization": "bf16",
                "backends": {"sm_121a": "FLASH_ATTN", "gfx1151": "ROCM_AITER_FA"}},
    "Mistral-Small-4": {"drafters": [], "attention": "mla", "quantization": "fp8",
                        "backends": {"sm_121a": "TRITON_MLA", "gfx1151": "ROCM_AITER_MLA"},
                        "conditional": [{"proof": PROOF, "tracks": ["mla"],
                                         "reason": "joins MLA tracks once its low-rank attention is accepted"}]},
}
METRICS = [
    {"name": "ttft_ms", "unit": "ms", "direction": "lower", "allowed_regression_pct": 5.0, "key": True},
    {"name": "decode_tok_s", "unit": "tok/s", "direction": "higher", "allowed_regression_pct": 3.0, "allowed_regression_abs": 2.0},
]
GOOD = {"candidate": {"ttft_ms": 100.0, "decode_tok_s": 50.0}, "baseline": {"ttft_ms": 100.0, "decode_tok_s": 50.0}}


def job_command(scenario: str = "scenario.json") -> str:
    return f"{sys.executable} -m testing.scenario_job --scenario {scenario} --results {{results}} --target {{target}} --ref {{ref}}"


def gate(command: str | None = None, *, workflow: dict | None = None, models: Any = "eligible", timeout_s: int = 120, **extra: Any) -> dict:
    job = {"workflow": workflow} if workflow else {"command": command or job_command()}
    return {
        "job": {**job, "timeout_s": timeout_s},
        "matrix": {"models": models, "contexts": [1024, 8192], "batches": [1]},
        "reference_backend": "TRITON_MLA",
        "tolerance": {"abs": 0.01, "rel": 0.05},
        "metrics": METRICS,
        "phases": ["cold", "warm"],
        "graph_replay": "required",
        "no_jit_after_warmup": "required",
        **extra,
    }


def tracks(gate_kw: dict | None = None) -> dict:
    gate_kw = gate_kw or {}
    return {
        "mla": {"title": "fp8_ds_mla sparse mixed batch", "prs": [101], "targets": ["sm_121a", "gfx1151"],
                "requires": {"attention": ["sparse-mla", "mla"]}, "gate": gate(**gate_kw)},
        "mtp": {"title": "native-MTP warmup", "prs": [102], "targets": ["sm_121a", "gfx1151"],
                "requires": {"drafter": ["native-mtp"]}, "gate": gate(**gate_kw)},
    }


def proofs(command: str | None = None) -> dict:
    return {PROOF: {"description": "the MLA implementation accepts Mistral Small 4's low-rank attention",
                    "gate": {"job": {"command": command or job_command("proof.json"), "timeout_s": 60},
                             "matrix": {"models": "eligible", "contexts": [1024], "batches": [1]},
                             "reference_backend": "TRITON_MLA", "tolerance": {"abs": 0.01, "rel": 0.05},
                             "phases": ["cold", "warm"], "graph_replay": "not-applicable",
                             "no_jit_after_warmup": "not-applicable", "promote": False}}}


class GateWorld:
    """Upstream with PRs 101 and 102, a fork, and a workspace whose queue holds both."""

    def __init__(self, root: Path, *, gate_kw: dict | None = None, tracks_doc: dict | None = None, fake=None):
        self.root = root
        self.up = Upstream(root / "upstream", initial_files={"a.py": "a = 1\n" * 5, "b.py": "b = 1\n" * 5})
        self.up.open_pr(101, {"a.py": "a = 2\n" + "a = 1\n" * 4}, title="FlashMLA sparse mixed batch")
        self.up.open_pr(102, {"b.py": "b = 2\n" + "b = 1\n" * 4}, title="Warm MTP kernels")
        self.fork = clone_fork(self.up, root / "fork")
        self.handle = make_workspace(root / "ws", tracks_doc or tracks(gate_kw), fork=self.fork, models=MODELS,
                                     proofs=proofs(), api_url=fake.base_url if fake else None,
                                     token=fake_token() if fake else None)
        self.ws = Workspace(self.handle.root)
        self.mla = self.queue(101, "mla")
        self.mtp = self.queue(102, "mtp")
        self.scenario()
        self.scenario(name="proof.json", models=["Mistral-Small-4"], contexts=[1024])

    def queue(self, pr: int, track: str, state: str = "queued", gate_track: str | None = "same") -> Patch:
        head = self.up.head(pr)
        message = f"{self.up.pr(pr).title}\n\nPorttrack-PR: {pr}\nPorttrack-Upstream-Head: {head}\n"
        commit = git(self.up.work, "commit-tree", f"{head}^{{tree}}", "-p", f"{head}^", "-m", message, env=UPSTREAM_DEV)
        data = git_bytes(self.up.work, "format-patch", "-1", "--stdout", commit)
        name = f"{len(queue_mod.load(self.ws).patches) + 1:04d}-pr{pr}"
        return queue_mail(self.ws.root, data, name=name, track=track, pr=pr, title=self.up.pr(pr).title, head=head,
                          base=self.up.tip(), state=state, gate=track if gate_track == "same" else gate_track)

    def scenario(self, name: str = "scenario.json", *, models=("GLM-5.2",), contexts=(1024, 8192), batches=(1,),
                 phases=("cold", "warm"), metrics=None, overrides=(), **extra: Any) -> None:
        doc = {"cells": {"models": list(models), "contexts": list(contexts), "batches": list(batches), "phases": list(phases)},
               "reference_backend": "TRITON_MLA", "metrics": metrics or GOOD,
               "numerics": {"max_abs_err": 0.002, "max_rel_err": 0.01}, "graph_replays": 12,
               "jit_compiles_after_warmup": 0, "overrides": list(overrides), **extra}
        (self.ws.root / name).write_text(json.dumps(doc), encoding="utf-8")

    def cli(self, *args: str, **env: str):
        return self.handle.run_in_process(*args, env=self.handle.env(**env))

    def config(self):
        return load_config(self.ws.tracks_file, fork_override=str(self.fork))

    def check(self, name: str = "0001-pr101") -> dict:
        out = self.cli("gate", "check", name, "--json")
        data = json.loads(out.stdout)
        assert out.returncode == data["exit_code"], out.stderr
        return data

    def run_both(self, name: str = "0001-pr101", *extra: str) -> None:
        for role in ([], ["--baseline"]):
            out = self.cli("gate", "run", name, *role, *extra)
            assert out.returncode in (0, 1, 7), out.stderr

    def state(self, name: str) -> str:
        return queue_mod.load(self.ws).get(name).state

    def evidence_files(self) -> list[Path]:
        return sorted(self.ws.evidence_dir.glob("*.json")) if self.ws.evidence_dir.is_dir() else []


def fake_token() -> str:
    from testing.github_emulator import DEFAULT_TOKEN

    return DEFAULT_TOKEN


@pytest.fixture
def gw(tmp_path, monkeypatch) -> GateWorld:
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("PORTTRACK_ACTOR", "tester")
    return GateWorld(tmp_path)


def cells(data: dict, **match: Any) -> list[dict]:
    return [c for c in data["cells"] if all(c[k] == v for k, v in match.items())]


def verdicts(data: dict) -> set[str]:
    return {c["verdict"] for c in data["cells"]}


# -- the gate passes, fails, or cannot be evaluated ---------------------------------------------

def test_pass_with_candidate_and_baseline_on_the_same_environment(gw):
    out = gw.cli("gate", "run", "0001-pr101")
    assert out.returncode == 7, out.stderr  # no baseline yet: could not evaluate
    assert "recorded" in out.stderr
    assert gw.state("0001-pr101") == "queued"
    out = gw.cli("gate", "run", "0001-pr101", "--baseline")
    assert out.returncode == 0, out.stderr + out.stdout
    data = gw.check()
    assert data["verdict"] == "pass" and data["exit_code"] == 0
    # required: eligible model × 2 contexts × 1 batch × both targets × cold and warm, judged separately
    assert data["required"] == {"models": ["GLM-5.2"], "contexts": [1024, 8192], "batches": [1],
                                "targets": ["sm_121a", "gfx1151"], "phases": ["cold", "warm"]}
    assert len(data["cells"]) == 8 and verdicts(data) == {"pass"}
    cell = data["cells"][0]
    assert {k["check"] for k in cell["checks"]} == {"numerics", "graph-replay", "no-jit-after-warmup", "metric:ttft_ms", "metric:decode_tok_s"}
    assert cell["evidence"] and cell["baseline"] and cell["evidence"] != cell["baseline"]
    assert gw.state("0001-pr101") == "gated-pass"
    # four records: candidate and baseline on each target, each tied to commits and a fingerprint
    assert len(gw.evidence_files()) == 4
    record = json.loads(gw.evidence_files()[0].read_text())
    assert record["commits"]["ref_under_test"] and record["environment"]["fork_commit"]
    assert {"gpu", "arch", "driver", "cuda", "rocm", "torch", "triton", "patch_set"} <= set(record["environment"])


def test_one_metric_over_its_allowed_regression_fails_that_cell_only(gw):
    gw.scenario(overrides=[{"when": {"role": "candidate", "target": "gfx1151", "context": 8192, "phase": "warm"},
                            "set": {"metrics.ttft_ms": 110.0}}])
    gw.run_both()
    data = gw.check()
    assert data["verdict"] == "fail" and data["exit_code"] == 1
    [bad] = [c for c in data["cells"] if c["verdict"] != "pass"]
    assert (bad["target"], bad["context"], bad["phase"], bad["verdict"]) == ("gfx1151", 8192, "warm", "fail")
    [metric] = [k for k in bad["checks"] if k["outcome"] == "fail"]
    assert metric["check"] == "metric:ttft_ms"
    assert metric["observed"] == 110.0 and metric["baseline"] == 100.0
    assert metric["regression_pct"] == 10.0 and metric["over_by"] == 5.0  # which threshold, by how much
    assert "10% worse" in bad["reason"] and "allowed regression of 5%" in bad["reason"]
    # the cold measurement of the same cell is judged on its own and passes
    assert cells(data, target="gfx1151", context=8192, phase="cold")[0]["verdict"] == "pass"
    assert gw.state("0001-pr101") == "gated-fail"


def test_higher_is_better_metric_and_absolute_allowance(gw):
    # decode_tok_s 50 -> 47.5: 5% worse (allowed 3%) and 2.5 tok/s worse (allowed 2): both bounds named
    gw.scenario(overrides=[{"when": {"role": "candidate", "target": "sm_121a", "context": 1024, "phase": "cold"},
                            "set": {"metrics.decode_tok_s": 47.5}}])
    gw.run_both()
    [bad] = [c for c in gw.check()["cells"] if c["verdict"] == "fail"]
    assert "allowed regression of 3%" in bad["reason"] and "allowed regression of 2 tok/s by 0.5 tok/s" in bad["reason"]


def test_numerics_outside_tolerance_against_the_reference_backend(gw):
    gw.scenario(overrides=[{"when": {"role": "candidate", "target": "sm_121a", "context": 1024},
                            "set": {"numerics.max_abs_err": 0.5, "numerics.max_rel_err": 0.3}}])
    gw.run_both()
    data = gw.check()
    assert data["verdict"] == "fail"
    failed = [c for c in data["cells"] if c["verdict"] == "fail"]
    assert {(c["target"], c["context"], c["phase"]) for c in failed} == {("sm_121a", 1024, "cold"), ("sm_121a", 1024, "warm")}
    [numerics] = [k for k in failed[0]["checks"] if k["check"] == "numerics"]
    assert numerics["outcome"] == "fail" and "TRITON_MLA" in numerics["detail"]
    assert numerics["limit"] == {"abs": 0.01, "rel": 0.05} and numerics["over_by"] == 0.49


def test_numerics_against_another_backend_than_the_named_reference_fail_closed(gw):
    gw.scenario(overrides=[{"when": {"role": "candidate", "target": "gfx1151"}, "set": {"numerics.reference_backend": "FLASH_ATTN"}}])
    gw.run_both()
    data = gw.check()
    assert data["verdict"] == "cannot-evaluate"
    bad = cells(data, target="gfx1151")
    assert {c["verdict"] for c in bad} == {"missing"}
    assert "the gate names TRITON_MLA as the reference backend" in bad[0]["reason"]


def test_graph_replay_not_observed(gw):
    gw.scenario(overrides=[{"when": {"role": "candidate", "phase": "warm", "target": "sm_121a", "context": 8192}, "set": {"graph_replays": 0}}])
    gw.run_both()
    data = gw.check()
    [bad] = [c for c in data["cells"] if c["verdict"] != "pass"]
    assert bad["verdict"] == "fail" and "graph replay not observed" in bad["reason"]
    assert gw.cli("gate", "check", "0001-pr101").returncode == 1


def test_jit_compile_after_warmup(gw):
    gw.scenario(overrides=[{"when": {"role": "candidate", "phase": "cold", "target": "gfx1151", "context": 1024},
                            "set": {"jit_compiles_after_warmup": 3}}])
    gw.run_both()
    [bad] = [c for c in gw.check()["cells"] if c["verdict"] != "pass"]
    assert bad["verdict"] == "fail" and "3 JIT compiles after warmup" in bad["reason"]
    [jit] = [k for k in bad["checks"] if k["check"] == "no-jit-after-warmup"]
    assert jit["observed"] == 3 and jit["limit"] == 0 and jit["over_by"] == 3


def test_a_missing_cell_fails_closed(gw):
    gw.scenario(overrides=[{"when": {"role": "candidate", "target": "gfx1151", "context": 8192}, "omit": True}])
    gw.run_both()
    data = gw.check()
    assert data["verdict"] == "cannot-evaluate" and data["exit_code"] == 7
    missing = [c for c in data["cells"] if c["verdict"] == "missing"]
    assert {(c["target"], c["context"]) for c in missing} == {("gfx1151", 8192)}
    assert missing[0]["reason"] == "no evidence for this cell" and missing[0]["evidence"] is None
    assert data["counts"] == {"pass": 6, "fail": 0, "missing": 2, "baseline-missing": 0, "baseline-other-environment": 0}
    assert gw.cli("promote", "0001-pr101").returncode == 1


def test_a_missing_warm_phase_is_missing_not_inferred_from_cold(gw):
    gw.scenario(phases=["cold"])
    gw.run_both()
    data = gw.check()
    assert data["verdict"] == "cannot-evaluate"
    assert {c["verdict"] for c in cells(data, phase="cold")} == {"pass"}
    warm = cells(data, phase="warm")
    assert {c["verdict"] for c in warm} == {"missing"} and warm[0]["reason"] == "no warm measurement for this cell"


def test_a_baseline_on_another_fingerprint_is_never_used(gw):
    gw.scenario(overrides=[{"when": {"role": "baseline", "target": "gfx1151"}, "environment": {"rocm": "6.4.1"}}])
    gw.run_both()
    data = gw.check()
    assert data["verdict"] == "cannot-evaluate"
    other = [c for c in data["cells"] if c["verdict"] != "pass"]
    assert {c["target"] for c in other} == {"gfx1151"} and {c["verdict"] for c in other} == {"baseline-other-environment"}
    assert "rocm 6.4.1 vs 7.0.2" in other[0]["reason"] and other[0]["baseline"] is None
    # the sm_121a baseline is on the right environment but is not borrowed for gfx1151
    gw.scenario()
    assert gw.cli("gate", "run", "0001-pr101", "--baseline", "--target", "gfx1151").returncode == 0
    assert gw.check()["verdict"] == "pass"


def test_a_baseline_of_another_patch_set_is_another_environment(gw):
    gw.run_both()
    # the mtp patch changes: the staging build (and so the candidate's patch set) is no longer
    # the one the baseline was measured against once the candidate is measured again
    queue = queue_mod.load(gw.ws)
    queue_mod.save(gw.ws, queue.replace_patch(queue.get("0002-pr102").transition("dropped", "test")))
    assert gw.cli("gate", "run", "0001-pr101").returncode == 7
    data = gw.check()
    assert {c["verdict"] for c in data["cells"]} == {"baseline-other-environment"}
    assert "patch set [0002-pr102] vs expected []" in data["cells"][0]["reason"]


def test_no_baseline_at_all(gw):
    assert gw.cli("gate", "run", "0001-pr101", "--target", "sm_121a").returncode == 7
    data = gw.check()
    assert {c["verdict"] for c in cells(data, target="sm_121a")} == {"baseline-missing"}
    assert {c["verdict"] for c in cells(data, target="gfx1151")} == {"missing"}
    assert "gate run 0001-pr101 --baseline --target sm_121a" in cells(data, target="sm_121a")[0]["reason"]


def test_superseded_evidence_no_longer_counts_but_stays(gw):
    gw.run_both()
    data = gw.check()
    assert data["verdict"] == "pass"
    candidate = cells(data, target="gfx1151")[0]["evidence"]
    out = gw.cli("evidence", "supersede", candidate, "--reason", "the runner was thermally throttled")
    assert out.returncode == 0, out.stderr
    data = gw.check()
    assert data["verdict"] == "cannot-evaluate"
    assert {c["verdict"] for c in cells(data, target="gfx1151")} == {"missing"}
    assert [i["id"] for i in data["ignored"]] == [candidate]
    assert "thermally throttled" in data["ignored"][0]["why"]
    listing = json.loads(gw.cli("evidence", "list", "--json").stdout)
    [entry] = [r for r in listing["records"] if r["id"] == candidate]
    assert entry["status"] == "superseded" and entry["superseded"]["reason"] == "the runner was thermally throttled"
    assert (gw.ws.evidence_dir / f"{candidate}.json").is_file()  # history kept
    # superseding twice is refused; a fresh run restores the verdict
    assert gw.cli("evidence", "supersede", candidate, "--reason", "again").returncode == 6
    assert gw.cli("gate", "run", "0001-pr101", "--target", "gfx1151").returncode == 0
    assert gw.check()["verdict"] == "pass"


def test_latest_evidence_counts_not_the_best(gw):
    gw.run_both()
    gw.scenario(overrides=[{"when": {"role": "candidate", "target": "sm_121a"}, "set": {"graph_replays": 0}}])
    gw.cli("gate", "run", "0001-pr101", "--target", "sm_121a")
    data = gw.check()
    assert data["verdict"] == "fail"
    assert {c["verdict"] for c in cells(data, target="sm_121a")} == {"fail"}


# -- promotion -------------------------------------------------------------------------------------

def test_promotion_refused_then_accepted_then_demoted(gw):
    gw.cli("gate", "run", "0001-pr101")
    out = gw.cli("promote", "0001-pr101")
    assert out.returncode == 1 and "promotion of 0001-pr101 refused" in out.stderr and "baseline" in out.stderr
    assert gw.state("0001-pr101") == "queued"
    gw.cli("gate", "run", "0001-pr101", "--baseline")
    assert gw.cli("promote", "0001-pr101", "--dry-run").returncode == 0
    assert gw.state("0001-pr101") == "gated-pass"
    out = gw.cli("promote", "0001-pr101", "--json")
    assert out.returncode == 0, out.stderr
    decision = json.loads(out.stdout)
    assert decision["promoted"] and decision["after"] == "default-enabled"
    patch = queue_mod.load(gw.ws).get("0001-pr101")
    assert patch.state == "default-enabled"
    step = patch.history[-1]
    assert step.to == "default-enabled" and step.from_ == "gated-pass"
    assert list(step.evidence) == decision["evidence"] == decision["check"]["evidence"]
    assert len(step.evidence) == 4
    # promoting again is a no-op; demote needs a reason and returns the patch to staging
    assert gw.cli("promote", "0001-pr101").returncode == 0
    out = gw.cli("demote", "0001-pr101", "--reason", "numbers were overclaimed")
    assert out.returncode == 0, out.stderr
    patch = queue_mod.load(gw.ws).get("0001-pr101")
    assert patch.state == "gated-pass" and patch.history[-1].why == "demoted: numbers were overclaimed"
    assert gw.cli("demote", "0001-pr101", "--reason", "x").returncode == 6


def test_superseding_promotion_evidence_warns(gw):
    gw.run_both()
    assert gw.cli("promote", "0001-pr101").returncode == 0
    record = queue_mod.load(gw.ws).get("0001-pr101").history[-1].evidence[0]
    out = gw.cli("evidence", "supersede", record, "--reason", "wrong driver")
    assert out.returncode == 0 and "was promoted on this evidence" in out.stderr


def test_an_ungated_patch_can_never_be_promoted(gw):
    patch = gw.queue(101, "mla", state="ungated", gate_track=None)
    out = gw.cli("promote", patch.name)
    assert out.returncode == 6 and "ungated" in out.stderr
    out = gw.cli("gate", "check", patch.name, "--json")
    assert out.returncode == 7 and json.loads(out.stdout)["verdict"] == "cannot-evaluate"
    assert gw.cli("gate", "run", patch.name).returncode == 6


def test_measurement_only_gate_never_promotes(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT))
    gw = GateWorld(tmp_path, gate_kw={"promote": False})
    gw.run_both()
    assert gw.check()["verdict"] == "pass"
    out = gw.cli("promote", "0001-pr101")
    assert out.returncode == 6 and "promote: false" in out.stderr


# -- eligibility drives the matrix -----------------------------------------------------------------

def test_an_ineligible_model_is_not_required(gw):
    data = gw.check()
    assert data["required"]["models"] == ["GLM-5.2"]
    left = {x["model"]: x for x in data["not_required"]}
    assert left["Qwen3.6"]["verdict"] == "ineligible" and "attention mha" in left["Qwen3.6"]["reasons"][0]
    assert left["Mistral-Small-4"]["verdict"] == "conditional"
    gw.run_both()
    assert gw.check()["verdict"] == "pass"  # no Qwen3.6 cell was measured, none was needed
    # on the mtp track Qwen3.6 is eligible, so the same scenario leaves its cells missing
    gw.run_both("0002-pr102")
    mtp = gw.check("0002-pr102")
    assert mtp["required"]["models"] == ["GLM-5.2", "Qwen3.6"]
    assert {c["verdict"] for c in cells(mtp, model="Qwen3.6")} == {"missing"}


def test_mistral_small_4_is_required_only_after_its_proof(gw):
    gw.run_both()
    assert gw.check()["verdict"] == "pass"
    assert PROOF not in json.loads(gw.cli("eligibility", "--json").stdout)["proofs_passed"]
    # the proof's gate: Mistral-Small-4 on both targets, measured on the staging build
    proof = json.loads(gw.cli("gate", "check", "--proof", PROOF, "--json").stdout)
    assert proof["required"]["models"] == ["Mistral-Small-4"] and proof["verdict"] == "cannot-evaluate"
    out = gw.cli("gate", "run", "--proof", PROOF)
    assert out.returncode == 0, out.stderr + out.stdout
    assert PROOF in json.loads(gw.cli("eligibility", "--json").stdout)["proofs_passed"]
    # now the MLA gate requires Mistral-Small-4 too, and the earlier evidence does not cover it
    data = gw.check()
    assert data["required"]["models"] == ["GLM-5.2", "Mistral-Small-4"]
    assert data["verdict"] == "cannot-evaluate"
    assert {c["verdict"] for c in cells(data, model="Mistral-Small-4")} == {"missing"}
    assert gw.cli("promote", "0001-pr101").returncode == 1
    gw.scenario(models=["GLM-5.2", "Mistral-Small-4"])
    gw.run_both()
    assert gw.check()["verdict"] == "pass"
    # the proof never reaches the mtp track: Mistral-Small-4 has no drafter
    assert "Mistral-Small-4" not in gw.check("0002-pr102")["required"]["models"]


def test_evidence_from_another_track_is_refused(gw):
    gw.run_both("0002-pr102")  # evidence for the mtp patch
    config = gw.config()
    queue = queue_mod.load(gw.ws)
    mla = gates.patch_subject(config, queue, queue.get("0001-pr101"))
    # 1. results produced for the mtp track, offered for the mla patch, are refused at ingest
    record = json.loads(gw.evidence_files()[0].read_text())
    document = {"schema": results.SCHEMA, "track": "mtp", "subject": "0001-pr101", "role": "candidate",
                "target": record["target"], "commits": record["commits"], "environment": record["environment"],
                "cells": record["cells"]}
    built = gaterun.BuiltRef(record["commits"]["ref_under_test"], record["commits"]["upstream_base"],
                           record["environment"]["fork_commit"],
                           tuple((p["name"], p["sha256"]) for p in record["environment"]["patch_set"]), "test")
    before = gw.evidence_files()
    with pytest.raises(InputError, match="evidence never crosses tracks"):
        gaterun.ingest(gw.ws, config, mla, "candidate", record["target"], built, json.dumps(document).encode(), "offered", {})
    assert gw.evidence_files() == before
    # 2. a record of the mtp track relabelled for the mla patch (a well-formed record) never counts
    for path in before:
        data = json.loads(path.read_text())
        data.update(subject={"kind": "patch", "name": "0001-pr101", "sha256": gw.mla.sha256}, seq=data["seq"] + 100)
        data["id"] = evidence.make_id(data)
        (gw.ws.evidence_dir / f"{data['id']}.json").write_text(dump_json(data))
    check = gw.check()
    assert check["verdict"] == "cannot-evaluate" and {c["verdict"] for c in check["cells"]} == {"missing"}
    assert len(check["ignored"]) == 4
    assert all("evidence never counts for another track" in i["why"] for i in check["ignored"])
    assert gw.cli("promote", "0001-pr101").returncode == 1


def test_evidence_for_an_older_version_of_the_patch_is_stale(gw):
    gw.run_both()
    queue = queue_mod.load(gw.ws)
    patch = queue.get("0001-pr101")
    data = queue_mod.read_patch(gw.ws, patch) + b"\n"
    refreshed = Patch(**{**patch.__dict__, "sha256": hashlib.sha256(data).hexdigest(), "file": patch_file_name(patch.name, data)})
    queue_mod.save(gw.ws, queue.replace_patch(refreshed), new_files={refreshed.file: data})
    check = gw.check()
    assert {c["verdict"] for c in check["cells"]} == {"missing"}
    assert all("another version of the patch" in i["why"] for i in check["ignored"])


# -- malformed results -----------------------------------------------------------------------------

MALFORMED = {
    "wrong type": {"overrides": [{"when": {"phase": "warm"}, "set": {"graph_replays": "many"}}], "check": False},
    "wrong metric type": {"overrides": [{"when": {"phase": "cold"}, "set": {"metrics.ttft_ms": "fast"}}], "check": False},
    "negative time": {"overrides": [{"when": {"phase": "cold"}, "set": {"metrics.ttft_ms": -3.5}}], "check": False},
    "negative duration": {"overrides": [{"when": {"phase": "cold"}, "set": {"duration_s": -1}}], "check": False},
    "missing field": {"overrides": [{"when": {"phase": "warm"}, "set": {"numerics": None}}], "check": False},
    "NaN": {"raw": '{"schema": "porttrack/results/v1", "cells": [{"metrics": {"ttft_ms": NaN}}]}'},
    "Infinity": {"overrides": [{"when": {"phase": "cold"}, "set": {"metrics.ttft_ms": float("inf")}}], "check": False},
    "not JSON": {"raw": "ttft_ms,100\n"},
}
EXPECTED_MESSAGE = {
    "wrong type": "graph_replays: expected an integer, got a string",
    "wrong metric type": "metrics.ttft_ms: expected a number, got a string",
    "negative time": "metrics.ttft_ms: -3.5 is negative",
    "negative duration": "duration_s: -1 is negative",
    "missing field": "'numerics' is missing",
    "NaN": "contains NaN",
    "Infinity": "contains Infinity",
    "not JSON": "not JSON",
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_results_are_rejected_and_record_nothing(gw, case):
    gw.scenario(**MALFORMED[case])
    out = gw.cli("gate", "run", "0001-pr101", "--target", "gfx1151")
    assert out.returncode == 2, out.stderr
    assert EXPECTED_MESSAGE[case] in out.stderr
    assert "nothing recorded" in out.stderr
    assert "Traceback" not in out.stderr
    assert gw.evidence_files() == []
    assert gw.state("0001-pr101") == "queued"


def test_results_for_another_ref_or_arch_are_refused(gw):
    config = gw.config()
    queue = queue_mod.load(gw.ws)
    subject = gates.patch_subject(config, queue, queue.get("0001-pr101"))
    built = gaterun.build_ref(gw.ws, config, queue, subject, "candidate", repo=GitRepo.open(config.fork_checkout()))
    env = gaterun.job_environment(subject, "candidate", "gfx1151", built, "unused")
    scenario = json.loads((gw.ws.root / "scenario.json").read_text())
    document = build(scenario, env).document
    wrong_ref = {**document, "commits": {**document["commits"], "ref_under_test": "f" * 40}}
    with pytest.raises(InputError, match="ref_under_test is 'f{40}'"):
        gaterun.ingest(gw.ws, config, subject, "candidate", "gfx1151", built, json.dumps(wrong_ref).encode(), "r", {})
    wrong_arch = {**document, "environment": {**document["environment"], "arch": "sm_121a"}}
    with pytest.raises(InputError, match="measured on arch sm_121a, not gfx1151"):
        gaterun.ingest(gw.ws, config, subject, "candidate", "gfx1151", built, json.dumps(wrong_arch).encode(), "r", {})
    assert gw.evidence_files() == []


def test_a_job_that_writes_nothing_cannot_be_evaluated(gw):
    gw.scenario(raw="{}", exit_code=3)
    (gw.ws.root / "scenario.json").write_text("not json")  # the example job itself crashes
    out = gw.cli("gate", "run", "0001-pr101", "--target", "sm_121a")
    assert out.returncode == 7 and "wrote no results" in out.stderr and "exited 1" in out.stderr
    assert gw.evidence_files() == []


def test_a_job_past_its_timeout_is_stopped(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT))
    sleeper = f"{sys.executable} -c 'import time; print(\"measuring\", flush=True); time.sleep(60)' {{results}}"
    gw = GateWorld(tmp_path, gate_kw={"command": sleeper, "timeout_s": 1})
    out = gw.cli("gate", "run", "0001-pr101", "--target", "sm_121a")
    assert out.returncode == 7 and "the job timed out and wrote no results" in out.stderr and "measuring" in out.stderr
    assert gw.evidence_files() == []


def test_the_job_gets_a_work_tree_of_the_ref_under_test(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT))
    probe = tmp_path / "probe.txt"
    script = f"import pathlib,subprocess,sys; pathlib.Path({str(probe)!r}).write_text(subprocess.run(['git','-C',sys.argv[1],'rev-parse','HEAD'],capture_output=True,text=True).stdout + pathlib.Path(sys.argv[1],'a.py').read_text())"
    gw = GateWorld(tmp_path, gate_kw={"command": f"{sys.executable} -c {json.dumps(script)} {{workdir}}"})
    out = gw.cli("gate", "run", "0001-pr101", "--target", "gfx1151")
    assert out.returncode == 7 and "wrote no results" in out.stderr
    head, first_line = probe.read_text().splitlines()[:2]
    assert head == git(gw.fork, "rev-parse", "refs/heads/porttrack/staging") and first_line == "a = 2"
    assert "porttrack-gate-" not in git(gw.fork, "worktree", "list")  # cleaned up


def test_a_dirty_fork_is_refused_unless_forced(gw):
    (gw.fork / "a.py").write_text("local edit\n")
    out = gw.cli("gate", "run", "0001-pr101", "--target", "sm_121a")
    assert out.returncode == 6 and "local changes" in out.stderr
    assert gw.evidence_files() == []
    out = gw.cli("gate", "run", "0001-pr101", "--target", "sm_121a", "--force")
    assert out.returncode == 7 and len(gw.evidence_files()) == 1  # measured the staging build; no baseline yet
    assert (gw.fork / "a.py").read_text() == "local edit\n"


def test_dry_run_builds_and_records_nothing(gw):
    out = gw.cli("gate", "run", "0001-pr101", "--dry-run")
    assert out.returncode == 0, out.stderr
    assert "would run: sm_121a:" in out.stderr and "testing.scenario_job" in out.stderr
    assert gw.evidence_files() == []


# -- the real vLLM job (porttrack.jobs.vllm) against a stand-in vllm on PATH -----------------------

def test_gate_run_with_the_vllm_job_records_evidence_that_passes(tmp_path, monkeypatch):
    from testing.vllm_standin import install

    monkeypatch.setenv("PORTTRACK_ACTOR", "tester")
    metrics = [{"name": "first_request_latency", "unit": "ms", "direction": "lower", "allowed_regression_pct": 500.0, "key": True},
               {"name": "decode_throughput", "unit": "tok/s", "direction": "higher", "allowed_regression_pct": 90.0}]
    command = f"{sys.executable} -m porttrack.jobs.vllm --gate mla --ref {{ref}} --target {{target}} --results {{results}} --output-len 4 --num-iters 2"
    gw = GateWorld(tmp_path, gate_kw={"command": command, "metrics": metrics})
    env = install(tmp_path / "bin", STANDIN_VLLM=json.dumps({"logprob_error": {"FLASHMLA_SPARSE": 0.002}}), STANDIN_GPU_ARCH="sm_121")
    for role in ([], ["--baseline"]):
        out = gw.cli("gate", "run", "0001-pr101", "--target", "sm_121a", *role, **env)
        assert out.returncode == 7, out.stderr  # gfx1151 is required too, and not measured here
    check = gw.check()
    measured = [c for c in check["cells"] if c["target"] == "sm_121a"]
    assert len(measured) == 4 and {c["verdict"] for c in measured} == {"pass"}, measured
    # the backend each cell claims, and what its engine recorded running, are shown per cell
    for c in measured:
        assert c["backend"] == "FLASHMLA_SPARSE" and c["backend_used"] == {"Attention": ["FLASHMLA_SPARSE"]}
        assert {"check": "backend", "outcome": "pass"}.items() <= c["checks"][0].items()
    human = gw.cli("gate", "check", "0001-pr101").stdout
    assert human.count("[backend FLASHMLA_SPARSE (ran Attention=FLASHMLA_SPARSE)]") == 4, human
    record = json.loads(gw.evidence_files()[0].read_text())
    # evidence whose engine record shows another backend than it claims is not evidence
    cell0 = dict(record["cells"][0])
    claimed_other = gates._backend_checks(gw.config().tracks["mla"].gate, {**cell0, "backend": "FLASH_ATTN"})
    assert [(k.check, k.outcome) for k in claimed_other] == [("backend", "missing")]
    same = {**cell0, "numerics": {**cell0["numerics"], "backends_used": {"candidate": {"Attention": ["X"]}, "reference": {"Attention": ["X"]}}}}
    assert ("numerics", "missing") in [(k.check, k.outcome) for k in gates._backend_checks(gw.config().tracks["mla"].gate, same)]
    assert record["environment"]["arch"] == "sm_121a" and record["environment"]["extra"]["vllm"] == "0.33.0+standin"
    # a candidate whose backend drifts past the gate's tolerance fails its numerics check
    env["STANDIN_VLLM"] = json.dumps({"logprob_error": {"FLASHMLA_SPARSE": 0.5}})
    gw.cli("gate", "run", "0001-pr101", "--target", "sm_121a", **env)
    failed = [c for c in gw.check()["cells"] if c["target"] == "sm_121a"]
    assert {c["verdict"] for c in failed} == {"fail"}
    assert all(any(k["check"] == "numerics" and k["outcome"] == "fail" for k in c["checks"]) for c in failed), failed


# -- gate ingest: results measured by hand -------------------------------------------------------------

def hand_results(gw: GateWorld, role: str = "candidate", target: str = "sm_121a", **change: Any) -> Path:
    """A results file as porttrack.jobs.vllm would write it by hand for the build `gate run` would make."""
    config, queue = gw.config(), queue_mod.load(gw.ws)
    subject = gates.patch_subject(config, queue, queue.get("0001-pr101"))
    built = gaterun.build_ref(gw.ws, config, queue, subject, role, repo=GitRepo.open(config.fork_checkout()), dry_run=True)
    document = build(json.loads((gw.ws.root / "scenario.json").read_text()), gaterun.job_environment(subject, role, target, built, "-")).document
    for dotted, value in change.items():
        node = document
        *parents, last = dotted.split("__")
        for part in parents:
            node = node[part]
        node[last] = value
    path = gw.root / f"hand-{role}-{target}-{len(change)}.json"
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def test_gate_ingest_accepts_results_for_the_build_gate_run_would_measure(gw):
    dry = json.loads(gw.cli("gate", "run", "0001-pr101", "--dry-run", "--json").stdout)
    planned = dry["ref"]
    told = dry["job_environment"]["gfx1151"]  # what a maintainer measuring by hand sets
    assert told["PORTTRACK_REF"] == planned and told["PORTTRACK_TARGET"] == "gfx1151" and told["PORTTRACK_TRACK"] == "mla"
    for target in ("sm_121a", "gfx1151"):
        out = gw.cli("gate", "ingest", "0001-pr101", "--target", target, "--results", str(hand_results(gw, target=target)))
        assert out.returncode == 7 and "recorded" in out.stderr, out.stderr  # no baseline yet
        out = gw.cli("gate", "ingest", "0001-pr101", "--baseline", "--target", target,
                     "--results", str(hand_results(gw, "baseline", target)))
    assert out.returncode == 0, out.stderr + out.stdout
    assert gw.check()["verdict"] == "pass" and gw.state("0001-pr101") == "gated-pass"
    records = [json.loads(p.read_text()) for p in gw.evidence_files()]
    assert len(records) == 4 and {r["job"]["kind"] for r in records} == {"manual"}
    assert {r["commits"]["ref_under_test"] for r in records if r["role"] == "candidate"} == {planned}
    assert gw.cli("promote", "0001-pr101").returncode == 0


def test_one_gate_ingest_loads_queue_and_evidence_at_most_twice_and_judges_the_subject_once(gw, monkeypatch):
    """Issue 35: `gate ingest` records, moves the patch's state and judges in `prove`, not back and
    forth through the CLI (which loaded the queue 4x, the evidence 4x and judged the subject twice)."""
    candidate, baseline = hand_results(gw), hand_results(gw, "baseline")  # made before counting starts
    counts = {"queue": 0, "evidence": 0, "judged": 0}

    def counted(key: str, real):
        def wrapper(*args, **kw):
            counts[key] += 1
            return real(*args, **kw)
        return wrapper

    real_check = gates.check

    def check(config, subject, log, proofs_passed):
        counts["judged"] += subject.name == "0001-pr101"  # a proof judged for `proofs_passed` is not the subject
        return real_check(config, subject, log, proofs_passed)

    monkeypatch.setattr(queue_mod, "load", counted("queue", queue_mod.load))
    monkeypatch.setattr(evidence, "load", counted("evidence", evidence.load))
    monkeypatch.setattr(gates, "check", check)
    for role, path, code in ((["--baseline"], baseline, 7), ([], candidate, 7)):
        counts.update(queue=0, evidence=0, judged=0)
        out = gw.cli("gate", "ingest", "0001-pr101", *role, "--target", "sm_121a", "--results", str(path), "--json")
        assert out.returncode == code and "recorded" in out.stderr, out.stderr
        assert counts["queue"] <= 2 and counts["evidence"] <= 2 and counts["judged"] == 1, counts
    data = json.loads(out.stdout)
    # the verdict printed is of the patch as it now stands: its state moved with the same verdict
    assert data["check"]["subject"]["state"] == gw.state("0001-pr101")


REFUSED = {
    "wrong ref": ({"commits__ref_under_test": "f" * 40}, "ref_under_test is 'ffff"),
    "wrong patch set": ({"environment__patch_set": []}, "patch_set is"),
    "wrong target": ({"target": "gfx1151", "environment__arch": "gfx1151"}, "target is 'gfx1151', expected 'sm_121a'"),
    "wrong track": ({"track": "mtp"}, "evidence never crosses tracks"),
    "wrong subject": ({"subject": "0002-pr102"}, "subject is '0002-pr102', expected '0001-pr101'"),
    "wrong role": ({"role": "baseline"}, "role is 'baseline', expected 'candidate'"),
    "wrong arch": ({"environment__arch": "gfx1151"}, "measured on arch gfx1151, not sm_121a"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_gate_ingest_refuses_results_for_another_build_and_records_nothing(gw, case):
    change, message = REFUSED[case]
    out = gw.cli("gate", "ingest", "0001-pr101", "--target", "sm_121a", "--results", str(hand_results(gw, **change)))
    assert out.returncode == 2, out.stderr
    assert message in out.stderr and "nothing was recorded" in out.stderr and "Traceback" not in out.stderr
    assert gw.evidence_files() == [] and gw.state("0001-pr101") == "queued"


def test_gate_ingest_refuses_baseline_results_offered_as_the_candidate(gw):
    path = hand_results(gw, "baseline")
    out = gw.cli("gate", "ingest", "0001-pr101", "--target", "sm_121a", "--results", str(path))
    assert out.returncode == 2 and "role is 'baseline', expected 'candidate'" in out.stderr
    assert "ref_under_test is" in out.stderr and "patch_set is" in out.stderr  # the baseline build lacks the patch
    assert gw.evidence_files() == []


@pytest.mark.parametrize("content,message", [(b"ttft_ms,100\n", "not JSON"), (b'{"schema": "porttrack/results/v1"}', "does not match porttrack/results/v1"),
                                             (None, "cannot read the results file")])
def test_gate_ingest_refuses_a_malformed_or_missing_file(gw, content, message):
    path = gw.root / "hand.json"
    if content is not None:
        path.write_bytes(content)
    out = gw.cli("gate", "ingest", "0001-pr101", "--target", "sm_121a", "--results", str(path))
    assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr, out.stderr
    assert gw.evidence_files() == []


def test_gate_ingest_refuses_a_target_the_gate_does_not_require(gw):
    out = gw.cli("gate", "ingest", "0001-pr101", "--target", "sm_90", "--results", str(hand_results(gw)))
    assert out.returncode == 2 and "target sm_90 is not one of the gate's targets" in out.stderr
    assert gw.evidence_files() == []


def test_gate_ingest_dry_run_checks_and_records_nothing(gw):
    out = gw.cli("gate", "ingest", "0001-pr101", "--target", "sm_121a", "--results", str(hand_results(gw)), "--dry-run")
    assert out.returncode == 0 and "matches the candidate build" in out.stderr, out.stderr
    assert gw.evidence_files() == []


# -- GitHub Actions: dispatch, bounded poll, artifact download ----------------------------------------

def shipped_workflow() -> tuple[list[str], str]:
    """The inputs and run-name of the example workflow this repository ships."""
    import yaml

    doc = yaml.safe_load((REPO_ROOT / ".github" / "workflows" / "porttrack-gate.yml").read_text())
    trigger = doc.get("on") or doc.get(True)  # YAML 1.1 reads the key `on` as true
    return list(trigger["workflow_dispatch"]["inputs"]), doc["run-name"]


def add_gate_workflow(fake) -> None:
    inputs, run_name = shipped_workflow()
    fake.add_workflow("randomvariable/vllm", "porttrack-gate.yml", inputs=inputs, run_name=run_name)


def test_workflow_dispatch_path_against_the_emulator(tmp_path, monkeypatch, fake):
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT))
    monkeypatch.setenv("PORTTRACK_ACTOR", "tester")
    workflow = {"file": "porttrack-gate.yml", "ref": "main", "artifact": "porttrack-results"}
    gw = GateWorld(tmp_path, gate_kw={"workflow": workflow}, fake=fake)
    fake.add_repo("randomvariable/vllm")
    fake.link_git("randomvariable/vllm", gw.fork)
    add_gate_workflow(fake)
    scenario = json.loads((gw.ws.root / "scenario.json").read_text())

    def runner(repo, file, ref, inputs):
        """What the self-hosted runner does: run the job with the context porttrack passed."""
        context = json.loads(inputs["context"])
        env = {f"PORTTRACK_{k.upper()}": (json.dumps(v) if k == "patch_set" else str(v)) for k, v in context.items()}
        document = build(scenario, env).to_json()
        return {"artifacts": {"porttrack-results": {"results.json": document}}, "polls": (1, 1)}

    fake.on_dispatch = runner
    for role in ([], ["--baseline"]):
        out = gw.cli("gate", "run", "0001-pr101", *role, "--poll-interval", "0.01", "--wait", "20")
        assert out.returncode in (0, 7), out.stderr
    assert len(fake.dispatches) == 4
    first = fake.dispatches[0]
    assert first["ref"] == "main" and first["inputs"]["patch"] == "0001-pr101" and first["inputs"]["target"] == "sm_121a"
    assert json.loads(first["inputs"]["context"])["role"] == "candidate"
    assert json.loads(first["inputs"]["runner"]) == ["self-hosted", "sm_121a"]
    run = fake.runs("randomvariable/vllm")[0]
    assert first["inputs"]["request_id"] in run["display_title"]  # how porttrack finds a run without its id
    assert fake.requests("GET", r"/_blobs/artifacts/")  # the artifact was downloaded
    data = gw.check()
    assert data["verdict"] == "pass", data
    record = json.loads(gw.evidence_files()[0].read_text())
    assert record["job"]["kind"] == "workflow" and record["job"]["run_url"].endswith(f"/actions/runs/{record['job']['run_id']}")
    # the run's token never ends up in evidence
    assert fake_token() not in "".join(p.read_text() for p in gw.evidence_files())


def test_workflow_without_results_artifact_cannot_be_evaluated(tmp_path, monkeypatch, fake):
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT))
    gw = GateWorld(tmp_path, gate_kw={"workflow": {"file": "porttrack-gate.yml", "ref": "main"}}, fake=fake)
    fake.add_repo("randomvariable/vllm")
    fake.link_git("randomvariable/vllm", gw.fork)
    add_gate_workflow(fake)
    fake.on_dispatch = lambda *_: {"conclusion": "failure"}
    out = gw.cli("gate", "run", "0001-pr101", "--target", "gfx1151", "--poll-interval", "0.01", "--wait", "20")
    assert out.returncode == 7 and "concluded failure without a 'porttrack-results' artifact" in out.stderr
    assert gw.evidence_files() == []


def test_workflow_without_a_token_is_an_auth_error_and_dispatches_nothing(tmp_path, monkeypatch, fake):
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT))
    gw = GateWorld(tmp_path, gate_kw={"workflow": {"file": "porttrack-gate.yml", "ref": "main"}}, fake=fake)
    fake.add_repo("randomvariable/vllm")
    add_gate_workflow(fake)
    planned = gw.cli("gate", "run", "0001-pr101", "--dry-run", GITHUB_TOKEN=None)
    assert planned.returncode == 0 and "would run: sm_121a: dispatch porttrack-gate.yml@main" in planned.stderr
    out = gw.cli("gate", "run", "0001-pr101", GITHUB_TOKEN=None)
    assert out.returncode == 3 and "dispatching a gate workflow needs a GitHub token" in out.stderr
    assert fake.dispatches == [] and gw.evidence_files() == []


def test_workflow_poll_is_bounded_and_a_late_run_can_be_collected(tmp_path, monkeypatch, fake):
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT))
    gw = GateWorld(tmp_path, gate_kw={"workflow": {"file": "porttrack-gate.yml", "ref": "main"}}, fake=fake)
    fake.add_repo("randomvariable/vllm")
    fake.link_git("randomvariable/vllm", gw.fork)
    add_gate_workflow(fake)
    scenario = json.loads((gw.ws.root / "scenario.json").read_text())

    def slow_runner(repo, file, ref, inputs):
        context = json.loads(inputs["context"])
        env = {f"PORTTRACK_{k.upper()}": (json.dumps(v) if k == "patch_set" else str(v)) for k, v in context.items()}
        return {"polls": (1000, 1000), "artifacts": {"porttrack-results": {"results.json": build(scenario, env).to_json()}}}

    fake.on_dispatch = slow_runner
    out = gw.cli("gate", "run", "0001-pr101", "--target", "sm_121a", "--poll-interval", "0.05", "--wait", "0.5")
    assert out.returncode == 7 and "did not finish within" in out.stderr
    run_id = fake.dispatches[0]["run_id"]
    assert f"--target sm_121a --run-id {run_id}" in out.stderr
    assert gw.evidence_files() == []
    # later: the run finished; collecting it records the evidence without dispatching again
    fake.complete_run(run_id)
    out = gw.cli("gate", "run", "0001-pr101", "--target", "sm_121a", "--run-id", str(run_id), "--poll-interval", "0.01")
    assert out.returncode == 7, out.stderr  # recorded; no baseline yet
    assert len(fake.dispatches) == 1 and len(gw.evidence_files()) == 1


# -- the --json shape, golden ----------------------------------------------------------------------

def test_gate_check_json_is_golden(tmp_path, monkeypatch):
    """A workspace without git: a queued patch and hand-made results, judged against a gate."""
    monkeypatch.setenv("PORTTRACK_ACTOR", "golden")
    handle = make_workspace(tmp_path / "ws", tracks({"command": "python3 -m testing.scenario_job --results {results} --target {target}"}),
                            models=MODELS, proofs=proofs("python3 -m testing.scenario_job"), token=None)
    ws = Workspace(handle.root)
    data = b"From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\nSubject: [PATCH] x\n\n---\n"
    patch = Patch(name="0001-pr101-flashmla", file=patch_file_name("0001-pr101-flashmla", data), sha256=hashlib.sha256(data).hexdigest(),
                  track="mla", pr=101, upstream="vllm-project/vllm", title="FlashMLA", revision=Revision(head="a" * 40, base="b" * 40),
                  hunks_taken=(), hunks_left_out=(), depends_on=(), state="queued", gate="mla")
    queue_mod.save(ws, queue_mod.Queue().add(patch), new_files={patch.file: data})
    config = load_config(ws.tracks_file)
    subject = gates.patch_subject(config, queue_mod.load(ws), patch)
    patch_set = ((patch.name, patch.sha256),)
    def record(role, target, scenario, at):
        built = gaterun.BuiltRef("c" * 40, "d" * 40, "d" * 40, patch_set if role == "candidate" else (), "golden")
        env = gaterun.job_environment(subject, role, target, built, "unused")
        doc = build({"cells": {"models": ["GLM-5.2"], "contexts": [1024, 8192], "batches": [1]}, "reference_backend": "TRITON_MLA",
                     "metrics": GOOD, "numerics": {"max_abs_err": 0.002, "max_rel_err": 0.01}, "graph_replays": 12, **scenario}, env)
        text = doc.to_json().encode()
        return gaterun.ingest(ws, config, subject, role, target, built, text, "golden", {"kind": "command", "exit_code": 0}, now=at)

    record("candidate", "sm_121a", {"overrides": [
        {"when": {"context": 8192, "phase": "warm"}, "set": {"metrics.ttft_ms": 112.5, "graph_replays": 0}},
        {"when": {"context": 8192, "phase": "cold"}, "set": {"jit_compiles_after_warmup": 2, "numerics.max_abs_err": 0.04, "numerics.max_rel_err": 0.2}},
    ]}, "2026-08-20T10:00:00Z")
    record("baseline", "sm_121a", {}, "2026-08-20T10:05:00Z")
    record("candidate", "gfx1151", {"overrides": [{"when": {"context": 8192, "phase": "warm"}, "omit": True}]}, "2026-08-20T11:00:00Z")
    record("baseline", "gfx1151", {"overrides": [{"when": {"role": "baseline"}, "environment": {"driver": "6.15.0"}}]}, "2026-08-20T11:05:00Z")

    out = handle.run_in_process("gate", "check", patch.name, "--json")
    assert out.returncode == 1, out.stderr
    golden = GOLDEN / "gate_check_fail.json"
    if os.environ.get("PORTTRACK_UPDATE_GOLDEN"):
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(out.stdout)
    assert out.stdout == golden.read_text()
    data = json.loads(out.stdout)
    assert data["schema"] == "porttrack/gate-check/v1"
    assert verdicts(data) == {"pass", "fail", "missing", "baseline-other-environment"}
    # the console script, as a separate process, prints the same bytes and exits the same way
    monkeypatch.setenv("PYTHONPATH", str(REPO_ROOT))
    proc = handle.run("gate", "check", patch.name, "--json")
    assert (proc.returncode, proc.stdout) == (1, out.stdout), proc.stderr
    human = handle.run("gate", "check", patch.name)
    assert human.returncode == 1 and "verdict: FAIL — 2 of 8 cells failed" in human.stdout


# -- baseline and candidate interleaved (issue 31 item 9) -------------------------------------------

def _noisy_world(tmp_path, calls, candidate_ttft=100.0):
    gw = GateWorld(tmp_path, gate_kw={"metrics": [{"name": "ttft_ms", "unit": "ms", "direction": "lower", "allowed_regression_pct": 10.0, "key": True}]})
    counter = tmp_path / "calls.txt"
    gw.scenario(metrics={"candidate": {"ttft_ms": candidate_ttft}, "baseline": {"ttft_ms": 100.0}},
                noise={"counter": str(counter), "calls": list(calls), "factor": 3.0})
    return gw


def test_a_noisy_neighbour_during_one_block_fails_a_good_patch_timed_in_blocks(tmp_path):
    """The premise: candidate then baseline, in blocks; the neighbour is busy during the candidate's."""
    gw = _noisy_world(tmp_path, calls=[0])
    for role in ([], ["--baseline"]):
        gw.cli("gate", "run", "0001-pr101", "--target", "sm_121a", *role)
    cells = [c for c in gw.check()["cells"] if c["target"] == "sm_121a"]
    assert cells and {c["verdict"] for c in cells} == {"fail"}


def test_interleaved_rounds_keep_a_noisy_neighbour_from_failing_a_good_patch(tmp_path):
    """The same neighbour, busy for two runs in a row, during `gate run --interleaved 5`: the
    medians of the interleaved rounds pass the good patch; the cells keep the spread."""
    gw = _noisy_world(tmp_path, calls=[1, 2])
    out = gw.cli("gate", "run", "0001-pr101", "--target", "sm_121a", "--interleaved", "5")
    assert "round 5/5" in out.stderr, out.stderr
    cells = [c for c in gw.check()["cells"] if c["target"] == "sm_121a"]
    assert cells and {c["verdict"] for c in cells} == {"pass"}, cells
    metric = next(k for k in cells[0]["checks"] if k["check"] == "metric:ttft_ms")
    assert "medians of 5 interleaved rounds" in metric["detail"]
    records = [json.loads(f.read_text()) for f in gw.evidence_files()]
    assert sorted(r["role"] for r in records) == ["baseline", "candidate"]
    for record in records:
        spread = record["cells"][0]["spread"]["ttft_ms"]
        assert spread["n"] == 5 and record["cells"][0]["metrics"]["ttft_ms"] == 100.0
    assert max(r["cells"][0]["spread"]["ttft_ms"]["max"] for r in records) == 300.0  # the neighbour was seen, and outvoted


def test_interleaved_rounds_still_fail_a_slow_patch(tmp_path):
    gw = _noisy_world(tmp_path, calls=[1, 2], candidate_ttft=130.0)
    gw.cli("gate", "run", "0001-pr101", "--target", "sm_121a", "--interleaved", "5")
    cells = [c for c in gw.check()["cells"] if c["target"] == "sm_121a"]
    assert cells and {c["verdict"] for c in cells} == {"fail"}, cells


def test_a_median_regression_inside_the_rounds_spread_is_not_judged_either_way() -> None:
    """Over the allowance on medians, but a quarter of the candidate's rounds are within it: too noisy to call,
    neither pass nor fail; the same medians with tight rounds fail."""
    metric = types.SimpleNamespace(name="ttft_ms", unit="ms", direction="lower", allowed_regression_pct=10.0, allowed_regression_abs=None)
    wide = {"metrics": {"ttft_ms": 115.0}, "spread": {"ttft_ms": {"n": 5, "min": 90.0, "q1": 95.0, "q3": 140.0, "max": 150.0}}}
    base = {"metrics": {"ttft_ms": 100.0}, "spread": {"ttft_ms": {"n": 5, "min": 90.0, "q1": 96.0, "q3": 130.0, "max": 150.0}}}
    assert gates._metric_check(metric, wide, base).outcome == "missing"
    tight = {"metrics": {"ttft_ms": 115.0}, "spread": {"ttft_ms": {"n": 5, "min": 114.0, "q1": 114.5, "q3": 115.5, "max": 116.0}}}
    narrow = {"metrics": {"ttft_ms": 100.0}, "spread": {"ttft_ms": {"n": 5, "min": 99.0, "q1": 99.5, "q3": 100.5, "max": 101.0}}}
    assert gates._metric_check(metric, tight, narrow).outcome == "fail"
    assert gates._metric_check(metric, {"metrics": {"ttft_ms": 115.0}}, {"metrics": {"ttft_ms": 100.0}}).outcome == "fail"
