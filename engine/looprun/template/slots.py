"""The one value a template's composition may depend on: the repository's stack.

Built-in templates name no stack: they include ``observers/{{ inputs.stack }}.yaml``, and
the stack is chosen before the template is loaded (detected from the repository's marker
files, or given with ``--set stack=NAME``) and recorded with the run, so a resume and the
run's sub-loops compose the same pack. Only that reference form is rendered, and only with
that value: a reference is never a general template.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass

SLOT = re.compile(r"\{\{\s*inputs\.stack\s*\}\}")


@dataclass(frozen=True)
class StackChoice:
    """The stack a load composes in, or why none could be chosen (``name`` None)."""

    name: str | None
    why: str  # how it was chosen ("go.mod at the repository's root"), or the problem


# a load nobody chose a stack for (a library caller, a test): the pack looprun began with;
# a run always chooses, from the repository, and refuses to guess
DEFAULT = StackChoice("python", "the default for a load outside a run")
_CHOICE: ContextVar[StackChoice | None] = ContextVar("looprun_stack", default=None)


@contextlib.contextmanager
def chosen(choice: StackChoice | None) -> Iterator[None]:
    """Load templates with ``choice`` as the stack (None: keep the current one)."""
    if choice is None:
        yield
        return
    token = _CHOICE.set(choice)
    try:
        yield
    finally:
        _CHOICE.reset(token)


def current() -> StackChoice:
    return _CHOICE.get() or DEFAULT


def render(ref: str) -> tuple[str | None, str]:
    """``ref`` with the stack put in, or (None, why it cannot be) when a slot is there and
    no stack is chosen; a reference with no slot comes back as it is."""
    if "{{" not in ref:
        return ref, ""
    if not SLOT.search(ref) or SLOT.sub("", ref).count("{{"):
        return None, "a reference may hold only `{{ inputs.stack }}`, nothing else in braces"
    choice = _CHOICE.get() or DEFAULT
    if choice.name is None:
        return None, choice.why
    return SLOT.sub(choice.name, ref), ""
