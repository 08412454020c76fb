"""``looprun gc``: drop the checkpoint refs of runs whose directory is gone.

Every run leaves commits on ``refs/looprun/<run_id>/...`` (checkpoints, sub-loop starts,
kept trees; sub-runs are ``<run_id>.<task>-<n>/...``), anchors its base on
``refs/looprun/base/<tree>`` and seals its invocation on ``refs/looprun-sealed/<run_id>``.
They keep objects alive; once a run's directory has been deleted nothing reads them, so
they go, and a base anchor goes when no remaining run started from that tree. Objects
themselves are git's to collect (``git gc``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from looprun.journal import sealed
from looprun.journal.runs import RUNS_DIR
from looprun.workspace.git import Git

PREFIX = "refs/looprun/"


@dataclass(frozen=True)
class Pruned:
    refs: tuple[str, ...]  # full ref names deleted (or that would be, with dry_run)
    runs: tuple[str, ...]  # the deleted runs they belonged to
    kept: int  # refs left in place


def _repository(workdir: Path) -> Git | None:
    private = workdir / RUNS_DIR.parent / "git"
    if (private / "HEAD").is_file():
        return Git(workdir, private)
    git = Git(workdir)
    return git if git.is_repo() else None


def _bases(runs_root: Path) -> set[str]:
    """The base trees the remaining runs started from."""
    out = set()
    for state in runs_root.glob("*/state.json"):
        try:
            base = json.loads(state.read_text("utf-8")).get("base")
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(base, str):
            out.add(base)
    return out


def _worktrees(git: Git, workdir: Path) -> list[Path]:
    out = [workdir]
    if git.git_dir is None:
        listing = git.run("worktree", "list", "--porcelain", check=False)
        out += [
            Path(ln[len("worktree ") :])
            for ln in listing.splitlines()
            if ln.startswith("worktree ")
        ]
    return out


def prune_refs(workdir: Path, *, dry_run: bool = False) -> Pruned:
    """Delete the ``refs/looprun/`` refs of runs that no longer have a directory."""
    git = _repository(workdir)
    if git is None:
        return Pruned((), (), 0)
    live: set[str] = set()
    bases: set[str] = set()
    # refs are shared by every worktree of a repository: a run in any of them is alive
    for tree in _worktrees(git, workdir):
        root = tree / RUNS_DIR
        if root.is_dir():
            live |= {p.name for p in root.iterdir() if p.is_dir()}
            bases |= _bases(root)
    doomed: list[str] = []
    runs: set[str] = set()
    refs = git.run("for-each-ref", "--format=%(refname)", PREFIX).split()
    for ref in refs:
        name = ref[len(PREFIX) :]
        head = name.split("/", 1)[0]
        if head == "base":
            tree = name.split("/", 1)[1] if "/" in name else ""
            if tree not in bases:
                doomed.append(ref)
            continue
        run_id = head.split(".", 1)[0]  # a sub-run belongs to its outer run
        if run_id not in live:
            doomed.append(ref)
            runs.add(run_id)
    seals = git.run("for-each-ref", "--format=%(refname)", sealed.PREFIX).split()
    for ref in seals:
        if ref[len(sealed.PREFIX) :] not in live:
            doomed.append(ref)
            runs.add(ref[len(sealed.PREFIX) :])
    refs += seals
    if doomed and not dry_run:
        data = "".join(f"delete {ref}\n" for ref in doomed).encode("utf-8")
        git.run("update-ref", "--stdin", input=data)
    return Pruned(tuple(doomed), tuple(sorted(runs)), len(refs) - len(doomed))
