"""``looprun diff``: what a template change does, for a reviewer and for a pull request."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import click

from looprun.cli.cases.compare import changed_cases
from looprun.errors import (
    EXIT_DONE,
    Location,
    Problem,
    TemplateError,
    UsageError,
)
from looprun.template.compose import confined_to
from looprun.template.diff import TemplateDiff, diff_templates, render
from looprun.template.loader import load_template
from looprun.template.model import Template
from looprun.workspace.git import Git, GitError

_PATHS = "looprun.diff.paths"
_TEMPLATE_SUFFIXES = (".yaml", ".yml")
EXIT_CHANGED = 1  # documented: something changes what the template does


class _DiffCommand(click.Command):
    """Keeps what follows ``--`` apart (click drops the ``--`` itself), so ``diff A B``
    (two files) and ``diff REV -- PATH`` (a revision) stay distinguishable."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if "--" in args:
            at = args.index("--")
            ctx.meta[_PATHS] = args[at + 1 :]
            args = args[:at]
        return super().parse_args(ctx, args)


@click.command("diff", cls=_DiffCommand)
@click.argument("refs", nargs=-1, metavar="OLD NEW | REV [REV] -- PATH...")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "markdown", "json"]),
    default="text",
    show_default=True,
    help="text: in words; markdown: for a pull-request comment; json: for tools.",
)
@click.option(
    "--cases",
    "case_files",
    multiple=True,
    metavar="FILE",
    help="A `looprun test` case file: say which cases the two templates decide "
    "differently (repeatable).",
)
@click.pass_context
def command(
    ctx: click.Context, refs: tuple[str, ...], fmt: str, case_files: tuple[str, ...]
) -> None:
    """Say what a template change does: rules, limits, policy, observers, cases.

    \b
    looprun diff OLD.yaml NEW.yaml            two files
    looprun diff main -- templates/team.yaml  OLD from git at main, NEW the file
    looprun diff BASE HEAD -- PATH...         both sides from git
    Loosened limits and policy come first. Exit 0 when nothing changes what the
    template does, 1 when something does, 2 for an invalid template or usage.
    """
    paths = ctx.meta.get(_PATHS)
    if paths is None:
        if len(refs) != 2:
            raise UsageError(
                "looprun diff: give two template files (OLD NEW), or a revision and paths "
                "(REV -- PATH...)"
            )
        old, new = _load(refs[0]), _load(refs[1])
        diffs = [_diff(old, new, refs[0], refs[1], case_files)]
    else:
        if not 1 <= len(refs) <= 2 or not paths:
            raise UsageError("looprun diff: give one or two revisions, then -- and the paths")
        if case_files and len(paths) > 1:
            raise UsageError("looprun diff: --cases is for one template; give one path")
        diffs = _revision_diffs(refs, paths, case_files)
    click.echo(render(diffs, fmt))
    sys.exit(EXIT_CHANGED if any(d.changed for d in diffs) else EXIT_DONE)


def _load(ref: str | Path, label: str | None = None, root: Path | None = None) -> Template:
    """Load a template; problems in files read from a revision name ``REV:path``."""
    try:
        return load_template(ref)
    except TemplateError as exc:
        if root is None or label is None:
            raise
        raise TemplateError([_relabel(p, root, label) for p in exc.problems]) from None


def _relabel(problem: Problem, root: Path, rev: str) -> Problem:
    file = problem.location.file
    try:
        rel = Path(file).resolve().relative_to(root.resolve()).as_posix()
    except (ValueError, OSError):
        return problem
    loc = problem.location
    return Problem(Location(f"{rev}:{rel}", loc.line, loc.col), problem.message)


def _diff(
    old: Template | None,
    new: Template | None,
    old_label: str,
    new_label: str,
    case_files: tuple[str, ...],
) -> TemplateDiff:
    cases = changed_cases(case_files, old, new) if case_files and old and new else []
    return diff_templates(old, new, old_label, new_label, cases)


def _revision_diffs(
    revs: tuple[str, ...], paths: list[str], case_files: tuple[str, ...]
) -> list[TemplateDiff]:
    cwd = Path.cwd()
    try:
        top = Path(Git(cwd).run("rev-parse", "--show-toplevel").strip())
        git = Git(top).pinned()  # found once; every later call names this repository
    except GitError as exc:
        raise UsageError(f"looprun diff: {cwd} is not in a git repository ({exc})") from None
    rels = []
    for p in paths:
        try:
            rels.append((p, (cwd / p).resolve().relative_to(top.resolve()).as_posix()))
        except ValueError:
            raise UsageError(f"looprun diff: {p} is outside the repository {top}") from None
    with tempfile.TemporaryDirectory(prefix="looprun-diff-") as tmp:
        sides: list[tuple[str, Path | None, frozenset[str]]] = []
        for i, rev in enumerate(revs):
            extracted = Path(tmp) / str(i)
            links = _extract(git, rev, extracted)
            sides.append((rev, extracted, links))
        if len(revs) == 1:
            sides.append(("", None, frozenset()))  # NEW: the files as they are now
        diffs = []
        for shown, rel in rels:
            loaded: list[tuple[Template | None, str]] = []
            for rev, root, links in sides:
                if root is None:
                    here = cwd / shown
                    loaded.append((_load(here) if here.exists() else None, shown))
                    continue
                label = f"{rev}:{rel}"
                where = root / rel
                with confined_to(root, links):  # the revision's own objects, nothing else
                    template = _load(where, rev, root) if where.is_file() else None
                loaded.append((template, label))
            (old, old_label), (new, new_label) = loaded
            if old is None and new is None:
                raise TemplateError(
                    [Problem(Location(shown, 1, 1), "no such template on either side of the diff")]
                )
            diffs.append(_diff(old, new, old_label, new_label, case_files))
        return diffs


def _extract(git: Git, rev: str, root: Path) -> frozenset[str]:
    """The YAML files of ``rev`` under ``root``, read as git objects: what ``extends`` and
    ``include`` named at that revision. Links are not followed, and written nowhere: a
    symbolic link in the revision is not a file here (the repository's content is data);
    their paths are returned, so a reference through one is named as such."""
    commit = git.run("rev-parse", "--verify", "-q", f"{rev}^{{commit}}", check=False).strip()
    if not commit:
        raise UsageError(f"looprun diff: no commit '{rev}' in the repository {git.workdir}")
    listing = git.run_bytes("ls-tree", "-r", "-z", "--full-tree", commit)
    blobs: list[tuple[str, str]] = []
    links: set[str] = set()
    for entry in listing.split(b"\0"):
        if not entry:
            continue
        meta, _, raw_path = entry.partition(b"\t")
        mode, kind, oid = meta.decode().split()
        path = raw_path.decode("utf-8", "surrogateescape")
        parts = path.split("/")
        if mode == "120000":
            links.add(path)
        if kind != "blob" or mode not in ("100644", "100755"):
            continue
        if not path.endswith(_TEMPLATE_SUFFIXES) or any(p in ("", ".", "..") for p in parts):
            continue
        blobs.append((path, oid))
    if not blobs:
        root.mkdir(parents=True)
        return frozenset(links)
    for (path, _), (_, body) in zip(blobs, git.objects([o for _, o in blobs]), strict=True):
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(body)
    return frozenset(links)
