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

from looprun.data.value import valueclass

SLOT = re.compile(r"\{\{\s*inputs\.stack\s*\}\}")


@valueclass
class StackChoice:
    """The stack a load composes in, or why none could be chosen (``name`` None)."""

    name: str | None
    why: str  # how it was chosen ("go.mod at the repository's root"), or the problem
    # chosen by the user (--set stack=, init --stack) or recorded by the run: a template's
    # own include of a pack never overrides it (a detected or default choice it does)
    given: bool = False


class Chosen:
    """What a load composed in: the choice it began with, or the one a template pinned by
    including a stack's pack itself (``pin``), read by the caller after the load."""

    def __init__(self, choice: StackChoice | None) -> None:
        self.choice = choice

    def pin(self, choice: StackChoice) -> None:
        self.choice = choice


# a load nobody chose a stack for (a library caller, a test): the pack looprun began with;
# a run always chooses, from the repository, and refuses to guess
DEFAULT = StackChoice("python", "the default for a load outside a run")
_CHOICE: ContextVar[StackChoice | None] = ContextVar("looprun_stack", default=None)
_OUTCOME: ContextVar[Chosen | None] = ContextVar("looprun_stack_outcome", default=None)
# a pack named by an include: `observers/go.yaml`, `looprun:observers/go`
PACK_REF = re.compile(r"^(?:looprun:)?observers/([a-z][a-z0-9_]*)(?:\.ya?ml)?$")


@contextlib.contextmanager
def chosen(choice: StackChoice | None) -> Iterator[Chosen]:
    """Load templates with ``choice`` as the stack (None: keep the current one); what the
    load composed in is read from the yielded :class:`Chosen` afterwards."""
    outcome = Chosen(choice or _CHOICE.get())
    token = _CHOICE.set(choice) if choice is not None else None
    made = _OUTCOME.set(outcome)
    try:
        yield outcome
    finally:
        _OUTCOME.reset(made)
        if token is not None:
            _CHOICE.reset(token)


@contextlib.contextmanager
def pinned_by(ref: str, name: str) -> Iterator[None]:
    """While a template that includes stack ``name``'s pack (``ref``) composes its parents:
    that stack, unless the user gave one (then the include is just a fragment)."""
    now = _CHOICE.get() or DEFAULT
    if now.given:
        yield
        return
    pin = StackChoice(name, f"the template includes {ref}")
    token = _CHOICE.set(pin)
    outcome = _OUTCOME.get()
    if outcome is not None:
        outcome.pin(pin)
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
