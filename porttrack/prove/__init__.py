"""Prove a queued patch: run its gate, keep the evidence, judge it, promote it.

  run        build the refs a gate measures, run its jobs (locally or on Actions), ingest results
  runner     the one local job runner (argv, placeholders per argument, no shell)
  evidence   evidence records: appended, never edited; corrections supersede
  gates      the judge: does the evidence satisfy every requirement of the gate
  gate_output  the judge's verdict shown: --json (porttrack/gate-check/v1) and text
  promote    promote / demote, refused unless the judge says every cell passed

May import: common, diff, workspace, gitrepo, github, tracks, apply, results.
"""
