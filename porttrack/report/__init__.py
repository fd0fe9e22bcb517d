"""`porttrack report weekly`: the one issue a week the team reads — gathered, neutralised,
rendered from a template, and posted without ever making a second one.

Four steps, each a plain function the CLI calls in order, each in its own module:

1. **gather** (`report.gather`): everything the issue says, as the plain records of
   `report.records`; a part porttrack cannot evaluate becomes a line in `problems`.
2. **render** (`report.render`): the template renders the report's JSON form, so `--json` and the
   issue carry the same content; every printed value is neutralised unless it is safe markdown.
3. **fit** (`fit_body`, in `report.render`): a report longer than GitHub allows in an issue is cut
   at a section boundary, with a pointer to the full file.
4. **post** (`report.post`): the week's issue, found by a hidden marker, is created if absent and
   updated only if it changed; `comment_tracking` links it once from the fork's tracking issue.

`report.history` knows the previous report (the window "since the previous report" counts from)
and records each run in `state/reports.json`; times are read and written by `porttrack.common.clock`.

`porttrack status` is told from here too: `report.status` (per track, what changed and what to do
next) and `report.knowledge` (what else porttrack knows of each PR: verdicts, ports, successors,
collisions), which the weekly issue gathers as well.

Package map: records (the `WeeklyReport` records and its JSON shape) ← history, gather, render,
post; nothing here imports the CLI. The package exports the functions `gather`, `render` and
`post` under the names of their modules: import a module's other names from the module itself
(`from porttrack.report.render import chart_lines`).

Lazy imports: jinja2 is imported inside `render`, and PyGithub only inside `porttrack.github.client`,
because they cost more to import than most commands take to run; everything else is imported at
the top of each module. `porttrack.cli.report` imports this package inside its command, so
`porttrack --help` and other commands do not load the report's dependencies.
"""

from __future__ import annotations

# Loaded when first asked for (PEP 562): `porttrack status` imports `report.status` and
# `report.knowledge`, and with them this package; loading gather, render, post and their
# dependencies (evidence, eligibility, ~140 dataclasses) as well cost it ~0.2-0.5 s a run. The
# names gather, render and post are also modules': the CLI imports those functions from their
# modules (`from porttrack.report.gather import gather`), never through the package.
_EXPORTS = {
    "gather": "gather", "report_file": "gather",
    "RECORD_SCHEMA": "history", "load_records": "history", "previous_report": "history", "record_issue": "history",
    "recorded_issue_number": "history", "record_run": "history", "records_path": "history", "write_outputs": "history",
    "check_permission": "post", "comment_tracking": "post", "find_week_issue": "post", "labelled_issues": "post", "post": "post",
    "SCHEMA": "records", "PostOutcome": "records", "Since": "records", "WeeklyReport": "records", "report_to_json": "records",
    "BODY_LIMIT": "render", "TEMPLATE_NAME": "render", "body_size": "render", "fit_body": "render",
    "pointer_to_full": "render", "render": "render",
}


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "BODY_LIMIT",
    "RECORD_SCHEMA",
    "SCHEMA",
    "TEMPLATE_NAME",
    "PostOutcome",
    "Since",
    "WeeklyReport",
    "body_size",
    "check_permission",
    "comment_tracking",
    "find_week_issue",
    "fit_body",
    "gather",
    "labelled_issues",
    "load_records",
    "pointer_to_full",
    "post",
    "previous_report",
    "record_issue",
    "recorded_issue_number",
    "record_run",
    "records_path",
    "render",
    "report_file",
    "report_to_json",
    "write_outputs",
]
