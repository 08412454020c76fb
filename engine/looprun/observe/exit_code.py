"""Just the command's status: ok when it exited 0 in time; the output tail is the feedback."""

from __future__ import annotations

from looprun.data.freeze import freeze
from looprun.observe import declared_facts
from looprun.observe.base import Observation, ParseInput
from looprun.observe.feedback import tail
from looprun.observe.normalise import failure_signature
from looprun.observe.reports import max_feedback, unusable

NAME = "exit_code"
EMPTY_FACTS = declared_facts.EXIT_CODE
FACTS = frozenset(EMPTY_FACTS)


class ExitCodeParser:
    """ok = the command exited 0 and did not time out."""

    name = NAME
    facts = FACTS
    empty_facts = EMPTY_FACTS

    def parse(self, data: ParseInput) -> Observation:
        if data.exit_code is None and not data.timed_out:
            return unusable(
                NAME, data, "no command ran (the exit_code parser needs `run:`)", EMPTY_FACTS
            )
        limit = max_feedback(data)
        output_tail = tail(data.output or "", limit - 100)
        ok = data.exit_code == 0 and not data.timed_out
        status = "timed out" if data.timed_out else f"exited {data.exit_code}"
        feedback = f"command {status}" + (f"\n{output_tail}" if output_tail and not ok else "")
        last = output_tail.strip().splitlines()[-1:] if output_tail.strip() else []
        return Observation(
            parser=NAME,
            ok=ok,
            exit_code=data.exit_code,
            counts=freeze({}),
            signature=failure_signature([] if ok else [(status, last[0] if last else "")]),
            feedback=feedback,
            facts=freeze({"output_tail": output_tail, "timed_out": data.timed_out}),
        )
