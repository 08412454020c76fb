"""`looprun init`: write a team template that extends a built-in one, and optionally a
starter case file for `looprun test`.

The new file behaves exactly like its parent until the team edits it. Files are written
atomically and checked with the real loader before they appear.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from looprun.cli.scaffold.case_text import cases_path, render_cases
from looprun.cli.scaffold.template_text import render_template
from looprun.cli.scaffold.values import BASES, DEFAULT_BASE, NAME, SUFFIXES, parent_of
from looprun.data.value import valueclass
from looprun.errors import LooprunError, TemplateError, UsageError
from looprun.system.resources import schema_path, schemas_dir
from looprun.template import slots
from looprun.template.loader import load_template
from looprun.template.schema_check import template_schema
from looprun.template.slots import StackChoice


@valueclass
class Scaffold:
    """What `init` wrote: the template and, with `--cases`, its case file."""

    template: Path
    cases: Path | None
    schema: str


def schema_ref(target: Path, given: str | None = None) -> str:
    """How the new file's first line points at the template schema; never a path that
    only exists on this machine.

    ``given`` (``--schema``): a file that exists is written relative to the new template
    (e.g. one written by ``looprun schema --output``), anything else as given. Without it:
    inside a checkout of this project, the relative path to its ``schemas/``; anywhere else
    the schema's published ``$id``.
    """
    folder = target.absolute().parent
    if given is not None:
        file = Path(given).expanduser()
        if "://" not in given and file.is_file():
            return Path(os.path.relpath(file.absolute(), folder)).as_posix()
        return given
    schema = schema_path("template").resolve()
    root = schemas_dir().resolve().parent
    if (root / "pyproject.toml").is_file() and folder.resolve().is_relative_to(root):
        return Path(os.path.relpath(schema, folder.resolve())).as_posix()
    return str(template_schema()["$id"])


def default_name(path: Path, base: str) -> str:
    """A template name from the file name: `loops/Payments Bugfix.yaml` -> `Payments-Bugfix`."""
    stem = path.name
    for suffix in SUFFIXES:
        stem = stem.removesuffix(suffix)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", stem).strip("-_.")[:80]
    return name or f"team-{base}"


def _check(path: Path, base: str) -> None:
    """Usage mistakes, before anything is written."""
    if base not in BASES:
        raise UsageError(
            f"unknown template {base!r} for --extends; the built-ins are: {', '.join(BASES)}"
        )
    if path.is_dir():
        raise UsageError(f"{path} is a directory; give the file to write, e.g. {path}/team.yaml")
    if not path.name.endswith(SUFFIXES):
        raise UsageError(f"{path}: a template file name ends in .yaml or .yml")


def _created_dirs(folder: Path) -> list[Path]:
    """The directories `mkdir(parents=True)` would create, deepest first."""
    missing: list[Path] = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing


def _stage(target: Path, text: str) -> Path:
    """Write `text` to a temporary file beside `target`, flushed to disk."""
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)


def init_template(
    path: str | Path,
    *,
    base: str = DEFAULT_BASE,
    name: str | None = None,
    cases: bool = False,
    force: bool = False,
    schema: str | None = None,
    stack: str = "python",
) -> Scaffold:
    """Write a team template at `path` (and its case file) for ``stack``'s pack; refuse to
    overwrite unless forced.

    Both files are staged beside their targets, checked with the real loader, and only then
    renamed into place, so an error leaves no partial file (and no directory it created).
    """
    target = Path(path).expanduser()
    _check(target, base)
    name = name if name is not None else default_name(target, base)
    if not NAME.match(name) or len(name) > 80:
        raise UsageError(
            f"--name {name!r}: use up to 80 letters, digits, '-', '_' or '.', "
            "starting with a letter or digit"
        )
    case_file = cases_path(target) if cases else None
    if not force:
        for existing in (target, case_file):
            if existing is not None and existing.exists():
                raise UsageError(f"{existing} already exists; pass --force to overwrite it")

    ref = schema_ref(target, schema)
    with slots.chosen(StackChoice(stack, "looprun init", given=True)):
        parent = parent_of(base)
        _check_available(base, stack)
    text = render_template(name, base, ref, target.name, parent, stack)
    case_text = render_cases(target.name, base, parent) if case_file else None

    made = _created_dirs(target.parent.absolute())
    staged: list[tuple[Path, Path]] = []
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        staged.append((_stage(target, text), target))
        if case_file is not None and case_text is not None:
            staged.append((_stage(case_file, case_text), case_file))
        with slots.chosen(StackChoice(stack, "looprun init", given=True)):
            _verify(staged[0][0], target)
        for tmp, final in staged:
            os.replace(tmp, final)
    except OSError as exc:
        _cleanup(staged, made)
        raise LooprunError(f"cannot write {target}: {exc.strerror or exc}") from exc
    except BaseException:
        _cleanup(staged, made)
        raise
    return Scaffold(template=target, cases=case_file, schema=ref)


def _check_available(base: str, stack: str) -> None:
    """A built-in whose check cannot run on ``stack`` (test_backfill's coverage on a stack
    with no coverage tool) would stop every run: say so now, exit 2."""
    template = load_template(base)
    for spec in template.observe.values():
        if spec.unavailable:
            raise UsageError(
                f"{spec.unavailable}; --extends {base} cannot be used with --stack {stack}"
            )


def _verify(staged: Path, target: Path) -> None:
    """The staged template must load; a failure here is a bug in looprun, not the user's."""
    try:
        load_template(staged)
    except TemplateError as exc:
        detail = str(exc).replace(str(staged), str(target))
        raise LooprunError(f"the generated template does not validate (a bug):\n{detail}") from exc


def _cleanup(staged: list[tuple[Path, Path]], made: list[Path]) -> None:
    for tmp, _ in staged:
        tmp.unlink(missing_ok=True)
    for folder in made:  # deepest first; only the directories this call created
        try:
            folder.rmdir()
        except OSError:
            break
