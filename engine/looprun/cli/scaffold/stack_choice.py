"""Which stack `looprun init` writes a starter for: ``--stack NAME``, else the one the
current directory's marker files name, else python, said first. Two stacks are never
guessed at: the user chooses, as a run would make them."""

from __future__ import annotations

from pathlib import Path

from looprun.checks import stacks
from looprun.checks.stacks.detect import detect
from looprun.data.value import valueclass
from looprun.errors import UsageError
from looprun.template.slots import StackChoice


@valueclass
class InitStack:
    choice: StackChoice
    note: str | None  # what to say first when nothing chose it (the python default)


def init_stack(cwd: Path, given: str | None) -> InitStack:
    """The stack for a starter template written from ``cwd``; UsageError (exit 2) for an
    unknown ``--stack`` or a directory with more than one stack."""
    known = stacks.names()
    if given is not None:
        if given not in known:
            raise UsageError(f"--stack {given!r}: not a stack; the stacks are: {', '.join(known)}")
        return InitStack(StackChoice(given, f"--stack {given}", given=True), None)
    found = detect(cwd)
    if found.name is not None:
        return InitStack(found, None)
    if "no stack recognised" not in found.why:  # two stacks' marker or source files
        marked = [
            f"{s} ({', '.join(m for m in stacks.get(s).markers if (cwd / m).is_file())})"
            for s in known
            if any((cwd / m).is_file() for m in stacks.get(s).markers)
        ]
        what = (
            f"{cwd} has more than one stack: {', '.join(marked)}"
            if len(marked) > 1
            else found.why.split(";")[0]
        )
        raise UsageError(f"{what}; choose the starter's stack with --stack NAME")
    markers = ", ".join(m for s in known for m in stacks.get(s).markers)
    note = (
        f"no stack recognised in {cwd} (none of {markers}): writing a python template; "
        "choose another with --stack NAME"
    )
    return InitStack(StackChoice("python", "the default: no stack recognised"), note)
