"""The one local job runner: every `job.command` (a gate job, `porttrack gate run`) and every
`regression.command` (`porttrack verify-converged --run-regression`) runs through `run_job`.

The rule for a command, the same everywhere:

1. The command is split into arguments the way a POSIX shell would split it (`shlex.split`:
   quotes and backslashes group, nothing else is interpreted), **before** any value is put in.
2. Then `{ref}`, `{results}`, `{workdir}` and `{target}` are filled in *inside each argument*
   (`{{` and `}}` are literal braces). A value is never split again, whatever it holds
   (spaces, quotes, `;`, `$`): `--out {results}` is always two arguments, and quoting a
   placeholder is harmless but never needed.
3. The program runs directly, **without a shell**: `;`, `&&`, `|`, `>`, `$VAR`, `*` are passed to
   it as plain characters. When a job needs a shell, say so explicitly and read the values from
   the environment, where the shell quotes them:
   `sh -c 'cd "$PORTTRACK_WORKDIR" && make check > "$PORTTRACK_RESULTS"'` — every placeholder's
   value is also set as `PORTTRACK_<NAME>` (PORTTRACK_REF, PORTTRACK_RESULTS, ...). A placeholder
   written inside such a script is filled as plain text, which the shell would then re-read.

The job runs in a process group of its own with stdin closed, its output (stdout and stderr
together) going to a log file; it is stopped — SIGTERM to the whole group, SIGKILL after a grace
period — when it outlives its timeout, and killed with porttrack if porttrack itself is killed.
Its environment carries no GitHub token, and any token shape it prints anyway is masked in the
kept log and in the output tail returned.
"""

from __future__ import annotations

import ctypes
import os
import shlex
import signal
import string
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Callable, Mapping

from porttrack.common.errors import ConfigError
from porttrack.common.secrets import redact, without_tokens

TAIL_READ_BYTES = 256 * 1024  # the tail is read from the end of the log, however long it grew
GRACE_S = 10.0  # between SIGTERM and SIGKILL to the job's process group


@dataclass(frozen=True)
class JobRun:
    argv: tuple[str, ...]  # what was run, placeholders filled
    exit_code: int | None  # None: it timed out and its process group was stopped
    duration_s: float
    output_tail: tuple[str, ...]  # the last lines of its output, token shapes masked
    log: Path | None  # the kept log (redacted), when the caller asked for one

    @property
    def timed_out(self) -> bool:
        return self.exit_code is None


def command_argv(command: str, values: Mapping[str, str], what: str = "job command") -> list[str]:
    """The rule above, steps 1 and 2: `command` as the argument vector to run."""
    try:
        template = shlex.split(command)
    except ValueError as exc:
        raise ConfigError(f"the {what} cannot be split into arguments: {exc}") from None
    if not template:
        raise ConfigError(f"the {what} is empty")
    return [fill(part, values, what) for part in template]


def fill(argument: str, values: Mapping[str, str], what: str = "job command") -> str:
    """One argument with its `{name}` placeholders replaced by `values[name]` verbatim."""
    out = []
    try:
        fields = list(string.Formatter().parse(argument))
    except ValueError as exc:  # a lone { or }
        raise ConfigError(f"malformed placeholder in the {what} ({exc}); write {{{{ and }}}} for a literal brace") from None
    for literal, name, spec, conversion in fields:
        out.append(literal)
        if name is None:
            continue
        if name not in values or spec or conversion:
            known = " ".join("{" + n + "}" for n in values)
            raise ConfigError(f"unknown placeholder {{{name}}} in the {what} (known: {known})")
        out.append(values[name])
    return "".join(out)


def job_env(values: Mapping[str, str], extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """porttrack's environment without tokens, each placeholder as PORTTRACK_<NAME>, then `extra`."""
    placed = {f"PORTTRACK_{name.upper()}": value for name, value in values.items()}
    return without_tokens({**os.environ, **placed, **(extra or {})})


def run_job(
    command: str,
    values: Mapping[str, str],
    *,
    cwd: Path,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    log: Path | None = None,
    tail_lines: int = 12,
    grace_s: float = GRACE_S,
    what: str = "job command",
) -> JobRun:
    """Run `command` by the rule above in `cwd`. `env` is added to the job's environment (tokens
    are removed from the result); `log` keeps the output (else it goes to a temporary file).
    A program that cannot be started is a ConfigError naming `what`."""
    argv = command_argv(command, values, what)
    started = time.monotonic()
    with _output(log) as out:
        code = _execute(argv, cwd, job_env(values, env), out, timeout_s, grace_s, what)
        duration = round(time.monotonic() - started, 3)
        tail = _tail(out, tail_lines)
    if log is not None:
        _redact_file(log)
    return JobRun(tuple(argv), code, duration, tail, log)


def _output(log: Path | None) -> IO[bytes]:
    if log is None:
        return tempfile.TemporaryFile()
    log.parent.mkdir(parents=True, exist_ok=True)
    return open(log, "w+b")


def _execute(argv: list[str], cwd: Path, env: Mapping[str, str], out: IO[bytes], timeout_s: float,
             grace_s: float, what: str) -> int | None:
    """Run in a new process group; on timeout stop the whole group. None: timed out."""
    try:
        proc = subprocess.Popen(argv, cwd=cwd, env=dict(env), stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT, start_new_session=True, preexec_fn=_die_with_parent())
    except OSError as exc:
        raise ConfigError(f"cannot start the {what} {argv[0]!r}: {exc.strerror or exc}") from None
    try:
        return proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _stop_group(proc, grace_s)
        return None
    except BaseException:  # interrupted: the job must not outlive porttrack
        _stop_group(proc, grace_s)
        raise


def _stop_group(proc: subprocess.Popen, grace_s: float) -> None:
    """SIGTERM to the group, SIGKILL after `grace_s`; the group is killed even when its leader
    left at once, so a child that ignores SIGTERM does not stay measuring."""
    _signal_group(proc, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        pass
    _signal_group(proc, signal.SIGKILL)
    proc.wait()


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _die_with_parent() -> Callable[[], Any] | None:
    """A function for the job's child process (before exec) that asks Linux to SIGKILL it when
    porttrack dies (PR_SET_PDEATHSIG): a gate run killed with SIGKILL must not leave its benchmark
    running on the machine the rerun measures on. Resolved here, in the parent: nothing is looked
    up between fork and exec. None where prctl is not available."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    return lambda: prctl(1, int(signal.SIGKILL))  # 1 = PR_SET_PDEATHSIG


def _tail(out: IO[bytes], lines: int) -> tuple[str, ...]:
    out.flush()
    size = out.seek(0, os.SEEK_END)
    out.seek(max(0, size - TAIL_READ_BYTES))
    text = out.read().decode("utf-8", "replace")
    return tuple(redact(text).rstrip("\n").splitlines()[-lines:]) if text else ()


def _redact_file(path: Path) -> None:
    """Mask any token shape the job printed anyway (one it found elsewhere) in its kept log."""
    try:
        text = path.read_bytes().decode("utf-8", "surrogateescape")
    except OSError:
        return
    clean = redact(text)
    if clean != text:
        path.write_bytes(clean.encode("utf-8", "surrogateescape"))
