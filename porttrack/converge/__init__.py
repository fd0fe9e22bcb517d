"""Decide whether upstream caught up: `porttrack verify-converged PR`.

  verify     the command's core: read the PR's merge, decide, record, retire drops
  decide     the verdict: per hunk present / present after churn / missing / unknown
  history    the history reads the verdict rests on (upstream churn, reverts, renames, patch-ids, rebase merges)
  record     verdicts recorded, bound to the fork ref and commit they were computed on
  coverage   hand ports of a PR found in the fork (per hunk)
  ports      the fork's own port records (cherry-pick -x, "Port: upstream #N through SHA")

May import: common, diff, workspace, git, github, tracks, queue, runner, observe, prove.
"""
