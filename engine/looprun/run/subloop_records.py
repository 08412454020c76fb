"""The record of an outer loop's sub-loops (``<run dir>/subloops.json``), and what it
takes to bring the outer tree in line with it after a crash: worktrees removed whose
merge was recorded, merges made again that the restored checkpoint lost."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from looprun.errors import LooprunError
from looprun.system.atomic import write_atomic
from looprun.workspace.tree import Workspace

RECORDS_FILE = "subloops.json"


class SubloopRecords:
    """Per task the latest attempt's record, and the order finished work was merged in."""

    def __init__(self, run_dir: Path, ws: Workspace, report: Callable[[str], None]):
        self.path, self.ws, self._report = run_dir / RECORDS_FILE, ws, report
        self.records: dict[str, dict[str, Any]] = {}
        self.merges: list[dict[str, Any]] = []  # merge order: {iteration, task}
        if self.path.exists():
            data = json.loads(self.path.read_text("utf-8"))
            self.records = data.get("records", {})
            self.merges = data.get("merges", [])

    def set(self, tid: str, **fields: Any) -> None:
        self.records.setdefault(tid, {"id": tid}).update(fields)

    def save(self) -> None:
        data = {"records": self.records, "merges": self.merges}
        write_atomic(self.path, json.dumps(data, indent=2, sort_keys=True), nofollow=True)

    def keep_branch(self, rec: dict[str, Any]) -> None:
        """Failed work stays inspectable: its worktree, and its last state on the branch."""
        if not rec.get("commit") or not Path(rec["worktree"]).is_dir():
            return
        try:
            self.ws.keep_branch(Path(rec["worktree"]), rec["branch"], rec["commit"])
        except LooprunError as exc:
            self._report(f"[{rec.get('run_id')}] could not update branch {rec['branch']}: {exc}")

    def reconcile(self) -> None:
        """After a crash: finish the removal of merged sub-loops' worktrees (the merge
        was recorded, the removal had not finished)."""
        pending = [r for r in self.records.values() if r["outcome"] == "done" and r.get("worktree")]
        for rec in pending:
            self.cleanup(rec)
        if pending:
            self.save()

    def cleanup(self, rec: dict[str, Any]) -> None:
        ws = self.ws
        try:
            ws.discard_worktree(Path(rec["worktree"]), rec["branch"])
        except LooprunError as exc:
            self._report(f"could not remove worktree {rec['worktree']}: {exc}")
            return
        rec["worktree"], rec["branch"] = None, None

    def remerge(self, iteration: int) -> None:
        """After a crash, the outer tree is back at its last checkpoint: merge again what
        finished in the interrupted iteration (same order, so the same tree)."""
        ws = self.ws
        for m in [m for m in self.merges if m["iteration"] == iteration]:
            rec = self.records.get(m["task"])
            if not rec or rec.get("outcome") != "done" or not rec.get("commit"):
                continue
            merge = ws.merge_from(rec["commit"], rec["start"])
            if not merge.ok:
                rec.update(outcome="conflict", reason="merge conflict when merging again on resume")
            else:
                self._report(f"[{m['task']}] merged again after resume (not re-run)")
