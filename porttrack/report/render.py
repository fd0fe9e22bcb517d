"""Render: the weekly issue's markdown from a template, and fit it into GitHub's limit.

The report's JSON form is the template's context, so `--json` and the issue carry the same
content. The template is data (`templates/weekly_status.md.j2` in the workspace overrides the
packaged one); jinja2 runs sandboxed (ImmutableSandboxedEnvironment) with StrictUndefined, and
every value it prints passes through `porttrack.common.markdown.text` unless it is already safe
markdown (`Md`), so an overriding template cannot forget to neutralise a PR title.

Fit (`fit_body`): GitHub refuses issue bodies over 65,536 characters; a longer report is cut at a
section boundary (or a line, closing an open code block), with a pointer to the full file.
"""

from __future__ import annotations

import os
import re
from importlib import resources
from typing import Any, Callable, Iterable, Mapping

from porttrack.common import markdown as md
from porttrack.common.errors import InputError
from porttrack.report.records import WeeklyReport, report_to_json
from porttrack.workspace.files import Workspace

TEMPLATE_NAME = "weekly_status.md.j2"
BODY_LIMIT = 65536  # GitHub's limit on an issue body, in characters
# Compiled templates by (source, filter names): compiling the packaged template is most of a
# render's time, and a process that renders more than once (a long-lived caller, the test suite's
# in-process runs) compiles it once. The filters and globals bound to each report are looked up
# at render time, so the compiled code does not depend on the report. A few entries at most.
_COMPILED: dict[tuple[str, tuple[str, ...]], Any] = {}
_COMPILED_MAX = 8


def template_source(ws: Workspace | None) -> tuple[str, str]:
    """The template text and where it came from: the workspace's templates/ first, else the wheel's."""
    if ws is not None:
        own = ws.templates_dir / TEMPLATE_NAME
        if own.is_file():
            return own.read_text(encoding="utf-8"), str(own)
    packaged = resources.files("porttrack").joinpath("templates").joinpath(TEMPLATE_NAME)
    return packaged.read_text(encoding="utf-8"), f"porttrack/templates/{TEMPLATE_NAME} (packaged)"


def render(report: WeeklyReport, ws: Workspace | None = None) -> str:
    """The issue body in full (before `fit_body`)."""
    import jinja2.sandbox  # lazy: see the package docstring (binds `jinja2` too)

    source, origin = template_source(ws)
    # A workspace template is data anyone with a commit can change, rendered by a job that holds
    # a write token: the sandbox refuses attribute access that reaches code (`__globals__`,
    # `__class__`, ...) and calls that change data, so a template cannot run a command or read
    # the environment. Nothing in its context holds the token (the report's JSON and small pure
    # functions), so there is nothing else to reach it through.
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,  # markdown, not HTML: `finalize` below is the escaping
        finalize=_finalize,
    )
    env.filters.update(_filters(report))
    env.globals.update(_globals(report))
    try:
        key = (source, tuple(sorted(env.filters)))
        code = _COMPILED.get(key)
        if code is None:
            code = env.compile(source)
            if len(_COMPILED) >= _COMPILED_MAX:
                _COMPILED.clear()
            _COMPILED[key] = code
        template = env.template_class.from_code(env, code, env.make_globals(None), None)
        text = template.render(r=report_to_json(report))
    except jinja2.sandbox.SecurityError as exc:
        raise InputError(f"{origin}:{_template_line(exc)}: the template reached for something a template may not use"
                         f" (only the report's values and porttrack's filters are open to it): {exc}") from None
    except jinja2.TemplateError as exc:
        raise InputError(f"{origin}:{_template_line(exc)}: {exc}") from None
    except (TypeError, ValueError, AttributeError, KeyError, IndexError) as exc:  # a template is data a person edits
        raise InputError(f"{origin}:{_template_line(exc)}: {type(exc).__name__}: {exc}") from None
    return _tidy(text)


def _template_line(exc: BaseException) -> str:
    """The template line an error happened on: syntax errors carry it, runtime errors (an
    undefined value) only in the traceback jinja2 rewrites to point into the template."""
    line = getattr(exc, "lineno", None)
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return str(line) if line else "?"


def _finalize(value: Any) -> Any:
    """Every `{{ … }}` output: safe markdown passes, numbers print, anything else is neutralised."""
    if isinstance(value, md.Md):
        return value
    if value is None:
        return md.Md("—")
    if isinstance(value, bool):
        return md.Md("yes" if value else "no")
    if isinstance(value, (int, float)):
        return md.Md(_number(value))
    return md.text(value)


def _number(value: float | int) -> str:
    if isinstance(value, int):
        return str(value)
    if value != value:  # NaN never reaches here from evidence; be safe anyway
        return "—"
    return f"{value:.4g}" if abs(value) < 1e6 else f"{value:.0f}"


_VERDICT_WORDS = {
    "pass": "✅ pass",
    "fail": "❌ fail",
    "missing": "⚪ no evidence",
    "no-evidence": "⚪ no evidence",
    "baseline-missing": "⚠️ no baseline",
    "baseline-other-environment": "⚠️ baseline from another environment",
    "cannot-evaluate": "⚠️ cannot evaluate",
    "superseded": "🚫 superseded",
    "n/a": "n/a",
    "not-measured": "—",
}

_STATE_WORDS = {
    "open": "🟢 open",
    "merged": "🟣 merged",
    "closed": "🔴 closed, not merged",
    "unobserved": "❔ not observed",
    "queued": "queued",
    "ungated": "ungated",
    "gated-pass": "✅ gated: pass",
    "gated-fail": "❌ gated: fail",
    "default-enabled": "🚀 default-enabled",
    "dropped": "dropped",
    "converged": "converged",
    "eligible": "✅",
    "conditional": "⏳",
    "ineligible": "—",
}

_NEXT_WORDS = {
    "orphaned": "decide: carry, follow a successor, or drop",
    "convergence-check": "verify convergence",
    "converged": "drop the carried copy",
    "queued": "prove the queued patch with its gate",
    "refresh": "upstream moved: refresh the queued patch",
    "port-candidate": "import its stable hunks",
    "wait-for-stack": "wait for the PR it is stacked on",
    "unknown": "observe upstream",
}

_EVENT_WORDS = {
    "observed": "first observed",
    "appended": "new commits",
    "force-pushed": "force-pushed",
    "merged": "merged",
    "closed": "closed without merging",
    "reopened": "reopened",
    "retitled": "retitled",
    "rebased-onto": "base branch changed",
    "compacted": "earlier history compacted",
}

# successor reasons (porttrack.observe.successors.Reason) that name no PR: their words
_REASON_WORDS = {
    "shares-hunks": "shares {} hunks",
    "near-hunks": "nearly matches {} more (same file, mostly the same added lines)",
    "same-author": "same author ({})",
}

# Event details porttrack writes itself (SHAs, counts, states); a retitle quotes the PR's new title.
_OWN_DETAIL_KINDS = frozenset({"observed", "appended", "force-pushed", "merged", "closed", "reopened", "rebased-onto", "compacted"})


def _filters(report: WeeklyReport) -> dict[str, Callable[..., Any]]:
    upstream = report.upstream_repo

    def verdict(value: Any) -> md.Md:
        return md.Md(_VERDICT_WORDS.get(str(value), str(md.text(value))))

    def state(value: Any) -> md.Md:
        return md.Md(_STATE_WORDS.get(str(value), str(md.text(value))))

    def event(change: Mapping[str, Any]) -> md.Md:
        words = _EVENT_WORDS.get(change["kind"], str(md.text(change["kind"])))
        detail = change.get("detail") or ""
        if detail.strip().lower() == words.lower():
            detail = ""
        elif detail.lower().startswith(f"{words.lower()}: "):  # "first observed: merged" under "first observed"
            detail = detail[len(words) + 2:]
        if change["kind"] in _OWN_DETAIL_KINDS:
            detail = re.sub(r"\b([0-9a-f]{12})[0-9a-f]{28}\b", r"\1", detail)
            shown = md.ours(detail, upstream, 160)
        else:
            shown = md.text(detail, 120)
        when = f" ({change['at'][:10]})" if change.get("at") else ""
        return md.Md(f"**{words}**{when}" + (f": {shown}" if shown else ""))

    def reasons(items: Iterable[Mapping[str, Any]], pr: int) -> md.Md:
        """Why a successor candidate was proposed, with every PR it names as a link (the
        successor search's reasons are data: kind + detail; details quoting GitHub are text)."""
        words = []
        for r in items:
            kind, detail = str(r.get("kind")), str(r.get("detail") or "")
            if kind == "body-says":
                words.append(md.Md(f"its body says it takes over {md.pr_link(upstream, int(pr))}"))
            elif kind in ("cross-referenced", "mentions") and detail.isdigit():
                linked = md.pr_link(upstream, int(detail))
                words.append(md.Md(f"it references {linked} (timeline)" if kind == "cross-referenced" else f"its body mentions {linked}"))
            else:
                words.append(md.text(_REASON_WORDS.get(kind, "{}").format(detail), 200))
        return md.join(words, "; ")

    def next_short(action: Mapping[str, Any]) -> md.Md:
        """The summary row's few words for a next action: the same action the track's Next says
        (an orphan with a successor: "follow #N?", never "decide" beside it)."""
        kind, text = str(action.get("kind")), str(action.get("text") or "")
        follow = re.search(r"-> follow #(\d+)\? \(shares (\d+) of (\d+) hunks, ([^)]*)\)", text) if kind == "orphaned" else None
        if follow:
            number, shared, total, state = follow.groups()
            return md.Md(f"follow {md.pr_link(upstream, int(number))}? (shares {shared} of {total} hunks, {md.text(state, 40)})")
        return md.Md(_NEXT_WORDS.get(kind, str(md.text(text, 80))))

    return {
        "reasons": reasons,
        "t": lambda v, limit=200: md.text(v, limit),
        "code": lambda v, limit=120: md.code(v, limit),
        "block": lambda v, language="": md.block(v, language),
        "ours": lambda v, limit=400: md.ours(v, upstream, limit),
        "ours_plain": lambda v, limit=400: md.ours(v, None, limit),
        "sha": lambda v: md.code((v or "")[:12]) if v else md.Md("—"),
        "date": lambda v: md.Md(str(v)[:10]) if v and re.match(r"^\d{4}-\d{2}-\d{2}", str(v)) else md.Md("—"),
        "verdict": verdict,
        "state": state,
        "event": event,
        "next_short": next_short,
        "event_kind": lambda kind: md.Md(_EVENT_WORDS.get(str(kind), str(md.text(kind)))),
        "join_md": lambda items, sep=", ": md.join(items, sep),
        "num": lambda v: md.Md(_number(v)) if isinstance(v, (int, float)) and not isinstance(v, bool) else md.Md("—"),
    }


def _globals(report: WeeklyReport) -> dict[str, Any]:
    upstream, fork = report.upstream_repo, report.fork_repo

    def upstream_pr(number: int) -> md.Md:
        return md.pr_link(upstream, int(number))

    def marker() -> md.Md:
        return md.marker(report.week)

    def chart(trend: Mapping[str, Any]) -> md.Md:
        return md.Md(_mermaid(trend))

    def legend(trend: Mapping[str, Any]) -> md.Md:
        return md.join([md.Md(f"{name}: {md.text(series['target'])} {series['phase']}") for series, _, name in chart_lines(trend)], " · ")

    return {
        "upstream_pr": upstream_pr,
        "fork_issue": lambda n: md.link(md.issue_url(fork, int(n)), md.Md(f"#{int(n)}")),
        "marker": marker,
        "chart": chart,
        "legend": legend,
        "plural": lambda n, one, many=None: one if n == 1 else (many or one + "s"),
        "waited": waiting_words,
    }


def waiting_words(days: int) -> str:
    """How long a merged PR has waited for its convergence check, as a colleague says it."""
    if days <= 0:
        return "not checked on the fork yet"
    return f"waiting {days} day{'s' if days != 1 else ''} for verify-converged"


_PALETTE = {("sm_121a", "cold"): ("#0969da", "dark blue"), ("sm_121a", "warm"): ("#54aeff", "light blue"),
            ("gfx1151", "cold"): ("#bc4c00", "dark orange"), ("gfx1151", "warm"): ("#fb8f44", "light orange")}
_SPARE = [("#1a7f37", "dark green"), ("#4ac26b", "light green"), ("#8250df", "dark purple"), ("#c297ff", "light purple")]


def chart_lines(trend: Mapping[str, Any]) -> list[tuple[Mapping[str, Any], str, str]]:
    """The series a chart can draw (a value every week), each with its colour and colour name."""
    spare = iter(_SPARE * 4)
    drawn = []
    for series in trend["series"]:
        if len(trend["weeks"]) < 2 or any(v is None for v in series["values"]):
            continue
        colour, name = _PALETTE.get((series["target"], series["phase"])) or next(spare)
        drawn.append((series, colour, name))
    return drawn


def _mermaid(trend: Mapping[str, Any]) -> str:
    """A GitHub-rendered line chart (mermaid xychart) of each series' change, in percent, since the
    first week shown: the two machines measure on very different scales, and a 2% move must be
    visible. The absolute values are in the table under the chart.

    Only numbers, ISO weeks and porttrack's own identifiers, filtered to a safe alphabet, go into
    the block: nothing untrusted reaches it."""
    drawn = chart_lines(trend)
    if not drawn:
        return ""
    lines = []
    for series, _, _ in drawn:
        first = float(series["values"][0])
        lines.append([round((float(v) / first - 1.0) * 100.0, 2) if first else 0.0 for v in series["values"]])
    values = [v for line in lines for v in line] + [0.0]
    low, high = min(values), max(values)
    pad = max((high - low) * 0.15, 0.5)
    metric = re.sub(r"[^A-Za-z0-9_.-]", "", str(trend["metric"]))[:64]
    weeks = [w for w in trend["weeks"] if re.fullmatch(r"\d{4}-W\d{2}", w)]
    out = [
        "```mermaid",
        '%%{init: {"themeVariables": {"xyChart": {"plotColorPalette": "' + ", ".join(c for _, c, _ in drawn) + '"}}}}%%',
        "xychart-beta",
        f'    title "{metric}, % change since {weeks[0]}"',
        "    x-axis [" + ", ".join(f'"{w[2:]}"' for w in weeks) + "]",
        f'    y-axis "% vs {weeks[0]}" {low - pad:.1f} --> {high + pad:.1f}',
    ]
    out += ["    line [" + ", ".join(f"{v:g}" for v in line) + "]" for line in lines]
    out.append("```")
    return "\n".join(out)


def _tidy(text: str) -> str:
    """At most one blank line in a row and exactly one newline at the end (templates are easier to
    write with generous spacing)."""
    text = re.sub(r"\n{3,}", "\n\n", text)
    return text.strip("\n") + "\n"


# --------------------------------------------------------------------------- fit


def body_size(body: str) -> int:
    """Characters as GitHub may count them: the larger of code points and UTF-16 units."""
    return max(len(body), len(body.encode("utf-16-le", "surrogatepass")) // 2)


CUT_NOTICE_START = "\n---\n\n**This report was cut to fit GitHub's limit on an issue's length"


def fit_body(body: str, limit: int, pointer: str) -> tuple[str, bool]:
    """`body` if it fits; otherwise `body` made shorter, then `pointer` to the full report.

    What goes first is what matters least each week: per-PR history (changes and notes, beyond
    the latest few, then all of them), then the trends, then the per-track detail, then the
    eligibility table. The summary, the queue and the gates are kept whole while anything else
    can go; only when they alone are too long is the body cut at a line (closing an open code
    block). A PR with years of renames can no longer push the queue out of the issue."""
    if body_size(body) <= limit:
        return body, False
    original = dict((name, "".join(lines)) for name, lines in _sections(body))
    notice = f"{CUT_NOTICE_START}** (what was cut: {{cut}}). {pointer}\n"
    budget = limit - body_size(notice) - 16 - 400  # room for the names of what was cut
    for shrink in _SHRINKS:
        body = shrink(body, budget)
        if body_size(body) <= budget:
            return body.rstrip("\n") + "\n" + notice.replace("{cut}", _what_was_cut(original, body)), True
    return _prefix(body, budget) + notice.replace("{cut}", _what_was_cut(original, body) + ", and the rest from where the text stops"), True


def _what_was_cut(original: dict, body: str) -> str:
    """The sections that are shorter than in the full report, by name."""
    now = dict((name, "".join(lines)) for name, lines in _sections(body))
    names = [f"“{name}”" for name, text in original.items() if name and now.get(name) != text]
    return ", ".join(names[:8]) or "nothing named"


def _prefix(body: str, budget: int) -> str:
    """The longest prefix of whole lines within `budget`, an open code block closed."""
    kept: list[str] = []
    size = 0
    for line in body.splitlines(keepends=True):
        if size + body_size(line) > budget:
            break
        kept.append(line)
        size += body_size(line)
    text = "".join(kept).rstrip("\n") + "\n"
    return text + "```\n" if _fence_open(text) else text


_HISTORY_SECTION = "Upstream, per track"
_HISTORY_LINE = "  - "


def _sections(body: str) -> list[tuple[str | None, list[str]]]:
    """The body as (the `## ` heading's words or None before the first, its lines)."""
    out: list[tuple[str | None, list[str]]] = [(None, [])]
    fence = False
    for line in body.splitlines(keepends=True):
        if not fence and line.startswith("## "):
            out.append((line[3:].strip(), []))
        out[-1][1].append(line)
        if line.lstrip().startswith("```"):
            fence = not fence
    return out


def _cap_history(keep: int) -> Callable[[str, int], str]:
    """Per PR in the per-track section, only the last `keep` history lines, and how many were left out."""
    def shrink(body: str, _budget: int) -> str:
        out: list[str] = []
        for name, lines in _sections(body):
            if name != _HISTORY_SECTION:
                out.extend(lines)
                continue
            run: list[str] = []
            for line in [*lines, ""]:
                if line.startswith(_HISTORY_LINE):
                    run.append(line)
                    continue
                if len(run) > keep:
                    left = len(run) - keep
                    out.append(f"{_HISTORY_LINE}{left} earlier change{'s' if left != 1 else ''} and notes left out to fit (see the full report)\n")
                    run = run[len(run) - keep:] if keep else []
                out.extend(run)
                run = []
                out.append(line)
        return "".join(out)

    return shrink


def _cut_section(name: str) -> Callable[[str, int], str]:
    """The section `name` cut at a line to what the rest of the body leaves of `budget` (an open
    code block closed), or left out with a line saying so when little would remain."""
    def shrink(body: str, budget: int) -> str:
        sections = _sections(body)
        others = sum(body_size("".join(lines)) for heading, lines in sections if heading != name)
        out = []
        for heading, lines in sections:
            text = "".join(lines)
            if heading == name:
                room = budget - others - 2
                gone = f"## {name}\n\nLeft out to fit GitHub's limit (see the full report).\n\n"
                text = text if body_size(text) <= room else (_prefix(text, room) + "\n" if room >= _SECTION_LEAST else gone)
            out.append(text)
        return "".join(out)

    return shrink


_SECTION_LEAST = 400  # a section cut to less than this says nothing: it is left out instead


def _cut_rows(name: str) -> Callable[[str, int], str]:
    """The section `name`'s table rows and list items, as many as the rest of the body leaves room
    for, in order, and a line saying how many were left out; its prose is kept. What the summary,
    the gates and the problems need stays whole: a long queue is cut here, not at a line of the body."""
    def shrink(body: str, budget: int) -> str:
        sections = _sections(body)
        others = sum(body_size("".join(lines)) for heading, lines in sections if heading != name)
        out = []
        for heading, lines in sections:
            text = "".join(lines)
            if heading == name and body_size(text) > budget - others:
                room = budget - others - 300
                kept, left, size = [], 0, 0
                for line in lines:
                    item = line.startswith(("| `", "- "))
                    if item and (left or size + body_size(line) > room):
                        left += 1
                        continue
                    kept.append(line)
                    size += body_size(line)
                if left:
                    kept.append(f"\n{left} more row{'s' if left != 1 else ''} of this section are left out to fit (see the full report).\n\n")
                text = "".join(kept)
            out.append(text)
        return "".join(out)

    return shrink


_SHRINKS: tuple[Callable[[str, int], str], ...] = (
    _cap_history(10), _cap_history(3), _cap_history(1), _cap_history(0),
    _cut_section("Trends"), _cut_section(_HISTORY_SECTION), _cut_section("Eligibility"),
    _cut_rows("Patch queue"),
)


def _fence_open(text: str) -> bool:
    return sum(1 for line in text.splitlines() if line.lstrip().startswith("```")) % 2 == 1


STATE_BRANCH = "porttrack-state"  # where .github/porttrack-weekly.sh keeps state/ and reports/


def state_branch_link(report: WeeklyReport) -> str | None:
    """In GitHub Actions on github.com: the full report's page on the state branch (the weekly
    workflow keeps reports/ there), a page anyone can open; elsewhere None."""
    server, repo, run = (os.environ.get(k, "") for k in ("GITHUB_SERVER_URL", "GITHUB_REPOSITORY", "GITHUB_RUN_ID"))
    if server == "https://github.com" and re.fullmatch(r"[\w.-]+/[\w.-]+", repo) and run.isdigit():
        return f"https://github.com/{repo}/blob/{STATE_BRANCH}/{report.report_file}"
    return None


def pointer_to_full(report: WeeklyReport, cut_url: str | None = None) -> str:
    """Where a reader of the cut issue finds the rest: the state branch's copy in GitHub Actions;
    elsewhere `cut_url`, the first of the issue's comments holding the cut sections whole
    (`report.post.post_cut`); with neither (not posted yet, or not posted), the workspace file."""
    kept = state_branch_link(report)
    if kept is not None:
        repo, run = os.environ["GITHUB_REPOSITORY"], os.environ["GITHUB_RUN_ID"]
        url = f"https://github.com/{repo}/actions/runs/{run}"
        where = (f"The full report: {md.link(kept, md.Md(report.report_file))} on the `{STATE_BRANCH}` branch "
                 f"(once the run has saved it), and in the artifact of {md.link(url, md.Md('the workflow run'))}")
    elif cut_url is not None:
        where = f"What was cut, whole: {md.link(cut_url, md.Md('in the comments below'))}"
    else:
        where = f"The full report is `{report.report_file}` in the workspace"
    return where + "; `porttrack report weekly --json` gives the same content as data."


def cut_parts(full: str, body: str, limit: int = BODY_LIMIT) -> list[str]:
    """The sections `body` (the issue, cut by `fit_body`) holds shorter than `full` does, whole and
    in order, split at lines into texts of at most `limit` less room for a heading: what the
    week's issue carries in its comments for a reader outside the workspace."""
    posted = {name: "".join(lines).rstrip() for name, lines in _sections(body.split(CUT_NOTICE_START, 1)[0])}
    cut = [(name, "".join(lines)) for name, lines in _sections(full) if name and posted.get(name) != "".join(lines).rstrip()]
    room = limit - 2000  # a heading, a table's header and the marker of the comment
    parts: list[str] = []
    for name, text in cut:
        header: list[str] = []  # the current table's header and delimiter rows, repeated where a part starts in it
        for line in (text if text.endswith("\n") else text + "\n").splitlines(keepends=True):
            line = line if body_size(line) <= room else line[: room // 2].rstrip("\n") + " …\n"
            if not line.startswith("|"):
                header = []
            elif len(header) < 2:
                header.append(line)
            if not parts or body_size(parts[-1]) + body_size(line) > room:
                continued = "" if line.startswith("## ") else f"## {name} (continued)\n\n"
                parts.append(continued + ("".join(header) if len(header) == 2 and line not in header else ""))
            parts[-1] += line
    return parts
