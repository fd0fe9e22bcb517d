"""porttrack: follow upstream pull requests into a downstream fork, hunk by hunk, with evidence.

`ls porttrack/` reads as the lifecycle and its doors. Each subpackage's `__init__` says what it
owns and which others it may import; tests/test_structure.py holds the code to that picture.

  the lifecycle (a step imports the doors and the steps before it)
    observe/     poll the tracked PRs; successors; open PRs that collide with the queue
    take/        `import PR`: the stable, separable hunks into the queue; refresh
    apply.py     build porttrack/staging or porttrack/default over the fork
    prove/       gates: run jobs, keep evidence, judge, promote
      jobs/      the gate jobs users name in tracks.yaml (porttrack.jobs.cells, .vllm, .timed)
      probe/     instruments inside the process under test (a vllm.general_plugins entry point)
      results.py the results file a job writes and prove reads (porttrack/results/v1, v2)
    converge/    `verify-converged PR`: is upstream's merged change really in the fork
    report/      tell: `status` and the weekly issue
  the doors (each the only code that talks to what is behind it)
    gitrepo.py   git: the one runner, scratch index, three-way probe, temporary worktree
    github/      GitHub: the only HTTP speaker, and the records it returns
    workspace/   the workspace's files, lock and commit point; the recorded state and the queue
    tracks/      tracks.yaml: intent, validated into frozen records; eligibility
  underneath
    diff/        hunks, hunk ids, which hunks travel together, presence, Python names, safe paths
    common/      errors and exit codes, secrets, untrusted text and Markdown, the clock
  around
    cli/         the command layer: one module per verb; opens each door once and hands it in
    bootstrap/   `init` and `doctor`

  verb                    cli module      core
  status                  status          observe.poll, report.status, report.knowledge
  import, refresh         take            take.importer, take.refresh
  queue, drop             queue           workspace.queue
  apply                   apply           apply
  gate run|ingest|check   gates           prove.run, prove.gates (the judge), prove.evidence, results
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
