"""``looprun.lock``: each remote reference's commit and the sha256 of every file read
from it, at the root of the repository that holds the templates."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from looprun.errors import Location, Problem, TemplateError
from looprun.system import safefs
from looprun.system.atomic import write_atomic
from looprun.template import deps

NAME = "looprun.lock"
VERSION = 1


def find_root(start: Path) -> Path:
    """The repository root above ``start`` (the nearest directory holding ``.git``), or
    ``start`` itself outside any repository."""
    start = Path(start).absolute()
    for d in (start, *start.parents):
        if (d / ".git").exists():
            return d
    return start


@dataclass
class Entry:
    """One pinned reference: its kind (tag, branch, commit), commit and files read."""

    kind: str
    commit: str
    files: dict[str, str] = field(default_factory=dict)


@dataclass
class Lock:
    path: Path
    exists: bool = False
    templates: list[str] = field(default_factory=list)
    references: dict[str, Entry] = field(default_factory=dict)

    def text(self) -> str:
        body: dict[str, Any] = {
            "looprun_lock": VERSION,
            "templates": sorted(set(self.templates)),
            "references": {
                k: {"kind": e.kind, "commit": e.commit, "files": dict(sorted(e.files.items()))}
                for k, e in sorted(self.references.items())
            },
        }
        return json.dumps(body, indent=2) + "\n"

    def write(self) -> None:
        write_atomic(self.path, self.text())


def read(root: Path) -> Lock:
    """The lock at ``root`` (an empty one if there is none); a malformed lock is a
    located TemplateError."""
    path = root / NAME
    raw = safefs.read_bytes(path)
    if raw is None:
        return Lock(path)
    # its pins decide which commits run: a run records it with the files it was built from
    deps.read(path, hashlib.sha256(raw).hexdigest())
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise TemplateError([Problem(Location(str(path), 1, 1), "not valid UTF-8")]) from None
    except json.JSONDecodeError as exc:
        at = Location(str(path), exc.lineno, exc.colno)
        raise TemplateError([Problem(at, f"not valid JSON: {exc.msg}")]) from None
    where = Location(str(path), 1, 1)
    if not isinstance(data, dict) or data.get("looprun_lock") != VERSION:
        raise TemplateError([Problem(where, f"expected a looprun lock (looprun_lock: {VERSION})")])
    lock = Lock(path, exists=True)
    lock.templates = [str(t) for t in data.get("templates") or [] if isinstance(t, str)]
    refs = data.get("references") or {}
    if not isinstance(refs, dict):
        raise TemplateError([Problem(where, "references: expected a mapping")])
    for key, e in refs.items():
        ok = (
            isinstance(e, dict)
            and isinstance(e.get("commit"), str)
            and isinstance(e.get("files"), dict)
            and all(isinstance(v, str) for v in e["files"].values())
        )
        if not ok:
            raise TemplateError([Problem(where, f"references['{key}']: expected commit and files")])
        lock.references[key] = Entry(str(e.get("kind", "tag")), e["commit"], dict(e["files"]))
    return lock
