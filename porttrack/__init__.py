"""porttrack: follow upstream pull requests into a downstream fork, hunk by hunk, with evidence.

The package map, in the order of the lifecycle (observe -> take -> apply -> prove -> decide ->
converge -> tell). Each verb's command lives in `porttrack/cli/<module>.py`; the core it calls:

  verb                    cli module      core
  status                  status          status (observe: observe; what else is known: knowledge)
  import, refresh         take            take (source, mail), refresh
  queue, drop             queue           queue
  apply                   apply           apply
  gate run|ingest|check   gates           gaterun (running jobs: jobs.runner), gates (the judge),
                                          evidence, results; the jobs themselves: jobs.cells,
                                          jobs.vllm, with probe inside the process under test;
                                          jobs.timed (any fork: times a command)
  eligibility             eligibility     eligibility
  promote, demote         gates           promote
  verify-converged        converge        converge (the verdict: converge_decide, reading
                                          the history through converge_history;
                                          its record: converge_record)
  report weekly           report          report (gather, render, post, history)
  init, doctor            init, doctor    init, doctor

The doors, each the only module that talks to what is behind it, opened once per command by the
command layer (`porttrack.cli.Context`) and handed in:

  git (the fork checkout)      gitrepo (scratch index, three-way probe, temporary worktree)
  GitHub                       github (HTTP through requests lives only here; the records it
                               returns: github_records)
  local jobs (job.command,     jobs.runner (argv, placeholders per argument, no shell)
    regression.command)
  tracks.yaml                  tracks_file (read, cache) -> config (the records, PROFILES);
                               tracks_validation (+ tracks_examples), tracks_schema (JSON Schema)
  the workspace's files        workspace (lock, atomic writes), state (recorded upstream)
  tokens                       secrets (resolve, redact, strip from job environments)
  time                         clock

Shared vocabulary: errors (the one error hierarchy and exit-code table), hunks (diffs and hunk
ids), relations (which hunks travel together, revisions compared), pycheck (names one hunk uses
and only another brings; pyflakes on the patched files after taking), presence (is a hunk in a
file), coverage (hand ports), paths and markdown and text (untrusted input made safe),
testhooks (the one pause point for tests), completion (what a shell completes from the workspace).
"""

__version__ = "0.1.0"
