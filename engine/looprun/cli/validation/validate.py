"""``looprun validate`` over many files: ``path: OK`` or each problem as
``path:line:col: message``, annotated for GitHub Actions, skipping files the cache knows
as valid.

The template language (PyYAML, Jinja2, the schema; some 0.4 s to import) is loaded only
when a file is checked in full: a pre-commit hook over files the cache knows needs none
of it, so ``checked`` imports ``validation.check`` when it first needs it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from looprun.cli.validation.files import expand, is_looprun_file
from looprun.cli.validation.github import annotation, one_line
from looprun.errors import EXIT_DONE, EXIT_INVALID, Location, Problem
from looprun.template.deps import recording
from looprun.template.sharing.resolver import Resolver, session

if TYPE_CHECKING:
    from looprun.template.valid_cache import ValidCache

Echo = Callable[..., None]


def checked(ref: str, cache: ValidCache | None) -> list[Problem]:
    """check_file, skipped when ``cache`` knows the file as valid and nothing it read has
    changed; a file found valid is remembered there (problems never are)."""
    if cache is not None and Path(ref).is_file() and cache.known_valid(ref):
        return []
    from looprun.cli.validation.check import check_file  # the language, only when needed

    if cache is None or not Path(ref).is_file():
        return check_file(ref)
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
        with session() as resolvers:
            problems = checked(ref, cache)
        if not problems:
            if not quiet:
                echo(f"{ref}: OK")
                for line in provenance(resolvers.values()):
                    echo(f"  {line}")
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


def provenance(resolvers: Iterable[Resolver]) -> list[str]:
    """Where each remote part of a template came from: file, reference, commit."""
    return [
        f"{name} from {part.key} at {part.commit}"
        for r in resolvers
        for part in r.parts.values()
        for name in part.files
    ]


def _order(problem: Problem) -> tuple[str, int, int]:
    loc: Location = problem.location
    return (loc.file, loc.line, loc.col)
