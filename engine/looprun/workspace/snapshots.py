"""Snapshots after the engine's own file tools wrote known paths, made in-process.

A full snapshot (``Git.snapshot``) costs four git processes whatever changed.
When only ``write_file``/``edit_file`` wrote since the last snapshot, the new tree is the
last one with those paths' blobs replaced: hashed and stored here, with the trees above
them (``objects.py``). It must be the tree the full snapshot would make, so anything
git would treat specially sends the caller back to the full snapshot (``None``):

- a repository that is not SHA-1, or ignores case;
- a new path that any ignore rule of the base names (or a directory above it): whether
  git would add it is git's to judge;
- an attribute file (``.gitattributes`` above the path, in the work tree or the last
  snapshot, or ``info/attributes``): attributes may convert content on the way in;
- anything but a regular file at the path, a nested repository above it, or a path
  that would turn a file of the snapshot into a directory or back.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterable, Sequence
from pathlib import Path

import pathspec

from looprun.data.value import valueclass
from looprun.system.proc import spawned
from looprun.workspace.git import Git
from looprun.workspace.objects import TreeModel, Unsupported, commit_body, write_object


@valueclass
class _Repo:
    objects: Path
    info_attributes: Path
    filemode: bool
    refs: Path | None  # the common git directory, when refs may be written here


# what the in-process snapshot must know of the repository's format and ref logging
_REPO_KEYS = frozenset(
    ("core.filemode", "core.ignorecase", "core.logallrefupdates", "extensions.refstorage",
     "extensions.objectformat")
)  # fmt: skip


SEALED_REFS = "refs/looprun-sealed/"  # the runs' invocations (looprun.journal.sealed)


class QuickSnapshots:
    """In-process snapshots and commits for one work tree (see the module docstring)."""

    def __init__(self, git: Git):
        self.git = git
        self._repo: _Repo | bool | None = False  # False: not asked yet; None: unsupported
        self._model: TreeModel | None = None
        self._rules: tuple[str, list[object]] | None = None
        # the last tree made here: (tree, the tree it came from, ids stored for it, how
        # many commands had started then)
        self._made: tuple[str, str, frozenset[str], int] | None = None

    def repo(self) -> _Repo | None:
        if self._repo is False:
            self._repo = self._ask_repo()
        return self._repo  # type: ignore[return-value]

    def _ask_repo(self) -> _Repo | None:
        values = {  # a key with no value is true; the last one set wins
            k.lower(): "true" if v is None else v
            for k, v in self.git.config()
            if k.lower() in _REPO_KEYS
        }
        if self.git.git_dir is not None:  # pinned: where git would look, worked out
            common = str(self.git.git_dirs()[1])
            fmt = values.get("extensions.objectformat", "sha1").lower()
            lines = [fmt, f"{common}/objects", f"{common}/info/attributes", common]
        else:
            code, out, _ = self.git.run_status(
                "rev-parse", "--show-object-format", "--git-path", "objects",
                "--git-path", "info/attributes", "--git-common-dir",
            )  # fmt: skip
            lines = out.splitlines() if code == 0 else []
        if len(lines) != 4 or lines[0] != "sha1":
            return None
        if _true(values.get("core.ignorecase", "false")) is not False:
            return None
        filemode = _true(values.get("core.filemode", "true"))
        if filemode is None:
            return None
        objects, attributes, common = (
            Path(p) if os.path.isabs(p) else self.git.workdir / p for p in lines[1:]
        )
        if not objects.is_dir():
            return None
        # Checkpoint refs are written here only as git's files backend writes a new loose
        # ref that nothing logs: otherwise git writes them.
        refs = None
        logged = values.get("core.logallrefupdates", "true").lower() == "always"
        if values.get("extensions.refstorage", "files").lower() == "files" and not logged:
            packed = common / "packed-refs"
            if not (packed.exists() and b" refs/looprun/" in packed.read_bytes()):
                refs = common
        return _Repo(objects, attributes, filemode, refs)

    def set_ref(self, ref: str, commit: str) -> bool:
        """Point the new loose ref ``ref`` (under ``refs/looprun/``) at ``commit`` as git
        does (a ``.lock`` file created exclusively, then renamed); False: let git."""
        repo = self.repo()
        if repo is None or repo.refs is None or not ref.startswith("refs/looprun/"):
            return False
        return self._write_ref(repo.refs, ref, commit)

    def set_blob_ref(self, ref: str, body: bytes) -> bool:
        """Store ``body`` as a blob and point ``ref`` (under ``refs/looprun-sealed/``) at
        it, as ``git hash-object -w`` and ``git update-ref`` would; False: let git."""
        repo = self.repo()
        if repo is None or repo.refs is None or not ref.startswith(SEALED_REFS):
            return False
        packed = repo.refs / "packed-refs"
        try:  # a packed one is git's to keep in step
            if packed.exists() and f" {SEALED_REFS}".encode() in packed.read_bytes():
                return False
        except OSError:
            return False
        return self._write_ref(repo.refs, ref, write_object(repo.objects, "blob", body))

    @staticmethod
    def _write_ref(refs: Path, ref: str, commit: str) -> bool:
        path = refs / ref
        lock = path.with_name(path.name + ".lock")
        try:
            if (refs / "logs" / ref).exists() or path.is_dir():
                return False
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
        except OSError:
            return False  # a file where a directory must be, or a lock held: git says why
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(commit + "\n")
            os.replace(lock, path)
        except BaseException:
            lock.unlink(missing_ok=True)
            raise
        return True

    def forget(self) -> None:
        """The tree may have changed in ways not told: the next update starts afresh."""
        self._model = None

    def update(
        self,
        prev: str,
        paths: Iterable[str],
        *,
        rules: str,
        skip: Sequence[str],
    ) -> str | None:
        """The tree ``prev`` with ``paths`` as they are on disk now, stored; None when a
        full snapshot must decide. ``skip``: paths never part of a snapshot (the state
        directory, observers' reports), or None returned if one is written."""
        repo = self.repo()
        if repo is None or repo.info_attributes.exists():
            return None
        written: set[str] = set()
        try:
            model = self._model_of(prev)
            for path in sorted(paths):
                self._put(repo, model, path, rules, skip, written)
            tree = model.write(repo.objects, written)
        except (Unsupported, OSError, ValueError):
            self._model = None
            return None
        self._made = (tree, prev, frozenset(written), spawned())
        return tree

    def made(self, tree: str) -> tuple[str, frozenset[str], bool] | None:
        """``(prev, ids, untouched)`` when the last :meth:`update` made ``tree`` from
        ``prev`` by storing ``ids`` (each read back or written whole): every object of
        ``tree`` that is not in ``prev`` is among them, as long as ``tree``'s own object
        still holds what its id says. ``untouched``: no command has started since, so none
        can have replaced them; else each must be checked again. None otherwise."""
        if self._made is None or self._made[0] != tree:
            return None
        return self._made[1], self._made[2], self._made[3] == spawned()

    def _model_of(self, tree: str) -> TreeModel:
        if self._model is None or self._model.tree != tree:
            listing = self.git.run_bytes("ls-tree", "-r", "-t", "-z", "--full-tree", tree)
            self._model = TreeModel(tree, listing)
        return self._model

    def _put(
        self,
        repo: _Repo,
        model: TreeModel,
        path: str,
        rules: str,
        skip: Sequence[str],
        written: set[str],
    ) -> None:
        parts = path.split("/")
        if not path or path.startswith("/") or {"", ".", "..", ".git"} & set(parts):
            raise Unsupported(path)
        if any(path == s or path.startswith(s.rstrip("/") + "/") for s in skip):
            raise Unsupported(f"{path} is kept out of snapshots")
        if parts[-1] == ".gitattributes":
            raise Unsupported(path)
        workdir = self.git.workdir
        for depth in range(len(parts)):
            folder = "/".join(parts[:depth])
            above = f"{folder}/.gitattributes" if folder else ".gitattributes"
            if os.path.lexists(workdir / above) or model.entry(above) is not None:
                raise Unsupported(f"attributes apply to {path}")
            if depth and os.path.lexists(workdir / folder / ".git"):
                raise Unsupported(f"{folder} is a repository of its own")
        try:
            st = os.lstat(workdir / path)
        except FileNotFoundError:
            model.remove(path)
            return
        if not stat.S_ISREG(st.st_mode):
            raise Unsupported(f"{path} is not a regular file")
        known = model.entry(path)
        if known is None and self._named_by_rules(rules, parts):
            raise Unsupported(f"an ignore rule names {path}")
        if repo.filemode:
            mode = "100755" if st.st_mode & stat.S_IXUSR else "100644"
        else:
            mode = known[0] if known is not None and known[0] in ("100644", "100755") else "100644"
        with open(workdir / path, "rb") as fh:
            data = fh.read()
        oid = write_object(repo.objects, "blob", data)
        written.add(oid)
        model.set(path, mode, oid)

    def _named_by_rules(self, rules: str, parts: list[str]) -> bool:
        """Whether any rule (ignoring or not) matches the path or a directory above it."""
        if self._rules is None or self._rules[0] != rules:
            spec = pathspec.GitIgnoreSpec.from_lines(rules.splitlines())
            self._rules = (rules, [p for p in spec.patterns if p.include is not None])
        candidates = ["/".join(parts[:i]) + "/" for i in range(1, len(parts))]
        candidates.append("/".join(parts))
        return any(
            p.match_file(c) is not None  # type: ignore[attr-defined]
            for p in self._rules[1]
            for c in candidates
        )

    def commit(self, tree: str, parents: Sequence[str], message: str) -> str | None:
        """A commit as the engine's ``git commit-tree`` makes it; None: let git."""
        repo = self.repo()
        if repo is None:
            return None
        env = self.git.env()
        body = commit_body(
            tree,
            parents,
            env["GIT_AUTHOR_NAME"],
            env["GIT_AUTHOR_EMAIL"],
            message,
            time.time(),
        )
        return write_object(repo.objects, "commit", body)


def _true(value: str) -> bool | None:
    """A git boolean (a key with no value is true); None when it is not one."""
    low = value.strip().lower()
    if low in ("true", "yes", "on", "1"):
        return True
    if low in ("false", "no", "off", "0", ""):
        return False
    return None
