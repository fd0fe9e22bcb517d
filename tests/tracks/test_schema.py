"""The published JSON Schema of tracks.yaml (one per profile) agrees with porttrack's validator.

The shipped files are exactly what `porttrack.tracks.schema.generate` makes from the records now;
the repository's tracks.yaml and a full file of each profile validate under both; every required
key, removed in turn from a full file, is refused by both, and the validator's message gives a
one-line example of what to write.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from porttrack.bootstrap import init as init_mod
from porttrack.common.errors import ConfigError
from porttrack.tracks import schema as tracks_schema
from porttrack.tracks.config import PROFILES
from porttrack.tracks.file import parse_config
from porttrack.tracks.validation import _record_at

REPO_ROOT = Path(__file__).resolve().parents[2]

FULL = {
    "vllm-gpu": """\
profile: vllm-gpu
upstream: {repo: vllm-project/vllm}
fork: {repo: randomvariable/vllm, checkout: ../vllm}
targets:
  sm_121a: {name: NVIDIA GB10, vendor: nvidia, arch: sm_121a, runner_labels: [gb10]}
models:
  Alpha:
    drafters: [native-mtp]
    attention: mla
    quantization: fp8
    backends: {sm_121a: FLASHMLA}
    conditional:
      - {proof: low-rank, tracks: [mla], reason: must accept low-rank attention}
proofs:
  low-rank:
    description: accepts low-rank attention
    gate:
      promote: false
      job: {workflow: {file: proof.yml}}
      matrix: {contexts: [1], batches: [1]}
tracks:
  mla:
    title: MLA things
    prs: [46514]
    requires: {attention: [mla]}
    targets: [sm_121a]
    gate:
      job: {command: "run --ref {ref} --results {results}"}
      matrix: {models: eligible, contexts: [4096], batches: [1]}
      reference_backend: TRITON_MLA
      tolerance: {abs: 0.02, rel: 0.01}
      graph_replay: required
      no_jit_after_warmup: required
      metrics:
        - {name: decode_throughput, unit: tok/s, direction: higher, allowed_regression_pct: 3, key: true}
report: {repo: randomvariable/vllm}
""",
    "neutral": """\
profile: neutral
upstream: {repo: psf/requests}
fork: {repo: me/requests}
targets:
  linux: {name: Linux, arch: x86_64, attributes: {python: "3.12"}}
proofs:
  works:
    description: the suite runs
    gate:
      promote: false
      job: {workflow: {file: proof.yml}}
      metrics: [{name: test_time, unit: s, direction: lower}]
tracks:
  retries:
    title: retry budget
    prs: [6710]
    targets: [linux]
    gate:
      job: {command: python -m pytest -q}
      matrix: {axes: {python: ["3.12"], os: [linux]}}
      tolerance: {abs: 0.1, rel: 0.1}
      phases: [warm]
      metrics:
        - {name: test_time, unit: s, direction: lower, allowed_regression_pct: 10, key: true}
""",
}


def _validator(profile: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(tracks_schema.shipped(profile))


@pytest.mark.parametrize("profile", list(PROFILES))
def test_the_shipped_schema_is_what_the_records_make(profile: str) -> None:
    jsonschema.Draft202012Validator.check_schema(tracks_schema.shipped(profile))
    assert tracks_schema.shipped(profile) == tracks_schema.generate(profile), "python -m porttrack.tracks.schema --write"
    assert tracks_schema.main([]) == 0


def test_the_repository_tracks_yaml_validates_under_the_vllm_schema() -> None:
    data = yaml.safe_load((REPO_ROOT / "tracks.yaml").read_text())
    assert data["profile"] == "vllm-gpu"
    _validator("vllm-gpu").validate(data)
    assert list(_validator("neutral").iter_errors(data)), "a vLLM file is not a neutral one"
    # the editor line points at the shipped file, relative to tracks.yaml
    line = next(l for l in (REPO_ROOT / "tracks.yaml").read_text().splitlines() if "yaml-language-server" in l)
    assert (REPO_ROOT / line.split("$schema=")[1].strip()).resolve() == tracks_schema.path("vllm-gpu").resolve()


@pytest.mark.parametrize("profile", list(PROFILES))
def test_full_files_and_init_skeletons_validate_under_both(profile: str) -> None:
    for text in (FULL[profile], init_mod.tracks_skeleton(init_mod.checked(init_mod.Options("a/b", "c/d", profile=profile)))):
        parse_config(text, "tracks.yaml")
        _validator(profile).validate(yaml.safe_load(text))


def _required_key_cases(profile: str) -> list[tuple[str, ...]]:
    """Every required key of every record present in FULL[profile], as a path."""
    cases = []

    def walk(node: Any, loc: tuple[str, ...]) -> None:
        if isinstance(node, dict):
            record = _record_at(loc, profile)
            if record is not None:
                for f in dataclasses.fields(record):
                    required = f.init and f.name != "path" and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
                    if required and f.name in node:
                        cases.append((*loc, f.name))
            for key, value in node.items():
                walk(value, (*loc, str(key)))
        elif isinstance(node, list):
            for index, value in enumerate(node):
                walk(value, (*loc, index))

    walk(yaml.safe_load(FULL[profile]), ())
    return cases


CASES = [(profile, loc) for profile in PROFILES for loc in _required_key_cases(profile)]


def test_the_cases_cover_every_record_with_a_required_key() -> None:
    seen = {(_record_at(loc[:-1], profile).__name__, loc[-1]) for profile, loc in CASES}
    for profile, rules in PROFILES.items():
        records, todo = set(), [rules.record]
        while todo:  # every record type reachable from the profile's Config
            record = todo.pop()
            if record in records:
                continue
            records.add(record)
            todo += [t for t in _record_types(record)]
        for record in records:
            for f in dataclasses.fields(record):
                if f.init and f.name != "path" and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                    assert (record.__name__, f.name) in seen, f"{profile}: no case removes {record.__name__}.{f.name}"


def _record_types(record: type) -> list[type]:
    import typing

    found = []
    for hint in typing.get_type_hints(record, include_extras=True).values():
        stack = [hint]
        while stack:
            t = stack.pop()
            if dataclasses.is_dataclass(t) and isinstance(t, type):
                found.append(t)
            stack += list(typing.get_args(t))
    return found


@pytest.mark.parametrize(("profile", "loc"), CASES, ids=[f"{p}:{'.'.join(map(str, loc))}" for p, loc in CASES])
def test_each_missing_required_key_says_what_to_write_and_the_schema_agrees(profile: str, loc: tuple) -> None:
    data = yaml.safe_load(FULL[profile])
    parent = data
    for part in loc[:-1]:
        parent = parent[part]
    del parent[loc[-1]]
    text = yaml.safe_dump(data, sort_keys=False)
    with pytest.raises(ConfigError) as caught:
        parse_config(text, "tracks.yaml")
    path = ".".join(map(str, loc))
    if loc == ("profile",):  # absent means vllm-gpu: the first thing missing then is models, and it says why
        assert "models: required key is missing; for example: models: {" in str(caught.value)
        assert "no profile is declared" in str(caught.value) and "writes profile: neutral" in str(caught.value)
        return
    lines = [l for l in str(caught.value).splitlines() if f": {path}: required key is missing" in l]
    assert lines, str(caught.value)
    example = lines[0].split("for example: ", 1)[1]
    assert example.startswith(f"{loc[-1]}: ") and "..." not in example, lines[0]
    assert list(_validator(profile).iter_errors(data)), "the schema must refuse it too"


@pytest.mark.parametrize(("profile", "old", "new", "says"), [
    ("vllm-gpu", "vendor: nvidia", "vendor: cpu", "expected 'nvidia' or 'amd'"),
    ("vllm-gpu", "graph_replay: required", "graph_replay: maybe", "expected 'required' or 'not-applicable'"),
    ("neutral", "phases: [warm]", "phases: [hot]", "expected 'cold' or 'warm'"),
    ("neutral", "direction: lower, allowed", "direction: down, allowed", "expected 'lower' or 'higher'"),
    ("neutral", "title: retry budget", "title: retry budget\n    requires: {}", "unknown key requires"),
    ("neutral", "profile: neutral", "profile: library", "expected one of: vllm-gpu, neutral"),
    # a vLLM key in a neutral gate: refused by name, with the profile it belongs to and why
    ("neutral", "tolerance: {abs: 0.1, rel: 0.1}", "reference_backend: TRITON_MLA\n      tolerance: {abs: 0.1, rel: 0.1}",
     "unknown key reference_backend: a key of profile vllm-gpu: a neutral gate compares the candidate against a baseline"),
])
def test_enums_list_their_values_and_the_schema_agrees(profile: str, old: str, new: str, says: str) -> None:
    assert FULL[profile].count(old) == 1
    text = FULL[profile].replace(old, new)
    with pytest.raises(ConfigError) as caught:
        parse_config(text, "tracks.yaml")
    assert says in str(caught.value)
    assert list(_validator(profile).iter_errors(yaml.safe_load(text)))


def test_schema_files_are_packaged() -> None:
    pyproject = (REPO_ROOT / "pyproject.toml").read_text()
    assert '"schemas/*.json"' in pyproject
    for rules in PROFILES.values():
        assert json.loads((REPO_ROOT / "porttrack" / "schemas" / rules.schema_file).read_text())["title"].endswith(rules.name)


def test_full_files_are_what_they_claim() -> None:
    # guards the fixtures above: a change that made one invalid would hollow every case out
    assert copy.deepcopy(yaml.safe_load(FULL["neutral"]))["profile"] == "neutral"
    assert len(CASES) >= 30


@pytest.mark.parametrize(("profile", "old", "new"), [
    ("vllm-gpu", "prs: [46514]", "prs: [46514, 46514]"),
    ("neutral", "prs: [6710]", "prs: [6710, 6710]"),
    ("vllm-gpu", 'job: {command: "run --ref {ref} --results {results}"}', "job: {timeout_s: 60}"),
    ("neutral", "job: {command: python -m pytest -q}", "job: {timeout_s: 60}"),
    ("neutral", "job: {command: python -m pytest -q}", "job: {command: python -m pytest -q, workflow: {file: a.yml}}"),
    ("vllm-gpu", "direction: higher, allowed_regression_pct: 3, key: true", "direction: higher, key: true"),
    ("neutral", "direction: lower, allowed_regression_pct: 10, key: true", "direction: lower, key: true"),
])
def test_what_porttrack_refuses_the_schema_refuses(profile: str, old: str, new: str) -> None:
    """A duplicate PR number, a job with neither (or both) of command and workflow, a promoting
    gate's metric with no allowed regression: refused by the validator and by the schema."""
    assert FULL[profile].count(old) == 1
    text = FULL[profile].replace(old, new)
    with pytest.raises(ConfigError):
        parse_config(text, "tracks.yaml")
    assert list(_validator(profile).iter_errors(yaml.safe_load(text))), "the schema must refuse it too"


def test_the_schemas_are_porttracks_own_not_one_forks():
    for profile in PROFILES:
        schema = tracks_schema.shipped(profile)
        assert schema["$id"].startswith("urn:porttrack:") and "randomvariable" not in json.dumps(schema)


def test_a_neutral_fork_reads_nothing_of_models_or_backends() -> None:
    """The neutral schema offers no vLLM key (models, contexts, batches, a reference backend), and
    `gate check --json`'s gate under neutral leaves the backend key out; vllm-gpu keeps it."""
    from porttrack.prove.gate_output import gate_to_json

    text = json.dumps(tracks_schema.shipped("neutral"))
    for word in ("reference_backend", "models", "contexts", "batches", "backend"):
        assert word not in text, word
    assert "reference_backend" in json.dumps(tracks_schema.shipped("vllm-gpu"))
    assert tracks_schema.generate("neutral") == tracks_schema.shipped("neutral"), "regenerate: python -m porttrack.tracks.schema --write"
    neutral = parse_config(FULL["neutral"], "tracks.yaml").tracks["retries"].gate
    assert "reference_backend" not in gate_to_json(neutral)
    gpu = next(t.gate for t in parse_config(FULL["vllm-gpu"], "tracks.yaml").tracks.values() if t.gate is not None)
    assert gate_to_json(gpu)["reference_backend"] == "TRITON_MLA"
