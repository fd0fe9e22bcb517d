"""Test support for porttrack: real git repositories and a GitHub REST emulator on loopback.

- `testing.gitfixtures`: isolated git environment, an upstream with `refs/pull/N/head`, a fork
  clone, and a fast large-history generator.
- `testing.github_emulator`: `FakeGitHub`, a stateful REST v3 emulator served over real HTTP,
  with ETags, pagination, rate limits and injectable faults.
- `testing.world`: both together, kept consistent (`World`).
- `testing.scenario_job`: a gate job that writes results from a scenario file (no GPU).
- `testing.vllm_standin`: a stand-in `vllm` command for porttrack.jobs.vllm (no vLLM, no GPU).

Nothing here is imported by porttrack itself.
"""
