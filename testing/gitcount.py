"""Count the git processes a command starts: a `git` put first on PATH that logs each call and
runs the real one.

    with git_counter(tmp) as counter:
        subprocess.run([...], env={**env, **counter.env(env)})
    counter.calls()        # [GitCall(argv, seconds, rc), ...] in the order they ended
    counter.summary()      # {"processes": 34, "by_command": {"rev-parse": 21, ...}, "git_s": ...}

The wrapper is a bash script (a Python one would add ~20 ms of start-up to every call and distort
the timing it reports): it records the start time, runs the real git with the same argv, stdin,
stdout and stderr, then appends one line — start, end, exit status, argv (NUL-free, tab-separated,
each argument `printf %q`-quoted) — to the log named by PORTTRACK_GITCOUNT_LOG, and exits with
git's status. Only the calls that reach git through PATH are counted: git runs its own helpers
(`git-upload-pack`, the `rev-list` of a connectivity check) from its exec-path, which is what a
user pays for as part of the one command they asked for.

Used by benchmarks (process counts beside times) and by tests/git/test_repo_processes.py.
"""

from __future__ import annotations

import codecs
import collections
import contextlib
import os
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Mapping

LOG_VARIABLE = "PORTTRACK_GITCOUNT_LOG"

_SCRIPT = """#!/bin/bash
# porttrack's git process counter (testing/gitcount.py): log, then run the real git
start=$EPOCHREALTIME
{real} "$@"
rc=$?
end=$EPOCHREALTIME
if [ -n "${log_var}" ]; then
  line="$start"$'\\t'"$end"$'\\t'"$rc"
  for a in "$@"; do printf -v q '%q' "$a"; line+=$'\\t'"$q"; done
  printf '%s\\n' "$line" >> "${log_var}"
fi
exit $rc
"""


@dataclass(frozen=True)
class GitCall:
    argv: tuple[str, ...]  # the arguments after `git`
    seconds: float
    rc: int

    @property
    def command(self) -> str:
        """The git subcommand, past the `-c name=value` / `-C dir` options porttrack's door adds."""
        args = list(self.argv)
        while args and args[0].startswith("-"):
            takes_value = args[0] in ("-c", "-C", "--git-dir", "--work-tree", "--exec-path", "--namespace")
            args = args[2:] if takes_value else args[1:]
        return args[0] if args else "(none)"


def real_git() -> str:
    found = shutil.which("git")
    if found is None:
        raise RuntimeError("git is not on PATH: the git counter needs the real git to run")
    return os.path.realpath(found)


class GitCounter:
    """A folder holding the wrapper `git`, and the log it appends to."""

    def __init__(self, folder: Path, real: str | None = None) -> None:
        self.folder = Path(folder)
        self.bin = self.folder / "bin"
        self.log = self.folder / "git-calls.log"
        self.bin.mkdir(parents=True, exist_ok=True)
        real = real or real_git()
        script = self.bin / "git"
        script.write_text(_SCRIPT.format(real=shlex.quote(real), log_var=LOG_VARIABLE))
        script.chmod(0o755)
        self.reset()

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """PATH with the wrapper first, and the log variable; merge into a subprocess environment."""
        path = (base if base is not None else os.environ).get("PATH", os.defpath)
        return {"PATH": f"{self.bin}{os.pathsep}{path}", LOG_VARIABLE: str(self.log)}

    @contextlib.contextmanager
    def active(self) -> Iterator["GitCounter"]:
        """The wrapper on this process's own PATH (for in-process runs), restored on leaving."""
        saved = {k: os.environ.get(k) for k in ("PATH", LOG_VARIABLE)}
        os.environ.update(self.env())
        try:
            yield self
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value

    def reset(self) -> None:
        self.log.write_text("")

    def calls(self) -> list[GitCall]:
        out = []
        for line in self.log.read_text().splitlines():
            start, end, rc, *argv = line.split("\t")
            out.append(GitCall(tuple(_unquote(a) for a in argv), float(end) - float(start), int(rc)))
        return out

    def summary(self) -> dict:
        calls = self.calls()
        by_command = collections.Counter(c.command for c in calls)
        return {"processes": len(calls), "by_command": dict(by_command.most_common()),
                "git_s": round(sum(c.seconds for c in calls), 4)}


def _unquote(word: str) -> str:
    """Undo bash's `printf %q` for the common cases (backslash escapes and $'...' quoting)."""
    if word.startswith("$'") and word.endswith("'"):  # C escapes; non-ASCII bytes come as \ooo
        raw = codecs.escape_decode(word[2:-1].replace("\\E", "\\x1b").encode("utf-8", "surrogateescape"))[0]
        return raw.decode("utf-8", "surrogateescape")
    try:
        parts = shlex.split(word)
    except ValueError:
        return word
    return parts[0] if len(parts) == 1 else word if not parts else word


@contextlib.contextmanager
def git_counter(folder: Path) -> Iterator[GitCounter]:
    """A GitCounter in `folder` (created), for use with `with`."""
    yield GitCounter(Path(folder))


def describe(summary: Mapping) -> str:
    """`34 git processes (rev-parse 21, cat-file 4, ...)`: one line for a benchmark's output."""
    parts = ", ".join(f"{k} {v}" for k, v in summary["by_command"].items())
    return f"{summary['processes']} git processes ({parts})"
