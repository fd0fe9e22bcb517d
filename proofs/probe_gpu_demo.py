"""End to end on a real GPU: porttrack gates two queued patches with the probe inside the job.

    python3 proofs/probe_gpu_demo.py [--planted bf16|autotune] [--out FILE]

A tiny fork (testing/gate_demo.py) whose `demo/` is a decode server in miniature on real Triton
kernels (`probe_gpu_kernels.py` as demo/kernels.py, `probe_gpu_serve.py` as demo/serve.py), a
workspace whose tracks.yaml has one target for this machine and a gate with every assertion
(numerics against a named reference backend, graph replay, no JIT after warmup, cold and warm,
allowed regressions), run by `porttrack.jobs.cells` with the probe inside each process.

1. PR 101 (benign: attention over blocks of 128 tokens instead of 64) is queued; `gate run`
   (candidate and baseline) records evidence; `gate check` must pass and `promote` succeed.
2. PR 102 (planted: also serves a side request in bf16, a dtype warmup never saw; with
   `--planted autotune`, a gather of a row width warmup never saw, which makes the autotuned gather
   benchmark its configs again without compiling anything) is queued on top; `gate check` must fail
   on no-JIT-after-warmup, and `promote` must refuse.

CI runs the same flow on stand-ins (tests/jobs/test_cells_gate_e2e.py). Writes the JSON (each command's
exit code and the gate checks, with the machine's fingerprint). Exits 1 unless both outcomes hold.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from porttrack.runner.results import detect_environment  # noqa: E402
from testing.gate_demo import GateDemo, failed_checks, pythonpath  # noqa: E402
from testing.gitfixtures import isolated_git_env  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path)
    parser.add_argument("--planted", choices=["bf16", "autotune"], default="bf16",
                        help="what PR 102 plants: a bf16 side request (a compile after warmup), or a gather of a row "
                             "width warmup never saw (autotuning after warmup, no compile)")
    args = parser.parse_args()
    args.out = args.out or HERE / "results" / ("probe_gpu_demo.json" if args.planted == "bf16" else "probe_gpu_demo_autotune.json")
    root = Path(tempfile.mkdtemp(prefix="probe-gpu-demo-"))
    os.environ.update(isolated_git_env(root / "home"))
    serve = (HERE / "probe_gpu_serve.py").read_text()
    kernels = (HERE / "probe_gpu_kernels.py").read_text()
    program = f"{sys.executable} {{workdir}}/demo/serve.py --context {{{{context}}}} --batch {{{{batch}}}} --output {{{{output}}}}"
    demo = GateDemo(
        root, files={"demo/serve.py": serve, "demo/kernels.py": kernels},
        benign={"demo/kernels.py": kernels.replace("bug: bool = False, block_t: int = 64", "bug: bool = False, block_t: int = 128")},
        planted={"demo/serve.py": serve.replace("SIDE_REQUEST_DTYPE = None", 'SIDE_REQUEST_DTYPE = "bfloat16"')
                 if args.planted == "bf16" else serve.replace("SIDE_GATHER_WIDTH = None", "SIDE_GATHER_WIDTH = 192")},
        program=program, contexts=[256, 1024], batches=[4], env={"PYTHONPATH": pythonpath(ROOT)},
    )
    good = demo.queue(101, "decode-block")
    demo.gate_both(good, say=True)
    check_good = demo.porttrack("gate", "check", good, "--json", say=True)
    promote_good = demo.porttrack("promote", good, say=True)

    planted = demo.queue(102, "side-requests")
    demo.gate_both(planted, say=True)
    check_bad = demo.porttrack("gate", "check", planted, "--json", say=True)
    promote_bad = demo.porttrack("promote", planted, say=True)

    bad_failed = failed_checks(json.loads(check_bad.stdout)) if check_bad.stdout.strip().startswith("{") else set()
    good_ok = check_good.returncode == 0 and promote_good.returncode == 0
    bad_ok = check_bad.returncode == 1 and "no-jit-after-warmup" in bad_failed and promote_bad.returncode == 1
    print(f"{'PASS' if good_ok else 'FAIL'}  the benign patch: gate check exit {check_good.returncode}, promote exit {promote_good.returncode}")
    print(f"{'PASS' if bad_ok else 'FAIL'}  the planted post-warmup shape: gate check exit {check_bad.returncode} "
          f"(failed checks: {sorted(bad_failed)}), promote exit {promote_bad.returncode}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"schema": "porttrack/probe-gpu-demo/v1", "passed": good_ok and bad_ok, "planted": args.planted,
                                    "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                    "machine": detect_environment(), "steps": demo.log}, indent=2, sort_keys=True) + "\n")
    print(f"wrote {args.out}")
    return 0 if good_ok and bad_ok else 1


if __name__ == "__main__":
    sys.exit(main())
