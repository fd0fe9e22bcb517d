"""Hostile recorded state: every machine-written file porttrack reads back, corrupted by hand (a
bad merge, an editor, an attacker with a commit), then every reading command run over it.

A seeded generator replaces 1-3 values anywhere in a file with a hostile one (a string where a
number was, an object where a list was, an int where a time was, 300-deep nesting, ...), and each
file also gets the whole-file forms (100,000-deep JSON, truncated, not UTF-8, empty, a bare
number, `null`). The property, per case: no command exits 70 or prints a traceback (a clear
error, or a clean result), and nothing under state/, patches/ or reports/ changes — a reading
command never "repairs" a file it could not read. Issue 33 item 6: 34 of 168 hand-corrupted
state files gave rc 70 (100k-deep JSON in six files; `prs` a list; `observed_at` or an event's
`at` an int).
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from rel_harness import SEED, Rig

pytestmark = pytest.mark.reliability("hostile-workspace")

READERS = (
    ("status", "--offline", "--json"),
    ("status", "--offline"),
    ("queue", "--all", "--json"),
    ("report", "weekly", "--offline", "--dry-run"),
    ("gate", "check", "101"),
    ("apply", "--dry-run"),
    ("verify-converged", "103", "--dry-run"),
)
DEEP = 100_000
WHOLE = {
    "deep-list": "[" * DEEP + "]" * DEEP,
    "deep-object": '{"a":' * DEEP + "1" + "}" * DEEP,
    "truncated": None,  # the file's own first half
    "not-utf8": b"\xff\xfe\x00{\x80",
    "empty": "",
    "number": "42",
    "null": "null",
    "list": "[]",
}
HOSTILE: list[Any] = [
    12345, -1, 1.5, True, None, "", "not a time", "2026-13-45T99:99:99Z", {"x": 1}, [], [1, "2", None],
    "x" * 3000, "\x1b[31m", 10 ** 40, {"schema": "porttrack/upstream-state/v1"},
]


@pytest.fixture
def rig(tmp_path, world) -> Rig:
    """A workspace with one of everything recorded: upstream state, a queue, evidence, a staging
    build, a convergence record and a weekly report."""
    rig = Rig(tmp_path, world)
    rig.ok("import", "101")
    rig.ok("gate", "run", "101", "--baseline", codes=(7,))
    rig.ok("gate", "run", "101")
    rig.ok("apply")
    rig.ok("verify-converged", "103", codes=(0, 1))
    rig.ok("report", "weekly", "--offline")
    rig.save("base")
    return rig


def targets(root: Path) -> list[str]:
    files = ["state/upstream.json", "state/reports.json", "state/convergence/103.json",
             "state/apply/porttrack/staging.json", "patches/manifest.json", ".porttrack/etags.json",
             ".porttrack/prdiff/101.json", ".porttrack/validated-config.json"]
    files.append(sorted(p.relative_to(root).as_posix() for p in (root / "patches" / "evidence").glob("*.json"))[0])
    for name in files:
        assert (root / name).is_file(), f"the rig no longer records {name}"
    return files


def nodes(data: Any, where: tuple = ()) -> list[tuple]:
    found = [where]
    if isinstance(data, dict):
        for key, value in data.items():
            found += nodes(value, (*where, key))
    elif isinstance(data, list):
        for index, value in enumerate(data[:6]):
            found += nodes(value, (*where, index))
    return found


def mutate(data: Any, rng: random.Random) -> tuple[Any, str]:
    done = []
    for _ in range(rng.randint(1, 3)):
        where = rng.choice(nodes(data)[1:] or [()])
        if not where:
            break
        parent = data
        for key in where[:-1]:
            parent = parent[key]
        value = rng.choice(HOSTILE + ["deep"])
        if value == "deep":
            value = []
            for _ in range(300):  # deeper than porttrack writes; json.dumps can still write it
                value = [value]
        parent[where[-1]] = value
        done.append(f"{'/'.join(map(str, where))}={json.dumps(value)[:24]}")
    return data, " ".join(done)


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for folder in ("state", "patches", "reports") for p in sorted((root / folder).rglob("*")) if p.is_file()}


def run_readers(rig: Rig, label: str) -> None:
    before = snapshot(rig.root)
    for argv in READERS:
        out = rig.cli(*argv)
        assert out.returncode != 70 and "Traceback" not in out.stderr, f"{label}: {' '.join(argv)} rc {out.returncode}: {out.stderr[-1500:]}"
        if out.returncode:
            assert any(line.startswith("porttrack: ") for line in out.stderr.splitlines()), f"{label}: {' '.join(argv)}: {out.stderr[-600:]}"
    assert snapshot(rig.root) == before, f"{label}: a reading command changed recorded files"


def test_every_recorded_file_in_every_whole_file_form(rig, cases):
    for name in targets(rig.root):
        for form, content in WHOLE.items():
            with cases.case(f"{name} {form}"):
                rig.restore("base")
                path = rig.root / name
                if content is None:
                    content = path.read_bytes()[: path.stat().st_size // 2]
                path.write_bytes(content if isinstance(content, bytes) else content.encode())
                run_readers(rig, f"{name} {form}")
    cases.done()


def test_the_issues_own_cases(rig, cases):
    """`prs` a list, `observed_at` an int, an event's `at` an int."""
    def edit(change):
        rig.restore("base")
        path = rig.root / "state" / "upstream.json"
        data = json.loads(path.read_text())
        change(data)
        path.write_text(json.dumps(data))

    first = lambda d: next(iter(d["prs"].values()))  # noqa: E731
    for label, change in (
        ("prs a list", lambda d: d.update(prs=list(d["prs"].values()))),
        ("observed_at an int", lambda d: d.update(observed_at=12345)),
        ("a PR's observed_at an int", lambda d: first(d).update(observed_at=12345)),
        ("an event's at an int", lambda d: first(d)["events"][0].update(at=12345)),
        ("a head's sha a list", lambda d: first(d)["heads"][0].update(sha=["a"])),
        ("merged_at 12345", lambda d: first(d).update(merged_at=12345)),
        ("number a string", lambda d: first(d).update(number="x")),
    ):
        with cases.case(label):
            edit(change)
            run_readers(rig, label)
            out = rig.cli("status", "--offline", "--json")
            assert out.returncode == 2 and "upstream.json" in out.stderr, (label, out.returncode, out.stderr[-600:])
    cases.done()


def test_seeded_hostile_values_in_recorded_files(rig, cases):
    rng = random.Random(f"{SEED}:state")
    names = targets(rig.root)
    originals = {name: json.loads((rig.root / name).read_text()) for name in names}
    for n in range(120):
        name = rng.choice(names)
        data, what = mutate(json.loads(json.dumps(originals[name])), rng)
        with cases.case(f"{n}: {name} {what}"):
            rig.restore("base")
            (rig.root / name).write_text(json.dumps(data))
            run_readers(rig, f"{name} {what}")
    cases.done()
