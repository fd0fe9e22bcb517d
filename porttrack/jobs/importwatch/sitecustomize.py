"""porttrack's import record, put first on PYTHONPATH by `porttrack.jobs.timed`.

Python imports `sitecustomize` at start-up; this one records, when the process exits, the file
each package named in PORTTRACK_IMPORT_PACKAGES was imported from (one JSON line per process,
appended to PORTTRACK_IMPORT_RECORD), so the timed job knows which copy the program measured.
Any other `sitecustomize` further on the path is run too, as it would have been without this one.
"""

import atexit
import importlib.machinery
import importlib.util
import json
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))


def _record():
    target = os.environ.get("PORTTRACK_IMPORT_RECORD")
    if not target:
        return
    imported = {}
    for name in [n for n in os.environ.get("PORTTRACK_IMPORT_PACKAGES", "").split(",") if n]:
        module = sys.modules.get(name)
        if module is None:
            continue
        where = getattr(module, "__file__", None) or next(iter(getattr(module, "__path__", None) or []), None)
        imported[name] = None if where is None else os.path.abspath(where)
    try:
        with open(target, "a", encoding="utf-8") as handle:
            handle.write(json.dumps({"pid": os.getpid(), "imported": imported}) + "\n")
    except OSError:
        pass


def _chain():
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is not None and spec.loader is not None and spec.origin and os.path.dirname(os.path.abspath(spec.origin)) != _HERE:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


atexit.register(_record)
_chain()
