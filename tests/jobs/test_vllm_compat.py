"""The vLLM job and its CI stand-in, held to the surface of the real `vllm` package.

proofs/vllm_compat.py ran against `pip install vllm` (no GPU needed) and recorded, in
proofs/results/vllm_compat.json, what vLLM's own code offers: the `vllm bench latency`
parser's flags, the attention backend enum, the `--output-json` fields, whether the backend is an
engine argument and whether VLLM_ATTENTION_BACKEND is still read. These tests fail when the job
(or the stand-in CI runs it against) relies on something that recorded vLLM lacks.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import yaml

from porttrack.jobs import vllm as job

ROOT = Path(__file__).resolve().parents[2]
RECORDED = json.loads((ROOT / "proofs" / "results" / "vllm_compat.json").read_text(encoding="utf-8"))
CHECKS = RECORDED["checks"]
STANDIN = ROOT / "testing" / "standins" / "vllm_bench"


def standin_surface(**knobs) -> dict:
    """The stand-in's surface, read by importing it in its own process as the job would."""
    code = """
import dataclasses, json, vllm
from vllm import envs
from vllm.benchmarks.latency import add_cli_args, OUTPUT_JSON_FIELDS
from vllm.engine.arg_utils import EngineArgs
from vllm.utils.argparse_utils import FlexibleArgumentParser
from vllm.v1.attention.backends.registry import AttentionBackendEnum
p = FlexibleArgumentParser(); add_cli_args(p)
print(json.dumps({"version": vllm.__version__, "flags": sorted({s for a in p._actions for s in a.option_strings}),
    "members": list(AttentionBackendEnum.__members__), "fields": list(OUTPUT_JSON_FIELDS),
    "engine_arg": "attention_backend" in {f.name for f in dataclasses.fields(EngineArgs)},
    "env_var": "VLLM_ATTENTION_BACKEND" in envs.environment_variables}))
"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(STANDIN), str(ROOT)]), "STANDIN_VLLM": json.dumps(knobs)}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60, check=True)
    return json.loads(out.stdout)


def test_the_recorded_run_against_the_real_package_passed_every_check():
    assert RECORDED["vllm"] and RECORDED["ok"] is True, {k: v for k, v in CHECKS.items() if not v["ok"]}
    assert CHECKS["plugin"]["probe_started"] and "porttrack.probe.vllm_plugin:register" in CHECKS["plugin"]["entry_points"]
    assert CHECKS["worker"]["compile_or_warm_up_model"] is True and CHECKS["worker"]["wrapped_by_plugin"] is True


def test_the_job_asks_for_the_backend_only_by_flags_the_real_parser_has():
    ask, env = job.asking(job.BY_ARGUMENT, "FLASHMLA_SPARSE")
    argv = shlex.split(job.BENCH_COMMAND + ask)
    flags = [a for a in argv if a.startswith("--")]
    assert "--attention-backend" in flags and not env  # the engine argument, not the removed variable
    missing = [f for f in flags if f not in CHECKS["parser"]["flags"]]
    assert not missing, f"the job passes flags vLLM {RECORDED['vllm']} does not have: {missing}"
    assert CHECKS["parser"]["parsed"]["attention_backend"] == "FLASHMLA_SPARSE"
    # the recorded vLLM offers the engine argument and no longer reads the variable
    assert RECORDED["engine_args_attention_backend"] is True and RECORDED["env_VLLM_ATTENTION_BACKEND_read"] is False
    assert RECORDED["llm_accepts_attention_backend"] is True  # the numerics runs: LLM(attention_backend=...)


def test_every_backend_named_in_tracks_yaml_is_a_member_of_the_real_enum():
    doc = yaml.safe_load((ROOT / "tracks.yaml").read_text(encoding="utf-8"))
    named = {b for m in doc["models"].values() for b in m["backends"].values()}
    named |= {t["gate"]["reference_backend"] for section in ("tracks", "proofs") for t in doc[section].values() if t.get("gate")}
    assert named and not named - set(CHECKS["backends"]["members"]), named - set(CHECKS["backends"]["members"])


def test_the_output_json_fields_the_job_reads_are_written_by_the_real_bench():
    assert set(job.BENCH_JSON_FIELDS) <= set(CHECKS["output_json"]["written"])


def test_the_standin_offers_nothing_the_real_package_lacks():
    surface = standin_surface()
    assert surface["version"].split("+")[0] == RECORDED["vllm"]
    assert not set(surface["flags"]) - set(CHECKS["parser"]["flags"]), set(surface["flags"]) - set(CHECKS["parser"]["flags"])
    assert not set(surface["members"]) - set(CHECKS["backends"]["members"])
    assert set(surface["fields"]) == set(CHECKS["output_json"]["written"])
    assert surface["engine_arg"] == RECORDED["engine_args_attention_backend"]
    assert surface["env_var"] == RECORDED["env_VLLM_ATTENTION_BACKEND_read"]


def test_the_standin_writes_the_output_fields_it_declares(tmp_path):
    from testing.vllm_standin import install

    env = {**os.environ, **install(tmp_path / "bin"), "TRITON_CACHE_DIR": str(tmp_path / "triton")}
    out = tmp_path / "o.json"
    subprocess.run(["vllm", "bench", "latency", "--model", "m", "--input-len", "2", "--batch-size", "1", "--output-len", "1",
                    "--num-iters", "1", "--num-iters-warmup", "0", "--output-json", str(out), "--attention-backend", "TRITON_ATTN"],
                   env=env, check=True, timeout=60, capture_output=True)
    assert set(json.loads(out.read_text())) == set(CHECKS["output_json"]["written"])
