"""The results file a gate job writes, and the strict reader porttrack ingests it with.

Format: `porttrack/schemas/results.schema.json` (schema `porttrack/results/v1`, documented in
docs/gates-and-probes.md). One file per job run on one target; one cell per model × context × batch × phase.
A fork under tracks.yaml profile neutral writes `porttrack/results/v2`
(`porttrack/schemas/results.v2.schema.json`): the machine instead of the GPU fingerprint, and cells
keyed by the gate's named axes (`axes: {python: "3.12"}`), the phase only when the gate has phases:

    results = Results.from_env()
    results.machine(**detect_machine())               # arch, os, python: what a baseline must share
    results.add_axes_cell(axes={"python": "3.12"}, metrics={"test_time": 4.2})
    results.write()

A job writes it with the helper below; porttrack tells the job what it is testing through the
environment, so a job only adds its measurements:

    from porttrack.runner.results import Results, detect_environment
    results = Results.from_env()                      # track, subject, role, target, commits
    results.environment(**detect_environment())       # GPU, arch, driver, CUDA/ROCm, torch, triton
    results.add_cell(model="GLM-5.2", context=1024, batch=1, phase="cold",
                     metrics={"ttft_ms": 812.0}, graph_replays=31, jit_compiles_after_warmup=0,
                     numerics={"reference_backend": "TRITON_MLA", "max_abs_err": 2e-3, "max_rel_err": 1e-2})
    results.write()                                   # to $PORTTRACK_RESULTS, validated first

Environment variables porttrack sets for a job (and the example workflow passes as inputs):
PORTTRACK_TRACK, PORTTRACK_SUBJECT, PORTTRACK_ROLE, PORTTRACK_TARGET, PORTTRACK_REF (the commit
under test), PORTTRACK_UPSTREAM_BASE, PORTTRACK_FORK_COMMIT, PORTTRACK_PATCH_SET (JSON list of
{name, sha256}), PORTTRACK_RESULTS (where to write).

This module stays light (no pydantic, no PyGithub): jobs import it on the GPU machines.
"""

from __future__ import annotations

import json
import math
import os
import platform
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, cast

from porttrack.common.errors import InputError

if TYPE_CHECKING:  # imported where it validates: jobs on the GPU machines read results without it
    import jsonschema

SCHEMA = "porttrack/results/v1"
SCHEMA_FILE = "results.schema.json"
SCHEMA_V2 = "porttrack/results/v2"  # additive: the neutral profile's shape; v1 is unchanged
SCHEMA_FILES = {SCHEMA: SCHEMA_FILE, SCHEMA_V2: "results.v2.schema.json"}
MAX_BYTES = 16 << 20  # a results file is a few hundred cells; anything larger is not one

ENV_VARS = {
    "track": "PORTTRACK_TRACK",
    "subject": "PORTTRACK_SUBJECT",
    "role": "PORTTRACK_ROLE",
    "target": "PORTTRACK_TARGET",
    "ref_under_test": "PORTTRACK_REF",
    "upstream_base": "PORTTRACK_UPSTREAM_BASE",
    "fork_commit": "PORTTRACK_FORK_COMMIT",
    "patch_set": "PORTTRACK_PATCH_SET",
    "results": "PORTTRACK_RESULTS",
}


def schema(version: str = SCHEMA) -> dict[str, Any]:
    text = resources.files("porttrack").joinpath("schemas").joinpath(SCHEMA_FILES[version]).read_text(encoding="utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


# -- reading (porttrack's side) ------------------------------------------------------------------

def parse(data: bytes, where: str) -> dict[str, Any]:
    """Parse and validate a results file; InputError naming the first problems, else the document."""
    if len(data) > MAX_BYTES:
        raise InputError(f"{where}: results file is larger than {MAX_BYTES >> 20} MiB; refused")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{where}: results file is not UTF-8 (byte {exc.start})") from None
    try:
        document = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float,
                              object_pairs_hook=_refuse_duplicates)
    except _Refused as exc:
        raise InputError(f"{where}: {exc}") from None
    except ValueError as exc:  # json.JSONDecodeError
        raise InputError(f"{where}: results file is not JSON: {exc}") from None
    except RecursionError:  # json's decoder recurses once per level of nesting
        raise InputError(f"{where}: results file is nested too deeply to be a results file") from None
    try:  # "\ud800" is valid JSON but no text: it could be recorded, never written as UTF-8
        json.dumps(document, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InputError(f"{where}: results file holds a lone surrogate escape ({exc.object[exc.start]!r}), which is not text") from None
    problems = validation_problems(document)
    if problems:
        shown = "; ".join(problems[:5]) + (f"; and {len(problems) - 5} more" if len(problems) > 5 else "")
        raise InputError(f"{where}: results file does not match {_version(document)}: {shown}")
    return cast("dict[str, Any]", document)  # the schema's top level is an object


def validation_problems(document: Any) -> list[str]:
    """Every schema violation as `$.path: what`, plus what a schema cannot say (unique cells)."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema(_version(document)))
    problems = []
    for error in sorted(validator.iter_errors(document), key=lambda e: (list(map(str, e.absolute_path)), e.message)):
        problems.append(f"{_json_path(error.absolute_path)}: {_describe(error)}")
    if problems:
        return problems
    seen: dict[tuple[Any, ...], int] = {}
    for index, cell in enumerate(document["cells"]):
        key = _cell_key(cell)
        if key in seen:
            problems.append(f"$.cells[{index}]: duplicate cell {_cell_name(key)} (also $.cells[{seen[key]}])")
        seen.setdefault(key, index)
    return problems


def _version(document: Any) -> str:
    """v2 when the document says so; anything else is judged (and refused) as v1, as always."""
    return SCHEMA_V2 if isinstance(document, dict) and document.get("schema") == SCHEMA_V2 else SCHEMA


def _cell_key(cell: Mapping[str, Any]) -> tuple[Any, ...]:
    if "axes" in cell:
        # str or int values (the schema says so, and has run): hashable as they are
        return ("axes", tuple(sorted(cell["axes"].items(), key=lambda item: item[0])), cell.get("phase"))
    return (cell["model"], cell["context"], cell["batch"], cell["phase"])


class _Refused(ValueError):
    pass


def _refuse_constant(name: str) -> Any:
    raise _Refused(f"results file contains {name}, which is not a number JSON allows; a measurement must be finite")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400 reads as inf without any NaN/Infinity token
        raise _Refused(f"results file contains {text[:40]}, which is out of a float's range; a measurement must be finite")
    return value


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _Refused(f"results file repeats the key {key!r} in one object")
        result[key] = value
    return result


def _json_path(path: Iterable[str | int]) -> str:
    out = "$"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def _describe(error: jsonschema.ValidationError) -> str:
    if error.validator == "required":
        return error.message.replace("is a required property", "is missing")
    if error.validator == "minimum":
        return f"{error.instance!r} is negative; expected at least {error.validator_value}"
    if error.validator == "type":
        return f"expected {_type_name(error.validator_value)}, got {_json_kind(error.instance)} {_short(error.instance)}"
    if error.validator == "additionalProperties":
        return error.message.replace("were unexpected", "are not part of the format").replace("was unexpected", "is not part of the format")
    if error.validator == "maxItems" and isinstance(error.instance, list):
        return f"{len(error.instance)} items; expected at most {error.validator_value}"
    # jsonschema's own messages quote the whole value: keep one line short whatever the file holds
    return error.message if len(error.message) <= 300 else error.message[:297] + "..."


def _type_name(value: Any) -> str:
    if isinstance(value, list):
        return " or ".join(_type_name(v) for v in value)
    return {"number": "a number", "integer": "an integer", "string": "a string", "object": "an object",
            "array": "a list", "null": "null", "boolean": "true or false"}.get(value, str(value))


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


def _short(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _cell_name(key: tuple[Any, ...]) -> str:
    if key[0] == "axes" and len(key) == 3:
        _, axes, phase = key
        return " ".join(f"{name}={value}" for name, value in axes) + (f" {phase}" if phase else "") or "(the one cell)"
    model, context, batch, phase = key
    return f"{model} ctx={context} batch={batch} {phase}"


# -- writing (the job's side) --------------------------------------------------------------------

class Results:
    """Builds a results document; `write` validates it first, so a job learns of a mistake on the
    GPU machine rather than when porttrack refuses the artifact."""

    def __init__(self, *, track: str, subject: str, role: str, target: str,
                 ref_under_test: str, upstream_base: str, fork_commit: str,
                 patch_set: list[Mapping[str, str]], path: str | os.PathLike[str] | None = None):
        self.path = path  # where `write` puts it by default (PORTTRACK_RESULTS when from_env)
        self.document: dict[str, Any] = {
            "schema": SCHEMA,
            "track": track,
            "subject": subject,
            "role": role,
            "target": target,
            "commits": {"ref_under_test": ref_under_test, "upstream_base": upstream_base},
            "environment": {"fork_commit": fork_commit, "patch_set": [dict(p) for p in patch_set]},
            "cells": [],
        }

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> "Results":
        env = os.environ if env is None else env
        missing = [var for key, var in ENV_VARS.items() if key != "results" and not env.get(var)]
        if missing:
            raise InputError(f"not run by porttrack? missing environment variables: {', '.join(missing)}")
        try:
            patch_set = json.loads(env[ENV_VARS["patch_set"]])
        except ValueError:
            raise InputError(f"{ENV_VARS['patch_set']} is not JSON") from None
        return cls(
            track=env[ENV_VARS["track"]], subject=env[ENV_VARS["subject"]], role=env[ENV_VARS["role"]],
            target=env[ENV_VARS["target"]], ref_under_test=env[ENV_VARS["ref_under_test"]],
            upstream_base=env[ENV_VARS["upstream_base"]], fork_commit=env[ENV_VARS["fork_commit"]],
            patch_set=patch_set, path=env.get(ENV_VARS["results"]) or None,
        )

    def environment(self, *, gpu: str, arch: str, driver: str, cuda: str | None, rocm: str | None,
                    torch: str, triton: str, extra: Mapping[str, str] | None = None) -> "Results":
        env = self.document["environment"]
        env.update(gpu=gpu, arch=arch, driver=driver, cuda=cuda, rocm=rocm, torch=torch, triton=triton)
        if extra:
            env["extra"] = {str(k): str(v) for k, v in extra.items()}
        return self

    def machine(self, *, arch: str, **fields: str) -> "Results":
        """The neutral fingerprint (switches the document to porttrack/results/v2): the machine
        arch and whatever else must be equal for a baseline to count (os, python, cpu...)."""
        env = self.document["environment"]
        self.document["schema"] = SCHEMA_V2
        env["arch"] = arch
        env["machine"] = {str(k): str(v) for k, v in fields.items()}
        return self

    def add_axes_cell(self, *, axes: Mapping[str, str | int], metrics: Mapping[str, float], phase: str | None = None,
                      numerics: Mapping[str, Any] | None = None, duration_s: float | None = None) -> "Results":
        """One cell of a neutral gate (v2): its coordinates on the gate's named axes."""
        cell: dict[str, Any] = {"axes": dict(axes), "metrics": dict(metrics)}
        for key, value in (("phase", phase), ("numerics", None if numerics is None else dict(numerics)), ("duration_s", duration_s)):
            if value is not None:
                cell[key] = value
        self.document["cells"].append(cell)
        return self

    def job(self, **fields: Any) -> "Results":
        self.document.setdefault("job", {}).update(fields)
        return self

    def add_cell(self, *, model: str, context: int, batch: int, phase: str, metrics: Mapping[str, float],
                 numerics: Mapping[str, Any], graph_replays: int, jit_compiles_after_warmup: int,
                 backend: str | None = None, duration_s: float | None = None,
                 backend_used: Mapping[str, Any] | None = None,
                 graphed_regions_eager: int | None = None) -> "Results":
        """One GPU cell. `backend` is the attention backend claimed; `backend_used` what the engine
        recorded from inside itself: {"attention": {layer kind: [backend, ...]}, "vllm": version}."""
        cell: dict[str, Any] = {
            "model": model, "context": context, "batch": batch, "phase": phase,
            "metrics": dict(metrics), "numerics": dict(numerics),
            "graph_replays": graph_replays, "jit_compiles_after_warmup": jit_compiles_after_warmup,
        }
        if backend is not None:
            cell["backend"] = backend
        if backend_used is not None:
            cell["backend_used"] = dict(backend_used)
        if duration_s is not None:
            cell["duration_s"] = duration_s
        if graphed_regions_eager is not None:
            cell["graphed_regions_eager"] = graphed_regions_eager
        self.document["cells"].append(cell)
        return self

    def to_json(self, allow_nan: bool = False) -> str:
        return json.dumps(self.document, indent=2, sort_keys=True, allow_nan=allow_nan) + "\n"

    def write(self, path: str | os.PathLike[str] | None = None, *, check: bool = True) -> Path:
        """Write atomically to `path` (default $PORTTRACK_RESULTS). `check=False` skips validation:
        only for producing deliberately malformed files in tests."""
        target = Path(path or self.path or os.environ.get(ENV_VARS["results"]) or "results.json")
        if check:
            try:
                text = self.to_json()
            except ValueError:
                raise InputError("a measurement is NaN or infinite; measure again") from None
            problems = validation_problems(json.loads(text))
            if problems:
                raise InputError(f"results would not validate: {'; '.join(problems[:5])}")
        else:
            text = self.to_json(allow_nan=True)
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, target)
        return target


def detect_environment() -> dict[str, Any]:
    """GPU, arch, driver, CUDA/ROCm, torch and triton as this machine reports them (via torch).

    Values a job knows better can be passed to `Results.environment` directly instead.
    """
    info: dict[str, Any] = {"gpu": "unknown", "arch": "unknown", "driver": "unknown", "cuda": None, "rocm": None,
                            "torch": "absent", "triton": "absent"}
    try:
        import torch  # type: ignore[import-not-found]
    except ImportError:
        return info
    info["torch"] = str(torch.__version__)
    info["cuda"] = getattr(torch.version, "cuda", None)
    info["rocm"] = getattr(torch.version, "hip", None)
    try:
        import triton  # type: ignore[import-not-found]

        info["triton"] = str(triton.__version__)
    except ImportError:
        pass
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info["gpu"] = str(props.name)
        # torch also fills gcnArchName on CUDA builds (with the GPU's name: "NVIDIA H200", seen
        # with torch 2.11); it names the architecture only on ROCm ("gfx1151:xnack-").
        gcn = getattr(props, "gcnArchName", "") if info["rocm"] else ""
        info["arch"] = str(gcn or f"sm_{props.major}{props.minor}").split(":")[0]
    info["driver"] = _driver_version() or platform.release()
    return info


def detect_machine() -> dict[str, str]:
    """arch, os and python as this machine reports them: the neutral fingerprint (`Results.machine`)."""
    return {"arch": platform.machine() or "unknown", "os": platform.system().lower() or "unknown",
            "python": platform.python_version()}


def _driver_version() -> str | None:
    for path in ("/sys/module/nvidia/version", "/sys/module/amdgpu/version"):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text:
            return text
    return None
