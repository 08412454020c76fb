"""`looprun validate` and `looprun explain`: the template commands behind the CLI."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from looprun.cli.terminal import no_command
from looprun.errors import EXIT_DONE, EXIT_INVALID, Location, Problem, TemplateError

if TYPE_CHECKING:
    from looprun.template.valid_cache import ValidCache

# YAML, the schema and the expression engine are imported only when a file is actually
# checked: a file the on-disk cache knows as valid needs none of them.

Echo = Callable[..., None]

_NOT_IN_FRAGMENTS = ("name", "extends", "plan", "each_task", "act")


def _is_fragment(path: Path) -> bool:
    """A file without a name that holds only fragment keys (observer packs, input sets)."""
    from looprun.template.compose import FRAGMENT_KEYS
    from looprun.template.yamlpos import load_document

    try:
        data = load_document(path).data
    except TemplateError:
        return False
    return (
        isinstance(data, dict)
        and not any(k in data for k in _NOT_IN_FRAGMENTS)
        and any(k in data for k in FRAGMENT_KEYS)
    )


def check_fragment(path: Path) -> list[Problem]:
    """Validate a fragment on its own: composition, schema (minus template-only keys), observers."""
    from looprun.template.build.builder import Builder
    from looprun.template.compose import compose
    from looprun.template.schema_check import schema_problems

    doc = compose(path, fragment=True)
    problems = [p for p in schema_problems(doc) if not p.message.startswith("missing required key")]
    builder = Builder(doc)
    builder.inputs()
    builder.observe()
    return [*problems, *builder.problems]


def _is_case_file(path: Path) -> bool:
    """A `looprun test` case file: a mapping with `cases` and no template keys."""
    from looprun.template.yamlpos import load_document

    try:
        data = load_document(path).data
    except TemplateError:
        return False
    return isinstance(data, dict) and "cases" in data and "looprun" not in data


def check_case_file(path: Path) -> list[Problem]:
    """A case file is valid when its template loads and every case fits that template."""
    from looprun.cli.cases import load_cases, template_of
    from looprun.template.loader import load_template

    load_cases(path, load_template(template_of(str(path))))
    return []


def check_file(ref: str) -> list[Problem]:
    """Every problem in one template, fragment or case file (empty when it is valid)."""
    from looprun.template.loader import load_template

    path = Path(ref)
    try:
        if path.is_file() and _is_case_file(path):
            return check_case_file(path)
        if path.is_file() and _is_fragment(path):
            return check_fragment(path)
        load_template(ref)
    except TemplateError as exc:
        return list(exc.problems)
    return []


_SKIP_DIRS = {".git", ".looprun", ".venv", "node_modules", "__pycache__"}


def is_looprun_file(path: Path) -> bool:
    """A YAML file that is looprun's: a template or fragment (``looprun:`` at the top level)
    or a case file (``cases:`` and ``template:``). Other YAML (CI config, Helm charts) is not."""
    try:
        with path.open("r", encoding="utf-8", errors="replace") as fh:
            head = fh.read(65536)
    except OSError:
        return False
    return bool(_MARKER.search(head)) or (
        bool(_CASES.search(head)) and bool(_TEMPLATE_KEY.search(head))
    )


_MARKER = re.compile(r"^looprun\s*:", re.M)
_CASES = re.compile(r"^cases\s*:", re.M)
_TEMPLATE_KEY = re.compile(r"^template\s*:", re.M)


def expand(refs: Iterable[str]) -> tuple[list[str], list[str]]:
    """Files to validate: each file as given; each directory's looprun files, recursively
    (hidden and tool directories skipped). Also the directories that held none."""
    out: list[str] = []
    empty: list[str] = []
    for ref in refs:
        path = Path(ref)
        if not path.is_dir():
            out.append(ref)
            continue
        found = sorted(
            p
            for p in path.rglob("*")
            if p.suffix in (".yaml", ".yml")
            and p.is_file()
            and not (_SKIP_DIRS & set(p.relative_to(path).parts[:-1]))
            and is_looprun_file(p)
        )
        if not found:
            empty.append(ref)
        out += [str(p) for p in found]
    return out, empty


def is_case_file(ref: str) -> bool:
    """A file holding `looprun test` cases (``cases:`` at the top level)."""
    path = Path(ref)
    return path.is_file() and path.suffix in (".yaml", ".yml") and _is_case_file(path)


def checked(ref: str, cache: ValidCache | None) -> list[Problem]:
    """check_file, skipped when ``cache`` knows the file as valid and nothing it read has
    changed; a file found valid is remembered there (problems never are)."""
    if cache is None or not Path(ref).is_file():
        return check_file(ref)
    if cache.known_valid(ref):
        return []
    from looprun.template.deps import recording

    with recording() as deps:
        problems = check_file(ref)
    if not problems:
        cache.remember_valid(ref, deps)
    return problems


def validate(
    paths: Iterable[str],
    *,
    quiet: bool = False,
    echo: Echo = print,
    skip_other: bool = False,
    annotate: bool = False,
    workspace: str | None = None,
    cache: ValidCache | None = None,
    command: Echo | None = None,
) -> int:
    """Validate each file (a directory: the looprun files in it); print `path: OK` or each
    problem as `path:line:col: message`. ``skip_other``: YAML files that are not looprun's
    are left alone (a pre-commit hook sees every YAML file of a commit).

    With ``annotate`` (in GitHub Actions) each problem is also printed as an ``::error``
    workflow command, which GitHub shows on the file's line in the pull request; paths
    are made relative to ``workspace`` (the checkout) when they are inside it, and
    printed with ``command`` (the stream lets only those start with ``::``).

    ``cache``: where files found valid are remembered (see ``valid_cache``); None checks
    every file in full."""
    if skip_other:
        paths = [p for p in paths if Path(p).is_dir() or is_looprun_file(Path(p))]
        if not paths:
            return EXIT_DONE
    refs, empty = expand(paths)
    for ref in empty:
        echo(f"{ref}: no looprun templates here (YAML files with `looprun: 1`, or case files)")
    if empty and not refs:
        return EXIT_INVALID
    bad_files = 0
    count = 0
    for ref in refs:
        problems = checked(ref, cache)
        if not problems:
            if not quiet:
                echo(f"{ref}: OK")
            continue
        bad_files += 1
        count += len(problems)
        for problem in sorted(problems, key=_order):
            echo(one_line(str(problem)) if annotate else str(problem))
            if annotate:
                (command or echo)(annotation(problem, workspace))
    if count and len(refs) > 1:
        echo(f"{count} problem{'s' if count != 1 else ''} in {bad_files} of {len(refs)} files")
    return EXIT_INVALID if count else EXIT_DONE


def one_line(text: str) -> str:
    """A problem line (``path:line:col: message``) as one output line, for GitHub
    Actions: the runner reads every output line that starts with ``::`` (after leading
    blanks) as a workflow command, so a newline from a YAML key or value would let the
    rest of it forge one (``::stop-commands::``, ``::error::``). A path that itself
    starts with ``::`` gets a ``./``, which names the same file."""
    return no_command(text.replace("\r", "\\r").replace("\n", "\\n"))


def _escape(text: str, prop: bool = False) -> str:
    """GitHub workflow-command escaping: data escapes %, CR, LF; properties also : and ,."""
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


def annotation(problem: Problem, workspace: str | None = None) -> str:
    """``::error file=loops/x.yaml,line=12,col=5::message`` for one problem."""
    loc = problem.location
    file = loc.file
    if workspace:
        with contextlib.suppress(ValueError):
            file = Path(file).resolve().relative_to(Path(workspace).resolve()).as_posix()
    props = [f"file={_escape(file, True)}"]
    if loc.line:
        props += [f"line={loc.line}", f"col={loc.col or 1}"]
    return f"::error {','.join(props)}::{_escape(problem.message)}"


def _order(problem: Problem) -> tuple[str, int, int]:
    loc: Location = problem.location
    return (loc.file, loc.line, loc.col)


def explain(ref: str, fmt: str = "text") -> str:
    """The resolved template as text, a Mermaid flowchart, or JSON."""
    from looprun.template.explain import explain as render
    from looprun.template.loader import load_template

    return render(load_template(ref), fmt)
