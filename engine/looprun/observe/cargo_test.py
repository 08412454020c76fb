"""``cargo test`` text output (libtest's own format) into test counts, failing ids and feedback.

Stable Rust has no machine-readable test report (libtest's JSON needs nightly), so this
parser reads the text cargo and libtest print, as one stream (stdout and stderr into one
file, so the command's exit code stays cargo's): ``Running unittests src/lib.rs (...)`` /
``Running tests/it.rs (...)`` / ``Doc-tests NAME`` start one test binary each; ``running N
tests``, ``test NAME ... ok|FAILED|ignored``, the ``failures:`` blocks (``---- NAME stdout
----``, the panic with its location and message, the backtrace) and ``test result: ...``
follow. Compile errors printed before any binary runs become ``CompileError`` items.

Ids name the target: ``src/lib.rs::tests::adds``, ``tests/it.rs::adds``, and for doctests
``doc::src/lib.rs - add`` (the ``(line N)`` libtest adds is dropped, so an edit above a
doctest does not rename it; a second doctest on one item is ``... - add#2``).

A test can write to the same stream (``io::stdout()`` is not captured), so what it says is
cross-checked: every binary's ``running N tests``, its result lines and its ``test result``
summary must agree, no test may be reported twice, a binary must end with its summary,
and cargo's exit code (0, or 101 when a test failed) must agree with the failures read.
A disagreement is ``consistent: false`` with the reason in ``tampering``, never a pass.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

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

NAME = "cargo_test"
EMPTY_FACTS = declared_facts.JUNIT
FACTS = frozenset(EMPTY_FACTS)
COMPILE_ERROR = "CompileError"
PANIC = "panic"
RETURNED_ERR = "Err"  # a `fn t() -> Result` test that returned Err
CRASH = "crash"  # the test binary died (signal, abort, stack overflow) before its summary
TEST_FAILED = 101  # cargo's exit code when a test (or the build) failed

_MAX_ITEMS = 1000
_MAX_BLOCK_LINES = 200  # lines kept of one failing test's output
_MAX_DETAIL = 8

_RUNNING = re.compile(r"^\s*Running (unittests )?(\S.*?) \((.+)\)\s*$")
_DOC_TESTS = re.compile(r"^\s*Doc-tests (\S+)\s*$")
_ANNOUNCE = re.compile(r"^running (\d+) tests?$")
# what a test writes to stderr unbuffered can land between libtest's `test x ... ` and its
# verdict (Rust 1.63 prints a returned Err that way): the first verdict word after it counts
# (a word that is not the verdict makes the counts disagree: tampering, never a pass)
_RESULT = re.compile(r"^test (\S.*?) \.\.\. (?:.*?[^\w])?(ok|FAILED|ignored)\b")
_SUMMARY = re.compile(
    r"^test result: (ok|FAILED)\. (\d+) passed; (\d+) failed; (\d+) ignored; (\d+) measured"
)
_BLOCK = re.compile(r"^---- (.+) std(?:out|err) ----$")
_PANIC = re.compile(r"^thread '(.*)'(?: \(\d+\))? panicked at (.+?):(\d+):(\d+):$")
# before Rust 1.73: the message in quotes, then its location; it may span lines
_OLD_PANIC = re.compile(r"^thread '(.*)' panicked at '(.*)$")
_OLD_END = re.compile(r"^(.*)', (.+?):(\d+):(\d+)$")
_RETURNED = "the test returned a termination value with a non-zero status code"
_NO_PANIC = re.compile(r"^note: test did not panic as expected(?: at (.+?):(\d+):(\d+))?")
_FRAME = re.compile(r"^\s+at (.+?):(\d+):(\d+)$")
_FUNCTION = re.compile(r"^\s*\d+: (.+)$")  # a backtrace frame's function, before its `at`
_MAX_FRAMES = 4
_ERROR = re.compile(r"^error(\[E\d+\])?: (.+)$")
_ARROW = re.compile(r"^\s*--> (.+?):(\d+):(\d+)$")
_DOC_NAME = re.compile(r"^(.*?) \(line (\d+)\)(?: - .*)?$")
_SNIPPET = re.compile(r"^(?:\s+\S|\d+ +\|)")
_HASH = re.compile(r"-[0-9a-f]{8,}$")
_CRASHED = re.compile(r"process didn't exit successfully: .*\((.+)\)\s*$")
_ASSERTION = (
    "assertion failed",
    "assertion `left",
    "panic did not contain expected string",
    "panic did not include expected string",
    "test did not panic as expected",
)


@dataclass
class _Section:
    """One test binary's run: what it announced, its result lines, its failures' output."""

    kind: str  # "unit", "integration" or "doc"
    path: str  # the target's source (src/lib.rs, tests/it.rs), or the crate for doctests
    stem: str  # the binary's name without its hash (the crate for doctests)
    announced: int | None = None
    results: list[tuple[str, str]] = field(default_factory=list)  # (name, verdict)
    summary: tuple[int, int, int] | None = None  # passed, failed, ignored
    blocks: dict[str, list[str]] = field(default_factory=dict)
    failed: set[str] = field(default_factory=set)  # the names whose output block is read
    state: str = "results"  # results -> failures -> done
    crash: str = ""  # how cargo said the binary ended, when it died before its summary
    label: str = ""


@dataclass
class _Build:
    """A compile error before any test ran: its message and where."""

    message: str
    code: str | None = None  # [E0425]
    file: str | None = None
    line: int | None = None
    col: int | None = None
    detail: list[str] = field(default_factory=list)


@dataclass
class _Reader:
    """Feeds on the output line by line; bounded by the number of failing tests."""

    workdir: str
    sections: list[_Section] = field(default_factory=list)
    builds: list[_Build] = field(default_factory=list)
    _block: list[str] | None = None
    _pending: _Build | None = None

    @property
    def current(self) -> _Section | None:
        return self.sections[-1] if self.sections else None

    def feed(self, lines: Iterable[str]) -> None:
        for raw in lines:
            self._line(strip_ansi(raw.rstrip("\r\n")))

    def _line(self, line: str) -> None:
        running = _RUNNING.match(line)
        doc = None if running else _DOC_TESTS.match(line)
        sec = self.current
        in_block = sec is not None and sec.state == "failures"
        if (running or doc) and not in_block:
            self._pending = None
            if running:
                kind = "unit" if running.group(1) else "integration"
                stem = _HASH.sub("", Path(running.group(3).strip()).name)
                self.sections.append(_Section(kind, running.group(2).strip(), stem))
            elif doc:
                crate = doc.group(1)
                self.sections.append(_Section("doc", crate, crate))
            return
        if sec is None:
            self._before_tests(line)
        else:
            self._in_section(sec, line)

    def _before_tests(self, line: str) -> None:
        """Cargo builds every target before running any: compile errors come first."""
        pending = self._pending
        if pending is not None:
            arrow = _ARROW.match(line)
            if arrow and pending.file is None:
                pending.file = project_path(arrow.group(1), self.workdir) or arrow.group(1)
                pending.line, pending.col = int(arrow.group(2)), int(arrow.group(3))
                return
            if _SNIPPET.match(line) and len(pending.detail) < _MAX_DETAIL:
                pending.detail.append(line)  # the source snippet under the message
                return
        found = _ERROR.match(line)
        if found is None:
            if line.startswith("warning"):
                self._pending = None
            return
        self._pending = _Build(f"error{found.group(1) or ''}: {found.group(2)}", found.group(1))
        if len(self.builds) < _MAX_ITEMS:
            self.builds.append(self._pending)

    def compile_errors(self) -> list[_Build]:
        """The errors rustc located (or coded); when cargo could not compile but none is
        (a linker error), its first other error stands for them."""
        located = [b for b in self.builds if b.code or b.file]
        if located:
            return located
        failed = any(b.message.startswith("error: could not compile") for b in self.builds)
        others = [b for b in self.builds if not b.message.startswith("error: could not compile")]
        if failed:
            return (others or [b for b in self.builds])[:1]
        return []

    def cargo_errors(self) -> list[str]:
        return [b.message for b in self.builds]

    def _in_section(self, sec: _Section, line: str) -> None:
        if sec.state == "results":
            found = _RESULT.match(line)
            if found:
                sec.results.append((found.group(1), found.group(2)))
                return
            found = _ANNOUNCE.match(line)
            if found and sec.announced is None and not sec.results:
                sec.announced = int(found.group(1))
                return
            if line == "failures:":
                sec.state = "failures"
                sec.failed = {_base(n) for n, v in sec.results if v == "FAILED"}
                return
        if sec.state in ("results", "failures"):
            summary = _SUMMARY.match(line)
            if summary:
                sec.summary = (int(summary.group(2)), int(summary.group(3)), int(summary.group(4)))
                sec.state = "done"
                self._block = None
                return
        if sec.state == "failures":
            block = _BLOCK.match(line)
            if block and block.group(1) in sec.failed and block.group(1) not in sec.blocks:
                self._block = sec.blocks[block.group(1)] = []
                return
            if self._block is not None and len(self._block) < _MAX_BLOCK_LINES:
                self._block.append(line)
            return
        if sec.summary is None and not sec.crash:
            crashed = _CRASHED.search(line)
            if crashed:
                sec.crash = crashed.group(1)


@dataclass
class _Failure:
    kind: str  # the failure type
    message: str
    file: str | None
    line: int | None
    detail: list[str]
    files: list[str]  # the project files its panic and backtrace run through


def _panic_body(block: list[str], start: int) -> list[str]:
    """The panic message's lines: up to the backtrace, a note or a blank line."""
    body = []
    for rest in block[start:]:
        if not rest.strip() or rest.startswith(("stack backtrace:", "note: ")):
            break
        body.append(rest)
    return body


def _old_panic_body(first: str, rest: list[str]) -> tuple[list[str], tuple[str, int] | None]:
    """The lines of a panic message written ``panicked at 'MESSAGE', FILE:LINE:COL`` (Rust
    before 1.73), the message possibly spanning lines; and its (file, line)."""
    body: list[str] = []
    for text in [first, *rest]:
        end = _OLD_END.match(text)
        body.append(end.group(1) if end else text)
        if end:
            return [b for b in body if b.strip()], (end.group(2), int(end.group(3)))
    return [first], None


def _failure(block: list[str], workdir: str) -> _Failure:
    """What one failing test's output says: the panic (or returned Err, or compile error of
    a doctest), its location and the project files of its backtrace."""
    if "failures:" in block:  # the listing of failing names that ends the last block
        block = block[: len(block) - block[::-1].index("failures:") - 1]
    out = _Failure(PANIC, "", None, None, [], [])
    frames: list[str] = []  # the backtrace's project frames, innermost first
    seen: set[str] = set()
    panicked = any(_PANIC.match(t) or _OLD_PANIC.match(t) for t in block)
    for i, text in enumerate(block):
        frame = _FRAME.match(text)
        if frame:
            where = project_path(frame.group(1), workdir)
            if where and where not in out.files:
                out.files.append(where)
            function = _FUNCTION.match(block[i - 1]) if i else None
            at = f"{where}:{frame.group(2)}"
            name = function.group(1) if function else ""
            # a test's body runs in a closure of the test function: one frame says it
            closure = name.removesuffix("::{{closure}}") in seen
            if where and name and len(frames) < _MAX_FRAMES and at not in seen and not closure:
                seen.update((at, name))
                frames.append(f"  at {at} in {name}")
            continue
        if out.message:
            continue
        panic = _PANIC.match(text)
        old = None if panic else _OLD_PANIC.match(text)
        no_panic = _NO_PANIC.match(text)
        error = _ERROR.match(text)
        if panic:
            out.file, out.line = project_path(panic.group(2), workdir), int(panic.group(3))
            body = _panic_body(block, i + 1)
            out.message = body[0] if body else "panicked"
            out.detail = body[1:_MAX_DETAIL]
        elif old:
            body, where = _old_panic_body(old.group(2), block[i + 1 : i + 1 + _MAX_BLOCK_LINES])
            if where is not None:
                out.file, out.line = project_path(where[0], workdir), where[1]
            out.message = body[0] if body else "panicked"
            out.detail = body[1:_MAX_DETAIL]
            if any(_RETURNED in b for b in body):  # Rust 1.63's report of a returned Err
                out.message, out.kind = f"the test returned Err ({_RETURNED})", RETURNED_ERR
                continue
        elif no_panic:
            out.message = "test did not panic as expected"
            if no_panic.group(1):
                out.file, out.line = project_path(no_panic.group(1), workdir), int(no_panic[2])
        elif text.startswith("Error: ") and not panicked:
            out.message, out.kind = f"the test returned {text}", RETURNED_ERR
            continue
        elif error and error.group(1):  # a doctest that does not compile
            out.message, out.kind = text, COMPILE_ERROR
            for rest in block[i + 1 : i + 4]:
                arrow = _ARROW.match(rest)
                if arrow:
                    out.file = project_path(arrow.group(1), workdir)
                    out.line = int(arrow.group(2))
                    break
            continue
        else:
            continue
        out.kind = "" if out.message.startswith(_ASSERTION) else PANIC
    if not out.message:
        useful = [t for t in block if t.strip()]
        out.message = useful[0] if useful else "failed (no output)"
    if out.file and out.file not in out.files:
        out.files.insert(0, out.file)
    if len(frames) > 1:  # one frame says no more than the panic's location
        out.detail = [*out.detail, *frames]
    return out


@dataclass
class _Tally:
    passed: int = 0
    failed: int = 0
    errors: int = 0
    skipped: int = 0
    failing: list[str] = field(default_factory=list)
    passing: list[str] = field(default_factory=list)
    items: list[Item] = field(default_factory=list)
    types: dict[str, str] = field(default_factory=dict)
    files: dict[str, list[str]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def fail(self, case_id: str, item: Item, kind: str, files: list[str]) -> None:
        if case_id not in self.types:
            self.failing.append(case_id)
            self.types[case_id] = kind
            self.files[case_id] = sorted(set(files))
        if len(self.items) < _MAX_ITEMS:
            self.items.append(item)


def _labels(sections: list[_Section]) -> None:
    """Each binary's id prefix: its source path (``doc`` for doctests), with the binary's
    name in front where the run has two binaries of one kind at the same path: two crates
    of a workspace (cargo prints paths relative to the package; doctest names are relative
    to the workspace since Rust 1.7x, to the package before)."""
    stems: dict[tuple[str, str], set[str]] = {}
    for sec in sections:
        base = "doc" if sec.kind == "doc" else sec.path
        stems.setdefault((sec.kind, base), set()).add(sec.stem)
    for sec in sections:
        base = "doc" if sec.kind == "doc" else sec.path
        shared = len(stems[(sec.kind, base)]) > 1
        sec.label = f"{sec.stem}@{base}" if shared else base


def _names(sec: _Section) -> dict[str, tuple[str, int | None]]:
    """Each libtest name -> (the test's id, the source line libtest names, for doctests)."""
    out: dict[str, tuple[str, int | None]] = {}
    if sec.kind != "doc":
        for name, _ in sec.results:
            out[name] = (f"{sec.label}::{_base(name)}", None)
        return out
    parsed = []
    for name, _ in sec.results:
        found = _DOC_NAME.match(name)
        parsed.append((found.group(1), int(found.group(2))) if found else (name, 0))
    seen: dict[str, int] = {}
    for (base, line), (name, _) in sorted(zip(parsed, sec.results, strict=True)):
        seen[base] = seen.get(base, 0) + 1
        suffix = f"#{seen[base]}" if seen[base] > 1 else ""
        out[name] = (f"{sec.label}::{base}{suffix}", line or None)
    return out


def _base(name: str) -> str:
    """A test's name as its output block names it (without libtest's ``- should panic``)."""
    return name.removesuffix(" - should panic")


def _doc_file(name: str) -> str | None:
    file = name.split(" - ", 1)[0]
    return file if file.endswith(".rs") else None


def _tally_section(sec: _Section, tally: _Tally, workdir: str) -> None:
    ids = _names(sec)
    counted = {"ok": 0, "FAILED": 0, "ignored": 0}
    seen: set[str] = set()
    for name, verdict in sec.results:
        counted[verdict] += 1
        if name in seen:
            tally.problems.append(f"{sec.label}: test {name!r} is reported twice")
            continue
        seen.add(name)
        case_id, doc_line = ids[name]
        if verdict == "ok":
            tally.passed += 1
            tally.passing.append(case_id)
        elif verdict == "ignored":
            tally.skipped += 1
        else:
            tally.failed += 1
            found = _failure(sec.blocks.get(_base(name), []), workdir)
            kind, message, file, line = found.kind, found.message, found.file, found.line
            files = found.files
            if sec.kind == "doc":  # a doctest's panic location is in generated code
                doc_file = _doc_file(name)
                if kind != COMPILE_ERROR or not file:
                    file, line = doc_file, doc_line
                files = sorted({*([doc_file] if doc_file else []), *([file] if file else [])})
            elif not file:
                file = sec.path if sec.path.endswith(".rs") else None
            if sec.kind == "integration" and sec.path.endswith(".rs"):
                files = [*files, sec.path]
            item = Item(
                id=case_id,
                message=clip(message, 400),
                severity="failure",
                file=file,
                line=line,
                detail="\n".join(found.detail),
            )
            tally.fail(case_id, item, kind, files)
    _cross_check(sec, counted, tally)


def _cross_check(sec: _Section, counted: dict[str, int], tally: _Tally) -> None:
    """What a test printing into the stream would leave: counts that disagree."""
    results = len(sec.results)
    if sec.summary is None:
        return  # judged with the exit code
    if sec.announced is not None and sec.announced != results:
        tally.problems.append(
            f"{sec.label}: libtest announced {sec.announced} tests but {results} results "
            "were printed"
        )
    passed, failed, ignored = sec.summary
    if (passed, failed, ignored) != (counted["ok"], counted["FAILED"], counted["ignored"]):
        tally.problems.append(
            f"{sec.label}: its `test result` line says {passed} passed, {failed} failed, "
            f"{ignored} ignored but the result lines show {counted['ok']}, "
            f"{counted['FAILED']}, {counted['ignored']}"
        )


def _crashes(reader: _Reader, tally: _Tally, exit_code: int | None) -> None:
    """A binary without its summary died (exit 101 and cargo says how), or was cut short
    by something that made cargo believe it passed: that is tampering."""
    for sec in reader.sections:
        if sec.summary is not None:
            continue
        if exit_code == 0:
            tally.problems.append(
                f"{sec.label}: the test binary ended without its `test result` line, "
                "yet cargo exited 0 (a test exited the process?)"
            )
            continue
        reported = {n for n, _ in sec.results}
        how = sec.crash or "ended without its `test result` line"
        case_id = f"{sec.label}::<binary>"
        tally.errors += 1
        item = Item(
            id=case_id,
            message=f"the test binary died: {how}",
            severity="error",
            file=sec.path if sec.path.endswith(".rs") else None,
            detail=f"{len(reported)} of {sec.announced or '?'} tests reported before it died",
        )
        tally.fail(case_id, item, CRASH, [sec.path] if sec.path.endswith(".rs") else [])


def _builds(reader: _Reader, tally: _Tally) -> None:
    for build in reader.compile_errors():
        case_id = f"build::{build.file}" if build.file else "build"
        if case_id not in tally.types:
            tally.errors += 1
        item = Item(
            id=case_id,
            message=clip(build.message, 400),
            severity="error",
            file=build.file,
            line=build.line,
            col=build.col,
            detail="\n".join(build.detail),
        )
        tally.fail(case_id, item, COMPILE_ERROR, [build.file] if build.file else [])


def _exit_problems(tally: _Tally, exit_code: int | None) -> None:
    bad = tally.failed + tally.errors
    if exit_code == 0 and bad:
        tally.problems.append(f"cargo exited 0 but its output shows {bad} failing")
    if exit_code == TEST_FAILED and not bad:
        tally.problems.append(
            "cargo exited 101 (a test or the build failed) but no failing test or compile "
            "error is in its output"
        )


class CargoTestParser:
    """Test results from ``cargo test``'s text output."""

    name = NAME
    facts = FACTS
    empty_facts = EMPTY_FACTS

    def parse(self, data: ParseInput) -> Observation:
        reader = _Reader(workdir=str(data.workdir))
        try:
            if data.file is not None:
                path, shown = locate_report(data)
                with open_report(path, shown) as fh:
                    reader.feed(_decoded(fh))
            elif data.output is not None:
                shown = "the command output"
                reader.feed(data.output.splitlines())
            else:
                raise ReportProblem("nothing to read: give the output `file` or a command to `run`")
        except ReportProblem as exc:
            return unusable(NAME, data, str(exc), EMPTY_FACTS)
        except OSError as exc:
            return unusable(NAME, data, f"cannot read: {exc.strerror or exc}", EMPTY_FACTS)
        if not reader.sections and not reader.compile_errors():
            errors = reader.cargo_errors()
            why = clip(errors[0], 300) if errors else "no `Running` line"
            message = f"{shown}: cargo ran no test binary ({why})"
            if data.timed_out:
                message += "; the command timed out"
            return unusable(NAME, data, message, EMPTY_FACTS)
        return _observation(data, reader, shown)


def _decoded(fh: Iterable[bytes]) -> Iterator[str]:
    for raw in fh:
        yield raw.decode("utf-8", "replace")


def _observation(data: ParseInput, reader: _Reader, shown: str) -> Observation:
    tally = _Tally()
    _labels(reader.sections)
    _builds(reader, tally)
    for sec in reader.sections:
        _tally_section(sec, tally, str(data.workdir))
    _crashes(reader, tally, data.exit_code)
    _exit_problems(tally, data.exit_code)
    tampering = "; ".join(tally.problems)
    counts = {
        "tests": tally.passed + tally.failed + tally.errors + tally.skipped,
        "passed": tally.passed,
        "failed": tally.failed,
        "errors": tally.errors,
        "skipped": tally.skipped,
    }
    bad = tally.failed + tally.errors
    ran = tally.passed + tally.failed
    ok = bad == 0 and ran > 0 and not tampering and data.exit_code in (None, 0)
    notes: list[str] = []
    if ran == 0 and bad == 0:
        notes.append(f"no tests ran ({counts['skipped']} ignored)")
    if tampering:
        notes.append(f"the test outcome was tampered with: {tampering}")
    elif bad == 0 and data.exit_code not in (None, 0):
        notes.append(f"cargo exited {data.exit_code} but {shown} shows no failures")
    if data.timed_out:
        ok = False
        notes.append("the test command timed out")
    return suite_observation(
        NAME,
        data,
        header=f"tests: {summary_line(counts)} ({counts['tests']} tests)",
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
