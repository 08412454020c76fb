"""``--commit``: the commit a done run makes on the current branch.

Unlike the engine's own git calls (plumbing, no hooks), this is ``git commit`` as the
user would run it: the repository's hooks run (pre-commit, commit-msg, post-commit), so
the team's checks apply to what the loop wrote, unless ``--no-verify``. Only the paths the
run changed are committed (``git commit --only``): the user's other staged, unstaged
and untracked work stays as it was. A detached HEAD is refused: a commit there would
belong to no branch. Hooks run with secret-looking variables removed from the
environment, and never when the run itself changed a file of the hooks directory.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import textwrap
from collections.abc import Sequence
from pathlib import Path

from looprun.errors import LooprunError, UsageError
from looprun.system.atomic import write_atomic
from looprun.system.crashpoint import crash_point
from looprun.system.proc import scrubbed_env

SUBJECT_CHARS = 72


class CommitRefused(LooprunError):
    """git (or a hook) refused the commit; the changes stay in the working tree."""


def commit_message(template: str, intent: str, run_id: str, *, iterations: int, reason: str) -> str:
    """``looprun bugfix: <the intent's first line>``, the intent in full, what the run
    did, and ``Looprun-Run``/``Looprun-Template`` trailers that lead back to the run."""
    lines = [ln.strip() for ln in intent.strip().splitlines() if ln.strip()]
    first = lines[0] if lines else "(no intent)"
    subject = f"looprun {template}: {first}"
    if len(subject) > SUBJECT_CHARS:
        subject = subject[: SUBJECT_CHARS - 1].rstrip() + "…"
    body = "\n\n".join(
        textwrap.fill(p, 72, break_long_words=False, break_on_hyphens=False)
        for p in _paragraphs(intent)
    )
    done = f"Done after {iterations} iteration(s): {reason}."
    trailers = f"Looprun-Run: {run_id}\nLooprun-Template: {template}"
    return f"{subject}\n\nIntent:\n{body}\n\n{done}\n\n{trailers}\n"


def _paragraphs(text: str) -> list[str]:
    out, cur = [], []
    for line in text.strip().splitlines():
        if line.strip():
            cur.append(line.strip())
        elif cur:
            out.append(" ".join(cur))
            cur = []
    if cur:
        out.append(" ".join(cur))
    return out or ["(no intent)"]


def _git(workdir: Path, *args: str, input: bytes | None = None, env: dict[str, str] | None = None):
    """git as the user runs it: their config and hooks, no secrets in the environment."""
    return subprocess.run(
        ["git", *args],
        cwd=workdir,
        input=input,
        capture_output=True,
        env=scrubbed_env(extra={"GIT_TERMINAL_PROMPT": "0", "GIT_EDITOR": "true", **(env or {})}),
        check=False,
    )


def current_branch(workdir: Path) -> str:
    """The branch HEAD is on; a detached HEAD (or no repository) is a clear refusal."""
    proc = _git(workdir, "symbolic-ref", "-q", "--short", "HEAD")
    if proc.returncode == 0 and proc.stdout.strip():
        return proc.stdout.decode().strip()
    at = _git(workdir, "rev-parse", "--short", "HEAD").stdout.decode().strip()
    if not at:
        raise UsageError(f"--commit: {workdir} is not a git repository with a commit")
    raise UsageError(
        f"--commit: HEAD is detached (at {at}) in {workdir}; a commit there would belong to "
        "no branch. Check out a branch first (git switch -c NAME), or run without --commit"
    )


def _hooks_dir(workdir: Path) -> Path:
    out = _git(workdir, "rev-parse", "--git-path", "hooks").stdout.decode().strip()
    return (workdir / out).resolve()


def commit_paths(workdir: Path, message: str, paths: Sequence[str], *, verify: bool) -> str:
    """Commit ``paths`` as they are in the working tree on the current branch; returns
    the new commit. Raises :class:`CommitRefused` with git's (or the hook's) words."""
    current_branch(workdir)
    hooks = _hooks_dir(workdir)
    touched = [p for p in paths if (workdir / p).resolve().is_relative_to(hooks)]
    if touched and verify:
        raise CommitRefused(
            f"--commit: the run changed the repository's hooks ({', '.join(touched)}); "
            "review them and commit yourself, or pass --no-verify"
        )
    listed = _git(workdir, "ls-files", "-z", "--", *paths, env={"GIT_LITERAL_PATHSPECS": "1"})
    tracked = {p for p in listed.stdout.decode().split("\0") if p}
    wanted = [p for p in paths if p in tracked or os.path.lexists(workdir / p)]
    if not wanted:
        raise CommitRefused("--commit: none of the changed paths can be committed")
    spec = b"".join(p.encode("utf-8") + b"\0" for p in wanted)
    literal = {"GIT_LITERAL_PATHSPECS": "1", **_identity(workdir)}
    index = workdir / _git(workdir, "rev-parse", "--git-path", "index").stdout.decode().strip()
    saved = index.read_bytes() if index.is_file() else None
    stamp = index.stat() if saved is not None else None
    try:
        return _commit(workdir, message, spec, literal, verify)
    except CommitRefused:
        # a refused commit leaves the user's index as it was, not half staged, its time
        # included: git trusts an entry's recorded stat data only when the index file is
        # newer than it, so an index put back with a new time would say that a file
        # changed in the second it was checked out (same size) is unchanged
        if saved is not None and stamp is not None:
            write_atomic(index, saved)
            os.utime(index, ns=(stamp.st_atime_ns, stamp.st_mtime_ns))
        raise


def _commit(workdir: Path, message: str, spec: bytes, literal: dict[str, str], verify: bool) -> str:
    added = _git(
        workdir, "add", "-A", "--pathspec-from-file=-", "--pathspec-file-nul", input=spec,
        env=literal,
    )  # fmt: skip
    if added.returncode != 0:
        raise CommitRefused(f"--commit: git add failed: {_said(added)}")
    with tempfile.NamedTemporaryFile("w", suffix=".txt", encoding="utf-8", delete=False) as fh:
        fh.write(message)
    try:
        args = ["commit", "-q", "--cleanup=verbatim", "-F", fh.name]
        if not verify:
            args.append("--no-verify")
        proc = _git(
            workdir, *args, "--pathspec-from-file=-", "--pathspec-file-nul", input=spec,
            env=literal,
        )  # fmt: skip
    finally:
        os.unlink(fh.name)
    if proc.returncode != 0:
        raise CommitRefused(
            "--commit: the commit was refused"
            + (" (a hook failed; --no-verify skips pre-commit and commit-msg)" if verify else "")
            + f": {_said(proc)}. The changes stay in the working tree"
        )
    crash_point("commit.made")  # test-only: HEAD moved, nothing recorded yet
    return _git(workdir, "rev-parse", "HEAD").stdout.decode().strip()


def _identity(workdir: Path) -> dict[str, str]:
    """The user's identity if git knows one; else looprun's, so a CI checkout commits."""
    env: dict[str, str] = {}
    for key, var in (("user.name", "NAME"), ("user.email", "EMAIL")):
        if not _git(workdir, "config", key).stdout.strip() and not os.environ.get(
            f"GIT_AUTHOR_{var}"
        ):
            value = "looprun" if var == "NAME" else "looprun@localhost"
            env[f"GIT_AUTHOR_{var}"] = env[f"GIT_COMMITTER_{var}"] = value
    return env


def _said(proc: subprocess.CompletedProcess[bytes]) -> str:
    text = (proc.stderr or b"").decode("utf-8", "replace") + (proc.stdout or b"").decode(
        "utf-8", "replace"
    )
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return " / ".join(lines[-6:]) or f"git exited {proc.returncode}"
