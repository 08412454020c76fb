"""Maven Surefire: every ``TEST-*.xml`` report of a build, cross-checked with Maven's summary.

Surefire writes one JUnit-style report per test class under each module's
``target/surefire-reports/``; the forked test JVM can reach those files. Maven's own JVM
prints the summary of each module (``[ERROR] Tests run: 3, Failures: 1, Errors: 0,
Skipped: 0`` after ``[INFO] Results:``), which the tests cannot rewrite once their output
goes to files (``-Dmaven.test.redirectTestOutputToFile=true``, which the pack passes). The
reports, the summary and the exit code are compared: a disagreement is ``consistent:
false``. A build whose sources do not compile yields one error item per ``javac`` message
(``CompilationFailure``) with the repository-relative file:line; a build that fails before
its tests and prints neither reports nor a summary is an unusable observation, never a pass.

Ids are Maven's own: ``com.acme.FooTest.method``. A test body that throws (Surefire's
``<error>``) counts as *failed* like an assertion, as pytest counts it; ``errors`` is kept
for what stops tests from running (compilation, a class that cannot start).
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from looprun.data.value import valueclass
from looprun.observe import declared_facts
from looprun.observe.base import Item, Observation, ParseInput
from looprun.observe.feedback import strip_ansi
from looprun.observe.reports import (
    ReportProblem,
    display_path,
    open_report,
    unusable,
)
from looprun.observe.suite import suite_observation, summary_line

NAME = "surefire"
EMPTY_FACTS = declared_facts.JUNIT
FACTS = frozenset(EMPTY_FACTS)
COMPILATION = "CompilationFailure"
_MAX_ITEMS = 1000
_MAX_REPORTS = 20_000
_MAX_FILES = 8  # project files kept per failure
_DETAIL_FRAMES = 6
_MAX_TRACE = 64_000  # of a failure's stack trace: the innermost frames come first
# assertion failures of JUnit 4/5, opentest4j and the JDK carry no type of their own
ASSERTIONS = frozenset(
    {"AssertionError", "AssertionFailedError", "ComparisonFailure", "MultipleFailuresError"}
)
_NOT_SOURCES = frozenset({"target", "build", "node_modules"})
_PRUNE = frozenset({".git", "node_modules", ".mvn", ".gradle", "src"})
_SUMMARY = re.compile(
    r"^\[(?:INFO|WARNING|ERROR)\] Tests run: (\d+), Failures: (\d+), Errors: (\d+), "
    r"Skipped: (\d+)(?:, Flakes: (\d+))?\s*$"
)
_RESULTS = re.compile(r"^\[INFO\] Results:\s*$")
# [ERROR] /abs/src/main/java/com/acme/Foo.java:[12,5] cannot find symbol
_JAVAC = re.compile(
    r"^\[ERROR\] (?P<file>\S.*?\.java):\[(?P<line>\d+)(?:,(?P<col>\d+))?\] (?P<msg>.*)$"
)
_FAILED_GOAL = re.compile(r"^\[ERROR\] (Failed to execute goal .*|.*BUILD FAILURE.*)$")
_FRAME = re.compile(
    # `at com.acme.Foo.bar(Foo.java:12)`, with a module or loader before it: `app//`
    r"^\s*at (?:[\w.$@-]*/)*(?P<cls>[\w.$]+)\.(?P<meth>[\w$<>]+)"
    r"\((?P<src>[\w$]+\.java):(?P<line>\d+)\)"
)
_CUT = re.compile(r"^\[\.\.\. \d+ bytes of output cut \.\.\.\]$", re.M)
_INTERIM = frozenset({"flakyFailure", "flakyError", "rerunFailure", "rerunError"})


@dataclass
class _Sources:
    """The project's ``.java`` files by their package path (``com/acme/Foo.java``), to
    turn a stack frame into a repository path; read once per parse."""

    workdir: Path
    by_package: dict[str, str] = field(default_factory=dict)
    by_name: dict[str, list[str]] = field(default_factory=dict)
    loaded: bool = False

    def _load(self) -> None:
        self.loaded = True
        root = str(self.workdir)
        for top, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if not d.startswith(".") and d not in _NOT_SOURCES]
            rel_top = os.path.relpath(top, root).replace(os.sep, "/")
            for name in files:
                if not name.endswith(".java"):
                    continue
                rel = name if rel_top == "." else f"{rel_top}/{name}"
                self.by_name.setdefault(name, []).append(rel)
                parts = rel.split("/")
                # the package path starts after the source root's last `java` directory
                roots = [i for i, part in enumerate(parts[:-1]) if part == "java"]
                if roots:
                    self.by_package.setdefault("/".join(parts[roots[-1] + 1 :]), rel)

    def path(self, cls: str, source: str) -> str | None:
        """The repository path of ``source`` (``Foo.java``) for class ``com.acme.Foo$1``."""
        if not self.loaded:
            self._load()
        package = cls.split("$", 1)[0].rpartition(".")[0]
        key = (package.replace(".", "/") + "/" if package else "") + source
        found = self.by_package.get(key)
        if found is None:
            named = self.by_name.get(source, [])
            found = named[0] if len(named) == 1 else None
        return found


@dataclass
class _Tally:
    tests: int = 0
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    raw_failures: int = 0  # as Surefire counts them, for the cross-check
    raw_errors: int = 0
    failing: list[str] = field(default_factory=list)
    passing: list[str] = field(default_factory=list)
    flaky: list[str] = field(default_factory=list)
    items: list[Item] = field(default_factory=list)
    types: dict[str, str] = field(default_factory=dict)
    files: dict[str, list[str]] = field(default_factory=dict)

    def fail(self, case_id: str, item: Item, kind: str, files: list[str]) -> None:
        if case_id not in self.types:
            self.failing.append(case_id)
            self.types[case_id] = kind
            self.files[case_id] = files
        if len(self.items) < _MAX_ITEMS:
            self.items.append(item)


def failure_type(type_attr: str | None) -> str:
    """The simple class name of what a test threw; "" for an assertion failure."""
    name = (type_attr or "").strip().rsplit(".", 1)[-1].split("$")[-1]
    return "" if name in ASSERTIONS else name


def _frames(text: str, sources: _Sources) -> list[tuple[str, int, str]]:
    """(repository path, line, frame line) of each project frame, innermost first."""
    out = []
    for raw in text.splitlines():
        m = _FRAME.match(raw)
        if m is None:
            continue
        path = sources.path(m["cls"], m["src"])
        if path is not None:
            out.append((path, int(m["line"]), raw.strip()))
    return out


def _case(elem: ET.Element, tally: _Tally, sources: _Sources) -> None:
    name = elem.get("name") or "<unnamed>"
    classname = elem.get("classname") or ""
    case_id = f"{classname}.{name}" if classname else name
    children = {child.tag: child for child in reversed(list(elem))}
    tally.tests += 1
    result = children.get("failure")
    if result is None:
        result = children.get("error")
    if result is not None:
        if result.tag == "failure":
            tally.raw_failures += 1
        else:
            tally.raw_errors += 1
        tally.failed += 1
        kind = failure_type(result.get("type"))
        message = strip_ansi(result.get("message") or "").strip()
        text = strip_ansi((result.text or "")[:_MAX_TRACE])
        found = _frames(text, sources)
        file, line = (found[0][0], found[0][1]) if found else (None, None)
        simple = (result.get("type") or "").rsplit(".", 1)[-1]
        if not message:
            message = text.strip().splitlines()[0] if text.strip() else (simple or result.tag)
        elif kind:
            message = f"{kind}: {message}"
        first = text.strip().splitlines()[0] if text.strip() else ""
        detail = "\n".join([first, *(f[2] for f in found[:_DETAIL_FRAMES])]).strip()
        own = sources.path(classname, classname.split("$")[0].rsplit(".", 1)[-1] + ".java")
        files = sorted({f[0] for f in found} | ({own} if own else set()))[:_MAX_FILES]
        item = Item(
            id=case_id,
            message=message[:2000],
            severity="failure",
            file=file,
            line=line,
            detail=detail[:2000],
        )
        tally.fail(case_id, item, kind, files)
        return
    if "skipped" in children:
        tally.skipped += 1
        return
    if _INTERIM & set(children):
        tally.flaky.append(case_id)
    tally.passed += 1
    tally.passing.append(case_id)


def _scan(path: Path, shown: str, tally: _Tally, sources: _Sources) -> None:
    depth = 0
    try:
        with open_report(path, shown) as fh:
            for event, elem in ET.iterparse(fh, events=("start", "end")):
                if event == "start":
                    if depth == 0 and elem.tag not in ("testsuite", "testsuites"):
                        raise ReportProblem(f"{shown}: not a Surefire report (<{elem.tag}>)")
                    depth += 1
                    continue
                depth -= 1
                if elem.tag == "testcase":
                    _case(elem, tally, sources)
                    elem.clear()
    except ET.ParseError as exc:
        raise ReportProblem(f"{shown}: not well-formed XML ({exc}); truncated?") from None
    except OSError as exc:
        raise ReportProblem(f"{shown}: cannot read: {exc.strerror or exc}") from None


def report_files(root: Path) -> list[Path]:
    """Every ``TEST-*.xml`` in a ``target/surefire-reports`` directory under ``root`` (the
    root's and each module's), in a stable order; links are not followed."""
    found: list[Path] = []
    for top, dirs, files in os.walk(root):
        here = Path(top)
        if here.name == "surefire-reports" and here.parent.name == "target":
            found += [
                here / f for f in sorted(files) if f.startswith("TEST-") and f.endswith(".xml")
            ]
            dirs[:] = []
            continue
        if here.name == "target":
            dirs[:] = [d for d in dirs if d == "surefire-reports"]
        else:
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _PRUNE)
        if len(found) > _MAX_REPORTS:
            break
    return found


@valueclass
class Summary:
    """What Maven printed: each module's ``Tests run`` line after ``Results:``, summed."""

    modules: int
    tests: int
    failures: int
    errors: int
    skipped: int
    flakes: int
    cut: bool


def maven_summary(output: str) -> Summary:
    modules = tests = failures = errors = skipped = flakes = 0
    armed = False
    for line in output.splitlines():
        line = line.rstrip()
        if _RESULTS.match(line):
            armed = True
            continue
        m = _SUMMARY.match(line) if armed else None
        if m:
            armed = False
            modules += 1
            tests += int(m[1])
            failures += int(m[2])
            errors += int(m[3])
            skipped += int(m[4])
            flakes += int(m[5] or 0)
    return Summary(modules, tests, failures, errors, skipped, flakes, bool(_CUT.search(output)))


def compile_errors(output: str, workdir: Path) -> list[Item]:
    """``javac`` errors Maven printed, with repository-relative paths; each once."""
    items: list[Item] = []
    seen: set[tuple[str, int, str]] = set()
    root = str(workdir.resolve()).rstrip("/") + "/"
    plain = str(workdir).rstrip("/") + "/"
    for line in output.splitlines():
        m = _JAVAC.match(line.rstrip())
        if m is None:
            continue
        file = m["file"]
        for prefix in (root, plain):
            if file.startswith(prefix):
                file = file[len(prefix) :]
                break
        key = (file, int(m["line"]), m["msg"])
        if key in seen:
            continue
        seen.add(key)
        items.append(
            Item(
                id=file,
                message=f"{COMPILATION}: {m['msg']}"[:2000],
                severity="error",
                file=file,
                line=int(m["line"]),
                col=int(m["col"]) if m["col"] else None,
                rule=None,
            )
        )
        if len(items) >= _MAX_ITEMS:
            break
    return items


_NOISE = ("[ERROR] -> [Help", "[ERROR] To see the full", "[ERROR] Re-run Maven", "[ERROR] For more")


def maven_errors(output: str, limit: int = 6) -> list[str]:
    """Maven's own ``[ERROR]`` lines (a crashed fork, a failed goal), each once, without
    stack frames and the help text it prints after every failure."""
    out: list[str] = []
    for line in output.splitlines():
        line = line.rstrip()
        if not line.startswith("[ERROR] ") or line.startswith(_NOISE):
            continue
        text = line[len("[ERROR] ") :].strip()
        if text and not text.startswith("at ") and text not in out:
            out.append(text[:300])
            if len(out) >= limit:
                break
    return out


def _disagreements(summary: Summary, tally: _Tally) -> list[str]:
    """What Maven's summary and the reports say differently. Maven exiting 0 with failures
    is the base's ``testFailureIgnore``, not tampering (the failures still make it not ok);
    exiting non-zero with none is a note of its own."""
    problems: list[str] = []
    if summary.cut:
        problems.append("Maven's output was cut, its summary cannot be checked")
        return problems
    said = (summary.tests, summary.failures, summary.errors, summary.skipped)
    found = (tally.tests, tally.raw_failures, tally.raw_errors, tally.skipped)
    if said != found:
        problems.append(
            "Maven reported tests run {}, failures {}, errors {}, skipped {} but the "
            "reports show {}, {}, {}, {}".format(*said, *found)
        )
    return problems


class SurefireParser:
    """Test results of a Maven build: Surefire's reports against Maven's own summary."""

    name = NAME
    facts = FACTS
    empty_facts = EMPTY_FACTS

    def parse(self, data: ParseInput) -> Observation:
        try:
            return self._parse(data)
        except ReportProblem as exc:
            return unusable(NAME, data, str(exc), EMPTY_FACTS)
        except (OSError, ValueError, RecursionError) as exc:
            return unusable(NAME, data, f"cannot read the reports: {exc}", EMPTY_FACTS)

    def _parse(self, data: ParseInput) -> Observation:
        root = data.workdir
        if data.file is not None:
            root = data.file if data.file.is_absolute() else data.workdir / data.file
        output = strip_ansi(data.output or "")
        broken = compile_errors(output, data.workdir)
        summary = maven_summary(output)
        reports = report_files(root) if root.is_dir() else []
        tally = _Tally()
        sources = _Sources(data.workdir)
        for path in reports:
            _scan(path, display_path(path, data.workdir), tally, sources)
        if broken:
            return _observation(data, tally, broken, summary, output, checked=False)
        if data.output is None and not reports:
            raise ReportProblem("no Surefire reports found and no Maven output to read")
        if data.output is not None and summary.modules == 0:
            if data.exit_code == 0:
                raise ReportProblem(
                    "Maven printed no test summary (`Results:`/`Tests run:`): were the tests "
                    "skipped, or is Maven run with -q?"
                )
            why = [line for line in output.splitlines() if _FAILED_GOAL.match(line)]
            reason = why[0][len("[ERROR] ") :] if why else f"exit {data.exit_code}"
            raise ReportProblem(f"the Maven build failed before reporting tests: {reason}"[:800])
        return _observation(data, tally, broken, summary, output, checked=data.output is not None)


def _observation(
    data: ParseInput,
    tally: _Tally,
    broken: list[Item],
    summary: Summary,
    output: str,
    *,
    checked: bool,
) -> Observation:
    for item in broken:
        tally.errors += 1
        if item.id not in tally.types:
            tally.failing.append(item.id)
            tally.types[item.id] = COMPILATION
            tally.files[item.id] = [item.id]
    items = broken + tally.items
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
    if broken:
        notes.append("the sources do not compile: no test ran")
    elif ran == 0 and bad == 0:
        notes.append(f"no tests ran ({tally.tests} test case(s), all skipped or none)")
    tampering = "; ".join(_disagreements(summary, tally)) if checked else ""
    if tampering:
        ok = False
        notes.append(f"the test outcome was tampered with: {tampering}")
    elif bad == 0 and data.exit_code not in (None, 0):
        ok = False
        notes.append(f"Maven exited {data.exit_code} but no test failed")
        notes += maven_errors(output)
    header = f"tests: {summary_line(counts)} ({tally.tests} tests)"
    if tally.flaky:
        header += f"; flaky: {', '.join(tally.flaky[:5])}"
    return suite_observation(
        NAME,
        data,
        header=header,
        counts=counts,
        items=items,
        failing=tally.failing,
        passing=tally.passing,
        types=tally.types,
        files=tally.files,
        notes=notes,
        ok=ok,
        tampering=tampering,
        flaky=tally.flaky,
        output=output or "",
    )
