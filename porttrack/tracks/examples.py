"""What to write for each required key of tracks.yaml: the second half of every "required key is
missing" (`porttrack.tracks.validation`), keyed "Record.field" (records of `porttrack.tracks.config`).

tests/tracks/test_schema.py removes every required key of every profile in turn and checks that
its message carries an example from here that starts with the key.
"""

from __future__ import annotations

EXAMPLES = {
    "Config.upstream": "upstream: {repo: owner/project}",
    "Config.fork": "fork: {repo: you/project, checkout: ../project}",
    "Config.targets": "targets: {sm_121a: {name: NVIDIA GB10, vendor: nvidia, arch: sm_121a}}",
    "Config.models": "models: {GLM-5.2: {attention: sparse-mla, quantization: fp8, backends: {sm_121a: FLASHMLA_SPARSE}}}",
    "Config.tracks": "tracks: {my-track: {title: What it brings, prs: [1234], requires: {}, targets: [sm_121a]}}",
    "Config.report": "report: {repo: you/project}",
    "UpstreamConfig.repo": "repo: owner/project",
    "ForkConfig.repo": "repo: you/project",
    "Target.name": "name: NVIDIA GB10 (DGX Spark)",
    "Target.vendor": "vendor: nvidia   # or amd",
    "Target.arch": "arch: sm_121a   # or gfx1151",
    "Model.attention": "attention: mla   # one of sparse-mla, compressed-mla, mla, mha, gqa, hybrid",
    "Model.quantization": "quantization: fp8",
    "Model.backends": "backends: {sm_121a: FLASHMLA, gfx1151: ROCM_AITER_MLA}   # one per target",
    "Conditional.proof": "proof: my-proof   # an id under proofs",
    "Conditional.tracks": "tracks: [my-track]",
    "Conditional.reason": "reason: why the model waits on the proof",
    "Track.title": "title: What this upstream change brings",
    "Track.prs": "prs: [1234]",
    "Track.requires": "requires: {}   # {} means every model; or e.g. {attention: [mla]}",
    "Track.targets": "targets: [sm_121a, gfx1151]",
    "Gate.job": "job: {command: python -m my_bench --ref {ref} --results {results}}",
    "Gate.matrix": "matrix: {models: eligible, contexts: [4096], batches: [1]}",
    "Matrix.contexts": "contexts: [4096]",
    "Matrix.batches": "batches: [1]",
    "Tolerance.abs": "abs: 0.02",
    "Tolerance.rel": "rel: 0.01",
    "Metric.name": "name: median_latency",
    "Metric.unit": "unit: ms",
    "Metric.direction": "direction: lower   # or higher: which way is better",
    "Proof.description": "description: what the proof's job establishes",
    "WorkflowJob.file": "file: porttrack-gate.yml",
    "ReportConfig.repo": "repo: you/project",
    "NeutralConfig.profile": "profile: neutral",
    "NeutralConfig.upstream": "upstream: {repo: owner/project}",
    "NeutralConfig.fork": "fork: {repo: you/project, checkout: ../project}",
    "NeutralConfig.targets": "targets: {linux: {name: Linux x86_64, attributes: {python: '3.12'}}}",
    "NeutralConfig.tracks": "tracks: {my-track: {title: What it brings, prs: [1234], targets: [linux]}}",
    "NeutralTrack.title": "title: What this upstream change brings",
    "NeutralTrack.prs": "prs: [1234]",
    "NeutralTrack.targets": "targets: [linux]",
    "NeutralGate.job": "job: {command: python -m pytest -q}",
    "NeutralGate.metrics": "metrics: [{name: test_time, unit: s, direction: lower, allowed_regression_pct: 10}]",
    "NeutralProof.description": "description: what the proof's job establishes",
}
