"""The outer loop's act phase: run one sub-loop per planned task, then merge the results.

The engine calls ``OuterPhase.act`` instead of a model turn when the template has
``each_task``. Tasks run through an ``Executor`` in dependency order, at most
``each_task.parallel`` at a time, each in its own git worktree on a private branch made
from the outer tree as it is (``isolation: worktree``), or one at a time in the outer
tree (``isolation: none``). Results that end ``done`` are merged into the outer tree; a
merge conflict is the result ``conflict``. The outer observers then run on the merged
tree as usual. Every result is recorded in ``<run dir>/subloops.json``, so a resumed run
never re-runs a finished sub-loop.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import threading
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, wait
from pathlib import Path
from typing import Any

from looprun.checks.holdout import active
from looprun.errors import LooprunError, one_line
from looprun.loop import limits as caps
from looprun.loop.outcome import Stop
from looprun.loop.plan import PlanError, PlannedTask
from looprun.loop.subloops import Node, TaskGraph, subloop_facts
from looprun.loop.turn import Turn
from looprun.models.base import Message
from looprun.run.executor import (
    Executor,
    LocalExecutor,
    Stopped,
    SubloopJob,
    SubloopResult,
)
from looprun.system.atomic import write_atomic
from looprun.system.crashpoint import crash_point

ExecutorFactory = Callable[[int, Callable[[str], None]], Executor]
RECORDS_FILE = "subloops.json"
_BUDGET_CODES = ("max_tokens", "max_cost_usd", "timeout")


class OuterPhase:
    """Sub-loops of one outer run; owned by its Engine (``engine.outer``)."""

    executor_factory: ExecutorFactory = LocalExecutor  # tests and other backends replace it

    def __init__(self, engine: Any):
        self.e = engine
        self.each = engine.t.each_task
        self.path = Path(engine.run_info.dir) / RECORDS_FILE
        self.records: dict[str, dict[str, Any]] = {}
        self.merges: list[dict[str, Any]] = []  # merge order: {iteration, task}
        self._lock = threading.Lock()
        self._config: Any = None
        self._rewrite_said = False
        if self.path.exists():
            data = json.loads(self.path.read_text("utf-8"))
            self.records = data.get("records", {})
            self.merges = data.get("merges", [])

    # -- the engine's hooks -----------------------------------------------------------------

    def facts(self) -> dict[str, Any]:
        return subloop_facts([t.id for t in self.e.state.tasks or []], self.records)

    def act(self, task: PlannedTask, iteration: int) -> Turn:
        """Run every planned task that has not finished; returns the outer turn."""
        st = self.e.state
        self._reconcile()
        self._remerge(iteration)
        tasks = list(st.tasks or [])
        done = {i for i, r in self.records.items() if r["outcome"] == "done"}
        # Sub-loops that ended in this very iteration before a crash keep their result
        # (a failed one is not run again before the outer loop has judged it), and what
        # they spent, charged before the crash but never saved, is charged again.
        here = {
            i: r
            for i, r in self.records.items()
            if r.get("iteration") == iteration and r["outcome"] not in ("running", "pending")
        }
        for r in here.values():
            st.prompt_tokens += int(r.get("prompt_tokens", r.get("tokens", 0)) or 0)
            st.completion_tokens += int(r.get("completion_tokens", 0) or 0)
            st.cost_usd += float(r.get("cost_usd", 0.0) or 0.0)
        todo = {t.id: t for t in tasks if t.id not in done}
        graph = TaskGraph([Node(t.id, t.depends_on) for t in todo.values()], satisfied=done)
        parallel = 1 if self.each.isolation == "none" else max(1, self.each.parallel)
        if any(active(self.each.template.observe, self._inputs(t)) for t in todo.values()):
            # a sub-loop's held-out tests sit in its worktree while they run, where the
            # commands of a sub-loop acting beside it could read them: one at a time
            parallel = 1
        factory = getattr(self.e.ports, "executor", None) or self.executor_factory
        executor = factory(parallel, self._report)
        parent = getattr(self.e.ports.model, "stop_event", None)
        running: dict[Future[SubloopResult], tuple[SubloopJob, dict[str, Any]]] = {}
        started: list[str] = [i for i in todo if i in here]
        finished_ok: set[str] = set()
        failed: set[str] = set(started)
        results: list[SubloopResult] = []
        stop: Stop | None = None
        try:
            while True:
                for tid, dep in graph.blocked(failed).items():
                    if tid not in started:
                        started.append(tid)
                        failed.add(tid)
                        self._set(
                            tid,
                            outcome="blocked",
                            reason=f"dependency {dep} did not finish",
                            template=self.each.template.name,
                            iteration=iteration,
                        )
                ready = [i for i in graph.ready(finished_ok, started)]
                for tid in ready:
                    if len(running) >= parallel or stop is not None:
                        break
                    stop = caps.check_spent(self.e.limits, self.e._spent())
                    if stop is not None:
                        break
                    slots = max(1, min(parallel - len(running), len(ready)))
                    job, share = self._job(todo[tid], iteration, running, slots)
                    running[executor.submit(job)] = (job, share)
                    started.append(tid)
                if not running:
                    break
                if parent is not None and parent.is_set():  # this outer loop is a sub-loop
                    raise Stopped("stopped: the outer loop was interrupted")
                finished, _ = wait(list(running), timeout=0.2, return_when=FIRST_COMPLETED)
                for fut in finished:
                    job, share = running.pop(fut)
                    res = fut.result()
                    results.append(res)
                    with _signals_deferred():  # merge, record and clean up as one step
                        absorbed = self._absorb(job, share, res, iteration)
                    if absorbed == "done":
                        finished_ok.add(job.task_id)
                    else:
                        failed.add(job.task_id)
        except BaseException:
            # Each sub-loop stops at its next model call and its running checks are
            # killed; what finished meanwhile is kept, the rest resumes from its journal.
            executor.stop()
            finished, _ = wait(list(running), timeout=30)
            for fut in finished:
                job, share = running.pop(fut)
                if fut.exception() is None and fut.result().outcome != "interrupted":
                    self._absorb(job, share, fut.result(), iteration)
            self._save()
            raise
        finally:
            executor.shutdown()
            self._touched()
        self._save()
        self._tree()
        return self._turn(tasks, started, results, stop)

    def cannot_run(self, iteration: int) -> str:
        """Why a sub-loop of this iteration could not run its checks (a program that is
        missing): no plan can fix that, so the outer loop stops with this cause instead
        of replanning around it."""
        for tid, r in self.records.items():
            if r.get("iteration") == iteration and r.get("code") == "observer_cannot_run":
                return f"sub-loop {tid}: {r.get('reason', '')}"
        return ""

    def _touched(self) -> None:
        """Sub-loops write to this tree behind its workspace's back (a shared work tree,
        merges): a workspace that reuses snapshots must look again."""
        touched = getattr(self.e.ports.workspace, "touched", None)
        if callable(touched):
            touched()

    def apply(self, task: PlannedTask, d: Any) -> tuple[bool, Stop | None]:
        """The outer loop's own meaning of done, replan and rollback; (handled, stop)."""
        st = self.e.state
        if d.kind == "done":
            for t in st.tasks or []:
                r = self.records.get(t.id, {})
                st.task_results.append(
                    {
                        "id": t.id,
                        "outcome": "done",
                        "iterations": r.get("iterations", 0),
                        "reason": f"sub-loop {r.get('template', '')}: {r.get('reason', '')}",
                    }
                )
            self.e.ports.journal.event("task_done", task="*", iterations=st.task_iteration)
            st.task_index = len(st.tasks or [])
            st.task_iteration, st.feedback, st.rounds = 0, "", []
            return True, None
        if d.kind == "replan":
            return True, self._replan(d)
        if d.kind == "rollback":  # merged work rolled back must run again
            current = st.iterations
            for r in self.records.values():
                if r["outcome"] == "done" and (
                    d.target != "previous" or r.get("merged_iteration") == current
                ):
                    r.update(outcome="pending", reason="rolled back by the outer loop")
            self._save()
        return False, None

    # -- one sub-loop ---------------------------------------------------------------------

    def _job(
        self,
        task: PlannedTask,
        iteration: int,
        running: Mapping[Future[SubloopResult], tuple[SubloopJob, dict[str, Any]]],
        slots: int,
    ) -> tuple[SubloopJob, dict[str, Any]]:
        e, ws = self.e, self.e.ports.workspace
        prev = self.records.get(task.id, {})
        resume = prev.get("outcome") == "running"
        attempt = prev.get("attempt", 1) if resume else prev.get("attempt", 0) + 1
        name = f"{task.id}-{attempt}"
        kept = prev.get("worktree") or prev.get("kept_ref")
        if not resume and kept and prev.get("outcome") not in ("done", "pending", "blocked"):
            # an earlier failed attempt stays for inspection, and stays listed
            earlier = {k: prev.get(k) for k in ("attempt", "outcome", "reason", "branch")}
            prev.setdefault("earlier", []).append(earlier | {"kept": kept})
        run_dir = Path(e.run_info.dir) / "subloops" / name
        self._touched()  # a sub-loop that shares this tree may have written to it
        start = prev["start"] if resume else ws.checkpoint(f"{e.run_info.id}/sub/{name}")
        worktree = branch = None
        workdir = e.run_info.workdir
        if self.each.isolation == "worktree":
            worktree = str(Path(e.run_info.dir) / "worktrees" / name)
            branch = f"looprun/{e.run_info.id}/{name}"
            workdir = worktree
        share = self._share(running, slots)
        model = e.ports.model
        refs, cli = self._model_refs(getattr(model, "ref", ""))
        outer_script = getattr(model, "ref", "") == refs["act"]
        job = SubloopJob(
            task_id=task.id,
            attempt=attempt,
            template=str(Path(self.each.template.source).resolve()),
            inputs=self._inputs(task),
            workdir=workdir,
            repository=e.run_info.workdir,
            commit=start,
            run_id=f"{e.run_info.id}.{name}",
            run_dir=str(run_dir),
            model=refs["act"],
            plan_model=refs["plan"],
            cli_models=cli,
            sandbox=self._invocation().get("sandbox"),
            held_out=tuple(getattr(e.ports, "held_out", ())),
            # the outer script's part for this task; a script of the sub-template's own
            # is played whole
            script_key=(
                (*getattr(model, "script_key", ()), (task.id, attempt)) if outer_script else ()
            ),
            base_url=self._base_url(),
            limits=share,
            resume=resume,
        )
        self._set(
            task.id,
            outcome="running",
            reason="",
            attempt=attempt,
            start=start,
            worktree=worktree,
            branch=branch,
            run_id=job.run_id,
            run_dir=job.run_dir,
            template=self.each.template.name,
            goal=task.goal,
            iteration=iteration,
        )
        self._save()  # the intent first: a crash from here on is reconciled on resume
        if worktree is not None and branch is not None:
            crash_point("subloop.recorded")
            # made, or (resumed) checked and remade if a crash left it half-made
            if ws.ensure_worktree(Path(worktree), branch, start):
                self._report(f"[{task.id}] worktree {worktree} remade after a crash")
        self._report(
            f"[{task.id}] start sub-loop {self.each.template.name} (attempt {attempt})"
            + (" — resumed" if resume else "")
        )
        return job, share

    def _absorb(
        self, job: SubloopJob, share: Mapping[str, Any], res: SubloopResult, iteration: int
    ) -> str:
        """Account a finished sub-loop, merge it if done, keep or clean its worktree."""
        st, ws = self.e.state, self.e.ports.workspace
        if res.outcome == "interrupted":  # stays `running`: a resume continues it
            return res.outcome
        st.prompt_tokens += res.prompt_tokens
        st.completion_tokens += res.completion_tokens
        st.cost_usd += res.cost_usd
        outcome, reason, code = res.outcome, res.reason, res.code
        if outcome == "exhausted" and code in _BUDGET_CODES and share.get(_limit_key(code)):
            own = getattr(self.each.template.limits, _limit_key(code))
            if own is None or share[_limit_key(code)] < own:
                reason, code = f"outer budget share: {reason}", f"outer.{code}"
        rec = self.records[job.task_id]
        if outcome == "done" and res.commit:
            merge = ws.merge_from(res.commit, job.commit) if rec.get("worktree") else None
            if merge is not None and not merge.ok:
                outcome, code = "conflict", "merge_conflict"
                reason = (
                    f"merge conflict in {', '.join(merge.conflicts)}; the change is kept on "
                    f"branch {rec['branch']}"
                )
            else:
                rec["merged_iteration"] = iteration
                self.merges.append({"iteration": iteration, "task": job.task_id})
        keep = outcome != "done"
        rec.update(
            outcome=outcome,
            reason=reason,
            code=code,
            iterations=res.iterations,
            tokens=res.tokens,
            prompt_tokens=res.prompt_tokens,
            completion_tokens=res.completion_tokens,
            cost_usd=res.cost_usd,
            changed=list(res.changed),
            commit=res.commit,
            agent=dict(res.agent),
        )
        if rec.get("worktree"):
            if keep:
                self._keep_branch(rec)
            else:
                self._save()  # the merge recorded before the worktree goes
                crash_point("subloop.merged")
                self._cleanup(rec)
        elif keep:  # isolation none: keep the attempt on a ref, give the tree back
            if res.commit:
                ws.git.run("update-ref", f"refs/looprun/{job.run_id}/kept", res.commit)
                rec["kept_ref"] = f"refs/looprun/{job.run_id}/kept"
            ws.restore(job.commit)
        self._save()
        self.e.ports.journal.event(
            "subloop_finished",
            task=job.task_id,
            attempt=job.attempt,
            outcome=outcome,
            reason=reason,
            code=code,
            iterations=res.iterations,
            prompt_tokens=res.prompt_tokens,
            completion_tokens=res.completion_tokens,
            cost_usd=res.cost_usd,
            agent=dict(res.agent),
        )
        self._report(
            f"[{job.task_id}] sub-loop result: {outcome}: {reason}"
            + (f" (kept: {rec.get('worktree') or rec.get('kept_ref')})" if keep else "")
        )
        return outcome

    def _keep_branch(self, rec: dict[str, Any]) -> None:
        """Failed work stays inspectable: its worktree, and its last state on the branch."""
        if not rec.get("commit") or not Path(rec["worktree"]).is_dir():
            return
        try:
            self.e.ports.workspace.keep_branch(Path(rec["worktree"]), rec["branch"], rec["commit"])
        except LooprunError as exc:
            self._report(f"[{rec.get('run_id')}] could not update branch {rec['branch']}: {exc}")

    def _reconcile(self) -> None:
        """After a crash: finish the removal of merged sub-loops' worktrees (the merge
        was recorded, the removal had not finished)."""
        pending = [r for r in self.records.values() if r["outcome"] == "done" and r.get("worktree")]
        for rec in pending:
            self._cleanup(rec)
        if pending:
            self._save()

    def _cleanup(self, rec: dict[str, Any]) -> None:
        ws = self.e.ports.workspace
        try:
            ws.discard_worktree(Path(rec["worktree"]), rec["branch"])
        except LooprunError as exc:
            self._report(f"could not remove worktree {rec['worktree']}: {exc}")
            return
        rec["worktree"], rec["branch"] = None, None

    # -- plans, budgets, inputs -----------------------------------------------------------

    def _replan(self, d: Any) -> Stop | None:
        """Replan only what did not finish; finished tasks stay done and merged."""
        e, st = self.e, self.e.state
        tasks = list(st.tasks or [])
        kept = [t for t in tasks if self.records.get(t.id, {}).get("outcome") == "done"]
        remaining = [t for t in tasks if t not in kept]
        if e.t.plan.mode == "model":
            try:
                fresh = e._plan(remaining, [t.id for t in kept], d.message)
            except PlanError as exc:
                failed = [
                    f"{t.id}: {r.get('outcome')}: {one_line(str(r.get('reason', '')))[:200]}"
                    for t in remaining
                    if (r := self.records.get(t.id)) and r.get("outcome") != "done"
                ]
                why = f"{exc} (replanning after: {'; '.join(failed)})" if failed else str(exc)
                return Stop("error", why, "plan_invalid")
            kept_ids = {t.id for t in kept}
            st.tasks = kept + [t for t in fresh if t.id not in kept_ids]
        st.task_iteration, st.rounds, st.feedback = 0, [], d.message
        return None

    def _share(
        self, running: Mapping[Future[SubloopResult], tuple[SubloopJob, dict[str, Any]]], slots: int
    ) -> dict[str, Any]:
        """What is left of the outer budget, less what running sub-loops hold, split by slot."""
        lim, spent = self.e.limits, self.e._spent()
        held_tokens = sum(s.get("max_tokens") or 0 for _, s in running.values())
        held_cost = sum(s.get("max_cost_usd") or 0.0 for _, s in running.values())
        share: dict[str, Any] = {"timeout_s": caps.remaining_time(lim, spent)}
        if lim.max_tokens is not None:
            share["max_tokens"] = max(0, (lim.max_tokens - spent.tokens - held_tokens) // slots)
        if lim.max_cost_usd is not None:
            left = lim.max_cost_usd - spent.cost_usd - held_cost
            share["max_cost_usd"] = max(0.0, left / slots)
        return share

    def _inputs(self, task: PlannedTask) -> dict[str, Any]:
        from looprun.loop.inputs import build_inputs
        from looprun.template.expressions import shell_text

        e = self.e
        ctx = {
            "task": {
                "id": task.id,
                "goal": task.goal,
                "paths": list(task.paths),
                "depends_on": list(task.depends_on),
            },
            "intent": e.inputs.get("intent", ""),
            "inputs": e.inputs,
            "run": e.run_info.facts(),
        }
        sub = self.each.template
        rendered = {}
        for k, text in self.each.with_.items():
            spec = sub.inputs.get(k)
            if spec is not None and spec.type == "command":
                # This value becomes shell code in the sub-loop: everything substituted
                # into it (task goals, intent) is quoted; only command inputs stay code.
                text = shell_text(text)
            rendered[k] = text.render(ctx)
        intent = rendered.pop("intent", None) or task.goal
        return build_inputs(sub.inputs, intent, rendered)

    def _invocation(self) -> dict[str, Any]:
        """What this run was invoked with, held in memory since it started. ``run.json``
        is only a record: a command may rewrite it while the run goes on (without the OS
        sandbox, or under Landlock), and what it says then decides nothing; the rewrite
        is said once, on stderr and in the journal."""
        inv, path = self.e.invocation, Path(self.e.run_info.dir) / "run.json"
        if inv and not self._rewrite_said and _rewritten(path, self._as_written(inv)):
            self._rewrite_said = True
            note = (
                f"{path}: run.json was changed while the "
                "run went on (by a command?); sub-loops keep the invocation the run started "
                "with, and a resume refuses the changed file"
            )
            self._report("warning: " + note)
            self.e.ports.journal.event("warning", message=note)
        return inv

    def _as_written(self, invocation: Mapping[str, Any]) -> Any:
        """``invocation`` as the journal writes it into run.json (redacted)."""
        text = getattr(self.e.ports.journal, "invocation_text", None)
        return json.loads(text(invocation)) if callable(text) else invocation

    def _base_url(self) -> str | None:
        return self._invocation().get("base_url")

    def _model_refs(self, outer_act: str) -> tuple[dict[str, str], dict[str, str | None]]:
        """The sub-loop's models per role: command line > environment > config file >
        the sub-template's ``models:``; a role nothing names uses the outer act model."""
        from looprun.errors import UsageError
        from looprun.models.config import load_config
        from looprun.models.registry import model_ref_for_role

        raw = self._invocation().get("cli_models")
        cli = {k: v for k, v in raw.items() if v} if isinstance(raw, dict) else {}
        if self._config is None:
            self._config = load_config()
        refs = {}
        for role in ("act", "plan"):
            try:
                ref = model_ref_for_role(
                    role,
                    cli_model=cli.get("act"),
                    cli_role_models={"plan": cli.get("plan")},
                    config=self._config,
                    template_models=self.each.template.models,
                )
            except UsageError:
                ref = outer_act if role == "act" else refs["act"]
            refs[role] = _absolute_script(ref)
        return refs, cli

    # -- records, resume, reporting -------------------------------------------------------

    def _remerge(self, iteration: int) -> None:
        """After a crash, the outer tree is back at its last checkpoint: merge again what
        finished in the interrupted iteration (same order, so the same tree)."""
        ws = self.e.ports.workspace
        for m in [m for m in self.merges if m["iteration"] == iteration]:
            rec = self.records.get(m["task"])
            if not rec or rec.get("outcome") != "done" or not rec.get("commit"):
                continue
            merge = ws.merge_from(rec["commit"], rec["start"])
            if not merge.ok:
                rec.update(outcome="conflict", reason="merge conflict when merging again on resume")
            else:
                self._report(f"[{m['task']}] merged again after resume (not re-run)")

    def _set(self, tid: str, **fields: Any) -> None:
        self.records.setdefault(tid, {"id": tid}).update(fields)

    def _save(self) -> None:
        data = {"records": self.records, "merges": self.merges}
        write_atomic(self.path, json.dumps(data, indent=2, sort_keys=True), nofollow=True)

    def _report(self, line: str) -> None:
        with self._lock:
            self.e.ports.report(line)

    def tree(self) -> tuple[dict[str, Any], ...]:
        """The summary tree: per task its template, outcome, iterations, tokens, what was
        kept for inspection, and the tree of a sub-loop that is itself an outer loop."""
        rows = []
        for r in self.facts()["list"]:
            rec = self.records.get(r["id"], {})
            row = {k: r[k] for k in ("id", "template", "outcome", "reason", "iterations")}
            row |= {"attempt": r["attempt"], "tokens": r["tokens"]}
            if r["agent"]:
                row["agent"] = r["agent"]
            kept = rec.get("worktree") or rec.get("kept_ref")
            if kept and r["outcome"] != "done":
                row |= {"kept": kept, "branch": rec.get("branch")}
            if rec.get("earlier"):
                row["earlier_attempts"] = list(rec["earlier"])
            sub = _summary_tree(rec.get("run_dir"))
            if sub:
                row["subloops"] = sub
            rows.append(row)
        return tuple(rows)

    def _tree(self) -> None:
        self._report(f"sub-loops of {self.e.t.name}:")
        for line in _tree_lines(self.tree(), "  "):
            self._report(line)

    def _turn(
        self,
        tasks: list[PlannedTask],
        started: list[str],
        results: list[SubloopResult],
        stop: Stop | None,
    ) -> Turn:
        facts = self.facts()
        lines = [f"{r['id']}: {r['outcome']} {r['reason']}".strip() for r in facts["list"]]
        return Turn(
            messages=[
                Message("user", "Run the sub-loops: " + ", ".join(t.id for t in tasks)),
                Message("assistant", "\n".join(lines)),
            ],
            tools=[f"subloop:{t}" for t in started],
            actions=[
                f"subloop {r['id']} {r['outcome']} {self.records.get(r['id'], {}).get('code', '')}"
                for r in facts["list"]
            ],
            tokens=sum(r.tokens for r in results),
            cost_usd=sum(r.cost_usd for r in results),
            stop=stop,
        )


@contextlib.contextmanager
def _signals_deferred() -> Iterator[None]:
    """Hold SIGINT and SIGTERM until the block ends, then deliver them: a Ctrl-C while a
    finished sub-loop is merged, recorded and cleaned up takes effect after that step,
    so it never leaves a merge without its record."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    saved = {s: signal.signal(s, lambda n, _f: held.append(n)) for s in _DEFERRED}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        if held:
            os.kill(os.getpid(), held[0])


_DEFERRED = (signal.SIGINT, signal.SIGTERM)


def _rewritten(path: Path, invocation: Any) -> bool:
    """True when ``path`` no longer holds ``invocation`` (as JSON reads it back)."""
    try:
        on_disk = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return True
    return bool(on_disk != json.loads(json.dumps(invocation, default=str)))


def _limit_key(code: str) -> str:
    return "timeout_s" if code == "timeout" else code


def _summary_tree(run_dir: str | None) -> list[dict[str, Any]]:
    """A nested outer sub-loop's own tree, from its summary."""
    if not run_dir:
        return []
    try:
        data = json.loads((Path(run_dir) / "summary.json").read_text("utf-8"))
    except (OSError, ValueError):
        return []
    sub = data.get("subloops") if isinstance(data, dict) else None
    return sub if isinstance(sub, list) else []


def _tree_lines(rows: Any, indent: str) -> list[str]:
    lines = []
    for i, r in enumerate(rows):
        last = i == len(rows) - 1
        kept = f"  kept: {r['kept']}" if r.get("kept") else ""
        lines.append(
            f"{indent}{'└─' if last else '├─'} {r['id']:<{max(8, 18 - len(indent))}} "
            f"{r['template'] or '-':<14} "
            f"{r['outcome']:<10} {r['iterations']:>3} it {r['tokens']:>8} tok{kept}"
        )
        more = indent + ("   " if last else "│  ")
        for e in r.get("earlier_attempts") or []:
            lines.append(f"{more}  (attempt {e['attempt']}: {e['outcome']}, kept: {e['kept']})")
        lines += _tree_lines(r.get("subloops") or [], more)
    return lines


def _absolute_script(ref: str) -> str:
    if ref.startswith("script:"):
        return "script:" + str(Path(ref.removeprefix("script:")).expanduser().resolve())
    return ref
