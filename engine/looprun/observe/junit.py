"""JUnit/xUnit XML reports (pytest, Surefire, Gradle, jest-junit, go-junit-report, gotestsum,
PHPUnit, ctest, mocha, xUnit.net, nextest ...) into test counts, failing ids and feedback.

The file is streamed through expat as start and end tags, no tree is built: a case is
classified by the tags inside it, as junitparser classifies it, and only the failures kept
in full (the first 1,000) have their text read and become junitparser ``Failure``/``Error``
objects, so memory stays bounded by the number of *failing* tests, not the size of the
report. Counts come from the test cases actually present, not from the (often stale or
trimmed) ``tests=``/``failures=`` attributes.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.parsers import expat

from junitparser import Error, Failure
from junitparser.xunit2 import FlakyError, FlakyFailure, RerunError, RerunFailure

from looprun.data.freeze import freeze
from looprun.observe import declared_facts, raised_where
from looprun.observe.base import Item, Observation, ParseInput
from looprun.observe.feedback import render, strip_ansi, tail
from looprun.observe.outcome_channel import LISTED, disagreements
from looprun.observe.reports import (
    ReportProblem,
    locate_report,
    max_feedback,
    open_report,
    signature_of,
    unusable,
)
from looprun.observe.traceback import (
    Frame,
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
# pytest ends a failure's text with where it was raised: ``tests/test_x.py:12: ImportError``
_RAISED_AT = re.compile(r"^\S.*:\d+: ([A-Za-z_][\w.]*)$")
# a message that starts with the exception's name: ``mod.E: bad``, ``NameError: name ...``
_NAMED = re.compile(r"^([A-Za-z_][\w.]*): ")


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
    # (classname, name) -> the failing case's id
    failing_keys: dict[tuple[str, str], str] = field(default_factory=dict)
    seen: set[str] = field(default_factory=set)
    passing: list[str] = field(default_factory=list)
    flaky: list[str] = field(default_factory=list)
    items: list[Item] = field(default_factory=list)
    types: dict[str, str] = field(default_factory=dict)  # failing id -> exception name
    # failing id -> the project files its traceback runs through (workdir-relative)
    files: dict[str, list[str]] = field(default_factory=dict)
    # failing id -> the project frames of a native traceback, innermost first (failures
    # kept in full)
    frames: dict[str, list[Frame]] = field(default_factory=dict)
    _module_files: dict[str, tuple[str, list[str]] | None] = field(default_factory=dict)
    _prefixes: dict[tuple[str, str | None], str | None] = field(default_factory=dict)

    def case_id(self, name: str, classname: str, file_attr: str | None) -> str:
        """``file::Class::name`` when the test file is known (pytest node ids), else
        ``classname.name``. What precedes the name is worked out once per class."""
        key = (classname, file_attr)
        try:
            prefix = self._prefixes[key]
        except KeyError:
            prefix = self._prefixes[key] = self._prefix(classname, file_attr)
        if prefix is not None:
            return prefix + name
        module = self._module_file(name)  # pytest's collection error: name is the module
        if module and not module[1]:
            return module[0]
        return name

    def _prefix(self, classname: str, file_attr: str | None) -> str | None:
        """What goes before a test's name in its id; None when there is no class name
        (then the name alone decides)."""
        path = project_path(file_attr, str(self.workdir)) if file_attr else None
        if path:
            module = Path(path).with_suffix("").as_posix().replace("/", ".")
            rest = (
                classname[len(module) + 1 :].split(".")
                if classname.startswith(module + ".")
                else []
            )
            return "::".join([path, *[p for p in rest if p]]) + "::"
        if not classname:
            return None
        found = self._module_file(classname)
        if found:
            return "::".join([found[0], *found[1]]) + "::"
        return classname + "."

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

    @property
    def full(self) -> bool:
        return len(self.items) >= _MAX_ITEMS


def failure_type(type_attr: str | None, message: str, text: str) -> str:
    """The exception a failure raised, as its class name without the module (``E`` for
    ``mod.E``), or "" when the report does not say: the ``type`` attribute most producers
    write, else the ``file:line: Name`` line pytest ends the text with, else the name the
    message starts with; a bare ``assert ...`` message is an ``AssertionError``."""
    name = (type_attr or "").strip()
    if not name:
        lines = text.rstrip().splitlines()
        found = _RAISED_AT.match(lines[-1].strip()) if lines else None
        found = found or _NAMED.match(message.strip())
        if found:
            name = found.group(1)
        elif message.lstrip().startswith("assert"):
            name = "AssertionError"
    return name.rsplit(".", 1)[-1]


def traceback_files(found: list[Frame], test_file: str | None) -> list[str]:
    """The project files a failure ran through (its frames and the test's own file, when
    the report names it), each once: what a condition compares with the files a run
    changed, so a failure in code the run edited is the run's to fix."""
    files = set(f.file for f in found)
    if test_file:
        files.add(test_file)
    return sorted(files)


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
    tally.types.setdefault(case_id, failure_type(result.type, message, text))
    tally.files.setdefault(case_id, traceback_files(found, file))
    native = raised_where.native_frames(message, text, str(tally.workdir)) if text else None
    if native is not None:
        tally.frames.setdefault(case_id, native)
    return Item(
        id=case_id, message=headline, severity=severity, file=file, line=line, detail=detail
    )


class _Result:
    """A ``<failure>``/``<error>`` element as junitparser sees it: its attributes and its
    text before any child element (the element is rebuilt only if its item is kept)."""

    __slots__ = ("attrib", "parts", "tag")

    def __init__(self, tag: str, attrib: dict[str, str]):
        self.tag = tag
        self.attrib = attrib
        self.parts: list[str] = []

    def element(self) -> ET.Element:
        elem = ET.Element(self.tag, self.attrib)
        if self.parts:
            elem.text = "".join(self.parts)
        return elem


class _Inner:
    """What a ``<testcase>`` holds, once it holds anything: every tag inside it and the
    first result element of each kind."""

    __slots__ = ("results", "tags")

    def __init__(self) -> None:
        self.tags: set[str] = set()
        self.results: dict[str, _Result] = {}


class _Scan:
    """Handlers for expat: the report is read as a stream of start and end tags, without
    building a tree. A passing ``<testcase/>`` costs a counter and its id; the tags inside
    other cases classify them as junitparser would (``failure``/``error``/``skipped``
    anywhere inside, xunit2 rerun/flaky tags); character data is delivered only while a
    kept result's text is read (expat skips it everywhere else)."""

    def __init__(self, tally: _Tally, shown: str, parser: Any):
        self.tally = tally
        self.shown = shown
        self.parser = parser
        self.stack: list[str] = []  # local tag names of the open elements
        self.names: dict[str, str] = {_CASE: _CASE}  # tag -> local name, once per tag
        self.case: dict[str, str] | None = None  # the open case's attributes
        self.inner: _Inner | None = None  # what it holds, if anything
        self.case_depth = 0
        self.text: _Result | None = None  # the result whose text is being read
        self.text_depth = 0
        self.suites: list[tuple[str, list[_Result]]] = []  # per open suite: its results

    def _read_text(self, result: _Result | None, depth: int = 0) -> None:
        self.text, self.text_depth = result, depth
        self.parser.CharacterDataHandler = None if result is None else result.parts.append

    def start(self, tag: str, attrib: dict[str, str]) -> None:
        stack = self.stack
        if self.text is not None:  # an element's text is what precedes its first child
            self._read_text(None)
        if self.case is not None:
            inner = self.inner
            if inner is None:
                inner = self.inner = _Inner()
            inner.tags.add(tag)
            if tag in ("failure", "error") and tag not in inner.results:
                result = inner.results[tag] = _Result(tag, attrib)
                if not self.tally.full:
                    self._read_text(result, len(stack) + 1)
            stack.append("")
            return
        local = self.names.get(tag)
        if local is None:
            local = self.names[tag] = _local(tag)
        if local == _CASE and stack and stack[-1] in ("testsuites", _SUITE):
            self.case = attrib
            self.case_depth = len(stack) + 1
        elif local == _SUITE:
            self.suites.append((attrib.get("name") or "<suite>", []))
        elif local in ("error", "failure") and stack and stack[-1] == _SUITE:
            result = _Result(local, attrib)
            self.suites[-1][1].append(result)
            self._read_text(result, len(stack) + 1)
        elif not stack and local != "testsuites":
            raise ReportProblem(
                f"{self.shown}: not a JUnit report (root element is <{local}>, "
                "expected <testsuites> or <testsuite>)"
            )
        stack.append(local)

    def end(self, tag: str) -> None:
        stack = self.stack
        depth = len(stack)
        local = stack.pop()
        if self.text is not None and depth == self.text_depth:
            self._read_text(None)
        if self.case is not None:
            if depth == self.case_depth:
                attrib, inner = self.case, self.inner
                self.case = self.inner = None
                self.tally.tests += 1
                # nothing inside (the common case) is a pass without looking further
                if inner is None or _on_case(self.tally, attrib, inner):
                    self.tally.passed += 1
                    self.tally.passing.append(
                        self.tally.case_id(
                            attrib.get("name") or "<unnamed>",
                            attrib.get("classname") or "",
                            attrib.get("file"),
                        )
                    )
        elif local == _SUITE:
            name, results = self.suites.pop()
            for result in results:
                _on_suite_result(self.tally, name, result)


def _on_case(tally: _Tally, attrib: dict[str, str], inner: _Inner) -> bool:
    """Classify a ``<testcase>`` that holds elements; True when it passed.
    junitparser's objects are built only for the failures kept in full."""
    tags = inner.tags
    kind = "failure" if "failure" in tags else "error" if "error" in tags else None
    if kind is not None:
        if kind == "failure":
            tally.failed += 1
        else:
            tally.errors += 1
        cls = Failure if kind == "failure" else Error
        result = inner.results[kind]
        file_attr, line_attr = attrib.get("file"), attrib.get("line")
        name, classname = attrib.get("name") or "<unnamed>", attrib.get("classname") or ""
        case_id = tally.case_id(name, classname, file_attr)
        tally.failing_keys.setdefault((classname, name), case_id)
        tally.add_failure(
            case_id,
            lambda: _result_item(
                tally, case_id, cls.fromelem(result.element()), kind, file_attr, line_attr
            ),
        )
        return False
    if "skipped" in tags:
        tally.skipped += 1
        return False
    if tags & _INTERIM:
        name, classname = attrib.get("name") or "<unnamed>", attrib.get("classname") or ""
        tally.flaky.append(tally.case_id(name, classname, attrib.get("file")))
    return True


def _on_suite_result(tally: _Tally, name: str, result: _Result) -> None:
    """A suite-level ``<error>``/``<failure>`` (a suite that failed to start) is an error."""
    tally.errors += 1
    cls = Error if result.tag == "error" else Failure
    tally.add_failure(
        name, lambda: _result_item(tally, name, cls.fromelem(result.element()), "error", None, None)
    )


def _scan(path: Path, tally: _Tally, shown: str) -> None:
    # namespaced tags read as ElementTree spells them without the brace: "uri}local"
    parser = expat.ParserCreate(namespace_separator="}")
    scan = _Scan(tally, shown, parser)
    parser.buffer_text = True  # one call per text run, not one per line or entity
    parser.buffer_size = 1 << 16
    parser.StartElementHandler = scan.start
    parser.EndElementHandler = scan.end
    try:
        with open_report(path, shown) as fh:
            parser.ParseFile(fh)
    except expat.ExpatError as exc:
        if "no element found" in str(exc) and tally.tests == 0 and not scan.stack:
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
        if data.options.get(LISTED) is True:
            return _listing(data, tally, shown)
        return _observation(data, tally, shown)


def _listing(data: ParseInput, tally: _Tally, shown: str) -> Observation:
    """A command that listed its tests without running them (``LISTED``): the fact
    ``listed`` holds their ids, each made from its JUnit name exactly as a run's report
    makes it, so the two compare. A list that cannot be read whole is an error, never a
    shorter list: the caller then runs the tests instead."""
    said = data.outcomes
    why = ""
    if said is None or not said.started:
        why = "the outcome plugin never reported"
    elif said.overflow or said.malformed or said.failed:
        why = "the outcome channel carried more than a list of tests"
    elif said.listed is None or said.listed != len(said.collected):
        why = "the list of tests is not whole"
    elif data.exit_code != 0 or data.timed_out:
        why = f"the command exited {data.exit_code}"
    elif tally.failed or tally.errors:
        why = f"{shown} shows collection errors"
    if why:
        message = f"the tests could not be listed: {why}"
        return Observation(parser=NAME, ok=False, error=message, feedback=message)
    ids = [tally.case_id(name, classname, where) for classname, name, where in said.collected]
    return Observation(parser=NAME, ok=True, exit_code=0, facts=freeze({LISTED: ids}))


def _tampering(data: ParseInput, tally: _Tally, shown: str, ran: int, bad: int) -> str:
    """Why the report, the exit code and the outcome channel disagree ('' when they do not).

    A pytest suite that exits 1 (tests failed) with a report where every test that ran
    passed was rewritten somewhere between the tests and the file; so was one where the
    channel saw a failure the report or the exit code does not show."""
    problems: list[str] = []
    pytest = data.options.get("outcome_channel") == "pytest"
    if pytest and data.exit_code == 1 and bad == 0 and ran > 0:
        problems.append(f"the test command exited 1 (tests failed) but {shown} shows none failing")
    if data.outcomes is not None:
        problems += disagreements(
            data.outcomes, set(tally.failing_keys), set(tally.failing), data.exit_code
        )
    return "; ".join(problems)


def _by_case(data: ParseInput, tally: _Tally, said: Mapping[str, Any]) -> dict[str, Any]:
    """``said`` (the outcome channel's, by node id) keyed by the report's failing ids,
    matched through the JUnit key (or the node id)."""
    outcomes = data.outcomes
    if outcomes is None:
        return {}
    failing = set(tally.failing)
    out: dict[str, Any] = {}
    for test, value in said.items():
        key = outcomes.failed.get(test)
        case_id = tally.failing_keys.get(key) if key else None
        if case_id is None and test in failing:
            case_id = test
        if case_id is not None:
            out.setdefault(case_id, value)
    return out


def _exercised(data: ParseInput, tally: _Tally) -> dict[str, list[str]]:
    """Each failing id the outcome channel watched -> the project files its body ran
    code from."""
    if data.outcomes is None:
        return {}
    return {k: list(v) for k, v in _by_case(data, tally, data.outcomes.exercised).items()}


def _self_raised(data: ParseInput, tally: _Tally) -> dict[str, str]:
    """Each failing id whose failure the test raised itself (not the code under test, nor
    an assertion on what it returned) -> why: as the outcome channel said, and with the
    ``judge_raised`` option as looprun judges it from the report's traceback and the
    tree's files (a report from a process with no looprun module in it)."""
    said = dict(_by_case(data, tally, data.outcomes.self_raised)) if data.outcomes else {}
    if data.options.get("judge_raised") is True:
        for case_id, found in tally.frames.items():
            why = raised_where.self_raised(found, data.workdir) if case_id not in said else ""
            if why:
                said[case_id] = why
    return said


def _failure_files(
    traced: dict[str, list[str]], exercised: dict[str, list[str]]
) -> dict[str, list[str]]:
    """Each failing id -> the project files it ran through: its traceback's frames and,
    where the outcome channel watched it, the files its body called into. A failure that
    is an assertion on a returned value has only the test file in its traceback; what its
    body called is where the bug it shows lives."""
    if not exercised:
        return traced
    out = dict(traced)
    for case_id, files in exercised.items():
        out[case_id] = sorted({*out.get(case_id, ()), *files})
    return out


def _observation(data: ParseInput, tally: _Tally, shown: str) -> Observation:
    exercised = _exercised(data, tally)
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
    tampering = _tampering(data, tally, shown, ran, bad)
    if tampering:
        ok = False
        notes.append(f"the test outcome was tampered with: {tampering}")
    elif bad == 0 and data.exit_code not in (None, 0):
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
        header,
        items,
        max_bytes=limit,
        footer=footer,
        noun="more failing",
        group=True,
        unlisted=max(0, len(extra_names) - 5000),
    )
    facts = {
        **counts,
        "failing": tally.failing,
        "passing": tally.passing,
        "flaky": tally.flaky,
        "failure_types": tally.types,
        "exercised": exercised,
        "self_raised": _self_raised(data, tally),
        "failure_files": _failure_files(tally.files, exercised),
        "consistent": not tampering,
        "tampering": tampering,
    }
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
