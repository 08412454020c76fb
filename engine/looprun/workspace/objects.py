"""Git objects written in-process: blobs, trees and commits as loose objects.

A snapshot after the engine's own file tools wrote a few known paths needs only those
blobs hashed and the trees above them rewritten; starting four git processes for that
cost more than the rest of an iteration. The object formats are git's own (SHA-1
repositories only): ``<type> <size>\\0<body>``, zlib-compressed at
``objects/<2 hex>/<38 hex>``, written to a temporary file and renamed, as git does.
"""

from __future__ import annotations

import bisect
import hashlib
import os
import secrets
import time
import zlib
from collections.abc import Iterable
from pathlib import Path

TREE_MODE = "40000"


class Unsupported(Exception):
    """This change cannot be made in-process exactly as git would; let git do it."""


def object_id(kind: str, body: bytes) -> str:
    return hashlib.sha1(f"{kind} {len(body)}\0".encode() + body).hexdigest()


def write_object(objects: Path, kind: str, body: bytes) -> str:
    """Store one object (unless stored loose already, holding what its id says); its id.

    An object already there is read back, not trusted: one planted under this id with
    other content (possible with the sandbox off) would make every diff read that
    content instead of the file's, so it is replaced.
    """
    header = f"{kind} {len(body)}\0".encode()
    oid = hashlib.sha1(header + body).hexdigest()
    folder = objects / oid[:2]
    final = folder / oid[2:]
    if final.exists() and _holds(final, header + body):
        return oid
    folder.mkdir(exist_ok=True)
    tmp = folder / f"tmp_obj_{secrets.token_hex(6)}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o444)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(zlib.compress(header + body, 1))
        os.replace(tmp, final)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return oid


def loose_object_ok(objects: Path, oid: str) -> bool | None:
    """Whether the loose object ``oid`` holds what its id says; None: not stored loose
    (or unreadable), so git must be asked."""
    try:
        fd = os.open(objects / oid[:2] / oid[2:], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as fh:
            raw = zlib.decompress(fh.read())
    except (OSError, zlib.error):
        return None
    return hashlib.sha1(raw).hexdigest() == oid


def loose_tree_of(objects: Path, oid: str) -> str | None:
    """The tree the loose commit or tree ``oid`` stands for, read in-process; None when
    it is not stored loose, is another kind, or does not hold what its id says: git is
    asked then."""
    try:
        fd = os.open(objects / oid[:2] / oid[2:], os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as fh:
            raw = zlib.decompress(fh.read())
    except (OSError, zlib.error):
        return None
    if hashlib.sha1(raw).hexdigest() != oid:
        return None
    header, _, body = raw.partition(b"\0")
    if header.startswith(b"tree "):
        return oid
    if header.startswith(b"commit ") and body.startswith(b"tree "):
        tree = body[5:45].decode("ascii", "replace")
        return tree if len(tree) == 40 and set(tree) <= set("0123456789abcdef") else None
    return None


def _holds(path: Path, raw: bytes) -> bool:
    """Whether the loose object at ``path`` is ``raw``, compressed."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(fd, "rb") as fh:
            return zlib.decompress(fh.read()) == raw
    except (OSError, zlib.error):
        return False


def commit_body(
    tree: str, parents: Iterable[str], name: str, email: str, message: str, when: float
) -> bytes:
    """A commit as ``git commit-tree -m message`` writes it (local time zone)."""
    secs = int(when)
    offset = time.localtime(secs).tm_gmtoff // 60
    sign = "+" if offset >= 0 else "-"
    zone = f"{sign}{abs(offset) // 60:02d}{abs(offset) % 60:02d}"
    who = f"{name} <{email}> {secs} {zone}"
    lines = [f"tree {tree}", *(f"parent {p}" for p in parents)]
    lines += [f"author {who}", f"committer {who}", "", message.removesuffix("\n") + "\n"]
    return "\n".join(lines).encode("utf-8")


class TreeModel:
    """A tree and all its subtrees in memory, from ``git ls-tree -r -t -z --full-tree``;
    paths are set or removed, then :meth:`write` stores the trees that changed."""

    def __init__(self, tree: str, listing: bytes):
        self._root = tree
        # directory path ("" is the top) -> entry name -> (mode, object id or None)
        self.dirs: dict[str, dict[str, tuple[str, str | None]]] = {"": {}}
        self._dirty: set[str] = set()
        # per directory whose tree was written: its entries as stored, sorted as git
        # sorts them (sort keys, encoded entries), and the names set or removed since
        self._sorted: dict[str, tuple[list[bytes], list[bytes]]] = {}
        self._renamed: dict[str, set[str]] = {}
        for rec in listing.split(b"\0"):
            if not rec:
                continue
            meta, _, raw_path = rec.partition(b"\t")
            mode, kind, oid = meta.decode().split(" ")
            path = raw_path.decode("utf-8", "surrogateescape")
            parent, _, name = path.rpartition("/")
            if kind == "tree":
                self.dirs.setdefault(path, {})
                mode = TREE_MODE
            self.dirs.setdefault(parent, {})[name] = (mode, oid)

    @property
    def tree(self) -> str:
        """The id of the top tree as last written (or as loaded)."""
        return self._root

    def entry(self, path: str) -> tuple[str, str | None] | None:
        parent, _, name = path.rpartition("/")
        return self.dirs.get(parent, {}).get(name)

    def has_file(self, path: str) -> bool:
        found = self.entry(path)
        return found is not None and found[0] != TREE_MODE

    def names(self) -> Iterable[str]:
        """Every entry name at any depth (to look for attribute files, say)."""
        for entries in self.dirs.values():
            yield from entries

    def set(self, path: str, mode: str, oid: str) -> None:
        """Put a file at ``path``, making the directories above it; Unsupported if a file
        stands where a directory must be, or a directory where the file goes."""
        parts = path.split("/")
        folder = ""
        for part in parts[:-1]:
            entries = self.dirs[folder]
            here = entries.get(part)
            sub = f"{folder}/{part}" if folder else part
            if here is None:
                entries[part] = (TREE_MODE, None)
                self._changed(folder, part)
                self.dirs[sub] = {}
            elif here[0] != TREE_MODE:
                raise Unsupported(f"{sub} is not a directory in the snapshot")
            folder = sub
        here = self.dirs[folder].get(parts[-1])
        if here is not None and here[0] == TREE_MODE:
            raise Unsupported(f"{path} is a directory in the snapshot")
        self.dirs[folder][parts[-1]] = (mode, oid)
        self._changed(folder, parts[-1])
        self._mark(folder)

    def remove(self, path: str) -> None:
        parent, _, name = path.rpartition("/")
        entries = self.dirs.get(parent)
        if entries is None or name not in entries:
            return
        if entries[name][0] == TREE_MODE:
            raise Unsupported(f"{path} is a directory in the snapshot")
        del entries[name]
        self._changed(parent, name)
        self._mark(parent)

    def _changed(self, folder: str, name: str) -> None:
        if folder in self._sorted:
            self._renamed.setdefault(folder, set()).add(name)

    def _mark(self, folder: str) -> None:
        while True:
            self._dirty.add(folder)
            if not folder:
                return
            folder = folder.rpartition("/")[0]

    def write(self, objects: Path, written: set[str] | None = None) -> str:
        """Store every changed tree, deepest first; the id of the top tree. ``written``
        collects the ids stored (each checked or made by :func:`write_object`)."""
        for folder in sorted(self._dirty, key=lambda d: d.count("/") + bool(d), reverse=True):
            entries = self.dirs.get(folder)
            if entries is None:
                continue
            parent, _, name = folder.rpartition("/")
            if not entries and folder:  # git stores no empty directory
                del self.dirs[folder]
                self._sorted.pop(folder, None)
                self.dirs[parent].pop(name, None)
                self._changed(parent, name)
                continue
            oid = write_object(objects, "tree", self._body(folder, entries))
            if written is not None:
                written.add(oid)
            if folder:
                self.dirs[parent][name] = (TREE_MODE, oid)
                self._changed(parent, name)
            else:
                self._root = oid
        self._dirty.clear()
        return self._root

    def _body(self, folder: str, entries: dict[str, tuple[str, str | None]]) -> bytes:
        """The tree body of ``folder``: the entries kept sorted from its last write, with
        only the names changed since put in again (a directory of a thousand files is
        not sorted and encoded again for one new file)."""
        kept = self._sorted.get(folder)
        if kept is None:
            pairs = sorted(_entry(name, *entries[name]) for name in entries)
            kept = ([k for k, _ in pairs], [e for _, e in pairs])
            self._sorted[folder] = kept
            self._renamed.pop(folder, None)
            return b"".join(kept[1])
        keys, encoded = kept
        for name in self._renamed.pop(folder, ()):
            raw = name.encode("utf-8", "surrogateescape")
            for key in (raw, raw + b"/"):
                at = bisect.bisect_left(keys, key)
                if at < len(keys) and keys[at] == key:
                    del keys[at], encoded[at]
            if name in entries:
                key, entry = _entry(name, *entries[name])
                at = bisect.bisect_left(keys, key)
                keys.insert(at, key)
                encoded.insert(at, entry)
        return b"".join(encoded)


def _entry(name: str, mode: str, oid: str | None) -> tuple[bytes, bytes]:
    """A tree entry's sort key (a directory sorts as if its name ended with ``/``) and
    its bytes."""
    assert oid is not None, f"tree entry {name} has no object"
    raw = name.encode("utf-8", "surrogateescape")
    key = raw + b"/" if mode == TREE_MODE else raw
    return key, f"{mode} ".encode() + raw + b"\0" + bytes.fromhex(oid)


def _tree_body(entries: dict[str, tuple[str, str | None]]) -> bytes:
    def key(name: str) -> bytes:
        raw = name.encode("utf-8", "surrogateescape")
        return raw + b"/" if entries[name][0] == TREE_MODE else raw

    out = bytearray()
    for name in sorted(entries, key=key):
        mode, oid = entries[name]
        assert oid is not None, f"tree entry {name} has no object"
        out += f"{mode} ".encode() + name.encode("utf-8", "surrogateescape") + b"\0"
        out += bytes.fromhex(oid)
    return bytes(out)


def path_tree(objects: Path, path: str, mode: str, oid: str) -> str:
    """Store a tree holding only ``path`` (with the trees above it); its id."""
    for name in reversed(path.split("/")):
        oid = write_object(objects, "tree", _tree_body({name: (mode, oid)}))
        mode = TREE_MODE
    return oid
