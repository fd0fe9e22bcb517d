"""What the vLLM engine really ran, recorded from inside its processes.

A backend a result names is a claim. vLLM decides the attention backend itself (the engine
argument `--attention-backend` / `LLM(attention_backend=...)` asks; the platform may pick
another, or ignore an asking it does not read), so the job does not trust what it asked for:
the probe's vLLM plugin (`porttrack.probe.vllm_plugin`) calls `record_worker` in every worker
once its warmup step returns, when PORTTRACK_VLLM_RECORD names a file. Each worker appends one
JSON line:

    {"pid": 123, "vllm": "0.33.0", "attention": {"MLAAttention": ["FLASHMLA_SPARSE"], ...},
     "attention_classes": {"MLAAttention": ["vllm.v1.attention.backends.mla.flashmla_sparse.FlashMLASparseBackend"]}}

A backend's identity is its class, not `get_name()`: vLLM does not keep names unique
(`AttentionBackendEnum.ROCM_AITER_FA`'s class reports "FLASH_ATTN"; `ROCM_AITER_TRITON_MLA`'s
reports "AITER_TRITON_MLA", no member at all). So `attention_classes` maps the kind of each
attention layer the engine built (its class name, as in vLLM's static forward context) to the
class paths of the backends its layers use, and `attention` to the `AttentionBackendEnum`
members whose class that is, resolved inside the engine with the engine's own enum
(`member.get_path() == class path`, overrides included); a class no member names is recorded by
its path, which matches no claim. `error` replaces both when the engine could not be read.
Independent of the probe's event log: the numerics runs record their backend without the probe.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Mapping

ENV = "PORTTRACK_VLLM_RECORD"


def active() -> bool:
    return bool(os.environ.get(ENV))


def record_worker(worker: Any) -> None:
    """Append what this worker's engine built; never raises (the program under test goes on)."""
    target = os.environ.get(ENV)
    if not target:
        return
    entry: dict[str, Any] = {"pid": os.getpid(), "vllm": _vllm_version()}
    try:
        entry.update(attention_record(worker))
    except Exception as exc:  # an engine whose structure changed under us: say so, never guess
        entry["error"] = f"{type(exc).__name__}: {exc}"[:300]
    line = json.dumps(entry, sort_keys=True) + "\n"
    with open(target, "a", encoding="utf-8") as f:  # one short append per worker
        f.write(line)


def attention_backends(worker: Any) -> dict[str, list[str]]:
    """Layer kind -> the enum members of the backends its layers use (see the module's docstring)."""
    return attention_record(worker)["attention"]


def attention_record(worker: Any) -> dict[str, dict[str, list[str]]]:
    """{"attention": kind -> enum members, "attention_classes": kind -> class paths}, from the layers
    the worker's engine registered for the forward pass
    (`vllm_config.compilation_config.static_forward_context`)."""
    layers = worker.vllm_config.compilation_config.static_forward_context
    found: dict[str, set[str]] = {}
    for layer in layers.values():
        getter = getattr(layer, "get_attn_backend", None)
        backend = getter() if callable(getter) else getattr(layer, "attn_backend", None)
        if backend is None:
            continue
        found.setdefault(type(layer).__name__, set()).add(class_path(backend))
    if not found:
        raise LookupError("the engine registered no attention layer with a backend")
    members = enum_members()
    return {"attention": {kind: sorted({name for path in paths for name in members.get(path, [path])})
                          for kind, paths in sorted(found.items())},
            "attention_classes": {kind: sorted(paths) for kind, paths in sorted(found.items())}}


def class_path(backend: Any) -> str:
    """The backend's class as `module.QualifiedName` (an instance stands for its class)."""
    cls = backend if isinstance(backend, type) else type(backend)
    return f"{cls.__module__}.{cls.__qualname__}"


def enum_members() -> dict[str, list[str]]:
    """Class path -> the `AttentionBackendEnum` members whose `get_path()` it is, from the vLLM this
    process runs (a member that must be registered first, or a vLLM without the enum, is left out)."""
    try:
        from vllm.v1.attention.backends.registry import AttentionBackendEnum  # type: ignore[import-not-found]
    except Exception:
        return {}
    out: dict[str, list[str]] = {}
    for member in AttentionBackendEnum:
        try:
            path = member.get_path()
        except Exception:
            continue
        out.setdefault(str(path), []).append(member.name)
    return out


def _vllm_version() -> str:
    try:
        import vllm  # type: ignore[import-not-found]  # already imported: we run inside its worker

        return str(getattr(vllm, "__version__", "unknown"))
    except Exception:
        return "unknown"


def read(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The entries written to `path` (none when nothing was recorded); bad lines are skipped."""
    p = Path(path)
    if not p.is_file():
        return []
    out = []
    for line in p.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict):
            out.append(entry)
    return out


def merged(entries: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Every worker's layer kinds and backends together."""
    found: dict[str, set[str]] = {}
    for entry in entries:
        for kind, names in dict(entry.get("attention") or {}).items():
            found.setdefault(str(kind), set()).update(str(n) for n in names)
    return {kind: sorted(names) for kind, names in sorted(found.items())}


def merged_classes(entries: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Every worker's layer kinds and backend class paths together."""
    found: dict[str, set[str]] = {}
    for entry in entries:
        for kind, paths in dict(entry.get("attention_classes") or {}).items():
            found.setdefault(str(kind), set()).update(str(p) for p in paths)
    return {kind: sorted(paths) for kind, paths in sorted(found.items())}


def backends_in(attention: Mapping[str, Iterable[str]]) -> set[str]:
    return {name for names in attention.values() for name in names}
