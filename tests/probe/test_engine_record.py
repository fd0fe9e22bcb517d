"""Issue 31, item 2: a backend's identity is its class, not `get_name()`. vLLM 0.33's
`AttentionBackendEnum.ROCM_AITER_FA` class reports `get_name() == "FLASH_ATTN"`; the engine record
keeps the class path and resolves it to the enum member with the engine's own enum
(`member.get_path()`), so the shipped tracks.yaml's Hy3 cell on gfx1151 (ROCM_AITER_FA) is confirmed
by a run of the AITER class and refused by a run of the FLASH_ATTN class, whatever the names say.
The same against the real vllm==0.33.0 enum: proofs/vllm_real_check.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from porttrack.probe import engine_record
from porttrack.prove.gates import MISSING, PASS, _backend_checks
from porttrack.tracks.file import load_config

ROOT = Path(__file__).resolve().parents[2]
STANDINS = ROOT / "testing" / "standins"


def record_of(tmp_path: Path, backend: str) -> dict:
    """What porttrack's plugin records in a (stand-in) vLLM worker whose layers run `backend`'s class."""
    out = tmp_path / f"{backend}.jsonl"
    env = {**os.environ, engine_record.ENV: str(out), "PYTHONPATH": os.pathsep.join(
        [str(STANDINS / "vllm_bench"), str(STANDINS / "triton_3_6"), str(STANDINS / "torch_cuda"), str(ROOT)])}
    program = ("from vllm.v1.worker.gpu_worker import Worker\n"
               "from porttrack.probe import engine_record\n"
               f"w = Worker(backend={backend!r})\n"
               "layer = next(iter(w.vllm_config.compilation_config.static_forward_context.values()))\n"
               "print(layer.get_attn_backend().get_name())\n"
               "engine_record.record_worker(w)\n")
    proc = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    (entry,) = engine_record.read(out)
    entry["get_name"] = proc.stdout.strip()
    return entry


def test_rocm_aiter_fa_and_flash_attn_are_recorded_apart_though_both_say_flash_attn(tmp_path: Path) -> None:
    aiter, flash = record_of(tmp_path, "ROCM_AITER_FA"), record_of(tmp_path, "FLASH_ATTN")
    assert aiter["get_name"] == flash["get_name"] == "FLASH_ATTN"  # the name vLLM reports: not an identity
    assert aiter["attention"] == {"Attention": ["ROCM_AITER_FA"]} and flash["attention"] == {"Attention": ["FLASH_ATTN"]}
    assert aiter["attention_classes"] == {"Attention": ["vllm.v1.attention.backends.rocm_aiter_fa.AiterFlashAttentionBackend"]}
    assert flash["attention_classes"] == {"Attention": ["vllm.v1.attention.backends.flash_attn.FlashAttentionBackend"]}


@pytest.mark.parametrize("ran, outcome", [("ROCM_AITER_FA", PASS), ("FLASH_ATTN", MISSING)])
def test_the_shipped_hy3_gfx1151_cell_is_confirmed_by_the_aiter_class_only(tmp_path: Path, ran: str, outcome: str) -> None:
    claimed = load_config(ROOT / "tracks.yaml").models["Hy3"].backends["gfx1151"]
    assert claimed == "ROCM_AITER_FA"
    entry = record_of(tmp_path, ran)
    cell = {"backend": claimed, "backend_used": {"attention": entry["attention"], "attention_classes": entry["attention_classes"]}}
    (check,) = _backend_checks(types.SimpleNamespace(reference_backend=None), cell)
    assert check.outcome == outcome, check


def test_a_class_no_member_names_is_recorded_by_its_path_and_confirms_nothing(tmp_path: Path) -> None:
    entry = record_of(tmp_path, "AITER_TRITON_MLA")  # what ROCM_AITER_TRITON_MLA's class calls itself: no member
    assert entry["attention"] == {"Attention": ["vllm.standin.AITER_TRITON_MLABackend"]}
    for claimed in ("AITER_TRITON_MLA", "ROCM_AITER_TRITON_MLA", "TRITON_MLA"):
        cell = {"backend": claimed, "backend_used": {"attention": entry["attention"]}}
        assert [c.outcome for c in _backend_checks(types.SimpleNamespace(reference_backend=None), cell)] == [MISSING]


def test_the_record_validates_against_the_results_schema(tmp_path: Path) -> None:
    entry = record_of(tmp_path, "ROCM_AITER_FA")
    doc = json.loads(Path(ROOT / "porttrack" / "schemas" / "results.schema.json").read_text())
    used = doc["$defs"]["cell"]["properties"]["backend_used"]
    assert set(used["properties"]) >= {"attention", "attention_classes", "vllm"}
    import jsonschema

    jsonschema.validate({k: entry[k] for k in ("attention", "attention_classes", "vllm")}, {**used, "$defs": doc["$defs"]})


def test_a_claim_with_no_record_of_what_ran_is_missing_evidence() -> None:
    cell = {"backend": "ROCM_AITER_FA", "backend_used": None}
    (check,) = _backend_checks(types.SimpleNamespace(reference_backend=None), cell)
    assert check.outcome == MISSING and "not recorded" in check.detail
