"""Gate jobs that ship with porttrack.

A gate job is any program that measures the ref under test and writes a results file
(`porttrack.results`, schema `porttrack/results/v1`). porttrack runs a local one through
`porttrack.jobs.runner` (its docstring states the one placeholder and quoting rule: placeholders
{ref} {results} {workdir} {target} filled in per argument, never through a shell) with the
PORTTRACK_* variables set; the GitHub Actions workflow passes the same facts as inputs.

`porttrack.jobs.example` is the embedded default: it writes results from a scenario file, so the
whole gate → evidence → promotion path can be exercised (and tested) without a GPU.
"""
