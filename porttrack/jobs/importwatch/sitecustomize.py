"""porttrack's import record, put first on PYTHONPATH by `porttrack.jobs.timed`.

Python imports `sitecustomize` at start-up; this one appends to PORTTRACK_IMPORT_RECORD one JSON
line when the process starts (`{"pid", "hello"}`: this process is watched) and one when it exits:
the files each package or module named in PORTTRACK_IMPORT_PACKAGES, and every submodule of it
the process loaded, was imported from (for a namespace package, its submodules'), so the timed job knows
which copy the program measured. `timed`'s start shims write `{"pid", "started"}` for each Python
they start; a start with no hello from the same pid is a process that never loaded this file
(`python -I`, `-E`, `-S`) and cannot vouch for what it imported.
Any other `sitecustomize` further on the path is run too, as it would have been without this one.
"""

import atexit
import importlib.machinery
import importlib.util
import json
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_MAX_FILES = 400


def _write(entry):
    target = os.environ.get("PORTTRACK_IMPORT_RECORD")
    if not target:
        return
    try:
        with open(target, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry) + "\n")
    except OSError:
        pass


def _files(name):
    """The files `name` and its loaded submodules came from; a namespace package's portions."""
    found = []
    for key, module in list(sys.modules.items()):
        if module is None or (key != name and not key.startswith(name + ".")):
            continue
        where = getattr(module, "__file__", None)
        if where:  # a namespace package has none: its portions are folders, the code is in its submodules
            found.append(os.path.abspath(where))
        if len(found) >= _MAX_FILES:
            break
    return sorted(set(found))


def _record():
    imported = {}
    for name in [n for n in os.environ.get("PORTTRACK_IMPORT_PACKAGES", "").split(",") if n]:
        if sys.modules.get(name) is not None:
            imported[name] = _files(name)
    _write({"pid": os.getpid(), "imported": imported})


def _chain():
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.loader is not None and spec.origin and os.path.dirname(os.path.abspath(spec.origin)) != _HERE:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


_write({"pid": os.getpid(), "hello": True})
atexit.register(_record)
_chain()
