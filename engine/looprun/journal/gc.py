"""``looprun gc``: drop the checkpoint refs of runs whose directory is gone.

Every run leaves commits on ``refs/looprun/<run_id>/...`` (checkpoints, sub-loop starts,
kept trees; sub-runs are ``<run_id>.<task>-<n>/...``), anchors its base on
``refs/looprun/base/<tree>`` and seals its invocation on ``refs/looprun-sealed/<run_id>``.
Sub-loops run on a cluster add ``refs/looprun-sync/<sub-run>/...`` (start, journal,
lease), here and on the sync remote they went through. They keep objects alive; once a
run's directory has been deleted nothing reads them, so they go, and a base anchor goes
when no remaining run started from that tree. On a sync remote (shared, perhaps, by
other repositories) only the refs of runs this repository knows and deleted go. Objects
themselves are git's to collect (``git gc``).
"""

from __future__ import annotations

from pathlib import Path

from looprun.data.value import valueclass
from looprun.journal import sealed
from looprun.journal.read import load_state
from looprun.journal.runs import RUNS_DIR
from looprun.system import safefs
from looprun.workspace.git import Git

PREFIX = "refs/looprun/"
SYNC_PREFIX = "refs/looprun-sync/"


@valueclass
class Pruned:
    refs: tuple[str, ...]  # full ref names deleted (or that would be, with dry_run)
    runs: tuple[str, ...]  # the deleted runs they belonged to
    kept: int  # refs left in place
    remote_refs: tuple[str, ...] = ()  # deleted on the sync remote


def _repository(workdir: Path) -> Git | None:
    private = workdir / RUNS_DIR.parent / "git"
    if (private / "HEAD").is_file():
        return Git(workdir, private)
    git = Git(workdir)
    return git if git.is_repo() else None


def _bases(runs_root: Path) -> set[str]:
    """The base trees the remaining runs started from."""
    out = set()
    for run_dir in runs_root.iterdir() if safefs.is_real_dir(runs_root) else ():
        if not safefs.is_real_dir(run_dir):
            continue
        base = (load_state(run_dir) or {}).get("base")
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


def _run_of(ref: str) -> str:
    """The outer run a ``refs/looprun/`` or ``refs/looprun-sync/`` ref belongs to."""
    name = ref.removeprefix(SYNC_PREFIX).removeprefix(PREFIX)
    return name.split("/", 1)[0].split(".", 1)[0]  # a sub-run belongs to its outer run


def _prune_remote(git: Git, url: str, runs: set[str], dry_run: bool) -> tuple[str, ...]:
    """Delete on ``url`` the refs of ``runs`` (and nothing of any other run)."""
    listing = git.run("ls-remote", "--refs", url, f"{PREFIX}*", f"{SYNC_PREFIX}*", check=False)
    doomed = []
    for line in listing.splitlines():
        ref = line.split("\t", 1)[-1]
        if not ref.startswith(f"{PREFIX}base/") and _run_of(ref) in runs:
            doomed.append(ref)
    if doomed and not dry_run:
        git.run("push", "-q", url, *(f":{ref}" for ref in doomed))
    return tuple(doomed)


def prune_refs(workdir: Path, *, dry_run: bool = False, sync_remote: str | None = None) -> Pruned:
    """Delete the ``refs/looprun/`` and ``refs/looprun-sync/`` refs of runs that no longer
    have a directory, here and, with ``sync_remote``, on that remote too."""
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
        run_id = _run_of(ref)
        if run_id not in live:
            doomed.append(ref)
            runs.add(run_id)
    synced = git.run("for-each-ref", "--format=%(refname)", SYNC_PREFIX).split()
    for ref in synced:
        if _run_of(ref) not in live:
            doomed.append(ref)
            runs.add(_run_of(ref))
    refs += synced
    seals = git.run("for-each-ref", "--format=%(refname)", sealed.PREFIX).split()
    for ref in seals:
        if ref[len(sealed.PREFIX) :] not in live:
            doomed.append(ref)
            runs.add(ref[len(sealed.PREFIX) :])
    refs += seals
    remote = _prune_remote(git, sync_remote, runs, dry_run) if sync_remote else ()
    if doomed and not dry_run:
        data = "".join(f"delete {ref}\n" for ref in doomed).encode("utf-8")
        git.run("update-ref", "--stdin", input=data)
    return Pruned(tuple(doomed), tuple(sorted(runs)), len(refs) - len(doomed), remote)
