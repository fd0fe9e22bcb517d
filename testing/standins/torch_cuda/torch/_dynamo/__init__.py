"""Stand-in for torch._dynamo's counters and its recompiles log artifact (see ../../../README.md): a
frame compile bumps the counters always; the reason is logged only while the `recompiles` artifact
is enabled (TORCH_LOGS, or torch._logging.set_logs(recompiles=True) when TORCH_LOGS is unset)."""

import collections
import logging
import sys
import types

counters = collections.defaultdict(collections.Counter)
utils = types.SimpleNamespace(counters=counters)


def compile_frame(name, recompile_reason=None):
    counters["frames"]["total"] += 1
    counters["frames"]["ok"] += 1
    counters["stats"]["unique_graphs"] += 1
    if recompile_reason and sys.modules["torch"]._recompiles_logged[0]:  # the artifact is off unless enabled
        logging.getLogger("torch._dynamo.guards.__recompiles").warning("Recompiling function %s: %s", name, recompile_reason)
