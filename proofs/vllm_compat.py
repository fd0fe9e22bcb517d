"""The vLLM job's interface, checked against the real `vllm` package (no GPU needed).

    VENV/bin/python proofs/vllm_compat.py [--out proofs/results/vllm_compat.json]

Run it with the Python of an environment where `pip install vllm` (the current release) and this
checkout (`pip install -e .`, so its `vllm.general_plugins` entry point is registered) are
installed. It checks, with vLLM's own code:

1. the probe's entry point loads through `vllm.plugins.load_general_plugins()` (the probe's log
   says it started, and the engine record is armed);
2. `Worker.compile_or_warm_up_model` exists (the plugin marks warmup and records the backend
   when it returns), and the layers expose `get_attn_backend` (what the record reads);
3. the job's `vllm bench latency` argv parses with `vllm.benchmarks.latency.add_cli_args` on
   vLLM's `FlexibleArgumentParser` to the intended values, the backend included;
4. every backend named in tracks.yaml (models' backends, gates' reference backends) is a member
   of `vllm.v1.attention.backends.registry.AttentionBackendEnum`;
5. the `--output-json` fields the job reads are among those `vllm.benchmarks.latency.main` writes
   (read from its source);
and records the surface the CI stand-ins must match (tests/jobs/test_vllm_compat.py reads it): the
parser's flags, the enum's members, the output fields, whether EngineArgs has
`attention_backend` and whether vllm.envs still reads VLLM_ATTENTION_BACKEND.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import importlib.metadata
import inspect
import json
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path

import yaml

from porttrack.jobs import vllm as job
from porttrack.probe import engine_record, events

ROOT = Path(__file__).resolve().parents[1]


def tracks_backends() -> dict[str, str]:
    doc = yaml.safe_load((ROOT / "tracks.yaml").read_text(encoding="utf-8"))
    named = {}
    for model, spec in (doc.get("models") or {}).items():
        for target, backend in (spec.get("backends") or {}).items():
            named[backend] = f"models.{model}.backends.{target}"
    for section in ("tracks", "proofs"):
        for name, spec in (doc.get(section) or {}).items():
            ref = (spec.get("gate") or {}).get("reference_backend")
            if ref:
                named[ref] = f"{section}.{name}.gate.reference_backend"
    return named


def check_plugin() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        log, record = Path(tmp) / "probe.jsonl", Path(tmp) / "engine.jsonl"
        os.environ[events.ENV], os.environ[engine_record.ENV] = str(log), str(record)
        from vllm.plugins import load_general_plugins

        load_general_plugins()
        text = log.read_text(encoding="utf-8") if log.is_file() else ""
    names = [ep.value for ep in importlib.metadata.entry_points(group="vllm.general_plugins")]
    started = '"probe-start"' in text
    return {"ok": started and "porttrack.probe.vllm_plugin:register" in names, "entry_points": names, "probe_started": started}


def check_worker() -> dict:
    out: dict = {}
    try:
        from vllm.v1.worker.gpu_worker import Worker

        out["compile_or_warm_up_model"] = callable(getattr(Worker, "compile_or_warm_up_model", None))
        out["wrapped_by_plugin"] = bool(getattr(Worker.compile_or_warm_up_model, "_porttrack_probe_wrapped", False))
    except Exception as exc:  # importable on CPU in 0.33; if not, say so
        out.update(compile_or_warm_up_model=False, import_error=f"{type(exc).__name__}: {exc}"[:300])
    layers = {}
    for module, cls in (("vllm.model_executor.layers.attention.attention", "Attention"),
                        ("vllm.model_executor.layers.attention.mla_attention", "MLAAttention")):
        try:
            layers[cls] = callable(getattr(getattr(__import__(module, fromlist=[cls]), cls), "get_attn_backend", None))
        except Exception as exc:
            layers[cls] = f"{type(exc).__name__}: {exc}"[:200]
    out["layers_get_attn_backend"] = layers
    from vllm.config import CompilationConfig

    out["static_forward_context"] = "static_forward_context" in {f.name for f in dataclasses.fields(CompilationConfig)} or hasattr(CompilationConfig, "static_forward_context")
    out["ok"] = out["compile_or_warm_up_model"] is True and out["wrapped_by_plugin"] and all(v is True for v in layers.values()) and out["static_forward_context"]
    return out


def check_parser() -> dict:
    from vllm.benchmarks.latency import add_cli_args
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = FlexibleArgumentParser(prog="vllm bench latency")
    add_cli_args(parser)
    ask, _env = job.asking(job.BY_ARGUMENT, "FLASHMLA_SPARSE")
    values = {"vllm": "vllm", "model": "/models/GLM-5.2", "context": "1024", "batch": "8", "output_len": "128", "iters": "6",
              "json": "/tmp/out.json", "backend": "FLASHMLA_SPARSE"}
    argv = shlex.split((job.BENCH_COMMAND + ask).format(**values))
    assert argv[:3] == ["vllm", "bench", "latency"], argv
    parsed = vars(parser.parse_args(argv[3:]))
    intended = {"model": "/models/GLM-5.2", "input_len": 1024, "batch_size": 8, "output_len": 128, "num_iters": 6,
                "num_iters_warmup": 0, "output_json": "/tmp/out.json", "attention_backend": "FLASHMLA_SPARSE"}
    got = {k: getattr(parsed.get(k), "name", parsed.get(k)) for k in intended}
    flags = sorted({s for a in parser._actions for s in a.option_strings})
    return {"ok": got == intended, "argv": argv[3:], "parsed": {k: str(v) for k, v in got.items()},
            "mismatched": sorted(k for k in intended if got[k] != intended[k]), "flags": flags}


def check_backends() -> dict:
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    members = list(AttentionBackendEnum.__members__)
    named = tracks_backends()
    missing = {b: where for b, where in sorted(named.items()) if b not in members}
    return {"ok": not missing, "named": sorted(named), "not_members": missing, "members": members}


def check_output_json() -> dict:
    import vllm.benchmarks.latency as latency

    tree = ast.parse(inspect.getsource(latency.main))
    fields: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "results" for t in node.targets) and isinstance(node.value, ast.Dict):
            fields |= {k.value for k in node.value.keys if isinstance(k, ast.Constant)}
    return {"ok": set(job.BENCH_JSON_FIELDS) <= fields, "read_by_job": list(job.BENCH_JSON_FIELDS), "written": sorted(fields)}


def llm_takes_backend() -> bool:
    """`LLM(attention_backend=...)`, as the numerics runs call it: LLM passes its keyword arguments
    on to EngineArgs, which must have the field and keep the value."""
    from vllm import LLM
    from vllm.engine.arg_utils import EngineArgs

    passes_on = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in inspect.signature(LLM.__init__).parameters.values())
    kept = EngineArgs(model="m", attention_backend="FLASHMLA_SPARSE").attention_backend
    return passes_on and getattr(kept, "name", kept) == "FLASHMLA_SPARSE"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "proofs" / "results" / "vllm_compat.json")
    args = parser.parse_args()
    # No GPU here: vLLM's device detection finds no platform and EngineArgs' CLI refuses to build;
    # VLLM_TARGET_DEVICE=cpu is vLLM's own switch to its CPU platform (nothing here runs a model).
    os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    started = time.perf_counter()
    import vllm
    from vllm import envs
    from vllm.engine.arg_utils import EngineArgs

    imported = time.perf_counter() - started
    checks = {}
    for name, fn in (("plugin", check_plugin), ("worker", check_worker), ("parser", check_parser),
                     ("backends", check_backends), ("output_json", check_output_json)):
        t = time.perf_counter()
        try:
            checks[name] = fn()
        except Exception as exc:
            checks[name] = {"ok": False, "error": f"{type(exc).__name__}: {exc}"[:400]}
        checks[name]["seconds"] = round(time.perf_counter() - t, 3)
    result = {
        "vllm": str(vllm.__version__), "python": sys.version.split()[0], "import_seconds": round(imported, 3),
        "VLLM_TARGET_DEVICE": os.environ["VLLM_TARGET_DEVICE"],
        "engine_args_attention_backend": "attention_backend" in {f.name for f in dataclasses.fields(EngineArgs)},
        "env_VLLM_ATTENTION_BACKEND_read": job.BACKEND_ENV in getattr(envs, "environment_variables", {}),
        "llm_accepts_attention_backend": llm_takes_backend(),
        "checks": checks, "ok": all(c["ok"] for c in checks.values()),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    for name, c in checks.items():
        print(f"{name:12} {'ok' if c['ok'] else 'FAILED'}  ({c['seconds']} s){'  ' + c.get('error', '') if not c['ok'] else ''}")
    print(f"vllm {result['vllm']}: {sum(c['ok'] for c in checks.values())}/{len(checks)} checks ok; "
          f"{len(checks['backends'].get('named', []))} backends named in tracks.yaml, {len(checks['backends'].get('members', []))} enum members; "
          f"{len(checks['parser'].get('flags', []))} bench flags; import {result['import_seconds']} s; wrote {args.out}")
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
