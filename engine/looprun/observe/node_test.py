"""Node's built-in test runner (``node --test``): looprun's reporter stream, checked against
node's own JUnit report and the exit code.

The pack runs the suite with two reporters in the runner's parent process (the test files
run in child processes): looprun's ``node_reporter/looprun_outcome.mjs``, which writes one
JSON record per finished test (file, suite path, name, the thrown error's class, message,
stack, expected/actual), and node's ``junit`` reporter, written beside it with the same
name and ``.xml``. Node's JUnit has no file attribute and calls every failure
``testCodeFailure``, so ids, places and failure types come from the reporter's records;
the JUnit report and the exit code are the second and third witnesses: a test failing on
the stream that the JUnit does not show failing, failures with exit 0, or a stream that
stops before the run ended are tampering, never a pass.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from looprun.observe import declared_facts
from looprun.observe.base import Item, Observation, ParseInput
from looprun.observe.feedback import strip_ansi
from looprun.observe.reports import (
    MAX_REPORT_BYTES,
    ReportProblem,
    locate_report,
    open_report,
    unusable,
)
from looprun.observe.suite import suite_observation, summary_line

NAME = "node_test"
EMPTY_FACTS = declared_facts.JUNIT
FACTS = frozenset(EMPTY_FACTS)
REPORTER = Path(__file__).resolve().parent / "node_reporter" / "looprun_outcome.mjs"
_MAX_ITEMS = 1000
# what a test body's own failure is; anything else (a failing hook, a cancelled test, a
# file that did not load) is an error of the suite, not a test that failed
_TEST_FAILURES = frozenset(
    {
        "testCodeFailure",
        "testTimeoutFailure",
        "uncaughtException",
        "unhandledRejection",
        "callbackAndPromisePresent",
    }
)
_FAILURE_TYPE_NAMES = {"testTimeoutFailure": "Timeout", "cancelledByParent": "Cancelled"}
_ERROR_LINE = re.compile(r"^([A-Z][\w$]*(?:Error|Exception))\b(?: \[\w+\])?:")


@dataclass
class _Stream:
    """What the reporter's records said, in order."""

    started: bool = False
    ended: bool = False
    runner: str = "node"  # "vitest" when looprun's vitest reporter wrote the records
    records: list[dict[str, Any]] = field(default_factory=list)
    malformed: int = 0


def _read_stream(path: Path, shown: str) -> _Stream:
    stream = _Stream()
    with open_report(path, shown) as fh:
        raw = fh.read(MAX_REPORT_BYTES + 1)
    if len(raw) > MAX_REPORT_BYTES:
        raise ReportProblem(f"{shown}: larger than {MAX_REPORT_BYTES >> 20} MB, not read")
    for line in raw.decode("utf-8", "replace").splitlines():
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:
            stream.malformed += 1
            continue
        if not isinstance(record, dict):
            stream.malformed += 1
            continue
        event = record.get("event")
        if event == "start" and record.get("reporter") == "looprun-node":
            stream.started = True
            runner = record.get("runner")
            stream.runner = runner if runner in ("vitest", "jest") else "node"
        elif event == "end":
            stream.ended = True
        elif event in ("pass", "fail") and stream.started:
            stream.records.append(record)
        else:
            stream.malformed += 1
    if not stream.started:
        raise ReportProblem(f"{shown}: not written by looprun's node reporter (no start record)")
    return stream


def _junit_failing(path: Path) -> tuple[Counter[str], str]:
    """The names of the failing ``<testcase>`` elements of node's JUnit report, and why it
    could not be read ('' when it could)."""
    shown = path.name
    try:
        with open_report(path, shown) as fh:
            root = ET.parse(fh).getroot()
    except ReportProblem as exc:
        return Counter(), str(exc)
    except (ET.ParseError, OSError) as exc:
        return Counter(), f"{shown}: not readable XML ({exc})"
    if root.tag not in ("testsuites", "testsuite"):
        return Counter(), f"{shown}: not a JUnit report (root <{root.tag}>)"
    failing: Counter[str] = Counter()
    for case in root.iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            failing[case.get("name") or ""] += 1
    return failing, ""


def _jest_failing(path: Path) -> tuple[Counter[str], str]:
    """The failing tests of jest's own results file (``--json --outputFile``), by the name
    looprun's jest reporter gives them (``fullName``; a file that did not run: its path),
    and why it could not be read ('' when it could)."""
    shown = path.name
    try:
        with open_report(path, shown) as fh:
            raw = fh.read(MAX_REPORT_BYTES + 1)
        if len(raw) > MAX_REPORT_BYTES:
            return Counter(), f"{shown}: larger than {MAX_REPORT_BYTES >> 20} MB, not read"
        doc = json.loads(raw)
    except ReportProblem as exc:
        return Counter(), str(exc)
    except (ValueError, OSError) as exc:
        return Counter(), f"{shown}: not readable JSON ({exc})"
    files = doc.get("testResults") if isinstance(doc, dict) else None
    if not isinstance(files, list):
        return Counter(), f"{shown}: not jest's results (no testResults)"
    failing: Counter[str] = Counter()
    for result in files:
        if not isinstance(result, dict):
            continue
        cases = [c for c in result.get("assertionResults") or [] if isinstance(c, dict)]
        bad = [c for c in cases if c.get("status") == "failed"]
        for case in bad:
            failing[str(case.get("fullName") or "")] += 1
        if result.get("status") == "failed" and not bad:
            failing[str(result.get("name") or "")] += 1  # the file did not run
    return failing, ""


def _text(record: dict[str, Any], key: str) -> str:
    value = record.get(key)
    return strip_ansi(value) if isinstance(value, str) else ""


def failure_type(record: dict[str, Any]) -> str:
    """Empty for an assertion (``AssertionError``/``ERR_ASSERTION``), else the thrown error's
    class name; a file that did not load has the name its stderr shows (``SyntaxError``)."""
    name = _text(record, "error_name").split(" ", 1)[0]
    if name == "AssertionError" or record.get("error_code") == "ERR_ASSERTION":
        return ""
    kind = _text(record, "failure_type")
    if kind in _FAILURE_TYPE_NAMES:
        return _FAILURE_TYPE_NAMES[kind]
    if name:
        return name
    if record.get("whole_file"):
        for line in _text(record, "stderr").splitlines():
            found = _ERROR_LINE.match(line.strip())
            if found:
                return found.group(1)
        return "LoadError"
    return "Thrown"  # a value that is not an Error (``throw "text"``)


def _location(record: dict[str, Any]) -> tuple[str | None, int | None]:
    at = record.get("at")
    if isinstance(at, dict) and isinstance(at.get("file"), str) and isinstance(at.get("line"), int):
        return at["file"], at["line"]
    file = record.get("file") if isinstance(record.get("file"), str) else None
    line = record.get("line") if isinstance(record.get("line"), int) else None
    return file or None, line


def _project_frames(record: dict[str, Any], limit: int = 4) -> list[str]:
    """The stack's lines that point into the project (paths relative to its root), as the
    reporter picked them."""
    frames = record.get("frames")
    if not isinstance(frames, list):
        return []
    return [strip_ansi(str(f))[:300] for f in frames[:limit]]


def _headline(record: dict[str, Any], kind: str) -> str:
    lines = [x.strip() for x in _text(record, "message").splitlines() if x.strip()]
    message = " | ".join(lines)[:400] or _text(record, "failure_type") or "failed"
    return f"{kind}: {message}" if kind else message


def _detail(record: dict[str, Any]) -> str:
    parts: list[str] = []
    if "expected" in record or "actual" in record:
        parts.append(f"expected: {_text(record, 'expected')[:300]}")
        parts.append(f"actual:   {_text(record, 'actual')[:300]}")
    if record.get("whole_file"):
        err = [x for x in _text(record, "stderr").splitlines() if x.strip()][:6]
        parts.extend(err)
    else:
        parts.extend(_project_frames(record))
    return "\n".join(parts)


def case_id(record: dict[str, Any]) -> str:
    """``file::suite::name`` (the file relative to the package's root)."""
    file = record.get("file") if isinstance(record.get("file"), str) else ""
    if record.get("whole_file"):
        return file or "<file>"
    path = [str(p) for p in record.get("path") or []] or ["<unnamed>"]
    return "::".join([file, *path]) if file else "::".join(path)


@dataclass
class _Tally:
    tests: int = 0
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    failing: list[str] = field(default_factory=list)
    passing: list[str] = field(default_factory=list)
    items: list[Item] = field(default_factory=list)
    types: dict[str, str] = field(default_factory=dict)
    files: dict[str, list[str]] = field(default_factory=dict)
    stream_failing: Counter[str] = field(default_factory=Counter)  # names, as the JUnit has them
    hidden_files: list[str] = field(default_factory=list)  # files that ran no test
    focused_files: set[str] = field(default_factory=set)  # files that focus tests (jest)


def _parents(records: list[dict[str, Any]]) -> set[tuple[str, tuple[str, ...]]]:
    """Tests with subtests (reported after their children): not tests of their own."""
    out: set[tuple[str, tuple[str, ...]]] = set()
    for r in records:
        path = tuple(str(p) for p in r.get("path") or [])
        if len(path) > 1:
            out.add((str(r.get("file")), path[:-1]))
    return out


def _junit_name(record: dict[str, Any], runner: str) -> str:
    """The name the runner's own report gives this test: node's JUnit its own name (a file
    that did not load: its absolute path), vitest's JUnit the suites and name joined by
    ``>`` (a file that did not load: its path), jest's results file its ``fullName`` (a
    file that did not run: its absolute path)."""
    path = [str(p) for p in record.get("path") or []]
    if runner == "jest":
        return path[0] if record.get("whole_file") and path else str(record.get("junit_name"))
    if runner == "vitest":
        return str(record.get("file")) if record.get("whole_file") else " > ".join(path)
    return path[-1] if path else ""


def _tally(records: list[dict[str, Any]], runner: str = "node") -> _Tally:
    tally = _Tally()
    # node reports a suite like a test, after its tests; jest reports tests only, so a
    # test named like a suite beside it is a test
    parents = _parents(records) if runner == "node" else set()
    for r in records:
        failed = r.get("event") == "fail"
        kind = _text(r, "failure_type")
        is_parent = (str(r.get("file")), tuple(str(p) for p in r.get("path") or [])) in parents
        # a suite's own failure counts only when it is not its tests' (a failing hook)
        if (r.get("suite") or is_parent) and (not failed or kind in ("subtestsFailed", "")):
            continue
        if r.get("whole_file") and not failed:
            # a file that ended without reporting a test: a helper, or a process that quit
            tally.hidden_files.append(str(r.get("file")))
            continue
        tid = case_id(r)
        tally.tests += 1
        if r.get("focused"):
            tally.focused_files.add(str(r.get("file")))
        if r.get("todo") or (r.get("skip") and not failed):
            tally.skipped += 1
            continue
        if not failed:
            tally.passed += 1
            tally.passing.append(tid)
            continue
        error = r.get("whole_file") or r.get("suite") or kind not in _TEST_FAILURES
        if error:
            tally.errors += 1
        else:
            tally.failed += 1
        tally.stream_failing[_junit_name(r, runner)] += 0 if r.get("suite") else 1
        if tid not in tally.types:
            tally.failing.append(tid)
        ftype = failure_type(r)
        tally.types.setdefault(tid, ftype)
        file, line = _location(r)
        own = r.get("file") if isinstance(r.get("file"), str) else None
        tally.files.setdefault(tid, sorted({f for f in (file, own) if f and not f.startswith("/")}))
        if len(tally.items) < _MAX_ITEMS:
            tally.items.append(
                Item(
                    id=tid,
                    message=_headline(r, ftype),
                    severity="error" if error else "failure",
                    file=file,
                    line=line,
                    detail=_detail(r),
                )
            )
    # an id both passing and failing (two tests of one name, or a record a test appended
    # to the stream for itself) is failing: a pass never hides a failure
    failing = set(tally.failing)
    tally.passing = [t for t in tally.passing if t not in failing]
    return tally


def _tampering(data: ParseInput, stream: _Stream, tally: _Tally, junit: Path) -> list[str]:
    """Where the stream, the runner's own report (JUnit; jest's results file) and the exit
    code disagree."""
    problems: list[str] = []
    bad = tally.failed + tally.errors
    if bad and data.exit_code == 0:
        problems.append(f"{bad} test(s) failed but the test command exited 0")
    if not stream.ended and data.exit_code == 0:
        problems.append("the reporter's stream stopped before the test run ended")
    if stream.malformed:
        problems.append(f"{stream.malformed} record(s) on the reporter's stream were not its own")
    if data.exit_code is None or not junit.name:
        return problems
    if stream.runner == "jest":
        failing, problem = _jest_failing(junit.with_suffix(".json"))
        witness, what = "jest's results file", "jest's results file"
    else:
        failing, problem = _junit_failing(junit)
        witness, what = junit.name, "the runner's JUnit report"
    if problem:
        problems.append(f"{what} cannot be read: {problem}")
        return problems
    missing = +(tally.stream_failing - failing)
    if missing:
        names = ", ".join(sorted(missing)[:10])
        problems.append(f"failing on the runner's stream but not in {witness}: {names}")
    if stream.runner == "jest":
        # jest writes its results file itself: a failure there that looprun's reporter
        # never saw means the stream lost it
        unseen = +(failing - tally.stream_failing)
        if unseen:
            names = ", ".join(sorted(unseen)[:10])
            problems.append(f"failing in {witness} but not on the runner's stream: {names}")
    return problems


class NodeTestParser:
    """Test results of ``node --test`` from looprun's reporter, cross-checked."""

    name = NAME
    facts = FACTS
    empty_facts = EMPTY_FACTS

    def parse(self, data: ParseInput) -> Observation:
        try:
            path, shown = locate_report(data)
            stream = _read_stream(path, shown)
        except ReportProblem as exc:
            hint = (
                " (does the test script run `node --test` and keep NODE_OPTIONS, which "
                "carries the reporters, or vitest or jest as the input `runner` says?)"
            )
            return unusable(NAME, data, str(exc) + hint, EMPTY_FACTS)
        tally = _tally(stream.records, stream.runner)
        return _observation(data, stream, tally, shown, path.with_suffix(".xml"))


def _observation(
    data: ParseInput, stream: _Stream, tally: _Tally, shown: str, junit: Path
) -> Observation:
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
        notes.append(f"no tests ran ({tally.tests} test(s), all skipped or none)")
    if tally.focused_files:
        notes.append(
            "test files that focus tests (fit, fdescribe, .only: the rest of the file does "
            "not run), whose tests count as not passing: "
            + ", ".join(sorted(tally.focused_files)[:10])
        )
    if tally.hidden_files:
        notes.append(
            "test files that reported no test (helpers, or a process that exited early): "
            + ", ".join(sorted(tally.hidden_files)[:10])
        )
    problems = _tampering(data, stream, tally, junit)
    tampering = "; ".join(problems)
    if tampering:
        ok = False
        notes.append(f"the test outcome was tampered with: {tampering}")
    elif not stream.ended:
        ok = False
        notes.append("the test run ended before the runner finished (killed or crashed?)")
    elif bad == 0 and data.exit_code not in (None, 0):
        ok = False
        notes.append(f"the test command exited {data.exit_code} but the runner reported no failure")
    return suite_observation(
        NAME,
        data,
        header=f"tests: {summary_line(counts)} ({tally.tests} tests)",
        counts=counts,
        items=tally.items,
        failing=tally.failing,
        passing=tally.passing,
        types=tally.types,
        files=tally.files,
        notes=notes,
        ok=ok,
        tampering=tampering,
        flaky=(),
        output=None,
    )
