"""Which files ``looprun validate`` checks: each file as given, and a directory's looprun
YAML files, told apart from other YAML (CI config, Helm charts) by a look at the text."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

_SKIP_DIRS = {".git", ".looprun", ".venv", "node_modules", "__pycache__"}
_MARKER = re.compile(r"^looprun\s*:", re.M)
_CASES = re.compile(r"^cases\s*:", re.M)
_TEMPLATE_KEY = re.compile(r"^template\s*:", re.M)


def is_looprun_file(path: Path) -> bool:
    """A YAML file that is looprun's: a template or fragment (``looprun:`` at the top level)
    or a case file (``cases:`` and ``template:``). Other YAML (CI config, Helm charts) is not."""
    try:
        with path.open("r", encoding="utf-8", errors="replace") as fh:
            head = fh.read(65536)
    except OSError:
        return False
    return bool(_MARKER.search(head)) or (
        bool(_CASES.search(head)) and bool(_TEMPLATE_KEY.search(head))
    )


def expand(refs: Iterable[str]) -> tuple[list[str], list[str]]:
    """Files to validate: each file as given; each directory's looprun files, recursively
    (hidden and tool directories skipped). Also the directories that held none."""
    out: list[str] = []
    empty: list[str] = []
    for ref in refs:
        path = Path(ref)
        if not path.is_dir():
            out.append(ref)
            continue
        found = sorted(
            p
            for p in path.rglob("*")
            if p.suffix in (".yaml", ".yml")
            and p.is_file()
            and not (_SKIP_DIRS & set(p.relative_to(path).parts[:-1]))
            and is_looprun_file(p)
        )
        if not found:
            empty.append(ref)
        out += [str(p) for p in found]
    return out, empty
