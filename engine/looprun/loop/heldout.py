"""Held-out variants: once the task that reproduces a bug is done, a separate model call
(the holdout role, in a context of its own) writes tests of the same behaviour with other
inputs, which the acting model never sees.

Read-only tests stop a model from weakening them, not from special-casing their inputs;
variants it cannot read do. They are kept in the run's private store (a port: the loop
does no I/O), run once on the tree the task left, where only those that fail as its tests
fail are kept - so a variant that is wrong about the behaviour can never block an honest
fix - and then run by their observer as a held-out check before the next task can end.

Whatever keeps them from running (turned off, no answer, a failed call, nothing to hide
them from the commands, none kept) is a ``heldout.status`` the template's rules decide on
and a recorded warning, never a silent pass. Nothing of the answer is journaled: the
exchange records the request and the usage, and the reply only as its size.
"""

from __future__ import annotations

import dataclasses
import posixpath
import re
from collections.abc import Mapping, Sequence
from typing import Any

from looprun.errors import ExpressionError, LooprunError
from looprun.loop import limits as caps
from looprun.loop.core import Loop
from looprun.loop.exchanges import record_reply
from looprun.loop.plan import PlannedTask
from looprun.models.base import Message, Reply
from looprun.template.model import ObserverSpec

ROLE = "holdout"
_SYSTEM = (
    "You write held-out tests for a bug report. Another engineer fixes the bug and never "
    "sees your tests; they check that the fix holds for inputs other than the ones in the "
    "visible test. Answer with one code block holding the tests, and nothing else."
)
_MAX_TEST_CHARS = 20_000  # of each reproducing test file shown to the holdout role
_FENCE = re.compile(r"```[ \t]*[\w+-]*[ \t]*\n(.*?)```", re.DOTALL)


def variant_specs(loop: Loop, task: PlannedTask) -> list[ObserverSpec]:
    """The observers whose variants vary the tests ``task`` made fail."""
    ctx = loop.goal_context()
    return [
        spec
        for spec in loop.template.observe.values()
        if spec.holdout is not None
        and spec.holdout.variants is not None
        and spec.holdout.variants.of.render(ctx).strip() == task.id
    ]


def ask_for_variants(loop: Loop, task: PlannedTask, context: Mapping[str, Any]) -> None:
    """Ask for, store and triage the variants of ``task``'s tests; ``context`` holds the
    facts the task was done on. Records ``heldout`` in the state whatever happens."""
    for spec in variant_specs(loop, task):
        record = _variants(loop, spec, context)
        loop.state.heldout = record
        _report(loop, spec.name, record)


def _variants(loop: Loop, spec: ObserverSpec, context: Mapping[str, Any]) -> dict[str, Any]:
    assert spec.holdout is not None and spec.holdout.variants is not None
    v = spec.holdout.variants
    try:
        count = int(str(v.count.render(context)).strip() or 0)
    except (ValueError, ExpressionError) as exc:
        return _record("failed", f"count is not a number: {exc}")
    if count <= 0:
        return _record("off", "turned off (count 0)")
    store = loop.ports.variants
    why = "this run has no private store for them" if store is None else store.unavailable()
    if store is None or why:
        return _record("unhidden", why, asked=count)
    failing, expected = _reproduced(loop, spec, context)
    if not failing:
        return _record("failed", "the task made no test fail, so there is nothing to vary")
    tests = _test_files(loop, failing, v.test_pattern)
    if v.beside and not tests:
        return _record("failed", "the task's tests are in no file it changed", asked=count)
    ctx = {**context, "count": count, "file": v.file, "tests": tests}
    ctx.update(failing=failing, exceptions=_shown(expected))
    try:
        prompt = v.prompt.render(ctx).strip()
    except ExpressionError as exc:
        return _record("failed", f"the prompt cannot be rendered: {exc}", asked=count)
    messages = [Message("system", _SYSTEM), Message("user", prompt)]
    ports = loop.ports
    model = ports.holdout_model or ports.plan_model or ports.model
    try:
        cap = caps.output_cap(loop.limits, loop.spent(), caps.rough_estimate(messages))
        reply = model.complete(
            messages,
            [],
            role=ROLE,
            timeout_s=caps.remaining_time(loop.limits, loop.spent()),
            max_output_tokens=cap,
        )
    except caps.CannotFund as exc:
        return _record("failed", f"the budget cannot fund the call: {exc.stop.reason}", asked=count)
    except Exception as exc:  # a model's failure is a status, never the run's end
        return _record("failed", f"the call failed: {type(exc).__name__}: {exc}", asked=count)
    tokens = reply.usage.prompt_tokens + reply.usage.completion_tokens
    code = extract_code(reply.message.content, v.test_pattern)
    _account(loop, reply, messages, len(code))
    if not code:
        return _record("unanswered", "the answer held no tests", asked=count, tokens=tokens)
    base, ws = loop.state.base, ports.workspace
    before = ws.snapshot()
    # beside: in the directory of the task's first test file (its package, for Go)
    dest = (
        posixpath.join(posixpath.dirname(tests[0]["path"]), spec.holdout.dest) if v.beside else ""
    )
    try:
        store.write(spec.name, v.file, code, dest)
        left = caps.remaining_time(loop.limits, loop.spent())
        deadline = None if left is None else ports.clock.monotonic() + left
        triage = store.triage(
            spec, context, expected=sorted(expected), deadline=deadline, base=base
        )
    except OSError as exc:
        return _record("failed", f"cannot keep them: {exc.strerror}", asked=count, tokens=tokens)
    except LooprunError as exc:
        return _record("failed", f"they could not run: {exc}", asked=count, tokens=tokens)
    finally:
        if ws.snapshot() != before:
            # what ran beside them wrote to the tree (a copy of them): it never stays
            ws.restore(before)
    counts = {"asked": count, "written": triage.tests, "kept": triage.kept, "tokens": tokens}
    if triage.error:
        return _record("failed", f"they could not run: {triage.error}", **counts)
    if triage.kept == 0:
        why = (
            f"none of the {triage.tests} failed on the tree before the fix with "
            f"{' or '.join(_shown(expected))}, as the reproducing test does"
        )
        return _record("none_kept", why, **counts)
    return _record("kept", "", **counts)


def _reproduced(
    loop: Loop, spec: ObserverSpec, context: Mapping[str, Any]
) -> tuple[list[str], set[str]]:
    """The ids the task made fail and their exception types, from every observer of the
    variants' parser (the suite's) that is not itself held out."""
    failing: list[str] = []
    types: set[str] = set()
    base = context.get("baseline") or {}
    for name, other in loop.template.observe.items():
        if other.holdout is not None or other.parser != spec.parser:
            continue
        ids = [i for i in (base.get(name) or {}).get("newly_failing") or () if isinstance(i, str)]
        found = (loop.state.last_facts.get(name) or {}).get("failure_types") or {}
        failing += [i for i in ids if i not in failing]
        if isinstance(found, Mapping):
            # '': a plain failure, no exception or panic (Go's t.Error) - a type of its own
            types |= {str(found.get(i) or "") for i in ids if i in found}
    return failing, types or {"AssertionError"}


def _shown(types: set[str]) -> list[str]:
    """The failure types as the prompt and the warnings name them."""
    return sorted(t or "a plain test failure" for t in types)


def _test_files(
    loop: Loop, failing: Sequence[str], a_test: re.Pattern[str]
) -> list[dict[str, str]]:
    """The files the task added or changed that hold its failing tests, with their text;
    ``a_test``: what a test looks like in their language (the pack says)."""
    st, ws = loop.state, loop.ports.workspace
    # a pytest id starts with its file (``tests/test_x.py::test_y``); a Go id with its
    # package's directory (``pkg/TestY``), where a changed file holding a test is one
    wanted = {i.split("::", 1)[0] for i in failing if "::" in i}
    dirs = {posixpath.dirname(i) for i in failing if "::" not in i}
    changes = ws.file_changes(st.task_start, st.current, contents=True)
    out = [
        {"path": c.path, "text": (c.new or "")[:_MAX_TEST_CHARS]}
        for c in changes
        if c.status != "D"
        and c.new is not None
        and (c.path in wanted or (posixpath.dirname(c.path) in dirs and a_test.search(c.new)))
    ]
    if out:
        return out
    # ids that name neither (a Java id names its class: ``pkg.FooTest.method``): the files
    # the task added, those holding a test first (the first one is where ``beside`` goes)
    added = [c for c in changes if c.status == "A" and c.new is not None]
    added.sort(key=lambda c: a_test.search(c.new or "") is None)
    return [{"path": c.path, "text": (c.new or "")[:_MAX_TEST_CHARS]} for c in added]


def extract_code(text: str, a_test: re.Pattern[str]) -> str:
    """The answer's tests: its fenced code blocks joined, or the whole answer when it
    has none and reads as code; '' when ``a_test`` (what a test looks like in the pack's
    language) finds no test in it."""
    blocks = [b.strip() for b in _FENCE.findall(text) if b.strip()]
    code = "\n\n\n".join(blocks) if blocks else text.strip()
    return code + "\n" if a_test.search(code) else ""


def _account(loop: Loop, reply: Reply, messages: list[Message], size: int) -> None:
    """Charge the call and journal it without its answer: the journal is readable by the
    run's commands, and the variants' inputs must stay out of their reach."""
    hidden = Message("assistant", f"(held-out variants: {size} characters, kept privately)")
    record_reply(
        loop.ports,
        loop.state,
        dataclasses.replace(reply, message=hidden),
        messages,
        iteration=loop.state.iterations,
        role=ROLE,
        model=reply.model,
    )


def _record(status: str, reason: str, **counts: int) -> dict[str, Any]:
    out: dict[str, Any] = {"status": status, "reason": reason}
    out.update({k: counts.get(k, 0) for k in ("asked", "written", "kept", "tokens")})
    return out


def _report(loop: Loop, name: str, record: Mapping[str, Any]) -> None:
    """One progress line, and a journaled warning whenever the variants will not run."""
    status = record["status"]
    if status == "kept":
        loop.ports.report(
            f"held-out variants ({name}): {record['kept']} of {record['written']} kept "
            f"({record['tokens']} tokens)"
        )
        loop.ports.journal.event("heldout", observer=name, **record)
        return
    message = f"held-out variants ({name}) will not run: {status}: {record['reason']}"
    if status != "off":
        loop.ports.report(f"warning: {message}")
    loop.ports.journal.event("heldout", observer=name, **record)
    if status != "off":
        loop.ports.journal.event("warning", message=message)
