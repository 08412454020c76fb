"""The tree a stack's check runs on: built from what the diff says, never from the disk.

A check that runs in the working tree trusts everything there: an ignored source file the
package imports, bytecode or build output planted next to the code, a test configuration
the model edited, package metadata that loads a plugin. Here the check gets a directory of
its own whose content comes only from git objects: the snapshot of the working tree the
run's diff is made from (judged by the base's ignore rules), with the stack's pinned
configuration files as they were at the run's base and its untrusted globs left out. So
every file the check can import is a file the diff shows and the policy judged.

The directory is kept between checks and brought back in line each time: a file is
rewritten when its blob changed or when anything touched it since it was written (its
inode or ctime moved; a command cannot set ctime back), and anything else found in it
(a build's output, a file a test planted) is removed. The stack's ``shared`` dependency
directories (node_modules) are links to the working tree's, fingerprinted when the run
starts; a change to them is reported as tampering by the caller.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import stat
from collections import ChainMap
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from looprun.checks import stacks
from looprun.checks.seeded_cache import SOURCE_DATE, SeededCache, copy_ahead, seed_home
from looprun.checks.stacks.base import Stack
from looprun.data.globs import matcher
from looprun.data.value import valueclass
from looprun.system.cache_home import engine_cache, workdir_key
from looprun.system.proc import spawned
from looprun.workspace.git import EMPTY_TREE, Git, GitError
from looprun.workspace.ignore import base_ignore_rules

_FILE_MODES = {"100644": 0o644, "100755": 0o755}


class TreeError(Exception):
    """The check's tree could not be built (the check must not run elsewhere)."""


@valueclass
class Entry:
    mode: str  # git's: 100644, 100755, 120000
    blob: str


@dataclass
class _Written:
    """What sync wrote at a path, and how it looked right after."""

    entry: Entry
    ino: int
    ctime_ns: int


@dataclass
class CheckTree:
    """One run's check tree for one stack, kept in line with the diff across checks."""

    root: Path
    stack: Stack
    written: dict[str, _Written] = field(default_factory=dict)
    shared_prints: dict[str, tuple[tuple[str, int, int], ...]] = field(default_factory=dict)
    # the files the last (base, target) pair of tree ids wants
    wanted: tuple[tuple[str, str], dict[str, Entry]] | None = None
    at_base: tuple[str, dict[str, Entry]] | None = None  # the base's files, listed once

    def sync(
        self, git: Git, base: str, target: str, dated: Mapping[str, str] | None = None
    ) -> None:
        """Make ``root`` hold ``target``'s files (a tree id: the working tree's snapshot)
        with the pinned files of ``base``, and nothing else. A file first written here with
        the path and blob ``dated`` names (what a seeded build was made from) is dated
        ``SOURCE_DATE``, so the seed's outputs built from it count as fresh."""
        if self.wanted is None or self.wanted[0] != (base, target):
            # tree ids name their content: the same pair wants the same files, so the
            # next check on an unchanged diff lists no tree again
            if self.at_base is None or self.at_base[0] != base:
                self.at_base = (base, _ls_tree(git, base) if self.stack.pinned else {})
            same = target == base and bool(self.stack.pinned)  # the base's listing serves
            files = self.at_base[1] if same else _ls_tree(git, target)
            found = _wanted(files, self.at_base[1], self.stack)
            self.wanted = ((base, target), found)
        wanted = self.wanted[1]
        self.root.mkdir(parents=True, exist_ok=True)
        present = set(_walk(self.root, skip=set(self.stack.shared)))
        for path in sorted(present - set(wanted)):
            _remove(self.root / path)
            self.written.pop(path, None)
        missing: list[tuple[str, Entry]] = []
        old: set[str] = set()
        for path, entry in wanted.items():
            done = self.written.get(path)
            if done is None and dated and dated.get(path) == entry.blob:
                old.add(path)
            if done is None or done.entry != entry or not _unchanged(self.root / path, done):
                missing.append((path, entry))
        _write(git, self.root, missing, self.written, old)
        _prune_empty_dirs(self.root, skip=set(self.stack.shared))

    def link_shared(self, workdir: Path) -> None:
        """Link the stack's dependency directories from the working tree (read-only use)."""
        for name in self.stack.shared:
            source = workdir / name
            link = self.root / name
            if not source.is_dir() or source.is_symlink():
                _remove(link)
                continue
            if link.is_symlink() and os.readlink(link) == str(source):
                continue
            _remove(link)
            link.symlink_to(source, target_is_directory=True)

    def shared_changes(self, workdir: Path) -> list[str]:
        """Shared dependency directories that changed since the first call (which takes
        their fingerprint): installed packages the check trusts must not move mid-run."""
        changed = []
        for name in self.stack.shared:
            now = _fingerprint(workdir / name)
            before = self.shared_prints.setdefault(name, now)
            if now != before:
                changed.append(name)
        return changed


def _wanted(
    files: Mapping[str, Entry], at_base: Mapping[str, Entry], stack: Stack
) -> dict[str, Entry]:
    """Path -> entry: the target tree's ``files``, the pinned ones from the base's files
    (``at_base``), no untrusted."""
    is_pinned, is_untrusted = matcher(stack.pinned), matcher(stack.untrusted)
    shared = set(stack.shared)
    out: dict[str, Entry] = {}
    for path, entry in files.items():
        if is_pinned(path):
            continue
        if is_untrusted(path) or path.split("/", 1)[0] in shared:
            continue
        out[path] = entry
    for path, entry in at_base.items():
        if is_pinned(path) and not is_untrusted(path):
            out[path] = entry
    return out


def _ls_tree(git: Git, tree: str) -> dict[str, Entry]:
    if tree == EMPTY_TREE:
        return {}
    try:
        raw = git.run_bytes("ls-tree", "-r", "-z", "--full-tree", tree)
    except GitError as exc:
        raise TreeError(f"cannot list the tree {tree[:12]}: {exc}") from None
    out: dict[str, Entry] = {}
    for record in raw.split(b"\0"):
        if not record:
            continue
        meta, _, name = record.partition(b"\t")
        mode, kind, blob = meta.decode().split(" ")
        if kind != "blob":  # a submodule (commit) is not content the check can trust
            continue
        out[name.decode("utf-8", "surrogateescape")] = Entry(mode, blob)
    return out


def _write(
    git: Git, root: Path, entries: list[tuple[str, Entry]], written: dict, old: set[str]
) -> None:
    """Write each entry's blob at its path (read in one ``cat-file --batch``), never
    through a link: whatever is at the path or on the way to it is removed first. The
    paths in ``old`` are dated ``SOURCE_DATE``."""
    if not entries:
        return
    blobs = _blobs(git, sorted({e.blob for _, e in entries}))
    for path, entry in entries:
        dest = root / path
        _clear_way(root, path)
        _remove(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        data = blobs[entry.blob]
        if entry.mode == "120000":
            os.symlink(os.fsdecode(data), dest)
            if path in old:
                os.utime(dest, (SOURCE_DATE, SOURCE_DATE), follow_symlinks=False)
            st = os.lstat(dest)
        else:
            mode = _FILE_MODES.get(entry.mode, 0o644)
            fd = os.open(dest, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                if path in old:
                    os.utime(fd, (SOURCE_DATE, SOURCE_DATE))
                st = os.fstat(fd)  # after the dating: it moves the ctime sync compares
            finally:
                os.close(fd)
        written[path] = _Written(entry, st.st_ino, st.st_ctime_ns)


def _blobs(git: Git, ids: list[str]) -> dict[str, bytes]:
    """The blobs' bytes, read in one ``cat-file --batch`` with the run's git options."""
    try:
        return {oid: body for oid, (_, body) in zip(ids, git.objects(ids), strict=True)}
    except GitError as exc:
        raise TreeError(f"cannot read the tree's files: {exc}") from None


def _unchanged(path: Path, done: _Written) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return st.st_ino == done.ino and st.st_ctime_ns == done.ctime_ns


def _walk(root: Path, skip: set[str]) -> Iterator[str]:
    """Every non-directory entry below ``root`` (links not followed), relative, '/'."""
    for here, dirs, files in os.walk(root, followlinks=False):
        rel = os.path.relpath(here, root)
        prefix = "" if rel == "." else rel.replace(os.sep, "/") + "/"
        if not prefix:
            dirs[:] = [d for d in dirs if d not in skip]
            files = [f for f in files if f not in skip]
        for d in list(dirs):
            if os.path.islink(os.path.join(here, d)):
                dirs.remove(d)
                yield prefix + d
        for f in files:
            yield prefix + f


def _clear_way(root: Path, path: str) -> None:
    """A file or link where a parent directory of ``path`` belongs is removed."""
    parts = path.split("/")[:-1]
    here = root
    for part in parts:
        here = here / part
        if here.is_symlink() or (here.exists() and not here.is_dir()):
            _remove(here)


def _remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        st = os.lstat(path)
        if stat.S_ISDIR(st.st_mode):
            shutil.rmtree(path)
        else:
            os.unlink(path)


def _prune_empty_dirs(root: Path, skip: set[str]) -> None:
    for here, dirs, files in os.walk(root, topdown=False):
        if Path(here) == root:
            continue
        rel = os.path.relpath(here, root).split(os.sep)[0]
        if rel in skip:
            continue
        if not dirs and not files:
            with contextlib.suppress(OSError):
                os.rmdir(here)


def _fingerprint(directory: Path) -> tuple[tuple[str, int, int], ...]:
    """(path, size, mtime) of every file below ``directory`` (empty when absent)."""
    if not directory.is_dir() or directory.is_symlink():
        return ()
    out = []
    for here, _dirs, files in os.walk(directory):
        for name in files:
            with contextlib.suppress(OSError):
                st = os.lstat(os.path.join(here, name))
                out.append((os.path.join(here, name), st.st_size, st.st_mtime_ns))
    return tuple(sorted(out))


def _stack_env(stack: Stack, cache: Path) -> dict[str, str]:
    """A stack's fixed variables and its tools' caches, made under ``cache``."""
    env = dict(stack.env)
    for name, sub in stack.caches.items():
        path = cache / sub
        path.mkdir(parents=True, exist_ok=True)
        env[name] = str(path)
    return env


def check_env(stack: Stack, cache: Path, root: Path) -> Mapping[str, str]:
    """The environment a stack's check adds: its variables and caches under the run's
    cache directory, and git kept from finding a repository above the tree."""
    return {**_stack_env(stack, cache), "GIT_CEILING_DIRECTORIES": str(root.parent)}


def tool_env(names: Iterable[str], cache: Path) -> dict[str, str]:
    """The stacks' fixed variables and caches for the commands the model runs in the
    working tree (``go test`` there needs a writable build cache in the sandbox too): a
    cache of their own, never the checks', so nothing they build is what a check trusts."""
    env: dict[str, str] = {}
    for name in names:
        env.update(_stack_env(stacks.get(name), cache))
    return env


def seeds_ahead(name: str | None, workdir: Path, env: Mapping[str, str] | None = None) -> None:
    """Start copying the seeds stack ``name``'s checks start from in ``workdir`` (see
    ``copy_ahead``), into the directory that holds every run's checks."""
    if name is None or name not in stacks.names():
        return
    stack = stacks.get(name)
    scratch = engine_cache(env) / "checks"
    for sub in stack.seeded:
        seed = seed_home(workdir, env) / stack.name / sub
        copy_ahead(seed, stack.fresh_by == "dates", scratch)


def checks_home(run_id: str, env: Mapping[str, str] | None = None) -> Path:
    """Where a run keeps its check trees and its tools' caches: outside the working tree,
    so no tool the model runs there walks into a copy of the repository.
    ``$LOOPRUN_CACHE_DIR/checks/RUN`` if set, else ``$XDG_CACHE_HOME/looprun/checks/RUN``."""
    return engine_cache(env) / "checks" / run_id


def trees_home(workdir: Path, env: Mapping[str, str] | None = None) -> Path:
    """Where one working tree's check trees are kept from run to run:
    ``$LOOPRUN_CACHE_DIR/trees/KEY`` (else under the user's cache home), KEY naming the
    working tree's real path, as its seed's does."""
    return engine_cache(env) / "trees" / workdir_key(workdir)


@dataclass
class CheckTrees:
    """One run's check trees, a stack each, and their tools' caches, under ``home``.

    With ``stable`` (see :func:`trees_home`), a stack's tree is ``stable/NAME`` in every
    run of the same working tree, so the paths a check builds from are the same from one
    run to the next: Go's build cache keys a package's builds by its directory, and a
    seed of builds made elsewhere would be built again (and saved again) in every run.
    What an earlier run left there counts for nothing: the first sync of a run rewrites
    every file and removes everything else, as a sync does after any command. A run
    holds ``stable`` under a lock; when another holds it, its trees are its own under
    ``home``."""

    home: Path
    trees: dict[str, CheckTree] = field(default_factory=dict)
    # where this repository's seeded caches are kept (None: every run's caches start cold)
    seed: Path | None = None
    seeded: dict[str, list[SeededCache]] = field(default_factory=dict)
    # how many commands had started when the last check ended (None: none ended yet)
    quiet_at: int | None = None
    stable: Path | None = None
    _lock: int | None = None  # the descriptor holding ``stable``'s lock

    def tree_root(self, name: str) -> Path:
        """Where stack ``name``'s tree is: under ``stable`` while this run holds it."""
        if self.stable is not None and self._lock is None:
            self._lock = self._hold(self.stable)
            if self._lock is None:
                self.stable = None
        if self.stable is None:
            return self.home / "tree" / name
        root = self.stable / name
        with contextlib.suppress(FileNotFoundError):
            if not stat.S_ISDIR(os.lstat(root).st_mode):  # never written through a link
                _remove(root)
        root.mkdir(mode=0o700, exist_ok=True)
        return root

    @staticmethod
    def _hold(stable: Path) -> int | None:
        """A descriptor holding ``stable``'s lock (None: another run holds it)."""
        try:
            stable.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd = os.open(stable / ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return None
        return fd

    def writable(self, names: Iterable[str]) -> tuple[Path, ...]:
        """The directories the checks of stacks ``names`` write in: the run's ``home``
        and each stack's tree (made now: a sandbox binds only what exists)."""
        roots = {self.tree_root(n) for n in names}
        return (self.home, *sorted(r for r in roots if not r.is_relative_to(self.home)))

    def close(self) -> None:
        """Let another run have ``stable``."""
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None

    def prepare(
        self,
        name: str,
        *,
        workdir: Path,
        git_dir: Path | None,
        base: str | None,
        snapshot: Callable[[str], str | None] | None = None,
    ) -> tuple[Path, Mapping[str, str], str]:
        """Bring stack ``name``'s tree in line with the diff now; return its root, the
        environment its check adds and why the check must not be trusted ('' if none)."""
        try:
            stack = stacks.get(name)
        except KeyError:
            raise TreeError(
                f"unknown stack {name!r} (stacks: {', '.join(stacks.names())})"
            ) from None
        git = Git(workdir, git_dir)
        try:
            since = base or git.head() or EMPTY_TREE
            target = snapshot(since) if snapshot is not None else None
            if target is None:
                target = git.snapshot(rules=base_ignore_rules(git, since))
        except GitError as exc:
            raise TreeError(str(exc)) from None
        tree = self.trees.get(name)
        if tree is None:
            tree = self.trees[name] = CheckTree(self.tree_root(name), stack)
        caches = self.warm(stack, target)
        tree.sync(git, since, target, ChainMap(*(c.sources for c in caches)))
        owed = [c for c in caches if c.wants_tree]
        if owed and tree.wanted is not None:
            files = {path: entry.blob for path, entry in tree.wanted[1].items()}
            for cache in owed:
                cache.tree_written(files)
        tree.link_shared(workdir)
        changed = tree.shared_changes(workdir)
        tampered = (
            f"{', '.join(changed)} changed during the run: the installed dependencies a "
            "check trusts may not move while it works"
            if changed
            else ""
        )
        return tree.root, check_env(stack, self.home / "cache", tree.root), tampered

    def warm(self, stack: Stack, target: str) -> list[SeededCache]:
        """Before one of ``stack``'s checks on the tree ``target``: its seeded caches
        copied in or saved; returns them."""
        if self.seed is None or not stack.seeded:
            return []
        quiet = self.quiet_at == spawned()  # no command but a check since the last one
        caches = self.seeded.get(stack.name)
        if caches is None:
            dated = stack.fresh_by == "dates"
            caches = self.seeded[stack.name] = [
                SeededCache(
                    self.home / "cache" / stack.caches[n],
                    self.seed / stack.name / n,
                    dated=dated,
                )
                for n in stack.seeded
            ]
        for cache in caches:
            cache.before_check(target, quiet)
        return caches

    def end_baseline(self, name: str) -> None:
        """Before a check of stack ``name`` that must not build into the seed (one that
        copies held-out tests in): the baseline's cache is saved now if ever."""
        for cache in self.seeded.get(name, ()):
            cache.end_baseline()

    def checked(self, name: str) -> None:
        """After one of stack ``name``'s checks ended (its command is the last one started)."""
        for cache in self.seeded.get(name, ()):
            cache.after_check()
        self.quiet_at = spawned()
