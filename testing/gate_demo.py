"""A tiny fork whose program is gated end to end by porttrack, with the probe inside the job.

Used by `proofs/probe_gpu_demo.py` on a real GPU (real Triton kernels) and by
`tests/jobs/test_cells_gate_e2e.py` in CI (the Triton/torch stand-ins): an upstream whose `demo/` holds
the program under test, PR 101 (benign) and PR 102 (planted: a compile after warmup), a fork, and a
workspace whose tracks.yaml has one target and a gate with every assertion, run by
`porttrack.jobs.cells`. Queue entries are made the way porttrack's own gate tests make them (a
format-patch of the PR's head and its hunk ids): there is no GitHub here to `import` from.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from porttrack.queue import manifest as queue_mod
from porttrack.workspace.files import Workspace
from testing.gitfixtures import Upstream, clone_fork, git, git_bytes
from testing.queueing import queue_mail
from testing.workspace import make_workspace

TARGET = "h200"
MODEL = "demo-decoder"
BACKEND = "TRITON"  # the model's backend in tracks.yaml: each cell claims it (and shows what ran, if the program says)


def gate(program: str, contexts: list[int], batches: list[int], timeout_s: int = 1800) -> dict[str, Any]:
    """The gate: `program` is the per-cell command line. It may use `{workdir}` (the built tree,
    filled by the gate's runner) and `{{context}}` `{{batch}}` `{{output}}` (doubled, so the
    runner leaves `{context}` … for porttrack.jobs.cells to fill per cell)."""
    job = (f"{sys.executable} -m porttrack.jobs.cells --model {MODEL} --contexts {','.join(map(str, contexts))} "
           f"--batches {','.join(map(str, batches))} --backend {MODEL}={BACKEND} --timeout {timeout_s} -- {program}")
    return {
        "job": {"command": job, "timeout_s": timeout_s * 4},
        "matrix": {"models": [MODEL], "contexts": contexts, "batches": batches, "targets": [TARGET]},
        "reference_backend": "torch-fp32",
        "tolerance": {"abs": 4e-3, "rel": 5e-3},
        "metrics": [
            {"name": "first_request_ms", "unit": "ms", "direction": "lower", "allowed_regression_pct": 50.0, "key": True},
            {"name": "decode_step_us", "unit": "us", "direction": "lower", "allowed_regression_pct": 25.0},
        ],
        "phases": ["cold", "warm"],
        "graph_replay": "required",
        "no_jit_after_warmup": "required",
    }


class GateDemo:
    def __init__(self, root: Path, files: Mapping[str, str], benign: Mapping[str, str], planted: Mapping[str, str],
                 program: str, contexts: list[int], batches: list[int], env: Mapping[str, str] | None = None):
        self.root = root
        self.up = Upstream(root / "upstream", initial_files=dict(files))
        self.up.open_pr(101, dict(benign), title="[Attention] decode blocks of 128 tokens")
        self.up.open_pr(102, dict(planted), title="[Serving] answer side requests in bf16")
        self.fork = clone_fork(self.up, root / "fork")
        self.handle = make_workspace(root / "ws", {}, fork=self.fork, token=None)
        g = gate(program, contexts, batches)
        self.handle.write_tracks({
            "upstream": {"repo": "demo/upstream", "remote": "upstream", "default_branch": "main"},
            "fork": {"repo": "demo/fork", "branch": "main", "upstream_base": "upstream/main", "checkout": str(self.fork)},
            "targets": {TARGET: {"name": "the machine this demo runs on", "vendor": "nvidia", "arch": "sm_90"}},
            "models": {MODEL: {"drafters": [], "attention": "mha", "quantization": "fp16", "backends": {TARGET: BACKEND}}},
            "tracks": {
                "decode-block": {"title": "decode attention block size", "prs": [101], "requires": {}, "targets": [TARGET], "gate": g},
                "side-requests": {"title": "serve side requests", "prs": [102], "requires": {}, "targets": [TARGET], "gate": g},
            },
            "report": {"repo": "demo/fork", "labels": ["porttrack"]},
        })
        self.ws = Workspace(self.handle.root)
        self.env = {**self.handle.env(), **(env or {}), "PORTTRACK_ACTOR": "gate-demo"}
        self.env.pop("GITHUB_TOKEN", None)
        self.log: list[dict[str, Any]] = []

    def queue(self, pr: int, track: str) -> str:
        up = self.up
        head = up.head(pr)
        message = f"{up.pr(pr).title}\n\nPorttrack-PR: {pr}\nPorttrack-Upstream-Head: {head}\n"
        commit = git(up.work, "commit-tree", f"{head}^{{tree}}", "-p", f"{head}^", "-m", message)
        data = git_bytes(up.work, "format-patch", "-1", "--stdout", commit)
        name = f"{len(queue_mod.load(self.ws).patches) + 1:04d}-pr{pr}"
        queue_mail(self.ws.root, data, name=name, track=track, pr=pr, title=up.pr(pr).title, head=head, base=up.tip(),
                   upstream="demo/upstream", gate=track)
        return name

    def porttrack(self, *args: str, say: bool = False) -> subprocess.CompletedProcess[str]:
        began = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "porttrack", *args], cwd=self.ws.root, env=self.env,
                              capture_output=True, text=True, timeout=7200)
        entry: dict[str, Any] = {"args": list(args), "exit_code": proc.returncode, "seconds": round(time.perf_counter() - began, 1)}
        if proc.stdout.strip().startswith("{"):
            entry["json"] = json.loads(proc.stdout)
        self.log.append(entry)
        if say:
            print(f"$ porttrack {' '.join(args)}  -> exit {proc.returncode} ({entry['seconds']}s)", flush=True)
            if proc.stderr.strip():
                print("  " + proc.stderr.strip().replace("\n", "\n  ")[-3000:], flush=True)
        return proc

    def gate_both(self, name: str, say: bool = False) -> None:
        self.porttrack("gate", "run", name, "--target", TARGET, say=say)
        self.porttrack("gate", "run", name, "--target", TARGET, "--baseline", say=say)


def failed_checks(check_json: Mapping[str, Any]) -> set[str]:
    return {c["check"] for cell in check_json.get("cells", []) for c in cell.get("checks", []) if c.get("outcome") == "fail"}


def pythonpath(*extra: str | os.PathLike[str]) -> str:
    return os.pathsep.join([*(str(p) for p in extra), os.environ.get("PYTHONPATH", "")])
