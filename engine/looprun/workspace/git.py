"""A thin wrapper over the git command line, shared by the workspace and the diff parser.

Snapshots use a private index file, so the user's index, branch and stash are never
touched. A work tree that is not a git repository can be given a private ``git_dir``.

Files the model writes must not change what the engine sees. So no filter, merge or
diff driver configured anywhere runs on the engine's git calls (each is switched off by
name, and diffs are ``--text --no-textconv --no-ext-diff``), attribute files outside the
tree are ignored, and a snapshot made against a base judges ignored files by the ignore
rules the base had (:func:`base_ignore_rules`), never by a ``.gitignore`` or
``info/exclude`` written later.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import secrets
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from looprun.errors import LooprunError, one_line
from looprun.system.proc import scrubbed_env
from looprun.workspace.objects import loose_object_ok

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
# The engine's own git calls run no hooks of the user's repository (a hook would run
# repository code on every checkpoint, with the engine's environment) and never page.
_GIT_OPTIONS = (
    "-c", "core.quotepath=off",
    "-c", "core.autocrlf=false",
    "-c", f"core.hooksPath={os.devnull}",
    "-c", "core.fsmonitor=false",
    "-c", f"core.attributesFile={os.devnull}",
    "-c", "diff.external=",
    "-c", "commit.gpgSign=false",
)  # fmt: skip
# Configured programs that git would run on content: each one found is set to nothing.
_DRIVER_KEYS = re.compile(
    r"^(filter|merge|diff)\.(.+)\.(clean|smudge|process|driver|textconv|command)$", re.I
)
_DRIVERS_CACHE: dict[tuple[str, ...], tuple[tuple[int, ...], tuple[str, ...]]] = {}


class GitError(LooprunError):
    """A git command failed; carries the command and what git said."""


_UNKNOWN: Any = object()


class SnapshotFacts:
    """What a snapshot needs to know besides the files: HEAD, and whether the state
    directory is ignored. Asked once, then remembered until ``forget``."""

    def __init__(self) -> None:
        self._head: str | None = _UNKNOWN
        self._ignored: dict[str, bool] = {}

    def forget(self) -> None:
        self._head = _UNKNOWN
        self._ignored.clear()

    def head(self, git: Git) -> str | None:
        if self._head is _UNKNOWN:
            self._head = git.head()
        return self._head

    def ignored(self, git: Git, path: str) -> bool:
        if path not in self._ignored:
            code, _, _ = git.run_status("check-ignore", "-q", path.rstrip("/") + "/")
            self._ignored[path] = code == 0
        return self._ignored[path]


@dataclass(frozen=True)
class Git:
    """Runs git for one working tree, optionally against a private repository."""

    workdir: Path
    git_dir: Path | None = None  # a private repository for a work tree that has none
    common_dir: Path | None = None  # a linked worktree's shared git directory, pinned

    @cached_property
    def _base_env(self) -> dict[str, str]:
        """The environment of every git call, scrubbed once per ``Git`` (it is the same
        for every call; scrubbing it each time cost more than some of the calls)."""
        env = {k: v for k, v in scrubbed_env().items() if not k.startswith("GIT_")}
        env.update(
            {
                "GIT_TERMINAL_PROMPT": "0",
                "GIT_AUTHOR_NAME": "looprun",
                "GIT_AUTHOR_EMAIL": "looprun@localhost",
                "GIT_COMMITTER_NAME": "looprun",
                "GIT_COMMITTER_EMAIL": "looprun@localhost",
                "LC_ALL": "C",
            }
        )
        if self.git_dir is not None:
            env["GIT_DIR"] = str(self.git_dir)
            env["GIT_WORK_TREE"] = str(self.workdir)
        if self.common_dir is not None:
            env["GIT_COMMON_DIR"] = str(self.common_dir)
        return env

    def env(self) -> dict[str, str]:
        """The environment git runs with (identity included); a copy."""
        return dict(self._base_env)

    def _env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        return {**self._base_env, **extra} if extra else self._base_env

    def run(
        self,
        *args: str,
        env: Mapping[str, str] | None = None,
        check: bool = True,
        input: bytes | None = None,
    ) -> str:
        """Run git with ``args`` in the work tree; return stdout as text."""
        code, out, err = self.run_status(*args, env=env, input=input)
        if check and code != 0:
            raise GitError(f"git {' '.join(args)} failed in {self.workdir}: {one_line(err)}")
        return out

    def run_status(
        self, *args: str, env: Mapping[str, str] | None = None, input: bytes | None = None
    ) -> tuple[int, str, str]:
        """Run git and return (exit code, stdout, stderr) for commands whose status
        carries meaning (``merge-tree`` exits 1 on conflicts)."""
        code, out, err = self._raw(*self._no_drivers(), *args, env=env, input=input)
        # a path that is not valid UTF-8 keeps its bytes (as Python's file names do)
        return code, out.decode("utf-8", "surrogateescape"), err

    def run_bytes(
        self, *args: str, env: Mapping[str, str] | None = None, input: bytes | None = None
    ) -> bytes:
        """Like :meth:`run`, stdout as bytes (paths that are not valid UTF-8 survive)."""
        code, out, err = self._raw(*self._no_drivers(), *args, env=env, input=input)
        if code != 0:
            raise GitError(f"git {' '.join(args)} failed in {self.workdir}: {err.strip()}")
        return out

    def _raw(
        self, *args: str, env: Mapping[str, str] | None = None, input: bytes | None = None
    ) -> tuple[int, bytes, str]:
        proc = subprocess.run(
            ["git", *_GIT_OPTIONS, *args],
            cwd=self.workdir,
            env=self._env(env),
            input=input,
            capture_output=True,
            check=False,
        )
        return proc.returncode, proc.stdout, proc.stderr.decode("utf-8", "replace")

    def _no_drivers(self) -> list[str]:
        """``-c`` options switching off every filter, merge and diff driver configured
        (in any scope, includes followed): the repository's ``.gitattributes`` may name
        one, and it would run a program on every snapshot. Cached until a config file of
        the repository changes."""
        key = (str(self.workdir), str(self.git_dir or ""))
        stamp = _config_stamp(self.workdir, self.git_dir)
        cached = _DRIVERS_CACHE.get(key)
        if cached is None or cached[0] != stamp:
            _, raw, _ = self._raw(
                "config", "--includes", "--name-only", "--get-regexp", _DRIVER_KEYS.pattern
            )
            names = []
            for line in raw.decode("utf-8", "replace").splitlines():
                m = _DRIVER_KEYS.match(line.strip())
                if m:
                    names += ["-c", f"{m.group(1)}.{m.group(2)}.{m.group(3)}="]
                    if m.group(1).lower() == "filter":
                        names += ["-c", f"filter.{m.group(2)}.required=false"]
            cached = (stamp, tuple(names))
            _DRIVERS_CACHE[key] = cached
        return list(cached[1])

    def pinned(self) -> Git:
        """This repository with its git directory fixed as it is now, found once.

        Every later call then runs with ``GIT_DIR`` and ``GIT_WORK_TREE`` set, so a
        ``.git`` file rewritten to point elsewhere, or a ``core.worktree`` planted in the
        repository's config (``GIT_WORK_TREE`` wins over it), or a linked worktree's
        ``commondir`` file rewritten (``GIT_COMMON_DIR`` is set too), redirects nothing: the
        engine's snapshots and rollback stay on this work tree and this repository.
        """
        if self.git_dir is not None:
            return self
        out = self.run("rev-parse", "--path-format=absolute", "--git-dir", "--git-common-dir")
        git_dir, common = (Path(p) for p in out.splitlines())
        return Git(self.workdir, git_dir, common if common != git_dir else None)

    def check_objects(
        self, ids: Sequence[str], objects: Path | None = None, algorithm: str = "sha1"
    ) -> None:
        """Raise unless each object's content hashes to its id (``algorithm``: the
        repository's object format; ``objects``: its loose objects, SHA-1 only).

        git trusts an object already stored under an id it computes, so one planted
        with other content (with the sandbox off a command can write ``.git``) would be
        what every later diff and rollback reads. Loose objects under ``objects`` are
        read in-process; git is asked only for the others (packed ones).
        """
        rest = []
        for oid in ids:
            ok = loose_object_ok(objects, oid) if objects is not None else None
            if ok is False:
                raise GitError(_planted(oid, self.workdir))
            if ok is None:
                rest.append(oid)
        ids = rest
        if not ids:
            return
        out = self.run_bytes("cat-file", "--batch", input="".join(f"{i}\n" for i in ids).encode())
        pos = 0
        for oid in ids:
            end = out.index(b"\n", pos)
            head = out[pos:end].decode("ascii", "replace").split(" ")
            if len(head) != 3:
                raise GitError(f"object {oid} is missing from the repository in {self.workdir}")
            kind, size = head[1], int(head[2])
            body = out[end + 1 : end + 1 + size]
            pos = end + 1 + size + 1
            if hashlib.new(algorithm, f"{kind} {size}\0".encode() + body).hexdigest() != oid:
                raise GitError(_planted(oid, self.workdir))

    def is_repo(self) -> bool:
        try:
            return self.run("rev-parse", "--is-inside-work-tree").strip() == "true"
        except GitError:
            return False

    def head(self) -> str | None:
        """The commit HEAD points at, or None in a repository with no commits yet."""
        out = self.run("rev-parse", "--verify", "-q", "HEAD^{commit}", check=False).strip()
        return out or None

    def snapshot(
        self,
        index_file: Path | None = None,
        exclude: str = ".looprun",
        *,
        rules: str | None = None,
        facts: SnapshotFacts | None = None,
        also: Sequence[str] = (),
    ) -> str:
        """A tree object of the working tree as it is now (tracked + untracked, not ignored).

        ``exclude`` (the engine's state directory) is never part of it. ``index_file``
        keeps a private index between calls, so git's stat cache spares re-hashing.
        ``rules`` (from :func:`base_ignore_rules`) decides what is ignored instead of the
        ignore files in the tree now, so a ``.gitignore`` written since hides nothing.
        ``facts`` remembers HEAD and whether ``exclude`` is ignored between calls (the
        caller forgets them when something may have changed them).
        """
        facts = facts if facts is not None else SnapshotFacts()
        if index_file is not None:
            return self._snapshot_with(
                {"GIT_INDEX_FILE": str(index_file)}, exclude, facts, also, rules
            )
        with tempfile.TemporaryDirectory(prefix="looprun-index-") as tmp:
            env = {"GIT_INDEX_FILE": os.path.join(tmp, "index")}
            return self._snapshot_with(env, exclude, facts, also, rules)

    def _snapshot_with(
        self,
        env: Mapping[str, str],
        exclude: str,
        facts: SnapshotFacts,
        also: Sequence[str] = (),
        rules: str | None = None,
    ) -> str:
        # Start a new index from HEAD, so tracked files matching an ignore rule count too.
        if not os.path.exists(env["GIT_INDEX_FILE"]) and facts.head(self):
            self.run("read-tree", "HEAD", env=env)
        spec = ["."]
        # Other excluded paths (observers' reports): out of the snapshot whatever they are;
        # one tracked at HEAD keeps HEAD's content, so it never shows as a change.
        others = [f":(exclude,literal){p}" for p in also]
        if rules is None:
            # git refuses an exclude pathspec naming an ignored path; ignored is excluded.
            if exclude and not exclude.startswith("..") and not facts.ignored(self, exclude):
                spec.append(f":(exclude){exclude}")
            self.run("add", "-A", "--", *spec, *others, env=env)
            return self.run("write-tree", env=env).strip()
        if exclude and not exclude.startswith(".."):
            spec.append(f":(exclude){exclude.rstrip('/')}")
        spec += others
        # Tracked (and earlier snapshotted) paths, then untracked files not ignored by the
        # base's rules, added with --force so the ignore files in the tree have no say.
        self.run("add", "-u", "--", *spec, env=env)
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".exclude") as fh:
            fh.write(rules)
            fh.flush()
            out = self.run_bytes(
                "ls-files", "-z", "-o", f"--exclude-from={fh.name}", "--", *spec, env=env
            )
        if out:
            literal = {**env, "GIT_LITERAL_PATHSPECS": "1"}
            self.run(
                "add", "-f", "--pathspec-from-file=-", "--pathspec-file-nul", env=literal, input=out
            )
        return self.run("write-tree", env=env).strip()

    def ignored(self, rules: str, exclude: str = ".looprun") -> set[str]:
        """Untracked paths the rules ignore, a wholly ignored directory as one ``dir/``."""
        spec = ["."] + ([f":(exclude){exclude}"] if not exclude.startswith("..") else [])
        with tempfile.NamedTemporaryFile("w", encoding="utf-8", suffix=".exclude") as fh:
            fh.write(rules)
            fh.flush()
            with tempfile.TemporaryDirectory(prefix="looprun-index-") as tmp:
                env = {"GIT_INDEX_FILE": os.path.join(tmp, "index")}
                if self.head():
                    self.run("read-tree", "HEAD", env=env)
                out = self.run_bytes(
                    "ls-files", "-z", "-o", "-i", "--directory", f"--exclude-from={fh.name}",
                    "--", *spec, env=env,
                )  # fmt: skip
        return {p.decode("utf-8", "surrogateescape") for p in out.split(b"\0") if p}

    def hold_index_lock(self, index_file: Path) -> subprocess.Popen[bytes]:
        """Test-only (a crash point): a real ``git add`` that holds ``index_file``'s lock
        while it waits for pathspecs on stdin, returned once the lock exists."""
        proc = subprocess.Popen(
            ["git", *_GIT_OPTIONS, "add", "--pathspec-from-file=-"],
            cwd=self.workdir,
            env=self._env({"GIT_INDEX_FILE": str(index_file)}),
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        lock = Path(f"{index_file}.lock")
        for _ in range(500):
            if lock.exists() or proc.poll() is not None:
                break
            time.sleep(0.01)
        return proc

    def diff(self, base: str, target: str, *args: str) -> str:
        """``git diff`` between two tree-ish objects (no rename detection: stable output).
        Every file is diffed as text: a ``binary`` or ``-diff`` attribute hides nothing."""
        return self.run(
            "diff", "--no-color", "--no-renames", "--no-ext-diff", "--no-textconv", "--text",
            *args, base, target,
        )  # fmt: skip


class _LongLived:
    """One git process kept running for a stream of requests (started on first use,
    started again after a failure or when the repository's config changed)."""

    def __init__(self, git: Git, *args: str):
        self.git = git
        self.args = args
        self._proc: subprocess.Popen[bytes] | None = None
        self._drivers: list[str] = []

    def _process(self) -> subprocess.Popen[bytes]:
        drivers = self.git._no_drivers()
        proc = self._proc
        if proc is not None and (proc.poll() is not None or drivers != self._drivers):
            self.close()
            proc = None
        if proc is None:
            proc = self._proc = subprocess.Popen(
                ["git", *_GIT_OPTIONS, *drivers, *self.args],
                cwd=self.git.workdir,
                env=self.git._env(),
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


class RefUpdates(_LongLived):
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


class TreeDiffs(_LongLived):
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


def _config_stamp(workdir: Path, git_dir: Path | None) -> tuple[int, ...]:
    """When the repository's config files last changed (cheap: a few ``stat`` calls)."""
    stamp: list[int] = []
    base = Path(git_dir) if git_dir is not None else Path(workdir) / ".git"
    candidates = [base / "config", base / "config.worktree", base / "commondir"]
    common = _common_dir(base)
    if common is not None:  # a linked worktree: the shared config lives there
        candidates.append(common / "config")
    for path in candidates:
        try:
            st = os.stat(path)
        except OSError:
            stamp += [0, 0]
        else:
            stamp += [st.st_mtime_ns, st.st_size]
    return tuple(stamp)


def _planted(oid: str, workdir: Path) -> str:
    return (
        f"object {oid} in the repository of {workdir} does not hold what its id says "
        "(planted by a command?): the diff checks cannot trust it"
    )


def _common_dir(git_dir: Path) -> Path | None:
    """The common directory a linked worktree's git directory names, if it names one."""
    try:
        named = (git_dir / "commondir").read_text("utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return git_dir / named if named else None


def _escape_glob(text: str) -> str:
    return re.sub(r"([*?\[\]\\!#])", r"\\\1", text)


def flatten_ignore(directory: str, text: str) -> list[str]:
    """The lines of ``directory/.gitignore`` rewritten relative to the top of the tree,
    so they can be given to git as one exclude file: a pattern with a slash before its
    end is anchored at ``directory``, one without matches at any depth below it."""
    out: list[str] = []
    prefix = "/" + _escape_glob(directory.strip("/")) + "/" if directory.strip("/") else ""
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if not prefix:
            out.append(line)
            continue
        neg, body = ("!", line[1:]) if line.startswith("!") else ("", line)
        anchored = "/" in body.rstrip().rstrip("/")
        out.append(neg + prefix + (body.lstrip("/") if anchored else "**/" + body))
    return out


def base_ignore_rules(git: Git, tree: str) -> str:
    """The ignore rules a base had, as one exclude file: the user's global excludes file,
    ``info/exclude`` and every ``.gitignore`` in the base tree (deeper ones later, so
    they win as in git). Read once per base; later edits of these files change nothing."""
    key = (str(git.workdir), str(git.git_dir or ""), tree)
    cached = _RULES_CACHE.get(key)
    if cached is None:
        listing = git.run("ls-tree", "-r", "-z", "--full-tree", tree)
        files: list[tuple[str, str]] = []
        for rec in listing.split("\0"):
            meta, _, path = rec.partition("\t")
            if path.rsplit("/", 1)[-1] == ".gitignore" and meta.split(" ")[1:2] == ["blob"]:
                files.append((path, git.run("cat-file", "blob", meta.split(" ")[2])))
        cached = _RULES_CACHE[key] = _combine(git, files)
    return cached


def remember_ignore_rules(git: Git, tree: str, rules: str) -> None:
    """Record the rules read when ``tree`` was taken as a base, so every later snapshot
    against it (the workspace's and the git_diff observer's) uses exactly those."""
    _RULES_CACHE[(str(git.workdir), str(git.git_dir or ""), tree)] = rules


def current_ignore_rules(git: Git, exclude: str) -> str:
    """The same rules read from the working tree as it is now (for the start state, before
    a base exists): the ``.gitignore`` files a snapshot now would hold."""
    out = git.run(
        "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--",
        ":(glob)**/.gitignore", f":(exclude){exclude}",
    )  # fmt: skip
    files: list[tuple[str, str]] = []
    for path in dict.fromkeys(p for p in out.split("\0") if p):
        with contextlib.suppress(OSError):
            files.append((path, (Path(git.workdir) / path).read_text("utf-8", "replace")))
    return _combine(git, files)


# Caches that tools create beside the code with a ``.gitignore`` of their own (``*``):
# always ignored, since a directory's own ``.gitignore`` written during a run counts for
# nothing (it is how a model would hide a file). Python does not import from them.
TOOL_CACHES = (
    ".pytest_cache/", ".ruff_cache/", ".mypy_cache/", ".hypothesis/", "__pycache__/",
)  # fmt: skip


def _combine(git: Git, files: list[tuple[str, str]]) -> str:
    lines: list[str] = list(TOOL_CACHES)
    for source in _global_and_info_excludes(git):
        with contextlib.suppress(OSError):
            lines += Path(source).read_text("utf-8", "replace").splitlines()
    for path, text in sorted(files, key=lambda item: (item[0].count("/"), item[0])):
        lines += flatten_ignore(path.rpartition("/")[0], text)
    return "\n".join(lines) + "\n"


_RULES_CACHE: dict[tuple[str, str, str], str] = {}


def _global_and_info_excludes(git: Git) -> list[str]:
    out = []
    configured = git.run("config", "--path", "core.excludesFile", check=False).strip()
    if configured:
        out.append(configured)
    else:
        xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
        out.append(os.path.join(xdg, "git", "ignore"))
    info = git.run("rev-parse", "--git-path", "info/exclude", check=False).strip()
    if info:
        out.append(info if os.path.isabs(info) else str(Path(git.workdir) / info))
    return out
