"""Which stack a repository is: its marker files at the root, else its source files.

A repository with two stacks (a monorepo) is not guessed at: the choice is the user's,
named in the message with how to make it. A repository with none says which packs exist.
"""

from __future__ import annotations

import os
from pathlib import Path

from looprun.checks import stacks
from looprun.template.slots import StackChoice

_CHOOSE = "choose one with --set stack=NAME, or include: [observers/NAME.yaml] in a template"


def detect(workdir: Path) -> StackChoice:
    """The stack of the repository at ``workdir``, or why none can be chosen."""
    known = [stacks.get(name) for name in stacks.names()]
    found = []
    for stack in known:
        marks = [m for m in stack.markers if (workdir / m).is_file()]
        if marks:
            found.append((stack.name, marks))
    if len(found) == 1:
        name, marks = found[0]
        return StackChoice(name, f"{', '.join(marks)} at the repository's root")
    if len(found) > 1:
        listed = "; ".join(f"{name} ({', '.join(marks)})" for name, marks in found)
        return StackChoice(None, f"this repository has more than one stack: {listed}; {_CHOOSE}")
    by_source = _by_sources(workdir, known)
    if len(by_source) == 1:
        name, example = by_source[0]
        return StackChoice(name, f"no marker file; its source files are {name} ({example})")
    markers = ", ".join(m for s in known for m in s.markers)
    if by_source:
        listed = ", ".join(name for name, _ in by_source)
        return StackChoice(
            None,
            f"no marker file at {workdir}, and source files of several stacks ({listed}); "
            f"{_CHOOSE}",
        )
    return StackChoice(
        None,
        f"no stack recognised at {workdir}: none of {markers} is at its root; {_CHOOSE} "
        f"(stacks: {', '.join(stacks.names())})",
    )


def _by_sources(workdir: Path, known: list[stacks.Stack]) -> list[tuple[str, str]]:
    """Stacks whose source files are at the root or one directory down (hidden ones and
    dependency directories skipped): (name, one such file)."""
    seen: dict[str, str] = {}
    for here in _shallow_dirs(workdir):
        try:
            names = sorted(os.listdir(here))
        except OSError:
            continue
        for entry in names:
            for stack in known:
                if stack.name not in seen and entry.endswith(stack.sources or ("\0",)):
                    seen[stack.name] = str((here / entry).relative_to(workdir))
    return sorted(seen.items())


def _shallow_dirs(workdir: Path) -> list[Path]:
    out = [workdir]
    try:
        entries = sorted(os.scandir(workdir), key=lambda e: e.name)
    except OSError:
        return out
    skip = {"node_modules", "target", "vendor", "build", "dist"}
    for entry in entries:
        if (
            entry.is_dir(follow_symlinks=False)
            and not entry.name.startswith(".")
            and (entry.name not in skip)
        ):
            out.append(Path(entry.path))
    return out


def given(name: str) -> StackChoice:
    """A stack named with ``--set stack=NAME`` (checked when its pack is composed)."""
    return StackChoice(name, "--set stack=" + name, given=True)


def ambient(cwd: Path) -> StackChoice:
    """The stack commands that load a template outside a run (validate, explain, test,
    init, diff) compose in: the current directory's, else python, said in ``why``. A
    run chooses its own, from its working directory, and refuses to guess."""
    found = detect(cwd)
    if found.name is not None:
        return found
    return StackChoice("python", f"the default: {found.why.split(';')[0]}")
