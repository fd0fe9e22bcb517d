"""End to end in CI, on the Triton/torch stand-ins: `gate run` runs porttrack.jobs.cells over a
fork's program with the probe inside; a benign patch passes `gate check` and is promoted, a
planted compile after warmup fails the no-JIT check and `promote` refuses. The same flow runs on a
real GPU with real Triton kernels in proofs/probe_gpu_demo.py (testing/gate_demo.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from testing.gate_demo import GateDemo, failed_checks, pythonpath

ROOT = Path(__file__).resolve().parents[2]
STANDINS = ROOT / "testing" / "standins"


def test_a_planted_compile_after_warmup_fails_the_gate_and_promotion_is_refused(tmp_path: Path) -> None:
    program = (f"{sys.executable} {STANDINS / 'serve_standin.py'} --config {{workdir}}/demo/config.json "
               "--context {{context}} --batch {{batch}} --output {{output}}")
    demo = GateDemo(tmp_path, files={"demo/config.json": json.dumps({"compile_after_warmup": False}) + "\n"},
                    benign={"demo/notes.md": "decode blocks of 128 tokens\n"},
                    planted={"demo/config.json": json.dumps({"compile_after_warmup": True}) + "\n"},
                    program=program, contexts=[256, 1024], batches=[4],
                    env={"PYTHONPATH": pythonpath(STANDINS / "triton_3_6", STANDINS / "torch_cuda", ROOT), "STANDIN_GPU_ARCH": "sm_90"})
    good = demo.queue(101, "decode-block")
    demo.gate_both(good)
    check = demo.porttrack("gate", "check", good, "--json")
    assert check.returncode == 0, check.stdout[-2000:] + check.stderr
    data = json.loads(check.stdout)
    assert data["counts"]["pass"] == 4  # 2 contexts × 1 batch × cold and warm, on the one target
    # each cell names its backend and what the program said it ran; the human output shows both
    assert {(c["backend"], json.dumps(c["backend_used"])) for c in data["cells"]} == {("TRITON", '{"decode_attention_kernel": ["TRITON"]}')}
    assert demo.porttrack("gate", "check", good).stdout.count("[backend TRITON (ran decode_attention_kernel=TRITON)]") == 4
    assert demo.porttrack("promote", good).returncode == 0

    planted = demo.queue(102, "side-requests")
    demo.gate_both(planted)
    check = demo.porttrack("gate", "check", planted, "--json")
    assert check.returncode == 1, check.stderr
    assert failed_checks(json.loads(check.stdout)) == {"no-jit-after-warmup"}
    refused = demo.porttrack("promote", planted)
    assert refused.returncode == 1 and "JIT compile after warmup" in refused.stderr



def _demo(tmp_path: Path, planted: dict, graphs: int = 1) -> GateDemo:
    program = (f"{sys.executable} {STANDINS / 'serve_standin.py'} --config {{workdir}}/demo/config.json "
               "--context {{context}} --batch {{batch}} --output {{output}}")
    config = {"compile_after_warmup": False, "graphs": graphs}
    return GateDemo(tmp_path, files={"demo/config.json": json.dumps(config) + "\n"},
                    benign={"demo/notes.md": "decode blocks of 128 tokens\n"},
                    planted={"demo/config.json": json.dumps({**config, **planted}) + "\n"},
                    program=program, contexts=[256], batches=[4],
                    env={"PYTHONPATH": pythonpath(STANDINS / "triton_3_6", STANDINS / "torch_cuda", ROOT), "STANDIN_GPU_ARCH": "sm_90"})


def test_a_clean_patch_replaying_3000_graphs_is_promoted_and_a_graph_captured_after_warmup_is_refused(tmp_path: Path) -> None:
    """Issue 31, items 3 and 6 through `gate run` -> `gate check` -> `promote`: a clean patch
    replaying 3,000 graphs is measured whole (the counts are several records, never cut) and
    promoted; a graph captured after warmup fails no-jit-after-warmup and promotion is refused."""
    demo = _demo(tmp_path, {"graphs": 1, "late_capture": True}, graphs=3000)
    good = demo.queue(101, "decode-block")
    demo.gate_both(good)
    check = json.loads(demo.porttrack("gate", "check", good, "--json").stdout)
    assert check["counts"]["pass"] == 2, check
    assert demo.porttrack("promote", good).returncode == 0
    late = demo.queue(102, "side-requests")
    demo.gate_both(late)
    check = demo.porttrack("gate", "check", late, "--json")
    assert check.returncode == 1 and failed_checks(json.loads(check.stdout)) == {"no-jit-after-warmup"}
    assert demo.porttrack("promote", late).returncode == 1


@pytest.mark.parametrize("planted", ["eager_after_replay", "damaged_log"])
def test_eager_work_in_a_graphed_region_fails_and_a_damaged_probe_log_is_never_a_pass(tmp_path: Path, planted: str) -> None:
    """Items 7 and 5: a step that replays once and then runs eagerly fails graph-replay; a probe-log
    line cut by a short write leaves the cell not measured (the job writes no cell: missing)."""
    demo = _demo(tmp_path, {planted: True})
    name = demo.queue(102, "side-requests")
    demo.gate_both(name)
    check = demo.porttrack("gate", "check", name, "--json")
    data = json.loads(check.stdout)
    if planted == "eager_after_replay":
        assert check.returncode == 1 and failed_checks(data) == {"graph-replay"}, data
        assert any("eager step" in c["reason"] for c in data["cells"])
    else:
        assert check.returncode not in (0, 1) and data["counts"].get("pass", 0) == 0 and not failed_checks(data), data
    assert demo.porttrack("promote", name).returncode != 0
