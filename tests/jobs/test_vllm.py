"""porttrack.jobs.vllm, run as a real subprocess against a stand-in `vllm` on PATH.

CI has no vLLM and no GPU: testing/vllm_standin.py puts a small `vllm` command first on PATH
(`vllm --version`, `vllm bench latency --output-json`, vLLM's `LLM` for the numerics runs) that
loads porttrack.probe the way vLLM loads a general plugin, warms up in
`Worker.compile_or_warm_up_model`, compiles stand-in Triton kernels into TRITON_CACHE_DIR and
replays stand-in CUDA graphs. These tests prove the job's plumbing (phases, cache isolation,
matrix, numerics, refusals, results); `proofs/probe_gpu.py` proves the probe on a real GPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from porttrack.jobs import vllm as job
from porttrack.runner import results
from testing.vllm_standin import install

REPO_ROOT = Path(__file__).resolve().parents[2]
IDENTITY = {"PORTTRACK_TRACK": "mla", "PORTTRACK_SUBJECT": "0001-pr101", "PORTTRACK_ROLE": "candidate",
            "PORTTRACK_TARGET": "sm_121a", "PORTTRACK_REF": "a" * 40, "PORTTRACK_UPSTREAM_BASE": "b" * 40,
            "PORTTRACK_FORK_COMMIT": "c" * 40, "PORTTRACK_PATCH_SET": json.dumps([{"name": "0001-pr101", "sha256": "d" * 64}])}
PLAN = ["--models", "GLM-5.2", "--contexts", "64", "--batches", "1", "--reference-backend", "TRITON_MLA",
        "--backend", "GLM-5.2=FLASHMLA_SPARSE", "--output-len", "4", "--num-iters", "3"]


FLASHMLA_SPARSE_CLASS = "vllm.v1.attention.backends.mla.flashmla_sparse.FlashMLASparseBackend"

def run_job(tmp_path: Path, *args: str, knobs: dict | None = None, **env: str) -> tuple[subprocess.CompletedProcess, dict | None]:
    out = tmp_path / "results.json"
    full = {**os.environ, **install(tmp_path / "bin"), **IDENTITY, "STANDIN_VLLM": json.dumps(knobs or {}),
            "PORTTRACK_RESULTS": str(out), **env}
    full.pop("PORTTRACK_PROBE", None)
    proc = subprocess.run([sys.executable, "-m", "porttrack.jobs.vllm", *args], cwd=tmp_path, env=full,
                          capture_output=True, text=True, timeout=240)
    document = results.parse(out.read_bytes(), "results") if out.is_file() else None
    return proc, document


def cell(document: dict, **match) -> dict:
    found = [c for c in document["cells"] if all(c[k] == v for k, v in match.items())]
    assert len(found) == 1, (match, document["cells"])
    return found[0]


def test_each_cell_is_measured_cold_then_warm_with_its_own_caches(tmp_path):
    proc, doc = run_job(tmp_path, *PLAN, "--contexts", "64,128", "--batches", "1,8")
    assert proc.returncode == 0, proc.stderr
    # the matrix: 1 model x 2 contexts x 2 batches x cold and warm, each phase its own cell
    assert sorted((c["context"], c["batch"], c["phase"]) for c in doc["cells"]) == sorted(
        (ctx, b, p) for ctx in (64, 128) for b in (1, 8) for p in ("cold", "warm"))
    for ctx in (64, 128):
        for batch in (1, 8):
            cold, warm = cell(doc, context=ctx, batch=batch, phase="cold"), cell(doc, context=ctx, batch=batch, phase="warm")
            # cold: empty caches, so the kernels were compiled and stored; warm: the same caches answered
            assert cold["metrics"]["cache_entries_written"] > 0 and cold["metrics"]["served_from_cache"] == 0
            assert warm["metrics"]["cache_entries_written"] == 0 and warm["metrics"]["served_from_cache"] > 0
            for c in (cold, warm):
                assert c["backend"] == "FLASHMLA_SPARSE" and c["jit_compiles_after_warmup"] == 0
                assert c["backend_used"] == {"attention": {"Attention": ["FLASHMLA_SPARSE"]}, "vllm": "0.33.0+standin",
                                         "attention_classes": {"Attention": [FLASHMLA_SPARSE_CLASS]}}
                assert c["numerics"]["backends_used"] == {"candidate": {"Attention": ["FLASHMLA_SPARSE"]}, "reference": {"Attention": ["TRITON_MLA"]}}
                assert c["graph_replays"] == 4 * 4  # output_len 4 decode steps x 4 measured batches
                m = c["metrics"]
                assert m["startup_time"] >= 0 and m["first_request_latency"] > 0 and m["median_latency"] > 0
                assert m["decode_throughput"] == pytest.approx(batch * 4 / (m["median_latency"] / 1000), rel=1e-3)
    env = doc["environment"]
    assert env["extra"]["vllm"] == "0.33.0+standin" and env["torch"] == "2.9.0+standin" and env["triton"] == "3.6.0-standin"
    assert env["fork_commit"] == "c" * 40 and env["patch_set"] == [{"name": "0001-pr101", "sha256": "d" * 64}]
    assert doc["commits"]["ref_under_test"] == "a" * 40 and doc["job"]["runner"] == "porttrack.jobs.vllm"


def test_a_shape_warmup_never_saw_is_a_jit_compile_after_warmup(tmp_path):
    proc, doc = run_job(tmp_path, *PLAN, "--batches", "1,2", knobs={"warm_batches": [1]})
    assert proc.returncode == 0, proc.stderr
    assert cell(doc, batch=1, phase="warm")["jit_compiles_after_warmup"] == 0
    late = cell(doc, batch=2, phase="warm")
    assert late["jit_compiles_after_warmup"] == 1 and late["graph_replays"] == 0  # no graph for B=2: eager
    assert "decode_kernel [decode,B=2]" in proc.stderr


def test_numerics_compare_the_backend_with_the_named_reference(tmp_path):
    proc, doc = run_job(tmp_path, *PLAN, knobs={"logprob_error": {"FLASHMLA_SPARSE": 0.05}})
    assert proc.returncode == 0, proc.stderr
    numerics = cell(doc, phase="cold")["numerics"]
    assert numerics["reference_backend"] == "TRITON_MLA"
    assert numerics["max_abs_err"] == pytest.approx(0.05) and numerics["samples"] == 4 * 16
    # the same backend on both sides: no error at all
    proc, doc = run_job(tmp_path, *PLAN, knobs={"logprob_error": {"TRITON_MLA": 0.05, "FLASHMLA_SPARSE": 0.05}})
    assert cell(doc, phase="warm")["numerics"]["max_abs_err"] == 0.0


def test_a_cell_that_failed_is_not_written_and_is_named(tmp_path):
    proc, doc = run_job(tmp_path, *PLAN, "--models", "GLM-5.2,Qwen3.6", "--backend", "Qwen3.6=FLASH_ATTN",
                        "--model-path", "Qwen3.6=/models/qwen", knobs={"missing_models": ["/models/qwen"]})
    assert proc.returncode == 0, proc.stderr
    assert {c["model"] for c in doc["cells"]} == {"GLM-5.2"}
    assert "not writing Qwen3.6 ctx=64 batch=1 cold" in proc.stderr and "vllm bench latency exited" in proc.stderr
    assert "1 not measured" not in proc.stderr and "2 not measured" in proc.stderr


def test_without_the_probe_inside_nothing_is_written(tmp_path):
    """vLLM that did not load the plugin: compiles after warmup and graph replays are unknown, so
    the cells are refused rather than written as 0; with no cell left, no results file at all."""
    proc, doc = run_job(tmp_path, *PLAN, knobs={"no_plugins": True})
    assert proc.returncode == 3 and doc is None
    # nothing inside the engine recorded what it ran either: refused before the probe's log is read
    assert "refused (backend-not-recorded)" in proc.stderr and "no cell was measured" in proc.stderr


def test_every_run_failing_writes_no_results(tmp_path):
    proc, doc = run_job(tmp_path, *PLAN, knobs={"fail": "bench"})
    assert proc.returncode == 3 and doc is None
    assert "CUDA error: out of memory" in proc.stderr


def test_the_gate_it_was_asked_for_must_be_the_one_porttrack_runs(tmp_path):
    proc, doc = run_job(tmp_path, *PLAN, "--gate", "mtp")
    assert proc.returncode == 2 and doc is None
    assert "asked for the gate of mtp, but porttrack is running the gate of mla" in proc.stderr


def test_no_vllm_installed_is_a_clear_error(tmp_path):
    proc, doc = run_job(tmp_path, *PLAN, "--vllm", str(tmp_path / "no-such-vllm"))
    assert proc.returncode == 2 and doc is None and "cannot start the vllm --version" in proc.stderr


def test_without_a_workspace_the_plan_must_be_given(tmp_path):
    proc, doc = run_job(tmp_path, "--contexts", "64")
    assert proc.returncode == 2 and "no tracks.yaml" in proc.stderr


def test_the_plan_of_every_shipped_gate_comes_from_tracks_yaml():
    """The shipped tracks.yaml runs this job for every gate, and each gate resolves to a plan."""
    import yaml

    doc = yaml.safe_load((REPO_ROOT / "tracks.yaml").read_text())
    gates = {name: t["gate"] for name, t in doc["tracks"].items()} | {name: p["gate"] for name, p in doc["proofs"].items()}
    for name, gate in gates.items():
        assert gate["job"]["command"].startswith(f"python -m porttrack.jobs.vllm --gate {name} "), name
        for target in ("sm_121a", "gfx1151"):
            plan = job.plan_from_workspace(REPO_ROOT, name, target)
            assert plan.contexts == tuple(gate["matrix"]["contexts"]) and plan.batches == tuple(gate["matrix"]["batches"])
            assert plan.reference_backend == gate["reference_backend"] and plan.arch == target
            assert set(plan.backends) == set(plan.models), (name, target)
            assert plan.models or name == "mla-low-rank-accepted"
    warmup = job.plan_from_workspace(REPO_ROOT, "spec-kernel-warmup", "gfx1151")
    assert "GLM-5.2" in warmup.models and warmup.backends["GLM-5.2"] == "ROCM_AITER_MLA_SPARSE"


def test_numerics_stop_comparing_where_the_greedy_outputs_part():
    candidate = {"token_ids": [[1, 2, 3]], "logprobs": [[-0.1, -0.2, -9.0]]}
    reference = {"token_ids": [[1, 5, 3]], "logprobs": [[-0.1, -0.25, -0.3]]}
    out = job.numerics_errors(candidate, reference, "TRITON_MLA")
    assert out == {"reference_backend": "TRITON_MLA", "max_abs_err": 0.05, "max_rel_err": 0.2, "samples": 2}


# -- the backend: asked for the way vLLM reads it, recorded from inside the engine --------------

def test_the_backend_is_asked_for_by_the_engine_argument_and_recorded_as_the_engine_ran_it(tmp_path):
    """Like vLLM 0.33 the stand-in ignores VLLM_ATTENTION_BACKEND (removed upstream, #32812) and
    reads `--attention-backend` / `LLM(attention_backend=...)`: the cell records what it asked
    for, as the engine itself reported it, even with the old variable set to something else."""
    proc, doc = run_job(tmp_path, *PLAN, VLLM_ATTENTION_BACKEND="FLASH_ATTN")
    assert proc.returncode == 0, proc.stderr
    for c in doc["cells"]:
        assert c["backend"] == "FLASHMLA_SPARSE"
        assert c["backend_used"] == {"attention": {"Attention": ["FLASHMLA_SPARSE"]}, "vllm": "0.33.0+standin",
                                         "attention_classes": {"Attention": [FLASHMLA_SPARSE_CLASS]}}
        assert c["numerics"]["backends_used"]["reference"] == {"Attention": ["TRITON_MLA"]}
    assert "backend by engine-argument" in doc["job"]["notes"]


def test_a_cell_whose_engine_ran_another_backend_is_refused(tmp_path):
    proc, doc = run_job(tmp_path, *PLAN, knobs={"selects": "TRITON_ATTN"})
    assert proc.returncode == 3 and doc is None
    assert ("refused (backend-mismatch): vllm bench latency asked for FLASHMLA_SPARSE, but vLLM 0.33.0+standin ran "
            "Attention on TRITON_ATTN") in proc.stderr


def test_numerics_whose_reference_run_ran_another_backend_are_refused(tmp_path):
    """Asked for the reference, the engine ran the candidate's backend: comparing those would be a
    backend compared with itself, within any tolerance whatever the kernel computes."""
    proc, doc = run_job(tmp_path, *PLAN, knobs={"selects": {"TRITON_MLA": "FLASHMLA_SPARSE"}, "logprob_error": {"FLASHMLA_SPARSE": 0.5}})
    assert proc.returncode == 3 and doc is None
    assert "refused (backend-mismatch): the reference numerics run asked for TRITON_MLA, but vLLM 0.33.0+standin ran Attention on FLASHMLA_SPARSE" in proc.stderr


def test_the_same_backend_on_both_sides_is_compared_when_the_gate_names_it(tmp_path):
    proc, doc = run_job(tmp_path, *PLAN, "--backend", "GLM-5.2=TRITON_MLA")
    assert proc.returncode == 0, proc.stderr
    used = cell(doc, phase="cold")["numerics"]["backends_used"]
    assert used["candidate"] == used["reference"] == {"Attention": ["TRITON_MLA"]}


def test_the_backend_is_recorded_per_layer_kind(tmp_path):
    proc, doc = run_job(tmp_path, *PLAN, knobs={"layers": {"MLAAttention": 3, "Indexer": 1}})
    assert proc.returncode == 0, proc.stderr
    assert cell(doc, phase="warm")["backend_used"]["attention"] == {"Indexer": ["FLASHMLA_SPARSE"], "MLAAttention": ["FLASHMLA_SPARSE"]}


def test_an_older_vllm_is_asked_by_the_environment_variable_it_reads(tmp_path):
    proc, doc = run_job(tmp_path, *PLAN, knobs={"reads_env": True})
    assert proc.returncode == 0, proc.stderr
    assert {c["backend_used"]["attention"]["Attention"][0] for c in doc["cells"]} == {"FLASHMLA_SPARSE"}
    assert "backend by environment-variable" in doc["job"]["notes"]


def test_a_vllm_offering_no_way_to_choose_the_backend_is_refused_with_the_reason(tmp_path):
    proc, doc = run_job(tmp_path, *PLAN, knobs={"no_interface": True})
    assert proc.returncode == 3 and doc is None
    assert "refused (no-backend-interface: vLLM 0.33.0+standin has neither the engine argument attention_backend" in proc.stderr
    assert "vllm bench latency" not in proc.stderr  # nothing was run on whatever vLLM would pick


def test_a_backend_vllm_does_not_know_is_refused_before_anything_runs(tmp_path):
    proc, doc = run_job(tmp_path, *PLAN, "--models", "GLM-5.2,Qwen3.6", "--backend", "Qwen3.6=NOT_A_BACKEND")
    assert proc.returncode == 0, proc.stderr
    assert {c["model"] for c in doc["cells"]} == {"GLM-5.2"}
    assert "refused (unknown-backend: NOT_A_BACKEND is not an attention backend of vLLM 0.33.0+standin" in proc.stderr
    assert "refused Qwen3.6: unknown-backend: NOT_A_BACKEND" in doc["job"]["notes"]


def test_the_backend_decision_against_an_independent_truth_over_seeded_cases(tmp_path):
    """testing/backend_oracle.py: random interfaces, engines that run what they like, layer kinds
    and plans; the job writes exactly the cells that truly measured their claim, each with what
    the engine ran. (proofs/backend_oracle.py runs more cases and prints the table.)"""
    from testing.backend_oracle import cases, confusion, judge, run

    rows = [judge(case, run(case, tmp_path / str(i))[1]) for i, case in enumerate(cases(seed=2222, count=10))]
    table = confusion(rows)
    print(table)
    assert all(t == w and r for t, w, r in rows), table
    assert {t for t, _, _ in rows} == {True, False}  # both kinds of case were drawn
