"""Stand-in for torch._dynamo's counters and its recompiles log artifact (see ../../../README.md)."""

import collections
import logging
import types

counters = collections.defaultdict(collections.Counter)
utils = types.SimpleNamespace(counters=counters)


def compile_frame(name, recompile_reason=None):
    counters["frames"]["total"] += 1
    counters["frames"]["ok"] += 1
    counters["stats"]["unique_graphs"] += 1
    if recompile_reason:
        logging.getLogger("torch._dynamo.guards.__recompiles").warning("Recompiling function %s: %s", name, recompile_reason)
