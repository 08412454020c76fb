"""Line coverage from the two line-oriented formats the other stacks' runners write:
go's cover profile (``go test -coverprofile``) and LCOV (node's ``--test-reporter=lcov``).

Both become ``{file: {line: covered}}``, the per-file lines the coverage parser pools,
with paths relative to the directory the tests ran in. A line that does not parse is an
error naming the report's line, never a silent gap: a truncated profile must not read
as code nobody ran.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

from looprun.observe.reports import ReportProblem, display_path

Lines = dict[str, dict[int, bool]]

# name.go:startLine.startCol,endLine.endCol numberOfStatements count
_BLOCK = re.compile(r"^(?P<file>.+):(?P<l0>\d+)\.\d+,(?P<l1>\d+)\.\d+ (?P<stmts>\d+) (?P<n>\d+)$")
_MODULE = re.compile(r"^\s*module\s+(\"[^\"]+\"|\S+)", re.MULTILINE)
_USE = re.compile(r"^\s*use\s+(?:\(\s*(?P<block>[^)]*)\)|(?P<one>\S+))", re.MULTILINE)


def looks_like_go_profile(text: str) -> bool:
    return text.startswith("mode: ")


def looks_like_lcov(text: str) -> bool:
    first = text.lstrip().split("\n", 1)[0]
    return first.startswith(("TN:", "SF:"))


def _numbered(text: str) -> Iterator[tuple[int, str]]:
    for number, line in enumerate(text.splitlines(), start=1):
        line = line.strip()
        if line:
            yield number, line


def go_modules(workdir: Path) -> dict[str, str]:
    """Module path -> its directory relative to ``workdir`` (``""`` for the root), from
    go.mod at the root and the modules a go.work there uses."""
    dirs = [""]
    try:
        work = (workdir / "go.work").read_text(encoding="utf-8", errors="replace")
    except OSError:
        work = ""
    work = re.sub(r"//[^\n]*", "", work)  # comments
    for m in _USE.finditer(work):
        for entry in (m.group("block") or m.group("one") or "").split():
            dirs.append(entry.strip('"').removeprefix("./").strip("/"))
    out: dict[str, str] = {}
    for d in dirs:
        try:
            text = (workdir / d / "go.mod").read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        found = _MODULE.search(text)
        if found:
            out[found.group(1).strip('"')] = "" if d in ("", ".") else d
    return out


def _go_relative(name: str, modules: dict[str, str], workdir: Path) -> str:
    """An import-path file name (``example.com/m/pkg/x.go``) as a workdir-relative path;
    the longest module path wins (a nested module inside another)."""
    for module in sorted(modules, key=len, reverse=True):
        if name.startswith(module + "/"):
            rest = name[len(module) + 1 :]
            return f"{modules[module]}/{rest}" if modules[module] else rest
    if Path(name).is_absolute():
        return display_path(Path(name), workdir)
    return name


def parse_go_profile(text: str, shown: str, workdir: Path) -> Lines:
    """A cover profile: every line of a block is covered when any block over it ran (a
    profile merged from several test binaries lists a block once per binary)."""
    rows = _numbered(text)
    first = next(rows, None)
    if first is None or not first[1].startswith("mode: "):
        raise ReportProblem(f"{shown}:1: not a go cover profile (it must start with `mode: `)")
    modules = go_modules(workdir)
    files: Lines = {}
    for number, line in rows:
        m = _BLOCK.match(line)
        if m is None:
            raise ReportProblem(
                f"{shown}:{number}: not a cover profile block "
                f"(`file.go:line.col,line.col statements count`): {line[:120]!r}"
            )
        start, end = int(m["l0"]), int(m["l1"])
        if end < start:
            raise ReportProblem(f"{shown}:{number}: a block that ends before it starts")
        if int(m["stmts"]) == 0:
            continue
        hits = files.setdefault(_go_relative(m["file"], modules, workdir), {})
        ran = int(m["n"]) > 0
        for n in range(start, end + 1):
            hits[n] = hits.get(n, False) or ran
    return files


def parse_lcov(text: str, shown: str, workdir: Path) -> Lines:
    """LCOV tracefile records (``SF:`` ... ``DA:line,count`` ... ``end_of_record``);
    function and branch records are read past."""
    files: Lines = {}
    current: dict[int, bool] | None = None
    for number, line in _numbered(text):
        tag, _, value = line.partition(":")
        if line == "end_of_record":
            if current is None:
                raise ReportProblem(f"{shown}:{number}: end_of_record without an SF: record")
            current = None
        elif tag == "SF":
            if current is not None:
                raise ReportProblem(f"{shown}:{number}: SF: before the last record ended")
            path = Path(value)
            name = display_path(path, workdir) if path.is_absolute() else value
            current = files.setdefault(name.removeprefix("./"), {})
        elif tag == "DA":
            if current is None:
                raise ReportProblem(f"{shown}:{number}: DA: outside a record (no SF: before it)")
            parts = value.split(",")
            try:
                line_no, count = int(parts[0]), int(parts[1])
            except (IndexError, ValueError):
                raise ReportProblem(
                    f"{shown}:{number}: DA: needs `line,count`, not {value[:80]!r}"
                ) from None
            if line_no < 1 or count < 0:
                raise ReportProblem(f"{shown}:{number}: DA: line and count must be positive")
            current[line_no] = current.get(line_no, False) or count > 0
        elif tag not in _LCOV_TAGS:
            raise ReportProblem(f"{shown}:{number}: not an LCOV record: {line[:120]!r}")
    if current is not None:
        raise ReportProblem(f"{shown}: the last record has no end_of_record; it may be truncated")
    return files


_LCOV_TAGS = frozenset(
    {"TN", "FN", "FNDA", "FNF", "FNH", "BRDA", "BRF", "BRH", "LF", "LH", "VER", "FNL", "FNA"}
)
