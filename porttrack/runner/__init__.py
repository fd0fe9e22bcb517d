"""The door to local jobs: the one place a user's command runs, and the file it writes back.

  local      the one local job runner (argv, placeholders per argument, no shell, process group)
  results    the results file a job writes and prove reads (porttrack/results/v1, v2)

May import: common.
"""
