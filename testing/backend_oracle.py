"""Seeded random cases for the vLLM job's backend decision, with an independent ground truth.

Each case is a stand-in vLLM (testing/vllm_standin.py) that offers some interface for choosing
the attention backend (the engine argument as vLLM 0.33, the old environment variable, or
neither), an engine that may run something else than it was asked for (a forced backend, or
another one for a particular asking), some attention layer kinds, and a plan (the model's
backend, possibly not a vLLM backend at all, and the gate's reference backend).

The truth is stated from what the engine does, not from the job's code: a cell is a true
measurement of its claim exactly when the backend could be asked for at all, and the engine then
ran the claimed backend for the benchmark and the reference backend for the reference numerics.
The job must write exactly those cells, each with the backends the engine really ran.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from porttrack.runner import results
from testing.vllm_standin import install

ENUM = ("FLASH_ATTN", "TRITON_ATTN", "FLASHINFER", "FLASHMLA_SPARSE", "TRITON_MLA")
AUTOMATIC = "TRITON_ATTN"  # what the stand-in engine picks when not asked
IDENTITY = {"PORTTRACK_TRACK": "mla", "PORTTRACK_SUBJECT": "0001-pr101", "PORTTRACK_ROLE": "candidate",
            "PORTTRACK_TARGET": "sm_121a", "PORTTRACK_REF": "a" * 40, "PORTTRACK_UPSTREAM_BASE": "b" * 40,
            "PORTTRACK_FORK_COMMIT": "c" * 40, "PORTTRACK_PATCH_SET": "[]"}


@dataclass(frozen=True)
class Case:
    interface: str  # engine-argument | environment-variable | none
    backend: str
    reference: str
    knobs: dict

    def engine_runs(self, asked: str | None) -> str:
        """What the stand-in engine runs when asked for `asked` through the interface it reads."""
        forced = self.knobs.get("selects")
        if isinstance(forced, dict):
            forced = forced.get(asked)
        return forced or asked or AUTOMATIC

    def truth(self) -> tuple[bool, str | None]:
        """(a true measurement of the claim?, the backend the benchmark engine ran)."""
        if self.interface == "none" or self.backend not in ENUM:
            return False, None
        ran, ref_ran = self.engine_runs(self.backend), self.engine_runs(self.reference)
        return ran == self.backend and ref_ran == self.reference, ran


def cases(seed: int, count: int) -> list[Case]:
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        interface = rng.choice(["engine-argument", "engine-argument", "environment-variable", "none"])
        backend = rng.choice(ENUM + ("NOT_A_BACKEND",))
        reference = rng.choice(("TRITON_MLA", "TRITON_ATTN"))
        knobs: dict[str, Any] = {"layers": {k: rng.randint(1, 2) for k in rng.sample(["Attention", "MLAAttention", "Indexer"], rng.randint(1, 2))}}
        engine = rng.choice(["obeys", "obeys", "forced", "swaps"])
        if engine == "forced":
            knobs["selects"] = rng.choice(ENUM)
        elif engine == "swaps":
            knobs["selects"] = {rng.choice((backend, reference)): rng.choice(ENUM)}
        if interface == "environment-variable":
            knobs["reads_env"] = True
        elif interface == "none":
            knobs["no_interface"] = True
        out.append(Case(interface, backend, reference, knobs))
    return out


def run(case: Case, tmp: Path) -> tuple[int, dict | None, str]:
    tmp.mkdir(parents=True, exist_ok=True)
    out = tmp / "results.json"
    env = {**os.environ, **install(tmp / "bin"), **IDENTITY, "STANDIN_VLLM": json.dumps(case.knobs), "PORTTRACK_RESULTS": str(out)}
    env.pop("PORTTRACK_PROBE", None)
    argv = ["--models", "M", "--contexts", "16", "--batches", "1", "--phases", "cold", "--reference-backend", case.reference,
            "--backend", f"M={case.backend}", "--output-len", "2", "--num-iters", "1", "--numerics-tokens", "2", "--numerics-prompts", "1"]
    proc = subprocess.run([sys.executable, "-m", "porttrack.jobs.vllm", *argv], cwd=tmp, env=env, capture_output=True, text=True, timeout=240)
    doc = results.parse(out.read_bytes(), "results") if out.is_file() else None
    return proc.returncode, doc, proc.stderr


def judge(case: Case, doc: dict | None) -> tuple[bool, bool, bool]:
    """(truth, written, record right): a written cell's record must be what the engine ran."""
    true, ran = case.truth()
    written = bool(doc and doc["cells"])
    right = True
    if written:
        used = doc["cells"][0]["backend_used"]["attention"]
        right = used == {kind: [ran] for kind in case.knobs["layers"]}
    return true, written, right


def confusion(rows: list[tuple[bool, bool, bool]]) -> str:
    table = {(t, w): sum(1 for r in rows if r[:2] == (t, w)) for t in (True, False) for w in (True, False)}
    wrong_records = sum(1 for r in rows if r[1] and not r[2])
    return ("                          job wrote   job refused\n"
            f"  truly the claimed run   {table[(True, True)]:>9}   {table[(True, False)]:>11}\n"
            f"  not the claimed run     {table[(False, True)]:>9}   {table[(False, False)]:>11}\n"
            f"  written with a wrong record: {wrong_records}")
