"""Intent: tracks.yaml, read, validated and turned into frozen records.

  config       the records (Config, Track, Gate, ...) and the profiles (vllm-gpu, neutral)
  file         read tracks.yaml, validate once, cache the validated form
  validation   the checks, with errors at file:line:col;  examples  the snippets they quote
  schema       the JSON Schema generated from config (python -m porttrack.tracks.schema --write)
  eligibility  models x tracks: eligible, not (which requirement failed) or conditional

May import: common, workspace.
"""
