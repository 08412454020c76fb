"""Remote references resolved through the lock.

Two modes. ``locked`` (runs, ``validate``, ``explain``): a reference is used only as the
lock pins it, read from the cache (fetched only when the pinned commit is missing); a tag
that moved, a file whose digest differs, a reference or file the lock lacks, are errors.
``locking`` (``looprun lock`` and ``update``): references the lock lacks, and those named
in ``refresh``, are fetched and pinned; the rest are checked as in ``locked``.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from looprun.template import deps
from looprun.template.sharing import lockfile
from looprun.template.sharing.gitcache import Cache, GitError
from looprun.template.sharing.refs import (
    Reference,
    RefError,
    RemoteFile,
    parse,
    remember,
    shown_url,
)


@dataclass
class Part:
    """Where remote content came from, for ``validate`` and ``explain``."""

    key: str
    commit: str
    files: list[str] = field(default_factory=list)


@dataclass
class Use:
    """One reference as written in a local file (``update`` rewrites these)."""

    file: str
    line: int
    col: int
    reference: Reference


class Resolver:
    def __init__(
        self,
        root: Path,
        *,
        locking: bool = False,
        refresh: frozenset[str] = frozenset(),
        cache: Cache | None = None,
    ):
        self.root = root
        self.lock = lockfile.read(root)
        self.locking = locking
        self.refresh = refresh
        self.cache = cache or Cache()
        self.parts: dict[str, Part] = {}
        self.uses: list[Use] = []
        self.used: dict[str, lockfile.Entry] = {}  # what a new lock will hold

    def pin(self, text: str, *, local: tuple[str, int, int] | None = None) -> RemoteFile:
        """The file a ``git+`` reference names, at the commit the lock pins."""
        deps.volatile()  # the verdict depends on the cache, not only on files
        try:
            reference = parse(text)
        except ValueError as exc:
            raise RefError(str(exc)) from None
        if local is not None:
            self.uses.append(Use(*local, reference))
        key = reference.key
        entry = self.used.get(key)
        if entry is None:
            entry = self._entry(reference)
            self.used[key] = entry
        self.parts.setdefault(key, Part(key, entry.commit))
        return RemoteFile(reference, entry.commit, self)

    def _entry(self, r: Reference) -> lockfile.Entry:
        locked = self.lock.references.get(r.key)
        if self.locking and (locked is None or r.key in self.refresh):
            return self._fetch_new(r)
        if self.locking:  # a lock is made against the repository as it is now
            try:
                self.cache.fetch(r.url)
            except GitError as exc:
                raise RefError(str(exc)) from None
        if locked is None:
            if not self.lock.exists:
                raise RefError(
                    f"'{r.key}' is not pinned: there is no {lockfile.NAME} at {self.root}; "
                    "run `looprun lock` and review what it pins"
                )
            raise RefError(
                f"'{r.key}' is not in {self.lock.path} (the lock is out of date): run "
                "`looprun lock` and review what it pins"
            )
        if not self.cache.has_commit(r.url, locked.commit):
            try:
                self.cache.fetch(r.url)
            except GitError as exc:
                raise RefError(
                    f"{r.key}: locked commit {locked.commit[:12]} is not cached and {exc}"
                ) from None
            if not self.cache.has_commit(r.url, locked.commit):
                raise RefError(f"{r.key}: locked commit {locked.commit} no longer exists upstream")
        if locked.kind in ("tag", "branch"):
            now = self.cache.resolve(r.url, r.ref)
            if now is None:
                raise RefError(
                    f"{r.key}: the {locked.kind} '{r.ref}' no longer exists in {shown_url(r.url)}"
                )
            if locked.kind == "tag" and now[1] != locked.commit:
                raise RefError(
                    f"{r.key}: the tag moved: locked at {locked.commit[:12]}, the repository now "
                    f"has {now[1][:12]}; review the change, then `looprun lock --refresh {r.key}`"
                )
        return lockfile.Entry(locked.kind, locked.commit, {})

    def _fetch_new(self, r: Reference) -> lockfile.Entry:
        try:
            self.cache.fetch(r.url)
        except GitError as exc:
            raise RefError(str(exc)) from None
        found = self.cache.resolve(r.url, r.ref)
        if found is None:
            raise RefError(f"'{r.key}': no tag, branch or commit '{r.ref}' in {shown_url(r.url)}")
        return lockfile.Entry(found[0], found[1], {})

    def kind(self, f: RemoteFile) -> str | None:
        return self.cache.kind_of(f.reference.url, f.commit, f.path)

    def read(self, f: RemoteFile) -> tuple[str, str]:
        """The text of ``f`` and its digest, checked against the lock."""
        key = f.reference.key
        kind = self.kind(f)
        if kind != "blob":
            what = {None: "no such file", "tree": "a directory", "link": "a symbolic link"}
            raise RefError(
                f"{f}: {what.get(kind, kind)} at commit {f.commit[:12]}, not a template file"
            )
        raw = self.cache.read(f.reference.url, f.commit, f.path)
        digest = "sha256:" + hashlib.sha256(raw).hexdigest()
        locked = self.lock.references.get(key)
        fresh = self.locking and (locked is None or key in self.refresh)
        if not fresh:
            want = locked.files.get(f.path) if locked else None
            if want is None:
                if not self.locking:
                    raise RefError(
                        f"{f}: this file is not in {self.lock.path} (the lock is out of date): "
                        "run `looprun lock`"
                    )
            elif want != digest:
                raise RefError(
                    f"{f}: the cached content differs from the lock ({want[:19]}..., the cache "
                    f"has {digest[:19]}...); never used: refetch or review and re-lock"
                )
        self.used[key].files[f.path] = digest
        deps.read_remote(str(f), digest, f.commit)
        remember(f)
        files = self.parts[key].files
        if f.path not in files:
            files.append(f.path)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise RefError(f"{f}: not valid UTF-8") from None
        return text.removeprefix("\ufeff"), digest

    def new_lock(self, templates: list[str]) -> lockfile.Lock:
        lock = lockfile.Lock(self.lock.path, True, templates, dict(self.used))
        return lock


_SESSION: contextvars.ContextVar[dict[Path, Resolver] | None] = contextvars.ContextVar(
    "looprun_sharing", default=None
)


@contextlib.contextmanager
def session(resolver: Resolver | None = None) -> Iterator[dict[Path, Resolver]]:
    """Resolvers by repository root for the templates loaded inside the block (what
    ``validate`` and ``explain`` report, what ``lock`` writes)."""
    table: dict[Path, Resolver] = {} if resolver is None else {resolver.root: resolver}
    token = _SESSION.set(table)
    try:
        yield table
    finally:
        _SESSION.reset(token)


def resolver_for(first: Path) -> Resolver:
    """The resolver for references of a template whose outermost local file is ``first``."""
    root = lockfile.find_root(first.parent)
    table = _SESSION.get()
    if table is None:
        return Resolver(root)
    if root not in table:
        table[root] = Resolver(root)
    return table[root]
