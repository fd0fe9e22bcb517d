"""End to end in CI, on the Triton/torch stand-ins: `gate run` runs porttrack.jobs.cells over a
fork's program with the probe inside; a benign patch passes `gate check` and is promoted, a
planted compile after warmup fails the no-JIT check and `promote` refuses. The same flow runs on a
real GPU with real Triton kernels in benchmarks/probe_gpu_demo.py (testing/gate_demo.py)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from testing.gate_demo import GateDemo, failed_checks, pythonpath

ROOT = Path(__file__).resolve().parent.parent
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
