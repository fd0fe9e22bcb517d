"""A stand-in `vllm` command on PATH, for testing porttrack.jobs.vllm without vLLM or a GPU.

`install(folder)` writes `folder/vllm` (a Python script running the stand-in package's CLI,
testing/standins/vllm_bench/vllm/cli.py) and returns the environment that puts it first on PATH
and the stand-in vllm, Triton 3.6 and torch packages first on PYTHONPATH, so the job, the
`vllm` it runs and the numerics runs all import them the way they would import the real ones.
STANDIN_VLLM (see the package's docstring) steers what the stand-in does.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STANDINS = ROOT / "testing" / "standins"


def install(folder: Path, **knobs_env: str) -> dict[str, str]:
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "vllm"
    script.write_text(f"#!{sys.executable}\nimport sys\nfrom vllm.cli import main\nsys.exit(main())\n", encoding="utf-8")
    script.chmod(0o755)
    paths = [STANDINS / "vllm_bench", STANDINS / "triton_3_6", STANDINS / "torch_cuda", ROOT]
    return {"PATH": os.pathsep.join([str(folder), os.environ.get("PATH", "")]),
            "PYTHONPATH": os.pathsep.join(str(p) for p in paths), **knobs_env}
