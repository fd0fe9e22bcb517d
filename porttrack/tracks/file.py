"""Reading tracks.yaml: bytes → validated `porttrack.tracks.config.Config`, with a cache of the result.

Validating costs about 0.3 s of imports (pydantic, PyYAML) before any work, so `load_config` keeps
the validated records of the last file it checked in the workspace's `.porttrack/` folder, keyed
by a hash of the file's bytes and of the code that validates them. An unchanged file is read back
from there without importing either; any change to the file (or to porttrack) validates it again.
The cache is machine state of the same workspace, as trusted as tracks.yaml itself; a cache that
cannot be read or does not match is ignored, and one that cannot be written is not an error.

`porttrack.tracks.config` holds the records only; `porttrack.tracks.validation` (imported only when a
file must be checked) holds the checks; this module joins them, so neither imports the other back.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import stat
from pathlib import Path
from typing import Any, Callable, cast

from porttrack.common.errors import ConfigError
from porttrack.tracks.config import MAX_BYTES, PROFILES, TOO_BIG, AnyConfig, Config, NeutralConfig, _Record, fail
from porttrack.workspace.files import atomic_write_text


def load_config(path: Path, fork_override: str | None = None, cache_dir: Path | None = None) -> Config:
    """Read and validate tracks.yaml. Raises ConfigError (one line per problem) on anything wrong.

    With `cache_dir` (the workspace's `.porttrack/`), an unchanged file is read back from the
    records validated last time instead of being validated again (see the module's docstring).
    """
    path = Path(path)
    shown = _display_name(path)
    try:
        # O_NONBLOCK: a FIFO by that name must not hang the command; only a regular file is read
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                raise ConfigError(f"{shown}: not a regular file (a folder, FIFO, device or a link to one); "
                                  f"{path.name} must be a regular file")
            data = handle.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(f"{shown}: no such file") from None
    except IsADirectoryError:
        raise ConfigError(f"{shown}: is a folder, not a file") from None
    except OSError as exc:
        raise ConfigError(f"{shown}: cannot read: {exc.strerror or exc}") from None
    key = _cache_key(data) if cache_dir is not None else None
    config = _from_cache(cache_dir / CACHE_FILE, key, path) if cache_dir is not None and key else None
    if config is None:
        from porttrack.tracks.validation import validate  # lazy: pydantic and PyYAML, 0.3 s

        config = validate(_decode(data, shown), shown, path)
        if cache_dir is not None and key:
            _to_cache(cache_dir / CACHE_FILE, key, config)
    core = _as_core(config)
    return with_checkout(core, fork_override) if fork_override else core


def _as_core(config: AnyConfig) -> Config:
    """Every profile's record as the core reads it: through the fields and methods all profiles
    share (`_ConfigMethods`), typed as vllm-gpu's Config, whose interface is the widest."""
    return cast(Config, config)


def with_checkout(config: Config, checkout: str | Path) -> Config:
    """`config` with the fork checkout at `checkout` (--fork, PORTTRACK_FORK): a new record whose
    fork.checkout is that folder made absolute, so every reader of `Config.fork_checkout()` sees
    the same folder and the validated file (and its cache) stays as written."""
    absolute = os.path.normpath(Path(checkout).expanduser().absolute())
    return dataclasses.replace(config, fork=dataclasses.replace(config.fork, checkout=absolute))


def parse_config(text: str, filename: str) -> Config:
    """Validate tracks.yaml given as text; `filename` is used in messages and as Config.path."""
    from porttrack.tracks.validation import validate  # lazy: pydantic and PyYAML, 0.3 s

    if text.startswith("\ufeff"):
        text = text[1:]
    return _as_core(validate(text, filename, Path(filename)))


def _display_name(path: Path) -> str:
    """The path as given when relative; relative to the working folder when it lies below it."""
    if not path.is_absolute():
        return str(path)
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def _decode(data: bytes, shown: str) -> str:
    if len(data) > MAX_BYTES:
        fail(shown, 1, 1, "(document)", TOO_BIG)
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line_start = data.rfind(b"\n", 0, exc.start) + 1
        line = data.count(b"\n", 0, exc.start) + 1
        col = len(data[line_start : exc.start].decode("utf-8", "replace")) + 1
        fail(shown, line, col, "(encoding)", f"byte 0x{data[exc.start]:02x} is not UTF-8; save tracks.yaml as UTF-8")
    raise AssertionError("unreachable")


# --------------------------------------------------------------------------- the validated-config cache

CACHE_FILE = "validated-config.json"
CACHE_SCHEMA = "porttrack/validated-config/v1"
# What decides whether a file is valid, besides its bytes: these modules' source.
_VALIDATING_MODULES = ("config.py", "file.py", "validation.py", "examples.py", "eligibility.py")


def _cache_key(data: bytes) -> str | None:
    """sha256 of the file's bytes and of the validating code; None when that code can't be read."""
    digest = hashlib.sha256(CACHE_SCHEMA.encode() + b"\0" + data)
    here = Path(__file__).parent
    for name in _VALIDATING_MODULES:
        try:
            digest.update(b"\0" + (here / name).read_bytes())
        except OSError:
            return None
    return digest.hexdigest()


def _from_cache(file: Path, key: str, path: Path) -> AnyConfig | None:
    try:
        cached = json.loads(file.read_bytes())
        if cached.get("schema") != CACHE_SCHEMA or cached.get("key") != key:
            return None
        # the config as written, byte for byte: a hand-edited cache is validated afresh, never
        # thawed into a Config that tracks.yaml's validation did not produce
        if cached.get("sum") != _config_sum(cached["config"]):
            return None
        config = _thaw(cached["config"], path)
    except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError):  # unreadable, or not ours
        return None
    return config if isinstance(config, (Config, NeutralConfig)) else None


def _config_sum(frozen: Any) -> str:
    return hashlib.sha256(json.dumps(frozen).encode("utf-8", "surrogatepass")).hexdigest()


def _to_cache(file: Path, key: str, config: AnyConfig) -> None:
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        # Not dump_json: its sorted keys would lose the file's order of targets, models and tracks.
        frozen = _freeze(config)
        atomic_write_text(file, json.dumps({"schema": CACHE_SCHEMA, "key": key, "sum": _config_sum(frozen), "config": frozen}))
    except OSError:
        pass  # a read-only workspace validates every time; that is all it costs


def _freeze(value: Any) -> Any:
    """Records as {"record": class name, "fields": {...}}, mappings as {"mapping": {...}}, so no key
    a user wrote can pass for a record. Config.path is left to the reader."""
    if isinstance(value, _Record) and dataclasses.is_dataclass(value):  # every record is
        names = [f.name for f in dataclasses.fields(value) if f.init and f.name != "path"]
        return {"record": type(value).__name__, "fields": {name: _freeze(getattr(value, name)) for name in names}}
    if isinstance(value, dict):
        return {"mapping": {key: _freeze(item) for key, item in value.items()}}
    if isinstance(value, list):
        return [_freeze(item) for item in value]
    return value


def _thaw(value: Any, path: Path) -> Any:
    if isinstance(value, list):
        return [_thaw(item, path) for item in value]
    if not isinstance(value, dict):
        return value
    if "mapping" in value:
        return {key: _thaw(item, path) for key, item in value["mapping"].items()}
    cls: Callable[..., _Record] = _Record.kinds[value["record"]]  # a record's class: its fields by keyword
    fields = {name: _thaw(item, path) for name, item in value["fields"].items()}
    is_config = any(cls is p.record for p in PROFILES.values())
    return cls(path=path, **fields) if is_config else cls(**fields)
