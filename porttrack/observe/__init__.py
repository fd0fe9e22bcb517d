"""Observe upstream: poll the tracked PRs and find what is related to them.

  poll        one poll of the tracked PRs (and the PRs they are stacked on); head changes
  successors  the PRs that may replace one closed without merging
  collisions  open upstream PRs that rewrite lines of queued patches
  prdiff      hunks of a PR read from GitHub's file list

May import: common, diff, workspace, git, github, tracks, queue, runner.
"""
