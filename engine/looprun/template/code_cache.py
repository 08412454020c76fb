"""What Jinja made of a template's expressions, kept from one run to the next.

Every run loads its template again: each text and condition is parsed (for the names it
reads) and, when first used, turned into Python by Jinja's code generator and compiled.
For the built-in templates that is some tens of milliseconds of every run, the same work
each time. Runs keep it here: per source and kind, the names it reads and, once a run has
used it, its compiled code.

An entry holds code the engine executes, so it is trusted as a ``.pyc`` is: the file is
read only when it and its directory are the user's own and writable by no one else (the
sandbox keeps the cache directory read-only to every command), and only while the engine
is the one that wrote it (looprun's version and files, Jinja's and Python's: the
``engine_stamp`` of the valid-template cache). Only sources that compiled cleanly are
stored, so a cached entry never hides an error a load would report; anything unreadable,
malformed or from another engine is a miss. The file is replaced whole (written beside
it, then renamed), at most once per process.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import threading
from pathlib import Path
from types import CodeType
from typing import Any

from looprun.system.atomic import write_atomic
from looprun.template.valid_cache import engine_stamp, read_private, trusted_dir

_FORMAT = 1
# more distinct sources than any user's templates hold: past it, a save keeps only the
# entries its own process used (texts edited away do not pile up)
MAX_ENTRIES = 8192

# kind -> source -> (names, attributes, constant, code): ``kind`` is "text", "shell"
# or "condition"; ``constant`` is a condition's constant truth (None: not constant, or a
# text); ``code`` is None until a run generated it
Entry = tuple[tuple[str, ...], tuple[tuple[str, str], ...], bool | None, CodeType | None]


def _well_formed(value: Any) -> bool:
    if not (isinstance(value, tuple) and len(value) == 4):
        return False
    names, attrs, constant, code = value
    return (
        isinstance(names, tuple)
        and all(isinstance(n, str) for n in names)
        and isinstance(attrs, tuple)
        and all(
            isinstance(a, tuple) and len(a) == 2 and all(isinstance(x, str) for x in a)
            for a in attrs
        )
        and (constant is None or isinstance(constant, bool))
        and (code is None or isinstance(code, CodeType))
    )


class CodeCache:
    """One file of entries under ``root``, named for the engine that wrote it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.path = root / f"{engine_stamp()[:32]}.marshal"
        self._entries: dict[tuple[str, str], Entry] = self._read()
        self._new = False
        self._lock = threading.Lock()
        # code generated while its source was compiled, before its entry was put
        self._early: dict[tuple[str, str], CodeType] = {}
        self._used: set[tuple[str, str]] = set()  # the entries this process read or made

    def _read(self) -> dict[tuple[str, str], Entry]:
        raw = read_private(self.path) if trusted_dir(self.root) else None
        if raw is None:
            return {}
        try:
            data = marshal.loads(raw)
        except (EOFError, ValueError, TypeError):
            return {}
        if not (
            isinstance(data, dict)
            and data.get("format") == _FORMAT
            and data.get("stamp") == engine_stamp()
            and isinstance(data.get("entries"), dict)
        ):
            return {}
        return {
            key: value
            for key, value in data["entries"].items()
            if isinstance(key, tuple)
            and len(key) == 2
            and all(isinstance(k, str) for k in key)
            and _well_formed(value)
        }

    def get(self, kind: str, source: str) -> Entry | None:
        entry = self._entries.get((kind, source))
        if entry is not None:
            self._used.add((kind, source))
        return entry

    def put(self, kind: str, source: str, entry: Entry) -> None:
        """Remember ``entry`` (a clean compile's) for ``source``; a known one keeps its code."""
        with self._lock:
            if entry[3] is None:
                entry = (*entry[:3], self._early.pop((kind, source), None))
            self._used.add((kind, source))
            old = self._entries.get((kind, source))
            if old is not None and (old[3] is not None or entry[3] is None):
                return
            self._entries[(kind, source)] = entry
            self._new = True

    def code(self, kind: str, source: str, code: CodeType) -> None:
        """The code a run generated for ``source`` (kept with its entry, made now or soon)."""
        with self._lock:
            old = self._entries.get((kind, source))
            if old is None:
                self._early[(kind, source)] = code
                return
        if old[3] is None:
            self.put(kind, source, (*old[:3], code))

    def save(self) -> None:
        """Write the entries if this process added any; a cache that cannot be written is
        only a slower next run."""
        with self._lock:
            if not self._new:
                return
            self._new = False
            entries = dict(self._entries)
            if len(entries) > MAX_ENTRIES:
                entries = {k: v for k, v in entries.items() if k in self._used}
            data = {"format": _FORMAT, "stamp": engine_stamp(), "entries": entries}
        with contextlib.suppress(OSError, ValueError):
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
            if not trusted_dir(self.root):
                return
            write_atomic(self.path, marshal.dumps(data), sync="none")
            os.chmod(self.path, 0o600)  # whatever the umask: only the user's
            for other in self.root.glob("*.marshal"):
                if other != self.path:  # another engine's: never read by this one
                    other.unlink(missing_ok=True)
