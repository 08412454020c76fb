"""Diffs between trees of one repository: patches, per-file changes and line counts.

A diff of two trees never changes, so the last one is remembered; a watched workspace
keeps each path's part of the patch between iterations and asks one long-lived git
process only for what changed since (``patches.PatchCache``). The objects a diff reads on
its new side are checked against their ids once each: with the sandbox off a command can
write ``.git``, and git trusts an object already stored under an id it computes.
"""

from __future__ import annotations

import functools
import hashlib
import re
import weakref
from collections.abc import Iterator, Sequence
from pathlib import Path

from looprun.data.changes import FileChange
from looprun.data.patchtext import chunks
from looprun.workspace.git import Git, GitError
from looprun.workspace.long_lived import TreeDiffs
from looprun.workspace.objects import loose_object_ok, path_tree
from looprun.workspace.patches import PatchCache, split_diff
from looprun.workspace.snapshots import QuickSnapshots

_OBJECT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
GITLINK = "160000"  # a submodule's entry: its own repository, never diffed into


class Differ:
    """Diffs for one working tree's repository (``watched``: one iteration after another)."""

    def __init__(self, git: Git, quick: QuickSnapshots, *, watched: bool):
        self.git = git
        self.watched = watched
        self._quick = quick
        self._diffs: TreeDiffs | None = None
        self._patch_cache: PatchCache | None = None
        self._last: tuple[tuple[str, str], list[str], list[str]] | None = None
        self._joined: str | None = None  # the last patch's parts joined, once asked for
        self._verified: set[str] = set()  # object ids whose content was checked
        # per start, the last tree whose new side against it was checked whole: the next
        # tree's new side is then what differs from that one (plus what is checked already)
        self._checked_from: dict[str, str] = {}
        self._new_side: TreeDiffs | None = None
        self._last_raw: tuple[tuple[str, str], list[tuple[str, str, str, str]]] | None = None

    def raw(self, a: str, b: str) -> Iterator[tuple[str, str, str, str]]:
        """``(old mode, new mode, status letter, path)`` per path that differs. Two object
        ids always differ the same way: the last pair's rows are reused (an iteration's
        selection, related tests and policy ask about the same pair)."""
        if self._last_raw is not None and self._last_raw[0] == (a, b):
            yield from self._last_raw[1]
            return
        rows: list[tuple[str, str, str, str]] = []
        out = self.git.run("diff-tree", "-r", "-z", "--no-renames", "--raw", a, b)
        fields = out.split("\0")
        i = 0
        while i + 1 < len(fields):
            meta, path = fields[i], fields[i + 1]
            i += 2
            if not meta.startswith(":"):
                continue
            src_mode, dst_mode, _, _, status = meta[1:].split(" ")
            rows.append((src_mode, dst_mode, status[:1], path))
        if _OBJECT_ID.fullmatch(a) and _OBJECT_ID.fullmatch(b):  # never a ref, which moves
            self._last_raw = ((a, b), rows)
        yield from rows

    def patch(self, start: str, tree: str) -> tuple[str, list[str]]:
        """The patch from ``start`` to ``tree`` and the paths it changes."""
        parts, paths = self._parts_of(start, tree)
        if self._joined is None:
            self._joined = "".join(parts)
        return self._joined, list(paths)

    def parts(self, start: str, tree: str) -> tuple[str, ...]:
        """The patch from ``start`` to ``tree``, one part per path, in git's order."""
        return tuple(self._parts_of(start, tree)[0])

    def _parts_of(self, start: str, tree: str) -> tuple[list[str], list[str]]:
        if self._last is not None and self._last[0] == (start, tree):
            return self._last[1], self._last[2]
        self._check_new_objects(start, tree)
        if self.watched:
            parts, paths = self._patches().diff(start, tree)
        else:
            patch, paths = split_diff(self.git.diff(start, tree, "--patch-with-raw", "-z"))
            parts = chunks(patch)
        self._last, self._joined = ((start, tree), parts, paths), None
        return parts, paths

    def file_changes(self, a: str, b: str, *, contents: bool) -> list[FileChange]:
        """Each path that differs between trees ``a`` and ``b``, with its old and new text
        when ``contents`` (None for a binary or absent side)."""
        rows = [(s, p) for m1, m2, s, p in self.raw(a, b) if GITLINK not in (m1, m2)]
        if not contents:
            return [FileChange(path, status, None, None) for status, path in rows]
        wanted = [f"{a}:{p}" for s, p in rows if s != "A"]
        wanted += [f"{b}:{p}" for s, p in rows if s != "D"]
        texts = self._texts(wanted)
        return [
            FileChange(
                path,
                status,
                None if status == "A" else texts[f"{a}:{path}"],
                None if status == "D" else texts[f"{b}:{path}"],
            )
            for status, path in rows
        ]

    def numstat(self, start: str, tree: str) -> list[tuple[str, int | None, int | None]]:
        """``(path, added, removed)`` per changed file; None for binary."""
        out = self.git.run(
            "diff-tree", "-r", "-z", "--no-renames", "--text", "--numstat", start, tree
        )
        rows: list[tuple[str, int | None, int | None]] = []
        for field in out.split("\0"):
            parts = field.split("\t", 2)
            if len(parts) == 3:
                added, removed, path = parts
                rows.append((path, _int_or_none(added), _int_or_none(removed)))
        return rows

    def _texts(self, specs: list[str]) -> dict[str, str | None]:
        """Each ``TREE:PATH``'s text, read in one batch (None for a binary file, or one
        git does not have); a path holding a newline is read on its own."""
        out: dict[str, str | None] = {s: self._text(s) for s in specs if "\n" in s}
        batch = [s for s in specs if "\n" not in s]
        for spec, got in zip(batch, self.git.objects_or_none(batch), strict=True):
            ok = got is not None and got[0] == "blob" and b"\0" not in got[1]
            out[spec] = got[1].decode("utf-8", "surrogateescape") if ok else None
        return out

    def _text(self, spec: str) -> str | None:
        code, out, _ = self.git.run_status("cat-file", "blob", spec)
        if code != 0 or "\0" in out:
            return None
        return out

    def _check_new_objects(self, start: str, tree: str) -> None:
        """The trees and blobs a diff from ``start`` to ``tree`` reads on the new side,
        checked once each against their ids (see ``check_objects``)."""
        if tree in self._verified or tree == start:
            return
        made = self._quick.made(tree) if self.watched else None
        if made is not None and self._checked_from.get(start, start) == made[0]:
            # made here from ``start`` or from the last tree checked against it: what
            # differs from that one is what was just stored, each object read back or
            # written whole; after a command, each is hashed again (no git asked for them)
            _, stored, untouched = made
            if untouched:
                self._verified.update(stored | {tree})
                self._checked_from[start] = tree
                return
            ids = [tree, *sorted(stored)]
        else:
            ids = [tree, *self._new_side_ids(start, tree)]
        fresh = [i for i in dict.fromkeys(ids) if i not in self._verified]
        repo = self._quick.repo()
        if repo is not None:  # SHA-1: loose objects are read in-process
            check_objects(self.git, fresh, repo.objects)
        else:
            algorithm = self.git.run("rev-parse", "--show-object-format").strip()
            check_objects(self.git, fresh, algorithm=algorithm)
        self._verified.update(fresh)
        if self.watched:
            self._checked_from[start] = tree

    def _new_side_ids(self, start: str, tree: str) -> list[str]:
        """The ids of the trees and blobs of ``tree`` that differ from ``start``, as git
        lists them."""
        if self.watched:  # one long-lived diff-tree for the run, as for the patches
            if self._new_side is None:
                self._new_side = TreeDiffs(self.git, "-t", "--raw", "-z")
                weakref.finalize(self, self._new_side.close)
            # an entry of ``tree`` that differs from ``start`` either is the same in the
            # last tree checked against ``start`` (checked then) or differs from it
            out = self._new_side.diff(self._checked_from.get(start, start), tree)
        else:
            out = self.git.run("diff-tree", "-r", "-t", "-z", "--no-renames", "--raw", start, tree)
        ids = []
        for meta in out.split("\0"):
            if meta.startswith(":"):
                _, dst_mode, _, new, _ = meta[1:].split(" ")
                if dst_mode != GITLINK and new.strip("0"):
                    ids.append(new)
        return ids

    def _patches(self) -> PatchCache:
        if self._patch_cache is None:
            diffs = self._diffs = TreeDiffs(self.git, "--patch-with-raw", "-z")
            weakref.finalize(self, diffs.close)
            repo = self._quick.repo()
            one = None if repo is None else functools.partial(path_tree, repo.objects)
            self._patch_cache = PatchCache(diffs.diff, one)
        return self._patch_cache


def check_objects(
    git: Git, ids: Sequence[str], objects: Path | None = None, algorithm: str = "sha1"
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
            raise GitError(_planted(oid, git.workdir))
        if ok is None:
            rest.append(oid)
    ids = rest
    if not ids:
        return
    for oid, (kind, body) in zip(ids, git.objects(ids), strict=True):
        if hashlib.new(algorithm, f"{kind} {len(body)}\0".encode() + body).hexdigest() != oid:
            raise GitError(_planted(oid, git.workdir))


def _planted(oid: str, workdir: Path) -> str:
    return (
        f"object {oid} in the repository of {workdir} does not hold what its id says "
        "(planted by a command?): the diff checks cannot trust it"
    )


def _int_or_none(text: str) -> int | None:
    return int(text) if text.isdigit() else None
