"""A thin wrapper over the git command line, with the repository pinned once found.

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

import functools
import os
import re
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

from looprun.data.value import valueclass
from looprun.errors import LooprunError, one_line
from looprun.system.proc import scrubbed_env

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
# The engine's own git calls run no hooks of the user's repository (a hook would run
# repository code on every checkpoint, with the engine's environment) and never page;
# what a diff shows (its paths, their prefixes and order) is fixed here, not by a config
# file a command could have written.
GIT_OPTIONS = (
    "-c", "core.quotepath=off",
    "-c", "core.autocrlf=false",
    "-c", f"core.hooksPath={os.devnull}",
    "-c", "core.fsmonitor=false",
    "-c", f"core.attributesFile={os.devnull}",
    "-c", "diff.external=",
    "-c", "diff.noprefix=false",
    "-c", "diff.mnemonicPrefix=false",
    "-c", "diff.relative=false",
    "-c", f"diff.orderFile={os.devnull}",
    "-c", "commit.gpgSign=false",
)  # fmt: skip
# Configured programs that git would run on content: each one found is set to nothing.
_DRIVER_KEYS = re.compile(
    r"^(filter|merge|diff)\.(.+)\.(clean|smudge|process|driver|textconv|command)$", re.I
)
# the repository's config as `git config --list` gives it, per repository, with the
# stamp of the files it came from
_ConfigEntries = tuple[tuple[str, str | None], ...]
_CONFIG_CACHE: dict[tuple[str, ...], tuple[tuple[object, ...], _ConfigEntries]] = {}


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


@valueclass
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
                # no system-wide config, and objects are what their ids say: neither a
                # replace ref nor a graft changes a tree, a blob or a history it reads
                "GIT_CONFIG_NOSYSTEM": "1",
                "GIT_NO_REPLACE_OBJECTS": "1",
            }
        )
        for i, value in enumerate(_system_safe_directories()):
            env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = "safe.directory", value
            env["GIT_CONFIG_COUNT"] = str(i + 1)
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
        code, out, err = self._raw(*self.no_drivers(), *args, env=env, input=input)
        # a path that is not valid UTF-8 keeps its bytes (as Python's file names do)
        return code, out.decode("utf-8", "surrogateescape"), err

    def run_bytes(
        self, *args: str, env: Mapping[str, str] | None = None, input: bytes | None = None
    ) -> bytes:
        """Like :meth:`run`, stdout as bytes (paths that are not valid UTF-8 survive)."""
        code, out, err = self._raw(*self.no_drivers(), *args, env=env, input=input)
        if code != 0:
            raise GitError(f"git {' '.join(args)} failed in {self.workdir}: {err.strip()}")
        return out

    def _raw(
        self, *args: str, env: Mapping[str, str] | None = None, input: bytes | None = None
    ) -> tuple[int, bytes, str]:
        proc = subprocess.run(
            ["git", *GIT_OPTIONS, *args],
            cwd=self.workdir,
            env=self._env(env),
            input=input,
            capture_output=True,
            check=False,
        )
        return proc.returncode, proc.stdout, proc.stderr.decode("utf-8", "replace")

    def config(self) -> _ConfigEntries:
        """Every config entry git sees here (all scopes, includes followed), in git's
        order, as (key, value) with section and key names lower-cased and None for a key
        with no value: one ``git config --list`` answers each lookup a run makes (the
        drivers to switch off, the snapshot's repository format, the excludes file).
        Cached until a config file, or the environment naming them, changes; empty when
        git cannot read the config."""
        key = (str(self.workdir), str(self.git_dir or ""))
        stamp = _config_stamp(self.workdir, self.git_dir)
        cached = _CONFIG_CACHE.get(key)
        if cached is None or cached[0] != stamp:
            code, raw, _ = self._raw("config", "-z", "--includes", "--list")
            entries: list[tuple[str, str | None]] = []
            if code == 0:
                for record in raw.decode("utf-8", "surrogateescape").split("\0"):
                    if record:
                        name, sep, value = record.partition("\n")
                        entries.append((name, value if sep else None))
            cached = (stamp, tuple(entries))
            _CONFIG_CACHE[key] = cached
        return cached[1]

    def config_value(self, name: str) -> str | None:
        """The last value of a key (as ``git config NAME``); None if unset or set with
        no value."""
        found = None
        wanted = name.lower()
        for key, value in self.config():
            if key.lower() == wanted:
                found = value
        return found

    def no_drivers(self) -> list[str]:
        """``-c`` options switching off every filter, merge and diff driver configured
        (in any scope, includes followed): the repository's ``.gitattributes`` may name
        one, and it would run a program on every snapshot."""
        names: list[str] = []
        seen: set[str] = set()
        for key, _ in self.config():
            m = _DRIVER_KEYS.match(key)
            if m and key not in seen:
                seen.add(key)
                names += ["-c", f"{m.group(1)}.{m.group(2)}.{m.group(3)}="]
                if m.group(1).lower() == "filter":
                    names += ["-c", f"filter.{m.group(2)}.required=false"]
        return names

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
        git_dir, common = out.splitlines()
        return self._pinned_at(git_dir, common)

    def located(self) -> tuple[str, Git | None]:
        """The top of the work tree this directory is in ('' when it is in none) and, for
        a repository found by discovery, the repository pinned (see :meth:`pinned`): one
        git process for both."""
        code, out, _ = self.run_status(
            "rev-parse", "--show-toplevel", "--path-format=absolute", "--git-dir",
            "--git-common-dir",
        )  # fmt: skip
        lines = out.splitlines()
        if code != 0 or len(lines) != 3:
            return "", None
        if self.git_dir is not None:
            return lines[0], self
        return lines[0], self._pinned_at(lines[1], lines[2])

    def _pinned_at(self, git_dir: str, common: str) -> Git:
        pinned = Git(self.workdir, Path(git_dir), Path(common) if common != git_dir else None)
        # the same config files either way: what no_drivers found holds for both
        mine = _CONFIG_CACHE.get((str(self.workdir), ""))
        if mine is not None and mine[0] == _config_stamp(pinned.workdir, pinned.git_dir):
            _CONFIG_CACHE.setdefault((str(pinned.workdir), str(pinned.git_dir)), mine)
        return pinned

    def git_dirs(self) -> tuple[Path, Path]:
        """The repository's own git directory and its common one (another only for a
        linked worktree): worked out for a pinned repository, else asked of git."""
        if self.git_dir is not None:
            common = self.common_dir or _common_dir(self.git_dir) or self.git_dir
            return Path(self.git_dir), Path(common)
        out = self.run("rev-parse", "--path-format=absolute", "--git-dir", "--git-common-dir")
        own, common = out.splitlines()
        return Path(own), Path(common)

    def info_path(self, name: str) -> Path:
        """``info/<name>`` of the repository (``info/exclude``): in its common directory."""
        return self.git_dirs()[1] / "info" / name

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

    def hold_index_lock(self, index_file: Path) -> subprocess.Popen[bytes]:
        """Test-only (a crash point): a real ``git add`` that holds ``index_file``'s lock
        while it waits for pathspecs on stdin, returned once the lock exists."""
        proc = subprocess.Popen(
            ["git", *GIT_OPTIONS, "add", "--pathspec-from-file=-"],
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

    def objects(self, ids: Sequence[str]) -> list[tuple[str, bytes]]:
        """Each object's (type, bytes), in the order asked, read in one ``cat-file --batch``;
        a missing object is a :class:`GitError` naming it."""
        found = self.objects_or_none(ids)
        for oid, got in zip(ids, found, strict=True):
            if got is None:
                raise GitError(f"object {oid} is missing from the repository in {self.workdir}")
        return [got for got in found if got is not None]

    def objects_or_none(self, ids: Sequence[str]) -> list[tuple[str, bytes] | None]:
        """Like :meth:`objects`, None for each one git does not have. An id may be
        ``TREE:PATH``, but not one whose path holds a newline (a batch is one per line)."""
        if not ids:
            return []
        if any("\n" in i for i in ids):
            raise ValueError("an object name with a newline cannot be read in a batch")
        names = "".join(f"{i}\n" for i in ids).encode("utf-8", "surrogateescape")
        out = self.run_bytes("cat-file", "--batch", input=names)
        found: list[tuple[str, bytes] | None] = []
        pos = 0
        for _ in ids:
            end = out.index(b"\n", pos)
            head = out[pos:end].split(b" ")
            pos = end + 1
            if len(head) != 3 or not head[2].isdigit():
                found.append(None)  # "<name> missing" or "<name> ambiguous"
                continue
            size = int(head[2])
            found.append((head[1].decode("ascii", "replace"), out[pos : pos + size]))
            pos += size + 1
        return found

    def diff(self, base: str, target: str, *args: str) -> str:
        """``git diff`` between two tree-ish objects (no rename detection: stable output).
        Every file is diffed as text: a ``binary`` or ``-diff`` attribute hides nothing."""
        return self.run(
            "diff", "--no-color", "--no-renames", "--no-ext-diff", "--no-textconv", "--text",
            *args, base, target,
        )  # fmt: skip


@functools.cache
def _system_safe_directories() -> tuple[str, ...]:
    """The ``safe.directory`` entries of the system config, which the engine's git does
    not read otherwise: a host that trusts repositories owned by another user (a CI
    container) says so there. Given on the command line's scope, where git honours them;
    asked of git only when the file mentions the key."""
    path = os.environ.get("GIT_CONFIG_SYSTEM") or "/etc/gitconfig"
    try:
        with open(path, "rb") as fh:
            if b"safe" not in fh.read().lower():
                return ()
    except OSError:
        return ()
    env = {k: v for k, v in scrubbed_env().items() if not k.startswith("GIT_")}
    done = subprocess.run(
        ["git", "config", "--file", path, "--get-all", "safe.directory"],
        env={**env, "LC_ALL": "C"},
        capture_output=True,
        check=False,
    )
    text = done.stdout.decode("utf-8", "surrogateescape")
    return tuple(line for line in text.splitlines() if line) if done.returncode == 0 else ()


_CONFIG_ENV = ("HOME", "XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM",
               "GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_COUNT", "GIT_CONFIG_PARAMETERS")  # fmt: skip


def _config_stamp(workdir: Path, git_dir: Path | None) -> tuple[object, ...]:
    """When the config files git reads here last changed, and the environment that
    names them (cheap: a few ``stat`` calls). A file an include names is not watched."""
    stamp: list[object] = [os.environ.get(name) for name in _CONFIG_ENV]
    base = Path(git_dir) if git_dir is not None else Path(workdir) / ".git"
    home = os.path.expanduser("~")
    xdg = os.environ.get("XDG_CONFIG_HOME") or os.path.join(home, ".config")
    candidates = [base / "config", base / "config.worktree", base / "commondir"]
    candidates += [Path(home, ".gitconfig"), Path(xdg, "git", "config"), Path("/etc/gitconfig")]
    named = (os.environ.get(v) for v in ("GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM"))
    candidates += [Path(v) for v in named if v]
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


def _common_dir(git_dir: Path) -> Path | None:
    """The common directory a linked worktree's git directory names, if it names one."""
    try:
        named = (git_dir / "commondir").read_text("utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return git_dir / named if named else None
