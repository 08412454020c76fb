"""The ``search`` tool's worker: a Python regex over the workdir's text files.

It runs in a child process (``python -m looprun.act.search CONFIG``) so that a
pathological pattern from the model (catastrophic backtracking) is stopped by the
process timeout instead of hanging the engine.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pathspec

from looprun.act.files import looks_binary, walk_files

MAX_FILE_BYTES = 2_000_000
MAX_LINE_CHARS = 300


def search_tree(
    root: Path,
    start: Path,
    regex: re.Pattern[str],
    *,
    deny: list[str],
    glob: str | None = None,
) -> Iterator[str]:
    """``path:line: text`` for every matching line of every text file under ``start``."""
    denied = pathspec.GitIgnoreSpec.from_lines(deny)
    for rel in walk_files(root, start, include=lambda r: not denied.match_file(r), glob=glob):
        path = root / rel
        try:
            if path.stat().st_size > MAX_FILE_BYTES:
                continue
            data = path.read_bytes()
        except OSError:
            continue
        if looks_binary(data):
            continue
        text = data.decode("utf-8", "replace")
        for number, line in enumerate(text.splitlines(), start=1):
            if regex.search(line):
                shown = line if len(line) <= MAX_LINE_CHARS else line[:MAX_LINE_CHARS] + " [...]"
                yield f"{rel}:{number}: {shown}"


def main(argv: list[str]) -> int:
    config = json.loads(argv[1])
    regex = re.compile(config["pattern"])
    root = Path(config["root"])
    out = sys.stdout
    out.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]  # odd file names
    shown = 0
    more = 0
    for hit in search_tree(root, Path(config["start"]), regex, deny=config.get("deny", [])):
        if shown < config["max_matches"]:
            out.write(hit + "\n")
            shown += 1
        else:
            more += 1
    if more:
        out.write(f"[... {more} more matching line(s) not shown; narrow the pattern or path ...]\n")
    if not shown:
        out.write("no matches\n")
    return 0 if shown else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
