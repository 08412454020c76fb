"""``go test -json`` (test2json events) into the JUnit fact set: counts, failing ids, feedback.

The observer redirects go's stdout (the event stream) to a file, so the exit code is go's
own and its stderr (compiler and vet messages) is the command's captured output. Ids are
``pkg/TestName/sub`` with the package path relative to its module (``TestName/sub`` at
the module's root). A failure's place and message come from the test's log lines
(``    x_test.go:12: msg``); a panic's from its ``panic:`` line and the innermost project
frame of the goroutine trace; a package that does not build is an error item with the
compiler's file:line and failure type ``BuildError``.

Before Go 1.24 a test's own output shares the stream with the verdicts (no framing
markers), so a test can print ``--- PASS: TestX``. What a test cannot print is go's exit
code and the package-level verdict go writes after the binary exits; every verdict is
checked against them, and a disagreement is ``consistent: false`` with the reason.

The module is named ``gotest`` (not ``go_test``): ``*_test.py`` is a test file to pytest.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from looprun.observe import declared_facts
from looprun.observe.base import Item, Observation, ParseInput
from looprun.observe.feedback import clip, strip_ansi
from looprun.observe.reports import (
    ReportProblem,
    locate_report,
    open_report,
    unusable,
)
from looprun.observe.suite import suite_observation, summary_line
from looprun.observe.traceback import project_path

NAME = "go_test"
EMPTY_FACTS = declared_facts.JUNIT
FACTS = frozenset(EMPTY_FACTS)
BUILD_ERROR = "BuildError"
PANIC = "panic"
PACKAGE_ERROR = "PackageError"  # a package that failed with no failing test (TestMain, init)
_MAX_ITEMS = 1000
_MAX_DETAIL = 12  # lines of a failure's detail kept
_MAX_LINE = 4000  # characters of one output line looked at
_VERDICTS = ("pass", "fail", "skip")

# `    calc_test.go:15: message` (t.Error, t.Fatal, t.Log, t.Skip): indented, a bare file name
_LOG = re.compile(r"^(?P<indent>\s+)(?P<file>[\w.+-]+\.go):(?P<line>\d+): ?(?P<message>.*)$")
# go's own verdict line for a test: `--- FAIL: TestX (0.00s)`, indented for subtests
_VERDICT = re.compile(r"^\s*--- (?P<verdict>PASS|FAIL|SKIP): (?P<name>\S+) \(")
_PANIC = re.compile(r"^\s*panic: (?P<message>.*?)(?: \[recovered\])?\s*$")
# a goroutine frame's location: `\t/abs/path/x.go:12 +0x1d`
_FRAME = re.compile(r"^\t(?P<file>\S+\.go):(?P<line>\d+)(?: \+0x[0-9a-f]+)?\s*$")
# go's plain-text lines in the stream (not events): `FAIL\tpkg [build failed]`
_BUILD_FAILED = re.compile(r"^FAIL\s+(?P<pkg>\S+) \[(?:build|setup) failed\]\s*$")
# stderr: `# pkg [pkg.test]` heads the compiler's (or vet's) lines for one package
_HEADER = re.compile(r"^# (?P<pkg>\S+)")
_COMPILER = re.compile(
    r"^(?:vet: )?(?P<file>[^\s:][^:\n]*\.go):(?P<line>\d+)(?::(?P<col>\d+))?: (?P<message>.+)$"
)
_MODULE = re.compile(r"^\s*module\s+\"?(?P<path>[^\s\"]+)\"?", re.MULTILINE)
_USE = re.compile(r"^\s*use\s+(?:\(\s*(?P<block>[^)]*)\)|(?P<one>\S+))", re.MULTILINE)


@dataclass
class _Test:
    """What the stream said about one test, kept bounded while it is read."""

    name: str
    started: bool = False  # go's `run` event (its `=== RUN` line) came first
    verdicts: list[str] = field(default_factory=list)
    own_lines: set[str] = field(default_factory=set)  # verdicts of its `--- X: name` lines
    file: str | None = None
    line: int | None = None
    message: str = ""
    detail: list[str] = field(default_factory=list)
    log_indent: int = -1  # indent of the last log line, to read its continuation
    panic: str = ""
    frames: list[tuple[str, int]] = field(default_factory=list)  # after its panic, in order
    files: set[str] = field(default_factory=set)


@dataclass
class _Package:
    path: str
    tests: dict[str, _Test] = field(default_factory=dict)
    verdict: str = ""  # the package-level event go writes after its binary exits
    output: list[str] = field(default_factory=list)  # package-level output, its tail
    panic: str = ""


@dataclass
class _Stream:
    packages: dict[str, _Package] = field(default_factory=dict)
    build_failed: list[str] = field(default_factory=list)  # import paths, in order
    events: int = 0

    def package(self, path: str) -> _Package:
        pkg = self.packages.get(path)
        if pkg is None:
            pkg = self.packages[path] = _Package(path)
        return pkg


class _Modules:
    """Import path -> directory relative to the workdir, from go.mod (and go.work)."""

    def __init__(self, workdir: Path):
        self.roots: list[tuple[str, str]] = []  # (module path, directory), longest first
        dirs = ["."]
        try:
            work = (workdir / "go.work").read_text(errors="replace")
        except OSError:
            work = ""
        for m in _USE.finditer(work):
            used = m["block"].split() if m["block"] is not None else [m["one"]]
            dirs += [d.strip('"') for d in used if not d.startswith("//")]
        top = workdir.resolve()
        for d in dirs:
            mod = (workdir / d / "go.mod").resolve()
            if top not in mod.parents:  # a module outside the tree is not the project's
                continue
            try:
                text = mod.read_text(errors="replace")
            except OSError:
                continue
            found = _MODULE.search(text)
            if found:
                rel = Path(d).as_posix()
                self.roots.append((found["path"], "" if rel == "." else rel))
        self.roots.sort(key=lambda r: -len(r[0]))

    def directory(self, import_path: str) -> str:
        """The package's directory relative to the workdir ("." at the root); its import
        path when no module here holds it."""
        for module, rel in self.roots:
            if import_path == module or import_path.startswith(module + "/"):
                rest = import_path[len(module) + 1 :]
                joined = "/".join(p for p in (rel, rest) if p)
                return joined or "."
        return import_path

    def test_id(self, import_path: str, test: str) -> str:
        directory = self.directory(import_path)
        return test if directory == "." else f"{directory}/{test}"


def _read_stream(path: Path, shown: str) -> _Stream:
    stream = _Stream()
    with open_report(path, shown) as fh:
        for raw in fh:
            line = raw[: _MAX_LINE * 4].decode("utf-8", "replace").rstrip("\r\n")
            if line.startswith("{"):
                try:
                    event = json.loads(line)
                except json.JSONDecodeError:
                    event = None
                if isinstance(event, dict) and isinstance(event.get("Action"), str):
                    stream.events += 1
                    _on_event(stream, event)
                    continue
            m = _BUILD_FAILED.match(line)
            if m and m["pkg"] not in stream.build_failed:
                stream.build_failed.append(m["pkg"])
    return stream


def _on_event(stream: _Stream, event: dict[str, Any]) -> None:
    action = event["Action"]
    if action in ("build-output", "build-fail"):  # Go 1.24+: build output as events
        built = str(event.get("ImportPath") or "").split(" ")[0]
        if action == "build-fail" and built and built not in stream.build_failed:
            stream.build_failed.append(built)
        return
    pkg_path = event.get("Package")
    if not isinstance(pkg_path, str) or not pkg_path:
        return
    pkg = stream.package(pkg_path)
    name = event.get("Test")
    output = event.get("Output")
    # Go 1.24+ may mark its own framing lines with ^V: a verdict line is still a verdict line
    text = (
        strip_ansi(output[:_MAX_LINE]).lstrip("\x16").rstrip("\n")
        if isinstance(output, str)
        else None
    )
    if not isinstance(name, str) or not name:
        if action in _VERDICTS:
            pkg.verdict = "fail" if "fail" in (pkg.verdict, action) else action
            if event.get("FailedBuild") and pkg_path not in stream.build_failed:
                stream.build_failed.append(pkg_path)
        elif text is not None:
            pkg.output = [*pkg.output[-39:], text]
            m = _PANIC.match(text)
            if m and not pkg.panic:
                pkg.panic = m["message"]
        return
    test = pkg.tests.get(name)
    if test is None:
        test = pkg.tests[name] = _Test(name)
    if action == "run":
        test.started = True
    elif action in _VERDICTS:
        test.verdicts.append(action)
    elif text is not None:
        _on_output(test, text)


def _on_output(test: _Test, text: str) -> None:
    verdict = _VERDICT.match(text)
    if verdict:
        if verdict["name"] == test.name:
            test.own_lines.add(verdict["verdict"].lower())
        test.log_indent = -1
        return
    if text.startswith(("=== RUN", "=== PAUSE", "=== CONT", "=== NAME")):
        return
    m = _PANIC.match(text)
    if m:
        test.panic = test.panic or m["message"]
        test.log_indent = -1
        return
    frame = _FRAME.match(text)
    if frame:
        if len(test.files) < 100:
            test.files.add(frame["file"])  # made project-relative once the workdir is known
        if test.panic and len(test.frames) < 100:
            test.frames.append((frame["file"], int(frame["line"])))
        return
    log = _LOG.match(text)
    if log:
        if not test.message:
            test.file, test.line = log["file"], int(log["line"])
            test.message = log["message"]
        elif len(test.detail) < _MAX_DETAIL:
            test.detail.append(text.strip())
        test.log_indent = len(log["indent"])
        return
    indent = len(text) - len(text.lstrip())
    if test.log_indent >= 0 and indent > test.log_indent and len(test.detail) < _MAX_DETAIL:
        test.detail.append(text.strip())


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
    problems: list[str] = field(default_factory=list)  # why the outcome is not to be trusted

    def fail(self, test_id: str, kind: str, item: Item | None, ftype: str, files: set[str]) -> None:
        if kind == "error":
            self.errors += 1
        else:
            self.failed += 1
        if test_id not in self.types:
            self.failing.append(test_id)
        self.types[test_id] = ftype
        self.files[test_id] = sorted(files)
        if item is not None and len(self.items) < _MAX_ITEMS:
            self.items.append(item)


def _project(path: str, workdirs: tuple[str, ...]) -> str | None:
    for workdir in workdirs:
        found = project_path(path, workdir)
        if found:
            return found
    return None


def _test_item(
    test_id: str, test: _Test, directory: str, workdirs: tuple[str, ...]
) -> tuple[Item, str, set[str]]:
    """The failing test's item, its failure type and the project files it ran through."""
    files = {f for f in (_project(p, workdirs) for p in test.files) if f}
    log_file = None
    if test.file:
        log_file = test.file if directory in (".", "") else f"{directory}/{test.file}"
        files.add(log_file)
    if test.panic:
        # the innermost project frame: the frames above it are the runtime's and testing's
        at = next(
            ((f, n) for f, n in ((_project(p, workdirs), n) for p, n in test.frames) if f),
            (log_file, test.line),
        )
        file, line = at
        detail = [test.message] if test.message else []
        item = Item(
            id=test_id,
            message=clip(f"panic: {test.panic}", 400),
            severity="failure",
            file=file,
            line=line,
            detail="\n".join(detail + test.detail),
        )
        return item, PANIC, files
    message = test.message or (
        "failed (no message; its subtests or the test binary may say why)"
        if "fail" in test.own_lines
        else "did not finish: the test binary exited while it ran"
    )
    item = Item(
        id=test_id,
        message=clip(message, 400),
        severity="failure",
        file=log_file,
        line=test.line if log_file else None,
        detail="\n".join(test.detail),
    )
    return item, "", files


def _build_items(output: str, failed: list[str], modules: _Modules, workdirs: tuple[str, ...]):
    """Per failed package: its compiler (or vet) lines from go's stderr."""
    lines: dict[str, list[tuple[str | None, int | None, int | None, str]]] = {}
    current = None
    for raw in strip_ansi(output).splitlines():
        head = _HEADER.match(raw)
        if head:
            current = head["pkg"]
            continue
        m = _COMPILER.match(raw.strip())
        if m and current is not None:
            file = _project(m["file"], workdirs) or m["file"]
            col = int(m["col"]) if m["col"] else None
            lines.setdefault(current, []).append((file, int(m["line"]), col, m["message"]))
    # a package without tests that does not build has no `[build failed]` line: its
    # compiler lines are all there is
    for pkg in [*failed, *(p for p in lines if p not in failed)]:
        found = lines.get(pkg, [])
        first = found[0] if found else (None, None, None, "build failed (see go's output)")
        detail = [f"{f}:{ln}: {msg}" for f, ln, _, msg in found[1:_MAX_DETAIL]]
        yield (
            modules.directory(pkg),
            Item(
                id=modules.directory(pkg),
                message=clip(first[3], 400),
                severity="error",
                file=first[0],
                line=first[1],
                col=first[2],
                detail="\n".join(detail),
            ),
            {f for f, *_ in found if f},
        )


def _tally(data: ParseInput, stream: _Stream) -> _Tally:
    modules = _Modules(data.workdir)
    workdirs = tuple(dict.fromkeys((str(data.workdir), str(data.workdir.resolve()))))
    tally = _Tally()
    for pkg in stream.packages.values():
        directory = modules.directory(pkg.path)
        failing_here = 0
        for name, test in pkg.tests.items():
            test_id = modules.test_id(pkg.path, name)
            tally.tests += 1
            verdicts = set(test.verdicts)
            if len(verdicts) > 1:
                tally.problems.append(
                    f"{test_id} was reported both {' and '.join(sorted(verdicts))} "
                    "(a test printed a verdict line of its own)"
                )
            if verdicts and not test.started:
                tally.problems.append(
                    f"{test_id} has a verdict but was never started "
                    "(a verdict line printed for a test that did not run)"
                )
            if "pass" in verdicts and "pass" not in test.own_lines:
                tally.problems.append(
                    f"{test_id} has a pass event but go never printed its `--- PASS` line "
                    "(the test binary exited while it ran)"
                )
            if "fail" in verdicts or not verdicts:
                failing_here += 1
                item, ftype, files = _test_item(test_id, test, directory, workdirs)
                has_failing_child = any(
                    other.startswith(name + "/") and "fail" in pkg.tests[other].verdicts
                    for other in pkg.tests
                )
                shown = None if has_failing_child and not test.message and not test.panic else item
                tally.fail(test_id, "failure", shown, ftype, files)
            elif "skip" in verdicts:
                tally.skipped += 1
            else:
                tally.passed += 1
                tally.passing.append(test_id)
        if pkg.tests and not pkg.verdict and pkg.path not in stream.build_failed:
            tally.problems.append(
                f"package {directory} has no verdict of its own from go "
                "(its test binary exited before the end)"
            )
        if pkg.verdict == "pass" and failing_here:
            tally.problems.append(
                f"package {directory} passed although {failing_here} of its tests failed "
                "(its test binary exited 0 after a failure)"
            )
        if pkg.verdict == "fail" and not failing_here and pkg.path not in stream.build_failed:
            ftype = PANIC if pkg.panic else PACKAGE_ERROR
            message = (
                f"panic: {pkg.panic}" if pkg.panic else "the package failed with no failing test"
            )
            lines = [t for t in pkg.output if t.strip() and not t.startswith(("FAIL", "ok  "))]
            item = Item(
                id=directory,
                message=clip(message, 400),
                severity="error",
                detail="\n".join(lines[-_MAX_DETAIL:]),
            )
            tally.fail(directory, "error", item, ftype, set())
    for pkg_id, item, files in _build_items(
        data.output or "", stream.build_failed, modules, workdirs
    ):
        tally.fail(pkg_id, "error", item, BUILD_ERROR, files)
    return tally


def _exit_problem(data: ParseInput, tally: _Tally) -> str:
    """What go's exit code says that the stream does not."""
    bad = tally.failed + tally.errors
    if data.exit_code == 0 and bad:
        return f"go test exited 0 but the stream shows {bad} failing"
    if data.exit_code == 1 and not bad:
        return "go test exited 1 (tests failed) but the stream shows none failing"
    return ""


class GoTestParser:
    """Test results from ``go test -json``."""

    name = NAME
    facts = FACTS
    empty_facts = EMPTY_FACTS

    def parse(self, data: ParseInput) -> Observation:
        compiled = any(_COMPILER.match(x.strip()) for x in (data.output or "").splitlines())
        try:
            path, shown = locate_report(data)
            stream = _read_stream(path, shown)
        except ReportProblem as exc:
            # a module where nothing builds leaves the stream empty: stderr says why
            if not (compiled and str(exc).endswith("report is empty")):
                return unusable(NAME, data, str(exc), EMPTY_FACTS)
            stream, shown = _Stream(), str(exc).rsplit(":", 1)[0]
        except OSError as exc:
            return unusable(NAME, data, f"cannot read the stream: {exc}", EMPTY_FACTS)
        if stream.events == 0 and not stream.build_failed and not compiled:
            return unusable(
                NAME,
                data,
                f"{shown}: no test2json events (is the command `go test -json`?)",
                EMPTY_FACTS,
            )
        return _observation(data, _tally(data, stream), shown)


def _observation(data: ParseInput, tally: _Tally, shown: str) -> Observation:
    exit_problem = _exit_problem(data, tally)
    problems = tally.problems + ([exit_problem] if exit_problem else [])
    tampering = "; ".join(dict.fromkeys(problems))
    counts = {
        "tests": tally.tests,
        "passed": tally.passed,
        "failed": tally.failed,
        "errors": tally.errors,
        "skipped": tally.skipped,
    }
    ran = tally.tests - tally.skipped
    bad = tally.failed + tally.errors
    ok = bad == 0 and ran > 0 and not tampering
    notes: list[str] = []
    if ran == 0 and bad == 0:
        notes.append(f"no tests ran ({tally.tests} test(s) in {shown}, all skipped or none)")
    if tampering:
        notes.append(f"the test outcome was tampered with: {clip(tampering, 1500)}")
    elif bad == 0 and data.exit_code not in (None, 0):
        ok = False
        notes.append(f"go test exited {data.exit_code} but {shown} shows no failures")
    return suite_observation(
        NAME,
        data,
        header=f"go test: {summary_line(counts)} ({tally.tests} tests)",
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
