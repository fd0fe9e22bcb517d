"""The probe as a vLLM general plugin: loaded by vLLM itself in the engine and every worker.

pyproject.toml registers `register` under the `vllm.general_plugins` entry-point group; vLLM calls
every such function in each process it starts. It is inert unless PORTTRACK_PROBE is set, and safe
to call more than once (vLLM may load plugins again in the same process).

When vLLM's GPU worker module is imported, its warmup/compile step
(`Worker.compile_or_warm_up_model`) is wrapped so that "warmup-done" is marked in that process
when the step returns: every compile after it is a JIT compile after warmup. When
PORTTRACK_VLLM_RECORD names a file (with or without the probe), the same wrapper records there
which attention backend the engine selected per layer kind, and vLLM's version
(`porttrack.probe.engine_record`): the job compares that with the backend it claims.
"""

from __future__ import annotations

from typing import Any

from porttrack import probe
from porttrack.probe import engine_record

WORKER_MODULE = "vllm.v1.worker.gpu_worker"
WARMUP_METHOD = "compile_or_warm_up_model"
_WRAPPED = "_porttrack_probe_wrapped"


def register() -> None:
    probing = probe.install()
    if probing or engine_record.active():
        probe.when_imported(WORKER_MODULE, mark_after_warmup)


def mark_after_warmup(module: Any) -> None:
    """Wrap the worker's warmup step once; when it returns normally the engine is recorded and
    "warmup-done" is marked (each only where asked for)."""
    worker = getattr(module, "Worker", None)
    step = getattr(worker, WARMUP_METHOD, None)
    if step is None or getattr(step, _WRAPPED, False):
        return

    def compile_or_warm_up_model(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = step(self, *args, **kwargs)
        engine_record.record_worker(self)
        probe.mark(probe.WARMUP_DONE)
        return result

    setattr(compile_or_warm_up_model, _WRAPPED, True)
    compile_or_warm_up_model.__wrapped__ = step  # type: ignore[attr-defined]
    setattr(worker, WARMUP_METHOD, compile_or_warm_up_model)
