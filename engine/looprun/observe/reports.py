"""Shared plumbing for parsers: locating the report, option access, failed observations.

Parsers never raise on bad input; they return ``unusable(...)``: ok is false and
``error`` names the file and the problem, and every declared fact is still present
(with an empty value) so conditions such as ``tests.failed > 0`` keep evaluating.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

from looprun.data.freeze import freeze
from looprun.observe.base import Item, Observation, ParseInput
from looprun.observe.feedback import DEFAULT_MAX_FEEDBACK, tail
from looprun.observe.normalise import failure_signature
from looprun.observe.traceback import crash

MAX_REPORT_BYTES = 64 << 20  # a report read whole (JSON, SARIF); JUnit XML is streamed


class ReportProblem(Exception):
    """Internal: the report cannot be used; the message names the file and the problem."""


def display_path(path: Path, workdir: Path) -> str:
    """``path`` relative to the workdir when inside it, else as given."""
    try:
        return path.resolve().relative_to(workdir.resolve()).as_posix()
    except (ValueError, OSError):
        return str(path)


def locate_report(data: ParseInput) -> tuple[Path, str]:
    """The report file to read and how messages name it; ReportProblem when none is usable.

    A command may have left a link, a FIFO or a device where its report belongs: only a
    regular file is a report, and none is reached through a link at its own name."""
    if data.file is None:
        raise ReportProblem("no report file given (set `file:` on the observer)")
    path = data.file if data.file.is_absolute() else data.workdir / data.file
    shown = display_path(path, data.workdir)
    try:
        st = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        if data.exit_code is not None:
            raise ReportProblem(
                f"{shown}: report not found; the command (exit {data.exit_code}) did not write it"
            ) from None
        raise ReportProblem(f"{shown}: report not found") from None
    except OSError as exc:
        raise ReportProblem(f"{shown}: cannot read: {exc.strerror or exc}") from None
    _check_kind(st.st_mode, shown)
    if st.st_size == 0:
        raise ReportProblem(f"{shown}: report is empty")
    return path, shown


def _check_kind(mode: int, shown: str) -> None:
    if stat.S_ISLNK(mode):
        raise ReportProblem(
            f"{shown}: is a symbolic link; a report is read only from a regular file"
        )
    if stat.S_ISDIR(mode):
        raise ReportProblem(f"{shown}: is a directory, not a report file")
    if not stat.S_ISREG(mode):
        raise ReportProblem(f"{shown}: is not a regular file (a FIFO, socket or device)")


def open_report(path: Path, shown: str) -> BinaryIO:
    """The report opened for reading without following a link at its name and without
    waiting on a FIFO; the file type is checked again on the descriptor itself."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            _check_kind(stat.S_IFLNK, shown)
        raise ReportProblem(f"{shown}: cannot read: {exc.strerror or exc}") from None
    try:
        _check_kind(os.fstat(fd).st_mode, shown)
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return os.fdopen(fd, "rb")


def read_text(path: Path, shown: str) -> str:
    """The whole report as text, up to :data:`MAX_REPORT_BYTES`."""
    try:
        with open_report(path, shown) as fh:
            raw = fh.read(MAX_REPORT_BYTES + 1)
    except OSError as exc:
        raise ReportProblem(f"{shown}: cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_REPORT_BYTES:
        raise ReportProblem(f"{shown}: larger than {MAX_REPORT_BYTES >> 20} MB, not read")
    return raw.decode("utf-8-sig", "replace")


def parse_json(text: str, shown: str, *, hint: str = "") -> Any:
    """The JSON document in a report; a ReportProblem naming line and column if it is not."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ReportProblem(
            f"{shown}:{exc.lineno}:{exc.colno}: not valid JSON ({exc.msg}){hint}"
        ) from None


def option(data: ParseInput, name: str, default: Any = None) -> Any:
    value = data.options.get(name, default) if isinstance(data.options, Mapping) else default
    return default if value is None else value


def max_feedback(data: ParseInput) -> int:
    try:
        return max(256, int(option(data, "max_feedback", DEFAULT_MAX_FEEDBACK)))
    except (TypeError, ValueError):
        return DEFAULT_MAX_FEEDBACK


def as_list(value: Any) -> list[str]:
    """An option that may be one string or a list of strings."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [str(v) for v in value]


def unusable(
    parser: str,
    data: ParseInput,
    message: str,
    empty_facts: Mapping[str, Any] | None = None,
    counts: Mapping[str, int | float] | None = None,
) -> Observation:
    """An observation that could not be made: ok false, the reason, the output tail."""
    feedback = f"{parser}: {message}"[:1000]
    died = crash(data.output, str(data.workdir))
    if died is not None:  # say where it died: the tail of a faulthandler dump rarely does
        where = f" ({died.file}:{died.line})" if died.file else ""
        feedback += f"\n{died.message}{where}"
    if data.output:
        feedback += "\n" + tail(data.output, max(256, max_feedback(data) - len(feedback) - 1))
    return Observation(
        parser=parser,
        ok=False,
        exit_code=data.exit_code,
        counts=freeze(dict(counts or {})),
        signature=failure_signature([], message),
        feedback=feedback,
        facts=freeze(dict(empty_facts or {})),
        error=message,
    )


def signature_of(items: list[Item] | tuple[Item, ...], error: str | None = None) -> str:
    return failure_signature(
        ((i.id, i.message) for i in items if i.severity in ("error", "failure")), error
    )
