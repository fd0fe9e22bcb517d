"""A scenario gate job (test support): write a results file from a scenario instead of measuring a GPU.

    python -m testing.scenario_job --scenario scenario.json --results {results} --target {target} --ref {ref}

Used by porttrack's own tests to drive gates without a GPU (the real job is `porttrack.jobs.vllm`).
Identity (track, subject, role, commits, patch set) comes from the PORTTRACK_*
environment porttrack sets; the scenario supplies the numbers:

    {
      "cells": {"models": ["GLM-5.2"], "contexts": [1024], "batches": [1], "phases": ["cold", "warm"]},
      "reference_backend": "TRITON_MLA",                 # or {"sm_121a": ..., "gfx1151": ...}
      "metrics": {"candidate": {"ttft_ms": 100.0}, "baseline": {"ttft_ms": 100.0}},
      "numerics": {"max_abs_err": 0.001, "max_rel_err": 0.001},
      "graph_replays": 8,
      "jit_compiles_after_warmup": 0,
      "environment": {"gfx1151": {"driver": "6.16"}},    # per target, over the built-in defaults
      "overrides": [                                     # first match wins per key; in order
        {"when": {"role": "candidate", "target": "gfx1151", "model": "GLM-5.2", "phase": "warm"},
         "set": {"metrics.ttft_ms": 130.0, "graph_replays": 0}},
        {"when": {"role": "baseline"}, "environment": {"driver": "999"}},
        {"when": {"phase": "warm"}, "omit": true}
      ],
      "check": true,                                     # false: write even if invalid (tests)
      "raw": "...",                                      # write this text verbatim instead
      "exit_code": 0,                                    # exit with this status after writing
      "noise": {"counter": "calls.txt", "calls": [1, 2], "factor": 3.0}  # a noisy neighbour: the runs
                                                         # numbered so (0-based, in time order, any role)
                                                         # report every metric times factor
    }
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Mapping

from porttrack.runner.results import ENV_VARS, Results

DEFAULT_ENVIRONMENTS: dict[str, dict[str, Any]] = {
    "sm_121a": {"gpu": "NVIDIA GB10", "arch": "sm_121a", "driver": "580.95.05", "cuda": "13.0", "rocm": None,
                "torch": "2.9.0+cu130", "triton": "3.5.0"},
    "gfx1151": {"gpu": "AMD Radeon 8060S (Strix Halo)", "arch": "gfx1151", "driver": "6.16.0", "cuda": None,
                "rocm": "7.0.2", "torch": "2.9.0+rocm7.0", "triton": "3.5.0"},
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="testing.scenario_job", description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", required=True, type=Path)
    parser.add_argument("--results", help="where to write [PORTTRACK_RESULTS]")
    parser.add_argument("--target", help="target id [PORTTRACK_TARGET]")
    parser.add_argument("--ref", help="commit under test [PORTTRACK_REF]")
    parser.add_argument("--workdir", help="work tree of the ref (unused by the example)")
    args = parser.parse_args(argv)

    env = dict(os.environ)
    for key, value in (("target", args.target), ("ref_under_test", args.ref), ("results", args.results)):
        if value:
            env[ENV_VARS[key]] = value
    scenario = json.loads(args.scenario.read_text(encoding="utf-8"))
    out = Path(env.get(ENV_VARS["results"]) or "results.json")
    if "raw" in scenario:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(scenario["raw"] if isinstance(scenario["raw"], str) else json.dumps(scenario["raw"]), encoding="utf-8")
    else:
        build(scenario, env).write(out, check=scenario.get("check", True))
    print(f"example job: wrote {out}", file=sys.stderr)
    return int(scenario.get("exit_code", 0))


def build(scenario: Mapping[str, Any], env: Mapping[str, str]) -> Results:
    results = Results.from_env(env)
    doc = results.document
    facts = {"role": doc["role"], "target": doc["target"], "track": doc["track"], "subject": doc["subject"]}
    target = doc["target"]

    environment = dict(DEFAULT_ENVIRONMENTS.get(target, DEFAULT_ENVIRONMENTS["sm_121a"]))
    environment.update((scenario.get("environment") or {}).get(target) or {})
    for rule in scenario.get("overrides") or ():
        if _matches(rule.get("when") or {}, facts):
            environment.update(rule.get("environment") or {})
    results.environment(**environment)

    reference = scenario.get("reference_backend", "REFERENCE")
    if isinstance(reference, Mapping):
        reference = reference.get(target, "REFERENCE")
    cells = scenario["cells"]
    noisy = _noisy(scenario.get("noise"))
    for model in cells["models"]:
        for context in cells["contexts"]:
            for batch in cells["batches"]:
                for phase in cells.get("phases", ["cold", "warm"]):
                    cell_facts = {**facts, "model": model, "context": context, "batch": batch, "phase": phase}
                    cell = measure(scenario, doc["role"], reference)
                    if noisy:
                        cell["metrics"] = {k: v * float(scenario["noise"].get("factor", 3.0)) for k, v in cell["metrics"].items()}
                    omit = False
                    for rule in scenario.get("overrides") or ():
                        if _matches(rule.get("when") or {}, cell_facts):
                            omit = omit or bool(rule.get("omit"))
                            for dotted, value in (rule.get("set") or {}).items():
                                _set(cell, dotted, value)
                    if omit:
                        continue
                    if {"metrics", "numerics", "graph_replays", "jit_compiles_after_warmup"} <= set(cell):
                        results.add_cell(model=model, context=context, batch=batch, phase=phase, **cell)
                    else:  # a scenario that removed a required field: write it as it is (tests)
                        results.document["cells"].append({"model": model, "context": context, "batch": batch, "phase": phase, **cell})
    results.job(runner="testing.scenario_job", duration_s=0.0)
    return results


def measure(scenario: Mapping[str, Any], role: str, reference: str) -> dict[str, Any]:
    """What a real job measures; here, the scenario's numbers for this role."""
    metrics = scenario.get("metrics") or {}
    return {
        "metrics": dict(metrics.get(role) or metrics.get("candidate") or {}),
        "numerics": {"reference_backend": reference, "samples": 4096, **(scenario.get("numerics") or {"max_abs_err": 0.0, "max_rel_err": 0.0})},
        "graph_replays": scenario.get("graph_replays", 1),
        "jit_compiles_after_warmup": scenario.get("jit_compiles_after_warmup", 0),
    }


def _noisy(noise: Mapping[str, Any] | None) -> bool:
    """Count this run in the noise counter file; whether a noisy neighbour slows it."""
    if not noise:
        return False
    counter = Path(str(noise["counter"]))
    n = int(counter.read_text()) if counter.is_file() else 0
    counter.write_text(str(n + 1))
    return n in set(noise.get("calls") or ())


def _matches(when: Mapping[str, Any], facts: Mapping[str, Any]) -> bool:
    return all(key in facts and facts[key] == value for key, value in when.items())


def _set(cell: dict[str, Any], dotted: str, value: Any) -> None:
    node = cell
    *parents, last = dotted.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    if value is None:
        node.pop(last, None)
    else:
        node[last] = value


if __name__ == "__main__":
    sys.exit(main())
