"""The diff of the working tree against the base, kept per path between iterations.

``git diff base now`` grows with everything the run changed: at a thousand changed
files it costs more than the rest of an iteration. A path's part of that diff depends
only on the path and its two versions, so each part is kept, and an iteration asks git
only for the paths that changed since the last diff (one ``diff-tree`` of the last tree
against the new one). A path that changed again after an earlier change is diffed
alone, from its base version to its new one, through two trees holding only that path.
Anything this cannot map one to one (a change of type, a quoted path) rebuilds the
whole diff from git, as before.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

from looprun.data.patchtext import chunks
from looprun.data.value import valueclass
from looprun.workspace.git import EMPTY_TREE

_ABSENT = ("000000", "0" * 40)


class Unmapped(Exception):
    """A diff whose parts cannot be told apart per path."""


@valueclass
class Part:
    """One path's part of a diff: its versions on both sides and its patch text."""

    path: str
    src: tuple[str, str]  # (mode, object id); _ABSENT when the path is new
    dst: tuple[str, str]
    patch: str


def parse(out: str) -> list[Part]:
    """The parts of ``diff-tree -r --patch-with-raw -z`` output, in git's order."""
    raw: list[tuple[str, tuple[str, str], tuple[str, str], str]] = []
    pos = 0
    while out.startswith(":", pos):  # ":modes ids status\0path\0" per path, then "\0"
        meta_end = out.index("\0", pos)
        path_end = out.index("\0", meta_end + 1)
        src_mode, dst_mode, src_id, dst_id, status = out[pos + 1 : meta_end].split(" ")
        if status not in ("A", "M", "D"):
            raise Unmapped(status)
        path = out[meta_end + 1 : path_end]
        raw.append((path, (src_mode, src_id), (dst_mode, dst_id), status))
        pos = path_end + 1
    if out.startswith("\0", pos):
        pos += 1
    pieces = chunks(out[pos:])
    if len(pieces) != len(raw):
        raise Unmapped("patch parts do not match the changed paths")
    parts = []
    for (path, src, dst, _), chunk in zip(raw, pieces, strict=True):
        if not chunk.startswith(f"diff --git a/{path} b/{path}\n"):
            raise Unmapped(path)
        parts.append(Part(path, src, dst, chunk))
    return parts


class PatchCache:
    """The parts of the diff from ``start`` to the last tree asked for."""

    def __init__(
        self,
        diff: Callable[[str, str], str],
        path_tree: Callable[[str, str, str], str] | None,
    ):
        self._diff = diff  # raw + patch of two trees (``TreeDiffs.diff``)
        self._path_tree = path_tree  # a tree of one path (None: cannot store objects)
        self._start: str | None = None
        self._tree: str | None = None
        self._parts: dict[str, Part] = {}
        self._order: list[str] = []  # the paths of ``_parts`` as git sorts them (bytewise)
        self._texts: list[str] = []  # their patches, in that order

    def diff(self, start: str, tree: str) -> tuple[list[str], list[str]]:
        """The patch from ``start`` to ``tree`` as one part per path, and the changed
        paths, in git's order."""
        try:
            if self._start != start or self._tree is None:
                self._rebuild(start, tree)
            elif self._tree != tree:
                self._advance(tree)
        except Unmapped:
            self._start = self._tree = None
            patch, paths = split_diff(self._diff(start, tree))
            return chunks(patch), paths
        return list(self._texts), list(self._order)

    def _rebuild(self, start: str, tree: str) -> None:
        self._start = self._tree = None
        self._parts = {p.path: p for p in parse(self._diff(start, tree))}
        self._order = sorted(self._parts, key=_key)
        self._texts = [self._parts[p].patch for p in self._order]
        self._start, self._tree = start, tree

    def _advance(self, tree: str) -> None:
        assert self._tree is not None and self._start is not None
        for part in parse(self._diff(self._tree, tree)):
            known = self._parts.get(part.path)
            base = known.src if known is not None else part.src
            at = bisect.bisect_left(self._order, _key(part.path), key=_key)
            if base == part.dst:
                if self._parts.pop(part.path, None) is not None:  # back to its base version
                    del self._order[at], self._texts[at]
            elif known is None:
                self._parts[part.path] = part  # its first change: base == last version
                self._order.insert(at, part.path)
                self._texts.insert(at, part.patch)
            else:
                self._parts[part.path] = self._alone(part.path, base, part.dst)
                self._texts[at] = self._parts[part.path].patch
        self._tree = tree

    def _alone(self, path: str, src: tuple[str, str], dst: tuple[str, str]) -> Part:
        if self._path_tree is None:
            raise Unmapped(path)
        a = EMPTY_TREE if src == _ABSENT else self._path_tree(path, *src)
        b = EMPTY_TREE if dst == _ABSENT else self._path_tree(path, *dst)
        parts = parse(self._diff(a, b))
        if len(parts) != 1 or parts[0].path != path:
            raise Unmapped(path)
        return parts[0]


def _key(path: str) -> bytes:
    return path.encode("utf-8", "surrogateescape")


def split_diff(out: str) -> tuple[str, list[str]]:
    """The patch and the changed paths of ``--patch-with-raw -z`` output."""
    paths: list[str] = []
    pos = 0
    while out.startswith(":", pos):
        meta_end = out.index("\0", pos)
        path_end = out.index("\0", meta_end + 1)
        paths.append(out[meta_end + 1 : path_end])
        pos = path_end + 1
    if out.startswith("\0", pos):
        pos += 1
    return out[pos:], paths
