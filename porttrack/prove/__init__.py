"""Prove a queued patch: run its gate, keep the evidence, judge it, promote it.

  gaterun    build the refs a gate measures, run its jobs (locally or on Actions), ingest results
  evidence   evidence records: appended, never edited; corrections supersede
  gates      the judge: does the evidence satisfy every requirement of the gate
  gate_output  the judge's verdict shown: --json (porttrack/gate-check/v1) and text
  promote    promote / demote, refused unless the judge says every cell passed

May import: common, diff, workspace, git, github, tracks, queue, runner, apply.
"""
