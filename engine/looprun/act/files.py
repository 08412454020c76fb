"""File helpers the tools share: text detection, capped reads, atomic writes, and a
walk over the workdir that honours ``.gitignore`` and skips ``.git`` and ``.looprun``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pathspec

SKIP_DIRS = frozenset({".git", ".looprun"})
_SNIFF_BYTES = 8192


def looks_binary(sample: bytes) -> bool:
    """NUL bytes, or bytes that are not UTF-8, mean the file is not text for a model."""
    if b"\x00" in sample[:_SNIFF_BYTES]:
        return True
    try:
        sample[:_SNIFF_BYTES].decode("utf-8")
    except UnicodeDecodeError as exc:
        # A multi-byte character cut by the sniff window is still text.
        return exc.start < min(len(sample), _SNIFF_BYTES) - 4
    return False


def read_capped(path: Path, cap: int) -> tuple[bytes, int]:
    """At most ``cap`` bytes from the start of ``path``, and the file's full size."""
    with open(path, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        return fh.read(cap), size


class _Ignores:
    """The ``.gitignore`` files met on the way down, each applied below its directory."""

    def __init__(self) -> None:
        self._specs: list[tuple[str, pathspec.PathSpec]] = []

    def load(self, root: Path, rel_dir: str) -> None:
        file = root / rel_dir / ".gitignore" if rel_dir else root / ".gitignore"
        try:
            lines = file.read_text("utf-8", "replace").splitlines()
        except OSError:
            return
        self._specs.append((rel_dir, pathspec.GitIgnoreSpec.from_lines(lines)))

    def ignored(self, rel: str, *, is_dir: bool) -> bool:
        for base, spec in self._specs:
            if base and not rel.startswith(base + "/"):
                continue
            sub = rel[len(base) + 1 :] if base else rel
            if spec.match_file(sub + "/" if is_dir else sub):
                return True
        return False


def walk_files(
    root: Path,
    start: Path,
    *,
    include: Callable[[str], bool] = lambda rel: True,
    glob: str | None = None,
) -> Iterator[str]:
    """Workdir-relative POSIX paths of files under ``start``, in a stable order, not following
    symlinked directories, without ignored files, ``.git`` or ``.looprun``.
    """
    ignores = _Ignores()
    globspec = pathspec.GitIgnoreSpec.from_lines([glob]) if glob else None
    start_rel = os.path.relpath(start, root)
    # .gitignore files above ``start`` still apply to it.
    parts = [] if start_rel == "." else Path(start_rel).parts
    for depth in range(len(parts) + 1):
        ignores.load(root, "/".join(parts[:depth]))
    if start.is_file():
        rel = Path(start_rel).as_posix()
        if include(rel) and (globspec is None or globspec.match_file(rel)):
            yield rel
        return
    for dirpath, dirnames, filenames in os.walk(start):
        rel_dir = Path(os.path.relpath(dirpath, root)).as_posix()
        rel_dir = "" if rel_dir == "." else rel_dir
        if rel_dir and rel_dir != "/".join(parts):
            ignores.load(root, rel_dir)
        keep = []
        for name in sorted(dirnames):
            rel = f"{rel_dir}/{name}" if rel_dir else name
            if name in SKIP_DIRS or ignores.ignored(rel, is_dir=True) or not include(rel):
                continue
            keep.append(name)
        dirnames[:] = keep
        for name in sorted(filenames):
            rel = f"{rel_dir}/{name}" if rel_dir else name
            if ignores.ignored(rel, is_dir=False) or not include(rel):
                continue
            if os.path.islink(os.path.join(dirpath, name)) and not _link_stays_inside(
                root, os.path.join(dirpath, name), include
            ):
                continue  # a symlink out of the workdir (or into .git) is never followed
            if globspec is not None and not globspec.match_file(rel):
                continue
            yield rel


def _link_stays_inside(root: Path, link: str, include: Callable[[str], bool]) -> bool:
    real_root = os.path.realpath(root)
    target = os.path.realpath(link)
    if os.path.commonpath([real_root, target]) != real_root or target == real_root:
        return False
    rel = Path(os.path.relpath(target, real_root)).as_posix()
    return not any(part in SKIP_DIRS for part in rel.split("/")) and include(rel)
