"""The user's branch, moved by plumbing: a commit of HEAD plus the paths a run changed,
the user's index entries reset to it, and finding a ``--commit`` commit a crash left.

No hooks and no editor run (``workspace/commit.py`` is the commit with the user's hooks). The
user's other uncommitted or untracked work stays out of the commit.
"""

from __future__ import annotations

from collections.abc import Sequence

from looprun.workspace.checkout import temp_index
from looprun.workspace.git import Git


def commit(git: Git, now: str, message: str, only: Sequence[str] | None) -> str:
    """Commit tree ``now`` (or, with ``only``, HEAD's tree with those paths taken from
    ``now``) on top of HEAD and move the current branch to it; returns the commit."""
    head = git.head()
    tree = now if only is None else _tree_with(git, head, now, only)
    parents = ["-p", head] if head else []
    env = _user_identity(git)
    commit = git.run("commit-tree", tree, *parents, "-m", message, env=env).strip()
    git.run("update-ref", "-m", f"looprun: {message}", "HEAD", commit, head or "")
    return commit


def reset_index(git: Git, only: Sequence[str] | None) -> None:
    """The user's index entries of ``only`` (all with None) set to HEAD's."""
    if only is None:
        git.run("reset", "-q")
    elif only:
        data = b"".join(p.encode("utf-8", "surrogateescape") + b"\0" for p in only)
        git.run(
            "reset",
            "-q",
            "--pathspec-from-file=-",
            "--pathspec-file-nul",
            "HEAD",
            env={"GIT_LITERAL_PATHSPECS": "1"},
            input=data,
        )


def made_commit(git: Git, parent: str, run_id: str) -> str | None:
    """HEAD, when it is run ``run_id``'s ``--commit`` commit on top of ``parent`` (made
    before a crash): its first parent is ``parent`` and its message carries the
    ``Looprun-Run: <run_id>`` trailer; else None."""
    head = git.head()
    if head is None or head == parent:
        return None
    parents, _, body = git.run("log", "-1", "--format=%P%n%B", head).partition("\n")
    if (parents.split() or [""])[0] != parent:
        return None
    trailer = f"Looprun-Run: {run_id}"
    return head if any(ln.strip() == trailer for ln in body.splitlines()) else None


def _tree_with(git: Git, head: str | None, source: str, paths: Sequence[str]) -> str:
    """HEAD's tree with ``paths`` taken from tree ``source`` (absent there: removed)."""
    with temp_index() as env:
        if head:
            git.run("read-tree", head, env=env)
        present = git.run("ls-tree", "-r", "-z", "--full-tree", source)
        wanted = set(paths)
        entries = {
            rec.split("\t", 1)[1]: rec
            for rec in present.split("\0")
            if "\t" in rec and rec.split("\t", 1)[1] in wanted
        }
        zero = "0" * len(source)
        lines = [entries.get(p, f"0 blob {zero}\t{p}") for p in paths]
        data = b"".join(ln.encode("utf-8", "surrogateescape") + b"\0" for ln in lines)
        git.run("update-index", "-z", "--index-info", env=env, input=data)
        return git.run("write-tree", env=env).strip()


def _user_identity(git: Git) -> dict[str, str]:
    env: dict[str, str] = {}
    name = git.run("config", "user.name", check=False).strip()
    email = git.run("config", "user.email", check=False).strip()
    if name:
        env["GIT_AUTHOR_NAME"] = env["GIT_COMMITTER_NAME"] = name
    if email:
        env["GIT_AUTHOR_EMAIL"] = env["GIT_COMMITTER_EMAIL"] = email
    return env
