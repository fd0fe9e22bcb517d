"""Take what is stable and separable from a PR into the queue.

  importer   `porttrack import PR`: fetch, classify hunks, plan, trial-build, save
  source     where a PR's diff comes from (head, merge commit, --through SHA); stability
  separability  which hunk groups go onto the fork tip: one real apply of all, else probes
  checks     names one hunk needs from another, and the patched files checked after taking
  refresh    what changed upstream since a patch was imported

May import: common, diff, workspace, git, github, tracks, queue, runner, observe.
"""
