"""First run: make a workspace (`porttrack init`) and check it (`porttrack doctor`).

May import: common, diff, workspace, git, github, tracks, queue, runner.
"""
