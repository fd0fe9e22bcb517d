"""`porttrack.jobs.cells`: every matrix cell measured cold and warm with the probe inside, as real
subprocesses (the job, and the program under test on the Triton/torch stand-ins of
testing/standins/), and a results file porttrack's own strict reader accepts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from porttrack.runner import results as results_mod

ROOT = Path(__file__).resolve().parents[2]
STANDINS = ROOT / "testing" / "standins"
SERVE = STANDINS / "serve_standin.py"
SHA = "a" * 40


def run_job(tmp_path: Path, *program_flags: str, contexts: str = "256,1024", batches: str = "4",
            phases: str = "cold,warm") -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path / "results.json"
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join([str(STANDINS / "triton_3_6"), str(STANDINS / "torch_cuda"), str(ROOT)]),
           "PORTTRACK_TRACK": "decode", "PORTTRACK_SUBJECT": "0001-pr101", "PORTTRACK_ROLE": "candidate",
           "PORTTRACK_TARGET": "h200", "PORTTRACK_REF": SHA, "PORTTRACK_UPSTREAM_BASE": SHA,
           "PORTTRACK_FORK_COMMIT": SHA, "PORTTRACK_PATCH_SET": "[]", "PORTTRACK_RESULTS": str(out)}
    argv = [sys.executable, "-m", "porttrack.jobs.cells", "--model", "demo-decoder", "--contexts", contexts,
            "--batches", batches, "--phases", phases, "--", sys.executable, str(SERVE),
            "--context", "{context}", "--batch", "{batch}", "--output", "{output}", *program_flags]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)
    return proc, out


def cells_of(out: Path) -> list[dict]:
    document = results_mod.parse(out.read_bytes(), "results")  # porttrack's own strict reader
    return document["cells"]


def test_every_cell_is_measured_cold_and_warm_from_inside_the_process(tmp_path: Path) -> None:
    proc, out = run_job(tmp_path)
    assert proc.returncode == 0, proc.stderr
    cells = cells_of(out)
    assert sorted((c["context"], c["phase"]) for c in cells) == [(256, "cold"), (256, "warm"), (1024, "cold"), (1024, "warm")]
    for cell in cells:
        assert (cell["graph_replays"], cell["jit_compiles_after_warmup"]) == (7, 0)
        assert cell["numerics"]["reference_backend"] == "torch-fp32"
        assert cell["metrics"]["decode_step_us"] == 200.0


def test_a_compile_after_warmup_is_counted_in_the_cell(tmp_path: Path) -> None:
    proc, out = run_job(tmp_path, "--compile-after-warmup", contexts="256")
    assert proc.returncode == 0, proc.stderr
    assert {c["jit_compiles_after_warmup"] for c in cells_of(out)} == {1}
    assert "compiled after warmup: decode_attention_kernel [bf16,fp16,B=4,T=256]" in proc.stderr


def test_offender_keys_are_printed_whole_not_cut_at_80_characters(tmp_path: Path) -> None:
    """Issue 31 item 11: three autotune configs whose keys agree on their first 100 characters
    print three distinct keys (the line once cut each key at 80 characters, so all three read alike)."""
    common = "[('*fp16', 'D'), ('*fp16', 'D'), ('*fp32', 'D'), ('i32', 'D'), ('i32', ''), ('i32', '')], " + "x" * 20
    keys = [f"{common}BLOCK_M={m},BLOCK_N=64,num_warps=4,num_stages=3" for m in (32, 64, 128)]
    assert len({k[:80] for k in keys}) == 1 and len(common) > 100
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"late_keys": keys}))
    proc, out = run_job(tmp_path, "--config", str(config), contexts="256", phases="warm")
    assert proc.returncode == 0, proc.stderr
    assert {c["jit_compiles_after_warmup"] for c in cells_of(out)} == {3}
    lines = [line for line in proc.stderr.splitlines() if "compiled after warmup: " in line]
    assert lines
    for line in lines:  # one per run of the cell (cold, then warm)
        for key in keys:
            assert f"decode_attention_kernel [{key}] (triton)" in line


def test_cold_and_warm_share_one_cells_caches_and_only_that_cells(tmp_path: Path) -> None:
    from porttrack.jobs.cells import cache_env

    first, second = cache_env(tmp_path / "a"), cache_env(tmp_path / "b")
    assert set(first) == {"TRITON_CACHE_DIR", "TORCHINDUCTOR_CACHE_DIR", "VLLM_CACHE_ROOT"}
    assert cache_env(tmp_path / "a") == first  # the warm run gets the same folders
    assert not set(first.values()) & set(second.values())
    assert all(Path(p).is_dir() and not any(Path(p).iterdir()) for p in first.values())


def test_a_failed_run_is_not_written(tmp_path: Path) -> None:
    proc, out = run_job(tmp_path, "--fail", contexts="256")
    assert proc.returncode == 1 and not out.exists(), proc.stderr  # nothing measured: nothing written
    assert "not writing" in proc.stderr and "exited 3" in proc.stderr and "out of memory" in proc.stderr


def test_a_program_without_the_probe_is_not_written(tmp_path: Path) -> None:
    proc, out = run_job(tmp_path, "--no-probe", contexts="256")
    assert proc.returncode == 1 and not out.exists(), proc.stderr
    assert "probe wrote no event log" in proc.stderr


def test_only_the_warm_phase_still_runs_cold_first(tmp_path: Path) -> None:
    proc, out = run_job(tmp_path, contexts="256", phases="warm")
    assert proc.returncode == 0, proc.stderr
    assert [c["phase"] for c in cells_of(out)] == ["warm"]


@pytest.mark.parametrize("bad", [["--contexts", "0"], ["--contexts", "x"]])
def test_bad_matrix_values_are_usage_errors(tmp_path: Path, bad: list[str]) -> None:
    argv = [sys.executable, "-m", "porttrack.jobs.cells", "--model", "m", "--contexts", "1", "--batches", "1", *bad, "--", "true"]
    proc = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert proc.returncode == 2
