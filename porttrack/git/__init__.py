"""The door to git: the only package that starts git.

  repo         the one runner: commands, fetch, clone, worktrees, scratch indexes, the object reader
  config       the git settings pinned for every git process (a user's config cannot change a verdict)
  commitgraph  git's commit-graph files read as bytes (no process; the runner asks it)

May import: common, workspace.
"""
