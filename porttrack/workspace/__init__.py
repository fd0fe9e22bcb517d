"""The door to the workspace's files, and the records porttrack keeps there.

  files      paths inside the workspace only, the lock, atomic writes, the commit point, the run
             log, checkpoints (pause points the command layer installs for crash tests)
  state      the recorded upstream state (state/upstream.json)

May import: common, diff.
"""
