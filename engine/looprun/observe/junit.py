"""JUnit/xUnit XML reports (pytest, Surefire, Gradle, jest-junit, go-junit-report, gotestsum,
PHPUnit, ctest, mocha, xUnit.net, nextest ...) into test counts, failing ids and feedback.

The file is streamed: each ``<testcase>`` is read through junitparser's element classes
and then dropped, so memory stays bounded by the number of *failing* tests, not the size
of the report. Counts come from the test cases actually present, not from the (often
stale or trimmed) ``tests=``/``failures=`` attributes.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from junitparser import Error, Failure, Skipped
from junitparser.xunit2 import FlakyError, FlakyFailure, RerunError, RerunFailure, TestCase

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
    innermost,
    key_lines,
    project_path,
)
from looprun.template.expressions import freeze

NAME = "junit"
EMPTY_FACTS = declared_facts.JUNIT
FACTS = frozenset(EMPTY_FACTS)
_MAX_ITEMS = 1000  # failing items kept in full; the rest are only counted and named
_SUITE, _CASE = "testsuite", "testcase"


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
    flaky: list[str] = field(default_factory=list)
    items: list[Item] = field(default_factory=list)
    _module_files: dict[str, tuple[str, list[str]] | None] = field(default_factory=dict)

    def case_id(self, case: TestCase, file_attr: str | None) -> str:
        """``file::Class::name`` when the test file is known (pytest node ids), else
        ``classname.name``."""
        name = case.name or "<unnamed>"
        classname = case.classname or ""
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

    def add_failure(self, item: Item) -> None:
        if item.id not in self.seen:
            self.seen.add(item.id)
            self.failing.append(item.id)
        if len(self.items) < _MAX_ITEMS:
            self.items.append(item)


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
    frame = innermost(text, str(tally.workdir)) if text else None
    file = project_path(file_attr, str(tally.workdir)) if file_attr else None
    line = None
    if frame is not None:
        file, line = frame.file, frame.line
    elif file and line_attr and line_attr.isdigit():
        line = int(line_attr) + 1  # pytest's line attribute is 0-based
    doctest = doctest_failure(text)
    if doctest is not None:
        headline, detail = doctest
    else:
        headline = first_assertion(message, text) or (result.type or severity)
        detail = key_lines(text, str(tally.workdir)) if text.strip() else ""
    if detail.strip() == headline.strip():
        detail = ""
    return Item(
        id=case_id, message=headline, severity=severity, file=file, line=line, detail=detail
    )


def _on_case(tally: _Tally, elem: ET.Element) -> None:
    case = TestCase.fromelem(elem)
    tally.tests += 1
    file_attr = elem.get("file")
    line_attr = elem.get("line")
    finals = [r for r in case.result]
    errors = [r for r in finals if isinstance(r, Error)]
    failures = [r for r in finals if isinstance(r, Failure)]
    if errors or failures:
        case_id = tally.case_id(case, file_attr)
        if failures:
            tally.failed += 1
            tally.add_failure(
                _result_item(tally, case_id, failures[0], "failure", file_attr, line_attr)
            )
        else:
            tally.errors += 1
            tally.add_failure(
                _result_item(tally, case_id, errors[0], "error", file_attr, line_attr)
            )
        return
    if any(isinstance(r, Skipped) for r in finals):
        tally.skipped += 1
        return
    tally.passed += 1
    if (
        case.interim_result
        and any(isinstance(r, (FlakyFailure, FlakyError)) for r in case.interim_result)
    ) or any(isinstance(r, (RerunFailure, RerunError)) for r in case.interim_result):
        tally.flaky.append(tally.case_id(case, file_attr))


def _on_suite(tally: _Tally, elem: ET.Element) -> None:
    """A suite-level ``<error>``/``<failure>`` (a suite that failed to start) is an error."""
    for child in list(elem):
        kind = _local(child.tag)
        if kind in ("error", "failure"):
            tally.errors += 1
            name = elem.get("name") or "<suite>"
            result = (Error if kind == "error" else Failure).fromelem(child)
            tally.add_failure(_result_item(tally, name, result, "error", None, None))


def _scan(path: Path, tally: _Tally, shown: str) -> None:
    stack: list[ET.Element] = []
    try:
        for event, elem in ET.iterparse(path, events=("start", "end")):
            tag = _local(elem.tag)
            if event == "start":
                if not stack and tag not in ("testsuites", _SUITE):
                    raise ReportProblem(
                        f"{shown}: not a JUnit report (root element is <{tag}>, "
                        "expected <testsuites> or <testsuite>)"
                    )
                stack.append(elem)
                continue
            stack.pop()
            if tag == _CASE and _local(stack[-1].tag) in ("testsuites", _SUITE):
                _on_case(tally, elem)
            elif tag == _SUITE:
                _on_suite(tally, elem)
            else:
                continue
            if stack:  # done with it: drop it so memory stays bounded
                stack[-1].remove(elem)
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
    facts = {**counts, "failing": tally.failing, "flaky": tally.flaky}
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
