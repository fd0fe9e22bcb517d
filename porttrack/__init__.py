"""porttrack: follow upstream pull requests into a downstream fork, hunk by hunk, with evidence.

`ls porttrack/` reads as the lifecycle and its doors. Each subpackage's `__init__` says what it
owns and which others it may import; tests/test_structure.py holds the code to that picture.

  underneath
    common/      errors and exit codes, secrets, untrusted text and Markdown, the clock
    diff/        hunks, hunk ids, which hunks travel together, presence, Python names, safe paths
  the doors (each the only code that talks to what is behind it; a door imports only the ones above it)
    workspace/   the workspace's files, lock and commit point; the recorded state
    git/         git: the one runner, scratch index, three-way probe, temporary worktree; pinned config, commit-graph
    github/      GitHub: the only HTTP speaker, and the records it returns
    tracks/      tracks.yaml: intent, validated into frozen records; eligibility
    queue/       the patch queue: the manifest, the mail a patch is stored as, the series builder
    runner/      local jobs: the one runner of a user's command, and the results file a job writes
  the lifecycle (a step imports the doors and the steps before it)
    observe/     poll the tracked PRs; successors; open PRs that collide with the queue
    take/        `import PR`: the stable, separable hunks into the queue; refresh
    apply.py     build porttrack/staging or porttrack/default over the fork
    prove/       gates: run jobs, keep evidence, judge, promote
      probe/     instruments inside the process under test (a vllm.general_plugins entry point)
      jobs/      the gate jobs users name in tracks.yaml (porttrack.jobs.cells, .vllm, .timed)
    converge/    `verify-converged PR`: is upstream's merged change really in the fork
    report/      tell: `status` and the weekly issue
  around
    bootstrap/   `init` and `doctor`
    cli/         the command layer: one module per verb; opens each door once and hands it in

  verb                    cli module      core
  status                  status          observe.poll, report.status, report.knowledge
  import, refresh         take            take.importer, take.refresh
  queue, drop             queue           queue.manifest
  apply                   apply           apply, queue.series
  gate run|ingest|check   gates           prove.gaterun, prove.gates (the judge), prove.evidence, runner.results
  promote, demote         gates           prove.promote
  eligibility             eligibility     tracks.eligibility
  verify-converged        converge        converge.verify (decide, record)
  report weekly           report          report (gather, render, post, history)
  init, doctor            init, doctor    bootstrap.init, bootstrap.doctor

Imports: own modules at the top of each file; only heavy third-party libraries (jinja2, pydantic,
jsonschema, unidiff's users where --help would pay for them, PyGithub in tests) inside the
function that needs them, because they cost more to import than most commands take to run.
"""

__version__ = "0.1.0"
