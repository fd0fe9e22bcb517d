"""The vLLM job's backend decision against an independent ground truth, over seeded random cases.

    python proofs/backend_oracle.py [--seed 22] [--count 40]

Runs porttrack.jobs.vllm against the stand-in vLLM per case (testing/backend_oracle.py says what
varies and what the truth is) and prints the confusion table: cells written vs refused, against
whether they truly measured the claimed backend, and written cells whose record differs from
what the engine ran.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from testing.backend_oracle import cases, confusion, judge, run  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=22)
    parser.add_argument("--count", type=int, default=40)
    args = parser.parse_args()
    rows = []
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="backend-oracle-") as tmp:
        for i, case in enumerate(cases(args.seed, args.count)):
            _code, doc, _err = run(case, Path(tmp) / str(i))
            rows.append(judge(case, doc))
    print(f"{args.count} cases, seed {args.seed}, {time.perf_counter() - began:.1f} s")
    print(confusion(rows))
    bad = sum(1 for t, w, r in rows if t != w or not r)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
