"""The name-dependency decision (`porttrack.diff.pycheck.name_uses` + `relations.dependency_groups`)
against an independent oracle over seeded random generated Python modules (issue 21, class 8).

Each scenario is a module and a PR of edits that bring names (imports, functions, constants,
parameters, locals) and use them, use what the module already has, use builtins, and remove an
import together with its use. For random subsets of the edits, porttrack says whether the subset
is closed under its dependency groups (safe to take as it is); the oracle builds the patched file
from the generator's own record (no diff, no porttrack) and asks pyflakes and `compile` whether it
has an undefined name the base did not have. A closed subset that the oracle finds broken is a
false "separable" and must never happen; an unclosed subset the oracle finds fine is caution.
Run with PORTTRACK_ORACLE_SCENARIOS=N for more.
"""

from __future__ import annotations

import ast
import difflib
import os
import random
from collections import Counter
from dataclasses import dataclass, field

from pyflakes import checker, messages

from porttrack.diff.hunks import parse_diff
from porttrack.diff.pycheck import as_edges, may_share_words, name_uses
from porttrack.diff.relations import dependency_groups, missing_dependencies

SPACING = 12  # lines between edit sites: one hunk each, never "adjacent" (3 lines) to another
BODY = 4 * SPACING


@dataclass
class Edit:
    at: int  # base line index the edit starts at
    removed: int
    added: list[str]
    kind: str


@dataclass
class Scenario:
    base: list[str]
    edits: list[Edit] = field(default_factory=list)

    def patched(self, chosen: set[int]) -> list[str]:
        lines = list(self.base)
        for n in sorted(chosen, key=lambda k: -self.edits[k].at):
            e = self.edits[n]
            lines[e.at:e.at + e.removed] = e.added
        return lines


def _module(functions: int) -> tuple[list[str], dict[str, list[int]]]:
    """Base lines and the free edit sites: "top" (module level, imports area), "module" (between
    functions), and per function "body:i" (inside func_i) and "sig:i" (its def line)."""
    lines = ['"""generated."""', "import os"] + [f"PAD_A{k} = {k}" for k in range(SPACING)]
    lines += ["import shutil"] + [f"PAD_B{k} = {k}" for k in range(SPACING)]
    sites: dict[str, list[int]] = {"top": [len(lines)], "module": [], "shutil": [SPACING + 2]}
    lines += [f"PAD_C{k} = {k}" for k in range(SPACING)]
    for i in range(functions):
        sites[f"sig:{i}"] = [len(lines)]
        lines += [f"def func_{i}(a):", "    v = a"]
        start = len(lines)
        lines += [f"    v = v + {1000 * i + k}" for k in range(BODY)]  # unique lines: the diff aligns them one way
        sites[f"body:{i}"] = list(range(start + SPACING, start + BODY, SPACING))
        sites[f"useshutil:{i}"] = [len(lines)]
        lines += ['    w = shutil.which("git")' if i == 0 else f"    w = a + {i}", "    return v, w", ""]
        lines += [f"PAD_F{i}_{k} = {k}" for k in range(2 * SPACING)]
        sites["module"].append(len(lines) - SPACING)
    return lines, sites


def generate(seed: int) -> Scenario:
    rng = random.Random(seed)
    functions = 3
    base, sites = _module(functions)
    sc = Scenario(base)
    used_sites: set[int] = set()

    def take(kind: str) -> int | None:
        free = [s for s in sites.get(kind, ()) if s not in used_sites]
        if not free:
            return None
        s = rng.choice(free)
        used_sites.add(s)
        return s

    def body_site() -> tuple[int, int] | None:
        order = list(range(functions))
        rng.shuffle(order)
        for i in order:
            s = take(f"body:{i}")
            if s is not None:
                return i, s
        return None

    def use(name_expr: str) -> None:
        got = body_site()
        if got:
            sc.edits.append(Edit(got[1], 0, [f"    v = {name_expr}"], "use"))

    for _ in range(rng.randint(2, 6)):
        kind = rng.choice(["import", "def", "const", "param", "local", "annotation", "base-name", "builtin", "drop-import"])
        k = len(sc.edits)
        if kind == "import":
            s = take("top")
            if s is None:
                continue
            name = rng.choice(["json", "Mapping"])
            sc.edits.append(Edit(s, 0, ["import json" if name == "json" else "from typing import Mapping"], kind))
            if rng.random() < 0.8:
                use("json.dumps(v)" if name == "json" else "isinstance(v, Mapping)")
        elif kind in ("def", "const"):
            s = take("module")
            if s is None:
                continue
            name = f"helper_{k}" if kind == "def" else f"CONST_{k}"
            sc.edits.append(Edit(s, 0, [f"def {name}(x):", "    return x"] if kind == "def" else [f"{name} = {k}"], kind))
            if rng.random() < 0.8:
                use(f"{name}(v)" if kind == "def" else f"v + {name}")
        elif kind == "param":
            i = rng.randrange(functions)
            s = take(f"sig:{i}")
            b = take(f"body:{i}")
            if s is None or b is None:
                continue
            sc.edits.append(Edit(s, 1, [f"def func_{i}(a, extra_{k}=None):"], kind))
            sc.edits.append(Edit(b, 0, [f"    v = extra_{k} or v"], "use"))
        elif kind == "local":
            i = rng.randrange(functions)
            first, second = take(f"body:{i}"), take(f"body:{i}")
            if first is None or second is None:
                continue
            first, second = sorted((first, second))
            sc.edits.append(Edit(first, 0, [f"    ctx_{k} = dict()"], kind))
            sc.edits.append(Edit(second, 0, [f"    v = ctx_{k}.get(v, v)"], "use"))
        elif kind == "annotation":
            s = take("module")
            if s is None:
                continue
            sc.edits.append(Edit(s, 0, [f"def typed_{k}(m: Mapping) -> None:", "    return None"], "use"))
            if rng.random() < 0.5:
                t = take("top")
                if t is not None:
                    sc.edits.append(Edit(t, 0, ["from typing import Mapping"], "import"))
        elif kind == "base-name":
            use("os.getcwd()")
        elif kind == "builtin":
            use("len(str(v))")
        elif kind == "drop-import":
            s, u = take("shutil"), take("useshutil:0")
            if s is None or u is None:
                continue
            sc.edits.append(Edit(s, 1, [], kind))
            sc.edits.append(Edit(u, 1, ["    w = a"], "drop-use"))
    return sc


def undefined(lines: list[str]) -> Counter | None:
    """The oracle: pyflakes' undefined names, straight on the text; None when it does not compile."""
    source = "\n".join(lines) + "\n"
    try:
        compile(source, "m.py", "exec")
    except SyntaxError:
        return None
    found = checker.Checker(ast.parse(source), filename="m.py").messages
    return Counter(m.message_args[0] for m in found if isinstance(m, (messages.UndefinedName, messages.UndefinedLocal)))


def oracle_ok(sc: Scenario, chosen: set[int], before: Counter) -> bool:
    """No undefined name beyond those of the base and of the whole PR (a PR that is broken by
    itself is not the taking's fault; the check after taking reports that one)."""
    after = undefined(sc.patched(chosen))
    return after is not None and not (after - before)


def decide(sc: Scenario):
    """porttrack's groups for the scenario's full diff, and edit index -> hunk id."""
    post = sc.patched(set(range(len(sc.edits))))
    pre_text, post_text = "\n".join(sc.base) + "\n", "\n".join(post) + "\n"
    body = "".join(difflib.unified_diff(pre_text.splitlines(True), post_text.splitlines(True), n=3))
    body = body.split("\n", 2)[2]  # drop difflib's ---/+++ lines: git's header below carries them
    files = parse_diff(f"diff --git a/m.py b/m.py\n--- a/m.py\n+++ b/m.py\n{body}".encode())
    hunks = [h for fd in files for h in fd.hunks]
    order = sorted(range(len(sc.edits)), key=lambda k: sc.edits[k].at)
    assert len(hunks) == len(sc.edits), (len(hunks), len(sc.edits))
    hunk_of = {k: hunks[n].id for n, k in enumerate(order)}
    uses = name_uses(files, {"m.py": pre_text.encode()}, {"m.py": post_text.encode()})
    # the prefilter that spares reading and parsing files never hides an edge
    assert may_share_words(files[0], "+") or not [u for u in uses if u.side == "post"]
    assert may_share_words(files[0], "-") or not [u for u in uses if u.side == "pre"]
    return dependency_groups(files, more=as_edges(uses)), hunk_of


def test_the_dependency_decision_against_pyflakes_on_random_modules(capsys):
    scenarios = int(os.environ.get("PORTTRACK_ORACLE_SCENARIOS", "60"))
    table = Counter()
    kinds = Counter()
    for seed in range(scenarios):
        sc = generate(seed)
        if not sc.edits:
            continue
        kinds.update(e.kind for e in sc.edits)
        groups, hunk_of = decide(sc)
        before = undefined(sc.base) | (undefined(sc.patched(set(range(len(sc.edits))))) or Counter())
        rng = random.Random(seed * 7919)
        subsets = [{k for k in range(len(sc.edits)) if rng.random() < 0.5} for _ in range(4)]
        for _ in range(2):  # and unions of whole groups: closed by construction, so both rows fill
            picked = [g for g in groups if rng.random() < 0.5]
            subsets.append({k for k, hid in hunk_of.items() if any(hid in g for g in picked)})
        for chosen in subsets:
            closed = not missing_dependencies({hunk_of[k] for k in chosen}, groups)
            table[("separable" if closed else "must-travel", "ok" if oracle_ok(sc, chosen, before) else "broken")] += 1
    with capsys.disabled():
        print(f"\nname dependencies vs pyflakes, {scenarios} scenarios, edit kinds {dict(sorted(kinds.items()))}")
        print(f"{'porttrack says':<16}{'oracle: no new undefined':>26}{'oracle: broken':>16}")
        for row in ("separable", "must-travel"):
            print(f"{row:<16}{table[(row, 'ok')]:>26}{table[(row, 'broken')]:>16}")
    assert table[("separable", "broken")] == 0, table  # never a false "separable"
    assert table[("separable", "ok")] > 0 and table[("must-travel", "broken")] > 0, table  # both kinds were tried
    assert kinds["drop-import"] and kinds["param"] and kinds["local"] and kinds["import"]
