"""Long-lived git processes that answer a stream of requests, so the checkpoint and the
diffs of every iteration start no process of their own."""

from __future__ import annotations

import contextlib
import secrets
import subprocess
from collections.abc import Callable

from looprun.errors import one_line
from looprun.workspace.git import GIT_OPTIONS, Git, GitError


class LongLived:
    """One git process kept running for a stream of requests (started on first use,
    started again after a failure or when the repository's config changed)."""

    def __init__(self, git: Git, *args: str):
        self.git = git
        self.args = args
        self._proc: subprocess.Popen[bytes] | None = None
        self._drivers: list[str] = []

    def _process(self) -> subprocess.Popen[bytes]:
        drivers = self.git.no_drivers()
        proc = self._proc
        if proc is not None and (proc.poll() is not None or drivers != self._drivers):
            self.close()
            proc = None
        if proc is None:
            proc = self._proc = subprocess.Popen(
                ["git", *GIT_OPTIONS, *drivers, *self.args],
                cwd=self.git.workdir,
                env=self.git.env(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            self._drivers = drivers
        return proc

    def _ask(self, request: bytes, done: Callable[[bytes], bool]) -> bytes:
        """Send ``request``; read until ``done`` says the answer is whole (b"" at EOF)."""
        proc = self._process()
        assert proc.stdin is not None and proc.stdout is not None
        out = bytearray()
        try:
            proc.stdin.write(request)
            proc.stdin.flush()
            while not done(out):
                chunk = proc.stdout.read1(1 << 16)
                if not chunk:
                    return b""
                out += chunk
        except OSError:
            return b""
        return bytes(out)

    def close(self) -> str:
        """End the process; what it said on stderr."""
        proc, self._proc = self._proc, None
        if proc is None:
            return ""
        with contextlib.suppress(OSError):
            proc.stdin.close()  # type: ignore[union-attr]
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        err = proc.stderr.read() if proc.stderr else b""
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
        return err.decode("utf-8", "replace")


class RefUpdates(LongLived):
    """Ref updates through one long-lived ``git update-ref --stdin``, one transaction
    each (``start``, ``update``, ``commit``, answered ``commit: ok`` once the ref is
    written), so a checkpoint per iteration starts no process. Reflog entries (written
    only where the repository logs such refs) all say ``message``."""

    def __init__(self, git: Git, message: str):
        super().__init__(git, "update-ref", "--stdin", "-m", message)

    def update(self, ref: str, new: str) -> None:
        if "\n" in ref or "\0" in ref or "\n" in new:
            raise GitError(f"invalid ref update {ref!r} {new!r}")
        request = f"start\nupdate {ref} {new}\ncommit\n".encode()
        answer = self._ask(request, lambda out: out.count(b"\n") >= 2)
        if answer != b"start: ok\ncommit: ok\n":
            err = self.close()
            raise GitError(f"git update-ref {ref} failed in {self.git.workdir}: {one_line(err)}")


class TreeDiffs(LongLived):
    """Diffs of tree pairs through one long-lived ``git diff-tree --stdin``: each pair
    is answered with the pair itself, then its diff; a line that is no object id is
    echoed after it, which marks the end. Plumbing: the user's diff settings
    (algorithm, prefixes, context) do not change what the engine reads."""

    def __init__(self, git: Git, *options: str):
        super().__init__(
            git, "diff-tree", "--stdin", "-r", "--no-color", "--no-renames", "--no-ext-diff",
            "--no-textconv", "--text", *options,
        )  # fmt: skip

    def diff(self, a: str, b: str) -> str:
        if not (set(a) | set(b)) <= set("0123456789abcdef"):
            raise GitError(f"not object ids: {a} {b}")
        end = f"looprun-end-{secrets.token_hex(8)}\n".encode()
        answer = self._ask(f"{a} {b}\n".encode() + end, lambda out: out.endswith(end))
        head = f"{a} {b}\n".encode()
        if not answer.startswith(head):  # an unknown object: git says nothing but this
            err = self.close()
            raise GitError(f"git diff-tree {a} {b} failed in {self.git.workdir}: {one_line(err)}")
        return answer[len(head) : -len(end)].decode("utf-8", "surrogateescape")
