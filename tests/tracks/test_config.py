"""tracks.yaml profiles: vllm-gpu (the default, today's rules) and neutral (any fork).

The issue's own attempt — a minimal file for a library fork (upstream, fork, one target, three
tracks) — now loads under `profile: neutral`, and without a profile it fails with messages that say
what to write and that point at `profile: neutral`. The judge, eligibility and the results format
read the profile's rules as data.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from porttrack.common.errors import ConfigError, InputError
from porttrack.prove import gates
from porttrack.runner import results
from porttrack.tracks import eligibility
from porttrack.tracks.config import PROFILES, Config, NeutralConfig, ReportConfig
from porttrack.tracks.file import load_config, parse_config

REPO_ROOT = Path(__file__).resolve().parents[2]

MINIMAL = """\
profile: neutral
upstream: {repo: psf/requests}
fork: {repo: me/requests, checkout: ../requests}
targets:
  linux-py312: {name: Linux CPython 3.12}
tracks:
  retries: {title: retry budget, prs: [6710], targets: [linux-py312]}
  proxies: {title: proxy env, prs: [6711], targets: [linux-py312]}
  chunked: {title: chunked uploads, prs: [6712], targets: [linux-py312]}
"""

GATE = """\
    gate:
      job: {command: python -m pytest -q}
      matrix: {axes: {python: ["3.12", "3.13"], os: [linux]}}
      metrics: [{name: test_time, unit: s, direction: lower, allowed_regression_pct: 10}]
"""


def problems(text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_config(text, "tracks.yaml")
    return str(caught.value)


def with_gate(extra: str = "") -> str:
    text = MINIMAL.replace("  retries: {title: retry budget, prs: [6710], targets: [linux-py312]}\n",
                           "  retries:\n    title: retry budget\n    prs: [6710]\n    targets: [linux-py312]\n" + GATE + extra)
    assert text != MINIMAL
    return text


def test_the_issue_minimal_library_file_loads_under_neutral() -> None:
    config = parse_config(MINIMAL, "tracks.yaml")
    assert isinstance(config, NeutralConfig) and config.rules is PROFILES["neutral"]
    assert config.report == ReportConfig(repo="me/requests")  # report has defaults; repo: the fork's
    assert dict(config.models) == {} and list(config.tracks) == ["retries", "proxies", "chunked"]
    assert config.gate_targets("retries") == ["linux-py312"]


def test_without_a_profile_the_same_file_is_read_as_vllm_and_says_what_to_write() -> None:
    text = MINIMAL.replace("profile: neutral\n", "")
    said = problems(text)
    assert "models: required key is missing; for example: models: {" in said
    assert "no profile is declared" in said and "writes profile: neutral" in said
    assert "targets.linux-py312.vendor: required key is missing; for example: vendor: nvidia   # or amd" in said
    assert "tracks.retries.requires: required key is missing; for example: requires: {}" in said
    assert "report: required key is missing; for example: report: {repo: you/project}" in said
    assert "..." not in said


def test_a_declared_vllm_profile_is_todays_file(tmp_path: Path) -> None:
    real = (REPO_ROOT / "tracks.yaml").read_text()
    assert real.count("\nprofile: vllm-gpu") == 1
    declared = parse_config(real, "tracks.yaml")
    absent = parse_config(real.replace("\nprofile: vllm-gpu", "\n#"), "tracks.yaml")
    assert isinstance(declared, Config) and declared == absent and declared.profile == "vllm-gpu"


@pytest.mark.parametrize(("old", "new", "says"), [
    ("  linux-py312: {name: Linux CPython 3.12}", "  linux-py312: {name: Linux, vendor: cpu}",
     "targets.linux-py312.vendor: unknown key vendor (expected one of: name, arch, runner_labels, attributes)"),
    ("tracks:\n", "models: {}\ntracks:\n", "models: unknown key models (expected one of: profile, upstream, fork, targets, proofs, tracks, report)"),
    ("profile: neutral", "profile: gpu", "profile: expected one of: vllm-gpu, neutral; got gpu"),
])
def test_gpu_vocabulary_is_not_part_of_neutral(old: str, new: str, says: str) -> None:
    assert says in problems(MINIMAL.replace(old, new))


def test_a_neutral_gate_asks_for_a_job_metrics_with_an_allowed_regression_and_axes() -> None:
    config = parse_config(with_gate(), "tracks.yaml")
    gate = config.tracks["retries"].gate
    assert gate is not None and gate.phases is None and gate.tolerance is None and gate.graph_replay is None
    assert "required key is missing; for example: metrics: [{name: test_time" in problems(
        with_gate().replace("      metrics: [{name: test_time, unit: s, direction: lower, allowed_regression_pct: 10}]\n", ""))
    assert "must define allowed_regression_pct or allowed_regression_abs for metric test_time" in problems(
        with_gate().replace(", allowed_regression_pct: 10", ""))
    measured_only = with_gate("      promote: false\n").replace(", allowed_regression_pct: 10", "")
    assert parse_config(measured_only, "tracks.yaml").tracks["retries"].gate.promote is False
    said = problems(with_gate().replace('["3.12", "3.13"]', "[3.12]"))
    assert "tracks.retries.gate.matrix.axes.python.0: expected a string or an integer" in said and 'quote a value such as "3.12"' in said
    assert "duplicate python value 3.12" in problems(with_gate().replace('["3.12", "3.13"]', '["3.12", "3.12"]'))


def test_the_required_matrix_is_the_product_of_the_named_axes() -> None:
    config = parse_config(with_gate(), "tracks.yaml")
    subject = gates.GateSubject("patch", "0001-pr6710", "retries", config.tracks["retries"].gate)
    req = gates.required(config, subject, frozenset())
    assert req.axes == (("python", ("3.12", "3.13")), ("os", ("linux",))) and req.phases == () and req.models == ()
    cells = list(req.cells())
    assert [dict(c.coords) for c in cells] == [{"python": "3.12", "os": "linux"}, {"python": "3.13", "os": "linux"}]
    assert {c.phase for c in cells} == {None}
    phased = parse_config(with_gate("      phases: [cold, warm]\n"), "tracks.yaml")
    subject = gates.GateSubject("patch", "0001-pr6710", "retries", phased.tracks["retries"].gate)
    assert len(list(gates.required(phased, subject, frozenset()).cells())) == 4


def test_eligibility_is_not_used_without_models() -> None:
    result = eligibility.evaluate(parse_config(MINIMAL, "tracks.yaml"))
    assert result.used is False
    assert eligibility.render_text(result).startswith(eligibility.NOT_USED)
    data = eligibility.to_json(result)
    assert data["used"] is False and data["note"] == eligibility.NOT_USED
    assert "used" not in eligibility.to_json(eligibility.evaluate(parse_config((REPO_ROOT / "tracks.yaml").read_text(), "t.yaml")))


def test_a_neutral_config_survives_the_validated_cache(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    path = tmp_path / "ws" / "tracks.yaml"
    path.write_text(with_gate())
    first = load_config(path, cache_dir=tmp_path / "cache")
    assert list((tmp_path / "cache").iterdir()), "the validated copy was written"
    again = load_config(path, cache_dir=tmp_path / "cache")
    assert again == first and isinstance(again, NeutralConfig) and again.report.repo == "me/requests"
    assert again.tracks["retries"].gate.matrix.axes == {"python": ["3.12", "3.13"], "os": ["linux"]}


def test_the_cache_key_covers_the_profile_rules() -> None:
    from porttrack.tracks import file as tracks_file

    assert "config.py" in tracks_file._VALIDATING_MODULES  # PROFILES and every record live there


def _v2(**cell) -> dict:
    return {"schema": results.SCHEMA_V2, "track": "retries", "subject": "0001-pr6710", "role": "candidate", "target": "linux",
            "commits": {"ref_under_test": "a" * 40, "upstream_base": "b" * 40},
            "environment": {"arch": "x86_64", "machine": {"os": "linux"}, "fork_commit": "c" * 40, "patch_set": []},
            "cells": [cell or {"axes": {"python": "3.12"}, "metrics": {"test_time": 1.5}}]}


def test_results_v2_is_the_neutral_shape_and_v1_is_unchanged() -> None:
    assert results.validation_problems(_v2()) == []
    doc = _v2()
    doc["cells"].append(dict(doc["cells"][0]))
    assert any("duplicate cell python=3.12" in p for p in results.validation_problems(doc))
    gpu_env = _v2()
    gpu_env["environment"] = {**gpu_env["environment"], "gpu": "H200"}
    assert any("gpu" in p for p in results.validation_problems(gpu_env))
    no_machine = _v2()
    del no_machine["environment"]["machine"]
    assert any("'machine' is missing" in p for p in results.validation_problems(no_machine))
    as_v1 = dict(_v2(), schema=results.SCHEMA)  # the v1 schema still wants the GPU cell shape
    assert any("'model' is missing" in p or "gpu" in p for p in results.validation_problems(as_v1))
    with pytest.raises(InputError, match="porttrack/results/v2"):
        results.parse(json.dumps(no_machine).encode(), "r.json")


def test_init_profile_neutral_on_the_command_line(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "porttrack", "init", str(tmp_path / "ws"), "--upstream", "psf/requests",
                          "--fork", "me/requests", "--profile", "neutral", "--dry-run", "--json"],
                         capture_output=True, text=True, timeout=60, env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert "tracks.yaml" in [s["target"] for s in json.loads(out.stdout)["steps"]]
    bad = subprocess.run([sys.executable, "-m", "porttrack", "init", "--upstream", "a/b", "--fork", "c/d", "--profile", "gpu"],
                         capture_output=True, text=True, timeout=60, env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"})
    assert bad.returncode != 0 and "vllm-gpu" in bad.stderr and "neutral" in bad.stderr


def test_init_offers_exactly_the_profiles_that_exist_default_first() -> None:
    from porttrack.cli.init import PROFILE_NAMES
    from porttrack.tracks.config import DEFAULT_PROFILE, PROFILES

    assert sorted(PROFILE_NAMES) == sorted(PROFILES) and PROFILE_NAMES[0] == DEFAULT_PROFILE
