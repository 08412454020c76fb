"""The outer loop's act step: run one sub-loop per planned task, then merge the results.

This is the act step (``loop.act.step.ActStep``) of a template with ``each_task``; the
composition root (``run/session.py``) makes it, since every sub-loop is a whole run.
Tasks run through an ``Executor`` in dependency order, at most ``each_task.parallel``
at a time, each in its own git worktree on a private branch made from the outer tree as
it is (``isolation: worktree``), or one at a time in the outer tree (``isolation:
none``). Results that end ``done`` are merged into the outer tree; a merge conflict is
the result ``conflict``. The outer observers then run on the merged tree as usual. Every
result is recorded in ``<run dir>/subloops.json``, so a resumed run never re-runs a
finished sub-loop.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, wait
from pathlib import Path
from typing import Any

from looprun.checks.holdout import active
from looprun.errors import one_line
from looprun.journal.handoff import adopt_pushed, journal_ref, publish_local
from looprun.loop import limits as caps
from looprun.loop.act.step import Acted, Turn
from looprun.loop.core import Loop
from looprun.loop.outcome import Stop
from looprun.loop.plan import PlanError, PlannedTask
from looprun.loop.policy_step import PolicyFindings
from looprun.loop.refine import Decision
from looprun.loop.subloops import Node, TaskGraph, subloop_facts
from looprun.models.base import Message
from looprun.models.config import load_config
from looprun.run.executor import Executor, Stopped, SubloopJob, SubloopResult
from looprun.run.interrupt import signals_deferred
from looprun.run.subloop_jobs import (
    budget_share,
    invocation_rewritten,
    limit_key,
    model_refs,
    sub_inputs,
)
from looprun.run.subloop_records import SubloopRecords
from looprun.run.subloop_tree import tree_lines, tree_rows
from looprun.system.crashpoint import crash_point
from looprun.workspace.tree import Workspace

ExecutorFactory = Callable[[int, Callable[[str], None]], Executor]
_BUDGET_CODES = ("max_tokens", "max_cost_usd", "timeout")


class SubLoops:
    """The act step of an outer loop (``each_task``): every planned task as a sub-loop."""

    def __init__(
        self,
        loop: Loop,
        workspace: Workspace,
        executor_factory: ExecutorFactory,
        *,
        held_out: tuple[str, ...] = (),
        script_key: tuple[tuple[str, int], ...] = (),
        stop: threading.Event | None = None,
        trace: Any = None,
    ):
        """``held_out``: tests no sub-loop's command may read; ``script_key``: this loop's
        place in a scripted model's tree; ``stop``: set when this loop, itself a
        sub-loop, is asked to stop."""
        self.e, self.ws = loop, workspace
        self.executor_factory = executor_factory
        self.held_out, self.script_key, self.parent_stop = held_out, script_key, stop
        self.trace = trace  # a traced run's sub-loops are its iteration's child spans
        assert loop.template.each_task is not None
        self.each = loop.template.each_task
        self.book = SubloopRecords(Path(loop.run_info.dir), workspace, self._report)
        self.records, self.merges = self.book.records, self.book.merges
        self._lock = threading.Lock()
        self._config: Any = None
        self._rewrite_said = False

    # -- the act step ---------------------------------------------------------------------

    def subject(self, task: PlannedTask) -> str:
        return "sub-loops"  # an outer turn runs every task

    def settle(self, decision: Decision, policy: PolicyFindings) -> Decision:
        return decision

    def facts(self) -> dict[str, Any]:
        return subloop_facts([t.id for t in self.e.state.tasks or []], self.records)

    def act(self, task: PlannedTask, iteration: int, ctx: Mapping[str, Any]) -> Acted:
        """Run every planned task that has not finished; returns the outer turn."""
        st = self.e.state
        self.book.reconcile()
        self.book.remerge(iteration)
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
        if any(
            active(self.each.template.observe, sub_inputs(self.e, self.each, t))
            for t in todo.values()
        ):
            # a sub-loop's held-out tests sit in its worktree while they run, where the
            # commands of a sub-loop acting beside it could read them: one at a time
            parallel = 1
        executor = self.executor_factory(parallel, self._report)
        parent = self.parent_stop
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
                        self.book.set(
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
                    stop = caps.check_spent(self.e.limits, self.e.spent())
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
                    with signals_deferred():  # merge, record and clean up as one step
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
            self.book.save()
            raise
        finally:
            executor.shutdown()
            self._touched()
        self.book.save()
        self._tree()
        return Acted(self._turn(tasks, started, results, stop))

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
        self.ws.touched()

    def apply(self, task: PlannedTask, d: Decision) -> tuple[bool, Stop | None]:
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
            self.book.save()
        return False, None

    # -- one sub-loop ---------------------------------------------------------------------

    def _job(
        self,
        task: PlannedTask,
        iteration: int,
        running: Mapping[Future[SubloopResult], tuple[SubloopJob, dict[str, Any]]],
        slots: int,
    ) -> tuple[SubloopJob, dict[str, Any]]:
        e, ws = self.e, self.ws
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
        share = budget_share(self.e.limits, self.e.spent(), (s for _, s in running.values()), slots)
        model = e.ports.model
        if self._config is None:
            self._config = load_config()
        invoked = self._invocation()  # read once: each call checks run.json on disk
        refs, cli = model_refs(invoked, self._config, self.each, model.ref)
        outer_script = model.ref == refs["act"]
        job = SubloopJob(
            task_id=task.id,
            attempt=attempt,
            template=str(Path(self.each.template.source).resolve()),
            inputs=sub_inputs(self.e, self.each, task),
            workdir=workdir,
            repository=e.run_info.workdir,
            commit=start,
            run_id=f"{e.run_info.id}.{name}",
            run_dir=str(run_dir),
            model=refs["act"],
            plan_model=refs["plan"],
            cli_models=cli,
            sandbox=invoked.get("sandbox"),
            held_out=self.held_out,
            # the outer script's part for this task; a script of the sub-template's own
            # is played whole
            script_key=((*self.script_key, (task.id, attempt)) if outer_script else ()),
            base_url=self._base_url(),
            limits=share,
            resume=resume,
            trace={} if self.trace is None else self.trace.carrier(),
            # what the sub-template's files must still be when the sub-loop loads them
            template_files=invoked.get("template_files"),
            template_root=invoked.get("template_root") or e.run_info.workdir,
            stack=invoked.get("stack"),
        )
        where = "local" if invoked.get("executor") in (None, "local") else "ray"
        if resume and prev.get("executor", "local") != where:
            self._hand_over(job, where)
        self.book.set(
            task.id,
            outcome="running",
            reason="",
            executor=where,
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
        self.book.save()  # the intent first: a crash from here on is reconciled on resume
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

    def _hand_over(self, job: SubloopJob, where: str) -> None:
        """A sub-loop resumes on another executor than it last ran on (the record says
        which). Back from a cluster: take the steps its worker published that this run
        dir does not hold yet (a driver killed before it fetched them). Off to one: this
        run dir is the record, and the journal ref the worker resumes from says so."""
        git, url = self.ws.git, self._invocation().get("sync_remote")
        if where != "local":
            publish_local(git, job.run_id, Path(job.run_dir))
            return
        if url:  # the steps went through a shared remote: fetch them from there
            for spec in (
                f"+{journal_ref(job.run_id)}:{journal_ref(job.run_id)}",
                f"+refs/looprun/{job.run_id}/*:refs/looprun/{job.run_id}/*",
            ):
                git.run("fetch", "-q", "--no-tags", url, spec, check=False)
        if adopt_pushed(git, job.run_id, Path(job.run_dir)):
            self._report(f"[{job.task_id}] took the steps its last worker pushed")

    def _absorb(
        self, job: SubloopJob, share: Mapping[str, Any], res: SubloopResult, iteration: int
    ) -> str:
        """Account a finished sub-loop, merge it if done, keep or clean its worktree."""
        st, ws = self.e.state, self.ws
        if res.outcome == "interrupted":  # stays `running`: a resume continues it
            return res.outcome
        st.prompt_tokens += res.prompt_tokens
        st.completion_tokens += res.completion_tokens
        st.cost_usd += res.cost_usd
        outcome, reason, code = res.outcome, res.reason, res.code
        if outcome == "exhausted" and code in _BUDGET_CODES and share.get(limit_key(code)):
            own = getattr(self.each.template.limits, limit_key(code))
            if own is None or share[limit_key(code)] < own:
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
                self.book.keep_branch(rec)
            else:
                self.book.save()  # the merge recorded before the worktree goes
                crash_point("subloop.merged")
                self.book.cleanup(rec)
        elif keep:  # isolation none: keep the attempt on a ref, give the tree back
            if res.commit:
                ws.keep_ref(f"refs/looprun/{job.run_id}/kept", res.commit)
                rec["kept_ref"] = f"refs/looprun/{job.run_id}/kept"
            ws.restore(job.commit)
        self.book.save()
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

    # -- plans, budgets, inputs -----------------------------------------------------------

    def _replan(self, d: Decision) -> Stop | None:
        """Replan only what did not finish; finished tasks stay done and merged."""
        e, st = self.e, self.e.state
        tasks = list(st.tasks or [])
        kept = [t for t in tasks if self.records.get(t.id, {}).get("outcome") == "done"]
        remaining = [t for t in tasks if t not in kept]
        if e.template.plan.mode == "model":
            try:
                fresh = e.plan(remaining, [t.id for t in kept], d.message)
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

    # -- records, resume, reporting -------------------------------------------------------

    def _invocation(self) -> dict[str, Any]:
        """What this run was invoked with, held in memory since it started; a rewritten
        ``run.json`` is said once, on stderr and in the journal."""
        note = "" if self._rewrite_said else invocation_rewritten(self.e)
        if note:
            self._rewrite_said = True
            self._report("warning: " + note)
            self.e.ports.journal.event("warning", message=note)
        return self.e.invocation

    def _base_url(self) -> str | None:
        return self._invocation().get("base_url")

    def _report(self, line: str) -> None:
        with self._lock:
            self.e.ports.report(line)

    def tree(self) -> tuple[dict[str, Any], ...]:
        """The summary tree (see ``subloop_tree.tree_rows``)."""
        return tree_rows(self.facts()["list"], self.records)

    def _tree(self) -> None:
        self._report(f"sub-loops of {self.e.template.name}:")
        for line in tree_lines(self.tree(), "  "):
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
