"""Tokens: where they come from, and the guarantee that they never leave the process.

The token is resolved once, registered here, and every text porttrack writes anywhere a person or
a file could see it (messages, logs, crash reports, recorded state) passes through `redact`.
Resolution order: GITHUB_TOKEN, GH_TOKEN, then `gh auth token` when the gh CLI is installed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from typing import Mapping

_KNOWN: set[str] = set()
TOKEN_VARIABLES = ("GITHUB_TOKEN", "GH_TOKEN", "GH_ENTERPRISE_TOKEN", "GITHUB_ENTERPRISE_TOKEN")
# Shapes of GitHub tokens, so even a token we were never told about is masked in our output.
_TOKEN_SHAPES = re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9_]{20,}|github_pat_[A-Za-z0-9_]{20,})\b")
REDACTED = "***"


def register(token: str) -> None:
    if token and len(token) >= 4:
        _KNOWN.add(token)


def register_configured(env: Mapping[str, str] | None = None) -> None:
    """Register every token the environment configures, without asking the gh CLI (a usage error
    must stay instant): so that a token pasted as an argument, of whatever shape, is masked when
    a message quotes that argument."""
    env = os.environ if env is None else env
    for name in TOKEN_VARIABLES:
        value = (env.get(name) or "").strip()
        if value:
            register(value)


def redact(text: str) -> str:
    for token in sorted(_KNOWN, key=len, reverse=True):
        text = text.replace(token, REDACTED)
    return _TOKEN_SHAPES.sub(REDACTED, text)


def without_tokens(env: Mapping[str, str]) -> dict[str, str]:
    """`env` for a child process porttrack runs (a gate job, a regression): no GitHub token."""
    return {k: v for k, v in env.items() if k not in TOKEN_VARIABLES}


def contains_secret(text: str) -> bool:
    return any(token in text for token in _KNOWN) or _TOKEN_SHAPES.search(text) is not None


def resolve_token(env: Mapping[str, str] | None = None) -> str | None:
    env = os.environ if env is None else env
    for name in ("GITHUB_TOKEN", "GH_TOKEN"):
        value = (env.get(name) or "").strip()
        if value:
            register(value)
            return value
    if env.get("PORTTRACK_NO_GH_CLI") or not shutil.which("gh"):
        return None
    try:
        out = subprocess.run(["gh", "auth", "token"], capture_output=True, timeout=5, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None
    value = out.stdout.decode("utf-8", "replace").strip()
    if out.returncode == 0 and value:
        register(value)
        return value
    return None
