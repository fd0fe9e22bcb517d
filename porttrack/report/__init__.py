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
post; nothing here imports the CLI. The package exports no names: import each from the module that
defines it (`from porttrack.report.render import fit_body`).

Lazy imports: jinja2 is imported inside `render`, and PyGithub only inside `porttrack.github.client`,
because they cost more to import than most commands take to run; everything else is imported at
the top of each module. `porttrack.cli.report` imports this package inside its command, so
`porttrack --help` and other commands do not load the report's dependencies.
"""
