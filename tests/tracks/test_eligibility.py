"""Eligibility: which models each track must be proven on.

Expectations come from the request (seed/), not from the implementation: the candidate sets it
names, "Step-3.7-Flash ... separate from sparse-MLA tracks", "Mistral Small 4 only to MLA tracks
after proving ...", "success in one track does not establish support for another".
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from porttrack.common.errors import NotFound
from porttrack.tracks.eligibility import (
    CONDITIONAL,
    ELIGIBLE,
    INELIGIBLE,
    evaluate,
    required_models,
    requirement_failures,
    to_json,
)
from porttrack.tracks.file import load_config, parse_config

REAL = Path(__file__).resolve().parents[2] / "tracks.yaml"

SPEC_TRACKS = {"spec-kernel-warmup", "fused-ar-graph"}  # warmup / AR graph: drafter tracks
SPARSE_MLA_TRACKS = {"fp8-ds-mla-sparse-mtp", "sparse-indexer-skip"}
NATIVE_MTP_CANDIDATES = ["Qwen3.6", "GLM-5.2", "Nemotron-3-Ultra", "Hy3", "Step-3.7-Flash"]
SPARSE_MLA_CANDIDATES = ["DeepSeek-V4-Flash", "GLM-5.2"]
PROOF = "mla-low-rank-accepted"


@pytest.fixture(scope="module")
def config():
    return load_config(REAL)


def verdict(result, model: str, track: str) -> str:
    return result.cell(model, track).verdict


def test_every_track_requires_both_machines(config) -> None:
    result = evaluate(config)
    for entry in result.tracks:
        assert set(entry.targets) == {"sm_121a", "gfx1151"}, entry.track


def test_native_mtp_candidates_join_the_spec_decode_tracks(config) -> None:
    result = evaluate(config)
    for model in NATIVE_MTP_CANDIDATES:
        for track in SPEC_TRACKS:
            assert verdict(result, model, track) == ELIGIBLE, (model, track, result.cell(model, track).reasons)


def test_sparse_mla_candidates_join_the_sparse_mla_tracks(config) -> None:
    result = evaluate(config)
    for model in SPARSE_MLA_CANDIDATES:
        for track in SPARSE_MLA_TRACKS:
            assert verdict(result, model, track) == ELIGIBLE, (model, track, result.cell(model, track).reasons)


def test_the_two_sets_overlap_only_in_glm(config) -> None:
    result = evaluate(config, {PROOF})
    in_both = [
        model
        for model in config.models
        if set(result.tracks_for(model)) & SPEC_TRACKS and set(result.tracks_for(model)) & SPARSE_MLA_TRACKS
    ]
    assert in_both == ["GLM-5.2"]


def test_qwen_is_kept_out_of_the_indexer_skip_by_its_attention(config) -> None:
    cell = evaluate(config).cell("Qwen3.6", "sparse-indexer-skip")
    assert cell.verdict == INELIGIBLE
    assert any(reason.startswith("attention ") and "sparse-mla" in reason for reason in cell.reasons), cell.reasons


def test_step_flash_only_joins_native_mtp_tracks(config) -> None:
    result = evaluate(config, {PROOF})
    assert set(result.tracks_for("Step-3.7-Flash")) == SPEC_TRACKS
    for track in SPARSE_MLA_TRACKS:
        assert verdict(result, "Step-3.7-Flash", track) == INELIGIBLE


def test_mistral_small_4_waits_for_its_proof_on_mla_tracks(config) -> None:
    mla_tracks = [tid for tid, t in config.tracks.items() if t.requires.attention and "mla" in t.requires.attention]
    assert mla_tracks, "the request asks for Mistral Small 4 on MLA tracks: at least one must accept dense MLA"
    before = evaluate(config)
    after = evaluate(config, {PROOF})
    for track in mla_tracks:
        cell = before.cell("Mistral-Small-4", track)
        assert cell.verdict == CONDITIONAL
        assert cell.reasons == (f"pending proof {PROOF}",)
        assert [c.proof for c in cell.conditions] == [PROOF] and not cell.conditions[0].passed
        assert after.cell("Mistral-Small-4", track).verdict == ELIGIBLE
        assert after.cell("Mistral-Small-4", track).conditions[0].passed
        assert "Mistral-Small-4" not in required_models(config, track)
        assert "Mistral-Small-4" in required_models(config, track, {PROOF})
    # only MLA tracks, whatever is proven
    assert set(after.tracks_for("Mistral-Small-4")) == set(mla_tracks)


def test_no_candidate_but_glm_connects_all_four(config) -> None:
    # "Neither architecture match connects all four capabilities into one supported stack."
    result = evaluate(config, {PROOF})
    for model in ("Step-3.7-Flash", "Mistral-Small-4"):
        assert len(result.tracks_for(model)) < len(config.tracks)


def test_required_models_follow_the_verdicts(config) -> None:
    result = evaluate(config)
    for track in config.tracks:
        assert required_models(config, track) == list(result.track(track).eligible)
    with pytest.raises(NotFound):
        required_models(config, "no-such-track")


def test_json_shape_is_stable_and_serialisable(config) -> None:
    data = to_json(evaluate(config, {PROOF}))
    assert json.loads(json.dumps(data)) == data
    assert data["schema"] == "porttrack/eligibility/v1"
    assert data["proofs_passed"] == [PROOF]
    assert [t["track"] for t in data["tracks"]] == list(config.tracks)
    for entry in data["tracks"]:
        assert set(entry) == {"track", "targets", "eligible", "conditional", "ineligible", "cells"}
        assert [c["model"] for c in entry["cells"]] == list(config.models)
        for cell in entry["cells"]:
            assert set(cell) == {"model", "verdict", "reasons", "proofs"}
            assert cell["verdict"] in (ELIGIBLE, CONDITIONAL, INELIGIBLE)
            assert (cell["reasons"] == []) == (cell["verdict"] == ELIGIBLE)
            assert cell["model"] in entry[cell["verdict"]]


# --------------------------------------------------------------------------- each requirement, small files

SMALL = """\
upstream: {repo: vllm-project/vllm}
fork: {repo: randomvariable/vllm}
targets:
  cuda: {name: GB10, vendor: nvidia, arch: sm_121a}
  rocm: {name: Strix Halo, vendor: amd, arch: gfx1151}
models:
  plain: {attention: mha, quantization: bf16, backends: {cuda: FLASH_ATTN, rocm: TRITON_ATTN}}
  drafty: {drafters: [eagle], attention: mha, quantization: fp8, backends: {cuda: FLASH_ATTN, rocm: TRITON_ATTN}}
  cuda-only: {drafters: [eagle], attention: mha, quantization: fp8, backends: {cuda: FLASH_ATTN}}
  gated:
    drafters: [eagle]
    attention: mha
    quantization: fp8
    backends: {cuda: FLASH_ATTN, rocm: TRITON_ATTN}
    conditional: [{proof: p, tracks: [t], reason: because}]
proofs:
  p: {description: a proof}
tracks:
  t:
    title: T
    prs: [1]
    requires:
      drafter: [eagle]
      quantization: [fp8]
      backend: {rocm: [TRITON_ATTN]}
    targets: [cuda, rocm]
report: {repo: randomvariable/vllm}
"""


@pytest.fixture()
def small():
    return parse_config(SMALL, "tracks.yaml")


def test_each_failed_requirement_is_a_reason(small) -> None:
    result = evaluate(small)
    plain = result.cell("plain", "t")
    assert plain.verdict == INELIGIBLE
    assert plain.reasons == ("drafter none not in [eagle]", "quantization bf16 not in [fp8]")
    assert result.cell("cuda-only", "t").reasons == ("no backend selected on rocm",)
    assert result.cell("drafty", "t").verdict == ELIGIBLE


def test_backend_mismatch_names_target_and_backend(small) -> None:
    model = dataclasses.replace(small.models["drafty"], backends={"cuda": "FLASH_ATTN", "rocm": "ROCM_AITER_FA"})
    assert requirement_failures(model, small.tracks["t"]) == ["backend ROCM_AITER_FA on rocm not in [TRITON_ATTN]"]


def test_a_proof_never_overrides_a_failed_requirement(small) -> None:
    model = dataclasses.replace(small.models["gated"], quantization="bf16")
    config = dataclasses.replace(small, models={**small.models, "gated": model})
    cell = evaluate(config, {"p"}).cell("gated", "t")
    assert cell.verdict == INELIGIBLE and cell.reasons == ("quantization bf16 not in [fp8]",)


def test_conditional_then_eligible(small) -> None:
    assert evaluate(small).cell("gated", "t").verdict == CONDITIONAL
    assert evaluate(small, {"p"}).cell("gated", "t").verdict == ELIGIBLE
    assert evaluate(small, {"unrelated"}).cell("gated", "t").verdict == CONDITIONAL


def test_explicit_gate_models_are_filtered_by_eligibility() -> None:
    text = SMALL.replace(
        "    targets: [cuda, rocm]\n",
        "    targets: [cuda, rocm]\n    gate:\n      promote: false\n      job: {command: run}\n"
        "      matrix: {models: [gated, drafty], contexts: [1], batches: [1]}\n",
    )
    config = parse_config(text, "tracks.yaml")
    assert required_models(config, "t") == ["drafty"]
    assert required_models(config, "t", {"p"}) == ["gated", "drafty"]


def test_text_rendering_shows_every_verdict_and_why(config) -> None:
    from porttrack.tracks.eligibility import render_text

    text = render_text(evaluate(config))
    assert text.splitlines()[0].split() == ["model", *config.tracks]
    assert "Mistral-Small-4 / fp8-ds-mla-sparse-mtp: pending proof mla-low-rank-accepted" in text
    assert "proofs passed: none" in text
