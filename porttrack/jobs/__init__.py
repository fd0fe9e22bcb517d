"""Gate jobs that ship with porttrack.

A gate job is any program that measures the ref under test and writes a results file
(`porttrack.runner.results`, schema `porttrack/results/v1`). porttrack runs a local one through
`porttrack.runner.local` (its docstring states the one placeholder and quoting rule: placeholders
{ref} {results} {workdir} {target} filled in per argument, never through a shell) with the
PORTTRACK_* variables set; the GitHub Actions workflow passes the same facts as inputs.

`porttrack.jobs.vllm` is the real one, which the shipped tracks.yaml runs: vLLM's own benchmark
per matrix cell, cold and warm (`porttrack.jobs.cells`), with `porttrack.probe` inside vLLM and
numerics against the gate's reference backend. (The scenario replayer porttrack's own tests use
to drive gates without a GPU lives in testing/scenario_job.py.)
"""
