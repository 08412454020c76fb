"""What each iteration changed, read back from the run's checkpoint refs.

Checkpoints are commits on ``refs/looprun/<run_id>/<n>`` in the repository of the run
(or in the private repository looprun keeps for a plain directory). A report only reads
them; refs pruned by ``looprun gc`` (or a clone without them) leave the diff out, said so.
"""

from __future__ import annotations

from pathlib import Path

from looprun.report.model import FileChange
from looprun.workspace.git import Git, GitError

REF_PREFIX = "refs/looprun/"


class Trees:
    """Diffs between trees of one repository; every failure is ``None``, not an error."""

    def __init__(self, git: Git | None):
        self.git = git

    @classmethod
    def for_run(cls, workdir: Path, state_dir: Path) -> Trees:
        """The repository a run's checkpoints are in: the private one, else the workdir's."""
        candidates = []
        if (state_dir / "git" / "HEAD").is_file():
            candidates.append(Git(workdir, state_dir / "git"))
        candidates.append(Git(workdir))
        for git in candidates:
            if workdir.is_dir() and git.is_repo():
                return cls(git)
        return cls(None)

    def resolve(self, ref: str) -> str | None:
        """A commit for a checkpoint name (``<run_id>/<n>``), ref or sha, if it exists."""
        if self.git is None or not ref:
            return None
        for candidate in (REF_PREFIX + ref, ref):
            try:
                out = self.git.run(
                    "rev-parse", "--verify", "-q", f"{candidate}^{{tree}}", check=False
                ).strip()
            except GitError:
                return None
            if out:
                return out
        return None

    def diff(self, start: str, end: str) -> str | None:
        if self.git is None:
            return None
        try:
            return self.git.diff(start, end)
        except GitError:
            return None

    def numstat(self, start: str, end: str) -> tuple[FileChange, ...] | None:
        if self.git is None:
            return None
        try:
            out = self.git.diff(start, end, "--numstat", "-z")
        except GitError:
            return None
        rows = []
        for rec in out.split("\0"):
            parts = rec.split("\t", 2)
            if len(parts) == 3:
                added, removed, path = parts
                rows.append(
                    FileChange(
                        path.strip("\n"),
                        int(added) if added.isdigit() else None,
                        int(removed) if removed.isdigit() else None,
                    )
                )
        return tuple(rows)

    def refs(self, prefix: str = "") -> list[str]:
        """Checkpoint ref names under ``refs/looprun/<prefix>``, without the prefix."""
        if self.git is None:
            return []
        out = self.git.run("for-each-ref", "--format=%(refname)", REF_PREFIX + prefix, check=False)
        return [r[len(REF_PREFIX) :] for r in out.splitlines() if r.startswith(REF_PREFIX)]
