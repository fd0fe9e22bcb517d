"""Run: PYTHONPATH=$PWD python testing/measure_searches.py $PWD

Requests per `status` with the searches on, for the shipped workspace's five PRs (emulated):
48804 closed (author leihuang-sketch) with a merged successor 56323 and one more same-author PR;
46076, 46514 (stacked on 46076), 46849, 48407 merged; one queued patch; 20 open upstream PRs."""
import json
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, sys.argv[1])
import os

from testing.gitfixtures import isolated_git_env
from testing.github_emulator import running_emulator
from testing.text import numbered
from testing.workspace import make_workspace, track
from testing.world import World

tmp = Path(tempfile.mkdtemp())
os.environ.update(isolated_git_env(tmp / "home"))
with running_emulator() as fake:
    w = World(tmp, fake)
    W = {f"vllm/model_executor/warmup/w{i}.py": numbered(f"w{i}", 6) for i in range(1, 3)}
    w.open_pr(48804, W, "[Spec Decode][V1] Warm kernels"); fake.put_pull(w.upstream_repo, 48804, user="leihuang-sketch"); w.close(48804)
    w.open_pr(56323, W, "[6/N][warmup][DSv4] Migrate sampling", body="Follow-up to #48804"); w.squash_merge(56323)
    w.open_pr(56400, {"vllm/model_executor/warmup/w1.py": numbered("x", 3)}, "later"); fake.put_pull(w.upstream_repo, 56400, user="leihuang-sketch")
    for n in (46076, 46849, 48407):
        w.open_pr(n, {f"f{n}.py": numbered(f"f{n}", 4)}, f"PR {n}")
    w.open_pr(46514, {"g.py": numbered("g", 4)}, "PR 46514", stacked_on=46076)
    for n in range(60000, 60020):
        w.open_pr(n, {f"o{n}.py": numbered(f"o{n}", 3)}, f"open {n}")
    ws = make_workspace(tmp / "ws", {"warm": track([48804]), "ar": track([46849]), "sparse": track([46514]), "skip": track([48407])},
                        api_url=fake.base_url, fork=w.fork, token=w.token)
    assert ws.run_in_process("status", "--no-search").returncode == 0
    r = ws.run_in_process("import", "46849"); assert r.returncode == 0, r.stderr
    for n in (46076, 46514, 46849, 48407):
        w.squash_merge(n) if n != 46849 else None
    for label in ("cold", "warm"):
        fake.clear_log()
        out = ws.run_in_process("status", "--json")
        rep = json.loads(out.stdout)
        log = fake.requests()
        cost = rep["findings"]["cost"]
        print(f"{label}: status total {len(log)} requests ({sum(1 for x in log if x.status == 304)} answered 304); "
              f"poll {rep['requests']}; searches {cost['requests']} ({cost['not_modified']} 304) limit {cost['limit']}; "
              f"best successor of 48804: {rep['findings']['successors'][0]['candidates'][0]['number']}; "
              f"open PRs compared {rep['findings']['collisions']['compared_open_prs']}")
    print(ws.run_in_process("status").stdout.split("\n")[0:2])
