"""Three-way merges of trees (a sub-loop's work onto the outer working tree), by
``git merge-tree`` on throwaway commits: no index, no working tree, no branch moves."""

from __future__ import annotations

from looprun.data.value import valueclass
from looprun.workspace.git import Git, GitError


@valueclass
class MergeResult:
    """The outcome of merging another snapshot into this working tree."""

    ok: bool
    conflicts: tuple[str, ...] = ()
    tree: str | None = None  # the merged tree, when ok
    changed: tuple[str, ...] = ()  # paths the merge changed in this working tree


def three_way(git: Git, base_tree: str, ours_tree: str, other_tree: str) -> MergeResult:
    """The changes from ``base_tree`` to ``other_tree`` merged into ``ours_tree``: the
    merged tree, or the conflicting paths. ``changed`` is left for the caller to fill."""
    if other_tree == base_tree:
        return MergeResult(True, tree=ours_tree)
    base = git.run("commit-tree", base_tree, "-m", "looprun merge base").strip()
    ours = git.run("commit-tree", ours_tree, "-p", base, "-m", "ours").strip()
    theirs = git.run("commit-tree", other_tree, "-p", base, "-m", "theirs").strip()
    code, out, err = git.run_status(
        "merge-tree", "--write-tree", "--name-only", "--no-messages", "-z", ours, theirs
    )
    fields = [f for f in out.split("\0") if f]
    if code == 1:
        return MergeResult(False, conflicts=tuple(dict.fromkeys(fields[1:])))
    if code != 0 or not fields:
        raise GitError(f"git merge-tree failed in {git.workdir}: {err.strip()}")
    return MergeResult(True, tree=fields[0])
