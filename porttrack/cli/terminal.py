"""How human output meets the terminal: width, colour, pager, and progress that updates in place.

One place decides, once per command (`Terminal.resolve`), as git and gh do:
- colour: `--color auto|always|never`; auto means stdout is a terminal, `NO_COLOR` is unset or
  empty (no-color.org: an explicit `--color always` still wins) and TERM is not `dumb`;
- width: `COLUMNS` when set, else the terminal's; piped without `COLUMNS`, lines keep their length
  (plain, stable text for grep and scripts; the full text of every field is in `--json` anyway);
- pager: only when stdout is a terminal, the output is taller than it, and not `--no-pager`:
  `PORTTRACK_PAGER`, else `PAGER`, else `less` with `LESS=FRX` when LESS is unset (git's default).

Layout and escape sequences are rich's (imported inside the functions: ~40 ms that `--help` need
not pay). Untrusted text is still neutralised by `porttrack.common.text.for_terminal` before it gets here,
and rich is given plain `Text`, never markup, so a PR title cannot style or move anything.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, Iterable, Mapping, Sequence

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.text import Text

COLOR_CHOICES = ("auto", "always", "never")
UNLIMITED = 10_000  # "no width": piped without COLUMNS, nothing is cut or wrapped
# What `for_terminal` may keep of one untrusted line shown whole (piped output is never cut): more
# than GitHub lets a title or body line be shown here, yet a bound on a hostile answer.
UNCUT = 4_000

# The style of each state word, wherever it is shown (status, queue, eligibility, gates, apply).
STATE_STYLES: Mapping[str, str] = {
    # upstream PRs
    "open": "green", "merged": "magenta", "closed": "red", "unobserved": "yellow",
    # queued patches
    "queued": "cyan", "ungated": "cyan", "gated-pass": "green", "gated-fail": "red", "default-enabled": "bold green",
    "dropped": "dim", "converged": "magenta",
    # eligibility
    "eligible": "green", "conditional": "yellow", "ineligible": "red",
    # gate cells and apply outcomes
    "pass": "green", "fail": "red", "missing": "yellow", "clean": "green", "conflict": "red",
    # next actions
    "orphaned": "red", "convergence-check": "magenta", "refresh": "yellow", "wait-for-stack": "yellow",
    "port-candidate": "green",
}


@dataclass(frozen=True)
class Terminal:
    """How one command's stdout is shown. `width` None: as long as each line is."""

    color: bool = False
    width: int | None = None
    pager: bool = False
    height: int | None = None

    @classmethod
    def resolve(cls, color: str = "auto", no_pager: bool = False, stream: IO[str] | None = None,
                environ: Mapping[str, str] | None = None) -> "Terminal":
        stream = stream if stream is not None else sys.stdout
        env = os.environ if environ is None else environ
        tty = _isatty(stream)
        size = shutil.get_terminal_size((0, 0)) if tty else os.terminal_size((0, 0))
        width = _columns(env) or (size.columns or None)
        if color == "always":
            colored = True
        elif color == "never":
            colored = False
        else:
            colored = tty and not env.get("NO_COLOR") and env.get("TERM") != "dumb"
        return cls(colored, width, tty and not no_pager, size.lines or None)


def _isatty(stream: IO[Any]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or fake stream (tests' StringIO)
        return False


def _columns(env: Mapping[str, str]) -> int | None:
    value = env.get("COLUMNS", "").strip()
    return int(value) if value.isdigit() and int(value) >= 20 else None


# -- building output ---------------------------------------------------------------------------
def text(value: str = "", style: str | None = None) -> "Text":
    from rich.text import Text

    return Text(value, style=style or "")


def state(word: str, shown: str | None = None) -> "Text":
    """A state word in its colour (`STATE_STYLES`); `shown` replaces the word's text."""
    return text(shown if shown is not None else word, STATE_STYLES.get(word))


def joined(*parts: "str | Text") -> "Text":
    from rich.text import Text

    return Text.assemble(*parts)


def paragraph(body: "str | Text", indent: int = 0, hang: int = 0) -> "RenderableType":
    """Text wrapped at word boundaries to the width, `indent` spaces before the first line and
    `indent + hang` before the rest (a long note stays readable at 60 columns)."""
    from rich.padding import Padding

    line = body if not isinstance(body, str) else text(body)
    if hang:
        return _Hanging(line, indent, hang)
    return Padding(line, (0, 0, 0, indent), expand=False)


class _Hanging:
    """rich has no hanging indent: wrap to the narrower width, then indent the continuation."""

    def __init__(self, body: "Text", indent: int, hang: int) -> None:
        self.body, self.indent, self.hang = body, indent, hang

    def __rich_console__(self, console: "Console", options: Any):
        from rich.segment import Segment

        width = max(options.max_width - self.indent - self.hang, 10)
        lines = self.body.wrap(console, width)
        for n, line in enumerate(lines):
            yield Segment(" " * (self.indent + (self.hang if n else 0)))
            yield from line.render(console)
            yield Segment.line()


def indented(line: str, hang: int = 2, untrusted: bool = False) -> "RenderableType | str":
    """A line whose leading spaces are its indent, wrapped under that indent; `untrusted`: made
    safe first (`for_terminal`, which also folds runs of spaces: not for aligned text)."""
    from porttrack.common.text import for_terminal

    body = line.lstrip(" ")
    if untrusted:
        body = for_terminal(body, UNCUT)
    return paragraph(body, indent=len(line) - len(body), hang=hang) if body else ""


def cut(body: "str | Text", indent: int = 0) -> "RenderableType":
    """One line, cut with an ellipsis where it would pass the width (a title; the full text is in --json)."""
    from rich.padding import Padding

    line = body.copy() if not isinstance(body, str) else text(body)
    line.no_wrap, line.overflow = True, "ellipsis"
    return Padding(line, (0, 0, 0, indent), expand=False)


@dataclass(frozen=True)
class Column:
    header: str = ""
    fit: str = "keep"  # keep: never cut; cut: ellipsis where it must give way; wrap: wrap within the column


GAP = 2  # spaces between columns


def table(columns: Sequence[Column], rows: Iterable[Sequence["str | Text"]], *, indent: int = 0, header: bool = True,
          measure: Iterable[Sequence["str | Text"]] = (), narrow: Sequence["RenderableType | str"] = ()) -> "RenderableType":
    """Columns GAP spaces apart, no borders, a bold header. When the natural widths do not fit, the
    `cut` and `wrap` columns share what the `keep` ones leave (narrow ones keep their width), or,
    when `narrow` is given, `narrow` is shown instead of the table.
    `measure`: more rows whose widths count (one track's PRs shown one row at a time, aligned)."""
    return _Fitted(tuple(columns), tuple(tuple(r) for r in rows), indent, header, tuple(tuple(r) for r in measure), tuple(narrow))


@dataclass(frozen=True)
class _Fitted:
    columns: tuple[Column, ...]
    rows: tuple[tuple[Any, ...], ...]
    indent: int
    header: bool
    measure: tuple[tuple[Any, ...], ...]
    narrow: tuple[Any, ...] = ()

    def __rich_console__(self, console: "Console", options: Any):
        from rich.padding import Padding
        from rich.table import Table

        room = options.max_width - self.indent
        if self.narrow and sum(self.widths(UNLIMITED)) + GAP * (len(self.columns) - 1) > room:
            for part in self.narrow:
                yield text(part) if isinstance(part, str) else part
            return
        widths = self.widths(room)
        grid = Table(box=None, show_edge=False, pad_edge=False, padding=(0, GAP // 2, 0, GAP - GAP // 2),
                     header_style="bold", show_header=self.header, expand=False)
        for col, width in zip(self.columns, widths):
            grid.add_column(col.header, width=width, no_wrap=col.fit != "wrap",
                            overflow="ellipsis" if col.fit == "cut" else "fold")
        for row in self.rows:
            grid.add_row(*row)
        yield Padding(grid, (0, 0, 0, self.indent), expand=False) if self.indent else grid

    def widths(self, room: int) -> list[int]:
        from rich.cells import cell_len

        rows = [*self.rows, *self.measure, *([tuple(c.header for c in self.columns)] if self.header else [])]
        natural = [max((cell_len(str(r[i])) for r in rows), default=0) for i in range(len(self.columns))]
        flexible = [i for i, c in enumerate(self.columns) if c.fit != "keep"]
        spare = room - GAP * (len(self.columns) - 1) - sum(w for i, w in enumerate(natural) if i not in flexible)
        widths = list(natural)
        # water-filling: the narrowest flexible columns keep their width, the rest share equally
        for n, i in enumerate(sorted(flexible, key=lambda i: natural[i])):
            share = max(spare // (len(flexible) - n), 1)
            widths[i] = min(natural[i], share)
            spare -= widths[i]
        return widths


def render(term: Terminal, parts: Iterable["RenderableType | str"]) -> str:
    """The parts, one after another, as the text to print (escape sequences only when `term.color`);
    a str part is one plain line, printed as it is (already neutralised, no wrapping)."""
    from rich.console import Console

    buffer = io.StringIO()
    console = Console(
        file=buffer, width=term.width or UNLIMITED, color_system="standard" if term.color else None,
        force_terminal=term.color, force_interactive=False, no_color=not term.color, markup=False,
        emoji=False, highlight=False, legacy_windows=False, soft_wrap=False, _environ={},
    )
    for part in parts:
        if isinstance(part, str):
            console.print(text(part), no_wrap=True, overflow="ignore", crop=False)
        else:
            console.print(part)
    return "\n".join(_TRAILING.sub(r"\1", line) for line in buffer.getvalue().splitlines())


# Spaces at the end of a line, also where a style's reset follows them (rich pads styled cells)
_TRAILING = re.compile(r" +((?:\x1b\[[0-9;]*m)*)$")


def show(term: Terminal, output: str) -> None:
    """Print `output` to stdout, through the pager when it is taller than the terminal."""
    if term.pager and term.height and output.count("\n") + 1 >= term.height and _page(output):
        return
    sys.stdout.write(output + "\n")
    sys.stdout.flush()


def _page(output: str) -> bool:
    """True when a pager showed `output`; False when there is none to run (then print it plainly)."""
    command = os.environ.get("PORTTRACK_PAGER") or os.environ.get("PAGER") or "less"
    if command.strip() in ("", "cat"):
        return False
    env = dict(os.environ)
    env.setdefault("LESS", "FRX")  # quit if one screen, keep colour, leave the screen as it was
    env.setdefault("LV", "-c")
    try:
        proc = subprocess.Popen(command, shell=True, stdin=subprocess.PIPE, env=env)
    except OSError:
        return False
    assert proc.stdin is not None
    try:
        proc.stdin.write((output + "\n").encode(sys.stdout.encoding or "utf-8", "replace"))
        proc.stdin.close()
    except BrokenPipeError:  # the user quit the pager before reading it all
        pass
    proc.wait()
    return proc.returncode != 127  # the shell found no such pager


# -- progress ----------------------------------------------------------------------------------
# git's progress lines ("Receiving objects:  45% (101/222), 1.2 MiB | 3 MiB/s", "remote: Counting
# objects: 300", "remote: Total 603 (delta 492), reused 0") and porttrack's own ("PRs answered: 3/12"): a phase, a colon, a count.
_PROGRESS = re.compile(r"^(?:remote: )?(?:[A-Za-z][A-Za-z ]{0,40}: +(?:\d+% \(\d+/\d+\)|\d+(?:/\d+)?\b)|Total \d+ \(delta \d+\))")
# git's account of the refs it moved ("From <url>", " * [new ref] refs/pull/7/head -> …", " + a1...b2"):
# one line per ref, 100 for 100 PRs; porttrack records what moved itself. A refusal ("! [rejected]") stays.
_REF_LINE = re.compile(r"^(?:From \S|[*+\-t=]? ?(?:\[[a-z ]+\]|[0-9a-f]{4,}\.\.\.?[0-9a-f]{4,})\s)")
_DONE = re.compile(r", done\.?$|^[^:]+: +(\d+)/\1$")  # a phase's last line: git's ", done." or our "12/12"


class Progress:
    """A callback for progress lines. On a terminal (and not in CI) one line, redrawn in place;
    otherwise only each phase's last line ("…, done.") and lines that are not progress at all,
    so a 227k-object fetch says a handful of lines instead of 412. `close()` ends the line."""

    def __init__(self, label: str, stream: IO[str] | None = None, environ: Mapping[str, str] | None = None) -> None:
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        env = os.environ if environ is None else environ
        self.live = _isatty(self.stream) and not env.get("CI") and env.get("TERM") != "dumb"
        self.width = (_columns(env) or shutil.get_terminal_size((80, 24)).columns) if self.live else None
        self.drawn = False

    def __call__(self, line: str) -> None:
        from porttrack.common.text import for_terminal

        line = for_terminal(line, 300)
        if not line or _REF_LINE.match(line):
            return
        if not _PROGRESS.match(line):
            self._print(line)
        elif self.live:
            self._draw(line)
        elif _DONE.search(line):
            self._print(line)

    def _print(self, line: str) -> None:
        self._clear()
        self.stream.write(f"  {self.label}: {line}\n")
        self.stream.flush()

    def _draw(self, line: str) -> None:
        shown = f"  {self.label}: {line}"
        width = (self.width or 80) - 1
        if len(shown) > width:
            shown = shown[: width - 1] + "…"
        self.stream.write(_control("\r", "erase") + shown)
        self.stream.flush()
        self.drawn = True

    def _clear(self) -> None:
        if self.drawn:
            self.stream.write(_control("\r", "erase"))
            self.drawn = False

    def close(self) -> None:
        """End the updating line (it stays on screen: the last state of the last phase)."""
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()
            self.drawn = False

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _control(*what: str) -> str:
    """Carriage return and erase-to-end-of-line, as rich spells them."""
    from rich.control import Control, ControlType

    codes = {"\r": Control((ControlType.CARRIAGE_RETURN,)), "erase": Control((ControlType.ERASE_IN_LINE, 0))}
    return "".join(str(codes[w]) for w in what)


def fit_stderr(text: str, stream: IO[str] | None = None) -> str:
    """`text` for stderr: on a terminal, each line longer than its width is wrapped at word
    boundaries (never mid-word; a word longer than a line stays whole), the continuation indented
    under the line's own indent + 2. Piped (a log, a CI job), lines keep their length, as stdout's."""
    import textwrap

    stream = stream if stream is not None else sys.stderr
    width = _stderr_width(stream)
    if width is None:
        return text
    out = []
    for line in text.split("\n"):
        if len(line) <= width:
            out.append(line)
            continue
        indent = " " * (len(line) - len(line.lstrip(" ")))
        out.extend(textwrap.wrap(line, width=width, initial_indent="", subsequent_indent=indent + "  ",
                                 break_long_words=False, break_on_hyphens=False) or [line])
    return "\n".join(out)


def _stderr_width(stream: IO[str]) -> int | None:
    """COLUMNS when set (and the stream a terminal), else the terminal's; None when piped."""
    try:
        if not stream.isatty():
            return None
    except (AttributeError, ValueError):
        return None
    raw = os.environ.get("COLUMNS", "").strip()
    if raw.isdigit() and int(raw) >= 20:
        return int(raw)
    try:
        return max(20, os.get_terminal_size(stream.fileno()).columns)
    except (OSError, ValueError, AttributeError):
        return None
