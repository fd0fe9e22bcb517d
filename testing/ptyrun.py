"""Run a program with one of its streams on a pseudo-terminal, as a person's terminal would be."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import termios
from collections.abc import Mapping, Sequence
from pathlib import Path


def run_on_pty(argv: Sequence[str], *, stream: str, env: Mapping[str, str], cwd: Path,
               timeout: float = 120, columns: int | None = None, lines: int = 200) -> tuple[bytes, bytes, int]:
    """(what the terminal received, the other stream's bytes, exit status). `stream` is "stdout"
    or "stderr": the one that goes to the terminal; the other is a pipe. `columns`: the terminal's
    size as the kernel reports it (TIOCSWINSZ), what a program asks when COLUMNS is unset."""
    master, slave = pty.openpty()
    if columns is not None:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", lines, columns, 0, 0))
    streams = {"stdout": slave, "stderr": subprocess.PIPE} if stream == "stdout" else {"stdout": subprocess.PIPE, "stderr": slave}
    proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, env=dict(env), cwd=cwd, **streams)
    os.close(slave)
    received = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        received += chunk
    os.close(master)
    other = (proc.stderr if stream == "stdout" else proc.stdout).read()
    return received, other, proc.wait(timeout=timeout)
