"""One test suite's observation, whichever runner produced it.

Every test parser (junit's dialects, go test, cargo test, node's runner, Surefire) ends the
same way: the counts, the failing and passing ids, each failure's type and files, whether
the runner's channels agreed, and feedback that names the failures first and says why a
run that shows none is still not a pass. The facts are exactly ``declared_facts.JUNIT``,
so the templates read them alike on every stack.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from looprun.data.freeze import freeze
from looprun.observe.base import Item, Observation, ParseInput
from looprun.observe.feedback import render, strip_ansi, tail
from looprun.observe.reports import max_feedback, signature_of


def suite_observation(
    parser: str,
    data: ParseInput,
    *,
    header: str,
    counts: Mapping[str, int],
    items: Sequence[Item],
    failing: Sequence[str],
    passing: Sequence[str],
    types: Mapping[str, str],
    files: Mapping[str, Sequence[str]],
    notes: Sequence[str],
    ok: bool,
    tampering: str,
    flaky: Sequence[str] = (),
    output: str | None = None,
) -> Observation:
    """The observation of a suite: ``notes`` say why a run with no failure is not a pass
    (the tail of the command's ``output`` follows them then); ``tampering`` is why the
    runner's channels disagree ('' when they agree)."""
    bad = counts.get("failed", 0) + counts.get("errors", 0)
    limit = max_feedback(data)
    footer = "\n".join(notes)
    text = data.output if output is None else output
    if footer and text and bad == 0:
        footer += "\n" + tail(strip_ansi(text), limit // 2)
    feedback = render(
        header, list(items), max_bytes=limit, footer=footer, noun="more failing", group=True
    )
    facts = {
        **counts,
        "failing": list(failing),
        "passing": list(passing),
        "flaky": list(flaky),
        "failure_types": dict(types),
        "exercised": {},
        "self_raised": {},
        "failure_files": {k: list(v) for k, v in files.items()},
        "consistent": not tampering,
        "tampering": tampering,
    }
    return Observation(
        parser=parser,
        ok=ok,
        exit_code=data.exit_code,
        counts=freeze(dict(counts)),
        items=tuple(items),
        signature=signature_of(list(items)),
        feedback=feedback,
        facts=freeze(facts),
        error=None,
    )


def summary_line(counts: Mapping[str, int]) -> str:
    """``2 passed, 1 failed`` (passed always shown, the rest when not zero)."""
    return ", ".join(f"{v} {k}" for k, v in counts.items() if k != "tests" and (v or k == "passed"))
