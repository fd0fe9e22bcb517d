"""The published JSON Schema of tracks.yaml, one per profile (`porttrack/schemas/tracks.<profile>.schema.json`).

Generated from the same records the validator reads (`porttrack.tracks.config`, through pydantic), so the
two cannot disagree on keys, types, enums and what is required; tests/tracks/test_schema.py checks
that the shipped files are what `generate` makes now and that both profiles' example files
validate. What only the validator checks (cross-references, SHA and ref syntax, placeholders,
unique entries) is beyond a schema; editors show the rest as you type.

Editors with the YAML language server pick a schema from a first-line comment:

    # yaml-language-server: $schema=<path or URL of tracks.neutral.schema.json>

Regenerate after changing a record: `python -m porttrack.tracks.schema --write`.
"""

from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path
from typing import Any

from porttrack.tracks.config import PROFILES

DRAFT = "https://json-schema.org/draft/2020-12/schema"


def path(profile: str) -> Path:
    """The shipped schema file of `profile` (inside the installed package)."""
    return Path(str(resources.files("porttrack").joinpath("schemas").joinpath(PROFILES[profile].schema_file)))


def shipped(profile: str) -> dict[str, Any]:
    return json.loads(path(profile).read_text(encoding="utf-8"))


def generate(profile: str) -> dict[str, Any]:
    """The schema of a tracks.yaml under `profile`, from its records' annotations."""
    from pydantic import TypeAdapter  # lazy: heavy, and only this and the validator need it

    rules = PROFILES[profile]
    schema = TypeAdapter(rules.record).json_schema()
    schema["properties"].pop("path", None)  # where the file is, not one of its keys
    schema["required"] = [key for key in schema.get("required", []) if key != "path"]
    profile_key = schema["properties"]["profile"]
    profile_key.pop("title", None)
    profile_key["description"] = (f"the profile: {profile}" + (" (the default when absent)" if profile == "vllm-gpu" else ""))
    _refusals(schema["$defs"])
    return {
        "$schema": DRAFT,
        # porttrack's own name for its schema, whoever's fork uses it (not a URL under one fork)
        "$id": f"urn:porttrack:schema:{rules.schema_file}",
        "title": f"porttrack tracks.yaml, profile {profile}",
        "description": f"{rules.summary}. Generated from porttrack.tracks.config by porttrack.tracks.schema; "
                       "porttrack's own validator also checks cross-references, ids, refs, SHAs and placeholders.",
        **{key: value for key, value in schema.items() if key not in ("title", "description")},
    }


# A PR's number in a track once; a job is a command or a workflow, never neither nor both; a gate
# that may promote gives every metric an allowed regression. The validator refuses these too
# (porttrack.tracks.config): said here, an editor shows them as the file is typed.
_METRIC_HAS_ALLOWANCE = {"anyOf": [{"required": [key], "properties": {key: {"type": "number"}}}
                                   for key in ("allowed_regression_pct", "allowed_regression_abs")]}


def _refusals(defs: dict[str, Any]) -> None:
    for name, record in defs.items():
        props = record.get("properties", {})
        if "prs" in props and "title" in props:  # a track
            props["prs"]["uniqueItems"] = True
        if {"command", "workflow"} <= set(props):  # a job
            record["oneOf"] = [{"required": ["command"], "properties": {"command": {"type": "string"}}},
                               {"required": ["workflow"], "properties": {"workflow": {"type": "object"}}}]
        if "metrics" in props and "promote" in props:  # a gate
            record["if"] = {"not": {"required": ["promote"], "properties": {"promote": {"const": False}}}}
            record["then"] = {"properties": {"metrics": {"items": _METRIC_HAS_ALLOWANCE}}}


def text(profile: str) -> str:
    return json.dumps(generate(profile), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    for name in PROFILES:
        if "--write" in argv:
            path(name).write_text(text(name), encoding="utf-8")
            print(f"wrote {path(name)}", file=sys.stderr)
        elif text(name) != path(name).read_text(encoding="utf-8"):
            print(f"{path(name)} is out of date: python -m porttrack.tracks.schema --write", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
