"""Issue 30's rebase-merge kinds in the differential test, fast subset: `porttrack.converge.decide`
against the independent oracle of `testing/convergence_scenarios.py` on seeded scenarios of
`testing/convergence_rebase.py` -- a PR head that ends in merges from main, a PR commit the rebase
dropped as already applied, a stacked PR as GitHub leaves it. The full run:
`python proofs/converge_differential.py --rebase --scenarios 300`.

Written to fail on main before this work: there 54 of the first 60 scenarios were violations
(18 exit 7 "where its change starts cannot be told", the rest judged on the last copy only)."""

from __future__ import annotations

from collections import Counter

from porttrack.converge.verify import MergedPR, decide, summary
from porttrack.git.repo import GitRepo
from testing.convergence_rebase import KINDS, build_rebase_scenario
from testing.convergence_scenarios import check_scenario, confusion_tables, oracle_states

SEEDS = range(0, 12)  # four of each kind (the kind is seed % 3)


def test_rebase_merge_scenarios_agree_with_the_oracle(tmp_path):
    checks, kinds, cuts = [], Counter(), Counter()
    for seed in SEEDS:
        s = build_rebase_scenario(seed, tmp_path / f"s{seed}")
        kinds[s.kind] += 1
        cuts[s.cut] += 1
        v = decide(GitRepo.open(s.fork), MergedPR(s.pr, s.title, s.merge, None, "recorded", head_sha=s.head, base_sha=s.base or None),
                   fork_ref=s.fork_ref, upstream_base=s.upstream_base)
        c = check_scenario(s, oracle_states(s), v.verdict, [(h.path, h.state) for h in v.hunks], summary(v.hunks))
        assert not c.violations, (seed, s.story, c.violations)
        assert v.commits.merge_kind == "rebase" and v.commits.merge_parent == s.change_base, (seed, s.story)
        checks.append(c)
    assert set(kinds) == set(KINDS) and len(cuts) == 2, (kinds, cuts)
    verdicts = Counter(c.verdicts[1] for c in checks)
    assert verdicts["converged"] and verdicts["partially-converged"], confusion_tables(checks)
