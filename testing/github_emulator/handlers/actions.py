"""Actions routes: dispatch a workflow (validated like GitHub: ref, declared and required
inputs), list a workflow's runs and poll one run (each look advances it queued ->
in_progress -> completed per `run_schedule` or `on_dispatch`), list a run's artifacts, and
download one through a 302 to a signed blob URL that needs no credentials."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from testing.github_emulator.payloads import make_zip
from testing.github_emulator.state import Artifact, Repo, Run, Workflow, fake_sha, parse_time
from testing.github_emulator.transport import REPO, Ctx, HTTPError, Reply, not_found

ROUTES = [
    ("POST", REPO + r"/actions/workflows/(?P<wf>[^/]+)/dispatches", "_h_dispatch"),
    ("GET", REPO + r"/actions/workflows/(?P<wf>[^/]+)/runs", "_h_runs"),
    ("GET", REPO + r"/actions/runs/(?P<run>\d+)", "_h_run"),
    ("GET", REPO + r"/actions/runs/(?P<run>\d+)/artifacts", "_h_run_artifacts"),
    ("GET", REPO + r"/actions/artifacts/(?P<aid>\d+)/zip", "_h_artifact_zip"),
    ("GET", r"/_blobs/artifacts/(?P<aid>\d+)/(?P<sig>[0-9a-f]+)\.zip", "_h_blob"),
]


class ActionsHandlers:
    base_url: str
    html_base: str
    on_dispatch: Callable[[str, str, str, dict], Mapping[str, Any] | None] | None
    run_schedule: tuple[int, int]
    dispatches: list[dict]
    _ids: Iterator[int]
    _runs: dict[int, Run]
    _artifacts: dict[int, Artifact]

    def _workflow(self, r: Repo, wf: str) -> Workflow:
        for w in r.workflows.values():
            if w.file == wf or str(w.id) == wf:
                return w
        raise not_found()

    def _h_dispatch(self, ctx: Ctx, owner: str, name: str, wf: str) -> Reply:
        r = self._repo_for(owner, name)
        workflow = self._workflow(r, wf)
        self._require_push(ctx)
        body = ctx.body if isinstance(ctx.body, dict) else {}
        ref = body.get("ref")
        if not isinstance(ref, str) or not ref:
            raise HTTPError(422, "Invalid request.\n\n\"ref\" wasn't supplied.")
        inputs = body.get("inputs") or {}
        if not isinstance(inputs, dict):
            raise HTTPError(422, "Invalid request.\n\nFor 'properties/inputs', it is not an object.")
        if len(inputs) > 25:
            raise HTTPError(422, "you may only define up to 25 `inputs` for a `workflow_dispatch` event")
        if workflow.inputs is not None:
            unexpected = sorted(set(inputs) - set(workflow.inputs))
            if unexpected:
                raise HTTPError(422, f"Unexpected inputs provided: {json.dumps(unexpected)}")
            for k, spec in workflow.inputs.items():
                if spec.get("required") and k not in inputs:
                    raise HTTPError(422, f"Required input '{k}' not provided")
        branch = ref.removeprefix("refs/heads/")
        if r.git_dir is not None:
            head_sha = self._try_resolve(r, f"refs/heads/{branch}") or self._try_resolve(r, f"refs/tags/{branch}")
            if head_sha is None:
                raise HTTPError(422, f"No ref found for: {ref}")
        else:
            head_sha = fake_sha(r.full_name, ref)
        outcome = dict(self.on_dispatch(r.full_name, workflow.file, ref, dict(inputs)) or {}) \
            if self.on_dispatch else {}
        unknown = set(outcome) - {"conclusion", "artifacts", "polls", "display_title"}
        if unknown:
            raise ValueError(f"on_dispatch returned unknown keys {sorted(unknown)}")
        artifacts = {k: (make_zip(v) if isinstance(v, Mapping) else v)
                     for k, v in (outcome.get("artifacts") or {}).items()}
        title = outcome.get("display_title") or self._run_title(workflow, inputs)
        number = 1 + sum(1 for x in self._runs.values() if x.workflow is workflow)
        now = self.now()
        run = Run(next(self._ids), r.full_name, workflow, number, ref, branch, head_sha, dict(inputs),
                  ctx.login or "", title, now, now, tuple(outcome.get("polls", self.run_schedule)),  # type: ignore[arg-type]
                   outcome.get("conclusion", "success"), artifacts)
        self._runs[run.id] = run
        self.dispatches.append({"repo": r.full_name, "workflow": workflow.file, "ref": ref,
                                "inputs": dict(inputs), "run_id": run.id, "actor": ctx.login})
        if body.get("return_run_details"):
            api = f"{self.base_url}/repos/{r.full_name}"
            return Reply(200, {"workflow_run_id": run.id, "run_url": f"{api}/actions/runs/{run.id}",
                               "html_url": f"{self.html_base}/{r.full_name}/actions/runs/{run.id}"})
        return Reply(204)

    @staticmethod
    def _run_title(wf: Workflow, inputs: Mapping[str, Any]) -> str:
        if not wf.run_name:
            return wf.name
        return re.sub(r"\$\{\{\s*(?:github\.event\.)?inputs\.([A-Za-z0-9_-]+)\s*\}\}",
                      lambda m: str(inputs.get(m.group(1), "")), wf.run_name)

    def _observe(self, run: Run) -> None:
        run.seen += 1
        self._settle_run(run)

    def _settle_run(self, run: Run) -> None:
        queued, in_progress = run.polls
        status = ("queued" if run.seen <= queued else
                  "in_progress" if run.seen <= queued + in_progress else "completed")
        if status == run.status:
            return
        now = self.now()
        run.updated_at = self._bump(run.updated_at)
        if status in ("in_progress", "completed") and run.run_started_at is None:
            run.run_started_at = now
        run.status = status
        if status == "completed":
            run.conclusion = run.planned_conclusion
            for art_name, data in run.planned_artifacts.items():
                a = Artifact(next(self._ids), run.id, run.repo, art_name, data, now)
                self._artifacts[a.id] = a
                run.artifacts.append(a.id)

    def _created_filter(self, spec: str) -> Callable[[dt.datetime], bool]:
        if ".." in spec:
            lo, hi = spec.split("..", 1)
            a = parse_time(lo) if lo not in ("", "*") else None
            b = parse_time(hi) if hi not in ("", "*") else None
            return lambda t: (a is None or t >= a) and (b is None or t <= b)
        for op, fn in ((">=", lambda t, x: t >= x), ("<=", lambda t, x: t <= x),
                       (">", lambda t, x: t > x), ("<", lambda t, x: t < x)):
            if spec.startswith(op):
                x = parse_time(spec[len(op):])
                return lambda t, x=x, fn=fn: fn(t, x)
        x = parse_time(spec)
        if len(spec.strip()) == 10:   # a bare date means that whole day
            assert x is not None
            return lambda t: x <= t < x + dt.timedelta(days=1)
        return lambda t: t == x

    def _h_runs(self, ctx: Ctx, owner: str, name: str, wf: str | None = None) -> Reply:
        r = self._repo_for(owner, name)
        workflow = self._workflow(r, wf) if wf is not None else None
        runs = [x for x in self._runs.values() if x.repo == r.full_name
                and (workflow is None or x.workflow is workflow)]
        for x in runs:
            self._observe(x)
        a = ctx.args
        created = self._created_filter(a["created"]) if "created" in a else None
        runs = [x for x in runs
                if ("event" not in a or x.event == a["event"]) and ("branch" not in a or x.head_branch == a["branch"])
                and ("actor" not in a or x.actor == a["actor"]) and ("head_sha" not in a or x.head_sha == a["head_sha"])
                and ("status" not in a or a["status"] in (x.status, x.conclusion))
                and (created is None or created(x.created_at))]
        runs.sort(key=lambda x: (x.created_at, x.id), reverse=True)
        page, headers = self._paginate(ctx, runs)
        return Reply(payload={"total_count": len(runs), "workflow_runs": [self._run_json(r, x) for x in page]},
                     headers=headers)

    def _run_for(self, r: Repo, run_id: str) -> Run:
        run = self._runs.get(int(run_id))
        if run is None or run.repo != r.full_name:
            raise not_found()
        return run

    def _h_run(self, ctx: Ctx, owner: str, name: str, run: str) -> Reply:
        r = self._repo_for(owner, name)
        x = self._run_for(r, run)
        self._observe(x)
        return Reply(payload=self._run_json(r, x), last_modified=x.updated_at)

    def _h_run_artifacts(self, ctx: Ctx, owner: str, name: str, run: str) -> Reply:
        r = self._repo_for(owner, name)
        x = self._run_for(r, run)
        arts = [self._artifacts[i] for i in x.artifacts
                if "name" not in ctx.args or self._artifacts[i].name == ctx.args["name"]]
        page, headers = self._paginate(ctx, arts)
        return Reply(payload={"total_count": len(arts), "artifacts": [self._artifact_json(a) for a in page]},
                     headers=headers)

    def _artifact_for(self, r: Repo, aid: str) -> Artifact:
        a = self._artifacts.get(int(aid))
        if a is None or a.repo != r.full_name:
            raise not_found()
        return a

    def _h_artifact_zip(self, ctx: Ctx, owner: str, name: str, aid: str) -> Reply:
        r = self._repo_for(owner, name)
        a = self._artifact_for(r, aid)
        sig = hashlib.sha1(f"artifact:{a.id}:{a.repo}".encode()).hexdigest()[:20]
        return Reply(302, None, headers={"Location": f"{self.base_url}/_blobs/artifacts/{a.id}/{sig}.zip"})

    def _h_blob(self, ctx: Ctx, aid: str, sig: str) -> Reply:
        a = self._artifacts.get(int(aid))
        if a is None or hashlib.sha1(f"artifact:{a.id}:{a.repo}".encode()).hexdigest()[:20] != sig:
            raise HTTPError(403, "Server failed to authenticate the request.")
        return Reply(payload=a.data, content_type="application/zip")

