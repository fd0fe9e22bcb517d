"""The door to the patch queue (patches/): what is queued, how each patch is stored, how a series builds.

  manifest   the queue: series order, *.patch files, the manifest of states and provenance
  mail       the git format-patch mail a queued patch is stored as, with its provenance
  series     the series builder: patches applied and committed over a base in a scratch index,
             with per-hunk results (clean, offset, 3-way, fuzz, conflict)

May import: common, diff, workspace, git, tracks.
"""
