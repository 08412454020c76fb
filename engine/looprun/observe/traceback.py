"""Key lines of a failure's traceback: the assertion, ``E`` lines, the innermost project frame.

Understands Python (standard and pytest styles), Java/JavaScript ``at ...`` frames and the
bare ``file.ext:LINE`` references of Go and Rust. "Project" frames are files inside the
working tree: relative paths, or absolute paths under it, and never installed packages.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import PurePosixPath

from looprun.data.lazy_re import LazyPattern
from looprun.data.value import valueclass
from looprun.observe.feedback import clip

_PY_STD = LazyPattern(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+)')
_PY_TEST = LazyPattern(
    r"^\s*(?P<file>[^\s:<>][^:\n]*?\.[A-Za-z]\w{0,5}):(?P<line>\d+): (?:in \S+|\w+)"
)
_AT = LazyPattern(
    r"^\s*at (?P<where>.*?)\(?(?P<file>[^\s()]+?\.[A-Za-z]\w{0,5}):(?P<line>\d+)(?::\d+)?\)?\s*$"
)
_BARE = LazyPattern(r"(?P<file>[\w./\\-]*\w\.[A-Za-z]\w{0,5}):(?P<line>\d+)(?::\d+)?")
_LIBRARY = LazyPattern(
    r"site-packages|dist-packages|node_modules|<frozen|/lib/python\d|node:internal|^internal/|"
    r"^\s*at (?:java|javax|jdk|sun|kotlin|scala|org\.junit|junit|org\.apache\.maven|"
    r"org\.gradle|org\.opentest4j|org\.testng|org\.hamcrest|org\.assertj|worker\.org\.gradle)\."
)
_HEAD_BYTES = 32_000
_TAIL_BYTES = 32_000


@valueclass
class Frame:
    """A file:line a traceback passed through."""

    file: str
    line: int
    text: str  # the traceback line the frame was read from


def bounded(text: str) -> str:
    """Head and tail of a huge traceback: the key lines live at either end."""
    if len(text) <= _HEAD_BYTES + _TAIL_BYTES:
        return text
    return text[:_HEAD_BYTES] + "\n…\n" + text[-_TAIL_BYTES:]


_WINDOWS = LazyPattern(r"^[A-Za-z]:\\")
_DRIVE = LazyPattern(r"^[A-Za-z]:[\\/]")


@lru_cache(maxsize=4096)  # a traceback names the same few files again and again
def project_path(path: str, workdir: str | None) -> str | None:
    """``path`` relative to the project, or None for files outside it (libraries, stdlib)."""
    path = path.strip().replace("\\", "/") if not _WINDOWS.match(path) else path
    if _LIBRARY.search(path) or path.startswith("<"):
        return None
    if path.startswith("/") or _DRIVE.match(path):
        if not workdir:
            return None
        root = workdir.rstrip("/") + "/"
        if not path.startswith(root):
            return None
        path = path[len(root) :]
    while path.startswith("./"):
        path = path[2:]
    return str(PurePosixPath(path)) if path else None


def frames(text: str, workdir: str | None = None) -> list[Frame]:
    """Project frames, innermost first."""
    python: list[Frame] = []
    at: list[Frame] = []
    bare: list[Frame] = []
    lists = {"python": python, "at": at, "bare": bare}
    for raw in bounded(text).splitlines():
        if ":" not in raw and "line" not in raw:
            continue  # no file:line and no `File "...", line N`: not a frame
        kind, found = _line_frames(raw, workdir)
        if found:
            lists[kind].extend(found)
    return list(reversed(python)) + at + bare


@lru_cache(maxsize=8192)  # failures of one suite pass through the same library frames
def _line_frames(raw: str, workdir: str | None) -> tuple[str, tuple[Frame, ...]]:
    """The project frames one traceback line names, and which kind of line it is."""
    m = _PY_STD.match(raw) or _PY_TEST.match(raw)
    if m:
        f = project_path(m["file"], workdir)
        return "python", ((Frame(f, int(m["line"]), raw.strip()),) if f else ())
    m = _AT.match(raw)
    if m:
        if _LIBRARY.search(raw):
            return "at", ()
        f = project_path(m["file"], workdir)
        return "at", ((Frame(f, int(m["line"]), raw.strip()),) if f else ())
    found = []
    for m in _BARE.finditer(raw):
        f = project_path(m["file"], workdir)
        if f and not f[0].isdigit():
            found.append(Frame(f, int(m["line"]), raw.strip()))
    return "bare", tuple(found)


def innermost(text: str, workdir: str | None = None) -> Frame | None:
    found = frames(text, workdir)
    return found[0] if found else None


_E_LINE = LazyPattern(r"^\s*E\s+\S")
_SOURCE_LINE = LazyPattern(r"^\s*>\s")
_FRAME_LINE = LazyPattern(r"^\s*(?:at |File \")")


def _e_lines(lines: list[str]) -> list[str]:
    return [ln.strip() for ln in lines if "E" in ln and _E_LINE.match(ln)]


@lru_cache(maxsize=8)
def _read(text: str) -> tuple[list[str], list[str]]:
    """A traceback's (bounded) lines and its ``E`` lines, read once for the several
    questions asked of the same text. Callers must not change the lists."""
    lines = bounded(text).splitlines()
    return lines, _e_lines(lines)


def first_assertion(message: str | None, text: str | None) -> str:
    """The line that says what went wrong: the first ``E`` line of a pytest traceback,
    else the message's first line, else the text's first line."""
    lines, errors = _read(text or "")
    for ln in errors:
        stripped = ln[1:].strip()
        if stripped:
            return clip(stripped, 300)
    for candidate in [*(message or "").splitlines(), *lines]:
        if candidate.strip():
            return clip(candidate.strip(), 300)
    return ""


_DOCTEST_EXAMPLE = LazyPattern(r"^\d+\s+(>>> .*|\.\.\. .*)$")
_DOCTEST_END = LazyPattern(r":\d+: (?:DocTestFailure|UnexpectedException)\s*$")


def doctest_failure(text: str | None) -> tuple[str, str] | None:
    """A doctest that printed something else: (headline, detail). The detail keeps the
    example and the ``Expected:`` / ``Got:`` blocks as pytest wrote them, indentation
    included, because the difference is often in a single character or line."""
    if not text or "Expected:" not in text:
        return None
    lines = bounded(text).splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.strip() == "Expected:"), None)
    if start is None or not any(ln.strip().startswith("Got") for ln in lines[start:]):
        return None
    example = next(
        (m[1] for ln in reversed(lines[:start]) if (m := _DOCTEST_EXAMPLE.match(ln.strip()))),
        "",
    )
    block: list[str] = []
    for ln in lines[start:]:
        if _DOCTEST_END.search(ln):
            break
        block.append(ln.rstrip())
    while block and not block[-1].strip():
        block.pop()
    got_at = next(i for i, ln in enumerate(block) if ln.strip().startswith("Got"))
    expected = next((ln.strip() for ln in block[1:got_at] if ln.strip()), "")
    got_head = block[got_at].strip()
    got = (
        "nothing"
        if got_head.startswith("Got nothing")
        else next((ln.strip() for ln in block[got_at + 1 :] if ln.strip()), "")
    )
    head = f"doctest {example}: expected {expected or 'nothing'}, got {got}".replace("  ", " ")
    shown = [example, *block] if example else block
    detail = "\n".join(clip(ln, 200) for ln in shown[:40])
    return clip(head, 300), clip(detail, 1600)


def key_lines(
    text: str | None,
    workdir: str | None = None,
    *,
    max_lines: int = 8,
    found: list[Frame] | None = None,
) -> str:
    """A few lines that explain a failure, bounded to about 800 characters. ``found``:
    the text's ``frames`` when the caller has read them already."""
    if not text:
        return ""
    lines, errors = _read(text)
    picked: list[str] = []
    if found is None:
        found = frames(text, workdir)
    if errors:
        source = [ln.strip() for ln in lines if ">" in ln and _SOURCE_LINE.match(ln)]
        picked.extend(source[-1:])
        picked.extend(errors[: max_lines - 2])
        picked.extend(f.text for f in found[:1])
    else:  # the message lines before the first frame, then the innermost project frames
        for ln in lines:
            if _FRAME_LINE.match(ln) or len(picked) >= max_lines // 2:
                break
            if ln.strip():
                picked.append(ln.strip())
        picked.extend(f.text for f in found[:2] if f.text not in picked)
    out = "\n".join(clip(ln, 200) for ln in picked[:max_lines])
    return clip(out, 800)


_FATAL = LazyPattern(r"Fatal Python error: (?P<what>.+?)\s*$")
_FAULT_FRAME = LazyPattern(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+) in (?P<func>\S+)')
_SIGNAL = LazyPattern(
    r"(?P<what>Segmentation fault|Bus error|Illegal instruction|Aborted \(core dumped\))"
)


@valueclass
class Crash:
    """An interpreter that died mid-run: what killed it and where (project frame)."""

    message: str
    file: str | None = None
    line: int | None = None


def crash(text: str | None, workdir: str | None = None) -> Crash | None:
    """The crash a log reports, if any: Python's faulthandler dump (``Fatal Python error``,
    then the current thread's frames, most recent first) or the shell's signal line."""
    if not text:
        return None
    lines = bounded(text).splitlines()
    for n, raw in enumerate(lines):
        m = _FATAL.search(raw)
        if not m:
            continue
        message = f"Fatal Python error: {m['what']}"
        current = False
        for later in lines[n + 1 :]:
            if later.startswith("Current thread"):
                current = True
                continue
            f = _FAULT_FRAME.match(later)
            if current and f:
                path = project_path(f["file"], workdir)
                if path:
                    return Crash(f"{message} in {f['func']}", path, int(f["line"]))
            elif current and not later.strip():
                break
        return Crash(message)
    for raw in reversed(lines[-50:]):
        m = _SIGNAL.search(raw)
        if m:
            return Crash(f"the process crashed: {m['what']}")
    return None
