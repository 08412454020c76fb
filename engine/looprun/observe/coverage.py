"""Coverage reports: Cobertura XML (coverage.py, Istanbul/nyc, Java tools), coverage.py
JSON, go's cover profile and LCOV (node's test runner), into total and per-file line
coverage.

Options: ``min`` (percent the covered lines must reach for ok) and ``paths`` (globs: the
target files; ``target_percent`` is the coverage of just those, and ``min`` then applies
to it). Files below ``min`` are items, with their missing lines, lowest first.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from looprun.data.freeze import freeze
from looprun.data.globs import matching
from looprun.observe import coverage_profiles as profiles
from looprun.observe import declared_facts
from looprun.observe.base import Item, Observation, ParseInput
from looprun.observe.feedback import render
from looprun.observe.reports import (
    ReportProblem,
    as_list,
    display_path,
    locate_report,
    max_feedback,
    option,
    parse_json,
    read_text,
    signature_of,
    unusable,
)

NAME = "coverage"
EMPTY_FACTS = declared_facts.COVERAGE
FACTS = frozenset(EMPTY_FACTS)


@dataclass
class _File:
    hits: dict[int, bool] = field(default_factory=dict)  # line -> covered
    rate: float | None = None  # from the report, when it lists no lines

    @property
    def valid(self) -> int:
        return len(self.hits)

    @property
    def covered(self) -> int:
        return sum(self.hits.values())

    def percent(self) -> float:
        if self.hits:
            return round(100.0 * self.covered / self.valid, 2)
        return round(100.0 * (self.rate or 0.0), 2) if self.rate is not None else 100.0

    def missing(self) -> list[int]:
        return sorted(n for n, hit in self.hits.items() if not hit)


@dataclass
class _Report:
    files: dict[str, _File] = field(default_factory=dict)
    lines_valid: int | None = None
    lines_covered: int | None = None
    line_rate: float | None = None
    branches_valid: int | None = None
    branches_covered: int | None = None
    branch_rate: float | None = None


def _num(value: Any, kind: type = float) -> Any:
    try:
        return kind(value) if value not in (None, "") else None
    except (TypeError, ValueError):
        return None


def _relative(filename: str, sources: list[str], workdir: Path) -> str:
    """Cobertura file names are relative to a ``<source>``; make them workdir-relative."""
    name = filename.replace("\\", "/")
    if Path(name).is_absolute():
        return display_path(Path(name), workdir)
    for src in sources:
        base = Path(src) if Path(src).is_absolute() else workdir / src
        candidate = base / name
        if candidate.exists():
            return display_path(candidate, workdir)
    for src in sources:
        if Path(src).is_absolute():
            shown = display_path(Path(src) / name, workdir)
            if not Path(shown).is_absolute():
                return shown
    return name[2:] if name.startswith("./") else name


def _cobertura(text: str, shown: str, workdir: Path) -> _Report:
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise ReportProblem(
            f"{shown}: not well-formed XML ({exc}); the report may be truncated"
        ) from None
    if root.tag != "coverage":
        raise ReportProblem(
            f"{shown}: not a Cobertura report (root element is <{root.tag}>, expected <coverage>)"
        )
    rep = _Report(
        lines_valid=_num(root.get("lines-valid"), int),
        lines_covered=_num(root.get("lines-covered"), int),
        line_rate=_num(root.get("line-rate")),
        branches_valid=_num(root.get("branches-valid"), int),
        branches_covered=_num(root.get("branches-covered"), int),
        branch_rate=_num(root.get("branch-rate")),
    )
    sources = [s.text.strip() for s in root.iter("source") if s.text and s.text.strip()]
    for cls in root.iter("class"):
        filename = cls.get("filename")
        if not filename:
            continue
        entry = rep.files.setdefault(_relative(filename, sources, workdir), _File())
        lines = cls.find("lines")
        found = False
        for line in lines.iter("line") if lines is not None else ():
            number, hits = _num(line.get("number"), int), _num(line.get("hits"), int)
            if number is None or hits is None:
                continue
            found = True
            entry.hits[number] = entry.hits.get(number, False) or hits > 0
        if not found and entry.rate is None:
            entry.rate = _num(cls.get("line-rate"))
    return rep


def _coverage_json(doc: dict[str, Any], shown: str, workdir: Path) -> _Report:
    files = doc.get("files")
    if not isinstance(files, dict) or not isinstance(doc.get("totals"), dict):
        raise ReportProblem(f"{shown}: not a coverage.py JSON report (no `files` and `totals`)")
    totals = doc["totals"]
    rep = _Report(
        lines_valid=_num(totals.get("num_statements"), int),
        lines_covered=_num(totals.get("covered_lines"), int),
        branches_valid=_num(totals.get("num_branches"), int),
        branches_covered=_num(totals.get("covered_branches"), int),
    )
    for name, info in files.items():
        if not isinstance(info, dict):
            continue
        entry = rep.files.setdefault(_relative(str(name), [], workdir), _File())
        for n in info.get("executed_lines") or []:
            entry.hits[int(n)] = True
        for n in info.get("missing_lines") or []:
            entry.hits.setdefault(int(n), False)
        if not entry.hits:
            summary = info.get("summary") or {}
            pct = _num(summary.get("percent_covered"))
            entry.rate = None if pct is None else pct / 100.0
    return rep


def _from_lines(lines: profiles.Lines) -> _Report:
    return _Report(files={name: _File(hits=dict(hits)) for name, hits in lines.items()})


def _ranges(lines: list[int]) -> str:
    """``[3, 4, 5, 9]`` -> ``3-5, 9``."""
    out: list[str] = []
    start = prev = None
    for n in lines:
        if start is None:
            start = prev = n
        elif n == prev + 1:  # type: ignore[operator]
            prev = n
        else:
            out.append(f"{start}" if start == prev else f"{start}-{prev}")
            start = prev = n
    if start is not None:
        out.append(f"{start}" if start == prev else f"{start}-{prev}")
    return ", ".join(out)


def _pooled(files: list[_File]) -> float | None:
    valid = sum(f.valid for f in files)
    if valid:
        return round(100.0 * sum(f.covered for f in files) / valid, 2)
    rates = [f.percent() for f in files]
    return round(sum(rates) / len(rates), 2) if rates else None


class CoverageParser:
    """Line (and branch) coverage from Cobertura XML or coverage.py JSON."""

    name = NAME
    facts = FACTS
    empty_facts = EMPTY_FACTS

    def parse(self, data: ParseInput) -> Observation:
        try:
            minimum = option(data, "min")
            minimum = None if minimum is None else float(minimum)
        except (TypeError, ValueError):
            message = f"option `min` must be a number, not {option(data, 'min')!r}"
            return unusable(NAME, data, message, EMPTY_FACTS)
        try:
            path, shown = locate_report(data)
            text = read_text(path, shown)
            if text.lstrip().startswith("{"):
                doc = parse_json(text, shown)
                rep = _coverage_json(doc if isinstance(doc, dict) else {}, shown, data.workdir)
            elif profiles.looks_like_go_profile(text):
                rep = _from_lines(profiles.parse_go_profile(text, shown, data.workdir))
            elif profiles.looks_like_lcov(text):
                rep = _from_lines(profiles.parse_lcov(text, shown, data.workdir))
            else:
                rep = _cobertura(text, shown, data.workdir)
        except ReportProblem as exc:
            return unusable(NAME, data, str(exc), EMPTY_FACTS)
        return _observation(rep, data, shown, minimum)


_GLOB_CHARS = frozenset("*?[]!")


def _unmeasured(globs: list[str], rep: _Report, workdir: Path) -> dict[str, _File]:
    """Target files named literally that the report does not list (a runner that reports
    only the files its tests loaded, like node's): 0% covered, each non-blank line of the
    file missing, so a target no test touches cannot be left out of the pooled figure."""
    out: dict[str, _File] = {}
    for glob in globs:
        name = glob.strip().removeprefix("./")
        if not name or _GLOB_CHARS & set(name) or name in rep.files or name.endswith("/"):
            continue
        if Path(name).is_absolute() or ".." in Path(name).parts:  # only the tree's own files
            continue
        try:
            text = (workdir / name).read_text(encoding="utf-8", errors="replace")
        except (OSError, ValueError):
            continue
        hits = {n: False for n, line in enumerate(text.splitlines(), 1) if line.strip()}
        out[name] = _File(hits=hits) if hits else _File(rate=0.0)
    return out


def _observation(rep: _Report, data: ParseInput, shown: str, minimum: float | None) -> Observation:
    files = {name: f.percent() for name, f in sorted(rep.files.items())}
    valid = sum(f.valid for f in rep.files.values())
    covered = sum(f.covered for f in rep.files.values())
    if rep.lines_valid:  # the report's own totals win: they are what `coverage report` shows
        valid, covered = rep.lines_valid, rep.lines_covered or 0
    if valid:
        percent = round(100.0 * covered / valid, 2)
    elif rep.line_rate is not None:
        percent = round(100.0 * rep.line_rate, 2)
    else:
        percent = _pooled(list(rep.files.values())) or 0.0
    branch = None
    if rep.branches_valid:
        branch = round(100.0 * (rep.branches_covered or 0) / rep.branches_valid, 2)
    elif rep.branch_rate is not None and rep.branches_valid is None and rep.branch_rate > 0:
        branch = round(100.0 * rep.branch_rate, 2)
    globs = as_list(option(data, "paths"))
    unmeasured = _unmeasured(globs, rep, data.workdir)
    targets = (
        {n: p for n, p in files.items() if n in set(matching(list(files), *globs))} if globs else {}
    )
    targets.update({n: 0.0 for n in unmeasured})
    pool = {**rep.files, **unmeasured}
    target_percent = _pooled([pool[n] for n in targets]) if globs else None
    judged = target_percent if globs else percent
    measured = bool(rep.files) or valid > 0
    ok = measured and (minimum is None or (judged is not None and judged >= minimum))
    if globs and not targets:
        ok = False
    scope = targets if globs else files
    low = sorted(
        (n for n, p in scope.items() if minimum is None or p < minimum),
        key=lambda n: (scope[n], n),
    )
    items = []
    for n in low:
        if scope[n] >= 100.0:
            continue
        missing = pool[n].missing()
        items.append(
            Item(
                id=n,
                file=n,
                line=missing[0] if missing else None,
                severity="failure" if minimum is not None else "note",
                message=("not measured: no test loaded it; " if n in unmeasured else "")
                + f"{scope[n]:.1f}% covered"
                + (f" (< {minimum:g}%)" if minimum is not None else ""),
                detail=f"missing lines: {_ranges(missing)}"[:600] if missing else "",
            )
        )
    header = f"coverage: {percent:.1f}% of {valid} lines"
    if branch is not None:
        header += f", branches {branch:.1f}%"
    if globs:
        header += f"; targets {', '.join(globs)}: " + (
            f"{target_percent:.1f}%" if target_percent is not None else "no matching files"
        )
    if minimum is not None:
        header += f" (min {minimum:g}%)"
    if not measured:
        header += f"; {shown} measured nothing"
    counts = {"lines_valid": valid, "lines_covered": covered, "files_measured": len(files)}
    facts = {
        "percent": percent,
        "branch_percent": branch,
        "lines_valid": valid,
        "lines_covered": covered,
        "files": files,
        "target_percent": target_percent,
        "targets": targets,
    }
    return Observation(
        parser=NAME,
        ok=ok,
        exit_code=data.exit_code,
        counts=freeze(counts),
        items=tuple(items),
        signature=signature_of(items),
        feedback=render(header, items, max_bytes=max_feedback(data), noun="more files"),
        facts=freeze(facts),
    )
