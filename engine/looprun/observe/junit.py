"""JUnit/xUnit XML reports (pytest, Surefire, Gradle, jest-junit, go-junit-report, gotestsum,
PHPUnit, ctest, mocha, xUnit.net, nextest ...) into test counts, failing ids and feedback.

The file is streamed: each ``<testcase>`` is read through junitparser's element classes
and then dropped, so memory stays bounded by the number of *failing* tests, not the size
of the report. Counts come from the test cases actually present, not from the (often
stale or trimmed) ``tests=``/``failures=`` attributes.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from junitparser import Error, Failure
from junitparser.xunit2 import FlakyError, FlakyFailure, RerunError, RerunFailure

from looprun.frozen import freeze
from looprun.observe import declared_facts
from looprun.observe.base import Item, Observation, ParseInput
from looprun.observe.feedback import render, strip_ansi, tail
from looprun.observe.reports import (
    ReportProblem,
    locate_report,
    max_feedback,
    signature_of,
    unusable,
)
from looprun.observe.traceback import (
    doctest_failure,
    first_assertion,
    frames,
    key_lines,
    project_path,
)

NAME = "junit"
EMPTY_FACTS = declared_facts.JUNIT
FACTS = frozenset(EMPTY_FACTS)
_MAX_ITEMS = 1000  # failing items kept in full; the rest are only counted and named
_SUITE, _CASE = "testsuite", "testcase"
# what junitparser reads as a passed case's reruns (xunit2): a pass after them is flaky
_INTERIM = frozenset(t._tag for t in (FlakyFailure, FlakyError, RerunFailure, RerunError))


def _local(tag: Any) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


@dataclass
class _Tally:
    workdir: Path
    tests: int = 0
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    failing: list[str] = field(default_factory=list)
    seen: set[str] = field(default_factory=set)
    passing: list[str] = field(default_factory=list)
    flaky: list[str] = field(default_factory=list)
    items: list[Item] = field(default_factory=list)
    _module_files: dict[str, tuple[str, list[str]] | None] = field(default_factory=dict)

    def case_id(self, elem: ET.Element, file_attr: str | None) -> str:
        """``file::Class::name`` when the test file is known (pytest node ids), else
        ``classname.name``."""
        name = elem.get("name") or "<unnamed>"
        classname = elem.get("classname") or ""
        path = project_path(file_attr, str(self.workdir)) if file_attr else None
        if path:
            module = Path(path).with_suffix("").as_posix().replace("/", ".")
            rest = (
                classname[len(module) + 1 :].split(".")
                if classname.startswith(module + ".")
                else []
            )
            return "::".join([path, *[p for p in rest if p], name])
        if not classname:  # pytest's collection error: name is the module, dotted
            module = self._module_file(name)
            if module and not module[1]:
                return module[0]
        found = self._module_file(classname)
        if found:
            path, rest = found
            return "::".join([path, *rest, name])
        return f"{classname}.{name}" if classname else name

    def _module_file(self, classname: str) -> tuple[str, list[str]] | None:
        """pytest writes ``tests.test_x.TestC`` as classname: find ``tests/test_x.py``."""
        if not classname or "/" in classname or " " in classname:
            return None
        if classname in self._module_files:
            return self._module_files[classname]
        parts = classname.split(".")
        found = None
        for i in range(len(parts), 0, -1):
            candidate = "/".join(parts[:i]) + ".py"
            if (self.workdir / candidate).is_file():
                found = (candidate, parts[i:])
                break
        self._module_files[classname] = found
        return found

    def add_failure(self, case_id: str, item: Callable[[], Item]) -> None:
        """Count a failing case; its details are read only while fewer than _MAX_ITEMS
        are kept (beyond that it is named, not parsed)."""
        if case_id not in self.seen:
            self.seen.add(case_id)
            self.failing.append(case_id)
        if len(self.items) < _MAX_ITEMS:
            self.items.append(item())


def _result_item(
    tally: _Tally,
    case_id: str,
    result: Any,
    severity: str,
    file_attr: str | None,
    line_attr: str | None,
) -> Item:
    message = strip_ansi(result.message or "")
    text = strip_ansi(result.text or "")
    if not message and not text.strip():
        text = ""
    found = frames(text, str(tally.workdir)) if text else []  # read once, used twice
    file = project_path(file_attr, str(tally.workdir)) if file_attr else None
    line = None
    if found:
        file, line = found[0].file, found[0].line
    elif file and line_attr and line_attr.isdigit():
        line = int(line_attr) + 1  # pytest's line attribute is 0-based
    doctest = doctest_failure(text)
    if doctest is not None:
        headline, detail = doctest
    else:
        headline = first_assertion(message, text) or (result.type or severity)
        detail = key_lines(text, str(tally.workdir), found=found) if text.strip() else ""
    if detail.strip() == headline.strip():
        detail = ""
    return Item(
        id=case_id, message=headline, severity=severity, file=file, line=line, detail=detail
    )


def _on_case(tally: _Tally, elem: ET.Element) -> None:
    """Classify one ``<testcase>`` by the tags junitparser reads as results (anywhere
    inside it); junitparser's objects are built only for the failures kept in full."""
    tally.tests += 1
    if not len(elem):  # no result inside: passed, the common case, nothing to build
        tally.passed += 1
        tally.passing.append(tally.case_id(elem, elem.get("file")))
        return
    tags = {e.tag for e in elem.iter()}
    file_attr = elem.get("file")
    line_attr = elem.get("line")
    kind = "failure" if "failure" in tags else "error" if "error" in tags else None
    if kind is not None:
        if kind == "failure":
            tally.failed += 1
        else:
            tally.errors += 1
        cls = Failure if kind == "failure" else Error
        case_id = tally.case_id(elem, file_attr)
        tally.add_failure(
            case_id,
            lambda: _result_item(
                tally,
                case_id,
                cls.fromelem(next(elem.iter(kind))),
                kind,
                file_attr,
                line_attr,
            ),
        )
        return
    if "skipped" in tags:
        tally.skipped += 1
        return
    tally.passed += 1
    tally.passing.append(tally.case_id(elem, file_attr))
    if tags & _INTERIM:
        tally.flaky.append(tally.case_id(elem, file_attr))


def _on_suite(tally: _Tally, elem: ET.Element) -> None:
    """A suite-level ``<error>``/``<failure>`` (a suite that failed to start) is an error."""
    for child in list(elem):
        kind = _local(child.tag)
        if kind in ("error", "failure"):
            tally.errors += 1
            name = elem.get("name") or "<suite>"
            cls = Error if kind == "error" else Failure
            tally.add_failure(
                name,
                lambda cls=cls, child=child, name=name: _result_item(  # type: ignore[misc]
                    tally, name, cls.fromelem(child), "error", None, None
                ),
            )


def _scan(path: Path, tally: _Tally, shown: str) -> None:
    stack: list[str] = []  # local tag names of the open elements
    parents: list[ET.Element] = []  # the open suites (and the root), to drop children from
    names: dict[str, str] = {}  # tag -> local name, read once per distinct tag
    try:
        for event, elem in ET.iterparse(path, events=("start", "end")):
            raw = elem.tag
            tag = names.get(raw)
            if tag is None:
                tag = names[raw] = _local(raw)
            if event == "start":
                if not stack and tag not in ("testsuites", _SUITE):
                    raise ReportProblem(
                        f"{shown}: not a JUnit report (root element is <{tag}>, "
                        "expected <testsuites> or <testsuite>)"
                    )
                stack.append(tag)
                parents.append(elem)
                continue
            stack.pop()
            parents.pop()
            if tag == _CASE and stack[-1] in ("testsuites", _SUITE):
                _on_case(tally, elem)
            elif tag == _SUITE:
                _on_suite(tally, elem)
            else:
                continue
            if parents:  # done with it: drop it so memory stays bounded
                parents[-1].remove(elem)
    except ET.ParseError as exc:
        if "no element found" in str(exc) and tally.tests == 0 and not stack:
            raise ReportProblem(f"{shown}: not a JUnit report (no XML element found)") from None
        raise ReportProblem(
            f"{shown}: not well-formed XML ({exc}); the report may be truncated"
        ) from None
    except OSError as exc:
        raise ReportProblem(f"{shown}: cannot read: {exc.strerror or exc}") from None


class JUnitParser:
    """Test results from JUnit/xUnit XML."""

    name = NAME
    facts = FACTS
    empty_facts = EMPTY_FACTS

    def parse(self, data: ParseInput) -> Observation:
        try:
            path, shown = locate_report(data)
            tally = _Tally(workdir=data.workdir)
            _scan(path, tally, shown)
        except ReportProblem as exc:
            return unusable(NAME, data, str(exc), EMPTY_FACTS)
        return _observation(data, tally, shown)


def _observation(data: ParseInput, tally: _Tally, shown: str) -> Observation:
    counts = {
        "tests": tally.tests,
        "passed": tally.passed,
        "failed": tally.failed,
        "errors": tally.errors,
        "skipped": tally.skipped,
    }
    ran = tally.tests - tally.skipped
    bad = tally.failed + tally.errors
    ok = bad == 0 and ran > 0
    notes: list[str] = []
    if ran == 0 and bad == 0:
        notes.append(f"no tests ran ({shown} has {tally.tests} test case(s), all skipped or none)")
    if bad == 0 and data.exit_code not in (None, 0):
        ok = False
        notes.append(
            f"the test command exited {data.exit_code} but {shown} shows no failures "
            "(collection or setup errors?)"
        )
    summary = ", ".join(
        f"{v} {k}" for k, v in counts.items() if k != "tests" and (v or k == "passed")
    )
    header = f"tests: {summary} ({tally.tests} tests)"
    if tally.flaky:
        header += f"; flaky: {', '.join(tally.flaky[:5])}" + (
            " ..." if len(tally.flaky) > 5 else ""
        )
    limit = max_feedback(data)
    footer = ""
    if notes:
        footer = "\n".join(notes)
        if data.output and bad == 0:
            footer += "\n" + tail(data.output, limit // 2)
    extra_names = tally.failing[len(tally.items) :]
    items = list(tally.items) + [
        Item(id=i, message="(details not kept)", severity="failure") for i in extra_names[:5000]
    ]
    feedback = render(
        header, items, max_bytes=limit, footer=footer, noun="more failing", group=True
    )
    facts = {**counts, "failing": tally.failing, "passing": tally.passing, "flaky": tally.flaky}
    return Observation(
        parser=NAME,
        ok=ok,
        exit_code=data.exit_code,
        counts=freeze(counts),
        items=tuple(tally.items),
        signature=signature_of(tally.items),
        feedback=feedback,
        facts=freeze(facts),
        error=None,
    )
